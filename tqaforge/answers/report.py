"""How good the answering agents are, before people spend time on them: ``tqaforge answers report``.

Per method and subtype (and over all subtypes):

- **parsed**: the share of candidates with an answer or a program (not ``unparsed``);
- **executed** (PoT and chart code): the share of programs that ran to the end in the sandbox
  (TableBench's ECR@1);
- **consistent** (vote rows): the share of voted questions whose candidates agreed;
- **gold**: on questions that have a gold answer (imported from TableBench or FREB-TQA, or verified
  by people), how often the method's candidates -- or the consistent vote -- equal it, under the one
  comparator (:func:`tqaforge.tables.matching.same_answer` with the subtype's rule). A candidate
  without an answer counts as a miss; ``gold n`` says on how many it was measured.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlmodel import col, select

from tqaforge.answers.agents import CHART_SUBTYPE, chart_type_for
from tqaforge.answers.annotate import GOLD_STATUSES, VOTE_METHOD
from tqaforge.queries import trusted_answers
from tqaforge.sandbox.charts import comparable_values, parse_y_references
from tqaforge.schemas.enums import AnswerStatus, CandidateStatus
from tqaforge.schemas.records import Answer, AnswerCandidate, Question
from tqaforge.store import Workspace
from tqaforge.tables.matching import answer_rule, same_answer

ALL = "(all)"


@dataclass
class ReportRow:
    """One (subtype, method) cell of the report; ``method`` is ``vote`` for the vote's row."""

    subtype: str
    method: str
    candidates: int = 0
    parsed: int = 0
    programs: int = 0
    executed: int = 0
    voted: int = 0
    consistent: int = 0
    gold_n: int = 0
    gold_agree: int = 0

    @staticmethod
    def _rate(part: int, whole: int) -> float | None:
        return round(part / whole, 4) if whole else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "subtype": self.subtype, "method": self.method, "candidates": self.candidates,
            "parse_rate": self._rate(self.parsed, self.candidates), "programs": self.programs,
            "execution_rate": self._rate(self.executed, self.programs), "voted": self.voted,
            "consistency_rate": self._rate(self.consistent, self.voted), "gold_n": self.gold_n,
            "gold_agreement": self._rate(self.gold_agree, self.gold_n),
        }


@dataclass
class AnswersReport:
    """The report's rows, subtype by subtype (``(all)`` last); ``lines()`` and ``as_dict()`` render it."""

    rows: list[ReportRow] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"rows": [r.as_dict() for r in self.rows]}

    def lines(self) -> list[str]:
        if not self.rows:
            return ["no answer candidates yet: run tqaforge generate answers"]
        head = ("subtype", "method", "n", "parsed", "executed", "consistent", "gold", "gold n")
        table = [head]
        for r in self.rows:
            d = r.as_dict()
            table.append((
                r.subtype, r.method, str(r.candidates if r.method != VOTE_METHOD else r.voted),
                _pct(d["parse_rate"]), _pct(d["execution_rate"]), _pct(d["consistency_rate"]),
                _pct(d["gold_agreement"]), str(r.gold_n),
            ))
        widths = [max(len(row[i]) for row in table) for i in range(len(head))]
        return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in table]


def _pct(rate: float | None) -> str:
    return "-" if rate is None else f"{100 * rate:.1f}%"


def answers_report(ws: Workspace) -> AnswersReport:
    """The report over every candidate and vote in the workspace (module docs)."""
    with ws.session() as s:
        candidates = s.exec(select(AnswerCandidate)).all()
        votes = s.exec(select(Answer).where(Answer.method == VOTE_METHOD)).all()
        qids = sorted({c.question_id for c in candidates} | {v.question_id for v in votes})
        subtypes: dict[str, str] = {}
        charts: dict[str, str | None] = {}  # the chart type of each ChartGeneration question
        for start in range(0, len(qids), 500):
            for qid, subtype, text, meta in s.exec(
                select(Question.id, Question.subtype, Question.text, Question.meta)
                .where(col(Question.id).in_(qids[start:start + 500]))
            ).all():
                subtypes[qid] = subtype or "-"
                if subtype == CHART_SUBTYPE:
                    charts[qid] = chart_type_for(text, meta)
        gold = {
            qid: answer for qid, answer in trusted_answers(s, qids, at_least=AnswerStatus.GOLD).items()
            if answer.status in GOLD_STATUSES
        }
    rows: dict[tuple[str, str], ReportRow] = {}

    def bump(subtype: str, method: str) -> list[ReportRow]:
        return [rows.setdefault((st, method), ReportRow(st, method)) for st in (subtype, ALL)]

    for c in candidates:
        subtype = subtypes.get(c.question_id, "-")
        execution = (c.details or {}).get("execution")
        for row in bump(subtype, c.method):
            row.candidates += 1
            row.parsed += c.status != CandidateStatus.UNPARSED
            if execution is not None:
                row.programs += 1
                row.executed += execution.get("outcome") == "ok"
            if c.question_id in gold:
                row.gold_n += 1
                row.gold_agree += c.status == CandidateStatus.OK and _equals_gold(
                    c.values or [], gold[c.question_id], subtype, charts.get(c.question_id))
    for v in votes:
        subtype = subtypes.get(v.question_id, "-")
        consistent = v.status == AnswerStatus.CONSISTENT
        for row in bump(subtype, VOTE_METHOD):
            row.voted += 1
            row.consistent += consistent
            if v.question_id in gold:
                row.gold_n += 1
                chart = charts.get(v.question_id)
                values = _chart_values(v.value, chart, drawn=True) if subtype == CHART_SUBTYPE and consistent else list(v.values)
                row.gold_agree += consistent and _equals_gold(values, gold[v.question_id], subtype, chart)
    order = {m: i for i, m in enumerate(("DP", "TCoT", "SCoT", "PoT", VOTE_METHOD))}
    ordered = sorted(rows.values(), key=lambda r: (r.subtype == ALL, r.subtype, order.get(r.method, 9), r.method))
    return AnswersReport(ordered)


def _chart_values(text: str, chart_type: str | None, *, drawn: bool) -> list[str]:
    """A chart answer (``y_references = [[...]]``) as the comparable strings chart candidates hold:
    ``drawn`` for a vote's answer (written from a reading), not for a gold reference."""
    try:
        return [f"{v:.2f}" for v in comparable_values(parse_y_references(text), chart_type, drawn=drawn)]
    except ValueError:
        return []


def _equals_gold(values: list[str], gold: Answer, subtype: str, chart_type: str | None) -> bool:
    if subtype == CHART_SUBTYPE:
        return bool(values) and values == _chart_values(gold.value, chart_type, drawn=False)
    return same_answer(values, list(gold.values), answer_rule(subtype))


__all__ = ["AnswersReport", "ReportRow", "answers_report"]

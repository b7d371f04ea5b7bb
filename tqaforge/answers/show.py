"""One question's candidates and vote, as ``tqaforge answers show`` prints them."""

from __future__ import annotations

from dataclasses import dataclass

from sqlmodel import col, select

from tqaforge.answers.annotate import VOTE_METHOD
from tqaforge.printable import escape_controls
from tqaforge.queries import get_by_prefix
from tqaforge.schemas.records import Answer, AnswerCandidate, Question
from tqaforge.store import Workspace

_SHOWN = 160  # characters of an answer or error per line


@dataclass(frozen=True)
class QuestionAnswers:
    """A question with its candidates (method order, then sample) and its answers (vote, gold)."""

    question: Question
    candidates: tuple[AnswerCandidate, ...]
    answers: tuple[Answer, ...]

    def lines(self) -> list[str]:
        q = self.question
        # Model and data text: control characters escaped; a value is cut to one line (``_cut``), so
        # nothing a model wrote can start a line that looks like ours.
        lines = [f"question {q.id[:12]} ({q.subtype or '-'}, {q.status}): {escape_controls(q.text, lines=False)}"]
        for c in self.candidates:
            said = c.value if c.value is not None else f"({c.error or 'no answer'})"
            outcome = ((c.details or {}).get("execution") or {}).get("outcome")
            ran = f" [sandbox: {outcome}]" if outcome else ""
            lines.append(f"  {c.method:<4} #{c.sample} {c.status}{ran}: {_cut(said)}")
        if not self.candidates:
            lines.append("  no candidates yet: tqaforge generate answers --questions " + q.id[:12])
        for a in self.answers:
            route = f", route {a.route}" if a.route else ""
            reason = (a.votes or {}).get("reason")
            why = f" ({reason})" if reason and a.method == VOTE_METHOD else ""
            lines.append(f"  answer [{a.method or a.origin}, {a.status}{route}]: {_cut(a.value) or '-'}{why}")
        return lines


def _cut(text: str) -> str:
    text = escape_controls(" ".join(text.split()), lines=False)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def question_answers(ws: Workspace, prefix: str) -> QuestionAnswers:
    """The question whose id starts with ``prefix``, its candidates and answers (NotFound if none)."""
    order = {"DP": 0, "TCoT": 1, "SCoT": 2, "PoT": 3}
    with ws.session() as s:
        question = get_by_prefix(s, Question, prefix)
        candidates = sorted(
            s.exec(select(AnswerCandidate).where(AnswerCandidate.question_id == question.id)).all(),
            key=lambda c: (order.get(str(c.method), 9), c.sample, c.model or ""),
        )
        answers = s.exec(select(Answer).where(Answer.question_id == question.id).order_by(col(Answer.created_at))).all()
        return QuestionAnswers(question, tuple(candidates), tuple(answers))

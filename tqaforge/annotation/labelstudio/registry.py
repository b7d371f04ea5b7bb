"""What each annotation kind is in Label Studio: one :class:`LabelStudioKind` per kind, here only.

:mod:`tqaforge.annotation.kinds` says what a kind's labels look like and how they are compared;
this registry, keyed by the same kind names (every kind has an entry, checked at import), says how
the kind goes to Label Studio and comes back:

- ``config``: its label configuration, a template file in ``configs/`` (package data), checked by
  the server before use (:func:`tqaforge.annotation.labelstudio.sync.check_config`);
- ``pending``: which items wait for it (ids of the target records, in a stable order);
- ``task_data``: how an item becomes a Label Studio task's data (our task id is added by the sync
  as ``tqaforge_task_id``); every text from the store, a model's above all, is HTML-escaped;
- ``to_label``: how a Label Studio result (the list of regions) becomes our label, in the shape
  of the kinds table, or :class:`~tqaforge.annotation.kinds.LabelError` saying what is wrong.

=======================  ==========  ==================================================  ======================================
kind                     target      pending                                             label
=======================  ==========  ==================================================  ======================================
question_review          question    status ``proposed``                                 ``{"decision", "subtype_ok"[, "text"]}``
answer_verification      answer      route ``verify`` or ``manual``                      ``{"decision"[, "answer"]}``
question_typing          question    no ``question_type`` yet (rejected ones left out)   ``{"type"}``
relevant_cell_validity   question    has ``relevant_cells``                              ``{"decision"}``
relevant_cells,          -           not in Label Studio yet (``config`` None)           -
value_modification,
blind_reanswer
=======================  ==========  ==================================================  ======================================
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from sqlmodel import Session, col, select

from tqaforge.annotation.kinds import KINDS, LabelError
from tqaforge.answers.parse import split_answer
from tqaforge.schemas.enums import AnswerRoute, QuestionStatus
from tqaforge.schemas.records import Answer, AnswerCandidate, Question, TableRecord

#: A Label Studio annotation's ``result``: the list of its regions.
Result = Sequence[Mapping[str, Any]]
#: The longest model text shown in a task (the rest is cut, with a note saying so).
MAX_SHOWN = 4000


@dataclass(frozen=True)
class LabelStudioKind:
    """How one annotation kind goes to Label Studio and comes back (module docs)."""

    kind: str
    target_type: str
    #: The template: a file name in ``configs/`` (package data), or an absolute path of one's own.
    config: str | None = None
    pending: Callable[[Session], list[str]] | None = None
    task_data: Callable[[Session, str], dict[str, Any]] | None = None
    to_label: Callable[[Result], dict[str, Any]] | None = None
    payload: Callable[[Session, str], dict[str, Any] | None] | None = None
    #: How many annotators label each task (each in their own project).
    overlap: int = 2

    @property
    def supported(self) -> bool:
        """Whether the kind can be pushed to Label Studio yet."""
        return None not in (self.config, self.pending, self.task_data, self.to_label)

    def config_text(self) -> str:
        """The label configuration template's text (:class:`LabelError` if the kind has none)."""
        if self.config is None:
            raise LabelError(f"{self.kind} has no Label Studio configuration yet")
        if Path(self.config).is_absolute():
            return Path(self.config).read_text("utf-8")
        return resources.files("tqaforge.annotation.labelstudio").joinpath("configs", self.config).read_text("utf-8")

    def config_path(self) -> str:
        """Where the template lives (for messages): ``configs/NAME`` in the package, or an absolute path."""
        if self.config is not None and Path(self.config).is_absolute():
            return self.config
        return str(resources.files("tqaforge.annotation.labelstudio").joinpath("configs", self.config or ""))


# ---------------------------------------------------------------------------------------------
# Task data


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _cut(text: str | None) -> str:
    text = text or ""
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + f"\n[... {len(text) - MAX_SHOWN} more characters not shown]"


def table_html(table: TableRecord, highlight: set[tuple[int, int]] | None = None) -> str:
    """A stored table as an HTML table, every cell escaped, ``highlight`` cells (data rows from 0) marked."""
    marked = highlight or set()
    cell = "border:1px solid #bbb;padding:2px 6px;"
    parts = ['<div style="overflow:auto;max-height:480px">']
    if table.caption:
        parts.append(f"<p><i>{_e(table.caption)}</i></p>")
    parts.append('<table style="border-collapse:collapse;font-size:13px">')
    parts.append("<thead><tr><th style=\"" + cell + "\">#</th>")
    parts.extend(f'<th style="{cell}background:#eee">{_e(h)}</th>' for h in table.header)
    parts.append("</tr></thead><tbody>")
    for r, row in enumerate(table.rows):
        parts.append(f'<tr><td style="{cell}color:#888">{r}</td>')
        for c, value in enumerate(row):
            style = cell + ("background:#ffe08a;font-weight:bold;" if (r, c) in marked else "")
            parts.append(f'<td style="{style}">{_e(value)}</td>')
        parts.append("</tr>")
    parts.append("</tbody></table></div>")
    return "".join(parts)


def _question(s: Session, question_id: str) -> tuple[Question, TableRecord]:
    question = s.get(Question, question_id)
    if question is None:
        raise LabelError(f"question {question_id[:10]} does not exist")
    table = s.get(TableRecord, question.table_id)
    if table is None:
        raise LabelError(f"the table of question {question_id[:10]} does not exist")
    return question, table


def _category(question: Question) -> str:
    parts = [p for p in (question.qtype, question.subtype) if p]
    return "Category: " + (" / ".join(parts) if parts else "(none)")


def _question_payload(s: Session, question_id: str) -> dict[str, Any] | None:
    question = s.get(Question, question_id)
    return None if question is None else {"text": question.text, "table_id": question.table_id, "subtype": question.subtype}


def _review_data(s: Session, question_id: str) -> dict[str, Any]:
    question, table = _question(s, question_id)
    return {"table_html": table_html(table), "question": question.text, "category": _category(question)}


def _typing_data(s: Session, question_id: str) -> dict[str, Any]:
    question, table = _question(s, question_id)
    return {"table_html": table_html(table), "question": question.text}


def _validity_data(s: Session, question_id: str) -> dict[str, Any]:
    question, table = _question(s, question_id)
    cells = [tuple(c) for c in question.relevant_cells or [] if isinstance(c, (list, tuple)) and len(c) == 2]
    named = []
    for r, c in cells:
        column = table.header[c] if isinstance(c, int) and 0 <= c < len(table.header) else f"column {c}"
        named.append(f"row {r}, {column}")
    return {
        "table_html": table_html(table, {(int(r), int(c)) for r, c in cells}),
        "question": question.text,
        "cells": "Relevant cells (highlighted): " + ("; ".join(named) or "(none)"),
    }


def _candidate_html(candidate: AnswerCandidate) -> str:
    details = candidate.details or {}
    answer = candidate.value if candidate.value is not None else ", ".join(candidate.values or [])
    parts = [
        '<div style="flex:1 1 260px;min-width:240px;border:1px solid #ccc;border-radius:4px;padding:6px">',
        f"<b>{_e(candidate.method)}</b> (sample {candidate.sample}, {_e(candidate.status)})",
        f"<p><b>Answer:</b> {_e(answer) or '<i>none</i>'}</p>",
    ]
    if candidate.error:
        parts.append(f"<p><b>Problem:</b> {_e(candidate.error)}</p>")
    steps = details.get("steps") or []
    if steps:
        parts.append("<b>Steps</b><ol>")
        for step in steps[:30]:
            if isinstance(step, dict):
                parts.append("<li>" + "<br>".join(f"{_e(k)}: {_e(_cut(str(v)))}" for k, v in step.items()) + "</li>")
        parts.append("</ol>")
    if candidate.code:
        parts.append(f'<b>Code</b><pre style="white-space:pre-wrap;font-size:12px">{_e(_cut(candidate.code))}</pre>')
    execution = details.get("execution") or {}
    if execution:
        output = "\n".join(x for x in (execution.get("stdout"), execution.get("stderr")) if x)
        parts.append(
            f"<b>Sandbox</b> ({_e(execution.get('outcome'))})"
            f'<pre style="white-space:pre-wrap;font-size:12px">{_e(_cut(output))}</pre>'
        )
    parts.append(
        '<details><summary>Full reasoning</summary>'
        f'<pre style="white-space:pre-wrap;font-size:12px">{_e(_cut(candidate.raw))}</pre></details></div>'
    )
    return "".join(parts)


def _answer_candidates(s: Session, answer: Answer) -> list[AnswerCandidate]:
    """The candidates the answer's vote names (``votes["candidates"]``), else all of its question's."""
    rows = s.exec(
        select(AnswerCandidate).where(AnswerCandidate.question_id == answer.question_id)
        .order_by(col(AnswerCandidate.method), col(AnswerCandidate.sample), col(AnswerCandidate.id))
    ).all()
    voted = [c.get("id") for c in (answer.votes or {}).get("candidates") or [] if isinstance(c, dict)]
    chosen = [c for c in rows if c.id in voted]
    return chosen or list(rows)


def _answer_data(s: Session, answer_id: str) -> dict[str, Any]:
    answer = s.get(Answer, answer_id)
    if answer is None:
        raise LabelError(f"answer {answer_id[:10]} does not exist")
    question, table = _question(s, answer.question_id)
    candidates = _answer_candidates(s, answer)
    blocks = "".join(_candidate_html(c) for c in candidates) or "<i>no agent answered this question</i>"
    return {
        "table_html": table_html(table),
        "question": question.text,
        "answer": answer.value,
        "candidates_html": f'<div style="display:flex;flex-wrap:wrap;gap:8px">{blocks}</div>',
        "agent_answers": _agent_choices(answer, candidates),
    }


#: The value of a picked agent answer: ``proposed|TEXT`` (it is the proposed answer) or ``other|TEXT``.
PICK_PROPOSED, PICK_OTHER = "proposed|", "other|"


def _agent_choices(answer: Answer, candidates: Sequence[AnswerCandidate]) -> list[dict[str, str]]:
    """One choice per different answer the agents gave (the methods that gave it shown beside it),
    so an annotator can pick the right one instead of typing it; Label Studio's dynamic choices."""
    methods: dict[str, list[str]] = {}
    for c in candidates:
        text = c.value if c.value is not None else ", ".join(c.values or [])
        if text and c.status == "ok":
            methods.setdefault(text, []).append(str(c.method))
    proposed = tuple(answer.values or [])
    choices = []
    for text, who in methods.items():
        same = text == answer.value or tuple(split_answer(text)) == proposed
        shown = f"{_e(text)} <small>({_e(', '.join(who))}{'; the proposed answer' if same else ''})</small>"
        choices.append({"value": (PICK_PROPOSED if same else PICK_OTHER) + text, "html": shown})
    return choices


def _answer_payload(s: Session, answer_id: str) -> dict[str, Any] | None:
    answer = s.get(Answer, answer_id)
    return None if answer is None else {"question_id": answer.question_id, "answer": answer.value, "route": answer.route}


# ---------------------------------------------------------------------------------------------
# Pending items


def _proposed_questions(s: Session) -> list[str]:
    return list(s.exec(select(Question.id).where(Question.status == QuestionStatus.PROPOSED.value).order_by(Question.id)).all())


def _answers_to_verify(s: Session) -> list[str]:
    routes = [AnswerRoute.VERIFY.value, AnswerRoute.MANUAL.value]
    return list(s.exec(select(Answer.id).where(col(Answer.route).in_(routes)).order_by(Answer.id)).all())


def _untyped_questions(s: Session) -> list[str]:
    return list(s.exec(
        select(Question.id).where(
            col(Question.question_type).is_(None), Question.status != QuestionStatus.REJECTED.value
        ).order_by(Question.id)
    ).all())


def _questions_with_cells(s: Session) -> list[str]:
    rows = s.exec(select(Question.id, Question.relevant_cells).where(col(Question.relevant_cells).is_not(None)).order_by(Question.id)).all()
    return [qid for qid, cells in rows if cells]


# ---------------------------------------------------------------------------------------------
# Results -> labels


def _values(result: Result, name: str, key: str) -> list[str] | None:
    """The values of the region named ``name`` (``key``: ``choices`` or ``text``); None when absent."""
    if not isinstance(result, (list, tuple)):
        raise LabelError(f"the result is not a list of regions: {json.dumps(result)[:80]}")
    for region in result:
        if not isinstance(region, Mapping) or region.get("from_name") != name:
            continue
        value = region.get("value")
        items = value.get(key) if isinstance(value, Mapping) else None
        if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
            raise LabelError(f"{name!r} has no list of {key} in {json.dumps(region)[:120]}")
        return items
    return None


def _choice(result: Result, name: str, allowed: Sequence[str], *, required: bool = True) -> str | None:
    values = _values(result, name, "choices")
    if not values:
        if required:
            raise LabelError(f"no {name!r} was chosen")
        return None
    if len(values) != 1 or values[0] not in allowed:
        raise LabelError(f"{name!r} must be one of {', '.join(allowed)}, got {', '.join(map(repr, values))}")
    return values[0]


def _text(result: Result, name: str) -> str | None:
    values = _values(result, name, "text")
    text = "\n".join(v.strip() for v in values or [] if v.strip())
    return text or None


def _review_label(result: Result) -> dict[str, Any]:
    decision = _choice(result, "decision", ("accept", "edit", "reject"))
    subtype_ok = _choice(result, "subtype_right", ("yes", "no"))
    label: dict[str, Any] = {"decision": decision, "subtype_ok": subtype_ok == "yes"}
    text = _text(result, "edited_text")
    if decision == "edit":
        if text is None:
            raise LabelError("decision 'edit' without the corrected question")
        label["text"] = text
    return label


def _verification_label(result: Result) -> dict[str, Any]:
    decision = _choice(result, "decision", ("correct", "incorrect", "unanswerable"), required=False)
    answer = _text(result, "corrected_answer")
    picked = _values(result, "picked", "choices")
    if picked:
        if decision is not None or answer is not None:
            raise LabelError("an agent's answer was picked and a decision or corrected answer given too: give one")
        value = picked[0]
        if value.startswith(PICK_PROPOSED):
            return {"decision": "correct"}
        if not value.startswith(PICK_OTHER) or not value[len(PICK_OTHER):].strip():
            raise LabelError(f"the picked answer {value[:40]!r} is not one of the agents' answers")
        return {"decision": "incorrect", "answer": value[len(PICK_OTHER):].strip()}
    if decision is None and answer is None:
        raise LabelError("neither a decision nor a corrected answer")
    if decision == "correct" and answer is not None:
        raise LabelError("marked 'correct' but a corrected answer was typed too")
    label: dict[str, Any] = {"decision": decision or "incorrect"}
    if answer is not None:
        label["answer"] = answer
    return label


def _typing_label(result: Result) -> dict[str, Any]:
    return {"type": _choice(result, "type", ("extraction", "reasoning", "unanswerable"))}


def _validity_label(result: Result) -> dict[str, Any]:
    return {"decision": _choice(result, "decision", ("valid", "invalid", "unanswerable"))}


LS_KINDS: dict[str, LabelStudioKind] = {
    entry.kind: entry
    for entry in (
        LabelStudioKind(
            "question_review", "question", "question_review.xml", _proposed_questions, _review_data, _review_label,
            _question_payload,
        ),
        LabelStudioKind(
            "answer_verification", "answer", "answer_verification.xml", _answers_to_verify, _answer_data,
            _verification_label, _answer_payload,
        ),
        LabelStudioKind(
            "question_typing", "question", "question_typing.xml", _untyped_questions, _typing_data, _typing_label,
            _question_payload,
        ),
        LabelStudioKind(
            "relevant_cell_validity", "question", "relevant_cell_validity.xml", _questions_with_cells, _validity_data,
            _validity_label, _question_payload,
        ),
        # The next issue: a cell-picking config, and variant tasks.
        LabelStudioKind("relevant_cells", "question"),
        LabelStudioKind("value_modification", "variant"),
        LabelStudioKind("value_modification_review", "variant"),
        LabelStudioKind("blind_reanswer", "variant"),
    )
}

if set(LS_KINDS) != set(KINDS):  # pragma: no cover - a developer's slip, caught at import
    raise RuntimeError(f"the Label Studio registry and the kinds differ: {sorted(set(LS_KINDS) ^ set(KINDS))}")

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
from tqaforge.errors import TableError
from tqaforge.printable import escape_controls
from tqaforge.queries import trusted_answers
from tqaforge.schemas.enums import AnswerRoute, QuestionStatus, QuestionType, VariantStatus
from tqaforge.schemas.records import Answer, AnswerCandidate, Question, TableRecord, Variant
from tqaforge.tables.edits import EditRejected, parse_cell_id, read_value_edit, to_grid
from tqaforge.tables.table import Table
from tqaforge.variants.human import SHORTENED, VALUE_PERTURBATIONS

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
    #: A reading that needs the task's target (a value modification is diffed against the stored
    #: shortened table): ``(session, target id, result) -> label``; used instead of ``to_label``.
    to_label_for: Callable[[Session, str, Result], dict[str, Any]] | None = None
    #: Who must not get an item (``ls:`` pseudonyms): the author of a modification does not re-answer it.
    excluded: Callable[[Session, str], set[str]] | None = None
    #: Every refused label is sent back by the pull (:func:`~tqaforge.annotation.labelstudio.sync.pull`):
    #: the task's data get the message (``feedback``), the annotation is deleted. ``resend``, when
    #: a kind has one, adds the annotator's attempt to start from (data keys of the task).
    resend: Callable[[Result], dict[str, Any]] | None = None

    @property
    def supported(self) -> bool:
        """Whether the kind can be pushed to Label Studio yet."""
        return None not in (self.config, self.pending, self.task_data) and (self.to_label or self.to_label_for) is not None

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


def table_html(table: TableRecord | Table, highlight: set[tuple[int, int]] | None = None, *, ids: bool = False) -> str:
    """A table as an HTML table, every cell escaped, ``highlight`` cells (data rows from 0) marked;
    with ``ids`` each cell shows its id (``r0c1``, ``h1`` for a column name) in grey."""
    marked = highlight or set()
    cell = "border:1px solid #bbb;padding:2px 6px;"

    def tag(text: str) -> str:
        return f'<sup style="color:#999;font-size:10px;font-weight:normal">{text}</sup> ' if ids else ""

    parts = ['<div style="overflow:auto;max-height:480px">']
    if table.caption:
        parts.append(f"<p><i>{_e(table.caption)}</i></p>")
    parts.append('<table style="border-collapse:collapse;font-size:13px">')
    parts.append("<thead><tr><th style=\"" + cell + "\">#</th>")
    parts.extend(f'<th style="{cell}background:#eee">{tag(f"h{c}")}{_e(h)}</th>' for c, h in enumerate(table.header))
    parts.append("</tr></thead><tbody>")
    for r, row in enumerate(table.rows):
        parts.append(f'<tr><td style="{cell}color:#888">{r}</td>')
        for c, value in enumerate(row):
            style = cell + ("background:#ffe08a;font-weight:bold;" if (r, c) in marked else "")
            parts.append(f'<td style="{style}">{tag(f"r{r}c{c}")}{_e(value)}</td>')
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


def _gold_text(s: Session, question_id: str) -> str:
    gold = trusted_answers(s, [question_id])
    return ", ".join(gold[question_id].values) if question_id in gold else ""


def cell_choices(table: TableRecord | Table) -> list[dict[str, str]]:
    """The table as Label Studio choices laid out as its grid (``relevant_cells.xml``): one per
    cell, column names first (``h<column>``) then each row (``r<row>c<column>``); ``html`` the
    escaped cell text after its grey id, ``style`` its grid column, so a click marks the cell
    where the annotator sees it. The result's values are those ids (:func:`parse_cell_id`)."""

    def cell(cell_id: str, column: int, text: str, css: str = "tq-cell") -> dict[str, str]:
        return {
            "value": cell_id, "style": f"grid-column: {column + 1}",
            # Escaped twice over: controls and bidirectional overrides (which would reorder what
            # is shown) made visible, then HTML-escaped, so a cell's text shows as text.
            "html": f'<span class="{css}"><span class="tq-id">{cell_id}</span>{_e(escape_controls(text or "", lines=False))}</span>',
        }

    choices = [cell(f"h{c}", c, h, "tq-header") for c, h in enumerate(table.header)]
    choices += [cell(f"r{r}c{c}", c, v) for r, row in enumerate(table.rows) for c, v in enumerate(row)]
    return choices


def _cells_data(s: Session, question_id: str) -> dict[str, Any]:
    question, table = _question(s, question_id)
    return {
        "question": question.text, "answer_text": f"Answer: {_gold_text(s, question_id) or '(none yet)'}",
        "caption": f"Table: {table.caption}" if table.caption else "", "cell_choices": cell_choices(table),
    }


def _variant(s: Session, variant_id: str) -> tuple[Variant, Question, Table]:
    variant = s.get(Variant, variant_id)
    if variant is None or variant.table is None:
        raise LabelError(f"variant {variant_id[:10]} does not exist or has no table")
    question = s.get(Question, variant.question_id)
    if question is None:
        raise LabelError(f"the question of variant {variant_id[:10]} does not exist")
    return variant, question, Table.from_dict(variant.table)


def _modification_data(s: Session, variant_id: str) -> dict[str, Any]:
    variant, question, table = _variant(s, variant_id)
    grid = to_grid(table)
    return {
        "table_html": table_html(table, ids=True), "question": question.text,
        "answer_text": f"Answer on this table: {', '.join(variant.answers or []) or '(none)'}",
        "grid_change": grid, "grid_same": grid, "feedback": "",
    }


def _reanswer_data(s: Session, variant_id: str) -> dict[str, Any]:
    # Blind: the table and the question only, never the author's answer.
    _, question, table = _variant(s, variant_id)
    return {"table_html": table_html(table), "question": question.text}


def _variant_payload(s: Session, variant_id: str) -> dict[str, Any] | None:
    variant = s.get(Variant, variant_id)
    return None if variant is None else {"question_id": variant.question_id, "perturbation": variant.perturbation}


def _author(s: Session, variant_id: str) -> set[str]:
    variant = s.get(Variant, variant_id)
    return {variant.created_by} if variant is not None else set()


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


def _reasoning_without_cells(s: Session) -> list[str]:
    """Reasoning questions (FREB-TQA: relevant cells are marked for these) without relevant cells."""
    rows = s.exec(
        select(Question.id, Question.relevant_cells).where(
            Question.question_type == QuestionType.REASONING.value, Question.status != QuestionStatus.REJECTED.value,
        ).order_by(Question.id)
    ).all()
    return [qid for qid, cells in rows if not cells]


def _shortened_without_modifications(s: Session) -> list[str]:
    """Shortened tables no value modification was made on yet."""
    shortened = s.exec(
        select(Variant.id).where(Variant.perturbation == SHORTENED, Variant.status == VariantStatus.VALIDATED.value).order_by(Variant.id)
    ).all()
    used = {
        (params or {}).get("from_variant")
        for params in s.exec(select(Variant.params).where(col(Variant.perturbation).in_(VALUE_PERTURBATIONS))).all()
    }
    return [vid for vid in shortened if vid not in used]


def _modifications_to_reanswer(s: Session) -> list[str]:
    return list(s.exec(
        select(Variant.id).where(
            col(Variant.perturbation).in_(VALUE_PERTURBATIONS), Variant.status == VariantStatus.PENDING_REVIEW.value,
        ).order_by(Variant.id)
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


def _cells_label(result: Result) -> dict[str, Any]:
    values = _values(result, "cells", "choices")
    if not values:
        raise LabelError("no cell was ticked: tick every cell the answer needs")
    try:
        cells = sorted({parse_cell_id(v) for v in values})
    except TableError as exc:
        raise LabelError(str(exc).split("\n")[0]) from None
    return {"cells": [list(c) for c in cells]}


def _answer_items(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [item.strip() for item in split_answer(text) if item.strip()] or [text.strip()]


def _modification_label(s: Session, variant_id: str, result: Result) -> dict[str, Any]:
    """Both edits of a value-modification task, diffed against the stored shortened table and
    checked (:func:`tqaforge.tables.edits.read_value_edit`); or "unanswerable"."""
    if _values(result, "unanswerable", "choices"):
        return {"unanswerable": True}
    variant, _, table = _variant(s, variant_id)
    label: dict[str, Any] = {}
    parts = (("answer_changes", "changed_table", "changed_answer"), ("answer_same", "same_table", "same_answer"))
    for mode, grid_name, answer_name in parts:
        grid = "\n".join(_values(result, grid_name, "text") or [])
        answers = _answer_items(_text(result, answer_name))
        try:
            edits, gold = read_value_edit(table, grid, mode=mode, old_answers=variant.answers or (), new_answers=answers)  # type: ignore[arg-type]
        except EditRejected as exc:
            raise LabelError(str(exc)) from None
        label[mode] = {"edits": [e.as_dict() for e in edits], "answers": list(gold)}
    return label


def _modification_resend(result: Result) -> dict[str, Any]:
    """The annotator's attempt, to start from when the task comes back."""
    back = {}
    for name, key in (("changed_table", "grid_change"), ("same_table", "grid_same")):
        text = "\n".join(_values(result, name, "text") or [])
        if text.strip():
            back[key] = text
    return back


def _reanswer_label(result: Result) -> dict[str, Any]:
    answers = _answer_items(_text(result, "answer"))
    if not answers:
        raise LabelError("no answer was typed")
    return {"answers": answers}


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
        LabelStudioKind(
            "relevant_cells", "question", "relevant_cells.xml", _reasoning_without_cells, _cells_data, _cells_label,
            _question_payload,
        ),
        LabelStudioKind(
            "value_modification", "variant", "value_modification.xml", _shortened_without_modifications, _modification_data,
            None, _variant_payload, overlap=1, to_label_for=_modification_label, resend=_modification_resend,
        ),
        LabelStudioKind(
            "blind_reanswer", "variant", "blind_reanswer.xml", _modifications_to_reanswer, _reanswer_data, _reanswer_label,
            _variant_payload, excluded=_author,
        ),
        # Decided by a person on the command line (`tqaforge agreement resolve`): not pushed.
        LabelStudioKind("value_modification_review", "variant"),
    )
}

if set(LS_KINDS) != set(KINDS):  # pragma: no cover - a developer's slip, caught at import
    raise RuntimeError(f"the Label Studio registry and the kinds differ: {sorted(set(LS_KINDS) ^ set(KINDS))}")


def ls_kind(kind: str) -> LabelStudioKind | None:
    """How a kind goes to Label Studio: the kind's own entry (``KindSpec.labelstudio``), else this
    registry's; None for a kind that has neither (it is labelled with the CLI or the app)."""
    spec = KINDS.get(kind)
    own = spec.labelstudio if spec is not None else None
    return own if own is not None else LS_KINDS.get(kind)


def ls_kinds() -> dict[str, LabelStudioKind]:
    """Every kind's Label Studio entry, by kind (the registered kinds' own included)."""
    found = {kind: ls_kind(kind) for kind in KINDS}
    return {kind: entry for kind, entry in found.items() if entry is not None}

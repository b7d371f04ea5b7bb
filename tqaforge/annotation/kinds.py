"""Annotation kinds: one registry entry per kind of human label.

Each :class:`~tqaforge.schemas.records.AnnotationTask` has a ``kind``; every
:class:`~tqaforge.schemas.records.Annotation` on it holds one person's ``label`` in the shape of
that kind. This module is the registry: one :class:`KindSpec` per kind, saying

- the label's shape and how it is read and validated (:meth:`KindSpec.read`, and
  :func:`check_against_target` for what the target record allows, e.g. cells inside its table);
- which statistics apply (:attr:`KindSpec.shape`): ``category`` labels get percent agreement,
  Fleiss' kappa, Krippendorff's alpha, Gwet's AC1 and Cohen's kappa, and are adjudicated by
  majority; ``set`` labels MASI alpha and set agreement, adjudicated cell by cell; ``answer``
  labels are scored against the author's gold (accuracy), not adjudicated
  (:attr:`KindSpec.adjudicated`);
- how a resolved final label changes the item (:attr:`KindSpec.settle`): a question review
  settles the question's status (:func:`tqaforge.annotation.review.settle_question`), an answer
  verification the answer's status and a people's correction, question typing the question's
  type (:mod:`tqaforge.annotation.verification`); the other kinds' final labels stay in their
  adjudication records.

Labels are written by :mod:`tqaforge.labels` only.

=======================  =========  ===============================================================
kind                     target     label (a bare value instead of the dict is accepted too)
=======================  =========  ===============================================================
question_typing          question   ``{"type": "extraction" | "reasoning" | "unanswerable"}``;
                                    FREB-TQA's ``1`` / ``0`` / ``-1`` are read as these
question_review          question   ``{"decision": "accept" | "edit" | "promote" | "reject", ...}``
                                    as :mod:`tqaforge.annotation.review` writes it; compared as
                                    ``accept`` (accept, edit, promote: keep the question) or
                                    ``reject``
answer_verification      answer     ``{"decision": "correct" | "incorrect" | "unanswerable",
                                    "answer": "corrected answer" (optional)}``
relevant_cells           question   ``{"cells": [[row, col], ...]}`` (data rows, 0-based; row -1 is a
                                    header cell); compared as sets with the MASI distance; the final
                                    set shortens the table (:mod:`tqaforge.variants.human`)
relevant_cell_validity   question   ``{"decision": "valid" | "invalid" | "unanswerable"}``: does
                                    removing the relevant cells prevent answering (FREB-TQA
                                    appendix A.2; ``1`` / ``0`` / ``-1`` are read as these)
value_modification       variant    a person's edit of a shortened table (the variant), authored, not
                                    compared: ``{"answer_changes": {"edits": [{"row", "col", "old",
                                    "new"}], "answers": [...]}, "answer_same": {...}}`` or
                                    ``{"unanswerable": true}``; checked against the table
                                    (:func:`tqaforge.tables.edits.check_value_edit`)
value_modification_      variant    ``{"decision": "accept" | "reject"}``: a value-modified variant
review                              whose blind re-answers disagree with its author, decided by a
                                    person; settles the variant (validated or rejected)
blind_reanswer           variant    ``{"answer": "..."}`` or ``{"answers": ["...", ...]}``: a second
                         or         person's answer, scored by exact match (after the normalisation
                         question   of :func:`tqaforge.tables.matching.value_match`) against the
                                    author's gold: ``Variant.answers``, or for a question its
                                    trusted ``Answer`` vouched for by people (corrected, verified
                                    or imported gold: ``queries.trusted_answers``)
=======================  =========  ===============================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Literal, Mapping

from sqlmodel import Session, select

from tqaforge.annotation.review import REVIEW_KIND, review_wording, settle_question, unsettle_question
from tqaforge.annotation.verification import settle_answer, settle_question_type, settle_relevant_cells, settle_value_modification
from tqaforge.errors import AgreementError
from tqaforge.schemas.records import AnnotationTask, Answer, Question, TableRecord, Variant
from tqaforge.tables.edits import EDIT_MODES, CellEdit, EditRejected, check_value_edit
from tqaforge.tables.table import Table

#: How a kind's labels are compared: one category, a set of cells, answer values, or an authored
#: table edit (not compared between annotators: blind re-answering checks it).
Shape = Literal["category", "set", "answer", "edit"]
#: ``settle(session, target_id, final_label)``: carry a resolved final label over to its target.
Settle = Callable[[Session, str, Mapping[str, Any]], None]
#: ``unsettle(session, target_id)``: the target of a task whose annotators disagree waits undecided.
Unsettle = Callable[[Session, str], None]
#: ``detail(task, {rater: raw label}, final_label, min_agree)``: the part of a label that the compared
#: value leaves out (a question's new wording), settled by the same rule: (the final label with it,
#: None) when the annotators agree on it, else (None, votes for the queue, each with its text).
Detail = Callable[[AnnotationTask, Mapping[str, Any], Mapping[str, Any], "int | None"],
                  "tuple[dict[str, Any] | None, list[dict[str, Any]] | None]"]


class LabelError(ValueError):
    """One annotation's label does not have its kind's shape (reported, not raised to the user)."""


@dataclass(frozen=True)
class KindSpec:
    """What one annotation kind's labels look like and how they are compared."""

    name: str
    shape: Shape
    key: str
    description: str
    categories: tuple[str, ...] = ()
    aliases: Mapping[Any, str] = field(default_factory=dict)
    #: What a resolved final label does to the task's target (in the adjudication's session).
    settle: Settle | None = None
    #: What an open adjudication does to the target (a question under review waits as proposed).
    unsettle: Unsettle | None = None
    #: The part of a label the compared value leaves out, settled alongside it (see :data:`Detail`).
    detail: Detail | None = None

    @property
    def adjudicated(self) -> bool:
        """Whether disagreements are adjudicated into a final label (answers are scored against gold instead)."""
        return self.shape in ("category", "set")

    def read(self, label: Any) -> Any:
        """The comparable value of a label: a category, a frozenset of (row, col), a tuple of answers,
        or a value modification's parts."""
        if self.shape == "edit":
            return _value_edit(label)
        value = label.get(self.key) if isinstance(label, dict) else label
        if isinstance(label, dict) and value is None and self.shape == "answer" and "answers" in label:
            value = label["answers"]
        if value is None:
            raise LabelError(f"no {self.key!r} in the label {label!r}")
        if self.shape == "category":
            return self._category(value)
        if self.shape == "set":
            return _cells(value)
        return _answers(value)

    def _category(self, value: Any) -> str:
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise LabelError(f"{self.key} must be one of {', '.join(self.categories)}, got {value!r}")
        key = value.strip().lower() if isinstance(value, str) else value
        key = self.aliases.get(key, self.aliases.get(str(key), key))
        if key not in self.categories:
            raise LabelError(f"{self.key} {value!r} is not one of {', '.join(self.categories)}")
        return str(key)

    def final_label(self, value: Any) -> dict[str, Any]:
        """A value back in the label shape (for adjudicated final labels)."""
        if self.shape == "set":
            return {self.key: [list(c) for c in sorted(value)]}
        if self.shape == "answer":
            return {"answers": list(value)}
        return {self.key: value}


def _cells(value: Any) -> frozenset[tuple[int, int]]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise LabelError(f"cells must be a list of [row, col] pairs, got {value!r}")
    cells = set()
    for cell in value:
        if (
            not isinstance(cell, (list, tuple)) or len(cell) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in cell) or cell[0] < -1 or cell[1] < 0
        ):
            raise LabelError(f"cell {cell!r} is not a [row, col] pair of integers (row -1: a header cell; columns from 0)")
        cells.add((cell[0], cell[1]))
    return frozenset(cells)


def _value_edit(label: Any) -> dict[str, Any]:
    """A value_modification label, its shape checked: {mode: (edits, answers or None)} or
    {"unanswerable": True}; the checks against the table are :func:`check_against_target`'s."""
    if not isinstance(label, Mapping):
        raise LabelError(f"a value modification is an object with {' and '.join(EDIT_MODES)}, got {label!r}")
    if label.get("unanswerable") is True:
        return {"unanswerable": True}
    read: dict[str, Any] = {}
    for mode in EDIT_MODES:
        part = label.get(mode)
        if not isinstance(part, Mapping):
            raise LabelError(f"the value modification has no {mode!r} part")
        try:
            edits = tuple(CellEdit.from_dict(e) for e in part.get("edits") or [])
        except EditRejected as exc:
            raise LabelError(f"{mode}: {exc}") from None
        answers = part.get("answers")
        if answers is not None and (not isinstance(answers, list) or not all(isinstance(a, str) for a in answers)):
            raise LabelError(f"{mode}: answers must be a list of texts, got {answers!r}")
        read[mode] = (edits, tuple(answers) if answers is not None else None)
    return read


def _answers(value: Any) -> tuple[str, ...]:
    values = [value] if not isinstance(value, list) else value
    if values and all(isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in values):
        answers = tuple(str(x).strip() for x in values)
        if all(answers):  # a blank answer is no answer: scoring it would count as a miss
            return answers
    raise LabelError(f"an answer must be a non-blank string or a non-empty list of them, got {value!r}")


KINDS: dict[str, KindSpec] = {
    spec.name: spec
    for spec in (
        KindSpec(
            "question_typing", "category", "type", "extraction or reasoning question (FREB-TQA A.2)",
            ("extraction", "reasoning", "unanswerable"),
            {1: "extraction", 0: "reasoning", -1: "unanswerable"}, settle=settle_question_type,
        ),
        KindSpec(
            REVIEW_KIND, "category", "decision", "keep or reject a proposed question",
            ("accept", "reject"), {"edit": "accept", "promote": "accept"}, settle=settle_question,
            unsettle=unsettle_question, detail=review_wording,
        ),
        KindSpec(
            "answer_verification", "category", "decision", "is the candidate gold answer correct",
            ("correct", "incorrect", "unanswerable"), settle=settle_answer,
        ),
        KindSpec(
            "relevant_cells", "set", "cells", "the cells needed to answer (sets, MASI distance)", settle=settle_relevant_cells,
        ),
        KindSpec(
            "relevant_cell_validity", "category", "decision",
            "does removing the relevant cells prevent answering (FREB-TQA A.2)",
            ("valid", "invalid", "unanswerable"), {1: "valid", 0: "invalid", -1: "unanswerable"},
        ),
        KindSpec("value_modification", "edit", "edits", "a person's edit of a shortened table (FREB-TQA 3.5)"),
        KindSpec(
            "value_modification_review", "category", "decision",
            "a value modification whose re-answers disagree: accept or reject", ("accept", "reject"),
            settle=settle_value_modification,
        ),
        KindSpec(
            "blind_reanswer", "answer", "answer",
            "second annotators' answers against the author's gold (FREB-TQA: 92.5% / 93.5%)",
        ),
    )
}


def kind_spec(kind: str) -> KindSpec:
    """The spec of a known kind; an :class:`AgreementError` naming the known ones otherwise."""
    try:
        return KINDS[kind]
    except (KeyError, TypeError):
        known = ", ".join(KINDS)
        raise AgreementError(
            f"unknown annotation kind {kind!r}; the known kinds are {known}",
            hint=f"give --kind one of: {known}",
        ) from None


def check_kinds(kinds: Iterable[str] | None) -> list[str] | None:
    """The kinds asked for, each known (raises :class:`AgreementError` listing the known ones)."""
    if kinds is None:
        return None
    if isinstance(kinds, str):
        kinds = [kinds]
    wanted = list(dict.fromkeys(kinds))
    for kind in wanted:
        kind_spec(kind)
    return wanted


# ---------------------------------------------------------------------------------------------
# A label against its target (the record the task is about)


def target_table_size(s: Session, target_type: str, target_id: str) -> tuple[int, int]:
    """(data rows, columns) of the table a task's target is about; :class:`LabelError` if it is gone.

    A question points at a stored table; a variant carries its own (perturbed) table, on which
    its cells were marked.
    """
    if target_type == "variant":
        variant = s.get(Variant, target_id)
        if variant is None:
            raise LabelError(f"the task's variant {target_id[:10]} does not exist")
        if variant.table:
            rows = variant.table.get("rows") or []
            header = variant.table.get("header") or []
            return len(rows), len(header)
        target_id = variant.question_id
    elif target_type == "answer":
        answer = s.get(Answer, target_id)
        if answer is None:
            raise LabelError(f"the task's answer {target_id[:10]} does not exist")
        target_id = answer.question_id
    elif target_type != "question":
        raise LabelError(f"the task's target type {target_type!r} has no table")
    row = s.exec(
        select(TableRecord.n_rows, TableRecord.n_cols)
        .join(Question, Question.table_id == TableRecord.id)  # type: ignore[arg-type]
        .where(Question.id == target_id)
    ).first()
    if row is None:
        raise LabelError(f"the task's question {target_id[:10]} (or its table) does not exist")
    return int(row[0]), int(row[1])


def check_against_target(s: Session, spec: KindSpec, target_type: str, target_id: str, value: Any) -> None:
    """Raise :class:`LabelError` when a read label does not fit the record its task is about.

    ``value`` is what :meth:`KindSpec.read` returned, so its shape (a known category, cells as
    pairs of non-negative integers, non-blank answers) is already checked; here the cells must
    lie inside the target's table: data rows from 0 (header excluded) and columns from 0.
    """
    if spec.shape == "edit":
        _check_value_edit(s, target_type, target_id, value)
        return
    if spec.shape != "set":
        models: dict[str, type[Question] | type[Answer] | type[Variant]] = {
            "question": Question, "answer": Answer, "variant": Variant,
        }
        model = models.get(target_type)
        if model is None or s.get(model, target_id) is None:
            raise LabelError(f"the task's {target_type} {target_id[:10]} does not exist")
        return
    n_rows, n_cols = target_table_size(s, target_type, target_id)
    outside = sorted((r, c) for r, c in value if not (-1 <= r < n_rows and c < n_cols))
    if outside:
        shown = ", ".join(f"[{r}, {c}]" for r, c in outside[:5]) + (f" and {len(outside) - 5} more" if len(outside) > 5 else "")
        raise LabelError(
            f"cell {shown} lies outside the table of {target_type} {target_id[:10]} "
            f"({n_rows} data rows x {n_cols} columns; rows 0-{max(n_rows - 1, 0)} (-1: the header) and columns 0-{max(n_cols - 1, 0)})"
        )


def _check_value_edit(s: Session, target_type: str, target_id: str, value: Mapping[str, Any]) -> None:
    """A value modification against the shortened table it was made on (the target variant)."""
    if target_type != "variant":
        raise LabelError(f"a value modification is made on a variant (a shortened table), not a {target_type}")
    variant = s.get(Variant, target_id)
    if variant is None or variant.table is None:
        raise LabelError(f"the task's variant {target_id[:10]} (a shortened table) does not exist")
    if value.get("unanswerable"):
        return
    table = Table.from_dict(variant.table)
    for mode in EDIT_MODES:
        edits, answers = value[mode]
        try:
            check_value_edit(table, edits, mode=mode, old_answers=variant.answers or (), new_answers=answers)
        except EditRejected as exc:
            raise LabelError(str(exc)) from None

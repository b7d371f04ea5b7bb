"""Annotation kinds: one registry entry per kind of human label.

Each :class:`~tqaforge.schemas.records.AnnotationTask` has a ``kind``; every
:class:`~tqaforge.schemas.records.Annotation` on it holds one person's ``label`` in the shape of
that kind. This module is the registry: one :class:`KindSpec` per kind, saying

- the label's shape and how it is read and validated (:meth:`KindSpec.read`, and
  :func:`check_against_target` for what the target record allows, e.g. cells inside its table);
- which statistics apply (:attr:`KindSpec.shape`, whose strategy object in
  :mod:`tqaforge.annotation.shapes` holds everything shape-specific): ``category`` labels get percent agreement,
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
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from sqlmodel import Session

from tqaforge.annotation.review import REVIEW_KIND, review_wording, settle_question, unsettle_question
from tqaforge.annotation.shapes import SHAPES, LabelError, LabelShape, Shape, target_table_size
from tqaforge.annotation.verification import settle_answer, settle_question_type, settle_relevant_cells, settle_value_modification
from tqaforge.errors import AgreementError
from tqaforge.schemas.records import AnnotationTask

if TYPE_CHECKING:  # only a type: the Label Studio registry reads the kinds, not the other way round
    from tqaforge.annotation.labelstudio.registry import LabelStudioKind

__all__ = [
    "KINDS", "KindSpec", "LabelError", "Shape", "check_against_target", "check_kinds", "feeding_kinds", "kind_spec",
    "register_kind", "target_table_size",
]

#: ``settle(session, target_id, final_label)``: carry a resolved final label over to its target.
Settle = Callable[[Session, str, Mapping[str, Any]], None]
#: ``unsettle(session, target_id)``: the target of a task whose annotators disagree waits undecided.
Unsettle = Callable[[Session, str], None]
#: ``detail(task, {rater: raw label}, final_label, min_agree)``: the part of a label that the compared
#: value leaves out (a question's new wording), settled by the same rule: (the final label with it,
#: None) when the annotators agree on it, else (None, votes for the queue, each with its text).
Detail = Callable[[AnnotationTask, Mapping[str, Any], Mapping[str, Any], "int | None"],
                  "tuple[dict[str, Any] | None, list[dict[str, Any]] | None]"]


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
    #: Where the kind's agreement stands among the kinds that gate a release (None: its labels do
    #: not make what a release holds); :func:`feeding_kinds` orders them by it.
    release_order: int | None = None
    #: The kind's title in an agreement report (default: its name).
    title: str = ""
    #: How a kind defined outside this module goes to Label Studio and comes back (its label
    #: config, how a result becomes our label); the built-in kinds' entries are in
    #: :data:`tqaforge.annotation.labelstudio.registry.LS_KINDS` (see ``ls_kind`` there).
    labelstudio: LabelStudioKind | None = None

    @property
    def report_name(self) -> str:
        """The kind's section title in an agreement report."""
        return self.title or self.name

    @property
    def gate_statistic(self) -> str | None:
        """The statistic of the release gate for this kind (its shape's; None: it does not gate)."""
        return self.strategy.gate_statistic

    @property
    def strategy(self) -> LabelShape:
        """The shape's strategy object (:mod:`tqaforge.annotation.shapes`): everything that depends on the shape."""
        return SHAPES[self.shape]

    @property
    def adjudicated(self) -> bool:
        """Whether disagreements are adjudicated into a final label (answers are scored against gold instead)."""
        return self.strategy.adjudicated

    def read(self, label: Any) -> Any:
        """The comparable value of a label: a category, a frozenset of (row, col), a tuple of answers,
        or a value modification's parts."""
        return self.strategy.read(self, label)

    def final_label(self, value: Any) -> dict[str, Any]:
        """A value back in the label shape (for adjudicated final labels)."""
        return self.strategy.final_label(self, value)


KINDS: dict[str, KindSpec] = {
    spec.name: spec
    for spec in (
        KindSpec(
            "question_typing", "category", "type", "extraction or reasoning question (FREB-TQA A.2)",
            ("extraction", "reasoning", "unanswerable"),
            {1: "extraction", 0: "reasoning", -1: "unanswerable"}, settle=settle_question_type, release_order=2,
        ),
        KindSpec(
            REVIEW_KIND, "category", "decision", "keep or reject a proposed question",
            ("accept", "reject"), {"edit": "accept", "promote": "accept"}, settle=settle_question,
            unsettle=unsettle_question, detail=review_wording, release_order=0,
        ),
        KindSpec(
            "answer_verification", "category", "decision", "is the candidate gold answer correct",
            ("correct", "incorrect", "unanswerable"), settle=settle_answer, release_order=1,
        ),
        KindSpec(
            "relevant_cells", "set", "cells", "the cells needed to answer (sets, MASI distance)", settle=settle_relevant_cells,
            release_order=3,
        ),
        KindSpec(
            "relevant_cell_validity", "category", "decision",
            "does removing the relevant cells prevent answering (FREB-TQA A.2)",
            ("valid", "invalid", "unanswerable"), {1: "valid", 0: "invalid", -1: "unanswerable"}, release_order=4,
        ),
        KindSpec("value_modification", "edit", "edits", "a person's edit of a shortened table (FREB-TQA 3.5)"),
        KindSpec(
            "value_modification_review", "category", "decision",
            "a value modification whose re-answers disagree: accept or reject", ("accept", "reject"),
            settle=settle_value_modification,
        ),
        KindSpec(
            "blind_reanswer", "answer", "answer",
            "second annotators' answers against the author's gold (FREB-TQA: 92.5% / 93.5%)", release_order=5,
        ),
    )
}


def register_kind(spec: KindSpec) -> KindSpec:
    """Add a kind to the registry: the one step a new kind needs (its shape must be known, its name new).

    Everything the toolkit does with a kind (reading and comparing its labels, adjudicating and
    settling them, the report's section and the release gate) reads it from the one
    :class:`KindSpec`; a kind going to Label Studio also needs its
    :class:`~tqaforge.annotation.labelstudio.registry.LabelStudioKind` there.
    """
    if spec.shape not in SHAPES:
        raise AgreementError(
            f"annotation kind {spec.name!r} has the unknown label shape {spec.shape!r}",
            hint=f"give it one of the shapes: {', '.join(SHAPES)}",
        )
    if spec.name in KINDS:
        raise AgreementError(f"annotation kind {spec.name!r} is already defined", hint="give the new kind a name of its own")
    KINDS[spec.name] = spec
    return spec


def feeding_kinds() -> tuple[str, ...]:
    """The kinds whose agreement gates a release, in their ``release_order``."""
    feeding = [spec for spec in KINDS.values() if spec.release_order is not None and spec.gate_statistic]
    return tuple(spec.name for spec in sorted(feeding, key=lambda spec: (spec.release_order, spec.name)))


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


def check_against_target(s: Session, spec: KindSpec, target_type: str, target_id: str, value: Any) -> None:
    """Raise :class:`LabelError` when a read label does not fit the record its task is about.

    ``value`` is what :meth:`KindSpec.read` returned, so its shape (a known category, cells as
    pairs of non-negative integers, non-blank answers) is already checked; the shape's
    :meth:`~tqaforge.annotation.shapes.LabelShape.check_target` checks the rest (cells inside the
    target's table, an edit against its variant, else that the target exists).
    """
    spec.strategy.check_target(s, target_type, target_id, value)

"""Variants people make (FREB-TQA sections 3.4-3.5): the shortened table and value modifications.

- :func:`store_shortened_table`: from a question's final relevant cells, its table cut down to
  their rows and columns (:func:`tqaforge.tables.perturb.relevant.shorten`, labels kept), stored
  as the question's ``shorten_to_relevant`` variant (seed 0, origin ``human``, validated: its
  gold answer is the question's). The cells become the question's ``relevant_cells``.
- :func:`store_value_modification`: one person's edit of a shortened table (one or two cells,
  :mod:`tqaforge.tables.edits`) and the gold answer after it, stored as a variant
  ``value_change_answer_changes`` or ``value_change_answer_same`` whose ``changes["edits"]`` list
  each changed cell with its old and new value. Ours wait for blind re-answering
  (``pending_review``); imported ones (FREB-TQA's published edits) arrive ``validated``.
- :func:`judge_reanswers`: what blind re-answers say about a modification: every re-answer
  matches the author's gold (the shared normaliser): validated; otherwise it needs a person.

The ids are content hashes of what makes the variant (question, perturbation, author, edits),
so storing the same edit again changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from sqlmodel import Session

from tqaforge.errors import TqaforgeError
from tqaforge.ids import content_hash, variant_id
from tqaforge.queries import trusted_answers
from tqaforge.schemas.enums import AnswerEffect, Origin, VariantStatus
from tqaforge.schemas.records import Question, TableRecord, Variant
from tqaforge.tables.edits import EDIT_MODES, PERTURBATION_OF, CellEdit, EditMode, apply_edits
from tqaforge.tables.matching import same_answer
from tqaforge.tables.perturb.relevant import shorten
from tqaforge.tables.table import Table

SHORTENED = "shorten_to_relevant"
VALUE_PERTURBATIONS = tuple(PERTURBATION_OF.values())


class HumanVariantError(TqaforgeError):
    """A person's variant cannot be made (no table, cells outside it, no shortened table yet)."""


def _table(s: Session, question: Question) -> Table:
    record = s.get(TableRecord, question.table_id)
    if record is None:
        raise HumanVariantError(f"the table of question {question.id[:10]} does not exist")
    return record.to_table()


def shortened_variant(s: Session, question_id: str) -> Variant | None:
    """The question's stored shortened table, if any."""
    return s.get(Variant, variant_id(question_id, SHORTENED, 0))


def shortened_cells(cells: Iterable[Sequence[int]], table: Table) -> list[tuple[int, int]]:
    """The cells to shorten by: data cells as they are; a header cell (row -1) keeps its column
    (it is paired with the first data row marked, or row 0)."""
    cells = [(int(r), int(c)) for r, c in cells]
    data = sorted({(r, c) for r, c in cells if r >= 0})
    anchor = data[0][0] if data else 0
    header_cols = {c for r, c in cells if r < 0}
    extra = [(anchor, c) for c in sorted(header_cols)] if table.n_rows else []
    for r, c in data + extra:
        if not (0 <= r < table.n_rows and 0 <= c < table.n_cols):
            raise HumanVariantError(
                f"cell [{r}, {c}] lies outside the table ({table.n_rows} data rows x {table.n_cols} columns)"
            )
    return sorted(set(data + extra))


def store_shortened_table(
    s: Session, question_id: str, cells: Iterable[Sequence[int]], *, origin: Origin = Origin.HUMAN, created_by: str = "adjudication",
) -> Variant:
    """Store the question's shortened table from its final relevant cells (module docs)."""
    question = s.get(Question, question_id)
    if question is None:
        raise HumanVariantError(f"question {question_id[:10]} does not exist")
    table = _table(s, question)
    marked = sorted({(int(r), int(c)) for r, c in cells})
    use = shortened_cells(marked, table)
    if not use:
        raise HumanVariantError(f"question {question_id[:10]}: no relevant cell to shorten the table by")
    short, change = shorten(table, use)
    question.relevant_cells = [[r, c] for r, c in marked if r >= 0]
    s.add(question)
    gold = trusted_answers(s, [question_id])
    answers = list(gold[question_id].values) if question_id in gold else None
    vid = variant_id(question_id, SHORTENED, 0)
    variant = s.get(Variant, vid) or Variant(id=vid, question_id=question_id, table_id=question.table_id, perturbation=SHORTENED, seed=0)
    variant.params = {"cells": [list(c) for c in marked], "rows": list(change.row_order or ()),
                      "columns": list(change.col_order or ()), "keep_labels": True}
    variant.table = short.to_dict()
    variant.changes = change.to_dict()
    variant.answer_effect = AnswerEffect.UNCHANGED
    variant.answers = answers
    variant.status = VariantStatus.VALIDATED
    variant.origin = origin
    variant.created_by = created_by
    s.add(variant)
    return variant


def value_variant_id(question_id: str, mode: str, author: str, edits: Sequence[CellEdit]) -> str:
    """The id of one person's value modification: question, mode, author and the edits."""
    return content_hash({
        "question": question_id, "perturbation": PERTURBATION_OF[mode], "author": author,
        "edits": [e.as_dict() for e in sorted(edits, key=lambda e: (e.row, e.col))],
    })


def store_value_modification(
    s: Session,
    shortened: Variant,
    *,
    mode: EditMode,
    edits: Sequence[CellEdit],
    answers: Sequence[str],
    author: str,
    origin: Origin = Origin.HUMAN,
    status: VariantStatus = VariantStatus.PENDING_REVIEW,
    source: dict[str, Any] | None = None,
    table: Table | None = None,
    known: set[str] | None = None,
) -> tuple[Variant | None, bool]:
    """Store one value modification of a shortened table; (the variant, whether it is new).

    ``table`` is the modified table when it is known as published (an import); otherwise the
    edits are applied to the shortened table. ``known``: ids of variants already stored, read
    in bulk by the caller (then a variant already there is not loaded: None is returned)."""
    if mode not in EDIT_MODES:
        raise HumanVariantError(f"unknown value modification {mode!r}; one of {', '.join(EDIT_MODES)}")
    if shortened.table is None:
        raise HumanVariantError(f"variant {shortened.id[:10]} has no table to modify")
    vid = value_variant_id(shortened.question_id, mode, author, edits)
    if known is not None:
        if vid in known:
            return None, False
    elif (held := s.get(Variant, vid)) is not None:
        return held, False
    base = Table.from_dict(shortened.table)
    modified = table if table is not None else apply_edits(base, edits)
    variant = Variant(
        id=vid, question_id=shortened.question_id, table_id=shortened.table_id, perturbation=PERTURBATION_OF[mode],
        params={"from_variant": shortened.id, "author": author, "cells": [[e.row, e.col] for e in edits], **(source or {})},
        seed=None, table=modified.to_dict(),
        changes={"edits": [e.as_dict() for e in edits], "changed_cells": [[e.row, e.col] for e in edits],
                 "note": f"{len(edits)} value(s) changed by {author}"},
        answer_effect=AnswerEffect.NEEDS_PERSON if mode == "answer_changes" else AnswerEffect.UNCHANGED,
        answers=list(answers), status=status, origin=origin, created_by=author,
    )
    s.add(variant)
    return variant, True


def variant_edits(variant: Variant) -> list[CellEdit]:
    """The changed cells of a value-modified variant (empty for any other)."""
    return [CellEdit.from_dict(e) for e in (variant.changes or {}).get("edits") or []]


@dataclass(frozen=True)
class ReanswerVerdict:
    """What the blind re-answers of one modification say."""

    variant_id: str
    answers: dict[str, tuple[str, ...]]  # annotator -> their answer
    matches: dict[str, bool]  # annotator -> equals the author's gold

    @property
    def agreed(self) -> bool:
        return bool(self.matches) and all(self.matches.values())


def judge_reanswers(variant: Variant, reanswers: Mapping[str, Sequence[str]]) -> ReanswerVerdict:
    """Compare each re-answer with the author's gold (exact match after the shared normaliser)."""
    gold = tuple(variant.answers or ())
    given = {who: tuple(a) for who, a in reanswers.items()}
    return ReanswerVerdict(variant.id, given, {who: bool(gold) and same_answer(a, gold) for who, a in given.items()})


def store_imported_shortened(
    s: Session, question: Question, table: Table, answers: Sequence[str], *, source: dict[str, Any],
    known: dict[str, Variant] | None = None,
) -> tuple[Variant, bool]:
    """A published shortened table (FREB-TQA's ``short_table``) as the question's shortened
    variant, origin ``import``, validated; (the variant, whether it is new). An existing one
    (a person's, or imported before) is kept as it is. ``known``: stored variants read in bulk."""
    vid = variant_id(question.id, SHORTENED, 0)
    held = known.get(vid) if known is not None else s.get(Variant, vid)
    if held is not None:
        return held, False
    variant = Variant(
        id=vid, question_id=question.id, table_id=question.table_id, perturbation=SHORTENED, seed=0,
        params={"keep_labels": True, **source}, table=table.to_dict(), changes={"note": "published shortened table"},
        answer_effect=AnswerEffect.UNCHANGED, answers=list(answers), status=VariantStatus.VALIDATED, origin=Origin.IMPORT,
        created_by=str(source.get("file") or "imported"),
    )
    s.add(variant)
    return variant, True

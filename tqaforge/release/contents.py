"""What goes into a release: the trusted items and the variants built on them, as plain rows.

An **item** is a question whose gold answer people vouched for (verified, corrected, or gold
imported with a curated benchmark: :data:`tqaforge.queries.CHECKED_BY_PEOPLE`) and that was not
rejected, with its table, category, question type and relevant cells. A **variant** row is a
variant of an item that can be trusted as it is: built by a rule that keeps (or recomputes) the
gold, or validated by people; variants waiting for a person, skipped or rejected are left out.

Rows carry no path, e-mail or secret: a question's source file becomes its dataset name, and
people appear only as the pseudonymous ids their labels carry (``ls:`` + hash, ``freb-tqa``).
Every row is sorted by id, so the same store always gives the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from sqlmodel import Session, col, select

from tqaforge.queries import CHECKED_BY_PEOPLE, tables_by_id, trusted_answers
from tqaforge.schemas.enums import QuestionStatus, VariantStatus
from tqaforge.schemas.records import Question, Variant

#: Which subset each perturbation's variants go to (FREB-TQA's three aspects, ToRR's structure,
#: realistic corruptions after Wolff and Hulsebos).
SUBSET_OF: dict[str, str] = {
    **{p: "structure" for p in (
        "shuffle_rows", "shuffle_columns", "target_rows_top", "target_rows_middle", "target_rows_bottom",
        "target_columns_front", "target_columns_back", "transpose", "insert_empty_rows",
    )},
    **{p: "relevant_cells" for p in ("remove_relevant_cells", "remove_table", "shift_relevant_rows")},
    **{p: "values" for p in ("shorten_to_relevant", "value_change_answer_changes", "value_change_answer_same")},
    **{p: "realistic" for p in ("missing_value", "duplicate_rows")},
}
SUBSETS: tuple[str, ...] = ("base", "structure", "relevant_cells", "values", "realistic")
#: Variant statuses a release takes: built by a rule that keeps the gold, or validated by people.
RELEASED_VARIANTS = (VariantStatus.BUILT.value, VariantStatus.VALIDATED.value)


@dataclass(frozen=True)
class Contents:
    """The rows of every subset, and the store records they came from (for the gate and manifest)."""

    rows: dict[str, list[dict[str, Any]]]
    question_ids: tuple[str, ...]
    variant_ids: tuple[str, ...]


def _dataset(question: Question) -> str:
    """The dataset a question came from, never a path: its taxonomy or the source file's stem."""
    if question.source:
        stem = PurePath(question.source.rsplit(":", 1)[0]).stem
        return question.taxonomy or stem
    return question.taxonomy or str(question.origin)


def collect(s: Session, subsets: tuple[str, ...] = SUBSETS) -> Contents:
    """The release rows of ``subsets`` (module docs)."""
    questions = {
        q.id: q for q in s.exec(select(Question).where(Question.status != QuestionStatus.REJECTED.value).order_by(Question.id)).all()
    }
    gold = trusted_answers(s, list(questions), at_least=CHECKED_BY_PEOPLE)
    items = [questions[qid] for qid in sorted(gold)]
    tables = tables_by_id(s, sorted({q.table_id for q in items}))
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in subsets}
    if "base" in rows:
        for q in items:
            table = tables[q.table_id]
            rows["base"].append({
                "id": q.id, "dataset": _dataset(q), "qtype": q.qtype or "", "qsubtype": q.subtype or "",
                "question_type": str(q.question_type) if q.question_type else "", "question": q.text,
                "answer": list(gold[q.id].values), "answer_status": str(gold[q.id].status),
                "table": {"header": list(table.header), "rows": [list(r) for r in table.rows]},
                "relevant_cells": [list(c) for c in q.relevant_cells or []],
            })
    wanted = {p for p, subset in SUBSET_OF.items() if subset in rows}
    variants = s.exec(
        select(Variant).where(
            col(Variant.status).in_(RELEASED_VARIANTS), col(Variant.perturbation).in_(sorted(wanted)),
            col(Variant.question_id).in_([q.id for q in items]) if items else col(Variant.id).is_(None),
        ).order_by(Variant.id)
    ).all() if wanted and items else []
    kept: list[str] = []
    for v in variants:
        if v.table is None or v.answers is None:
            continue
        changes = v.changes or {}
        rows[SUBSET_OF[v.perturbation]].append({
            "id": v.id, "item_id": v.question_id, "perturbation": v.perturbation, "seed": -1 if v.seed is None else v.seed,
            "origin": str(v.origin), "made_by": v.created_by, "question": questions[v.question_id].text,
            "qsubtype": questions[v.question_id].subtype or "", "answer": list(v.answers),
            "answer_effect": str(v.answer_effect) if v.answer_effect else "",
            "table": {"header": list(v.table.get("header") or []), "rows": [list(r) for r in v.table.get("rows") or []]},
            "edits": [{"row": int(e["row"]), "col": int(e["col"]), "old": str(e["old"]), "new": str(e["new"])}
                      for e in changes.get("edits") or []],
        })
        kept.append(v.id)
    return Contents(rows, tuple(q.id for q in items), tuple(kept))

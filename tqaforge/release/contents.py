"""What goes into a release: the trusted items and the variants built on them, as plain rows.

An **item** is a question whose gold answer people vouched for (verified, corrected, or gold
imported with a curated benchmark: :data:`tqaforge.queries.CHECKED_BY_PEOPLE`) and that was not
rejected, with its table, category, question type and relevant cells. A **variant** row is a
variant of an item that can be trusted as it is: built by a rule that keeps (or recomputes) the
gold, or validated by people; variants waiting for a person, skipped or rejected are left out.

The **configurations** subset is ToRR's grid as prompts: for every item, the item's own table
and each of its stored structure variants of ToRR's four perturbations (shuffle rows, shuffle
columns, transpose, insert empty rows), rendered in each serialization (ToRR's seven by default)
with the direct-prompting template: 35 prompts an item when every perturbation was built. Its
``config`` column (``SERIALIZATION/PERTURBATION``) is what ToRR's performance and robustness are
computed across.

Rows carry no path, e-mail or secret: a question's source file becomes its dataset name, and
people appear only as the pseudonymous ids their labels carry (``ls:`` + hash, ``freb-tqa``).
Every row is sorted by id, so the same store always gives the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from sqlmodel import Session, col, select

from tqaforge.answers.agents import chart_type_for
from tqaforge.ids import content_hash
from tqaforge.queries import CHECKED_BY_PEOPLE, tables_by_id, trusted_answers
from tqaforge.schemas.enums import QuestionStatus, VariantStatus
from tqaforge.schemas.records import Question, Variant
from tqaforge.tables.perturb import TORR_PERTURBATIONS
from tqaforge.tables.serialize import TORR_SERIALIZATIONS
from tqaforge.tables.table import Table
from tqaforge.variants.grid import render_prompt

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
SUBSETS: tuple[str, ...] = ("base", "structure", "relevant_cells", "values", "realistic", "configurations")
#: The conditions of the configurations subset: the item itself and ToRR's perturbations.
CONFIGURATION_PERTURBATIONS: tuple[str, ...] = ("none", *TORR_PERTURBATIONS)
CHART_SUBTYPE = "ChartGeneration"
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


def configuration_id(source_id: str, serialization: str) -> str:
    """The id of one prompt of the configurations subset (its item or variant, and the format)."""
    return content_hash({"of": source_id, "serialization": serialization})


def collect(
    s: Session, subsets: tuple[str, ...] = SUBSETS, serializations: tuple[str, ...] = TORR_SERIALIZATIONS,
) -> Contents:
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
                "id": q.id, "source_id": q.source_id or "", "dataset": _dataset(q), "qtype": q.qtype or "",
                "qsubtype": q.subtype or "", "chart_type": _chart_type(q),
                "question_type": str(q.question_type) if q.question_type else "", "question": q.text,
                "answer": list(gold[q.id].values), "answer_text": gold[q.id].value, "answer_status": str(gold[q.id].status),
                "table": {"header": list(table.header), "rows": [list(r) for r in table.rows]},
                "relevant_cells": [list(c) for c in q.relevant_cells or []],
            })
    wanted = {p for p, subset in SUBSET_OF.items() if subset in rows}
    if "configurations" in rows:
        wanted |= set(TORR_PERTURBATIONS)
    variants = s.exec(
        select(Variant).where(
            col(Variant.status).in_(RELEASED_VARIANTS), col(Variant.perturbation).in_(sorted(wanted)),
            col(Variant.question_id).in_([q.id for q in items]) if items else col(Variant.id).is_(None),
        ).order_by(Variant.id)
    ).all() if wanted and items else []
    kept: list[str] = []
    grid: dict[str, list[Variant]] = {}
    for v in variants:
        if v.table is None or v.answers is None:
            continue
        kept.append(v.id)
        if v.perturbation in TORR_PERTURBATIONS:
            grid.setdefault(v.question_id, []).append(v)
        if SUBSET_OF[v.perturbation] not in rows:
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
    if "configurations" in rows:
        rows["configurations"] = _configurations(items, tables, gold, grid, serializations)
    return Contents(rows, tuple(q.id for q in items), tuple(kept))


def _chart_type(q: Question) -> str:
    return (chart_type_for(q.text, q.meta) or "") if q.subtype == CHART_SUBTYPE else ""


def _configurations(
    items: list[Question], tables: dict[str, Any], gold: dict[str, Any], grid: dict[str, list[Variant]],
    serializations: tuple[str, ...],
) -> list[dict[str, Any]]:
    """The configurations subset's rows (module docs), sorted by id."""
    out: list[dict[str, Any]] = []
    for q in items:
        conditions: list[tuple[str, str, int, Table, list[str]]] = [("", "none", 0, tables[q.table_id], list(gold[q.id].values))]
        conditions += [(v.id, v.perturbation, -1 if v.seed is None else v.seed, Table.from_dict(v.table or {}), list(v.answers or []))
                       for v in grid.get(q.id, [])]
        for variant_id, perturbation, seed, table, answer in conditions:
            for serialization in serializations:
                out.append({
                    "id": configuration_id(variant_id or q.id, serialization), "item_id": q.id, "variant_id": variant_id,
                    "perturbation": perturbation, "seed": seed, "serialization": serialization,
                    "config": f"{serialization}/{perturbation}", "qtype": q.qtype or "", "qsubtype": q.subtype or "",
                    "chart_type": _chart_type(q), "question": q.text, "answer": answer,
                    "prompt": render_prompt(table, q.text, serialization, q.subtype),
                    "table": {"header": list(table.header), "rows": [list(r) for r in table.rows]},
                })
    out.sort(key=lambda r: r["id"])
    return out

"""A stored variant next to its original table, with each perturbed cell's fate marked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tqaforge.catalog import get_by_prefix
from tqaforge.schemas.records import Question, TableRecord, Variant
from tqaforge.store import Workspace
from tqaforge.tables.table import Table

Mark = Literal["same", "moved", "changed", "inserted"]


@dataclass(frozen=True)
class VariantView:
    variant: Variant
    question: Question
    original: Table
    perturbed: Table | None  # None for a skipped variant
    marks: tuple[tuple[Mark, ...], ...]  # one per perturbed cell
    row_origin: tuple[str, ...]  # per perturbed row: "r3" (from original row 3), "new", "copy of r3"


def cell_marks(variant: Variant, perturbed: Table) -> tuple[tuple[tuple[Mark, ...], ...], tuple[str, ...]]:
    """Mark each cell of the perturbed table: same place, moved, changed text, or inserted."""
    changes = variant.changes or {}
    changed = {tuple(c) for c in changes.get("changed_cells", [])}
    row_order = changes.get("row_order")
    col_order = changes.get("col_order")
    duplicated = {int(k): v for k, v in (changes.get("duplicated_from") or {}).items()}
    transposed = bool(changes.get("transposed"))
    marks: list[tuple[Mark, ...]] = []
    origins: list[str] = []
    for i in range(perturbed.n_rows):
        src_row = row_order[i] if row_order is not None and i < len(row_order) else (None if transposed else i)
        if i in duplicated:
            origins.append(f"copy of r{duplicated[i]}")
        elif src_row is None:
            origins.append("new" if not transposed else f"c{i + 1}")
        else:
            origins.append(f"r{src_row}")
        row: list[Mark] = []
        for j in range(perturbed.n_cols):
            src_col = col_order[j] if col_order is not None and j < len(col_order) else j
            if (i, j) in changed:
                row.append("changed")
            elif i in duplicated or (src_row is None and not transposed):
                row.append("inserted")
            elif transposed or src_row != i or src_col != j:
                row.append("moved")
            else:
                row.append("same")
        marks.append(tuple(row))
    return tuple(marks), tuple(origins)


def show_variant(ws: Workspace, variant_id: str) -> VariantView:
    """Load a variant (id or unique prefix) with its question and original table."""
    with ws.session() as s:
        variant = get_by_prefix(s, Variant, variant_id)
        question = s.get(Question, variant.question_id)
        record = s.get(TableRecord, variant.table_id)
    assert question is not None and record is not None  # foreign keys guarantee both
    original = Table.build(record.header, record.rows)
    if variant.table is None:
        return VariantView(variant, question, original, None, (), ())
    perturbed = Table.from_dict(variant.table)
    marks, origins = cell_marks(variant, perturbed)
    return VariantView(variant, question, original, perturbed, marks, origins)

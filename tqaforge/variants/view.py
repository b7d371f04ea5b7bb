"""A stored variant next to its original table, with each perturbed cell's fate marked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

from tqaforge.queries import get_by_prefix
from tqaforge.schemas.records import Question, TableRecord, Variant
from tqaforge.store import Workspace
from tqaforge.tables.edits import CellEdit
from tqaforge.tables.table import Table
from tqaforge.variants.human import variant_edits

Mark = Literal["same", "moved", "changed", "inserted"]

#: A text marker per mark, so changes show without colour (and survive copy and paste).
MARK_SYMBOLS: dict[Mark, str] = {"same": "", "moved": "~", "changed": "*", "inserted": "+"}
LEGEND = "* changed   ~ moved   + inserted"

#: Cells wider than this are cut in the width estimate (the CLI wraps or cuts them anyway).
_CELL_CAP = 24
#: Rich draws 3 characters of border and padding per column, plus one.
_PER_COLUMN = 3


@dataclass(frozen=True)
class VariantView:
    variant: Variant
    question: Question
    original: Table
    perturbed: Table | None  # None for a skipped variant
    marks: tuple[tuple[Mark, ...], ...]  # one per perturbed cell
    row_origin: tuple[str, ...]  # per perturbed row: "r3" (from original row 3), "new", "copy of r3"
    #: A person's value modification: its changed cells (old and new value); ``original`` is then
    #: the shortened table the edit was made on, not the question's whole table.
    edits: tuple[CellEdit, ...] = ()

    def edit_lines(self) -> list[str]:
        """One line per changed cell, ``r0c1 (Votes): 4 -> 361`` (header cells ``h1``)."""
        lines = []
        for e in self.edits:
            column = self.original.header[e.col] if 0 <= e.col < self.original.n_cols else f"column {e.col}"
            where, change = e.describe().split(": ", 1)
            lines.append(f"{where} ({column or 'blank'}): {change}")
        return lines

    def marked_rows(self, max_rows: int | None = None) -> list[list[str]]:
        """The perturbed rows with each cell's text marker appended ("12*" changed, "x~" moved,
        "+" alone for an empty inserted cell); empty for a skipped variant."""
        if self.perturbed is None:
            return []
        rows = self.perturbed.rows if max_rows is None else self.perturbed.rows[:max_rows]
        old = {(e.row, e.col): e.old.strip() for e in self.edits}
        return [
            [marked(f"{old[(i, j)]} -> {cell.strip()}" if (i, j) in old else cell, mark) for j, (cell, mark) in enumerate(zip(row, marks))]
            for i, (row, marks) in enumerate(zip(rows, self.marks))
        ]

    def counts(self) -> dict[Mark, int]:
        """How many cells carry each mark other than "same" (for a one-line summary)."""
        out: dict[Mark, int] = {"changed": 0, "moved": 0, "inserted": 0}
        for row in self.marks:
            for mark in row:
                if mark != "same":
                    out[mark] += 1
        return out

    def layout(self, width: int, max_rows: int | None = None) -> Literal["side_by_side", "stacked"]:
        """"side_by_side" when both tables fit in ``width`` terminal columns, else "stacked"
        (print the original, then the perturbed table, one under the other)."""
        if self.perturbed is None:
            return "stacked"
        left = table_width(["#", *self.original.header], [[f"r{i}", *r] for i, r in enumerate(self.original.rows[:max_rows])])
        right = table_width(["from", *self.perturbed.header],
                            [[o, *r] for o, r in zip(self.row_origin, self.marked_rows(max_rows))])
        return "side_by_side" if left + 1 + right <= width else "stacked"


def marked(cell: str, mark: Mark) -> str:
    """``cell`` with the text marker of ``mark`` appended."""
    return f"{cell}{MARK_SYMBOLS[mark]}"


def table_width(header: Sequence[str], rows: Sequence[Sequence[str]]) -> int:
    """About how many terminal columns a boxed table of ``header`` and ``rows`` needs."""
    widths = [min(len(h), _CELL_CAP) for h in header]
    for row in rows:
        for j, cell in enumerate(row[: len(widths)]):
            widths[j] = max(widths[j], min(len(cell), _CELL_CAP))
    return sum(w + _PER_COLUMN for w in widths) + 1


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
        base = (variant.params or {}).get("from_variant")
        shortened = s.get(Variant, base) if isinstance(base, str) else None
    assert question is not None and record is not None  # foreign keys guarantee both
    original = record.to_table()
    if variant.table is None:
        return VariantView(variant, question, original, None, (), ())
    perturbed = Table.from_dict(variant.table)
    edits = tuple(variant_edits(variant))
    if shortened is not None and shortened.table is not None:
        original = Table.from_dict(shortened.table)  # the edit was made on the shortened table
    marks, origins = cell_marks(variant, perturbed)
    return VariantView(variant, question, original, perturbed, marks, origins, edits)

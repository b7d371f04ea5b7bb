"""Table statistics and the selection filter applied at import."""

from __future__ import annotations

from dataclasses import dataclass

from tqaforge.tables.cells import is_numeric
from tqaforge.tables.locale_numbers import parse_with
from tqaforge.tables.table import Table


@dataclass(frozen=True, slots=True)
class TableStats:
    """Size and shape figures of one table."""

    n_rows: int
    n_cols: int
    n_cells: int
    n_empty: int
    numeric_share: float  # share of non-empty cells that read as a number

    def to_dict(self) -> dict[str, float | int]:
        return {
            "n_rows": self.n_rows,
            "n_cols": self.n_cols,
            "n_cells": self.n_cells,
            "n_empty": self.n_empty,
            "numeric_share": self.numeric_share,
        }


def table_stats(table: Table) -> TableStats:
    """Count rows, columns, empty and numeric cells. A cell is numeric when it reads as a plain
    number (:func:`~tqaforge.tables.cells.is_numeric`) or, for a table whose reader detected
    its columns' number conventions (:attr:`Table.numbers`), as a number of its column's
    convention ("1.234,5" in a decimal-comma column)."""
    filled = numeric = 0
    conventions = table.numbers or (None,) * table.n_cols
    for row in table.rows:
        for cell, convention in zip(row, conventions):
            if cell.strip():
                filled += 1
                numeric += is_numeric(cell) or (convention is not None and parse_with(cell, convention) is not None)
    n_cells = table.n_rows * table.n_cols
    return TableStats(
        n_rows=table.n_rows,
        n_cols=table.n_cols,
        n_cells=n_cells,
        n_empty=n_cells - filled,
        numeric_share=round(numeric / filled, 4) if filled else 0.0,
    )


@dataclass(frozen=True, slots=True)
class SelectionFilter:
    """Which tables to keep. TableBench kept tables with at least 8 rows and 5 columns and
    "significant numerical values"; :data:`TABLEBENCH_FILTER` encodes that, with a numeric
    share of 0.5 as our reading of "numeric-heavy" (TableBench reports 65.7% on average)."""

    min_rows: int = 1
    min_cols: int = 1
    min_numeric_share: float = 0.0

    def rejects(self, stats: TableStats) -> str | None:
        """The reason to reject a table with these stats, or None to keep it."""
        if stats.n_rows < self.min_rows:
            return f"{stats.n_rows} rows < {self.min_rows}"
        if stats.n_cols < self.min_cols:
            return f"{stats.n_cols} columns < {self.min_cols}"
        if stats.numeric_share < self.min_numeric_share:
            return f"numeric share {stats.numeric_share:.2f} < {self.min_numeric_share:.2f}"
        return None


TABLEBENCH_FILTER = SelectionFilter(min_rows=8, min_cols=5, min_numeric_share=0.5)

"""Follow cells through a :class:`~tqaforge.tables.perturb.base.Change`.

The variant grid needs to know where an item's relevant or target cells went (to show them to
annotators, or to label the perturbed table), and tests need the reverse to check a
perturbation did what its change says. Both directions live here, next to nothing else, so the
meaning of ``row_order`` / ``col_order`` / ``transposed`` is decoded in one place.
"""

from __future__ import annotations

from tqaforge.tables.perturb.base import Change
from tqaforge.tables.source import Cell


def original_position(change: Change, cell: Cell) -> Cell | None:
    """The original data cell now at ``cell`` in the perturbed table, or None when it has none
    (an inserted empty row, a duplicate's copy, the dummy table, or for a transposed table a
    cell that was a header name)."""
    r, c = cell
    if change.transposed:
        # New row j is original column j + 1; new column i >= 1 is original row i - 1.
        return (c - 1, r + 1) if c >= 1 else None
    if change.row_order is None or change.col_order is None:
        return None
    row, col = change.row_order[r], change.col_order[c]
    if row is None or col is None:
        return None
    return row, col


def new_position(change: Change, cell: Cell) -> Cell | None:
    """Where the original data cell ``cell`` is in the perturbed table, or None when it is gone
    (a shortened table dropped it, the table was removed, or transposing made it a header name).
    A duplicated row's original position is given, not its copy's."""
    r, c = cell
    if change.transposed:
        return (c - 1, r + 1) if c >= 1 else None
    if change.row_order is None or change.col_order is None:
        return None
    try:
        return change.row_order.index(r), change.col_order.index(c)
    except ValueError:
        return None

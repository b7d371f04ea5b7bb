"""Relevant-cell perturbations (FREB-TQA section 3.4) and the shortened table (section 3.5).

They need the item's relevant cells (``ItemContext.relevant_cells``: the cells an answer is
composed from, labelled by people or shipped by the dataset) and skip items without them.
Removing the relevant cells or the whole table should make the question unanswerable, so the
gold is left to a person (``AnswerEffect.NEEDS_PERSON``); FREB-TQA measures whether a model
still answers. Moving the relevant rows or cutting the table down to them keeps the answer.
"""

from __future__ import annotations

from typing import Sequence

from tqaforge.tables.effects import AnswerEffect
from tqaforge.tables.perturb._ops import (
    draw_until,
    identity,
    place,
    rebuild,
    relevant_cells,
    reorder,
    result,
)
from tqaforge.tables.perturb.base import (
    Change,
    ItemContext,
    PerturbationSkipped,
    Perturbed,
    rng_for,
)
from tqaforge.tables.source import Cell
from tqaforge.tables.table import Table

#: What a removed cell is replaced with. Empty, as a cell nobody filled in: a marker such as
#: "[removed]" would tell the model that something was taken away.
MASK = ""

#: FREB-TQA's stand-in for a removed table: "one cell with a 'None' value". It is the header's
#: only cell; the table has no data rows.
DUMMY_TABLE_CELL = "None"


def mask_cells(table: Table, cells: Sequence[Cell], mask: str = MASK) -> tuple[Table, tuple[Cell, ...]]:
    """The table with ``cells`` replaced by ``mask``, and the cells whose text actually changed
    (a cell that already reads ``mask`` is not a change)."""
    targets = set(cells)
    changed = tuple(sorted(cell for cell in targets if table.cell(*cell) != mask))
    rows = [
        [mask if (r, c) in targets else text for c, text in enumerate(row)] for r, row in enumerate(table.rows)
    ]
    return rebuild(table, table.header, rows), changed


def remove_relevant_cells(table: Table, ctx: ItemContext, seed: int) -> Perturbed:
    """Empty every relevant cell; skipped when they are all empty already."""
    cells = relevant_cells(table, ctx)
    new, changed = mask_cells(table, cells)
    if not changed:
        raise PerturbationSkipped("every relevant cell is already empty")
    change = Change(
        row_order=identity(table.n_rows), col_order=identity(table.n_cols), changed_cells=changed
    )
    params = {"mask": MASK, "cells": [list(c) for c in changed]}
    return result(
        "remove_relevant_cells", seed, new, change, ctx, effect=AnswerEffect.NEEDS_PERSON, params=params
    )


def remove_table(table: Table, ctx: ItemContext, seed: int) -> Perturbed:
    """Replace the table by FREB-TQA's one-cell dummy ("None"). The caption goes too (it could
    give the answer away); source and licence stay as provenance. Applies to any item."""
    dummy = Table((DUMMY_TABLE_CELL,), (), caption=None, source=table.source, licence=table.licence)
    change = Change(row_order=(), col_order=(None,), note="table replaced by a one-cell dummy")
    return result("remove_table", seed, dummy, change, ctx, effect=AnswerEffect.NEEDS_PERSON)


def shift_relevant_rows(table: Table, ctx: ItemContext, seed: int) -> Perturbed:
    """Remove the rows holding relevant cells and re-insert them at random positions, in a
    random order among themselves (if every row is relevant this is a full shuffle, and the
    link between a value and its position is broken as intended). Draws that give back the
    original order are redrawn; skipped for tables of fewer than 2 rows."""
    cells = relevant_cells(table, ctx)
    if table.n_rows < 2:
        raise PerturbationSkipped(f"the table has {table.n_rows} data row(s); there is nowhere to shift a row to")
    moved = tuple(sorted({r for r, _ in cells}))
    others = [i for i in range(table.n_rows) if i not in moved]
    n = table.n_rows

    def draw(g):  # type: ignore[no-untyped-def]
        positions = g.sample(range(n), len(moved))
        return place(n, moved, positions, others), positions

    order, positions = draw_until(rng_for(table, "shift_relevant_rows", seed), draw, lambda d: d[0] != identity(n))
    change = Change(row_order=order, col_order=identity(table.n_cols))
    params = {"k": len(moved), "rows": list(moved), "positions": list(positions)}
    new = reorder(table, order, identity(table.n_cols))
    return result("shift_relevant_rows", seed, new, change, ctx, params=params)


def label_rows(table: Table) -> tuple[int, ...]:
    """Leading data rows that continue the header: blank first cell, some other cell filled.

    TAT-QA tables put their years and units there (``["", "2019", "2018"]``,
    ``["", "", "(in millions)"]``) because the header holds only one level.
    """
    rows: list[int] = []
    for i, row in enumerate(table.rows):
        if row[0].strip() or not any(cell.strip() for cell in row):
            break
        rows.append(i)
    return tuple(rows)


def shorten(table: Table, cells: Sequence[Cell], *, keep_labels: bool = True) -> tuple[Table, Change]:
    """The table cut down to the rows and columns holding ``cells``.

    With ``keep_labels`` (the default) the first column (row labels) and the leading
    header-continuation rows (:func:`label_rows`) stay as well, so the question can still be
    read against the table: without them "In which year was X larger?" over a TAT-QA table
    keeps two bare numbers. FREB-TQA's human shortened tables do the same: of the 537 TAT
    items, 457 keep exactly the relevant columns plus the first one, and the rows kept match
    the relevant rows plus the leading label rows for 282 (the relevant rows alone: 199).
    """
    rows = {r for r, _ in cells}
    cols = {c for _, c in cells}
    if keep_labels:
        cols.add(0)
        rows.update(label_rows(table))
    row_order, col_order = tuple(sorted(rows)), tuple(sorted(cols))
    return reorder(table, row_order, col_order), Change(row_order=row_order, col_order=col_order)


def shorten_to_relevant(table: Table, ctx: ItemContext, seed: int) -> Perturbed:
    """FREB-TQA's shortened table, made automatically: only the rows and columns holding the
    relevant cells, plus the labels (:func:`shorten`). No random choice."""
    cells = relevant_cells(table, ctx)
    new, change = shorten(table, cells)
    params = {"rows": list(change.row_order or ()), "columns": list(change.col_order or ()), "keep_labels": True}
    return result("shorten_to_relevant", seed, new, change, ctx, params=params)

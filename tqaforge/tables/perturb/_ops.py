"""Small table operations the perturbations share (private: the public API is the registry)."""

from __future__ import annotations

import random
from operator import itemgetter
from typing import Any, Callable, Sequence

from tqaforge.tables.effects import AnswerEffect
from tqaforge.tables.perturb.base import (
    Change,
    ItemContext,
    PerturbationError,
    PerturbationSkipped,
    Perturbed,
)
from tqaforge.tables.source import Cell
from tqaforge.tables.table import CELL_SEP, PackedRows, Table, flat_cells

# Rejection sampling bound. Every loop using it accepts a draw with probability >= 1/2, so
# reaching it means a bug, not bad luck (2**-64).
MAX_DRAWS = 64


def rebuild(table: Table, header: Sequence[str], rows: Sequence[Sequence[str]]) -> Table:
    """A new table with the given content and the original's caption, source and licence."""
    # Rows that are tuples already (what the perturbations here build) are kept, not copied.
    if not isinstance(rows, PackedRows) and not (type(rows) is tuple and all(type(r) is tuple for r in rows)):
        rows = tuple(map(tuple, rows))
    return Table(
        tuple(header),
        rows,  # type: ignore[arg-type]  # a tuple of tuples, checked or made just above
        caption=table.caption,
        source=table.source,
        licence=table.licence,
    )


def identity(n: int) -> tuple[int, ...]:
    return tuple(range(n))


def row_items(table: Table) -> tuple[list[Any], Callable[[list[Any]], Sequence[tuple[str, ...]]]]:
    """The table's rows as items to move, copy or drop as wholes, and the function that makes
    rows of a new table from such items. Packed rows stay packed (their packed strings are the
    items: equal items are equal rows), so a row shuffle never unpacks a cell."""
    rows = table.rows
    if isinstance(rows, PackedRows):
        width = rows.common_width
        return list(rows.items), lambda items: PackedRows._of(items, width)
    return list(rows), tuple


def packed(rows: Sequence[tuple[str, ...]], width: int) -> Sequence[tuple[str, ...]]:
    """``rows`` (tuples of ``width`` cells) as :class:`PackedRows` when no cell holds its
    separator, else as they are: every serializer then joins the rows in one call instead of
    one per row (for tables made column by column: transposed, columns shuffled)."""
    found = _packed_items(list(map(CELL_SEP.join, rows)), width)
    return tuple(rows) if found is None else found


def packed_cells(cells: list[str], width: int) -> Sequence[tuple[str, ...]]:
    """The rows of ``width`` cells that ``cells`` holds one after the other, as :func:`packed`
    makes them: each row joined straight from the flat list (zip cuts it into rows in C and
    reuses its one tuple), no row made a tuple of its own."""
    found = _packed_items(list(map(CELL_SEP.join, zip(*[iter(cells)] * width))), width)
    return tuple(zip(*[iter(cells)] * width)) if found is None else found


def _packed_items(items: list[str], width: int) -> PackedRows | None:
    """``items`` (rows of ``width`` cells, each joined by :data:`CELL_SEP`) as
    :class:`PackedRows`; None when a cell holds the separator (the rows then hold more of them)."""
    if items and CELL_SEP.join(items).count(CELL_SEP) != len(items) * width - 1:
        return None
    return PackedRows._of(items, width if items else None)  # type: ignore[arg-type]


def columns_taken(table: Table, order: Sequence[int]) -> Sequence[tuple[str, ...]]:
    """The rows of ``table`` with the columns at ``order`` (original column indexes: a
    permutation, or a selection as a shortened table keeps), packed as :func:`packed_cells`:
    each column moves as one slice of the flat cell list, and no row is unpacked into a tuple."""
    m, k = table.n_cols, len(order)
    flat = flat_cells(table.rows)
    out = [""] * (table.n_rows * k)  # every slot is overwritten: new column j is old column order[j]
    for new, old in enumerate(order):
        out[new::k] = flat[old::m]
    return packed_cells(out, k)


def empty_row_item(table: Table) -> Any:
    """The item (see :func:`row_items`) of a row of empty cells."""
    return CELL_SEP * (table.n_cols - 1) if isinstance(table.rows, PackedRows) else ("",) * table.n_cols


def picker(order: Sequence[int]) -> Callable[[Sequence[str]], tuple[str, ...]]:
    """A function taking the items at ``order`` from a sequence, as a tuple, in C (itemgetter)."""
    if len(order) == 1:
        only = order[0]
        return lambda seq: (seq[only],)
    if not order:
        return lambda seq: ()
    return itemgetter(*order)  # type: ignore[return-value]


def reorder(table: Table, row_order: Sequence[int], col_order: Sequence[int]) -> Table:
    """The table with rows and columns taken in the given original order."""
    if tuple(row_order) == identity(table.n_rows):
        return rebuild(table, picker(col_order)(table.header), columns_taken(table, col_order))
    rows = table.row_tuples()  # packed rows unpacked once, not once per cell
    if tuple(col_order) == identity(table.n_cols):
        return rebuild(table, table.header, tuple([rows[r] for r in row_order]))
    pick = picker(col_order)
    return rebuild(table, pick(table.header), tuple([pick(rows[r]) for r in row_order]))


def place(total: int, moved: Sequence[int], positions: Sequence[int], others: Sequence[int]) -> tuple[int, ...]:
    """An order of ``total`` items with ``moved[i]`` at ``positions[i]`` and ``others`` filling
    the remaining positions in their given order."""
    order: list[int | None] = [None] * total
    for item, pos in zip(moved, positions, strict=True):
        order[pos] = item
    rest = iter(others)
    filled = [next(rest) if item is None else item for item in order]
    return tuple(filled)


def draw_until(rng: random.Random, draw: Callable[[random.Random], Any], accept: Callable[[Any], bool]) -> Any:
    """Redraw until ``accept`` holds: the result is uniform over the accepted draws."""
    for _ in range(MAX_DRAWS):
        value = draw(rng)
        if accept(value):
            return value
    raise AssertionError("rejection sampling did not terminate; the acceptance rule is wrong")


def relevant_cells(table: Table, ctx: ItemContext) -> tuple[Cell, ...]:
    """The item's relevant cells, sorted and each once; skip when none are labelled.

    A cell outside the table is an error in the item, not a reason to skip: it means the
    labels belong to another version of the table.
    """
    if not ctx.relevant_cells:
        raise PerturbationSkipped("the item has no relevant cells labelled")
    cells = tuple(sorted({(int(r), int(c)) for r, c in ctx.relevant_cells}))
    for r, c in cells:
        if not (0 <= r < table.n_rows and 0 <= c < table.n_cols):
            raise PerturbationError(
                f"relevant cell [{r}, {c}] lies outside the table ({table.n_rows} data rows x {table.n_cols} columns)",
                hint="relevant cells count data rows from 0 (header excluded) and columns from 0; "
                "check that they were labelled on this table and not on a shortened or modified one",
            )
    return cells


def result(
    name: str,
    seed: int,
    table: Table,
    change: Change,
    ctx: ItemContext,
    *,
    effect: AnswerEffect = AnswerEffect.UNCHANGED,
    answers: tuple[str, ...] | None = None,
    params: dict[str, Any] | None = None,
) -> Perturbed:
    """Assemble a :class:`Perturbed`; an UNCHANGED effect keeps the item's answers."""
    if effect is AnswerEffect.UNCHANGED:
        answers = tuple(ctx.answers)
    return Perturbed(
        perturbation=name,
        seed=seed,
        table=table,
        change=change,
        answer_effect=effect,
        answers=answers,
        params=dict(params or {}),
    )

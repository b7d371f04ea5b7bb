"""Structure perturbations: the table's layout changes, its content and the answer do not.

From FREB-TQA section 3.3 (shuffle all rows / columns, shift target rows to the top, middle or
bottom third and target columns to the front or back half, transpose) and ToRR appendix A.5.2
(row swapping, column swapping, transpose, add empty rows). Every function here has the
:data:`~tqaforge.tables.perturb.base.Perturbation` signature ``(table, ctx, seed)``.

**Thirds and halves.** A table of ``n`` data rows (``n >= 3``) is cut at ``round(n/3)`` and
``round(2n/3)``: the top and bottom thirds always have the same length and the middle takes
the difference (n=4: 1/2/1, n=5: 2/1/2, n=7: 2/3/2, n=8: 3/2/3). The parts are positions in
the *perturbed* table, so "the target rows land inside the named third" holds by construction.
``m`` columns (``m >= 2``) are cut at ``ceil(m/2)``: with an odd count the extra column goes
to the front, so the back half is truly the end of the table (m=3: front 0-1, back 2).
The target rows (columns) are removed, ``k`` distinct positions inside the part are drawn,
the targets go there in their original relative order, and the other rows fill the remaining
positions in their original order. When the part has fewer positions than there are target
rows (an answer such as "1" found in 18 rows), the item is skipped: the perturbation could not
keep its promise.

**Transpose.** The whole grid, header included, is transposed: the new header is the original
first column headed by the original first header cell, ``(header[0], rows[0][0], ...,
rows[n-1][0])``, and new row ``j`` is original column ``j+1`` headed by its name,
``(header[j+1], rows[0][j+1], ..., rows[n-1][j+1])``. Row labels thus become column names,
as when one rotates a table whose first column names its entities, and transposing twice
gives back the table exactly. ToRR's pandas ``df.T`` instead heads the columns with the row
numbers 0, 1, 2; that form is not its own inverse. A one-column table transposes to a
header without data rows.
"""

from __future__ import annotations

import random
from typing import Callable

from tqaforge.tables.matching import target_columns, target_rows
from tqaforge.tables.perturb._ops import (
    columns_taken,
    draw_until,
    empty_row_item,
    identity,
    packed,
    picker,
    place,
    rebuild,
    reorder,
    result,
    row_items,
)
from tqaforge.tables.perturb.base import (
    Change,
    ItemContext,
    Perturbation,
    PerturbationSkipped,
    Perturbed,
    rng_for,
)
from tqaforge.tables.table import Table, flat_cells

ROW_PARTS = ("top", "middle", "bottom")
COLUMN_PARTS = ("front", "back")


def row_part_bounds(n_rows: int, part: str) -> tuple[int, int]:
    """``(start, stop)`` positions of the named third of ``n_rows`` rows.

    >>> [row_part_bounds(5, p) for p in ("top", "middle", "bottom")]
    [(0, 2), (2, 3), (3, 5)]
    """
    # floor(i*n/3 + 1/2) in integers: i*n/3 is never exactly half-way, so this is round().
    cuts = [(2 * i * n_rows + 3) // 6 for i in range(4)]
    index = ROW_PARTS.index(part)
    return cuts[index], cuts[index + 1]


def column_part_bounds(n_cols: int, part: str) -> tuple[int, int]:
    """``(start, stop)`` positions of the named half of ``n_cols`` columns (front gets the odd one).

    >>> column_part_bounds(3, "front"), column_part_bounds(3, "back")
    ((0, 2), (2, 3))
    """
    cut = (n_cols + 1) // 2
    return (0, cut) if part == "front" else (cut, n_cols)


def none(table: Table, ctx: ItemContext, seed: int) -> Perturbed:
    """The unperturbed table (ToRR's baseline configuration)."""
    change = Change(row_order=identity(table.n_rows), col_order=identity(table.n_cols))
    return result("none", seed, table, change, ctx)


def shuffle_rows(table: Table, ctx: ItemContext, seed: int) -> Perturbed:
    """All data rows in a random order that differs from the original table.

    The permutation is drawn uniformly among those that change the table (a draw that
    leaves it as it was, possible with repeated rows, is redrawn), since an unchanged table
    would only repeat the "none" variant. Skipped when no order can differ: fewer than two
    rows, or all rows equal.
    """
    n = table.n_rows
    if n < 2:
        raise PerturbationSkipped(f"the table has {n} data row(s); shuffling needs at least 2")
    rows, make = row_items(table)  # packed rows stay packed
    if len(set(rows)) == 1:
        raise PerturbationSkipped("all data rows are equal; no order differs from the original")
    rng = rng_for(table, "shuffle_rows", seed)
    order = draw_until(
        rng,
        lambda g: tuple(g.sample(range(n), n)),
        lambda o: [rows[i] for i in o] != rows,
    )
    change = Change(row_order=order, col_order=identity(table.n_cols))
    return result("shuffle_rows", seed, rebuild(table, table.header, make([rows[i] for i in order])), change, ctx)


def shuffle_columns(table: Table, ctx: ItemContext, seed: int) -> Perturbed:
    """All columns (header with them) in a random order that differs from the original table;
    drawn and skipped as :func:`shuffle_rows`."""
    if table.n_cols < 2:
        raise PerturbationSkipped(f"the table has {table.n_cols} column; shuffling needs at least 2")
    m, header = table.n_cols, table.header
    accept: Callable[[tuple[int, ...]], bool]
    if len(set(header)) == m:
        # Distinct names: no two columns are equal, so only the identity leaves the table as it
        # was (the same draws accepted as by comparing the columns, without making them).
        unchanged = identity(m)
        accept = unchanged.__ne__
    else:
        rows = table.row_tuples()
        # (name, cells) per column; zip transposes in C (no rows: every column is empty).
        columns = list(zip(header, zip(*rows) if rows else [()] * m))
        if all(col == columns[0] for col in columns):
            raise PerturbationSkipped("all columns are equal; no order differs from the original")
        accept = lambda o: [columns[i] for i in o] != columns  # noqa: E731
    rng = rng_for(table, "shuffle_columns", seed)
    order = draw_until(rng, lambda g: tuple(g.sample(range(m), m)), accept)
    change = Change(row_order=identity(table.n_rows), col_order=order)
    return result("shuffle_columns", seed, rebuild(table, picker(order)(header), columns_taken(table, order)), change, ctx)


def _shift_into(
    rng: random.Random, total: int, targets: tuple[int, ...], bounds: tuple[int, int]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(new order, target positions): targets at random positions inside ``bounds``."""
    start, stop = bounds
    positions = tuple(sorted(rng.sample(range(start, stop), len(targets))))
    moved = set(targets)
    others = [i for i in range(total) if i not in moved]
    return place(total, targets, positions, others), positions


def _target_rows(part: str) -> Perturbation:
    name = f"target_rows_{part}"

    def shift(table: Table, ctx: ItemContext, seed: int) -> Perturbed:
        if table.n_rows < 3:
            raise PerturbationSkipped(
                f"the table has {table.n_rows} data row(s); a top, middle and bottom third need at least 3"
            )
        targets = target_rows(table, ctx.answers)
        if not targets:
            raise PerturbationSkipped("no cell matches the answer")
        bounds = row_part_bounds(table.n_rows, part)
        size = bounds[1] - bounds[0]
        if len(targets) > size:
            raise PerturbationSkipped(
                f"{len(targets)} target rows do not fit in the {part} third ({size} rows of {table.n_rows})"
            )
        order, positions = _shift_into(rng_for(table, name, seed), table.n_rows, targets, bounds)
        change = Change(row_order=order, col_order=identity(table.n_cols))
        params = {
            "part": part,
            "k": len(targets),
            "bounds": list(bounds),
            "targets": list(targets),
            "positions": list(positions),
        }
        return result(name, seed, reorder(table, order, identity(table.n_cols)), change, ctx, params=params)

    shift.__name__ = name
    shift.__doc__ = (
        f"FREB-TQA's shift of the target rows (rows holding an answer cell) into the {part} "
        "third, at random positions; skipped with no target, fewer than 3 rows, or too many targets."
    )
    return shift


def _target_columns(part: str) -> Perturbation:
    name = f"target_columns_{part}"

    def shift(table: Table, ctx: ItemContext, seed: int) -> Perturbed:
        if table.n_cols < 2:
            raise PerturbationSkipped(f"the table has {table.n_cols} column; a front and back half need at least 2")
        targets = target_columns(table, ctx.answers)
        if not targets:
            raise PerturbationSkipped("no cell matches the answer")
        bounds = column_part_bounds(table.n_cols, part)
        size = bounds[1] - bounds[0]
        if len(targets) > size:
            raise PerturbationSkipped(
                f"{len(targets)} target columns do not fit in the {part} half ({size} columns of {table.n_cols})"
            )
        order, positions = _shift_into(rng_for(table, name, seed), table.n_cols, targets, bounds)
        change = Change(row_order=identity(table.n_rows), col_order=order)
        params = {
            "part": part,
            "k": len(targets),
            "bounds": list(bounds),
            "targets": list(targets),
            "positions": list(positions),
        }
        return result(name, seed, reorder(table, identity(table.n_rows), order), change, ctx, params=params)

    shift.__name__ = name
    shift.__doc__ = (
        f"FREB-TQA's shift of the target columns (columns holding an answer cell) into the {part} "
        "half, at random positions; skipped with no target, one column, or too many targets."
    )
    return shift


target_rows_top = _target_rows("top")
target_rows_middle = _target_rows("middle")
target_rows_bottom = _target_rows("bottom")
target_columns_front = _target_columns("front")
target_columns_back = _target_columns("back")


def transpose_table(table: Table) -> Table:
    """The transposed table (header included in the transposition; see the module doc).

    >>> t = Table.build(["name", "age"], [["Ann", "26"], ["Bo", "34"]])
    >>> transpose_table(t).header, transpose_table(t).rows
    (('name', 'Ann', 'Bo'), (('age', '26', '34'),))
    >>> transpose_table(transpose_table(t)) == t
    True
    """
    flat, m = flat_cells(table.rows), table.n_cols
    # Column c is every m-th cell from c: a slice, in C.
    columns = [(name, *flat[c::m]) for c, name in enumerate(table.header)]
    return rebuild(table, columns[0], packed(columns[1:], table.n_rows + 1))


def transpose(table: Table, ctx: ItemContext, seed: int) -> Perturbed:
    """Rows become columns and columns rows (FREB-TQA, ToRR); no random choice."""
    change = Change(transposed=True, note="original cell (r, c), c >= 1, is now at (c - 1, r + 1)")
    return result("transpose", seed, transpose_table(table), change, ctx)


def insert_empty_rows(table: Table, ctx: ItemContext, seed: int) -> Perturbed:
    """ToRR's "add empty rows": ``k`` rows of empty cells at random positions, ``k`` drawn
    from 1..max(1, n // 4) so the table is padded by at most a quarter of its length."""
    n = table.n_rows
    rng = rng_for(table, "insert_empty_rows", seed)
    k = rng.randint(1, max(1, n // 4))
    total = n + k
    positions = sorted(rng.sample(range(total), k))
    # The original rows in order, with k Nones (empty rows) put in at the drawn positions
    # (ascending, so each lands where it was drawn).
    order: list[int | None] = list(range(n))
    rows, make = row_items(table)  # packed rows stay packed
    empty = empty_row_item(table)
    for p in positions:
        order.insert(p, None)
        rows.insert(p, empty)
    change = Change(row_order=tuple(order), col_order=identity(table.n_cols))
    params = {"k": k, "positions": positions}
    return result("insert_empty_rows", seed, rebuild(table, table.header, make(rows)), change, ctx, params=params)

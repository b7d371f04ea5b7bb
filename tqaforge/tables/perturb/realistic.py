"""Realistic variations (Wolff & Hulsebos, "How well do LLMs reason over tabular data, really?").

**Missing values.** "We first identify the cells needed to generate the answers and randomly
remove one of the relevant cells. We recalculate the ground-truth answer by, effectively,
setting the missing value to 0." Here the cells needed are the item's relevant cells; for an
item without them (an extraction question) the target cells, the cells holding the answer,
are the cells needed. The gold is recomputed when the item carries an arithmetic derivation
that reproduces it (:mod:`tqaforge.tables.perturb.arithmetic`); otherwise a person decides.

**Duplicate entities.** "Randomly selecting rows and replicating them at random points in the
same table." The answer is unchanged: duplicates are meant to be ignored.
"""

from __future__ import annotations

from tqaforge.tables.cells import parse_number
from tqaforge.tables.effects import AnswerEffect
from tqaforge.tables.matching import find_target_cells
from tqaforge.tables.perturb._ops import identity, rebuild, relevant_cells, result
from tqaforge.tables.perturb.arithmetic import recompute_with_zero
from tqaforge.tables.perturb.base import (
    Change,
    ItemContext,
    PerturbationSkipped,
    Perturbed,
    rng_for,
)
from tqaforge.tables.perturb.relevant import MASK, mask_cells
from tqaforge.tables.source import Cell
from tqaforge.tables.table import Table


def _needed_cells(table: Table, ctx: ItemContext) -> tuple[tuple[Cell, ...], str]:
    if ctx.relevant_cells:
        return relevant_cells(table, ctx), "relevant_cells"
    targets = find_target_cells(table, ctx.answers)
    if targets:
        return targets, "target_cells"
    raise PerturbationSkipped("the item has no relevant cells labelled and no cell matches the answer")


def missing_value(table: Table, ctx: ItemContext, seed: int) -> Perturbed:
    """Empty one randomly chosen non-empty relevant cell (target cell when none are labelled).

    The gold becomes ``RECOMPUTE`` with the new answer when ``ctx.derivation`` is arithmetic,
    reproduces the single gold answer, contains the removed number (and no other candidate
    cell has the same magnitude, which would make the literal ambiguous) and stays defined
    with it at 0; otherwise ``NEEDS_PERSON`` with ``answers=None``. The reason is
    in ``params["reason"]`` and ``change.note``.
    """
    cells, source = _needed_cells(table, ctx)
    filled = [cell for cell in cells if table.cell(*cell).strip()]
    if not filled:
        raise PerturbationSkipped("every relevant cell is already empty")
    rng = rng_for(table, "missing_value", seed)
    cell = rng.choice(filled)
    new, changed = mask_cells(table, [cell])
    removed = table.cell(*cell)
    answer, reason = _recompute(table, ctx, cell, filled)
    change = Change(
        row_order=identity(table.n_rows), col_order=identity(table.n_cols), changed_cells=changed, note=reason
    )
    params = {
        "cell": list(cell),
        "cells_from": source,
        "removed": removed,
        "mask": MASK,
        "recomputed": answer is not None,
        "reason": reason,
    }
    if answer is None:
        return result("missing_value", seed, new, change, ctx, effect=AnswerEffect.NEEDS_PERSON, params=params)
    return result(
        "missing_value", seed, new, change, ctx, effect=AnswerEffect.RECOMPUTE, answers=(answer,), params=params
    )


def _recompute(table: Table, ctx: ItemContext, cell: Cell, candidates: list[Cell]) -> tuple[str | None, str]:
    if not ctx.derivation or not ctx.derivation.strip():
        return None, "the item has no derivation to recompute the answer from"
    if len(ctx.answers) != 1:
        return None, f"the item has {len(ctx.answers)} answers; only a single numeric answer is recomputed"
    value = parse_number(table.cell(*cell))
    if value is None:
        return None, "the removed cell is not a number"
    others = [v for other in candidates if other != cell and (v := parse_number(table.cell(*other))) is not None]
    outcome = recompute_with_zero(ctx.derivation, ctx.answers[0], value, others)
    return outcome.answer, outcome.reason


def duplicate_rows(table: Table, ctx: ItemContext, seed: int) -> Perturbed:
    """Copy ``k`` randomly chosen rows (``k`` from 1..max(1, n // 4), distinct rows) to random
    positions. In the change, a copy's ``row_order`` entry is None and ``duplicated_from``
    maps its position to the row it copies."""
    if table.n_rows == 0:
        raise PerturbationSkipped("the table has no data rows to duplicate")
    rng = rng_for(table, "duplicate_rows", seed)
    n = table.n_rows
    k = rng.randint(1, max(1, n // 4))
    sources = sorted(rng.sample(range(n), k))
    positions = rng.sample(range(n + k), k)  # copy of sources[i] goes to positions[i]
    copies = dict(zip(positions, sources, strict=True))
    originals = iter(range(n))
    order = tuple(None if i in copies else next(originals) for i in range(n + k))
    rows = [table.rows[copies[i]] if r is None else table.rows[r] for i, r in enumerate(order)]
    change = Change(row_order=order, col_order=identity(table.n_cols), duplicated_from=dict(sorted(copies.items())))
    params = {"k": k, "rows": sources, "positions": positions}
    return result("duplicate_rows", seed, rebuild(table, table.header, rows), change, ctx, params=params)

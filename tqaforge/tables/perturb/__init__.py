"""Automatic table perturbations: the registry and the one entry point, :func:`perturb`.

>>> from tqaforge.tables.table import Table
>>> t = Table.build(["name", "age"], [["Ann", "26"], ["Bo", "34"], ["Cy", "30"]])
>>> p = perturb("target_rows_bottom", t, ItemContext(answers=("34",)), seed=1)
>>> p.table.rows[-1], p.answer_effect.value, p.answers
(('Bo', '34'), 'unchanged', ('34',))

Each name maps to a pure function ``(table, ctx, seed) -> Perturbed`` (see :mod:`.base`):

===========================  ===========================================  ==============
name                         what it does                                 gold answer
===========================  ===========================================  ==============
none                         nothing (ToRR's unperturbed configuration)   unchanged
shuffle_rows                 random row order (FREB-TQA, ToRR)            unchanged
shuffle_columns              random column order (FREB-TQA, ToRR)         unchanged
target_rows_top/middle/      answer rows into the named third (FREB-TQA)  unchanged
bottom
target_columns_front/back    answer columns into the named half           unchanged
transpose                    rows become columns (FREB-TQA, ToRR)         unchanged
insert_empty_rows            empty rows at random positions (ToRR)        unchanged
remove_relevant_cells        relevant cells emptied (FREB-TQA)            needs a person
remove_table                 one-cell "None" table (FREB-TQA)             needs a person
shift_relevant_rows          relevant rows to random positions (FREB)     unchanged
shorten_to_relevant          relevant rows and columns only (FREB-TQA)    unchanged
missing_value                one relevant cell emptied (Wolff & Hulsebos) recomputed or
                                                                          needs a person
duplicate_rows               rows copied to random positions (W. & H.)    unchanged
===========================  ===========================================  ==============
"""

from __future__ import annotations

import difflib

from tqaforge.tables.perturb.base import (
    Change,
    ItemContext,
    Perturbation,
    PerturbationError,
    PerturbationSkipped,
    Perturbed,
    UnknownPerturbation,
    rng_for,
)
from tqaforge.tables.perturb.mapping import new_position, original_position
from tqaforge.tables.perturb.realistic import duplicate_rows, missing_value
from tqaforge.tables.perturb.relevant import (
    remove_relevant_cells,
    remove_table,
    shift_relevant_rows,
    shorten_to_relevant,
)
from tqaforge.tables.perturb.structure import (
    insert_empty_rows,
    none,
    shuffle_columns,
    shuffle_rows,
    target_columns_back,
    target_columns_front,
    target_rows_bottom,
    target_rows_middle,
    target_rows_top,
    transpose,
)
from tqaforge.tables.table import Table

PERTURBATIONS: dict[str, Perturbation] = {
    "none": none,
    "shuffle_rows": shuffle_rows,
    "shuffle_columns": shuffle_columns,
    "target_rows_top": target_rows_top,
    "target_rows_middle": target_rows_middle,
    "target_rows_bottom": target_rows_bottom,
    "target_columns_front": target_columns_front,
    "target_columns_back": target_columns_back,
    "transpose": transpose,
    "insert_empty_rows": insert_empty_rows,
    "remove_relevant_cells": remove_relevant_cells,
    "remove_table": remove_table,
    "shift_relevant_rows": shift_relevant_rows,
    "shorten_to_relevant": shorten_to_relevant,
    "missing_value": missing_value,
    "duplicate_rows": duplicate_rows,
}

#: Perturbations that move rows or columns (or add rows between them): a question that names
#: positions ("the first row", "the last column", "the year before") may change its answer under
#: them, so the grid skips them for such questions (FREB-TQA appendix A.3).
MOVES_CELLS = frozenset({
    "shuffle_rows", "shuffle_columns", "target_rows_top", "target_rows_middle", "target_rows_bottom",
    "target_columns_front", "target_columns_back", "transpose", "insert_empty_rows",
    "shift_relevant_rows", "duplicate_rows",
})

#: ToRR's four structural perturbations (appendix A.5.2), in its order.
TORR_PERTURBATIONS = ("shuffle_rows", "shuffle_columns", "transpose", "insert_empty_rows")

#: FREB-TQA section 3.3: structure changes for extraction questions (target cells needed).
FREB_STRUCTURE_PERTURBATIONS = (
    "shuffle_rows",
    "shuffle_columns",
    "target_rows_top",
    "target_rows_middle",
    "target_rows_bottom",
    "target_columns_front",
    "target_columns_back",
    "transpose",
)

#: FREB-TQA section 3.4: attention to relevant cells, for reasoning questions.
FREB_RELEVANT_PERTURBATIONS = ("remove_relevant_cells", "remove_table", "shift_relevant_rows")

#: Wolff & Hulsebos' realistic variations (column permutation is ``shuffle_columns``).
REALISTIC_PERTURBATIONS = ("missing_value", "duplicate_rows", "shuffle_columns")


def get_perturbation(name: str) -> Perturbation:
    """The perturbation called ``name``; :class:`UnknownPerturbation` (with a hint) otherwise."""
    try:
        return PERTURBATIONS[name]
    except KeyError:
        close = difflib.get_close_matches(name, PERTURBATIONS, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise UnknownPerturbation(
            f"unknown perturbation {name!r}", hint=hint + "known: " + ", ".join(PERTURBATIONS)
        ) from None


def perturb(name: str, table: Table, ctx: ItemContext, seed: int) -> Perturbed:
    """Apply the perturbation ``name`` to ``table`` for the item ``ctx`` with ``seed``.

    Raises :class:`PerturbationSkipped` (with ``reason``) when it does not apply to the item,
    :class:`UnknownPerturbation` for a name not in :data:`PERTURBATIONS`.
    """
    return get_perturbation(name)(table, ctx, seed)


__all__ = [
    "Change",
    "FREB_RELEVANT_PERTURBATIONS",
    "FREB_STRUCTURE_PERTURBATIONS",
    "ItemContext",
    "MOVES_CELLS",
    "PERTURBATIONS",
    "Perturbation",
    "PerturbationError",
    "PerturbationSkipped",
    "Perturbed",
    "REALISTIC_PERTURBATIONS",
    "TORR_PERTURBATIONS",
    "UnknownPerturbation",
    "get_perturbation",
    "new_position",
    "original_position",
    "perturb",
    "rng_for",
]

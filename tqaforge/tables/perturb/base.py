"""The vocabulary of perturbations: what goes in, what comes out.

A perturbation is a pure function ``(table, item context, seed) -> Perturbed``. It never mutates
its input, draws every random choice from a generator seeded by (table id, perturbation, seed)
so the same inputs give the same table on any machine, and says what it did (which rows and
columns moved where, which cells changed) and what that does to the gold answer. When it cannot
apply (no target cell, a one-row table for a shuffle, no relevant cells labelled) it raises
:class:`PerturbationSkipped` with the reason; the variant grid records the reason and goes on.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from typing import Any, Callable

from tqaforge.errors import TqaforgeError
from tqaforge.tables.effects import AnswerEffect
from tqaforge.tables.source import Cell
from tqaforge.tables.table import Table


class PerturbationSkipped(TqaforgeError):
    """The perturbation does not apply to this item; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class PerturbationError(TqaforgeError):
    """A perturbation was asked for wrongly (unknown name, relevant cells outside the table)."""


class UnknownPerturbation(PerturbationError):
    """No perturbation has the given name."""


@dataclass(frozen=True, slots=True)
class ItemContext:
    """What a perturbation may know about the item besides its table."""

    question: str = ""
    answers: tuple[str, ...] = ()
    relevant_cells: tuple[Cell, ...] | None = None  # (data row, column), header excluded
    # An arithmetic expression over the table's numbers that computes the answer (TAT-QA's
    # ``derivation``, e.g. "(3,574 + 3,497) / 2"); lets missing-value perturbations recompute.
    derivation: str | None = None


@dataclass(frozen=True, slots=True)
class Change:
    """What a perturbation did, in terms of the original table.

    ``row_order[i]`` is the original data row now at position ``i``; None marks a row that is
    not an original row: an inserted empty row, or a duplicate's copy, whose source row
    ``duplicated_from`` gives (so each original row appears at most once in ``row_order`` and
    the mapping can be inverted). ``col_order`` likewise for columns; for a transposed table
    both are None (see :func:`tqaforge.tables.perturb.new_position`). ``changed_cells`` are
    positions in the new table whose text differs from the original cell that moved there.
    """

    row_order: tuple[int | None, ...] | None = None
    col_order: tuple[int | None, ...] | None = None
    changed_cells: tuple[Cell, ...] = ()
    transposed: bool = False
    duplicated_from: dict[int, int] = field(default_factory=dict)  # new row -> original row
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "row_order": list(self.row_order) if self.row_order is not None else None,
            "col_order": list(self.col_order) if self.col_order is not None else None,
            "changed_cells": [list(c) for c in self.changed_cells],
            "transposed": self.transposed,
            "duplicated_from": {str(k): v for k, v in self.duplicated_from.items()},
            "note": self.note,
        }


@dataclass(frozen=True, slots=True)
class Perturbed:
    """The result of one perturbation."""

    perturbation: str
    seed: int
    table: Table
    change: Change
    answer_effect: AnswerEffect
    answers: tuple[str, ...] | None  # the gold after the change; None when a person must decide
    params: dict[str, Any] = field(default_factory=dict)


Perturbation = Callable[[Table, ItemContext, int], Perturbed]


def rng_for(table: Table, perturbation: str, seed: int) -> random.Random:
    """A generator seeded from (table content, perturbation name, seed): machine-independent,
    and different perturbations of one table with one seed do not share their draws."""
    return random.Random(generator_seed(table, perturbation, seed))


def generator_seed(table: Table, perturbation: str, seed: int) -> int:
    """The 64-bit integer :func:`rng_for` seeds Python's Mersenne Twister with: the first 8 bytes
    of SHA-256 of ``"<table id>:<perturbation>:<seed>"``. Every seeded output ever written
    depends on it and on that generator, so neither may change."""
    material = f"{table.id}:{perturbation}:{seed}".encode()
    return int.from_bytes(hashlib.sha256(material).digest()[:8], "big")

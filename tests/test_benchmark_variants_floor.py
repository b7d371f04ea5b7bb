"""``benchmarks/variants.py``'s floor: it times the very generator insert_empty_rows draws from,
and reports the budget the per-part target leaves against it."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from tqaforge.tables.perturb import PERTURBATIONS
from tqaforge.tables.perturb.base import ItemContext, generator_seed, rng_for
from tqaforge.tables.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import variants  # noqa: E402  (a script's module: benchmarks/ is not a package)


def _table() -> Table:
    return Table.build(["a", "b"], [[str(i), str(i * i)] for i in range(9)])


def test_the_seed_timed_is_the_one_insert_empty_rows_draws_from() -> None:
    table = _table()
    got = PERTURBATIONS["insert_empty_rows"](table, ItemContext(), 0)
    generator = random.Random(generator_seed(table, "insert_empty_rows", 0))
    k = generator.randint(1, max(1, table.n_rows // 4))
    assert got.params == {"k": k, "positions": sorted(generator.sample(range(table.n_rows + k), k))}
    assert rng_for(table, "shuffle_rows", 1).random() == random.Random(generator_seed(table, "shuffle_rows", 1)).random()
    assert generator_seed(table, "insert_empty_rows", 0) != generator_seed(table, "insert_empty_rows", 1)
    floor = variants.floor_ours([(table, ItemContext())] * 3, passes=2)
    assert floor["calls"] == 3 and floor["seeding_seconds"] >= 0


def test_the_report_sets_the_seeding_against_the_budget(capsys: pytest.CaptureFixture[str]) -> None:
    n = 886
    variants.report_floor(
        {"seeding_seconds": n * 6e-6, "calls": n},
        {"perturbation_seconds": {"none": n * 4e-6}},
        {"perturbation_seconds": {"insert_empty_rows": n * 6e-6}},
        n,
    )
    out = capsys.readouterr().out
    assert "   6.00 us" in out and "   2.00 us" in out  # unitxt's call, and a third of it
    assert "(3.0x that time)" in out and "(2.0x that time)" in out
    assert "at most 1.00x unitxt" in out

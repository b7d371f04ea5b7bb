"""The variant grid's outputs are byte-identical to the golden digests recorded before issue 26's
speed-ups (tests/variant_golden.py): every perturbation and every serialization of it, on the
data/ sample, on generated hostile tables and (when ../shared holds it) on all of TableBench,
and the prompts file of the grid built end to end on the sample."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import variant_golden as vg
from tqaforge.store import Workspace


@pytest.fixture(scope="module")
def golden() -> dict:
    return json.loads(vg.GOLDEN.read_text())


def _compare(name: str, items: list[vg.Item], golden: dict) -> None:
    got, want = vg.digests(items), golden[name]
    changed = sorted(k for k in want["configurations"] if got["configurations"].get(k) != want["configurations"][k])
    assert set(got["configurations"]) == set(want["configurations"])
    items_changed = [i for i, (a, b) in enumerate(zip(got["items"], want["items"], strict=True)) if a != b]
    assert not changed and not items_changed, f"{name}: configurations {changed[:10]}, items {items_changed[:10]}"


def test_the_sample_grid_has_the_golden_outputs(golden: dict) -> None:
    _compare("sample", vg.tablebench_items(vg.SAMPLE), golden)


def test_hostile_tables_have_the_golden_outputs(golden: dict) -> None:
    """Escapes, separators inside cells, duplicate names, numbers and near-numbers, empty tables."""
    _compare("hostile", vg.hostile_items(), golden)


def test_tablebench_grid_has_the_golden_outputs(golden: dict) -> None:
    if not vg.TABLEBENCH.exists():
        pytest.skip(f"shared data not available: {vg.TABLEBENCH}")
    _compare("tablebench", vg.tablebench_items(vg.TABLEBENCH), golden)


def test_the_sample_prompts_file_has_the_golden_bytes(sqlite_workspace: Workspace, tmp_path: Path, golden: dict) -> None:
    assert vg.prompts_digest(sqlite_workspace, tmp_path / "prompts.jsonl") == golden["prompts_sample"]


def test_the_golden_sets_cover_every_configuration_and_skip(golden: dict) -> None:
    """Control: each set has every (condition, seed, format) and the hostile set reaches the skips."""
    keys = {f"{n}/{s}/{f}" for n, s in vg.configurations() for f in (*vg.FORMATS, "perturbed")}
    for name in ("sample", "hostile"):
        assert set(golden[name]["configurations"]) == keys
    skipped = [vg.PERTURBATIONS[n] for n in ("shuffle_rows", "shuffle_columns")]
    reasons = set()
    for table, ctx in vg.hostile_items():
        for fn in skipped:
            try:
                fn(table, ctx, 0)
            except vg.PerturbationSkipped as exc:
                reasons.add(exc.reason.split(";")[0][:20])
    assert len(reasons) >= 3, reasons

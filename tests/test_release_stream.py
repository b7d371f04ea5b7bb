"""The streamed release: the same bytes as the release built in memory before it (golden hashes),
Parquet split into row groups only past a size, and a release's peak memory bounded."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tqaforge.annotation.human_import import import_human_work
from tqaforge.release.build import ReleaseOptions, build_release
from tqaforge.store import Workspace
from tqaforge.tables.perturb import TORR_PERTURBATIONS
from tqaforge.variants.grid import GridOptions, build_variant_grid

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"
#: The sha256 of every file of the sample's release, recorded with the in-memory build (commit
#: 02ad297, before the streamed one): the streamed build must give the same bytes.
GOLDEN = Path(__file__).resolve().parent / "golden" / "release_sample_sha256.json"


@pytest.fixture
def sample_with_grid(sqlite_workspace: Workspace) -> Workspace:
    """TableBench's and FREB-TQA's samples with ToRR's grid built (so every subset has rows or is empty)."""
    import_human_work(sqlite_workspace, [SAMPLE / "tablebench_sample.jsonl", SAMPLE / "freb_agg_com"])
    build_variant_grid(sqlite_workspace, GridOptions(perturbations=("none", *TORR_PERTURBATIONS), serializations=("csv",),
                                                     write_prompts=False, skip_structural=False, status=None))
    return sqlite_workspace


def _hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_sample_release_has_the_golden_bytes(sample_with_grid: Workspace, tmp_path: Path) -> None:
    out = tmp_path / "r"
    build_release(sample_with_grid, ReleaseOptions(version="1.0.0", out=out, accept_low_agreement="golden"))
    assert _hashes(out) == json.loads(GOLDEN.read_text())

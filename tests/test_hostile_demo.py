"""Hostile inputs of the demo build and of `serve --push-pending`: no data, part of it missing, a
directory that holds another workspace, a workspace without a running Label Studio. Each is a clear
message (what, where, what to do), nothing is half made, nothing is lost."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tqaforge.launch import push_pending_lines
from tqaforge.store import init_workspace

pytestmark = pytest.mark.hostile

DATA = Path(__file__).resolve().parents[1] / "data"


def _demo(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TQAFORGE_", "OPENAI_"))}
    env["COLUMNS"] = "500"  # one line per message, whatever the path lengths
    return subprocess.run([sys.executable, "-m", "tqaforge", "demo", *args], env=env, capture_output=True, text=True, timeout=120)


def test_no_data_directory_is_named_with_the_fix_and_nothing_is_made(tmp_path: Path) -> None:
    result = _demo(str(tmp_path / "demo"), "--data", str(tmp_path / "nowhere"))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "the demo's data is not there" in result.stderr and str(tmp_path / "nowhere" / "tables") in result.stderr
    assert "--data" in result.stderr  # the fix
    assert not (tmp_path / "demo").exists()


def test_a_missing_predictions_file_is_named_before_anything_is_made(tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(DATA, data)
    (data / "predictions" / "probes_dp.jsonl").unlink()
    result = _demo(str(tmp_path / "demo"), "--data", str(data))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert str(data / "predictions" / "probes_dp.jsonl") in result.stderr
    assert not (tmp_path / "demo").exists()


def test_another_workspace_is_refused_and_left_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`tqaforge demo .` in someone's own benchmark must not fill it with probes and example reviews."""
    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    init_workspace(tmp_path / "mybench", name="mybench").close()
    before = (tmp_path / "mybench" / "tqaforge.db").read_bytes()
    result = _demo(str(tmp_path / "mybench"), "--data", str(DATA))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "holds the workspace 'mybench', not a demo workspace" in result.stderr and "tqaforge demo demo-workspace" in result.stderr
    assert (tmp_path / "mybench" / "tqaforge.db").read_bytes() == before


def test_push_pending_without_label_studio_says_why_and_pushes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    init_workspace(tmp_path / "ws", name="ws").close()
    lines = push_pending_lines(tmp_path / "ws")
    assert len(lines) == 1 and lines[0].startswith("nothing pushed to Label Studio: "), lines

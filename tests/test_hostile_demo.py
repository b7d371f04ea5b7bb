"""Hostile inputs of the demo build and of `serve --push-pending`: no data, part of it missing, a
directory that holds another workspace, a workspace without a running Label Studio. Each is a clear
message (what, where, what to do), nothing is half made, nothing is lost."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
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


@pytest.mark.parametrize("shipped", ["predictions/probes_dp.jsonl", "batches/demo_answers_out.jsonl"])
def test_a_missing_shipped_file_is_named_before_anything_is_made(tmp_path: Path, shipped: str) -> None:
    """A predictions file or a file of offline replies missing from the data: named, nothing made."""
    data = tmp_path / "data"
    shutil.copytree(DATA, data)
    (data / shipped).unlink()
    result = _demo(str(tmp_path / "demo"), "--data", str(data))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert str(data / shipped) in result.stderr
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


def test_data_without_the_example_edits_table_stops_the_build_and_records_nothing(tmp_path: Path) -> None:
    """The example value modification is made on one FREB-TQA question's shortened table: data in
    which that table changed (so its question is another one, without published cells) is refused,
    naming the question, and no example edit is recorded half-right."""
    data = tmp_path / "data"
    shutil.copytree(DATA, data)
    sample = data / "sample" / "tat_nonfactoid_dev_sample.jsonl"
    lines = sample.read_text(encoding="utf-8").splitlines(keepends=True)
    assert '"Appliances in 2019 from 2018' not in lines[1] and "Appliances in 2019 from 2018?" in lines[1]
    lines[1] = lines[1].replace('["Appliances", "680"', '["Appliances", "690"')
    sample.write_text("".join(lines), encoding="utf-8")
    result = _demo(str(tmp_path / "demo"), "--data", str(data))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "example value modification needs the shortened table of 'What was the change in the amount for Appliances" \
        in result.stderr and "check data/sample" in result.stderr
    with sqlite3.connect(tmp_path / "demo" / "tqaforge.db") as db:
        assert db.execute("SELECT COUNT(*) FROM annotations WHERE kind = 'value_modification' AND source = 'demo'").fetchone()[0] == 0


def test_replies_that_answer_other_requests_stop_the_build_and_nothing_is_sent(tmp_path: Path) -> None:
    """Stale replies (the prompts changed, so the requests' ids did): the build stops and names the
    file and the script that writes it again; the requests wait in their batch, nothing was sent and
    no reply was taken for another request."""
    data = tmp_path / "data"
    shutil.copytree(DATA, data)
    replies = data / "batches" / "demo_answers_out.jsonl"
    lines = [json.loads(line) for line in replies.read_text(encoding="utf-8").splitlines()]
    for line in lines:
        line["custom_id"] = line["custom_id"][::-1]
    replies.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    result = _demo(str(tmp_path / "demo"), "--data", str(data))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"{replies} does not answer 4 of the demo's answers requests" in result.stderr
    assert "tests/demo_agents.py" in result.stderr  # the fix
    with sqlite3.connect(tmp_path / "demo" / "tqaforge.db") as db:
        # The question writer's reply (still right) was taken; none of the answering agents'.
        assert db.execute("SELECT transport, status, COUNT(*) FROM llm_calls GROUP BY 1, 2").fetchall() == [("offline", "ok", 1)]
        assert db.execute("SELECT COUNT(*) FROM answers WHERE method = 'vote'").fetchone()[0] == 0
    assert len((tmp_path / "demo" / "batches" / "demo-answers-requests.jsonl").read_text().splitlines()) == 4

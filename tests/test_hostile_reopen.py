"""Hostile input to sending suspect gold to adjudication (tqaforge/annotation/reopen.py): evidence
that is huge or full of control characters, release ids that match nothing, two runs at once
(real processes on one SQLite file, and on PostgreSQL when TQAFORGE_TEST_DATABASE_URL is set)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from labelstudio_helpers import build_workspace
from sqlalchemy import text

from tqaforge.annotation.adjudication import adjudication_queue
from tqaforge.annotation.reopen import MAX_EVIDENCE_CHARS, QUEUED, UNKNOWN, SuspectRequest, send_to_adjudication
from tqaforge.errors import AdjudicationError
from tqaforge.queries import CHECKED_BY_PEOPLE, trusted_answers
from tqaforge.schemas.enums import QuestionStatus
from tqaforge.schemas.records import Question
from tqaforge.store import Workspace

pytestmark = pytest.mark.hostile
REPO = Path(__file__).resolve().parents[1]


def _gold_questions(ws: Workspace) -> list[str]:
    with ws.session() as s:
        ids = [q.id for q in s.exec(Question.__table__.select()).all()]  # type: ignore[attr-defined]
        return sorted(trusted_answers(s, ids, at_least=CHECKED_BY_PEOPLE))


def _counts(ws: Workspace) -> tuple[int, int]:
    with ws.connection() as conn:
        return (int(conn.execute(text("SELECT count(*) FROM annotation_tasks")).scalar_one()),
                int(conn.execute(text("SELECT count(*) FROM adjudication_flags")).scalar_one()))


def test_huge_and_odd_evidence_is_stored_escaped_and_cut(workspace: Workspace) -> None:
    build_workspace(workspace, proposed=0)
    item = _gold_questions(workspace)[0]
    evidence = "\x00\x1b[31mred\x1b[0m \u202eevil\r" + "r -0.9 " * 200_000 + "\n| `code` [link](http://x)"
    details = {"r": float("nan"), "p": float("inf"), "who": ["a\x00b"], "deep": {"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {"i": {"j": 1}}}}}}}}}},
               "thing": object()}
    sent = send_to_adjudication(workspace, [SuspectRequest(item, evidence, details=details, release="r\x1b[2J 1.0")])
    assert [f.outcome for f in sent.flags] == [QUEUED]
    with workspace.connection() as conn:
        stored, raw_details, release = conn.execute(text("SELECT evidence, details, release FROM adjudication_flags")).one()
    assert "\x00" not in stored and "\x1b" not in stored and "\u202e" not in stored and "\r" not in stored
    assert stored.startswith("\\x00\\x1b[31mred") and len(stored) < MAX_EVIDENCE_CHARS + 60
    assert stored.endswith("more characters cut)") and "\x1b" not in release
    loaded = raw_details if isinstance(raw_details, dict) else json.loads(raw_details)
    assert loaded["r"] is None and loaded["p"] is None and loaded["who"] == ["a\\x00b"] and isinstance(loaded["thing"], str)
    (queued,) = adjudication_queue(workspace).items
    line = queued.flags[0].line()
    assert "\x1b" not in line and "\n" not in line and "\\x1b[31m" in line


@pytest.mark.parametrize("reference", ["", "x" * 10_000, "../../etc/passwd", "'; DROP TABLE questions; --", "q\x00"])
def test_a_release_id_that_matches_nothing_is_reported_and_nothing_is_written(workspace: Workspace, reference: str) -> None:
    build_workspace(workspace, proposed=2)
    before = _counts(workspace)
    sent = send_to_adjudication(workspace, [SuspectRequest(reference, "r -0.9"), SuspectRequest(reference, "r -0.9", target="task")])
    assert [f.outcome for f in sent.flags] == [UNKNOWN, UNKNOWN]
    assert "\x00" not in "\n".join(sent.lines()) and all(len(line) < 400 for line in sent.lines())
    assert _counts(workspace) == before


def test_a_question_without_gold_and_a_bad_call_are_reported(workspace: Workspace) -> None:
    proposed = build_workspace(workspace, proposed=1)["questions"][0]  # no trusted answer: never in a release
    before = _counts(workspace)
    sent = send_to_adjudication(workspace, [SuspectRequest(proposed, "r -0.9"), SuspectRequest(proposed, "x", target="nope")])  # type: ignore[arg-type]
    assert [f.outcome for f in sent.flags] == [UNKNOWN, UNKNOWN] and "no gold answer" in sent.flags[0].detail
    assert "unknown target" in sent.flags[1].detail and _counts(workspace) == before
    with workspace.session() as s:
        assert s.get(Question, proposed).status == QuestionStatus.PROPOSED  # type: ignore[union-attr]
    with pytest.raises(AdjudicationError, match="list of SuspectRequest"):
        send_to_adjudication(workspace, ["q1"])  # type: ignore[list-item]


_RUN = """
import json, os, sys, time
from pathlib import Path
from tqaforge.annotation.reopen import SuspectRequest, send_to_adjudication
from tqaforge.store import open_workspace
root, ids, me = Path(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
ws = open_workspace(root)
(root / f"ready-{me}").touch()
while not (root / "go").exists():
    time.sleep(0.005)
sent = send_to_adjudication(ws, [SuspectRequest(i, f"evidence from {me}") for i in ids])
ws.close()
print(json.dumps(sent.counts()))
"""


def test_two_runs_at_once_file_each_finding_once(workspace: Workspace) -> None:
    build_workspace(workspace, proposed=0)
    ids = _gold_questions(workspace)
    tasks_before, _ = _counts(workspace)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-c", _RUN, str(workspace.root), json.dumps(ids), me], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for me in ("a", "b")]
    deadline = time.monotonic() + 60
    while not all((workspace.root / f"ready-{me}").exists() for me in ("a", "b")):  # both opened: start together
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        time.sleep(0.01)
    (workspace.root / "go").touch()
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        results.append(json.loads(out))
    assert sum(r["queued"] for r in results) == len(ids)  # each filed once, by one of them
    assert sum(r["already queued"] for r in results) == len(ids)
    assert _counts(workspace) == (tasks_before + len(ids), len(ids))
    assert adjudication_queue(workspace, limit=1).total == len(ids)

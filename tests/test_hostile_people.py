"""Hostile use of the annotator registry (issue 24, item 2): unknown names, merging a person into
themselves, unknown ids, names with control characters, two merges at once. Each ends with a
clear message and nothing lost: the same labels, each with its original author."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from labelstudio_helpers import build_workspace
from sqlmodel import select
from typer.testing import CliRunner

from tqaforge.cli import app
from tqaforge.labels import record_annotation
from tqaforge.people import resolve_account
from tqaforge.schemas.records import Annotation, Annotator
from tqaforge.store import Workspace

pytestmark = pytest.mark.hostile

runner = CliRunner(env={"COLUMNS": "200"})
REPO = Path(__file__).resolve().parents[1]
CONTROL = "an\x1b[2Ja\u202e\r"


def cli(ws: Workspace, *args: str, ok: bool = True) -> str:
    result = runner.invoke(app, ["--workspace", str(ws.root), *args])
    assert (result.exit_code == 0) == ok, result.output
    assert "Traceback" not in result.output
    return result.output


def snapshot(ws: Workspace) -> tuple[list[tuple[str, str, str]], dict[str, tuple[str, str | None]]]:
    """Every label (id, author string, label) and every annotator (name, merged into)."""
    with ws.session() as s:
        labels = sorted((a.id, a.annotator, json.dumps(a.label, sort_keys=True)) for a in s.exec(select(Annotation)).all())
        people = {p.id: (p.name, p.merged_into) for p in s.exec(select(Annotator)).all()}
    return labels, people


@pytest.fixture
def store(sqlite_workspace: Workspace) -> tuple[Workspace, list[str]]:
    """ana (CLI) and ben review two questions; ana's Label Studio account labels one."""
    ws = sqlite_workspace
    qids = sorted(build_workspace(ws, proposed=2)["questions"])
    for who in ("ana", "ben"):
        for qid in qids:
            cli(ws, "questions", "review", qid[:10], "--accept", "--annotator", who, "--new")
    with ws.session() as s:
        record_annotation(s, kind="question_typing", target_type="question", target_id=qids[0], annotator="ls:x",
                          label={"type": "reasoning"}, source="labelstudio", annotator_id=resolve_account(s, "ana@lab.org").id)
    return ws, qids


def test_an_unknown_name_is_refused_with_the_known_ones_and_records_nothing(store) -> None:
    ws, qids = store
    before = snapshot(ws)
    out = cli(ws, "questions", "review", qids[0][:10], "--reject", "--reason", "x", "--annotator", "anna", ok=False)
    assert "unknown annotator 'anna'; known: ana, ben" in out and "--new" in out
    assert snapshot(ws) == before


def test_names_with_control_characters_are_refused_escaped(store) -> None:
    ws, qids = store
    before = snapshot(ws)
    for args in (("annotators", "new", CONTROL), ("annotators", "merge", "ana", CONTROL),
                 ("questions", "review", qids[0][:10], "--accept", "--annotator", CONTROL, "--new")):
        out = cli(ws, *args, ok=False)
        assert "control characters" in out and "\\x1b[2J" in out and "\\u202e" in out
        assert "\x1b[2J" not in out and "\u202e" not in out and "\r" not in out
    assert snapshot(ws) == before


def test_merging_a_person_into_themselves_is_refused(store) -> None:
    ws, _ = store
    before = snapshot(ws)
    assert "are one annotator already" in cli(ws, "annotators", "merge", "ana", "ana", ok=False)
    assert "are one annotator already" in cli(ws, "annotators", "merge", "ana", " ANA ", ok=False)
    assert snapshot(ws) == before


def test_merging_unknown_ids_names_them_and_changes_nothing(store) -> None:
    ws, _ = store
    before = snapshot(ws)
    out = cli(ws, "annotators", "merge", "ana", "nobody", ok=False)
    assert "no annotator 'nobody' in the store" in out and "ana" in out and "ben" in out
    out = cli(ws, "annotators", "merge", "ghost", "ben", ok=False)
    assert "no annotator 'ghost' in the store" in out
    assert snapshot(ws) == before


def test_an_identity_merged_already_is_not_merged_again(store) -> None:
    ws, _ = store
    pseudonym = next(p for p in snapshot(ws)[1] if p.startswith("ls:"))
    cli(ws, "annotators", "merge", "ana", pseudonym)
    labels, people = snapshot(ws)
    out = cli(ws, "annotators", "merge", "ben", pseudonym, ok=False)
    assert f"'{pseudonym}' was merged into 'ana' already" in out
    assert snapshot(ws) == (labels, people) and people[pseudonym] == (pseudonym, "ana") and people["ana"][1] is None


def test_two_merges_at_once_one_wins_and_nothing_is_lost(store) -> None:
    """Two processes merge the same identity into two people at the same moment: exactly one
    succeeds, the other says it was merged already (or meanwhile); no label changes."""
    ws, _ = store
    labels, people = snapshot(ws)
    pseudonym = next(p for p in people if p.startswith("ls:"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    command = [sys.executable, "-m", "tqaforge", "--workspace", str(ws.root), "annotators", "merge"]
    runs = [subprocess.Popen([*command, keep, pseudonym], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for keep in ("ana", "ben")]
    outcomes = [(run.wait(timeout=120), run.stdout.read() if run.stdout else "") for run in runs]
    assert sorted(code for code, _ in outcomes) == [0, 1], outcomes
    failed = next(out for code, out in outcomes if code)
    assert "already" in failed or "meanwhile" in failed, failed
    assert "Traceback" not in failed
    after_labels, after_people = snapshot(ws)
    assert after_labels == labels  # every label, with its original author
    winner = after_people[pseudonym][1]
    assert winner in ("ana", "ben") and after_people["ana"][1] is None and after_people["ben"][1] is None
    with ws.session() as s:
        ids = {a.annotator_id for a in s.exec(select(Annotation).where(Annotation.annotator == "ls:x")).all()}
    assert ids == {winner}

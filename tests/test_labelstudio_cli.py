"""The Label Studio commands a user runs, on the run's real Label Studio: `annotators add|list`,
`labelstudio push|pull` (also against a server given with --url), and a push whose server is
stopped midway, then completed by the next push with no duplicate task."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import wait_for
from labelstudio_helpers import annotate, build_workspace, choice, login, new_email
from sqlmodel import func, select
from typer.testing import CliRunner

from tqaforge.annotation.labelstudio import manage
from tqaforge.annotation.labelstudio.client import LabelStudioClient
from tqaforge.annotation.labelstudio.server import LabelStudioError
from tqaforge.cli import app
from tqaforge.ids import labelstudio_annotator
from tqaforge.schemas.records import Annotation, LabelStudioTaskCopy
from tqaforge.store import Workspace, open_workspace

runner = CliRunner(env={"COLUMNS": "200"})


def _run(root: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = runner.invoke(app, ["-w", str(root), *args], env=env)
    return result.exit_code, result.output


def test_annotators_push_pull_through_the_cli_with_url(label_studio, sqlite_workspace: Workspace) -> None:
    ws = sqlite_workspace
    build_workspace(ws, proposed=3)
    env = {manage.TOKEN_ENV: label_studio.token}
    url = ["--url", label_studio.url]
    ana, ben = new_email("ana"), new_email("ben")

    code, added = _run(ws.root, "annotators", "add", ana, "--name", "Ana Lopez", *url, env=env)
    assert code == 0, added
    password = re.search(r"the password (\S+)", added)
    assert password and labelstudio_annotator(ana) in added
    ana_token = login(label_studio.url, ana, password.group(1))  # the printed login works
    code, again = _run(ws.root, "annotators", "add", ana, *url, env=env)
    assert code == 1 and "already has a Label Studio account" in again
    code, added = _run(ws.root, "annotators", "add", ben, *url, env=env)
    ben_token = login(label_studio.url, ben, re.search(r"the password (\S+)", added).group(1))  # type: ignore[union-attr]

    code, pushed = _run(ws.root, "labelstudio", "push", "question_review", "-a", ana, "-a", ben, "--json", *url, env=env)
    assert code == 0, pushed
    summary = json.loads(pushed)
    assert (summary["pending"], summary["copies_created"], summary["overlap"]) == (3, 6, 2)
    code, listed = _run(ws.root, "annotators", "list", "--json", *url, env=env)
    rows = {(r["email"], r["kind"]): r for r in json.loads(listed)["rows"]}
    assert rows[(ana, "question_review")]["assigned"] == 3 and rows[(ana, "question_review")]["labelled"] == 0
    assert rows[(ana, "question_review")]["name"] == "Ana Lopez"

    with ws.session() as s:
        copies = s.exec(select(LabelStudioTaskCopy)).all()
    tokens = {ana: ana_token, ben: ben_token}
    for copy in copies:
        annotate(label_studio.url, tokens[copy.annotator], copy.ls_task_id,
                 [choice("decision", "question", "accept"), choice("subtype_right", "category", "yes")])
    code, pulled = _run(ws.root, "labelstudio", "pull", *url, env=env)
    assert code == 0 and "6 new labels" in pulled, pulled
    code, listed = _run(ws.root, "annotators", "list", *url, env=env)
    line = next(line for line in listed.splitlines() if line.startswith(ana))
    assert "question_review" in line and "3 / 3" in line and "100%" in line, listed
    code, again = _run(ws.root, "labelstudio", "pull", "--full", "--json", *url, env=env)
    assert json.loads(again)["recorded"] == 0 and json.loads(again)["unchanged"] == 6
    with ws.session() as s:
        assert s.exec(select(func.count()).select_from(Annotation)).one() == 6


@pytest.mark.hostile
def test_sync_commands_say_what_is_missing(sqlite_workspace: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cases: push with no server for this workspace, --url without a token, an unknown kind, a bad
    [labelstudio] overlap."""
    root = sqlite_workspace.root
    code, output = _run(root, "labelstudio", "push", "question_review", "-a", "a@x.org")
    assert code == 1 and "Label Studio is not running for this workspace" in output and "labelstudio start" in output
    monkeypatch.delenv(manage.TOKEN_ENV, raising=False)
    code, output = _run(root, "labelstudio", "pull", "--url", "http://127.0.0.1:9")
    assert code == 1 and manage.TOKEN_ENV in output
    config = root / "tqaforge.toml"
    config.write_text(config.read_text() + "\n[labelstudio]\noverlap = { question_reviews = 2 }\n")
    with pytest.raises(LabelStudioError, match="unknown kind 'question_reviews'"):
        manage.configured_overlap(root, "question_review")
    config.write_text(config.read_text().replace("question_reviews = 2", "question_review = 0"))
    with pytest.raises(LabelStudioError, match="question_review = 0 must be a whole number of annotators, 1 or more"):
        manage.configured_overlap(root, "question_review")


def _project_tasks(url: str, token: str, project_id: int) -> list[str]:
    from tqaforge.annotation.labelstudio.client import client_settings

    with LabelStudioClient(client_settings(url, token)) as client:
        return [t["data"]["tqaforge_task_id"] for t in client.pages(
            "/api/tasks/", what="list", params={"project": project_id}, key="tasks")]


@pytest.mark.hostile
@pytest.mark.stops_label_studio
def test_server_stopped_mid_push_then_the_next_push_completes_without_duplicates(label_studio) -> None:
    """Case: Label Studio stopped (`tqaforge labelstudio stop`) while a push imports its batches.
    The push fails with a clear error and keeps what it recorded; after a restart the same
    command completes, and Label Studio and the store hold each task exactly once."""
    root = label_studio.root
    ws = open_workspace(root)
    build_workspace(ws, proposed=300)
    annotator = new_email("mid")
    # An account on the workspace's one server (the earlier layout this test is about), not a
    # server of their own: the push below goes to the one server.
    code, added = _run(root, "annotators", "add", annotator, "--url", label_studio.url,
                       env={manage.TOKEN_ENV: label_studio.token})
    assert code == 0, added
    push = [sys.executable, "-m", "tqaforge", "-w", str(root), "labelstudio", "push", "question_review", "-a", annotator,
            "--overlap", "1", "--batch-size", "10"]
    first = subprocess.Popen(push, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "COLUMNS": "200"})

    def copies() -> int:
        with ws.session() as s:
            return int(s.exec(select(func.count()).select_from(LabelStudioTaskCopy)).one())

    try:
        wait_for(lambda: copies() >= 30 or first.poll() is not None, 120, "the push to record its first batches", 0.02)
        assert first.poll() is None, "the push finished before the server could be stopped: make it bigger"
        assert "stopped Label Studio" in manage.stop(root).message
        stdout, stderr = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 1, stdout + stderr
    assert "could not" in stderr and "running the same command again completes the rest" in stderr, stderr
    kept = copies()
    assert 30 <= kept < 300

    started = subprocess.run([sys.executable, "-m", "tqaforge", "-w", str(root), "labelstudio", "start"],
                             capture_output=True, text=True, timeout=400)
    assert started.returncode == 0, started.stdout + started.stderr
    again = subprocess.run(push + ["--json"], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert summary["copies_present"] == kept and summary["copies_created"] + summary["copies_recovered"] == 300 - kept
    assert summary["duplicates"] == []
    with ws.session() as s:
        rows = s.exec(select(LabelStudioTaskCopy).where(LabelStudioTaskCopy.annotator == annotator)).all()
    held = _project_tasks(label_studio.url, label_studio.token, rows[0].ls_project_id)
    assert len(rows) == 300 and len(held) == 300 and len(set(held)) == 300
    assert set(held) == {r.task_id for r in rows}
    quiet = subprocess.run(push + ["--json"], capture_output=True, text=True, timeout=300)
    assert json.loads(quiet.stdout)["copies_created"] == 0

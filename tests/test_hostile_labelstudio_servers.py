"""Hostile: annotators' own Label Studio servers failing under the sync, on the run's real servers
(ana's and ben's, started by conftest): a server killed in the middle of a pull, a server's
directory removed by hand, a token revoked, two pulls at once. Each ends with a clear message
naming the annotator, the other server still syncs, and nothing is duplicated or lost: the
labels in the store grow by exactly the revisions made in Label Studio.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from labelstudio_helpers import add_proposed_question, flip_all, open_servers_workspace, own_login, project_of
from sqlmodel import func, select
from typer.testing import CliRunner

from tqaforge.annotation.labelstudio import manage, sync
from tqaforge.annotation.labelstudio.annotator_servers import select_servers
from tqaforge.annotation.labelstudio.sync import readable_title
from tqaforge.cli import app
from tqaforge.ids import annotation_task_id, labelstudio_annotator
from tqaforge.schemas.records import Annotation, LabelStudioTaskCopy
from tqaforge.store import Workspace

pytestmark = pytest.mark.hostile

runner = CliRunner(env={"COLUMNS": "200"})
REVIEW = readable_title("question_review")


def _run(root: Path, *args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["-w", str(root), *args])
    return result.exit_code, result.output


def _labels(ws: Workspace, who: str | None = None) -> int:
    with ws.session() as s:
        query = select(func.count()).select_from(Annotation)
        if who is not None:
            query = query.where(Annotation.annotator == labelstudio_annotator(who))
        return int(s.exec(query).one())


def _ready(root: Path) -> Workspace:
    """The workspace, pushed and pulled to the end, so a test counts only its own revisions."""
    ws = open_servers_workspace(root)
    code, output = _run(root, "labelstudio", "push", "question_review")
    assert code == 0, output
    code, output = _run(root, "labelstudio", "pull")
    assert code == 0, output
    return ws


def _flip(root: Path, who: str) -> int:
    login = own_login(root, who)
    project = project_of(login.url, login.token, REVIEW)
    assert project is not None
    return flip_all(login.url, login.token, project)


def test_two_pulls_at_once_record_each_label_once(annotator_servers) -> None:
    root, ana, ben = annotator_servers.root, annotator_servers.ana, annotator_servers.ben
    ws = _ready(root)
    before = _labels(ws)
    made = _flip(root, ana) + _flip(root, ben)
    command = [sys.executable, "-m", "tqaforge", "-w", str(root), "labelstudio", "pull", "--json"]
    pulls = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [pull.communicate(timeout=300) for pull in pulls]
    assert [pull.returncode for pull in pulls] == [0, 0], results
    recorded = sorted(json.loads(out)["recorded"] for out, _ in results)
    assert recorded == [0, made], results  # one pull waited for the other, then found it all recorded
    assert _labels(ws) - before == made


def test_a_server_killed_in_the_middle_of_a_pull(annotator_servers, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second annotator's server is killed (SIGKILL, its whole process tree) while the first
    one's labels are being recorded: the pull names it, keeps the first one's labels; the next
    pull, after a restart, brings the rest, none twice."""
    root, ana, ben = annotator_servers.root, annotator_servers.ana, annotator_servers.ben
    ws = _ready(root)
    before = {who: _labels(ws, who) for who in (ana, ben)}
    made = {who: _flip(root, who) for who in (ana, ben)}
    order: list[str] = []
    real = sync._pull_tasks

    def record_then_kill(ws_: Workspace, spec, project_id, owner, ls_tasks, users, summary) -> None:  # type: ignore[no-untyped-def]
        real(ws_, spec, project_id, owner, ls_tasks, users, summary)
        if not order:
            order.append(owner)
            other = ben if owner == ana else ana
            pid = manage.status(select_servers(root, [other])[0]).pid
            assert pid is not None
            os.killpg(pid, signal.SIGKILL)

    monkeypatch.setattr(sync, "_pull_tasks", record_then_kill)
    summary = sync.pull(ws, manage.connections(ws))
    monkeypatch.undo()
    first = order[0]
    killed = ben if first == ana else ana
    assert summary.recorded == made[first] and summary.incomplete and killed in summary.incomplete, summary.lines()
    assert any(line.startswith(killed) for line in summary.down), summary.down
    assert _labels(ws, first) - before[first] == made[first] and _labels(ws, killed) == before[killed]

    code, output = _run(root, "labelstudio", "start", "--annotator", killed)  # the stale pid file is noted and removed
    assert code == 0, output
    code, output = _run(root, "labelstudio", "pull", "--json")
    assert code == 0 and json.loads(output)["recorded"] == made[killed], output
    assert {who: _labels(ws, who) - before[who] for who in (ana, ben)} == made  # nothing lost, nothing twice


def test_a_revoked_token_is_named_and_the_other_server_still_syncs(annotator_servers) -> None:
    root, ana, ben = annotator_servers.root, annotator_servers.ana, annotator_servers.ben
    ws = _ready(root)
    before = {who: _labels(ws, who) for who in (ana, ben)}
    made = {who: _flip(root, who) for who in (ana, ben)}
    login = own_login(root, ben)
    with httpx.Client(base_url=login.url, headers={"Authorization": f"Token {login.token}"}) as me:
        new_token = me.post("/api/current-user/reset-token/").raise_for_status().json()["token"]
    assert new_token != login.token
    code, output = _run(root, "labelstudio", "pull")
    assert code == 1, output
    assert f"down: {ben}" in output and "refuses the API token" in output and "credentials.json" in output, output
    assert _labels(ws, ana) - before[ana] == made[ana] and _labels(ws, ben) == before[ben]
    # What the message says to do: the new token into the credentials file.
    path = manage.credentials_path(select_servers(root, [ben])[0])
    kept = json.loads(path.read_text())
    path.write_text(json.dumps({**kept, "token": new_token}))
    code, output = _run(root, "labelstudio", "pull", "--json")
    assert code == 0 and json.loads(output)["recorded"] == made[ben], output
    assert {who: _labels(ws, who) - before[who] for who in (ana, ben)} == made


@pytest.mark.stops_label_studio
def test_a_servers_directory_removed_by_hand(annotator_servers) -> None:
    """ben's server directory (database, login) is removed by hand: pull and push name him, ana
    still syncs, his labels pulled before stay; given a server again, his waiting task goes there."""
    root, ana, ben = annotator_servers.root, annotator_servers.ana, annotator_servers.ben
    ws = _ready(root)
    _flip(root, ben)  # every task he has so far carries his label, pulled below
    code, output = _run(root, "labelstudio", "pull")
    assert code == 0, output
    waiting = add_proposed_question(ws, "Which row has the largest value? (hostile: directory removed)")
    code, output = _run(root, "labelstudio", "push", "question_review")
    assert code == 0, output
    before = {who: _labels(ws, who) for who in (ana, ben)}
    made = _flip(root, ana)
    code, output = _run(root, "labelstudio", "stop", "--annotator", ben)
    assert code == 0, output
    shutil.rmtree(select_servers(root, [ben])[0].directory)
    code, output = _run(root, "labelstudio", "pull")
    assert code == 1 and f"{ben} has no Label Studio server of their own" in output and "annotators add" in output, output
    assert _labels(ws, ana) - before[ana] == made and _labels(ws, ben) == before[ben]
    code, output = _run(root, "labelstudio", "push", "question_review")
    assert code == 1 and f"{ben} has no Label Studio server" in output, output
    code, output = _run(root, "labelstudio", "status")
    assert ben not in output, output

    code, output = _run(root, "annotators", "add", ben, "--name", "Ben Okafor")
    assert code == 0 and "127.0.0.3" in output, output
    code, output = _run(root, "labelstudio", "start", "--annotator", ben)
    assert code == 0, output
    code, output = _run(root, "labelstudio", "push", "question_review", "--json")
    assert code == 0, output
    pushed = json.loads(output)
    assert pushed["copies_resent"] == 1 and pushed["projects_created"] == [ben], pushed
    login = own_login(root, ben)
    project = project_of(login.url, login.token, REVIEW)
    with httpx.Client(base_url=login.url, headers={"Authorization": f"Token {login.token}"}) as me:
        tasks = me.get("/api/tasks/", params={"project": project}).raise_for_status().json()["tasks"]
    task_id = annotation_task_id("question_review", "question", waiting)
    with ws.session() as s:
        copy = s.exec(select(LabelStudioTaskCopy).where(LabelStudioTaskCopy.annotator == ben,
                                                        LabelStudioTaskCopy.task_id == task_id)).one()
    # The one task still waiting for his label, and nothing else (what he labelled stays pulled).
    assert copy.ls_project_id == project and [t["data"]["tqaforge_task_id"] for t in tasks] == [task_id]
    assert _labels(ws, ben) == before[ben]

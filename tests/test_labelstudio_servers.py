"""One Label Studio server per annotator, on the run's real servers: ana's (127.0.0.2) and ben's
(127.0.0.3), which conftest starts in parallel with `tqaforge labelstudio start`, and, for the
controls, the run's one shared server (the one-server layout).

The blindness test probes ben's server with everything ana holds (her API token, her browser
session, her password): every probe must be refused. The same probes on the one-server layout
answer 200, so the test can see a leak.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
from labelstudio_helpers import (
    annotate,
    browser_session,
    build_workspace,
    choice,
    flip_all,
    new_email,
    open_servers_workspace,
    own_login,
    project_of,
    signup,
)
from sqlmodel import func, select
from typer.testing import CliRunner

from tqaforge.annotation.labelstudio import manage
from tqaforge.annotation.labelstudio.client import client_settings
from tqaforge.annotation.labelstudio.sync import push, readable_title
from tqaforge.cli import app
from tqaforge.ids import labelstudio_annotator
from tqaforge.schemas.records import Annotation, LabelStudioTaskCopy
from tqaforge.store import Workspace

runner = CliRunner(env={"COLUMNS": "200"})
REVIEW = readable_title("question_review")
REFUSED = (401, 403, 404)


def _run(root: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = runner.invoke(app, ["-w", str(root), *args], env=env)
    return result.exit_code, result.output


def _pushed(root: Path) -> Workspace:
    ws = open_servers_workspace(root)
    code, output = _run(root, "labelstudio", "push", "question_review")
    assert code == 0, output
    return ws


def test_each_annotator_gets_a_server_of_their_own(annotator_servers) -> None:
    """Own host address and port, own database, the annotator its only user; started in parallel,
    URL and login printed; memory and start time measured."""
    root, ana, ben = annotator_servers.root, annotator_servers.ana, annotator_servers.ben
    printed = annotator_servers.start_output
    assert "in parallel" in printed
    for who, host in ((ana, "127.0.0.2"), (ben, "127.0.0.3")):
        line = next(line for line in printed.splitlines() if line.strip().startswith(f"{who} ("))
        assert f"http://{host}:" in line and f"login {who}" in line, printed
    code, output = _run(root, "labelstudio", "status", "--json")
    assert code == 0, output
    servers = {s["annotator"]: s for s in json.loads(output)["servers"]}
    assert set(servers) == {ana, ben}
    assert servers[ana]["url"].startswith("http://127.0.0.2:") and servers[ben]["url"].startswith("http://127.0.0.3:")
    for who, state in servers.items():
        assert state["answers"] and state["rss_mb"] > 100, state
        assert Path(state["credentials"]).parent.parent == root / "label-studio" / "annotators"
        login = own_login(root, who)
        with httpx.Client(base_url=login.url, headers={"Authorization": f"Token {login.token}"}) as me:
            users = me.get("/api/users/").raise_for_status().json()
        assert [u["email"] for u in users] == [who]  # its only user
        started = re.search(rf"{re.escape(who)}: \S+ \(pid \d+; started in (\d+) s, (\d+) MB\)", printed)
        assert started, printed
        print(f"{who}: started in {started.group(1)} s (in parallel with the other), RSS {state['rss_mb']:.0f} MB")  # the README's figures


def _probe(url: str, token: str, cookies: httpx.Cookies, project: int, task: int, annotation: int,
           email: str, password: str) -> dict[str, int]:
    """HTTP status of each way of reading someone's work, with a token and with a browser session."""
    codes: dict[str, int] = {}
    paths = {
        "list projects": "/api/projects/", "get the project": f"/api/projects/{project}/", "get a task": f"/api/tasks/{task}/",
        "get an annotation by id": f"/api/annotations/{annotation}/",
        "tasks of the project, fields=all": f"/api/tasks/?project={project}&fields=all",
        "export": f"/api/projects/{project}/export?exportType=JSON",
    }
    with httpx.Client(base_url=url, headers={"Authorization": f"Token {token}"}) as by_token:
        codes.update({f"token: {what}": by_token.get(path).status_code for what, path in paths.items()})
    with httpx.Client(base_url=url, follow_redirects=False) as by_session:
        for cookie in cookies.jar:  # the browser's cookies of ana's server, sent to this one
            by_session.cookies.set(cookie.name, cookie.value)
        codes.update({f"session: {what}": by_session.get(path).status_code for what, path in paths.items()})
    with httpx.Client(base_url=url, follow_redirects=False) as browser:
        page = browser.get("/user/login/")
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        browser.post("/user/login/", data={"email": email, "password": password,
                                           "csrfmiddlewaretoken": csrf.group(1) if csrf else ""},
                     headers={"Referer": f"{url}/user/login/"})
        codes["login with ana's password"] = browser.get("/api/current-user/whoami").status_code
    return codes


def _ben_annotation(url: str, token: str, project: int) -> tuple[int, int]:
    """A task of ben's project and his annotation on it (made if none yet)."""
    with httpx.Client(base_url=url, headers={"Authorization": f"Token {token}"}) as ben:
        tasks = ben.get("/api/tasks/", params={"project": project, "fields": "all"}).raise_for_status().json()["tasks"]
    task = tasks[0]
    if task.get("annotations"):
        return task["id"], task["annotations"][0]["id"]
    made = annotate(url, token, task["id"], [choice("decision", "question", "reject"), choice("subtype_right", "category", "no")])
    return task["id"], made["id"]


def test_ana_cannot_reach_bens_work_on_his_server_and_the_one_server_control_leaks(
    annotator_servers, label_studio, sqlite_workspace: Workspace,
) -> None:
    root, ana, ben = annotator_servers.root, annotator_servers.ana, annotator_servers.ben
    _pushed(root)
    ana_login, ben_login = own_login(root, ana), own_login(root, ben)
    project = project_of(ben_login.url, ben_login.token, REVIEW)
    assert project is not None
    task, annotation = _ben_annotation(ben_login.url, ben_login.token, project)
    ana_browser = browser_session(ana_login.url, ana, ana_login.password)
    assert ana_browser.get("/api/current-user/whoami").status_code == 200  # her session works on her own server
    isolated = _probe(ben_login.url, ana_login.token, ana_browser.cookies, project, task, annotation, ana, ana_login.password)
    assert all(code in REFUSED for code in isolated.values()), isolated

    # The control: the same people on one server (the earlier layout), the same probes.
    ws = sqlite_workspace
    build_workspace(ws, proposed=3)
    ana1, ben1 = new_email("ana"), new_email("ben")
    _, ana1_token = signup(label_studio.url, label_studio.token, ana1, "ana-pw-1234567")
    _, ben1_token = signup(label_studio.url, label_studio.token, ben1, "ben-pw-1234567")
    shared = client_settings(label_studio.url, label_studio.token)
    summary = push(ws, "question_review", shared, [ana1, ben1])
    ben_project = summary.projects[ben1]
    task1, annotation1 = _ben_annotation(label_studio.url, ben1_token, ben_project)
    ana1_browser = browser_session(label_studio.url, ana1, "ana-pw-1234567")
    leaky = _probe(label_studio.url, ana1_token, ana1_browser.cookies, ben_project, task1, annotation1, ana1, "ana-pw-1234567")
    assert all(code == 200 for code in leaky.values()), leaky
    assert set(leaky) == set(isolated)


def test_push_and_pull_go_to_each_annotators_server(annotator_servers) -> None:
    """Each copy on its annotator's server, in a project titled so they can read it; a kind with
    nothing pending makes no project; the pull records both people from their own servers."""
    root, ana, ben = annotator_servers.root, annotator_servers.ana, annotator_servers.ben
    ws = _pushed(root)
    code, output = _run(root, "labelstudio", "push", "relevant_cell_validity", "--json")
    assert code == 0 and json.loads(output)["pending"] == 0 and json.loads(output)["projects_created"] == [], output
    labels_before = _labels(ws)
    flipped = 0
    for who in (ana, ben):
        login = own_login(root, who)
        with httpx.Client(base_url=login.url, headers={"Authorization": f"Token {login.token}"}) as me:
            titles = [p["title"] for p in me.get("/api/projects/").raise_for_status().json()["results"]]
        assert REVIEW in titles and readable_title("relevant_cell_validity") not in titles, titles
        project = project_of(login.url, login.token, REVIEW)
        assert project is not None
        flipped += flip_all(login.url, login.token, project)
    with ws.session() as s:
        copies = s.exec(select(LabelStudioTaskCopy).where(LabelStudioTaskCopy.kind == "question_review")).all()
    assert {c.annotator for c in copies} == {ana, ben} and len(copies) == 6
    code, output = _run(root, "labelstudio", "pull", "--json")
    assert code == 0, output
    assert json.loads(output)["recorded"] == flipped == 6
    after = _labels(ws)
    assert after - labels_before == 6
    with ws.session() as s:
        people = set(s.exec(select(Annotation.annotator).where(Annotation.source == "labelstudio")).all())
    assert people == {labelstudio_annotator(ana), labelstudio_annotator(ben)}
    code, output = _run(root, "annotators", "list", "--json")  # progress read from each one's server
    assert code == 0, output
    rows = {(r["email"], r["kind"]): r for r in json.loads(output)["rows"]}
    assert {who: rows[(who, "question_review")]["assigned"] for who in (ana, ben)} == {ana: 3, ben: 3}
    assert rows[(ana, "question_review")]["labelled"] == 3 and rows[(ana, "question_review")]["name"] == "Ana Lopez"


def _labels(ws: Workspace) -> int:
    with ws.session() as s:
        return int(s.exec(select(func.count()).select_from(Annotation)).one())


def test_a_server_that_is_down_is_named_and_the_others_still_sync(annotator_servers) -> None:
    root, ana, ben = annotator_servers.root, annotator_servers.ana, annotator_servers.ben
    ws = _pushed(root)
    ana_login = own_login(root, ana)
    before = _labels(ws)
    code, output = _run(root, "labelstudio", "stop", "--annotator", ben)
    assert code == 0 and "stopped" in output and ben in output, output
    try:
        code, status = _run(root, "labelstudio", "status")
        assert code == 3 and f"labelstudio start -a {ben}" in status, status
        project = project_of(ana_login.url, ana_login.token, REVIEW)
        assert project is not None
        changed = flip_all(ana_login.url, ana_login.token, project)
        code, output = _run(root, "labelstudio", "pull")
        assert code == 1, output
        assert f"down: {ben}" in output and ben in output.split("incomplete:")[-1], output
        assert _labels(ws) - before == changed  # ana's labels came in
        code, output = _run(root, "labelstudio", "push", "question_review")
        assert code == 1 and f"down: {ben}" in output, output
    finally:
        code, output = _run(root, "labelstudio", "start", "--annotator", ben)
        assert code == 0, output
    code, output = _run(root, "labelstudio", "pull", "--json")
    assert code == 0 and json.loads(output)["down"] == [], output


def test_a_one_server_workspace_moves_to_annotator_servers_without_losing_a_label(
    annotator_servers, label_studio, sqlite_workspace: Workspace,
) -> None:
    """The earlier layout, with labels in it: ana labelled on the one server, ben did not yet.
    Migrate pulls everything first, then hands ben's waiting task to his own server."""
    ws, root = sqlite_workspace, sqlite_workspace.root
    ana, ben = annotator_servers.ana, annotator_servers.ben
    build_workspace(ws, proposed=3)
    ana_token = signup(label_studio.url, label_studio.token, ana)[1]
    signup(label_studio.url, label_studio.token, ben)
    env = {manage.TOKEN_ENV: label_studio.token}
    url = ["--url", label_studio.url]
    # answer_verification: the servers' own workspace pushes only question_review, so the two
    # workspaces' projects on ana's and ben's servers never share a title.
    code, output = _run(root, "labelstudio", "push", "answer_verification", "-a", ana, "-a", ben, *url, env=env)
    assert code == 0, output
    with ws.session() as s:
        copies = {c.annotator: c for c in s.exec(select(LabelStudioTaskCopy)).all()}
    assert set(copies) == {ana, ben}
    annotate(label_studio.url, ana_token, copies[ana].ls_task_id,
             [choice("decision", "answer", "correct")])
    # The annotators get their servers in this workspace (the run's two, already running).
    for who in (ana, ben):
        source = own_login(annotator_servers.root, who)
        target = root / "label-studio" / "annotators" / manage.credentials_path(
            _server_of(annotator_servers.root, who)).parent.name
        target.mkdir(parents=True, mode=0o700)
        shutil.copy(manage.credentials_path(_server_of(annotator_servers.root, who)), target / "credentials.json")
        assert source.username == who
    code, output = _run(root, "labelstudio", "push", "answer_verification")
    assert code == 1 and "labelstudio migrate" in output, output  # never to the new servers before moving
    code, output = _run(root, "labelstudio", "migrate", *url, env=env)
    assert code == 0, output
    assert "moved 2 task copies" in output and "1 new labels pulled before moving" in output, output
    assert f"{ben}: 1 copies, 1 waiting" in output and f"{ana}: 1 copies, 0 waiting" in output, output
    code, output = _run(root, "labelstudio", "push", "answer_verification", "--json")
    assert code == 0, output
    pushed = json.loads(output)
    assert pushed["copies_resent"] == 1 and pushed["projects_created"] == [ben], pushed  # nothing for ana: she labelled
    ben_login = own_login(annotator_servers.root, ben)
    project = project_of(ben_login.url, ben_login.token, readable_title("answer_verification"))
    assert project is not None
    with ws.session() as s:
        moved = s.exec(select(LabelStudioTaskCopy).where(LabelStudioTaskCopy.annotator == ben)).one()
    assert moved.ls_project_id == project
    annotate(ben_login.url, ben_login.token, moved.ls_task_id, [choice("decision", "answer", "correct")])
    code, output = _run(root, "labelstudio", "pull", "--json")
    assert code == 0 and json.loads(output)["recorded"] == 1, output
    with ws.session() as s:
        labels = s.exec(select(Annotation).where(Annotation.source == "labelstudio")).all()
    assert sorted(a.annotator for a in labels) == sorted([labelstudio_annotator(ana), labelstudio_annotator(ben)])
    code, output = _run(root, "labelstudio", "migrate", *url, env=env)
    assert code == 0 and "nothing to move" in output


def _server_of(root: Path, who: str) -> Any:
    from tqaforge.annotation.labelstudio.annotator_servers import select_servers

    return select_servers(root, [who])[0]


@pytest.mark.hostile
def test_annotator_commands_say_what_is_wrong(tmp_path: Path, sqlite_workspace: Workspace) -> None:
    """Cases: an unknown --annotator (the known ones listed), the same e-mail twice, no annotators."""
    root = sqlite_workspace.root
    code, output = _run(root, "labelstudio", "start", "--annotator", "zoe@lab.org")
    assert code == 1 and "no annotators with a Label Studio server" in output, output
    code, output = _run(root, "annotators", "add", "ana@lab.org")
    assert code == 0 and "127.0.0.2" in output, output
    code, output = _run(root, "annotators", "add", "ANA@lab.org")
    assert code == 1 and "already has a Label Studio server" in output, output
    code, output = _run(root, "labelstudio", "status", "--annotator", "zoe@lab.org")
    assert code == 1 and "no Label Studio server for 'zoe@lab.org'" in output and "ana@lab.org" in output, output
    code, output = _run(root, "labelstudio", "status")
    assert code == 3 and "not running" in output, output

"""Hostile-input suite: what people do to Label Studio behind the sync's back, on the run's real
server (the session fixture). A project deleted by hand in Label Studio (issue 23, item 12); an
annotation holding a lone surrogate, which Label Studio 1.23 stores and then cannot send, so that
every listing of its project answers HTTP 500 (item 13); a task whose data holds one; a server
that fails on every task; and the client's own guards (what a 5xx is told to be, text that UTF-8
cannot carry). Faults come from Label Studio itself, through its own API; where a transport is
used, it only counts requests or caps page sizes, as a configured server would."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path

import httpx
import pytest
from conftest import free_port
from labelstudio_helpers import annotate, build_workspace, choice, new_email, signup
from sqlmodel import select
from typer.testing import CliRunner

from tqaforge.annotation.labelstudio import manage, sync
from tqaforge.annotation.labelstudio.client import LabelStudioClient, LabelStudioServerError, client_settings
from tqaforge.annotation.labelstudio.server import LabelStudioError
from tqaforge.annotation.labelstudio.sync import TASK_KEY, PushOptions, pull, push
from tqaforge.cli import app
from tqaforge.ids import labelstudio_annotator
from tqaforge.schemas.records import Annotation, LabelStudioPull, LabelStudioTaskCopy
from tqaforge.store import Workspace

pytestmark = pytest.mark.hostile

runner = CliRunner(env={"COLUMNS": "400"})
REVIEW = [choice("decision", "question", "accept"), choice("subtype_right", "category", "yes")]
#: A question_review result whose corrected text holds a lone surrogate, as raw JSON: json.dumps
#: would escape it the same way, but httpx refuses to encode it, so the body is written by hand.
HOSTILE = (
    '{"result": [{"from_name": "decision", "to_name": "question", "type": "choices", "value": {"choices": ["edit"]}},'
    ' {"from_name": "edited_text", "to_name": "question", "type": "textarea", "value": {"text": ["Which year \\ud800?"]}},'
    ' {"from_name": "subtype_right", "to_name": "category", "type": "choices", "value": {"choices": ["yes"]}}],'
    ' "lead_time": 4.0}'
)


def _cli(ws: Workspace, label_studio, *args: str):
    return runner.invoke(app, ["-w", str(ws.root), *args, "--url", label_studio.url], env={manage.TOKEN_ENV: label_studio.token})


def _admin(label_studio) -> httpx.Client:
    return httpx.Client(base_url=label_studio.url, headers={"Authorization": f"Token {label_studio.token}"})


def _copies(ws: Workspace) -> list[LabelStudioTaskCopy]:
    with ws.session() as s:
        return sorted(s.exec(select(LabelStudioTaskCopy)).all(), key=lambda c: (c.annotator, c.ls_task_id))


def _labels(ws: Workspace) -> list[Annotation]:
    with ws.session() as s:
        return list(s.exec(select(Annotation)).all())


def _ls_task_ids(label_studio, project_id: int) -> dict[str, int]:
    """{our task id: Label Studio task id} of a project, listed without annotations."""
    with LabelStudioClient(client_settings(label_studio.url, label_studio.token)) as ls:
        return {t["data"][TASK_KEY]: t["id"] for t in ls.pages("/api/tasks/", what="list", params={"project": project_id}, key="tasks")}


# --- item 12: a project deleted by hand ---------------------------------------------------------


def test_a_project_deleted_in_label_studio_is_made_again_and_its_waiting_tasks_sent_again(label_studio, sqlite_workspace) -> None:
    """Case: ana has 4 tasks, labels 2 (pulled); someone deletes her project in Label Studio, and
    ben's too. Pull says so (rc 1) instead of nothing; push makes ana's project again with the 2
    tasks still waiting for her (not the 2 she labelled: their labels stay and are not asked for
    twice), one copy row per task all along; ben, not given, is named, not touched."""
    ws = sqlite_workspace
    build_workspace(ws, proposed=8)
    ana, ben = new_email("del-ana"), new_email("del-ben")
    ana_token = signup(label_studio.url, label_studio.token, ana)[1]
    signup(label_studio.url, label_studio.token, ben)
    for who, limit in ((ana, "5"), (ben, "8")):
        pushed = _cli(ws, label_studio, "labelstudio", "push", "question_review", "-a", who, "--overlap", "1", "--limit", limit)
        assert pushed.exit_code == 0, pushed.output
    mine = [c for c in _copies(ws) if c.annotator == ana]
    theirs = [c for c in _copies(ws) if c.annotator == ben]
    assert (len(mine), len(theirs)) == (5, 3)
    old_project, ben_project = mine[0].ls_project_id, theirs[0].ls_project_id
    for copy in mine[:2]:
        annotate(label_studio.url, ana_token, copy.ls_task_id, REVIEW)
    first = _cli(ws, label_studio, "labelstudio", "pull")
    assert first.exit_code == 0 and "missing" not in first.output and "2 new labels" in first.output  # control
    assert labelstudio_annotator(ana) in {a.annotator for a in _labels(ws)}

    with _admin(label_studio) as admin:
        for project_id in (old_project, ben_project):
            admin.delete(f"/api/projects/{project_id}/").raise_for_status()
            assert admin.get(f"/api/projects/{project_id}/").status_code == 404

    # Pull: names the missing projects (the listing's 404 is not read as an empty project).
    gone = _cli(ws, label_studio, "labelstudio", "pull")
    assert gone.exit_code == 1, gone.output
    assert f"missing: question_review: project {old_project} of {ana} is gone from Label Studio" in gone.output
    assert f"{len(mine) - 2} of its tasks wait for {ana}'s label in no project; 2 labelled before stay" in gone.output
    assert f"labelstudio push question_review --annotator {ana}" in gone.output
    assert f"project {ben_project} of {ben} is gone" in gone.output
    assert "incomplete: 2 project(s) gone from Label Studio" in gone.stderr
    assert len(_labels(ws)) == 2  # what was pulled from the deleted project stays
    listed = _cli(ws, label_studio, "annotators", "list")
    assert listed.exit_code == 0, listed.output
    row = next(line for line in listed.stdout.splitlines() if line.startswith(ana))
    assert f"project {old_project} deleted in Label Studio with tasks waiting" in row and f"push question_review -a {ana}" in row

    # Push for ana only: her project again, with what waits for her; ben named, left as he is.
    again = _cli(ws, label_studio, "labelstudio", "push", "question_review", "-a", ana, "--overlap", "1", "--json")
    assert again.exit_code == 0, again.output
    summary = json.loads(again.stdout)
    new_project = summary["projects"][ana]
    assert new_project not in (old_project, ben_project)
    assert summary["projects_created"] == [ana] and summary["copies_resent"] == len(mine) - 2
    assert summary["copies_created"] == len(mine) - 2 and summary["tasks_created"] == 0
    assert f"{ana}: project {old_project} is gone from Label Studio" in summary["resent"][0]
    assert f"{len(mine) - 2} tasks sent again to project {new_project}; 2 they labelled before keep their labels" in summary["resent"][0]
    assert summary["missing"] and summary["missing"][0].startswith(f"{ben}: project {ben_project} is gone")
    copies = _copies(ws)
    assert len(copies) == 8 and len({(c.task_id, c.annotator) for c in copies}) == 8  # moved, never doubled
    moved = {c.task_id: c.ls_task_id for c in copies if c.annotator == ana and c.ls_project_id == new_project}
    assert moved == _ls_task_ids(label_studio, new_project) and len(moved) == len(mine) - 2
    assert {c.task_id for c in copies if c.ls_project_id == old_project} == {c.task_id for c in mine[:2]}
    assert all(c.ls_project_id == ben_project for c in copies if c.annotator == ben)
    with ws.session() as s:
        assert s.get(LabelStudioPull, old_project) is None  # the dead project's watermark went with it

    # ana labels a re-sent task; the next pull reads the new project in full, and says the old
    # one is gone with nothing waiting in it (not an error: rc still 1 for ben's alone).
    annotate(label_studio.url, ana_token, next(iter(moved.values())), REVIEW)
    after = _cli(ws, label_studio, "labelstudio", "pull", "--json")
    report = json.loads(after.stdout)
    assert report["recorded"] == 1 and len(_labels(ws)) == 3
    assert any(f"project {old_project} of {ana} is gone" in line and "nothing in it waits" in line for line in report["gone_done"])
    assert [line for line in report["missing_projects"] if ana in line] == []
    assert report["incomplete"] and after.exit_code == 1  # ben's tasks still wait in no project
    with ws.session() as s:
        per_task = Counter(s.exec(select(Annotation.task_id).where(Annotation.annotator == labelstudio_annotator(ana))).all())
    assert set(per_task.values()) == {1}  # no task counted twice for ana
    listed = _cli(ws, label_studio, "annotators", "list", "--json")
    rows = {(r["email"], r["kind"]): r for r in json.loads(listed.stdout)["rows"]}
    assert (rows[(ana, "question_review")]["labelled"], rows[(ana, "question_review")]["assigned"]) == (3, len(mine))
    # Her old project only holds what she labelled: nothing is lost with it, so it is not flagged;
    # ben's still holds his waiting tasks (the control).
    assert rows[(ana, "question_review")]["gone"] == [] and rows[(ben, "question_review")]["gone"] == [ben_project]

    # Nothing more to do: a second push creates and sends nothing.
    quiet = push(ws, "question_review", client_settings(label_studio.url, label_studio.token), [ana], PushOptions(overlap=1))
    assert (quiet.copies_created, quiet.copies_resent, quiet.projects_created, quiet.resent) == (0, 0, [], [])


# --- item 13: one hostile annotation ------------------------------------------------------------


def _hostile_annotation(label_studio, token: str, ls_task_id: int) -> int:
    """Post HOSTILE as the annotator through Label Studio's API; the id of the annotation stored."""
    with httpx.Client(base_url=label_studio.url, headers={"Authorization": f"Token {token}", "Content-Type": "application/json"}) as user:
        reply = user.post(f"/api/tasks/{ls_task_id}/annotations/", content=HOSTILE.encode())
    # Label Studio 1.23.2 stores it, then fails to write its own reply (UnicodeEncodeError).
    assert reply.status_code == 500, reply.text[:200]
    database = label_studio.root / "label-studio" / manage.DATABASE_NAME
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as db:
        row = db.execute("SELECT id, result FROM task_completion WHERE task_id = ?", (ls_task_id,)).fetchone()
    assert row is not None and "\\ud800" in row[1]  # stored escaped; decoded, it cannot be sent
    return int(row[0])


class Counting(httpx.HTTPTransport):
    """The real transport; counts requests and, with ``cap``, caps page sizes (TASK_API_PAGE_SIZE_MAX)."""

    def __init__(self, cap: int | None = None) -> None:
        super().__init__()
        self.cap, self.seen = cap, Counter[str]()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.seen[f"{request.method} {request.url.path}"] += 1
        size = request.url.params.get("page_size")
        if self.cap is not None and size is not None and int(size) > self.cap:
            request = httpx.Request(request.method, request.url.copy_set_param("page_size", str(self.cap)), headers=request.headers)
        return super().handle_request(request)


def test_a_lone_surrogate_in_one_annotation_does_not_block_its_project(label_studio, sqlite_workspace, monkeypatch) -> None:
    """Case: an annotation whose typed text holds \\ud800. Label Studio answers HTTP 500 for every
    page and export of its project. Pull narrows the page down to the task, records every other
    label (on that page too), names the task and its annotator, exits 1 and never says to start
    Label Studio; fixed in Label Studio, the next pull completes."""
    ws = sqlite_workspace
    build_workspace(ws, proposed=10)
    ana = new_email("sur")
    token = signup(label_studio.url, label_studio.token, ana)[1]
    settings = client_settings(label_studio.url, label_studio.token, backoff=0.05)
    push(ws, "question_review", settings, [ana], PushOptions(overlap=1))
    copies = sorted(_copies(ws), key=lambda c: c.ls_task_id)
    project = copies[0].ls_project_id
    bad = copies[5]  # on the second page of 4 (PULL_PAGE below), between two good labels
    good = [copies[i] for i in (0, 4, 6, 9)]
    for copy in good:
        annotate(label_studio.url, token, copy.ls_task_id, REVIEW)
    annotation_id = _hostile_annotation(label_studio, token, bad.ls_task_id)
    with _admin(label_studio) as admin:  # the fault is real: the whole listing, the task, the export
        assert admin.get("/api/tasks/", params={"project": project, "fields": "all"}).status_code == 500
        assert admin.get(f"/api/tasks/{bad.ls_task_id}/").status_code == 500
        assert admin.get(f"/api/tasks/{good[0].ls_task_id}/").status_code == 200

    monkeypatch.setattr(sync, "PULL_PAGE", 4)  # three pages, the hostile task on the second
    result = _cli(ws, label_studio, "labelstudio", "pull")
    assert result.exit_code == 1, result.output
    assert "4 new labels" in result.stdout and "in 9 tasks" in result.stdout
    assert (f"not read: question_review, Label Studio task {bad.ls_task_id} in project {project} of {ana} "
            f"(last changed by {ana}): Label Studio fails to send it") in result.stdout
    assert "HTTP 500" in result.stdout and "lone surrogate" in result.stdout
    assert "incomplete: 1 task(s) Label Studio fails to send" in result.stderr
    assert "start Label Studio" not in result.output and "<!doctype" not in result.output.lower()
    assert {a.task_id for a in _labels(ws)} == {c.task_id for c in good}
    with ws.session() as s:
        assert s.get(LabelStudioPull, project) is None  # not marked read: the next pull reports it again

    # The same through a server capping pages at 3 (unknown until the first page, which fails).
    transport = Counting(cap=3)
    monkeypatch.setattr(sync, "PULL_PAGE", 512)
    capped = pull(ws, settings, client=LabelStudioClient(settings, transport=transport), full=True)
    assert capped.tasks == 9 and capped.unchanged == 4 and capped.recorded == 0
    assert len(capped.unreadable) == 1 and f"task {bad.ls_task_id} in project {project}" in capped.unreadable[0]
    assert transport.seen["GET /api/tasks/"] < 40  # a bisection, not a task-by-task scan

    # Fixed in Label Studio (the annotation deleted): the next pull reads all and is complete.
    with _admin(label_studio) as admin:
        admin.delete(f"/api/annotations/{annotation_id}/").raise_for_status()
    annotate(label_studio.url, token, bad.ls_task_id, REVIEW)
    fixed = pull(ws, settings)
    assert (fixed.recorded, fixed.unreadable, fixed.incomplete) == (1, [], None)
    with ws.session() as s:
        assert s.get(LabelStudioPull, project) is not None


def test_a_task_whose_own_data_cannot_be_sent_is_named_by_place_and_push_goes_on(label_studio, sqlite_workspace) -> None:
    """Case (same class): a member PATCHes a task's data with a lone surrogate. Even the listing
    without annotations fails, so the id cannot be listed: the pull names its place in the
    listing, and a push that must list the project reports it and still imports new tasks."""
    ws = sqlite_workspace
    build_workspace(ws, proposed=3)
    ana = new_email("dat")
    token = signup(label_studio.url, label_studio.token, ana)[1]
    settings = client_settings(label_studio.url, label_studio.token, backoff=0.05)
    push(ws, "question_review", settings, [ana], PushOptions(overlap=1, limit=2))
    first, second = sorted(_copies(ws), key=lambda c: c.ls_task_id)
    annotate(label_studio.url, token, first.ls_task_id, REVIEW)
    body = '{"data": {"question": "x \\ud800", "tqaforge_task_id": "%s"}}' % second.task_id
    with httpx.Client(base_url=label_studio.url, headers={"Authorization": f"Token {token}", "Content-Type": "application/json"}) as user:
        assert user.patch(f"/api/tasks/{second.ls_task_id}/", content=body.encode()).status_code == 500
    with _admin(label_studio) as admin:
        assert admin.get("/api/tasks/", params={"project": first.ls_project_id}).status_code == 500  # even without annotations

    pulled = pull(ws, settings)
    assert pulled.recorded == 1 and len(pulled.unreadable) == 1
    assert f"the task at place 2 of project {first.ls_project_id}'s listing ({ana}'s project)" in pulled.unreadable[0]
    assert "even without its annotations" in pulled.unreadable[0]

    more = push(ws, "question_review", settings, [ana], PushOptions(overlap=1))
    assert more.copies_created == 1 and more.copies_present == 2
    assert any(f"project {first.ls_project_id}: Label Studio cannot list its task at place 2" in p for p in more.problems)


def test_a_server_failing_on_every_task_is_given_up_on_after_a_bound(label_studio, sqlite_workspace, monkeypatch) -> None:
    """Case: the server answers 500 for every read of a project's tasks (a broken database, not a
    task). The narrowing stops after MAX_UNREADABLE tasks instead of confirming each of them."""
    ws = sqlite_workspace
    build_workspace(ws, proposed=6)
    ana = new_email("all")
    settings = client_settings(label_studio.url, label_studio.token, backoff=0.01, attempts=2)
    push(ws, "question_review", settings, [ana], PushOptions(overlap=1))

    class Failing(Counting):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            self.seen[f"{request.method} {request.url.path}"] += 1
            if request.method == "GET" and request.url.path.startswith("/api/tasks/"):
                return httpx.Response(500, text="<!doctype html><html><head><title>500 | Label Studio</title></head></html>")
            return super().handle_request(request)

    monkeypatch.setattr(sync, "MAX_UNREADABLE", 3)
    transport = Failing()
    summary = pull(ws, settings, client=LabelStudioClient(settings, transport=transport))
    assert summary.recorded == 0 and summary.incomplete
    assert len(summary.unreadable) == 4 and "failed on 3 tasks of this project" in summary.unreadable[-1]
    assert transport.seen["GET /api/tasks/"] < 60
    assert all("place" in line for line in summary.unreadable[:3])  # no id: even the id listing failed


# --- the client: what a failure is called, what may be sent ------------------------------------


def test_the_client_says_a_5xx_is_the_server_failing_and_never_sends_a_lone_surrogate(label_studio, tmp_path: Path) -> None:
    """Members of the class: HTTP 500 on any request is 'running but failing' (with its log), not
    'start Label Studio'; a connection refused still is; a body UTF-8 cannot carry is refused
    before anything is sent (escaped, the server would store it and then fail on its project)."""
    seen: list[str] = []

    def always_500(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return httpx.Response(500, text="\n\n<!doctype html><html><head><title>500 | Label Studio</title></head><body>x</body></html>")

    settings = client_settings(label_studio.url, label_studio.token, backoff=0.01)
    with LabelStudioClient(settings, transport=httpx.MockTransport(always_500)) as client:
        with pytest.raises(LabelStudioServerError) as info:
            client.request("GET", "/api/projects/", what="list the projects")
    text = str(info.value)
    assert info.value.status == 500 and "after 4 attempts" in text and "HTTP 500: an HTML error page (500 | Label Studio)" in text
    assert "start Label Studio" not in text and "label-studio.log" in text and len(seen) == 4

    away = client_settings(f"http://127.0.0.1:{free_port()}", label_studio.token, attempts=1)
    with LabelStudioClient(away) as client, pytest.raises(LabelStudioError) as info:
        client.request("GET", "/api/projects/", what="list the projects")
    assert "start Label Studio" in str(info.value) and not isinstance(info.value, LabelStudioServerError)  # control

    sent: list[str] = []
    with LabelStudioClient(settings, transport=httpx.MockTransport(lambda r: sent.append(r.url.path) or httpx.Response(201, json={}))) as client:
        with pytest.raises(LabelStudioError, match="(?s)not valid Unicode.*nothing was sent"):
            client.request("POST", "/api/projects/1/import", json=[{"data": {"question": "a \ud800 b"}}], what="import 1 task")
        assert sent == []
        assert client.request("POST", "/api/projects/1/import", json=[{"data": {"question": "a \u00e9 b"}}], what="import") == {}
    assert sent == ["/api/projects/1/import"]  # control: a valid body goes out


def test_listing_a_deleted_project_is_an_error_not_an_empty_list(label_studio) -> None:
    """The paged listing of a project that does not exist answers 404 on its first page; read as
    'past the end' it made a deleted project look empty."""
    settings = client_settings(label_studio.url, label_studio.token)
    with LabelStudioClient(settings) as client:
        with pytest.raises(LabelStudioError, match="HTTP 404"):
            list(client.pages("/api/tasks/", what="list the tasks of project 999999", params={"project": 999999}, key="tasks"))
        empty = client.request("POST", "/api/projects/", json={"title": f"empty {new_email('e')}"[:50]}, what="create")
        assert list(client.pages("/api/tasks/", what="list", params={"project": empty["id"]}, key="tasks")) == []  # control
        client.request("DELETE", f"/api/projects/{empty['id']}/", what="delete")

"""Label Studio sync in batches, against the real server (the session fixture): a server that does
not name the tasks an import created, and one that sends shorter pages than asked for. Both are
made by rewriting requests and replies in the HTTP transport, never by mocking Label Studio."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from labelstudio_helpers import annotate, build_workspace, choice, new_email, signup
from sqlmodel import select

from tqaforge.annotation.labelstudio.client import LabelStudioClient, client_settings
from tqaforge.annotation.labelstudio.sync import TASK_KEY, PushOptions, pull, push
from tqaforge.schemas.records import LabelStudioTaskCopy


class Rewriting(httpx.HTTPTransport):
    """The real transport, with each request and reply passed through a rewrite first."""

    def __init__(
        self,
        request: Callable[[httpx.Request], httpx.Request] = lambda r: r,
        reply: Callable[[httpx.Request, httpx.Response], httpx.Response] = lambda _q, r: r,
    ) -> None:
        super().__init__()
        self.rewrite_request, self.rewrite_reply = request, reply
        self.seen: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request = self.rewrite_request(request)
        self.seen.append(f"{request.method} {request.url.path}")
        response = super().handle_request(request)
        response.read()
        return self.rewrite_reply(request, response)


def without_task_ids(request: httpx.Request, response: httpx.Response) -> httpx.Response:
    """An older server: the import's reply does not list the tasks it created."""
    if request.method == "POST" and request.url.path.endswith("/import"):
        body = response.json()
        assert body.pop("task_ids", None) is not None  # the real server sends them when asked
        return httpx.Response(response.status_code, json=body)
    return response


def pages_of_two(request: httpx.Request) -> httpx.Request:
    """A server capping page_size (TASK_API_PAGE_SIZE_MAX=2): every page is short, none is the last."""
    if request.method == "GET" and "page_size" in request.url.params:
        return httpx.Request(request.method, request.url.copy_set_param("page_size", "2"), headers=request.headers)
    return request


def _copies(ws) -> list[LabelStudioTaskCopy]:
    with ws.session() as s:
        return list(s.exec(select(LabelStudioTaskCopy)).all())


def test_push_without_task_ids_in_the_reply_finds_them_by_listing(label_studio, sqlite_workspace) -> None:
    ws = sqlite_workspace
    build_workspace(ws, proposed=5)
    settings = client_settings(label_studio.url, label_studio.token)
    transport = Rewriting(reply=without_task_ids)
    client = LabelStudioClient(settings, transport=transport)
    summary = push(ws, "question_review", settings, [new_email("nt")], PushOptions(overlap=1, batch_size=2), client=client)
    assert (summary.copies_created, summary.batches, summary.duplicates) == (5, 3, [])
    assert transport.seen.count("GET /api/tasks/") == 1 + 3  # once before importing, then after each batch
    copies = _copies(ws)
    with LabelStudioClient(settings) as ls:
        held = {t["id"]: t["data"][TASK_KEY] for t in ls.pages("/api/tasks/", what="list", params={"project": copies[0].ls_project_id}, key="tasks")}
    assert {c.ls_task_id: c.task_id for c in copies} == held and len(held) == 5


def test_short_pages_are_followed_to_the_end(label_studio, sqlite_workspace) -> None:
    ws = sqlite_workspace
    build_workspace(ws, proposed=5)
    ana = new_email("pg")
    token = signup(label_studio.url, label_studio.token, ana)[1]
    settings = client_settings(label_studio.url, label_studio.token)
    capped = LabelStudioClient(settings, transport=Rewriting(request=pages_of_two))
    assert push(ws, "question_review", settings, [ana], PushOptions(overlap=1), client=capped).copies_created == 5
    copies = _copies(ws)
    tasks = list(capped.pages("/api/tasks/", what="list", params={"project": copies[0].ls_project_id}, key="tasks", page_size=1000))
    assert len(tasks) == 5 and len({t["id"] for t in tasks}) == 5
    for copy in copies:
        annotate(label_studio.url, token, copy.ls_task_id, [choice("decision", "question", "accept"), choice("subtype_right", "category", "yes")])
    pulled = pull(ws, settings, client=capped)
    assert (pulled.tasks, pulled.annotations, pulled.recorded, pulled.problems) == (5, 5, 5, [])
    again = pull(ws, settings, client=capped, full=True)
    assert (again.recorded, again.unchanged) == (0, 5)

"""Hostile-input suite: Label Studio sync when the server is away, fails mid-push, answers 503, or
holds results we cannot read. Real server (the session fixture); faults are injected in the HTTP
transport between us and it, never by mocking Label Studio."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from conftest import free_port
from labelstudio_helpers import annotate, build_workspace, choice, new_email, signup, text
from sqlmodel import func, select

from tqaforge.annotation.labelstudio import registry
from tqaforge.annotation.labelstudio.client import LabelStudioClient, client_settings
from tqaforge.annotation.labelstudio.server import LabelStudioError
from tqaforge.annotation.labelstudio.sync import LabelStudioConfigError, PushOptions, pull, push
from tqaforge.schemas.records import Annotation, AnnotationTask, LabelStudioTaskCopy

pytestmark = pytest.mark.hostile


class Faulty(httpx.HTTPTransport):
    """The real transport, with one fault: ``fault(request, count)`` may raise or answer instead."""

    def __init__(self, fault) -> None:
        super().__init__()
        self.fault = fault
        self.seen: Counter[str] = Counter()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        key = f"{request.method} {request.url.path}"
        self.seen[key] += 1
        early = self.fault(request, self.seen[key], before=True)
        if early is not None:
            return early
        response = super().handle_request(request)
        self.fault(request, self.seen[key], before=False)
        return response


def _count(ws, model) -> int:
    with ws.session() as s:
        return int(s.exec(select(func.count()).select_from(model)).one())


def test_unreachable_server_fails_clearly_after_bounded_retries(sqlite_workspace) -> None:
    build_workspace(sqlite_workspace, proposed=2)
    settings = client_settings(f"http://127.0.0.1:{free_port()}", "0" * 40, attempts=3, backoff=0.05, max_total=3)
    started = time.monotonic()
    with pytest.raises(LabelStudioError) as info:
        push(sqlite_workspace, "question_review", settings, ["a@x.org", "b@x.org"])
    assert time.monotonic() - started < 5
    message = str(info.value)
    assert "after 3 attempts" in message and "cannot connect" in message and "127.0.0.1" in message
    assert "running the same command again" in (info.value.hint or "")
    assert _count(sqlite_workspace, AnnotationTask) == 0 and _count(sqlite_workspace, LabelStudioTaskCopy) == 0
    assert pull(sqlite_workspace, settings).projects == 0  # nothing pushed: nothing to ask


def test_overloaded_server_is_retried(label_studio, sqlite_workspace) -> None:
    def two_503s(request, count, before):
        if before and request.url.path == "/api/projects/validate/" and count <= 2:
            return httpx.Response(503, text="restarting")
        return None

    transport = Faulty(two_503s)
    client = LabelStudioClient(client_settings(label_studio.url, label_studio.token, backoff=0.05), transport=transport)
    build_workspace(sqlite_workspace, proposed=1)
    summary = push(sqlite_workspace, "question_review", client.settings, [new_email("r1")], PushOptions(overlap=1), client=client)
    assert transport.seen["POST /api/projects/validate/"] == 3 and summary.copies_created == 1


def test_push_interrupted_after_label_studio_created_tasks_resumes_without_duplicates(label_studio, sqlite_workspace) -> None:
    ws = sqlite_workspace
    build_workspace(ws, proposed=5)
    ana, ben = new_email("ia"), new_email("ib")
    settings = client_settings(label_studio.url, label_studio.token, backoff=0.05)

    # The second import reaches Label Studio, which creates its tasks, but the reply is lost.
    def lose_second_import_reply(request, count, before):
        if not before and request.method == "POST" and request.url.path.endswith("/import") and count == 2:
            raise httpx.RemoteProtocolError("server disconnected without sending a response")
        return None

    client = LabelStudioClient(settings, transport=Faulty(lose_second_import_reply))
    with pytest.raises(LabelStudioError, match="could not import 2 tasks"):
        push(ws, "question_review", settings, [ana, ben], PushOptions(batch_size=2), client=client)
    first_batch = _count(ws, LabelStudioTaskCopy)
    assert first_batch == 2  # the first batch was committed; the second is in Label Studio only

    summary = push(ws, "question_review", settings, [ana, ben], PushOptions(batch_size=2))
    assert summary.copies_recovered == 2 and summary.copies_present == 2 and summary.copies_created == 6
    assert not summary.duplicates
    with ws.session() as s:
        copies = s.exec(select(LabelStudioTaskCopy)).all()
    assert len(copies) == 10 and len({(c.task_id, c.annotator) for c in copies}) == 10
    assert _count(ws, AnnotationTask) == 5
    with LabelStudioClient(settings) as ls:
        for project_id in {c.ls_project_id for c in copies}:
            held = [t["data"]["tqaforge_task_id"] for t in ls.pages("/api/tasks/", what="list", params={"project": project_id}, key="tasks")]
            assert len(held) == len(set(held)) == 5
    again = push(ws, "question_review", settings, [ana, ben], PushOptions(batch_size=2))
    assert (again.copies_created, again.copies_recovered, again.copies_present) == (0, 0, 10)


def test_malformed_results_are_skipped_and_reported_the_rest_pulled(label_studio, sqlite_workspace) -> None:
    ws = sqlite_workspace
    build_workspace(ws, proposed=4)
    ana = new_email("ma")
    token = signup(label_studio.url, label_studio.token, ana)[1]
    settings = client_settings(label_studio.url, label_studio.token)
    push(ws, "question_review", settings, [ana], PushOptions(overlap=1))
    push(ws, "answer_verification", settings, [ana], PushOptions(overlap=1))
    with ws.session() as s:
        copies = sorted(s.exec(select(LabelStudioTaskCopy)).all(), key=lambda c: (c.kind, c.ls_task_id))
    answer_copy, *review_copies = copies
    good = [choice("decision", "question", "accept"), choice("subtype_right", "category", "yes")]
    annotate(label_studio.url, token, review_copies[0].ls_task_id, [choice("decision", "question", "maybe"), good[1]])  # unknown choice
    annotate(label_studio.url, token, review_copies[1].ls_task_id, [good[0]])  # subtype answer missing
    annotate(label_studio.url, token, review_copies[2].ls_task_id, [choice("decision", "question", "edit"), good[1]])  # edit, no text
    annotate(label_studio.url, token, review_copies[3].ls_task_id, good)
    annotate(label_studio.url, token, answer_copy.ls_task_id, [choice("decision", "answer", "correct"), text("corrected_answer", "answer", "7")])

    summary = pull(ws, settings)
    assert summary.recorded == 1 and len(summary.problems) == 4, summary.problems
    problems = "\n".join(summary.problems)
    assert "'decision' must be one of accept, edit, reject, got 'maybe'" in problems
    assert "no 'subtype_right' was chosen" in problems and "without the corrected question" in problems
    assert "marked 'correct' but a corrected answer was typed too" in problems
    assert all(ana in p for p in summary.problems)
    assert _count(ws, Annotation) == 1
    assert pull(ws, settings).recorded == 0  # still skipped, still reported, nothing duplicated

    # The server gone mid-way: a clear error, and what was pulled stays.
    away = client_settings(f"http://127.0.0.1:{free_port()}", label_studio.token, attempts=2, backoff=0.05, max_total=2)
    with pytest.raises(LabelStudioError, match="could not read the account of the API token: .* failed after 2 attempts"):
        pull(ws, away)
    assert _count(ws, Annotation) == 1


def test_bad_template_names_its_file(label_studio, sqlite_workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = client_settings(label_studio.url, label_studio.token)
    broken = tmp_path / "broken.xml"
    broken.write_text("<View>\n  <Choices name='x' toName='nothing'>\n</View>\n")
    monkeypatch.setitem(registry.LS_KINDS, "question_typing", replace(registry.LS_KINDS["question_typing"], config=str(broken)))
    with pytest.raises(LabelStudioConfigError, match=f"{broken}, line 3.*not well-formed"):
        push(sqlite_workspace, "question_typing", settings, ["a@x.org"], PushOptions(overlap=1))
    refused = tmp_path / "refused.xml"
    refused.write_text("<View><Text name='q' value='$question'/><Choices name='x' toName='q'/></View>")
    monkeypatch.setitem(registry.LS_KINDS, "question_typing", replace(registry.LS_KINDS["question_typing"], config=str(refused)))
    with pytest.raises(LabelStudioConfigError, match=f"{refused}: Label Studio refuses the label configuration of question_typing"):
        push(sqlite_workspace, "question_typing", settings, ["a@x.org"], PushOptions(overlap=1))
    assert _count(sqlite_workspace, AnnotationTask) == 0


def test_a_label_made_in_someone_elses_project_is_left_out(label_studio, sqlite_workspace) -> None:
    """Case: community Label Studio lets every member open every project; ben labels a task in
    ana's project (seeing her label). His label is not blind: pull leaves it out, says why, and
    takes it out of ana's project; ben has no task of his own for the item, which is said too
    (``test_hostile_labelstudio_send_back.py`` has the case where he has one)."""
    ws = sqlite_workspace
    build_workspace(ws, proposed=1)
    url, admin = label_studio.url, label_studio.token
    ana, ben = new_email("ana"), new_email("ben")
    ana_token, ben_token = signup(url, admin, ana)[1], signup(url, admin, ben)[1]
    push(ws, "question_review", client_settings(url, admin), [ana], PushOptions(overlap=1))
    with ws.session() as s:
        copy = s.exec(select(LabelStudioTaskCopy)).one()
    review = [choice("decision", "question", "accept"), choice("subtype_right", "category", "yes")]
    annotate(url, ana_token, copy.ls_task_id, review)
    annotate(url, ben_token, copy.ls_task_id, review)
    pulled = pull(ws, client_settings(url, admin))
    assert pulled.recorded == 1 and len(pulled.problems) == 2 and pulled.sent_back == 1
    assert f"by {ben}: made in {ana}'s project (not blind" in pulled.problems[0]
    assert f"{ben} has no task of their own for this item" in pulled.problems[1]
    assert _count(ws, Annotation) == 1


def test_annotator_accounts_refuse_bad_input_before_any_request(label_studio) -> None:
    """Cases: not an e-mail; an e-mail that already has an account; the server away."""
    from tqaforge.annotation.labelstudio.annotators import add_annotator

    away = client_settings(f"http://127.0.0.1:{free_port()}", "0" * 40, attempts=1)
    for bad in ("ana", "ana@", "a b@x.org", ""):
        with pytest.raises(LabelStudioError, match="is not an e-mail address"):
            add_annotator(away, bad)
    with pytest.raises(LabelStudioError, match="cannot connect"):
        add_annotator(away, "ana@example.org")
    settings = client_settings(label_studio.url, label_studio.token)
    taken = new_email("taken")
    signup(label_studio.url, label_studio.token, taken)
    with pytest.raises(LabelStudioError, match="already has a Label Studio account"):
        add_annotator(settings, taken.upper())

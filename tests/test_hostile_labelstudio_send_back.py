"""Work refused at pull time goes back to the annotator's queue with the reason, for every kind and
every reason, never silently dropped: a label that cannot be read (question review), one the
kind's checks refuse (relevant cells outside the table), and a label made in someone else's
project. The refused result stays in the task's data; a corrected label is then recorded once.
(Bad value modifications, the first kind sent back: ``test_hostile_value_modification.py``.)"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from labelstudio_helpers import annotate, build_workspace, choice, new_email, signup
from sqlmodel import select
from test_labelstudio_robustness import _reasoning_questions

from tqaforge.annotation.labelstudio.client import client_settings
from tqaforge.annotation.labelstudio.sync import FEEDBACK_KEY, REFUSED_KEY, PushOptions, pull, push
from tqaforge.schemas.records import Annotation, LabelStudioTaskCopy
from tqaforge.store import Workspace

pytestmark = pytest.mark.hostile


def _task(url: str, token: str, ls_task_id: int) -> dict[str, Any]:
    with httpx.Client(base_url=url, headers={"Authorization": f"Token {token}"}) as c:
        return c.get(f"/api/tasks/{ls_task_id}/").raise_for_status().json()


def _copies(ws: Workspace, kind: str) -> dict[str, LabelStudioTaskCopy]:
    with ws.session() as s:
        return {c.annotator: c for c in s.exec(select(LabelStudioTaskCopy).where(LabelStudioTaskCopy.kind == kind)).all()}


def _labels(ws: Workspace, kind: str) -> list[dict[str, Any]]:
    with ws.session() as s:
        return [a.label for a in s.exec(select(Annotation).where(Annotation.kind == kind)).all()]


def test_refused_labels_of_every_kind_go_back_to_their_annotator_with_the_reason(label_studio, sqlite_workspace: Workspace) -> None:
    ws = sqlite_workspace
    url, admin = label_studio.url, label_studio.token
    settings = client_settings(url, admin)
    build_workspace(ws, proposed=1)
    _reasoning_questions(ws, n=1)
    ana, ben = new_email("sb-ana"), new_email("sb-ben")
    tokens = {ana: signup(url, admin, ana)[1], ben: signup(url, admin, ben)[1]}
    push(ws, "question_review", settings, [ana, ben], PushOptions(overlap=2))
    push(ws, "relevant_cells", settings, [ana], PushOptions(overlap=1))
    review, cells = _copies(ws, "question_review"), _copies(ws, "relevant_cells")
    assert _task(url, admin, review[ana].ls_task_id)["data"][FEEDBACK_KEY] == ""
    unreadable = [choice("decision", "question", "edit"), choice("subtype_right", "category", "yes")]  # an edit without its text
    outside = [{"from_name": "cells", "to_name": "question", "type": "choices", "value": {"choices": ["r1c1", "r99c0"]}}]
    annotate(url, tokens[ana], review[ana].ls_task_id, unreadable)
    annotate(url, tokens[ana], cells[ana].ls_task_id, outside)
    # Control: ben's good review in the same pull is recorded, not sent back.
    annotate(url, tokens[ben], review[ben].ls_task_id, [choice("decision", "question", "accept"), choice("subtype_right", "category", "yes")])

    pulled = pull(ws, settings)
    assert (pulled.recorded, pulled.sent_back, len(pulled.problems)) == (1, 2, 2), pulled.lines()
    assert any("decision 'edit' without the corrected question" in p and f"sent back to {ana}'s queue" in p for p in pulled.problems)
    assert any("[99, 0] lies outside the table" in p for p in pulled.problems)
    assert "2 refused labels sent back to their annotator's queue" in "\n".join(pulled.lines())
    for copy, reason, result in (
        (review[ana], "decision 'edit' without the corrected question", unreadable), (cells[ana], "[99, 0] lies outside the table", outside),
    ):
        back = _task(url, admin, copy.ls_task_id)
        assert back["total_annotations"] == 0  # in ana's queue again
        assert back["data"][FEEDBACK_KEY].startswith("Sent back: ") and reason in back["data"][FEEDBACK_KEY]
        [kept] = back["data"][REFUSED_KEY]  # her work is kept with the task
        assert kept["by"] == ana and reason in kept["reason"] and kept["result"][0]["value"] == result[0]["value"]
        assert back["data"]["tqaforge_task_id"] == copy.task_id
    assert _labels(ws, "question_review") == [{"decision": "accept", "subtype_ok": True}] and _labels(ws, "relevant_cells") == []

    # Pulled again: nothing new, nothing sent twice. Corrected: recorded once.
    again = pull(ws, settings)
    assert (again.recorded, again.sent_back, again.problems) == (0, 0, [])
    annotate(url, tokens[ana], review[ana].ls_task_id, [
        choice("decision", "question", "edit"), choice("subtype_right", "category", "yes"),
        {"from_name": "edited_text", "to_name": "question", "type": "textarea", "value": {"text": ["What is the total?"]}},
    ])
    annotate(url, tokens[ana], cells[ana].ls_task_id, [{**outside[0], "value": {"choices": ["r1c1", "r2c1"]}}])
    fixed = pull(ws, settings)
    assert (fixed.recorded, fixed.sent_back, fixed.problems) == (2, 0, []), fixed.lines()
    assert _labels(ws, "relevant_cells") == [{"cells": [[1, 1], [2, 1]]}]
    assert len(_labels(ws, "question_review")) == 2
    assert len(_task(url, admin, review[ana].ls_task_id)["data"][REFUSED_KEY]) == 1


def test_a_label_made_in_someone_elses_project_goes_back_and_its_author_is_told(label_studio, sqlite_workspace: Workspace) -> None:
    """ben labels ana's copy of an item (community Label Studio lets him open her project) while
    his own copy waits: his label is taken out of her project (her queue gets the task back),
    and his own copy says why; each then labels their own copy and both labels are recorded."""
    ws = sqlite_workspace
    url, admin = label_studio.url, label_studio.token
    settings = client_settings(url, admin)
    build_workspace(ws, proposed=1)
    ana, ben = new_email("mis-ana"), new_email("mis-ben")
    tokens = {ana: signup(url, admin, ana)[1], ben: signup(url, admin, ben)[1]}
    push(ws, "question_review", settings, [ana, ben], PushOptions(overlap=2))
    review = _copies(ws, "question_review")
    accept = [choice("decision", "question", "accept"), choice("subtype_right", "category", "yes")]
    annotate(url, tokens[ben], review[ana].ls_task_id, accept)  # in ana's project

    pulled = pull(ws, settings)
    assert (pulled.recorded, pulled.sent_back) == (0, 1), pulled.lines()
    assert len(pulled.problems) == 1 and f"by {ben}: made in {ana}'s project" in pulled.problems[0]
    hers, his = _task(url, admin, review[ana].ls_task_id), _task(url, admin, review[ben].ls_task_id)
    assert hers["total_annotations"] == 0 and f"{ana}, label it yourself" in hers["data"][FEEDBACK_KEY]
    assert hers["data"][REFUSED_KEY][0]["by"] == ben
    assert his["total_annotations"] == 0 and f"made in {ana}'s project" in his["data"][FEEDBACK_KEY]
    assert _labels(ws, "question_review") == []

    annotate(url, tokens[ana], review[ana].ls_task_id, accept)
    annotate(url, tokens[ben], review[ben].ls_task_id, [choice("decision", "question", "reject"), choice("subtype_right", "category", "no")])
    done = pull(ws, settings)
    assert (done.recorded, done.sent_back, done.problems) == (2, 0, []), done.lines()
    with ws.session() as s:
        assert len(set(s.exec(select(Annotation.annotator).where(Annotation.kind == "question_review")).all())) == 2

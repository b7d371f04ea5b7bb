"""Label Studio sync against a real server (the session fixture): push, annotate as real users with
their own tokens, pull, agree, adjudicate; a second push and pull change nothing; a changed
annotation becomes a new label."""

from __future__ import annotations

import re
import time
from collections import Counter

import httpx
import pytest
from labelstudio_helpers import annotate, build_workspace, choice, new_email, signup, text
from sqlmodel import select

from tqaforge.annotation.adjudication import adjudicate
from tqaforge.annotation.kinds import LabelError
from tqaforge.annotation.labelstudio.client import LabelStudioClient, client_settings
from tqaforge.annotation.labelstudio.registry import LS_KINDS, table_html
from tqaforge.annotation.labelstudio.server import LabelStudioError
from tqaforge.annotation.labelstudio.sync import PushOptions, assign, project_title, pull, push, validate_configs
from tqaforge.annotation.workflows import kind_report, load_rater_data
from tqaforge.ids import labelstudio_annotator
from tqaforge.schemas.enums import AdjudicationStatus, QuestionStatus, TaskStatus
from tqaforge.schemas.records import (
    Adjudication,
    Annotation,
    AnnotationTask,
    LabelStudioPull,
    LabelStudioTaskCopy,
    Question,
    TableRecord,
)


def test_every_kind_with_a_config_validates_against_the_server(label_studio) -> None:
    done = validate_configs(client_settings(label_studio.url, label_studio.token))
    assert set(done) == {
        "question_review", "answer_verification", "question_typing", "relevant_cell_validity",
        "relevant_cells", "value_modification", "blind_reanswer",
    }
    assert all(path.endswith(f"configs/{kind}.xml") for kind, path in done.items())


def test_kinds_without_a_config_say_so(label_studio, sqlite_workspace) -> None:
    assert LS_KINDS["value_modification_review"].config is None  # decided by a person, on the command line
    with pytest.raises(LabelStudioError, match="value_modification_review cannot be pushed to Label Studio yet") as info:
        push(sqlite_workspace, "value_modification_review", client_settings(label_studio.url, label_studio.token), ["a@x.org", "b@x.org"])
    assert "question_review" in (info.value.hint or "")


def test_assignment_is_seeded_stable_and_spreads_the_load() -> None:
    people = ["ana", "ben", "cy"]
    tasks = [f"task{i}" for i in range(300)]
    load = Counter(who for t in tasks for who in assign(t, people, 2, seed=1))
    assert all(170 <= n <= 230 for n in load.values()), load  # 200 each on average
    assert [assign(t, people, 2, seed=1) for t in tasks] == [assign(t, list(reversed(people)), 2, seed=1) for t in tasks]
    assert [assign(t, people, 2, seed=1) for t in tasks] != [assign(t, people, 2, seed=2) for t in tasks]
    assert len(project_title("answer_verification", "someone.with-a-long-name@example.org")) <= 50


def test_model_text_is_escaped_in_task_html() -> None:
    table = TableRecord(id="t", header=["<b>h</b>"], rows=[["<script>x</script>"]], n_rows=1, n_cols=1, numeric_share=0.0)
    shown = table_html(table, {(0, 0)})
    assert "<script>" not in shown and "&lt;script&gt;" in shown and "&lt;b&gt;h" in shown


def _tasks(url: str, token: str, project_id: int) -> list[dict]:
    with LabelStudioClient(client_settings(url, token)) as client:
        return list(client.pages("/api/tasks/", what="list", params={"project": project_id}, key="tasks"))


def test_push_annotate_pull_adjudicate(label_studio, workspace) -> None:
    ws = workspace
    url, admin = label_studio.url, label_studio.token
    settings = client_settings(url, admin)
    ids = build_workspace(ws, proposed=3)
    ana, ben = new_email("ana"), new_email("ben")
    tokens = {ana: signup(url, admin, ana)[1], ben: signup(url, admin, ben)[1]}

    review = push(ws, "question_review", settings, [ana, ben])
    verify = push(ws, "answer_verification", settings, [ana, ben])
    assert (review.pending, review.copies_created, review.tasks_created, review.overlap) == (3, 6, 3, 2)
    assert (verify.pending, verify.copies_created, verify.tasks_created) == (1, 2, 1)
    assert sorted(review.projects_created) == sorted([ana, ben])
    assert any("task copies imported" in line for line in review.lines()) and review.as_dict()["kind"] == "question_review"

    # One project per (kind, annotator), each holding that annotator's copies, our task id in the data.
    with ws.session() as s:
        copies = s.exec(select(LabelStudioTaskCopy)).all()
        tasks = {t.id: t for t in s.exec(select(AnnotationTask)).all()}
    assert len(copies) == 8 and len({(c.task_id, c.annotator) for c in copies}) == 8
    assert all(t.status == TaskStatus.SYNCED and t.ls_task_id is not None for t in tasks.values())
    project_of = {(c.kind, c.annotator): c.ls_project_id for c in copies}
    assert len(set(project_of.values())) == 4
    held = _tasks(url, admin, project_of[("answer_verification", ana)])
    assert [t["data"]["tqaforge_task_id"] for t in held] == [c.task_id for c in copies if (c.kind, c.annotator) == ("answer_verification", ana)]
    candidates = held[0]["data"]["candidates_html"]
    assert "&lt;script&gt;" in candidates and "<script>" not in candidates and "PoT" in candidates and "Sandbox" in candidates
    picks = held[0]["data"]["agent_answers"]  # one choice per different agent answer, the methods beside it
    assert [p["value"] for p in picks] == ["proposed|42"] and all(m in picks[0]["html"] for m in ("TCoT", "SCoT", "PoT"))
    with httpx.Client(base_url=url, headers={"Authorization": f"Token {admin}"}) as c:
        assert c.get(f"/api/projects/{project_of[('question_review', ben)]}/").json()["title"] == project_title("question_review", ben)

    # Each annotator labels their own copies with their own token.
    first_question = sorted(ids["questions"])[0]
    for copy in copies:
        task = tasks[copy.task_id]
        if copy.kind == "question_review":
            decision = "reject" if (copy.annotator == ben and task.target_id == first_question) else "accept"
            result = [choice("decision", "question", decision), choice("subtype_right", "category", "yes")]
        elif copy.annotator == ana:  # she picks the agents' answer, which is the proposed one
            result = [choice("picked", "answer", "proposed|42")]
        else:
            result = [choice("decision", "answer", "incorrect"), text("corrected_answer", "answer", "41")]
        annotate(url, tokens[copy.annotator], copy.ls_task_id, result, lead_time=12.5)

    pulled = pull(ws, settings)
    assert (pulled.recorded, pulled.changed, pulled.problems, pulled.by_kind) == (
        8, 0, [], {"question_review": 6, "answer_verification": 2}
    )
    with ws.session() as s:
        annotations = s.exec(select(Annotation)).all()
    assert {a.annotator for a in annotations} == {labelstudio_annotator(ana), labelstudio_annotator(ben)}
    assert all(a.annotator.startswith("ls:") and ana not in a.annotator for a in annotations)
    assert all(a.source == "labelstudio" and a.lead_time == 12.5 and re.fullmatch(r"ls:\d+:\d+", a.source_ref) for a in annotations)
    labels = {(a.kind, a.annotator): a.label for a in annotations if a.kind == "answer_verification"}
    assert labels == {
        ("answer_verification", labelstudio_annotator(ana)): {"decision": "correct"},
        ("answer_verification", labelstudio_annotator(ben)): {"decision": "incorrect", "answer": "41"},
    }
    assert {"decision": "reject", "subtype_ok": True} in [a.label for a in annotations]

    # Again: nothing new anywhere.
    again = push(ws, "question_review", settings, [ana, ben])
    assert (again.copies_created, again.copies_recovered, again.copies_present, again.projects_created, again.projects_updated) == (
        0, 0, 6, [], []
    )
    assert len(_tasks(url, admin, project_of[("question_review", ana)])) == 3
    cy = new_email("cy")  # a third annotator joins: tasks that have their two keep them
    joined = push(ws, "question_review", settings, [ana, ben, cy])
    # Nothing to send to cy, so no (empty) project is made for them.
    assert (joined.copies_created, joined.copies_present, joined.projects_created) == (0, 6, [])
    assert cy not in joined.projects
    repeat = pull(ws, settings, full=True)
    assert (repeat.recorded, repeat.unchanged, repeat.incremental) == (0, 8, 0)

    # Agreement and adjudication work on what was pulled, unchanged.
    data = load_rater_data(ws, "question_review")
    assert len(data.raters) == 2 and len(data.items) == 3
    report = kind_report(data)
    assert report.n_annotations == 6
    run = adjudicate(ws, kinds=["question_review", "answer_verification"])
    assert (run["question_review"].unanimous, run["question_review"].open) == (2, 1)
    assert run["answer_verification"].open == 1
    with ws.session() as s:
        statuses = {q.id: q.status for q in s.exec(select(Question).where(Question.id.in_(ids["questions"]))).all()}  # type: ignore[attr-defined]
    assert statuses[first_question] == QuestionStatus.PROPOSED
    assert sorted(statuses.values()).count(QuestionStatus.ACCEPTED) == 2

    # Ben changes his mind in Label Studio: the next pull records a new label and keeps the old one.
    copy = next(c for c in copies if c.kind == "question_review" and c.annotator == ben and tasks[c.task_id].target_id == first_question)
    with httpx.Client(base_url=url, headers={"Authorization": f"Token {tokens[ben]}"}) as user:
        mine = user.get(f"/api/tasks/{copy.ls_task_id}/annotations/").raise_for_status().json()
        user.patch(
            f"/api/annotations/{mine[0]['id']}/",
            json={"result": [choice("decision", "question", "accept"), choice("subtype_right", "category", "no")]},
        ).raise_for_status()
    changed = pull(ws, settings, full=True)
    assert (changed.recorded, changed.changed, changed.unchanged) == (1, 1, 7)
    assert pull(ws, settings).recorded == 0
    with ws.session() as s:
        his = s.exec(select(Annotation).where(Annotation.task_id == copy.task_id, Annotation.annotator == labelstudio_annotator(ben))).all()
    assert sorted(a.label["decision"] for a in his) == ["accept", "reject"]
    rerun = adjudicate(ws, kinds=["question_review"])
    assert (rerun["question_review"].unanimous, rerun["question_review"].open) == (3, 0)
    with ws.session() as s:
        final = s.exec(select(Adjudication).where(Adjudication.task_id == copy.task_id)).one()
        assert final.status == AdjudicationStatus.RESOLVED and final.label == {"decision": "accept"}
        assert s.get(Question, first_question).status == QuestionStatus.ACCEPTED  # type: ignore[union-attr]


def test_a_picked_agent_answer_becomes_a_verification_label() -> None:
    read = LS_KINDS["answer_verification"].to_label
    assert read is not None
    assert read([choice("picked", "answer", "proposed|42")]) == {"decision": "correct"}
    assert read([choice("picked", "answer", "other|17, 18")]) == {"decision": "incorrect", "answer": "17, 18"}
    with pytest.raises(LabelError, match="give one"):
        read([choice("picked", "answer", "other|17"), choice("decision", "answer", "correct")])
    with pytest.raises(LabelError, match="not one of the agents' answers"):
        read([choice("picked", "answer", "17")])


def test_pull_reads_only_tasks_updated_since_the_last_pull(label_studio, sqlite_workspace) -> None:
    """A project pulled to the end is read from the server time its pull began: nothing old is
    listed again, a changed annotation is; --full reads everything; a recovered copy resets it.
    (SQLite only: the watermark is one row; PostgreSQL runs the sync in the test above.)"""
    ws = sqlite_workspace
    url, admin = label_studio.url, label_studio.token
    settings = client_settings(url, admin)
    build_workspace(ws, proposed=3)
    ana = new_email("ana")
    token = signup(url, admin, ana)[1]
    assert push(ws, "question_typing", settings, [ana], PushOptions(overlap=1)).copies_created >= 3
    with ws.session() as s:
        copies = s.exec(select(LabelStudioTaskCopy).where(LabelStudioTaskCopy.kind == "question_typing")).all()
    for copy in copies:
        annotate(url, token, copy.ls_task_id, [choice("type", "question", "extraction")])
    time.sleep(1.1)  # the server's Date header has whole seconds
    first = pull(ws, settings, kinds=["question_typing"])
    assert (first.tasks, first.recorded, first.incremental) == (len(copies), len(copies), 0)
    with ws.session() as s:
        mark = s.get(LabelStudioPull, copies[0].ls_project_id)
    assert mark is not None and mark.annotator == ana and mark.kind == "question_typing"

    nothing = pull(ws, settings, kinds=["question_typing"])
    assert (nothing.incremental, nothing.tasks, nothing.recorded) == (1, 0, 0)
    assert any("read incrementally" in line for line in nothing.lines())

    with httpx.Client(base_url=url, headers={"Authorization": f"Token {token}"}) as user:
        mine = user.get(f"/api/tasks/{copies[0].ls_task_id}/annotations/").raise_for_status().json()
        user.patch(f"/api/annotations/{mine[0]['id']}/", json={"result": [choice("type", "question", "reasoning")]}).raise_for_status()
    one = pull(ws, settings, kinds=["question_typing"])
    assert (one.tasks, one.recorded, one.changed) == (1, 1, 1)

    everything = pull(ws, settings, kinds=["question_typing"], full=True)
    assert (everything.tasks, everything.recorded, everything.unchanged, everything.incremental) == (len(copies), 0, len(copies), 0)

    # A push that recovers a copy the store lost drops the project's watermark.
    with ws.session() as s:
        lost = s.get(LabelStudioTaskCopy, copies[1].id)
        s.delete(lost)
    assert push(ws, "question_typing", settings, [ana], PushOptions(overlap=1)).copies_recovered == 1
    with ws.session() as s:
        assert s.get(LabelStudioPull, copies[0].ls_project_id) is None
    assert pull(ws, settings, kinds=["question_typing"]).tasks == len(copies)

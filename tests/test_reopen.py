"""Suspect gold back to the adjudication queue (issue 28; tqaforge/annotation/reopen.py).

The simulated benchmark (tests/health_sim.py) has ten items with a wrong gold; the health report's
item analysis flags them. Before sending them, one is settled by people through a rule (unanimous)
and one by a person (``resolve``): the rule's item is queued with its evidence and keeps its
label; the person's is not reopened, its stored label bytes unchanged, and the flag says who
settled it and when. A second run adds nothing; an item the workspace does not know is reported.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from tests import health_sim as sim
from tqaforge.annotation.adjudication import adjudicate, adjudication_queue, resolve
from tqaforge.annotation.reopen import (
    ALREADY_QUEUED,
    ALREADY_SETTLED,
    QUEUED,
    SETTLED,
    UNKNOWN,
    SuspectRequest,
    adjudication_flags,
    send_to_adjudication,
)
from tqaforge.annotation.verification import VERIFICATION_KIND
from tqaforge.health import HealthOptions, run
from tqaforge.health.report import items_section
from tqaforge.health.suspects import suspect_requests
from tqaforge.ids import annotation_task_id
from tqaforge.labels import record_annotation
from tqaforge.queries import CHECKED_BY_PEOPLE, trusted_answers
from tqaforge.store import Workspace, open_workspace


@pytest.fixture(scope="module")
def simulation(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[Path]]:
    root = tmp_path_factory.mktemp("reopen")
    ws, evaluations = sim.build_simulation(root)
    return root, ws, evaluations


@pytest.fixture(scope="module")
def requests(simulation: tuple[Path, Path, list[Path]]) -> list[SuspectRequest]:
    root, _, evaluations = simulation
    report = run(HealthOptions(release=root / "candidate", evaluations=tuple(evaluations), plots=False), builders=[items_section])
    return suspect_requests(report)


@pytest.fixture
def ws(simulation: tuple[Path, Path, list[Path]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    """A copy of the simulated workspace (each test changes its own)."""
    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    shutil.copytree(simulation[1], tmp_path / "ws")
    workspace = open_workspace(tmp_path / "ws")
    yield workspace
    workspace.close()


def _gold_task(ws: Workspace, question_id: str) -> tuple[str, str]:
    with ws.session() as s:
        gold = trusted_answers(s, [question_id], at_least=CHECKED_BY_PEOPLE)[question_id]
    return gold.id, annotation_task_id(VERIFICATION_KIND, "answer", gold.id)


def _label(ws: Workspace, answer_id: str, labels: dict[str, str]) -> None:
    with ws.session() as s:
        for who, decision in labels.items():
            record_annotation(s, kind=VERIFICATION_KIND, target_type="answer", target_id=answer_id, annotator=who,
                              label={"decision": decision}, source="app", source_ref=f"app:{who}:1")


def _stored(ws: Workspace, task_id: str) -> tuple[Any, ...]:
    """The adjudication's stored label bytes, method and decider, and the answer's status, as the database holds them."""
    with ws.connection() as conn:
        row = conn.execute(text("SELECT a.label, a.method, a.decided_by, a.decided_at, s.status FROM adjudications a "
                                "JOIN annotation_tasks t ON t.id = a.task_id JOIN answers s ON s.id = t.target_id "
                                "WHERE a.task_id = :t"), {"t": task_id}).one()
    return tuple(row)


def _count(ws: Workspace, table: str) -> int:
    with ws.connection() as conn:
        return int(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())


def test_suspect_gold_is_queued_with_evidence_and_a_person_s_decision_stays(ws: Workspace, requests: list[SuspectRequest]) -> None:
    planted = {sim.item_id(i) for i in sim.WRONG_GOLD}
    with ws.session() as s:
        by_source = dict(s.exec(text("SELECT source_id, id FROM questions")).all())  # type: ignore[call-overload]
    assert {by_source[k] for k in planted} <= {r.reference for r in requests}  # the planted wrong gold is found
    by_rule, by_person = requests[0].reference, requests[1].reference
    rule_answer, rule_task = _gold_task(ws, by_rule)
    person_answer, person_task = _gold_task(ws, by_person)
    _label(ws, rule_answer, {"ann": "correct", "bob": "correct"})  # unanimous: a rule settles it
    _label(ws, person_answer, {"ann": "correct", "bob": "incorrect"})
    assert adjudicate(ws, kinds=[VERIFICATION_KIND])[VERIFICATION_KIND].unanimous == 1
    resolve(ws, person_task, {"decision": "correct"}, by="ada", note="checked the table")
    rule_before, person_before = _stored(ws, rule_task), _stored(ws, person_task)
    assert rule_before[1] == "unanimous" and person_before[1] == "person"

    unknown = SuspectRequest("not-an-item-of-this-workspace", "r -0.9", release="other 1.0.0")
    sent = send_to_adjudication(ws, [*requests, unknown])
    outcome = {f.reference: f for f in sent.flags}
    assert outcome[by_person].outcome == SETTLED and outcome[by_person].task_id == person_task
    assert "settled by ada on " in outcome[by_person].detail and "evidence only" in outcome[by_person].detail
    assert outcome[by_rule].outcome == QUEUED  # the control: a rule's decision does not keep it out
    assert outcome[unknown.reference].outcome == UNKNOWN and "no question" in outcome[unknown.reference].detail
    assert sent.counts()[QUEUED] == len(requests) - 1
    assert any("1 settled by a person" in line for line in sent.lines()[:1])

    queue = adjudication_queue(ws, kind=VERIFICATION_KIND, limit=100)
    queued = {item.task_id: item for item in queue}
    assert queue.total == len(requests) - 1 and person_task not in queued and rule_task in queued
    for r in requests[2:]:
        item = queued[_gold_task(ws, r.reference)[1]]
        assert item.votes == [] and len(item.flags) == 1  # never verified: a task made for the person, no label
        assert item.flags[0].evidence.startswith("negative discrimination (item analysis of release sim 0.9.0)")
        assert "strongest failing:" in item.flags[0].evidence and item.flags[0].status == "open"
    assert [v["annotators"] for v in queued[rule_task].votes] == [["ann", "bob"]]  # the disagreement's context
    # Nothing a rule or a person settled changed: the stored bytes are the same.
    assert _stored(ws, rule_task) == rule_before and _stored(ws, person_task) == person_before
    settled = adjudication_flags(ws, status="settled")
    assert [f.task_id for f in settled] == [person_task] and "flagged, settled by ada on" in settled.items[0].line()

    tasks, flags = _count(ws, "annotation_tasks"), _count(ws, "adjudication_flags")
    again = send_to_adjudication(ws, [*requests, unknown])  # idempotent
    assert again.counts() == {**dict.fromkeys(again.counts(), 0), ALREADY_QUEUED: len(requests) - 1, ALREADY_SETTLED: 1, UNKNOWN: 1}
    assert (_count(ws, "annotation_tasks"), _count(ws, "adjudication_flags")) == (tasks, flags) == (tasks, len(requests))

    # A person decides a queued item: its flag is answered, it leaves the queue.
    resolve(ws, rule_task, {"decision": "incorrect"}, by="ada")
    assert rule_task not in {item.task_id for item in adjudication_queue(ws, kind=VERIFICATION_KIND, limit=100)}
    assert {f.task_id for f in adjudication_flags(ws, status="settled")} == {person_task, rule_task}


def test_a_finding_on_a_task(ws: Workspace, requests: list[SuspectRequest]) -> None:
    """The label-quality finding names a task: queued when a rule decided it, evidence only when a
    person did; a task of a kind that is not adjudicated, or no task, is reported."""
    answer, task = _gold_task(ws, requests[0].reference)
    _label(ws, answer, {"ann": "correct", "bob": "correct"})
    adjudicate(ws, kinds=[VERIFICATION_KIND])
    evidence = "Dawid-Skene (answer_verification): estimate incorrect (posterior 0.97) against the gold correct"
    sent = send_to_adjudication(ws, [SuspectRequest(task, evidence, "label_quality", "task"),
                                     SuspectRequest("0" * 64, evidence, "label_quality", "task")])
    assert [f.outcome for f in sent.flags] == [QUEUED, UNKNOWN]
    item = next(i for i in adjudication_queue(ws, limit=100) if i.task_id == task)
    assert [f.source for f in item.flags] == ["label_quality"] and item.flags[0].evidence == evidence


def test_cli_health_send_suspects(simulation: tuple[Path, Path, list[Path]], ws: Workspace, tmp_path: Path) -> None:
    from tqaforge.cli import app

    root, _, evaluations = simulation
    args = ["health", "--release", str(root / "candidate"), *(a for e in evaluations for a in ("--evaluations", str(e))),
            "--out", str(tmp_path / "h"), "--no-plots", "--max-suspect-gold", "0.1", "--workspace", str(ws.root)]
    result = CliRunner().invoke(app, [*args, "--send-suspects"])
    assert result.exit_code == 0, result.output
    assert "suspect gold sent to adjudication: 10 queued, 0 already queued" in result.output
    assert "queued: " in result.output
    again = CliRunner().invoke(app, [*args, "--send-suspects"])
    assert "0 queued, 10 already queued" in again.output
    listed = CliRunner().invoke(app, ["agreement", "queue", "--kind", VERIFICATION_KIND, "--workspace", str(ws.root)])
    words = " ".join(w for w in listed.output.split() if w not in "│┃")  # the table folds long cells
    assert listed.exit_code == 0 and "(no label yet) suspect gold (item_analysis, release sim 0.9.0)" in words, listed.output
    assert "negative discrimination" in words
    refused = CliRunner().invoke(app, [a for a in args if a not in ("--workspace", str(ws.root))] + ["--send-suspects"])
    assert refused.exit_code != 0 and "--send-suspects needs the workspace" in refused.output


def test_the_app_s_queue_shows_the_evidence_and_a_person_answers_it(ws: Workspace, requests: list[SuspectRequest],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The Agreement page shows each flag's evidence in the queue, offers a label no annotator gave
    ("incorrect" for a never-verified gold), and a person's decision there settles the flag; a
    flag settled by a person before it was sent is listed as evidence only."""
    import json

    from app_demo import page_runner

    answer, settled_task = _gold_task(ws, requests[0].reference)
    _label(ws, answer, {"ann": "correct", "bob": "incorrect"})
    resolve(ws, settled_task, {"decision": "correct"}, by="ada")
    send_to_adjudication(ws, requests)
    at = page_runner(ws.root, monkeypatch)("agreement.py")
    warnings = [str(w.value).replace("\\", "") for w in at.warning]
    assert len(warnings) == len(requests) - 1 and all("negative discrimination" in w for w in warnings)
    assert any("flagged, settled by ada on" in m.value.replace("\\", "") for m in at.markdown)
    task = _gold_task(ws, requests[1].reference)[1]
    incorrect = json.dumps({"decision": "incorrect"})
    at.selectbox(key=f"pick-{task}").select(incorrect).run()
    at.button(key=f"decide-{task}").click().run()
    assert not at.exception, at.exception
    with ws.connection() as conn:
        flag = conn.execute(text("SELECT status, settled_by FROM adjudication_flags WHERE task_id = :t"), {"t": task}).one()
        decided = conn.execute(text("SELECT method, label FROM adjudications WHERE task_id = :t"), {"t": task}).one()
    assert tuple(flag) == ("settled", "researcher") and decided[0] == "person" and "incorrect" in str(decided[1])


def test_the_label_quality_finding_becomes_a_task_request() -> None:
    """The labels section's Dawid-Skene suspect gold names tasks; its evidence says estimate, gold and votes."""
    from tqaforge.health.report import HealthReport, HealthSection

    labels = HealthSection("labels", "Label quality", (), {"kinds": {"question_typing": {"suspect_gold": [
        {"task_id": "t1", "gold": "reasoning", "gold_posterior": 0.02, "estimate": "extraction", "posterior": 0.98,
         "method": "rule", "decided_by": "majority 2 of 3", "votes": {"ann": "extraction", "bob": "reasoning"}},
        "not a finding"]}}})
    (request,) = suspect_requests(HealthReport("b 1.0.0", [], [labels]))
    assert (request.reference, request.target, request.source, request.release) == ("t1", "task", "label_quality", "b 1.0.0")
    assert request.evidence == ("Dawid-Skene (question_typing): estimate extraction (posterior 0.98) against the gold reasoning "
                                "(rule by majority 2 of 3; posterior 0.02); votes ann=extraction, bob=reasoning")

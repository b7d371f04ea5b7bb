"""make run's demo workspace, built without a model (`tqaforge demo`, issue 27 item 6): every app
page shows something (headless Chromium), every Label Studio kind gets tasks from the demo's push
(the run's real Label Studio), the agents' replies (shipped offline batch files, made by rule by
tests/demo_agents.py) are what the rule writes and vote as it says, the shipped probe predictions
have the score the rule that wrote them says, the example value modification's gold is what its
edited table gives, and a second build adds nothing."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from app_screenshots import PAGES, page_stems, show_page
from browser import running_app
from conftest import start_chrome
from demo_agents import QUESTIONS, demo_replies
from demo_agents import answers as answers_by_rule
from demo_agents import render as render_replies
from demo_predictions import PREDICTIONS, probe_predictions, render
from labelstudio_helpers import new_email, signup
from sqlmodel import select

from tqaforge.annotation.adjudication import adjudication_queue
from tqaforge.annotation.labelstudio.client import client_settings
from tqaforge.annotation.labelstudio.registry import ls_kinds
from tqaforge.annotation.labelstudio.sync import PushOptions, push_pending
from tqaforge.app.common import md
from tqaforge.demo import DEMO_BATCHES
from tqaforge.release.verify import verify_release
from tqaforge.schemas.records import Question
from tqaforge.store import open_workspace
from tqaforge.tables.table import Table

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "data"
HOME = REPO / "tqaforge" / "app" / "main" / "Home.py"
PAGES_DIR = REPO / "tqaforge" / "app" / "pages"
def _env() -> dict[str, str]:
    """No endpoint, no database URL: the demo is a SQLite workspace built without a model."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("TQAFORGE_", "OPENAI_"))}


def _build(root: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "tqaforge", "demo", str(root), "--data", str(DATA)],
                            env=_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:] + result.stdout[-3000:]
    return result, time.monotonic() - started


@pytest.fixture(scope="module")
def demo_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo workspace, built once for the module by the command `make demo` runs."""
    root = tmp_path_factory.mktemp("demo") / "demo-workspace"
    result, seconds = _build(root)
    print(f"demo built in {seconds:.1f} s")
    assert "Traceback" not in result.stderr
    return root


def _counts(root: Path) -> dict[str, int]:
    with sqlite3.connect(root / "tqaforge.db") as db:
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        return {n: db.execute(f'SELECT COUNT(*) FROM "{n}"').fetchone()[0] for n in names}


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and {"releases", "evaluations", "health"} & set(p.parts)}


def test_the_demo_has_every_stage_without_a_model(demo_root: Path) -> None:
    with sqlite3.connect(demo_root / "tqaforge.db") as db:
        one = lambda sql: db.execute(sql).fetchone()[0]  # noqa: E731
        # The agents' replies came from the shipped offline batch files (made by rule): nothing was sent.
        assert db.execute("SELECT transport, model, status, SUM(cost), COUNT(*) FROM llm_calls GROUP BY 1, 2, 3").fetchall() == [
            ("offline", "demo-rule-agents", "ok", 0.0, 5)]  # one question-writing request, 2 questions x 2 agents
        assert one("SELECT COUNT(*) FROM questions WHERE origin = 'rule' AND seed = 0") == 60  # 6 kinds x 10 tables
        assert one("SELECT COUNT(DISTINCT table_id) FROM questions WHERE origin = 'rule'") == 10
        # Three kinds of probe on two tables accepted by both example reviewers; one disputed.
        assert one("SELECT COUNT(*) FROM questions WHERE origin = 'rule' AND status = 'accepted'") == 6
        assert one("SELECT COUNT(*) FROM questions WHERE origin = 'rule' AND status = 'proposed'") == 54
        assert one("SELECT COUNT(*) FROM annotations WHERE kind = 'question_review'") == 14
        assert {r[0] for r in db.execute("SELECT annotator FROM annotations WHERE kind = 'question_review'")} == \
            {"demo-ana", "demo-ben"}
        assert one("SELECT COUNT(*) FROM answers WHERE method = 'probe' AND status = 'gold'") == 60
        assert one("SELECT COUNT(*) FROM variants WHERE perturbation = 'shuffle_rows'") > 0
        # FREB-TQA's published cells adopted by a person's decision: one more shortened table.
        assert one("SELECT COUNT(*) FROM adjudications WHERE kind = 'relevant_cells' AND decided_by = 'demo-researcher'") == 2
        assert one("SELECT COUNT(*) FROM variants WHERE perturbation = 'shorten_to_relevant'") == 8  # 6 imported + 2
        # demo-ana's example value modification of one of them: two variants waiting for blind re-answers.
        assert db.execute("SELECT annotator, source FROM annotations WHERE kind = 'value_modification' AND source != 'imported'"
                          ).fetchall() == [("demo-ana", "demo")]
        assert db.execute("SELECT perturbation, created_by, status, answers FROM variants WHERE origin = 'human' AND "
                          "perturbation LIKE 'value_change%' AND status = 'pending_review' ORDER BY perturbation").fetchall() == [
            ("value_change_answer_changes", "demo-ana", "pending_review", '["-74"]'),
            ("value_change_answer_same", "demo-ana", "pending_review", '["-94"]')]
        # Their gold, worked out here from each edited table: the change from 2018 to 2019 (FREB-TQA's question).
        for table, answers in db.execute("SELECT \"table\", answers FROM variants WHERE created_by = 'demo-ana'"):
            appliances = next(row for row in json.loads(table)["rows"] if row[0] == "Appliances")
            assert json.loads(answers) == [str(int(appliances[1]) - int(appliances[2]))]
    ws = open_workspace(demo_root)
    try:
        queue = adjudication_queue(ws)
        assert queue.total == 1 and queue.items[0].kind == "question_review"
        with ws.session() as s:
            pending = {kind: len(entry.pending(s)) for kind, entry in ls_kinds().items() if entry.supported and entry.pending}
    finally:
        ws.close()
    assert all(pending.values()) and pending["answer_verification"] == 2 and pending["blind_reanswer"] == 2, pending
    release = demo_root / "releases" / "demo-0.1.0"
    assert verify_release(release).ok


def test_the_probe_predictions_score_what_the_rule_says(demo_root: Path) -> None:
    """Overall EM of the shipped probe predictions against the release's gold, counted here with a
    plain string comparison: 50 of 60 (every range one row short)."""
    gold = {}
    for line in (demo_root / "releases" / "demo-0.1.0" / "data" / "base.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        gold[row["id"]] = row["answer"]
    predictions = [json.loads(line) for line in PREDICTIONS.read_text(encoding="utf-8").splitlines()]
    right = sum([p["prediction"].removeprefix("Final Answer: ")] == gold[p["id"]] for p in predictions)
    assert (right, len(predictions)) == (50, 60)
    scores = json.loads((demo_root / "evaluations" / "demo-0.1.0" / "probes_dp" / "scores.json").read_text())
    overall = [r for r in scores["rows"] if r["group"] == "Overall" and r["subset"] == "base"]
    assert len(overall) == 1 and overall[0]["tablebench"] == round(100 * right / len(predictions), 2)
    assert (demo_root / "evaluations" / "demo-0.1.0" / "tablebench_sample_dp" / "scores.json").exists()


def test_the_shipped_probe_predictions_are_the_rule(demo_root: Path) -> None:
    ws = open_workspace(demo_root)
    try:
        assert render(probe_predictions(ws)) == PREDICTIONS.read_text(encoding="utf-8")
    finally:
        ws.close()


def test_an_example_edit_that_no_longer_fits_its_table_is_refused(demo_root: Path, tmp_path: Path) -> None:
    """The example value modification names each changed cell's old value: a shortened table that
    holds something else there is refused with the cell and the fix, and nothing more is recorded."""
    from tqaforge.demo import EXAMPLE_QUESTION, _example_value_modification
    from tqaforge.errors import TqaforgeError
    from tqaforge.schemas.records import Annotation
    from tqaforge.variants.human import shortened_variant

    root = tmp_path / "demo-workspace"
    shutil.copytree(demo_root, root)
    ws = open_workspace(root)
    try:
        with ws.session() as s:
            question = s.exec(select(Question).where(Question.text == EXAMPLE_QUESTION)).one()
            variant = shortened_variant(s, question.id)
            assert variant is not None and variant.table is not None
            rows = [list(r) for r in variant.table["rows"]]
            assert rows[2][1] == "680"
            rows[2][1] = "690"
            variant.table = {**variant.table, "rows": rows}
            s.add(variant)
            labels = len(s.exec(select(Annotation).where(Annotation.kind == "value_modification")).all())
        with pytest.raises(TqaforgeError, match=r"does not fit the shortened table .* r2c1 held '690', not '680'") as raised:
            _example_value_modification(ws)
        assert "EXAMPLE_EDITS" in (raised.value.hint or "")
        with ws.session() as s:
            assert len(s.exec(select(Annotation).where(Annotation.kind == "value_modification")).all()) == labels
    finally:
        ws.close()


def test_the_demo_writes_a_health_report_the_page_shows_at_once(demo_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo's health report (its release on its two evaluations) is on disk, is what the library
    computes on them, and the Health page shows it on its first render, without a click."""
    from app_demo import page_runner

    from tqaforge.health import HEALTH_JSON, HealthOptions, report_files, run
    from tqaforge.health.saved import read_saved_health

    out = demo_root / "health" / "demo-0.1.0"
    saved = read_saved_health(out)
    evaluations = tuple(demo_root / "evaluations" / "demo-0.1.0" / name for name in ("probes_dp", "tablebench_sample_dp"))
    expected = run(HealthOptions(release=demo_root / "releases" / "demo-0.1.0", evaluations=evaluations, workspace=demo_root))
    assert (out / HEALTH_JSON).read_bytes() == report_files(expected)[HEALTH_JSON]
    assert saved.release == "demo 0.1.0" and saved.verdict == expected.verdict() and len(saved.plots) == 2
    assert {"Item analysis", "Label quality", "Memorisation and leakage (duplicates)", "Answer bias"} <= set(saved.sections)
    at = page_runner(demo_root, monkeypatch)("health.py")
    assert "the report written earlier" in "\n".join(c.value for c in at.caption)
    assert [str(e.value) for e in at.error] == [md(f"health of release demo 0.1.0: {expected.verdict()}")]
    assert [c.line() for c in expected.checks] == at.code[0].value.splitlines()
    assert [Path(i.proto.imgs[0].caption).name for i in at.get("image")] == ["difficulty.png", "discrimination.png"]


def test_a_second_build_adds_nothing(demo_root: Path) -> None:
    before, files = _counts(demo_root), _files(demo_root)
    result, seconds = _build(demo_root)
    print(f"demo rebuilt in {seconds:.1f} s")
    assert _counts(demo_root) == before
    assert _files(demo_root) == files
    assert "0 new probes" in result.stdout and "already built" in result.stdout and "already scored" in result.stdout
    assert "health:\n  already written" in result.stdout


def test_every_kind_reaches_label_studio(label_studio, demo_root: Path, tmp_path: Path) -> None:
    """The demo's push (serve --push-pending) on the run's Label Studio: every kind with a label
    configuration gets its tasks, and the projects hold them; a second push sends nothing."""
    root = tmp_path / "demo-workspace"
    shutil.copytree(demo_root, root)  # the other tests (the browser's) see the demo as built
    url, admin_token = label_studio.url, label_studio.token
    settings = client_settings(url, admin_token)
    people = [new_email("demo-ana"), new_email("demo-ben")]
    for who in people:
        signup(url, admin_token, who)
    ws = open_workspace(root)
    try:
        pushed = {s.kind: s for s in push_pending(ws, settings, people, PushOptions(overlap=1))}
        again = {s.kind: s for s in push_pending(ws, settings, people, PushOptions(overlap=1))}
        assert set(pushed) == {k for k, e in ls_kinds().items() if e.supported}
        with httpx.Client(base_url=url, headers={"Authorization": f"Token {admin_token}"}) as admin:
            for kind, summary in pushed.items():
                assert summary.pending > 0 and summary.copies_created == summary.pending, (kind, summary.lines())
                held = sum(admin.get(f"/api/projects/{pid}/").raise_for_status().json()["task_number"]
                           for pid in summary.projects.values())
                assert held == summary.pending, (kind, held)
                assert again[kind].copies_created == 0 and again[kind].copies_present == summary.pending
    finally:
        ws.close()
    # The agents' two voted answers (one agreed, one not) and demo-ana's example modification's two variants.
    assert pushed["answer_verification"].pending == 2 and pushed["blind_reanswer"].pending == 2


def test_the_agents_vote_on_the_questions_the_writer_wrote(demo_root: Path) -> None:
    """The shipped replies (by rule) are the agents': two questions written on the tropical cyclones
    table, the answering agents agree on one (its answer goes to verification) and not on the other
    (manual annotation). The answers are checked against the table file, summed here."""
    with (DATA / "tables" / "tablebench_tropical_cyclones.csv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    severe = sum(int(r["severe tropical cyclones"]) for r in rows)
    lows = sum(int(r["tropical lows"]) for r in rows if r["strongest storm"] in ("marian", "oliver", "chloe"))
    with sqlite3.connect(demo_root / "tqaforge.db") as db:
        written = db.execute("SELECT id, text, status FROM questions WHERE origin = 'llm' ORDER BY text DESC").fetchall()
        assert [(text, status) for _, text, status in written] == [(q, "proposed") for q in QUESTIONS]
        voted = {qid: db.execute("SELECT status, route, \"values\" FROM answers WHERE question_id = ? AND method = 'vote'",
                                 (qid,)).fetchall() for qid, _, _ in written}
    assert voted[written[0][0]] == [("consistent", "verify", json.dumps([str(severe)]))]
    assert voted[written[1][0]] == [("inconsistent", "manual", "[]")]
    assert answers_by_rule(Table.build(list(rows[0]), [list(r.values()) for r in rows]))[QUESTIONS[1]][0] == str(lows)


def test_the_shipped_agent_replies_are_the_rule(demo_root: Path) -> None:
    ws = open_workspace(demo_root)
    try:
        made = demo_replies(ws)
    finally:
        ws.close()
    assert set(made) == set(DEMO_BATCHES)
    for name, lines in made.items():
        assert render_replies(lines) == (DATA / "batches" / DEMO_BATCHES[name]).read_text(encoding="utf-8"), name


# --- every app page in Chromium -------------------------------------------------------------------


def test_every_app_page_of_the_demo_shows_something(demo_root: Path, chromium, tmp_path: Path) -> None:
    # Every page of the app is visited (the overview is the default page, at /): PAGES names each of
    # Home.py's PAGE_LIST, which lists every page file.
    assert sorted(PAGES) == sorted(page_stems()) == sorted(f.stem for f in PAGES_DIR.glob("*.py"))
    with running_app({**_env(), "TQAFORGE_WORKSPACE": str(demo_root)}) as url:
        driver = start_chrome(chromium, tmp_path / "profile", window="1400,2400")
        try:
            for stem in page_stems():
                show_page(driver, url, stem)  # its texts waited for, none of its empty states, no exception
        finally:
            driver.quit()

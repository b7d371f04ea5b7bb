"""Every CLI step a researcher runs has its place in the app (issue 29, item 1): the Annotators,
Evaluations and Releases pages, run for real by Streamlit's AppTest on a workspace with data in
every stage (tests/app_demo.py), each action asserted by its effect on the store or the files.

Label Studio start and stop run a short stand-in for ``label-studio`` (the library finds it
through TQAFORGE_LABEL_STUDIO_VENV, as it finds the real one): a small HTTP server that answers
``/health`` and the token check after a moment, so the page's "starting" state, the library's
status and the stop are all real; the real server's 40-90 s are the session fixtures' business."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from pathlib import Path

import pytest
from app_demo import page_runner, stage_everything
from conftest import free_port, wait_for
from streamlit.testing.v1 import AppTest

from tqaforge.evaluate.predictions import load_release
from tqaforge.people import list_people
from tqaforge.queries import list_releases
from tqaforge.store import Workspace


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    from tqaforge.store import init_workspace

    ws = init_workspace(tmp_path_factory.mktemp("parity") / "ws", name="demo")
    stage_everything(ws)
    return ws


@pytest.fixture
def page(staged: Workspace, monkeypatch: pytest.MonkeyPatch):
    return page_runner(staged.root, monkeypatch)


def _text(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption] + [str(x.value) for x in at.info]
    parts += [str(x.value) for x in at.warning] + [str(x.value) for x in at.success] + [c.value for c in at.code]
    parts += [str(x.value) for x in at.error]
    return "\n".join(parts)


def _plain(element) -> str:
    """An alert's text without the backslashes that keep data from being read as Markdown."""
    return str(element.value).replace("\\", "")


def _button(at: AppTest, label: str):
    return next(b for b in at.button if b.label == label)


def _release(ws: Workspace) -> Path:
    found = [Path(r.path) for r in list_releases(ws) if r.path and r.version == "0.1.0"]
    assert found, "the staged workspace has release 0.1.0"
    return found[0]


# --- Annotators ---------------------------------------------------------------------------


def test_annotators_register_list_and_merge(staged: Workspace, page) -> None:
    at = page("annotators.py")
    next(t for t in at.text_input if t.label == "name").set_value("Carla Diaz")
    next(t for t in at.text_input if t.label.startswith("other names")).set_value("carla, cd")
    _button(at, "register").click().run()
    assert not at.exception, at.exception
    carla = next(r for r in list_people(staged).rows if r["name"] == "Carla Diaz")
    assert {"carla", "cd"} <= set(carla["aliases"])
    assert f"annotator {carla['id']}" in _text(at)
    # A second identity of the same person, then the merge from the page.
    at = page("annotators.py")
    next(t for t in at.text_input if t.label == "name").set_value("C. Diaz")
    _button(at, "register").click().run()
    other = next(r for r in list_people(staged).rows if r["name"] == "C. Diaz")
    at = page("annotators.py")
    assert any("Carla Diaz" in set(f.value["name"]) for f in at.dataframe)  # the list
    keep, same = (s for s in at.selectbox if s.label in ("keep", "is the same person as"))
    keep.set_value(carla["id"])
    same.set_value(other["id"])
    _button(at, "merge").click().run()
    assert not at.exception, at.exception
    merged = next(r for r in list_people(staged).rows if r["id"] == other["id"])
    assert merged["merged_into"] == carla["id"]


def _fake_label_studio(tmp_path: Path) -> Path:
    """A virtualenv-like directory whose bin/label-studio serves 200 on every path once the file
    ``tmp_path/ready`` exists (the test says when the server has finished starting)."""
    venv = tmp_path / "fake-ls"
    (venv / "bin").mkdir(parents=True)
    script = venv / "bin" / "label-studio"
    script.write_text(f"""#!{sys.executable}
import os, sys, time, http.server
argv = sys.argv
host, port = argv[argv.index("--internal-host") + 1], int(argv[argv.index("--port") + 1])
while not os.path.exists({str(tmp_path / "ready")!r}):  # "starting" until the test says
    time.sleep(0.05)
class Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Type", "application/json"); self.end_headers()
        self.wfile.write(b"{{}}")
    def log_message(self, *a):
        pass
http.server.HTTPServer((host, port), Ok).serve_forever()
""")
    script.chmod(0o700)
    return venv


def _end_fake(tmp_path: Path, key: str, pid_of) -> None:
    """However the test ended: let a start still waiting finish (its pid file is written by
    then), and end the stand-in's whole process group."""
    from tqaforge.app.jobs import find_job

    (tmp_path / "ready").touch()
    job = find_job(key)
    if job is not None:
        wait_for(lambda: not job.running, 30, "the background start to end")
    pid = pid_of()
    if pid is not None:
        os.killpg(pid, signal.SIGKILL)


def _with_fake_label_studio(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str):
    """A fresh workspace on a free port whose `label-studio` is the stand-in, and its page runner."""
    from tqaforge.store import init_workspace

    ws = init_workspace(tmp_path / "ws", name=name)
    config = ws.root / "tqaforge.toml"
    config.write_text(config.read_text() + f"\n[labelstudio]\nport = {free_port()}\n")
    monkeypatch.setenv("TQAFORGE_LABEL_STUDIO_VENV", str(_fake_label_studio(tmp_path)))
    return ws, page_runner(ws.root, monkeypatch)


def test_label_studio_servers_add_start_status_and_stop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tqaforge.annotation.labelstudio import manage
    from tqaforge.annotation.labelstudio.annotator_servers import annotator_servers

    ws, run = _with_fake_label_studio(tmp_path, monkeypatch, "servers")
    at = run("annotators.py")
    assert "no annotator has a server yet" in _text(at)
    next(t for t in at.text_input if t.label.startswith("annotator's e-mail")).set_value("dana@example.org")
    _button(at, "give them a server").click().run()
    assert not at.exception, at.exception
    servers = annotator_servers(ws.root)
    assert [manage.read_credentials(s).username for s in servers] == ["dana@example.org"]  # type: ignore[union-attr]
    assert "password:" in _text(at)
    at = run("annotators.py")
    table = next(f.value for f in at.dataframe if "state" in f.value.columns)
    assert list(table["state"]) == ["not running"]
    try:
        _button(at, "start").click().run()
        assert not at.exception, at.exception
        assert "starting 1 Label Studio servers" in _text(at)  # the page returned while it starts
        wait_for(lambda: manage.status(servers[0]).running, 30, "the server's process to exist")
        at = run("annotators.py")
        table = next(f.value for f in at.dataframe if "state" in f.value.columns)
        assert list(table["state"]) == ["starting"] and not manage.status(servers[0]).answers
        assert _button(at, "start").disabled  # no second start while one runs
        (tmp_path / "ready").touch()
        wait_for(lambda: manage.status(servers[0]).answers, 30, "the server to answer")
        from tqaforge.app.jobs import find_job

        job = find_job(f"labelstudio-start:{ws.root.resolve()}")
        assert job is not None
        job.future.result(30)
        at = run("annotators.py")
        table = next(f.value for f in at.dataframe if "state" in f.value.columns)
        assert list(table["state"]) == ["running"] and table["pid"].iloc[0] == manage.status(servers[0]).pid
        assert "dana@example.org: http://127.0.0.2" in _text(at)  # the start's own report, with the login line
        _button(at, "stop").click().run()
        assert not at.exception, at.exception
        assert "stopped" in _text(at)
        assert not manage.status(servers[0]).running
    finally:
        _end_fake(tmp_path, f"labelstudio-start:{ws.root.resolve()}", lambda: manage.status(servers[0]).pid)


def test_the_workspaces_one_server_starts_and_stops_from_the_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A workspace of the earlier layout (no annotator has a server of their own): its one server."""
    from tqaforge.annotation.labelstudio import manage
    from tqaforge.app.jobs import find_job

    ws, run = _with_fake_label_studio(tmp_path, monkeypatch, "one")
    at = run("annotators.py")
    assert "is not running" in _text(at).replace("\\", "")
    assert _button(at, "stop the workspace's server").disabled
    try:
        _button(at, "start the workspace's server").click().run()
        assert not at.exception, at.exception
        wait_for(lambda: manage.status(ws.root).running, 30, "the server's process to exist")
        at = run("annotators.py")
        assert "is starting" in _text(at).replace("\\", "") and _button(at, "start the workspace's server").disabled
        (tmp_path / "ready").touch()
        job = find_job(f"labelstudio-start-one:{ws.root.resolve()}")
        assert job is not None
        job.future.result(30)
        at = run("annotators.py")
        shown = _text(at).replace("\\", "")
        assert "is running" in shown and f"(pid {manage.status(ws.root).pid})" in shown, shown
        _button(at, "stop the workspace's server").click().run()
        assert "stopped" in _text(at)
        assert not manage.status(ws.root).running
    finally:
        _end_fake(tmp_path, f"labelstudio-start-one:{ws.root.resolve()}", lambda: manage.status(ws.root).pid)


def test_annotators_page_shows_the_real_servers_state(annotator_servers, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's real Label Studio servers (ana's and ben's, conftest): the page's status is the
    library's, read only (nothing is started or stopped here: other tests share them)."""
    from tqaforge.annotation.labelstudio import manage
    from tqaforge.annotation.labelstudio.annotator_servers import annotator_servers as servers_of

    at = page_runner(annotator_servers.root, monkeypatch)("annotators.py")
    table = next(f.value for f in at.dataframe if "state" in f.value.columns)
    states = dict(zip(table["annotator"], table["state"]))
    assert states == {annotator_servers.ana: "running", annotator_servers.ben: "running"}
    pids = dict(zip(table["annotator"], table["pid"]))
    for server in servers_of(annotator_servers.root):
        state = manage.status(server)
        assert state.answers and pids[state.annotator] == state.pid
    assert table["memory (MB)"].notna().all()
    progress = next(f.value for f in at.dataframe if "assigned" in f.value.columns)
    assert {annotator_servers.ana, annotator_servers.ben} <= set(progress["email"])


def test_push_and_pull_from_the_app_reach_each_annotators_real_server(annotator_servers, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Annotation page's push and pull on the run's real servers: the same push as
    `tqaforge labelstudio push question_review` (every annotator, overlap 2; idempotent, so the
    other tests of these servers find what they expect), then a pull; the Annotators page then
    shows each one's tasks. Nothing is labelled here (other tests count the labels they make)."""
    from labelstudio_helpers import open_servers_workspace
    from sqlmodel import select

    from tqaforge.schemas.records import LabelStudioTaskCopy

    ws = open_servers_workspace(annotator_servers.root)
    run = page_runner(annotator_servers.root, monkeypatch)
    at = run("annotation.py")
    next(s for s in at.selectbox if s.label == "kind").set_value("question_review")
    _button(at, "push to Label Studio").click().run()
    assert not at.exception and not at.error, _text(at)
    with ws.session() as s:
        copies = s.exec(select(LabelStudioTaskCopy).where(LabelStudioTaskCopy.kind == "question_review")).all()
    assert {c.annotator for c in copies} == {annotator_servers.ana, annotator_servers.ben} and len(copies) == 6
    assert all(c.ls_task_id is not None for c in copies)  # each is a task on its annotator's own server
    _button(at, "pull every label").click().run()
    assert not at.exception and not at.error, _text(at)
    assert any("new labels" in c.value and "projects" in c.value for c in at.code), _text(at)  # the CLI's summary
    at = run("annotators.py")
    progress = next(f.value for f in at.dataframe if "assigned" in f.value.columns)
    assigned = {r["email"]: r["assigned"] for _, r in progress.iterrows() if r["kind"] == "question_review"}
    assert assigned == {annotator_servers.ana: 3, annotator_servers.ben: 3}


# --- Releases -------------------------------------------------------------------------------


def test_releases_verify_shows_a_tampered_release(staged: Workspace, page, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(_release(staged), copy)
    at = page("releases.py")
    next(t for t in at.text_input if t.label.startswith("verify a release directory")).set_value(str(copy))
    _button(at, "verify that directory").click().run()
    assert at.success and not at.error  # control: the untouched copy verifies
    base = copy / "data" / "base.jsonl"
    base.write_text(base.read_text().replace('"', "'", 2))
    next(t for t in at.text_input if t.label.startswith("verify a release directory")).set_value(str(copy))
    _button(at, "verify that directory").click().run()
    assert at.error and "changed: data/base.jsonl" in _plain(at.error[0])


def test_releases_diff_shows_the_rows_that_differ(staged: Workspace, page) -> None:
    from tqaforge.release.build import ReleaseOptions, build_release

    build_release(staged, ReleaseOptions(version="0.2.0", accept_low_agreement="demo", subsets=("base",), serializations=("csv",)))
    at = page("releases.py")
    next(s for s in at.selectbox if s.label == "release").set_value(str(_release(staged)))
    _button(at, "diff").click().run()
    assert not at.exception, at.exception
    summary = next(c.value for c in at.code if "removed" in c.value)
    assert "structure" in summary  # 0.2.0 holds the base items only: the variants are gone


# --- Evaluations ----------------------------------------------------------------------------


def _predictions(release: Path, model: str, right: bool) -> bytes:
    lines = []
    for ref in load_release(release).references:
        if ref.subset == "base":
            answer = ref.answer_text if right else "no idea"
            lines.append({"id": ref.id, "model": model, "method": "DP", "prediction": f"Final Answer: {answer}"})
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def test_evaluations_score_two_uploads_and_compare_them(staged: Workspace, page) -> None:
    release = _release(staged)
    for name, right in (("good", True), ("poor", False)):
        at = page("evaluations.py")
        next(s for s in at.selectbox if s.label == "release").set_value(str(release)).run()
        at.file_uploader[0].set_value((f"{name}.jsonl", _predictions(release, name, right), "application/json")).run()
        _button(at, "score").click().run()
        assert not at.exception, at.exception
        assert not at.error, at.error
        scores = staged.root / "evaluations" / release.name / name / "scores.json"
        assert scores.is_file(), _text(at)
        overall = [r for r in json.loads(scores.read_text())["rows"] if r["level"] == "overall" and r["subset"] == "base"]
        # Right on every item but the chart ones (those need a program that draws the chart).
        assert overall and (overall[0]["normalised"] > 90 if right else overall[0]["normalised"] == 0.0)
    at = page("evaluations.py")
    picker = next(m for m in at.multiselect if m.label.startswith("evaluations to put side by side"))
    picker.set_value([o for o in picker.options if o.endswith("/ good") or o.endswith("/ poor")]).run()
    assert not at.exception, at.exception
    table = next(f.value for f in at.dataframe if "subset" in f.value.columns)
    assert {"good/DP", "poor/DP"} <= set(table.columns)
    base = table[table["subset"] == "base"].iloc[0]
    assert base["good/DP"] > 90 and base["poor/DP"] == 0.0
    comparison = next(c.value for c in at.code if "Paired comparisons" in c.value)
    assert "good/DP" in comparison and "significant" in comparison


def test_evaluations_ask_a_model_then_score_its_replies(staged: Workspace, page, monkeypatch: pytest.MonkeyPatch) -> None:
    """The model run (the real openai client against the suite's loopback server): the replies go
    to evaluations/RELEASE/MODEL-METHOD.jsonl in the workspace, then are scored beside them."""
    from openai_server import OpenAIServer

    release = _release(staged)
    with OpenAIServer(lambda body: "Final Answer: 42") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        at = page("evaluations.py")
        next(s for s in at.selectbox if s.label == "release").set_value(str(release)).run()
        next(t for t in at.text_input if t.label == "model").set_value("loopback-model").run()
        next(n for n in at.number_input if n.label.startswith("ask only the first")).set_value(3)
        _button(at, "ask the model, then score its replies").click().run()
        assert not at.exception and not at.error, _text(at)
        assert len(server.requests) == 3
    predictions = staged.root / "evaluations" / release.name / "loopback-model-DP.jsonl"
    assert [json.loads(line)["prediction"] for line in predictions.read_text().splitlines()] == ["Final Answer: 42"] * 3
    scores = json.loads((staged.root / "evaluations" / release.name / "loopback-model-DP" / "scores.json").read_text())
    assert scores["matched"] == 3
    assert any("3 of 3 rows answered" in c.value for c in at.code), _text(at)  # the CLI's summaries


def test_evaluations_say_what_is_missing_to_ask_a_model(page, monkeypatch: pytest.MonkeyPatch) -> None:
    at = page("evaluations.py")
    assert "No model endpoint is set up for this workspace" in _text(at).replace("\\", "")
    assert _button(at, "ask the model, then score its replies").disabled
    assert "--model" not in _text(at)  # the app's words, not the CLI's flags
    # With an endpoint and no model name: the model is what is missing.
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "tqaforge" / "app" / "pages" / "evaluations.py"),
                           default_timeout=60).run()
    next(t for t in at.text_input if t.label == "model").set_value("").run()
    assert "Enter the model's name above." in _text(at).replace("\\", "") and "No model endpoint" not in _text(at)
    assert _button(at, "ask the model, then score its replies").disabled
    next(t for t in at.text_input if t.label == "model").set_value("gpt-x").run()
    assert not _button(at, "ask the model, then score its replies").disabled


# --- Variants -----------------------------------------------------------------------------


def test_variants_are_built_from_the_page(staged: Workspace, page) -> None:
    """The Variants page builds the grid as `tqaforge variants build` does (build_variant_grid):
    a new seed of one perturbation adds that seed's variants to the store, and nothing else."""
    from sqlmodel import select

    from tqaforge.schemas.records import Variant

    def seeds() -> dict[int, int]:
        with staged.session() as s:
            rows = s.exec(select(Variant).where(Variant.perturbation == "shuffle_columns")).all()
        found: dict[int, int] = {}
        for v in rows:
            found[v.seed] = found.get(v.seed, 0) + 1
        return found

    before = seeds()
    assert 7 not in before
    at = page("variants.py")
    at.multiselect(key="grid-perturbations").set_value(["shuffle_columns"])
    at.multiselect(key="grid-serializations").set_value(["csv"])
    at.number_input(key="grid-seed").set_value(7)
    at.checkbox(key="grid-overwrite").check()  # replace the prompts file the staged workspace made with other choices
    next(b for b in at.button if b.label == "build variants").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    after = seeds()
    assert after.get(7, 0) > 0 and {k: v for k, v in after.items() if k != 7} == before
    assert any("variants" in c.value for c in at.code), "the build's summary is shown"


def test_a_server_s_state_in_a_word() -> None:
    """The Annotators page's state column: running only when it answers; a process that does not
    answer yet, or a start under way, is starting."""
    from tqaforge.annotation.labelstudio.manage import ServerStatus

    def status(pid: int | None, answers: bool) -> ServerStatus:
        return ServerStatus(Path("."), "http://127.0.0.1:1", pid, answers, None, False, Path("c"), Path("l"))

    assert status(7, True).state() == "running" and status(7, True).state(starting=True) == "running"
    assert status(7, False).state() == "starting"
    assert status(None, False).state() == "not running" and status(None, False).state(starting=True) == "starting"

"""Hostile input to the app's parity pages (issue 29, item 1) and the library calls behind them:
a malformed predictions file, a release path that is no release, a blank annotator name, a Label
Studio that fails to start, and saved evaluations that cannot be compared (one system, two
releases, a damaged or missing item file). Each is a clear message; nothing is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from app_demo import page_runner, stage_everything
from conftest import free_port, wait_for
from test_app_parity import _button, _plain, _release, _text

from tqaforge.errors import EvaluateError
from tqaforge.evaluate.side_by_side import compare_evaluations
from tqaforge.people import list_people
from tqaforge.store import Workspace


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    from tqaforge.store import init_workspace

    ws = init_workspace(tmp_path_factory.mktemp("hostile-parity") / "ws", name="demo")
    stage_everything(ws)
    return ws


@pytest.fixture
def page(staged: Workspace, monkeypatch: pytest.MonkeyPatch):
    return page_runner(staged.root, monkeypatch)


def test_annotators_a_bad_name_is_a_message_and_nothing_is_added(staged: Workspace, page) -> None:
    before = len(list_people(staged).rows)
    at = page("annotators.py")
    next(t for t in at.text_input if t.label == "name").set_value("   ")
    _button(at, "register").click().run()
    assert not at.exception and at.error, "a blank name is refused with a message"
    assert len(list_people(staged).rows) == before


def test_releases_verify_of_a_directory_that_is_not_a_release(page, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    at = page("releases.py")
    next(t for t in at.text_input if t.label.startswith("verify a release directory")).set_value(str(tmp_path))
    _button(at, "verify that directory").click().run()
    assert not at.exception, at.exception
    assert at.error and "manifest" in _plain(at.error[0])


def test_evaluations_a_malformed_predictions_file_writes_nothing(staged: Workspace, page) -> None:
    release = _release(staged)
    at = page("evaluations.py")
    next(s for s in at.selectbox if s.label == "release").set_value(str(release)).run()
    at.file_uploader[0].set_value(("broken.jsonl", b'{"id": "x", "prediction": \n not json at all\n', "application/json")).run()
    _button(at, "score").click().run()
    assert not at.exception, at.exception
    assert at.error and "broken.jsonl" in _plain(at.error[0]) and "line" in _plain(at.error[0])
    assert not (staged.root / "evaluations" / release.name / "broken").exists()


def test_evaluations_a_release_path_that_is_not_a_release(staged: Workspace, page, tmp_path: Path) -> None:
    at = page("evaluations.py")
    next(s for s in at.selectbox if s.label == "release").set_value("").run()
    next(t for t in at.text_input if t.label == "release directory").set_value(str(tmp_path))
    at.file_uploader[0].set_value(("good.jsonl", b'{"id": "a", "prediction": "Final Answer: 1"}\n', "application/json")).run()
    _button(at, "score").click().run()
    assert not at.exception, at.exception
    assert at.error and "manifest" in _plain(at.error[0])
    assert not (staged.root / "evaluations" / tmp_path.name).exists()


def test_evaluations_an_upload_named_only_dots_stays_in_its_own_directory(staged: Workspace, page) -> None:
    """Case: an upload named ``...jsonl`` (stem ``..``) wrote its scores above the release's directory."""
    from test_app_parity import _predictions

    release = _release(staged)
    at = page("evaluations.py")
    next(s for s in at.selectbox if s.label == "release").set_value(str(release)).run()
    at.file_uploader[0].set_value(("...jsonl", _predictions(release, "dots", True), "application/json")).run()
    _button(at, "score").click().run()
    assert not at.exception and not at.error, _text(at)
    assert (staged.root / "evaluations" / release.name / "predictions" / "scores.json").is_file()
    assert not (staged.root / "evaluations" / "scores.json").exists()
    assert not (staged.root / "evaluations" / release.name / "scores.json").exists()


def test_evaluations_a_release_directory_that_does_not_exist(staged: Workspace, page, tmp_path: Path) -> None:
    at = page("evaluations.py")
    next(s for s in at.selectbox if s.label == "release").set_value("").run()
    next(t for t in at.text_input if t.label == "release directory").set_value(str(tmp_path / "nowhere"))
    at.file_uploader[0].set_value(("good.jsonl", b'{"id": "a", "prediction": "Final Answer: 1"}\n', "application/json")).run()
    _button(at, "score").click().run()
    assert not at.exception, at.exception
    assert at.error and "nowhere" in _plain(at.error[0])
    assert not (staged.root / "evaluations" / "nowhere").exists()


def test_a_label_studio_that_fails_to_start_is_reported_and_leaves_nothing_running(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Case: the server exits at once (a broken install): the page says which one and why (the
    library's own report, with the log's tail), and the server is not shown as running."""
    from tqaforge.annotation.labelstudio import manage
    from tqaforge.annotation.labelstudio.annotator_servers import add_annotator_server, annotator_servers
    from tqaforge.app.jobs import find_job
    from tqaforge.store import init_workspace

    ws = init_workspace(tmp_path / "ws", name="broken")
    config = ws.root / "tqaforge.toml"
    config.write_text(config.read_text() + f"\n[labelstudio]\nport = {free_port()}\n")
    add_annotator_server(ws, "eve@example.org")
    venv = tmp_path / "broken-ls"
    (venv / "bin").mkdir(parents=True)
    script = venv / "bin" / "label-studio"
    script.write_text("#!/bin/sh\necho 'ImportError: no module named django' >&2\nexit 3\n")
    script.chmod(0o700)
    monkeypatch.setenv("TQAFORGE_LABEL_STUDIO_VENV", str(venv))
    run = page_runner(ws.root, monkeypatch)
    at = run("annotators.py")
    _button(at, "start").click().run()
    assert not at.exception, at.exception
    job = find_job(f"labelstudio-start:{ws.root.resolve()}")
    assert job is not None
    wait_for(lambda: not job.running, 30, "the start to fail")
    at = run("annotators.py")
    shown = _text(at)
    assert "eve@example.org: NOT started" in shown and "exited with code 3" in shown and "django" in shown, shown
    table = next(f.value for f in at.dataframe if "state" in f.value.columns)
    assert list(table["state"]) == ["not running"]
    assert not manage.status(annotator_servers(ws.root)[0]).running
    assert not _button(at, "start").disabled  # it can be tried again


def test_a_person_named_in_markdown_shows_as_text(staged: Workspace, page) -> None:
    """Case: a name holding an image link and Streamlit directives, registered on the page, made
    the browser fetch the image in the page's confirmation."""
    from test_hostile_app_text import assert_text_only, hostile_texts

    at = page("annotators.py")
    name = hostile_texts("http://127.0.0.1:9")["name"]
    next(t for t in at.text_input if t.label == "name").set_value(name)
    _button(at, "register").click().run()
    assert at.success, _text(at)
    assert_text_only(at)
    assert any(r["name"] == name for r in list_people(staged).rows)


# --- compare_evaluations: saved evaluations that do not compare -------------------------------


def _evaluation(directory: Path, release: str, systems: dict[str, dict[str, float]]) -> Path:
    """An evaluation's two files, as `tqaforge evaluate` writes them: Overall rows and item scores."""
    directory.mkdir(parents=True)
    rows = [{"system": s, "subset": "base", "config": "base", "level": "overall", "group": "Overall",
             "normalised": 100 * sum(v.values()) / len(v)} for s, v in systems.items()]
    (directory / "scores.json").write_text(json.dumps({"rows": rows}))
    items = [{"system": s, "id": i, "item_id": i, "subset": "base", "config": "base", "qtype": "FactChecking",
              "qsubtype": "MatchBased", "dataset": "demo", "score": v, "correct": v == 1.0, "answered": True}
             for s, per in systems.items() for i, v in per.items()]
    header = {"format": "tqaforge-item-scores", "version": 1, "release": release, "rows": len(items)}
    (directory / "items.jsonl").write_text("".join(json.dumps(x) + "\n" for x in [header, *items]))
    return directory


def test_compare_two_evaluations_of_one_release(tmp_path: Path) -> None:
    """The control for the refusals below: two systems of one release compare."""
    a = _evaluation(tmp_path / "a", "demo 0.1.0", {"m/DP": {f"q{i}": 1.0 for i in range(30)}})
    b = _evaluation(tmp_path / "b", "demo 0.1.0", {"m/DP": {f"q{i}": float(i < 5) for i in range(30)}})
    side = compare_evaluations([a, b])
    # The same system name in two evaluations: told apart by their directories.
    assert side.systems == ("a: m/DP", "b: m/DP") and side.items == 30
    assert side.comparison is not None and side.comparison.pairs[0].significant
    assert side.overall[0]["a: m/DP"] == 100.0


def test_compare_refuses_one_system(tmp_path: Path) -> None:
    a = _evaluation(tmp_path / "a", "demo 0.1.0", {"m/DP": {"q1": 1.0}})
    with pytest.raises(EvaluateError, match="two systems or more, got 1"):
        compare_evaluations([a])


def test_compare_refuses_evaluations_of_different_releases(tmp_path: Path) -> None:
    a = _evaluation(tmp_path / "a", "demo 0.1.0", {"m/DP": {"q1": 1.0}})
    b = _evaluation(tmp_path / "b", "demo 0.2.0", {"n/DP": {"q1": 0.0}})
    with pytest.raises(EvaluateError, match="different releases") as caught:
        compare_evaluations([a, b])
    assert "demo 0.1.0" in str(caught.value) and "demo 0.2.0" in str(caught.value)


def test_compare_names_a_damaged_or_missing_item_file(tmp_path: Path) -> None:
    a = _evaluation(tmp_path / "a", "demo 0.1.0", {"m/DP": {"q1": 1.0, "q2": 0.0}})
    b = _evaluation(tmp_path / "b", "demo 0.1.0", {"n/DP": {"q1": 1.0, "q2": 1.0}})
    lines = (b / "items.jsonl").read_text().splitlines()
    (b / "items.jsonl").write_text("\n".join(lines[:-1]) + "\n")  # cut off
    with pytest.raises(EvaluateError, match="cut off"):
        compare_evaluations([a, b])
    (b / "items.jsonl").unlink()
    with pytest.raises(EvaluateError, match="does not exist"):
        compare_evaluations([a, b])


def test_compare_without_a_shared_item_has_no_test(tmp_path: Path) -> None:
    a = _evaluation(tmp_path / "a", "demo 0.1.0", {"m/DP": {"q1": 1.0}})
    b = _evaluation(tmp_path / "b", "demo 0.1.0", {"n/DP": {"q2": 1.0}})
    side = compare_evaluations([a, b])
    assert side.comparison is None and side.note == "no base item is scored for every system"
    assert any("no significance test" in line for line in side.lines())


def test_the_evaluations_page_shows_a_damaged_evaluation_as_a_message(staged: Workspace, page) -> None:
    root = staged.root / "evaluations" / "demo-9.9.9"
    _evaluation(root / "x", "demo 9.9.9", {"m/DP": {"q1": 1.0}})
    _evaluation(root / "y", "demo 9.9.9", {"n/DP": {"q1": 0.0}})
    (root / "y" / "items.jsonl").write_text("not json\n")
    at = page("evaluations.py")
    picker = next(m for m in at.multiselect if m.label.startswith("evaluations to put side by side"))
    picker.set_value([o for o in picker.options if o.startswith("demo-9.9.9")]).run()
    assert not at.exception, at.exception
    assert at.error and "items.jsonl:1" in _plain(at.error[0])


def test_agreement_applying_the_rules_with_no_labels_says_so_and_writes_nothing(tmp_path: Path, monkeypatch) -> None:
    """The Agreement page's "apply the rules to new labels" on a workspace with no label: the
    library's "nothing to adjudicate" line, no traceback, no adjudication row."""
    from app_demo import page_runner
    from sqlmodel import select

    from tqaforge.schemas.records import Adjudication
    from tqaforge.store import init_workspace

    ws = init_workspace(tmp_path / "ws", name="empty")
    at = page_runner(ws.root, monkeypatch)("agreement.py")
    _button(at, "apply the rules to new labels").click().run()
    assert not at.exception and not at.error, (at.exception, at.error)
    assert any("nothing to adjudicate" in str(c.value) for c in at.code), [c.value for c in at.code]
    with ws.session() as s:
        assert s.exec(select(Adjudication)).first() is None


def test_agreement_applying_the_rules_twice_changes_nothing_the_second_time(staged: Workspace, page) -> None:
    """Idempotent from the app as from the CLI: a second click decides nothing new."""
    from tqaforge.annotation.adjudication import adjudication_queue

    at = page("agreement.py")
    _button(at, "apply the rules to new labels").click().run()
    queued = adjudication_queue(staged).total
    at = page("agreement.py")
    _button(at, "apply the rules to new labels").click().run()
    assert not at.exception and not at.error
    shown = "\n".join(str(c.value) for c in at.code)
    ruled = [line for line in shown.splitlines() if "unanimous" in line]
    assert ruled and all(line.endswith(" 0 new, 0 updated") for line in ruled), shown
    assert adjudication_queue(staged).total == queued


def test_the_cli_gives_a_file_named_only_dots_its_own_directory_too(staged: Workspace, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The same case through `tqaforge evaluate` (one default directory, the library's, for both)."""
    from test_app_parity import _predictions
    from typer.testing import CliRunner

    from tqaforge.cli import app

    release = _release(staged)
    dots = tmp_path / "...jsonl"
    dots.write_bytes(_predictions(release, "dots", True))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["evaluate", "--release", str(release), "--predictions", str(dots)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "evaluations" / release.name / "predictions" / "scores.json").is_file()
    assert not (tmp_path / "evaluations" / "scores.json").exists()
    assert not (tmp_path / "evaluations" / release.name / "scores.json").exists()

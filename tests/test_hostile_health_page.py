"""The Health page on a damaged ``health.json`` (the release's or the one in health/RELEASE): a
message naming the file and what to do, no traceback; the library reader refuses each damage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from app_demo import page_runner

from tests import health_sim as sim
from tqaforge.errors import HealthError
from tqaforge.health.saved import read_saved_health

GOOD = {"release": "sim 0.9.0", "passed": True, "verdict": "healthy: all 1 checks pass", "sections": [{"title": "Item analysis"}],
        "checks": [{"name": "suspect_gold", "section": "items", "value": 0.01, "limit": 0.05, "passed": True, "detail": "1 of 100"}]}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return sim.build_app_workspace(tmp_path_factory.mktemp("hpage-hostile"))


@pytest.mark.parametrize("content, message", [
    (b"{not json", "cannot read the health report"),
    (b"\xff\xfe\x00binary", "cannot read the health report"),
    (b"[1, 2]", "not a JSON object"),
    (json.dumps({**GOOD, "passed": "yes"}).encode(), "no release, passed and verdict"),
    (json.dumps({**GOOD, "checks": [{**GOOD["checks"][0], "value": "lots"}]}).encode(), "a check's value is 'lots'"),
    (json.dumps({**GOOD, "checks": [{**GOOD["checks"][0], "passed": 1}]}).encode(), "a check's passed is 1"),
    (json.dumps({**GOOD, "sections": [7]}).encode(), "a section has no title"),
    ("[" * 100_000, "cannot read the health report"),
])
def test_a_damaged_health_json_is_a_message(built: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch,
                                            content: bytes | str, message: str) -> None:
    ws, release = built
    out = ws / "health" / "candidate"
    out.mkdir(parents=True, exist_ok=True)
    (out / "health.json").write_bytes(content.encode() if isinstance(content, str) else content)
    with pytest.raises(HealthError, match="run the health report again"):
        read_saved_health(out)
    at = page_runner(ws, monkeypatch)("health.py")  # fails on any exception the page raised
    errors = [str(e.value).replace("\\", "").replace("'", "") for e in at.error]  # md() escapes punctuation
    assert len(errors) == 1 and message.replace("'", "") in errors[0] and str(out / "health.json") in errors[0]
    assert "run the health report again" in errors[0] and "--" not in errors[0].replace("pytest-", "")  # the page's words, no CLI flag


def test_the_good_file_reads_back(built: tuple[Path, Path], tmp_path: Path) -> None:
    (tmp_path / "health.json").write_text(json.dumps(GOOD), encoding="utf-8")
    saved = read_saved_health(tmp_path / "health.json")
    assert saved.passed and saved.sections == ("Item analysis",) and saved.markdown is None and saved.plots == ()
    assert saved.lines()[1] == "  [pass] suspect_gold: 1.00% (limit 5.00%); 1 of 100"


def test_a_damaged_evaluation_picked_is_a_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws, _ = sim.build_app_workspace(tmp_path)
    bad = ws / "evaluations" / "candidate" / "e1" / "items.jsonl"
    bad.write_text(bad.read_text(encoding="utf-8").splitlines()[0] + "\n{not json\n", encoding="utf-8")
    at = page_runner(ws, monkeypatch)("health.py")
    at.button[0].click().run()
    assert not at.exception, at.exception
    errors = [str(e.value).replace("\\", "") for e in at.error]
    assert len(errors) == 1 and f"{bad}:2: not JSON" in errors[0] and "score the predictions again" in errors[0]
    assert not (ws / "health" / "candidate").exists()  # nothing written from a report that could not be made


def _files(directory: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()} if directory.exists() else {}


@pytest.mark.parametrize("name, content, message", [
    ("missing.jsonl", None, "no such reference file"),
    ("notes.txt", b"just some notes\n", "not a reference file: cannot tell the format from the extension '.txt'"),
    ("picture.png", b"\x89PNG\r\n\x1a\n\x00\x00", "not a reference file"),
    ("a-folder.jsonl", "dir", "no such reference file"),
])
def test_a_reference_that_is_no_table_file_is_a_message_and_nothing_is_written(
        built: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str, content: bytes | str | None,
        message: str) -> None:
    ws, _ = built
    path = tmp_path / name
    if content == "dir":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    before = _files(ws / "health")
    at = page_runner(ws, monkeypatch)("health.py")
    at.text_area(key="references_more").set_value(f"{path}\n")
    at.button[0].click().run()
    assert not at.exception, at.exception
    errors = [str(e.value).replace("\\", "") for e in at.error]
    assert len(errors) == 1 and str(path) in errors[0] and message.replace("'", "") in errors[0].replace("'", ""), errors
    assert "--" not in errors[0].replace("pytest-", "")  # what to give, in the page's words: no CLI option
    assert _files(ws / "health") == before  # nothing written, the report of before kept as it was


def test_the_cli_says_a_bad_reference_before_any_section_runs(built: tuple[Path, Path], tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from tqaforge.cli import app

    ws, release = built
    evaluations = [a for e in sorted((ws / "evaluations" / "candidate").iterdir()) for a in ("--evaluations", str(e))]
    # A wide terminal: Rich folds a path longer than a line mid-word, which no join undoes (xdist's are longer).
    result = CliRunner(env={"COLUMNS": "500"}).invoke(app, ["health", "--release", str(release), *evaluations, "--irt",
                                                             "--out", str(tmp_path / "h"), "--reference", str(tmp_path / "nope.jsonl")])
    said = " ".join(result.output.split())  # the terminal folds long lines
    assert result.exit_code == 1 and f"reference set {tmp_path / 'nope.jsonl'}: no such reference file" in said, said
    assert "Traceback" not in said and not (tmp_path / "h").exists()


@pytest.mark.parametrize("values, message", [
    ({"max_nonsense": 0.1}, "unknown health threshold 'max_nonsense'"),
    ({"max_suspect_gold": 1.5}, "must be a share from 0 to 1"),
    ({"max_leaked": -0.1}, "must be a share from 0 to 1"),
    ({"max_leaked": float("nan")}, "must be a share from 0 to 1"),
    ({"max_below_mdd": "0.1"}, "must be a share from 0 to 1"),
    ({"max_below_mdd": True}, "must be a share from 0 to 1"),
    ({"min_systems": 1}, "min_systems must be a whole number of 2 or more"),
    ({"min_systems": None}, "min_systems must be a whole number of 2 or more"),
])
def test_thresholds_from_a_form_refuse_nonsense(values: dict, message: str) -> None:
    from tqaforge.health import Thresholds

    with pytest.raises(HealthError, match=message.replace("(", r"\(")):
        Thresholds.from_values(values)
    assert Thresholds.from_values({"max_leaked": 0.1, "max_suspect_gold": None}) == Thresholds(max_leaked=0.1, max_suspect_gold=None)


def test_the_endpoint_shown_beside_the_model_never_shows_its_password(built: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    ws, _ = built
    run_page = page_runner(ws, monkeypatch)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://user:hunter2-secret@127.0.0.1:9/v1")
    at = run_page("health.py")
    shown = [c.value.replace("\\", "") for c in at.caption if "endpoint" in c.value]  # md() escapes punctuation
    assert len(shown) == 1 and "127.0.0.1" in shown[0] and "hunter2" not in shown[0]
    assert [t for t in at.text_input if t.key == "model"]  # an endpoint: the model can be named
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-only-a-key")  # a key alone: OpenAI's own endpoint
    at = run_page("health.py")
    assert any("endpoint api.openai.com" in c.value.replace("\\", "") for c in at.caption)
    assert "sk-only-a-key" not in "\n".join(c.value for c in at.caption)

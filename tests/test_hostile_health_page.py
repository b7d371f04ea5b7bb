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

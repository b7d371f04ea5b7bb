"""The Health page (AppTest): it lists the release and the evaluations made of it, runs the same
report as ``tqaforge health`` on its button (the files it writes are the library's bytes), and
shows a report written earlier without running again."""

from __future__ import annotations

from pathlib import Path

import pytest
from app_demo import page_runner
from streamlit.testing.v1 import AppTest

from tests import health_sim as sim
from tqaforge.health import HEALTH_JSON, HealthOptions, report_files, run


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return sim.build_app_workspace(tmp_path_factory.mktemp("hpage"))


def _text(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption] + [str(x.value) for x in at.info]
    parts += [str(x.value) for x in at.success] + [str(x.value) for x in at.error] + [c.value for c in at.code]
    return "\n".join(parts)


def test_health_page_runs_the_report_then_shows_it_again(built: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    ws, release = built
    page = page_runner(ws, monkeypatch)
    at = page("health.py")
    evaluations = sorted((ws / "evaluations" / "candidate").iterdir())
    assert at.multiselect[0].value == [str(e) for e in evaluations]  # this release's evaluations, picked by default
    assert "no health report of candidate yet" in _text(at)
    at.button[0].click().run()
    assert not at.exception, at.exception
    expected = run(HealthOptions(release=release, evaluations=tuple(evaluations), workspace=ws))
    text = _text(at)
    assert not expected.passed and f"health of release sim 0.9.0: {expected.verdict()}" in [str(x.value) for x in at.error]
    assert all(c.line() in text for c in expected.checks) and "[FAIL] suspect_gold" in text
    assert {s.title for s in expected.sections} <= {e.label for e in at.expander}
    out = ws / "health" / "candidate"
    written = (out / HEALTH_JSON).read_bytes()
    assert written == report_files(expected)[HEALTH_JSON]
    assert [Path(i.proto.imgs[0].caption).name for i in at.get("image")] == ["difficulty.png", "discrimination.png"]
    # Every flagged item listed with its reasons: the simulation's planted ones (tests/health_sim.py).
    assert expected.flagged_line() in text and expected.flagged_line().startswith("items flagged: 48 of 150")
    (listed,) = at.dataframe
    assert dict(zip(listed.value["item"], listed.value["reasons"])) == {k: ", ".join(v) for k, v in expected.flagged_items().items()}

    again = page("health.py")  # a fresh visit: the report on disk, not run again
    assert (out / HEALTH_JSON).read_bytes() == written
    text = _text(again)
    assert "the report written earlier" in text and "[FAIL] suspect_gold" in text and "Item analysis" in text
    assert expected.verdict() in [str(x.value) for x in again.error][0]
    assert [Path(i.proto.imgs[0].caption).name for i in again.get("image")] == ["difficulty.png", "discrimination.png"]


def test_health_page_without_evaluations_keeps_its_button_off(built: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    ws, _ = built
    at = page_runner(ws, monkeypatch)("health.py")
    at.multiselect[0].set_value([]).run()
    assert at.button[0].disabled and "pick the evaluations of this release above" in _text(at)

"""The Health page's controls (AppTest), each seen to change the report it runs and writes: the
thresholds (a limit set so a check fails, a check turned off), the IRT fit, the reference sets
(a file of the release's own items makes every item leak; no reference set, none), a model asked
the questions with the tables withheld (the real ``openai`` client to the loopback scripted
server; without an endpoint the page says what is missing), and the button that sends the
suspect gold to the adjudication queue (queued, then already queued; one a person settled
before is evidence only)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from app_demo import page_runner
from openai_server import OpenAIServer
from streamlit.testing.v1 import AppTest
from test_reopen import _gold_task, _label

from tests import health_sim as sim
from tqaforge.annotation.adjudication import resolve
from tqaforge.annotation.reopen import adjudication_flags
from tqaforge.health import HEALTH_JSON, HealthOptions, run
from tqaforge.health.report import items_section
from tqaforge.health.suspects import suspect_requests
from tqaforge.store import open_workspace


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return sim.build_app_workspace(tmp_path_factory.mktemp("hcontrols"))


def _text(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption] + [str(x.value) for x in at.info]
    parts += [str(x.value) for x in at.success] + [str(x.value) for x in at.error] + [c.value for c in at.code]
    parts += [str(x.value) for x in at.warning]
    return "\n".join(parts)


def _page(ws: Path, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    """The page, its shipped reference sets left out (the leakage section against them takes seconds)."""
    at = page_runner(ws, monkeypatch)("health.py")
    at.multiselect(key="references").set_value([])
    return at


def _run(at: AppTest, button: int = 0) -> AppTest:
    at.button[button].click().run()
    assert not at.exception, at.exception
    return at


def _saved(ws: Path) -> dict:
    return json.loads((ws / "health" / "candidate" / HEALTH_JSON).read_text(encoding="utf-8"))


def test_thresholds_decide_the_verdict(built: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    ws, _ = built
    at = _page(ws, monkeypatch)
    assert at.number_input(key="threshold_max_suspect_gold").value == 0.05  # the defaults shown
    assert at.checkbox(key="check_max_suspect_gold").value and not at.checkbox(key="check_max_solved_by_none").value
    assert at.number_input(key="threshold_max_solved_by_none").disabled and at.number_input(key="threshold_min_systems").value == 5
    at.checkbox(key="check_max_suspect_gold").uncheck()  # off: reported, not checked
    at.checkbox(key="check_max_solved_by_none").check().run()  # its number can be set once ticked
    at.number_input(key="threshold_max_solved_by_none").set_value(0.05)
    _run(at)
    assert [str(x.value) for x in at.success] == ["health of release sim 0.9.0: healthy: all 1 checks pass"]
    assert "[pass] solved_by_none: 2.67% (limit 5.00%)" in _text(at) and "suspect_gold" not in at.code[0].value
    assert [c["name"] for c in _saved(ws)["checks"]] == ["solved_by_none"] and _saved(ws)["passed"]
    at.number_input(key="threshold_max_solved_by_none").set_value(0.02)  # four of 150 is more: it fails
    _run(at)
    assert not at.success and "UNHEALTHY: 1 of 1 checks fail" in str(at.error[0].value)
    assert "[FAIL] solved_by_none: 2.67% (limit 2.00%)" in _text(at) and not _saved(ws)["passed"]
    at.checkbox(key="check_max_suspect_gold").check().run()
    at.number_input(key="threshold_max_suspect_gold").set_value(0.2)
    at.number_input(key="threshold_min_systems").set_value(15)  # more than the fourteen systems scored
    _run(at)
    checks = {c["name"]: c for c in _saved(ws)["checks"]}
    assert set(checks) == {"suspect_gold", "solved_by_none"} and not checks["suspect_gold"]["checked"]
    assert "[FAIL] suspect_gold: cannot be checked (limit 20.00%); no base items scored by 15 systems or more" in _text(at)


def test_the_irt_fit_is_run_only_when_ticked(built: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    ws, _ = built
    at = _run(_page(ws, monkeypatch))
    assert "2PL IRT: not asked for" in _text(at) and "slow" not in " ".join(str(w.value) for w in at.warning)
    assert "irt" not in json.dumps(_saved(ws)["sections"][0]["data"].get("irt") or {})
    at.checkbox(key="irt").check().run()
    assert "The IRT fit is slow" in str(at.warning[0].value)
    _run(at)
    assert "2PL IRT: girth 2PL (marginal ML) on 142 items" in _text(at)
    assert _saved(ws)["sections"][0]["data"]["irt"]["items"]


def test_reference_sets_decide_what_leaks(built: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    ws, _ = built
    at = _page(ws, monkeypatch)
    assert at.multiselect(key="references").options  # the shipped files are offered (left out here)
    at.checkbox(key="check_max_leaked").check().run()
    at.number_input(key="threshold_max_leaked").set_value(0.1)
    _run(at)  # the control: no reference set, nothing leaks
    assert "against 0 reference files" in _text(at) and "[pass] leaked: 0.00%" in _text(at)
    at.text_area(key="references_more").set_value("../sim.jsonl\n")  # the release's own source, relative to the workspace
    _run(at)
    text = _text(at)
    assert "against 1 reference files" in text and "150 in references" in text and "[FAIL] leaked: 100.00%" in text
    leak = next(s for s in _saved(ws)["sections"] if s["name"] == "leakage")
    assert [Path(r["path"]).name for r in leak["data"]["references"]] == ["sim.jsonl"]


def test_a_model_is_offered_only_with_an_endpoint(built: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    ws, _ = built
    at = _page(ws, monkeypatch)
    missing = [c.value for c in at.caption if "needs an LLM endpoint" in c.value]
    assert len(missing) == 1 and "OPENAI_BASE_URL" in missing[0] and "--" not in missing[0]  # the app's words, no CLI flag
    assert not [t for t in at.text_input if t.key == "model"]
    with OpenAIServer(lambda body: "Final Answer: 1000") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        at = AppTest.from_file(str(Path(sim.__file__).parents[1] / "tqaforge" / "app" / "pages" / "health.py"), default_timeout=120).run()
        at.multiselect(key="references").set_value([])
        assert not [c for c in at.caption if "needs an LLM endpoint" in c.value]
        _run(at)  # no model named: nobody asked
        assert len(server.requests) == 0 and "Answerable from the question alone" not in {e.label for e in at.expander}
        at.text_input(key="model").set_value("m")
        at.checkbox(key="check_max_question_only").check().run()
        at.number_input(key="threshold_max_question_only").set_value(0.0)
        at.multiselect(key="model_checks").set_value(["question_only"])
        _run(at)
        asked = len(server.requests)
        assert asked == sim.N_ITEMS
        assert "Answerable from the question alone" in {e.label for e in at.expander}
        assert "Memorisation probes (model)" not in {e.label for e in at.expander}
        text = _text(at)
        assert "Question only (m, table withheld): 150 of 150 items asked" in text and "[pass] question_only: 0.00%" in text
        assert any(str(asked) in c.value and "paid" in c.value for c in at.code)  # what the calls cost, as the CLI prints it
        # The memorisation probes: their own choice, a cap on the tables probed.
        at.multiselect(key="model_checks").set_value(["memorisation"])
        at.number_input(key="memorisation_tables").set_value(2)
        _run(at)
        assert len(server.requests) > asked  # the probes were sent
        assert "Memorisation probes (model)" in {e.label for e in at.expander}
        assert "(the first 2 of " in _text(at)  # the cap reached the probes


def test_send_suspect_gold_fills_the_queue(built: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source, release = built
    ws = Path(shutil.copytree(source, tmp_path / "ws"))  # the queue of a copy: the other tests keep theirs empty
    evaluations = tuple(sorted((ws / "evaluations" / "candidate").iterdir()))
    requests = suspect_requests(run(HealthOptions(release=release, evaluations=evaluations, plots=False), builders=[items_section]))
    assert len(requests) == 10
    workspace = open_workspace(ws)
    try:  # a person settled one suspect's gold before the report: it stays theirs
        answer, task = _gold_task(workspace, requests[0].reference)
        _label(workspace, answer, {"ann": "correct", "bob": "incorrect"})
        resolve(workspace, task, {"decision": "correct"}, by="ada")
        assert adjudication_flags(workspace).total == 0
    finally:
        workspace.close()
    at = _run(_page(ws, monkeypatch), button=1)
    assert "9 queued, 0 already queued, 1 settled by a person (kept as evidence only), 0 unknown" in str(at.success[0].value)
    assert "suspect gold sent to adjudication: 9 queued" in _text(at) and (ws / "health" / "candidate" / HEALTH_JSON).is_file()
    workspace = open_workspace(ws)
    try:
        assert adjudication_flags(workspace, status="open").total == 9
    finally:
        workspace.close()
    _run(at, button=1)
    assert "0 queued, 9 already queued, 1 settled by a person" in str(at.info[0].value)

"""Question-only answering (tqaforge.health.question_only): a model asked each base item's question
with the table withheld, through the gateway (the real ``openai`` client over HTTP to the loopback
scripted server of tests/openai_server.py).

The scripted model says "Yes" to every yes/no question (9 of 10 golds are "Yes") and 1 to every
count (no gold is 1): the section flags exactly the yes/no subtype. A second run is answered from
the workspace's ledger (no request reaches the server); ``max_cost`` caps what the server receives
and the items left unasked are reported as such; the requests hold no cell of any table (checked
at the server; the control, ``evaluate --model`` on the same items, is seen to hold them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from openai_server import OpenAIServer
from question_only_bench import N_PER_SUBTYPE, bench_release, fresh_workspace, llm_of, says_yes, table_cells  # noqa: F401  (the release and ws fixtures)
from test_hostile_budget import MODEL, PRICE, check_capped, greedy, ledger
from typer.testing import CliRunner

from tqaforge.cli import app
from tqaforge.evaluate.predictions import load_release
from tqaforge.health import HealthOptions, Thresholds, run
from tqaforge.health.question_only import QuestionOnlyOptions, question_only, question_only_prompt
from tqaforge.health.report import question_only_section
from tqaforge.llm import LLMSettings
from tqaforge.store import Workspace, init_workspace

N_ITEMS = 2 * N_PER_SUBTYPE


def _llm(server: OpenAIServer, **kw: object) -> LLMSettings:
    return llm_of(server, MODEL, **kw)


def test_the_subtype_answerable_without_the_table_is_flagged_and_a_second_run_is_free(release: Path, ws: Workspace) -> None:
    loaded = load_release(release)
    options = QuestionOnlyOptions(model=MODEL, list_most=3)
    with OpenAIServer(says_yes) as server:
        first = question_only(ws, loaded, options, llm=_llm(server))
        sent = len(server.requests)
        again = question_only(ws, loaded, options, llm=_llm(server))
        assert len(server.requests) == sent  # the second run: not one HTTP request
    assert sent == N_ITEMS and first.calls.paid == N_ITEMS
    assert again.calls.paid == 0 and again.calls.cached == N_ITEMS and again.as_dict() == first.as_dict()
    by = {s.subtype: s for s in first.subtypes}
    assert first.flagged == ["MatchBased"] and sorted(first.checkable) == ["Counting", "MatchBased"]
    yes_no, counting = by["MatchBased"], by["Counting"]
    assert (yes_no.asked, yes_no.right, yes_no.share_right) == (N_PER_SUBTYPE, N_PER_SUBTYPE - 1, pytest.approx(0.9))
    assert (counting.asked, counting.right, counting.flag) == (N_PER_SUBTYPE, 0, False)
    # Compared with the best constant answer (bias.py): "Yes" scores the same 0.9 on the yes/no items.
    assert yes_no.best_constant.casefold() == "yes" and yes_no.best_constant_score == pytest.approx(0.9)
    # The items answered right are listed with their question, at most list_most of them.
    text = "\n".join(first.lines())
    assert "[QUESTION ONLY]" in text and "... and 6 more" in text and "among the winners" in text
    assert len(first.as_dict()["subtypes"][1]["answered_right"]) == 3
    assert first.not_asked == 0 and "NOT ASKED" not in text
    json.dumps(first.as_dict())


def test_no_request_holds_a_cell_of_the_table(release: Path, ws: Workspace, tmp_path: Path) -> None:
    """The attacker's side: the server reads every request body; none holds a table cell. The
    control (evaluate --model, which shows the table) is seen to leak every item's cells."""
    from tqaforge.evaluate.model_run import ModelRunOptions, run_model

    cells = table_cells(release)
    assert len(cells) >= 4 * 3 * N_ITEMS  # the canaries are there to be found

    def leaked(bodies: list[dict]) -> set[str]:
        text = json.dumps(bodies, ensure_ascii=False)
        return {c for c in cells if c in text}

    with OpenAIServer(says_yes) as server:
        question_only(ws, load_release(release), QuestionOnlyOptions(model=MODEL), llm=_llm(server))
        ours = list(server.requests)
        run_model(ws, ModelRunOptions(release=release, model=MODEL, out=tmp_path / "dp.jsonl"), llm=_llm(server))
        control = server.requests[len(ours):]
    assert len(ours) == len(control) == N_ITEMS
    assert leaked(ours) == set()
    assert leaked(control) == cells  # the same check sees a table that is sent
    # The prompt says the table is withheld and asks for the DP agent's final-answer line.
    prompt = ours[0]["messages"][0]["content"]
    assert "NOT given" in prompt and "Final Answer:" in prompt
    assert all(b["temperature"] == 0.0 for b in ours)


def test_the_budget_caps_the_requests_and_the_report_counts_the_items_not_asked(release: Path, tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    loaded = load_release(release)
    asked: dict[float, int] = {}
    for budget in (0.1, 2.0):
        ws = init_workspace(tmp_path / f"ws-{budget}", name="t")
        try:
            # An endpoint that bills the most the gateway believes (greedy): the budget binds.
            with OpenAIServer(lambda body: greedy(says_yes(body))(body), latency_s=0.05) as server:
                found = question_only(ws, loaded, QuestionOnlyOptions(model=MODEL, max_cost=budget),
                                      llm=_llm(server, prices={MODEL: PRICE}, max_cost=budget))
                asked[budget] = check_capped(server, ws, budget)  # no request past the budget, counted at the server
            assert found.asked == asked[budget] == len(ledger(ws))
        finally:
            ws.close()
        if budget == 0.1:
            assert 0 < found.asked < N_ITEMS and found.not_asked == N_ITEMS - found.asked
            text = "\n".join(found.lines())
            assert f"{found.not_asked} items NOT ASKED (not counted as unanswerable)" in text and "larger budget" in text
            data = found.as_dict()
            assert data["not_asked"] == found.not_asked and data["stopped"]
            # A share is of the items asked: the unasked are never counted as answered wrong.
            for s in found.subtypes:
                assert s.asked + s.not_asked == s.n and (s.asked == 0 or s.share_right == s.right / s.asked)
    assert asked[2.0] == N_ITEMS > asked[0.1]  # the control: the cap is what stopped the requests


def _evaluation(release: Path, tmp_path: Path) -> Path:
    from tqaforge.evaluate.harness import EvaluateOptions, evaluate

    rows = [json.loads(line) for line in (release / "data" / "base.jsonl").read_text().splitlines()]
    preds = tmp_path / "p.jsonl"
    preds.write_text("".join(json.dumps({"id": r["id"], "model": "s", "prediction": "Final Answer: 1"}) + "\n" for r in rows))
    evaluate(EvaluateOptions(release=release, predictions=preds, out=tmp_path / "eval", plots=False))
    return tmp_path / "eval"


def test_the_section_in_the_report_and_the_command(release: Path, ws: Workspace, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """HealthOptions(model=...) adds the section; max_question_only checks the share of subtypes
    flagged; `tqaforge health --model` prints it and what the calls cost, and exits 1 when it fails."""
    evaluation = _evaluation(release, tmp_path)
    thresholds = Thresholds(max_suspect_gold=None, max_question_only=0.25)
    with OpenAIServer(says_yes) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        report = run(HealthOptions(release=release, evaluations=(evaluation,), workspace=ws.root, model=MODEL,
                                   thresholds=thresholds), builders=[question_only_section])
        section = report.sections[0]
        assert section.name == "question_only" and section.data["flagged"] == ["MatchBased"]
        match_based = {r.id for r in load_release(release).references if r.subset == "base" and r.qsubtype == "MatchBased"}
        assert report.flagged_items() == {item: ("question_only",) for item in sorted(match_based)} and match_based
        assert [(c.name, c.value, c.passed) for c in report.checks] == [("question_only", 0.5, False)]
        loose = run(HealthOptions(release=release, evaluations=(evaluation,), workspace=ws.root, model=MODEL,
                                  question_only_threshold=0.95, thresholds=thresholds), builders=[question_only_section])
        assert loose.passed and loose.sections[0].data["flagged"] == []  # 0.9 right is not above 0.95
        assert loose.flagged_items() == {}
        result = CliRunner().invoke(app, ["health", "--release", str(release), "--evaluations", str(evaluation),
                                          "--workspace", str(ws.root), "--model", MODEL, "--model-check", "question_only",
                                          "--no-plots", "--out", str(tmp_path / "h"),
                                          "--thresholds", "max_suspect_gold=none,max_question_only=0.25"])
        sent = len(server.requests)
    assert sent == N_ITEMS  # the library runs and the command asked each item once: the rest from the ledger
    assert result.exit_code == 1, result.output
    flat = " ".join(result.output.split())
    assert "[QUESTION ONLY]" in flat and "[FAIL] question_only: 50.00%" in flat and "0 paid calls, 20 from the cache" in flat
    saved = json.loads((tmp_path / "h" / "health.json").read_text())
    assert next(s for s in saved["sections"] if s["name"] == "question_only")["data"]["flagged"] == ["MatchBased"]


def test_without_a_model_the_section_is_absent_or_its_check_fails_blind(release: Path, tmp_path: Path) -> None:
    evaluation = _evaluation(release, tmp_path)
    quiet = run(HealthOptions(release=release, evaluations=(evaluation,)), builders=[question_only_section])
    assert quiet.sections == []
    gated = run(HealthOptions(release=release, evaluations=(evaluation,), thresholds=Thresholds(max_question_only=0.1)),
                builders=[question_only_section])
    assert not gated.passed and not gated.checks[0].checked and "no model" in gated.sections[0].body[0]


def test_the_prompt_carries_the_subtype_format_rules_and_the_question() -> None:
    from tqaforge.evaluate.predictions import Reference
    from tqaforge.prompts import format_rules

    ref = Reference("r0", "base", "r0", "base", "NumericalReasoning", "Ranking", ("a, b",), "a, b", 0, "Rank them {0}?")
    prompt = question_only_prompt(ref)
    assert prompt.rstrip().endswith("Question: Rank them {0}?")  # a brace in a question is text, not a field
    assert format_rules("Ranking").strip() in prompt

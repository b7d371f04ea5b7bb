"""Hostile inputs of question-only answering (tqaforge.health.question_only): empty, garbage and
huge replies are scored wrong (never a crash); an endpoint that goes down mid-run stops it with a
clear error and the calls made stay in the ledger (running again pays only for the rest); a release
with no base item to ask; a model without a workspace; bad options."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from openai_server import OpenAIServer, Scripted
from question_only_bench import N_PER_SUBTYPE, bench_release, fresh_workspace, llm_of  # noqa: F401  (the release and ws fixtures)
from test_hostile_budget import MODEL, ledger

from tqaforge.errors import ConfigError, HealthError
from tqaforge.evaluate.predictions import load_release
from tqaforge.health import HealthOptions, Thresholds
from tqaforge.health.question_only import QuestionOnlyOptions, question_only
from tqaforge.health.report import HealthContext, question_only_section
from tqaforge.llm import LLMSettings
from tqaforge.store import Workspace

pytestmark = pytest.mark.hostile
N_ITEMS = 2 * N_PER_SUBTYPE


def _llm(server: OpenAIServer, **kw: Any) -> LLMSettings:
    return llm_of(server, MODEL, **kw)


def test_empty_garbage_and_huge_replies_are_scored_wrong(release: Path, ws: Workspace) -> None:
    """Every reply is useless in its own way; the yes/no golds are mostly "Yes", so a reply that
    were read as anything but wrong would show up as a right answer."""
    kinds = [Scripted(text=""), Scripted(text="Yes" * 400_000), Scripted(text="}{ garbage ]]"), Scripted(text="Final Answer:"), Scripted(text="\x00\x1b[2J Final Answer"),
             # Long but within what max_tokens allows, billed honestly: read, and wrong (5,000 answers for one).
             Scripted(text="Final Answer: " + "Yes, " * 5000, completion_tokens=256)]
    seen: dict[str, int] = {}

    def reply(body: dict[str, Any]) -> Scripted:
        prompt = body["messages"][0]["content"]
        k = seen.setdefault(prompt, len(seen))
        return kinds[k % len(kinds)]

    with OpenAIServer(reply) as server:
        found = question_only(ws, load_release(release), QuestionOnlyOptions(model=MODEL),
                              llm=_llm(server, max_reply_bytes=64 * 1024))
    assert found.asked == N_ITEMS and found.not_asked == 0
    assert all(s.right == 0 for s in found.subtypes) and found.flagged == []


@pytest.mark.parametrize("malformed", [Scripted(text=None), Scripted(raw=b"{not json"), Scripted(empty_choices=True)],
                         ids=["null-content", "not-json", "no-choices"])
def test_a_reply_that_is_no_chat_completion_stops_the_run_as_evaluate_does(release: Path, ws: Workspace,
                                                                           malformed: Scripted) -> None:
    """Not JSON, no choices, no content: the gateway retries it, then the endpoint is failing (as
    for `evaluate --model`): a clear error; the items answered before it stay in the ledger."""
    def reply(body: dict[str, Any]) -> Scripted | str:
        return malformed if "player 3 " in body["messages"][0]["content"] else "Final Answer: Yes"

    with OpenAIServer(reply) as server:
        with pytest.raises(HealthError, match="malformed reply") as caught:
            question_only(ws, load_release(release), QuestionOnlyOptions(model=MODEL), llm=_llm(server, concurrency=1))
    assert "question-only answering stopped after" in str(caught.value) and "run again" in str(caught.value.hint)
    assert any(r.status == "ok" for r in ledger(ws))


def test_an_endpoint_down_mid_run_is_a_clear_error_and_the_calls_made_are_kept(release: Path, ws: Workspace) -> None:
    loaded = load_release(release)
    answered = 6

    def failing(body: dict[str, Any]) -> Scripted | str:
        failing.n += 1  # type: ignore[attr-defined]
        return "Final Answer: Yes" if failing.n <= answered else Scripted(status=500)  # type: ignore[attr-defined]

    failing.n = 0  # type: ignore[attr-defined]
    with OpenAIServer(failing) as server:
        with pytest.raises(HealthError, match=r"question-only answering stopped after 6 of 20 items") as caught:
            question_only(ws, loaded, QuestionOnlyOptions(model=MODEL), llm=_llm(server, concurrency=1, max_retries=1))
    assert "run again" in str(caught.value.hint) and "stored" in str(caught.value.hint)
    kept = [r for r in ledger(ws) if r.status == "ok"]
    assert len(kept) == answered
    with OpenAIServer(lambda body: "Final Answer: Yes") as server:
        found = question_only(ws, loaded, QuestionOnlyOptions(model=MODEL), llm=_llm(server))
        assert len(server.requests) == N_ITEMS - answered  # the calls kept are not paid again
    assert found.asked == N_ITEMS and found.calls.cached == answered


def test_an_endpoint_nobody_listens_on(release: Path, ws: Workspace) -> None:
    with OpenAIServer(lambda body: "x") as server:
        url = server.url
    llm = LLMSettings(model=MODEL, base_url=url, api_key="sk-test", backoff_s=0.01)
    with pytest.raises(HealthError, match="stopped after 0 of 20 items") as caught:
        question_only(ws, load_release(release), QuestionOnlyOptions(model=MODEL), llm=llm)
    assert "start the model server" in str(caught.value.hint)


def test_a_release_with_no_base_item_to_ask(release: Path, ws: Workspace) -> None:
    loaded = load_release(release)
    with OpenAIServer(lambda body: "Final Answer: Yes") as server:
        with pytest.raises(HealthError, match="no base item scored by a final answer") as caught:
            question_only(ws, replace(loaded, references=[]), QuestionOnlyOptions(model=MODEL), llm=_llm(server))
        # Only charts (scored by running code): nothing to ask either, and the message counts them.
        charts = [replace(r, qtype="Visualization", qsubtype="ChartGeneration") for r in loaded.references]
        with pytest.raises(HealthError, match=f"{N_ITEMS} charts or table answers left out"):
            question_only(ws, replace(loaded, references=charts), QuestionOnlyOptions(model=MODEL), llm=_llm(server))
        assert server.requests == []
    assert "leave out --model" in str(caught.value.hint)


def test_a_model_without_a_workspace_and_bad_options(release: Path) -> None:
    ctx = HealthContext(HealthOptions(release=release, model=MODEL), load_release(release), ())
    with pytest.raises(HealthError, match="no workspace given") as caught:
        question_only_section(ctx)
    assert "--workspace" in str(caught.value.hint)
    for bad in ({"threshold": 1.5}, {"threshold": -0.1}, {"min_items": 0}, {"max_tokens": 0}, {"model": " "}):
        with pytest.raises(ConfigError):
            QuestionOnlyOptions(**{"model": MODEL, **bad})  # type: ignore[arg-type]
    assert Thresholds.parse("max_question_only=0.2").max_question_only == 0.2
    with pytest.raises(HealthError, match="max_question_only"):
        Thresholds(max_question_only=2.0)

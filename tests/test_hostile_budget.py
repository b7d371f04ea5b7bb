"""Hostile-input suite: the budget is a cap on every paid path, whatever the endpoint claims.

Issue 23, item 8: against replies claiming 5,000,000 completion tokens, ``evaluate --model
--max-cost 1`` stored 8 calls costing $40, printed "$5.0001 spent" and exited 0. Tested from the
attacker's side: the loopback server (the real ``openai`` client over HTTP) counts the requests
it receives, and the sum of their worst cases (what the server could honestly bill for them: a
token per byte of the prompt it got plus the chat template, a reply of the ``max_tokens`` it
was sent) must stay within the budget. Each case has a control: a larger budget lets more
requests through, so the test can see a cap that does not hold.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any, Callable

import pytest
from openai_server import OpenAIServer, Scripted
from sqlmodel import select
from typer.testing import CliRunner

from tqaforge.answers.annotate import AnswerOptions, generate_answers
from tqaforge.answers.methods import parse_methods
from tqaforge.cli import app
from tqaforge.errors import BudgetExceeded
from tqaforge.generation.classify import ClassifyOptions, classify_questions
from tqaforge.generation.questions import GenerationOptions, generate_questions
from tqaforge.ingest import import_paths
from tqaforge.llm import Gateway, LLMSettings, Price, run
from tqaforge.llm.budget import Budget
from tqaforge.llm.replies import (
    PROMPT_TOKENS_PER_MESSAGE_SLACK,
    PROMPT_TOKENS_SLACK,
    TEMPLATE_TOKENS,
    TEMPLATE_TOKENS_PER_MESSAGE,
)
from tqaforge.release.build import ReleaseOptions, build_release
from tqaforge.schemas.records import LLMCall
from tqaforge.store import Workspace, init_workspace

pytestmark = pytest.mark.hostile

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "sample" / "tablebench_sample.jsonl"
MODEL = "m"
# Dear on purpose, so that a few requests exhaust a budget: a reply of 4,096 tokens is $0.41.
PRICE = Price(input=10.0, output=100.0)


def prompt_bytes(body: dict[str, Any]) -> int:
    return sum(len(str(m.get("content") or "").encode("utf-8")) for m in body["messages"])


def worst(body: dict[str, Any], price: Price = PRICE) -> float:
    """What the server could honestly bill for a request it received: a token per byte of the
    prompt and the chat template's tokens, and a reply of the max_tokens it was sent."""
    n = len(body["messages"])
    assert TEMPLATE_TOKENS_PER_MESSAGE * n + TEMPLATE_TOKENS <= 16 * n + 256  # the allowance stays small
    return price.cost(prompt_bytes(body) + TEMPLATE_TOKENS_PER_MESSAGE * n + TEMPLATE_TOKENS, body["max_tokens"])


def five_million(text: str) -> Callable[[dict[str, Any]], Scripted]:
    """The issue's endpoint: every reply claims 5,000,000 completion tokens."""
    return lambda body: Scripted(text=text, completion_tokens=5_000_000)


def greedy(text: str) -> Callable[[dict[str, Any]], Scripted]:
    """An endpoint that claims the most the gateway believes: max_tokens of reply, and prompt
    tokens at the edge of what it accepts (far more than the prompt's bytes)."""
    def reply(body: dict[str, Any]) -> Scripted:
        n = len(body["messages"])
        claimed = prompt_bytes(body) + PROMPT_TOKENS_PER_MESSAGE_SLACK * n + PROMPT_TOKENS_SLACK
        return Scripted(text=text, prompt_tokens=claimed, completion_tokens=body["max_tokens"])
    return reply


def ledger(ws: Workspace) -> list[LLMCall]:
    with ws.session() as s:
        return list(s.exec(select(LLMCall)))


def check_capped(server: OpenAIServer, ws: Workspace, budget: float) -> int:
    """The attacker's view: every request carried a max_tokens, none arrived past the budget,
    and the ledger holds no more than the budget. The number of requests received."""
    bodies = list(server.requests)
    assert bodies and all(isinstance(b.get("max_tokens"), int) and b["max_tokens"] > 0 for b in bodies)
    assert sum(worst(b) for b in bodies) <= budget + 1e-9
    rows = ledger(ws)
    assert sum(r.cost for r in rows) <= budget + 1e-9
    return len(bodies)


@pytest.fixture
def new_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Workspace]:
    """A fresh SQLite workspace with the TableBench sample (tables and questions) imported; each
    run gets its own, so no call is answered from an earlier run's ledger."""
    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    made: list[Workspace] = []

    def make(name: str) -> Workspace:
        ws = init_workspace(tmp_path / name, name=name)
        made.append(ws)
        assert not import_paths(ws, [SAMPLE]).failed
        return ws

    yield make
    for ws in made:
        ws.close()


def release_of(ws: Workspace, out: Path) -> Path:
    build_release(ws, ReleaseOptions(version="1.0.0", out=out, serializations=("csv", "markdown")))
    return out


def priced(ws: Workspace, prices: dict[str, Price], server: OpenAIServer | None = None,
           monkeypatch: pytest.MonkeyPatch | None = None) -> None:
    """The workspace's config prices the models; the endpoint is the loopback server."""
    lines = "".join(f'\n[llm.prices."{m}"]\ninput = {p.input}\noutput = {p.output}\n' for m, p in prices.items())
    ws.paths.config.write_text(ws.paths.config.read_text() + lines)
    if server is not None and monkeypatch is not None:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


def printed_cost(output: str) -> float:
    match = re.search(r"cost \$([0-9.]+): \d+ paid calls, \d+ from the cache", output)
    assert match, output
    return float(match.group(1))


# --- evaluate --model: the case ------------------------------------------------------


@pytest.mark.parametrize("endpoint", [five_million, greedy], ids=["claims-5M-tokens", "claims-the-most-believed"])
def test_evaluate_model_sends_nothing_past_max_cost(new_workspace, tmp_path, monkeypatch, endpoint) -> None:
    """`evaluate --model --max-cost`: no request arrives past the budget, each call is charged
    at most its own worst case, the summary prints what the ledger holds, the run exits 1 (its
    scores would be a part's); the control, a larger budget, lets more requests through."""
    received = {}
    for budget in (1.0, 4.0):
        ws = new_workspace(f"ws-{budget}")
        release = release_of(ws, tmp_path / f"release-{budget}")
        # Latency: every request the gateway lets out is in flight before the first reply.
        with OpenAIServer(endpoint("Final Answer: 1"), latency_s=0.3) as server:
            priced(ws, {MODEL: PRICE}, server, monkeypatch)
            result = CliRunner().invoke(app, ["-w", str(ws.root), "evaluate", "--release", str(release), "--model", MODEL,
                                              "--max-cost", str(budget), "--no-plots", "--out", str(tmp_path / f"o-{budget}")])
            received[budget] = check_capped(server, ws, budget)
        assert result.exit_code == 1, result.output
        assert "stopped early" in result.output and "Traceback" not in result.output
        assert not (tmp_path / f"o-{budget}" / "scores.json").exists()  # no scores of a partial run
        held = sum(r.cost for r in ledger(ws))
        assert printed_cost(result.output) == pytest.approx(held, abs=5e-5)
        assert held < PRICE.cost(0, 5_000_000)  # never what the endpoint claimed
        for row in ledger(ws):  # each row charged at most the worst case of its request
            body = next(b for b in server.requests if b["messages"] == row.messages)
            assert row.cost <= worst(body) + 1e-12
    assert received[4.0] > received[1.0]  # the control: the cap is what stops the requests


def test_a_larger_claim_than_the_prompt_is_charged_as_sent(new_workspace, tmp_path, monkeypatch) -> None:
    """Prompt tokens are believed up to a server-side slack, but never charged beyond what the
    prompt as sent can cost; completion tokens never beyond max_tokens."""
    ws = new_workspace("ws")
    release = release_of(ws, tmp_path / "release")
    with OpenAIServer(greedy("Final Answer: 1")) as server:
        priced(ws, {MODEL: PRICE}, server, monkeypatch)
        result = CliRunner().invoke(app, ["-w", str(ws.root), "evaluate", "--release", str(release), "--model", MODEL,
                                          "--limit", "3", "--no-plots", "--out", str(tmp_path / "o")])
        bodies = list(server.requests)
    assert result.exit_code == 0, result.output
    rows = ledger(ws)
    assert len(rows) == len(bodies) == 3
    for row in rows:
        body = next(b for b in bodies if b["messages"] == row.messages)
        assert row.prompt_tokens > prompt_bytes(body) + 1000  # the claim is kept as the provenance ...
        assert row.cost == pytest.approx(worst(body))  # ... but charged as the request's worst case
        assert row.cost < PRICE.cost(row.prompt_tokens, row.completion_tokens)


# --- every other paid path -------------------------------------------------------------------


def _question_rounds(ws: Workspace, llm: LLMSettings, tmp_path: Path) -> None:
    generate_questions(ws, GenerationOptions(subtypes=("Counting", "Ranking"), per_round=2, target=1000), llm)


def _typing(ws: Workspace, llm: LLMSettings, tmp_path: Path) -> None:
    try:
        classify_questions(ws, ClassifyOptions(method="llm"), llm)
    except BudgetExceeded:
        pass  # typing raises the stop (its summary is not written); what was sent is what counts


def _answers(ws: Workspace, llm: LLMSettings, tmp_path: Path) -> None:
    generate_answers(ws, AnswerOptions(methods=parse_methods("dp,tcot"), questions=("all",)), llm)


def _judge(ws: Workspace, llm: LLMSettings, tmp_path: Path) -> None:
    """The judge of `evaluate --predictions ... --judge-model ... --max-cost`: one budget."""
    release = release_of(ws, tmp_path / f"release-{ws.root.name}")
    rows = [json.loads(line) for line in (release / "data" / "base.jsonl").read_text().splitlines()]
    preds = tmp_path / f"p-{ws.root.name}.jsonl"
    preds.write_text("".join(json.dumps({"id": r["id"], "prediction": "Final Answer: 1"}) + "\n" for r in rows))
    priced(ws, {llm.model: PRICE})
    result = CliRunner().invoke(app, ["-w", str(ws.root), "evaluate", "--release", str(release), "--predictions", str(preds),
                                      "--judge-model", llm.model, "--max-cost", str(llm.max_cost), "--no-plots",
                                      "--out", str(tmp_path / f"o-{ws.root.name}")], env={"OPENAI_BASE_URL": llm.base_url or ""})
    assert result.exit_code in (0, 1) and "Traceback" not in result.output, result.output
    assert (result.exit_code == 1) == ("stopped early" in result.output)


# Each path and a budget that stops it part-way (a verdict is far cheaper than an answer).
PATHS = {"question rounds": (_question_rounds, 1.0), "typing": (_typing, 1.0), "answers": (_answers, 1.0),
         "judge": (_judge, 0.3)}


@pytest.mark.parametrize("path", list(PATHS))
def test_every_paid_path_sends_nothing_past_the_budget(new_workspace, tmp_path, monkeypatch, path) -> None:
    """Question rounds, question typing, answer agents and the judge go through the same budget
    and clamp: against an endpoint that claims the most the gateway believes, no request arrives
    past the budget; the control, three times the budget, lets more through."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    received = {}
    step, small = PATHS[path]
    for budget in (small, 3 * small):
        ws = new_workspace(f"ws-{budget}")
        with OpenAIServer(greedy('{"correct": "no"}'), latency_s=0.05) as server:
            llm = LLMSettings(model=MODEL, base_url=server.url, api_key="sk-test", prices={MODEL: PRICE},
                              max_cost=budget, backoff_s=0.01)
            step(ws, llm, tmp_path)
            received[budget] = check_capped(server, ws, budget)
    assert received[3 * small] > received[small], received


def test_the_model_run_and_its_judge_share_one_max_cost(new_workspace, tmp_path, monkeypatch) -> None:
    """`evaluate --model M --judge-model J --max-cost X`: the model's calls and the judge's
    together stay within X (the judge gets what the model run left); --judge-max-cost gives the
    judge a budget of its own, the control."""
    judge_price = Price(input=10.0, output=2000.0)  # a verdict of 200 tokens: $0.40
    for judge_own in (False, True):
        ws = new_workspace(f"ws-{judge_own}")
        release = release_of(ws, tmp_path / f"release-{judge_own}")
        with OpenAIServer(greedy('{"correct": "yes"}'), latency_s=0.05) as server:
            priced(ws, {MODEL: PRICE, "judge": judge_price}, server, monkeypatch)
            # Five answers of at most $0.46 each, then what is left of $3 for five verdicts of $0.40.
            args = ["-w", str(ws.root), "evaluate", "--release", str(release), "--model", MODEL, "--limit", "5",
                    "--judge-model", "judge", "--max-cost", "3", "--no-plots", "--out", str(tmp_path / f"o-{judge_own}")]
            result = CliRunner().invoke(app, args + (["--judge-max-cost", "3"] if judge_own else []))
            bodies = list(server.requests)
        judged = [b for b in bodies if b["model"] == "judge"]
        answered = [b for b in bodies if b["model"] == MODEL]
        assert len(answered) == 5 and judged, result.output  # the model answered its rows, then the judge ran
        total = sum(r.cost for r in ledger(ws))
        if judge_own:
            assert result.exit_code == 0, result.output
            assert len(judged) == 5 and total > 3
            assert sum(worst(b, judge_price) for b in judged) <= 3
        else:
            assert result.exit_code == 1 and "stopped early" in result.output, result.output
            assert len(judged) < 5
            assert sum(worst(b) for b in answered) + sum(worst(b, judge_price) for b in judged) <= 3 + 1e-9
            assert total <= 3 + 1e-9


def test_the_model_run_and_its_judge_share_a_named_budget(new_workspace, tmp_path, monkeypatch) -> None:
    """`evaluate --model M --judge-model J --budget NAME --max-cost X`: the budget kept in the store
    holds the model's calls and the judge's together within X, and a later command naming it
    finds it spent (the control: it sends nothing more)."""
    from tqaforge.llm.budget import SharedBudget

    judge_price = Price(input=10.0, output=2000.0)  # a verdict of 200 tokens: $0.40
    ws = new_workspace("ws")
    release = release_of(ws, tmp_path / "release")
    with OpenAIServer(greedy('{"correct": "yes"}'), latency_s=0.05) as server:
        priced(ws, {MODEL: PRICE, "judge": judge_price}, server, monkeypatch)
        args = ["-w", str(ws.root), "evaluate", "--release", str(release), "--model", MODEL, "--limit", "5",
                "--judge-model", "judge", "--budget", "pilot", "--no-plots", "--out", str(tmp_path / "o")]
        result = CliRunner().invoke(app, [*args, "--max-cost", "3", "--model-workers", "2"])
        bodies = list(server.requests)
        judged = [b for b in bodies if b["model"] == "judge"]
        answered = [b for b in bodies if b["model"] == MODEL]
        assert len(answered) == 5 and 0 < len(judged) < 5, result.output
        assert result.exit_code == 1 and "stopped early" in result.output, result.output
        assert sum(worst(b) for b in answered) + sum(worst(b, judge_price) for b in judged) <= 3 + 1e-9
        total = sum(r.cost for r in ledger(ws))
        shared = SharedBudget(ws, "pilot")
        try:
            spent, reserved, limit = shared.state()
        finally:
            shared.close()
        assert spent == pytest.approx(total) and reserved == pytest.approx(0) and limit == 3
        # The same budget named again (its limit kept): the judge has nothing left to spend.
        again = CliRunner().invoke(app, args)
        assert again.exit_code == 1 and "stopped early" in again.output, again.output
        assert [b for b in server.requests if b["model"] == "judge"] == judged  # no verdict bought past it


# --- the budget is used, not lost to congestion ------------------------------------------------


def test_a_request_waits_for_those_in_flight_instead_of_stopping_the_run(tmp_path, monkeypatch) -> None:
    """With many requests in flight the budget's head-room is held by their worst cases; a
    request that does not fit waits for them to settle, and the run stops only when spent plus
    its worst case would pass the limit. The control: a budget of one worst case sends one."""
    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    ws = init_workspace(tmp_path / "ws", name="ws")
    price = Price(input=0.0, output=1_000_000.0)  # $1 per completion token
    sent: dict[float, int] = {}
    try:
        for limit in (2.0, 10.0):
            # Worst case $2 (max_tokens 2), the honest reply $1: eight in flight hold $16, and
            # stopping at the first that did not fit sent five for $10.
            with OpenAIServer(lambda body: Scripted(text="y", completion_tokens=1), latency_s=0.05) as server:
                st = LLMSettings(model=MODEL, base_url=server.url, api_key="k", prices={MODEL: price}, concurrency=8)

                async def go(st: LLMSettings = st, limit: float = limit) -> list[Any]:
                    budget = Budget(limit)
                    async with Gateway(ws, st, budget=budget) as gw:
                        return await asyncio.gather(*(gw.complete([{"role": "user", "content": f"{limit} {i}"}],
                                                                  purpose="t", max_tokens=2) for i in range(20)),
                                                    return_exceptions=True)

                results = run(go())
                sent[limit] = len(server.requests)
            assert sum(isinstance(r, BudgetExceeded) for r in results) == 20 - sent[limit]
    finally:
        ws.close()
    assert sent == {2.0: 1, 10.0: 9}  # the budget used up to its last worst case, never passed


def test_a_budget_that_is_no_budget_is_refused(new_workspace, tmp_path) -> None:
    from tqaforge.errors import ConfigError

    for value in (float("nan"), float("inf"), 0.0, -1.0):
        with pytest.raises(ConfigError, match="positive finite"):
            Budget(value)
    ws = new_workspace("ws")
    for value in ("inf", "nan", "0"):
        result = CliRunner().invoke(app, ["-w", str(ws.root), "evaluate", "--release", str(tmp_path), "--model", MODEL,
                                          "--max-cost", value])
        assert result.exit_code == 1 and "positive finite" in result.output and "Traceback" not in result.output


# --- a budget for a model with no known price ------------------------------------------------

LOCAL_MODEL = "some-local-model"  # neither [llm.prices] nor genai-prices knows it


def _refusal_args(ws: Workspace, tmp_path: Path, command: str) -> list[str]:
    if command == "evaluate":
        release = release_of(ws, tmp_path / f"release-{ws.root.name}")
        return ["evaluate", "--release", str(release), "--model", LOCAL_MODEL, "--limit", "2", "--no-plots",
                "--out", str(tmp_path / f"o-{ws.root.name}")]
    return {"answers": ["generate", "answers", "--questions", "all", "--methods", "dp", "--model", LOCAL_MODEL],
            "questions": ["generate", "questions", "--subtypes", "Counting", "--per-round", "1", "--model", LOCAL_MODEL],
            "typing": ["questions", "classify", "--method", "llm", "--limit", "2", "--model", LOCAL_MODEL]}[command]


@pytest.mark.parametrize("command", ["answers", "questions", "typing", "evaluate"])
def test_a_budget_for_an_unpriced_model_is_refused_before_any_request(new_workspace, tmp_path, monkeypatch, command) -> None:
    """Issue 25: `--max-cost` with a model nobody has a price for ran, paid and printed "cost
    $0.0000". Now the command exits 1 with the fix and the server receives nothing; the control,
    the same command with the model priced in [llm.prices], reaches the server."""
    received = {}
    for with_price in (False, True):
        ws = new_workspace(f"ws-{with_price}")
        args = _refusal_args(ws, tmp_path, command)
        with OpenAIServer(lambda body: "Final Answer: 1") as server:
            priced(ws, {LOCAL_MODEL: Price(0.0, 0.0)} if with_price else {}, server, monkeypatch)
            result = CliRunner().invoke(app, ["-w", str(ws.root), *args, "--max-cost", "1"])
            received[with_price] = len(server.requests)
        assert "Traceback" not in result.output, result.output
        if not with_price:
            assert result.exit_code != 0, result.output
            flat = " ".join(result.output.split())  # the console wraps long lines
            assert f"'{LOCAL_MODEL}' has no known price" in flat and "refused before any call" in flat, result.output
            assert f'[llm.prices."{LOCAL_MODEL}"]' in flat and "leave out --max-cost" in flat, result.output
            assert not ledger(ws)
    assert received[False] == 0 and received[True] > 0, received


def test_a_gateway_with_a_shared_budget_and_no_price_is_never_made(tmp_path, monkeypatch) -> None:
    """A shared Budget with a limit is a budget as much as settings.max_cost: no gateway for an
    unpriced model is made with it, and nothing is sent; with an unlimited budget it runs."""
    from tqaforge.errors import ConfigError

    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    ws = init_workspace(tmp_path / "ws", name="ws")
    try:
        with OpenAIServer(lambda body: "y") as server:
            st = LLMSettings(model=LOCAL_MODEL, base_url=server.url, api_key="k")

            async def go(budget: Budget) -> Any:
                async with Gateway(ws, st, budget=budget) as gw:
                    return await gw.complete([{"role": "user", "content": "hi"}], purpose="t")

            with pytest.raises(ConfigError, match="no known price"):
                run(go(Budget(5.0)))
            assert len(server.requests) == 0
            assert run(go(Budget(None))).text == "y"  # the control: no limit, no refusal
            assert len(server.requests) == 1
    finally:
        ws.close()

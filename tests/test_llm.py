"""The LLM gateway against the loopback OpenAI-compatible server, with the real ``openai`` client.

Every test counts what the server saw and billed, and reads what the store holds.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import wait_for
from openai_server import OpenAIServer, Scripted, fingerprint
from sqlmodel import select

from tqaforge.errors import BudgetExceeded, ConfigError, EndpointUnreachable, InvalidReply, LLMError
from tqaforge.llm import (
    Completion,
    Gateway,
    LLMSettings,
    Price,
    load_llm_settings,
    parse_json_reply,
    request_id,
    request_params,
    run,
)
from tqaforge.schemas.records import LLMCall
from tqaforge.store import Workspace

MODEL = "test-model"


def settings(server: OpenAIServer, **kw: Any) -> LLMSettings:
    kw.setdefault("backoff_s", 0.01)
    kw.setdefault("backoff_max_s", 0.05)
    return LLMSettings(model=MODEL, base_url=server.url, api_key="test-key", **kw)


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def records(ws: Workspace) -> list[LLMCall]:
    with ws.session() as s:
        return list(s.exec(select(LLMCall)))


def call(ws: Workspace, st: LLMSettings, messages: list[dict[str, str]], **kw: Any) -> tuple[Completion, Gateway]:
    """One complete() through a fresh gateway; returns the completion and the (closed) gateway."""
    kw.setdefault("purpose", "test")

    async def go() -> tuple[Completion, Gateway]:
        async with Gateway(ws, st) as gw:
            return await gw.complete(messages, **kw), gw

    return run(go())


def sequence(*scripts: Scripted | str):
    """A reply function answering the scripts in order, then repeating the last one."""
    it = iter(scripts)
    last: list[Scripted | str] = [scripts[-1]]

    def reply(body: dict) -> Scripted | str:
        try:
            last[0] = next(it)
        except StopIteration:
            pass
        return last[0]

    return reply


# -- cache, samples, records ---------------------------------------------------------------------

def test_second_identical_call_is_served_from_the_store(workspace: Workspace) -> None:
    with OpenAIServer(lambda b: "four", latency_s=0.01) as server:
        st = settings(server)
        first, gw1 = call(workspace, st, user("2+2?"))
        assert (first.text, first.cached) == ("four", False)
        assert len(server.requests) == 1 and gw1.paid_calls == 1
        # A new gateway (a second run) asks again: nothing reaches the server.
        again, gw2 = call(workspace, st, user("2+2?"))
        assert len(server.requests) == 1
        assert (again.text, again.cached, again.cost, again.call_id) == ("four", True, 0.0, first.call_id)
        assert (gw2.paid_calls, gw2.cached_calls) == (0, 1)
        # Another parameter is another request.
        call(workspace, st, user("2+2?"), temperature=0.7)
        assert len(server.requests) == 2
    assert sum(server.paid.values()) == 2


def test_fully_cached_rerun_needs_no_endpoint_or_key(workspace: Workspace) -> None:
    with OpenAIServer(lambda b: "x") as server:
        call(workspace, settings(server), user("q"))
    offline = LLMSettings(model=MODEL)  # no base_url, no key: a paid call would fail
    done, _ = call(workspace, offline, user("q"))
    assert done.cached and done.text == "x"
    with pytest.raises(LLMError, match="no API key"):
        call(workspace, offline, user("a new question"))


def test_samples_are_distinct_requests_and_cache_entries(workspace: Workspace) -> None:
    def reply(body: dict) -> str:
        return f"seed={body.get('seed')}"

    with OpenAIServer(reply) as server:
        st = settings(server)

        async def go() -> list[Completion]:
            async with Gateway(workspace, st) as gw:
                return [await gw.complete(user("pick"), purpose="t", temperature=1.0, seed=7, sample=i)
                        for i in range(3)]

        done = run(go())
        assert len({c.call_id for c in done}) == 3
        assert len(server.requests) == 3
        assert len({fingerprint(b) for b in server.requests}) == 3
        assert server.requests[0]["seed"] == 7  # sample 0 is sent with the caller's seed
        assert len({c.text for c in done}) == 3
        run(go())  # all three are cached now
        assert len(server.requests) == 3
    rows = {r.sample: r for r in records(workspace)}
    assert sorted(rows) == [0, 1, 2] and all(r.seed == 7 for r in rows.values())


def test_identical_requests_in_flight_are_sent_once(workspace: Workspace) -> None:
    with OpenAIServer(lambda b: "once", latency_s=0.2) as server:
        st = settings(server)

        async def go() -> list[Completion]:
            async with Gateway(workspace, st) as gw:
                return await asyncio.gather(*(gw.complete(user("same"), purpose="t") for _ in range(5)))

        done = run(go())
    assert len(server.requests) == 1
    assert sorted(c.cached for c in done) == [False, True, True, True, True]
    assert sum(c.cost for c in done) == done[[c.cached for c in done].index(False)].cost


def test_record_holds_the_whole_call(workspace: Workspace) -> None:
    script = Scripted(text="answer", prompt_tokens=120, completion_tokens=30)
    with OpenAIServer(lambda b: script, latency_s=0.05) as server:
        st = settings(server, prices={MODEL: Price(input=2.0, output=10.0)})
        messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "why?"}]
        done, gw = call(workspace, st, messages, purpose="generate_questions", temperature=0.5,
                        max_tokens=64, seed=3, response_format={"type": "json_object"})
    cost = (120 * 2.0 + 30 * 10.0) / 1e6
    assert done.cost == pytest.approx(cost) and gw.spent == pytest.approx(cost)
    assert (done.prompt_tokens, done.completion_tokens) == (120, 30)
    [rec] = records(workspace)
    params = request_params(0.5, 64, {"type": "json_object"})
    assert rec.id == done.call_id == request_id(MODEL, messages, params, 3, 0)
    assert (rec.model, rec.endpoint, rec.messages, rec.seed, rec.sample) == (MODEL, server.url, messages, 3, 0)
    assert rec.params == {**params, "seed": 3}
    assert (rec.text, rec.status, rec.purpose, rec.error) == ("answer", "ok", "generate_questions", None)
    assert (rec.prompt_tokens, rec.completion_tokens) == (120, 30)
    assert rec.cost == pytest.approx(cost)
    assert rec.latency_ms is not None and rec.latency_ms >= 50
    assert rec.response["choices"][0]["message"]["content"] == "answer"
    assert rec.response["usage"]["total_tokens"] == 150
    body = server.requests[0]
    assert (body["model"], body["max_tokens"], body["temperature"], body["seed"]) == (MODEL, 64, 0.5, 3)
    assert body["response_format"] == {"type": "json_object"}


def test_on_call_sees_paid_and_cached_completions(workspace: Workspace) -> None:
    seen: list[Completion] = []
    with OpenAIServer(lambda b: "ok") as server:
        st = settings(server)

        async def go() -> None:
            async with Gateway(workspace, st, on_call=seen.append) as gw:
                await gw.complete(user("a"), purpose="t")
                await gw.complete(user("a"), purpose="t")

        run(go())
    assert [c.cached for c in seen] == [False, True]


# -- retries ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("fault", "billed", "counted"), [
    (Scripted(status=429), 1, 0),
    (Scripted(status=500), 1, 0),
    (Scripted(status=503), 1, 0),
    (Scripted(raw=b'{"choices": [{"index": 0, "mess'), 1, 0),  # malformed JSON
    # Replies without choices or content that report usage are counted as spent (the
    # conservative reading); the loopback server only bills replies with choices.
    (Scripted(text="ignored", empty_choices=True, prompt_tokens=10, completion_tokens=0), 1, 2),
    (Scripted(text=None, prompt_tokens=10, completion_tokens=0), 3, 2),  # "content": null
], ids=["429", "500", "503", "malformed-json", "empty-choices", "no-content"])
def test_faults_are_retried(workspace: Workspace, fault: Scripted, billed: int, counted: int) -> None:
    with OpenAIServer(sequence(fault, fault, Scripted(text="fine", prompt_tokens=10, completion_tokens=1))) as server:
        st = settings(server, prices={MODEL: Price(input=1e6, output=1e6)})  # $1 a token
        done, gw = call(workspace, st, user("q"))
    assert done.text == "fine"
    assert len(server.requests) == 3 and gw.retries == 2
    assert sum(server.paid.values()) == billed
    assert gw.spent == pytest.approx(11.0 + counted * 10.0) == done.cost
    [rec] = records(workspace)
    assert rec.status == "ok" and rec.text == "fine"
    assert rec.cost == pytest.approx(gw.spent)


def test_timeout_is_retried_and_the_abandoned_reply_is_not_billed(workspace: Workspace) -> None:
    with OpenAIServer(sequence(Scripted(text="late", delay_s=4.0), "on time")) as server:
        started = time.monotonic()
        # timeout_s bounds the whole request, so the answered one needs room on a busy machine
        done, gw = call(workspace, settings(server, timeout_s=1.0), user("q"))
        elapsed = time.monotonic() - started
        time.sleep(0.3)  # let the server notice the closed connection
    assert done.text == "on time" and gw.retries == 1
    assert len(server.requests) == 2
    assert sum(server.paid.values()) == 1  # the timed-out request was never delivered
    assert elapsed < 3.5  # not the 4 s the late reply would have taken


def test_retry_after_is_honoured(workspace: Workspace) -> None:
    busy = Scripted(status=429, headers={"Retry-After": "0.6"})
    with OpenAIServer(sequence(busy, "ok")) as server:
        done, gw = call(workspace, settings(server), user("q"))
    assert done.text == "ok"
    assert server.arrivals[1] - server.arrivals[0] >= 0.6


def test_gives_up_after_max_retries_and_stores_no_ok_record(workspace: Workspace) -> None:
    with OpenAIServer(lambda b: Scripted(status=500)) as server:
        with pytest.raises(LLMError, match="HTTP 500.*gave up after 4 attempts"):
            call(workspace, settings(server, max_retries=3), user("q"))
        assert len(server.requests) == 4
    [rec] = records(workspace)
    assert rec.status == "error" and rec.text is None and "HTTP 500" in rec.error
    # The next run sends it again (an error row is not a cache hit) and stores the answer.
    with OpenAIServer(lambda b: "recovered") as server:
        done, _ = call(workspace, settings(server), user("q"))
        assert len(server.requests) == 1 and not done.cached
    [rec] = records(workspace)
    assert (rec.status, rec.text, rec.error) == ("ok", "recovered", None)


def test_malformed_replies_are_retried_a_bounded_number_of_times(workspace: Workspace) -> None:
    with OpenAIServer(lambda b: Scripted(text="x", empty_choices=True)) as server:
        with pytest.raises(LLMError, match="no choices"):
            call(workspace, settings(server, max_retries=5, malformed_retries=2), user("q"))
        assert len(server.requests) == 3


def test_client_errors_are_not_retried(workspace: Workspace) -> None:
    with OpenAIServer(lambda b: Scripted(status=401)) as server:
        with pytest.raises(LLMError) as info:
            call(workspace, settings(server), user("q"))
        assert len(server.requests) == 1
    assert "API key" in (info.value.hint or "")


def test_connection_refused_fails_at_once_naming_the_address(workspace: Workspace) -> None:
    """Nothing listens on the port: no retry can help, so the call fails at its first attempt
    (issue 27, item 6), as EndpointUnreachable naming host:port and the fix, and is recorded as
    an error (a later run sends it again)."""
    server = OpenAIServer(lambda b: "x")
    url = server.url
    port = url.rsplit(":", 1)[1].split("/", 1)[0]
    server.stop()  # nothing listens on that port any more
    st = LLMSettings(model=MODEL, base_url=url, api_key="k", max_retries=2, backoff_s=10)
    started = time.monotonic()
    with pytest.raises(EndpointUnreachable, match=f"nothing listens on 127.0.0.1:{port} \\(connection refused\\)") as info:
        call(workspace, st, user("q"))
    assert time.monotonic() - started < 5  # a retry would have waited backoff_s = 10 s
    assert "OPENAI_BASE_URL" in (info.value.hint or "") and "gave up" not in str(info.value)
    [row] = records(workspace)
    assert row.status == "error" and "nothing listens" in (row.error or "")


# -- budget -----------------------------------------------------------------------------------

def test_budget_stops_before_the_limit(workspace: Workspace) -> None:
    # $1 per completion token; max_tokens=2 makes each call's worst case $2, its real cost $1.
    reply = Scripted(text="y", prompt_tokens=50, completion_tokens=1)
    with OpenAIServer(lambda b: reply, latency_s=0.02) as server:
        st = settings(server, prices={MODEL: Price(input=0.0, output=1_000_000.0)}, max_cost=10.0,
                      concurrency=4)
        outcome: dict[str, Any] = {}

        async def go() -> None:
            async with Gateway(workspace, st) as gw:
                results = await asyncio.gather(
                    *(gw.complete(user(f"q{i}"), purpose="t", max_tokens=2) for i in range(30)),
                    return_exceptions=True)
                outcome["gw"] = gw
                outcome["results"] = results
                with pytest.raises(BudgetExceeded):  # the stop sticks: no more paid calls
                    await gw.complete(user("tiny"), purpose="t", max_tokens=1)

        run(go())
        gw: Gateway = outcome["gw"]
        done = [r for r in outcome["results"] if isinstance(r, Completion)]
        refused = [r for r in outcome["results"] if isinstance(r, BudgetExceeded)]
        assert len(done) + len(refused) == 30 and refused
        assert gw.spent <= 10.0 and gw.paid_calls == len(done) >= 5
        billed = sum(server.paid.values())
        assert billed == len(server.requests) == len(done)  # nothing sent past the stop
        assert billed * 1.0 <= 10.0
    assert sum(r.cost for r in records(workspace)) <= 10.0
    assert len(records(workspace)) == len(done)


def test_budget_counts_prompt_tokens_and_cached_calls_are_free(workspace: Workspace) -> None:
    text = "x" * 400  # the server counts 104 prompt tokens
    with OpenAIServer(lambda b: Scripted(text="a", prompt_tokens=104, completion_tokens=1)) as server:
        # $0.01 per prompt token: $1.04 a call, reserved at its worst case before sending (a token
        # per byte of the 401-byte prompt and the chat template's: $5.37). After two calls,
        # $2.08 + $5.37 passes $7.
        price = Price(input=10_000.0, output=0.0)
        st = settings(server, prices={MODEL: price}, max_cost=7.0)

        async def go() -> Gateway:
            async with Gateway(workspace, st) as gw:
                for i in range(2):
                    await gw.complete(user(text + str(i)), purpose="t", max_tokens=5)
                with pytest.raises(BudgetExceeded):
                    await gw.complete(user(text + "2"), purpose="t", max_tokens=5)
                return gw

        gw = run(go())
        assert gw.paid_calls == 2 and len(server.requests) == 2 and gw.spent == pytest.approx(2.08)

        async def again() -> Gateway:  # a new run with the same budget: the old calls are free
            async with Gateway(workspace, st) as gw2:
                for i in range(2):
                    assert (await gw2.complete(user(text + str(i)), purpose="t", max_tokens=5)).cached
                await gw2.complete(user(text + "2"), purpose="t", max_tokens=5)
                return gw2

        gw2 = run(again())
        assert gw2.paid_calls == 1 and gw2.cached_calls == 2 and len(server.requests) == 3


def test_unpriced_model_without_a_budget_runs_and_says_its_price_is_unknown(workspace: Workspace) -> None:
    # With a budget it is refused (tests/test_hostile_budget.py); without one it is only counted.
    with OpenAIServer(lambda b: "free") as server:
        st = settings(server, prices={"other-model": Price(1e6, 1e6)})

        async def go() -> Gateway:
            async with Gateway(workspace, st) as gw:
                for i in range(3):
                    await gw.complete(user(str(i)), purpose="t")
                return gw

        gw = run(go())
    assert gw.paid_calls == 3 and gw.spent == 0.0
    assert {(r.price_input, r.price_output, r.price_source, r.transport) for r in records(workspace)} == {
        (None, None, "unknown", "online")}


# -- JSON replies -----------------------------------------------------------------------------

def _positive(value: Any) -> int:
    if not isinstance(value, dict) or not isinstance(value.get("n"), int) or value["n"] <= 0:
        raise ValueError('expected {"n": <positive integer>}')
    return value["n"]


def test_json_reply_repaired_once(workspace: Workspace) -> None:
    with OpenAIServer(sequence('{"n": -1}', '```json\n{"n": 5}\n```')) as server:
        st = settings(server)

        async def go() -> tuple[int, list[Completion]]:
            async with Gateway(workspace, st) as gw:
                return await gw.complete_json(user("count"), validate=_positive, purpose="t")

        value, calls = run(go())
        assert value == 5 and len(calls) == 2 and len(server.requests) == 2
        repair = server.requests[1]["messages"]
        assert repair[:1] == user("count")
        assert repair[1] == {"role": "assistant", "content": '{"n": -1}'}
        assert "positive integer" in repair[2]["content"]
        # Re-running the same step pays nothing and gives the same value.
        assert run(go())[0] == 5 and len(server.requests) == 2


def test_json_reply_invalid_twice_raises_invalid_reply(workspace: Workspace) -> None:
    with OpenAIServer(sequence("not json", '{"n": "five"}')) as server:
        st = settings(server)

        async def go() -> Any:
            async with Gateway(workspace, st) as gw:
                return await gw.complete_json(user("count"), validate=_positive, purpose="t")

        with pytest.raises(InvalidReply) as info:
            run(go())
        assert len(server.requests) == 2
    assert info.value.call_ids == [r.id for r in sorted(records(workspace), key=lambda r: len(r.messages))]


def test_parse_json_reply_accepts_plain_and_fenced() -> None:
    assert parse_json_reply(' {"a": [1, 2]} ') == {"a": [1, 2]}
    assert parse_json_reply('Here you go:\n```json\n[1, 2]\n```\nDone.') == [1, 2]
    assert parse_json_reply("```\n{}\n```") == {}
    with pytest.raises(ValueError):
        parse_json_reply("no json here")


# -- limits -----------------------------------------------------------------------------------

def test_concurrency_limit_is_honoured(workspace: Workspace) -> None:
    with OpenAIServer(lambda b: "ok", latency_s=0.1) as server:
        st = settings(server, concurrency=4)

        async def go() -> None:
            async with Gateway(workspace, st) as gw:
                await asyncio.gather(*(gw.complete(user(str(i)), purpose="t") for i in range(20)))

        run(go())
    assert len(server.requests) == 20
    assert server.max_in_flight == 4  # used fully, never passed


def _arrivals_of_ten(workspace: Workspace, prefix: str, **limits: Any) -> list[float]:
    """Ten requests at once through the gateway: their arrival times at the server, from the first.

    ``prefix`` starts each prompt: the ledger would answer a prompt it has seen without a request.
    """
    with OpenAIServer(lambda b: "ok") as server:
        st = settings(server, concurrency=16, **limits)

        async def go() -> None:
            async with Gateway(workspace, st) as gw:
                await asyncio.gather(*(gw.complete(user(f"{prefix}{i}"), purpose="t") for i in range(10)))

        run(go())
    assert len(server.arrivals) == 10
    return sorted(a - server.arrivals[0] for a in server.arrivals)


def _paced_at_four_a_second(t: list[float]) -> list[tuple[int, int]]:
    """The pairs of arrivals closer together than 240 a minute with a burst of 4 allows.

    The limiter grants at g = 0, 0, 0, 0, 0.25, 0.5, ... 1.5 s; a request reaches the server at
    g + d, with a delay d (connection set-up, a loaded host) between 0 and some jitter. So for any
    two arrivals i > j: t[i] - t[j] >= g[i] - g[j] - jitter. (A CI run on a loaded host saw the
    burst's first four reach the server 0.28 s late, hence the wide jitter; at twice the rate the
    last six would still span 0.75 s, not 1.5 s, and fail.)
    """
    jitter = 0.35
    grant = [max(0, i - 3) * 0.25 for i in range(len(t))]
    return [(i, j) for i in range(len(t)) for j in range(i) if t[i] - t[j] < grant[i] - grant[j] - jitter]


def test_requests_per_minute_spacing(workspace: Workspace) -> None:
    # 240 a minute: 4 a second, a burst of 4, then one every 0.25 s.
    t = _arrivals_of_ten(workspace, "limited ", requests_per_minute=240)
    assert _paced_at_four_a_second(t) == [], t
    # Not slower than the rate either. (No lower bound from the first arrival: under load the
    # burst's first request can reach the server late, after the limiter's clock started.)
    assert t[-1] < 2.5, t
    # Control: without the limit the same ten arrive together, and the check sees it.
    assert _paced_at_four_a_second(_arrivals_of_ten(workspace, "unlimited ")) != []


def test_tokens_per_minute_limit(workspace: Workspace) -> None:
    # 60,000 tokens a minute = 1,000 a second; each call ~ 400 estimated + 100 max_tokens tokens.
    reply = Scripted(text="ok", prompt_tokens=400, completion_tokens=100)
    with OpenAIServer(lambda b: reply) as server:
        st = settings(server, concurrency=16, tokens_per_minute=60_000)

        async def go() -> None:
            async with Gateway(workspace, st) as gw:
                await asyncio.gather(*(gw.complete(user("t" * 1580 + str(i)), purpose="t", max_tokens=100)
                                       for i in range(8)))

        run(go())
    t = sorted(a - server.arrivals[0] for a in server.arrivals)
    # 8 x 500 tokens = 4,000 tokens with a 1,000-token burst: at least 3 s.
    assert t[-1] >= 2.7, t


# -- settings ---------------------------------------------------------------------------------

def _write_llm_section(ws: Workspace, section: str) -> Workspace:
    from tqaforge.store import open_workspace

    path = ws.root / "tqaforge.toml"
    text = path.read_text().replace("[llm]\n", "[llm]\n" + section + "\n", 1)
    path.write_text(text)
    return open_workspace(ws.root, upgrade=False)


def test_load_llm_settings_layers(sqlite_workspace: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "TQAFORGE_LLM_MODEL", "MY_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigError, match="no model"):
        load_llm_settings(sqlite_workspace)
    ws = _write_llm_section(sqlite_workspace, '\n'.join([
        'model = "cfg-model"', 'base_url = "http://127.0.0.1:9/v1"', 'api_key_env = "MY_KEY"',
        'concurrency = 3', 'requests_per_minute = 100', 'max_cost = 2.5', 'timeout_s = 10',
        '[llm.prices."cfg-model"]', 'input = 0.5', 'output = 1.5',
    ]))
    st = load_llm_settings(ws)
    assert (st.model, st.base_url, st.api_key, st.concurrency) == ("cfg-model", "http://127.0.0.1:9/v1", None, 3)
    assert (st.requests_per_minute, st.max_cost, st.timeout_s) == (100.0, 2.5, 10.0)
    assert st.price == Price(0.5, 1.5)
    monkeypatch.setenv("MY_KEY", "secret")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://env/v1")
    monkeypatch.setenv("TQAFORGE_LLM_MODEL", "env-model")
    st = load_llm_settings(ws, max_cost=None, concurrency=12)
    assert (st.model, st.base_url, st.api_key, st.concurrency, st.max_cost) == (
        "env-model", "http://env/v1", "secret", 12, 2.5)
    assert load_llm_settings(ws, model="cli-model").model == "cli-model"
    with pytest.raises(ConfigError, match="concurrency"):
        load_llm_settings(ws, concurrency=0)


def test_api_key_in_config_is_refused(sqlite_workspace: Workspace) -> None:
    ws = _write_llm_section(sqlite_workspace, 'model = "m"\napi_key = "sk-oops"')
    with pytest.raises(ConfigError, match="api_key_env"):
        load_llm_settings(ws)


def test_bad_price_entry_is_a_config_error(sqlite_workspace: Workspace) -> None:
    ws = _write_llm_section(sqlite_workspace, 'model = "m"\n[llm.prices.m]\ninput = "cheap"')
    with pytest.raises(ConfigError, match="input = ... and output"):
        load_llm_settings(ws)


# -- the server as a process, run() ---------------------------------------------------------------

def test_server_runs_as_a_process(sqlite_workspace: Workspace) -> None:
    script = Path(__file__).with_name("openai_server.py")
    proc = subprocess.Popen([sys.executable, str(script), "--port", "0", "--echo"],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().split()
        assert line[0] == "ready"
        st = LLMSettings(model=MODEL, base_url=line[1], api_key="k")
        done, _ = call(sqlite_workspace, st, user("echo me"))
        assert done.text == "echo me"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_run_inside_a_running_loop() -> None:
    async def inner() -> int:
        await asyncio.sleep(0)
        return 42

    async def outer() -> int:
        return run(inner())

    assert run(outer()) == 42


def test_stall_after_hangs_unpaid(sqlite_workspace: Workspace) -> None:
    counter = itertools.count()
    with OpenAIServer(lambda b: f"r{next(counter)}") as server:
        server.stall_after(2)
        # timeout_s bounds a whole request: generous enough for the two answered ones on a busy
        # 2-core machine, and the two stalled ones still time out.
        st = settings(server, timeout_s=2.0, max_retries=0)

        async def go() -> list[Any]:
            async with Gateway(sqlite_workspace, st) as gw:
                return await asyncio.gather(*(gw.complete(user(str(i)), purpose="t") for i in range(4)),
                                            return_exceptions=True)

        results = run(go())
        server.wait_paid(2, timeout=5)
        time.sleep(0.3)
    assert sum(isinstance(r, Completion) for r in results) == 2
    assert sum(isinstance(r, LLMError) for r in results) == 2
    assert sum(server.paid.values()) == 2
    assert json.dumps(sorted(r.status for r in records(sqlite_workspace))) == '["error", "error", "ok", "ok"]'


# -- crash safety -----------------------------------------------------------------------------

CHILD = r"""
import asyncio, sys
from pathlib import Path
from tqaforge.store import open_workspace
from tqaforge.llm import Gateway, LLMSettings, run

ws = open_workspace(Path(sys.argv[1]))
settings = LLMSettings(model="test-model", base_url=sys.argv[2], api_key="k", concurrency=8, timeout_s=60)

async def main():
    async with Gateway(ws, settings) as gw:
        await asyncio.gather(*(gw.complete([{"role": "user", "content": f"q{i}"}], purpose="t")
                               for i in range(int(sys.argv[3]))))

run(main())
"""


def _answer(body: dict) -> str:
    return "a:" + body["messages"][-1]["content"]


def _wait_rows(ws: Workspace, n: int, timeout: float) -> None:
    wait_for(lambda: len(records(ws)) >= n, timeout, f"{n} LLMCall rows")


def test_sigkill_mid_run_then_resume_pays_no_request_twice(workspace: Workspace) -> None:
    calls = 40
    with OpenAIServer(_answer, latency_s=0.05) as server:
        server.stall_after(15)  # after 15 paid replies every request hangs, unpaid
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(workspace.root), server.url, str(calls)])
        try:
            server.wait_paid(15, timeout=60)
            _wait_rows(workspace, 15, timeout=30)  # every paid reply is committed ...
        finally:
            proc.kill()  # ... before SIGKILL hits the run with 8 requests in flight
            proc.wait(timeout=10)
        assert len(records(workspace)) == 15
        server.stall_after(None)

        async def resume() -> Gateway:
            async with Gateway(workspace, settings(server, concurrency=8)) as gw:
                await asyncio.gather(*(gw.complete(user(f"q{i}"), purpose="t") for i in range(calls)))
                return gw

        gw = run(resume())
        assert (gw.cached_calls, gw.paid_calls) == (15, calls - 15)
    assert len(server.paid) == calls and set(server.paid.values()) == {1}
    expected = {request_id(MODEL, user(f"q{i}"), request_params(0.0, None, None), None, 0): f"a:q{i}"
                for i in range(calls)}
    assert {r.id: r.text for r in records(workspace)} == expected
    assert {r.status for r in records(workspace)} == {"ok"}


def test_ctrl_c_stops_cleanly_with_finished_calls_stored(workspace: Workspace) -> None:
    with OpenAIServer(_answer, latency_s=0.3) as server:
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(workspace.root), server.url, "200"],
                                stderr=subprocess.PIPE, text=True)
        server.wait_paid(12, timeout=60)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=20)
        time.sleep(0.4)  # the server notices the dropped connections
        paid = sum(server.paid.values())
    assert proc.returncode != 0 and "KeyboardInterrupt" in stderr
    rows = records(workspace)
    assert {r.status for r in rows} == {"ok"}
    assert paid - 8 <= len(rows) <= paid < 200  # at most the 8 replies in flight are lost

"""Several endpoints (``[llm] base_urls``): the gateway's :class:`ChatTransport` spreads requests
over loopback OpenAI-compatible servers, honours each one's limit, leaves a failing one alone and
probes it back. Real ``openai`` client over HTTP, real store; every figure is counted at the servers.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
from conftest import free_port
from openai_server import OpenAIServer, Scripted
from sqlmodel import select

from tqaforge.errors import ConfigError, LLMError
from tqaforge.llm import Gateway, LLMSettings, load_llm_settings, run
from tqaforge.schemas.records import LLMCall
from tqaforge.store import Workspace, open_workspace

MODEL = "endpoints-model"


def settings(*urls: str, **kw: Any) -> LLMSettings:
    kw.setdefault("backoff_s", 0.01)
    kw.setdefault("backoff_max_s", 0.05)
    return LLMSettings(model=MODEL, base_urls=urls, api_key="test-key", **kw)


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def records(ws: Workspace) -> list[LLMCall]:
    with ws.session() as s:
        return list(s.exec(select(LLMCall)))


def named(name: str, **kw: Any) -> OpenAIServer:
    """A server whose replies say which server it is, so a record shows who answered."""
    return OpenAIServer(lambda body: f"{name}: {body['messages'][-1]['content']}", **kw)


async def many(gw: Gateway, n: int, tag: str = "q") -> list[Any]:
    return await asyncio.gather(*(gw.complete(user(f"{tag} {i}"), purpose="test") for i in range(n)))


def stats_by_url(gw: Gateway) -> dict[str, Any]:
    return {s.endpoint: s for s in gw.endpoint_stats()}


def test_requests_are_spread_and_records_name_the_endpoint_that_answered(workspace: Workspace) -> None:
    with named("A", latency_s=0.05) as a, named("B", latency_s=0.05) as b:

        async def go() -> Gateway:
            async with Gateway(workspace, settings(a.url, b.url, concurrency=8)) as gw:
                await many(gw, 40)
            return gw

        gw = run(go())
        served = {a.url: len(a.requests), b.url: len(b.requests)}
    assert sum(served.values()) == 40 and min(served.values()) >= 10, served  # both got a fair share
    stats = stats_by_url(gw)
    assert {url: stats[url].requests for url in served} == served  # the gateway counts what the servers saw
    assert all(s.failures == 0 and s.down_events == 0 and not s.down and s.in_flight == 0 for s in stats.values())
    rows = records(workspace)
    assert len(rows) == 40 and all(r.status == "ok" for r in rows)
    for row in rows:
        assert row.endpoint == (a.url if row.text.startswith("A:") else b.url), (row.endpoint, row.text)
    assert {r.endpoint for r in rows} == {a.url, b.url}


def test_each_endpoint_takes_at_most_endpoint_concurrency(sqlite_workspace: Workspace) -> None:
    def busiest(per_endpoint: int | None, tag: str) -> tuple[int, int]:
        with named("A", latency_s=0.1) as a, named("B", latency_s=0.1) as b:

            async def go() -> None:
                st = settings(a.url, b.url, concurrency=8, endpoint_concurrency=per_endpoint)
                async with Gateway(sqlite_workspace, st) as gw:
                    await many(gw, 24, tag)

            run(go())
            assert len(a.requests) + len(b.requests) == 24
            return a.max_in_flight, b.max_in_flight

    assert busiest(2, "limited") == (2, 2)  # reached, never passed, by each server
    # Control: without the per-endpoint limit, the gateway's 8 go out and one server sees more than 2.
    assert max(busiest(None, "free")) > 2


def test_a_refusing_endpoint_is_marked_down_and_the_run_completes_on_the_other(
    sqlite_workspace: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="tqaforge.llm")
    dead = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens: connections are refused
    with named("A", latency_s=0.02) as a:

        async def go() -> Gateway:
            st = settings(a.url, dead, concurrency=4, endpoint_failures=3, endpoint_cooldown_s=60)
            async with Gateway(sqlite_workspace, st) as gw:
                await many(gw, 30)
            return gw

        gw = run(go())
        served = len(a.requests)
    stats = stats_by_url(gw)
    # Marked down after its 3rd failure in a row (the few already on their way fail too), then left alone.
    assert stats[dead].down and stats[dead].down_events == 1
    assert 3 <= stats[dead].failures == stats[dead].requests <= 3 + 4
    assert stats[a.url].requests == served == 30 and stats[a.url].failures == 0
    rows = records(sqlite_workspace)
    assert len(rows) == 30 and all(r.status == "ok" and r.endpoint == a.url for r in rows)
    assert gw.failed_calls == 0 and gw.retries == stats[dead].failures  # each refused attempt was retried
    assert f"LLM endpoint {dead} is down after 3 failures in a row" in caplog.text


def test_after_the_cool_off_a_probe_brings_a_recovered_endpoint_back(
    sqlite_workspace: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="tqaforge.llm")
    broken = {"on": True}

    def flaky(body: dict) -> Scripted | str:
        return Scripted(status=503) if broken["on"] else Scripted(text="B: fine", delay_s=0.2)

    with named("A", latency_s=0.01) as a, OpenAIServer(flaky, latency_s=0.01) as b:

        async def go() -> Gateway:
            st = settings(a.url, b.url, concurrency=4, endpoint_failures=2, endpoint_cooldown_s=0.3)
            async with Gateway(sqlite_workspace, st) as gw:
                await many(gw, 12, "broken")
                down = stats_by_url(gw)[b.url]
                assert down.down and down.down_events == 1 and down.failures >= 2
                broken["on"] = False
                # Keep working until B answers again (the probe after its cool-off), with a deadline.
                deadline, batch = time.monotonic() + 10, 0
                while b.statuses[200] < 3:
                    assert time.monotonic() < deadline, "B was never probed back"
                    batch += 1
                    await many(gw, 4, f"fixed {batch}")
            return gw

        gw = run(go())
        failed = b.statuses[503]
        last_failure, probe, after_probe = b.arrivals[failed - 1], b.arrivals[failed], b.arrivals[failed + 1]
    # Nothing reached B during its cool-off, which starts after its last failure had arrived, and
    # then one request alone (the probe, answered in 0.2 s) until it answered.
    assert probe - last_failure >= 0.3, (last_failure, probe)
    assert after_probe - probe >= 0.2, (probe, after_probe)
    stats = stats_by_url(gw)
    assert not stats[b.url].down and stats[b.url].down_events == 1  # back: up, and used again
    assert sum(r.endpoint == b.url and r.text.startswith("B:") for r in records(sqlite_workspace)) >= 3
    assert all(r.status == "ok" for r in records(sqlite_workspace)) and a.requests
    assert f"LLM endpoint {b.url} is down" in caplog.text and f"LLM endpoint {b.url} is back" in caplog.text


@pytest.mark.parametrize("script", [Scripted(status=400), Scripted(status=404), Scripted(raw=b"<html>not json")],
                         ids=["400", "404", "malformed"])
def test_client_errors_and_malformed_replies_do_not_mark_an_endpoint_down(
    sqlite_workspace: Workspace, script: Scripted
) -> None:
    with named("A") as a, OpenAIServer(lambda body: script) as b:

        async def go() -> Gateway:
            st = settings(a.url, b.url, concurrency=1, endpoint_failures=2)
            async with Gateway(sqlite_workspace, st) as gw:
                await asyncio.gather(*(gw.complete(user(f"q {i}"), purpose="test") for i in range(12)),
                                     return_exceptions=True)
            return gw

        gw = run(go())
        assert len(b.requests) >= 4  # well past endpoint_failures
    stats = stats_by_url(gw)[b.url]
    assert (stats.down, stats.down_events, stats.failures) == (False, 0, 0)


def test_a_retry_prefers_another_endpoint(sqlite_workspace: Workspace) -> None:
    """The retry of a failed request goes to the other endpoint although that one is busier."""
    def slow_y(body: dict) -> Scripted | str:
        return Scripted(text="Y: slow", delay_s=5.0) if "slow" in body["messages"][-1]["content"] else "Y: ok"

    failed_once: list[int] = []

    def fail_first_x(body: dict) -> Scripted | str:
        if not failed_once:
            failed_once.append(1)
            return Scripted(status=500)
        return "X: ok"

    with OpenAIServer(slow_y) as y, OpenAIServer(fail_first_x) as x:

        async def go() -> Gateway:
            async with Gateway(sqlite_workspace, settings(y.url, x.url, concurrency=4, timeout_s=20)) as gw:
                slow = asyncio.ensure_future(gw.complete(user("slow one"), purpose="test"))
                deadline = time.monotonic() + 5
                while not y.requests:  # Y has a request in flight, X none
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.01)
                done = await gw.complete(user("fails at first"), purpose="test")
                assert done.text == "Y: ok"
                slow.cancel()
            return gw

        run(go())
        assert len(x.requests) == 1 and x.statuses[500] == 1  # the first attempt, refused by X
    [row] = [r for r in records(sqlite_workspace) if r.status == "ok"]
    assert row.endpoint == y.url and row.text == "Y: ok"


# -- settings ---------------------------------------------------------------------------------


def _write_llm_section(ws: Workspace, section: str) -> Workspace:
    path = ws.root / "tqaforge.toml"
    path.write_text(path.read_text().replace("[llm]\n", "[llm]\n" + section + "\n", 1))
    return open_workspace(ws.root, upgrade=False)


def test_base_urls_and_endpoint_settings_load_from_the_file(
    sqlite_workspace: Workspace, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "TQAFORGE_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)
    ws = _write_llm_section(sqlite_workspace, "\n".join([
        'model = "m"', 'base_url = "http://ignored/v1"', 'base_urls = ["http://a:8000/v1", "http://b:8000/v1"]',
        "endpoint_concurrency = 4", "endpoint_failures = 5", "endpoint_cooldown_s = 12",
    ]))
    st = load_llm_settings(ws)
    assert st.endpoint_urls == st.base_urls == ("http://a:8000/v1", "http://b:8000/v1")  # replaces base_url
    assert (st.endpoint_concurrency, st.endpoint_failures, st.endpoint_cooldown_s) == (4, 5, 12.0)
    assert load_llm_settings(ws, base_url="http://cli/v1").endpoint_urls == ("http://cli/v1",)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://env/v1")
    caplog.set_level(logging.WARNING, logger="tqaforge.llm")
    assert load_llm_settings(ws).endpoint_urls == ("http://env/v1",)  # the environment sets a single one
    assert "not to the [llm] base_urls" in caplog.text
    assert LLMSettings(model="m").endpoint_urls == (None,)  # OpenAI, or the client's OPENAI_BASE_URL


@pytest.mark.parametrize(("kw", "message"), [
    (dict(endpoint_concurrency=0), "endpoint_concurrency must be at least 1"),
    (dict(endpoint_failures=0), "endpoint_failures must be at least 1"),
    (dict(endpoint_cooldown_s=float("nan")), "endpoint_cooldown_s must be a positive finite number"),
    (dict(base_urls=("http://a/v1", "http://a/v1")), "names http://a/v1 twice"),
    (dict(base_urls="http://a/v1"), "must be a list"),
])
def test_bad_endpoint_settings_are_refused(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        LLMSettings(model="m", **kw)


def test_a_base_urls_entry_of_the_wrong_type_is_refused_naming_it(sqlite_workspace: Workspace) -> None:
    with pytest.raises(ConfigError, match=r"\[llm\] base_urls\[1\]: expected a string, got"):
        _write_llm_section(sqlite_workspace, 'model = "m"\nbase_urls = ["http://a/v1", 8000]')


def test_one_endpoint_behaves_as_before(sqlite_workspace: Workspace) -> None:
    """base_url alone: one endpoint, never marked down (there is nowhere else to go)."""
    with OpenAIServer(lambda body: Scripted(status=503)) as server:

        async def go() -> Gateway:
            st = LLMSettings(model=MODEL, base_url=server.url, api_key="k", max_retries=4, backoff_s=0.01,
                             backoff_max_s=0.02, endpoint_failures=1)
            async with Gateway(sqlite_workspace, st) as gw:
                with pytest.raises(LLMError, match="gave up after 5 attempts"):
                    await gw.complete(user("hi"), purpose="test")
            return gw

        [only] = run(go()).endpoint_stats()
        assert len(server.requests) == 5
    assert (only.endpoint, only.requests, only.failures, only.down_events, only.down) == (server.url, 5, 5, 0, False)


def test_a_refused_endpoint_sends_its_requests_to_the_others(sqlite_workspace: Workspace) -> None:
    """A refused connection fails a request at once only when every endpoint refused it: while
    another endpoint answers, the request goes there (issue 27, item 6)."""
    dead = f"http://127.0.0.1:{free_port()}/v1"
    with named("alive") as alive:

        async def go() -> tuple[list[Any], Gateway]:
            async with Gateway(sqlite_workspace, settings(dead, alive.url, max_retries=1, endpoint_failures=1)) as gw:
                return await many(gw, 6), gw

        done, gw = run(go())
    assert [d.text for d in done] == [f"alive: q {i}" for i in range(6)]
    stats = stats_by_url(gw)
    assert stats[dead].failures >= 1 and stats[dead].down and stats[alive.url].failures == 0
    assert {r.endpoint for r in records(sqlite_workspace)} == {alive.url}


def test_cancelled_requests_give_their_endpoint_slots_back(sqlite_workspace: Workspace) -> None:
    """A stopped run cancels requests on their way and requests waiting for a slot: none keeps one."""
    with named("A", latency_s=30) as a, named("B", latency_s=30) as b:  # the first requests hang until cancelled

        async def go() -> Gateway:
            st = settings(a.url, b.url, concurrency=8, endpoint_concurrency=1)
            async with Gateway(sqlite_workspace, st) as gw:
                tasks = [asyncio.ensure_future(gw.complete(user(f"stuck {i}"), purpose="test")) for i in range(6)]
                deadline = time.monotonic() + 5
                while len(a.requests) + len(b.requests) < 2:  # one on each endpoint, four waiting
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.01)
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                assert [s.in_flight for s in gw.endpoint_stats()] == [0, 0]
                a.latency_s = b.latency_s = 0.0
                done = await asyncio.wait_for(many(gw, 4, "after"), 10)  # both slots are free again
                assert len(done) == 4
            return gw

        gw = run(go())
    assert sum(s.requests for s in gw.endpoint_stats()) == 2 + 4

"""Hostile-input suite: the LLM gateway and question generation against a hostile endpoint.

Each test is one case of issue 10 ("Hardening"), run with the real ``openai`` client over HTTP
against the loopback server of ``tests/openai_server.py`` and a real store (SQLite and, when
configured, PostgreSQL).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import free_port
from openai_server import OpenAIServer, Scripted
from sqlmodel import select

from tqaforge.errors import (
    ConfigError,
    EndpointAuthError,
    EndpointUnreachable,
    ImpossibleUsage,
    LLMError,
    ReplyTooLarge,
)
from tqaforge.generation.classify import ClassifySummary
from tqaforge.generation.questions import GenerationOptions, generate_questions
from tqaforge.ingest import import_paths
from tqaforge.llm import Gateway, LLMSettings, Price, StopReason, load_llm_settings, run
from tqaforge.redact import redact_secrets, redact_url
from tqaforge.schemas.records import GenerationStep, LLMCall
from tqaforge.store import Workspace

pytestmark = pytest.mark.hostile

MODEL = "hostile-model"
KEY = "sk-hostile-SECRET-0123456789abcdef"
TABLES = Path(__file__).resolve().parents[1] / "data" / "tables"


def settings(server: OpenAIServer | None = None, **kw: Any) -> LLMSettings:
    kw.setdefault("backoff_s", 0.01)
    kw.setdefault("backoff_max_s", 0.02)
    kw.setdefault("api_key", KEY)
    if server is not None:
        kw.setdefault("base_url", server.url)
    return LLMSettings(model=MODEL, **kw)


def complete(ws: Workspace, st: LLMSettings, text: str = "hi", *, within: float = 10.0, **kw: Any) -> Any:
    """One complete() through a fresh gateway, given at most ``within`` seconds in all."""
    kw.setdefault("purpose", "hostile")

    async def go() -> Any:
        async with Gateway(ws, st) as gw:
            return await asyncio.wait_for(gw.complete([{"role": "user", "content": text}], **kw), within)

    return run(go())


def calls(ws: Workspace) -> list[LLMCall]:
    with ws.session() as s:
        return list(s.exec(select(LLMCall)))


def import_tables(ws: Workspace, n: int) -> None:
    summary = import_paths(ws, sorted(TABLES.iterdir())[:n])
    assert not summary.failed


def gen_options(**kw: Any) -> GenerationOptions:
    kw.setdefault("subtypes", ("Counting",))
    kw.setdefault("per_round", 2)
    return GenerationOptions(**kw)


def questions_json(body: dict) -> str:
    return json.dumps([f"How many rows are there, take {len(body['messages'])}?", "Which row is first?"])


# --- hangs ----------------------------------------------------------------------------------


def test_dripping_endpoint_times_out_at_timeout_s(workspace):
    """Hangs: an endpoint that drips one byte every few seconds hangs past timeout_s (the
    timeout was per read, not per request). timeout_s is a deadline for the whole request,
    counted and retried as a timeout."""
    with OpenAIServer(lambda body: Scripted(text="fine", drip_s=0.2)) as server:
        st = settings(server, timeout_s=0.8, max_retries=1)
        started = time.monotonic()
        with pytest.raises(LLMError) as info:
            complete(workspace, st, within=8.0)
        elapsed = time.monotonic() - started
        # The retry was sent before the client gave up on it; on a loaded machine the accept loop
        # may read it only now, so the count waits for it inside the server's lifetime.
        server.wait_requests(2, timeout=10)
    assert "no complete reply within 0.8 s" in str(info.value) and "2 attempts" in str(info.value)
    assert elapsed < 4.0  # two attempts of 0.8 s, not 60 s of dripping
    assert len(server.requests) == 2  # retried like any timeout
    [row] = calls(workspace)
    assert row.status == "error" and "no complete reply" in row.error


# --- unbounded replies ----------------------------------------------------------------------


def test_oversize_reply_is_cut_off_recorded_truncated_and_never_sent_back(workspace):
    """Unbounded resources: a 20 MB reply grew the store and was sent back whole in the JSON
    repair request. It is cut off at the byte limit, recorded with a truncated body and a
    reason, and never sent back to the model."""
    huge = "[" + ", ".join(['"How many rows?"'] * 1_300_000) + "]"  # about 20 MB of valid JSON
    assert len(huge) > 20_000_000
    with OpenAIServer(lambda body: huge) as server:
        st = settings(server, malformed_retries=1, prices={MODEL: Price(1.0, 2.0)})

        async def go() -> Any:
            async with Gateway(workspace, st) as gw:
                return await gw.complete_json([{"role": "user", "content": "questions?"}], validate=lambda v: v,
                                              purpose="hostile", max_tokens=1024)

        with pytest.raises(ReplyTooLarge) as info:
            run(go())
    assert "reply too large" in str(info.value) and "never sent back" in str(info.value)
    # The first request and one retry of the same request; no repair request carrying the reply.
    assert len(server.requests) == 2 and all(len(b["messages"]) == 1 for b in server.requests)
    [row] = calls(workspace)
    assert row.status == "error" and "reply too large" in row.error
    assert row.response["truncated"] is True and row.response["byte_limit"] < 200_000
    assert len(json.dumps(row.response)) < 5_000 and row.text is None
    assert 0 < row.cost <= 2 * Price(1.0, 2.0).cost(1_000, 1024)  # charged at most the worst case


# --- money ----------------------------------------------------------------------------------


def test_impossible_usage_stops_the_run_and_the_cost_stays_bounded(workspace):
    """Money: an endpoint reporting 5,000,000 completion tokens for max_tokens 1024 made a
    --max-cost 2 run spend $60 with exit status 0. The run stops with a message naming the
    claim, and the cost recorded is bounded by the reserved worst case."""
    import_tables(workspace, 3)

    def reply(body: dict) -> Scripted:
        return Scripted(text=questions_json(body), completion_tokens=5_000_000)

    price = Price(input=1.0, output=10.0)
    with OpenAIServer(reply) as server:
        st = settings(server, prices={MODEL: price}, max_cost=2.0, concurrency=1)
        summary = generate_questions(workspace, gen_options(max_tokens=1024), st)
        assert len(server.requests) == 1  # no further request after the first impossible reply
    assert summary.stop_reason is StopReason.IMPOSSIBLE_USAGE and summary.failed
    assert "completion_tokens = 5,000,000" in summary.stopped and "max_tokens 1,024" in summary.stopped
    assert "--max-cost" not in summary.advice
    spent = sum(c.cost for c in calls(workspace))
    assert 0 < spent <= 2.0 and summary.cost == pytest.approx(spent)
    assert spent < price.cost(0, 5_000_000)  # not what the endpoint claimed


@pytest.mark.parametrize(
    "usage, claim",
    [
        ({"prompt_tokens": -5, "completion_tokens": 3}, "prompt_tokens = -5"),
        ({"prompt_tokens": 10, "completion_tokens": "lots"}, "completion_tokens = 'lots'"),
        ({"prompt_tokens": 10_000_000, "completion_tokens": 3}, "prompt_tokens = 10,000,000"),
        ({"prompt_tokens": 10, "completion_tokens": 3.5}, "completion_tokens = 3.5"),
        ("free", "usage is 'free'"),
    ],
)
def test_impossible_usage_shapes_are_refused(sqlite_workspace, usage, claim):
    """Money: usage that is impossible for its request (negative, not a number, prompt tokens
    absurd for the prompt's size) stops the gateway with ImpossibleUsage naming the claim."""
    with OpenAIServer(lambda body: Scripted(text="ok", usage=usage)) as server:
        st = settings(server, prices={MODEL: Price(1.0, 1.0)}, max_cost=1.0)

        async def go() -> None:
            async with Gateway(sqlite_workspace, st) as gw:
                with pytest.raises(ImpossibleUsage) as first:
                    await gw.complete([{"role": "user", "content": "a"}], purpose="hostile", max_tokens=50)
                assert claim in str(first.value)
                with pytest.raises(ImpossibleUsage):  # refused before sending
                    await gw.complete([{"role": "user", "content": "b"}], purpose="hostile", max_tokens=50)

        run(go())
        assert len(server.requests) == 1
    [row] = calls(sqlite_workspace)
    # Charged its worst case: a token per byte of "a" and the chat template (137), 50 of reply.
    assert row.status == "error" and claim in row.error and row.cost <= Price(1.0, 1.0).cost(137, 50)


@pytest.mark.parametrize("value", [math.nan, math.inf, -1.0, 0.0])
def test_max_cost_that_disables_the_budget_is_refused(sqlite_workspace, value):
    """Money: --max-cost nan (and inf, negative) disabled the budget. load_llm_settings refuses
    it with a message naming --max-cost."""
    with pytest.raises(ConfigError) as info:
        load_llm_settings(sqlite_workspace, model=MODEL, max_cost=value)
    assert "--max-cost" in str(info.value) and "positive finite" in str(info.value)
    with pytest.raises(ConfigError):
        Price(input=math.nan, output=1.0)  # a NaN price switches the budget off as surely


# --- secrets --------------------------------------------------------------------------------


def test_echoed_authorization_header_is_redacted(workspace, caplog):
    """Secrets: an endpoint that echoes the Authorization header in an error put the API key
    into the terminal and into llm_calls.error. It is masked in the error, the log and the store."""
    script = {"n": 0}

    def reply(body: dict) -> Scripted:
        script["n"] += 1
        return Scripted(status=500 if script["n"] == 1 else 401, echo_headers=True)

    caplog.set_level(logging.WARNING, logger="tqaforge.llm")
    with OpenAIServer(reply) as server:
        with pytest.raises(EndpointAuthError) as info:
            complete(workspace, settings(server))
        sent = {k.lower(): v for k, v in server.request_headers[0].items()}
        assert sent["authorization"] == f"Bearer {KEY}" and sent["accept-encoding"] == "identity"
    assert "you sent Authorization: Bearer ***" in str(info.value) and KEY not in str(info.value)
    assert "you sent Authorization" in caplog.text and KEY not in caplog.text  # the 500's retry warning
    [row] = calls(workspace)
    assert "HTTP 401" in row.error and KEY not in row.error and KEY not in json.dumps(row.response)


def test_base_url_password_is_never_stored_or_shown(workspace, monkeypatch):
    """Secrets: OPENAI_BASE_URL with user:password@ was stored verbatim (llm_calls, settings,
    messages). The password is masked in the stored endpoint, the settings' repr and errors."""
    password = "hunter2-Pa55word"
    with OpenAIServer(lambda body: "fine") as server:
        url = server.url.replace("http://", f"http://bob:{password}@")
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        st = load_llm_settings(workspace, model=MODEL)
        assert st.base_url == url  # still used to connect
        assert password not in repr(st) and KEY not in repr(st)
        complete(workspace, st)
    dead = f"http://bob:{password}@127.0.0.1:{free_port()}/v1"
    with pytest.raises(LLMError) as info:
        complete(workspace, settings(base_url=dead, max_retries=0), "other")
    assert password not in str(info.value) and "bob:***@127.0.0.1" in str(info.value)
    stored = calls(workspace)
    assert len(stored) == 2
    assert all(password not in (c.endpoint or "") + (c.error or "") for c in stored)
    assert {c.endpoint.split("@")[0] for c in stored} == {"http://bob:***"}


def test_redact_url_with_an_unescaped_at_in_the_password():
    """Secrets: a URL with an unescaped '@' in its password printed part of it. The password
    runs to the last '@' before the host, and is masked whole."""
    assert redact_url("postgresql://ana:p@ss@db.example:5432/x") == "postgresql://ana:***@db.example:5432/x"
    assert redact_url("postgresql://ana:pa/ss@word@db:5432/x?sslmode=require") == "postgresql://ana:***@db:5432/x?sslmode=require"
    assert redact_url("postgresql://postgres@127.0.0.1:5432/test") == "postgresql://postgres@127.0.0.1:5432/test"
    assert redact_url("http://h/v1?api_key=abcdef&x=1") == "http://h/v1?api_key=***&x=1"
    text = redact_secrets(f"401: key {KEY} from http://u:pw-secret@h/v1", [KEY, None, "k"])
    assert KEY not in text and "pw-secret" not in text and "***" in text


# --- what stopped the run -------------------------------------------------------------------


def _stop_case(case: str, workspace: Workspace, server: OpenAIServer) -> LLMSettings:
    if case == "missing key":
        return settings(api_key=None)  # OpenAI itself, no key: refused before sending
    if case == "dead endpoint":
        return settings(base_url=f"http://127.0.0.1:{free_port()}/v1", max_retries=0)
    if case == "HTTP 500":
        return settings(server, max_retries=1)
    return settings(server, prices={MODEL: Price(1000.0, 1000.0)}, max_cost=0.001)  # budget


@pytest.mark.parametrize(
    "case, reason",
    [("missing key", StopReason.AUTH), ("dead endpoint", StopReason.UNREACHABLE), ("HTTP 500", StopReason.ENDPOINT),
     ("budget", StopReason.BUDGET)],
)
def test_the_summary_says_what_stopped_the_run(sqlite_workspace, case, reason):
    """What a new user hit: "run the command again (with a larger --max-cost)" was printed after
    a missing key, a 500 or a dead endpoint. The summary carries a typed stop reason and
    advice that names a larger budget only for the budget."""
    import_tables(sqlite_workspace, 1)
    with OpenAIServer(lambda body: Scripted(status=500)) as server:
        summary = generate_questions(sqlite_workspace, gen_options(), _stop_case(case, sqlite_workspace, server))
    assert summary.stop_reason is reason and summary.failed and summary.stopped
    assert ("larger budget" in summary.advice) == (reason is StopReason.BUDGET)


def test_a_run_where_every_step_got_an_invalid_reply_failed(workspace):
    """Silent acceptance: a generation run in which every step got an invalid reply exited 0.
    The summary says the run failed (all_invalid) so the CLI exits non-zero."""
    import_tables(workspace, 2)
    with OpenAIServer(lambda body: "Sorry, I cannot write questions.") as server:
        summary = generate_questions(workspace, gen_options(), settings(server))
    assert summary.stopped is None and summary.steps_done == summary.steps_failed == 2
    assert summary.all_invalid and summary.failed and "--retry-failed" in summary.advice
    with workspace.session() as s:
        assert {st.status for st in s.exec(select(GenerationStep))} == {"invalid_reply"}
    assert ClassifySummary(method="llm", invalid=3).failed  # the same rule for question typing
    assert not ClassifySummary(method="llm", invalid=3, questions=1).failed


def test_deeply_nested_json_reply_is_an_invalid_reply():
    """Deeply nested JSON (the reader case, from a model): a reply `[[[[...` 100k deep raised
    RecursionError out of the JSON parser, past the repair path; it is an invalid reply."""
    from tqaforge.llm import parse_json_reply

    with pytest.raises(ValueError, match="nested too deeply"):
        parse_json_reply("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="nested too deeply"):
        parse_json_reply("Here it is:\n```json\n" + "[" * 100_000 + "]" * 100_000 + "\n```")


# --- several endpoints ([llm] base_urls) -----------------------------------------------------


def test_every_endpoint_refusing_fails_at_once_without_hanging(sqlite_workspace, caplog):
    """Endpoints: with every endpoint of base_urls refusing connections (and so marked down), a
    request must neither wait for a cool-off nor spin: it goes to the endpoint whose cool-off
    ends first; once each endpoint has refused it, it fails at once (EndpointUnreachable, naming
    both addresses), not after max_retries: nothing listens there, and no retry changes that."""
    caplog.set_level(logging.WARNING, logger="tqaforge.llm")
    password = "hunter2-Pa55word"
    dead = [f"http://bob:{password}@127.0.0.1:{free_port()}/v1", f"http://127.0.0.1:{free_port()}/v1"]
    st = LLMSettings(model=MODEL, api_key=KEY, base_urls=tuple(dead), max_retries=3, backoff_s=0.01,
                     backoff_max_s=0.02, endpoint_failures=1, endpoint_cooldown_s=600)

    async def go() -> tuple[list[Any], Gateway, float]:
        async with Gateway(sqlite_workspace, st) as gw:
            started = time.monotonic()
            outcomes = await asyncio.wait_for(asyncio.gather(
                *(gw.complete([{"role": "user", "content": f"q {i}"}], purpose="hostile") for i in range(5)),
                return_exceptions=True), 20)
            return outcomes, gw, time.monotonic() - started

    outcomes, gw, took = run(go())
    assert took < 10  # a 600 s cool-off was not waited out
    ports = [url.rsplit(":", 1)[1].split("/", 1)[0] for url in dead]
    assert all(isinstance(o, EndpointUnreachable) and "gave up" not in str(o)
               and all(f"nothing listens on 127.0.0.1:{p}" in str(o) for p in ports) for o in outcomes), outcomes
    stats = gw.endpoint_stats()
    assert sum(s.requests for s in stats) == 5 * 2  # each endpoint tried once per request; none more (no spinning)
    assert all(s.down and s.down_events == 1 and s.requests > 0 for s in stats)
    assert [s.endpoint for s in stats] == [redact_url(dead[0]), dead[1]]
    rows = calls(sqlite_workspace)
    assert len(rows) == 5 and all(r.status == "error" and r.endpoint in (stats[0].endpoint, dead[1]) for r in rows)
    shown = caplog.text + "".join(str(o) for o in outcomes) + "".join((r.endpoint or "") + (r.error or "") for r in rows)
    assert "is down after 1 failures in a row" in caplog.text and "bob:***@127.0.0.1" in shown
    assert password not in shown and password not in repr(st)


def test_a_base_urls_entry_that_is_not_http_is_refused_naming_it_without_its_password(sqlite_workspace):
    """Endpoints: an entry of base_urls that no request can go to is refused when the settings
    are loaded, named, without its password, and no other entry hides it."""
    from tqaforge.store import open_workspace

    password = "hunter2-Pa55word"
    path = sqlite_workspace.root / "tqaforge.toml"
    good = '"http://127.0.0.1:8000/v1", "https://gpu2.example/v1"'
    path.write_text(path.read_text().replace("[llm]\n", f'[llm]\nmodel = "m"\nbase_urls = [{good}]\n', 1))
    assert len(load_llm_settings(open_workspace(sqlite_workspace.root, upgrade=False)).endpoint_urls) == 2  # control
    bad = f"ftp://bob:{password}@gpu3.example/v1"
    path.write_text(path.read_text().replace(f"base_urls = [{good}]", f'base_urls = [{good}, "{bad}"]'))
    with pytest.raises(ConfigError) as info:
        load_llm_settings(open_workspace(sqlite_workspace.root, upgrade=False))
    message = str(info.value)
    assert "ftp://bob:***@gpu3.example/v1" in message and "[llm] base_urls" in message and password not in message
    assert "not an http:// or https:// URL" in message


# --- nowhere to send: a refused port, a host that does not exist (issue 27, item 6) -----------


def _dead_url() -> tuple[str, str]:
    """An endpoint URL on a loopback port that was bound and closed again (nothing listens on
    it), and its host:port."""
    port = free_port()
    return f"http://127.0.0.1:{port}/v1", f"127.0.0.1:{port}"


def _command_case(command: str, ws: Workspace, tmp_path: Path) -> tuple[list[str], Any]:
    """The arguments of ``command`` on ``ws`` (set up for it) and the scripted model that answers it."""
    from conftest import freeze_sample_release
    from test_answers import add_questions

    if command == "generate questions":
        import_tables(ws, 1)
        return ["generate", "questions", "--subtypes", "Counting", "--per-round", "2", "--model", MODEL], questions_json
    if command == "generate answers":
        import_tables(ws, 1)
        add_questions(ws, {"plain": 3})
        return ["generate", "answers", "--model", MODEL, "--methods", "dp"], lambda body: "Final Answer: 3"
    release = freeze_sample_release(tmp_path / "frozen")
    return (["evaluate", "--release", str(release), "--model", MODEL, "--limit", "4", "--no-plots",
             "--out", str(tmp_path / "scores")], lambda body: "Final Answer: 3")


def _stored(ws: Workspace, command: str) -> int:
    """What ``command`` committed: new questions, answer candidates, or scores written."""
    from tqaforge.schemas.records import AnswerCandidate, Question

    with ws.session() as s:
        if command == "generate questions":
            return len(list(s.exec(select(Question))))
        if command == "generate answers":
            return len(list(s.exec(select(AnswerCandidate))))
    return int((ws.root.parent / "scores" / "scores.json").exists())


@pytest.mark.parametrize("command", ["generate questions", "generate answers", "evaluate --model"])
def test_a_refused_port_stops_the_command_at_once_with_the_fix(command, sqlite_workspace, tmp_path, monkeypatch,
                                                               caplog):
    """Item 6: `generate` spent 24 s retrying a port where nothing listens before failing. With
    the workspace's default retries (5, backoff from 1 s), the command now stops at once, says
    once "nothing listens on HOST:PORT" with the fix, retries nothing, commits nothing half-done,
    and a later run against a live endpoint resumes and finishes."""
    from typer.testing import CliRunner

    from tqaforge.cli import app

    caplog.set_level(logging.WARNING, logger="tqaforge.llm")
    ws = sqlite_workspace
    args, reply = _command_case(command, ws, ws.root.parent)
    before = _stored(ws, command)
    url, where = _dead_url()
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    runner = CliRunner(env={"COLUMNS": "200"})
    started = time.monotonic()
    result = runner.invoke(app, ["-w", str(ws.root), *args])
    took = time.monotonic() - started
    said = " ".join(result.output.split())
    assert result.exit_code == 1, result.output
    assert took < 5, f"{command} took {took:.1f} s to fail"  # the old retries: 0.5+1+2+4+8 s at the least
    assert said.count(f"nothing listens on {where} (connection refused)") == 1, said  # once, not per piece
    assert "OPENAI_BASE_URL" in said and "Traceback" not in said
    assert "retry" not in caplog.text  # not one retry was waited for
    assert _stored(ws, command) == before  # nothing half-written
    assert all(c.status == "error" for c in calls(ws))  # the failed calls, sent again by the next run

    with OpenAIServer(reply) as server:  # the endpoint is up now: the same command resumes and finishes
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        again = runner.invoke(app, ["-w", str(ws.root), *args])
    assert again.exit_code == 0, again.output
    assert _stored(ws, command) > before and server.requests
    assert {c.status for c in calls(ws)} == {"ok"}


def test_a_host_that_does_not_exist_is_not_retried_but_a_temporary_dns_failure_is():
    """Item 6: a base URL whose host name does not resolve fails like a refused port (the
    resolver said "no such name": no retry mends it); "temporary failure in name resolution"
    stays retried, like a reset connection. The errors are chained as the openai client chains them."""
    import socket

    import httpx2
    import openai

    from tqaforge.llm.transport import unreachable

    def failed(cause: BaseException) -> openai.APIConnectionError:
        request = httpx2.Request("POST", "http://gpu-box:8000/v1/chat/completions")
        try:
            try:
                raise httpx2.ConnectError(str(cause)) from cause
            except httpx2.ConnectError as exc:
                raise openai.APIConnectionError(request=request) from exc
        except openai.APIConnectionError as exc:
            return exc

    missing = unreachable(failed(socket.gaierror(socket.EAI_NONAME, "Name or service not known")),
                          "http://gpu-box:8000/v1")
    assert missing is not None and missing.problem.startswith("the host name gpu-box does not resolve (gpu-box:8000")
    assert "OPENAI_BASE_URL" in missing.hint
    assert unreachable(failed(socket.gaierror(socket.EAI_AGAIN, "Temporary failure")), "http://gpu-box:8000/v1") is None
    assert unreachable(failed(ConnectionResetError(104, "reset")), "http://gpu-box:8000/v1") is None
    refused = unreachable(failed(OSError("All connection attempts failed")), "https://[::1]/v1")
    assert refused is None  # no refusal in the chain: retried
    group = OSError("All connection attempts failed")
    group.__cause__ = ExceptionGroup("attempts", [OSError(99, "cannot assign"), ConnectionRefusedError(111, "refused")])
    found = unreachable(failed(group), "https://[::1]/v1")
    assert found is not None and found.problem == "nothing listens on [::1]:443 (connection refused)"


@pytest.mark.parametrize("status", [503, 429])
def test_a_server_that_fails_twice_then_answers_is_still_retried(sqlite_workspace, status):
    """Item 6's control: 5xx and 429 stay retried (a refused port is the only change)."""
    with OpenAIServer(lambda body: Scripted(status=status) if len(server.requests) <= 2 else "fine") as server:

        async def go() -> tuple[Any, Gateway]:
            async with Gateway(sqlite_workspace, settings(server)) as gw:
                return await gw.complete([{"role": "user", "content": "hi"}], purpose="hostile"), gw

        done, gw = run(go())
    assert done.text == "fine" and len(server.requests) == 3 and gw.retries == 2
    [row] = calls(sqlite_workspace)
    assert row.status == "ok"


def test_a_server_that_accepts_and_hangs_still_times_out_with_its_retries(sqlite_workspace):
    """Item 6's control: a connection that is accepted and then never answered is a timeout,
    retried max_retries times (it may be a slow model), not an unreachable endpoint."""
    with OpenAIServer(lambda body: Scripted(text="late", delay_s=30)) as server:
        with pytest.raises(LLMError) as info:
            complete(sqlite_workspace, settings(server, timeout_s=0.3, max_retries=2), within=10)
        server.wait_requests(3, timeout=10)  # the last attempt may be read after the client gave up
        assert len(server.requests) == 3
    assert not isinstance(info.value, EndpointUnreachable)
    assert "no complete reply within 0.3 s (gave up after 3 attempts)" in str(info.value)

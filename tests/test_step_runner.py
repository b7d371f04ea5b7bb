"""The step runner (tqaforge.llm.step): claims, workers, a shared budget, transports, one summary.

A toy step whose pieces are "p0".."pN" and whose commits go to a dict: the runner, not the step,
decides what runs where and when.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from openai_server import OpenAIServer

from tqaforge.errors import StoreError
from tqaforge.llm import Gateway, LLMSettings, Price
from tqaforge.llm.claims import Claims
from tqaforge.llm.step import CallSummary, RunnerOptions, run_step
from tqaforge.store import Workspace


class Toy:
    """Asks the model once per piece; the reply is the result."""

    def __init__(self, n: int, name: str = "toy:m") -> None:
        self.name = name
        self.pieces = [f"p{i}" for i in range(n)]
        self.done: dict[str, str] = {}
        self.commits: list[str] = []

    def pending(self) -> list[str]:
        return [p for p in self.pieces if p not in self.done]

    def key(self, piece: str) -> str:
        return piece

    async def call(self, gateway: Gateway, piece: str) -> str:
        done = await gateway.complete([{"role": "user", "content": f"say {piece}"}], purpose="toy", max_tokens=16)
        return done.text

    def commit(self, piece: str, result: str) -> None:
        self.done[piece] = result
        self.commits.append(piece)


def settings(url: str, **kw: object) -> LLMSettings:
    return LLMSettings(model="m", base_url=url, api_key="k", **kw)  # type: ignore[arg-type]


def test_every_piece_is_done_once_and_counted_once(workspace: Workspace) -> None:
    toy = Toy(40)
    with OpenAIServer(lambda body: body["messages"][0]["content"].split()[-1], latency_s=0.01) as server:
        summary = run_step(workspace, toy, settings(server.url), RunnerOptions(window=8, chunk=10))
        assert sorted(toy.done) == sorted(toy.pieces) and toy.done["p7"] == "p7"
        assert server.total_paid == 40 and max(server.paid.values()) == 1
        assert isinstance(summary, CallSummary) and summary.paid == 40 and summary.cached == 0
        # A second run: nothing left to do, nothing sent.
        again = run_step(workspace, Toy(40), settings(server.url), RunnerOptions(window=8))
        assert server.total_paid == 40 and again.cached == 40 and again.paid == 0


def test_workers_in_one_process_split_the_work(workspace: Workspace) -> None:
    toy = Toy(60)
    with OpenAIServer(lambda body: "x", latency_s=0.05) as server:
        # Replies wait until a fifth request is in flight (a window holds four): only workers that
        # really run at once get there; a run of one window at a time waits out the 20 s once.
        server.hold_until_in_flight(5, timeout=20)
        summary = run_step(workspace, toy, settings(server.url), RunnerOptions(workers=3, window=4, chunk=5))
        assert len(toy.commits) == 60 == len(set(toy.commits))
        assert server.total_paid == 60 and max(server.paid.values()) == 1
        assert summary.workers == 3 and summary.paid == 60
        # Three workers of window 4 ran at once: more than one window in flight at the server.
        assert server.max_in_flight > 4


def test_a_live_claim_of_another_worker_is_skipped_and_a_lapsed_one_retaken(workspace: Workspace) -> None:
    other = Claims(workspace, "toy:m", "someone-else", lease_s=600)
    assert other.take(["p0", "p1"], 10) == ["p0", "p1"]
    mine = Claims(workspace, "toy:m", "me", lease_s=600)
    assert mine.take(["p0", "p1", "p2"], 10) == ["p2"]
    assert mine.held_by_others(["p0", "p1", "p2"]) == {"p0", "p1"}
    lapsed = Claims(workspace, "toy:m", "dead", lease_s=0.001)
    assert lapsed.take(["p3"], 1) == ["p3"]
    import time
    time.sleep(0.01)  # past a 1 ms lease
    assert mine.take(["p3"], 1) == ["p3"] and mine.retaken == 1


def test_a_shared_budget_is_never_passed_by_workers_together(workspace: Workspace) -> None:
    # a worst case of about $0.16 a call (142 prompt tokens as sent + 16), about $0.004 charged:
    # $0.5 stops the run before the 150 pieces, whatever the number of workers.
    price = {"m": Price(1000.0, 1000.0)}
    toy = Toy(150)
    with OpenAIServer(lambda body: "x", latency_s=0.02) as server:
        summary = run_step(workspace, toy, settings(server.url, prices=price, max_cost=0.5),
                           RunnerOptions(workers=3, window=4, budget="pilot"))
        assert summary.stop_reason is not None and summary.stop_reason.value == "budget"
        from tqaforge.llm.budget import SharedBudget
        shared = SharedBudget(workspace, "pilot")
        try:
            spent, reserved, limit = shared.state()
        finally:
            shared.close()
        assert limit == 0.5 and spent <= 0.5 and reserved == pytest.approx(0.0, abs=1e-9)
        # Every paid reply is in the ledger (pieces after the stop in a worker's order wait for the
        # next run, which gets their replies from the store).
        from sqlmodel import select

        from tqaforge.schemas.records import LLMCall
        with workspace.session() as s:
            stored = len(s.exec(select(LLMCall.id).where(LLMCall.status == "ok")).all())
        assert 0 < len(toy.done) <= server.total_paid == stored
        # The same budget named again: what was spent counts, so almost nothing more is sent.
        before = server.total_paid
        again = run_step(workspace, toy, settings(server.url, prices=price, max_cost=0.5),
                         RunnerOptions(window=4, budget="pilot"))
        assert again.stop_reason is not None and server.total_paid - before <= 1


def test_a_second_process_on_sqlite_is_refused_with_the_fix(sqlite_workspace: Workspace) -> None:
    with sqlite_workspace.lock("step toy", wait=False):
        with pytest.raises(StoreError) as err:
            run_step(sqlite_workspace, Toy(3), settings("http://127.0.0.1:9/v1"), RunnerOptions())
    assert "PostgreSQL" in (err.value.hint or "")


def test_options_are_checked(tmp_path: Path) -> None:
    from tqaforge.errors import ConfigError
    for bad in (dict(workers=0), dict(transport="pigeon"), dict(transport="offline"), dict(lease_s=0)):
        with pytest.raises(ConfigError):
            RunnerOptions(**bad)  # type: ignore[arg-type]


def test_deferred_pieces_wait_and_nothing_is_sent_for_them(workspace: Workspace) -> None:
    """Requests waiting in an open batch are not sent online: their pieces wait."""
    from tqaforge.llm.calls import request_id, request_params
    from tqaforge.schemas.records import LLMBatch
    params = request_params(0.0, 16, None)
    waiting = request_id("m", [{"role": "user", "content": "say p1"}], params, None, 0)
    with workspace.session() as s:
        s.add(LLMBatch(id="b1", model="m", state="in_progress", custom_ids=[waiting], request_count=1))
    toy = Toy(3)
    with OpenAIServer(lambda body: "x") as server:
        summary = run_step(workspace, toy, settings(server.url), RunnerOptions())
        assert sorted(toy.done) == ["p0", "p2"] and server.total_paid == 2
        assert summary.deferred == 1 and summary.waiting == 1


def test_claims_of_a_dead_process_of_this_machine_are_taken_at_once(workspace: Workspace) -> None:
    import os
    import subprocess
    import sys

    from tqaforge.llm import claims as claims_mod
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)  # a process that has exited
    host = claims_mod._host()
    Claims(workspace, "toy:m", f"{host}:{dead_pid}:abc:0", lease_s=3600).take(["p0"], 1)
    Claims(workspace, "toy:m", f"{host}:{os.getppid()}:abc:0", lease_s=3600).take(["p1"], 1)  # alive
    Claims(workspace, "toy:m", f"elsewhere:{dead_pid}:abc:0", lease_s=3600).take(["p2"], 1)  # another machine
    mine = Claims(workspace, "toy:m", "me", lease_s=60)
    assert mine.take(["p0", "p1", "p2"], 10) == ["p0"] and mine.retaken == 1

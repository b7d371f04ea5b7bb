"""Several worker processes on one PostgreSQL store (issue 25, "Several workers, one store").

Three `answer_worker.py` processes answer 1,000 accepted questions (DP: one call a question)
against a slow loopback server, under one shared budget; one of them is SIGKILLed mid-run. The
server counts what it delivers to a connected client, per request: every request is paid at
most once, the shared budget is never passed, the dead worker's claims are taken again once its
lease lapses, and the records are the same as one uninterrupted worker's on a store of its own.

A request in flight when its worker dies dies with it (its reply has nowhere to go) and is sent
again by the worker that takes the piece over; the kill is made while the server holds every
new request (``stall_after``) and after every delivered reply is in the ledger, so that at the
kill no reply is delivered and unrecorded: then the server must see no request twice.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PG_ENV, _pg_schema_url, wait_for
from openai_server import OpenAIServer
from sqlalchemy import func
from sqlmodel import select

from tqaforge.ingest import import_paths
from tqaforge.llm.budget import SharedBudget
from tqaforge.schemas.records import Answer, LLMCall, Question, TableRecord, WorkClaim
from tqaforge.store import Workspace, init_workspace

pytestmark = pytest.mark.postgres

REPO = Path(__file__).resolve().parents[1]
WORKER = REPO / "tests" / "answer_worker.py"
QUESTIONS = 1000
MAX_COST = 5.0


def reply(body: dict) -> str:
    """A deterministic answer: the number in the question, times 3."""
    n = int(re.search(r"question (\d+) ", body["messages"][-1]["content"]).group(1))  # type: ignore[union-attr]
    return f"Final Answer: {3 * n}"


def make_store(root: Path, url: str, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    monkeypatch.setenv("TQAFORGE_DATABASE_URL", url)
    ws = init_workspace(root, name="workers")
    assert not import_paths(ws, [REPO / "data" / "tables" / "wtq_cricket_batting.tsv"]).failed
    with ws.session() as s:
        table_id = s.exec(select(TableRecord.id)).first()
        for i in range(QUESTIONS):
            text = f"What is question {i} times three?"
            s.add(Question(id=Question.make_id(table_id, text, "Counting"), table_id=table_id, text=text,
                           subtype="Counting", qtype="NumericalReasoning", status="accepted", origin="llm"))
    return ws


def start_worker(ws: Workspace, url: str, server: OpenAIServer, budget: str, lease: float) -> subprocess.Popen[str]:
    env = dict(os.environ, TQAFORGE_DATABASE_URL=url, PYTHONPATH=f"{REPO}:{REPO / 'tests'}")
    return subprocess.Popen(
        [sys.executable, str(WORKER), str(ws.root), "--url", server.url, "--budget", budget, "--max-cost", str(MAX_COST),
         "--lease", str(lease), "--timeout", "4", "--concurrency", "8", "--chunk", "24"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def answers(ws: Workspace) -> list[tuple[str, str, str, str]]:
    with ws.session() as s:
        return sorted((a.question_id, a.value, str(a.status), str(a.route))
                      for a in s.exec(select(Answer).where(Answer.method == "vote")).all())


def stored_ok_calls(ws: Workspace) -> int:
    with ws.session() as s:
        return int(s.exec(select(func.count()).select_from(LLMCall).where(LLMCall.status == "ok")).one())


@pytest.fixture
def pg_base() -> str:
    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(f"{PG_ENV} not set")
    return base


def test_three_workers_one_killed_pay_each_request_once_and_match_one_worker(
        pg_base: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    schemas = _pg_schema_url(pg_base), _pg_schema_url(pg_base)
    many_url, one_url = next(schemas[0]), next(schemas[1])
    try:
        many = make_store(tmp_path / "many", many_url, monkeypatch)
        with OpenAIServer(reply, latency_s=0.05) as server:
            workers = [start_worker(many, many_url, server, "shared", lease=3.0) for _ in range(3)]
            try:
                # Mid-run: hold every new request, wait until each delivered reply is in the ledger,
                # then kill one worker (it holds claims and requests in flight).
                wait_for(lambda: server.total_paid >= 250, 120, "250 paid replies")
                server.stall_after(server.total_paid)
                # Requests admitted before the stall still finish: wait until none is on its way,
                # then until every delivered reply is in the ledger.
                wait_for(server.only_stalled_left, 30, "the replies on their way to be delivered")
                wait_for(lambda: stored_ok_calls(many) == server.total_paid, 30, "the delivered replies stored")
                # The victim is the worker holding the most claims on questions still without their
                # answer (not pieces it has just committed and not yet let go of): those must be taken over.
                with many.session() as s:
                    voted = select(Answer.question_id).where(Answer.method == "vote")
                    victim_owner = s.exec(
                        select(WorkClaim.owner).where(WorkClaim.piece.not_in(voted))  # type: ignore[attr-defined]
                        .group_by(WorkClaim.owner).order_by(func.count().desc())).first()
                assert victim_owner is not None, "no worker held a claim on unanswered work mid-run"
                victim_pid = int(victim_owner.split(":")[1])
                victim = next(w for w in workers if w.pid == victim_pid)
                os.kill(victim.pid, signal.SIGKILL)
                victim.wait(timeout=30)
                paid_at_kill = server.total_paid
                server.stall_after(None)
                outs = [w.communicate(timeout=300) for w in workers if w is not victim]
            finally:
                for w in workers:
                    if w.poll() is None:
                        w.kill()
                        w.wait()
            for w, (_out, errout) in zip([w for w in workers if w is not victim], outs):
                assert w.returncode == 0, errout[-2000:]
            summaries = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
            # Every request paid once at the server, and every paid reply is in the ledger.
            assert server.total_paid == QUESTIONS == stored_ok_calls(many)
            assert max(server.paid.values()) == 1, "a request was paid twice"
            assert paid_at_kill < QUESTIONS
            # The dead worker's pieces were taken over by the others once its lease lapsed.
            assert sum(s["calls"]["retaken"] for s in summaries) > 0
            with many.session() as s:
                assert s.exec(select(func.count()).select_from(WorkClaim)).one() == 0
        # The shared budget: never passed, whatever the three did.
        shared = SharedBudget(many, "shared")
        try:
            spent, reserved, limit = shared.state()
        finally:
            shared.close()
        with many.session() as s:
            ledger_cost = float(s.exec(select(func.sum(LLMCall.cost))).one() or 0.0)
        # A reply stored just before its worker died may not be settled in the budget yet: its hold
        # stays (charged in full when its lease lapses), so spent + held covers the ledger.
        assert limit == MAX_COST and ledger_cost <= spent + reserved <= MAX_COST and spent <= MAX_COST
        many_answers = answers(many)
        many.close()

        # The same work by one uninterrupted worker on a store of its own.
        one = make_store(tmp_path / "one", one_url, monkeypatch)
        with OpenAIServer(reply, latency_s=0.0) as server:
            single = start_worker(one, one_url, server, "alone", lease=60.0)
            out, errout = single.communicate(timeout=300)
            assert single.returncode == 0, errout[-2000:]
            assert server.total_paid == QUESTIONS and max(server.paid.values()) == 1
        assert answers(one) == many_answers and len(many_answers) == QUESTIONS
        one.close()
    finally:
        for gen in schemas:
            gen.close()

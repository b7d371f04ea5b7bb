"""Batches against online calls: 10,000 requests through the gateway (concurrency 32, a loopback
server answering in 50 ms) and the same requests through the loopback Batch API server.

Section 1 (online vs batch): the online pass is the gateway's (the real ``openai`` client, the
cache, a committed LLMCall row per call) against tests/openai_server.py; the batch pass times
preparing and submitting the batch (building the requests, writing the JSONL, the row, upload
and create), then, once the server has finished it, collecting its 10,000 output lines into the
ledger. The costs are the ledger's: online at ``[llm.prices]``, batch at the batch price (half).
A last online pass over the collected requests shows they are all answered from the cache.

    .venv/bin/python benchmarks/batch.py [--requests 10000] [--concurrency 32] [--latency 0.05]

Section 2 (workers): ``generate answers`` (DP, one call a question) through the step runner with
1 and then 3 workers in one process, against a server answering in 200 ms: the speed-up of
more workers on latency-bound work (target >= 2.5x). Several processes on one PostgreSQL split
the same way (tests/test_workers_postgres.py).

    .venv/bin/python benchmarks/batch.py --only workers [--questions 1200] [--worker-latency 0.2]

Each section is a function returning its figures; ``main`` runs them in order (add a section by
adding a function and a line to ``SECTIONS``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tqaforge.llm import Gateway, LLMSettings, Price, run
from tqaforge.llm.batches import batch_request, collect_batch, submit_batch, wait_batch
from tqaforge.store import Workspace, init_workspace

TESTS = Path(__file__).resolve().parents[1] / "tests"
MODEL = "bench-model"
PRICE = Price(0.15, 0.60)
PROMPT = "Table: city | population\nOslo | 709000\nBergen | 291000\nQuestion {i}: which city is larger?"


def messages(i: int) -> list[dict[str, str]]:
    return [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": PROMPT.format(i=i)}]


def start(script: str, *args: str) -> tuple[subprocess.Popen[str], str]:
    """Start a loopback server script of tests/ as its own process; it and its URL."""
    proc = subprocess.Popen([sys.executable, str(TESTS / script), "--port", "0", *args], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    if not line or line[0] != "ready":
        proc.kill()
        raise SystemExit(f"{script} did not start")
    return proc, line[1]


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    proc.wait(timeout=10)


def workspace(root: Path, name: str) -> Workspace:
    os.environ.pop("TQAFORGE_DATABASE_URL", None)
    return init_workspace(root / name)


def settings_for(url: str, concurrency: int) -> LLMSettings:
    return LLMSettings(model=MODEL, base_url=url, api_key="unused", concurrency=concurrency, prices={MODEL: PRICE})


def online(ws: Workspace, settings: LLMSettings, n: int) -> tuple[float, Gateway]:
    """n calls through the gateway: wall time and the gateway (paid, cached, spent)."""

    async def calls() -> tuple[float, Gateway]:
        async with Gateway(ws, settings) as gw:
            begun = time.perf_counter()
            await asyncio.gather(*(gw.complete(messages(i), purpose="benchmark", max_tokens=64) for i in range(n)))
            return time.perf_counter() - begun, gw

    return run(calls())


def section_online_vs_batch(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """Section 1: the figures of n requests online and through a batch."""
    n = args.requests
    figures: dict[str, Any] = {"requests": n}
    proc, url = start("openai_server.py", "--latency", str(args.latency), "--echo")
    try:
        ws = workspace(root, "online")
        figures["online_s"], gw = online(ws, settings_for(url, args.concurrency), n)
        figures["online_cost"], figures["online_paid"] = gw.spent, gw.paid_calls
        ws.close()
    finally:
        stop(proc)

    proc, url = start("batch_server.py")
    try:
        ws = workspace(root, "batch")
        settings = settings_for(url, args.concurrency)
        begun = time.perf_counter()
        requests = [batch_request(settings, messages(i), purpose="benchmark", max_tokens=64) for i in range(n)]
        batch = submit_batch(ws, settings, requests, step="benchmark")
        figures["submit_s"] = time.perf_counter() - begun
        begun = time.perf_counter()
        wait_batch(ws, settings, batch.id, poll_s=0.05, timeout_s=600)
        figures["server_s"] = time.perf_counter() - begun  # the loopback provider's own work, not ours
        begun = time.perf_counter()
        summary = collect_batch(ws, settings, batch.id)
        figures["collect_s"] = time.perf_counter() - begun
        figures["batch_cost"], figures["batch_ok"] = summary.cost, summary.ok
        figures["file_mb"] = (ws.paths.batches / f"{batch.id}.jsonl").stat().st_size / 1e6
        figures["output_mb"] = (ws.paths.batches / f"{batch.id}.output.jsonl").stat().st_size / 1e6
        _, again = online(ws, settings, n)
        figures["after_paid"], figures["after_cached"] = again.paid_calls, again.cached_calls
        ws.close()
    finally:
        stop(proc)
    return figures


def print_online_vs_batch(f: dict[str, Any], args: argparse.Namespace) -> bool:
    n = f["requests"]
    print(f"1. {n:,} requests online (gateway, concurrency {args.concurrency}, server latency "
          f"{args.latency * 1000:.0f} ms) vs the Batch API (loopback batch server)")
    print(f"   online           : {f['online_s']:8.2f} s  ({n / f['online_s']:7.0f} requests/s), "
          f"{f['online_paid']:,} paid, ${f['online_cost']:.4f}")
    print(f"   batch submit     : {f['submit_s']:8.2f} s  (build {n:,} requests, write {f['file_mb']:.1f} MB of JSONL, "
          "row, upload, create)")
    print(f"   batch collect    : {f['collect_s']:8.2f} s  ({n / f['collect_s']:7.0f} lines/s; {f['output_mb']:.1f} MB output, "
          f"{f['batch_ok']:,} ok rows)")
    print(f"   (provider's work : {f['server_s']:8.2f} s on the loopback server; hours at a real provider)")
    ours = f["submit_s"] + f["collect_s"]
    print(f"   our time         : batch {ours:.2f} s vs online {f['online_s']:.2f} s: {f['online_s'] / ours:.1f}x less")
    ratio = f["batch_cost"] / f["online_cost"] if f["online_cost"] else float("nan")
    print(f"   cost             : batch ${f['batch_cost']:.4f} vs online ${f['online_cost']:.4f}: {ratio:.2f}x")
    print(f"   online run after : {f['after_paid']} paid, {f['after_cached']:,} from the cache")
    return f["batch_ok"] == n and f["after_paid"] == 0 and abs(ratio - 0.5) < 0.01


def answering_workspace(root: Path, name: str, questions: int) -> Workspace:
    """A workspace with one real table and ``questions`` accepted questions on it."""
    from sqlmodel import select

    from tqaforge.ingest import import_paths
    from tqaforge.schemas.records import Question, TableRecord

    ws = workspace(root, name)
    import_paths(ws, [TESTS.parent / "data" / "tables" / "wtq_cricket_batting.tsv"])
    with ws.session() as s:
        table_id = s.exec(select(TableRecord.id)).first()
        assert table_id is not None
        for i in range(questions):
            text = f"What is question {i} times three?"
            s.add(Question(id=Question.make_id(table_id, text, "Counting"), table_id=table_id, text=text,
                           subtype="Counting", qtype="NumericalReasoning", status="accepted", origin="llm"))
    return ws


def answer_with(ws: Workspace, url: str, workers: int, concurrency: int) -> tuple[float, Any]:
    """Answer every accepted question (DP, one call each) with the step runner: time and summary."""
    from tqaforge.answers.annotate import AnswerOptions, generate_answers
    from tqaforge.llm.step import RunnerOptions
    from tqaforge.schemas.enums import AnswerMethod

    llm = LLMSettings(model=MODEL, base_url=url, api_key="unused", concurrency=concurrency, prices={MODEL: PRICE})
    begun = time.perf_counter()
    summary = generate_answers(ws, AnswerOptions(methods=(AnswerMethod.DP,), max_tokens=1024), llm,
                               runner=RunnerOptions(workers=workers, window=2 * concurrency))  # as the CLI
    return time.perf_counter() - begun, summary


def section_workers(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """Section 2: ``generate answers`` with 1 and with 3 workers against a latency-bound server."""
    n, latency, concurrency = args.questions, args.worker_latency, args.worker_concurrency
    figures: dict[str, Any] = {"questions": n, "latency": latency, "concurrency": concurrency}
    proc, url = start("openai_server.py", "--latency", str(latency), "--echo")
    try:
        for workers in (1, 3):
            ws = answering_workspace(root, f"workers-{workers}", n)
            figures[f"w{workers}_s"], summary = answer_with(ws, url, workers, concurrency)
            figures[f"w{workers}_paid"], figures[f"w{workers}_done"] = summary.calls.paid, summary.questions_done
            if summary.calls.stopped:
                raise SystemExit(f"the {workers}-worker run stopped: {summary.calls.stopped}")
            ws.close()
    finally:
        stop(proc)
    return figures


def print_workers(f: dict[str, Any], args: argparse.Namespace) -> bool:
    n = f["questions"]
    ideal = n * f["latency"] / f["concurrency"]
    print(f"2. generate answers (DP, {n:,} questions, SQLite) against a server answering in {f['latency'] * 1000:.0f} ms, "
          f"concurrency {f['concurrency']} a worker (one worker's ideal {ideal:.1f} s)")
    for w in (1, 3):
        print(f"   {w} worker{'s' if w > 1 else ' '}        : {f[f'w{w}_s']:8.2f} s  ({n / f[f'w{w}_s']:6.1f} questions/s), "
              f"{f[f'w{w}_paid']:,} paid, {f[f'w{w}_done']:,} voted")
    speedup = f["w1_s"] / f["w3_s"]
    print(f"   speed-up         : {speedup:.2f}x  target >= 2.5x: {'met' if speedup >= 2.5 else 'NOT met'}")
    return speedup >= 2.5 and f["w1_paid"] == f["w3_paid"] == n


SECTIONS: list[tuple[str, Callable[[argparse.Namespace, Path], dict[str, Any]], Callable[[dict[str, Any], argparse.Namespace], bool]]] = [
    ("online-vs-batch", section_online_vs_batch, print_online_vs_batch),
    ("workers", section_workers, print_workers),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--questions", type=int, default=1200, help="questions answered in section 2")
    parser.add_argument("--worker-latency", type=float, default=0.2, help="server latency in section 2 (s)")
    parser.add_argument("--worker-concurrency", type=int, default=8, help="requests in flight a worker in section 2")
    parser.add_argument("--only", choices=[name for name, _, _ in SECTIONS], help="run this section only")
    args = parser.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as d:
        for name, measure, show in SECTIONS:
            if args.only and name != args.only:
                continue
            ok = show(measure(args, Path(d) / name), args) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

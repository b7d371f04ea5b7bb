"""Gateway throughput: 2,000 distinct calls at concurrency 32 to a server answering in 200 ms.

The loopback OpenAI-compatible server (tests/openai_server.py) runs as its own process; every
call goes through the real ``openai`` client, the limiter, the cache lookup and a committed
LLMCall row in a fresh SQLite workspace. The ideal is calls x latency / concurrency (12.5 s for
the defaults); the target is a wall time within 1.25x of it. A second pass over the same calls
shows the cache: all 2,000 answered from the store, none sent.

    .venv/bin/python benchmarks/gateway.py [--calls 2000] [--concurrency 32] [--latency 0.2] [--baseline]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import openai
from sqlmodel import select

from tqaforge.llm import Gateway, LLMSettings, Price, run
from tqaforge.schemas.records import LLMCall
from tqaforge.store import init_workspace

SERVER = Path(__file__).resolve().parents[1] / "tests" / "openai_server.py"
TARGET = 1.25


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc), 0 elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_server(latency: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, str(SERVER), "--port", "0", "--latency", str(latency), "--echo"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    if not line or line[0] != "ready":
        proc.kill()
        raise SystemExit("the loopback server did not start")
    return proc, line[1]


PROMPT = "Table: city | population\nOslo | 709000\nBergen | 291000\nQuestion {i}: which city is larger?"


def messages(i: int, tag: str = "") -> list[dict[str, str]]:
    return [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": tag + PROMPT.format(i=i)}]


async def make_calls(gw: Gateway, calls: int) -> float:
    start = time.perf_counter()
    await asyncio.gather(*(gw.complete(messages(i), purpose="benchmark", max_tokens=64) for i in range(calls)))
    return time.perf_counter() - start


async def bare_client(url: str, calls: int, concurrency: int) -> float:
    """The same calls with the bare openai client and a semaphore: no cache, no store, no limits."""
    client = openai.AsyncOpenAI(base_url=url, api_key="unused", max_retries=0)
    slots = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with slots:
            await client.chat.completions.create(model="bench-model", messages=messages(i, "bare "),  # type: ignore[arg-type]
                                                 max_tokens=64, temperature=0.0)

    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(calls)))
    elapsed = time.perf_counter() - start
    await client.close()
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--baseline", action="store_true",
                        help="also time the bare openai client (chat.completions.create + a semaphore)")
    parser.add_argument("--profile", type=Path, help="write a cProfile of the paid pass here")
    args = parser.parse_args()

    proc, url = start_server(args.latency)
    try:
        with tempfile.TemporaryDirectory() as d:
            os.environ.pop("TQAFORGE_DATABASE_URL", None)
            ws = init_workspace(Path(d) / "ws")
            settings = LLMSettings(model="bench-model", base_url=url, api_key="unused",
                                   concurrency=args.concurrency, prices={"bench-model": Price(0.15, 0.60)},
                                   max_cost=100.0)

            cpu: dict[str, float] = {}

            async def both() -> tuple[float, float, Gateway, Gateway]:
                server_cpu, own_cpu = cpu_seconds(proc.pid), time.process_time()
                async with Gateway(ws, settings) as paid_gw:
                    paid = await make_calls(paid_gw, args.calls)
                cpu["server"] = cpu_seconds(proc.pid) - server_cpu
                cpu["gateway"] = time.process_time() - own_cpu
                async with Gateway(ws, settings) as cached_gw:
                    cached = await make_calls(cached_gw, args.calls)
                return paid, cached, paid_gw, cached_gw

            if args.profile:
                import cProfile

                profiler = cProfile.Profile()
                profiler.enable()
                paid, cached, gw1, gw2 = run(both())
                profiler.disable()
                profiler.dump_stats(args.profile)
            else:
                paid, cached, gw1, gw2 = run(both())
            bare = run(bare_client(url, args.calls, args.concurrency)) if args.baseline else None
            with ws.session() as s:
                rows = len(s.exec(select(LLMCall.id).where(LLMCall.status == "ok")).all())
            ws.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)

    ideal = args.calls * args.latency / args.concurrency
    ratio = paid / ideal
    print(f"{args.calls} distinct calls, concurrency {args.concurrency}, server latency {args.latency * 1000:.0f} ms")
    print(f"paid pass   : {paid:7.2f} s  ({args.calls / paid:6.1f} calls/s), {gw1.paid_calls} paid, "
          f"{gw1.retries} retries, ${gw1.spent:.4f}")
    print(f"cpu (paid)  : gateway process {cpu['gateway']:.2f} s ({cpu['gateway'] / args.calls * 1000:.2f} ms a call), "
          f"server process {cpu['server']:.2f} s; {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    print(f"ideal       : {ideal:7.2f} s  (calls x latency / concurrency)")
    print(f"ratio       : {ratio:7.3f}x  target <= {TARGET}x: {'met' if ratio <= TARGET else 'NOT met'}")
    print(f"cached pass : {cached:7.2f} s  ({args.calls / cached:6.0f} calls/s), {gw2.cached_calls} from the store, "
          f"{gw2.paid_calls} sent")
    print(f"rows stored : {rows}")
    if bare is not None:
        print(f"bare client : {bare:7.2f} s  ratio {bare / ideal:.3f}x (openai chat.completions.create, a semaphore, "
              "nothing stored)")
    return 0 if ratio <= TARGET and rows == args.calls and gw2.paid_calls == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

"""Throughput of the sandbox: warm workers (fork per program) against a cold interpreter per program.

The same pandas programs (read table.csv, filter, group, sum, print ``Final Answer:``) run through
``Sandbox(workers=2)`` and through a fresh ``python`` process per program with the same limits
(rlimits, empty environment, a scratch directory holding table.csv), two at a time, in one run.
Targets from the sandbox issue: warm >= 20x cold and >= 50 programs/s on a 2-core machine.

The hardening issue added three layers (a pid namespace per worker, its own mount view, a memory
cgroup for the whole program) and asked that they cost no more than 10%: the same programs also run
through a pool with those three layers switched off, in alternating batches (so that a load on the
machine falls on both alike), and the ratio is printed.

    .venv/bin/python benchmarks/sandbox.py [--programs 300]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from tqaforge.sandbox import Limits, Outcome, Sandbox

TABLE = "city,year,sales\n" + "".join(f"c{i % 7},{2000 + i % 5},{i * 3 % 101}\n" for i in range(200))


def program(i: int) -> str:
    return (
        "import pandas as pd\n"
        "df = pd.read_csv('table.csv')\n"
        f"df = df[df['sales'] > {i % 50}]\n"
        "totals = df.groupby('city')['sales'].sum()\n"
        "print(f'Final Answer: {totals.idxmax()}, {totals.max()}')\n"
    )


def cold_run(code: str, limits: Limits) -> bool:
    scratch = tempfile.mkdtemp(prefix="tqaforge-cold-")
    try:
        with open(os.path.join(scratch, "table.csv"), "w") as fh:
            fh.write(TABLE)

        def limit() -> None:
            cpu = int(limits.cpu_seconds)
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
            resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb * 2 ** 20 + 2 ** 30,) * 2)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_mb * 2 ** 20,) * 2)
            resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files,) * 2)
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

        proc = subprocess.run([sys.executable, "-I", "-c", code], cwd=scratch, env={}, capture_output=True,
                              timeout=limits.wall_seconds, preexec_fn=limit)
        return proc.returncode == 0 and proc.stdout.startswith(b"Final Answer:")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--programs", type=int, default=300)
    parser.add_argument("--cold-programs", type=int, default=None, help="cold runs (default: same as --programs)")
    args = parser.parse_args()
    codes = [program(i) for i in range(args.programs)]
    cold_codes = codes[: args.cold_programs] if args.cold_programs else codes
    limits = Limits()

    start = time.perf_counter()
    with Sandbox(workers=2, limits=limits) as box:
        startup = time.perf_counter() - start
        start = time.perf_counter()
        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(lambda c: box.run(c, TABLE), codes))
        warm = time.perf_counter() - start
        isolation = results[0].isolation
    assert all(r.outcome is Outcome.OK for r in results), [r for r in results if r.outcome is not Outcome.OK][:1]

    # The three layers of the hardening issue, on and off, in alternating batches of 50.
    timings = {"all layers": 0.0, "without pidns, fs-view, cgroup": 0.0}
    with Sandbox(workers=2, limits=limits) as full, \
            Sandbox(workers=2, limits=limits, skip_layers=("pidns", "fs-view", "cgroup")) as before:
        pools = {"all layers": full, "without pidns, fs-view, cgroup": before}
        with ThreadPoolExecutor(2) as pool:
            for batch in range(0, len(codes), 50):
                for name, box_ in pools.items():
                    begin = time.perf_counter()
                    outcomes = list(pool.map(lambda c, b=box_: b.run(c, TABLE).outcome, codes[batch:batch + 50]))
                    timings[name] += time.perf_counter() - begin
                    assert all(o is Outcome.OK for o in outcomes), outcomes

    start = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        oks = list(pool.map(lambda c: cold_run(c, limits), cold_codes))
    cold = time.perf_counter() - start
    assert all(oks)

    warm_rate, cold_rate = len(codes) / warm, len(cold_codes) / cold
    print(f"{os.cpu_count()} CPUs; isolation: {', '.join(isolation)}")
    print(f"  pool start-up (2 workers)          {startup:6.2f} s")
    print(f"  warm pool, 2 workers   {len(codes):5} programs  {warm:6.2f} s  {warm_rate:7.1f} programs/s  (target >= 50)")
    print(f"  cold python, 2 at once {len(cold_codes):5} programs  {cold:6.2f} s  {cold_rate:7.1f} programs/s")
    print(f"  ratio warm / cold      {warm_rate / cold_rate:6.1f}x  (target >= 20x)")
    for name, seconds in timings.items():
        print(f"  {name:31} {len(codes) / seconds:7.1f} programs/s  (alternating batches)")
    cost = timings["all layers"] / timings["without pidns, fs-view, cgroup"]
    print(f"  cost of the three layers        {cost:6.2f}x the time  (target <= 1.10x)")


if __name__ == "__main__":
    main()

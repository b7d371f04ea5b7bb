"""Throughput and CPU of the sandbox: the pool of this checkout against the pool of a baseline (main).

The same pandas programs (read table.csv, filter, group, sum, print ``Final Answer:``) run through
the sandbox of this checkout ("new") and through the sandbox of a baseline git revision ("old",
``git archive`` of ``--baseline`` into a temporary directory), each pool in its own host process
(two packages named ``tqaforge`` cannot share one interpreter), in alternating batches so that a
load on the machine falls on both alike. A few chart programs (``chart_type="bar"``) run in every
round too. Both pools have one worker per usable core (``os.sched_getaffinity``).

CPU per program is everything the pool spends: the host process (``os.times``) and every process
under its workers (the workers, the zygotes and, through the ``cutime``/``cstime`` of whoever
reaped them, every program), read from ``/proc/<pid>/stat`` before and after each batch, split into
user and kernel (system) time. The kernel samples that split at each clock tick, so it holds over
many programs, not for one. The quiet-machine estimate is cores / CPU per program.

Then, as before, a cold ``python`` process per program (fresh interpreter, rlimits, empty
environment, scratch directory), two at a time, against the warm pool of this checkout.

Targets (issue 26 item 3): >= 100 programs/s on 2 cores, isolation unchanged or stronger; warm >= 20x cold.

    .venv/bin/python benchmarks/sandbox.py [--programs 600] [--baseline main]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLE = "city,year,sales\n" + "".join(f"c{i % 7},{2000 + i % 5},{i * 3 % 101}\n" for i in range(200))
BATCH = 50
CHARTS_PER_BATCH = 5


def program(i: int) -> str:
    return (
        "import pandas as pd\n"
        "df = pd.read_csv('table.csv')\n"
        f"df = df[df['sales'] > {i % 50}]\n"
        "totals = df.groupby('city')['sales'].sum()\n"
        "print(f'Final Answer: {totals.idxmax()}, {totals.max()}')\n"
    )


def chart_program(i: int) -> str:
    return (
        "import pandas as pd\n"
        "import matplotlib.pyplot as plt\n"
        "df = pd.read_csv('table.csv')\n"
        f"totals = df[df['sales'] > {i % 50}].groupby('city')['sales'].sum()\n"
        "plt.bar(totals.index, totals.values)\n"
        "plt.show()\n"
    )


# --- one pool in its own process ----------------------------------------------------------------------


def _stat(pid: int) -> tuple[float, float] | None:
    """(user, system) seconds of ``pid`` and of the children it has reaped."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    tick = os.sysconf("SC_CLK_TCK")
    utime, stime, cutime, cstime = (int(x) / tick for x in fields[11:15])
    return utime + cutime, stime + cstime


def _tree(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as fh:
                    todo += [int(c) for c in fh.read().split()]
        except OSError:
            continue
    return found


def _pool_cpu(roots: list[int]) -> tuple[float, float]:
    user = system = 0.0
    for root in roots:
        for pid in _tree(root):
            got = _stat(pid)
            if got is not None:
                user += got[0]
                system += got[1]
    return user, system


def serve(root: str) -> None:
    """Host one pool (of the tqaforge under ``root``) and run the batches the driver asks for."""
    sys.path.insert(0, root)
    from tqaforge.sandbox import Outcome, Sandbox

    workers = len(os.sched_getaffinity(0))
    out = sys.stdout
    with Sandbox(workers=workers) as box, ThreadPoolExecutor(workers) as pool:
        roots = [w.proc.pid for w in box._all]
        print(json.dumps({"isolation": list(box.isolation), "workers": workers}), file=out, flush=True)
        for line in sys.stdin:
            first, count, charts = json.loads(line)
            jobs = [(program(i), None) for i in range(first, first + count)]
            jobs += [(chart_program(i), "bar") for i in range(first, first + charts)]
            host0, tree0 = os.times(), _pool_cpu(roots)
            start = time.perf_counter()
            results = list(pool.map(lambda job: box.run(job[0], TABLE, chart_type=job[1]), jobs))
            seconds = time.perf_counter() - start
            host1, tree1 = os.times(), _pool_cpu(roots)
            bad = [r for r in results if r.outcome is not Outcome.OK or (r.chart is None) != (r.stdout.startswith("Final"))]
            print(json.dumps({
                "seconds": seconds, "user": host1.user - host0.user + tree1[0] - tree0[0],
                "system": host1.system - host0.system + tree1[1] - tree0[1], "bad": [str(r) for r in bad[:1]],
            }), file=out, flush=True)


class _Server:
    def __init__(self, name: str, root: str) -> None:
        self.name = name
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve", root], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, cwd=tempfile.gettempdir())
        hello = self._read()
        self.isolation, self.workers = hello["isolation"], hello["workers"]
        self.totals = {"pandas": [0, 0.0, 0.0, 0.0], "charts": [0, 0.0, 0.0, 0.0]}  # programs, seconds, user, system

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"{self.name}: the pool process ended")
        return dict(json.loads(line))

    def batch(self, first: int, count: int, charts: int, kind: str | None) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps([first, count, charts]) + "\n")
        self.proc.stdin.flush()
        got = self._read()
        if got["bad"]:
            raise SystemExit(f"{self.name}: a program failed: {got['bad'][0]}")
        if kind is not None:
            row = self.totals[kind]
            row[0] += count + charts
            row[1] += got["seconds"]
            row[2] += got["user"]
            row[3] += got["system"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def _baseline(ref: str, into: str) -> str:
    archive = subprocess.run(["git", "-C", ROOT, "archive", ref, "tqaforge"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    return into


# --- the cold baseline ----------------------------------------------------------------------------------


def cold_run(code: str) -> bool:
    scratch = tempfile.mkdtemp(prefix="tqaforge-cold-")
    try:
        with open(os.path.join(scratch, "table.csv"), "w") as fh:
            fh.write(TABLE)

        def limit() -> None:
            resource.setrlimit(resource.RLIMIT_CPU, (10, 11))
            resource.setrlimit(resource.RLIMIT_AS, (1024 * 2 ** 20 + 2 ** 30,) * 2)
            resource.setrlimit(resource.RLIMIT_FSIZE, (16 * 2 ** 20,) * 2)
            resource.setrlimit(resource.RLIMIT_NOFILE, (64,) * 2)
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

        proc = subprocess.run([sys.executable, "-I", "-c", code], cwd=scratch, env={}, capture_output=True,
                              timeout=15, preexec_fn=limit)
        return proc.returncode == 0 and proc.stdout.startswith(b"Final Answer:")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--programs", type=int, default=600, help="pandas programs through each pool")
    parser.add_argument("--baseline", default="main", help="git revision of the old pool (default: main)")
    parser.add_argument("--cold-programs", type=int, default=40, help="cold python runs (0: none)")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return

    cores = len(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory(prefix="tqaforge-bench-old-") as old_root:
        servers = [_Server("old", _baseline(args.baseline, old_root)), _Server("new", ROOT)]
        try:
            for server in servers:  # warm: the first programs of a worker pay for its first page faults
                server.batch(10_000, 2 * server.workers, CHARTS_PER_BATCH, None)
            for first in range(0, args.programs, BATCH):
                count = min(BATCH, args.programs - first)
                order = servers if (first // BATCH) % 2 == 0 else servers[::-1]
                for server in order:
                    server.batch(first, count, 0, "pandas")
                for server in order:
                    server.batch(first, 0, CHARTS_PER_BATCH, "charts")
        finally:
            for server in servers:
                server.close()

    old, new = servers
    print(f"{cores} usable cores, {new.workers} workers a pool; isolation (new): {', '.join(new.isolation)}")
    if old.isolation != new.isolation:
        print(f"  isolation (old): {', '.join(old.isolation)}")
    print(f"  {'':24} {'programs':>8} {'programs/s':>10} {'CPU ms/program':>15} {'user':>6} {'kernel':>6} {'quiet estimate':>15}")
    rates: dict[tuple[str, str], float] = {}
    cpus: dict[tuple[str, str], float] = {}
    for kind in ("pandas", "charts"):
        for server in servers:
            n, seconds, user, system = server.totals[kind]
            rate = n / seconds
            cpu = (user + system) / n
            rates[(server.name, kind)], cpus[(server.name, kind)] = rate, cpu
            print(f"  {server.name + ' pool, ' + kind + ' programs':24} {n:8} {rate:10.1f} {cpu * 1e3:15.1f} "
                  f"{user / n * 1e3:6.1f} {system / n * 1e3:6.1f} {cores / cpu:11.1f} /s")
    for kind in ("pandas", "charts"):
        print(f"  new / old, {kind:7}   {rates[('new', kind)] / rates[('old', kind)]:5.2f}x programs/s, "
              f"{cpus[('new', kind)] / cpus[('old', kind)]:5.2f}x the CPU per program")
    print(f"  target: >= 100 programs/s on 2 cores (<= {2 / 100 * 1e3:.0f} ms CPU a program); "
          f"new: {rates[('new', 'pandas')]:.1f}/s here, {cores / cpus[('new', 'pandas')]:.1f}/s on a quiet machine")

    if args.cold_programs:
        start = time.perf_counter()
        with ThreadPoolExecutor(2) as pool:
            oks = list(pool.map(cold_run, [program(i) for i in range(args.cold_programs)]))
        cold = args.cold_programs / (time.perf_counter() - start)
        assert all(oks)
        print(f"  cold python, 2 at once {args.cold_programs:5} programs {cold:7.1f} programs/s; "
              f"warm (new) / cold {rates[('new', 'pandas')] / cold:5.1f}x  (target >= 20x)")


if __name__ == "__main__":
    main()

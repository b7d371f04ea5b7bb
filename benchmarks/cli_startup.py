"""Start-up cost of the command line against Typer and Rich alone, measured in the same run.

Two baselines: a Python process that only imports Typer and Rich's console (what any Typer CLI
pays before it does anything), and a one-command Typer app that parses an option and prints a
Rich table (what any Typer CLI pays to run a command: Typer coerces options through pydantic).
Targets: ``tqaforge --help`` within 2.5x of the first (the hardening issue), and any command that
opens a workspace (``tqaforge status``, on a real workspace) under 0.4 s of CPU (issue 26).

Each case runs as its own process; the CPU figure is that child's user + system time (from
``wait4``), which another process on the machine disturbs far less than the wall clock. The
workspace is made once (``tqaforge init`` and ``tables import`` of the TableBench test set, or
of the bundled sample when the data set is absent), or given with ``--workspace``.

    .venv/bin/python benchmarks/cli_startup.py [--repeat 15] [--workspace DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TQA = [sys.executable, "-m", "tqaforge"]
TABLEBENCH = Path(__file__).resolve().parents[2] / "shared" / "data" / "tablebench" / "TableBench.jsonl"
SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample" / "tablebench_sample.jsonl"
BASELINE = "baseline: import typer, rich.console"
TYPER_APP = """\
import typer
from rich.console import Console
from rich.table import Table
app = typer.Typer(add_completion=False)
@app.command()
def status(as_json: bool = typer.Option(False, "--json")) -> None:
    t = Table("stage", "total")
    t.add_row("tables", "1")
    Console().print(t)
app()
"""
#: The CPU target for a command that opens a workspace (issue 26), in seconds.
STATUS_TARGET_S = 0.4


def cases(workspace: Path) -> dict[str, list[str]]:
    ws = ["-w", str(workspace)]
    return {
        BASELINE: [sys.executable, "-c", "import typer, rich.console"],
        "baseline: a one-command Typer app": [sys.executable, "-c", TYPER_APP],
        "tqaforge --help": [*TQA, "--help"],
        "tqaforge tables import --help": [*TQA, "tables", "import", "--help"],
        "tqaforge variants kinds": [*TQA, "variants", "kinds"],
        "tqaforge status": [*TQA, "status", *ws],
        "tqaforge status --json": [*TQA, "status", "--json", *ws],
        "tqaforge tables list (records)": [*TQA, "tables", "list", *ws],
    }


def run_once(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one run of ``cmd``."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    errors = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stderr.close()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {errors.decode(errors='replace')}")
    return wall, usage.ru_utime + usage.ru_stime


def measure(cmd: list[str], repeat: int) -> tuple[float, float]:
    """Median wall and median CPU seconds of ``repeat`` runs (after one warm-up run for the file cache)."""
    run_once(cmd)
    runs = [run_once(cmd) for _ in range(repeat)]
    return statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)


def make_workspace(root: Path) -> Path:
    """A workspace with the TableBench test set (or the bundled sample) imported, through the CLI."""
    data = TABLEBENCH if TABLEBENCH.exists() else SAMPLE
    env = {k: v for k, v in os.environ.items() if k not in ("TQAFORGE_DATABASE_URL", "TQAFORGE_WORKSPACE")}
    subprocess.run([*TQA, "init", str(root)], check=True, capture_output=True, env=env)
    subprocess.run([*TQA, "-w", str(root), "tables", "import", str(data)], check=True, capture_output=True, env=env)
    print(f"workspace: {root} (imported {data.name})")
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--workspace", type=Path, help="an existing workspace (default: a new one, imported)")
    args = parser.parse_args()
    os.environ.pop("TQAFORGE_DATABASE_URL", None)
    with tempfile.TemporaryDirectory() as tmp:
        workspace = args.workspace or make_workspace(Path(tmp) / "ws")
        results = {name: measure(cmd, args.repeat) for name, cmd in cases(workspace).items()}
    base_wall, base_cpu = results[BASELINE]
    print(f"median of {args.repeat} runs; ratios against the first baseline "
          f"(targets: --help <= 2.5x, status <= {STATUS_TARGET_S} s CPU)")
    print(f"  {'':40} {'wall':>8} {'':>6}  {'CPU':>8} {'':>6}")
    for name, (wall, cpu) in results.items():
        print(f"  {name:40} {wall * 1000:5.0f} ms {wall / base_wall:5.2f}x  {cpu * 1000:5.0f} ms {cpu / base_cpu:5.2f}x")
    status_cpu = results["tqaforge status"][1]
    verdict = "meets" if status_cpu <= STATUS_TARGET_S else "MISSES"
    print(f"tqaforge status: {status_cpu:.3f} s CPU, {verdict} the target of {STATUS_TARGET_S} s")


if __name__ == "__main__":
    main()

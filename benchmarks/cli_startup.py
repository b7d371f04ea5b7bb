"""Start-up time of the command line against Typer and Rich alone, measured in the same run.

The baseline is a Python process that only imports Typer and Rich's console (what any Typer CLI
pays); the target from the hardening issue is ``tqaforge --help`` within 2.5x of it. Also timed:
a subcommand's ``--help`` and ``variants kinds`` (a command that runs without a workspace).

    .venv/bin/python benchmarks/cli_startup.py [--repeat 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

CASES: dict[str, list[str]] = {
    "baseline: import typer, rich.console": [sys.executable, "-c", "import typer, rich.console"],
    "tqaforge --help": [sys.executable, "-m", "tqaforge", "--help"],
    "tqaforge tables import --help": [sys.executable, "-m", "tqaforge", "tables", "import", "--help"],
    "tqaforge variants kinds": [sys.executable, "-m", "tqaforge", "variants", "kinds"],
}


def median_seconds(cmd: list[str], repeat: int) -> float:
    """Median wall time of ``repeat`` runs of ``cmd`` (after one warm-up run for the file cache)."""
    subprocess.run(cmd, capture_output=True, check=True)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    results = {name: median_seconds(cmd, args.repeat) for name, cmd in CASES.items()}
    base = results["baseline: import typer, rich.console"]
    print(f"median of {args.repeat} runs; ratio against the baseline (target for --help: <= 2.5x)")
    for name, seconds in results.items():
        print(f"  {name:40} {seconds * 1000:7.0f} ms  {seconds / base:5.2f}x")


if __name__ == "__main__":
    main()

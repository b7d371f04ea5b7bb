"""Browser tests under load (issue 29): every browser test file, ``--rounds`` times in a row (3 by
default; the tests of those files that drive Chromium), while one busy process per core burns the CPU (``stress-ng --cpu N`` when installed,
else Python busy loops). Prints pass/fail, the failed tests and the time of each round; exits 1
when any round failed.

    .venv/bin/python benchmarks/browser_stress.py [--rounds 3] [--load N] [--files tests/test_app_browser.py ...]

A browser test file is a test module that asks for the ``chromium`` fixture. ``--load 0`` runs
without the burner (the unloaded time, for comparison).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parents[1]


def browser_test_files() -> list[Path]:
    """The test modules that drive Chromium: a test or fixture of theirs asks for ``chromium``."""
    return [p for p in sorted((REPO / "tests").glob("test_*.py"))
            if re.search(r"def \w+\([^)]*\bchromium\b", p.read_text(encoding="utf-8"))]


def _burn() -> None:
    while True:  # one core busy until terminated
        pass


@contextmanager
def cpu_load(processes: int) -> Iterator[str]:
    """``processes`` busy processes for the block; yields how the load is made."""
    if processes <= 0:
        yield "none"
        return
    stress = shutil.which("stress-ng")
    if stress:
        proc = subprocess.Popen([stress, "--cpu", str(processes), "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            yield f"stress-ng --cpu {processes}"
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        return
    burners = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(processes)]
    for burner in burners:
        burner.start()
    try:
        yield f"{processes} Python busy-loop processes"
    finally:
        for burner in burners:
            burner.terminate()
        for burner in burners:
            burner.join(timeout=30)


def run_round(files: list[Path], log: Path) -> tuple[bool, list[str], float, str]:
    """One pytest run of ``files``: (passed, failed test ids, seconds, pytest's summary line)."""
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as out:
        # -p _browser_only: the browser tests of each file (test_demo.py, for one, has others too).
        code = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "_browser_only", "-rfE",
                               *map(str, files)],
                              cwd=REPO, env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "benchmarks")])},
                              stdout=out, stderr=subprocess.STDOUT).returncode
    seconds = time.monotonic() - started
    text = log.read_text(encoding="utf-8")
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", text, flags=re.M)
    summary = next((line.strip("= ") for line in reversed(text.splitlines()) if re.search(r"\d+ (passed|failed|error)", line)), "")
    return code == 0, failed, seconds, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--load", type=int, default=os.cpu_count() or 1, help="busy processes (default: one per core)")
    parser.add_argument("--files", type=Path, nargs="*", help="test files (default: every browser test file)")
    parser.add_argument("--logs", type=Path, default=Path("browser-stress-logs"), help="each round's pytest output")
    args = parser.parse_args()
    files = [p.resolve() for p in args.files] if args.files else browser_test_files()
    if not files:
        raise SystemExit("no browser test files found")
    args.logs.mkdir(parents=True, exist_ok=True)
    print(f"{len(files)} browser test files: {' '.join(p.name for p in files)}")
    failures = 0
    total = time.monotonic()
    with cpu_load(args.load) as load:
        print(f"load: {load} on {os.cpu_count()} cores", flush=True)
        for n in range(1, args.rounds + 1):
            ok, failed, seconds, summary = run_round(files, args.logs / f"round-{n}.log")
            failures += not ok
            print(f"round {n}: {'pass' if ok else 'FAIL'} in {seconds:.0f} s ({summary})"
                  + (f"; failed: {', '.join(failed)}" if failed else ""), flush=True)
    print(f"{args.rounds} rounds, {failures} failed, {time.monotonic() - total:.0f} s in all; logs in {args.logs}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

"""Peak memory of importing a large CSV, against pandas reading the same file, in the same run.

Generates a CSV of about ``--mb`` megabytes (numbers and short words, 8 columns), then measures
the peak resident memory (``ru_maxrss`` of a child process) of:

* ``python -c "import tqaforge..."``: the interpreter with tqaforge's imports, the floor;
* ``pandas.read_csv(FILE)``: what a hand-written script would hold (baseline);
* ``tqaforge tables import FILE`` into a fresh SQLite workspace.

The hardening issue's target: no longer 17x the file (3.5 GB for 200 MB).

    .venv/bin/python benchmarks/import_memory.py [--mb 50]
"""

from __future__ import annotations

import argparse
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_WORDS = ["alpha", "beta", "gamma", "delta", "north", "south", "east", "west", "river", "hill"]


def write_csv(path: Path, megabytes: float, seed: int = 0) -> int:
    """A CSV of about ``megabytes`` MB; returns its size in bytes."""
    rng = random.Random(seed)
    target = int(megabytes * 1_000_000)
    with path.open("w", encoding="utf-8") as fh:
        fh.write("id,name,region,year,count,share,amount,note\n")
        written, i = 0, 0
        while written < target:
            line = (f"{i},{rng.choice(_WORDS)} {i % 997},{rng.choice(_WORDS)},{1900 + i % 120},{rng.randrange(10**6)},"
                    f"{rng.random():.4f},{rng.uniform(-1e6, 1e6):.2f},{rng.choice(_WORDS)}\n")
            fh.write(line)
            written += len(line)
            i += 1
    return path.stat().st_size


def peak_of(cmd: list[str]) -> tuple[float, float]:
    """(peak RSS in MB, wall seconds) of running ``cmd`` as a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if peak <= before:
        raise RuntimeError("ru_maxrss did not rise: run each measurement in a fresh benchmark process")
    return peak / 1024, seconds


def measure(kind: str, csv: Path, workdir: Path) -> tuple[float, float]:
    """One measurement in a fresh process of this script (ru_maxrss of children is a maximum)."""
    out = subprocess.run([sys.executable, __file__, "--measure", kind, str(csv), str(workdir)],
                         check=True, capture_output=True, text=True).stdout.split()
    return float(out[0]), float(out[1])


def _measure_one(kind: str, csv: Path, workdir: Path) -> None:
    py = sys.executable
    if kind == "floor":
        cmd = [py, "-c", "import tqaforge.ingest, tqaforge.store"]
    elif kind == "pandas":
        cmd = [py, "-c", f"import pandas; pandas.read_csv({str(csv)!r}, dtype=str)"]
    else:
        ws = workdir / "ws"
        subprocess.run([py, "-m", "tqaforge", "init", str(ws)], check=True, capture_output=True)
        cmd = [py, "-m", "tqaforge", "-w", str(ws), "tables", "import", str(csv)]
    mb, seconds = peak_of(cmd)
    print(f"{mb:.1f} {seconds:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=50.0)
    parser.add_argument("--measure", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        _measure_one(args.measure[0], Path(args.measure[1]), Path(args.measure[2]))
        return
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "big.csv"
        size_mb = write_csv(csv, args.mb) / 1_000_000
        results = {kind: measure(kind, csv, Path(tmp)) for kind in ("floor", "pandas", "tqaforge")}
    floor = results["floor"][0]
    print(f"CSV of {size_mb:.1f} MB; peak resident memory of a child process (MB), and above the floor")
    for kind, label in (("floor", "interpreter + tqaforge imports (floor)"),
                        ("pandas", "baseline: pandas.read_csv(dtype=str)"),
                        ("tqaforge", "tqaforge tables import (SQLite)")):
        mb, seconds = results[kind]
        extra = mb - floor
        print(f"  {label:42} {mb:8.1f} MB  {extra:8.1f} MB above floor = {extra / size_mb:5.2f}x the file  {seconds:6.1f} s")
    ratio = (results["tqaforge"][0] - floor) / max(results["pandas"][0] - floor, 1e-9)
    print(f"  tqaforge / pandas (above floor): {ratio:.2f}x")


if __name__ == "__main__":
    main()

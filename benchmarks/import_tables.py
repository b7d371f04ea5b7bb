"""Import throughput for the TableBench test set (886 questions over its tables).

Prints tables/s and questions/s for tqaforge's import into a fresh SQLite workspace, against a
baseline measured in the same run: pandas reading the same JSONL and writing the tables with
``DataFrame.to_sql`` (what a hand-rolled script would do, with no dedup, no validation).

    .venv/bin/python benchmarks/import_tables.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from tqaforge.ingest import import_paths
from tqaforge.store import init_workspace

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "tablebench" / "TableBench.jsonl"


def run_tqaforge(path: Path) -> tuple[float, int, int]:
    with tempfile.TemporaryDirectory() as d:
        os.environ.pop("TQAFORGE_DATABASE_URL", None)
        ws = init_workspace(Path(d) / "ws")
        start = time.perf_counter()
        summary = import_paths(ws, [path])
        elapsed = time.perf_counter() - start
        ws.close()
        assert not summary.failed, summary.failed[0].error
        return elapsed, summary.total("tables_new"), summary.total("questions_new")


def run_pandas_baseline(path: Path) -> float:
    """Read with pandas, store one row per question with the table as JSON text."""
    with tempfile.TemporaryDirectory() as d:
        start = time.perf_counter()
        df = pd.read_json(path, lines=True)
        df["table"] = df["table"].map(json.dumps)
        con = sqlite3.connect(Path(d) / "b.db")
        df.to_sql("items", con, index=False)
        con.commit()
        con.close()
        return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    if not args.data.exists():
        print(f"skipped: {args.data} not found (needs ../shared/data)")
        return 0
    ours = [run_tqaforge(args.data) for _ in range(args.repeat)]
    base = [run_pandas_baseline(args.data) for _ in range(args.repeat)]
    t_ours = statistics.median(x[0] for x in ours)
    t_base = statistics.median(base)
    n_tables, n_questions = ours[0][1], ours[0][2]
    print(f"TableBench.jsonl: {n_questions} questions over {n_tables} distinct tables (median of {args.repeat})")
    print(f"tqaforge import      : {t_ours:6.3f} s  {n_tables / t_ours:8.0f} tables/s  {n_questions / t_ours:8.0f} questions/s")
    print(f"baseline pandas+to_sql: {t_base:6.3f} s  {n_questions / t_base:8.0f} rows/s (no dedup, no checks)")
    print(f"ratio tqaforge / baseline time: {t_ours / t_base:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

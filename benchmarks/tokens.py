"""Token counts of the TableBench test set (886 questions over 586 distinct tables).

Imports TableBench into a fresh SQLite workspace, then times :func:`tqaforge.queries.table_token_counts`
per serialization (cold: every table loaded, serialized and counted; warm: from the process's
cache), the tokenizer's load, and growing the largest table to 40,000 tokens.

    .venv/bin/python benchmarks/tokens.py [--formats markdown,html,json]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from tqaforge import queries
from tqaforge.ingest import grow_stored_table, import_paths
from tqaforge.store import init_workspace
from tqaforge.tables import tokens
from tqaforge.tables.grow import GrowOptions

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "tablebench" / "TableBench.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--formats", default="markdown,html,json,csv")
    args = parser.parse_args()
    start = time.perf_counter()
    tokens.encoding(tokens.DEFAULT_ENCODING)
    print(f"tokenizer load ({tokens.DEFAULT_ENCODING}): {time.perf_counter() - start:.2f} s")
    with tempfile.TemporaryDirectory() as d:
        os.environ.pop("TQAFORGE_DATABASE_URL", None)
        ws = init_workspace(Path(d) / "ws")
        summary = import_paths(ws, [DATA])
        print(f"imported {summary.total('tables_new')} tables, {summary.total('questions_new')} questions")
        for fmt in args.formats.split(","):
            start = time.perf_counter()
            counts = queries.table_token_counts(ws, serialization=fmt)
            cold = time.perf_counter() - start
            start = time.perf_counter()
            queries.table_token_counts(ws, serialization=fmt)
            warm = time.perf_counter() - start
            print(f"{fmt:>10}: {len(counts)} tables in {cold:.2f} s cold, {warm * 1000:.0f} ms warm; "
                  f"largest {max(counts.values())} tokens")
        counts = queries.table_token_counts(ws)
        largest = max(counts, key=counts.__getitem__)
        start = time.perf_counter()
        outcome = grow_stored_table(ws, largest, GrowOptions(target_tokens=40_000, seed=0))
        print(f"grow {largest[:12]} ({outcome.source_tokens} tokens) to {outcome.tokens} tokens, {outcome.rows} rows: "
              f"{time.perf_counter() - start:.2f} s")
        ws.close()


if __name__ == "__main__":
    main()

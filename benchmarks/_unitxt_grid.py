"""The ToRR variant grid built with unitxt's own table serializers and augmentors.

Run by ``benchmarks/variants.py`` under the separate ``.venv-bench`` interpreter (unitxt pins
its own dependencies, so it never goes into ``.venv``); it does not import tqaforge. It reads
the tables that variants.py hands it (JSON Lines of ``{"header": [...], "rows": [[...]]}``,
cells already strings, exactly the tables tqaforge's side works on) and builds the same
5 conditions x 7 serializations per table, with the classes the ToRR recipes in unitxt's
catalog use (``recipes.torr.*``: ``augmentors.table.{shuffle_rows, shuffle_cols, transpose,
insert_empty_rows[times=2]}``; ``serializers.table.{html, json, markdown, indexed_row_major,
df, concat}``, and for CSV ``serializer: null``, i.e. the default ``TableSerializer``).

The calls are the cheapest legitimate ones, to be fair to unitxt: no recipe, stream or
pipeline, objects built once outside the timing, augmentors through ``process_value`` and the
``SerializeTable`` subclasses through ``serialize_table`` (their ``serialize`` only adds a deep
copy, needed when their own shuffle flags are set, which they are not here). ``--entry
serialize`` times the public ``serialize(value, instance)`` instead.

    .venv-bench/bin/python benchmarks/_unitxt_grid.py TABLES.jsonl --repeat 3 --out result.json

``--serve`` instead takes one command a line on stdin (``grid``: one timed pass; ``breakdown``;
``describe``) and answers each with a line ``RESULT <json>``: variants.py uses it to alternate
unitxt's passes with its own, so that a change in the machine's load hits both sides alike.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from typing import Any

from unitxt.serializers import TableSerializer
from unitxt.struct_data_operators import (
    InsertEmptyTableRows,
    SerializeTable,
    SerializeTableAsConcatenation,
    SerializeTableAsDFLoader,
    SerializeTableAsHTML,
    SerializeTableAsIndexedRowMajor,
    SerializeTableAsJson,
    SerializeTableAsMarkdown,
    ShuffleTableColumns,
    ShuffleTableRows,
    TransposeTable,
)

SEED = 0

# Same names and order as tqaforge's TORR_SERIALIZATIONS / ("none",) + TORR_PERTURBATIONS.
SERIALIZERS: dict[str, Any] = {
    "html": SerializeTableAsHTML(),
    "csv": TableSerializer(),
    "json": SerializeTableAsJson(),
    "markdown": SerializeTableAsMarkdown(),
    "indexed_row_major": SerializeTableAsIndexedRowMajor(),
    "dataframe": SerializeTableAsDFLoader(),
    "concatenation": SerializeTableAsConcatenation(),
}
AUGMENTORS: dict[str, Any] = {
    "none": None,
    "shuffle_rows": ShuffleTableRows(),
    "shuffle_columns": ShuffleTableColumns(),
    "transpose": TransposeTable(),
    # The ToRR recipes say insert_empty_rows[times=2]; the class's default is times=0 (a no-op).
    # It draws positions from the global `random` module (seeded below) and inserts into the
    # table it is given, so it runs last for each table, on a fresh copy made outside the timing.
    "insert_empty_rows": InsertEmptyTableRows(times=2),
}
for _aug in AUGMENTORS.values():
    if _aug is not None and hasattr(_aug, "seed"):
        _aug.seed = SEED


def serializer_calls(entry: str) -> dict[str, Callable[[dict], str]]:
    calls: dict[str, Callable[[dict], str]] = {}
    for name, ser in SERIALIZERS.items():
        if entry == "serialize_table" and isinstance(ser, SerializeTable):
            calls[name] = ser.serialize_table
        else:
            calls[name] = lambda t, _s=ser: _s.serialize(t, {})
    return calls


def augmentor_calls() -> dict[str, Callable[[dict], dict]]:
    return {name: (aug.process_value if aug is not None else (lambda t: t)) for name, aug in AUGMENTORS.items()}


def fresh(tables: list[dict]) -> list[dict]:
    return [{"header": list(t["header"]), "rows": [list(r) for r in t["rows"]]} for t in tables]


def run_grid(tables: list[dict], entry: str) -> tuple[float, int, int]:
    """One timed pass over the whole grid: (seconds, strings made, characters)."""
    sers = list(serializer_calls(entry).values())
    augs = list(augmentor_calls().values())
    work = fresh(tables)  # untimed: insert_empty_rows writes into its input
    random.seed(SEED)
    n = chars = 0
    start, cpu = time.perf_counter(), time.process_time()
    for table in work:
        for aug in augs:
            variant = aug(table)
            for ser in sers:
                chars += len(ser(variant))
                n += 1
    global LAST_CPU
    LAST_CPU = time.process_time() - cpu
    return time.perf_counter() - start, n, chars


LAST_CPU = 0.0  # CPU seconds of the last run_grid (the steadier figure on a shared machine)


def breakdown(tables: list[dict], entry: str) -> dict[str, Any]:
    """One pass timing each augmentor over all tables, then each serializer over all of that
    augmentor's tables, in CPU time (the steadier figure on a shared machine; one clock
    reading per part and table set, not per call), plus characters per cell."""
    sers = serializer_calls(entry)
    augs = augmentor_calls()
    random.seed(SEED)
    t_aug = dict.fromkeys(augs, 0.0)
    t_ser = dict.fromkeys(sers, 0.0)
    chars = {a: dict.fromkeys(sers, 0) for a in augs}
    clock = time.process_time
    for aname, aug in augs.items():
        work = fresh(tables)  # untimed: insert_empty_rows writes into its input
        t0 = clock()
        variants = [aug(table) for table in work]
        t_aug[aname] += clock() - t0
        for sname, ser in sers.items():
            t0 = clock()
            texts = [ser(variant) for variant in variants]
            t_ser[sname] += clock() - t0
            chars[aname][sname] += sum(map(len, texts))
    return {"perturbation_seconds": t_aug, "serializer_seconds": t_ser, "chars": chars}


def describe(tables: list[dict], entry: str) -> dict[str, Any]:
    return {
        "unitxt_version": version("unitxt"),
        "pandas_version": version("pandas"),
        "python": sys.version.split()[0],
        "entry": entry,
        "tables": len(tables),
        "configurations": len(SERIALIZERS) * len(AUGMENTORS),
        "serializers": {k: f"{type(v).__module__}.{type(v).__name__}" for k, v in SERIALIZERS.items()},
        "augmentors": {
            k: (f"{type(v).__module__}.{type(v).__name__}" + ("(times=2)" if k == "insert_empty_rows" else "") if v else "identity")
            for k, v in AUGMENTORS.items()
        },
    }


def serve(tables: list[dict], entry: str) -> None:
    """Answer one command a line on stdin (``grid``, ``breakdown``, ``describe``) with one line
    ``RESULT <json>`` on stdout, so that the caller can interleave its own passes with ours."""
    for line in sys.stdin:
        command = line.strip()
        if command == "grid":
            seconds, strings, chars = run_grid(tables, entry)
            answer: Any = {"seconds": seconds, "cpu": LAST_CPU, "strings": strings, "chars": chars}
        elif command == "breakdown":
            answer = breakdown(tables, entry)
        elif command == "describe":
            answer = describe(tables, entry)
        else:
            answer = {"error": f"unknown command {command!r}"}
        print("RESULT " + json.dumps(answer), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tables", help="JSON Lines of {header, rows}")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--entry", choices=("serialize_table", "serialize"), default="serialize_table")
    parser.add_argument("--serve", action="store_true", help="take commands on stdin (used by variants.py)")
    parser.add_argument("--out", help="write the result JSON here (default: stdout)")
    args = parser.parse_args()
    with open(args.tables, encoding="utf-8") as fh:
        tables = [json.loads(line) for line in fh if line.strip()]
    run_grid(tables[:20], args.entry)  # warm-up: first calls import lazily (pandas paths)
    if args.serve:
        serve(tables, args.entry)
        return 0
    runs = [run_grid(tables, args.entry) for _ in range(args.repeat)]
    times = [r[0] for r in runs]
    result = describe(tables, args.entry) | {
        "strings": runs[0][1],
        "chars": runs[0][2],
        "times": times,
        "best": min(times),
        "median": statistics.median(times),
        "breakdown": breakdown(tables, args.entry),
    }
    text = json.dumps(result, indent=1)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The ToRR variant grid for all of TableBench: tqaforge against unitxt, in the same run.

For each of the 886 TableBench items, each of 5 conditions ("none" and ToRR's four structural
perturbations: shuffle rows, shuffle columns, transpose, insert empty rows) is applied once
(seed 0) and the result serialized in each of ToRR's 7 formats (html, csv, json, markdown,
indexed row major, dataframe, concatenation): 35 strings an item, 31,010 in all. The same grid
is then built with unitxt's own table augmentors and serializers (the classes ToRR's unitxt
recipes use) in a subprocess under a separate virtualenv, on the very same tables, and both
times are printed with their ratio.

Setup, once (unitxt pins its own dependencies, so it never goes into .venv; `.venv-*/` is
git-ignored):

    python3 -m venv .venv-bench && .venv-bench/bin/pip install unitxt pandas

Run:

    .venv/bin/python benchmarks/variants.py [--repeat 3] [--unitxt-entry serialize_table|serialize]

Timing: best and median of ``--repeat`` passes over the whole grid, each after a warm-up on 20
items; imports, file reading and building the serializer/augmentor objects are outside the
timing; every string's length is summed so nothing is optimised away. Our side gets fresh
``Table`` objects before each pass, so hashing each table for its seeded generator (see
``perturb.base.rng_for``) is paid in every pass. unitxt is called as cheaply as is legitimate
(see ``benchmarks/_unitxt_grid.py``). A second, separate pass times each perturbation and each
serialization on its own, for both sides, to show where the time goes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tqaforge.tables.perturb import (
    PERTURBATIONS,
    TORR_PERTURBATIONS,
    PerturbationSkipped,
)
from tqaforge.tables.perturb.base import ItemContext
from tqaforge.tables.readers import read_tablebench
from tqaforge.tables.serialize import SERIALIZATIONS, TORR_SERIALIZATIONS
from tqaforge.tables.table import Table

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "tablebench" / "TableBench.jsonl"
BENCH_PYTHON = REPO / ".venv-bench" / "bin" / "python"
HELPER = Path(__file__).resolve().parent / "_unitxt_grid.py"
SETUP = "python3 -m venv .venv-bench && .venv-bench/bin/pip install unitxt pandas"

SEED = 0
CONDITIONS: tuple[str, ...] = ("none", *TORR_PERTURBATIONS)
WARMUP_ITEMS = 20

Item = tuple[Table, ItemContext]


def load_items(path: Path) -> list[Item]:
    """TableBench's items as tqaforge reads them: one (table, context) per question."""
    items: list[Item] = []
    for record in read_tablebench(path).records:
        for q in record.items:
            items.append((record.table, ItemContext(question=q.question, answers=q.answers)))
    return items


def fresh(items: list[Item]) -> list[Item]:
    """New Table objects with no cached id, so every pass pays for hashing its tables."""
    return [(Table(t.header, t.rows), ctx) for t, ctx in items]


def run_ours(items: list[Item]) -> tuple[float, int, int, int]:
    """One timed pass over the grid: (seconds, strings, characters, skipped cells)."""
    perturbations: list[tuple[str, Callable[..., Any]]] = [(c, PERTURBATIONS[c]) for c in CONDITIONS]
    serializers = [SERIALIZATIONS[s] for s in TORR_SERIALIZATIONS]
    work = fresh(items)
    n = chars = skipped = 0
    start = time.perf_counter()
    for table, ctx in work:
        for _name, fn in perturbations:
            try:
                variant = fn(table, ctx, SEED).table
            except PerturbationSkipped:
                skipped += 1
                continue
            for ser in serializers:
                chars += len(ser(variant))
                n += 1
    return time.perf_counter() - start, n, chars, skipped


def breakdown_ours(items: list[Item]) -> dict[str, Any]:
    """One pass timing each perturbation and each serialization on its own."""
    work = fresh(items)
    t_pert = dict.fromkeys(CONDITIONS, 0.0)
    t_ser = dict.fromkeys(TORR_SERIALIZATIONS, 0.0)
    chars = {c: dict.fromkeys(TORR_SERIALIZATIONS, 0) for c in CONDITIONS}
    skips: dict[str, int] = {}
    clock = time.perf_counter
    for table, ctx in work:
        for cname in CONDITIONS:
            fn = PERTURBATIONS[cname]
            t0 = clock()
            try:
                variant = fn(table, ctx, SEED).table
            except PerturbationSkipped as exc:
                t_pert[cname] += clock() - t0
                skips[f"{cname}: {exc.reason}"] = skips.get(f"{cname}: {exc.reason}", 0) + 1
                continue
            t_pert[cname] += clock() - t0
            for sname in TORR_SERIALIZATIONS:
                ser = SERIALIZATIONS[sname]
                t0 = clock()
                text = ser(variant)
                t_ser[sname] += clock() - t0
                chars[cname][sname] += len(text)
    return {"perturbation_seconds": t_pert, "serializer_seconds": t_ser, "chars": chars, "skips": skips}


class Unitxt:
    """The unitxt side: ``_unitxt_grid.py --serve`` under the bench interpreter, fed the very
    tables our side uses (cells already strings), one per item, in item order. Each
    :meth:`ask` runs one command there and returns its answer; nothing of ours runs meanwhile."""

    def __init__(self, items: list[Item], python: Path, entry: str) -> None:
        self._dir = tempfile.TemporaryDirectory()
        tables = Path(self._dir.name) / "tables.jsonl"
        with tables.open("w", encoding="utf-8") as fh:
            for table, _ctx in items:
                fh.write(json.dumps({"header": list(table.header), "rows": [list(r) for r in table.rows]}) + "\n")
        self._stderr = (Path(self._dir.name) / "stderr.txt").open("w+", encoding="utf-8")
        self._proc = subprocess.Popen(
            [str(python), str(HELPER), str(tables), "--serve", "--entry", entry],
            cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True,
        )

    def ask(self, command: str) -> dict[str, Any]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        try:
            self._proc.stdin.write(command + "\n")
            self._proc.stdin.flush()
        except BrokenPipeError:
            pass
        for line in self._proc.stdout:
            if line.startswith("RESULT "):
                return json.loads(line[len("RESULT "):])
        self._proc.wait()
        self._stderr.seek(0)
        tail = self._stderr.read().strip().splitlines()[-15:]
        joined = "\n    ".join(tail)
        raise RuntimeError(f"the unitxt run failed (exit {self._proc.returncode}):\n    {joined}")

    def close(self) -> None:
        if self._proc.stdin:
            self._proc.stdin.close()
        self._proc.wait(timeout=60)
        self._stderr.close()
        self._dir.cleanup()


def _row(label: str, seconds: float, configs: int, width: int = 34) -> str:
    return f"  {label:<{width}} {seconds:8.3f} s  {configs / seconds:10,.0f} configs/s"


def report_breakdown(ours: dict[str, Any], theirs: dict[str, Any] | None) -> None:
    print("\nWhere the time goes (one separate pass, each call timed on its own; seconds over all items):")
    head = f"  {'':<20} {'tqaforge':>10}"
    print(head + (f" {'unitxt':>10} {'unitxt/ours':>12}" if theirs is not None else ""))
    for kind, names in (("perturbation_seconds", CONDITIONS), ("serializer_seconds", TORR_SERIALIZATIONS)):
        for name in names:
            a = ours[kind][name]
            if theirs is not None:
                b = theirs["breakdown"][kind].get(name)
                ratio = f"{b / a:11.1f}x" if b is not None and a > 0 else ""
                print(f"  {name:<20} {a:10.3f} {b:10.3f} {ratio:>12}")
            else:
                print(f"  {name:<20} {a:10.3f}")


def report_chars(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    """Output sizes per cell, ours against unitxt's: equal sizes mean equivalent formats."""
    print("\nCharacters per grid cell, tqaforge / unitxt (ratio; 1.00 = same size):")
    print("  " + f"{'':<18}" + "".join(f"{s[:12]:>13}" for s in TORR_SERIALIZATIONS))
    for c in CONDITIONS:
        cells = []
        for s in TORR_SERIALIZATIONS:
            a, b = ours["chars"][c][s], theirs["breakdown"]["chars"][c][s]
            cells.append(f"{a / b:13.2f}" if b else f"{'-':>13}")
        print(f"  {c:<18}" + "".join(cells))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed passes per side (best and median reported)")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument(
        "--unitxt-entry", choices=("serialize_table", "serialize"), default="serialize_table",
        help="unitxt method timed for its SerializeTable classes (serialize adds a deep copy per call)",
    )
    parser.add_argument("--no-unitxt", action="store_true", help="time tqaforge only")
    parser.add_argument("--unitxt-python", type=Path, default=BENCH_PYTHON,
                        help="interpreter with unitxt installed (default: .venv-bench/bin/python)")
    args = parser.parse_args()
    if not args.data.exists():
        print(f"skipped: {args.data} not found (needs ../shared/data)")
        return 0

    items = load_items(args.data)
    n_items = len(items)
    configs = n_items * len(CONDITIONS) * len(TORR_SERIALIZATIONS)
    print(f"TableBench: {n_items} items; grid {len(CONDITIONS)} conditions x {len(TORR_SERIALIZATIONS)} "
          f"serializations = {len(CONDITIONS) * len(TORR_SERIALIZATIONS)} configurations an item, {configs:,} in all")
    print(f"  conditions:     {', '.join(CONDITIONS)} (seed {SEED})")
    print(f"  serializations: {', '.join(TORR_SERIALIZATIONS)}")

    unitxt: Unitxt | None = None
    why_not = ""
    if args.no_unitxt:
        why_not = "not run (--no-unitxt)"
    elif not args.unitxt_python.exists():
        why_not = f"no {args.unitxt_python}; create it with:  {SETUP}"
    else:
        unitxt = Unitxt(items, args.unitxt_python, args.unitxt_entry)
    meta: dict[str, Any] = {}
    try:
        if unitxt is not None:
            meta = unitxt.ask("describe")  # waits until unitxt is imported and warmed up
        run_ours(items[:WARMUP_ITEMS])
        # Passes alternate, ours then unitxt's, so that a change in the machine's load (other
        # processes on 2 cores) falls on both sides alike rather than on one.
        ours: list[tuple[float, int, int, int]] = []
        theirs: list[dict[str, Any]] = []
        for _ in range(args.repeat):
            ours.append(run_ours(items))
            if unitxt is not None:
                theirs.append(unitxt.ask("grid"))
        ours_bd = breakdown_ours(items)
        theirs_bd = unitxt.ask("breakdown") if unitxt is not None else None
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if unitxt is not None:
            unitxt.close()

    times = [r[0] for r in ours]
    t_best, t_med = min(times), statistics.median(times)
    _, n_strings, n_chars, n_skipped = ours[0]
    print(f"\nTimes for the whole grid (best / median of {args.repeat} passes, the two sides alternating):")
    print(_row("tqaforge (best)", t_best, configs))
    print(_row("tqaforge (median)", t_med, configs))
    if unitxt is None or theirs_bd is None:
        print(f"  tqaforge made {n_strings:,} strings, {n_chars:,} characters; {n_skipped} cells skipped")
        print(f"  unitxt: {why_not}")
        report_breakdown(ours_bd, None)
        return 0

    u_times = [r["seconds"] for r in theirs]
    u_best, u_med = min(u_times), statistics.median(u_times)
    label = f"unitxt {meta['unitxt_version']}"
    print(_row(f"{label} (best)", u_best, configs))
    print(_row(f"{label} (median)", u_med, configs))
    print(f"  tqaforge made {n_strings:,} strings, {n_chars:,} characters; {n_skipped} cells skipped")
    print(f"  unitxt   made {theirs[0]['strings']:,} strings, {theirs[0]['chars']:,} characters")
    pairs = sorted(u / o for (o, *_), u in zip(ours, u_times))
    print(f"\nratio unitxt time / tqaforge time: {u_best / t_best:.1f}x (best), {u_med / t_med:.1f}x (median); "
          f"per pass {', '.join(f'{r:.1f}x' for r in pairs)}; target >= 3x: {'met' if u_best / t_best >= 3 else 'NOT met'}")

    # unitxt's DataFrame serializer builds a pandas DataFrame per call and dominates its time;
    # the ratio on the other 30 cells, from the per-part pass, shows the rest of the grid.
    def without_df(bd: dict[str, Any]) -> float:
        return sum(bd["perturbation_seconds"].values()) + sum(
            v for k, v in bd["serializer_seconds"].items() if k != "dataframe"
        )

    a, b = without_df(ours_bd), without_df(theirs_bd)
    print(f"ratio without the dataframe cells (the other 6 x 5 = 30 configurations, per-part pass): {b / a:.1f}x")

    theirs_full = {"breakdown": theirs_bd}
    report_breakdown(ours_bd, theirs_full)
    report_chars(ours_bd, theirs_full)
    if ours_bd["skips"]:
        print("\nskipped cells (tqaforge): " + "; ".join(f"{k} x{v}" for k, v in ours_bd["skips"].items()))

    print(f"\nunitxt {meta['unitxt_version']} with pandas {meta['pandas_version']}, Python {meta['python']}; "
          f"{meta['entry']} for the SerializeTable subclasses, process_value for the augmentors:")
    for name in TORR_SERIALIZATIONS:
        print(f"  {name:<20} {meta['serializers'][name]}")
    for name in CONDITIONS:
        print(f"  {name:<20} {meta['augmentors'][name]}")
    print("  every cell of the grid has a unitxt equivalent: csv is unitxt's default TableSerializer, which is\n"
          "  what ToRR's csv recipes use (serializer: null); formats differ in detail (see the sizes above)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

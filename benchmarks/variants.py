"""The ToRR variant grid for all of TableBench: tqaforge against unitxt, and before against after.

For each of the 886 TableBench items, each of 5 conditions ("none" and ToRR's four structural
perturbations: shuffle rows, shuffle columns, transpose, insert empty rows) is applied once
(seed 0) and the result serialized in each of ToRR's 7 formats (html, csv, json, markdown,
indexed row major, dataframe, concatenation): 35 strings an item, 31,010 in all. The same grid
is built three ways, each in its own child process, on the very same tables: with today's
tqaforge ("after"), with tqaforge's grid code at ``--before`` (default: main before issue 26's
speed-ups, taken with ``git archive``; "before"), and with unitxt's own table augmentors and
serializers (the classes ToRR's unitxt recipes use) under a separate virtualenv.

Setup, once (unitxt pins its own dependencies, so it never goes into .venv; `.venv-*/` is
git-ignored):

    python3 -m venv .venv-bench && .venv-bench/bin/pip install unitxt pandas

Run:

    .venv/bin/python benchmarks/variants.py [--repeat 3] [--before REV|none] [--unitxt-entry serialize_table|serialize]

It prints, in one run: the whole grid's time for each side (best and median wall time of
``--repeat`` passes, and the least CPU time: the steadier figure on a shared machine), the
ratio unitxt / tqaforge overall (issue 26's target: >= 10x) and without the ``dataframe``
cells, after against before, and each perturbation and serialization on its own for the three
sides with the ratio against unitxt (target: >= 3x each; "none" is the identity on both sides).

Timing: the sides take turns pass by pass, so a change in the machine's load falls on all of
them alike; each side warms up on 20 items first; imports, file reading and building the
serializer/augmentor objects are outside the timing; every string's length is summed so nothing
is optimised away. Our side gets fresh ``Table`` objects before each pass, so hashing each table
for its seeded generator (see ``perturb.base.rng_for``) is paid in every pass. unitxt is called
as cheaply as is legitimate (see ``benchmarks/_unitxt_grid.py``). The per-part passes time each
perturbation over all tables, then each serialization over all of its tables, in CPU time.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _rounds import round_by_round  # a sibling: benchmarks/ is the script's directory

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
OURS_HELPER = Path(__file__).resolve().parent / "_tqaforge_grid.py"
#: The grid's code before issue 26's speed-ups (``--before``'s default): main when they began.
BEFORE = "0abec0ef32e5a3504b4bedd7e5dd3b1f78a75291"
#: Issue 26's targets: unitxt's time over ours.
TARGET_OVERALL, TARGET_EACH = 10.0, 3.0
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
    """One pass timing each perturbation over all items, then each serialization over all of
    that perturbation's tables, in CPU time (the steadier figure on a shared machine; one clock
    reading per part and table set, not per call). The first seeded perturbation pays for
    hashing the tables (see :func:`fresh`), as unitxt's shuffles pay for copying them."""
    work = fresh(items)
    t_pert = dict.fromkeys(CONDITIONS, 0.0)
    t_ser = dict.fromkeys(TORR_SERIALIZATIONS, 0.0)
    chars = {c: dict.fromkeys(TORR_SERIALIZATIONS, 0) for c in CONDITIONS}
    skips: dict[str, int] = {}
    clock = time.process_time
    for cname in CONDITIONS:
        fn = PERTURBATIONS[cname]
        variants: list[Table] = []
        reasons: list[str] = []
        t0 = clock()
        for table, ctx in work:
            try:
                variants.append(fn(table, ctx, SEED).table)
            except PerturbationSkipped as exc:
                reasons.append(exc.reason)
        t_pert[cname] += clock() - t0
        for reason in reasons:
            skips[f"{cname}: {reason}"] = skips.get(f"{cname}: {reason}", 0) + 1
        for sname in TORR_SERIALIZATIONS:
            ser = SERIALIZATIONS[sname]
            t0 = clock()
            texts = [ser(variant) for variant in variants]
            t_ser[sname] += clock() - t0
            chars[cname][sname] += sum(map(len, texts))
    return {"perturbation_seconds": t_pert, "serializer_seconds": t_ser, "chars": chars, "skips": skips}


def floor_ours(items: list[Item], passes: int = 7) -> dict[str, Any]:
    """What a seeded perturbation cannot do without, timed over every item (CPU, best of
    ``passes``): making Python's generator from the item's 64-bit seed for insert_empty_rows
    (:func:`tqaforge.tables.perturb.base.generator_seed`, computed outside the timing), before
    anything is drawn. The seeded outputs are pinned byte for byte to this generator and these
    seeds (the golden digests), so no cheaper generator may stand in for it."""
    from tqaforge.tables.perturb.base import generator_seed  # today's code only

    seeds = [generator_seed(table, "insert_empty_rows", SEED) for table, _ctx in items]
    make, clock = random.Random, time.process_time
    best = float("inf")
    for _ in range(passes):
        t0 = clock()
        for value in seeds:
            make(value)
        best = min(best, clock() - t0)
    return {"seeding_seconds": best, "calls": len(seeds)}


class Server:
    """A child process that answers one command a line with ``RESULT <json>``: unitxt's side
    (``_unitxt_grid.py --serve``) or tqaforge's, today's or an older commit's
    (``_tqaforge_grid.py``). Each :meth:`ask` runs one command there and returns its answer;
    nothing else of this benchmark runs meanwhile."""

    def __init__(self, argv: list[str], what: str) -> None:
        self._dir = tempfile.TemporaryDirectory()
        self.what = what
        self._stderr = (Path(self._dir.name) / "stderr.txt").open("w+", encoding="utf-8")
        self._proc = subprocess.Popen(
            argv, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True,
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
        raise RuntimeError(f"the {self.what} run failed (exit {self._proc.returncode}):\n    {joined}")

    def close(self) -> None:
        if self._proc.stdin:
            self._proc.stdin.close()
        self._proc.wait(timeout=60)
        self._stderr.close()
        self._dir.cleanup()


def unitxt_server(items: list[Item], python: Path, entry: str, folder: Path) -> Server:
    """unitxt's side, fed the very tables our side uses (cells already strings), in item order."""
    tables = folder / "tables.jsonl"
    with tables.open("w", encoding="utf-8") as fh:
        for table, _ctx in items:
            fh.write(json.dumps({"header": list(table.header), "rows": [list(r) for r in table.rows]}) + "\n")
    return Server([str(python), str(HELPER), str(tables), "--serve", "--entry", entry], "unitxt")


def tqaforge_server(code: Path, data: Path, what: str) -> Server:
    """tqaforge's side with the code in ``code`` (this tree, or an older commit's tqaforge/)."""
    return Server([sys.executable, str(OURS_HELPER), str(code), str(data)], what)


def extract(rev: str, folder: Path) -> Path:
    """tqaforge/ as it is at ``rev``, extracted into ``folder`` (git archive: no checkout)."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "tqaforge"], capture_output=True, check=True).stdout
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def _row(label: str, seconds: float, configs: int, width: int = 34) -> str:
    return f"  {label:<{width}} {seconds:8.3f} s  {configs / seconds:10,.0f} configs/s"



PARTS: tuple[tuple[str, str], ...] = (
    *(("perturbation_seconds", c) for c in CONDITIONS),
    *(("serializer_seconds", s) for s in TORR_SERIALIZATIONS),
)


def best_breakdown(passes: list[dict[str, Any]]) -> dict[str, Any]:
    """Per part, the least time over the passes (the chars and skips of the first)."""
    out = dict(passes[0])
    for kind in ("perturbation_seconds", "serializer_seconds"):
        out[kind] = {name: min(p[kind][name] for p in passes) for name in passes[0][kind]}
    return out


def without_df(bd: dict[str, Any]) -> float:
    """Seconds of the grid's parts but the dataframe serializer."""
    return sum(bd["perturbation_seconds"].values()) + sum(v for k, v in bd["serializer_seconds"].items() if k != "dataframe")


def report_parts(before: dict[str, Any] | None, after: dict[str, Any], theirs: dict[str, Any] | None) -> None:
    """Each perturbation and serialization: before, after, unitxt and the ratios with the target."""
    print(f"\nEach part on its own (CPU seconds over all items, best of the per-part passes; each part timed over"
          f" all tables at once; target unitxt/after >= {TARGET_EACH:.0f}x):")
    print(f"  {'':<20} {'before':>8} {'after':>8} {'after/before':>13}" + (f" {'unitxt':>8} {'unitxt/after':>13}" if theirs else ""))
    met = total = 0
    for kind, name in PARTS:
        a = after[kind][name]
        if before:
            b = before[kind][name]
            line = f"  {name:<20} {b:8.3f} {a:8.3f} {b / a if a > 0 else float('inf'):12.1f}x"
        else:
            line = f"  {name:<20} {'':>8} {a:8.3f} {'':>13}"
        if theirs:
            u = theirs[kind][name]
            ratio = u / a if a > 0 else float("inf")
            if name == "none":
                verdict = "(identity on both sides; no target)"
            else:
                total += 1
                met += ratio >= TARGET_EACH
                verdict = "met" if ratio >= TARGET_EACH else "NOT met"
            line += f" {u:8.3f} {ratio:12.1f}x  {verdict}"
        print(line)
    if theirs:
        print(f"  {met} of {total} perturbations and serializations at >= {TARGET_EACH:.0f}x")


def report_floor(floor: dict[str, Any], after: dict[str, Any], theirs: dict[str, Any], n_items: int) -> None:
    """Why ``insert_empty_rows`` cannot reach the per-part target while its outputs stay
    byte-identical: unitxt's whole call against what ours cannot leave out, each per call."""
    unitxt = theirs["perturbation_seconds"]["insert_empty_rows"] / n_items
    budget = unitxt / TARGET_EACH
    seeding = floor["seeding_seconds"] / floor["calls"]
    record = after["perturbation_seconds"]["none"] / n_items
    us = 1e6
    print(f"\nWhat insert_empty_rows at >= {TARGET_EACH:.0f}x would need (CPU a call, this run; {n_items} calls each):")
    print(f"  unitxt's whole call (two list.insert into the caller's table, the global random) {unitxt * us:7.2f} us")
    print(f"  the time that leaves tqaforge for a call at >= {TARGET_EACH:.0f}x{'':<32} {budget * us:7.2f} us")
    print(f"  making the generator its byte-identical outputs are drawn from (Python's Mersenne\n"
          f"    Twister from the item's 64-bit seed), nothing drawn yet{'':<24} {seeding * us:7.2f} us"
          f"  ({seeding / budget:.1f}x that time)")
    print(f"  the record every perturbation returns (the none condition: orders and answers) {record * us:7.2f} us"
          f"  ({record / budget:.1f}x that time)")
    print(f"  so with nothing done but seeding, insert_empty_rows could reach at most {unitxt / seeding:.2f}x unitxt")


def report_chars(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    """Output sizes per cell, ours against unitxt's: equal sizes mean equivalent formats."""
    print("\nCharacters per grid cell, tqaforge / unitxt (ratio; 1.00 = same size):")
    print("  " + f"{'':<18}" + "".join(f"{s[:12]:>13}" for s in TORR_SERIALIZATIONS))
    for c in CONDITIONS:
        cells = []
        for s in TORR_SERIALIZATIONS:
            a, b = ours["chars"][c][s], theirs["chars"][c][s]
            cells.append(f"{a / b:13.2f}" if b else f"{'-':>13}")
        print(f"  {c:<18}" + "".join(cells))


def paired(grid: dict[str, list[dict[str, Any]]], slow: str, fast: str) -> str:
    """The ratio of CPU times ``slow`` / ``fast`` within each round (the two passes ran one after
    the other): median and range."""
    return round_by_round(f"{slow} / {fast} in CPU time", (s["cpu"] / f["cpu"] for s, f in zip(grid[slow], grid[fast], strict=True)))


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
    parser.add_argument("--before", default=BEFORE, help="the commit whose grid code 'before' times (default: main "
                        "before issue 26's speed-ups); 'none' to skip it")
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

    tmp = tempfile.TemporaryDirectory()
    servers: dict[str, Server] = {}
    why_not = ""
    try:
        servers["after"] = tqaforge_server(REPO, args.data, "tqaforge (after)")
        if args.before != "none":
            servers["before"] = tqaforge_server(extract(args.before, Path(tmp.name) / "before"), args.data, "tqaforge (before)")
        if args.no_unitxt:
            why_not = "not run (--no-unitxt)"
        elif not args.unitxt_python.exists():
            why_not = f"no {args.unitxt_python}; create it with:  {SETUP}"
        else:
            servers["unitxt"] = unitxt_server(items, args.unitxt_python, args.unitxt_entry, Path(tmp.name))
        meta = {name: s.ask("describe") for name, s in servers.items()}  # waits until each is warmed up
        # Passes go round the sides, so that a change in the machine's load (other processes
        # on 2 cores) falls on all alike rather than on one.
        grid: dict[str, list[dict[str, Any]]] = {name: [] for name in servers}
        parts: dict[str, list[dict[str, Any]]] = {name: [] for name in servers}
        for _ in range(args.repeat):
            for name, server in servers.items():
                grid[name].append(server.ask("grid"))
        for _ in range(args.repeat):
            for name, server in servers.items():
                parts[name].append(server.ask("breakdown"))
        floor = servers["after"].ask("floor")
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        for server in servers.values():
            server.close()
        tmp.cleanup()

    labels = {"after": "tqaforge after", "before": f"tqaforge before ({args.before[:7]})",
              "unitxt": f"unitxt {meta.get('unitxt', {}).get('unitxt_version', '')}"}
    best = {name: min(r["seconds"] for r in runs) for name, runs in grid.items()}
    med = {name: statistics.median(r["seconds"] for r in runs) for name, runs in grid.items()}
    cpu = {name: min(r["cpu"] for r in runs) for name, runs in grid.items()}
    print(f"\nThe whole grid ({configs:,} strings), best / median of {args.repeat} passes, the sides taking turns:")
    print(f"  {'':<30} {'best s':>8} {'median s':>9} {'CPU s':>7} {'configs/s':>11}")
    for name in grid:
        print(f"  {labels[name]:<30} {best[name]:8.3f} {med[name]:9.3f} {cpu[name]:7.3f} {configs / best[name]:11,.0f}")
    a = grid["after"][0]
    print(f"  tqaforge made {a['strings']:,} strings, {a['chars']:,} characters; {a['skipped']} cells skipped")
    if "before" in grid:
        b = grid["before"][0]
        same = (b["strings"], b["chars"]) == (a["strings"], a["chars"])
        print(f"  before made {b['strings']:,} strings, {b['chars']:,} characters ({'the same' if same else 'DIFFERENT'})")
        print(f"\nafter vs before: {best['before'] / best['after']:.1f}x faster (best), "
              f"{med['before'] / med['after']:.1f}x (median), {cpu['before'] / cpu['after']:.1f}x in CPU time")
    before_parts = best_breakdown(parts["before"]) if "before" in parts else None
    after_parts = best_breakdown(parts["after"])
    if "before" in grid:
        print(paired(grid, "before", "after"))
    if "unitxt" not in grid:
        print(f"unitxt: {why_not}")
        report_parts(before_parts, after_parts, None)
        return 0

    u = grid["unitxt"][0]
    print(f"  unitxt made {u['strings']:,} strings, {u['chars']:,} characters")
    theirs = best_breakdown(parts["unitxt"])
    overall, overall_cpu = best["unitxt"] / best["after"], cpu["unitxt"] / cpu["after"]
    print(f"\nratio unitxt / tqaforge after, whole grid: {overall:.1f}x (best), {med['unitxt'] / med['after']:.1f}x (median), "
          f"{overall_cpu:.1f}x (CPU); target >= {TARGET_OVERALL:.0f}x: "
          f"{'met' if overall >= TARGET_OVERALL else 'NOT met'} in best time, "
          f"{'met' if overall_cpu >= TARGET_OVERALL else 'NOT met'} in CPU time")
    print(paired(grid, "unitxt", "after"))
    if "before" in grid:
        print(f"  before: {best['unitxt'] / best['before']:.1f}x (best), {cpu['unitxt'] / cpu['before']:.1f}x (CPU)")
    # unitxt's DataFrame serializer builds a pandas DataFrame per call and dominates its time;
    # the ratio on the other 30 cells, from the per-part passes, shows the rest of the grid.
    line = f"ratio without the dataframe cells (the other 6 x 5 = 30 configurations, per-part passes): {without_df(theirs) / without_df(after_parts):.1f}x"
    if before_parts:
        line += f" (before: {without_df(theirs) / without_df(before_parts):.1f}x)"
    print(line)
    report_parts(before_parts, after_parts, theirs)
    report_floor(floor, after_parts, theirs, n_items)
    report_chars(after_parts, theirs)
    if after_parts["skips"]:
        print("\nskipped cells (tqaforge): " + "; ".join(f"{k} x{v}" for k, v in after_parts["skips"].items()))

    m = meta["unitxt"]
    print(f"\nunitxt {m['unitxt_version']} with pandas {m['pandas_version']}, Python {m['python']}; "
          f"{m['entry']} for the SerializeTable subclasses, process_value for the augmentors:")
    for name in TORR_SERIALIZATIONS:
        print(f"  {name:<20} {m['serializers'][name]}")
    for name in CONDITIONS:
        print(f"  {name:<20} {m['augmentors'][name]}")
    print("  every cell of the grid has a unitxt equivalent: csv is unitxt's default TableSerializer, which is\n"
          "  what ToRR's csv recipes use (serializer: null); formats differ in detail (see the sizes above)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

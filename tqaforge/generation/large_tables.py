"""The ``large_table`` probe set: the same probes on tables of every token length (capability-based
TableBench, "Large-table Understanding").

The paper asks the same questions whose answers come from the table itself (the number of rows,
the number of columns, the n-th column's header) of tables binned by token length, so that size
is the only thing that varies. :func:`generate_large_table_probes` does that on a workspace:

1. **Pick.** Up to ``per_bucket`` tables per token bucket (``<4k, 4-8k, 8-16k, 16-32k, >32k``,
   :mod:`tqaforge.tables.tokens`), drawn with ``seed`` by
   :func:`tqaforge.queries.pick_large_tables` (tokens of the table as ``serialization`` writes it,
   in ``encoding``).
2. **Grow** (on by default; ``grow=False``, ``--no-grow``, only reports). A requested bucket no
   table reaches gets one table grown into it
   (:func:`tqaforge.ingest.grow_stored_table`: rows drawn with replacement, seeded with ``seed``,
   stored as a new table of origin ``rule`` that names its source): the largest table below the
   bucket, among the tables that were not grown themselves, grown to :data:`GROW_TARGETS` (the
   middle of the bucket; 40,960 tokens for ``>32k``). ``<4k`` cannot be grown into (growing makes
   tables larger): an empty ``<4k`` is reported. The grown table is stored once (the same seed
   gives the same table), so a re-run finds it and grows nothing.
3. **Probe.** The picked (and grown) tables get the probes of ``kinds`` (default rows, columns,
   header) by :mod:`tqaforge.generation.probes`, filed under the capability
   ``LargeTableUnderstanding``, with ``meta["large_table"] = {"bucket", "tokens",
   "serialization", "encoding"}`` on each new question. A release carries the bucket of each item
   (column ``token_bucket``) and ``tqaforge evaluate`` reports accuracy per bucket
   (:mod:`tqaforge.evaluate.large_tables`).

Seeded and idempotent as the probes are: the same workspace, options and seed give the same
picks, the same grown tables and the same probes; a re-run adds nothing. (A question keeps the
bucket it was first stored with: its id does not depend on the serialization counted.)

>>> summary = generate_large_table_probes(ws, LargeTableOptions(per_bucket=2, seed=7))  # doctest: +SKIP
>>> print("\\n".join(summary.lines()))                                                  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlmodel import col, select

from tqaforge.errors import TableError, TokenCountError
from tqaforge.generation.probes import ProbeError, ProbeOptions, ProbeSummary, probe_table
from tqaforge.ingest import GrowOutcome, grow_stored_table
from tqaforge.progress import Progress
from tqaforge.queries import get_by_prefix, pick_large_tables, table_token_counts
from tqaforge.schemas.enums import Origin
from tqaforge.schemas.records import TableRecord
from tqaforge.store import Workspace
from tqaforge.tables.grow import GrowOptions
from tqaforge.tables.tokens import (
    BUCKET_NAMES,
    DEFAULT_ENCODING,
    DEFAULT_SERIALIZATION,
    LARGE_TABLE,
    K,
    bucket_named,
    bucket_of,
    check_encoding,
    check_serialization,
)

__all__ = ["GROW_TARGETS", "LARGE_TABLE", "LARGE_TABLE_KINDS", "BucketOutcome", "LargeTableOptions",
           "LargeTableSummary", "generate_large_table_probes"]

#: The paper's large-table questions: the number of rows, of columns, the n-th column's header.
LARGE_TABLE_KINDS: tuple[str, ...] = ("rows", "columns", "header")
#: The token count a table is grown to for an empty bucket: the middle of the bucket (``>32k``:
#: 40k). ``<4k`` has none: no table can be grown into it.
GROW_TARGETS: dict[str, int] = {"4-8k": 6 * K, "8-16k": 12 * K, "16-32k": 24 * K, ">32k": 40 * K}
_CHUNK = 500


@dataclass(frozen=True)
class LargeTableOptions:
    """What to make: up to ``per_bucket`` tables per bucket of ``buckets`` (default all five),
    probes of ``kinds`` on each (``per_table`` header probes), drawn with ``seed`` (picks, growth
    and probes); tokens counted in ``serialization`` and ``encoding``; ``tables`` (ids or unique
    prefixes; empty: every table) the tables to pick from; ``grow``: grow a table into an empty
    bucket (module docs)."""

    per_bucket: int = 1
    seed: int = 0
    kinds: tuple[str, ...] = LARGE_TABLE_KINDS
    buckets: tuple[str, ...] = BUCKET_NAMES
    grow: bool = True
    tables: tuple[str, ...] = ()
    serialization: str = DEFAULT_SERIALIZATION
    encoding: str = DEFAULT_ENCODING
    per_table: int = 1
    created_by: str = "tqaforge"

    def __post_init__(self) -> None:
        if isinstance(self.per_bucket, bool) or not isinstance(self.per_bucket, int) or self.per_bucket < 1:
            raise ProbeError(f"tables per bucket must be a whole number of at least 1, got {self.per_bucket!r}",
                             hint="give --per-bucket 1 or more")
        buckets = tuple(dict.fromkeys(self.buckets))
        if not buckets:
            raise ProbeError("give at least one token bucket", hint="buckets: " + ", ".join(BUCKET_NAMES))
        for name in buckets:
            bucket_named(name)  # TokenCountError naming the buckets
        object.__setattr__(self, "buckets", tuple(b for b in BUCKET_NAMES if b in buckets))
        object.__setattr__(self, "tables", tuple(self.tables))
        check_serialization(self.serialization)
        check_encoding(self.encoding)
        self.probe_options()  # kinds, seed and per_table checked as the probes check them

    def probe_options(self) -> ProbeOptions:
        """The probe options each picked table is probed with."""
        return ProbeOptions(kinds=tuple(self.kinds), seed=self.seed, per_table=self.per_table,
                            capability=LARGE_TABLE, created_by=self.created_by)


@dataclass
class BucketOutcome:
    """One bucket: the tables probed (id, tokens), the probes made, the table grown into it (if
    one was) and, for a bucket left without tables, why."""

    bucket: str
    tables: list[tuple[str, int]] = field(default_factory=list)
    probes: ProbeSummary = field(default_factory=lambda: ProbeSummary(seed=0))
    grown: GrowOutcome | None = None
    note: str = ""

    @property
    def new(self) -> int:
        return sum(self.probes.new.values())

    @property
    def present(self) -> int:
        return sum(self.probes.present.values())

    def as_dict(self) -> dict[str, Any]:
        return {"bucket": self.bucket, "tables": [{"table_id": t, "tokens": n} for t, n in self.tables],
                "new": dict(self.probes.new), "present": dict(self.probes.present),
                "skipped": self.probes.as_dict()["skipped"],
                "grown": self.grown.as_dict() if self.grown is not None else None, "note": self.note}


@dataclass
class LargeTableSummary:
    """What one run made, per bucket (:meth:`lines` is what the CLI prints). It *failed* when no
    probe was made or found in any bucket."""

    options: LargeTableOptions
    buckets: list[BucketOutcome] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return not any(b.new or b.present for b in self.buckets)

    def lines(self) -> list[str]:
        """A header line, then a line per bucket (tables, probes new and stored, growth), then the
        probes that could not be asked."""
        o = self.options
        new, present = sum(b.new for b in self.buckets), sum(b.present for b in self.buckets)
        out = [f"large-table probes ({', '.join(o.kinds)}; {LARGE_TABLE}), up to {o.per_bucket} tables per bucket, "
               f"seed {o.seed}, tokens in {o.serialization} ({o.encoding}): {new} new probes, {present} already stored"]
        width = max(len(b.bucket) for b in self.buckets) if self.buckets else 0
        for b in self.buckets:
            line = (f"  {b.bucket:<{width}}  {len(b.tables)} table{'' if len(b.tables) == 1 else 's'}"
                    + (f" ({min(n for _, n in b.tables)}-{max(n for _, n in b.tables)} tokens)" if b.tables else "")
                    + f", {b.new} new probes, {b.present} already stored")
            if b.grown is not None:
                g = b.grown
                line += (f"; no other table was this large: grew table {g.source_id[:12]} ({g.source_tokens} tokens) to {g.tokens} tokens: "
                         f"{'new' if g.new else 'already stored'} table {g.table_id[:12]}")
            if b.note:
                line += f"; {b.note}"
            out.append(line)
        skipped = [(b.bucket, s) for b in self.buckets for s in b.probes.skipped]
        for bucket, s in skipped[:10]:
            out.append(f"  skipped {s.kind} on table {s.table_id[:12]} ({bucket}): {s.reason}")
        if len(skipped) > 10:
            out.append(f"  ... and {len(skipped) - 10} more skipped pairs")
        return out

    def as_dict(self) -> dict[str, Any]:
        o = self.options
        return {"capability": LARGE_TABLE, "kinds": list(o.kinds), "per_bucket": o.per_bucket, "seed": o.seed,
                "serialization": o.serialization, "encoding": o.encoding, "grow": o.grow,
                "buckets": [b.as_dict() for b in self.buckets], "failed": self.failed}


def generate_large_table_probes(ws: Workspace, options: LargeTableOptions, *,
                                on_progress: Progress | None = None) -> LargeTableSummary:
    """Pick, grow where a bucket is empty, and probe (module docs); one table (and transaction)
    at a time, so an interrupted run keeps what it stored."""
    table_ids = _selection(ws, options.tables)
    picks = pick_large_tables(ws, per_bucket=options.per_bucket, seed=options.seed, serialization=options.serialization,
                              encoding=options.encoding, buckets=options.buckets, table_ids=table_ids)
    summary = LargeTableSummary(options)
    by_bucket = {name: BucketOutcome(name, probes=ProbeSummary(seed=options.seed)) for name in options.buckets}
    for pick in picks:
        by_bucket[pick.bucket].tables.append((pick.table_id, pick.tokens))
    for outcome in by_bucket.values():
        if not outcome.tables:
            _fill(ws, outcome, options, table_ids)
    summary.buckets = list(by_bucket.values())
    todo = [(b, table_id, tokens) for b in summary.buckets for table_id, tokens in b.tables]
    probe_options = options.probe_options()
    for done, (b, table_id, tokens) in enumerate(todo):
        b.probes.tables += 1
        meta = {"large_table": {"bucket": b.bucket, "tokens": tokens, "serialization": options.serialization,
                                "encoding": options.encoding}}
        probe_table(ws, table_id, probe_options, b.probes, meta)
        if on_progress is not None:
            on_progress(done + 1, len(todo), f"{b.bucket} {table_id[:12]}")
    return summary


def _selection(ws: Workspace, wanted: tuple[str, ...]) -> list[str] | None:
    """The ids of the tables to pick from (None: every table); ProbeError when there are none."""
    with ws.session() as s:
        if wanted:
            return sorted({get_by_prefix(s, TableRecord, t).id for t in wanted})
        if s.exec(select(TableRecord.id).limit(1)).first() is None:
            raise ProbeError("no tables to probe", hint="import tables first: tqaforge tables import PATH")
    return None


def _fill(ws: Workspace, outcome: BucketOutcome, options: LargeTableOptions, table_ids: list[str] | None) -> None:
    """An empty bucket: grow a table into it (``options.grow``), or say why it stays empty."""
    bucket = bucket_named(outcome.bucket)
    target = GROW_TARGETS.get(bucket.name)
    if target is None:
        outcome.note = f"no table has fewer than {bucket.high} tokens, and growing a table only makes it larger"
        return
    if not options.grow:
        outcome.note = "no table is this large (grow one with --grow, or `tqaforge tables grow`)"
        return
    source = _grow_source(ws, bucket.low, options, table_ids)
    if source is None:
        outcome.note = f"no table is this large, and none with rows below {bucket.low} tokens could be grown"
        return
    try:
        grown = grow_stored_table(ws, source, GrowOptions(target_tokens=target, seed=options.seed,
                                                          serialization=options.serialization, encoding=options.encoding),
                                  created_by=options.created_by)
    except (TableError, TokenCountError) as exc:
        outcome.note = f"growing table {source[:12]} failed: {exc}"
        return
    outcome.grown = grown
    landed = bucket_of(grown.tokens).name
    if landed != bucket.name:  # a single row longer than the bucket is wide
        outcome.note = f"the grown table has {grown.tokens} tokens, which is in {landed}, not probed here"
        return
    outcome.tables.append((grown.table_id, grown.tokens))


def _grow_source(ws: Workspace, below: int, options: LargeTableOptions, table_ids: list[str] | None) -> str | None:
    """The table to grow into a bucket starting at ``below`` tokens: the largest one with fewer
    tokens and at least one row, not grown itself (origin ``rule``); ties by id."""
    counts = table_token_counts(ws, serialization=options.serialization, encoding=options.encoding, table_ids=table_ids)
    candidates = sorted((i for i, n in counts.items() if n < below), key=lambda i: (-counts[i], i))
    with ws.session() as s:
        for start in range(0, len(candidates), _CHUNK):
            chunk = candidates[start:start + _CHUNK]
            usable = set(s.exec(select(TableRecord.id).where(
                col(TableRecord.id).in_(chunk), col(TableRecord.origin) != Origin.RULE, col(TableRecord.n_rows) > 0)).all())
            for table_id in chunk:
                if table_id in usable:
                    return table_id
    return None

"""Memorisation probes with a model: has the model seen the release's tables before?

In the manner of tabmemcheck (Bordt et al., "Elephants never forget", 2024), each distinct table
of the release's base items is written as CSV text (one line per row, the header first) and the
model is asked three kinds of question, each at temperature 0 (``prompts/memorise_*.txt``):

- **header** (tabmemcheck's header test): the file is cut inside line ``s`` for each ``s`` in
  ``header_splits`` (at a seeded position in the middle third of that line); the model continues
  it. Its reply is compared character by character with the true continuation (at most
  ``completion_chars``); the best cut counts. *Verbatim* when the reply reproduces the rest of the
  cut row and the whole row after it (or the file to its end). tabmemcheck adds few-shot examples
  cut from other well-known CSV files; here the system prompt gives the instruction instead, so a
  table's probes depend on that table alone (a re-run over a changed release still finds them in
  the cache).
- **rows** (row completion test): ``prefix_rows`` consecutive lines (the header line among them
  when the window starts at the top), then the model gives the next one; ``row_probes`` targets
  are a seeded choice, each with ``few_shot`` other windows of the same table as worked examples
  (never one that contains the target row). An *exact match* is tabmemcheck's: the true row
  (stripped) occurs in the reply (stripped).
- **cells** (feature completion test): the column with the most distinct values (tabmemcheck's
  choice) is withheld from ``cell_probes`` seeded rows; the model is shown the row's other cells
  as ``Name = value, ...`` and answers ``Name = value``. An exact match: the value read after
  ``Name = `` (up to the end of the line) equals the true one. The *baseline* is how many of the
  probes a guess would get right that knows the column but not the row (its most common value
  among the other rows): a column of few values can be guessed.

**Verdict per table.** A kind shows evidence when: the header is verbatim; one row or more is an
exact match; the cell matches beat the baseline. *memorised*: two kinds or more show evidence, or
half the row probes or more are exact matches (reproducing most rows verbatim is memorisation on
its own); *some evidence*: one kind; *none*: no kind. A probe needs enough of the table: the
header a line ``s`` (a table with fewer rows has fewer cuts, none below 2 rows), rows two data
rows or more, cells one row and two columns or more; what a table is too small for is *skipped*
and said so, and a table with every kind skipped is *not testable*.

**Through the gateway.** The probes are a step of the runner (:mod:`tqaforge.llm.step`), like
``evaluate --model`` (:mod:`tqaforge.evaluate.model_run`): every call a ledger record keyed by its
request (a second run costs nothing), reserved against the run's budget (``max_cost``). Tables are
probed in order, one after the other; a run stopped by the budget reports the tables whose probes
were all answered and names the rest *not probed* (never clean). Any other stop (the endpoint
down, no key) is a :class:`~tqaforge.errors.HealthError`: the answers already had are in the
ledger, and a run again resumes from them.

>>> found = probe_memorisation(ws, release, MemorisationOptions(model="gpt-4o-mini", max_cost=0.5))  # doctest: +SKIP
>>> print("\\n".join(found.lines()))                                                                 # doctest: +SKIP
"""

from __future__ import annotations

import csv
import hashlib
import io
import random
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator

from tqaforge.errors import HealthError
from tqaforge.evaluate.predictions import Release
from tqaforge.llm.budget import Budget
from tqaforge.llm.runner import StopReason
from tqaforge.llm.settings import LLMSettings, load_llm_settings
from tqaforge.llm.step import CallSummary, ReplyStep, RunnerOptions, run_step
from tqaforge.printable import escape_controls
from tqaforge.prompts import render
from tqaforge.store import Workspace
from tqaforge.tables.table import Table

__all__ = [
    "HEADER", "ROWS", "CELLS", "MEMORISED", "SOME_EVIDENCE", "NONE", "NOT_TESTABLE",
    "MemorisationOptions", "MemorisationResult", "Probe", "TableProbes", "build_probes", "csv_lines",
    "header_match", "probe_memorisation", "row_match", "cell_value", "verdict",
]

HEADER, ROWS, CELLS = "header", "rows", "cells"
KINDS = (HEADER, ROWS, CELLS)
MEMORISED, SOME_EVIDENCE, NONE, NOT_TESTABLE = "memorised", "some evidence", "none", "not testable"


@dataclass(frozen=True)
class MemorisationOptions:
    """Which model probes how many tables, and how (module docs); ``max_tables``: the first so many
    distinct tables of the release's base items (None: all); ``max_cost``: the run's budget (USD)."""

    model: str
    max_cost: float | None = None
    max_tables: int | None = None
    header_splits: tuple[int, ...] = (2, 4, 6, 8)
    completion_chars: int = 500
    prefix_rows: int = 10
    row_probes: int = 5
    cell_probes: int = 5
    few_shot: int = 3
    seed: int = 0

    def __post_init__(self) -> None:
        if self.max_tables is not None and (isinstance(self.max_tables, bool) or self.max_tables < 1):
            raise HealthError(f"memorisation probes: max_tables must be 1 or more (or none for all), got {self.max_tables!r}")
        for name in ("completion_chars", "prefix_rows", "row_probes", "cell_probes"):
            if getattr(self, name) < 1:
                raise HealthError(f"memorisation probes: {name} must be 1 or more, got {getattr(self, name)!r}")
        if self.few_shot < 0:
            raise HealthError(f"memorisation probes: few_shot cannot be negative, got {self.few_shot!r}")
        if any(s < 1 for s in self.header_splits):
            raise HealthError(f"memorisation probes: header splits are line numbers from 1 (the first data row), got {self.header_splits!r}")


@dataclass(frozen=True)
class Probe:
    """One question to the model: its table, kind and number, the chat ``messages``, what a
    memorising model would answer (``expected``: for the header, the file after the cut) and, for
    the header, how much of it a verbatim reply reproduces (``needed`` characters)."""

    table: str
    kind: str
    index: int
    messages: tuple[tuple[str, str], ...]
    expected: str
    max_tokens: int
    needed: int = 0

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.index}:{self.table}"


@dataclass
class TableProbes:
    """The probes of one table and, once answered, their scores and verdict."""

    table: str  # Table.id
    item: str  # the first base item that shows it
    items: int  # how many base items show it
    n_rows: int
    n_cols: int
    probes: list[Probe] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # kind -> why
    column: str | None = None  # the withheld column of the cell probes
    baseline: int = 0  # cell probes the column's most common value gets right
    header_chars: int = 0  # the best header cut: characters reproduced
    header_needed: int = 0  # ... and how many a verbatim reply reproduces
    header_verbatim: bool = False
    row_matches: int = 0
    cell_matches: int = 0
    probed: bool = False

    def count(self, kind: str) -> int:
        return sum(p.kind == kind for p in self.probes)

    @property
    def evidence(self) -> list[str]:
        """The kinds that show evidence of memorisation (module docs)."""
        shown = []
        if self.header_verbatim:
            shown.append(HEADER)
        if self.row_matches >= 1:
            shown.append(ROWS)
        if self.cell_matches > self.baseline:
            shown.append(CELLS)
        return shown

    @property
    def verdict(self) -> str:
        return verdict(self)

    def line(self) -> str:
        parts = []
        if HEADER in self.skipped:
            parts.append("header skipped")
        else:
            parts.append(f"header {self.header_chars} chars right, {self.header_needed} make it verbatim"
                         + (": verbatim" if self.header_verbatim else ""))
        parts.append("rows skipped" if ROWS in self.skipped else f"rows {self.row_matches}/{self.count(ROWS)} exact")
        parts.append("cells skipped" if CELLS in self.skipped else
                     f"cells {self.cell_matches}/{self.count(CELLS)} exact (baseline {self.baseline}, column {self.column})")
        return f"{self.item} ({self.n_rows}x{self.n_cols}, {self.items} items): {self.verdict}: " + "; ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {"table": self.table, "item": self.item, "items": self.items, "rows": self.n_rows, "cols": self.n_cols,
                "verdict": self.verdict, "evidence": self.evidence, "skipped": dict(sorted(self.skipped.items())),
                "header": {"chars": self.header_chars, "needed": self.header_needed, "verbatim": self.header_verbatim,
                           "probes": self.count(HEADER)},
                "rows_probe": {"exact": self.row_matches, "probes": self.count(ROWS)},
                "cells_probe": {"exact": self.cell_matches, "probes": self.count(CELLS), "baseline": self.baseline,
                                "column": self.column}}


def verdict(t: TableProbes) -> str:
    """``memorised``, ``some evidence``, ``none`` or ``not testable`` (module docs)."""
    if not t.probes:
        return NOT_TESTABLE
    rows = t.count(ROWS)
    if len(t.evidence) >= 2 or (rows and 2 * t.row_matches >= rows):
        return MEMORISED
    return SOME_EVIDENCE if t.evidence else NONE


@dataclass
class MemorisationResult:
    """The tables probed (with their verdicts), the tables left unprobed, what stopped the run and
    its calls; ``lines()`` and ``as_dict()`` hold nothing that changes between runs (not the calls,
    which ``calls`` holds: paid on the first run, from the cache on the next)."""

    model: str
    tables: list[TableProbes]
    selected: int  # distinct tables selected (after max_tables)
    distinct: int  # distinct tables of the release's base items
    options: MemorisationOptions | None = None  # how the probes were made (the seed among them), saved with them
    stopped: str | None = None
    calls: CallSummary = field(default_factory=CallSummary)

    @property
    def probed(self) -> list[TableProbes]:
        return [t for t in self.tables if t.probed]

    @property
    def not_probed(self) -> list[TableProbes]:
        return [t for t in self.tables if not t.probed]

    def of(self, name: str) -> list[TableProbes]:
        return [t for t in self.probed if t.verdict == name]

    @property
    def testable(self) -> list[TableProbes]:
        return [t for t in self.probed if t.verdict != NOT_TESTABLE]

    def lines(self) -> list[str]:
        tested = self.testable
        with_evidence = len(self.of(MEMORISED)) + len(self.of(SOME_EVIDENCE))
        share = f"{with_evidence / len(tested):.1%}" if tested else "n/a"
        cap = f" (the first {self.selected} of {self.distinct} distinct tables)" if self.selected < self.distinct else ""
        out = [f"model {self.model}: {len(self.probed)} of {self.selected} tables probed{cap}; "
               f"{len(self.of(MEMORISED))} memorised, {len(self.of(SOME_EVIDENCE))} with some evidence, "
               f"{len(self.of(NONE))} none, {len(self.of(NOT_TESTABLE))} too small to test; "
               f"share with evidence {share} of {len(tested)} tested"]
        if self.stopped:
            out.append(f"stopped early: {self.stopped}")
        if self.not_probed:
            out.append(f"NOT PROBED ({len(self.not_probed)} tables; no verdict, not clean; run again to resume, "
                       "the answers already had cost nothing): " + ", ".join(t.item for t in self.not_probed[:20])
                       + (", ..." if len(self.not_probed) > 20 else ""))
        out += ["  " + t.line() for t in self.probed]
        return [escape_controls(line, lines=False) for line in out]

    def as_dict(self) -> dict[str, Any]:
        tested = self.testable
        with_evidence = len(self.of(MEMORISED)) + len(self.of(SOME_EVIDENCE))
        return {"model": self.model, "selected": self.selected, "distinct": self.distinct, "probed": len(self.probed),
                "memorised": [t.item for t in self.of(MEMORISED)], "some_evidence": [t.item for t in self.of(SOME_EVIDENCE)],
                "none": [t.item for t in self.of(NONE)], "not_testable": [t.item for t in self.of(NOT_TESTABLE)],
                "not_probed": [t.item for t in self.not_probed], "stopped": self.stopped,
                "share_with_evidence": round(with_evidence / len(tested), 6) if tested else None,
                "probes": {k: v for k, v in asdict(self.options).items() if k not in ("model", "max_cost")} if self.options else None,
                "tables": [t.as_dict() for t in self.probed]}


# ---------------------------------------------------------------------------------------------
# The probes of a table


def csv_lines(table: Table) -> list[str]:
    """The table as CSV lines, header first: one line per row (a line break inside a cell becomes a
    space, so that a row is a line, as the probes count them)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for row in (table.header, *table.row_tuples()):
        writer.writerow([" ".join(str(c).splitlines()) for c in row])
    return out.getvalue().splitlines()


def _rng(seed: int, table: str) -> random.Random:
    # One generator per table, from the seed and the table's content hash: a table's probes do not
    # change when other tables are added to or dropped from the release.
    return random.Random(int.from_bytes(hashlib.sha256(f"{seed}:{table}".encode()).digest()[:8], "big"))


def _messages(system: str, shots: list[tuple[str, str]], prompt: str) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = [("system", system)]
    for user, assistant in shots:
        out += [("user", user), ("assistant", assistant)]
    return (*out, ("user", prompt))


def _tokens_for(text: str) -> int:
    # Room for the expected text (a token is a character at worst) and a little more: the budget
    # reserves the worst case, so no more than that.
    return min(len(text) + 16, 2048)


def build_probes(table: Table, item: str, items: int, options: MemorisationOptions) -> TableProbes:
    """The seeded probes of one table (module docs); ``item``/``items``: the first base item that
    shows it and how many do."""
    t = TableProbes(table.id, item, items, table.n_rows, table.n_cols)
    rng = _rng(options.seed, table.id)
    lines = csv_lines(table)
    data = "".join(line + "\n" for line in lines)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)

    # Header: cut inside line s at a seeded point of its middle third.
    splits = [s for s in options.header_splits if s < len(lines) and len(lines[s]) >= 1]
    if not options.header_splits:
        t.skipped[HEADER] = "no header cut asked for"
    elif not splits:
        t.skipped[HEADER] = f"needs {min(options.header_splits) + 1} lines or more (header and {min(options.header_splits)} rows)"
    for k, s in enumerate(splits):
        low, high = len(lines[s]) // 3, max(len(lines[s]) // 3 + 1, 2 * len(lines[s]) // 3)
        offset = starts[s] + rng.randrange(low, high)
        expected = data[offset: offset + options.completion_chars]
        end_of_next = starts[s + 2] - 1 if s + 2 < len(starts) else len(data)  # the end of the row after the cut one
        needed = min(end_of_next - offset, len(expected))
        t.probes.append(Probe(table.id, HEADER, k, _messages(render("memorise_header"), [], data[:offset]), expected,
                              _tokens_for(expected), needed))

    # Rows: windows of k lines, the next line the target.
    k_rows = min(options.prefix_rows, len(lines) - 1)
    if table.n_rows < 2:
        t.skipped[ROWS] = "needs 2 rows or more"
    else:
        windows = [("\n".join(lines[i - k_rows: i]), lines[i]) for i in range(k_rows, len(lines))]
        order = list(range(len(windows)))
        rng.shuffle(order)
        for n, i in enumerate(order[: options.row_probes]):
            prefix, target = windows[i]
            others = [j for j in order if j != i and target not in windows[j][0] and target not in windows[j][1]]
            shots = [windows[j] for j in others[: options.few_shot]]
            t.probes.append(Probe(table.id, ROWS, n, _messages(render("memorise_row"), shots, prefix), target, _tokens_for(target)))

    # Cells: the most distinct column withheld.
    if table.n_rows < 1 or table.n_cols < 2:
        t.skipped[CELLS] = "needs 1 row and 2 columns or more"
    else:
        header = [" ".join(h.splitlines()).strip() for h in table.header]
        columns = [[" ".join(v.splitlines()).strip() for v in table.column(c)] for c in range(table.n_cols)]
        col = max(range(table.n_cols), key=lambda c: (len(set(columns[c])), -c))
        t.column = header[col]
        samples = [(", ".join(f"{header[c]} = {columns[c][r]}" for c in range(table.n_cols) if c != col),
                    f"{header[col]} = {columns[col][r]}") for r in range(table.n_rows)]
        order = list(range(table.n_rows))
        rng.shuffle(order)
        for n, r in enumerate(order[: options.cell_probes]):
            prompt, answer = samples[r]
            shots = [samples[j] for j in order if j != r and answer not in samples[j][0] and answer != samples[j][1]]
            t.probes.append(Probe(table.id, CELLS, n, _messages(render("memorise_cell"), shots[: options.few_shot], prompt),
                                  columns[col][r], _tokens_for(answer)))
            # The guess of one who knows the column but not the row: its most common value among the
            # other rows (a column of few values is guessed right often, a one-row table never).
            rest = columns[col][:r] + columns[col][r + 1:]
            t.baseline += bool(rest) and Counter(rest).most_common(1)[0][0] == columns[col][r]
    return t


# ---------------------------------------------------------------------------------------------
# Scoring (tabmemcheck's criteria)


def header_match(expected: str, reply: str) -> int:
    """How many characters of ``expected`` the reply reproduces from its start (tabmemcheck: the
    first position where the two disagree)."""
    n = 0
    for a, b in zip(expected, reply):
        if a != b:
            break
        n += 1
    return n


def row_match(expected: str, reply: str) -> bool:
    """tabmemcheck's exact row match: the true row, stripped, occurs in the stripped reply."""
    return expected.strip() in reply.strip()


def cell_value(reply: str, column: str) -> str | None:
    """The value a reply gives for ``column``: what follows ``column = `` up to the end of that line
    (tabmemcheck's feature-string parsing with a line break as final delimiter); None when absent."""
    marker = f"{column} = "
    at = reply.find(marker)
    if at < 0:
        return None
    return reply[at + len(marker):].split("\n", 1)[0].strip()


def _score(t: TableProbes, replies: dict[str, str]) -> None:
    for p in t.probes:
        reply = replies[p.key]
        if p.kind == HEADER:
            got = min(header_match(p.expected, reply), len(p.expected))
            if got >= t.header_chars:
                t.header_chars, t.header_needed = got, p.needed
            t.header_verbatim = t.header_verbatim or (p.needed > 0 and got >= p.needed)
        elif p.kind == ROWS:
            t.row_matches += row_match(p.expected, reply)
        else:
            t.cell_matches += cell_value(reply, t.column or "") == p.expected
    t.probed = True


# ---------------------------------------------------------------------------------------------
# The run


def _base_tables(release: Release) -> Iterator[tuple[str, Table]]:
    """(item id, table) of each base item of ``release``, in release order."""
    for ref in release.base_references():
        yield ref.id, Table.from_dict(dict(release.table(ref)))


def items_showing(release: Release, tables: set[str]) -> list[str]:
    """The base items of ``release`` whose table is one of ``tables`` (``Table.id`` values)."""
    return [item for item, table in _base_tables(release) if table.id in tables]


def select_tables(release: Release, max_tables: int | None) -> tuple[list[tuple[Table, str, int]], int]:
    """The distinct tables of the release's base items, in release order: (table, first item,
    items showing it); the first ``max_tables``; and how many distinct tables there are."""
    seen: dict[str, list[Any]] = {}
    for item, table in _base_tables(release):
        if table.id in seen:
            seen[table.id][2] += 1
        else:
            seen[table.id] = [table, item, 1]
    chosen = list(seen.values())
    return [(t, i, n) for t, i, n in chosen[: max_tables if max_tables is not None else len(chosen)]], len(chosen)


def probe_memorisation(ws: Workspace, release: Release, options: MemorisationOptions, *, llm: LLMSettings | None = None,
                       runner: RunnerOptions | None = None, budget: Budget | None = None) -> MemorisationResult:
    """Probe ``options.model`` on the release's tables through the gateway (module docs); ``llm``:
    the endpoint settings (default: the workspace's with ``model`` and ``max_cost``); ``budget``:
    one shared with the command's other paid calls (then ``max_cost`` is unused). A run the
    budget stops is a result with tables not probed; any other stop a :class:`HealthError`."""
    chosen, distinct = select_tables(release, options.max_tables)
    tables = [build_probes(table, item, items, options) for table, item, items in chosen]
    settings = llm if llm is not None else load_llm_settings(ws, model=options.model, max_cost=options.max_cost)
    result = MemorisationResult(options.model, tables, len(chosen), distinct, options)
    step = _Probing(release.name, options, tables)
    run_step(ws, step, settings, runner, budget=budget, summary=result.calls)
    for t in tables:
        if all(p.key in step.replies for p in t.probes):
            _score(t, step.replies)
    result.stopped = result.calls.stopped
    if result.calls.stop_reason is not None and result.calls.stop_reason is not StopReason.BUDGET:
        raise HealthError(
            f"memorisation probes with {options.model} stopped after {len(result.probed)} of {len(tables)} tables: "
            f"{result.calls.stopped}",
            hint="the probes answered are stored in the ledger (a run again pays nothing for them); "
                 + (result.calls.advice("probes") or "fix the endpoint and run again"))
    return result


class _Probing(ReplyStep[Probe]):
    """The probes as a step (:mod:`tqaforge.llm.step`): a piece is a probe, its result the reply's
    text (empty for a reply the gateway could not use: it matches nothing, the call on record).
    Like the model run (``evaluate --model``) the replies stay in this run; the work left is the
    probes this run has not answered, in table order, so a stop by the budget leaves whole tables
    at the end unprobed."""

    def __init__(self, release: str, options: MemorisationOptions, tables: list[TableProbes]) -> None:
        super().__init__("health_memorisation", (options.model, release), [p for t in tables for p in t.probes])
        self.options = options

    def key(self, piece: Probe) -> str:
        return piece.key

    def request(self, piece: Probe) -> tuple[list[dict[str, str]], str, dict[str, Any]]:
        return ([{"role": role, "content": content} for role, content in piece.messages], f"health_memorisation_{piece.kind}",
                {"temperature": 0.0, "max_tokens": piece.max_tokens, "seed": self.options.seed})

"""Probes: questions whose exact answers come from the table itself (capability-based TableBench).

The capability-based TableBench tests structure and large-table understanding with questions
that code can answer: how many rows and columns a table has, the header of its n-th column,
whether it has a header, the value at a row and column, the range it covers. We make them from
any stored table, by rule, with the answer stored as gold:

============  =============================================  ==========================================
kind          asks                                           gold answer (exact)
============  =============================================  ==========================================
rows          the number of data rows                        ``n_rows`` (the header row not counted)
columns       the number of columns                          ``n_cols``
header        the header of column n (1 = leftmost)          the header cell as written
cell          the value at data row r (1 = first row below   the cell as written; only cells whose
              the header) and a column (by its name when     value is unambiguous (below)
              the name is unique, else by its number)
range         the spreadsheet range of the table             ``A1:<last column><n_rows + 1>``: header
                                                             row = row 1, first column = A
                                                             (:mod:`tqaforge.tables.address`)
has_header    whether the table has a header row             ``yes`` when a header cell holds text,
                                                             ``no`` when every header name is blank
============  =============================================  ==========================================

**Unambiguous cells.** A cell probe asks for a cell whose value is non-blank and occurs once in
the table's data (compared case-, width- and space-insensitively, as answers are compared): a
value repeated in its column or anywhere else could be the right answer read from the wrong
row, so it is never asked for. A table without such a cell gets no cell probe, and the summary
says why. Header probes skip blank header names for the same reason.

**Seeded and idempotent.** Every choice (the template, the column of a header probe, the cells of
a cell probe) is drawn from a generator seeded by (table content, kind, ``seed``), so the same
seed gives the same probes on any machine and whatever other tables are processed with them,
and the seed is stored on each question. A probe's id is the content hash of its table, words
and capability (:func:`tqaforge.ids.question_id`): a re-run adds nothing, and another seed adds
only the probes whose draw differs.

**Like any other question.** Probes are stored as ``Question(status="proposed", origin="rule")``
in the ``capability`` taxonomy (``StructureUnderstanding``, the cell probe ``Grounding``; the
``capability`` option sets another, e.g. ``LargeTableUnderstanding`` for probes on large tables)
with ``meta["probe"]`` saying what was drawn, and their answer as ``Answer(status="gold",
origin="rule", method="probe")`` (:func:`tqaforge.ids.probe_answer_id`). They go to review,
variants, release and evaluate as they are. Every template names rows or columns, so the variant
grid's structural filter keeps cell-moving perturbations (transposing, shuffling, inserting
rows), which would change these answers, away from them. Probes carry no relevant cells (the
drawn cell is in ``meta["probe"]``): cutting a table down to its relevant cells would take away
the row a cell probe names.

>>> from tqaforge.tables.table import Table
>>> t = Table.build(["city", "pop"], [["Oslo", "709000"], ["Bergen", "285900"], ["Oslo", "1"]])
>>> [p.answer for p in draw_probes(t, "rows", seed=0)], draw_probes(t, "range", seed=0)[0].answer
(['3'], 'A1:B4')
>>> sorted(unambiguous_cells(t))
[(0, 1), (1, 0), (1, 1), (2, 1)]
>>> summary = generate_probes(ws, ProbeOptions(kinds=("rows", "cell"), seed=7))  # doctest: +SKIP
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from sqlmodel import select

from tqaforge.errors import TableError, TqaforgeError
from tqaforge.ids import probe_answer_id
from tqaforge.progress import Progress
from tqaforge.queries import get_by_prefix
from tqaforge.schemas.enums import AnswerStatus, Origin, QuestionStatus, QuestionType
from tqaforge.schemas.records import MAX_SEED, Answer, Question, TableRecord, utcnow
from tqaforge.schemas.taxonomy import CAPABILITY
from tqaforge.store import Workspace, insert_new
from tqaforge.tables.address import table_range
from tqaforge.tables.cells import normalize_cell
from tqaforge.tables.perturb.base import rng_for
from tqaforge.tables.table import Table

#: The probe kinds, in the order they are made.
PROBE_KINDS: tuple[str, ...] = ("rows", "columns", "header", "cell", "range", "has_header")

#: The capability each kind tests unless the options name another.
CAPABILITY_OF: dict[str, str] = {
    "rows": "StructureUnderstanding",
    "columns": "StructureUnderstanding",
    "header": "StructureUnderstanding",
    "cell": "Grounding",
    "range": "StructureUnderstanding",
    "has_header": "StructureUnderstanding",
}

#: The wordings of each kind; one is drawn per probe. Placeholders: ``{n}`` (a column number),
#: ``{row}`` (a data row number) and ``{column}`` ('the "name" column' or 'column 3').
#: Every wording names rows or columns (the variant grid's structural filter relies on it).
TEMPLATES: dict[str, tuple[str, ...]] = {
    "rows": (
        "How many rows does the table have, not counting the header row?",
        "Not counting the header, how many data rows are in this table?",
        "What is the number of data rows in the table (the header row excluded)?",
    ),
    "columns": (
        "How many columns does the table have?",
        "What is the number of columns in this table?",
        "How many columns wide is the table?",
    ),
    "header": (
        "What is the header of column {n}, counting from the left?",
        "Which name does the table give to column {n} (the leftmost column is column 1)?",
        "What is written in the header row above column {n}, counting columns from the left?",
    ),
    "cell": (
        "What is the value in row {row} of {column}, counting data rows from 1 below the header?",
        "Counting rows from 1 below the header row, what does row {row} hold in {column}?",
        "Which value appears in {column} at data row {row} (the header row is not counted)?",
    ),
    "range": (
        "Placed in a spreadsheet with its header row in row 1 and its first column in column A, "
        "which range does the table cover (for example A1:C4)?",
        "If the table, header row included, started at cell A1 of a spreadsheet, which range "
        "would it cover (answer like A1:C4)?",
        "Written as a spreadsheet range from A1, with the header as row 1, which cells does the "
        "whole table span (answer like A1:C4)?",
    ),
    "has_header": (
        "Does the table have a header row? Answer yes or no.",
        "Is there a header row naming the columns of this table? Answer yes or no.",
        "Answer yes or no: does this table start with a row of column names?",
    ),
}

#: A longer header name is not quoted in a cell probe: the column is named by its number.
MAX_NAME_CHARS = 80

#: Answers of a yes/no probe.
YES, NO = "yes", "no"


class ProbeError(TqaforgeError):
    """The probe options cannot be used (unknown kind or capability, no tables, bad numbers)."""


class ProbeSkipped(TqaforgeError):
    """No probe of a kind can be asked about a table; the message says why."""


@dataclass(frozen=True, slots=True)
class Probe:
    """One probe about one table: its kind, words, exact answer and what was drawn."""

    kind: str
    text: str
    answer: str
    template: int
    params: Mapping[str, Any] = field(default_factory=dict)


def has_header(table: Table) -> bool:
    """True when a header cell holds text; a header of blank names only is no header."""
    return any(name.strip() for name in table.header)


def unambiguous_cells(table: Table) -> list[tuple[int, int]]:
    """The data cells (row, col; 0-based, header excluded) whose value is non-blank and occurs
    nowhere else in the table's data, compared as answers are (:func:`normalize_cell`)."""
    counts: Counter[str] = Counter()
    for row in table.row_tuples():
        counts.update(normalize_cell(cell) for cell in row)
    return [
        (r, c)
        for r, row in enumerate(table.row_tuples())
        for c, cell in enumerate(row)
        if cell.strip() and counts[normalize_cell(cell)] == 1
    ]


def column_phrase(table: Table, col: int) -> str:
    """How a probe names column ``col`` (0-based): by its header when that name is non-blank,
    unique in the header and quotable on one line (``the "pop" column``: no quote or line break,
    at most :data:`MAX_NAME_CHARS` characters), else by its number (``column 3``)."""
    name = table.header[col]
    quotable = '"' not in name and "\n" not in name and "\r" not in name and len(name) <= MAX_NAME_CHARS
    if name.strip() and quotable and table.header.count(name) == 1:
        return f'the "{name}" column'
    return f"column {col + 1}"


def draw_probes(table: Table, kind: str, seed: int, per_table: int = 1) -> list[Probe]:
    """The probes of ``kind`` about ``table`` drawn with ``seed`` (module docs): one for a kind
    without choices (rows, columns, range, has_header), up to ``per_table`` distinct ones for
    header and cell probes. Raises :class:`ProbeSkipped` when none can be asked."""
    if kind not in TEMPLATES:
        raise ProbeError(f"unknown probe kind {kind!r}", hint="kinds: " + ", ".join(PROBE_KINDS))
    rng = rng_for(table, f"probe:{kind}", seed)
    templates = TEMPLATES[kind]
    if kind in ("header", "cell"):
        if kind == "header":
            choices: list[tuple[int, ...]] = [(c,) for c, name in enumerate(table.header) if name.strip()]
            if not choices:
                raise ProbeSkipped("every header name is blank: no header probe can be asked")
        else:
            choices = list(unambiguous_cells(table))
            if not choices:
                raise ProbeSkipped(_no_cell_reason(table))
        picked = sorted(rng.sample(choices, min(per_table, len(choices))))
        probes = []
        for choice in picked:
            template = rng.randrange(len(templates))
            if kind == "header":
                (col,) = choice
                text = templates[template].format(n=col + 1)
                probes.append(Probe(kind, text, table.header[col], template, {"column": col + 1}))
            else:
                row, col = choice
                text = templates[template].format(row=row + 1, column=column_phrase(table, col))
                probes.append(Probe(kind, text, table.cell(row, col), template, {"row": row + 1, "column": col + 1}))
        return probes
    template = rng.randrange(len(templates))
    return [Probe(kind, templates[template], _whole_table_answer(table, kind), template)]


def _whole_table_answer(table: Table, kind: str) -> str:
    """The answer of a probe about the whole table (rows, columns, range, has_header)."""
    if kind == "rows":
        return str(table.n_rows)
    if kind == "columns":
        return str(table.n_cols)
    if kind == "range":
        return table_range(table)
    return YES if has_header(table) else NO


def _no_cell_reason(table: Table) -> str:
    if table.n_rows == 0:
        return "the table has no data rows: no cell probe can be asked"
    if not any(cell.strip() for row in table.row_tuples() for cell in row):
        return "every data cell is empty: no cell probe can be asked"
    return ("every non-empty cell's value appears elsewhere in the table, so any cell probe would be "
            "ambiguous: no cell probe can be asked")


@dataclass(frozen=True)
class ProbeOptions:
    """What to probe: ``kinds`` (default all), ``tables`` (ids or unique prefixes; empty: every
    table), ``seed`` (stored), ``per_table`` (header and cell probes drawn per table), and
    ``capability``: the capability the probes are filed under (default per kind,
    :data:`CAPABILITY_OF`; ``LargeTableUnderstanding`` for a large-table set)."""

    kinds: tuple[str, ...] = PROBE_KINDS
    tables: tuple[str, ...] = ()
    seed: int = 0
    per_table: int = 1
    capability: str | None = None
    created_by: str = "tqaforge"

    def __post_init__(self) -> None:
        object.__setattr__(self, "kinds", tuple(dict.fromkeys(self.kinds)))  # a kind named twice is made once
        object.__setattr__(self, "tables", tuple(self.tables))
        if not self.kinds:
            raise ProbeError("give at least one probe kind", hint="kinds: " + ", ".join(PROBE_KINDS))
        unknown = [k for k in self.kinds if k not in PROBE_KINDS]
        if unknown:
            raise ProbeError(f"unknown probe kind(s) {', '.join(map(repr, unknown))}",
                             hint="kinds: " + ", ".join(PROBE_KINDS))
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed <= MAX_SEED:
            raise ProbeError(f"seed {self.seed!r} is outside 0..{MAX_SEED}", hint=f"give --seed an integer from 0 to {MAX_SEED}",
                             app_hint=f"a seed from 0 to {MAX_SEED}")
        if self.per_table < 1:
            raise ProbeError(f"per_table must be at least 1, got {self.per_table}")
        if self.capability is not None and self.capability not in CAPABILITY.subtypes:
            raise ProbeError(f"{self.capability!r} is not a capability",
                             hint="capabilities: " + ", ".join(CAPABILITY.subtypes))


@dataclass(frozen=True, slots=True)
class ProbeSkip:
    """A (table, kind) that got no probe, and why."""

    table_id: str
    kind: str
    reason: str


@dataclass
class ProbeSummary:
    """What one run made: probes new and already stored per kind, and the (table, kind) pairs
    that got none. It *failed* when it asked for probes and none exists afterwards."""

    seed: int
    tables: int = 0
    new: dict[str, int] = field(default_factory=dict)
    present: dict[str, int] = field(default_factory=dict)
    skipped: list[ProbeSkip] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """True when no probe was made or found (every asked-for pair was skipped)."""
        return not sum(self.new.values()) and not sum(self.present.values())

    def lines(self, *, max_skipped: int = 10) -> list[str]:
        """The report: totals, per kind, then the skipped (table, kind) pairs with their reasons."""
        new, present = sum(self.new.values()), sum(self.present.values())
        lines = [f"{self.tables} tables, seed {self.seed}: {new} new probes, {present} already stored, "
                 f"{len(self.skipped)} (table, kind) pairs skipped"]
        for kind in PROBE_KINDS:
            if kind in self.new or kind in self.present:
                lines.append(f"  {kind}: {self.new.get(kind, 0)} new, {self.present.get(kind, 0)} already stored")
        for skip in self.skipped[:max_skipped]:
            lines.append(f"  skipped {skip.kind} on table {skip.table_id[:12]}: {skip.reason}")
        if len(self.skipped) > max_skipped:
            lines.append(f"  ... and {len(self.skipped) - max_skipped} more skipped pairs")
        return lines

    def as_dict(self) -> dict[str, Any]:
        """The counts and skips as JSON-able data."""
        return {"seed": self.seed, "tables": self.tables, "new": dict(self.new), "present": dict(self.present),
                "skipped": [{"table_id": s.table_id, "kind": s.kind, "reason": s.reason} for s in self.skipped],
                "failed": self.failed}


def generate_probes(ws: Workspace, options: ProbeOptions, *, on_progress: Progress | None = None) -> ProbeSummary:
    """Make and store the probes of ``options`` (module docs), one table (and transaction) at a
    time, so a large table is held once and an interrupted run keeps what it stored."""
    table_ids = _table_ids(ws, options.tables)
    summary = ProbeSummary(seed=options.seed, tables=len(table_ids))
    for done, table_id in enumerate(table_ids):
        probe_table(ws, table_id, options, summary)
        if on_progress is not None:
            on_progress(done + 1, len(table_ids), table_id[:12])
    return summary


def probe_table(ws: Workspace, table_id: str, options: ProbeOptions, summary: ProbeSummary,
                meta: Mapping[str, Any] | None = None) -> None:
    """Draw and store one table's probes in one transaction; count them (and the skips) in
    ``summary``. ``meta``: more keys for each new question's ``meta`` (the large-table set's
    token bucket, :mod:`tqaforge.generation.large_tables`)."""
    with ws.session() as s:
        record = s.get(TableRecord, table_id)
        if record is None:  # removed meanwhile
            return
        try:
            table = record.to_table()
        except TableError as exc:  # a store written by another tool may hold anything
            summary.skipped += [ProbeSkip(table_id, kind, f"the stored table cannot be read: {exc}")
                                for kind in options.kinds]
            return
        questions: dict[str, dict[str, Any]] = {}
        answers: dict[str, dict[str, Any]] = {}
        kind_of: dict[str, str] = {}
        now = utcnow()
        for kind in options.kinds:
            try:
                probes = draw_probes(table, kind, options.seed, options.per_table)
            except ProbeSkipped as skipped:
                summary.skipped.append(ProbeSkip(table_id, kind, str(skipped)))
                continue
            for probe in probes:
                row = _question_row(table_id, probe, options, now)
                if meta:
                    row["meta"] = {**row["meta"], **meta}
                questions[row["id"]] = row
                answers[row["id"]] = _answer_row(row["id"], probe.answer, options.created_by, now)
                kind_of[row["id"]] = kind
        inserted = insert_new(s, Question, list(questions.values()))
        # An answer comes with its question: one already stored keeps the answers it has.
        insert_new(s, Answer, [a for qid, a in answers.items() if qid in inserted])
    for qid, kind in kind_of.items():
        counts = summary.new if qid in inserted else summary.present
        counts[kind] = counts.get(kind, 0) + 1


def _table_ids(ws: Workspace, wanted: Sequence[str]) -> list[str]:
    with ws.session() as s:
        if not wanted:
            ids = list(s.exec(select(TableRecord.id).order_by(TableRecord.id)).all())
        else:
            ids = sorted({get_by_prefix(s, TableRecord, t).id for t in wanted})
    if not ids:
        raise ProbeError("no tables to probe", hint="import tables first: tqaforge tables import PATH")
    return ids


def _question_row(table_id: str, probe: Probe, options: ProbeOptions, now: Any) -> dict[str, Any]:
    capability = options.capability or CAPABILITY_OF[probe.kind]
    qid = Question.make_id(table_id, probe.text, capability)
    return {
        "id": qid,
        "table_id": table_id,
        "text": probe.text,
        "taxonomy": CAPABILITY.name,
        "qtype": CAPABILITY.type_of(capability),
        "subtype": capability,
        # A cell probe is answered by one cell: FREB-TQA's extraction.
        "question_type": QuestionType.EXTRACTION.value if probe.kind == "cell" else None,
        "status": QuestionStatus.PROPOSED.value,
        "origin": Origin.RULE.value,
        "created_by": options.created_by,
        "source": None,
        "source_id": None,
        "relevant_cells": None,
        "lineage": None,
        "meta": {"probe": {"kind": probe.kind, "template": probe.template, **probe.params}},
        "round": None,
        "seed": options.seed,
        "created_at": now,
        "updated_at": now,
    }


def _answer_row(qid: str, answer: str, created_by: str, now: Any) -> dict[str, Any]:
    return {
        "id": probe_answer_id(qid, [answer]),
        "question_id": qid,
        "value": answer,
        "values": [answer],
        "status": AnswerStatus.GOLD.value,
        "origin": Origin.RULE.value,
        "method": "probe",
        "votes": None,
        "route": None,
        "created_by": created_by,
        "created_at": now,
    }

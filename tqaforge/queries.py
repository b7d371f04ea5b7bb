"""Read-only queries over a workspace: listings, lookups by id prefix, the pipeline funnel, and
the one rule for which answer of a question is trusted as its gold (:func:`trusted_answers`).

The CLI, the app and the tests all call these; none of them query the store on their own.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Generic, Iterable, Iterator, Mapping, Sequence, TypeVar

from sqlalchemy import String, func, text
from sqlalchemy import select as sa_select
from sqlmodel import Session, SQLModel, col, select

from tqaforge.errors import NotFound, TqaforgeError
from tqaforge.files import atomic_write_text, modules_source_hash
from tqaforge.funnel import Funnel as Funnel  # the funnel counts without the records (tqaforge.funnel)
from tqaforge.funnel import funnel as funnel
from tqaforge.ids import labelstudio_annotator
from tqaforge.people import find_annotator, people_names
from tqaforge.schemas.enums import AnswerStatus, QuestionStatus, VariantStatus
from tqaforge.schemas.records import (
    Annotation,
    AnnotationTask,
    Answer,
    AnswerCandidate,
    LabelStudioTaskCopy,
    LLMCall,
    Question,
    Release,
    TableRecord,
    Variant,
)
from tqaforge.store import Workspace
from tqaforge.tables.corner import corner, first_items
from tqaforge.tables.table import Table
from tqaforge.tables.tokens import (
    BUCKET_NAMES,
    DEFAULT_ENCODING,
    DEFAULT_SERIALIZATION,
    BucketCounts,
    check_count,
    check_encoding,
    check_serialization,
    pick_per_bucket,
    table_tokens,
    tokenizer_version,
)

R = TypeVar("R", bound=SQLModel)
T = TypeVar("T")

#: The most rows any listing returns at once (a bigger --limit is refused, not silently cut).
MAX_LIMIT = 10_000
#: What `tables show` prints of a table by default.
SHOW_ROWS = 30
SHOW_COLS = 12
#: The most columns a table view holds (SQLite takes at most 127 arguments per function call).
MAX_SHOW_COLS = 100


class ListingError(TqaforgeError):
    """A listing was asked for with an impossible window or an unknown filter value."""


@dataclass(frozen=True)
class Page(Generic[T]):
    """One window of a listing and how many records match in all.

    Iterating, ``len`` and indexing see the items, so a page stands in for a list; ``total``
    lets a listing say "50 of 811" instead of stopping at 50 without a word."""

    items: list[T]
    total: int
    offset: int = 0
    limit: int = 50

    def __iter__(self) -> Iterator[T]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> T:
        return self.items[index]

    def __bool__(self) -> bool:
        return bool(self.items)

    @property
    def more(self) -> int:
        """How many matching records come after this page."""
        return max(0, self.total - self.offset - len(self.items))

    def describe(self, noun: str) -> str:
        """E.g. "showing 1-50 of 811 tables (next: --offset 50)" or "no tables"."""
        if self.total == 0:
            return f"no {noun}"
        if not self.items:
            return f"none of the {self.total:,} {noun} at --offset {self.offset:,}"
        first, last = self.offset + 1, self.offset + len(self.items)
        text_ = f"showing {first:,}-{last:,} of {self.total:,} {noun}"
        return text_ + (f" (next: --offset {last})" if self.more else "")


def check_window(limit: int, offset: int) -> None:
    """Refuse a negative offset or a limit outside 1..MAX_LIMIT (PostgreSQL would raise)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ListingError(f"limit {limit!r} is outside 1..{MAX_LIMIT:,}", hint=f"give --limit from 1 to {MAX_LIMIT:,} and page with --offset")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ListingError(f"offset {offset!r} is negative", hint="give --offset 0 or more")


def check_choice(value: str | None, known: Sequence[str], flag: str) -> None:
    """Refuse a filter value no record can have, instead of listing nothing."""
    if value is not None and value not in known:
        raise ListingError(f"unknown {flag.lstrip('-')} {value!r}", hint=f"give {flag} one of: {', '.join(known)}")


def get_by_prefix(session: Session, model: type[R], prefix: str) -> R:
    """The one record whose id starts with ``prefix`` (ids are long hashes; 6+ chars usually do)."""
    prefix = prefix.strip()
    if not prefix:
        raise NotFound(f"give a {model.__name__} id")
    rows = session.exec(select(model).where(model.id.startswith(prefix)).limit(2)).all()  # type: ignore[attr-defined]
    if not rows:
        raise NotFound(f"no {model.__name__} with id {prefix!r}", hint="list them to see the ids")
    if len(rows) > 1:
        raise NotFound(f"id {prefix!r} matches several {model.__name__} records", hint="give more characters")
    return rows[0]


#: How far each answer status is trusted as a question's gold, most trusted first (TableBench's
#: flow: agents vote, people verify). People's word comes first: a correction, then a
#: verification, then the gold of a curated benchmark we imported, then the agents' agreement.
#: Rejected and inconsistent answers are never anyone's gold, whatever else a question has.
ANSWER_TRUST: tuple[AnswerStatus, ...] = (
    AnswerStatus.CORRECTED,
    AnswerStatus.VERIFIED,
    AnswerStatus.GOLD,
    AnswerStatus.CONSISTENT,
)
#: The least trusted status that people have vouched for (a curated benchmark's gold counts).
CHECKED_BY_PEOPLE = AnswerStatus.GOLD

_IN_BATCH = 500  # ids per IN (...) list: well under SQLite's and PostgreSQL's parameter limits


def trusted_answers(
    session: Session, question_ids: Iterable[str], *, at_least: AnswerStatus = AnswerStatus.CONSISTENT
) -> dict[str, Answer]:
    """The trusted answer of each question that has one: the best status in
    :data:`ANSWER_TRUST` down to ``at_least`` (``CHECKED_BY_PEOPLE`` leaves out the agents'
    agreement); among answers of the same status, the newest (then the smallest id).

    >>> with ws.session() as s:                                       # doctest: +SKIP
    ...     gold = trusted_answers(s, ["q1", "q2"])                   # {"q1": Answer(...)}
    """
    statuses, rank = _trusted_statuses(at_least)
    ids = sorted(set(question_ids))
    best: dict[str, Answer] = {}
    for start in range(0, len(ids), _IN_BATCH):
        rows = session.exec(
            select(Answer)
            .where(Answer.question_id.in_(ids[start : start + _IN_BATCH]), Answer.status.in_(statuses))  # type: ignore[attr-defined]
            .order_by(Answer.created_at.desc(), Answer.id)  # type: ignore[attr-defined]
        ).all()
        _keep_trusted(best, ((a.question_id, a.status, a) for a in rows), rank)
    return best


def trusted_answer_values(
    session: Session, question_ids: Iterable[str], *, at_least: AnswerStatus = AnswerStatus.CONSISTENT
) -> dict[str, list[str]]:
    """The ``values`` of each question's :func:`trusted_answers` answer (the same choice), read
    as columns, without building a record per answer (the agreement report's gold)."""
    statuses, rank = _trusted_statuses(at_least)
    answers = Answer.__table__.c  # type: ignore[attr-defined]
    ids = sorted(set(question_ids))
    best: dict[str, list[str]] = {}
    for start in range(0, len(ids), _IN_BATCH):
        rows = session.connection().execute(
            sa_select(answers.question_id, answers.status, answers["values"])
            .where(answers.question_id.in_(ids[start : start + _IN_BATCH]), answers.status.in_(statuses))
            .order_by(answers.created_at.desc(), answers.id)
        )
        _keep_trusted(best, rows, rank)
    return best


def _trusted_statuses(at_least: AnswerStatus) -> tuple[list[str], dict[str, int]]:
    if at_least not in ANSWER_TRUST:
        raise ValueError(f"{at_least!r} is never trusted; give one of {', '.join(ANSWER_TRUST)}")
    statuses = [status.value for status in ANSWER_TRUST[: ANSWER_TRUST.index(at_least) + 1]]
    return statuses, {status: i for i, status in enumerate(statuses)}


def _keep_trusted(best: dict[str, Any], rows: Iterable[Any], rank: Mapping[str, int]) -> None:
    """Per question, the first row of the best status (rows come newest first)."""
    status_of: dict[str, str] = {}
    for question_id, status, payload in rows:  # newest first: a later answer of the same status replaces nothing
        held = status_of.get(question_id)
        if held is None or rank[status] < rank[held]:
            best[question_id], status_of[question_id] = payload, status


def tables_by_id(session: Session, table_ids: Iterable[str]) -> dict[str, Table]:
    """The stored tables of ``table_ids`` as :class:`Table` values (ids not stored are left out)."""
    ids = sorted(set(table_ids))
    tables: dict[str, Table] = {}
    for start in range(0, len(ids), _IN_BATCH):
        for record in session.exec(select(TableRecord).where(TableRecord.id.in_(ids[start : start + _IN_BATCH]))).all():  # type: ignore[attr-defined]
            tables[record.id] = record.to_table()
    return tables


@dataclass(frozen=True)
class TableSummary:
    """What a listing shows of a table: its size and provenance, never its cells."""

    id: str
    n_rows: int
    n_cols: int
    numeric_share: float
    caption: str | None
    source: str | None
    licence: str | None
    imported_from: str | None
    origin: str
    created_at: datetime
    #: Tokens in the listing's serialization and encoding, when the listing counted them.
    tokens: int | None = None


#: The columns of ``tables`` a summary reads: everything but ``header`` and ``rows``.
_SUMMARY_COLUMNS = (
    TableRecord.id, TableRecord.n_rows, TableRecord.n_cols, TableRecord.numeric_share, TableRecord.caption,
    TableRecord.source, TableRecord.licence, TableRecord.imported_from, TableRecord.origin, TableRecord.created_at,
)


def _table_summaries(s: Session, query: Any) -> list[TableSummary]:
    return [TableSummary(*row) for row in s.exec(query).all()]


def list_tables(
    ws: Workspace, *, limit: int = 50, offset: int = 0, min_rows: int | None = None, max_rows: int | None = None,
    min_numeric_share: float | None = None, tokens_min: int | None = None, tokens_max: int | None = None,
    serialization: str | None = None, encoding: str | None = None,
) -> Page[TableSummary]:
    """Tables, oldest import first, optionally by size, numeric share and token length.

    Without a token option it reads only the columns listed (no cells, whatever the size). With
    one (``tokens_min``/``tokens_max``, inclusive, or a ``serialization`` or ``encoding`` to count
    in), each item carries its ``tokens`` in ``serialization`` (default markdown) and
    ``encoding`` (default cl100k_base), counted by :func:`table_token_counts`; a token filter
    counts every table the other filters keep."""
    check_window(limit, offset)
    counting = any(v is not None for v in (tokens_min, tokens_max, serialization, encoding))
    fmt = check_serialization(serialization or DEFAULT_SERIALIZATION)
    enc = check_encoding(encoding or DEFAULT_ENCODING)
    for bound, flag in ((tokens_min, "--tokens-min"), (tokens_max, "--tokens-max")):
        if bound is not None:
            check_count(bound, flag)
    if tokens_min is not None and tokens_max is not None and tokens_min > tokens_max:
        raise ListingError(f"--tokens-min {tokens_min} is above --tokens-max {tokens_max}", hint="no table can match; swap them")
    where = []
    if min_rows is not None:
        where.append(col(TableRecord.n_rows) >= min_rows)
    if max_rows is not None:
        where.append(col(TableRecord.n_rows) <= max_rows)
    if min_numeric_share is not None:
        where.append(col(TableRecord.numeric_share) >= min_numeric_share)
    order = (col(TableRecord.created_at), col(TableRecord.id))
    if tokens_min is None and tokens_max is None:
        with ws.session() as s:
            # sqlmodel's select() is typed for up to four columns; the summary reads ten
            q = select(*_SUMMARY_COLUMNS).where(*where).order_by(*order).offset(offset).limit(limit)  # type: ignore[call-overload]
            items = _table_summaries(s, q)
            total = s.exec(select(func.count()).select_from(TableRecord).where(*where)).one()
        if counting:
            counts = table_token_counts(ws, serialization=fmt, encoding=enc, table_ids=[r.id for r in items])
            items = [replace(r, tokens=counts.get(r.id)) for r in items]
        return Page(items, total, offset, limit)
    with ws.session() as s:
        ids = list(s.exec(select(TableRecord.id).where(*where).order_by(*order)).all())
    counts = table_token_counts(ws, serialization=fmt, encoding=enc, table_ids=ids)
    kept = [
        i for i, n in counts.items()  # in the order of ids
        if (tokens_min is None or n >= tokens_min) and (tokens_max is None or n <= tokens_max)
    ]
    window = kept[offset : offset + limit]
    found: dict[str, TableSummary] = {}
    with ws.session() as s:
        for start in range(0, len(window), _IN_BATCH):
            q = select(*_SUMMARY_COLUMNS).where(col(TableRecord.id).in_(window[start : start + _IN_BATCH]))  # type: ignore[call-overload]
            found.update((r.id, r) for r in _table_summaries(s, q))
    items = [replace(found[i], tokens=counts[i]) for i in window if i in found]
    return Page(items, len(kept), offset, limit)


# Token counts by (table id, serialization, encoding). A table id is the hash of its header and
# rows, which are all a serialization reads, so a count never goes stale while the code that
# serializes and counts stays the same: it is kept for the life of the process (bounded; emptied
# when full) and in a file per serialization and encoding under WORKSPACE/.cache/tokens/
# (:func:`_token_cache`), read by the next process.
_TOKEN_COUNTS: dict[tuple[str, str, str], int] = {}
_TOKEN_COUNTS_KEPT = 500_000
# Tables loaded at once to be counted.
_COUNT_BATCH = 100
#: The layout of a token cache file; a file of another format is not read.
TOKEN_CACHE_FORMAT = 1


@functools.cache
def _token_code_key() -> str:
    """What the counts depend on besides a table's cells: the tokenizer's version and the code of
    the serializations and the counting (a file written by other code is not read)."""
    return modules_source_hash(
        ("tqaforge.tables.serialize", "tqaforge.tables.writers", "tqaforge.tables.tokens"), salt=tokenizer_version()
    )


def _token_cache_path(ws: Workspace, serialization: str, encoding: str) -> Path:
    return ws.paths.cache / "tokens" / f"{encoding}-{serialization}.json"


def _token_cache(ws: Workspace, serialization: str, encoding: str) -> dict[str, int]:
    """The counts kept in the workspace's token cache file (empty when it is missing, damaged,
    of another format or written by other code: it is then written again)."""
    try:
        data = json.loads(_token_cache_path(ws, serialization, encoding).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != TOKEN_CACHE_FORMAT or data.get("code") != _token_code_key():
        return {}
    counts = data.get("counts")
    if not isinstance(counts, dict):
        return {}
    return {k: v for k, v in counts.items() if isinstance(k, str) and type(v) is int and v >= 0}


def _store_token_cache(ws: Workspace, serialization: str, encoding: str, counts: dict[str, int]) -> None:
    """Replace the token cache file with ``counts`` (atomically); a workspace that cannot be
    written to (read-only, full) just keeps no cache."""
    path = _token_cache_path(ws, serialization, encoding)
    data = {"format": TOKEN_CACHE_FORMAT, "code": _token_code_key(), "counts": counts}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(data, separators=(",", ":")))
    except OSError:
        pass


def table_token_counts(
    ws: Workspace,
    *,
    serialization: str = DEFAULT_SERIALIZATION,
    encoding: str = DEFAULT_ENCODING,
    table_ids: Iterable[str] | None = None,
) -> dict[str, int]:
    """Table id -> tokens in ``serialization`` and ``encoding``, for the tables ``table_ids``
    (stored ones; default: every table), in the order given (default: the store's).

    Counted on demand, a batch of tables loaded at a time (TableBench's 586 tables: about 0.3 s
    in markdown, 0.5 s in HTML), and kept in the process and in the workspace's cache file."""
    check_serialization(serialization)
    check_encoding(encoding)
    with ws.session() as s:
        if table_ids is None:
            ids = list(s.exec(select(TableRecord.id)).all())
        else:
            # Only stored ones: the caches may know tables of another workspace.
            wanted = list(dict.fromkeys(table_ids))
            stored: set[str] = set()
            for start in range(0, len(wanted), _IN_BATCH):
                chunk = wanted[start : start + _IN_BATCH]
                stored.update(s.exec(select(TableRecord.id).where(col(TableRecord.id).in_(chunk))).all())
            ids = [i for i in wanted if i in stored]
        out: dict[str, int] = {}
        missing = []
        for i in ids:
            cached = _TOKEN_COUNTS.get((i, serialization, encoding))
            if cached is None:
                missing.append(i)
            else:
                out[i] = cached
        on_file: dict[str, int] = {}
        if missing:
            on_file = _token_cache(ws, serialization, encoding)
            out.update((i, on_file[i]) for i in missing if i in on_file)
            missing = [i for i in missing if i not in on_file]
        counted: dict[str, int] = {}
        for start in range(0, len(missing), _COUNT_BATCH):
            for table_id, table in tables_by_id(s, missing[start : start + _COUNT_BATCH]).items():
                counted[table_id] = table_tokens(table, serialization, encoding)
    if counted:
        _store_token_cache(ws, serialization, encoding, {**on_file, **counted})
    out.update(counted)
    if len(_TOKEN_COUNTS) + len(out) > _TOKEN_COUNTS_KEPT:
        _TOKEN_COUNTS.clear()
    for table_id, n in out.items():
        _TOKEN_COUNTS[(table_id, serialization, encoding)] = n
    return {i: out[i] for i in ids if i in out}


def token_buckets(
    ws: Workspace, *, serializations: Sequence[str] = (DEFAULT_SERIALIZATION,), encoding: str = DEFAULT_ENCODING
) -> BucketCounts:
    """How many stored tables fall in each of the capability-based TableBench's token buckets,
    per serialization (what ``tqaforge tables stats`` prints)."""
    fmts = tuple(dict.fromkeys(check_serialization(f) for f in serializations))
    check_encoding(encoding)
    summary = BucketCounts(encoding=encoding, serializations=fmts)
    for fmt in fmts:
        counts = table_token_counts(ws, serialization=fmt, encoding=encoding)
        summary.tables = len(counts)
        for n in counts.values():
            summary.add(fmt, n)
    return summary


@dataclass(frozen=True)
class LargeTablePick:
    """A table picked for a token bucket (the ``large_table`` probe set)."""

    table_id: str
    bucket: str
    tokens: int


def pick_large_tables(
    ws: Workspace,
    *,
    per_bucket: int,
    seed: int,
    serialization: str = DEFAULT_SERIALIZATION,
    encoding: str = DEFAULT_ENCODING,
    buckets: Sequence[str] = BUCKET_NAMES,
    table_ids: Iterable[str] | None = None,
) -> list[LargeTablePick]:
    """Up to ``per_bucket`` stored tables per token bucket (of ``table_ids``, default all),
    drawn with ``seed`` (:func:`tqaforge.tables.tokens.pick_per_bucket`: the same workspace
    tables, numbers and seed give the same picks); in bucket order, then by table id. A bucket
    no real table reaches stays short: grow one (``tqaforge tables grow``)."""
    counts = table_token_counts(ws, serialization=serialization, encoding=encoding, table_ids=table_ids)
    picked = pick_per_bucket(counts, per_bucket, seed, buckets)
    return [LargeTablePick(i, name, counts[i]) for name, ids in picked.items() for i in ids]


def answered_questions(ws: Workspace, limit: int = 50, offset: int = 0) -> Page[str]:
    """Ids of questions with an answer, one page of them: those the agents answered first (sorted),
    then those whose only answer is a gold one (imported, or a probe's by rule: no model needed);
    ``total`` counts both, so a pager reaches every one."""
    by_agents_q = select(AnswerCandidate.question_id).distinct()
    gold_only_q = (select(Answer.question_id).distinct()
                   .where(col(Answer.question_id).not_in(select(AnswerCandidate.question_id).distinct())))
    with ws.session() as s:
        n_agents = s.exec(select(func.count()).select_from(by_agents_q.subquery())).one()
        n_gold = s.exec(select(func.count()).select_from(gold_only_q.subquery())).one()
        ids = list(s.exec(by_agents_q.order_by(col(AnswerCandidate.question_id)).offset(offset).limit(limit)).all())
        if len(ids) < limit:
            ids += s.exec(gold_only_q.order_by(col(Answer.question_id))
                          .offset(max(offset - n_agents, 0)).limit(limit - len(ids))).all()
    return Page(ids, n_agents + n_gold, offset, limit)


def count_questions_by_table(ws: Workspace, table_ids: Sequence[str]) -> dict[str, int]:
    with ws.session() as s:
        rows = s.exec(
            select(Question.table_id, func.count()).where(Question.table_id.in_(list(table_ids))).group_by(Question.table_id)  # type: ignore[attr-defined]
        ).all()
    return {tid: n for tid, n in rows}


@dataclass(frozen=True)
class TableView:
    """A bounded corner of a table: the first rows and columns, and the size of the whole."""

    header: list[str]
    rows: list[list[str]]
    n_rows: int
    n_cols: int

    @property
    def rows_left_out(self) -> int:
        return self.n_rows - len(self.rows)

    @property
    def cols_left_out(self) -> int:
        return self.n_cols - len(self.header)

    @property
    def complete(self) -> bool:
        return not self.rows_left_out and not self.cols_left_out

    def describe(self) -> str:
        """E.g. "showing 30 of 1,000 rows and 12 of 1,000,000 columns"."""
        return (f"showing {len(self.rows):,} of {self.n_rows:,} rows and "
                f"{len(self.header):,} of {self.n_cols:,} columns")


@dataclass
class TableDetail:
    """One table for `tables show`: its summary, a bounded view of its cells, its questions."""

    table: TableSummary
    view: TableView
    questions: Page[Question]
    answers: dict[str, list[Answer]] = field(default_factory=dict)

    @property
    def header(self) -> list[str]:
        """The header of the shown columns (``view.header``)."""
        return self.view.header

    @property
    def rows(self) -> list[list[str]]:
        """The shown rows, cut to the shown columns (``view.rows``)."""
        return self.view.rows


def show_table(
    ws: Workspace,
    table_id: str,
    *,
    max_rows: int = SHOW_ROWS,
    max_cols: int = SHOW_COLS,
    max_questions: int = 50,
) -> TableDetail:
    """One table (id or unique prefix) with the first ``max_rows`` x ``max_cols`` cells and its
    first ``max_questions`` questions with their answers. On SQLite and PostgreSQL the database
    cuts the corner out, so a huge table is never loaded whole."""
    if isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 0:
        raise ListingError(f"max rows {max_rows!r} is negative", hint="give --max-rows 0 or more")
    if isinstance(max_cols, bool) or not isinstance(max_cols, int) or not 1 <= max_cols <= MAX_SHOW_COLS:
        raise ListingError(f"max columns {max_cols!r} is outside 1..{MAX_SHOW_COLS}", hint=f"give --max-cols from 1 to {MAX_SHOW_COLS}")
    check_window(max_questions, 0)
    with ws.session() as s:
        summary = _summary_by_prefix(s, table_id)
        view = table_view(s, summary, max_rows, max_cols)
        where = Question.table_id == summary.id
        questions = list(s.exec(select(Question).where(where).order_by(Question.subtype, Question.id).limit(max_questions)).all())
        total = s.exec(select(func.count()).select_from(Question).where(where)).one()
        answers: dict[str, list[Answer]] = {q.id: [] for q in questions}
        if questions:
            for a in s.exec(select(Answer).where(Answer.question_id.in_(list(answers)))).all():  # type: ignore[attr-defined]
                answers[a.question_id].append(a)
    return TableDetail(table=summary, view=view, questions=Page(questions, total, 0, max_questions), answers=answers)


def _summary_by_prefix(s: Session, prefix: str) -> TableSummary:
    """Like :func:`get_by_prefix` for tables, reading no cells."""
    prefix = prefix.strip()
    if not prefix:
        raise NotFound("give a table id", hint="`tqaforge tables list` shows the ids")
    rows = _table_summaries(s, select(*_SUMMARY_COLUMNS).where(col(TableRecord.id).startswith(prefix)).limit(2))  # type: ignore[call-overload]
    if not rows:
        raise NotFound(f"no table with id {prefix!r}", hint="`tqaforge tables list` shows the ids")
    if len(rows) > 1:
        raise NotFound(f"id {prefix!r} matches several tables", hint="give more characters of the id")
    return rows[0]


def table_view(s: Session, table: TableSummary, max_rows: int, max_cols: int) -> TableView:
    """The first ``max_rows`` x ``max_cols`` cells of a stored table."""
    n = min(max_rows, table.n_rows)
    m = min(max_cols, table.n_cols)
    dialect = s.get_bind().dialect.name
    if dialect == "sqlite":
        header, rows = _corner_sqlite(s, table.id, n, m)
    elif dialect == "postgresql":
        header, rows = _corner_postgresql(s, table.id, n, m)
    else:  # no JSON path functions we rely on: load the record (small databases only)
        record = s.get(TableRecord, table.id)
        assert record is not None
        header, rows = list(record.header[:m]), [list(r[:m]) for r in record.rows[:n]]
    return TableView(header=header, rows=rows, n_rows=table.n_rows, n_cols=table.n_cols)


def _corner_sqlite(s: Session, table_id: str, n: int, m: int) -> tuple[list[str], list[list[str]]]:
    # The stored JSON is read as a blob, chunk by chunk, only as far as the corner reaches: any
    # JSON function of SQLite (json_extract) loads and parses the whole text, once per call (a
    # 2.97M-row table took 39 s and 8.4 GB to show 30 rows).
    conn = s.connection()
    rowid = conn.execute(text("SELECT rowid FROM tables WHERE id = :id"), {"id": table_id}).scalar_one()
    raw = conn.connection.driver_connection
    assert raw is not None
    with raw.blobopen("tables", "header", rowid, readonly=True) as blob:
        header = first_items(blob.read, m)
    with raw.blobopen("tables", "rows", rowid, readonly=True) as blob:
        rows = corner(blob.read, rows=n, cols=m)
    return header, rows


def _corner_postgresql(s: Session, table_id: str, n: int, m: int) -> tuple[list[str], list[list[str]]]:
    # The stored JSON text is read in growing slices from its start (PostgreSQL detoasts and
    # decompresses only the prefix a substring needs); any JSON function or a cast to jsonb
    # converts the whole text first.
    conn = s.connection()

    def reader(column: str) -> Callable[[int], bytes]:
        sql = text(f"SELECT substr({column}::text, :start, :length) FROM tables WHERE id = :id")
        at, length = 1, 1 << 16

        def read(_: int) -> bytes:
            nonlocal at, length
            piece = conn.execute(sql, {"start": at, "length": length, "id": table_id}).scalar_one()
            at += len(piece)
            # Doubling keeps the prefix decompressed again per slice to a constant factor of the
            # bytes used.
            length = min(length * 2, 1 << 23)
            return piece.encode("utf-8")

        return read

    return first_items(reader("header"), m), corner(reader("rows"), rows=n, cols=m)


def list_questions(
    ws: Workspace,
    *,
    table_id: str | None = None,
    subtype: str | None = None,
    status: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> Page[Question]:
    """Questions filtered by table (id prefix), subtype and status, oldest first."""
    check_window(limit, offset)
    check_choice(status, [s.value for s in QuestionStatus], "--status")
    conditions = []
    if table_id:
        conditions.append(Question.table_id.startswith(table_id))  # type: ignore[attr-defined]
    if subtype:
        conditions.append(Question.subtype == subtype)
    if status:
        conditions.append(Question.status == status)
    with ws.session() as s:
        q = select(Question).where(*conditions).order_by(col(Question.created_at), col(Question.id)).offset(offset).limit(limit)
        items = list(s.exec(q).all())
        total = s.exec(select(func.count()).select_from(Question).where(*conditions)).one()
    return Page(items, total, offset, limit)


@dataclass(frozen=True)
class VariantSummary:
    """What `variants list` shows of a variant: never its table."""

    id: str
    question_id: str
    question: str
    perturbation: str
    seed: int | None
    status: str
    answer_effect: str | None
    skip_reason: str | None
    edits: str = ""  # a person's value modification: "r0c1: 4 -> 361; r2c1: 7 -> 9"


def _edits_text(changes: Any) -> str:
    from tqaforge.tables.edits import CellEdit, EditRejected

    parts = []
    for e in ((changes or {}).get("edits") if isinstance(changes, dict) else None) or []:
        try:
            parts.append(CellEdit.from_dict(e).describe())
        except EditRejected:
            continue  # a malformed entry is shown by `variants show`, not in a listing
    return "; ".join(parts)


def list_variants(
    ws: Workspace,
    *,
    question: str | None = None,
    perturbation: str | None = None,
    status: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> Page[VariantSummary]:
    """Stored variants, filtered by question (id prefix), perturbation and status; the ids are
    what `tqaforge variants show` takes."""
    from tqaforge.tables.edits import PERTURBATION_OF  # the names of people's value modifications
    from tqaforge.tables.perturb import PERTURBATIONS  # the names the grid can build

    check_window(limit, offset)
    check_choice(status, [s.value for s in VariantStatus], "--status")
    check_choice(perturbation, [*PERTURBATIONS, *PERTURBATION_OF.values()], "--perturbation")
    conditions = []
    if question:
        conditions.append(Variant.question_id.startswith(question.strip()))  # type: ignore[attr-defined]
    if perturbation:
        conditions.append(Variant.perturbation == perturbation)
    if status:
        conditions.append(Variant.status == status)
    columns = (Variant.id, Variant.question_id, Question.text, Variant.perturbation, Variant.seed,
               Variant.status, Variant.answer_effect, Variant.skip_reason, Variant.changes)
    with ws.session() as s:
        q = (select(*columns).join(Question, Question.id == Variant.question_id).where(*conditions)  # type: ignore[call-overload]
             .order_by(Variant.question_id, Variant.perturbation, Variant.seed, Variant.id).offset(offset).limit(limit))
        items = [
            VariantSummary(v_id, qid, text, name, seed, status, effect, reason, _edits_text(changes))
            for v_id, qid, text, name, seed, status, effect, reason, changes in s.exec(q).all()
        ]
        total = s.exec(select(func.count()).select_from(Variant).where(*conditions)).one()
    return Page(items, total, offset, limit)


def _count_by(s: Session, model: type[SQLModel], column: object | None) -> dict[str, int]:
    if column is None:
        return {"total": s.exec(select(func.count()).select_from(model)).one()}
    rows = s.exec(select(column, func.count()).group_by(column)).all()  # type: ignore[call-overload]
    counts = {str(k): n for k, n in rows}
    counts = {"total": sum(counts.values()), **dict(sorted(counts.items()))}
    return counts


def subtype_counts(ws: Workspace) -> dict[str, int]:
    """Questions per subtype (None grouped as "(none)")."""
    with ws.session() as s:
        rows = s.exec(select(Question.subtype, func.count()).group_by(Question.subtype)).all()
    return {k or "(none)": n for k, n in sorted(rows, key=lambda r: r[0] or "")}


def cost_over_time(ws: Workspace) -> list[tuple[str, float]]:
    """LLM spend per day (``YYYY-MM-DD``, USD), oldest first: the app's cost chart."""
    day = func.substr(func.cast(col(LLMCall.created_at), String), 1, 10)
    with ws.session() as s:
        rows = s.exec(select(day, func.coalesce(func.sum(LLMCall.cost), 0.0)).group_by(day).order_by(day)).all()  # type: ignore[call-overload]
    return [(str(d), float(c)) for d, c in rows]


def annotation_progress(ws: Workspace) -> dict[str, dict[str, int]]:
    """Per annotation kind: tasks by status, and ``annotations`` (labels recorded)."""
    out = _nested_counts(ws, AnnotationTask.kind, AnnotationTask.status)
    for kind, by_annotator in labels_per_annotator(ws).items():
        out.setdefault(kind, {})["annotations"] = sum(by_annotator.values())
    return dict(sorted(out.items()))


def list_releases(ws: Workspace) -> list[Release]:
    """The releases built from this workspace, newest first."""
    with ws.session() as s:
        return list(s.exec(select(Release).order_by(col(Release.created_at).desc(), col(Release.id))).all())


def seed_lineage(ws: Workspace, subtype: str, *, examples: int = 3) -> dict[str, tuple[int, list[str]]]:
    """Which seeds inspired which questions of ``subtype``: per seed shown in a generation prompt,
    how many generated questions it was shown for and a few of their texts."""
    out: dict[str, tuple[int, list[str]]] = {}
    with ws.session() as s:
        rows = s.exec(select(Question.text, Question.lineage).where(Question.subtype == subtype, col(Question.lineage).is_not(None))).all()
    for text_, lineage in rows:
        for seed in (lineage or {}).get("seeds_shown") or []:
            n, shown = out.get(seed, (0, []))
            if len(shown) < examples:
                shown.append(text_)
            out[seed] = (n + 1, shown)
    return dict(sorted(out.items(), key=lambda kv: -kv[1][0]))


def _nested_counts(ws: Workspace, outer: Any, inner: Any) -> dict[str, dict[str, int]]:
    """Rows counted by two columns: ``{outer value: {inner value: n}}``."""
    with ws.session() as s:
        rows = s.exec(select(outer, inner, func.count()).group_by(outer, inner)).all()
    out: dict[str, dict[str, int]] = {}
    for a, b, n in rows:
        out.setdefault(str(a), {})[str(b)] = int(n)
    return out


def annotator_workload(ws: Workspace) -> dict[str, dict[str, int]]:
    """Per annotation kind: task copies pushed to each person (their Label Studio logins resolved
    to annotators, :mod:`tqaforge.people`; a login no person is known by stays as it is)."""
    with ws.session() as s:
        rows = s.exec(select(LabelStudioTaskCopy.kind, LabelStudioTaskCopy.annotator, func.count())  # type: ignore[call-overload]
                      .group_by(LabelStudioTaskCopy.kind, LabelStudioTaskCopy.annotator)).all()
        out: dict[str, dict[str, int]] = {}
        for kind, login, n in rows:
            person = find_annotator(s, labelstudio_annotator(str(login))) or find_annotator(s, str(login))
            who = person.name if person is not None else str(login)
            by_person = out.setdefault(str(kind), {})
            by_person[who] = by_person.get(who, 0) + int(n)
    return out


def labels_per_annotator(ws: Workspace) -> dict[str, dict[str, int]]:
    """Per annotation kind: labels recorded per person (a person's labels from every surface
    count together, under their name); agents' and imported labels under their author string."""
    who = func.coalesce(Annotation.annotator_id, Annotation.annotator)
    with ws.session() as s:
        names = people_names(s)
        rows = s.exec(select(Annotation.kind, who, func.count()).group_by(Annotation.kind, who)).all()  # type: ignore[call-overload]
    out: dict[str, dict[str, int]] = {}
    for kind, key, n in rows:
        out.setdefault(str(kind), {})[names.get(str(key), str(key))] = int(n)
    return out


def labels_by_source(ws: Workspace) -> dict[str, dict[str, int]]:
    """Per annotation kind: labels recorded per source (``app``, ``labelstudio``, ``imported``...),
    so a page can say how many labels a figure leaves out (agreement leaves imported ones out)."""
    with ws.session() as s:
        rows = s.exec(select(Annotation.kind, Annotation.source, func.count())  # type: ignore[call-overload]
                      .group_by(Annotation.kind, Annotation.source)).all()
    out: dict[str, dict[str, int]] = {}
    for kind, source, n in rows:
        out.setdefault(str(kind), {})[str(source)] = int(n)
    return out


def variant_counts(ws: Workspace) -> dict[str, int]:
    """Stored variants per perturbation."""
    with ws.session() as s:
        counts = _count_by(s, Variant, Variant.perturbation)
    counts.pop("total")
    return counts

"""Import table files into a workspace: read, filter, store; one transaction per file.

A file either imports whole or not at all (its transaction rolls back and its error is reported),
and the other files of the same call still import. Re-importing is a no-op: tables are keyed by
their content hash, questions by (table, text, subtype, source id), answers by (question, origin, values).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from datetime import datetime
from typing import Any, Callable, Iterable, Sequence

from sqlalchemy import insert
from sqlmodel import Session, select

from tqaforge.errors import ReaderError, TaxonomyError, TqaforgeError
from tqaforge.schemas.enums import AnswerStatus, Origin, QuestionStatus
from tqaforge.schemas.records import Answer, Question, TableRecord, utcnow
from tqaforge.schemas.taxonomy import BUILTIN
from tqaforge.store import Workspace
from tqaforge.tables.readers import read_path
from tqaforge.tables.source import ReadRecord, ReadResult, SourceItem
from tqaforge.tables.stats import SelectionFilter, TableStats, table_stats
from tqaforge.tables.table import Table

# SQL engines cap the number of bound parameters; look ids up in slices this long.
_ID_CHUNK = 500

#: File endings a directory walk picks up.
TABLE_SUFFIXES = frozenset({".csv", ".tsv", ".json", ".jsonl", ".html", ".htm", ".md", ".markdown", ".xlsx"})

ProgressFn = Callable[[int], None]


@dataclass(frozen=True, slots=True)
class ImportOptions:
    """How to read and what to keep. ``format=None`` detects the format from the file."""

    format: str | None = None
    selection: SelectionFilter = field(default_factory=SelectionFilter)
    strict_headers: bool | None = None  # None: the reader's default for its format
    created_by: str = "tqaforge"


@dataclass(slots=True)
class FileOutcome:
    """What happened to one file."""

    path: str
    format: str | None = None
    records: int = 0
    tables_new: int = 0
    tables_present: int = 0
    questions_new: int = 0
    questions_present: int = 0
    answers_new: int = 0
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (location, reason)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(slots=True)
class ImportSummary:
    """The outcome of one import call over many files."""

    files: list[FileOutcome] = field(default_factory=list)

    def total(self, attribute: str) -> int:
        return sum(getattr(f, attribute) for f in self.files)

    @property
    def failed(self) -> list[FileOutcome]:
        return [f for f in self.files if not f.ok]

    @property
    def rejected(self) -> list[tuple[str, str]]:
        return [r for f in self.files for r in f.rejected]


def import_paths(
    ws: Workspace,
    paths: Sequence[Path | str],
    options: ImportOptions | None = None,
    *,
    on_file: Callable[[str, int], None] | None = None,
    on_progress: ProgressFn | None = None,
) -> ImportSummary:
    """Import every file in ``paths`` (directories are walked); a failing file does not stop
    the others. ``on_file(path, n_records)`` is called once a file is read, ``on_progress(n)``
    as records are stored (for progress bars)."""
    options = options or ImportOptions()
    summary = ImportSummary()
    for path in expand_paths(paths):
        summary.files.append(import_file(ws, path, options, on_file=on_file, on_progress=on_progress))
    return summary


def expand_paths(paths: Iterable[Path | str]) -> list[Path]:
    """Files as given, directories replaced by the files below them (sorted, hidden skipped)."""
    out: list[Path] = []
    for p in map(Path, paths):
        if not p.is_dir():
            out.append(p)
            continue
        for f in sorted(p.rglob("*")):
            hidden = any(part.startswith(".") for part in f.relative_to(p).parts)
            # Directories hold docs next to data; a README is never a table file.
            if f.is_file() and not hidden and f.suffix.lower() in TABLE_SUFFIXES and not f.name.lower().startswith("readme"):
                out.append(f)
    return out


def import_file(
    ws: Workspace,
    path: Path | str,
    options: ImportOptions | None = None,
    *,
    on_file: Callable[[str, int], None] | None = None,
    on_progress: ProgressFn | None = None,
) -> FileOutcome:
    """Read one file and store it in one transaction; errors land in the outcome, not raised."""
    options = options or ImportOptions()
    outcome = FileOutcome(path=str(path))
    try:
        if not Path(path).exists():
            raise ReaderError(str(path), "no such file")
        result = read_path(Path(path), options.format, strict_headers=options.strict_headers)
        outcome.format = result.format
        outcome.records = len(result.records)
        if on_file:
            on_file(str(path), len(result.records))
        _check_items(result)
        with ws.session() as session:
            _store(session, result, options, outcome, on_progress)
    except TqaforgeError as exc:
        outcome.error = str(exc)
        outcome.tables_new = outcome.questions_new = outcome.answers_new = 0
    return outcome


def _check_items(result: ReadResult) -> None:
    """Reject the whole file if an item names an unknown category or a cell off the table."""
    for record in result.records:
        for item in record.items:
            taxonomy = BUILTIN.get(item.taxonomy or "")
            if taxonomy is not None and item.subtype is not None:
                try:
                    taxonomy.validate(item.qtype, item.subtype)
                except TaxonomyError as exc:
                    raise ReaderError(record.location, str(exc).split("\n")[0]) from None
            for r, c in item.relevant_cells or ():
                if not (0 <= r < record.table.n_rows and 0 <= c < record.table.n_cols):
                    raise ReaderError(
                        record.location,
                        f"relevant cell [{r}, {c}] lies outside the "
                        f"{record.table.n_rows}x{record.table.n_cols} table",
                    )


def _existing_ids(session: Session, model: type, ids: Iterable[str]) -> set[str]:
    wanted = list(dict.fromkeys(ids))
    found: set[str] = set()
    for start in range(0, len(wanted), _ID_CHUNK):
        chunk = wanted[start : start + _ID_CHUNK]
        found.update(session.exec(select(model.id).where(model.id.in_(chunk))).all())  # type: ignore[attr-defined]
    return found


def _store(
    session: Session,
    result: ReadResult,
    options: ImportOptions,
    outcome: FileOutcome,
    on_progress: ProgressFn | None,
) -> None:
    stats_by_table: dict[str, TableStats] = {}
    kept: list[ReadRecord] = []
    for record in result.records:
        stats = stats_by_table.setdefault(record.table.id, table_stats(record.table))
        reason = options.selection.rejects(stats)
        if reason:
            outcome.rejected.append((record.location, reason))
        else:
            kept.append(record)

    question_ids = {
        id(item): Question.make_id(r.table.id, item.question, item.subtype, item.source_id)
        for r in kept for item in r.items
    }
    present_tables = _existing_ids(session, TableRecord, (r.table.id for r in kept))
    present_questions = _existing_ids(session, Question, question_ids.values())
    seen_tables: set[str] = set()
    seen_questions: set[str] = set()
    now = utcnow()
    new_tables: list[dict[str, Any]] = []
    new_questions: list[dict[str, Any]] = []
    new_answers: list[dict[str, Any]] = []
    for record in kept:
        tid = record.table.id
        if tid in present_tables or tid in seen_tables:
            outcome.tables_present += tid not in seen_tables
        else:
            new_tables.append(_table_row(record.table, stats_by_table[tid], record.location, options.created_by, now))
        seen_tables.add(tid)
        for item in record.items:
            qid = question_ids[id(item)]
            if qid in present_questions or qid in seen_questions:
                outcome.questions_present += 1
                continue
            seen_questions.add(qid)
            new_questions.append(_question_row(qid, tid, item, record.location, options.created_by, now))
            if item.answers:
                new_answers.append(_answer_row(qid, item, options.created_by, now))
        if on_progress:
            on_progress(1)
    # Bulk Core inserts, parents before children (ORM objects cost ~1 ms each to build).
    for model, rows in ((TableRecord, new_tables), (Question, new_questions), (Answer, new_answers)):
        if rows:
            session.execute(insert(model), rows)
    outcome.tables_new = len(new_tables)
    outcome.questions_new = len(new_questions)
    outcome.answers_new = len(new_answers)
    if on_progress and len(kept) < len(result.records):
        on_progress(len(result.records) - len(kept))


def _table_row(table: Table, stats: TableStats, location: str, created_by: str, now: datetime) -> dict[str, Any]:
    return {
        "id": table.id,
        "header": list(table.header),
        "rows": [list(r) for r in table.rows],
        "caption": table.caption,
        "source": table.source,
        "licence": table.licence,
        "n_rows": stats.n_rows,
        "n_cols": stats.n_cols,
        "numeric_share": stats.numeric_share,
        "imported_from": location,
        "origin": Origin.IMPORT.value,
        "created_by": created_by,
        "created_at": now,
    }


def _question_row(qid: str, table_id: str, item: SourceItem, location: str, created_by: str, now: datetime) -> dict[str, Any]:
    return {
        "id": qid,
        "table_id": table_id,
        "text": item.question,
        "taxonomy": item.taxonomy,
        "qtype": item.qtype,
        "subtype": item.subtype,
        "question_type": None,
        # Questions shipped by a curated benchmark were reviewed by its authors.
        "status": QuestionStatus.ACCEPTED.value,
        "origin": Origin.IMPORT.value,
        "created_by": created_by,
        "source": location,
        "source_id": item.source_id,
        "relevant_cells": [list(c) for c in item.relevant_cells] if item.relevant_cells is not None else None,
        "lineage": None,
        "meta": dict(item.meta) or None,
        "round": None,
        "seed": None,
        "created_at": now,
        "updated_at": now,
    }


def _answer_row(qid: str, item: SourceItem, created_by: str, now: datetime) -> dict[str, Any]:
    values = list(item.answers)
    return {
        "id": Answer.make_id(qid, Origin.IMPORT, values),
        "question_id": qid,
        "value": ", ".join(values),  # display form; ``values`` is the truth
        "values": values,
        "status": AnswerStatus.GOLD.value,
        "origin": Origin.IMPORT.value,
        "method": "import",
        "votes": None,
        "created_by": created_by,
        "created_at": now,
    }


def table_from_record(record: TableRecord) -> Table:
    """The :class:`Table` value behind a stored record."""
    return Table.build(
        record.header, record.rows, caption=record.caption, source=record.source, licence=record.licence
    )

"""Import table files into a workspace: read, filter, store; one transaction per file.

A file either imports whole or not at all (its transaction rolls back and its error is reported),
and the other files of the same call still import, whatever went wrong with it: a reader error,
a file nested too deeply to parse, a value the database refuses. Paths a directory walk cannot
read (unreadable directories, broken links, loops, special files) are reported as failed paths.

Re-importing is a no-op: tables are keyed by their content hash, questions by (table, text, the
source's category label, source id), answers by (question, origin, values). Inserts skip rows
that are already stored (``ON CONFLICT DO NOTHING``), so two imports of the same file at once
both succeed and between them store one copy.

Files are read and stored one at a time, and a table's rows are written as JSON text built row
by row, so an import holds one file's tables (as the reader packs them) plus one copy of the
text of the tables it is writing.

Every question, answer, source id and metadata string passes the one control-character rule
(:func:`tqaforge.tables.cells.clean_text`, which the readers apply to cells and headers), and
every stored subtype belongs to the workspace taxonomy; both are counted in the outcome.
"""

from __future__ import annotations

import dataclasses
import os
import stat
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlmodel import Session, select

from tqaforge.errors import DiskError, HeaderNameError, ImportFailed, ReaderError, TaxonomyError, TqaforgeError
from tqaforge.ids import json_string_list
from tqaforge.progress import Progress
from tqaforge.queries import get_by_prefix
from tqaforge.schemas.enums import AnswerStatus, Origin, QuestionStatus, QuestionType
from tqaforge.schemas.records import Answer, Question, TableRecord, utcnow
from tqaforge.schemas.taxonomy import BUILTIN, FREB_TQA, Taxonomy
from tqaforge.store import Workspace, insert_new
from tqaforge.tables.cells import clean_text
from tqaforge.tables.grow import GrowOptions, grow_table
from tqaforge.tables.readers import TidyOptions, read_path
from tqaforge.tables.source import ReadRecord, ReadResult, SourceItem
from tqaforge.tables.stats import SelectionFilter, TableStats, table_stats
from tqaforge.tables.table import Table

# SQL engines cap the number of bound parameters; look ids up in slices this long.
_ID_CHUNK = 500
# Tables are inserted in batches of at most this many rows or this much JSON text, so a file
# of many large tables never has all of them serialised at once.
_TABLE_BATCH_ROWS = 200
_TABLE_BATCH_CHARS = 16_000_000

#: File endings a directory walk picks up.
TABLE_SUFFIXES = frozenset({".csv", ".tsv", ".json", ".jsonl", ".html", ".htm", ".md", ".markdown", ".xlsx"})

#: FREB-TQA's question kinds are question types (``Question.question_type``), not categories.
_QUESTION_TYPES = frozenset(t.value for t in QuestionType)

# A message of an unexpected exception is cut to this length: it may quote the file's data.
_MAX_PROBLEM = 300


class _Tally:
    """The cumulative progress of one import, reported through :class:`~tqaforge.progress.Progress`:
    records stored (or rejected) of the records read so far, with the file being imported as the note."""

    __slots__ = ("report", "done", "total", "note")

    def __init__(self, report: Progress | None) -> None:
        self.report = report
        self.done = 0
        self.total = 0
        self.note = ""

    def file_read(self, path: str, records: int) -> None:
        self.total += records
        self.note = path
        self._emit()

    def stored(self, records: int) -> None:
        self.done += records
        self._emit()

    def _emit(self) -> None:
        if self.report:
            self.report(self.done, self.total, self.note)


@dataclass(frozen=True, slots=True)
class ImportOptions:
    """How to read and what to keep. ``format=None`` detects the format from the file."""

    format: str | None = None
    selection: SelectionFilter = field(default_factory=SelectionFilter)
    strict_headers: bool | None = None  # None: the reader's default for its format
    created_by: str = "tqaforge"
    encoding: str | None = None  # None: detect (UTF-8 first); a name forces it, decoded strictly
    max_file_bytes: int | None = None  # None: the readers' DEFAULT_MAX_BYTES (1 GiB)
    #: Real-world tidying of CSV, TSV and Excel files (header rows merged, empty rows and columns
    #: dropped, number conventions detected); None reads them exactly as written.
    tidy: TidyOptions | None = field(default_factory=TidyOptions)


@dataclass(slots=True)
class FileOutcome:
    """What happened to one file (or to a path a directory walk could not read)."""

    path: str
    format: str | None = None
    records: int = 0
    tables_new: int = 0
    tables_present: int = 0
    questions_new: int = 0
    questions_present: int = 0
    answers_new: int = 0
    #: Control characters removed from the file's text (cells, headers, questions, answers...).
    control_chars_removed: int = 0
    #: Questions whose category is not in the workspace taxonomy: stored without a subtype.
    subtypes_dropped: int = 0
    rejected: list[tuple[str, str]] = field(default_factory=list)  # (location, reason)
    error: str | None = None
    #: The ids of the tables this import stored (new ones), in file order.
    new_table_ids: list[str] = field(default_factory=list)
    #: What the reader did to the tables as written (dropped empty columns, merged header rows...).
    notes: list[str] = field(default_factory=list)
    #: The file failed on a blank or repeated header name: lenient headers would read it.
    header_names_failed: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


#: Rejected tables :meth:`ImportSummary.lines` names one by one; the rest are counted.
SHOW_REJECTED = 20
#: New tables whose ids :meth:`ImportSummary.lines` prints; the rest are counted.
SHOW_NEW_TABLES = 50

_TOTALS = (
    "records", "tables_new", "tables_present", "questions_new", "questions_present", "answers_new",
    "control_chars_removed", "subtypes_dropped",
)


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

    @property
    def control_chars_removed(self) -> int:
        """Control characters removed from the text of every file."""
        return self.total("control_chars_removed")

    @property
    def subtypes_dropped(self) -> int:
        """Questions stored without a subtype because theirs is not in the workspace taxonomy."""
        return self.total("subtypes_dropped")

    def failures(self) -> list[str]:
        """Why each failed file or path failed (what ``tables import`` prints after "failed ")."""
        return [f.error for f in self.files if f.error]

    @property
    def new_table_ids(self) -> list[str]:
        """The ids of the tables this import stored, file after file."""
        return [i for f in self.files for i in f.new_table_ids]

    def lines(self, *, max_rejected: int = SHOW_REJECTED, max_tables: int = SHOW_NEW_TABLES) -> list[str]:
        """The report ``tqaforge tables import`` prints: the counts, the first ``max_tables``
        new tables' ids with their file, what tidying did to each file, the control characters
        removed, the questions stored without a subtype, and the first ``max_rejected``
        rejected tables (the rest counted)."""
        lines = [
            f"imported {self.total('tables_new')} tables, {self.total('questions_new')} questions, "
            f"{self.total('answers_new')} answers; already present: {self.total('tables_present')} tables, "
            f"{self.total('questions_present')} questions; rejected: {len(self.rejected)} tables; "
            f"failed paths: {len(self.failed)} of {len(self.files)}"
        ]
        new = [(i, f.path) for f in self.files for i in f.new_table_ids]
        lines += [f"  new table {table_id} from {Path(path).name}" for table_id, path in new[:max_tables]]
        if len(new) > max_tables:
            lines.append(f"  ... and {len(new) - max_tables} more new tables (tqaforge tables list)")
        lines += [f"  {Path(f.path).name}: {note}" for f in self.files for note in f.notes]
        if self.control_chars_removed:
            lines.append(f"removed {self.control_chars_removed} control characters (NUL and the like) from cells and text")
        if self.subtypes_dropped:
            lines.append(
                f"{self.subtypes_dropped} questions stored without a subtype: their category is not in the "
                "workspace taxonomy (kept in meta.source_category)"
            )
        rejected = self.rejected
        lines += [f"  rejected {location}: {reason}" for location, reason in rejected[:max_rejected]]
        if len(rejected) > max_rejected:
            lines.append(f"  ... and {len(rejected) - max_rejected} more rejected")
        return lines

    def as_dict(self) -> dict[str, Any]:
        """The summary as JSON-able data: the totals, then every file's outcome."""
        return {
            **{name: self.total(name) for name in _TOTALS},
            "rejected": [{"location": location, "reason": reason} for location, reason in self.rejected],
            "failed": [{"path": f.path, "error": f.error} for f in self.failed],
            "files": [dataclasses.asdict(f) for f in self.files],
        }


def import_paths(
    ws: Workspace,
    paths: Sequence[Path | str],
    options: ImportOptions | None = None,
    *,
    on_progress: Progress | None = None,
) -> ImportSummary:
    """Import every file in ``paths`` (directories are walked), one file at a time; a failing
    file or an unreadable path is recorded in the summary and does not stop the others.
    ``on_progress(done, total, path)`` is called once a file is read (``total`` grows by its
    records) and as its records are stored or rejected (``done`` grows), for progress bars."""
    options = options or ImportOptions()
    taxonomy = ws.config.taxonomy()
    summary = ImportSummary()
    tally = _Tally(on_progress)
    for path, problem in walk_paths(paths):
        if problem is not None:
            summary.files.append(FileOutcome(path=str(path), error=str(problem)))
            continue
        summary.files.append(
            _import_file(ws, path, options, taxonomy, tally)
        )
    return summary


def walk_paths(paths: Iterable[Path | str]) -> Iterator[tuple[Path, ImportFailed | None]]:
    """Each path to import with ``None``, or a path that cannot be imported with why.

    A path given explicitly is passed on as it is (reading it reports what is wrong with it).
    Directories are walked depth first in name order; hidden entries and READMEs are skipped,
    linked directories are followed, and an unreadable directory, a broken link, a link that
    loops back to a directory being walked and a special file (FIFO, device, socket) with a
    table ending are reported instead of being skipped without a word."""
    for path in map(Path, paths):
        if path.is_dir():
            yield from _walk_directory(path)
        else:
            yield path, None


def _walk_directory(root: Path) -> Iterator[tuple[Path, ImportFailed | None]]:
    # An explicit stack, not recursion: a hostile tree may be deeper than Python's stack.
    listing, problem = _list_directory(root)
    if problem is not None:
        yield root, problem
        return
    stack: list[tuple[Iterator[os.DirEntry[str]], frozenset[tuple[int, int]]]] = [
        (iter(listing), frozenset({_dir_key(root)}))
    ]
    while stack:
        entries, ancestors = stack[-1]
        entry = next(entries, None)
        if entry is None:
            stack.pop()
            continue
        if entry.name.startswith("."):
            continue
        path = Path(entry.path)
        if _is_dir(entry):
            key = _dir_key(path)
            if key in ancestors:
                yield path, ImportFailed(
                    str(path),
                    f"directory loop: the link leads back to {os.path.realpath(path)}, which is being walked; skipped",
                    hint="remove the link, or import the directory it points to by its own path",
                )
                continue
            listing, problem = _list_directory(path)
            if problem is not None:
                yield path, problem
                continue
            stack.append((iter(listing), ancestors | {key}))
            continue
        # A broken link without an ending may have been a linked data directory: say so.
        maybe_directory = not path.suffix and entry.is_symlink()
        if (path.suffix.lower() not in TABLE_SUFFIXES and not maybe_directory) or entry.name.lower().startswith("readme"):
            continue  # directories hold docs next to data; only table files are wanted
        problem = _file_problem(entry, path)
        yield path, problem


def _list_directory(path: Path) -> tuple[list[os.DirEntry[str]], ImportFailed | None]:
    try:
        with os.scandir(path) as it:
            return sorted(it, key=lambda e: e.name), None
    except OSError as exc:
        return [], ImportFailed(
            str(path),
            f"cannot read directory: {exc.strerror or exc}; its files were not imported",
            hint="make the directory readable (chmod u+rx) and run the import again",
        )


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()  # follows links: a linked data directory is walked
    except OSError:
        return False


def _dir_key(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except OSError:
        return (-1, hash(str(path)))
    return (st.st_dev, st.st_ino)


def _file_problem(entry: os.DirEntry[str], path: Path) -> ImportFailed | None:
    """Why a file of a directory walk cannot be read, or None when it can be tried."""
    try:
        mode = entry.stat().st_mode  # follows links
    except FileNotFoundError:
        target = os.readlink(path) if entry.is_symlink() else "?"
        return ImportFailed(str(path), f"broken symbolic link to {target}; skipped",
                            hint="fix or remove the link")
    except OSError as exc:
        return ImportFailed(str(path), f"cannot read the file: {exc.strerror or exc}")
    if not stat.S_ISREG(mode):
        # Reading a FIFO blocks forever and a device never ends: refuse them unread.
        return ImportFailed(str(path), "not a regular file (a FIFO, device or socket); skipped",
                            hint="copy the data into a regular file and import that")
    return None


def import_file(
    ws: Workspace,
    path: Path | str,
    options: ImportOptions | None = None,
    *,
    taxonomy: Taxonomy | None = None,
    on_progress: Progress | None = None,
) -> FileOutcome:
    """Read one file and store it in one transaction; errors land in the outcome, not raised.

    Any exception while reading or storing the file (not only a :class:`ReaderError`: also
    a RecursionError from a deeply nested file, a MemoryError, an error of the database) rolls
    the file's transaction back and becomes the outcome's ``error``; KeyboardInterrupt and
    SystemExit still stop the import. ``on_progress`` as for :func:`import_paths`."""
    return _import_file(ws, path, options or ImportOptions(), taxonomy or ws.config.taxonomy(), _Tally(on_progress))


def _import_file(ws: Workspace, path: Path | str, options: ImportOptions, taxonomy: Taxonomy, tally: _Tally) -> FileOutcome:
    outcome = FileOutcome(path=str(path))
    try:
        _import_one(ws, Path(path), options, taxonomy, outcome, tally)
    except DiskError:
        raise  # a full or read-only disk is not this file's fault, and no other file would fit either
    except Exception as exc:  # noqa: BLE001 - one bad file must never stop the others
        outcome.error = _describe_failure(str(path), exc)
        outcome.header_names_failed = isinstance(exc, HeaderNameError)
        outcome.tables_new = outcome.tables_present = 0
        outcome.questions_new = outcome.questions_present = outcome.answers_new = 0
        outcome.subtypes_dropped = 0
        outcome.new_table_ids = []
        outcome.notes = []
    return outcome


def _import_one(
    ws: Workspace,
    path: Path,
    options: ImportOptions,
    taxonomy: Taxonomy,
    outcome: FileOutcome,
    tally: _Tally,
) -> None:
    if not path.exists() and not path.is_symlink():
        raise ReaderError(str(path), "no such file")
    result = read_path(
        path, options.format, strict_headers=options.strict_headers, encoding=options.encoding,
        max_bytes=options.max_file_bytes, tidy=options.tidy,
    )
    outcome.format = result.format
    outcome.notes = [note for record in result.records for note in record.notes]
    outcome.records = len(result.records)
    outcome.control_chars_removed = result.control_chars_removed
    tally.file_read(str(path), len(result.records))
    _check_items(result)
    # The session rolls back on any exception, so a failed file leaves nothing behind.
    with ws.session() as session:
        _store(session, result, options, taxonomy, outcome, tally)


def _describe_failure(path: str, exc: Exception) -> str:
    """The outcome's error for ``exc``: what happened to which file, and what to do."""
    if isinstance(exc, TqaforgeError):
        return str(exc)
    # SQLAlchemy wraps what the driver raised; the statement and its parameters (whole
    # tables) stay out of the message.
    cause: BaseException = (getattr(exc, "orig", None) or exc) if isinstance(exc, SQLAlchemyError) else exc
    if isinstance(cause, RecursionError):
        failure = ImportFailed(path, "the file is nested too deeply to read (Python's recursion limit); skipped",
                               hint="flatten the file's structure; tables need at most a few levels")
    elif isinstance(cause, MemoryError):
        failure = ImportFailed(path, "ran out of memory while importing the file; skipped",
                               hint="split the file into smaller ones and import those")
    elif isinstance(cause, UnicodeEncodeError):
        bad = cause.object[cause.start : cause.end] if isinstance(cause.object, str) else ""
        failure = ImportFailed(
            path,
            f"the file's text holds {bad.encode('unicode_escape').decode() or 'a character'}, which is not "
            f"valid Unicode (a lone surrogate) and cannot be stored; nothing of the file was stored",
            hint="fix the text in the file (a JSON \\ud800-style escape without its pair) and import again",
        )
    elif isinstance(exc, OperationalError) and "database is locked" in str(cause):
        failure = ImportFailed(path, "the workspace database stayed locked by another writer; nothing of the file was stored",
                               hint="another tqaforge command is writing to this workspace: run the import again when it is done")
    elif isinstance(exc, SQLAlchemyError):
        first = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
        failure = ImportFailed(path, f"the database refused the file: {first[:_MAX_PROBLEM]}; nothing of it was stored",
                               hint="fix the value named above in the file, or check the database, and import again")
    else:
        text = " ".join(str(exc).split())[:_MAX_PROBLEM]
        failure = ImportFailed(path, f"unexpected {type(exc).__name__}: {text}; nothing of the file was stored",
                               hint="check the file; if it looks right, report this as a tqaforge bug")
    return str(failure)


def _check_items(result: ReadResult) -> None:
    """Reject the whole file if an item names an unknown category of its own dataset's
    taxonomy or a cell off the table."""
    for record in result.records:
        for item in record.items:
            source_taxonomy = BUILTIN.get(item.taxonomy or "")
            if source_taxonomy is not None and item.subtype is not None:
                try:
                    source_taxonomy.validate(item.qtype, item.subtype)
                except TaxonomyError as exc:
                    raise ReaderError(record.location, str(exc).split("\n")[0]) from None
            for r, c in item.relevant_cells or ():
                if not (0 <= r < record.table.n_rows and 0 <= c < record.table.n_cols):
                    raise ReaderError(
                        record.location,
                        f"relevant cell [{r}, {c}] lies outside the "
                        f"{record.table.n_rows}x{record.table.n_cols} table",
                    )


def _clean_location(location: str) -> str:
    # A location is our provenance string ("path:line"), made of the file's name, not of its
    # text: cleaned for the database, not counted (it repeats on every record of the file).
    return clean_text(location)


class _Cleaner:
    """The control-character rule for the text the importer writes, counting removals."""

    __slots__ = ("removed",)

    def __init__(self) -> None:
        self.removed = 0

    def text(self, value: str) -> str:
        cleaned = clean_text(value)
        self.removed += len(value) - len(cleaned)
        return cleaned

    def optional(self, value: str | None) -> str | None:
        return None if value is None else self.text(value)

    def json(self, value: Any) -> Any:
        """Every string (keys included) inside a JSON-like value."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, (list, tuple)):
            return [self.json(v) for v in value]
        if isinstance(value, dict):
            return {self.text(k) if isinstance(k, str) else k: self.json(v) for k, v in value.items()}
        return value


@dataclass(frozen=True, slots=True)
class _Category:
    """Where a question lands in the workspace taxonomy."""

    taxonomy: str | None
    qtype: str | None
    subtype: str | None
    question_type: str | None
    dropped: bool  # the item had a category the workspace taxonomy lacks


def _categorise(item: SourceItem, taxonomy: Taxonomy) -> _Category:
    """The stored category of ``item``: its subtype only when the workspace taxonomy has it
    (with that taxonomy's type); FREB-TQA's extraction/reasoning also as the question type."""
    question_type = (
        item.subtype if item.taxonomy == FREB_TQA.name and item.subtype in _QUESTION_TYPES else None
    )
    if item.subtype is not None and item.subtype in taxonomy.subtypes:
        return _Category(taxonomy.name, taxonomy.type_of(item.subtype), item.subtype, question_type, False)
    # A question type is kept as such; any other unknown category is dropped and counted.
    dropped = item.subtype is not None and question_type is None
    return _Category(None, None, None, question_type, dropped)


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
    taxonomy: Taxonomy,
    outcome: FileOutcome,
    tally: _Tally,
) -> None:
    """Store one file's kept tables, then its questions, then the answers of the questions
    this call inserted; every insert skips what is already stored, and counts what was new."""
    kept = _select(result, options, outcome)
    cleaner = _Cleaner()
    now = utcnow()
    present_tables = _existing_ids(session, TableRecord, (r.table.id for r, _ in kept))
    new_ids = _store_tables(session, kept, present_tables, options, cleaner, now)
    outcome.new_table_ids = [i for i in dict.fromkeys(r.table.id for r, _ in kept) if i in new_ids]
    outcome.tables_new = len(new_ids)
    outcome.tables_present = len({r.table.id for r, _ in kept}) - outcome.tables_new

    questions: dict[str, dict[str, Any]] = {}
    answers: dict[str, dict[str, Any]] = {}
    n_items = 0
    for record, _ in kept:
        location = _clean_location(record.location)
        for item in record.items:
            n_items += 1
            text = cleaner.text(item.question)
            source_id = cleaner.optional(item.source_id)
            # The id keeps the source's own label (not the stored subtype): ids of questions
            # stored before stay the same, and a dataset's two labels stay two questions.
            qid = Question.make_id(record.table.id, text, item.subtype, source_id)
            if qid in questions:
                continue
            category = _categorise(item, taxonomy)
            outcome.subtypes_dropped += category.dropped
            questions[qid] = _question_row(qid, record.table.id, item, text, source_id, category,
                                           location, options.created_by, now, cleaner)
            if item.answers:
                answers[qid] = _answer_row(qid, [cleaner.text(a) for a in item.answers], options.created_by, now)
        tally.stored(1)
    present_questions = _existing_ids(session, Question, questions)
    inserted = insert_new(session, Question, [q for i, q in questions.items() if i not in present_questions])
    outcome.questions_new = len(inserted)
    outcome.questions_present = n_items - len(inserted)
    # An answer comes with its question: one already stored keeps the answers it has.
    outcome.answers_new = len(insert_new(session, Answer, [a for i, a in answers.items() if i in inserted]))
    outcome.control_chars_removed += cleaner.removed
    if len(kept) < len(result.records):
        tally.stored(len(result.records) - len(kept))


def _select(result: ReadResult, options: ImportOptions, outcome: FileOutcome) -> list[tuple[ReadRecord, TableStats]]:
    """The records whose table passes the selection filter, with its stats; others rejected."""
    stats_by_table: dict[str, TableStats] = {}
    kept: list[tuple[ReadRecord, TableStats]] = []
    for record in result.records:
        stats = stats_by_table.get(record.table.id)
        if stats is None:
            stats = stats_by_table[record.table.id] = table_stats(record.table)
        reason = options.selection.rejects(stats)
        if reason:
            outcome.rejected.append((record.location, reason))
        else:
            kept.append((record, stats))
    return kept


def _store_tables(
    session: Session,
    kept: list[tuple[ReadRecord, TableStats]],
    present: set[str],
    options: ImportOptions,
    cleaner: _Cleaner,
    now: datetime,
    origin: Origin = Origin.IMPORT,
) -> set[str]:
    """Insert the tables not yet stored, in bounded batches; the ids this call inserted."""
    inserted: set[str] = set()
    batch: list[dict[str, Any]] = []
    size = 0
    seen: set[str] = set(present)
    for record, stats in kept:
        if record.table.id in seen:
            continue
        seen.add(record.table.id)
        row = _table_row(record.table, stats, _clean_location(record.location), options.created_by, now, cleaner, origin)
        batch.append(row)
        size += len(row["rows"])
        if len(batch) >= _TABLE_BATCH_ROWS or size >= _TABLE_BATCH_CHARS:
            inserted |= insert_new(session, TableRecord, batch, json_text=("rows",))
            batch, size = [], 0
    inserted |= insert_new(session, TableRecord, batch, json_text=("rows",))
    return inserted


# Rows are joined into the JSON text in slices of this many, so that the pieces alive at once
# stay small next to the text itself.
_JSON_SLICE = 10_000


def _rows_json(table: Table) -> str:
    """The rows of ``table`` as compact JSON text (non-ASCII kept), built row by row: the rows
    may be packed by the reader, and unpacking them all at once would make a Python object of
    every cell (the old import held the table three times over that way)."""
    rows = table.rows
    slices = []
    for start in range(0, len(rows), _JSON_SLICE):
        # Cells are strings: the C string encoder is all JSON needs, and is fast.
        slices.append(",".join(
            json_string_list(rows[i])
            for i in range(start, min(start + _JSON_SLICE, len(rows)))
        ))
    return "[" + ",".join(slices) + "]"


def _table_row(
    table: Table, stats: TableStats, location: str, created_by: str, now: datetime, cleaner: _Cleaner,
    origin: Origin = Origin.IMPORT,
) -> dict[str, Any]:
    # Header and cells were cleaned by the reader (they make the table's id); the metadata
    # columns are cleaned here because they may come from anywhere.
    return {
        "id": table.id,
        "header": list(table.header),
        "rows": _rows_json(table),
        "caption": cleaner.optional(table.caption),
        "source": cleaner.optional(table.source),
        "licence": cleaner.optional(table.licence),
        "n_rows": stats.n_rows,
        "n_cols": stats.n_cols,
        "numeric_share": stats.numeric_share,
        "imported_from": location,
        "origin": origin.value,
        "created_by": created_by,
        "created_at": now,
    }


def _question_row(
    qid: str,
    table_id: str,
    item: SourceItem,
    text: str,
    source_id: str | None,
    category: _Category,
    location: str,
    created_by: str,
    now: datetime,
    cleaner: _Cleaner,
) -> dict[str, Any]:
    meta: dict[str, Any] = cleaner.json(dict(item.meta))
    if category.dropped:
        # The dataset's own category is kept where it hurts no one: people may map it later.
        meta["source_category"] = {"taxonomy": item.taxonomy, "type": item.qtype, "subtype": item.subtype}
    return {
        "id": qid,
        "table_id": table_id,
        "text": text,
        "taxonomy": category.taxonomy,
        "qtype": category.qtype,
        "subtype": category.subtype,
        "question_type": category.question_type,
        # Questions shipped by a curated benchmark were reviewed by its authors.
        "status": QuestionStatus.ACCEPTED.value,
        "origin": Origin.IMPORT.value,
        "created_by": created_by,
        "source": location,
        "source_id": source_id,
        "relevant_cells": [list(c) for c in item.relevant_cells] if item.relevant_cells is not None else None,
        "lineage": None,
        "meta": meta or None,
        "round": None,
        "seed": None,
        "created_at": now,
        "updated_at": now,
    }


def _answer_row(qid: str, values: list[str], created_by: str, now: datetime) -> dict[str, Any]:
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


@dataclass(frozen=True, slots=True)
class GrowOutcome:
    """What ``tqaforge tables grow`` made: the grown table stored (or found stored already)."""

    source_id: str
    table_id: str
    rows: int
    tokens: int
    source_tokens: int
    new: bool
    options: GrowOptions

    def as_dict(self) -> dict[str, Any]:
        return {
            "source_id": self.source_id, "table_id": self.table_id, "rows": self.rows, "tokens": self.tokens,
            "source_tokens": self.source_tokens, "new": self.new, **dataclasses.asdict(self.options),
        }

    def lines(self) -> list[str]:
        o = self.options
        state = "stored as" if self.new else "already stored as"
        return [
            f"grew table {self.source_id[:12]} ({self.source_tokens} tokens) to {self.rows} rows, {self.tokens} tokens "
            f"in {o.serialization} ({o.encoding}), seed {o.seed}: {state} table {self.table_id}",
        ]


def grown_source(source_id: str, source: str | None, rows: int, options: GrowOptions) -> str:
    """The ``source`` of a grown table: its origin, the draw and how to trace a row back."""
    trace = (
        f"column {options.id_column!r} holds the 0-based source row of each row"
        if options.id_column is not None
        else "no source-row column (the draw is reproducible from the seed)"
    )
    return (
        f"grown from table {source_id}" + (f" (source: {source})" if source else "")
        + f": {rows} rows drawn with replacement (seed {options.seed}) to at least {options.target_tokens} tokens "
        f"in {options.serialization} ({options.encoding}); {trace}"
    )


def grow_stored_table(ws: Workspace, table_id: str, options: GrowOptions, *, created_by: str = "tqaforge") -> GrowOutcome:
    """Grow the stored table ``table_id`` (or a unique prefix of it) with
    :func:`tqaforge.tables.grow.grow_table` and store the result as a new table (origin ``rule``)
    whose ``source`` names the table it was grown from, the seed and the target. Idempotent: the
    same options give the same table, stored once."""
    with ws.session() as session:
        record = get_by_prefix(session, TableRecord, table_id)
        source_id, source = record.id, record.to_table()
    grown = grow_table(source, options)
    description = grown_source(source_id, source.source, grown.table.n_rows, options)
    table = grown.table.with_metadata(source=description)
    with ws.session() as session:
        present = _existing_ids(session, TableRecord, [table.id])
        kept = [(ReadRecord(table, f"grown from table {source_id}"), table_stats(table))]
        new = _store_tables(session, kept, present, ImportOptions(created_by=created_by), _Cleaner(), utcnow(), origin=Origin.RULE)
    return GrowOutcome(source_id, table.id, table.n_rows, grown.tokens, grown.source_tokens, bool(new), options)

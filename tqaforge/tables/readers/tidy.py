"""Real-world tables: what spreadsheets and exports do to a table, undone on reading.

Applied by the CSV, TSV and Excel readers when given :class:`TidyOptions` (the import gives them
by default; :func:`~tqaforge.tables.readers.read_path` without them reads a file exactly as
written, which is what a round trip through the writers needs):

* **Header rows merged.** ``2019,,2020,`` over ``Q1,Q2,Q1,Q2`` gives the columns
  ``2019 / Q1, 2019 / Q2, 2020 / Q1, 2020 / Q2``. With ``header_rows=None`` the rows are
  detected (:func:`detect_header_rows`): a row below the first is one more header row when the
  row above it has spans (a blank cell after a label, or a label repeated from its left, as an
  expanded merged cell is), the row itself is text (no cell of it reads as a number), and the
  data below are numbers under at least half of its cells. ``header_rows=1`` is the first row
  alone; ``header_rows=k`` merges the first ``k`` rows whatever they hold.
* **Empty rows and columns dropped**, and said so in the record's notes: rows whose every
  cell is blank, and columns whose every cell, header included, is blank (a trailing delimiter
  on every line makes one).
* **Numbers per column** (``numbers="auto"``): the convention each column writes its numbers in
  (:mod:`tqaforge.tables.locale_numbers`) is stored on the table (:attr:`Table.numbers`), the cells'
  text unchanged; ``numbers="plain"`` leaves it out (every cell read the plain way, as before).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Iterable, Iterator, Literal, Sequence

from tqaforge.errors import ReaderError
from tqaforge.tables.locale_numbers import CONVENTIONS, PLAIN, detect_columns, detect_convention, parse_with
from tqaforge.tables.table import PackedRows, Table

NumbersMode = Literal["auto", "plain"]

#: At most this many rows are taken as header rows by detection.
MAX_HEADER_ROWS = 4
#: Data rows below the header rows that detection looks at.
SAMPLE_ROWS = 50
# The joiner of the parts of a merged header name.
JOINER = " / "
# Notes name at most this many rows or columns, then count the rest.
_NAMED = 8


@dataclass(frozen=True, slots=True)
class TidyOptions:
    """How a reader tidies a real-world table (see the module). The defaults detect."""

    header_rows: int | None = None  # None: detect; 1: the first row only (no merging)
    numbers: NumbersMode = "auto"
    drop_empty: bool = True

    def __post_init__(self) -> None:
        if self.header_rows is not None and self.header_rows < 1:
            raise ValueError(f"header_rows must be at least 1 (or None to detect), got {self.header_rows}")
        if self.numbers not in ("auto", "plain"):
            raise ValueError(f"numbers must be 'auto' or 'plain', got {self.numbers!r}")


def _blank(cell: str) -> bool:
    return not cell.strip()


def _is_number(cell: str) -> bool:
    return any(parse_with(cell, c.name) is not None for c in CONVENTIONS)


def _has_spans(row: Sequence[str]) -> bool:
    """A blank cell after a label, or a label repeated from its left neighbour."""
    seen_label = False
    for i, cell in enumerate(row):
        if _blank(cell):
            if seen_label:
                return True
        else:
            if seen_label and cell.strip() == row[i - 1].strip():
                return True
            seen_label = True
    return False


def _is_header_row(above: Sequence[str], row: Sequence[str], data: Sequence[Sequence[str]]) -> bool:
    filled = [i for i, c in enumerate(row) if not _blank(c)]
    if not filled or not data or not _has_spans(above):
        return False
    if any(_is_number(row[i]) for i in filled):
        return False
    over_numbers = sum(
        1 for i in filled if detect_convention(r[i] for r in data if i < len(r)) is not None
    )
    return 2 * over_numbers >= len(filled)


def detect_header_rows(rows: Sequence[Sequence[str]]) -> int:
    """How many of the first ``rows`` (header first, then the sample below) are header rows."""
    n = 1
    while n < min(MAX_HEADER_ROWS, len(rows) - 1):
        if not _is_header_row(rows[n - 1], rows[n], rows[n + 1 : n + 1 + SAMPLE_ROWS]):
            break
        n += 1
    return n


def merge_header_rows(rows: Sequence[Sequence[str]]) -> list[str]:
    """One header from several rows: spans of the upper rows filled to the right (within the
    span of the row above, over columns named below), the parts joined by ``" / "``, a part repeated below (a merged
    cell expanded down) written once."""
    width = max(len(r) for r in rows)
    grid = [list(r) + [""] * (width - len(r)) for r in rows]
    written = [list(r) for r in grid]  # before filling: where each span starts
    for level in range(len(grid) - 1):  # the last header row names single columns: not filled
        current = ""
        for col in range(width):
            new_parent = any(not _blank(written[upper][col]) for upper in range(level)) and col > 0
            cell = grid[level][col]
            if not _blank(cell):
                current = cell
            elif new_parent:
                current = ""
            elif any(not _blank(grid[lower][col]) for lower in range(level + 1, len(grid))):
                # A span covers the columns named below it, not an empty column after it.
                grid[level][col] = current
    header = []
    for col in range(width):
        parts: list[str] = []
        for level in range(len(grid)):
            part = grid[level][col].strip()
            if part and (not parts or parts[-1] != part):
                parts.append(part)
        header.append(JOINER.join(parts))
    return header


def _describe(items: Sequence[object], what: str) -> str:
    shown = ", ".join(map(str, items[:_NAMED]))
    more = f" and {len(items) - _NAMED} more" if len(items) > _NAMED else ""
    return f"{what} {shown}{more}"


def split_header(
    first: Sequence[Sequence[str]], options: TidyOptions
) -> tuple[list[str], int, str | None]:
    """From the first rows of a table (header first, then up to :data:`SAMPLE_ROWS` more),
    the header, how many rows it took, and a note when it merged more than one."""
    n = options.header_rows if options.header_rows is not None else detect_header_rows(first)
    n = min(n, len(first))
    if n == 1:
        return list(first[0]), 1, None
    header = merge_header_rows(first[:n])
    return header, n, f"merged the first {n} rows into one header: " + ", ".join(repr(h) for h in header[:_NAMED]) + (
        ", ..." if len(header) > _NAMED else "")


class EmptyRows:
    """Leaves rows whose every cell is blank out of a stream of rows, and remembers where they
    were in ``dropped``: the row numbers (the header being row 1), or what ``where`` yields
    for each row as it is read (a reader's line numbers)."""

    def __init__(self) -> None:
        self.dropped: list[int] = []

    def filter(self, rows: Iterable[Sequence[str]], where: Iterator[int] | None = None) -> Iterator[Sequence[str]]:
        for number, row in enumerate(rows, start=2):
            position = next(where) if where is not None else number
            if not "".join(row).strip():  # every cell blank (one join, not a test per cell)
                self.dropped.append(position)
                continue
            yield row

    def note(self, what: str = "rows") -> str | None:
        if not self.dropped:
            return None
        return _describe(self.dropped, f"dropped {len(self.dropped)} empty rows ({what}") + ")"


def empty_columns(table: Table) -> list[int]:
    """The 0-based columns whose header and cells are all blank."""
    candidates = [i for i, h in enumerate(table.header) if _blank(h)]
    if not candidates:
        return []
    for row in table.rows:
        candidates = [i for i in candidates if _blank(row[i])]
        if not candidates:
            break
    return candidates


def finish_tidy(table: Table, options: TidyOptions, notes: list[str]) -> Table:
    """Drop the empty columns (noted) and attach the columns' number conventions."""
    drop = empty_columns(table) if options.drop_empty else []
    if drop and len(drop) < table.n_cols:
        keep = [i for i in range(table.n_cols) if i not in set(drop)]
        rows = PackedRows([row[i] for i in keep] for row in table.rows)
        table = Table(tuple(table.header[i] for i in keep), rows, caption=table.caption)
        notes.append(_describe([i + 1 for i in drop], f"dropped {len(drop)} empty columns (column") + ")")
    if options.numbers == "auto":
        conventions = detect_columns(table.n_cols, table.rows)
        table = table.with_metadata(numbers=conventions)
        other = [f"{table.header[i]!r} as {c}" for i, c in enumerate(conventions) if c is not None and c != PLAIN]
        if other:
            notes.append(_describe(other, "numbers written other than 1,234.5 read in columns"))
    return table


def tidy_rows(
    path: Path, header: Sequence[str], rows: Iterable[Sequence[str]], options: TidyOptions, notes: list[str],
    *, where: str = "",
) -> tuple[list[str], int, Iterator[Sequence[str]]]:
    """The (merged) header, how many rows it took, and the data rows after it, for a reader
    that streams its rows; the note of a merge is added to ``notes``."""
    stream = iter(rows)
    first: list[Sequence[str]] = [header]
    if options.header_rows != 1:
        first += [row for row in _take(stream, (options.header_rows or MAX_HEADER_ROWS) + SAMPLE_ROWS)]
    merged, n, note = split_header(first, options)
    if note:
        notes.append(f"{where}{note}")
    widths = {len(r) for r in first[:n]}
    if len(widths) > 1:
        raise ReaderError(str(path), f"{where}the {n} header rows have different numbers of cells",
                          hint="give every header row one cell per column, or pass header_rows=1")
    return merged, n, chain(first[n:], stream)


def _take(stream: Iterator[Sequence[str]], n: int) -> Iterator[Sequence[str]]:
    for _ in range(n):
        row = next(stream, None)
        if row is None:
            return
        yield row

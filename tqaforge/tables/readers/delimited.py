"""CSV and TSV: one table per file, first row the header.

The delimiter is sniffed (``csv.Sniffer``) and checked: a delimiter is believed only when it
splits the first records into rows of one width greater than one. Otherwise the candidates
``, ; \\t |`` are tried in turn, the format's own delimiter first; if none splits the file, the
table has one column. Quoting is always RFC 4180 double quotes, and cells are kept verbatim
(no stripping of spaces after delimiters), so what a writer wrote is what is read.
"""

from __future__ import annotations

import csv
import re
from itertools import chain, count, islice
from pathlib import Path
from typing import Any, Iterator

from tqaforge.errors import ReaderError
from tqaforge.tables.readers._common import (
    DEFAULT_MAX_BYTES,
    TextCleaner,
    check_header,
    decode,
    finish_table,
    read_bytes,
)
from tqaforge.tables.readers.tidy import MAX_HEADER_ROWS, SAMPLE_ROWS, EmptyRows, TidyOptions, finish_tidy, tidy_rows
from tqaforge.tables.source import ReadRecord, ReadResult
from tqaforge.tables.table import Table

CANDIDATES = (",", ";", "\t", "|")
# Enough records to tell a real delimiter from a character that happens to occur in cells.
_SAMPLE_RECORDS = 200
_SNIFF_CHARS = 32_768
# A line with its end, as io.StringIO(newline="") splits them (CRLF, CR or LF; nothing else).
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")
_NOT_SPACE = re.compile(r"\S")
_QUOTE_HINT = "check the quotes on this line: a quoted cell must end with a quote, and a quote inside one is doubled"


def _lines(text: str) -> Iterator[str]:
    """The lines of ``text`` one at a time: unlike ``io.StringIO(text)``, which copies the
    whole text into a buffer of 4 bytes per character, or ``splitlines``, which holds them all."""
    return (m.group() for m in _LINE.finditer(text))


def _reader(text: str, delimiter: str, *, strict: bool = True) -> Any:
    # A csv reader object (it has ``line_num``). Line ends are passed on as written, so line
    # breaks inside quoted cells are kept exactly.
    return csv.reader(
        _lines(text),
        delimiter=delimiter,
        quotechar='"',
        doublequote=True,
        skipinitialspace=False,
        strict=strict,
    )
def _width(text: str, delimiter: str) -> int | None:
    """The common width of the first records split by ``delimiter``, or None if they differ
    or do not parse."""
    widths: set[int] = set()
    try:
        for record in islice(_reader(text, delimiter), _SAMPLE_RECORDS):
            if record:
                widths.add(len(record))
    except csv.Error:
        return None
    return widths.pop() if len(widths) == 1 else None


def detect_delimiter(text: str, default: str = ",") -> str:
    """The delimiter of a delimited text: the sniffer's answer when it checks out, else the
    first candidate (``default`` first) that splits the records evenly, else ``default``."""
    try:
        sniffed: str | None = csv.Sniffer().sniff(text[:_SNIFF_CHARS], delimiters="".join(CANDIDATES)).delimiter
    except csv.Error:
        sniffed = None
    if sniffed is not None:
        width = _width(text, sniffed)
        if width is not None and width > 1:
            return sniffed
    for candidate in (default, *[c for c in CANDIDATES if c != default]):
        width = _width(text, candidate)
        if width is not None and width > 1:
            return candidate
    return default


def _csv_error(path: Path, exc: csv.Error, line: int, start: int, row: int) -> ReaderError:
    if "field larger than field limit" in str(exc):
        # Almost always a quote left open: everything after it reads as one cell, so the line
        # to look at is where the record starts, not where the parser gave up.
        return ReaderError(
            str(path), f"a cell starting on this line is longer than {csv.field_size_limit():,} characters",
            line=start, row=row, hint="look for a quote that is opened and never closed at or above this line",
        )
    return ReaderError(str(path), f"malformed CSV: {exc}", line=line, row=row, hint=_QUOTE_HINT)


def _records(path: Path, reader: Any, lines: list[int]) -> Iterator[list[str]]:
    """Non-empty records one by one; ``lines[0]`` is kept at the first line of the last one."""
    count = 0
    while True:
        start = reader.line_num + 1
        try:
            record = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise _csv_error(path, exc, reader.line_num, start, count + 1) from None
        # An empty line carries no cells; a one-column row with an empty cell is written `""`.
        if record:
            count += 1
            lines[0] = start
            yield record


def _is_blank(text: str) -> bool:
    """True for a file of nothing but whitespace, which holds no table; found without
    ``text.strip()``, which would copy the whole text."""
    return _NOT_SPACE.search(text) is None


def _read(
    path: Path, fmt: str, default: str, strict_headers: bool, encoding: str | None, max_bytes: int,
    tidy: TidyOptions | None = None,
) -> ReadResult:
    text = decode(path, read_bytes(path, max_bytes), encoding=encoding)
    delimiter = detect_delimiter(text, default)
    line = [0]
    records = _records(path, _reader(text, delimiter), line)
    header = next(records, None)
    header_line = line[0]
    # Only line breaks, or one line of spaces: nothing a writer would make of a table. A space
    # as the only cell of a table is written on two lines (header and row), and is read back.
    first = next(records, None) if header is not None and _is_blank(text) else None
    if header is None or (first is None and _is_blank(text)):
        raise ReaderError(str(path), "the file is empty", hint="a table needs a header row and data rows")
    rows = records if first is None else chain([first], records)
    cleaner = TextCleaner()
    if tidy is not None:
        table, notes = _read_tidy(path, header, rows, line, header_line, cleaner, strict_headers, tidy)
        return ReadResult(
            path=str(path), format=fmt, records=[ReadRecord(table=table, location=str(path), notes=tuple(notes))],
            control_chars_removed=cleaner.removed,
        )
    table = finish_table(
        path,
        header,
        rows,
        cleaner=cleaner,
        strict_headers=strict_headers,
        header_line=header_line,
        row_lines=lambda _: line[0],
    )
    return ReadResult(
        path=str(path), format=fmt, records=[ReadRecord(table=table, location=str(path))],
        control_chars_removed=cleaner.removed,
    )


def _read_tidy(
    path: Path, header: list[str], rows: Iterator[list[str]], line: list[int], header_line: int,
    cleaner: TextCleaner, strict_headers: bool, options: TidyOptions,
) -> tuple[Table, list[str]]:
    """The table of a delimited file tidied (:mod:`.tidy`), and the notes saying how."""
    notes: list[str] = []
    empties = EmptyRows()
    if options.drop_empty:
        rows = empties.filter(rows, where=(line[0] for _ in count()))  # type: ignore[assignment]
    # The lines of the first rows, which header detection reads ahead; later rows are placed
    # by the reader's current line, as without tidying.
    first_lines: list[int] = []
    ahead = (options.header_rows or MAX_HEADER_ROWS) + SAMPLE_ROWS + 1

    def remember(stream: Iterator[list[str]]) -> Iterator[list[str]]:
        for row in stream:
            if len(first_lines) <= ahead:
                first_lines.append(line[0])
            yield row

    merged, taken, data = tidy_rows(path, header, remember(rows), options, notes)
    table = finish_table(
        path,
        merged,
        data,
        cleaner=cleaner,
        strict_headers=False,  # checked below, once empty columns are gone and headers merged
        header_line=header_line,
        row_lines=lambda i: first_lines[i + taken - 1] if i + taken - 1 < len(first_lines) else line[0],
    )
    note = empties.note("lines")
    if note:
        notes.insert(0, note)
    table = finish_tidy(table, options, notes)
    if strict_headers:
        check_header(path, table.header, line=header_line)
    return table, notes


def read_csv(
    path: Path, *, strict_headers: bool = True, encoding: str | None = None, max_bytes: int = DEFAULT_MAX_BYTES,
    tidy: TidyOptions | None = None,
) -> ReadResult:
    """Read a comma-separated (or sniffed ; \\t |) file; the first row is the header (the first
    rows, merged, with ``tidy``: see :mod:`tqaforge.tables.readers.tidy`)."""
    return _read(path, "csv", ",", strict_headers, encoding, max_bytes, tidy)


def read_tsv(
    path: Path, *, strict_headers: bool = True, encoding: str | None = None, max_bytes: int = DEFAULT_MAX_BYTES,
    tidy: TidyOptions | None = None,
) -> ReadResult:
    """Read a tab-separated file (delimiter still checked, tab preferred); first row the header
    (``tidy`` as for :func:`read_csv`)."""
    return _read(path, "tsv", "\t", strict_headers, encoding, max_bytes, tidy)

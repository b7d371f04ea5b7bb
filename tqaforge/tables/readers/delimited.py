"""CSV and TSV: one table per file, first row the header.

The delimiter is sniffed (``csv.Sniffer``) and checked: a delimiter is believed only when it
splits the first records into rows of one width greater than one. Otherwise the candidates
``, ; \\t |`` are tried in turn, the format's own delimiter first; if none splits the file, the
table has one column. Quoting is always RFC 4180 double quotes, and cells are kept verbatim
(no stripping of spaces after delimiters), so what a writer wrote is what is read.
"""

from __future__ import annotations

import csv
import io
from itertools import islice
from pathlib import Path
from typing import Any

from tqaforge.errors import ReaderError
from tqaforge.tables.readers._common import decode, finish_table, read_bytes
from tqaforge.tables.source import ReadRecord, ReadResult

CANDIDATES = (",", ";", "\t", "|")
# Enough records to tell a real delimiter from a character that happens to occur in cells.
_SAMPLE_RECORDS = 200
_SNIFF_CHARS = 32_768


def _reader(text: str, delimiter: str, *, strict: bool = True) -> Any:
    # A csv reader object (it has ``line_num``). newline="" keeps line breaks inside quoted cells exactly as written.
    return csv.reader(
        io.StringIO(text, newline=""),
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


def _read(path: Path, fmt: str, default: str, strict_headers: bool, encoding: str | None) -> ReadResult:
    text = decode(path, read_bytes(path), encoding=encoding)
    if not text.strip():
        raise ReaderError(str(path), "the file is empty", hint="a table needs a header row and data rows")
    delimiter = detect_delimiter(text, default)
    reader = _reader(text, delimiter)
    records: list[tuple[int, list[str]]] = []
    try:
        while True:
            start = reader.line_num + 1
            try:
                record = next(reader)
            except StopIteration:
                break
            # An empty line carries no cells; a one-column row with an empty cell is written `""`.
            if record:
                records.append((start, record))
    except csv.Error as exc:
        raise ReaderError(
            str(path),
            f"malformed CSV: {exc}",
            line=reader.line_num,
            row=len(records) + 1,
            hint="check the quotes on this line: a quoted cell must end with a quote, and a quote inside one is doubled",
        ) from None
    (header_line, header), *body = records
    table = finish_table(
        path,
        header,
        [r for _, r in body],
        strict_headers=strict_headers,
        header_line=header_line,
        row_lines=[line for line, _ in body],
    )
    return ReadResult(path=str(path), format=fmt, records=[ReadRecord(table=table, location=str(path))])


def read_csv(path: Path, *, strict_headers: bool = True, encoding: str | None = None) -> ReadResult:
    """Read a comma-separated (or sniffed ; \\t |) file; the first row is the header."""
    return _read(path, "csv", ",", strict_headers, encoding)


def read_tsv(path: Path, *, strict_headers: bool = True, encoding: str | None = None) -> ReadResult:
    """Read a tab-separated file (delimiter still checked, tab preferred); first row the header."""
    return _read(path, "tsv", "\t", strict_headers, encoding)

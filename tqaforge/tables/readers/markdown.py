"""Markdown pipe tables (GitHub-flavoured): a header line, a separator line such as
``| --- | :--: |``, and body lines up to the first blank line or line without a pipe.

Several tables per file are read in order; tables inside fenced code blocks are not tables.
Cells are stripped of surrounding spaces and tabs. ``\\|`` is a literal pipe and ``\\\\`` a
literal backslash; every other backslash is kept as written. Cell text is otherwise literal
(no inline Markdown or HTML is interpreted), so ``**x**`` stays ``**x**``.
"""

from __future__ import annotations

import re
from pathlib import Path

from tqaforge.errors import ReaderError
from tqaforge.tables.readers._common import (
    DEFAULT_MAX_BYTES,
    TextCleaner,
    decode,
    finish_table,
    read_bytes,
    table_records,
)
from tqaforge.tables.source import ReadResult
from tqaforge.tables.table import Table

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_SEPARATOR_CELL = re.compile(r":?-+:?")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_EDGE = " \t"


def split_row(line: str) -> list[str]:
    """The cells of one pipe-table line, unescaped and stripped."""
    s = line.strip(_EDGE)
    if s.startswith("|"):
        s = s[1:]
    cells: list[str] = []
    current: list[str] = []
    ended_on_pipe = False
    i = 0
    while i < len(s):
        ch = s[i]
        if ch == "\\" and i + 1 < len(s) and s[i + 1] in "|\\":
            current.append(s[i + 1])
            i += 2
            ended_on_pipe = False
            continue
        if ch == "|":
            cells.append("".join(current))
            current = []
            ended_on_pipe = True
        else:
            current.append(ch)
            ended_on_pipe = False
        i += 1
    if not ended_on_pipe:
        # No closing pipe: the rest of the line is the last cell.
        cells.append("".join(current))
    return [c.strip(_EDGE) for c in cells]


def has_pipe(line: str) -> bool:
    """True when the line holds an unescaped pipe."""
    escaped = False
    for ch in line:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == "|":
            return True
    return False


def is_separator(line: str) -> bool:
    """True for a header separator line like ``| --- | :-: |``; a pipe is required, since a
    bare ``---`` under a line is a heading underline or a rule."""
    if "|" not in line:
        return False
    cells = split_row(line)
    return bool(cells) and all(_SEPARATOR_CELL.fullmatch(c) for c in cells)


def read_markdown(
    path: Path, *, strict_headers: bool = True, encoding: str | None = None, max_bytes: int = DEFAULT_MAX_BYTES
) -> ReadResult:
    """Read every pipe table of a Markdown file (rules in the module doc)."""
    text = decode(path, read_bytes(path, max_bytes), encoding=encoding)
    cleaner = TextCleaner()
    lines = _LINE_BREAK.split(text)
    found: list[tuple[int, Table]] = []  # (line of the header, table)
    pending: list[tuple[int, list[str], list[tuple[int, list[str]]]]] = []
    in_fence = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if _FENCE.match(line):
            in_fence = not in_fence
            i += 1
            continue
        if in_fence or not has_pipe(line) or i + 1 >= len(lines) or not is_separator(lines[i + 1]):
            i += 1
            continue
        header = split_row(line)
        separator = split_row(lines[i + 1])
        if len(separator) != len(header):
            raise ReaderError(
                str(path),
                f"the separator line has {len(separator)} cells but the header line above it has {len(header)}",
                line=i + 2,
                hint="give the separator one --- per header column",
            )
        body: list[tuple[int, list[str]]] = []
        j = i + 2
        while j < len(lines) and lines[j].strip() and has_pipe(lines[j]):
            body.append((j + 1, split_row(lines[j])))
            j += 1
        pending.append((i + 1, header, body))
        i = j
    if not pending:
        raise ReaderError(
            str(path),
            "no pipe table found",
            hint="a table is a header line, a separator line like | --- | --- |, then body lines",
        )
    for n, (header_line, header, body) in enumerate(pending, start=1):
        where = f"table {n} (line {header_line}): " if len(pending) > 1 else ""
        table = finish_table(
            path,
            header,
            [cells for _, cells in body],
            cleaner=cleaner,
            strict_headers=strict_headers,
            where=where,
            header_line=header_line,
            row_lines=[line for line, _ in body],
        )
        found.append((header_line, table))
    records = table_records(path, [t for _, t in found])
    return ReadResult(path=str(path), format="markdown", records=records, control_chars_removed=cleaner.removed)

"""HTML: every ``<table>`` of a file, with the standard library's forgiving parser.

* Missing end tags are implied the way browsers imply them: a new ``<td>`` closes the open
  cell, a new ``<tr>`` the open row, the end of the file every open table.
* ``rowspan``/``colspan`` are expanded by copying the cell's text into every grid position it
  covers (``rowspan="0"`` spans to the last row).
* The header is the first row (``th`` or ``td``); ``<caption>`` becomes the caption.
* A span in the header is not a repeated name (most Wikipedia tables have one): when the next
  rows are all ``<th>`` they are header rows too, and each column is named by the texts above
  it ("Population 2010"); a name a ``colspan`` still repeats is numbered ("Population",
  "Population (2)"). Two separate cells of the same text remain a duplicate name.
* Cell text is what a browser shows: entities are unescaped, each run of ASCII whitespace is
  one space, ``<br>`` is a line break, and spaces at the ends of each line are dropped.
* A table nested in a cell is a table of its own; its text is not part of the outer cell.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from tqaforge.errors import ReaderError
from tqaforge.tables.names import NameNumberer
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

# A span this large is a typo or an attack; browsers clamp colspan at 1000 and rowspan at 65534.
_MAX_COLSPAN = 1000
_MAX_ROWSPAN = 65534
_ASCII_SPACE = re.compile(r"[ \t\n\r\f]+")
_BREAK = "\n"
# Elements whose boundaries separate words even when the markup has no space there.
_BLOCK = frozenset({"p", "div", "li", "ul", "ol", "dl", "dt", "dd", "h1", "h2", "h3", "h4", "h5", "h6", "hr"})
_SKIP = frozenset({"script", "style", "template"})


def cell_text(chunks: list[str | None]) -> str:
    """Join text chunks (``None`` marks a ``<br>``) into cell text as a browser renders it."""
    lines: list[str] = []
    current: list[str] = []
    for chunk in chunks:
        if chunk is None:
            lines.append("".join(current))
            current = []
        else:
            current.append(chunk)
    lines.append("".join(current))
    return _BREAK.join(_ASCII_SPACE.sub(" ", line).strip(" ") for line in lines)


def visible_text(text: str) -> str:
    """What reading back ``text`` gives when it is written with ``<br>`` for each line break:
    the fixed point of the cell-text rule (writers use it to tell what HTML can hold)."""
    return _BREAK.join(_ASCII_SPACE.sub(" ", line).strip(" ") for line in text.split(_BREAK))


@dataclass
class _Cell:
    chunks: list[str | None] = field(default_factory=list)
    rowspan: int = 1
    colspan: int = 1
    is_th: bool = False


@dataclass
class _Row:
    line: int
    cells: list[_Cell] = field(default_factory=list)


@dataclass
class _TableDraft:
    number: int  # 1-based, in order of the <table> start tags
    line: int
    rows: list[_Row] = field(default_factory=list)
    caption: list[str | None] | None = None
    in_caption: bool = False
    row: _Row | None = None
    cell: _Cell | None = None

    def close_cell(self) -> None:
        self.cell = None

    def close_row(self) -> None:
        self.cell = None
        self.row = None


def _span(value: str | None, limit: int) -> int:
    try:
        n = int((value or "1").strip())
    except ValueError:
        return 1
    if n == 0:
        return 0  # rowspan="0": to the end of the table (resolved later)
    return max(1, min(n, limit))


class _TableParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[_TableDraft] = []
        self.done: list[_TableDraft] = []
        self.count = 0
        self.skip_depth = 0

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        # HTML ignores the slash of `<br/>` or `<td/>`: it is a start tag only (calling the end
        # handler too would turn `<br/>` into two line breaks). A self-closed `<script/>` has
        # no content for the parser to skip.
        if tag not in _SKIP:
            self.handle_starttag(tag, attrs)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP:
            self.skip_depth += 1
            return
        if self.skip_depth:
            return
        line = self.getpos()[0]
        if tag == "table":
            self.count += 1
            self.open.append(_TableDraft(number=self.count, line=line))
            return
        if not self.open:
            return
        t = self.open[-1]
        if tag == "caption":
            t.close_row()
            t.caption = [] if t.caption is None else t.caption
            t.in_caption = True
        elif tag == "tr":
            t.in_caption = False
            t.close_row()
            t.row = _Row(line=line)
            t.rows.append(t.row)
        elif tag in ("td", "th"):
            t.in_caption = False
            if t.row is None:
                # A cell outside any <tr> starts a row, as browsers do.
                t.row = _Row(line=line)
                t.rows.append(t.row)
            a = dict(attrs)
            t.cell = _Cell(
                rowspan=_span(a.get("rowspan"), _MAX_ROWSPAN),
                colspan=max(1, _span(a.get("colspan"), _MAX_COLSPAN)),
                is_th=tag == "th",
            )
            t.row.cells.append(t.cell)
        elif tag in ("thead", "tbody", "tfoot"):
            t.in_caption = False
            t.close_row()
        elif tag == "br":
            self._chunk(None)
        elif tag in _BLOCK:
            self._chunk(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP:
            self.skip_depth = max(0, self.skip_depth - 1)
            return
        if self.skip_depth or not self.open:
            return
        t = self.open[-1]
        if tag == "table":
            self.done.append(self.open.pop())
        elif tag == "caption":
            t.in_caption = False
        elif tag in ("tr", "thead", "tbody", "tfoot"):
            t.close_row()
        elif tag in ("td", "th"):
            t.close_cell()
        elif tag in _BLOCK or tag == "br":
            # `</br>` is a line break in every browser; `</p>` ends a block.
            self._chunk(None if tag == "br" else " ")

    def handle_data(self, data: str) -> None:
        self._chunk(data)

    def _chunk(self, chunk: str | None) -> None:
        if self.skip_depth or not self.open:
            return
        t = self.open[-1]
        if t.in_caption and t.caption is not None:
            t.caption.append(chunk)
        elif t.cell is not None:
            t.cell.chunks.append(chunk)

    def close(self) -> None:
        super().close()
        # End of file closes every table still open (broken HTML).
        while self.open:
            self.done.append(self.open.pop())


@dataclass
class _GridRow:
    """One row of the expanded grid: texts, and for each position the cell it came from."""

    line: int
    texts: list[str]
    origins: list[tuple[int, int]]  # (row, column) of the cell that covers the position
    all_th: bool  # every cell that starts in this row is a <th>


def _grid(draft: _TableDraft) -> list[_GridRow]:
    """Expand spans: each row's positions hold copies of the cell that spans them."""
    n = len(draft.rows)
    occupied: dict[tuple[int, int], tuple[str, tuple[int, int]]] = {}
    # Positions filled per row: a row with more than its gap-free width has a cell past a gap,
    # found without scanning the whole grid once per row (quadratic in a tall table).
    filled = [0] * n
    all_th = [bool(row.cells) and all(cell.is_th for cell in row.cells) for row in draft.rows]
    for r, row in enumerate(draft.rows):
        c = 0
        for cell in row.cells:
            while (r, c) in occupied:
                c += 1
            text = cell_text(cell.chunks)
            rowspan = n - r if cell.rowspan == 0 else min(cell.rowspan, n - r)
            for dr in range(rowspan):
                for dc in range(cell.colspan):
                    if (r + dr, c + dc) not in occupied:
                        occupied[(r + dr, c + dc)] = (text, (r, c))
                        filled[r + dr] += 1
            c += cell.colspan
    out: list[_GridRow] = []
    for r, row in enumerate(draft.rows):
        width = 0
        while (r, width) in occupied:
            width += 1
        if width:  # An empty <tr></tr> holds nothing, not a row of zero cells.
            cells = [occupied[(r, c)] for c in range(width)]
            out.append(_GridRow(row.line, [t for t, _ in cells], [o for _, o in cells], all_th[r]))
        if filled[r] > width:
            raise _GapError(row.line, r)
    return out


def _n_header_rows(grid: list[_GridRow]) -> int:
    """How many rows the header takes: the first, and the all-<th> rows below it of the same
    width while the rows so far have a cell spanning columns (which the rows below split)."""
    n = 1
    first = grid[0]
    while (
        first.all_th
        and n < len(grid) - 1
        and grid[n].all_th
        and len(grid[n].texts) == len(first.texts)
        and any(len(set(row.origins)) < len(row.origins) for row in grid[:n])
    ):
        n += 1
    return n


def header_names(rows: list[_GridRow]) -> list[str]:
    """Column names from header rows: the distinct texts above each column joined by a space
    (a cell spanning down is counted once), then numbers for repeats a span made."""
    width = len(rows[0].texts)
    names: list[str] = []
    for c in range(width):
        parts: list[str] = []
        previous: tuple[int, int] | None = None
        for row in rows:
            text, origin = row.texts[c], row.origins[c]
            if origin != previous and text and (not parts or parts[-1] != text):
                parts.append(text)
            previous = origin
        names.append(" ".join(parts))
    keys = [tuple(row.origins[c] for row in rows) for c in range(width)]
    # Numbers continue per name across spans ("A", "A (2)", "A (3)"; the next span of "A" gets
    # "A (4)"), which is what a search from the span's own count finds, in linear time.
    numberer = NameNumberer(names, pattern="{name} ({k})", first=2)
    seen: set[tuple[str, tuple[tuple[int, int], ...]]] = set()
    for c, (name, key) in enumerate(zip(names, keys)):
        if (name, key) not in seen:
            seen.add((name, key))
        elif name:
            # The same cell over several columns: a span, not a user's repeated name.
            names[c] = numberer.number(name)
    return names


class _GapError(Exception):
    def __init__(self, line: int, row: int) -> None:
        self.line, self.row = line, row


def read_html(
    path: Path, *, strict_headers: bool = True, encoding: str | None = None, max_bytes: int = DEFAULT_MAX_BYTES
) -> ReadResult:
    """Read every ``<table>`` of an HTML file (rules in the module doc)."""
    text = decode(path, read_bytes(path, max_bytes), encoding=encoding)
    parser = _TableParser()
    parser.feed(text)
    parser.close()
    drafts = sorted(parser.done, key=lambda d: d.number)
    if not drafts:
        raise ReaderError(str(path), "no <table> element found", hint="is this the right file?")
    cleaner = TextCleaner()
    tables: list[Table] = []
    for d in drafts:
        where = f"table {d.number} (line {d.line}): " if len(drafts) > 1 else ""
        try:
            grid = _grid(d)
        except _GapError as gap:
            raise ReaderError(
                str(path), f"{where}row has a hole: spanned cells leave a position empty",
                line=gap.line, row=gap.row + 1,
            ) from None
        if not grid:
            raise ReaderError(str(path), f"{where}the table has no rows", line=d.line, hint="remove the empty <table>")
        n_head = _n_header_rows(grid)
        body = grid[n_head:]
        caption = cell_text(d.caption) if d.caption is not None else None
        tables.append(
            finish_table(
                path,
                header_names(grid[:n_head]),
                [row.texts for row in body],
                cleaner=cleaner,
                strict_headers=strict_headers,
                where=where,
                header_line=grid[0].line,
                row_lines=[row.line for row in body],
                caption=caption or None,
            )
        )
    records = table_records(path, tables)
    return ReadResult(path=str(path), format="html", records=records, control_chars_removed=cleaner.removed)

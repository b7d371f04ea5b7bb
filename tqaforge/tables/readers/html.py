"""HTML: every ``<table>`` of a file, with the standard library's forgiving parser.

* Missing end tags are implied the way browsers imply them: a new ``<td>`` closes the open
  cell, a new ``<tr>`` the open row, the end of the file every open table.
* ``rowspan``/``colspan`` are expanded by copying the cell's text into every grid position it
  covers (``rowspan="0"`` spans to the last row).
* The header is the first row (``th`` or ``td``); ``<caption>`` becomes the caption.
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
from tqaforge.tables.readers._common import decode, finish_table, read_bytes, table_records
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
            t.cell = _Cell(rowspan=_span(a.get("rowspan"), _MAX_ROWSPAN), colspan=max(1, _span(a.get("colspan"), _MAX_COLSPAN)))
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


def _grid(draft: _TableDraft) -> list[tuple[int, list[str]]]:
    """Expand spans: each row as (line, cell texts), spanned positions holding copies."""
    n = len(draft.rows)
    occupied: dict[tuple[int, int], str] = {}
    for r, row in enumerate(draft.rows):
        c = 0
        for cell in row.cells:
            while (r, c) in occupied:
                c += 1
            text = cell_text(cell.chunks)
            rowspan = n - r if cell.rowspan == 0 else min(cell.rowspan, n - r)
            for dr in range(rowspan):
                for dc in range(cell.colspan):
                    occupied.setdefault((r + dr, c + dc), text)
            c += cell.colspan
    out: list[tuple[int, list[str]]] = []
    for r, row in enumerate(draft.rows):
        width = 0
        while (r, width) in occupied:
            width += 1
        if width:  # An empty <tr></tr> holds nothing, not a row of zero cells.
            out.append((row.line, [occupied[(r, c)] for c in range(width)]))
        extra = [c for (rr, c) in occupied if rr == r and c >= width]
        if extra:
            raise _GapError(row.line, r)
    return out


class _GapError(Exception):
    def __init__(self, line: int, row: int) -> None:
        self.line, self.row = line, row


def read_html(path: Path, *, strict_headers: bool = True, encoding: str | None = None) -> ReadResult:
    """Read every ``<table>`` of an HTML file (rules in the module doc)."""
    text = decode(path, read_bytes(path), encoding=encoding)
    parser = _TableParser()
    parser.feed(text)
    parser.close()
    drafts = sorted(parser.done, key=lambda d: d.number)
    if not drafts:
        raise ReaderError(str(path), "no <table> element found", hint="is this the right file?")
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
        (header_line, header), *body = grid
        caption = cell_text(d.caption) if d.caption is not None else None
        tables.append(
            finish_table(
                path,
                header,
                [cells for _, cells in body],
                strict_headers=strict_headers,
                where=where,
                header_line=header_line,
                row_lines=[line for line, _ in body],
                caption=caption or None,
            )
        )
    records = table_records(path, tables)
    return ReadResult(path=str(path), format="html", records=records)

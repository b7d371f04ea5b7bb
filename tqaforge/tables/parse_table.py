r"""Read a table back from text: a model's reply to a commanding (table editing) item, in any of
our prompt serializations (:mod:`tqaforge.tables.serialize`), amid prose and code fences.

>>> parsed = parse_table("Sure! Here it is:\n```\n| a | b |\n| --- | --- |\n| 1 | 2 |\n```\nDone.")
>>> parsed.format, parsed.table().header, parsed.table().rows
('markdown', ('a', 'b'), (('1', '2'),))

:func:`parse_table` looks in each fenced block (last first: a reply's final table comes last, and a
block whose language names a format is read as that format), then in the whole text, for the
first format whose marks it finds, most specific first: ``html`` (``<table``), ``xml``
(``<Table>``), ``latex`` (``\begin{tabular}``), ``dataframe`` (``DataFrame(``), ``grid`` (a
``+---+`` rule), ``markdown`` (a pipe line over a ``| --- |`` rule), ``json`` (an object or list of
table shape), ``indexed_row_major`` (``col : ``), ``csv`` (two or more lines with a comma, or a
fenced block). ``concatenation`` is only read when asked for by name with the number of columns.
A table whose every cell is blank counts as none. Nothing found: :class:`TableParseError`, which
scorers turn into 0.

The result is a :class:`~tqaforge.tables.teds.Layout` (rows may be ragged; HTML and LaTeX cells
may span); :meth:`ParsedTable.table` gives a :class:`Table` when the layout is one (the first row
is the header). JSON shapes read: ours (``{"0": {name: value}}``), the canonical
``{"header", "rows"}``, TableBench's ``{"columns", "data"}``, a list of records, a list of rows.

Serialize then parse gives the table back (tests/test_parse_table.py) except where a format
cannot hold it: ``html`` collapses runs of whitespace and drops it at line ends; ``markdown``,
``grid`` and ``latex`` strip spaces at a cell's ends (their padding), and ``latex`` writes CR as
a line break; ``json`` and ``dataframe`` number repeated header names (``a``, ``a_1``) and ``json``
has no header for a table without rows; ``xml`` replaces characters XML cannot hold with U+FFFD;
``indexed_row_major`` splits a cell holding ``row N :`` (N the next row's number);
``concatenation`` is not invertible (cells holding spaces, or empty, shift the rest).
"""

from __future__ import annotations

import ast
import csv
import html
import io
import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from tqaforge.errors import TableError
from tqaforge.tables.readers.html import _TableParser, cell_text
from tqaforge.tables.readers.jsonio import MAX_DEPTH, json_depth
from tqaforge.tables.readers.markdown import is_separator, split_row
from tqaforge.tables.table import Table
from tqaforge.tables.teds import Layout, SpanCell

#: Replies longer than this are not searched for a table (a model's table fits well within it).
MAX_REPLY_CHARS = 2_000_000


class TableParseError(TableError):
    """No table could be read from a text; the message says what was looked for."""


@dataclass(frozen=True, slots=True)
class ParsedTable:
    """A table read from text, and the format it was read as."""

    format: str
    layout: Layout

    def table(self) -> Table:
        """The layout as a :class:`Table`: its first row the header; :class:`TableParseError` when it
        has spans, ragged rows or no columns."""
        rows = [*self.layout.head, *self.layout.body]
        if not rows or not rows[0]:
            raise TableParseError(f"the {self.format} table has no columns")
        if any(c.colspan != 1 or c.rowspan != 1 for row in rows for c in row):
            raise TableParseError(f"the {self.format} table has merged cells, which a Table cannot hold")
        if len({len(row) for row in rows}) > 1:
            raise TableParseError(f"the {self.format} table's rows differ in length")
        return Table.build([c.text for c in rows[0]], [[c.text for c in row] for row in rows[1:]])


def _layout(rows: Sequence[Sequence[str]]) -> Layout:
    """The first row as the header, the rest as the body."""
    if not rows:
        return Layout()
    return Layout.build([rows[0]], rows[1:])


# --- one reader per format: text -> Layout, or None when the format's marks are absent -----------


def _read_html(text: str) -> Layout | None:
    start = text.lower().find("<table")
    if start < 0:
        return None
    parser = _TableParser()
    parser.feed(text[start:])
    parser.close()
    if not parser.done:
        return None
    draft = min(parser.done, key=lambda d: d.number)  # the first table (an outer one, if nested)
    rows = [
        tuple(SpanCell(cell_text(c.chunks), colspan=c.colspan, rowspan=max(1, c.rowspan)) for c in row.cells)
        for row in draft.rows if row.cells
    ]
    is_th = [bool(row.cells) and all(c.is_th for c in row.cells) for row in draft.rows if row.cells]
    n_head = 0
    while n_head < len(rows) and is_th[n_head]:
        n_head += 1
    # The header: the leading rows of <th> cells, else the first row (all rows <th>: the first).
    n_head = 1 if n_head in (0, len(rows)) else n_head
    n_head = min(n_head, len(rows))
    return Layout(tuple(rows[:n_head]), tuple(rows[n_head:]))


_XML_TAG = re.compile(r"<(/?)(Table|Header|Column|Row|Cell)\s*(/?)>")


def _read_xml(text: str) -> Layout | None:
    """Our XML read in one pass over its tags (a cell's text is what lies between its tags)."""
    start = text.find("<Table>")
    if start < 0:
        return None
    head: list[str] = []
    rows: list[list[str]] = []
    target: list[str] | None = None
    opened: int | None = None  # where the open cell's text starts
    for m in _XML_TAG.finditer(text, start + len("<Table>")):
        closing, name, empty = m.groups()
        if name == "Table":
            break  # the end of the table, or another table: ours has one
        if name in ("Header", "Row"):
            if closing or empty:
                target = None
            elif name == "Header":
                target = head
            else:
                target = []
                rows.append(target)
        elif target is not None:
            if empty:
                target.append("")
            elif not closing:
                opened = m.end()
            elif opened is not None:
                target.append(html.unescape(text[opened:m.start()]))
                opened = None
    return Layout.build([head] if head else [], rows)


_TABULAR = re.compile(r"\\begin\{tabular\*?\}(?:\{[^{}]*\})?(?:\{(?:[^{}]|\{[^{}]*\})*\})?(.*?)(?:\\end\{tabular\*?\}|\Z)", re.DOTALL)
_LATEX_RULES = re.compile(r"\\(?:hline|toprule|midrule|bottomrule|cline\{[^}]*\})")
# The tokens of a tabular's body: a row end, a cell separator, an escape, other text.
_LATEX_TOKEN = re.compile(
    r"(?P<end>\\\\)|(?P<sep>&)|\\newline ?|\\textbackslash\{\}|\\textasciitilde\{\}|\\textasciicircum\{\}"
    r"|\\(?P<char>[&%$#_{}])|(?P<text>[^\\&]+|\\)"
)
_LATEX_WORDS = {"\\textbackslash{}": "\\", "\\textasciitilde{}": "~", "\\textasciicircum{}": "^"}
_MULTICOLUMN = re.compile(r"\A\s*\\multicolumn\{(\d+)\}\{[^{}]*\}\{(.*)\}\s*\Z", re.DOTALL)


def _latex_cell(text: str) -> SpanCell:
    span = _MULTICOLUMN.match(text)
    if span:
        return SpanCell(span.group(2).strip(), colspan=max(1, min(int(span.group(1)), 1000)))
    return SpanCell(text.strip())


def _read_latex(text: str) -> Layout | None:
    found = _TABULAR.search(text)
    if found is None:
        return None
    body = _LATEX_RULES.sub("", found.group(1))
    rows: list[list[str]] = []
    row: list[str] = []
    cell: list[str] = []
    for m in _LATEX_TOKEN.finditer(body):
        if m.group("end"):
            rows.append(row + ["".join(cell)])
            row, cell = [], []
        elif m.group("sep"):
            row.append("".join(cell))
            cell = []
        elif m.group("char"):
            cell.append(m.group("char"))
        elif m.group("text") is not None:
            cell.append(m.group("text"))
        elif m.group(0).startswith("\\newline"):
            cell.append("\n")
        else:
            cell.append(_LATEX_WORDS[m.group(0)])
    if row or "".join(cell).strip():
        rows.append(row + ["".join(cell)])
    cells = [[_latex_cell(c) for c in r] for r in rows]
    if not cells:
        return Layout()
    return Layout((tuple(cells[0]),), tuple(map(tuple, cells[1:])))


_DATAFRAME = re.compile(r"(?:\bpd\.)?\bDataFrame\(")


def _scalar_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _call_end(text: str, start: int) -> int | None:
    """The index after the parenthesis closing the one at ``start`` (Python strings skipped), or None."""
    depth, quote, i = 0, "", start
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def _read_dataframe(text: str) -> Layout | None:
    found = _DATAFRAME.search(text)
    if found is None:
        return None
    end = _call_end(text, found.end() - 1)
    if end is None:
        return None
    try:
        call = ast.parse(text[found.start():end], mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if not isinstance(call, ast.Call) or not call.args:
        return None
    try:
        # Literals only: nothing of the reply is run.
        columns = ast.literal_eval(call.args[0])
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return None
    return _columns_layout(columns)


def _columns_layout(columns: Any) -> Layout | None:
    """``{name: [values]}`` (or a list of records) as a layout; None when it is neither."""
    if isinstance(columns, list):
        return _json_layout(columns)
    if not isinstance(columns, dict) or not all(isinstance(v, (list, tuple)) and all(map(_is_scalar, v)) for v in columns.values()):
        return None
    names = [_scalar_text(k) for k in columns]
    values = list(columns.values())
    n = max(map(len, values), default=0)
    rows = [[_scalar_text(v[i]) if i < len(v) else "" for v in values] for i in range(n)]
    return _layout([names, *rows])


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _json_layout(value: Any) -> Layout | None:
    """A JSON value of one of the table shapes (module docs) as a layout; None otherwise."""
    if isinstance(value, dict):
        lowered = {k.lower() if isinstance(k, str) else k: v for k, v in value.items()}
        for head_key, rows_key in (("header", "rows"), ("columns", "data")):
            head, rows = lowered.get(head_key), lowered.get(rows_key)
            if isinstance(head, list) and isinstance(rows, list) and all(map(_is_scalar, head)) \
                    and all(isinstance(r, list) and all(map(_is_scalar, r)) for r in rows):
                return _layout([[_scalar_text(h) for h in head], *[[_scalar_text(c) for c in r] for r in rows]])
        if "table" in lowered and len(lowered) <= 3:
            return _json_layout(lowered["table"])
        records = list(value.values())
        if records and all(isinstance(r, dict) for r in records):
            return _json_layout(records)
        if not value:
            return Layout()
        if all(isinstance(v, list) for v in value.values()):
            return _columns_layout(value)
        return None
    if isinstance(value, list) and value:
        if all(isinstance(r, dict) and all(map(_is_scalar, r.values())) for r in value):
            names: list[str] = []
            for r in value:
                names += [k for k in r if k not in names]
            return _layout([names, *[[_scalar_text(r.get(k)) for k in names] for r in value]])
        if all(isinstance(r, list) and all(map(_is_scalar, r)) for r in value):
            return _layout([[_scalar_text(c) for c in r] for r in value])
    return None


def _read_json(text: str) -> Layout | None:
    """The first JSON value of table shape in ``text``: each ``[`` or ``{`` tried as the start of a
    value (a value that parses but is no table is skipped whole, so the search stays linear)."""
    decoder = json.JSONDecoder()
    position, tried = 0, 0
    while tried < _MAX_JSON_STARTS:
        found = _JSON_START.search(text, position)
        if found is None:
            return None
        tried += 1
        try:
            value, end = decoder.raw_decode(text, found.start())
        except (ValueError, RecursionError, MemoryError):
            position = found.start() + 1
            continue
        if json_depth(text[found.start():end]) <= MAX_DEPTH:
            layout = _json_layout(value)
            if layout is not None:
                return layout
        position = end
    return None


_JSON_START = re.compile(r"[\[{]")
#: How many places a JSON value is tried from (a reply full of brackets is not searched for ever).
_MAX_JSON_STARTS = 1000

_GRID_RULE = re.compile(r"^\s*\+(?:[-=:]+\+)+\s*$")
_PLAIN_ESCAPES = {"\\": "\\", "|": "|", "n": "\n", "r": "\r", "t": "\t"}


def _split_plain(line: str) -> list[str]:
    """Cells of a line split on unescaped ``|``, the plain escapes undone (not stripped)."""
    cells: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\" and i + 1 < len(line) and line[i + 1] in _PLAIN_ESCAPES:
            current.append(_PLAIN_ESCAPES[line[i + 1]])
            i += 2
            continue
        if ch == "|":
            cells.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    cells.append("".join(current))
    return cells


def _read_grid(text: str) -> Layout | None:
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if _GRID_RULE.match(line)), None)
    if first is None:
        return None
    head: list[list[str]] = []
    rows: list[list[str]] = []
    for line in lines[first:]:
        stripped = line.strip()
        if _GRID_RULE.match(line):
            if "=" in stripped and not head and rows:
                head, rows = rows, []
            continue
        if not stripped.startswith("|"):
            break
        rows.append([c.strip() for c in _split_plain(stripped)[1:-1]])
    if not head and rows:
        head, rows = rows[:1], rows[1:]
    return Layout.build(head, rows)


_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)


def _read_markdown(text: str) -> Layout | None:
    lines = text.splitlines()
    for i in range(len(lines) - 1):
        if "|" in lines[i] and is_separator(lines[i + 1]) and not is_separator(lines[i]):
            rows = [split_row(lines[i])]
            for line in lines[i + 2:]:
                if "|" not in line or not line.strip():
                    break
                rows.append(split_row(line))
            return _layout([[_BR.sub("\n", c) for c in row] for row in rows])
    return None


_IRM_HEAD = re.compile(r"\bcol : ")


def _irm_cells(part: str) -> list[str]:
    """The cells of one indexed-row-major row: split on unescaped ``|``, the one space each side
    of a separator dropped."""
    cells = _split_plain(part)
    out = []
    for k, cell in enumerate(cells):
        if k > 0 and cell.startswith(" "):
            cell = cell[1:]
        if k < len(cells) - 1 and cell.endswith(" "):
            cell = cell[:-1]
        out.append(cell)
    return out


def _read_indexed_row_major(text: str) -> Layout | None:
    found = _IRM_HEAD.search(text)
    if found is None:
        return None
    line_end = text.find("\n", found.end())
    rest = text[found.end():] if line_end < 0 else text[found.end():line_end]  # the serialization is one line
    parts: list[str] = []
    position, n = 0, 1
    while True:
        marker = f" row {n} : "
        at = rest.find(marker, position)
        if at < 0:
            break
        parts.append(rest[position:at])
        position = at + len(marker)
        n += 1
    parts.append(rest[position:])
    return _layout([_irm_cells(p) for p in parts])


def _read_csv(text: str) -> Layout | None:
    body = text.strip("\r\n")
    if not body:
        return None
    try:
        rows = list(csv.reader(io.StringIO(body, newline="")))
    except csv.Error:
        return None
    return _layout(rows) if rows else None


def _csv_run(text: str) -> str | None:
    """In unfenced text: the longest run of two or more consecutive lines with the same number
    (at least one) of commas, the likely CSV amid prose; None when there is none."""
    best: tuple[int, int] = (0, 0)
    lines = text.splitlines()
    start = 0
    for i in range(1, len(lines) + 1):
        if i == len(lines) or lines[i].count(",") != lines[start].count(",") or not lines[i].strip():
            if lines[start].count(",") and i - start >= 2 and i - start > best[1] - best[0]:
                best = (start, i)
            start = i
    return "\n".join(lines[best[0]:best[1]]) if best[1] else None


def read_concatenation(text: str, n_cols: int) -> Layout:
    """A concatenation read back knowing the number of columns: space-separated tokens cut into
    rows of ``n_cols`` (right only when no cell holds a space or is empty); the plain escapes undone."""
    if n_cols < 1:
        raise TableParseError("reading a concatenation needs the number of columns (at least 1)")
    tokens = ["|".join(_split_plain(t)) for t in text.strip().split(" ")]
    if len(tokens) % n_cols:
        raise TableParseError(f"{len(tokens)} space-separated words do not make rows of {n_cols} cells")
    return _layout([tokens[i:i + n_cols] for i in range(0, len(tokens), n_cols)])


#: Format name -> reader of a text that holds it (None: the format's marks are not there).
PARSERS: dict[str, Callable[[str], Layout | None]] = {
    "html": _read_html,
    "xml": _read_xml,
    "latex": _read_latex,
    "dataframe": _read_dataframe,
    "grid": _read_grid,
    "markdown": _read_markdown,
    "json": _read_json,
    "indexed_row_major": _read_indexed_row_major,
    "csv": _read_csv,
}

_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})[ \t]*([\w+-]*)")
_FENCE_LANGUAGES = {
    "html": "html", "xml": "xml", "latex": "latex", "tex": "latex", "python": "dataframe", "py": "dataframe",
    "markdown": "markdown", "md": "markdown", "json": "json", "csv": "csv",
}


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of each closed fenced block, in one pass over the lines."""
    blocks: list[tuple[str, str]] = []
    opened: tuple[str, str, int] | None = None  # (fence, language, first line of the body)
    lines = text.split("\n")
    for i, line in enumerate(lines):
        found = _FENCE.match(line)
        if found is None:
            continue
        if opened is None:
            opened = (found.group(1), found.group(2).lower(), i + 1)
        elif line.strip() == opened[0]:
            blocks.append((opened[1], "\n".join(lines[opened[2]:i])))
            opened = None
    return blocks


def _candidates(text: str) -> list[tuple[str, str | None, bool]]:
    """(text, the format its fence names, fenced) to search, in order: fenced blocks last first, then all."""
    blocks = [(body, _FENCE_LANGUAGES.get(language), True) for language, body in _fenced_blocks(text)]
    return [*reversed(blocks), (text, None, False)]


def parse_table(text: str, fmt: str | None = None, *, n_cols: int | None = None) -> ParsedTable:
    """The table in ``text`` (module docs); ``fmt``: read only that format (``concatenation``
    needs ``n_cols``). Raises :class:`TableParseError` when no table is found."""
    if not isinstance(text, str) or not text.strip():
        raise TableParseError("the reply is empty: no table in it", hint="the model returned nothing to score")
    if len(text) > MAX_REPLY_CHARS:
        raise TableParseError(f"the reply has {len(text)} characters, more than the {MAX_REPLY_CHARS} searched for a table")
    if fmt == "concatenation":
        return ParsedTable(fmt, read_concatenation(text, n_cols or 0))
    if fmt is not None and fmt not in PARSERS:
        raise TableParseError(f"no reader for the format {fmt!r}", hint="one of " + ", ".join([*PARSERS, "concatenation"]))
    for candidate, named, fenced in _candidates(text):
        order = [fmt] if fmt is not None else ([named] if named else []) + [f for f in PARSERS if f != named]
        for name in order:
            source = candidate
            if name == "csv" and fmt is None and not fenced:
                run = _csv_run(candidate)  # prose has commas too: only lines that agree
                if run is None:
                    continue
                source = run
            try:
                layout = PARSERS[name](source)
            except (ValueError, RecursionError, MemoryError):
                layout = None
            if layout is not None and any(c.text.strip() for part in (layout.head, layout.body) for row in part for c in row):
                return ParsedTable(name, layout)
    looked = fmt or ", ".join(PARSERS)
    raise TableParseError(f"no table found in the reply (looked for: {looked})",
                          hint="the reply must hold the table in one of the serializations, e.g. a Markdown pipe table")


__all__ = ["MAX_REPLY_CHARS", "PARSERS", "ParsedTable", "TableParseError", "parse_table", "read_concatenation"]

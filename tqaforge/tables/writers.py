"""Write a :class:`Table` as a file in each format the readers read.

Each writer is the inverse of its reader: ``read_path(write(t)) == t`` for every table the
format can hold. Where a format cannot hold a cell exactly (Markdown has no line breaks, HTML
collapses spaces, Excel has no control characters), the writer raises :class:`TableError`
naming the cell, instead of writing something that reads back different; pass ``lossy=True``
to write anyway (for display, where exactness does not matter). Each writer's docstring lists
what its format cannot hold.

>>> t = Table.build(["city", "pop"], [["Oslo", "709000"]])
>>> print(write_table(t, "markdown"), end="")
| city | pop |
| --- | --- |
| Oslo | 709000 |
"""

from __future__ import annotations

import csv
import io
import json
import re
from typing import Literal, Sequence

from tqaforge.errors import TableError
from tqaforge.tables.readers.delimited import CANDIDATES
from tqaforge.tables.readers.html import visible_text
from tqaforge.tables.source import SourceItem
from tqaforge.tables.table import CELL_SEP, ROW_SEP, Table, joined_rows

#: Formats :func:`write_table` writes (the benchmark lines have their own functions).
WRITE_FORMATS: tuple[str, ...] = ("csv", "tsv", "json", "html", "markdown", "excel")

JsonShape = Literal["header", "columns", "records"]
#: The JSON shapes the JSON reader accepts: canonical ``{"header", "rows"}`` (with metadata),
#: TableBench's ``{"columns", "data"}``, and a list of records ``[{col: value}]``.
JSON_SHAPES: tuple[str, ...] = ("header", "columns", "records")

# Characters XML 1.0 (and so .xlsx) cannot hold; openpyxl refuses the first group.
_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_EDGE = " \t"


def _cells(table: Table) -> list[tuple[int | None, int, str]]:
    """(data row or None for the header, column, text) of every cell."""
    out: list[tuple[int | None, int, str]] = [(None, c, h) for c, h in enumerate(table.header)]
    out += [(r, c, v) for r, row in enumerate(table.rows) for c, v in enumerate(row)]
    return out


def _unrepresentable(fmt: str, row: int | None, col: int, text: str, why: str) -> TableError:
    where = "header" if row is None else f"row {row}"
    return TableError(
        f"{fmt} cannot hold the cell at {where}, column {col} ({text[:40]!r}): {why}",
        hint="pass lossy=True to write it anyway, or choose a format that can hold it (json, csv)",
    )


def write_csv(table: Table, *, delimiter: str = ",") -> str:
    """CSV (RFC 4180: double quotes, CRLF line ends); any text can be held.

    Cells are quoted only where needed, unless some cell contains another candidate
    delimiter (``, ; \\t |``) or the first header name starts with U+FEFF: then every cell is
    quoted, so that delimiter detection cannot be misled and the character is not read as a
    byte-order mark."""
    others = [d for d in CANDIDATES if d != delimiter]
    fast = _csv_text(table, delimiter, others)
    if fast is not None:
        return fast
    # One joined string searched once per delimiter: far cheaper than a test per cell.
    blob = "\x00".join(table.header) + "\x00" + "\x00".join("\x00".join(row) for row in table.rows)
    quote_all = table.header[0].startswith("\ufeff") or any(d in blob for d in others)
    out = io.StringIO(newline="")
    # CRLF terminator: with "\n" alone csv would not quote a cell holding a bare "\r".
    writer = csv.writer(
        out,
        delimiter=delimiter,
        quotechar='"',
        doublequote=True,
        lineterminator="\r\n",
        quoting=csv.QUOTE_ALL if quote_all else csv.QUOTE_MINIMAL,
    )
    writer.writerow(table.header)
    writer.writerows(table.rows)
    return out.getvalue()


def _quote_starts(delimiter: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """A cell separator, and a row separator, (in text joined by CELL_SEP and ROW_SEP) followed by
    a cell that QUOTE_MINIMAL quotes. Substituting the separator and a quote for them opens every
    such cell with a literal replacement, all in C (a replacement function costs a Python call a
    cell, and most cells of a table of numbers such as "1,234" are quoted); each pattern starts
    with its literal, which the engine finds fast. Run again on the reversed text, where each
    opened cell, and only it, holds a quote, they close them."""
    special = re.escape(delimiter + '"') + "\r\n"
    cell = f"(?=[^{CELL_SEP}{ROW_SEP}{special}]*+[{special}])"
    return re.compile(CELL_SEP + cell), re.compile(ROW_SEP + cell)


_QUOTE_STARTS = {d: _quote_starts(d) for d in CANDIDATES}


def _csv_text(table: Table, delimiter: str, others: Sequence[str]) -> str | None:
    """What the csv module writes for ``table`` (see :func:`write_csv`), made from the joined
    cells (:func:`joined_rows`) with a few passes in C instead of a call per cell; None where the
    csv module must do it (a cell holding a separator; one column, whose empty cells it quotes;
    a delimiter it does not know)."""
    if table.n_cols == 1 or delimiter not in _QUOTE_STARTS:
        return None
    header = CELL_SEP.join(table.header)
    rows = joined_rows(table.rows, table.n_cols)
    if rows is None or header.count(CELL_SEP) != table.n_cols - 1 or ROW_SEP in header:
        return None
    text = header + ROW_SEP + rows if table.rows else header
    if table.header[0].startswith("\ufeff") or any(d in text for d in others):
        text = '"' + text.replace('"', '""').replace(CELL_SEP, f'"{delimiter}"').replace(ROW_SEP, '"\r\n"') + '"'
        return text + "\r\n"
    if '"' in text or "\r" in text or "\n" in text or delimiter in text:
        # Quotes doubled everywhere (a cell holding one is quoted anyway), then the quoted
        # cells opened, and closed from the other end (see _quote_starts).
        cell_starts, row_starts = _QUOTE_STARTS[delimiter]
        text = CELL_SEP + text.replace('"', '""') + CELL_SEP
        text = row_starts.sub(ROW_SEP + '"', cell_starts.sub(CELL_SEP + '"', text))[::-1]
        text = row_starts.sub(ROW_SEP + '"', cell_starts.sub(CELL_SEP + '"', text))[::-1][1:-1]
    return text.replace(CELL_SEP, delimiter).replace(ROW_SEP, "\r\n") + "\r\n"


def write_json(table: Table, *, shape: JsonShape = "header") -> str:
    """JSON in one of :data:`JSON_SHAPES`; any text can be held. ``header`` is
    :meth:`Table.to_dict` (caption, source and licence included); ``records`` needs unique
    header names (they become keys) and drops the metadata."""
    payload: object
    if shape == "header":
        payload = table.to_dict()
    elif shape == "columns":
        payload = {"columns": list(table.header), "data": [list(r) for r in table.rows]}
    elif shape == "records":
        if len(set(table.header)) != len(table.header):
            raise TableError(
                "JSON records cannot hold repeated header names (they are object keys)",
                hint="use shape='header' or shape='columns'",
            )
        payload = [dict(zip(table.header, row)) for row in table.rows]
    else:
        raise TableError(f"unknown JSON shape {shape!r}", hint="one of " + ", ".join(JSON_SHAPES))
    return _dump_rows_per_line(payload)


def _dump_rows_per_line(payload: object) -> str:
    """JSON with one table row (or record) per line: readable, and diffs show changed rows."""

    def dump(value: object) -> str:
        return json.dumps(value, ensure_ascii=False)

    def rows(values: list[object], indent: str) -> str:
        return "[\n" + ",\n".join(indent + " " + dump(v) for v in values) + "\n" + indent + "]"

    if isinstance(payload, list):
        return rows(payload, "") + "\n"
    assert isinstance(payload, dict)
    members = [
        f" {dump(k)}: {rows(v, ' ') if k in ('rows', 'data') else dump(v)}" for k, v in payload.items()
    ]
    return "{\n" + ",\n".join(members) + "\n}\n"


def _html_check(fmt: str, row: int | None, col: int, text: str) -> None:
    if visible_text(text) != text:
        raise _unrepresentable(
            fmt, row, col, text,
            "HTML shows runs of spaces, tabs and carriage returns as one space and drops spaces at line ends",
        )


def _html_text(text: str) -> str:
    # str.replace in this order is html.escape(quote=False) per line, joined by <br>, at a
    # fraction of the cost; ``&`` goes first so the entities are not escaped again.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\n", "<br>")


def _html_body(rows: Sequence[tuple[str, ...]], width: int) -> str:
    """The ``<tr>`` lines of ``rows``. The cells are joined with two control characters as
    separators and escaped in one pass over the whole body (a few ``str.replace`` calls instead
    of four per cell); the separators become the tags afterwards. A cell that holds a separator
    itself takes the per-cell path."""
    blob = joined_rows(rows, width)  # packed rows are joined as stored, not unpacked
    if blob is None:
        return "".join("<tr>" + "".join(f"<td>{_html_text(v)}</td>" for v in row) + "</tr>\n" for row in rows)
    body = _html_text(blob).replace(CELL_SEP, "</td><td>").replace(ROW_SEP, "</td></tr>\n<tr><td>")
    return f"<tr><td>{body}</td></tr>\n"


def write_html(table: Table, *, lossy: bool = False) -> str:
    """An HTML ``<table>`` (header in ``<thead>`` as ``<th>``, caption as ``<caption>``).

    HTML cannot hold: tabs, carriage returns, form feeds, runs of spaces, and spaces at the
    start or end of a line (browsers and the reader collapse them). Line breaks are written
    as ``<br>``; ``& < >`` are escaped."""
    if not lossy:
        for row, col, text in _cells(table):
            _html_check("html", row, col, text)
        if table.caption:
            _html_check("html", None, -1, table.caption)
    parts = ["<table>\n"]
    if table.caption:
        parts.append(f"<caption>{_html_text(table.caption)}</caption>\n")
    names = CELL_SEP.join(table.header)
    if names.count(CELL_SEP) == table.n_cols - 1:  # escaped in one pass unless a name holds the separator
        head = "<th>" + _html_text(names).replace(CELL_SEP, "</th><th>") + "</th>"
    else:
        head = "".join(f"<th>{_html_text(h)}</th>" for h in table.header)
    parts.append("<thead>\n<tr>" + head + "</tr>\n</thead>\n")
    parts.append("<tbody>\n")
    if table.rows:
        parts.append(_html_body(table.rows, table.n_cols))
    parts.append("</tbody>\n</table>\n")
    return "".join(parts)


def _markdown_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|")


def write_markdown(table: Table, *, lossy: bool = False) -> str:
    """A GitHub-flavoured pipe table. ``|`` is written ``\\|`` and ``\\`` as ``\\\\``.

    Markdown cannot hold: line breaks (``\\n``, ``\\r``) inside a cell, and spaces or tabs at
    the start or end of a cell (cells are stripped). With ``lossy=True`` line breaks become
    spaces."""
    if not lossy:
        for row, col, text in _cells(table):
            if "\n" in text or "\r" in text:
                raise _unrepresentable("markdown", row, col, text, "a pipe-table cell cannot hold a line break")
            if text != text.strip(_EDGE):
                raise _unrepresentable("markdown", row, col, text, "cells are stripped of surrounding spaces")

    def line(cells: tuple[str, ...]) -> str:
        texts = [_markdown_text(re.sub(r"\r\n|\r|\n", " ", c).strip(_EDGE)) for c in cells]
        return "| " + " | ".join(texts) + " |\n"

    return line(table.header) + "| " + " | ".join("---" for _ in table.header) + " |\n" + "".join(line(r) for r in table.rows)


def write_excel(table: Table, *, lossy: bool = False, sheet: str = "table") -> bytes:
    """An .xlsx workbook with one sheet; every cell is written as text (never a formula or number).

    Excel cannot hold: control characters other than tab, line feed and carriage return, and
    U+FFFE/U+FFFF (XML forbids them; ``lossy`` drops them); nor a table whose first or last
    column, header row or last row is wholly empty (the reader cannot tell those from unused
    cells)."""
    from openpyxl import Workbook  # imported here: openpyxl is slow to import

    if not lossy:
        for row, col, text in _cells(table):
            if _XML_ILLEGAL.search(text):
                raise _unrepresentable("excel", row, col, text, "XML cannot hold control characters")
        grid = [table.header, *table.rows]
        if not any(table.header):
            raise TableError("excel cannot hold a wholly empty header row", hint="pass lossy=True")
        if table.rows and not any(table.rows[-1]):
            raise TableError("excel cannot hold a wholly empty last row", hint="pass lossy=True")
        for col in (0, table.n_cols - 1):
            if not any(r[col] for r in grid):
                raise TableError(f"excel cannot hold the wholly empty column {col}", hint="pass lossy=True")
    workbook = Workbook()
    ws = workbook.active
    ws.title = sheet
    for r, values in enumerate([table.header, *table.rows], start=1):
        for c, value in enumerate(values, start=1):
            if value == "":
                continue
            cell = ws.cell(row=r, column=c)
            cell.value = _XML_ILLEGAL.sub("", value)
            # Text stays text: without this "=A1" would become a formula.
            cell.data_type = "s"
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def write_table(table: Table, fmt: str, *, json_shape: JsonShape = "header", lossy: bool = False) -> str | bytes:
    """The table in ``fmt`` (one of :data:`WRITE_FORMATS`): text, or bytes for ``excel``.

    ``json_shape`` picks the JSON shape (:data:`JSON_SHAPES`); ``lossy`` lets HTML, Markdown
    and Excel write cells they cannot hold exactly (see each writer)."""
    if fmt == "csv":
        return write_csv(table)
    if fmt == "tsv":
        return write_csv(table, delimiter="\t")
    if fmt == "json":
        return write_json(table, shape=json_shape)
    if fmt == "html":
        return write_html(table, lossy=lossy)
    if fmt == "markdown":
        return write_markdown(table, lossy=lossy)
    if fmt == "excel":
        return write_excel(table, lossy=lossy)
    raise TableError(f"cannot write format {fmt!r}", hint="one of " + ", ".join(WRITE_FORMATS))


def write_tablebench_line(table: Table, item: SourceItem) -> str:
    """One TableBench JSON Lines line (with its ``\\n``) for a table and its question.

    TableBench has one answer string per question: several answers are joined with ", " (as
    its ``Final Answer: a, b`` lines list them). ``meta["chart_type"]`` is written when present."""
    line: dict[str, object] = {
        "id": item.source_id or "",
        "qtype": item.qtype or "",
        "qsubtype": item.subtype or "",
        "table": {"columns": list(table.header), "data": [list(r) for r in table.rows]},
        "question": item.question,
        "answer": ", ".join(item.answers),
    }
    if item.meta.get("chart_type") is not None:
        line["chart_type"] = item.meta["chart_type"]
    return json.dumps(line, ensure_ascii=False) + "\n"


# SourceItem.meta keys the FREB-TQA reader derives (from the file name or by counting) rather
# than reads from the line, so they are not written back.
_FREB_DERIVED_META = frozenset({"folder", "table_variant", "table_name", "n_paragraphs", "rel_cell_original"})


def write_freb_tqa_line(table: Table, item: SourceItem, *, table_as: Literal["object", "rows"] = "object") -> str:
    """One FREB-TQA JSON Lines line (with its ``\\n``): ``id, question, answers, table`` and
    ``rel_cell`` when the item has relevant cells. ``table_as="object"`` writes
    ``{header, rows}`` (plus ``name`` from ``meta["table_name"]``); ``"rows"`` writes a list of
    rows whose first is the header (the ``02_rel`` layout). Other ``meta`` entries read from a
    FREB-TQA line are written back at the top level."""
    table_value: object
    if table_as == "object":
        table_obj: dict[str, object] = {"header": list(table.header), "rows": [list(r) for r in table.rows]}
        if item.meta.get("table_name") is not None:
            table_obj["name"] = item.meta["table_name"]
        table_value = table_obj
    elif table_as == "rows":
        table_value = [list(table.header), *[list(r) for r in table.rows]]
    else:
        raise TableError(f"unknown table layout {table_as!r}", hint="'object' or 'rows'")
    line: dict[str, object] = {
        "id": item.source_id,
        "question": item.question,
        "answers": list(item.answers),
        "table": table_value,
    }
    if item.relevant_cells is not None:
        line["rel_cell"] = [list(c) for c in item.relevant_cells]
    for key, value in item.meta.items():
        if key not in _FREB_DERIVED_META and key not in line:
            line[key] = value
    return json.dumps(line, ensure_ascii=False) + "\n"


__all__ = [
    "JSON_SHAPES",
    "WRITE_FORMATS",
    "write_csv",
    "write_excel",
    "write_freb_tqa_line",
    "write_html",
    "write_json",
    "write_markdown",
    "write_table",
    "write_tablebench_line",
]

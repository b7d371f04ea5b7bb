r"""Prompt serializations: a :class:`Table` as the text put in an LLM prompt.

>>> t = Table.build(["Name", "Age"], [["Sophia", "26"], ["Aarav", "34"]])
>>> serialize(t, "indexed_row_major")
'col : Name | Age row 1 : Sophia | 26 row 2 : Aarav | 34'
>>> print(serialize(t, "dataframe"))
pd.DataFrame({"Name": ["Sophia", "Aarav"], "Age": [26, 34]}, index=[0, 1])

:data:`SERIALIZATIONS` maps each name to its function (``Table -> str``);
:data:`TORR_SERIALIZATIONS` are ToRR's seven (its appendix A.5.1, Table 3); ``xml``, ``latex``
and ``grid`` are the three the capability-based TableBench adds (its Figure 5).

Rules every serializer keeps:

* It never raises, whatever the cell text: a prompt can always be built.
* Cell text is escaped wherever the format needs it, so that no cell can break the structure
  (end a row or a cell early, open an element, comment out the rest of a line).
* Only the header and rows are serialized; caption, source and licence are left to the prompt
  template (as in ToRR and unitxt), so that two serializations differ in format only.
* The text has no trailing line break.
* Where a format makes header names keys (``json``, ``dataframe``), repeated names would
  collide: the second ``a`` becomes ``a_1``, the third ``a_2`` (skipping suffixes that are
  header names already), see :func:`unique_names`. Blank names stay blank (``""`` is a valid key).

The table below is GitHub Markdown (``\|`` is a pipe inside a cell).

| format | shape | escaping | where it differs from the papers |
| --- | --- | --- | --- |
| html | `<table>`, `<thead>` with one `<tr>` of `<th>`, `<tbody>` with a `<tr>` of `<td>` per line (``writers.write_html``) | `&` `<` `>` as entities; line breaks as `<br>` | quotes are not escaped (cells are element content, never attribute values) |
| csv | RFC 4180 (``writers.write_csv``): comma-separated, quoted only where needed | `"` doubled; cells holding `,` `"` CR or LF quoted; every cell quoted when any holds `;` TAB `\|` or the first name starts with U+FEFF | lines end with CRLF (RFC 4180; with LF alone the csv module leaves a bare CR unquoted); no space after the comma (the paper's `Name, Age` is its typesetting) |
| json | `{"0": {"Name": "Sophia", "Age": "26"}, "1": {...}}` on one line | `json.dumps(ensure_ascii=False)` | repeated header names get suffixes; a table without rows is `{}` (the shape has no place for the header) |
| markdown | `\| Name \| Age \|`, `\| --- \| --- \|`, a line per row | `\` as `\\`, `\|` as `\\|`, each line break (CRLF, CR, LF) as `<br>`; cells are not stripped | the paper shows no escaping |
| indexed_row_major | `col : Name \| Age row 1 : Sophia \| 26 row 2 : ...` on one line | plain escapes: `\` `\|` LF CR TAB as `\\` `\\|` `\n` `\r` `\t` | the papers escape nothing; the words `row 2 :` inside a cell stay as they are |
| dataframe | `pd.DataFrame({"Name": ["Sophia"], "Age": [26]}, index=[0])` on one line, a valid Python expression | strings as JSON string literals (valid Python literals) | a column is written as numbers only when every cell is an int whose `str` is the cell, or every cell a finite float whose `str` is the cell; other columns (`"3"` beside `"2.5"`, `"007"`, `""`) stay strings, so evaluating the text gives back the exact cells |
| concatenation | the header, then every cell row by row, joined by single spaces | plain escapes (as indexed_row_major) | the papers escape nothing |
| xml | `<Table>`, `<Header>` of `<Column>name</Column>`, then a `<Row>` of `<Cell>value</Cell>` per line | `&` `<` `>` as entities, CR as `&#13;` (parsers turn a raw CR into LF); characters XML 1.0 cannot hold (C0 controls but TAB LF CR; U+FFFE, U+FFFF) become U+FFFD | element names are fixed, never header names (which are not valid XML names in general) |
| latex | `\begin{tabular}{ll}`, `\hline` after it and after every row, rows `a & b \\` | `&` `%` `$` `#` `_` `{` `}` with a backslash; `\` `~` `^` as `\textbackslash{}` `\textasciitilde{}` `\textasciicircum{}`; line breaks as `\newline` | every column is `l` (the paper's figure shows `r` for its numbers) |
| grid | tabulate's "grid": `+---+` rules between rows, `+===+` under the header, cells left-aligned and padded | plain escapes (as indexed_row_major), so each row is one line | widths count code points, so wide (CJK) and combining characters misalign the rules on screen (the structure stays intact); the paper's figure is too garbled to show whether it has `=` under the header |
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence

from tqaforge.errors import TableError
from tqaforge.ids import encode_json_string
from tqaforge.tables.names import NameNumberer
from tqaforge.tables.table import CELL_SEP, ROW_SEP, Table, flat_cells, joined_rows
from tqaforge.tables.writers import _XML_ILLEGAL, _markdown_text, write_csv, write_html

Serializer = Callable[[Table], str]

# Built once: json.dumps with any option builds a new encoder on every call.
_JSON = json.JSONEncoder(ensure_ascii=False)


def unique_names(header: Sequence[str]) -> list[str]:
    """Header names made unique for formats that use them as keys.

    The first of equal names keeps its name; later ones get ``_1``, ``_2``... (the smallest
    suffix that is neither a header name nor already given).

    >>> unique_names(["a", "a", "a_1", ""])
    ['a', 'a_2', 'a_1', '']
    """
    if len(set(header)) == len(header):
        return list(header)
    numberer = NameNumberer(header, pattern="{name}_{k}", first=1)
    seen: set[str] = set()
    out: list[str] = []
    for name in header:
        if name in seen:
            name = numberer.number(name)
        else:
            seen.add(name)
        out.append(name)
    return out


# The last header's JSON keys, (header, keys): json and dataframe key the same header in turn,
# and the variants of a table that keep its columns share its header tuple.
_last_keys: tuple[object, list[str]] = ((), [])


def _json_keys(header: tuple[str, ...]) -> list[str]:
    """:func:`unique_names` of ``header``, each encoded as a JSON string (do not modify)."""
    global _last_keys
    last = _last_keys  # one read: another thread may replace it meanwhile
    if last[0] is header:
        return last[1]
    keys = list(map(encode_json_string, unique_names(header)))
    if type(header) is tuple:  # immutable: the keys stay right for it
        _last_keys = (header, keys)
    return keys


def _escaped(table: Table, specials: str, escape: Callable[[str], str]) -> Sequence[Sequence[str]]:
    """Header and rows with every cell escaped; when no cell holds any of ``specials`` (most
    tables), the cells as they are, found by one scan of the whole text instead of a call
    per cell."""
    grid = (table.header, *table.rows)
    blob = "".join(map("".join, grid))
    for ch in specials:
        if ch in blob:
            return [list(map(escape, row)) for row in grid]
    return grid


def _joined(table: Table, specials: str, escape: Callable[[str], str]) -> tuple[str, str] | None:
    """(header, rows): the header's cells joined by :data:`CELL_SEP`, the rows as
    :func:`joined_rows`, both escaped with ``escape``; None when a cell holds a separator.

    ``escape`` must replace characters one by one (never across a cell's end, never making a
    separator), so escaping the joined text is escaping every cell: a few passes in C over
    the whole table instead of a call per cell. The rows text is "" for a table without rows."""
    header = CELL_SEP.join(table.header)
    if header.count(CELL_SEP) != table.n_cols - 1 or ROW_SEP in header:
        return None
    rows = joined_rows(table.rows, table.n_cols)
    if rows is None:
        return None
    for ch in specials:
        if ch in header or ch in rows:
            return escape(header), escape(rows)
    return header, rows


# Escapes of the plain-text formats (indexed_row_major, concatenation, grid): the papers have
# none; these keep a cell on one line and its pipes apart from the separators.
_PLAIN_SPECIALS = "\\|\n\r\t"


def _plain(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")


def serialize_html(table: Table) -> str:
    """``<table>`` with ``<thead>``/``<tbody>`` (as :func:`writers.write_html`, without caption).

    >>> print(serialize_html(Table.build(["a"], [["x<y"]])))
    <table>
    <thead>
    <tr><th>a</th></tr>
    </thead>
    <tbody>
    <tr><td>x&lt;y</td></tr>
    </tbody>
    </table>
    """
    bare = table if table.caption is None else table.with_metadata(caption=None)
    return write_html(bare, lossy=True).removesuffix("\n")


def serialize_csv(table: Table) -> str:
    """RFC 4180 CSV (as :func:`writers.write_csv`: CRLF line ends), without the last line end."""
    return write_csv(table).removesuffix("\r\n")


_JSON_CELL_SEP = encode_json_string(CELL_SEP)[1:-1]  # the escape \u001f


class _Texts:
    """``make(i)`` for ``i`` in ``range(stop)``: made once, not once a table (grown as needed, up
    to a bound; replaced, never extended in place, so a thread never sees a list being grown)."""

    _KEPT = 10_000

    def __init__(self, make: Callable[[int], str]) -> None:
        self._make = make
        self._texts: list[str] = []

    def __call__(self, stop: int) -> list[str]:
        texts = self._texts  # one read: another thread may replace it meanwhile
        if len(texts) >= stop:
            return texts[:stop]
        if stop > self._KEPT:
            return list(map(self._make, range(stop)))
        texts = texts + list(map(self._make, range(len(texts), stop)))
        self._texts = texts
        return texts[:stop]


_number_texts = _Texts(str)  # "0", "1", ...: row indexes
_row_labels = _Texts(lambda i: f" row {i + 1} : ")  # what indexed_row_major writes before each row


def _index_text(n: int) -> str:
    """``str(list(range(n)))``: pandas' default index, as dataframe writes it."""
    return "[" + ", ".join(_number_texts(n)) + "]"


def _json_before(keys: list[str], n: int) -> list[str]:
    """What :func:`serialize_json` writes before each cell of ``n`` rows keyed by ``keys`` (JSON
    strings), row after row, and last the text's end: a row's first cell opens the row (its index
    and the first key), the others follow their key."""
    first = '": {' + keys[0] + ': "'
    before = ["", *['", ' + key + ': "' for key in keys[1:]]] * n
    before[0 :: len(keys)] = ['{"0' + first, *['"}, "' + index + first for index in _number_texts(n)[1:]]]
    before.append('"}}')
    return before


def serialize_json(table: Table) -> str:
    """``{"0": {name: cell, ...}, "1": ...}`` keyed by 0-based row index; cells stay strings.

    >>> serialize_json(Table.build(["a", "a"], [["1", "2"]]))
    '{"0": {"a": "1", "a_1": "2"}}'
    """
    rows = joined_rows(table.rows, table.n_cols) if table.rows else None
    if rows is not None and "\\" not in rows:
        # Every cell encoded by one call of the C encoder, the rows joined like the cells: the
        # separators come out as the escape \u001f, which nothing else can produce when no cell
        # holds a backslash, so one split gives every encoded cell. The text is then one join of
        # the cells with what goes before each (a row's index and first key, or the next key).
        keys = _json_keys(table.header)
        m, n = len(keys), table.n_rows
        parts: list[str] = [""] * (2 * m * n + 1)
        parts[1:-1:2] = encode_json_string(rows.replace(ROW_SEP, CELL_SEP))[1:-1].split(_JSON_CELL_SEP)
        parts[0::2] = _json_before(keys, n)
        return "".join(parts)
    names = unique_names(table.header)
    return _JSON.encode({str(i): dict(zip(names, row)) for i, row in enumerate(table.rows)})


def _markdown_cell(text: str) -> str:
    text = _markdown_text(text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.replace("\n", "<br>")


def serialize_markdown(table: Table) -> str:
    """A GitHub pipe table; ``|`` and ``\\`` escaped, line breaks as ``<br>``, cells not stripped.

    >>> print(serialize_markdown(Table.build(["a", "b"], [["x|y", "1\\n2"]])))
    | a | b |
    | --- | --- |
    | x\\|y | 1<br>2 |
    """
    rule = "| " + " | ".join(["---"] * table.n_cols) + " |"
    joined = _joined(table, "\\|\n\r", _markdown_cell)
    if joined is not None:
        head, body = joined
        text = "| " + head.replace(CELL_SEP, " | ") + " |\n" + rule
        if table.rows:
            text += "\n| " + body.replace(CELL_SEP, " | ").replace(ROW_SEP, " |\n| ") + " |"
        return text
    header, *rows = _escaped(table, "\\|\n\r", _markdown_cell)
    lines = ["| " + " | ".join(header) + " |", rule]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def serialize_indexed_row_major(table: Table) -> str:
    """``col : a | b row 1 : x | y ...`` on one line (rows numbered from 1)."""
    joined = _joined(table, _PLAIN_SPECIALS, _plain)
    if joined is not None:
        head, body = joined
        text = "col : " + head.replace(CELL_SEP, " | ")
        if table.rows:
            lines = body.replace(CELL_SEP, " | ").split(ROW_SEP)
            parts = [text] * (2 * len(lines) + 1)  # the header, then each row's label and cells
            parts[1::2] = _row_labels(len(lines))
            parts[2::2] = lines
            return "".join(parts)
        return text
    header, *rows = _escaped(table, _PLAIN_SPECIALS, _plain)
    parts = ["col : " + " | ".join(header)]
    parts += [f"row {i} : " + " | ".join(row) for i, row in enumerate(rows, start=1)]
    return " ".join(parts)


def _number(text: str) -> int | float | None:
    """The number whose ``str`` is exactly ``text``, or None."""
    if not text or text[-1] not in "0123456789":  # cheap rejection of most words
        return None
    digits = text[1:] if text[0] == "-" else text
    if digits.isascii() and digits.isdigit():  # no exception raised for the common integers
        try:
            value = int(text)
        except ValueError:  # more digits than int() converts (sys.get_int_max_str_digits)
            return None
        return value if str(value) == text else None  # "007" and "-0" stay strings
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) and str(number) == text else None


def _column_values(cells: tuple[str, ...]) -> list[object]:
    """The column as Python values: all ints or all floats when every cell is one exactly,
    else the strings (so ``int``/``float`` of a parsed-back value always prints the cell)."""
    numbers: list[object] = []
    for cell in cells:
        number = _number(cell)
        if number is None:
            return list(cells)
        numbers.append(number)
    return numbers if len({type(n) for n in numbers}) <= 1 else list(cells)


# The dataframe format joins a column's cells with DEL to test and encode them in a few calls in C:
# JSON's encoder leaves DEL as it is (it escapes quotes, backslashes and controls below U+0020), so
# a string column is encoded in one call and its separators found by a one-character search; no
# number holds DEL, and a column with a cell that does is encoded cell by cell.
_COLUMN_SEP = "\x7f"


# A column whose cells, joined by _COLUMN_SEP, match this is all ints whose ``str`` is the cell (no
# "007", no "-0"; at most 4300 digits, the default limit of int()): it is written as its own text.
_INT_COLUMN = re.compile(r"(?:0|-?[1-9][0-9]{0,4299}+)(?:\x7f(?:0|-?[1-9][0-9]{0,4299}+))*+")


# Every str() of a finite float matches this ("12.5", "-0.001", "1e+16", "1.5e-07"); a column whose
# cells, joined by _COLUMN_SEP, do not is no float column, found without a parse per cell.
_FLOATISH_COLUMN = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:e[+-][0-9]+)?(?:\x7f-?[0-9]+(?:\.[0-9]+)?(?:e[+-][0-9]+)?)*")


# Cells that surely are the ``str`` of their float, recognised without parsing a float and
# writing it back: at most 7 + 8 digits (so the decimal is the shortest that gives its float back,
# DBL_DIG being 15), the integer part without leading zeros, the fraction "0" or ending in a
# non-zero digit, and no value under 1e-4 (which ``str`` writes with an exponent). Other columns
# take the exact check. Possessive repeats: nothing to backtrack into, so no state kept per cell.
_SURE_FLOAT = r"-?(?:0\.(?!0000)|[1-9][0-9]{0,6}+\.)[0-9]{1,8}+(?<![0-9]0)"
_SURE_FLOAT_COLUMN = re.compile(f"{_SURE_FLOAT}(?:\x7f{_SURE_FLOAT})*+")


def _column_text(cells: Sequence[str]) -> str:
    """The JSON text of :func:`_column_values` of ``cells`` (at least one), with a few calls in C:
    a number column is its cells as they are (JSON writes an int or a float as its ``str``, which
    is the cell), a string column one string encoded with its cells joined by _COLUMN_SEP."""
    text = _COLUMN_SEP.join(cells)
    if text.count(_COLUMN_SEP) != len(cells) - 1:  # a cell holds the separator: no number, no fast path
        return _JSON.encode(list(cells))
    if _is_number_column(text, cells):
        return "[" + text.replace(_COLUMN_SEP, ", ") + "]"
    return "[" + encode_json_string(text).replace(_COLUMN_SEP, '", "') + "]"


def _is_number_column(text: str, cells: Sequence[str]) -> bool:
    """Whether the column (``cells``, joined by _COLUMN_SEP in ``text``, no cell holding the
    separator) is all ints or all floats whose ``str`` is the cell: :func:`_column_values`
    would give numbers, which JSON writes as the cells themselves."""
    if not cells[0][-1:].isdigit():  # cheap rejection of most string columns
        return False
    if _INT_COLUMN.fullmatch(text) or _SURE_FLOAT_COLUMN.fullmatch(text):
        return True
    # all() stops at the first cell that is not the str of its float (as in a column mixing ints
    # and floats, which the float pattern lets through).
    return _FLOATISH_COLUMN.fullmatch(text) is not None and all(map(str.__eq__, map(str, map(float, cells)), cells))


def serialize_dataframe(table: Table) -> str:
    """``pd.DataFrame({name: [values]}, index=[0, 1, ...])``: a valid Python expression.

    >>> serialize_dataframe(Table.build(["n", "x"], [["1", "2.5"], ["2", "n/a"]]))
    'pd.DataFrame({"n": [1, 2], "x": ["2.5", "n/a"]}, index=[0, 1])'
    """
    keys = _json_keys(table.header)
    n = table.n_rows
    if not n:
        body = ", ".join([f"{key}: []" for key in keys])
        return f"pd.DataFrame({{{body}}}, index=[])"
    flat, m = flat_cells(table.rows), table.n_cols
    body = ", ".join([key + ": " + _column_text(flat[c::m]) for c, key in enumerate(keys)])
    return f"pd.DataFrame({{{body}}}, index={_index_text(n)})"


def serialize_concatenation(table: Table) -> str:
    """The header and then every cell, row by row, joined by single spaces."""
    joined = _joined(table, _PLAIN_SPECIALS, _plain)
    if joined is not None:
        head, body = joined
        text = head + " " + body if table.rows else head
        return text.replace(CELL_SEP, " ").replace(ROW_SEP, " ")
    return " ".join(map(" ".join, _escaped(table, _PLAIN_SPECIALS, _plain)))


def _xml_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\r", "&#13;")


def serialize_xml(table: Table) -> str:
    """``<Table><Header><Column>..</Column></Header><Row><Cell>..</Cell></Row></Table>``.

    >>> print(serialize_xml(Table.build(["a & b"], [["<1>"]])))
    <Table>
    <Header><Column>a &amp; b</Column></Header>
    <Row><Cell>&lt;1&gt;</Cell></Row>
    </Table>
    """
    header, *rows = _escaped(table, "&<>\r", _xml_text)
    lines = ["<Table>", "<Header><Column>" + "</Column><Column>".join(header) + "</Column></Header>"]
    lines += ["<Row><Cell>" + "</Cell><Cell>".join(row) + "</Cell></Row>" for row in rows]
    lines.append("</Table>")
    text = "\n".join(lines)
    # One pass over the whole text: XML 1.0 cannot hold these, not even as references.
    return _XML_ILLEGAL.sub("\ufffd", text)


_LATEX_SPECIALS = "\\&%$#_{}~^\n\r"
_LATEX = str.maketrans(
    {
        "\\": r"\textbackslash{}",
        "&": r"\&",
        "%": r"\%",
        "$": r"\$",
        "#": r"\#",
        "_": r"\_",
        "{": r"\{",
        "}": r"\}",
        "~": r"\textasciitilde{}",
        "^": r"\textasciicircum{}",
        "\n": "\\newline ",
        "\r": "\\newline ",
    }
)


def _latex_cell(text: str) -> str:
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    return text.translate(_LATEX)


def serialize_latex(table: Table) -> str:
    """A ``tabular`` with ``\\hline`` after the opening and after every row.

    >>> print(serialize_latex(Table.build(["a_b", "c"], [["50%", "x"]])))
    \\begin{tabular}{ll}
    \\hline
    a\\_b & c \\\\
    \\hline
    50\\% & x \\\\
    \\hline
    \\end{tabular}
    """
    lines = ["\\begin{tabular}{" + "l" * table.n_cols + "}", "\\hline"]
    for row in _escaped(table, _LATEX_SPECIALS, _latex_cell):
        lines.append(" & ".join(row) + " \\\\")
        lines.append("\\hline")
    lines.append("\\end{tabular}")
    return "\n".join(lines)


def serialize_grid(table: Table) -> str:
    """tabulate's ``grid`` style, cells left-aligned.

    >>> print(serialize_grid(Table.build(["Name", "Age"], [["Sophia", "26"]])))
    +--------+-----+
    | Name   | Age |
    +========+=====+
    | Sophia | 26  |
    +--------+-----+
    """
    grid = _escaped(table, _PLAIN_SPECIALS, _plain)
    widths = [max(map(len, column)) for column in zip(*grid)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    lines = [rule]
    # One format string pads a whole row in one call; cells are arguments, so braces in them
    # are not format syntax.
    padded = "| " + " | ".join(f"{{:<{w}}}" for w in widths) + " |"
    for i, row in enumerate(grid):
        lines.append(padded.format(*row))
        lines.append(rule.replace("-", "=") if i == 0 else rule)
    return "\n".join(lines)


#: Serialization name -> function. ToRR's seven first, then the capability TableBench's three.
SERIALIZATIONS: dict[str, Serializer] = {
    "html": serialize_html,
    "csv": serialize_csv,
    "json": serialize_json,
    "markdown": serialize_markdown,
    "indexed_row_major": serialize_indexed_row_major,
    "dataframe": serialize_dataframe,
    "concatenation": serialize_concatenation,
    "xml": serialize_xml,
    "latex": serialize_latex,
    "grid": serialize_grid,
}

#: The seven serializations of ToRR, in its order.
TORR_SERIALIZATIONS: tuple[str, ...] = (
    "html",
    "csv",
    "json",
    "markdown",
    "indexed_row_major",
    "dataframe",
    "concatenation",
)


def serialize(table: Table, name: str) -> str:
    """The table as prompt text in serialization ``name`` (one of :data:`SERIALIZATIONS`).

    Raises :class:`TableError` for an unknown name; never for any cell text."""
    try:
        function = SERIALIZATIONS[name]
    except KeyError:
        raise TableError(f"unknown serialization {name!r}", hint="one of " + ", ".join(SERIALIZATIONS)) from None
    return function(table)


__all__ = [
    "SERIALIZATIONS",
    "TORR_SERIALIZATIONS",
    "Serializer",
    "serialize",
    "serialize_concatenation",
    "serialize_csv",
    "serialize_dataframe",
    "serialize_grid",
    "serialize_html",
    "serialize_indexed_row_major",
    "serialize_json",
    "serialize_latex",
    "serialize_markdown",
    "serialize_xml",
    "unique_names",
]

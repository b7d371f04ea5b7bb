"""Prompt serializations: exact text for known tables (written by hand from the papers'
examples), and properties on random tables with hostile cell text.

The parse-back properties compare each cell with what the format can show of it, never with a
restricted alphabet: every table below may hold any character (no surrogates), blank and
repeated header names, and no rows at all. What a format cannot show is stated where compared:

* HTML: the reader renders cells as a browser does (runs of ASCII whitespace become one space,
  spaces at line ends go); ``visible_text`` is that rule, so a cell reads back as
  ``visible_text(cell)``. Line breaks survive (as ``<br>``).
* Markdown: a line break is written ``<br>``, which Markdown readers do not turn back into a
  line break, and cells are stripped of surrounding spaces and tabs by the reader.
* XML: characters XML 1.0 cannot hold read back as U+FFFD.
* JSON and DataFrame: repeated header names read back with their suffixes (``unique_names``).
"""

from __future__ import annotations

import ast
import json
import re
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tqaforge.errors import TableError, TqaforgeError
from tqaforge.tables.cells import clean_text
from tqaforge.tables.readers import read_path
from tqaforge.tables.readers.html import visible_text
from tqaforge.tables.serialize import (
    SERIALIZATIONS,
    TORR_SERIALIZATIONS,
    serialize,
    unique_names,
)
from tqaforge.tables.table import Table

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ---------------------------------------------------------------------------------------------
# Known tables, expected text by hand.

# ToRR's Table 3 example.
TORR = Table.build(["Name", "Age", "Sex"], [["Sophia", "26", "F"], ["Aarav", "34", "M"], ["Oliver", "30", "M"]])

TORR_EXPECTED = {
    "html": (
        "<table>\n<thead>\n<tr><th>Name</th><th>Age</th><th>Sex</th></tr>\n</thead>\n<tbody>\n"
        "<tr><td>Sophia</td><td>26</td><td>F</td></tr>\n"
        "<tr><td>Aarav</td><td>34</td><td>M</td></tr>\n"
        "<tr><td>Oliver</td><td>30</td><td>M</td></tr>\n"
        "</tbody>\n</table>"
    ),
    "csv": "Name,Age,Sex\r\nSophia,26,F\r\nAarav,34,M\r\nOliver,30,M",
    "json": (
        '{"0": {"Name": "Sophia", "Age": "26", "Sex": "F"}, '
        '"1": {"Name": "Aarav", "Age": "34", "Sex": "M"}, '
        '"2": {"Name": "Oliver", "Age": "30", "Sex": "M"}}'
    ),
    "markdown": "| Name | Age | Sex |\n| --- | --- | --- |\n| Sophia | 26 | F |\n| Aarav | 34 | M |\n| Oliver | 30 | M |",
    "indexed_row_major": "col : Name | Age | Sex row 1 : Sophia | 26 | F row 2 : Aarav | 34 | M row 3 : Oliver | 30 | M",
    "dataframe": (
        'pd.DataFrame({"Name": ["Sophia", "Aarav", "Oliver"], "Age": [26, 34, 30], "Sex": ["F", "M", "M"]}, '
        "index=[0, 1, 2])"
    ),
    "concatenation": "Name Age Sex Sophia 26 F Aarav 34 M Oliver 30 M",
    "xml": (
        "<Table>\n"
        "<Header><Column>Name</Column><Column>Age</Column><Column>Sex</Column></Header>\n"
        "<Row><Cell>Sophia</Cell><Cell>26</Cell><Cell>F</Cell></Row>\n"
        "<Row><Cell>Aarav</Cell><Cell>34</Cell><Cell>M</Cell></Row>\n"
        "<Row><Cell>Oliver</Cell><Cell>30</Cell><Cell>M</Cell></Row>\n"
        "</Table>"
    ),
    "latex": "\n".join(
        [
            r"\begin{tabular}{lll}",
            r"\hline",
            r"Name & Age & Sex \\",
            r"\hline",
            r"Sophia & 26 & F \\",
            r"\hline",
            r"Aarav & 34 & M \\",
            r"\hline",
            r"Oliver & 30 & M \\",
            r"\hline",
            r"\end{tabular}",
        ]
    ),
    "grid": "\n".join(
        [
            "+--------+-----+-----+",
            "| Name   | Age | Sex |",
            "+========+=====+=====+",
            "| Sophia | 26  | F   |",
            "+--------+-----+-----+",
            "| Aarav  | 34  | M   |",
            "+--------+-----+-----+",
            "| Oliver | 30  | M   |",
            "+--------+-----+-----+",
        ]
    ),
}

# Escaping: a pipe in repeated header names, a blank name, a line break, markup, quotes, and
# every LaTeX special.
TRICKY = Table.build(["a|b", "a|b", ""], [["x\ny", '<&"q">', "5%_{$}\\"], ["1", "2.5", "~^#"]])

TRICKY_EXPECTED = {
    "html": (
        "<table>\n<thead>\n<tr><th>a|b</th><th>a|b</th><th></th></tr>\n</thead>\n<tbody>\n"
        '<tr><td>x<br>y</td><td>&lt;&amp;"q"&gt;</td><td>5%_{$}\\</td></tr>\n'
        "<tr><td>1</td><td>2.5</td><td>~^#</td></tr>\n"
        "</tbody>\n</table>"
    ),
    # A pipe in some cell: every cell is quoted (writers.write_csv), quotes doubled.
    "csv": '"a|b","a|b",""\r\n"x\ny","<&""q"">","5%_{$}\\"\r\n"1","2.5","~^#"',
    "json": r'{"0": {"a|b": "x\ny", "a|b_1": "<&\"q\">", "": "5%_{$}\\"}, "1": {"a|b": "1", "a|b_1": "2.5", "": "~^#"}}',
    "markdown": "\n".join(
        [
            r"| a\|b | a\|b |  |",
            r"| --- | --- | --- |",
            r'| x<br>y | <&"q"> | 5%_{$}\\ |',
            r"| 1 | 2.5 | ~^# |",
        ]
    ),
    "indexed_row_major": r'col : a\|b | a\|b |  row 1 : x\ny | <&"q"> | 5%_{$}\\ row 2 : 1 | 2.5 | ~^#',
    # Column "a|b_1" holds "2.5" beside a string: strings stay strings.
    "dataframe": r'pd.DataFrame({"a|b": ["x\ny", "1"], "a|b_1": ["<&\"q\">", "2.5"], "": ["5%_{$}\\", "~^#"]}, index=[0, 1])',
    "concatenation": r'a\|b a\|b  x\ny <&"q"> 5%_{$}\\ 1 2.5 ~^#',
    "xml": (
        "<Table>\n"
        "<Header><Column>a|b</Column><Column>a|b</Column><Column></Column></Header>\n"
        '<Row><Cell>x\ny</Cell><Cell>&lt;&amp;"q"&gt;</Cell><Cell>5%_{$}\\</Cell></Row>\n'
        "<Row><Cell>1</Cell><Cell>2.5</Cell><Cell>~^#</Cell></Row>\n"
        "</Table>"
    ),
    "latex": "\n".join(
        [
            r"\begin{tabular}{lll}",
            r"\hline",
            r"a|b & a|b &  \\",
            r"\hline",
            r'x\newline y & <\&"q"> & 5\%\_\{\$\}\textbackslash{} \\',
            r"\hline",
            r"1 & 2.5 & \textasciitilde{}\textasciicircum{}\# \\",
            r"\hline",
            r"\end{tabular}",
        ]
    ),
    "grid": "\n".join(
        [
            "+------+--------+----------+",
            r"| a\|b | a\|b   |          |",
            "+======+========+==========+",
            r'| x\ny | <&"q"> | 5%_{$}\\ |',
            "+------+--------+----------+",
            "| 1    | 2.5    | ~^#      |",
            "+------+--------+----------+",
        ]
    ),
}


def test_names_and_order() -> None:
    assert list(SERIALIZATIONS) == [*TORR_SERIALIZATIONS, "xml", "latex", "grid"]
    assert TORR_SERIALIZATIONS == ("html", "csv", "json", "markdown", "indexed_row_major", "dataframe", "concatenation")


@pytest.mark.parametrize("name", list(SERIALIZATIONS))
def test_torr_example(name: str) -> None:
    assert serialize(TORR, name) == TORR_EXPECTED[name]
    assert SERIALIZATIONS[name](TORR) == TORR_EXPECTED[name]


@pytest.mark.parametrize("name", list(SERIALIZATIONS))
def test_escaping_example(name: str) -> None:
    assert serialize(TRICKY, name) == TRICKY_EXPECTED[name]


@pytest.mark.parametrize("name", list(SERIALIZATIONS))
def test_metadata_is_not_serialized(name: str) -> None:
    dressed = TORR.with_metadata(caption="People", source="toy", licence="CC0")
    assert serialize(dressed, name) == TORR_EXPECTED[name]


def test_no_rows() -> None:
    t = Table.build(["a", "b"], [])
    assert serialize(t, "json") == "{}"
    assert serialize(t, "dataframe") == 'pd.DataFrame({"a": [], "b": []}, index=[])'
    assert serialize(t, "indexed_row_major") == "col : a | b"
    assert serialize(t, "concatenation") == "a b"
    assert serialize(t, "grid") == "+---+---+\n| a | b |\n+===+===+"


def test_dataframe_numbers() -> None:
    t = Table.build(
        ["int", "float", "mixed", "zero", "sci", "nan", "big"],
        [["-3", "2.5", "3", "007", "1e+16", "nan", "123456789012345678901234567890"], ["10", "-0.0", "2.5", "1", "1e+16", "1", "1"]],
    )
    assert serialize(t, "dataframe") == (
        'pd.DataFrame({"int": [-3, 10], "float": [2.5, -0.0], "mixed": ["3", "2.5"], "zero": ["007", "1"], '
        '"sci": [1e+16, 1e+16], "nan": ["nan", "1"], "big": [123456789012345678901234567890, 1]}, index=[0, 1])'
    )


def test_unknown_name() -> None:
    with pytest.raises(TableError) as info:
        serialize(TORR, "yaml")
    assert isinstance(info.value, TqaforgeError)
    assert "'yaml'" in str(info.value)
    for name in SERIALIZATIONS:
        assert name in (info.value.hint or "")


def test_unique_names() -> None:
    assert unique_names(["a", "b"]) == ["a", "b"]
    assert unique_names(["a", "a", "a"]) == ["a", "a_1", "a_2"]
    assert unique_names(["a", "a", "a_1"]) == ["a", "a_2", "a_1"]
    assert unique_names(["", "", "x"]) == ["", "_1", "x"]


# ---------------------------------------------------------------------------------------------
# Random tables with hostile text.

# Every character the brief names, and multi-character pieces that make escape sequences,
# entities and line-break pairs likely rather than one-in-thousands.
HOSTILE = list("|<>&\"'\n\r\\,\t;%$#_{}~^ :-") + [
    "", "\u00a0", "\u2028", "\u0085", "\ufeff", "é", "東", "☃", "\x00", "\x0b", "\ufffe",
    "\\\\", "\\|", "\\n", "\r\n", '""', "&amp;", "&lt;", "&#13;", "</td>", "<br>", "]]>",
    "<!--", "---", "| --- |", " row 2 : ", "\\hline", "\\\\ ", "+---+",
]
CHAR = st.one_of(st.sampled_from(HOSTILE), st.characters(codec="utf-8"))
TEXT = st.lists(CHAR, max_size=8).map("".join)


@st.composite
def tables(draw: st.DrawFn, cell: st.SearchStrategy[str] = TEXT, min_rows: int = 0) -> Table:
    """Any table: 1-5 columns, 0-6 rows, header names possibly blank or repeated."""
    n_cols = draw(st.integers(1, 5))
    header = draw(st.lists(st.one_of(cell, st.sampled_from(["", "a", "a_1"])), min_size=n_cols, max_size=n_cols))
    rows = draw(st.lists(st.lists(cell, min_size=n_cols, max_size=n_cols), min_size=min_rows, max_size=6))
    return Table.build(header, rows)


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    # Module-scoped: hypothesis runs many examples per test function.
    with tempfile.TemporaryDirectory() as d:
        yield Path(d)


def read_back(scratch: Path, text: str, fmt: str, suffix: str) -> Table:
    """Our reader's view of a serialization (the readers refuse a table with no rows, so the
    tests that use them draw at least one)."""
    path = scratch / f"prompt{suffix}"
    path.write_bytes(text.encode("utf-8"))
    result = read_path(path, fmt, strict_headers=False)
    assert len(result.records) == 1
    return result.records[0].table


def grid_of(table: Table) -> list[tuple[str, ...]]:
    return [table.header, *table.rows]


@SETTINGS
@given(table=tables())
def test_never_raises(table: Table) -> None:
    for name, function in SERIALIZATIONS.items():
        text = function(table)
        assert isinstance(text, str)
        assert text == serialize(table, name)
        assert not text.endswith("\n"), name


@SETTINGS
@given(table=tables(min_rows=1))
def test_html_parses_back(scratch: Path, table: Table) -> None:
    back = read_back(scratch, serialize(table, "html"), "html", ".html")
    # Readers remove control characters (the one rule of tables.cells.clean_text).
    assert grid_of(back) == [tuple(clean_text(visible_text(c)) for c in row) for row in grid_of(table)]


@SETTINGS
@given(table=tables(min_rows=1), separators=st.lists(st.sampled_from(["\x1e", "\x1f"]), max_size=2))
def test_html_one_pass_body_equals_escaping_each_cell(table: Table, separators: list[str]) -> None:
    # The one-pass body must equal escaping cell by cell, also when cells hold its separators.
    from tqaforge.tables.writers import _html_body, _html_text

    rows = tuple(tuple(c + "".join(separators) if (i + j) % 2 else c for j, c in enumerate(r)) for i, r in enumerate(table.rows))
    by_cell = "".join("<tr>" + "".join(f"<td>{_html_text(v)}</td>" for v in r) + "</tr>\n" for r in rows)
    assert _html_body(rows, table.n_cols) == by_cell


@SETTINGS
@given(table=tables(min_rows=1))
@example(table=Table.build([" "], [[" "]]))  # found by Hypothesis: the reader called it empty (issue 10)
def test_csv_parses_back(scratch: Path, table: Table) -> None:
    back = read_back(scratch, serialize(table, "csv"), "csv", ".csv")
    # Readers remove control characters (the one rule of tables.cells.clean_text).
    assert grid_of(back) == [tuple(map(clean_text, row)) for row in grid_of(table)]


def _markdown_shown(cell: str) -> str:
    return cell.replace("\r\n", "<br>").replace("\r", "<br>").replace("\n", "<br>").strip(" \t")


@SETTINGS
@given(table=tables(min_rows=1))
def test_markdown_parses_back(scratch: Path, table: Table) -> None:
    back = read_back(scratch, serialize(table, "markdown"), "markdown", ".md")
    assert grid_of(back) == [tuple(clean_text(_markdown_shown(c)) for c in row) for row in grid_of(table)]


@SETTINGS
@given(table=tables())
def test_json_parses_back(table: Table) -> None:
    data = json.loads(serialize(table, "json"))
    assert list(data) == [str(i) for i in range(table.n_rows)]
    for i, row in enumerate(table.rows):
        assert list(data[str(i)]) == unique_names(table.header)
        assert tuple(data[str(i)].values()) == row


# Columns of one kind each, so that whole columns of numbers (and near-numbers) are common.
NUMERIC_TEXT = st.one_of(
    st.integers().map(str),
    st.floats().map(str),
    st.from_regex(r"[-+]?[0-9]{0,3}(\.[0-9]{0,2})?(e[-+]?[0-9]{1,2})?", fullmatch=True),
    st.sampled_from(["0", "-0", "007", "1_000", " 5", "٣", "inf", "nan", "1e5", "1.0", "9223372036854775808"]),
)


@st.composite
def dataframe_tables(draw: st.DrawFn) -> Table:
    n_cols = draw(st.integers(1, 4))
    n_rows = draw(st.integers(0, 5))
    header = draw(st.lists(TEXT, min_size=n_cols, max_size=n_cols))
    kinds = [
        draw(st.sampled_from([st.integers().map(str), st.floats(allow_nan=False, allow_infinity=False).map(str), NUMERIC_TEXT, TEXT]))
        for _ in range(n_cols)
    ]
    columns = [draw(st.lists(kind, min_size=n_rows, max_size=n_rows)) for kind in kinds]
    return Table.build(header, list(zip(*columns)) if n_rows else [])


@SETTINGS
@given(table=dataframe_tables())
def test_dataframe_literal_gives_the_cells(table: Table) -> None:
    text = serialize(table, "dataframe")
    suffix = f", index={list(range(table.n_rows))})"
    assert text.startswith("pd.DataFrame(") and text.endswith(suffix)
    columns = ast.literal_eval(text[len("pd.DataFrame(") : -len(suffix)])
    assert list(columns) == unique_names(table.header)
    for values, cells in zip(columns.values(), zip(*table.rows)):
        assert tuple(map(str, values)) == cells
        assert len({type(v) for v in values}) == 1  # never a column of mixed types


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=dataframe_tables())
def test_dataframe_evaluates_with_pandas(table: Table) -> None:
    frame = eval(serialize(table, "dataframe"), {"pd": pd})  # our own output, not model text
    assert list(frame.columns) == unique_names(table.header)
    assert list(frame.index) == list(range(table.n_rows))
    for name, cells in zip(frame.columns, zip(*table.rows)):
        assert tuple(str(v) for v in frame[name].tolist()) == cells


_XML_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


@SETTINGS
@given(table=tables())
def test_xml_parses_back(table: Table) -> None:
    root = ET.fromstring(serialize(table, "xml"))
    assert root.tag == "Table"
    header = root.find("Header")
    assert header is not None
    back = [tuple(c.text or "" for c in header)] + [tuple(c.text or "" for c in row) for row in root.findall("Row")]
    assert back == [tuple(_XML_ILLEGAL.sub("\ufffd", c) for c in row) for row in grid_of(table)]


@SETTINGS
@given(table=tables())
def test_latex_structure(table: Table) -> None:
    lines = serialize(table, "latex").split("\n")
    assert lines[0] == "\\begin{tabular}{" + "l" * table.n_cols + "}"
    assert lines[1] == lines[-2] == "\\hline"
    assert lines[-1] == "\\end{tabular}"
    body = lines[2:-1]
    assert len(body) == 2 * (table.n_rows + 1)
    assert body[1::2] == ["\\hline"] * (table.n_rows + 1)
    for line in body[0::2]:
        assert line.endswith(" \\\\") and line.count("\\\\") == 1  # one row end, at the end
        assert len(re.findall(r"(?<!\\)&", line)) == table.n_cols - 1  # only the separators
        assert not re.search(r"(?<!\\)[%$#_^~]", line)  # no comment, no math mode
        depth = 0
        for ch in re.sub(r"\\[{}]", "", line):
            depth += {"{": 1, "}": -1}.get(ch, 0)
            assert depth >= 0
        assert depth == 0


_UNESCAPE = {"n": "\n", "r": "\r", "t": "\t"}


def _split_plain(text: str) -> list[str]:
    """Split on unescaped pipes and undo the plain escapes of each piece."""
    pieces, current, i = [], [], 0
    while i < len(text):
        if text[i] == "\\":
            current.append(_UNESCAPE.get(text[i + 1], text[i + 1]))
            i += 2
        elif text[i] == "|":
            pieces.append("".join(current))
            current = []
            i += 1
        else:
            current.append(text[i])
            i += 1
    pieces.append("".join(current))
    return pieces


@SETTINGS
@given(table=tables())
def test_grid_structure_and_cells(table: Table) -> None:
    lines = serialize(table, "grid").split("\n")
    assert len(lines) == 3 + 2 * table.n_rows
    assert len({len(line) for line in lines}) == 1  # a rectangle (widths count code points)
    rules, rows = lines[0::2], lines[1::2]
    assert all(re.fullmatch(r"(\+-+)+\+", r) for r in rules[:1] + rules[2:])
    assert rules[1] == rules[0].replace("-", "=")
    for line, cells in zip(rows, grid_of(table)):
        pieces = _split_plain(line)
        assert pieces[0] == pieces[-1] == "" and len(pieces) == table.n_cols + 2
        for piece, cell in zip(pieces[1:-1], cells):
            assert piece.startswith(" ") and piece.endswith(" ")
            assert piece[1:].rstrip(" ") == cell.rstrip(" ")


@SETTINGS
@given(table=tables())
def test_indexed_row_major_and_concatenation_structure(table: Table) -> None:
    irm = serialize(table, "indexed_row_major")
    concat = serialize(table, "concatenation")
    for text in (irm, concat):
        assert "\n" not in text and "\r" not in text
    assert irm.startswith("col : ")
    # Pipes separate cells only: cell pipes are escaped.
    assert len(_split_plain(irm)) == (table.n_cols - 1) * (table.n_rows + 1) + 1
    position = 0
    for i in range(1, table.n_rows + 1):
        position = irm.index(f" row {i} : ", position) + 1
    # Concatenation: no unescaped pipe at all, and unescaping gives back the cells.
    assert _split_plain(concat) == [" ".join(c for row in grid_of(table) for c in row)]


@SETTINGS
@given(table=tables(), packed=st.booleans(), separators=st.lists(st.sampled_from(["\x1e", "\x1f"]), max_size=2),
       in_header=st.booleans())
def test_the_joined_text_paths_equal_the_cell_by_cell_paths(table: Table, packed: bool, separators: list[str], in_header: bool) -> None:
    """Serializers escape the joined cells of a table in one pass (tables.joined_rows) and fall
    back to one cell at a time when a cell holds a separator: both give the same text, for
    packed rows and tuples alike. The csv fast path gives what the csv module writes."""
    from tqaforge.tables import serialize as ser
    from tqaforge.tables import writers
    from tqaforge.tables.table import PackedRows

    if separators and in_header:
        table = Table((table.header[0] + "".join(separators), *table.header[1:]), table.rows)
    elif separators and table.rows:
        first = table.rows[0]
        table = Table(table.header, ((first[0] + "".join(separators), *first[1:]), *table.rows[1:]))
    if packed:
        table = Table(table.header, PackedRows(table.rows))
    fast = {name: fn(table) for name, fn in SERIALIZATIONS.items()}
    with pytest.MonkeyPatch.context() as mp:
        for module in (ser, writers):
            mp.setattr(module, "joined_rows", lambda rows, width: None)
        mp.setattr(writers, "_csv_text", lambda *args: None)
        slow = {name: fn(table) for name, fn in SERIALIZATIONS.items()}
    assert fast == slow


NUMBERISH = st.sampled_from(["0", "-0", "7", "-12", "007", "1e5", "1e+16", "1.5e-07", "2.5", "-0.001", "2.50", "3.0",
                             "nan", "inf", "1_000", " 4", "٣", "1,234", "12\n", "", "x", "\\", "\x1f", "\x7f", "1\x7f2", "9" * 4301])


@SETTINGS
@given(cells=st.lists(NUMBERISH | st.from_regex(r"-?[0-9]{1,3}(\.[0-9]{1,3})?(e[+-][0-9]{1,3})?", fullmatch=True), min_size=1, max_size=6))
def test_dataframe_columns_with_expressions_equal_the_parse_of_every_cell(cells: list[str]) -> None:
    """The dataframe column text found by regular expressions and one encoding is the JSON of
    the column parsed cell by cell (the rule: all ints, or all floats, whose str is the cell)."""
    from tqaforge.tables.serialize import _column_text, _column_values

    assert _column_text(cells) == json.dumps(_column_values(tuple(cells)), ensure_ascii=False)

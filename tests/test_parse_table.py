"""Reading a table back from a reply (tqaforge.tables.parse_table): serialize then parse gives the
table back for every format that can hold it, and replies amid prose and fences are read."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tqaforge.tables.parse_table import TableParseError, parse_table, read_concatenation
from tqaforge.tables.serialize import SERIALIZATIONS, serialize
from tqaforge.tables.table import Table
from tqaforge.tables.teds import SpanCell

# Formats that give back every table of these cells exactly (module docs of parse_table: the
# others lose surrounding or repeated whitespace, repeated header names...).
_EXACT = ("csv", "xml", "indexed_row_major")
# Words without surrounding whitespace, with every character the formats escape.
_WORD = st.text(alphabet=st.sampled_from(list("ab Z09.-,;|\\&<>%$#_{}~^\"'():=+*") + ["é", "東"]), min_size=0, max_size=6)
_TRIMMED = _WORD.map(lambda s: " ".join(s.split()))  # no space at the ends, none doubled


@st.composite
def tables(draw: st.DrawFn, cell: st.SearchStrategy[str] = _TRIMMED, distinct_header: bool = False) -> Table:
    n_cols = draw(st.integers(1, 4))
    n_rows = draw(st.integers(0, 4))
    header = draw(st.lists(cell.filter(bool), min_size=n_cols, max_size=n_cols, unique=distinct_header))
    rows = draw(st.lists(st.lists(cell, min_size=n_cols, max_size=n_cols), min_size=n_rows, max_size=n_rows))
    return Table.build(header, rows)


_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("fmt", _EXACT)
@_SETTINGS
@given(table=tables(cell=_WORD))
def test_exact_formats_give_back_any_table(fmt: str, table: Table) -> None:
    text = serialize(table, fmt)
    # A table that serializes to blanks only (one blank header, no rows, in csv) is no reply at
    # all: parse_table says so (test_hostile_teds), it cannot give it back.
    assume(text.strip())
    assert parse_table(text, fmt).table() == table


@pytest.mark.parametrize("fmt", ["markdown", "grid", "latex", "html"])
@_SETTINGS
@given(table=tables())
def test_padded_formats_give_back_tables_of_trimmed_cells(fmt: str, table: Table) -> None:
    parsed = parse_table(serialize(table, fmt), fmt)
    assert parsed.table() == table


@pytest.mark.parametrize("fmt", ["json", "dataframe"])
@_SETTINGS
@given(table=tables(cell=_WORD, distinct_header=True))
def test_keyed_formats_give_back_tables_of_distinct_names(fmt: str, table: Table) -> None:
    if fmt == "json" and not table.rows:
        return  # {}: the shape has no place for the header (lossy, documented)
    assert parse_table(serialize(table, fmt), fmt).table() == table


def test_every_serialization_is_found_without_naming_it() -> None:
    t = Table.build(["city", "pop"], [["Oslo", "709000"], ["Bergen", "285000"]])
    for fmt in SERIALIZATIONS:
        if fmt == "concatenation":
            continue
        text = f"Here is the edited table:\n\n{serialize(t, fmt)}\n\nLet me know if you need more."
        parsed = parse_table(text)
        assert (parsed.format, parsed.table()) == (fmt, t), fmt


def test_concatenation_needs_the_column_count_and_is_lossy() -> None:
    t = Table.build(["a", "b"], [["1", "2"], ["x|y", "3"]])
    assert parse_table(serialize(t, "concatenation"), "concatenation", n_cols=2).table() == t
    spaced = Table.build(["a", "b"], [["new york", "2"]])
    with pytest.raises(TableParseError, match="do not make rows of 2"):
        read_concatenation(serialize(spaced, "concatenation"), 2)


def test_fences_and_prose() -> None:
    reply = "I swapped the columns.\n```csv\nb,a\n2,1\n```\nThe first table was:\n| a | b |\n|---|---|\n| 1 | 2 |"
    # The fenced block first, read as the format its fence names.
    assert parse_table(reply).table() == Table.build(["b", "a"], [["2", "1"]])
    unfenced = "Sure, here you go, as requested:\nname,age\nAnn,26\nBo,34\nHope this helps."
    assert parse_table(unfenced).table() == Table.build(["name", "age"], [["Ann", "26"], ["Bo", "34"]])


def test_html_spans_and_json_shapes() -> None:
    parsed = parse_table('<table><tr><th colspan="2">who</th></tr><tr><td>Ann</td><td>26</td></tr></table>')
    assert parsed.layout.head == ((SpanCell("who", colspan=2),),)
    with pytest.raises(TableParseError, match="merged cells"):
        parsed.table()
    want = Table.build(["a", "b"], [["1", "x"]])
    for text in ('{"header": ["a", "b"], "rows": [[1, "x"]]}', '{"columns": ["a", "b"], "data": [[1, "x"]]}',
                 '[{"a": 1, "b": "x"}]', '[["a", "b"], [1, "x"]]', 'pd.DataFrame({"a": [1], "b": ["x"]})'):
        assert parse_table(text).table() == want, text
    all_th = parse_table("<table><tr><th>a</th></tr><tr><th>b</th></tr></table>").layout
    assert [len(all_th.head), len(all_th.body)] == [1, 1]  # every row <th>: the first is the header
    two_head = parse_table("<table><tr><th>a</th></tr><tr><th>b</th></tr><tr><td>c</td></tr></table>").layout
    assert [len(two_head.head), len(two_head.body)] == [2, 1]
    latex = "\\begin{tabular}{ll}\n\\multicolumn{2}{c}{who} \\\\\nAnn & 26 \\\\\n\\end{tabular}"
    assert parse_table(latex).layout.head == ((SpanCell("who", colspan=2),),)

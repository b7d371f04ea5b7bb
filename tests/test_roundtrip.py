"""Round trips (the import acceptance test): for every format, a random table written by the
writer, read back by the reader, passed through the canonical form (``to_dict``/``from_dict``)
and written again is the same table, cell for cell.

Alphabets are restricted only where a format cannot hold a character (each restriction is in
the writer's docstring): Markdown cells have no line breaks and no surrounding spaces; HTML
cells have no tabs, carriage returns, runs of spaces or spaces at line ends; Excel cells have
no XML-illegal control characters and no wholly empty last row.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Callable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tqaforge.errors import TableError
from tqaforge.tables.cells import clean_text
from tqaforge.tables.readers import read_path
from tqaforge.tables.source import SourceItem
from tqaforge.tables.table import Table
from tqaforge.tables.writers import (
    JSON_SHAPES,
    write_excel,
    write_freb_tqa_line,
    write_html,
    write_markdown,
    write_table,
    write_tablebench_line,
)

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Characters that break naive writers and readers, mixed into otherwise arbitrary text.
# Multi-character pieces make escape sequences (a backslash before a pipe, "\\n" as WTQ writes
# line breaks, entities, quote pairs) likely rather than one-in-thousands.
HOSTILE = list(',;\t|"\'<>&\\\n\r -:#*`=') + [
    "\u00a0", "\u2028", "\ufeff", "é", "東", "☃", "\x00",
    "\\\\", "\\|", "\\n", "\r\n", '""', "&amp;", "&lt;", "</td>", "<br>", "---", "| --- |",
]


def text_from(alphabet: st.SearchStrategy[str], max_size: int = 8, min_size: int = 0) -> st.SearchStrategy[str]:
    return st.lists(alphabet, min_size=min_size, max_size=max_size).map("".join)


# Control characters (but tab, LF, CR) never reach a table: every reader removes them
# (tables.cells.clean_text, the one rule; tests/test_hostile_readers.py checks the removal).
CONTROL = "".join(chr(c) for c in range(0xA0) if not clean_text(chr(c)))


def chars(exclude: str = "") -> st.SearchStrategy[str]:
    """Any character (no surrogates, no control characters but tab, LF and CR), hostile ones
    often, none of ``exclude``."""
    exclude += CONTROL
    hostile = [h for h in HOSTILE if not set(h) & set(exclude)]
    return st.one_of(st.sampled_from(hostile), st.characters(codec="utf-8", exclude_characters=exclude))


ANY_TEXT = text_from(chars())

# Markdown: no line breaks; surrounding spaces and tabs are stripped by the reader.
MD_TEXT = text_from(chars("\n\r")).map(lambda s: s.strip(" \t"))

# HTML: words without ASCII whitespace, single spaces between words, lines joined by "\n".
_HTML_WORD = text_from(chars(" \t\n\r\f"), max_size=5, min_size=1)
_HTML_LINE = st.lists(_HTML_WORD, max_size=3).map(" ".join)
HTML_TEXT = st.lists(_HTML_LINE, min_size=1, max_size=3).map("\n".join)

# Excel: XML 1.0 cannot hold most C0 control characters, U+FFFE or U+FFFF.
_XML_BAD = "".join(chr(c) for c in (*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0xFFFE, 0xFFFF))
XLSX_TEXT = text_from(chars(_XML_BAD))


@st.composite
def tables(
    draw: st.DrawFn,
    cell: st.SearchStrategy[str],
    *,
    strict: bool = True,
    min_rows: int = 1,
    caption: st.SearchStrategy[str | None] = st.none(),
) -> Table:
    """A random table; with ``strict`` its header names are unique and not blank."""
    n_cols = draw(st.integers(1, 5))
    name = cell.filter(lambda s: s.strip() != "") if strict else cell
    header = draw(st.lists(name, min_size=n_cols, max_size=n_cols, unique=strict))
    rows = draw(st.lists(st.lists(cell, min_size=n_cols, max_size=n_cols), min_size=min_rows, max_size=6))
    return Table.build(header, rows, caption=draw(caption))


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    # Module-scoped: hypothesis runs many examples per test, and function-scoped tmp_path
    # would be shared across them anyway.
    with tempfile.TemporaryDirectory() as d:
        yield Path(d)


def round_trip(scratch: Path, table: Table, fmt: str, write: Callable[[Table], str | bytes], suffix: str) -> Table:
    """write -> read -> canonical form -> compare; returns the table as read."""
    data = write(table)
    path = scratch / f"t{suffix}"
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    result = read_path(path, fmt)
    assert result.format == fmt
    assert len(result.records) == 1
    back = result.records[0].table
    assert back.header == table.header
    assert back.rows == table.rows
    canonical = Table.from_dict(json.loads(json.dumps(back.to_dict())))
    assert canonical == table
    assert canonical.id == table.id
    again = write(canonical)
    if isinstance(data, str):
        assert again == data  # writing is deterministic: the same table gives the same text
    return back


@SETTINGS
@given(table=tables(ANY_TEXT))
def test_csv_round_trip(scratch: Path, table: Table) -> None:
    round_trip(scratch, table, "csv", lambda t: write_table(t, "csv"), ".csv")


@SETTINGS
@given(table=tables(ANY_TEXT))
def test_tsv_round_trip(scratch: Path, table: Table) -> None:
    round_trip(scratch, table, "tsv", lambda t: write_table(t, "tsv"), ".tsv")


@SETTINGS
@given(table=tables(ANY_TEXT, caption=st.none() | ANY_TEXT), shape=st.sampled_from(JSON_SHAPES))
def test_json_round_trip(scratch: Path, table: Table, shape: str) -> None:
    back = round_trip(scratch, table, "json", lambda t: write_table(t, "json", json_shape=shape), ".json")  # type: ignore[arg-type]
    if shape == "header":
        assert back.caption == table.caption


@SETTINGS
@given(table=tables(HTML_TEXT, caption=st.none() | HTML_TEXT.filter(bool)))
def test_html_round_trip(scratch: Path, table: Table) -> None:
    back = round_trip(scratch, table, "html", write_html, ".html")
    assert back.caption == table.caption


@SETTINGS
@given(table=tables(MD_TEXT))
def test_markdown_round_trip(scratch: Path, table: Table) -> None:
    round_trip(scratch, table, "markdown", write_markdown, ".md")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=tables(XLSX_TEXT).filter(lambda t: any(t.rows[-1])))
def test_excel_round_trip(scratch: Path, table: Table) -> None:
    round_trip(scratch, table, "excel", write_excel, ".xlsx")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=tables(HTML_TEXT), second=tables(HTML_TEXT))
def test_html_file_with_several_tables(scratch: Path, first: Table, second: Table) -> None:
    path = scratch / "two.html"
    path.write_text("<p>one</p>" + write_html(first) + "<p>two</p>\n" + write_html(second), encoding="utf-8")
    assert [r.table for r in read_path(path).records] == [first, second]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=tables(MD_TEXT), second=tables(MD_TEXT))
def test_markdown_file_with_several_tables(scratch: Path, first: Table, second: Table) -> None:
    path = scratch / "two.md"
    path.write_text(write_markdown(first) + "\ntext | between\n\n" + write_markdown(second), encoding="utf-8")
    assert [r.table for r in read_path(path).records] == [first, second]


# ---------------------------------------------------------------- benchmark lines

CELLS = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 4)), max_size=4)


@SETTINGS
@given(table=tables(ANY_TEXT, strict=False), question=ANY_TEXT, answer=ANY_TEXT, chart=st.none() | st.just("bar"))
def test_tablebench_line_round_trip(scratch: Path, table: Table, question: str, answer: str, chart: str | None) -> None:
    item = SourceItem(
        question=question, answers=(answer,), taxonomy="tablebench", qtype="NumericalReasoning",
        subtype="Counting", source_id="id-1", meta={"chart_type": chart} if chart else {},
    )
    path = scratch / "tb.jsonl"
    line = write_tablebench_line(table, item)
    path.write_text(line + line, encoding="utf-8")
    result = read_path(path)
    assert result.format == "tablebench"
    assert [r.table for r in result.records] == [table, table]
    got = result.records[1].items[0]
    assert got == item
    assert got.meta == item.meta
    assert write_tablebench_line(Table.from_dict(result.records[0].table.to_dict()), got) == line


@SETTINGS
@given(
    table=tables(ANY_TEXT, strict=False, min_rows=0),
    question=ANY_TEXT,
    answers=st.lists(ANY_TEXT, min_size=1, max_size=3),
    cells=CELLS,
    layout=st.sampled_from(["object", "rows"]),
)
def test_freb_tqa_line_round_trip(
    scratch: Path, table: Table, question: str, answers: list[str], cells: list[tuple[int, int]], layout: str
) -> None:
    relevant = tuple((r, c) for r, c in cells if r < table.n_rows and c < table.n_cols) or None
    item = SourceItem(
        question=question, answers=tuple(answers), taxonomy="freb-tqa", source_id="nt-1",
        relevant_cells=relevant, meta={"derivation": "a+b", "scale": ""},
    )
    path = scratch / "freb.jsonl"
    line = write_freb_tqa_line(table, item, table_as=layout)  # type: ignore[arg-type]
    path.write_text(line, encoding="utf-8")
    record = read_path(path).records[0]
    assert record.table == table
    assert record.items[0] == item
    assert record.items[0].meta == item.meta
    assert write_freb_tqa_line(Table.from_dict(record.table.to_dict()), record.items[0], table_as=layout) == line  # type: ignore[arg-type]


# ---------------------------------------------------------------- what formats cannot hold


def test_writers_refuse_cells_they_cannot_hold() -> None:
    newline = Table.build(["a"], [["x\ny"]])
    with pytest.raises(TableError, match=r"markdown cannot hold the cell at row 0, column 0"):
        write_markdown(newline)
    assert write_markdown(newline, lossy=True).endswith("| x y |\n")
    spaced = Table.build(["a"], [["x  y"]])
    with pytest.raises(TableError, match="html cannot hold"):
        write_html(spaced)
    assert "<td>x  y</td>" in write_html(spaced, lossy=True)
    control = Table.build(["a"], [["x\x01y"]])
    with pytest.raises(TableError, match="excel cannot hold"):
        write_excel(control)
    assert write_excel(control, lossy=True)[:2] == b"PK"
    with pytest.raises(TableError, match="empty last row"):
        write_excel(Table.build(["a", "b"], [["1", "2"], ["", ""]]))
    with pytest.raises(TableError, match="repeated header names"):
        write_table(Table.build(["a", "a"], [["1", "2"]]), "json", json_shape="records")
    with pytest.raises(TableError, match="cannot write format 'yaml'"):
        write_table(newline, "yaml")

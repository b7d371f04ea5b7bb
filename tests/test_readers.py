"""Readers: every format on small hand-written files, every kind of bad input, and the real
TableBench and FREB-TQA files (skipped when ../shared/data is absent)."""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tqaforge.errors import ReaderError, TableError
from tqaforge.tables.readers import FORMATS, detect_format, read_path
from tqaforge.tables.table import Table


def put(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, str):
        path.write_bytes(content.encode("utf-8"))
    else:
        path.write_bytes(content)
    return path


def only_table(path: Path, fmt: str | None = None, **kw: object) -> Table:
    result = read_path(path, fmt, **kw)  # type: ignore[arg-type]
    assert len(result.records) == 1
    return result.records[0].table


def raises_at(path: Path, *, line: int | None = None, row: int | None = None, match: str = "", **kw: object) -> ReaderError:
    """Reading ``path`` fails with a message naming the file, the line/row and the problem."""
    with pytest.raises(ReaderError) as info:
        read_path(path, **kw)  # type: ignore[arg-type]
    err = info.value
    message = str(err)
    assert path.name in message
    if line is not None:
        assert err.line == line
        assert f"line {line}" in message
    if row is not None:
        assert err.row == row
        assert f"row {row}" in message
    if match:
        assert re.search(match, message), message
    return err


# --------------------------------------------------------------------------- format detection


@pytest.mark.parametrize(
    ("name", "fmt"),
    [("a.csv", "csv"), ("a.TSV", "tsv"), ("a.json", "json"), ("a.html", "html"), ("a.htm", "html"),
     ("a.md", "markdown"), ("a.markdown", "markdown"), ("a.xlsx", "excel")],
)
def test_detect_format_by_extension(name: str, fmt: str) -> None:
    assert detect_format(name) == fmt
    assert fmt in FORMATS


def test_detect_format_peeks_at_jsonl(tmp_path: Path) -> None:
    tb = put(tmp_path, "x.jsonl", "\n" + json.dumps({"id": "1", "qsubtype": "Counting", "table": {}}) + "\n")
    freb = put(tmp_path, "y.jsonl", json.dumps({"question": "q", "table": [["a"], ["1"]], "answers": ["1"]}) + "\n")
    assert detect_format(tb) == "tablebench"
    assert detect_format(freb) == "freb-tqa"
    other = put(tmp_path, "z.jsonl", json.dumps({"text": "hello"}) + "\n")
    raises_at(other, line=1, match="cannot tell")
    broken = put(tmp_path, "w.jsonl", '{"question": "q", "tab\n')
    raises_at(broken, line=1, match="not valid JSON")


def test_detect_format_rejects_unknown_extensions(tmp_path: Path) -> None:
    with pytest.raises(ReaderError, match=r"t\.txt.*extension"):
        detect_format(tmp_path / "t.txt")
    with pytest.raises(ReaderError, match="xlsx"):
        detect_format(tmp_path / "old.xls")


def test_read_path_errors_for_missing_file_and_unknown_format(tmp_path: Path) -> None:
    raises_at(tmp_path / "missing.csv", match="no such file")
    path = put(tmp_path, "a.csv", "a\n1\n")
    raises_at(path, match="unknown format 'yaml'", format="yaml")


# --------------------------------------------------------------------------- CSV / TSV


def test_csv_hostile_cells(tmp_path: Path) -> None:
    text = (
        'name,"quote ""q""",pipe\r\n'
        '"a, b","line1\nline2",x|y\r\n'
        '<b>&amp;</b>,Zürich ☃ 東京,""\r\n'
    )
    table = only_table(put(tmp_path, "h.csv", text))
    assert table.header == ("name", 'quote "q"', "pipe")
    assert table.rows == (("a, b", "line1\nline2", "x|y"), ("<b>&amp;</b>", "Zürich ☃ 東京", ""))


@pytest.mark.parametrize("delimiter", [";", "\t", "|", ","])
def test_csv_delimiter_detection(tmp_path: Path, delimiter: str) -> None:
    rows = [["city", "pop", "note"], ["Oslo", "709000", "capital"], ["Bergen", "286000", ""]]
    text = "\n".join(delimiter.join(r) for r in rows) + "\n"
    table = only_table(put(tmp_path, "d.csv", text))
    assert table.header == ("city", "pop", "note")
    assert table.rows[1] == ("Bergen", "286000", "")


def test_csv_semicolon_file_with_decimal_commas(tmp_path: Path) -> None:
    # European CSV: "," inside numbers must not be taken for the delimiter.
    text = "item;price;weight\napple;1,5;0,2\npear;2,25;0,3\n"
    table = only_table(put(tmp_path, "eu.csv", text))
    assert table.rows == (("apple", "1,5", "0,2"), ("pear", "2,25", "0,3"))


def test_csv_single_column_and_blank_lines(tmp_path: Path) -> None:
    table = only_table(put(tmp_path, "one.csv", 'word\n\n"hello, world"\n\nbye\n""\n\n'))
    assert table.header == ("word",)
    assert table.rows == (("hello, world",), ("bye",), ("",))
    # Unquoted, the comma splits the cell: a ragged row, not a silently merged one.
    raises_at(put(tmp_path, "two.csv", "word\nhello, world\nbye\n"), line=2, row=2, match="2 cells")


def test_tsv_reads_tabs_and_keeps_commas(tmp_path: Path) -> None:
    text = "a\tb\n1,5\tx, y\n2,5\tz\n"
    table = only_table(put(tmp_path, "t.tsv", text))
    assert table.header == ("a", "b")
    assert table.rows == (("1,5", "x, y"), ("2,5", "z"))


def test_csv_encodings(tmp_path: Path) -> None:
    latin = put(tmp_path, "latin.csv", "name,city\nJosé,Zürich\nRenée,Besançon\n".encode("latin-1"))
    assert only_table(latin).rows == (("José", "Zürich"), ("Renée", "Besançon"))
    bom = put(tmp_path, "bom.csv", b"\xef\xbb\xbfname,city\nA,B\n")
    assert only_table(bom).header == ("name", "city")
    utf16 = put(tmp_path, "u16.csv", "name,city\nÅse,Tromsø\n".encode("utf-16"))
    assert only_table(utf16).rows == (("Åse", "Tromsø"),)
    forced = put(tmp_path, "cp.csv", "a,b\nx,€\n".encode("cp1252"))
    assert only_table(forced, encoding="cp1252").rows == (("x", "€"),)


def test_csv_ragged_row_names_line_and_row(tmp_path: Path) -> None:
    raises_at(put(tmp_path, "r.csv", "a,b,c\n1,2,3\n4,5\n"), line=3, row=3, match="2 cells but the header has 3")
    # A quoted line break makes the physical line differ from the row.
    path = put(tmp_path, "r2.csv", 'a,b\n"x\ny",2\n3,4,5\n')
    raises_at(path, line=4, row=3, match="3 cells")


def test_csv_unterminated_quote(tmp_path: Path) -> None:
    err = raises_at(put(tmp_path, "q.csv", 'a,b\n1,"open\n2,3\n'), match="malformed CSV")
    assert err.line is not None


def test_csv_empty_and_header_only(tmp_path: Path) -> None:
    raises_at(put(tmp_path, "e.csv", ""), match="empty")
    raises_at(put(tmp_path, "e2.csv", "\n\n  \n"), match="empty")
    raises_at(put(tmp_path, "h.csv", "a,b\n"), line=1, match="no data rows")


def test_csv_header_strictness(tmp_path: Path) -> None:
    dup = put(tmp_path, "dup.csv", "a,b,a\n1,2,3\n")
    raises_at(dup, row=1, match="'a' appears in columns 1 and 3")
    blank = put(tmp_path, "blank.csv", "a, ,c\n1,2,3\n")
    raises_at(blank, line=1, row=1, match="column 2 is blank")
    assert only_table(dup, strict_headers=False).header == ("a", "b", "a")
    assert only_table(blank, strict_headers=False).header == ("a", " ", "c")


def test_csv_undecodable_bytes(tmp_path: Path) -> None:
    # bytes(range(256)) holds a line feed (0x0a) before the first bad byte (0x80, offset 132).
    garbage = put(tmp_path, "bin.csv", b"a,b\n" + bytes(range(256)) * 4)
    raises_at(garbage, line=3, match="byte 0x80 at offset 132")
    latin = put(tmp_path, "l.csv", "a,b\nok,fine\nJosé,x\n".encode("latin-1"))
    err = raises_at(latin, line=3, match="byte 0xe9 at offset 15 is not valid utf-8", encoding="utf-8")
    assert err.hint


# --------------------------------------------------------------------------- JSON


def test_json_records_union_of_keys_and_values(tmp_path: Path) -> None:
    data = [
        {"b": "x, \"y\"\nz", "a": 1},
        {"a": 2.5, "c": None, "d": True},
        {"a": 3.0, "b": ["l", 1], "d": {"k": "v"}},
    ]
    table = only_table(put(tmp_path, "r.json", json.dumps(data)))
    assert table.header == ("b", "a", "c", "d")
    assert table.rows == (
        ('x, "y"\nz', "1", "", ""),
        ("", "2.5", "", "true"),
        ('["l",1]', "3", "", '{"k":"v"}'),
    )


def test_json_index_keyed_records(tmp_path: Path) -> None:
    data = {"0": {"city": "Oslo", "pop": 709000}, "1": {"city": "Bergen", "pop": 286000}}
    table = only_table(put(tmp_path, "i.json", json.dumps(data)))
    assert table.rows == (("Oslo", "709000"), ("Bergen", "286000"))


def test_json_columns_and_header_shapes(tmp_path: Path) -> None:
    columns = {"columns": ["a", "b"], "data": [["1", None], [2, "<&>"]]}
    assert only_table(put(tmp_path, "c.json", json.dumps(columns))).rows == (("1", ""), ("2", "<&>"))
    canonical = {"header": ["a"], "rows": [["é|"]], "caption": "Cap", "source": "wiki", "licence": "CC0"}
    table = only_table(put(tmp_path, "h.json", json.dumps(canonical, ensure_ascii=False)))
    assert table.rows == (("é|",),)
    assert (table.caption, table.source, table.licence) == ("Cap", "wiki", "CC0")


def test_json_list_of_tables(tmp_path: Path) -> None:
    data = [{"header": ["a"], "rows": [["1"]]}, {"columns": ["x", "y"], "data": [["2", "3"]]}]
    result = read_path(put(tmp_path, "many.json", json.dumps(data)))
    assert [r.table.header for r in result.records] == [("a",), ("x", "y")]
    assert result.records[1].location.endswith("many.json#table-2")


def test_json_record_with_columns_named_header_and_rows(tmp_path: Path) -> None:
    data = [{"header": "h1", "rows": "r1"}, {"header": "h2", "rows": "r2"}]
    assert only_table(put(tmp_path, "hr.json", json.dumps(data))).rows == (("h1", "r1"), ("h2", "r2"))


def test_json_truncated(tmp_path: Path) -> None:
    text = '{"columns": ["a", "b"],\n "data": [\n  ["1", "2"],\n  ["3", "4'
    err = raises_at(put(tmp_path, "t.json", text), line=4, match="invalid JSON")
    assert err.hint and "truncated" in err.hint


def test_json_ragged_and_empty(tmp_path: Path) -> None:
    ragged = {"columns": ["a", "b"], "data": [["1", "2"], ["3"]]}
    raises_at(put(tmp_path, "r.json", json.dumps(ragged)), row=3, match=r"data\[1\] has 1 cells")
    many = [{"header": ["a"], "rows": [["1"]]}, {"header": ["a", "b"], "rows": [["1", "2", "3"]]}]
    raises_at(put(tmp_path, "m.json", json.dumps(many)), row=2, match=r"table 2 of 2: rows\[0\] has 3")
    raises_at(put(tmp_path, "e.json", "[]"), match="no table")
    raises_at(put(tmp_path, "n.json", "42"), match="not a table")
    raises_at(put(tmp_path, "h.json", json.dumps({"header": ["a"], "rows": []})), match="no data rows")
    raises_at(put(tmp_path, "x.json", json.dumps([{"a": 1}, 5])), row=3, match="item 1 is a int")


def test_json_strict_headers_and_bad_utf8(tmp_path: Path) -> None:
    dup = put(tmp_path, "d.json", json.dumps({"columns": ["a", "a"], "data": [["1", "2"]]}))
    raises_at(dup, row=1, match="appears in columns 1 and 2")
    assert only_table(dup, strict_headers=False).header == ("a", "a")
    bad = put(tmp_path, "b.json", b'[{"a": "ok"},\n {"a": "caf\xe9"}]')
    raises_at(bad, line=2, match="not valid UTF-8")


# --------------------------------------------------------------------------- HTML


def test_html_caption_entities_spans(tmp_path: Path) -> None:
    text = """<!doctype html><html><body><p>Intro &amp; text</p>
<table class="x">
  <caption>Cities &amp; <b>towns</b></caption>
  <thead><tr><th>Name</th><th colspan="2">Pop &lt;2020&gt;</th></tr></thead>
  <tbody>
    <tr><td rowspan="2">Oslo</td><td>1 &#x263A;</td><td>a &quot;q&quot; &#124; p</td></tr>
    <tr><td>2</td><td>
        spaced     out
        <br>next line</td></tr>
    <tr><td>Bergen</td><td colspan=2 rowspan=0>wide</td></tr>
    <tr><td>Molde</td></tr>
  </tbody>
</table></body></html>"""
    table = only_table(put(tmp_path, "t.html", text), strict_headers=False)
    assert table.caption == "Cities & towns"
    assert table.header == ("Name", "Pop <2020>", "Pop <2020> (2)")  # a span repeats no name
    assert table.rows == (
        ("Oslo", "1 ☺", 'a "q" | p'),
        ("Oslo", "2", "spaced out\nnext line"),
        ("Bergen", "wide", "wide"),
        ("Molde", "wide", "wide"),
    )


def test_html_broken_markup_still_reads(tmp_path: Path) -> None:
    text = "<div><table><tr><th>a<th>b<tr><td>1<td>2</span><tr><td>3<td><i>4</b>"
    table = only_table(put(tmp_path, "b.html", text))
    assert table.header == ("a", "b")
    assert table.rows == (("1", "2"), ("3", "4"))


def test_html_several_and_nested_tables(tmp_path: Path) -> None:
    text = """<table><tr><th>outer</th><th>o2</th></tr>
<tr><td>x<table><tr><th>inner</th></tr><tr><td>i1</td></tr></table>y</td><td>z</td></tr></table>
<script>var s = "<table><tr><td>no</td></tr></table>";</script>
<table><tr><td>k</td></tr><tr><td>v</td></tr></table>"""
    result = read_path(put(tmp_path, "n.html", text))
    tables = [r.table for r in result.records]
    assert [t.header for t in tables] == [("outer", "o2"), ("inner",), ("k",)]
    assert tables[0].rows == (("xy", "z"),)
    assert tables[1].rows == (("i1",),)
    assert [r.location.rsplit("#", 1)[1] for r in result.records] == ["table-1", "table-2", "table-3"]


def test_html_errors(tmp_path: Path) -> None:
    raises_at(put(tmp_path, "none.html", "<html><p>no tables here</p></html>"), match="no <table>")
    ragged = "<table>\n<tr><th>a</th><th>b</th></tr>\n<tr><td>1</td><td>2</td></tr>\n<tr><td>3</td></tr>\n</table>"
    raises_at(put(tmp_path, "r.html", ragged), line=4, row=3, match="1 cells but the header has 2")
    raises_at(put(tmp_path, "h.html", "<table><tr><th>a</th></tr></table>"), line=1, match="no data rows")
    raises_at(put(tmp_path, "e.html", "<table>\n</table>"), line=1, match="no rows")
    raises_at(put(tmp_path, "b.html", "<table><tr><th></th><th>b</th></tr><tr><td>1<td>2</table>"), match="column 1 is blank")
    two = "<table><tr><td>a</td></tr><tr><td>1</td></tr></table>\n<table>\n<tr><td>a</td><td>a</td></tr><tr><td>1</td><td>2</td></tr></table>"
    raises_at(put(tmp_path, "two.html", two), match=r"table 2 \(line 2\): header name 'a'")


# --------------------------------------------------------------------------- Markdown


def test_markdown_tables(tmp_path: Path) -> None:
    text = r"""# Report

Some text | with a pipe but no table.

| Name | Note \| pipe | Amount |
|:-----|:------------:|-------:|
| Oslo | a \| b | 1,000 |
|  Bergen  | <b>&amp;</b> "q" | |
| back\\slash | C:\path | ☃ |

```
| not | a |
| --- | - |
| table | x |
```

a | b
--|--
1 | 2
"""
    result = read_path(put(tmp_path, "t.md", text))
    first, second = (r.table for r in result.records)
    assert first.header == ("Name", "Note | pipe", "Amount")
    assert first.rows == (
        ("Oslo", "a | b", "1,000"),
        ("Bergen", '<b>&amp;</b> "q"', ""),
        ("back\\slash", "C:\\path", "☃"),
    )
    assert second.header == ("a", "b")
    assert second.rows == (("1", "2"),)


def test_markdown_errors(tmp_path: Path) -> None:
    raises_at(put(tmp_path, "none.md", "# Title\n\nno | table\n---\n"), match="no pipe table")
    ragged = "intro\n\n| a | b |\n| --- | --- |\n| 1 | 2 |\n| 3 |\n"
    raises_at(put(tmp_path, "r.md", ragged), line=6, row=3, match="1 cells but the header has 2")
    raises_at(put(tmp_path, "s.md", "| a | b |\n| --- |\n| 1 | 2 |\n"), line=2, match="separator line has 1")
    raises_at(put(tmp_path, "h.md", "| a | b |\n| --- | --- |\n\ntext\n"), line=1, match="no data rows")
    raises_at(put(tmp_path, "d.md", "| a | a |\n| --- | --- |\n| 1 | 2 |\n"), line=1, row=1, match="appears")


# --------------------------------------------------------------------------- Excel


def _workbook(tmp_path: Path, name: str, sheets: dict[str, list[tuple[str, object]]]) -> Path:
    from openpyxl import Workbook

    wb = Workbook()
    wb.remove(wb.active)
    for title, cells in sheets.items():
        ws = wb.create_sheet(title)
        for ref, value in cells:
            ws[ref] = value
    path = tmp_path / name
    wb.save(path)
    return path


def test_excel_sheets_types_and_offsets(tmp_path: Path) -> None:
    path = _workbook(
        tmp_path,
        "w.xlsx",
        {
            "First": [("A1", "name"), ("B1", "n"), ("C1", "when"), ("D1", "ok"),
                      ("A2", "a|b <&>"), ("B2", 3), ("C2", dt.date(2024, 5, 1)), ("D2", True),
                      ("A3", "line\nbreak"), ("B3", 2.5), ("C3", dt.datetime(2024, 5, 1, 12, 30)), ("D3", None),
                      ("A5", "after gap")],
            "Empty": [],
            "Offset": [("C3", "x"), ("D3", "y"), ("C4", "1"), ("D4", "=not a formula?")],
        },
    )
    result = read_path(path)
    assert [r.location.rsplit("#", 1)[1] for r in result.records] == ["First", "Offset"]
    first, offset = (r.table for r in result.records)
    assert first.header == ("name", "n", "when", "ok")
    assert first.rows == (
        ("a|b <&>", "3", "2024-05-01", "TRUE"),
        ("line\nbreak", "2.5", "2024-05-01 12:30:00", ""),
        ("", "", "", ""),
        ("after gap", "", "", ""),
    )
    assert offset.header == ("x", "y")
    assert offset.rows[0][0] == "1"


def test_excel_errors(tmp_path: Path) -> None:
    stray = _workbook(tmp_path, "s.xlsx", {"Data": [("A1", "a"), ("B1", "b"), ("A2", 1), ("B2", 2), ("D7", "stray")]})
    err = raises_at(stray, row=7, match="sheet 'Data': cell D7 lies right of the last header column B")
    assert err.line is None
    blank = _workbook(tmp_path, "b.xlsx", {"S": [("B2", "a"), ("D2", "c"), ("B3", 1), ("C3", 2), ("D3", 3)]})
    raises_at(blank, row=2, match="sheet 'S': header column 2 is blank")
    header_only = _workbook(tmp_path, "h.xlsx", {"S": [("A1", "a")]})
    raises_at(header_only, match="no data rows")
    raises_at(_workbook(tmp_path, "e.xlsx", {"S": []}), match="every worksheet is empty")
    raises_at(put(tmp_path, "fake.xlsx", b"this is not a zip"), match="not a readable .xlsx")


# --------------------------------------------------------------------------- TableBench JSONL


def _tb_line(**over: object) -> str:
    line: dict[str, object] = {
        "id": "abc", "qtype": "NumericalReasoning", "qsubtype": "Counting",
        "table": {"columns": ["team", "wins"], "data": [["A|B", "3"], ["C, \"D\"", "5"]]},
        "question": "How many?", "answer": "2",
    }
    line.update(over)
    return json.dumps(line, ensure_ascii=False)


def test_tablebench_lines(tmp_path: Path) -> None:
    chart = _tb_line(id="c1", qtype="Visualization", qsubtype="ChartGeneration", answer="y_references = [[3, 5]]", chart_type="bar")
    path = put(tmp_path, "tb.jsonl", _tb_line() + "\n\n" + chart + "\n")
    result = read_path(path)
    assert result.format == "tablebench"
    assert [r.location for r in result.records] == [f"{path}:1", f"{path}:3"]
    first, second = (r.items[0] for r in result.records)
    assert (first.taxonomy, first.qtype, first.subtype, first.source_id, first.answers) == (
        "tablebench", "NumericalReasoning", "Counting", "abc", ("2",))
    assert first.meta == {}
    assert second.meta == {"chart_type": "bar"}
    assert result.records[0].table.rows == (("A|B", "3"), ('C, "D"', "5"))


def test_tablebench_headers_lenient_by_default(tmp_path: Path) -> None:
    table = {"columns": ["", "x", "x"], "data": [["1", "2", "3"]]}
    path = put(tmp_path, "tb.jsonl", _tb_line(table=table) + "\n")
    assert read_path(path).records[0].table.header == ("", "x", "x")
    raises_at(path, line=1, match="blank", strict_headers=True)


def test_tablebench_errors(tmp_path: Path) -> None:
    good = _tb_line()
    truncated = put(tmp_path, "t.jsonl", good + "\n" + good + "\n" + good[:50])
    err = raises_at(truncated, line=3, match="invalid JSON")
    assert err.hint and "truncated" in err.hint
    missing = json.loads(good)
    del missing["answer"]
    raises_at(put(tmp_path, "m.jsonl", good + "\n" + json.dumps(missing) + "\n"), line=2, match="missing key.*'answer'")
    ragged = _tb_line(table={"columns": ["a", "b"], "data": [["1", "2"], ["1", "2"], ["3"]]})
    raises_at(put(tmp_path, "r.jsonl", good + "\n" + good + "\n" + ragged + "\n"), line=3, row=4, match=r"table\.data\[2\] has 1 cells")
    empty = _tb_line(table={"columns": ["a"], "data": []})
    raises_at(put(tmp_path, "e.jsonl", empty + "\n"), line=1, match="no data rows")
    bad = put(tmp_path, "b.jsonl", (good + "\n").encode() + _tb_line(question="Qué?").encode("latin-1") + b"\n")
    raises_at(bad, line=2, match="not valid UTF-8", format="tablebench")
    raises_at(put(tmp_path, "n.jsonl", "\n\n"), match="empty")
    raises_at(put(tmp_path, "l.jsonl", good + "\n[1, 2]\n"), line=2, format="tablebench", match="JSON list")


# --------------------------------------------------------------------------- FREB-TQA JSONL


def test_freb_tqa_list_table_with_relevant_cells(tmp_path: Path) -> None:
    line = {
        "id": "q1",
        "question": "Which year?",
        "answers": ["2018"],
        "table": [["", "", "Fiscal"], ["", "2019", "2018"], ["Sensors", "914", "918"]],
        "paragraphs": [{"text": "p1"}, {"text": "p2"}],
        "table_id": "t1",
        "meta": {"uid": "q1", "question": "Which year?", "derivation": "918>914", "answer_type": "span", "scale": ""},
        "rel_cell": [[1, 1], [1, 2]],
    }
    folder = tmp_path / "02_rel"
    folder.mkdir()
    path = put(folder, "tat_nonfactoid_dev.jsonl", json.dumps(line) + "\n")
    result = read_path(path)
    record = result.records[0]
    item = record.items[0]
    assert result.format == "freb-tqa"
    assert record.table.header == ("", "", "Fiscal")
    assert [record.table.cell(r, c) for r, c in item.relevant_cells or ()] == ["914", "918"]
    assert (item.taxonomy, item.qtype, item.subtype, item.source_id, item.answers) == (
        "freb-tqa", "QuestionType", "reasoning", "q1", ("2018",))
    assert item.meta == {
        "folder": "02_rel", "table_id": "t1", "n_paragraphs": 2,
        "derivation": "918>914", "answer_type": "span", "scale": "",
    }


def test_freb_tqa_object_table_answer_fields(tmp_path: Path) -> None:
    lines = [
        {"id": "nt-1", "question": "what?", "answers": ["a", "b"],
         "table": {"header": ["h1", "h2"], "rows": [["a", "b|c"]], "name": "csv/1.tsv"}},
        {"uid": "u2", "question": "how many?", "answer": 3,
         "table": {"header": ["h"], "rows": []}, "short_table": [["h"], ["x"]]},
    ]
    path = put(tmp_path, "wtq_factoid_dev.jsonl", "".join(json.dumps(x) + "\n" for x in lines))
    first, second = read_path(path).records
    assert first.items[0].answers == ("a", "b")
    assert first.items[0].subtype == "extraction"
    assert first.items[0].meta == {"table_name": "csv/1.tsv"}
    assert first.items[0].relevant_cells is None
    # FREB-TQA's own files hold header-only tables (no cell matched the question).
    assert second.table.n_rows == 0
    assert second.items[0].source_id == "u2"
    assert second.items[0].answers == ("3",)
    assert second.items[0].meta == {"short_table": [["h"], ["x"]]}


def test_freb_tqa_short_table_files_keep_original_rel_cell(tmp_path: Path) -> None:
    line = {"id": "q", "question": "q?", "answers": ["1"], "table": {"header": ["a"], "rows": [["1"]], "name": "n"},
            "rel_cell": [[9, 1]]}
    path = put(tmp_path, "tat_nonfactoid_dev_no_shuffle_short_table.jsonl", json.dumps(line) + "\n")
    item = read_path(path).records[0].items[0]
    assert item.relevant_cells is None
    assert item.meta["rel_cell_original"] == [[9, 1]]
    assert item.meta["table_variant"] == "short_table"


def test_freb_tqa_errors(tmp_path: Path) -> None:
    good = {"id": "q", "question": "q?", "answers": ["1"], "table": [["a", "b"], ["1", "2"]], "rel_cell": [[0, 1]]}
    outside = dict(good, rel_cell=[[0, 1], [1, 0]])
    raises_at(put(tmp_path, "o.jsonl", json.dumps(good) + "\n" + json.dumps(outside) + "\n"), line=2,
              match=r"rel_cell \[1, 0\] lies outside the table \(1 data rows x 2 columns\)", format="freb-tqa")
    ragged = dict(good, table=[["a", "b"], ["1", "2"], ["3"]])
    raises_at(put(tmp_path, "r.jsonl", json.dumps(ragged) + "\n"), line=1, row=3, match=r"table\[2\] has 1 cells")
    no_answer = {k: v for k, v in good.items() if k != "answers"}
    raises_at(put(tmp_path, "a.jsonl", json.dumps(no_answer) + "\n"), line=1, match="no 'answers'", format="freb-tqa")
    bad_cells = dict(good, rel_cell=[[0, "1"]])
    raises_at(put(tmp_path, "c.jsonl", json.dumps(bad_cells) + "\n"), line=1, match="integer pairs")
    bad_table = dict(good, table={"cells": []})
    raises_at(put(tmp_path, "t.jsonl", json.dumps(bad_table) + "\n"), line=1, match="neither")
    raises_at(put(tmp_path, "s.jsonl", json.dumps(good) + "\n" + json.dumps(good)[:-7] + "\n"), line=2, match="invalid JSON")


# --------------------------------------------------------------------------- real data


@pytest.mark.shared
def test_real_tablebench(shared_data: Path) -> None:
    result = read_path(shared_data / "tablebench" / "TableBench.jsonl")
    assert result.format == "tablebench"
    assert len(result.records) == 886
    assert result.n_items == 886
    items = [r.items[0] for r in result.records]
    assert len({i.subtype for i in items}) == 18
    assert len({i.qtype for i in items}) == 4
    assert "Multi-hop NumericalReasoing" in {i.subtype for i in items}
    # One id appears twice, as two different questions (different subtypes): both are kept.
    twice = [k for k, n in Counter(i.source_id for i in items).items() if n == 2]
    assert len(twice) == 1
    assert len({i.subtype for i in items if i.source_id == twice[0]}) == 2
    charts = [i for i in items if i.subtype == "ChartGeneration"]
    assert charts and all(i.meta.get("chart_type") for i in charts)
    assert all(r.table.n_rows > 0 for r in result.records)


@pytest.mark.shared
def test_real_freb_tqa_files_read(shared_data: Path) -> None:
    files = sorted((shared_data / "freb-tqa").glob("*/*.jsonl"))
    assert len(files) == 11
    for path in files:
        result = read_path(path)
        assert result.format == "freb-tqa"
        assert result.records and all(len(r.items) == 1 for r in result.records)
        for record in result.records:
            item = record.items[0]
            json.dumps(item.meta)  # meta must be storable as JSON
            assert item.meta["folder"] == path.parent.name
            for r, c in item.relevant_cells or ():
                assert 0 <= r < record.table.n_rows and 0 <= c < record.table.n_cols


@pytest.mark.shared
def test_real_freb_tqa_relevant_cells(shared_data: Path) -> None:
    rel = read_path(shared_data / "freb-tqa" / "02_rel" / "tat_nonfactoid_dev.jsonl")
    assert len(rel.records) == 539
    assert all(r.items[0].relevant_cells for r in rel.records)
    first = rel.records[0]
    assert "Sensors" in first.items[0].question
    assert {first.table.cell(r, 0) for r, _ in first.items[0].relevant_cells or ()} == {"Sensors"}
    assert sorted(first.table.cell(r, c) for r, c in first.items[0].relevant_cells or ()) == ["814", "914", "918"]

    ori = read_path(shared_data / "freb-tqa" / "03_agg_com" / "tat_nonfactoid_dev_no_shuffle_ori_table.jsonl")
    record = ori.records[0]
    assert [record.table.cell(r, c) for r, c in record.items[0].relevant_cells or ()] == ["$  3,574", "$  3,497"]

    # The index base, checked on the whole file: the numbers of each derivation are found in
    # the relevant cells far more often with data-row indexing than with a shift by one.
    def hits(shift: int) -> int:
        n = 0
        for record in rel.records:
            item = record.items[0]
            numbers = set(re.findall(r"\d[\d,]*(?:\.\d+)?", str(item.meta.get("derivation", ""))))
            grid = [record.table.header, *record.table.rows]
            cells = " ".join(
                grid[r + 1 + shift][c] for r, c in item.relevant_cells or () if 0 <= r + 1 + shift < len(grid)
            )
            n += bool(numbers) and all(x in cells for x in numbers)
        return n

    assert hits(0) > 300
    assert hits(0) > 10 * max(hits(1), hits(-1))

    short = read_path(shared_data / "freb-tqa" / "03_agg_com" / "tat_nonfactoid_dev_no_shuffle_short_table.jsonl")
    assert all(r.items[0].relevant_cells is None for r in short.records)
    assert all(r.items[0].meta["rel_cell_original"] for r in short.records)


def test_tables_error_types_are_reader_errors() -> None:
    # Readers promise ReaderError, which the CLI prints; it is a TableError as well.
    assert issubclass(ReaderError, TableError)


def test_a_module_that_reads_json_imports_no_other_reader() -> None:
    """The package's names are resolved on first use: a release's manifest is read (``jsonio``)
    without importing every reader and charset_normalizer, about 40 ms of every command that opens
    a release; asking the package for ``read_path`` brings them in."""
    code = (
        "import sys, tqaforge.release.verify\n"
        "def loaded(): return sorted(m for m in sys.modules if m.startswith('tqaforge.tables.readers') or m == 'charset_normalizer')\n"
        "print(loaded())\n"
        "from tqaforge.tables.readers import read_path\n"
        "print('tqaforge.tables.readers.dispatch' in loaded(), 'tqaforge.tables.readers.html' in loaded())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out == ["['tqaforge.tables.readers', 'tqaforge.tables.readers._common', 'tqaforge.tables.readers.jsonio']", "True True"]


def test_every_name_the_package_lists_is_the_dispatch_modules() -> None:
    import tqaforge.tables.readers as readers
    from tqaforge.tables.readers import dispatch

    assert readers.__all__ and all(getattr(readers, name) is getattr(dispatch, name) for name in readers.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        readers.nope  # noqa: B018

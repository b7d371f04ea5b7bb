"""Hostile-input suite, table readers (issue 10): each test is one bad input from the audit.

Every reader either returns a whole, clean table or raises a :class:`ReaderError` that names the
file (and the line where there is one): never another exception, never a hang, never unbounded
memory.
"""

from __future__ import annotations

import json
import os
import random
import resource
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from sqlmodel import select

from tqaforge.errors import ReaderError
from tqaforge.ingest import import_paths
from tqaforge.schemas.records import Question, TableRecord
from tqaforge.tables.readers import read_path
from tqaforge.tables.serialize import serialize
from tqaforge.tables.table import Table

pytestmark = pytest.mark.hostile

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
DEEP = 100_000


def run_python(code: str, *, timeout: float, memory_limit: int | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (a hang or a memory blow-up cannot take pytest with it)."""

    def limit() -> None:
        if memory_limit is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))

    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, preexec_fn=limit,
        cwd=Path(__file__).resolve().parents[1],
    )


def tablebench_line(**changes: object) -> dict[str, object]:
    line: dict[str, object] = {
        "id": "q1", "qtype": "FactChecking", "qsubtype": "MatchBased",
        "table": {"columns": ["city", "pop"], "data": [["Oslo", "709000"]]},
        "question": "How many people live in Oslo?", "answer": "709000",
    }
    line.update(changes)
    return line


def write_jsonl(path: Path, *objects: object) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in objects), encoding="utf-8")
    return path


# --- 1. parser exceptions ---------------------------------------------------------------------


def test_deeply_nested_json_is_a_reader_error(tmp_path: Path) -> None:
    """Case: deeply nested JSON (`[[[[...` 100,000 deep) raised RecursionError."""
    path = tmp_path / "deep.json"
    path.write_text("[" * DEEP + "]" * DEEP)
    with pytest.raises(ReaderError, match="nested") as info:
        read_path(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("fmt", ["tablebench", "freb-tqa", None])
def test_deeply_nested_jsonl_names_file_and_line(tmp_path: Path, fmt: str | None) -> None:
    """Case: deeply nested JSON in a TableBench / FREB-TQA JSON Lines file (and in the line
    that detects the format) raised RecursionError; the error names the file and the line."""
    path = tmp_path / "deep.jsonl"
    good = json.dumps(tablebench_line())
    lines = [good, '{"question": "q", "table": ' + "[" * DEEP + "]" * DEEP + "}"]
    if fmt is None:
        lines.reverse()  # the first line decides the format
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ReaderError, match="nested") as info:
        read_path(path, fmt)
    assert info.value.path == str(path)
    assert info.value.line == (1 if fmt is None else 2)


def test_corrupt_xlsx_is_a_reader_error(tmp_path: Path) -> None:
    """Case (class of 1): an .xlsx whose sheet XML is broken raised the XML parser's own error."""
    from openpyxl import Workbook

    good = tmp_path / "good.xlsx"
    workbook = Workbook()
    workbook.active.append(["a", "b"])
    workbook.active.append([1, 2])
    workbook.save(good)
    bad = tmp_path / "bad.xlsx"
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(bad, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.startswith("xl/worksheets/sheet"):
                data = data[: len(data) // 2]  # cut the sheet's XML in the middle of an element
            dst.writestr(info, data)
    with pytest.raises(ReaderError) as info:
        read_path(bad)
    assert info.value.path == str(bad)


def test_csv_cell_over_the_field_limit_is_explained(tmp_path: Path) -> None:
    """Case (class of 1): a quote left open makes the rest of a CSV one huge cell; csv's
    "field larger than field limit" must say which line and what to check."""
    path = tmp_path / "open_quote.csv"
    path.write_text('a,b\n"x,1\n' + "y,2\n" * 40_000)
    with pytest.raises(ReaderError, match="quote") as info:
        read_path(path)
    assert info.value.line == 2


# --- 2. special files and sizes ----------------------------------------------------------------


def test_fifo_is_refused_without_hanging(tmp_path: Path) -> None:
    """Case: a FIFO named `x.csv` hung the import."""
    fifo = tmp_path / "x.csv"
    os.mkfifo(fifo)
    code = (
        "from tqaforge.errors import ReaderError\nfrom tqaforge.tables.readers import read_path\n"
        f"try:\n    read_path({str(fifo)!r})\nexcept ReaderError as exc:\n    print(exc)\n"
    )
    done = run_python(code, timeout=30)
    assert "FIFO" in done.stdout and str(fifo) in done.stdout, done.stderr


def test_character_device_is_refused(tmp_path: Path) -> None:
    """Case: `/dev/zero --format csv` read until MemoryError."""
    code = (
        "from tqaforge.errors import ReaderError\nfrom tqaforge.tables.readers import read_path\n"
        "try:\n    read_path('/dev/zero', 'csv')\nexcept ReaderError as exc:\n    print(exc)\n"
    )
    # Capped, so that the unfixed reader fails fast instead of eating the machine's memory.
    done = run_python(code, timeout=60, memory_limit=2 * 1024**3)
    assert "character device" in done.stdout and "/dev/zero" in done.stdout, done.stderr


def test_file_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    """Case (2, the bound): a reader reads at most the configured number of bytes."""
    path = tmp_path / "big.csv"
    path.write_text("a,b\n" + "1,2\n" * 1000)
    with pytest.raises(ReaderError, match="--max-file-size") as info:
        read_path(path, max_bytes=1000)
    assert info.value.path == str(path)
    assert read_path(path, max_bytes=10_000).records[0].table.n_rows == 1000


# --- 3. memory ----------------------------------------------------------------------------------


def test_csv_peak_memory_is_a_small_multiple_of_the_file(tmp_path: Path) -> None:
    """Case: a 200 MB CSV imported with 3.5 GB peak memory (17x the file); here 2.3 MB, <= 4x."""
    rng = random.Random(7)
    path = tmp_path / "big.csv"
    cities = ["Oslo", "Bergen", "Trondheim", "Stavanger", "Tromsø"]
    with path.open("w", newline="", encoding="utf-8") as f:
        f.write("id,city,year,population,share,note\r\n")
        for i in range(50_000):
            f.write(f"{i},{rng.choice(cities)},{rng.randint(1950, 2024)},{rng.randint(1000, 999999)},"
                    f"{rng.random() * 100:.2f},item {rng.randint(0, 10**6)}\r\n")
    code = (
        "import tracemalloc\nfrom tqaforge.tables.readers import read_path\n"
        "tracemalloc.start()\n"
        f"table = read_path({str(path)!r}).records[0].table\n"
        "table.id\n"
        "print(tracemalloc.get_traced_memory()[1], table.n_rows)\n"
    )
    done = run_python(code, timeout=120)
    peak, rows = map(int, done.stdout.split())
    assert rows == 50_000
    ratio = peak / path.stat().st_size
    assert ratio <= 4, f"peak {peak / 1e6:.1f} MB = {ratio:.1f}x the file"


# --- 4. control characters ----------------------------------------------------------------------


def test_control_characters_are_removed_and_counted(tmp_path: Path) -> None:
    """Case: NUL and other control characters in cells, headers and captions (PostgreSQL
    refused NUL with DataError); they are removed by the one rule and counted."""
    csv_path = tmp_path / "nul.csv"
    csv_path.write_bytes(b"ci\x00ty,pop\x07\nOs\x00lo,709\x1b000\nBergen,286000\n")
    result = read_path(csv_path)
    table = result.records[0].table
    assert table.header == ("city", "pop")
    assert table.rows == (("Oslo", "709000"), ("Bergen", "286000"))
    assert result.control_chars_removed == 4

    html = tmp_path / "nul.html"
    html.write_text("<table><caption>Ci\x01ties</caption><tr><th>a\x02</th></tr><tr><td>x\x7f\x85</td></tr></table>")
    result = read_path(html)
    assert result.records[0].table.caption == "Cities"
    assert result.records[0].table.rows == (("x",),)
    assert result.control_chars_removed == 4

    bench = write_jsonl(
        tmp_path / "nul.jsonl",
        tablebench_line(question="How many\x00 people?", answer="709\x00000", id="q\x001"),
    )
    result = read_path(bench, "tablebench")
    item = result.records[0].items[0]
    assert (item.question, item.answers, item.source_id) == ("How many people?", ("709000",), "q1")
    assert result.control_chars_removed == 3


def test_nul_in_a_question_is_stored_clean(tmp_path: Path, workspace) -> None:  # type: ignore[no-untyped-def]
    """Case: a NUL in a question or cell (PostgreSQL: DataError; SQLite: stored silently)."""
    bench = write_jsonl(
        tmp_path / "nul.jsonl",
        tablebench_line(question="How\x00 many?", table={"columns": ["c\x00ity", "pop"], "data": [["Os\x00lo", "1"]]}),
    )
    summary = import_paths(workspace, [bench])
    assert not summary.failed, summary.failed
    with workspace.session() as session:
        question = session.exec(select(Question)).one()
        table = session.exec(select(TableRecord)).one()
    assert question.text == "How many?"
    assert table.header == ["city", "pop"] and table.rows == [["Oslo", "1"]]


# --- 5. TableBench / FREB-TQA field types -------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"answer": {"value": 3}}, "answer"),
        ({"id": ["q", 1]}, "id"),
        ({"id": True}, "id"),
        ({"question": 7}, "question"),
        ({"answer": float("nan")}, "answer"),
        ({"table": {"columns": ["city", None], "data": [["Oslo", "1"]]}}, "table.columns[1]"),
        ({"table": {"columns": ["city", ["p"]], "data": [["Oslo", "1"]]}}, "table.columns[1]"),
        ({"table": {"columns": ["city", "pop"], "data": [["Oslo", {"n": 1}]]}}, "table.data[0][1]"),
    ],
)
def test_tablebench_field_types_are_checked(tmp_path: Path, changes: dict[str, object], field: str) -> None:
    """Case: TableBench lines whose `answer` is an object, `id` a list, or a column name null
    were silently coerced and stored; the line is refused naming file, line and field."""
    path = write_jsonl(tmp_path / "bad.jsonl", tablebench_line(), tablebench_line(**changes))
    with pytest.raises(ReaderError) as info:
        read_path(path, "tablebench")
    assert (info.value.path, info.value.line) == (str(path), 2)
    assert repr(field) in info.value.problem or field in info.value.problem


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"answers": [{"v": 1}]}, "answers[0]"),
        ({"id": ["x"]}, "id"),
        ({"question": None}, "question"),
        ({"table": {"header": [None], "rows": [["x"]]}}, "table.header[0]"),
    ],
)
def test_freb_tqa_field_types_are_checked(tmp_path: Path, changes: dict[str, object], field: str) -> None:
    """Case (class of 5): the same checks for FREB-TQA lines."""
    good = {"id": "f1", "question": "Which?", "answers": ["x"], "table": {"header": ["a"], "rows": [["x"]]}}
    path = write_jsonl(tmp_path / "bad.jsonl", good, {**good, **changes})
    with pytest.raises(ReaderError) as info:
        read_path(path, "freb-tqa")
    assert (info.value.path, info.value.line) == (str(path), 2)
    assert field in info.value.problem


def test_numeric_tablebench_fields_are_still_accepted(tmp_path: Path) -> None:
    """Case 5, the other side: numbers where TableBench allows them are text, not errors."""
    path = write_jsonl(
        tmp_path / "ok.jsonl",
        tablebench_line(id=17, answer=3.0, table={"columns": ["city", 2020], "data": [["Oslo", 1], ["Bergen", None]]}),
    )
    record = read_path(path, "tablebench").records[0]
    assert record.items[0].source_id == "17" and record.items[0].answers == ("3",)
    assert record.table.header == ("city", "2020") and record.table.rows == (("Oslo", "1"), ("Bergen", ""))


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data is absent")
def test_real_benchmark_files_still_read() -> None:
    """Case 5: the real TableBench and FREB-TQA files pass the new field checks."""
    assert len(read_path(SHARED / "tablebench" / "TableBench.jsonl").records) == 886
    for path in sorted((SHARED / "freb-tqa").glob("*/*.jsonl")):
        assert read_path(path).records, path


# --- 6. HTML spans in headers ------------------------------------------------------------------


def test_html_colspan_header_gets_distinct_names(tmp_path: Path) -> None:
    """Case: a header with colspan (most Wikipedia tables) was refused for duplicate names."""
    path = tmp_path / "wiki.html"
    path.write_text(
        "<table><tr><th>City</th><th colspan=2>Population</th></tr>"
        "<tr><td>Oslo</td><td>709000</td><td>2023</td></tr></table>"
    )
    table = read_path(path).records[0].table
    assert table.header == ("City", "Population", "Population (2)")
    assert table.rows == (("Oslo", "709000", "2023"),)


def test_html_two_row_header_is_combined(tmp_path: Path) -> None:
    """Case 6: a spanning header over a second header row names columns from both rows."""
    path = tmp_path / "wiki2.html"
    path.write_text(
        "<table><tr><th rowspan=2>City</th><th colspan=2>Population</th></tr>"
        "<tr><th>2010</th><th>2020</th></tr>"
        "<tr><td>Oslo</td><td>583000</td><td>693000</td></tr></table>"
    )
    table = read_path(path).records[0].table
    assert table.header == ("City", "Population 2010", "Population 2020")
    assert table.rows == (("Oslo", "583000", "693000"),)


def test_header_hints_name_the_cli_flag(tmp_path: Path) -> None:
    """Case 6: the hint named a Python argument (`strict_headers=False`), not the CLI flag."""
    path = tmp_path / "dup.csv"
    path.write_text("a,a\n1,2\n")
    with pytest.raises(ReaderError) as info:
        read_path(path)
    assert "--lenient-headers" in str(info.value) and "strict_headers" not in str(info.value)
    blank = tmp_path / "blank.csv"
    blank.write_text("a,\n1,2\n")
    with pytest.raises(ReaderError) as info:
        read_path(blank)
    assert "--lenient-headers" in str(info.value) and "strict_headers" not in str(info.value)


# --- 7. CSV round trip --------------------------------------------------------------------------


@pytest.mark.parametrize("cell", [" ", "  ", "\t", " \t "])
def test_whitespace_only_csv_round_trips(tmp_path: Path, cell: str) -> None:
    """Case: a table whose only cell is a space serialized to a CSV the reader called empty."""
    table = Table.build([cell], [[cell]])
    path = tmp_path / "space.csv"
    path.write_bytes(serialize(table, "csv").encode("utf-8"))
    back = read_path(path, strict_headers=False).records[0].table
    assert (back.header, back.rows) == (table.header, table.rows)


def test_cells_of_other_types_become_plain_strings_and_plain_rows_are_kept() -> None:
    """Table.build takes a row of plain strings as it is (one pass in C) and turns anything else,
    cell by cell, into the str _cell makes: a str subclass (an enum's value, numpy's str_) must
    not stay a subclass in a row that is otherwise plain, nor a float typed as 3 stay 3.0."""
    import enum

    from tqaforge.tables.table import Table

    class Colour(str, enum.Enum):
        RED = "red"

    row = ["a", Colour.RED, None, 3.0, 2.5, 7, True]
    table = Table.build(["h", Colour.RED, "x", "y", "z", "n", "b"], [row, ["p", "q", "r", "s", "t", "u", "v"]])
    assert table.rows[0] == ("a", "Colour.RED", "", "3", "2.5", "7", "True")
    assert [type(c) for r in table.rows for c in r] == [str] * 14 and [type(c) for c in table.header] == [str] * 7
    assert table.header[1] == "Colour.RED"  # str() of the member, as before
    plain = ("p", "q", "r", "s", "t", "u", "v")
    assert table.rows[1] == plain
    assert Table.from_dict(table.to_dict()) == table

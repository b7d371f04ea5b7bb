"""Hostile input for real-world table tidying: columns that mix number conventions, ambiguous
numbers, files too short to hold a table, binary junk, tables that only look like they have
header rows, lying merged ranges in a workbook, failed uploads (nothing stored, nothing left)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from tqaforge.annotation.human_import import import_uploads
from tqaforge.errors import ReaderError
from tqaforge.ingest import import_paths
from tqaforge.queries import list_tables
from tqaforge.store import Workspace, init_workspace
from tqaforge.tables.locale_numbers import detect_convention, parse_with
from tqaforge.tables.readers import TidyOptions, read_path

TIDY = TidyOptions()


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    return init_workspace(tmp_path / "ws", name="hostile")


def _csv(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_column_mixing_conventions_stays_text(tmp_path: Path) -> None:
    path = _csv(tmp_path, 'item,amount\na,"1.234,5"\nb,"1,234.5"\nc,"2.000,0"\nd,"3,000.0"\n')
    table = read_path(path, tidy=TIDY).records[0].table
    assert table.numbers == (None, None)
    assert table.number(0, 1) is None and table.rows[0][1] == "1.234,5"
    # Control: the same cells under one convention make a numeric column.
    path = _csv(tmp_path, 'item,amount\na,"1.234,5"\nb,"7,5"\nc,"2.000,0"\nd,"3.000,0"\n', "one.csv")
    table = read_path(path, tidy=TIDY).records[0].table
    assert table.numbers == (None, "1.234,5") and table.number(1, 1) == Decimal("7.5")


def test_one_convention_per_column_never_reads_a_dot_two_ways() -> None:
    # "1.234" next to "12,5": the column writes decimal commas, so its dot groups thousands.
    assert detect_convention(["1.234", "12,5"]) == "1.234,5"
    assert parse_with("1.234", "1.234,5") == Decimal("1234")
    # Alone (or with other plain numbers), "1.234" is ambiguous: read the plain way (documented).
    assert detect_convention(["1.234", "2.5"]) == "1,234.5"
    assert parse_with("1.234", "1,234.5") == Decimal("1.234")
    # "1,234" alone likewise: one thousand two hundred thirty-four, as parse_number always read it.
    assert detect_convention(["1,234"]) == "1,234.5" and parse_with("1,234", "1,234.5") == Decimal("1234")


def test_malformed_numbers_are_not_numbers() -> None:
    for text in ("1.23.4,5,6", "(12", "12)", "1 23", "€", "%", "--5", "12 345 67", "1'2'3"):
        assert all(parse_with(text, c) is None for c in ("1.234,5", "1 234,5", "1'234.5")), text


def test_a_one_row_file_is_a_clear_error_and_nothing_is_imported(ws: Workspace, tmp_path: Path) -> None:
    path = _csv(tmp_path, "city,pop\n")
    with pytest.raises(ReaderError, match="header but no data rows"):
        read_path(path, tidy=TIDY)
    summary = import_paths(ws, [path])
    assert summary.failures() and "header but no data rows" in summary.failures()[0]
    assert list_tables(ws, limit=1).total == 0
    # One data row is a table: nothing below it to take it for a header row.
    one = read_path(_csv(tmp_path, "city,2019,\nOslo,5,\n", "one_row.csv"), tidy=TIDY).records[0]
    assert one.table.header == ("city", "2019") and one.table.rows == (("Oslo", "5"),)


def test_a_header_only_file_with_two_header_rows_is_refused(ws: Workspace, tmp_path: Path) -> None:
    # No data below: nothing says the second row is a header row, so it is data of a header with
    # blank names, refused as such; its empty rows are dropped, not taken as data.
    path = _csv(tmp_path, "2019,,2020,\nQ1,Q2,Q1,Q2\n,,,\n")
    with pytest.raises(ReaderError, match="header column 2 is blank"):
        read_path(path, tidy=TIDY)
    path = _csv(tmp_path, "a,b\n,\n,\n", "empty_rows.csv")
    with pytest.raises(ReaderError, match="header but no data rows"):
        read_path(path, tidy=TIDY)
    assert all(f.error for f in import_paths(ws, [path]).files)
    assert list_tables(ws, limit=1).total == 0


def test_a_text_first_row_under_a_normal_header_is_not_taken_for_a_header(tmp_path: Path) -> None:
    # No spans in the first row: no merging, whatever the rows below hold.
    path = _csv(tmp_path, "name,score,rank\nunits,points,place\nalice,3,1\nbob,5,2\n")
    table = read_path(path, tidy=TIDY).records[0].table
    assert table.header == ("name", "score", "rank") and table.rows[0] == ("units", "points", "place")
    # Spans, but the row below has a number: not a header row.
    path = _csv(tmp_path, "city,2019,\nOslo,5,6\nBergen,7,8\n", "numbers_below.csv")
    table = read_path(path, tidy=TIDY, strict_headers=False).records[0].table
    assert table.header == ("city", "2019", "") and table.n_rows == 2


def test_header_rows_of_different_widths_and_bad_options(tmp_path: Path) -> None:
    path = _csv(tmp_path, "a,b,c\nx,y\n1,2,3\n")
    with pytest.raises(ReaderError, match="header rows have different numbers of cells"):
        read_path(path, tidy=TidyOptions(header_rows=2))
    with pytest.raises(ValueError, match="header_rows must be at least 1"):
        TidyOptions(header_rows=0)
    with pytest.raises(ValueError, match="numbers must be"):
        TidyOptions(numbers="sometimes")  # type: ignore[arg-type]


def test_binary_junk_named_csv_is_a_clear_error(ws: Workspace, tmp_path: Path) -> None:
    path = tmp_path / "junk.csv"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8)
    with pytest.raises(ReaderError, match="not valid UTF-8"):
        read_path(path, tidy=TIDY)
    summary = import_paths(ws, [path])
    assert "junk.csv" in summary.failures()[0] and list_tables(ws, limit=1).total == 0


def test_a_failed_upload_is_removed_and_its_reason_kept_whole(ws: Workspace) -> None:
    junk = b"\x00\xff\xfe" + bytes(range(256)) * 8
    good = b"city,pop\nOslo,709000\n"
    summary = import_uploads(ws, [("junk.csv", junk), ("good.csv", good), ("dup.csv", b"a,a\n1,2\n")])
    uploads = ws.root / "uploads"
    assert sorted(p.name for p in uploads.iterdir()) == ["good.csv"]  # the failed ones are gone
    failed = {Path(f.path).name: f for f in summary.questions.failed}
    assert set(failed) == {"junk.csv", "dup.csv"}
    assert failed["dup.csv"].header_names_failed and not failed["junk.csv"].header_names_failed
    assert "header name 'a' appears in columns 1 and 2" in (failed["dup.csv"].error or "")
    assert list_tables(ws, limit=5).total == 1


def test_a_workbook_whose_merged_ranges_lie(tmp_path: Path) -> None:
    """A mergeCell range far outside the sheet, or over an empty cell, changes nothing; one
    reaching the sheet's last column and row copies its value only over the sheet's cells."""
    import zipfile

    from openpyxl import Workbook

    wb = Workbook()
    sheet = wb.active
    sheet.append(["city", "pop"])
    sheet.append(["Oslo", 709000])
    src = tmp_path / "plain.xlsx"
    wb.save(src)
    bad = tmp_path / "lying.xlsx"
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(bad, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename == "xl/worksheets/sheet1.xml":
                data = data.replace(b"</sheetData>", b'</sheetData><mergeCells count="3"><mergeCell ref="A100:Z200"/>'
                                    b'<mergeCell ref="C1:D2"/><mergeCell ref="A2:XFD1048576"/></mergeCells>')
            zout.writestr(item, data)
    table = read_path(bad, tidy=TIDY).records[0].table
    assert table.header == ("city", "pop") and table.rows == (("Oslo", "Oslo"),)


def test_the_one_pass_column_detection_agrees_with_the_column_by_column_rule() -> None:
    """detect_columns stops trying a convention once it has failed on a tenth of the rows:
    the same answer as trying every one on every cell (detect_convention)."""
    import random

    from tqaforge.tables.locale_numbers import detect_columns

    rng = random.Random(7)
    pool = ["1.234,5", "1,234.5", "12", "3,5", "7.25", "(1 234)", "12 %", "n/a", "", "x1", "1 234,5", "€ 3,50", "1'234.5"]
    for _ in range(200):
        width, n = rng.randint(1, 4), rng.randint(1, 40)
        weights = [[rng.random() for _ in pool] for _ in range(width)]
        rows = [[rng.choices(pool, weights[c])[0] for c in range(width)] for _ in range(n)]
        assert detect_columns(width, rows) == tuple(detect_convention(r[c] for r in rows) for c in range(width)), rows


def test_a_ragged_row_read_ahead_by_header_detection_is_placed_on_its_own_line(tmp_path: Path) -> None:
    rows = "".join(f"r{i},{i}\n" for i in range(10))
    path = _csv(tmp_path, "name,value\n\n" + rows + "short\n" + rows)
    with pytest.raises(ReaderError, match=r"line 13, row 12: the row has 1 cells but the header has 2"):
        read_path(path, tidy=TIDY)
    # Control: read as written, the same line.
    with pytest.raises(ReaderError, match=r"line 13, row 12: the row has 1 cells"):
        read_path(path)

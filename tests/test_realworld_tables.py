"""Real-world tables (issue 29, item 3): header rows merged, empty rows and columns dropped and
reported, numbers detected per column with the text kept, Excel merged cells expanded, and the
import summary naming each new table. Files under tests/data/realworld/."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tqaforge.cli import app
from tqaforge.errors import HeaderNameError, ReaderError
from tqaforge.ingest import ImportOptions, import_paths
from tqaforge.queries import list_tables
from tqaforge.store import Workspace, init_workspace
from tqaforge.tables.readers import TidyOptions, read_path
from tqaforge.tables.stats import table_stats
from tqaforge.tables.table import Table

DATA = Path(__file__).parent / "data" / "realworld"
TIDY = TidyOptions()
runner = CliRunner(env={"COLUMNS": "200"})


def _read(name: str, options: TidyOptions | None = TIDY) -> tuple[Table, tuple[str, ...]]:
    record = read_path(DATA / name, tidy=options).records[0]
    return record.table, record.notes


def _numbers(table: Table, col: int) -> list[Decimal | None]:
    return [table.number(r, col) for r in range(table.n_rows)]


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    return init_workspace(tmp_path / "ws", name="realworld")


def test_two_header_rows_are_merged_into_one_name_per_column() -> None:
    table, notes = _read("two_row_header.csv")
    assert table.header == ("Region", "2019 / Q1", "2019 / Q2", "2020 / Q1", "2020 / Q2")
    assert table.rows[0] == ("North", "10", "12", "14", "15") and table.n_rows == 3  # the Q1 row is no data row
    assert any("merged the first 2 rows" in n for n in notes)
    # Control: read as written, the second header row is data and the blank names are kept.
    exact = read_path(DATA / "two_row_header.csv", strict_headers=False).records[0].table
    assert exact.header == ("Region", "2019", "", "2020", "") and exact.rows[0][1] == "Q1"


def test_header_rows_one_is_todays_behaviour_and_a_count_merges_that_many() -> None:
    with pytest.raises(HeaderNameError, match="header column 3 is blank"):
        read_path(DATA / "two_row_header.csv", tidy=TidyOptions(header_rows=1))
    table = read_path(DATA / "two_row_header.csv", tidy=TidyOptions(header_rows=1), strict_headers=False).records[0].table
    assert table.header == ("Region", "2019", "", "2020", "") and table.rows[0][1] == "Q1"
    table, _ = _read("plain.csv", TidyOptions(header_rows=2))
    assert table.header == ("city / Oslo", "pop / 709000", "area / 454") and table.n_rows == 1


def test_german_decimal_comma_percent_and_currency_read_as_numbers_with_the_text_kept() -> None:
    table, notes = _read("german_decimal_comma.csv")
    assert table.header == ("Produkt", "Umsatz", "Anteil", "Preis")
    assert table.rows[0] == ("Äpfel", "1.234,5", "12 %", "3,50 €")  # the original text
    assert _numbers(table, 1) == [Decimal("1234.5"), Decimal("987.25"), Decimal("12345.0")]
    assert _numbers(table, 2) == [Decimal("12"), Decimal("8.5"), Decimal("79.5")]
    assert _numbers(table, 3) == [Decimal("3.50"), Decimal("2.99"), Decimal("10.00")]
    assert table.numbers is not None and table.numbers[0] is None  # the product names are text
    assert any("Umsatz" in n for n in notes)
    assert table_stats(table).numeric_share == 0.75
    # Control: plain numbers see only "987,25"-free cells... i.e. almost nothing of it.
    plain, _ = _read("german_decimal_comma.csv", TidyOptions(numbers="plain"))
    assert plain.numbers is None and table_stats(plain).numeric_share < 0.3
    assert plain.id == table.id  # same cells, same table


def test_french_space_thousands_including_narrow_no_break_spaces() -> None:
    table, _ = _read("french_space_thousands.csv")
    assert table.rows[0][1] == "2\u202f165\u202f423"  # kept as written
    assert _numbers(table, 1) == [Decimal("2165423"), Decimal("513275"), Decimal("870731")]
    assert _numbers(table, 2) == [Decimal("105.4"), Decimal("47.87"), Decimal("240.6")]


def test_accounting_negatives_in_parentheses() -> None:
    table, _ = _read("accounting_negatives.csv")
    assert table.rows[1] == ("losses", "(1,234)", "(567)")
    assert _numbers(table, 1) == [Decimal("1234"), Decimal("-1234"), Decimal("0")]
    assert _numbers(table, 2) == [Decimal("2345"), Decimal("-567"), Decimal("1778")]


def test_empty_trailing_column_and_rows_are_dropped_and_reported(ws: Workspace) -> None:
    table, notes = _read("trailing_empty.csv")
    assert table.header == ("city", "pop") and table.rows == (("Oslo", "709000"), ("Bergen", "285000"))
    assert notes == ("dropped 2 empty rows (lines 4, 5)", "dropped 1 empty columns (column 3)")
    summary = import_paths(ws, [DATA / "trailing_empty.csv"])
    text = "\n".join(summary.lines())
    assert "trailing_empty.csv: dropped 1 empty columns (column 3)" in text
    assert "trailing_empty.csv: dropped 2 empty rows (lines 4, 5)" in text
    # Control: as written, the blank column is refused by strict headers.
    with pytest.raises(HeaderNameError, match="header column 3 is blank"):
        read_path(DATA / "trailing_empty.csv")


def test_a_plain_csv_is_unchanged_by_tidying() -> None:
    table, notes = _read("plain.csv")
    exact = read_path(DATA / "plain.csv").records[0].table
    assert (table.header, table.rows, table.id) == (exact.header, exact.rows, exact.id)
    assert notes == () and table.numbers == (None, "1,234.5", "1,234.5")
    assert table.to_dict() == {**exact.to_dict(), "numbers": [None, "1,234.5", "1,234.5"]}
    assert "numbers" not in exact.to_dict()  # tables read as written serialize as before


def _merged_workbook(path: Path) -> Path:
    from openpyxl import Workbook

    wb = Workbook()
    sheet = wb.active
    sheet.title = "sales"
    sheet.append(["Region", "2019", None, "2020", None])
    sheet.append([None, "Q1", "Q2", "Q1", "Q2"])
    sheet.append(["North", 10, 12, 14, 15])
    sheet.append([None, 11, 13, 15, 16])
    sheet.append(["South", 20, 22, 24, 25])
    for ref in ("A1:A2", "B1:C1", "D1:E1", "A3:A4"):
        sheet.merge_cells(ref)
    wb.save(path)
    return path


def test_excel_merged_cells_are_expanded_and_their_header_rows_merged(tmp_path: Path) -> None:
    path = _merged_workbook(tmp_path / "merged.xlsx")
    record = read_path(path, tidy=TIDY).records[0]
    table = record.table
    assert table.header == ("Region", "2019 / Q1", "2019 / Q2", "2020 / Q1", "2020 / Q2")
    assert [row[0] for row in table.rows] == ["North", "North", "South"]  # A3:A4 copied down
    assert _numbers(table, 4) == [Decimal(15), Decimal(16), Decimal(25)]
    assert any("expanded 4 merged cell ranges" in n for n in record.notes)
    # Control: read as written, merged cells are blanks: the header ends at D, and E2 lies beyond.
    with pytest.raises(ReaderError, match="cell E2 lies right of the last header column D"):
        read_path(path)


def test_import_stores_locale_numeric_share_and_cli_prints_each_new_table_id(ws: Workspace) -> None:
    result = runner.invoke(app, ["--workspace", str(ws.root), "tables", "import",
                                 str(DATA / "german_decimal_comma.csv"), str(DATA / "two_row_header.csv")])
    assert result.exit_code == 0, result.output
    ids = {t.id: t for t in list_tables(ws, limit=10).items}
    assert len(ids) == 2
    for table_id in ids:
        assert f"new table {table_id}" in result.output
    german = read_path(DATA / "german_decimal_comma.csv", tidy=TIDY).records[0].table
    assert ids[german.id].numeric_share == 0.75
    assert "two_row_header.csv: merged the first 2 rows into one header" in result.output
    again = runner.invoke(app, ["--workspace", str(ws.root), "tables", "import", str(DATA / "german_decimal_comma.csv")])
    assert "new table" not in again.output and "already present: 1 tables" in again.output


def test_cli_options_header_rows_numbers_and_exact(ws: Workspace) -> None:
    base = ["--workspace", str(ws.root), "tables", "import"]
    result = runner.invoke(app, [*base, "--numbers", "plain", str(DATA / "german_decimal_comma.csv")])
    assert result.exit_code == 0, result.output
    assert list_tables(ws, limit=1).items[0].numeric_share < 0.3
    result = runner.invoke(app, [*base, "--header-rows", "1", str(DATA / "two_row_header.csv")])
    assert result.exit_code == 1 and "header column 3 is blank" in result.output
    result = runner.invoke(app, [*base, "--exact", "--lenient-headers", str(DATA / "trailing_empty.csv")])
    assert result.exit_code == 0 and "dropped" not in result.output
    result = runner.invoke(app, [*base, "--numbers", "sometimes", str(DATA / "plain.csv")])
    assert result.exit_code != 0 and "neither auto nor plain" in result.output


def test_options_in_the_import_options_object(ws: Workspace) -> None:
    summary = import_paths(ws, [DATA / "two_row_header.csv"], ImportOptions(tidy=None, strict_headers=False))
    table = list_tables(ws, limit=1).items[0]
    assert summary.total("tables_new") == 1 and table.n_rows == 4  # the Q1 row kept as data


def test_tsv_and_an_unmerged_excel_sheet_are_tidied_alike(tmp_path: Path) -> None:
    from openpyxl import Workbook

    tsv = tmp_path / "t.tsv"
    tsv.write_text("Land\tAnteil\t\nDE\t3,5 %\t\nFR\t12,25 %\t\n\t\t\n", encoding="utf-8")
    record = read_path(tsv, tidy=TIDY).records[0]
    assert record.table.header == ("Land", "Anteil") and _numbers(record.table, 1) == [Decimal("3.5"), Decimal("12.25")]
    assert record.notes[:2] == ("dropped 1 empty rows (lines 4)", "dropped 1 empty columns (column 3)")

    wb = Workbook()
    sheet = wb.active
    sheet.title = "q"
    for row in (["Region", "2019", None, "2020", None], [None, "Q1", "Q2", "Q1", "Q2"], ["North", 1, 2, 3, 4],
                [None, None, None, None, None], ["South", 5, 6, 7, "8"]):
        sheet.append(row)
    wb.save(tmp_path / "spans.xlsx")
    record = read_path(tmp_path / "spans.xlsx", tidy=TIDY).records[0]
    assert record.table.header == ("Region", "2019 / Q1", "2019 / Q2", "2020 / Q1", "2020 / Q2")
    assert record.table.rows == (("North", "1", "2", "3", "4"), ("South", "5", "6", "7", "8"))
    assert "sheet 'q': dropped 1 empty rows (sheet rows 4)" in record.notes

"""Excel workbooks (.xlsx, via openpyxl): every worksheet with content is one table.

With tidying (:mod:`tqaforge.tables.readers.tidy`, what an import does by default) merged cells
are expanded first, then the header rows merged and empty rows and columns dropped. Without it:
the first non-empty row is the header. Leading empty rows and empty columns at either side are
ignored, and so are empty rows at the end (a spreadsheet cannot tell them from unused rows);
empty rows inside the table are rows of empty cells. Formulas are read as their cached values.
Numbers keep no ``.0`` when integral, booleans read ``TRUE``/``FALSE`` as Excel shows them, and
dates and times are written in ISO 8601.
"""

from __future__ import annotations

import datetime as dt
import io
import re
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from tqaforge.errors import ReaderError, TqaforgeError
from tqaforge.tables.readers._common import (
    DEFAULT_MAX_BYTES,
    TextCleaner,
    check_header,
    describe_size,
    finish_table,
    read_bytes,
    to_cell,
)
from tqaforge.tables.readers.tidy import TidyOptions, finish_tidy, tidy_rows
from tqaforge.tables.source import ReadRecord, ReadResult
from tqaforge.tables.table import Table

if TYPE_CHECKING:
    from openpyxl.worksheet._read_only import ReadOnlyWorksheet


def _excel_cell(value: object) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ") if value.time() != dt.time(0) else value.date().isoformat()
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    return to_cell(value)


def _column_letter(index: int) -> str:
    from openpyxl.utils import get_column_letter

    return get_column_letter(index)


def _check_unpacked_size(path: Path, data: bytes, max_bytes: int) -> None:
    """Refuse a workbook whose parts unpack to more than ``max_bytes``: a few kilobytes of
    zip can unpack to gigabytes of sheet XML (a zip bomb)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            unpacked = sum(info.file_size for info in archive.infolist())
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise ReaderError(
            str(path), f"not a readable .xlsx workbook ({type(exc).__name__}: {exc})",
            hint="old .xls files must be saved as .xlsx first",
        ) from None
    if unpacked > max_bytes:
        raise ReaderError(
            str(path), f"the workbook unpacks to {describe_size(unpacked)}, more than the limit of {describe_size(max_bytes)}",
            hint="pass a larger --max-file-size if the workbook is really that large",
        )


def read_excel(
    path: Path, *, strict_headers: bool = True, encoding: str | None = None, max_bytes: int = DEFAULT_MAX_BYTES,
    tidy: TidyOptions | None = None,
) -> ReadResult:
    """Read every non-empty worksheet of an .xlsx workbook as one table. ``encoding`` is
    accepted for a uniform reader signature and ignored (the format fixes it). With ``tidy``,
    merged cells are expanded (the value copied into every cell of the range) before the
    sheet is tidied as :mod:`tqaforge.tables.readers.tidy` says."""
    from openpyxl import load_workbook  # imported here: openpyxl is slow to import

    # Read once, bounded and from a regular file only; openpyxl then reads the bytes in memory.
    data = read_bytes(path, max_bytes)
    _check_unpacked_size(path, data, max_bytes)
    cleaner = TextCleaner()
    records: list[ReadRecord] = []
    try:
        workbook = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
        try:
            for sheet in workbook.worksheets:
                notes: list[str] = []
                if tidy is None:
                    table = _read_sheet(path, sheet, strict_headers, cleaner)
                else:
                    table = _read_sheet_tidy(path, sheet, strict_headers, cleaner, tidy, _merged_ranges(data, sheet), notes)
                if table is not None:
                    records.append(ReadRecord(table=table, location=f"{path}#{cleaner(sheet.title)}", notes=tuple(notes)))
        finally:
            workbook.close()
    except TqaforgeError:
        raise
    except Exception as exc:  # noqa: BLE001
        # openpyxl and the XML parser under it raise whatever they meet (KeyError, TypeError,
        # XML syntax errors, ...) on a damaged workbook; every one means "this file is broken".
        raise ReaderError(
            str(path),
            f"not a readable .xlsx workbook ({type(exc).__name__}: {exc})",
            hint="open and save the workbook again in a spreadsheet program; old .xls files must be saved as .xlsx",
        ) from None
    if not records:
        raise ReaderError(str(path), "every worksheet is empty")
    return ReadResult(path=str(path), format="excel", records=records, control_chars_removed=cleaner.removed)


def _read_sheet(path: Path, sheet: "ReadOnlyWorksheet", strict_headers: bool, cleaner: TextCleaner) -> Table | None:
    """The sheet's table, or None for a sheet without content."""
    where = f"sheet {sheet.title!r}: "
    # Read-only sheets trust the file's stored dimensions, which some writers get wrong;
    # forgetting them makes openpyxl read every row that is actually there.
    sheet.reset_dimensions()
    raw = [
        (n, [_excel_cell(v) for v in values])
        for n, values in enumerate(sheet.iter_rows(values_only=True), start=1)
    ]
    filled = [(n, cells) for n, cells in raw if any(c != "" for c in cells)]
    if not filled:
        return None
    first_row, last_row = filled[0][0], filled[-1][0]
    used_cols = [i for _, cells in filled for i, c in enumerate(cells) if c != ""]
    left, right = min(used_cols), max(used_cols)
    header_n, header_cells = filled[0]
    header_cells = header_cells + [""] * (right + 1 - len(header_cells))
    header_width = max(i for i, c in enumerate(header_cells) if c != "") + 1
    rows: list[list[str]] = []
    for n, cells in raw:
        if not first_row < n <= last_row:
            continue
        cells = cells + [""] * (right + 1 - len(cells))
        beyond = [i for i in range(header_width, right + 1) if cells[i] != ""]
        if beyond:
            raise ReaderError(
                str(path),
                f"{where}cell {_column_letter(beyond[0] + 1)}{n} lies right of the last header column "
                f"{_column_letter(header_width)}",
                row=n,
                hint="give the column a header, or delete the stray cell",
            )
        rows.append(cells[left:header_width])
    header = header_cells[left:header_width]
    try:
        return finish_table(path, header, rows, strict_headers=strict_headers, where=where, cleaner=cleaner)
    except ReaderError as exc:
        # Table rows count from the header; the sheet's row numbers are what a user sees.
        if exc.row is not None:
            raise type(exc)(str(path), exc.problem, row=exc.row - 1 + header_n, hint=exc.hint) from None
        raise


# A merged range of a sheet's XML: <mergeCell ref="B1:C1"/>, the tag maybe with a prefix.
_MERGE_CELL = re.compile(rb"<(?:\w+:)?mergeCell\b[^>]*?\bref=\"([A-Za-z]+[0-9]+:[A-Za-z]+[0-9]+)\"")


def _merged_ranges(data: bytes, sheet: "ReadOnlyWorksheet") -> list[tuple[int, int, int, int]]:
    """The merged ranges of a sheet as (first column, first row, last column, last row), 1-based.

    Read from the sheet's XML: openpyxl's read-only sheets, which keep a large workbook out of
    memory, do not read them."""
    from openpyxl.utils import range_boundaries

    name = getattr(sheet, "_worksheet_path", None)
    if not name:
        return []
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        try:
            xml = archive.read(name.lstrip("/"))
        except KeyError:
            return []
    if b"mergeCell" not in xml:
        return []
    found = []
    for ref in _MERGE_CELL.findall(xml):
        bounds = range_boundaries(ref.decode("ascii"))
        if None not in bounds:
            found.append(tuple(int(b) for b in bounds))  # type: ignore[arg-type]
    return found  # type: ignore[return-value]


def _expand_merged(grid: list[list[str]], merges: list[tuple[int, int, int, int]]) -> int:
    """Copy each merged range's value (its top-left cell) into every cell of the range;
    how many ranges had a value to copy."""
    expanded = 0
    # A range reaches no further right than the sheet's cells: "A1:XFD1048576" must not make
    # sixteen thousand columns of copies.
    width = max((len(row) for row in grid), default=0)
    for min_col, min_row, max_col, max_row in merges:
        max_col = min(max_col, width)
        if min_row > len(grid):
            continue
        top = grid[min_row - 1]
        value = top[min_col - 1] if min_col - 1 < len(top) else ""
        if value == "":
            continue
        expanded += 1
        for r in range(min_row - 1, min(max_row, len(grid))):
            row = grid[r]
            if len(row) < max_col:
                row.extend([""] * (max_col - len(row)))
            for c in range(min_col - 1, max_col):
                row[c] = value
    return expanded


def _read_sheet_tidy(
    path: Path, sheet: "ReadOnlyWorksheet", strict_headers: bool, cleaner: TextCleaner, options: TidyOptions,
    merges: list[tuple[int, int, int, int]], notes: list[str],
) -> Table | None:
    """The sheet's table tidied (merged cells expanded, header rows merged, empty rows and
    columns dropped, number conventions found), or None for a sheet without content; what was
    done is added to ``notes``."""
    where = f"sheet {sheet.title!r}: "
    sheet.reset_dimensions()
    grid = [[_excel_cell(v) for v in values] for values in sheet.iter_rows(values_only=True)]
    if merges:
        expanded = _expand_merged(grid, merges)
        if expanded:
            notes.append(f"expanded {expanded} merged cell ranges (each value copied into its range)")
    filled = [(n, cells) for n, cells in enumerate(grid, start=1) if any(c != "" for c in cells)]
    if not filled:
        return None
    left = min(i for _, cells in filled for i, c in enumerate(cells) if c != "")
    right = max(i for _, cells in filled for i, c in enumerate(cells) if c != "")
    header_n = filled[0][0]
    numbered = [(n, (cells + [""] * (right + 1 - len(cells)))[left : right + 1]) for n, cells in enumerate(grid, start=1)
                if header_n <= n <= filled[-1][0]]
    empties = [n for n, cells in numbered[1:] if all(not c.strip() for c in cells)]
    if options.drop_empty:
        numbered = [numbered[0]] + [(n, cells) for n, cells in numbered[1:] if n not in set(empties)]
    header, taken, _ = tidy_rows(path, numbered[0][1], iter([cells for _, cells in numbered[1:]]), options, notes, where=where)
    named = [i for i, h in enumerate(header) if h != ""]
    width = (max(named) + 1) if named else len(header)
    rows: list[list[str]] = []
    for n, cells in numbered[taken:]:
        beyond = [i for i in range(width, len(cells)) if cells[i] != ""]
        if beyond:
            raise ReaderError(
                str(path),
                f"{where}cell {_column_letter(left + beyond[0] + 1)}{n} lies right of the last header column "
                f"{_column_letter(left + width)}",
                row=n,
                hint="give the column a header, or delete the stray cell",
            )
        rows.append(cells[:width])
    if options.drop_empty and empties:
        notes.insert(0, f"{where}dropped {len(empties)} empty rows (sheet rows {', '.join(map(str, empties[:8]))}"
                     + (", ..." if len(empties) > 8 else "") + ")")
    try:
        table = finish_table(path, header[:width], rows, strict_headers=False, where=where, cleaner=cleaner)
    except ReaderError as exc:
        if exc.row is not None:
            raise type(exc)(str(path), exc.problem, row=exc.row - 1 + header_n, hint=exc.hint) from None
        raise
    table = finish_tidy(table, options, notes)
    if strict_headers:
        check_header(path, table.header, where=where, row=header_n)
    return table

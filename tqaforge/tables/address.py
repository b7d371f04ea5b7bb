"""Spreadsheet addresses of a table: column letters, cell addresses and the table's range.

A table is placed as a spreadsheet would hold it: its **header row is row 1** and its first
column is **column A**; data row ``i`` (0-based, as :meth:`Table.cell` counts) is spreadsheet
row ``i + 2``. The table's range runs from ``A1`` to the last column of the last data row, so
it counts the header row: a table of 3 columns and 8 data rows covers ``A1:C9``; a table with a
header and no data rows covers ``A1:C1``. Columns after Z go on as spreadsheets name them (AA,
AB, ..., AZ, BA, ..., ZZ, AAA). Pure: no store, no I/O.

>>> column_letters(1), column_letters(26), column_letters(27), column_letters(703)
('A', 'Z', 'AA', 'AAA')
>>> from tqaforge.tables.table import Table
>>> table_range(Table.build(["a", "b", "c"], [["1", "2", "3"]] * 8))
'A1:C9'
>>> cell_address(0, 1)
'B2'
"""

from __future__ import annotations

from tqaforge.errors import TableError
from tqaforge.tables.table import Table

_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def column_letters(number: int) -> str:
    """The spreadsheet name of the 1-based column ``number`` (bijective base 26: A..Z, AA..)."""
    if number < 1:
        raise TableError(f"column number {number} is not a spreadsheet column", hint="columns count from 1 (A)")
    out: list[str] = []
    while number:
        number, rest = divmod(number - 1, 26)
        out.append(_LETTERS[rest])
    return "".join(reversed(out))


def cell_address(row: int, col: int) -> str:
    """The address of data cell (``row``, ``col``), both 0-based with the header excluded, in a
    table whose header row is spreadsheet row 1: ``cell_address(0, 0) == "A2"``."""
    if row < 0 or col < 0:
        raise TableError(f"cell ({row}, {col}) has a negative index")
    return f"{column_letters(col + 1)}{row + 2}"


def table_range(table: Table) -> str:
    """The range the table covers when its header row is row 1 and its first column is A
    (module docs): ``A1:<last column><data rows + 1>``."""
    return f"A1:{column_letters(table.n_cols)}{table.n_rows + 1}"

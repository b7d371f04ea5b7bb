"""What every reader shares: decoding bytes, turning values into cells, checking a table.

Positions in errors follow one convention across formats:

* ``line`` is the 1-based line of a text file (for JSON Lines, the line of the record);
* ``row`` is the 1-based row of the table as a spreadsheet shows it, the header being row 1,
  so data row ``i`` (0-based, as in :meth:`Table.cell`) is row ``i + 2``. For Excel it is the
  sheet's own row number.
"""

from __future__ import annotations

import codecs
import json
from pathlib import Path
from typing import Callable, Sequence

from charset_normalizer import from_bytes

from tqaforge.errors import ReaderError
from tqaforge.tables.source import ReadRecord
from tqaforge.tables.table import Table

# Longest first: the UTF-32-LE mark starts with the UTF-16-LE one.
_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def read_bytes(path: Path) -> bytes:
    """The file's bytes, or a :class:`ReaderError` that says why they cannot be had."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ReaderError(str(path), "no such file") from None
    except IsADirectoryError:
        raise ReaderError(str(path), "is a directory, not a file") from None
    except OSError as exc:
        raise ReaderError(str(path), f"cannot read the file: {exc.strerror or exc}") from None


def _decode_error(path: Path, data: bytes, exc: UnicodeDecodeError, encoding: str) -> ReaderError:
    offset = exc.start
    line = data[:offset].count(b"\n") + 1
    return ReaderError(
        str(path),
        f"byte 0x{data[offset]:02x} at offset {offset} is not valid {encoding}",
        line=line,
        hint="save the file as UTF-8, or pass the file's encoding explicitly",
    )


def decode(path: Path, data: bytes, *, encoding: str | None = None, detect: bool = True) -> str:
    """Bytes to text: a byte-order mark wins, then ``encoding`` if given (strict), then UTF-8,
    then (when ``detect``) charset-normalizer's best guess. Undecodable bytes raise a
    :class:`ReaderError` naming the byte offset and line of the first bad byte."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            try:
                return data[len(bom) :].decode(name)
            except UnicodeDecodeError as exc:
                # Offsets in the error are relative to the text after the mark.
                exc.start += len(bom)
                raise _decode_error(path, data, exc, name) from None
    if encoding is not None:
        try:
            return data.decode(encoding)
        except UnicodeDecodeError as exc:
            raise _decode_error(path, data, exc, encoding) from None
        except LookupError:
            raise ReaderError(str(path), f"unknown encoding {encoding!r}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        first_error = exc
    if detect:
        best = from_bytes(data).best()
        if best is not None:
            return str(best)
    raise _decode_error(path, data, first_error, "UTF-8")


def to_cell(value: object) -> str:
    """A JSON or spreadsheet value as cell text: ``None`` is empty, booleans are spelled as
    JSON spells them, integral floats lose their ``.0`` (as :meth:`Table.build` does), and
    nested lists/objects are kept as compact JSON rather than Python reprs."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def check_header(
    path: Path,
    header: Sequence[str],
    *,
    where: str = "",
    line: int | None = None,
    row: int | None = 1,
) -> None:
    """Raise on a blank or duplicate header name (the strict-headers rule)."""
    seen: dict[str, int] = {}
    for col, name in enumerate(header, start=1):
        if not name.strip():
            raise ReaderError(
                str(path),
                f"{where}header column {col} is blank",
                line=line,
                row=row,
                hint="name every column, or read with strict_headers=False to keep the header as it is",
            )
        if name in seen:
            raise ReaderError(
                str(path),
                f"{where}header name {name!r} appears in columns {seen[name]} and {col}",
                line=line,
                row=row,
                hint="rename one of the columns, or read with strict_headers=False",
            )
        seen[name] = col


def finish_table(
    path: Path,
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    strict_headers: bool,
    where: str = "",
    header_line: int | None = None,
    row_lines: Sequence[int | None] | None = None,
    row_name: Callable[[int], str] | None = None,
    caption: str | None = None,
    allow_no_rows: bool = False,
) -> Table:
    """Check a parsed header and rows and make the :class:`Table`.

    Raises a :class:`ReaderError` for a table without columns or data rows, for a blank or
    duplicate header name when ``strict_headers``, and for the first row whose width differs
    from the header's (rows are never padded: a short row usually means a shifted one).
    ``where`` prefixes the problem ("table 2: "); ``row_lines[i]`` is the line of data row
    ``i``; ``row_name(i)`` names it in the format's own terms ("data[3]")."""
    if not header:
        raise ReaderError(str(path), f"{where}the header row has no cells", line=header_line, row=1)
    if strict_headers:
        check_header(path, header, where=where, line=header_line)
    width = len(header)
    for i, row in enumerate(rows):
        if len(row) != width:
            name = row_name(i) if row_name else "the row"
            raise ReaderError(
                str(path),
                f"{where}{name} has {len(row)} cells but the header has {width}",
                line=row_lines[i] if row_lines else None,
                row=i + 2,
                hint="every row needs one cell per header column (empty cells included)",
            )
    if not rows and not allow_no_rows:
        raise ReaderError(
            str(path),
            f"{where}the table has a header but no data rows",
            line=header_line,
            hint="a table needs at least one row below its header",
        )
    return Table(header=tuple(header), rows=tuple(tuple(r) for r in rows), caption=caption)


def table_records(path: Path, tables: Sequence[Table]) -> list[ReadRecord]:
    """One record per table; with several tables in a file each location says which one."""
    if len(tables) == 1:
        return [ReadRecord(table=tables[0], location=str(path))]
    return [ReadRecord(table=t, location=f"{path}#table-{n}") for n, t in enumerate(tables, start=1)]

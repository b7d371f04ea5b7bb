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
import os
import re
import stat
from pathlib import Path
from typing import Callable, Iterable, Sequence

from tqaforge.errors import HeaderNameError, ReaderError
from tqaforge.tables.cells import clean_text
from tqaforge.tables.source import ReadRecord
from tqaforge.tables.table import PackedRows, Table

#: The largest file a reader reads by default (``--max-file-size`` changes it): a bound on
#: memory, so that no input (``/dev/zero``, a runaway export) can exhaust it.
DEFAULT_MAX_BYTES = 1024**3

_SPECIAL = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def describe_size(n: int) -> str:
    """``1073741824`` -> ``"1 GiB"``; sizes as the --max-file-size flag takes them."""
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= factor:
            return f"{n / factor:.3g} {unit}"
    return f"{n} bytes"


_SIZE_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000**2, "mb": 1000**2, "mib": 1024**2,
               "g": 1000**3, "gb": 1000**3, "gib": 1024**3, "t": 1000**4, "tb": 1000**4, "tib": 1024**4}


def parse_size(text: str) -> int:
    """``"1GiB"``, ``"500 MB"``, ``"1048576"`` -> bytes; a ValueError saying what is accepted."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _SIZE_UNITS:
        raise ValueError(f"not a size: {text!r} (write e.g. 500MB, 2GiB or a number of bytes)")
    size = int(float(match.group(1)) * _SIZE_UNITS[unit])
    if size < 1:
        raise ValueError(f"the size must be at least 1 byte, got {text!r}")
    return size


class TextCleaner:
    """Applies the one control-character rule (:func:`~tqaforge.tables.cells.clean_text`) to
    every text a reader produces, and counts what it removed, so that the import can say so."""

    __slots__ = ("removed",)

    def __init__(self) -> None:
        self.removed = 0

    def __call__(self, text: str) -> str:
        cleaned = clean_text(text)
        if cleaned is not text:
            self.removed += len(text) - len(cleaned)
        return cleaned

    def cells(self, cells: Iterable[str]) -> list[str]:
        return [self(c) for c in cells]

    def value(self, value: object) -> object:
        """Clean every string inside a JSON-like value (questions' metadata)."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            return {self(k) if isinstance(k, str) else k: self.value(v) for k, v in value.items()}
        return value

# Longest first: the UTF-32-LE mark starts with the UTF-16-LE one.
_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def _too_large(path: Path, max_bytes: int, size: str) -> ReaderError:
    return ReaderError(
        str(path),
        f"the file is {size}, more than the limit of {describe_size(max_bytes)}",
        hint="pass a larger --max-file-size if the file is really a table",
    )


def open_regular(path: Path) -> int:
    """An open descriptor on ``path`` if it is a regular file; a :class:`ReaderError` otherwise.

    Opened non-blocking (a FIFO would block in ``open`` until a writer came) and checked on the
    open descriptor, so a file swapped for a FIFO between a check and the open is refused too."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise ReaderError(str(path), "no such file") from None
    except IsADirectoryError:
        raise ReaderError(str(path), "is a directory, not a file") from None
    except OSError as exc:
        # A socket cannot be opened at all (ENXIO): say what it is rather than "no such device".
        try:
            mode = os.stat(path).st_mode
        except OSError:
            mode = stat.S_IFREG
        if stat.S_ISREG(mode):
            raise ReaderError(str(path), f"cannot read the file: {exc.strerror or exc}") from None
    else:
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode):
            os.set_blocking(fd, True)
            return fd
        os.close(fd)
    kind = next((name for test, name in _SPECIAL if test(mode)), "not a regular file")
    if stat.S_ISDIR(mode):
        raise ReaderError(str(path), "is a directory, not a file")
    raise ReaderError(
        str(path), f"is {kind}, not a regular file: only regular files are read",
        hint="copy the data into a regular file and use that",
    )


def read_bytes(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """The bytes of a regular file of at most ``max_bytes``, or a :class:`ReaderError` that says
    why they cannot be had (missing, a directory, a FIFO or device, too large, unreadable)."""
    fd = open_regular(path)
    with os.fdopen(fd, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > max_bytes:
            raise _too_large(path, max_bytes, describe_size(size))
        try:
            # read(n) allocates n bytes up front: ask for the size stat gave, plus one byte
            # that tells a file still growing, which is then read on in bounded chunks.
            data = handle.read(size + 1)
            if len(data) > size:
                grown = bytearray(data)
                while len(grown) <= max_bytes and (chunk := handle.read(1 << 20)):
                    grown += chunk
                data = bytes(grown)
        except OSError as exc:
            raise ReaderError(str(path), f"cannot read the file: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise _too_large(path, max_bytes, f"over {describe_size(max_bytes)} (it grew while being read)")
    return data


def _decode_error(path: Path, data: bytes, exc: UnicodeDecodeError, encoding: str) -> ReaderError:
    offset = exc.start
    line = data[:offset].count(b"\n") + 1
    return ReaderError(
        str(path),
        f"byte 0x{data[offset]:02x} at offset {offset} is not valid {encoding}",
        line=line,
        hint="give its encoding with --encoding (e.g. --encoding cp1252), or save the file as UTF-8",
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
        # Imported here: only a file that is not UTF-8 needs it (about 13 ms to import).
        from charset_normalizer import from_bytes

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
            raise HeaderNameError(
                str(path),
                f"{where}header column {col} is blank",
                line=line,
                row=row,
                hint="name every column, or pass --lenient-headers to keep the header as it is",
            )
        if name in seen:
            raise HeaderNameError(
                str(path),
                f"{where}header name {name!r} appears in columns {seen[name]} and {col}",
                line=line,
                row=row,
                hint="rename one of the columns, or pass --lenient-headers to keep both",
            )
        seen[name] = col


def finish_table(
    path: Path,
    header: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    cleaner: TextCleaner,
    strict_headers: bool,
    where: str = "",
    header_line: int | None = None,
    row_lines: Sequence[int | None] | Callable[[int], int | None] | None = None,
    row_name: Callable[[int], str] | None = None,
    caption: str | None = None,
    allow_no_rows: bool = False,
) -> Table:
    """Clean, check and pack a parsed header and rows into a :class:`Table`.

    This is the one place where every reader's text passes ``cleaner`` (control characters
    removed and counted) before any check, and where rows are packed (:class:`PackedRows`), so
    ``rows`` may be a generator: it is consumed once, row by row, and never held as lists.

    Raises a :class:`ReaderError` for a table without columns or data rows, for a blank or
    duplicate header name when ``strict_headers``, and for the first row whose width differs
    from the header's (rows are never padded: a short row usually means a shifted one).
    ``where`` prefixes the problem ("table 2: "); ``row_lines`` gives the line of data row
    ``i`` (a list, or a function called as soon as the row is read); ``row_name(i)`` names it
    in the format's own terms ("data[3]")."""
    header = cleaner.cells(header)
    if not header:
        raise ReaderError(str(path), f"{where}the header row has no cells", line=header_line, row=1)
    if strict_headers:
        check_header(path, header, where=where, line=header_line)
    width = len(header)
    packed = PackedRows()
    for i, row in enumerate(rows):
        if len(row) != width:
            name = row_name(i) if row_name else "the row"
            line = row_lines(i) if callable(row_lines) else row_lines[i] if row_lines else None
            raise ReaderError(
                str(path),
                f"{where}{name} has {len(row)} cells but the header has {width}",
                line=line,
                row=i + 2,
                hint="every row needs one cell per header column (empty cells included)",
            )
        # One join and one search per row: rows without control characters (nearly all) are
        # not cleaned cell by cell.
        joined = "".join(row)
        packed.append(row if clean_text(joined) is joined else cleaner.cells(row))
    if not packed and not allow_no_rows:
        raise ReaderError(
            str(path),
            f"{where}the table has a header but no data rows",
            line=header_line,
            hint="a table needs at least one row below its header",
        )
    return Table(header=tuple(header), rows=packed, caption=cleaner(caption) if caption is not None else None)


def table_records(path: Path, tables: Sequence[Table]) -> list[ReadRecord]:
    """One record per table; with several tables in a file each location says which one."""
    if len(tables) == 1:
        return [ReadRecord(table=tables[0], location=str(path))]
    return [ReadRecord(table=t, location=f"{path}#table-{n}") for n, t in enumerate(tables, start=1)]

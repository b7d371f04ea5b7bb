"""JSON tables. Accepted shapes (a top-level list of table objects gives several tables):

* records: ``[{"col": value, ...}, ...]``; the header is the union of keys in first-seen
  order, and a key a record lacks is an empty cell (JSON writers drop null members);
* index-keyed records (ToRR's JSON serialisation, pandas ``orient="index"``):
  ``{"0": {"col": value}, "1": {...}}``;
* columns/data (TableBench, pandas ``orient="split"``): ``{"columns": [...], "data": [[...]]}``;
* header/rows (FREB-TQA and tqaforge's canonical :meth:`Table.to_dict`):
  ``{"header": [...], "rows": [[...]]}``, with optional ``caption``, ``source``, ``licence``.

Values that are not strings become cell text (see :func:`~tqaforge.tables.readers._common.to_cell`).
JSON is UTF-8 by definition (RFC 8259), so bytes are not guessed at: a byte-order mark or UTF-8.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from tqaforge.errors import ReaderError
from tqaforge.tables.readers._common import (
    DEFAULT_MAX_BYTES,
    TextCleaner,
    decode,
    finish_table,
    read_bytes,
    table_records,
    to_cell,
)
from tqaforge.tables.readers.jsonio import JSONNestingError, loads
from tqaforge.tables.source import ReadResult
from tqaforge.tables.table import Table

_SHAPES_HINT = (
    'expected [{"col": value}, ...], {"columns": [...], "data": [[...]]}, '
    '{"header": [...], "rows": [[...]]}, or a list of such table objects'
)


def parse_json(path: Path, text: str, *, line_offset: int = 0) -> Any:
    """The one bounded JSON reader's :func:`~tqaforge.tables.readers.jsonio.loads`, whose errors
    name the file, line and column. ``line_offset`` is the number of lines before ``text`` in the
    file (JSON Lines), so errors name the file's line."""
    where = line_offset + 1 if line_offset else None
    try:
        return loads(text)
    except json.JSONDecodeError as exc:
        # The text ends inside a value: the parser ran out at the end, or a string never closed.
        truncated = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
        raise ReaderError(
            str(path),
            f"invalid JSON at column {exc.colno}: {exc.msg}",
            line=exc.lineno + line_offset,
            hint="the text ends in the middle of a value: the file looks truncated" if truncated else None,
        ) from None
    except JSONNestingError as exc:
        raise ReaderError(
            str(path), f"{exc}: too deep to be a table", line=where,
            hint="a table is a list of rows or of objects, nested two or three levels",
        ) from None
    except ValueError as exc:
        # e.g. an integer of more digits than Python converts (int_max_str_digits).
        raise ReaderError(str(path), f"invalid JSON: {exc}", line=where) from None


def _name(path: Path, value: object, field: str, where: str, line: int | None) -> str:
    """A header name: a string, or a number written as text. Null, true/false, lists and
    objects are not names; coercing them would store "", "true" or JSON text as a column name."""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return to_cell(value)
    raise ReaderError(
        str(path), f"{where}{field} is {json_kind(value)}, not a column name (a string or a number)",
        line=line, row=1, hint="name the column with a string",
    )


def json_kind(value: object) -> str:
    """How JSON spells the type of ``value``, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    names = {dict: "an object", list: "a list", str: "a string", int: "a number", float: "a number"}
    return names.get(type(value), f"a {type(value).__name__}")


def is_table_object(value: object) -> bool:
    """True for ``{"columns": [...], "data": [...]}`` and ``{"header": [...], "rows": [...]}``
    objects. The members must be lists: a record whose columns happen to be named "header" and
    "rows" holds cell values there, not a table."""
    return isinstance(value, dict) and (
        (isinstance(value.get("columns"), list) and isinstance(value.get("data"), list))
        or (isinstance(value.get("header"), list) and isinstance(value.get("rows"), list))
    )


def table_from_object(
    path: Path,
    obj: dict[str, Any],
    *,
    strict_headers: bool,
    where: str = "",
    line: int | None = None,
    prefix: str = "",
    row_name: Callable[[int], str] | None = None,
    allow_no_rows: bool = False,
    cleaner: TextCleaner,
    scalars_only: bool = False,
) -> Table:
    """A table from a ``{"columns", "data"}`` or ``{"header", "rows"}`` object. ``prefix`` is
    the JSON path of the object for messages ("table."), ``line`` its line in a JSON Lines file,
    ``row_name(i)`` overrides how data row ``i`` is named in messages; ``allow_no_rows`` as in
    :func:`~tqaforge.tables.readers._common.finish_table`. Header names must be strings or
    numbers; with ``scalars_only`` (the benchmark formats) a cell that is a list or an object
    is refused instead of being kept as JSON text."""
    columns_shape = isinstance(obj.get("columns"), list) and isinstance(obj.get("data"), list)
    head_key, rows_key = ("columns", "data") if columns_shape else ("header", "rows")
    name_row = row_name or (lambda i: f"{prefix}{rows_key}[{i}]")
    header, rows = obj[head_key], obj[rows_key]
    if not isinstance(header, list):
        raise ReaderError(str(path), f"{where}{prefix}{head_key} is not a list", line=line, row=1)
    if not isinstance(rows, list):
        raise ReaderError(str(path), f"{where}{prefix}{rows_key} is not a list of rows", line=line)
    cells: list[list[str]] = []
    for i, row in enumerate(rows):
        if not isinstance(row, list):
            raise ReaderError(
                str(path), f"{where}{name_row(i)} is a {type(row).__name__}, not a list of cells",
                line=line, row=i + 2,
            )
        if scalars_only:
            for j, v in enumerate(row):
                if isinstance(v, (list, dict)):
                    raise ReaderError(
                        str(path), f"{where}{name_row(i)}[{j}] is {json_kind(v)}, not a cell value",
                        line=line, row=i + 2, hint="cells are strings, numbers, booleans or null",
                    )
        cells.append([to_cell(v) for v in row])
    names = [_name(path, h, f"{prefix}{head_key}[{j}]", where, line) for j, h in enumerate(header)]
    meta = {k: obj.get(k) for k in ("caption", "source", "licence")}
    table = finish_table(
        path,
        names,
        cells,
        cleaner=cleaner,
        strict_headers=strict_headers,
        where=where,
        header_line=line,
        row_lines=[line] * len(cells) if line is not None else None,
        row_name=name_row,
        allow_no_rows=allow_no_rows,
    )
    # Metadata only from the canonical shape's string fields; other members are not ours.
    return table.with_metadata(**{k: cleaner(v) for k, v in meta.items() if isinstance(v, str)})


def _table_from_records(
    path: Path, records: list[Any], *, strict_headers: bool, names: list[str], cleaner: TextCleaner
) -> Table:
    header: dict[str, None] = {}
    for i, record in enumerate(records):
        if not isinstance(record, dict):
            raise ReaderError(
                str(path), f"{names[i]} is a {type(record).__name__}, not an object of column: value",
                row=i + 2, hint=_SHAPES_HINT,
            )
        header.update(dict.fromkeys(record))
    columns = list(header)
    rows = [[to_cell(record.get(c)) for c in columns] for record in records]
    return finish_table(path, columns, rows, strict_headers=strict_headers, cleaner=cleaner)


def read_json(
    path: Path, *, strict_headers: bool = True, encoding: str | None = None, max_bytes: int = DEFAULT_MAX_BYTES
) -> ReadResult:
    """Read a JSON file holding one table or a list of tables (shapes in the module doc)."""
    text = decode(path, read_bytes(path, max_bytes), encoding=encoding, detect=False)
    cleaner = TextCleaner()
    if not text.strip():
        raise ReaderError(str(path), "the file is empty")
    data = parse_json(path, text)
    tables: list[Table] = []
    if is_table_object(data):
        tables.append(table_from_object(path, data, strict_headers=strict_headers, cleaner=cleaner))
    elif isinstance(data, dict) and data and all(isinstance(v, dict) for v in data.values()):
        names = [f"member {k!r}" for k in data]
        tables.append(_table_from_records(path, list(data.values()), strict_headers=strict_headers, names=names, cleaner=cleaner))
    elif isinstance(data, list) and data and all(is_table_object(x) for x in data):
        for n, obj in enumerate(data, start=1):
            where = f"table {n} of {len(data)}: "
            tables.append(table_from_object(path, obj, strict_headers=strict_headers, where=where, cleaner=cleaner))
    elif isinstance(data, list) and data:
        names = [f"item {i}" for i in range(len(data))]
        tables.append(_table_from_records(path, data, strict_headers=strict_headers, names=names, cleaner=cleaner))
    elif data == [] or data == {}:
        raise ReaderError(str(path), "the JSON holds no table (empty list or object)")
    else:
        raise ReaderError(str(path), f"a JSON {type(data).__name__} is not a table", hint=_SHAPES_HINT)
    records = table_records(path, tables)
    return ReadResult(path=str(path), format="json", records=records, control_chars_removed=cleaner.removed)

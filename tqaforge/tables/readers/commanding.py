"""Commanding items in JSON Lines (table editing: :mod:`tqaforge.tables.commanding`).

One object per line::

    {"id": "edit-1", "instruction": "Remove the column 'age'.",
     "source_table": {"header": ["name", "age"], "rows": [["Ann", "26"]]},
     "target_table": {"header": ["name"], "rows": [["Ann"]]},
     "operation": "remove_column"}

``id`` (a string or an integer, unique in the file), ``instruction`` (text) and the two tables
(``{"header", "rows"}`` or TableBench's ``{"columns", "data"}``; cells strings, numbers, booleans
or null; a table may have no rows) are required; ``operation`` is optional and kept in the
question's metadata; other keys are ignored. Each line becomes a record of its source table with
one ``commanding`` question whose gold answer is the target table's canonical text
(:func:`~tqaforge.tables.commanding.canonical_table_text`). A bad line fails the whole file with
its line number, before anything is imported.
"""

from __future__ import annotations

from pathlib import Path

from tqaforge.errors import ReaderError
from tqaforge.tables.commanding import COMMANDING, canonical_table_text
from tqaforge.tables.readers._common import DEFAULT_MAX_BYTES, TextCleaner
from tqaforge.tables.readers.datasets import _identifier, _text, iter_json_lines
from tqaforge.tables.readers.jsonfmt import is_table_object, json_kind, table_from_object
from tqaforge.tables.source import ReadRecord, ReadResult, SourceItem

COMMANDING_KEYS = ("id", "instruction", "source_table", "target_table")
_EXAMPLE = '{"id": "e1", "instruction": "...", "source_table": {"header": [...], "rows": [[...]]}, "target_table": {...}}'


def read_commanding(
    path: Path, *, strict_headers: bool = False, encoding: str | None = None, max_bytes: int = DEFAULT_MAX_BYTES
) -> ReadResult:
    """Read commanding items (module docs) as records with one ``commanding`` item each."""
    records: list[ReadRecord] = []
    cleaner = TextCleaner()
    seen: dict[str, int] = {}
    for line, obj in iter_json_lines(path, encoding, max_bytes):
        missing = [k for k in COMMANDING_KEYS if k not in obj]
        if missing:
            raise ReaderError(str(path), f"missing key(s) {', '.join(map(repr, missing))}", line=line,
                              hint=f"each line is one object like {_EXAMPLE}")
        item_id = _identifier(path, obj["id"], "id", line, cleaner)
        if item_id in seen:
            raise ReaderError(str(path), f"the id {item_id!r} is already the id of line {seen[item_id]}", line=line,
                              hint="give every item its own id")
        seen[item_id] = line
        instruction = _text(path, obj, "instruction", line, cleaner)
        if not instruction.strip():
            raise ReaderError(str(path), "'instruction' is empty", line=line)
        tables = []
        for key in ("source_table", "target_table"):
            value = obj[key]
            if not is_table_object(value):
                raise ReaderError(str(path), f"{key!r} is {json_kind(value)}, not a table object", line=line,
                                  hint='a table is {"header": [...], "rows": [[...], ...]} or {"columns": [...], "data": [[...]]}')
            tables.append(table_from_object(path, value, strict_headers=strict_headers, line=line, prefix=f"{key}.",
                                            allow_no_rows=True, cleaner=cleaner, scalars_only=True))
        source, target = tables
        meta: dict[str, object] = {}
        if isinstance(obj.get("operation"), str) and obj["operation"]:
            meta["operation"] = cleaner(obj["operation"])
        item = SourceItem(question=instruction, answers=(canonical_table_text(target),), taxonomy="capability",
                          subtype=COMMANDING, source_id=item_id, meta=meta)
        records.append(ReadRecord(table=source, location=f"{path}:{line}", items=(item,)))
    if not records:
        raise ReaderError(str(path), "the file holds no commanding items", hint=f"each line is one object like {_EXAMPLE}")
    return ReadResult(path=str(path), format="commanding", records=records, control_chars_removed=cleaner.removed)

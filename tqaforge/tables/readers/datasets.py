"""Benchmark files in JSON Lines: TableBench and FREB-TQA (WikiTableQuestions-style).

Each line is one question with its table; each line becomes one :class:`ReadRecord` holding
one :class:`SourceItem` (the importer merges equal tables by content hash). Header names are
taken as they are by default, since the benchmarks' own tables have blank and repeated names
(TAT-QA's multi-level headers such as ``["", "", "Fiscal Year End"]``).

**FREB-TQA relevant cells.** ``rel_cell`` pairs are ``[row, col]``, 0-based, where ``row``
indexes the *data* rows (header excluded) and ``col`` the columns; this is the convention of
:data:`tqaforge.tables.source.Cell`, so pairs are taken over unchanged. Checked on the real data:
in ``02_rel/tat_nonfactoid_dev.jsonl`` (``table`` a list of rows, the first being the header),
the first question asks about "Sensors" and its cells ``[5, 1..3]`` are the Sensors row
``table[6]`` = data row 5; in ``03_agg_com/*_ori_table.jsonl`` (``{header, rows}``) cells
``[9, 1..2]`` are ``rows[9]``. Across both files the numbers of the ``derivation`` fall in the
indexed cells for 398/539 and 397/537 questions with this base, and for 4 with a base shifted
by one either way.

In the ``*_short_table``, ``*_ans_change`` and ``*_ans_no_change`` files, ``table`` is the
shortened or human-modified table while ``rel_cell`` still points into the *original* table
(e.g. row 9 of a 3-row short table). For those files the pairs are kept in
``meta["rel_cell_original"]`` and ``relevant_cells`` is None; ``meta["table_variant"]`` says
which kind of table it is. Elsewhere a pair outside the table is an error.

**FREB-TQA tables without rows.** The value-modification files of WikiTableQuestions
(``03_agg_com/wtq_*``) hold 12 tables that are a header only: the cells a counting question
needs are none (answer "0"). They are read as they are (a :class:`Table` with no rows), unlike
in the generic formats and TableBench, where a table without data rows is an error.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Iterator, cast

from tqaforge.errors import ReaderError
from tqaforge.tables.readers._common import DEFAULT_MAX_BYTES, TextCleaner, decode, read_bytes, to_cell
from tqaforge.tables.readers.jsonfmt import is_table_object, json_kind, parse_json, table_from_object
from tqaforge.tables.source import Cell, ReadRecord, ReadResult, SourceItem
from tqaforge.tables.table import Table

TABLEBENCH_KEYS = ("id", "qtype", "qsubtype", "table", "question", "answer")

#: File-name endings of FREB-TQA's value-modification files, whose table is not the one
#: ``rel_cell`` indexes. Longest first: "ans_no_change" must not be taken for "ans_change".
DERIVED_TABLE_VARIANTS = ("ans_no_change", "ans_change", "short_table")
_FOLDER = re.compile(r"^\d\d_")
# Keys we turn into SourceItem fields (or drop, for the long paragraph texts).
_FREB_FIELDS = frozenset({"id", "uid", "question", "answers", "answer", "table", "rel_cell", "paragraphs", "meta", "table_id"})


def iter_json_lines(
    path: Path, encoding: str | None = None, max_bytes: int = DEFAULT_MAX_BYTES
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; the whole file is decoded first, so a
    bad byte anywhere fails before any record is used."""
    text = decode(path, read_bytes(path, max_bytes), encoding=encoding, detect=False)
    # Split on \n only: U+2028 and friends may stand unescaped inside JSON strings.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        value = parse_json(path, line, line_offset=number - 1)
        if not isinstance(value, dict):
            raise ReaderError(str(path), f"a JSON {type(value).__name__} where a question object was expected", line=number)
        yield number, value


def _field_error(path: Path, field: str, value: object, expected: str, line: int) -> ReaderError:
    return ReaderError(
        str(path), f"{field!r} is {json_kind(value)}, not {expected}", line=line,
        hint="fix the line, or leave it out of the file: nothing of the file was imported",
    )


def _text(path: Path, obj: dict[str, Any], key: str, line: int, cleaner: TextCleaner) -> str:
    value = obj[key]
    if not isinstance(value, str):
        raise _field_error(path, key, value, "a string", line)
    return cleaner(value)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _identifier(path: Path, value: object, field: str, line: int, cleaner: TextCleaner) -> str:
    """An id: a string or an integer (a list, object, float or boolean is no id)."""
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return cleaner(to_cell(value))
    raise _field_error(path, field, value, "a string or an integer", line)


def _answer(path: Path, value: object, field: str, line: int, cleaner: TextCleaner) -> str:
    """An answer: a string, or a finite number written as text (TableBench's are strings)."""
    if isinstance(value, str) or _is_number(value):
        return cleaner(to_cell(value))
    raise _field_error(path, field, value, "a string or a number", line)


def read_tablebench(
    path: Path, *, strict_headers: bool = False, encoding: str | None = None, max_bytes: int = DEFAULT_MAX_BYTES
) -> ReadResult:
    """Read TableBench JSONL: ``{id, qtype, qsubtype, table{columns, data}, question, answer,
    chart_type?}`` per line, each a record with one ``tablebench`` item. Each field's type is
    checked (id: string or integer; question, qtype, qsubtype: strings; answer: string or
    number; columns: strings or numbers; data: rows of strings, numbers, booleans or null)."""
    records: list[ReadRecord] = []
    cleaner = TextCleaner()
    for line, obj in iter_json_lines(path, encoding, max_bytes):
        missing = [k for k in TABLEBENCH_KEYS if k not in obj]
        if missing:
            raise ReaderError(
                str(path), f"missing key(s) {', '.join(map(repr, missing))}", line=line,
                hint="TableBench lines have " + ", ".join(TABLEBENCH_KEYS) + " (and chart_type for charts)",
            )
        table_obj = obj["table"]
        if not (
            isinstance(table_obj, dict)
            and isinstance(table_obj.get("columns"), list)
            and isinstance(table_obj.get("data"), list)
        ):
            raise ReaderError(str(path), "'table' is not an object with 'columns' and 'data' lists", line=line)
        table = table_from_object(
            path, table_obj, strict_headers=strict_headers, line=line, prefix="table.", cleaner=cleaner,
            scalars_only=True,
        )
        meta: dict[str, object] = {}
        if obj.get("chart_type") not in (None, ""):
            meta["chart_type"] = cleaner.value(obj["chart_type"])
        item = SourceItem(
            question=_text(path, obj, "question", line, cleaner),
            answers=(_answer(path, obj["answer"], "answer", line, cleaner),),
            taxonomy="tablebench",
            qtype=_text(path, obj, "qtype", line, cleaner),
            subtype=_text(path, obj, "qsubtype", line, cleaner),
            source_id=_identifier(path, obj["id"], "id", line, cleaner),
            meta=meta,
        )
        records.append(ReadRecord(table=table, location=f"{path}:{line}", items=(item,)))
    if not records:
        raise ReaderError(str(path), "the file holds no questions")
    return ReadResult(path=str(path), format="tablebench", records=records, control_chars_removed=cleaner.removed)


def _freb_table(path: Path, value: object, line: int, strict_headers: bool, cleaner: TextCleaner) -> Table:
    if isinstance(value, list):
        # WikiTableQuestions style: a list of rows, the first being the header.
        if not value or not isinstance(value[0], list):
            raise ReaderError(str(path), "'table' is a list but its first item is not a header row", line=line)
        obj = {"header": value[0], "rows": value[1:]}
        return table_from_object(
            path, obj, strict_headers=strict_headers, line=line, prefix="table.", row_name=lambda i: f"table[{i + 1}]",
            allow_no_rows=True, cleaner=cleaner, scalars_only=True,
        )
    if is_table_object(value):
        return table_from_object(
            path, value, strict_headers=strict_headers, line=line, prefix="table.", allow_no_rows=True,  # type: ignore[arg-type]
            cleaner=cleaner, scalars_only=True,
        )
    raise ReaderError(
        str(path), "'table' is neither {header, rows} nor a list of rows", line=line,
        hint='FREB-TQA tables look like {"header": [...], "rows": [[...]]} or [[header...], [row...], ...]',
    )


def _answers(path: Path, obj: dict[str, Any], line: int, cleaner: TextCleaner) -> tuple[str, ...]:
    key = "answers" if "answers" in obj else "answer"
    value = obj.get(key)
    if value is None:
        raise ReaderError(str(path), "no 'answers' (or 'answer')", line=line)
    if not isinstance(value, list):
        return (_answer(path, value, key, line, cleaner),)
    return tuple(_answer(path, v, f"{key}[{i}]", line, cleaner) for i, v in enumerate(value))


def _cells(path: Path, value: object, line: int) -> tuple[Cell, ...]:
    ok = isinstance(value, list) and all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in p)
        for p in value
    )
    if not ok:
        raise ReaderError(str(path), "'rel_cell' is not a list of [row, col] integer pairs", line=line)
    pairs = cast(list[list[int]], value)  # checked just above
    return tuple((p[0], p[1]) for p in pairs)


def table_variant(path: Path) -> str | None:
    """Which FREB-TQA table a file holds, by its name: ``ori_table``, ``short_table``,
    ``ans_change``, ``ans_no_change``, or None for a file of questions on their own tables."""
    stem = path.stem
    for variant in (*DERIVED_TABLE_VARIANTS, "ori_table"):
        if stem.endswith(variant):
            return variant
    return None


def _subtype(path: Path) -> str | None:
    # FREB-TQA names its files by question kind: factoid = the answer is a cell (extraction),
    # nonfactoid = it is computed from cells (reasoning). The built-in freb-tqa taxonomy's terms.
    name = path.name.lower()
    if "nonfactoid" in name:
        return "reasoning"
    if "factoid" in name:
        return "extraction"
    return None


def read_freb_tqa(
    path: Path, *, strict_headers: bool = False, encoding: str | None = None, max_bytes: int = DEFAULT_MAX_BYTES
) -> ReadResult:
    """Read FREB-TQA / WikiTableQuestions-style JSONL: ``question``, ``answers`` (or
    ``answer``), ``table`` as ``{header, rows}`` or a list of rows, optional ``rel_cell``
    (index base and the short-table caveat in the module doc). Other fields go to ``meta``."""
    variant = table_variant(path)
    subtype = _subtype(path)
    folder = path.parent.name if _FOLDER.match(path.parent.name) else None
    records: list[ReadRecord] = []
    cleaner = TextCleaner()
    for line, obj in iter_json_lines(path, encoding, max_bytes):
        for key in ("question", "table"):
            if key not in obj:
                raise ReaderError(str(path), f"missing key {key!r}", line=line)
        table = _freb_table(path, obj["table"], line, strict_headers, cleaner)
        meta: dict[str, object] = {}
        if folder:
            meta["folder"] = folder
        if variant:
            meta["table_variant"] = variant
        table_obj = obj["table"]
        if isinstance(table_obj, dict):
            if table_obj.get("name") is not None:
                meta["table_name"] = table_obj["name"]
            if table_obj.get("id") is not None:
                meta["table_id"] = table_obj["id"]
        if obj.get("table_id") is not None:
            meta["table_id"] = obj["table_id"]
        if isinstance(obj.get("paragraphs"), list):
            meta["n_paragraphs"] = len(obj["paragraphs"])
        nested = obj.get("meta")
        if isinstance(nested, dict):
            # TAT-QA's own annotation (derivation, answer_type, scale, ...); question and
            # answer repeat the top level.
            meta.update({k: v for k, v in nested.items() if k not in ("uid", "question", "answer", "answers")})
        meta.update({k: v for k, v in obj.items() if k not in _FREB_FIELDS})
        answers = _answers(path, obj, line, cleaner)
        if "answers" in obj and "answer" in obj and _answers(path, {"answers": obj["answer"]}, line, TextCleaner()) != answers:
            meta["answer"] = obj["answer"]
        id_key = "id" if "id" in obj else "uid"
        source = obj.get(id_key)
        if "id" in obj and "uid" in obj and obj["uid"] != obj["id"]:
            meta["uid"] = obj["uid"]
        relevant: tuple[Cell, ...] | None = None
        if "rel_cell" in obj:
            cells = _cells(path, obj["rel_cell"], line)
            if variant in DERIVED_TABLE_VARIANTS:
                meta["rel_cell_original"] = [list(c) for c in cells]
            else:
                for r, c in cells:
                    if not (0 <= r < table.n_rows and 0 <= c < table.n_cols):
                        raise ReaderError(
                            str(path),
                            f"rel_cell [{r}, {c}] lies outside the table ({table.n_rows} data rows x {table.n_cols} columns)",
                            line=line,
                            hint="rel_cell rows count data rows from 0, header excluded; columns count from 0",
                        )
                relevant = cells
        item = SourceItem(
            question=_text(path, obj, "question", line, cleaner),
            answers=answers,
            taxonomy="freb-tqa",
            qtype="QuestionType" if subtype else None,
            subtype=subtype,
            source_id=_identifier(path, source, id_key, line, cleaner) if source is not None else None,
            relevant_cells=relevant,
            meta=cleaner.value(meta),  # type: ignore[arg-type]
        )
        records.append(ReadRecord(table=table, location=f"{path}:{line}", items=(item,)))
    if not records:
        raise ReaderError(str(path), "the file holds no questions")
    return ReadResult(path=str(path), format="freb-tqa", records=records, control_chars_removed=cleaner.removed)

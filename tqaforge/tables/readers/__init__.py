"""Read table files into :class:`~tqaforge.tables.source.ReadResult`: one entry point, one
module per family of formats.

>>> result = read_path(Path("cities.csv"))          # doctest: +SKIP
>>> result.format, result.records[0].table.header   # doctest: +SKIP
('csv', ('city', 'pop'))

Every reader parses the whole file before returning, and raises
:class:`~tqaforge.errors.ReaderError` naming the file, the line and/or row, and the problem
(ragged rows, no table, blank or duplicate header names, undecodable bytes, invalid JSON...).
``line`` is the line of a text file; ``row`` counts table rows with the header as row 1 (for
Excel, the sheet's row number).

Header strictness: generic formats (csv, tsv, json, html, markdown, excel) reject blank and
duplicate header names unless ``strict_headers=False``; the benchmark formats (tablebench,
freb-tqa) keep them unless ``strict_headers=True``, because the benchmarks' own tables have them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from tqaforge.errors import ReaderError
from tqaforge.tables.readers._common import read_bytes
from tqaforge.tables.readers.datasets import read_freb_tqa, read_tablebench
from tqaforge.tables.readers.delimited import read_csv, read_tsv
from tqaforge.tables.readers.excel import read_excel
from tqaforge.tables.readers.html import read_html
from tqaforge.tables.readers.jsonfmt import read_json
from tqaforge.tables.readers.markdown import read_markdown
from tqaforge.tables.source import ReadResult

Reader = Callable[..., ReadResult]

#: Format name -> reader. Every reader takes ``(path, *, strict_headers, encoding)``.
READERS: dict[str, Reader] = {
    "csv": read_csv,
    "tsv": read_tsv,
    "json": read_json,
    "html": read_html,
    "markdown": read_markdown,
    "excel": read_excel,
    "tablebench": read_tablebench,
    "freb-tqa": read_freb_tqa,
}

#: The format names :func:`read_path` accepts.
FORMATS: tuple[str, ...] = tuple(READERS)

#: Formats whose files ship questions; their headers are not strict by default.
BENCHMARK_FORMATS = frozenset({"tablebench", "freb-tqa"})

_BY_SUFFIX = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".json": "json",
    ".html": "html",
    ".htm": "html",
    ".md": "markdown",
    ".markdown": "markdown",
    ".xlsx": "excel",
}


def _peek_jsonl(path: Path) -> str:
    """tablebench when the first question has ``qsubtype``, freb-tqa when it has a question
    and a table; the first non-blank line decides."""
    if not path.is_file():
        read_bytes(path)  # raises the readers' "no such file" / "is a directory" error
    with path.open("rb") as handle:  # read up to the first non-blank line, not the whole file
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                first = json.loads(raw.decode("utf-8-sig"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ReaderError(
                    str(path), f"cannot tell the JSON Lines format: the line is not valid JSON ({exc})", line=number
                ) from None
            if isinstance(first, dict) and "qsubtype" in first:
                return "tablebench"
            if isinstance(first, dict) and "question" in first and "table" in first:
                return "freb-tqa"
            raise ReaderError(
                str(path),
                "cannot tell the JSON Lines format: the first object has neither 'qsubtype' (TableBench) "
                "nor 'question' and 'table' (FREB-TQA)",
                line=number,
                hint="pass the format explicitly: " + ", ".join(FORMATS),
            )
    raise ReaderError(str(path), "the file is empty")


def detect_format(path: Path | str) -> str:
    """The format name of a file, from its extension; for ``.jsonl`` from the first line's keys.

    >>> detect_format("tables/cities.htm")
    'html'
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _peek_jsonl(path)
    if suffix in _BY_SUFFIX:
        return _BY_SUFFIX[suffix]
    if suffix == ".xls":
        raise ReaderError(str(path), "old .xls workbooks are not read", hint="save the workbook as .xlsx")
    raise ReaderError(
        str(path),
        f"cannot tell the format from the extension {suffix or '(none)'!r}",
        hint="use one of " + " ".join(sorted({*_BY_SUFFIX, ".jsonl"})) + ", or pass the format: " + ", ".join(FORMATS),
    )


def read_path(
    path: Path | str,
    format: str | None = None,
    *,
    strict_headers: bool | None = None,
    encoding: str | None = None,
) -> ReadResult:
    """Read every table (and any shipped questions) of one file.

    ``format`` is one of :data:`FORMATS`, or None to detect it (:func:`detect_format`).
    ``strict_headers`` None means the format's default (strict for generic formats, lenient for
    benchmark files). ``encoding`` forces a text encoding (decoded strictly); by default a
    byte-order mark, then UTF-8, then (CSV, TSV, HTML, Markdown) a detected encoding is used.
    Raises :class:`ReaderError`; never returns part of a file.
    """
    path = Path(path)
    fmt = format if format is not None else detect_format(path)
    reader = READERS.get(fmt)
    if reader is None:
        raise ReaderError(str(path), f"unknown format {fmt!r}", hint="known formats: " + ", ".join(FORMATS))
    strict = strict_headers if strict_headers is not None else fmt not in BENCHMARK_FORMATS
    return reader(path, strict_headers=strict, encoding=encoding)


__all__ = [
    "BENCHMARK_FORMATS",
    "FORMATS",
    "READERS",
    "detect_format",
    "read_csv",
    "read_excel",
    "read_freb_tqa",
    "read_html",
    "read_json",
    "read_markdown",
    "read_path",
    "read_tablebench",
    "read_tsv",
]

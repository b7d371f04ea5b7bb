"""Which reader a file goes to (:func:`detect_format`), the table of readers, and :func:`read_path`,
the one entry point (see the package's docs). Kept out of the package's ``__init__`` so that
importing one reader module (``jsonio`` for a release's manifest, say) does not import every
reader and the libraries they use."""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Callable

from tqaforge.errors import ReaderError, TqaforgeError
from tqaforge.tables.readers._common import DEFAULT_MAX_BYTES, describe_size, open_regular
from tqaforge.tables.readers.commanding import read_commanding
from tqaforge.tables.readers.datasets import read_freb_tqa, read_tablebench
from tqaforge.tables.readers.delimited import read_csv, read_tsv
from tqaforge.tables.readers.excel import read_excel
from tqaforge.tables.readers.html import read_html
from tqaforge.tables.readers.jsonfmt import read_json
from tqaforge.tables.readers.jsonio import JSONNestingError, loads
from tqaforge.tables.readers.markdown import read_markdown
from tqaforge.tables.readers.tidy import TidyOptions
from tqaforge.tables.source import ReadResult

Reader = Callable[..., ReadResult]

#: Format name -> reader. Every reader takes ``(path, *, strict_headers, encoding, max_bytes)``.
READERS: dict[str, Reader] = {
    "csv": read_csv,
    "tsv": read_tsv,
    "json": read_json,
    "html": read_html,
    "markdown": read_markdown,
    "excel": read_excel,
    "tablebench": read_tablebench,
    "freb-tqa": read_freb_tqa,
    "commanding": read_commanding,
}

#: The format names :func:`read_path` accepts.
FORMATS: tuple[str, ...] = tuple(READERS)

#: Formats whose readers tidy real-world tables when given :class:`TidyOptions`.
TIDY_FORMATS = frozenset({"csv", "tsv", "excel"})

#: Formats whose files ship questions; their headers are not strict by default.
BENCHMARK_FORMATS = frozenset({"tablebench", "freb-tqa", "commanding"})

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


def _peek_jsonl(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """tablebench when the first question has ``qsubtype``, freb-tqa when it has a question
    and a table; the first non-blank line decides."""
    # Read up to the first non-blank line, not the whole file; refuses FIFOs and devices.
    with os.fdopen(open_regular(path), "rb") as handle:
        number = 0
        while raw := handle.readline(max_bytes + 1):
            number += 1
            if len(raw) > max_bytes:
                raise ReaderError(
                    str(path), f"line {number} is longer than the limit of {describe_size(max_bytes)}",
                    hint="pass a larger --max-file-size if the file is really a table",
                )
            if raw.strip():
                return _jsonl_format(path, raw, number)
    raise ReaderError(str(path), "the file is empty")


def _jsonl_format(path: Path, raw: bytes, number: int) -> str:
    """The format the first non-blank line of a JSON Lines file says it is."""
    try:
        first = loads(raw.decode("utf-8-sig"))
    except JSONNestingError as exc:
        raise ReaderError(str(path), f"cannot tell the JSON Lines format: {exc}", line=number) from None
    except (UnicodeDecodeError, ValueError) as exc:  # json.JSONDecodeError is a ValueError
        raise ReaderError(
            str(path), f"cannot tell the JSON Lines format: the line is not valid JSON ({exc})", line=number
        ) from None
    if isinstance(first, dict) and "qsubtype" in first:
        return "tablebench"
    if isinstance(first, dict) and "question" in first and "table" in first:
        return "freb-tqa"
    if isinstance(first, dict) and "instruction" in first and "source_table" in first:
        return "commanding"
    raise ReaderError(
        str(path),
        "cannot tell the JSON Lines format: the first object has neither 'qsubtype' (TableBench), "
        "'question' and 'table' (FREB-TQA) nor 'instruction' and 'source_table' (commanding)",
        line=number,
        hint="pass the format explicitly: --format tablebench, freb-tqa or commanding",
    )


def detect_format(path: Path | str, *, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """The format name of a file, from its extension; for ``.jsonl`` from the first line's keys.

    >>> detect_format("tables/cities.htm")
    'html'
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _peek_jsonl(path, max_bytes)
    if suffix in _BY_SUFFIX:
        return _BY_SUFFIX[suffix]
    if suffix == ".xls":
        raise ReaderError(str(path), "old .xls workbooks are not read", hint="save the workbook as .xlsx")
    raise ReaderError(
        str(path),
        f"cannot tell the format from the extension {suffix or '(none)'!r}",
        hint="use one of " + " ".join(sorted({*_BY_SUFFIX, ".jsonl"})) + ", or pass --format with one of: " + ", ".join(FORMATS),
    )


def read_path(
    path: Path | str,
    format: str | None = None,
    *,
    strict_headers: bool | None = None,
    encoding: str | None = None,
    max_bytes: int | None = None,
    tidy: TidyOptions | None = None,
) -> ReadResult:
    """Read every table (and any shipped questions) of one file.

    ``format`` is one of :data:`FORMATS`, or None to detect it (:func:`detect_format`).
    ``strict_headers`` None means the format's default (strict for generic formats, lenient for
    benchmark files). ``encoding`` forces a text encoding (decoded strictly); by default a
    byte-order mark, then UTF-8, then (CSV, TSV, HTML, Markdown) a detected encoding is used.
    ``max_bytes`` bounds the file's size (None: :data:`DEFAULT_MAX_BYTES`).
    ``tidy`` makes the readers of :data:`TIDY_FORMATS` merge header rows, drop empty rows and
    columns and detect the columns' number conventions (:mod:`~tqaforge.tables.readers.tidy`;
    what they did is in each record's ``notes``); None reads the file exactly as written.
    Raises :class:`ReaderError`; never returns part of a file.
    """
    path = Path(path)
    limit = DEFAULT_MAX_BYTES if max_bytes is None else max_bytes
    fmt = format if format is not None else detect_format(path, max_bytes=limit)
    reader = READERS.get(fmt)
    if reader is None:
        raise ReaderError(str(path), f"unknown format {fmt!r}", hint="pass --format with one of: " + ", ".join(FORMATS))
    strict = strict_headers if strict_headers is not None else fmt not in BENCHMARK_FORMATS
    try:
        if tidy is not None and fmt in TIDY_FORMATS:
            return reader(path, strict_headers=strict, encoding=encoding, max_bytes=limit, tidy=tidy)
        return reader(path, strict_headers=strict, encoding=encoding, max_bytes=limit)
    except TqaforgeError:
        raise
    except _PARSER_ERRORS as exc:
        raise _parser_error(path, fmt, exc) from None


# What the parsers we call raise on bad input, beyond the ReaderErrors of our own checks: each
# reader turns the ones it can place (a line, a row) into a ReaderError itself; this is the net
# under all of them, so that no file can end an import with a traceback.
_PARSER_ERRORS: tuple[type[BaseException], ...] = (
    RecursionError, MemoryError, ValueError, csv.Error, OSError, EOFError, SyntaxError,
)


def _parser_error(path: Path, fmt: str, exc: BaseException) -> ReaderError:
    if isinstance(exc, RecursionError):
        return ReaderError(str(path), f"the {fmt} content is nested too deeply to be read as a table")
    if isinstance(exc, MemoryError):
        return ReaderError(
            str(path), "not enough memory to read the file",
            hint="split the file, or pass a smaller --max-file-size to refuse such files up front",
        )
    return ReaderError(str(path), f"cannot be read as {fmt}: {type(exc).__name__}: {exc}")

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

Hostile input: only regular files are read (a FIFO, device or socket is refused before it is
read), at most ``max_bytes`` of them (:data:`DEFAULT_MAX_BYTES`, 1 GiB); every cell, header,
caption and question passes the one control-character rule (removals counted in
:attr:`ReadResult.control_chars_removed`); and whatever a parser raises (too deep nesting,
malformed XML in a workbook, memory exhausted) reaches the caller as a :class:`ReaderError`
naming the file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tqaforge.tables.readers.dispatch import (
        BENCHMARK_FORMATS,
        DEFAULT_MAX_BYTES,
        FORMATS,
        READERS,
        TIDY_FORMATS,
        TidyOptions,
        detect_format,
        read_csv,
        read_excel,
        read_freb_tqa,
        read_html,
        read_json,
        read_markdown,
        read_path,
        read_tablebench,
        read_tsv,
    )

# The names are dispatch's, given on first use (PEP 562): ``import tqaforge.tables.readers.jsonio``
# runs this file first, and should not pay for every reader (about 30 ms of every command that
# reads a release or a manifest).
__all__ = [
    "BENCHMARK_FORMATS",
    "DEFAULT_MAX_BYTES",
    "FORMATS",
    "READERS",
    "TIDY_FORMATS",
    "TidyOptions",
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


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from tqaforge.tables.readers import dispatch

    value = getattr(dispatch, name)
    globals()[name] = value  # once: later lookups find it without this function
    return value

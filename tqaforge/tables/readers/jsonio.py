"""The one bounded JSON reader: every JSON text tqaforge reads from a file, a person or a model.

Python's ``json`` recurses once per level of ``[`` or ``{`` and raises ``RecursionError`` (which is
no ``ValueError``) somewhere near a thousand levels, so a hostile manifest, predictions line or
model reply of ``[[[[...`` ended commands in a traceback; and a value that parses at 900 levels
still breaks whatever walks it next. Here the nesting is measured before parsing, in linear time,
and bounded far below that (:data:`MAX_DEPTH`); files are read only when they are regular files
(:func:`~tqaforge.tables.readers._common.open_regular`: a FIFO or ``/dev/zero`` is refused at
once), of bounded size, as UTF-8 (RFC 8259).

- :func:`loads`: text to value; raises ``ValueError`` (``json.JSONDecodeError`` or
  :class:`JSONNestingError`) like ``json.loads``, so callers that handle bad JSON keep doing so;
- :func:`read_json_file`: a whole file; raises :class:`~tqaforge.errors.ReaderError` naming the
  file, the line and the problem;
- :func:`read_json_lines`: a JSON Lines file, streamed line by line (each line bounded), yielding
  ``(line number, value)``; errors name the file and the line.

>>> loads('{"a": [1, 2]}')
{'a': [1, 2]}
>>> read_json_file(Path("release/manifest.json"))   # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import re
from itertools import accumulate
from pathlib import Path
from typing import Any, Iterator

from tqaforge.errors import ReaderError
from tqaforge.tables.readers._common import DEFAULT_MAX_BYTES, decode, describe_size, open_regular, read_bytes

__all__ = ["MAX_DEPTH", "JSONNestingError", "json_depth", "loads", "read_json_file", "read_json_lines", "read_json_lines_at"]

#: The deepest nesting of ``[`` and ``{`` accepted. What tqaforge reads is nested a few levels
#: (a manifest 3, a table 4, a Label Studio result 6); Python's parser gives up near 1,000.
MAX_DEPTH = 100

# A JSON string (escapes included: the unrolled form runs in C without backtracking), as bytes.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
# bytes.translate(None, _NOT_BRACKETS) keeps only the four brackets, at the speed of memcpy.
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1


class JSONNestingError(ValueError):
    """A JSON text nests ``[`` and ``{`` deeper than the reader accepts."""


def _bracket_depth(data: bytes) -> int:
    """The deepest running count of open brackets in ``data`` (iterative: any depth)."""
    brackets = data.translate(None, _NOT_BRACKETS)
    return max(0, max(accumulate(map(_STEP.__getitem__, brackets)), default=0))


def json_depth(text: str) -> int:
    """The deepest nesting of ``[`` and ``{`` in ``text``, brackets inside strings not counted.

    Linear in the length of ``text`` and iterative (no recursion, whatever the depth). For text
    that is not JSON (an unterminated string) the count is of the brackets as they stand."""
    return _bracket_depth(_STRING.sub(b"", text.encode("utf-8", "surrogatepass")))


def loads(text: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads(text)``, refusing nesting deeper than ``max_depth`` before parsing.

    Raises ``ValueError``: :class:`JSONNestingError` (its message says "nested too deeply"),
    ``json.JSONDecodeError`` for invalid JSON, or a plain ``ValueError`` for what the parser
    cannot convert (an integer of more than 4,300 digits). Never ``RecursionError``."""
    # Cheapest first: fewer brackets than the bound cannot nest deeper than it; then the brackets
    # counted strings and all (an upper bound, with no regular expression); only a text that
    # passes both is measured exactly, its strings left out.
    if text.count("[") + text.count("{") > max_depth:
        data = text.encode("utf-8", "surrogatepass")
        if _bracket_depth(data) > max_depth and (depth := _bracket_depth(_STRING.sub(b"", data))) > max_depth:
            raise JSONNestingError(f"the JSON is nested too deeply ({depth:,} levels of [ or {{; at most {max_depth} are read)")
    try:
        return json.loads(text)
    except RecursionError:  # pragma: no cover - the bound above is far below the parser's limit
        raise JSONNestingError("the JSON is nested too deeply for the parser") from None


def _problem(exc: ValueError) -> tuple[str, int | None]:
    """A parse error as (problem, line within the text) for a :class:`ReaderError`."""
    if isinstance(exc, json.JSONDecodeError):
        return f"not JSON: {exc.msg} at column {exc.colno}", exc.lineno
    return str(exc), None


def read_json_file(path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value in the regular file ``path`` (module docs).

    Raises :class:`ReaderError` naming the file (and the line) when it is missing, a directory,
    a FIFO, device or socket, larger than ``max_bytes``, not UTF-8, not JSON or nested deeper
    than ``max_depth``. The error carries no hint: the caller knows what the file is for."""
    try:
        text = decode(path, read_bytes(path, max_bytes), detect=False)
    except ReaderError as exc:
        # The table readers' hints (--max-file-size, --encoding) are options of `tables import`.
        raise ReaderError(exc.path, exc.problem, line=exc.line) from None
    try:
        return loads(text, max_depth=max_depth)
    except ValueError as exc:
        problem, line = _problem(exc)
        raise ReaderError(str(path), problem, line=line) from None


def read_json_lines(
    path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES, max_depth: int = MAX_DEPTH
) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` for each non-blank line of the JSON Lines file ``path``.

    The file is read as it is used, one line at a time, and must be a regular file (a FIFO or
    device is refused before anything is read); no line and not the whole file may be longer
    than ``max_bytes``. Raises :class:`ReaderError` naming the file and the line of the first
    line that is not UTF-8, not JSON or nested deeper than ``max_depth``."""
    for number, _, value in read_json_lines_at(path, max_bytes=max_bytes, max_depth=max_depth):
        yield number, value


def read_json_lines_at(
    path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES, max_depth: int = MAX_DEPTH
) -> Iterator[tuple[int, int, Any]]:
    """:func:`read_json_lines` with each line's byte offset in the file: ``(line number, offset,
    value)``, where reading from ``offset`` to the line's end gives the value again (after a
    byte-order mark on the first line)."""
    with os.fdopen(open_regular(path), "rb") as handle:
        total = 0
        number = 0
        while raw := handle.readline(max_bytes + 1):
            number += 1
            start = total
            total += len(raw)
            if len(raw) > max_bytes or total > max_bytes:
                raise ReaderError(
                    str(path), f"the file is longer than the limit of {describe_size(max_bytes)}", line=number,
                    hint="split the file, or check that it is the file you meant",
                )
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]  # a UTF-8 byte-order mark some editors write
                start = 3
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ReaderError(
                    str(path), f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})", line=number,
                    hint="save the file as UTF-8",
                ) from None
            if not line.strip():
                continue
            try:
                value = loads(line, max_depth=max_depth)
            except ValueError as exc:
                raise ReaderError(str(path), _problem(exc)[0], line=number, hint="one JSON value per line") from None
            yield number, start, value

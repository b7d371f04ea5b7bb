"""The top-left corner of a table stored as JSON text, read from a stream in bounded memory.

A stored table is ``header`` (a JSON array of names) and ``rows`` (a JSON array of arrays of
cells). Showing 30 rows of a 3-million-row table must not parse, or even read, the other rows:
a JSON function of the database parses the whole text (8.4 GB and 39 s for such a table). This
module reads the text chunk by chunk from a ``read(n) -> bytes`` callable (an SQLite blob, a
PostgreSQL substring) and stops as soon as the corner is complete. Cells past the corner in a
row it reads are skipped without being kept, so memory is bounded by the cells returned plus
one chunk, whatever the width or height of the table.

>>> import io
>>> corner(io.BytesIO(b'[["a", "b\\\\"c"], ["d", "e"], ["f", "g"]]').read, rows=2, cols=1)
[['a'], ['d']]
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from tqaforge.errors import TableError

#: Bytes asked of ``read`` at a time.
CHUNK = 1 << 16

_SPACE = b" \t\r\n"
# The body of a JSON string from just after its opening quote: it stops at the closing quote,
# or at the end of the bytes read so far (a restart point: an escape is never cut in two).
_STRING_BODY = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)
_SCALAR = re.compile(rb"[^,\]\}\s]*")
# What a nested value's depth depends on: a string start or a bracket.
_STRUCTURE = re.compile(rb'["\[\]\{\}]')


class _Cursor:
    """A window on the stream: ``buf[pos:]`` is read but not yet consumed."""

    def __init__(self, read: Callable[[int], bytes]) -> None:
        self._read = read
        self.buf = b""
        self.pos = 0
        self._eof = False

    def more(self, keep_from: int) -> int:
        """Read another chunk, dropping the bytes before ``keep_from``; returns how far indexes
        moved (subtract it from every index into ``buf``). Raises at the end of the text."""
        if self._eof:
            raise TableError("the stored table ends in the middle of its JSON text",
                             hint="the database is damaged: restore a backup or import the table again")
        chunk = self._read(CHUNK)
        if not chunk:
            self._eof = True
            return self.more(keep_from)
        self.buf = self.buf[keep_from:] + chunk
        self.pos -= keep_from
        return keep_from

    def next_byte(self) -> int:
        """The next byte that is not white space (not consumed)."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in _SPACE:
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            self.more(self.pos)

    def expect(self, byte: bytes) -> None:
        if self.next_byte() != byte[0]:
            found = chr(self.buf[self.pos])
            raise TableError(f"the stored table's JSON text has {found!r} where {byte.decode()!r} belongs",
                             hint="the database is damaged: restore a backup or import the table again")
        self.pos += 1

    def string_end(self, i: int, keep_from: int | None) -> tuple[int, int | None]:
        """The index just past the closing quote of the string whose body starts at ``i``, and
        ``keep_from`` moved with the buffer (``None``: keep nothing, the string is skipped)."""
        while True:
            end = _STRING_BODY.match(self.buf, i).end()  # type: ignore[union-attr]
            if end < len(self.buf) and self.buf[end] == ord('"'):
                return end + 1, keep_from
            shift = self.more(end if keep_from is None else keep_from)
            i = end - shift
            keep_from = None if keep_from is None else keep_from - shift

    def value_end(self, keep: bool) -> int:
        """Scan the value at ``pos`` (after white space) and return the index just past it; when
        ``keep``, ``buf[pos:end]`` holds the whole value, otherwise only ``pos`` is meaningful."""
        first = self.next_byte()
        start: int | None = self.pos if keep else None
        if first == ord('"'):
            end, start = self.string_end(self.pos + 1, start)
            if start is not None:
                self.pos = start
            return end
        if first in b"[{":
            depth, i = 0, self.pos
            while True:
                m = _STRUCTURE.search(self.buf, i)
                if m is None:  # nothing that changes the depth up to the end: read on from there
                    i = len(self.buf)
                    shift = self.more(i if start is None else start)
                    i -= shift
                    start = None if start is None else start - shift
                    continue
                i = m.end()
                c = self.buf[m.start()]
                if c == ord('"'):
                    # string_end moves the buffer when it reads on; its index is in the new one.
                    i, start = self.string_end(i, start)
                    continue
                depth += 1 if c in b"[{" else -1
                if depth == 0:
                    if start is not None:
                        self.pos = start
                    return i
        while True:  # a number, true, false or null: up to the next delimiter
            end = _SCALAR.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if end < len(self.buf):
                return end
            self.more(self.pos)

    def value(self) -> object:
        """The JSON value at ``pos``, consumed."""
        end = self.value_end(keep=True)
        try:
            value = json.loads(self.buf[self.pos:end])
        except ValueError as e:
            raise TableError(f"the stored table's JSON text has a bad value: {e}",
                             hint="the database is damaged: restore a backup or import the table again") from None
        self.pos = end
        return value

    def skip(self) -> None:
        """Consume the value at ``pos`` without keeping it."""
        self.pos = self.value_end(keep=False)

    def array(self, keep: int) -> list[str]:
        """Consume an array, returning its first ``keep`` items as cell text."""
        self.expect(b"[")
        cells: list[str] = []
        if self.next_byte() == ord("]"):
            self.pos += 1
            return cells
        while True:
            if len(cells) < keep:
                cells.append(_cell_text(self.value()))
            else:
                self.skip()
            if self.next_byte() == ord("]"):
                self.pos += 1
                return cells
            self.expect(b",")


def _cell_text(value: object) -> str:
    """A stored value as cell text (``None``, which a missing cell reads as, is empty)."""
    return "" if value is None else value if isinstance(value, str) else str(value)


def first_items(read: Callable[[int], bytes], n: int) -> list[str]:
    """The first ``n`` items of a JSON array (a header) as cell text; the rest is read past,
    never kept. ``read(k)`` returns up to ``k`` more bytes of the text, ``b""`` at its end."""
    return _Cursor(read).array(n)


def corner(read: Callable[[int], bytes], *, rows: int, cols: int) -> list[list[str]]:
    """The first ``cols`` cells of the first ``rows`` rows of a JSON array of arrays.

    Reads the text only as far as the end of row ``rows`` and keeps only the cells returned
    (module doc); fewer rows come back when the array is shorter. Raises :class:`TableError`
    when the text is not such an array."""
    if rows <= 0:
        return []
    cursor = _Cursor(read)
    cursor.expect(b"[")
    out: list[list[str]] = []
    if cursor.next_byte() == ord("]"):
        return out
    while True:
        out.append(cursor.array(cols))
        if len(out) == rows or cursor.next_byte() == ord("]"):
            return out
        cursor.expect(b",")

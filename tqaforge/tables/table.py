"""The canonical Table value object.

A table is a header plus rows of cell strings. Everything else in tqaforge (readers,
serializers, perturbations, the store) speaks this one type. Its id is a hash of the canonical
content (header and rows only), so the same table read from two files, or twice, is one table.
Caption, source and licence are metadata: they travel with the table but do not change its id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from itertools import chain
from typing import Iterable, Iterator, Sequence, overload

from tqaforge.errors import TableError
from tqaforge.ids import table_id, table_id_of_joined
from tqaforge.tables.cells import parse_decimal
from tqaforge.tables.locale_numbers import parse_with

# Separator of the cells of a packed row: a control character, which the readers remove from
# every cell (tables.cells.clean_text), so a read cell never holds it. A row whose cells do hold
# it (a table built by hand) is kept as a tuple instead.
_SEP = "\x1f"


class PackedRows(Sequence[tuple[str, ...]]):
    """Rows of a table kept as one string per row, each a tuple of cells when asked for.

    A cell as its own ``str`` object costs about 50 bytes more than its text, which made a CSV of
    short cells take 17 times its size in memory; one string per row costs that once per row.
    It behaves as the tuple of row tuples it stands for: indexing, iteration, ``len``,
    equality and hashing (equal to and hashed as that tuple).

    >>> rows = PackedRows([["a", "b"], ["c", ""]])
    >>> rows[1], rows == (("a", "b"), ("c", ""))
    (('c', ''), True)
    """

    __slots__ = ("_rows", "_width")

    def __init__(self, rows: Iterable[Sequence[str]] = ()) -> None:
        self._rows: list[str | tuple[str, ...]] = []
        self._width: int | None = None  # the width of every row; -1 once two rows differ
        for row in rows:
            self.append(row)

    def append(self, row: Sequence[str]) -> None:
        """Add a row at the end (tables are immutable once built: only readers append)."""
        packed = _SEP.join(row)
        # A cell holding the separator itself would split wrongly: keep such a row as it is.
        self._rows.append(packed if packed.count(_SEP) == len(row) - 1 and row else tuple(row))
        if self._width is None:
            self._width = len(row)
        elif self._width != len(row):
            self._width = -1

    @classmethod
    def _of(cls, items: list[str | tuple[str, ...]], width: int | None) -> "PackedRows":
        """Rows from items of another PackedRows (packed strings, or tuples), not packed again:
        for perturbations that only move, copy or add whole rows."""
        rows = cls.__new__(cls)
        rows._rows = items
        rows._width = width
        return rows

    @property
    def items(self) -> list[str | tuple[str, ...]]:
        """The stored rows: a packed string per row (cells joined by U+001F), or a tuple for a
        row whose cells hold U+001F. Equal items are equal rows. Do not modify the list."""
        return self._rows

    @property
    def common_width(self) -> int | None:
        """The number of cells of every row (None without rows, -1 when they differ)."""
        return self._width

    @staticmethod
    def _unpack(item: str | tuple[str, ...]) -> tuple[str, ...]:
        return tuple(item.split(_SEP)) if isinstance(item, str) else item

    def width(self, index: int) -> int:
        """The number of cells of row ``index``, without unpacking it."""
        item = self._rows[index]
        return item.count(_SEP) + 1 if isinstance(item, str) else len(item)

    @overload
    def __getitem__(self, index: int) -> tuple[str, ...]: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[tuple[str, ...], ...]: ...
    def __getitem__(self, index: int | slice) -> tuple[str, ...] | tuple[tuple[str, ...], ...]:
        if isinstance(index, slice):
            return tuple(self._unpack(item) for item in self._rows[index])
        return self._unpack(self._rows[index])

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[tuple[str, ...]]:
        sep = _SEP  # lazily: iterating a large table never holds all its rows unpacked
        return (tuple(item.split(sep)) if item.__class__ is str else item for item in self._rows)  # type: ignore[union-attr,misc]

    def unpacked(self) -> list[tuple[str, ...]]:
        """Every row as a tuple of cells, each row unpacked once: index this list freely
        (indexing the packed rows splits a row again on every access)."""
        width = self._width
        if width is not None and width > 0:
            try:
                flat = _SEP.join(self._rows).split(_SEP)  # type: ignore[arg-type]
            except TypeError:
                pass  # a row kept as a tuple
            else:
                # Every cell split off in one call, then cut into rows of `width` in C.
                return list(zip(*[iter(flat)] * width))
        sep = _SEP
        return [tuple(item.split(sep)) if item.__class__ is str else item for item in self._rows]  # type: ignore[union-attr,misc]

    def cells(self) -> list[str]:
        """Every cell, row by row, in one list."""
        try:
            return _SEP.join(self._rows).split(_SEP) if self._rows else []  # type: ignore[arg-type]
        except TypeError:
            return [cell for row in self.unpacked() for cell in row]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PackedRows):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(self) == len(other) and all(a == tuple(b) for a, b in zip(self, other))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))

    def __reduce__(self) -> tuple[type, tuple[list[tuple[str, ...]]]]:
        return (PackedRows, (list(self),))


#: Separators of :func:`joined_rows`: control characters the readers remove from every cell.
CELL_SEP = _SEP
ROW_SEP = "\x1e"
_ONE_PIECE_CELLS = 100_000  # tables with more cells are hashed row by row (ids.table_id)


def flat_cells(rows: Sequence[Sequence[str]]) -> list[str]:
    """Every cell of ``rows``, row by row, in one list (packed rows split in one call)."""
    return rows.cells() if isinstance(rows, PackedRows) else list(chain.from_iterable(rows))


# The last rows joined, (rows, width, row count, text): a table is serialized in several formats
# one after the other (the variant grid's seven), each of which joins its rows; one entry holds
# one table's text at most, and the rows object itself, so that its id cannot be reused.
_last_joined: tuple[object, int, int, str | None] = (None, 0, 0, None)


def joined_rows(rows: Sequence[Sequence[str]], width: int) -> str | None:
    """All rows as one string, cells joined by :data:`CELL_SEP` and rows by :data:`ROW_SEP`;
    None when a cell holds either separator (then the string could not be split back).

    Formats whose escapes replace characters one by one can escape this string in a few
    ``str.replace`` calls and then turn the separators into their own, instead of working cell
    by cell. Packed rows are joined as they are stored, without being unpacked."""
    global _last_joined
    last = _last_joined  # one read: another thread may replace it meanwhile
    if last[0] is rows and last[1] == width and last[2] == len(rows):
        return last[3]
    text = _joined_rows(rows, width)
    if type(rows) is tuple or isinstance(rows, PackedRows):  # a Table's rows (a list may change in place)
        _last_joined = (rows, width, len(rows), text)
    return text


def _joined_rows(rows: Sequence[Sequence[str]], width: int) -> str | None:
    if isinstance(rows, PackedRows):
        try:
            text = ROW_SEP.join(rows.items)  # type: ignore[arg-type]
        except TypeError:
            return None  # a row kept as a tuple: its cells hold CELL_SEP
    else:
        text = ROW_SEP.join(map(_SEP.join, rows))
        if text.count(_SEP) != len(rows) * (width - 1):
            return None
    return text if text.count(ROW_SEP) == max(len(rows) - 1, 0) else None


@dataclass(frozen=True, slots=True)
class Table:
    """An immutable table: ``header`` and ``rows`` of strings, all rows as wide as the header.

    >>> t = Table.build(["city", "pop"], [["Oslo", "709000"]])
    >>> t.n_rows, t.n_cols, t.cell(0, 1)
    (1, 2, '709000')
    """

    header: tuple[str, ...]
    rows: Sequence[tuple[str, ...]]  # a tuple of tuples, or PackedRows (tables from readers)
    caption: str | None = field(default=None, compare=False)
    source: str | None = field(default=None, compare=False)
    licence: str | None = field(default=None, compare=False)
    #: Per column, the convention its numbers are written in (a name of
    #: :data:`tqaforge.tables.locale_numbers.CONVENTIONS`, None for a text column), as a reader found
    #: it; None when nobody looked. The cells keep their text; :meth:`number` reads them.
    #: Metadata like the caption: it does not change the id, and ``to_dict`` writes it only when set.
    numbers: tuple[str | None, ...] | None = field(default=None, compare=False)
    _id: str = field(default="", init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.header:
            raise TableError("table has no columns")
        width = len(self.header)
        if isinstance(self.rows, PackedRows):
            if self.rows.common_width in (None, width):
                self._check_numbers()
                return  # known from the appends, without a pass over the rows
        elif set(map(len, self.rows)) <= {width}:
            self._check_numbers()
            return  # one pass in C; the loop below only names the first wrong row
        for i in range(len(self.rows)):
            # Packed rows are counted without unpacking them.
            n = self.rows.width(i) if isinstance(self.rows, PackedRows) else len(self.rows[i])
            if n != width:
                raise TableError(f"row {i + 1} has {n} cells but the header has {width} columns")

    def _check_numbers(self) -> None:
        if self.numbers is not None and len(self.numbers) != len(self.header):
            raise TableError(f"{len(self.numbers)} number conventions for {len(self.header)} columns")

    @classmethod
    def build(
        cls,
        header: Sequence[object],
        rows: Iterable[Sequence[object]],
        *,
        caption: str | None = None,
        source: str | None = None,
        licence: str | None = None,
        numbers: Sequence[str | None] | None = None,
    ) -> "Table":
        """Make a table from any sequences; cells become strings (``None`` becomes ``""``)."""
        return cls(
            header=_cells(header),
            rows=tuple(map(_cells, rows)),
            caption=caption,
            source=source,
            licence=licence,
            numbers=tuple(numbers) if numbers is not None else None,
        )

    @property
    def id(self) -> str:
        """Content hash of header and rows (:func:`tqaforge.ids.table_id`): equal tables have equal ids."""
        if not self._id:
            # Computed once: hashing a large table is the costliest thing about it.
            object.__setattr__(self, "_id", self._content_id())
        return self._id

    def _content_id(self) -> str:
        rows = self.rows
        # A table of moderate size is encoded in one piece (a few calls in C); a large one row
        # by row, so that no second copy of it is held.
        if rows and len(rows) * len(self.header) <= _ONE_PIECE_CELLS:
            joined = joined_rows(rows, len(self.header))
            if joined is not None:
                found = table_id_of_joined(self.header, joined, _SEP, ROW_SEP)
                if found is not None:
                    return found
        return table_id(self.header, rows)

    @property
    def n_rows(self) -> int:
        return len(self.rows)

    @property
    def n_cols(self) -> int:
        return len(self.header)

    def cell(self, row: int, col: int) -> str:
        """The cell at data row ``row`` (0-based, header excluded) and column ``col``."""
        return self.rows[row][col]

    def number(self, row: int, col: int) -> Decimal | None:
        """The value of the cell at (``row``, ``col``) read under its column's convention
        (:attr:`numbers`), or None when the column is text or the cell is not a number. A
        table without conventions reads every cell the plain way
        (:func:`tqaforge.tables.cells.parse_decimal`). The cell's text stays as written."""
        text = self.rows[row][col]
        if self.numbers is None:
            return parse_decimal(text)
        convention = self.numbers[col]
        return None if convention is None else parse_with(text, convention)

    def column(self, col: int) -> tuple[str, ...]:
        return tuple(row[col] for row in self.row_tuples())

    def row_tuples(self) -> Sequence[tuple[str, ...]]:
        """The rows as tuples that are cheap to index again and again: ``rows`` itself, or
        packed rows unpacked once (a new list, not kept: packing is what saves the memory)."""
        rows = self.rows
        return rows.unpacked() if isinstance(rows, PackedRows) else rows

    def to_dict(self) -> dict[str, object]:
        """The canonical JSON form: ``{"header": [...], "rows": [[...]], ...metadata}``."""
        out: dict[str, object] = {"header": list(self.header), "rows": [list(r) for r in self.rows]}
        for key in ("caption", "source", "licence"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.numbers is not None:  # absent unless a reader detected them: older forms unchanged
            out["numbers"] = list(self.numbers)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> "Table":
        """Inverse of :meth:`to_dict`."""
        try:
            header = data["header"]
            rows = data["rows"]
        except KeyError as exc:
            raise TableError(f"canonical table lacks the key {exc.args[0]!r}") from None
        return cls.build(
            header,  # type: ignore[arg-type]
            rows,  # type: ignore[arg-type]
            caption=data.get("caption"),  # type: ignore[arg-type]
            source=data.get("source"),  # type: ignore[arg-type]
            licence=data.get("licence"),  # type: ignore[arg-type]
            numbers=data.get("numbers"),  # type: ignore[arg-type]
        )

    def with_metadata(self, **changes: object) -> "Table":
        """A copy with other caption/source/licence/numbers (same id)."""
        values = {k: getattr(self, k) for k in ("caption", "source", "licence", "numbers")}
        values.update(changes)
        return Table(self.header, self.rows, **values)  # type: ignore[arg-type]


_ONLY_STR = frozenset({str})


def _cells(values: Iterable[object]) -> tuple[str, ...]:
    """``values`` as cells (:func:`_cell` of each); a row of plain strings (what the store and
    the readers give) is taken as it is, told by one pass in C instead of a call per cell."""
    cells = tuple(values)
    if set(map(type, cells)) <= _ONLY_STR:
        return cells  # type: ignore[return-value]  # every one a str, as _cell would return it
    return tuple(map(_cell, cells))


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        # Spreadsheets hand back 3.0 for the number typed as 3.
        return str(int(value))
    return str(value)

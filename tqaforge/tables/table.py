"""The canonical Table value object.

A table is a header plus rows of cell strings. Everything else in tqaforge (readers,
serializers, perturbations, the store) speaks this one type. Its id is a hash of the canonical
content (header and rows only), so the same table read from two files, or twice, is one table.
Caption, source and licence are metadata: they travel with the table but do not change its id.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from tqaforge.errors import TableError

#: Length of the hexadecimal table id (128 bits of SHA-256: collisions are not a practical concern).
ID_LENGTH = 32


def content_hash(payload: object, length: int = ID_LENGTH) -> str:
    """Hash any JSON-serialisable value canonically (sorted keys, no whitespace, UTF-8)."""
    text = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


@dataclass(frozen=True, slots=True)
class Table:
    """An immutable table: ``header`` and ``rows`` of strings, all rows as wide as the header.

    >>> t = Table.build(["city", "pop"], [["Oslo", "709000"]])
    >>> t.n_rows, t.n_cols, t.cell(0, 1)
    (1, 2, '709000')
    """

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str | None = field(default=None, compare=False)
    source: str | None = field(default=None, compare=False)
    licence: str | None = field(default=None, compare=False)
    _id: str = field(default="", init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.header:
            raise TableError("table has no columns")
        width = len(self.header)
        for i, row in enumerate(self.rows):
            if len(row) != width:
                raise TableError(
                    f"row {i + 1} has {len(row)} cells but the header has {width} columns"
                )

    @classmethod
    def build(
        cls,
        header: Sequence[object],
        rows: Iterable[Sequence[object]],
        *,
        caption: str | None = None,
        source: str | None = None,
        licence: str | None = None,
    ) -> "Table":
        """Make a table from any sequences; cells become strings (``None`` becomes ``""``)."""
        return cls(
            header=tuple(_cell(c) for c in header),
            rows=tuple(tuple(_cell(c) for c in row) for row in rows),
            caption=caption,
            source=source,
            licence=licence,
        )

    @property
    def id(self) -> str:
        """Content hash of header and rows: equal tables have equal ids."""
        if not self._id:
            # Computed once: hashing a large table is the costliest thing about it.
            digest = content_hash({"header": list(self.header), "rows": [list(r) for r in self.rows]})
            object.__setattr__(self, "_id", digest)
        return self._id

    @property
    def n_rows(self) -> int:
        return len(self.rows)

    @property
    def n_cols(self) -> int:
        return len(self.header)

    def cell(self, row: int, col: int) -> str:
        """The cell at data row ``row`` (0-based, header excluded) and column ``col``."""
        return self.rows[row][col]

    def column(self, col: int) -> tuple[str, ...]:
        return tuple(row[col] for row in self.rows)

    def to_dict(self) -> dict[str, object]:
        """The canonical JSON form: ``{"header": [...], "rows": [[...]], ...metadata}``."""
        out: dict[str, object] = {"header": list(self.header), "rows": [list(r) for r in self.rows]}
        for key in ("caption", "source", "licence"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
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
        )

    def with_metadata(self, **changes: str | None) -> "Table":
        """A copy with other caption/source/licence (same id)."""
        values = {k: getattr(self, k) for k in ("caption", "source", "licence")}
        values.update(changes)
        return Table(self.header, self.rows, **values)


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        # Spreadsheets hand back 3.0 for the number typed as 3.
        return str(int(value))
    return str(value)

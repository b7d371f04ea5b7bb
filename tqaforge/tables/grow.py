"""Grow a real table to a target token length, for the large-table buckets no real table reaches.

The grown table's rows are the source table's rows drawn with replacement, one after another,
by ``random.Random(seed)`` (``randrange(n_rows)`` per row), until the table, serialized as asked,
has at least the target number of tokens: it is the shortest prefix of that draw that does. Its
first column, ``source_row`` (``source_row_1``... if the source has a column of that name),
holds the 0-based data row of the source each row was drawn from, so a reader can trace every
row; ``id_column=None`` leaves the column out (the draw stays reproducible from the seed).

Same source, target, seed, serialization and encoding give the same table, hence the same id.

>>> t = Table.build(["a"], [["x"], ["y"]])
>>> g = grow_table(t, GrowOptions(target_tokens=20, seed=1))
>>> g.table.header, g.tokens >= 20, g.table.rows[0][1] == t.rows[g.source_rows[0]][0]
(('source_row', 'a'), True, True)
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from tqaforge.errors import TableError, TokenCountError
from tqaforge.tables.names import NameNumberer
from tqaforge.tables.table import Table
from tqaforge.tables.tokens import (
    DEFAULT_ENCODING,
    DEFAULT_SERIALIZATION,
    check_count,
    check_encoding,
    check_serialization,
    table_tokens,
)

#: The largest target :func:`grow_table` accepts (a million tokens: beyond every context window
#: the paper's buckets are about, and a few megabytes of text).
MAX_TARGET_TOKENS = 1_000_000


@dataclass(frozen=True, slots=True)
class GrowOptions:
    """What to grow a table to: at least ``target_tokens`` tokens in ``serialization`` and
    ``encoding``, rows drawn with ``seed``, the source row of each in column ``id_column``."""

    target_tokens: int
    seed: int
    serialization: str = DEFAULT_SERIALIZATION
    encoding: str = DEFAULT_ENCODING
    id_column: str | None = "source_row"

    def __post_init__(self) -> None:
        check_count(self.target_tokens, "the target token count")
        if self.target_tokens > MAX_TARGET_TOKENS:
            raise TokenCountError(
                f"the target token count {self.target_tokens} is above the limit of {MAX_TARGET_TOKENS}",
                hint=f"ask for at most {MAX_TARGET_TOKENS} tokens",
            )
        check_count(self.seed, "the seed")
        check_serialization(self.serialization)
        check_encoding(self.encoding)
        if self.id_column is not None and not self.id_column.strip():
            raise TableError("the source-row column needs a name", hint="give a name, or none to leave the column out")


@dataclass(frozen=True, slots=True)
class GrownTable:
    """A grown table, the source row (0-based) of each of its rows, and its token count."""

    table: Table
    source_rows: tuple[int, ...]
    tokens: int
    source_tokens: int


def _id_column_name(header: tuple[str, ...], wanted: str) -> str:
    if wanted not in header:
        return wanted
    return NameNumberer(header, pattern="{name}_{k}", first=1).number(wanted)


def grow_table(table: Table, options: GrowOptions) -> GrownTable:
    """``table`` grown to at least ``options.target_tokens`` tokens (see the module docstring).

    Raises :class:`TableError` for a table without rows, and :class:`TokenCountError` when
    the table already has the target's length (nothing to grow: use it as it is)."""
    if table.n_rows == 0:
        raise TableError("cannot grow a table without rows", hint="pick a table with at least one data row")
    source_tokens = table_tokens(table, options.serialization, options.encoding)
    if source_tokens >= options.target_tokens:
        raise TokenCountError(
            f"the table already has {source_tokens} tokens in {options.serialization} ({options.encoding}), "
            f"not fewer than the target {options.target_tokens}",
            hint=f"ask for more than {source_tokens} tokens, or use the table as it is",
        )
    rows = table.row_tuples()
    header = table.header
    if options.id_column is not None:
        header = (_id_column_name(header, options.id_column), *header)
    rng = random.Random(options.seed)
    drawn: list[int] = []

    def prefix(n: int) -> Table:
        while len(drawn) < n:
            drawn.append(rng.randrange(len(rows)))
        if options.id_column is None:
            body = [rows[i] for i in drawn[:n]]
        else:
            body = [(str(i), *rows[i]) for i in drawn[:n]]
        return Table(header, tuple(body), caption=table.caption, source=table.source, licence=table.licence)

    def tokens(n: int) -> int:
        return table_tokens(prefix(n), options.serialization, options.encoding)

    # The shortest prefix with enough tokens: a guess from the source's tokens per row, doubled
    # until it is enough, then bisected (the count grows with every row added).
    per_row = max(1, source_tokens // table.n_rows)
    low, high = 0, max(1, options.target_tokens // per_row)
    while (n_high := tokens(high)) < options.target_tokens:
        low, high = high, high * 2
    found = n_high
    while high - low > 1:
        middle = (low + high) // 2
        n_middle = tokens(middle)
        if n_middle >= options.target_tokens:
            high, found = middle, n_middle
        else:
            low = middle
    return GrownTable(prefix(high), tuple(drawn[:high]), found, source_tokens)


__all__ = ["GrowOptions", "GrownTable", "MAX_TARGET_TOKENS", "grow_table"]

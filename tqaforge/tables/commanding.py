"""Commanding items: table editing (the capability-based TableBench's *commanding* capability).

An item is an instruction, a source table and the target table the instruction makes of it
(WikiTableEdit's triplets). Its gold answer is the target in the canonical text
:func:`canonical_table_text` (``{"header": [...], "rows": [[...]]}``, the Table's JSON form, on
one line); a model's reply is read back with :func:`tqaforge.tables.parse_table.parse_table` in
any serialization and scored by TEDS (:mod:`tqaforge.tables.teds`).

Items come from a JSON Lines file (:mod:`tqaforge.tables.readers.commanding`) or are made here
from edits whose result is known exactly (:func:`make_commanding_items`):

================  ===============================================================
operation         instruction (target)
================  ===============================================================
add_row           append a row of given values (a copy of a row of the table)
remove_row        remove data row *n*
swap_rows         swap data rows *i* and *j*
sort_rows         sort rows by a column of distinct numbers, ascending
add_column        append a column repeating another column's values
remove_column     remove a named column
swap_columns      swap two named columns
reorder_columns   put the columns in a given order (a seeded shuffle)
merge_columns     merge two adjacent columns into one, values joined by a space
split_column      split a column at the first space of each cell into two
================  ===============================================================

Every choice (which row, which columns) comes from ``random.Random`` seeded by the table's id,
the operation and the seed (:func:`~tqaforge.tables.perturb.rng_for`), so the same seed gives
the same items; an operation that does not apply (one row to swap, no cell with a space, repeated
column names where the instruction names columns) is skipped.

>>> t = Table.build(["name", "age"], [["Ann", "26"], ["Bo", "34"]])
>>> item = make_commanding_items(t, seed=1, operations=["swap_columns"])[0]
>>> item.instruction, item.target.header, item.target.rows
("Swap the columns 'name' and 'age'.", ('age', 'name'), (('26', 'Ann'), ('34', 'Bo')))
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable, Sequence

from tqaforge.errors import TableError
from tqaforge.ids import content_hash
from tqaforge.tables.perturb import rng_for
from tqaforge.tables.table import Table

#: The capability taxonomy's subtype of commanding items.
COMMANDING = "Commanding"  # the capability taxonomy's subtype (schemas/taxonomy.py)


@dataclass(frozen=True)
class CommandItem:
    """One table-editing item: ``target`` is what ``instruction`` makes of ``source``."""

    id: str
    instruction: str
    source: Table
    target: Table
    operation: str = ""

    @property
    def answer_text(self) -> str:
        """The gold answer: the target in the canonical text."""
        return canonical_table_text(self.target)

    def to_json(self) -> dict[str, object]:
        """One line of the JSON Lines format (:mod:`tqaforge.tables.readers.commanding`)."""
        out: dict[str, object] = {
            "id": self.id, "instruction": self.instruction,
            "source_table": _bare(self.source), "target_table": _bare(self.target),
        }
        if self.operation:
            out["operation"] = self.operation
        return out


def _bare(table: Table) -> dict[str, object]:
    return {"header": list(table.header), "rows": [list(r) for r in table.row_tuples()]}


def canonical_table_text(table: Table) -> str:
    """The canonical text of a table as a gold answer: ``{"header": [...], "rows": [[...]]}`` in
    compact JSON on one line (non-ASCII kept), metadata left out."""
    return json.dumps(_bare(table), ensure_ascii=False, separators=(",", ":"))


def table_of_canonical_text(text: str) -> Table | None:
    """The table a canonical text holds; None when ``text`` is not one (not JSON, not that shape)."""
    if not text.startswith('{"header":'):
        return None
    try:
        value = json.loads(text)
        return Table.from_dict(value) if isinstance(value, dict) and set(value) == {"header", "rows"} else None
    except (ValueError, TypeError, TableError, RecursionError):
        return None


@lru_cache(maxsize=1024)
def table_of_gold(text: str, commanding: bool) -> Table | None:
    """A gold answer ``text`` as a table when it is one: a canonical table text, or (``commanding``:
    the item's subtype is :data:`COMMANDING`) a table in any serialization
    :func:`tqaforge.tables.parse_table.parse_table` reads; None otherwise. Cached: the scorer,
    the metric and the variant grid each ask."""
    found = table_of_canonical_text(text)
    if found is None and commanding:
        from tqaforge.tables.parse_table import TableParseError, parse_table  # parse_table imports the readers

        try:
            found = parse_table(text).table()
        except TableParseError:
            return None
    return found


def gold_is_table(answers: Sequence[str], subtype: str | None) -> bool:
    """Whether an item whose gold values are ``answers`` is a commanding item: its gold is one table
    (:func:`table_of_gold`), the target of an edit of the item's own table."""
    return len(answers) == 1 and table_of_gold(answers[0], subtype == COMMANDING) is not None


def _quoted(name: str) -> str:
    return "'" + name.replace("'", "\\'") + "'"


def _row_text(row: Sequence[str]) -> str:
    return " | ".join(cell if cell else "(empty)" for cell in row)


Edit = Callable[[Table, random.Random], tuple[str, Table] | None]


def _add_row(t: Table, rng: random.Random) -> tuple[str, Table] | None:
    if not t.rows:
        return None
    row = t.row_tuples()[rng.randrange(t.n_rows)]
    return (f"Add a row at the end of the table with the values {_row_text(row)} (one per column, in order).",
            Table.build(t.header, [*t.row_tuples(), row]))


def _remove_row(t: Table, rng: random.Random) -> tuple[str, Table] | None:
    if not t.rows:
        return None
    i = rng.randrange(t.n_rows)
    rows = list(t.row_tuples())
    return (f"Remove data row {i + 1} (counting from 1, the header not counted), the row {_row_text(rows[i])}.",
            Table.build(t.header, rows[:i] + rows[i + 1:]))


def _swap_rows(t: Table, rng: random.Random) -> tuple[str, Table] | None:
    rows = list(t.row_tuples())
    if len(set(rows)) < 2:
        return None
    i, j = sorted(rng.sample(range(len(rows)), 2))
    if rows[i] == rows[j]:
        return None
    rows[i], rows[j] = rows[j], rows[i]
    return f"Swap data rows {i + 1} and {j + 1} (counting from 1, the header not counted).", Table.build(t.header, rows)


def _number(text: str) -> float | None:
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _named(t: Table) -> bool:
    """Whether columns can be named in an instruction: every name distinct and non-blank."""
    return len(set(t.header)) == t.n_cols and all(h.strip() for h in t.header)


def _sort_rows(t: Table, rng: random.Random) -> tuple[str, Table] | None:
    if t.n_rows < 2 or not _named(t):
        return None
    rows = list(t.row_tuples())
    usable = []
    for c in range(t.n_cols):
        values = [_number(row[c]) for row in rows]
        if all(v is not None for v in values) and len(set(values)) == len(values):
            usable.append(c)
    if not usable:
        return None
    c = rng.choice(usable)
    ordered = sorted(rows, key=lambda row: _number(row[c]) or 0.0)
    if ordered == rows:
        return None
    return f"Sort the rows by the column {_quoted(t.header[c])} in ascending numeric order.", Table.build(t.header, ordered)


def _columns(t: Table, order: Sequence[int]) -> Table:
    return Table.build([t.header[c] for c in order], [[row[c] for c in order] for row in t.row_tuples()])


def _add_column(t: Table, rng: random.Random) -> tuple[str, Table] | None:
    if not _named(t):
        return None
    c = rng.randrange(t.n_cols)
    name = f"{t.header[c]} (copy)"
    if name in t.header:
        return None
    return (f"Add a column named {_quoted(name)} at the end of the table that repeats the values of the column {_quoted(t.header[c])}.",
            Table.build([*t.header, name], [[*row, row[c]] for row in t.row_tuples()]))


def _remove_column(t: Table, rng: random.Random) -> tuple[str, Table] | None:
    if t.n_cols < 2 or not _named(t):
        return None
    c = rng.randrange(t.n_cols)
    return f"Remove the column {_quoted(t.header[c])}.", _columns(t, [k for k in range(t.n_cols) if k != c])


def _swap_columns(t: Table, rng: random.Random) -> tuple[str, Table] | None:
    if t.n_cols < 2 or not _named(t):
        return None
    i, j = sorted(rng.sample(range(t.n_cols), 2))
    order = list(range(t.n_cols))
    order[i], order[j] = j, i
    return f"Swap the columns {_quoted(t.header[i])} and {_quoted(t.header[j])}.", _columns(t, order)


def _reorder_columns(t: Table, rng: random.Random) -> tuple[str, Table] | None:
    if t.n_cols < 3 or not _named(t):
        return None
    order = list(range(t.n_cols))
    while order == sorted(order):
        rng.shuffle(order)
    names = ", ".join(_quoted(t.header[c]) for c in order)
    return f"Reorder the columns as follows: {names}.", _columns(t, order)


def _merge_columns(t: Table, rng: random.Random) -> tuple[str, Table] | None:
    if t.n_cols < 2 or not _named(t):
        return None
    c = rng.randrange(t.n_cols - 1)
    a, b = t.header[c], t.header[c + 1]
    name = f"{a} {b}"
    if name in t.header:
        return None
    header = [*t.header[:c], name, *t.header[c + 2:]]
    rows = [[*row[:c], " ".join(v for v in row[c:c + 2] if v), *row[c + 2:]] for row in t.row_tuples()]
    return (f"Merge the columns {_quoted(a)} and {_quoted(b)} into one column named {_quoted(name)} in their place: "
            "each cell is the two values joined by a space (just the one value when the other is empty).",
            Table.build(header, rows))


def _split_column(t: Table, rng: random.Random) -> tuple[str, Table] | None:
    if not _named(t):
        return None
    usable = [c for c in range(t.n_cols) if any(" " in row[c].strip(" ") for row in t.row_tuples())]
    if not usable:
        return None
    c = rng.choice(usable)
    first, second = f"{t.header[c]} (1)", f"{t.header[c]} (2)"
    if first in t.header or second in t.header:
        return None
    rows = []
    for row in t.row_tuples():
        left, _, right = row[c].partition(" ")
        rows.append([*row[:c], left, right, *row[c + 1:]])
    return (f"Split the column {_quoted(t.header[c])} into two columns {_quoted(first)} and {_quoted(second)} in its place, "
            "at the first space of each cell (a cell without a space goes whole into the first, the second left empty).",
            Table.build([*t.header[:c], first, second, *t.header[c + 1:]], rows))


#: Operation name -> edit: ``(table, rng) -> (instruction, target)``, or None where it does not apply.
OPERATIONS: dict[str, Edit] = {
    "add_row": _add_row,
    "remove_row": _remove_row,
    "swap_rows": _swap_rows,
    "sort_rows": _sort_rows,
    "add_column": _add_column,
    "remove_column": _remove_column,
    "swap_columns": _swap_columns,
    "reorder_columns": _reorder_columns,
    "merge_columns": _merge_columns,
    "split_column": _split_column,
}


def commanding_item_id(source: Table, instruction: str) -> str:
    """The id of a made item: a hash of the source table and the instruction."""
    return content_hash({"commanding": [source.id, instruction]})


def make_commanding_items(table: Table, *, seed: int, operations: Sequence[str] | None = None) -> list[CommandItem]:
    """Commanding items made by ``operations`` (all of :data:`OPERATIONS` by default) on
    ``table``, one per operation that applies (module docs); :class:`TableError` for an unknown name."""
    names = list(OPERATIONS) if operations is None else list(operations)
    unknown = [n for n in names if n not in OPERATIONS]
    if unknown:
        raise TableError(f"unknown commanding operation(s): {', '.join(unknown)}", hint="one of " + ", ".join(OPERATIONS))
    items: list[CommandItem] = []
    for name in names:
        made = OPERATIONS[name](table, rng_for(table, f"commanding:{name}", seed))
        if made is None:
            continue
        instruction, target = made
        if target == table:
            continue
        items.append(CommandItem(commanding_item_id(table, instruction), instruction, table, target, name))
    return items


def commanding_jsonl(tables: Iterable[Table], *, seed: int, operations: Sequence[str] | None = None) -> tuple[str, int]:
    """(JSON Lines text, number of items) of the items :func:`make_commanding_items` makes of each
    table: the file :mod:`tqaforge.tables.readers.commanding` reads (``tqaforge tables import``)."""
    lines = [json.dumps(item.to_json(), ensure_ascii=False) + "\n"
             for table in tables for item in make_commanding_items(table, seed=seed, operations=operations)]
    return "".join(lines), len(lines)


__all__ = [
    "COMMANDING",
    "commanding_jsonl",
    "OPERATIONS",
    "CommandItem",
    "canonical_table_text",
    "commanding_item_id",
    "make_commanding_items",
    "table_of_canonical_text",
]

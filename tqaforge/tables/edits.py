"""People's value modifications of a table (FREB-TQA section 3.5): cell edits, their checks, and the
text grid in which an annotator makes them.

An annotator edits the *shortened table* (the rows and columns holding a question's relevant
cells) in place, once so that the answer changes and once so that it does not. The edit is
read back as :class:`CellEdit` values (which cell, old value, new value), never as free text,
and is accepted only when it passes :func:`check_value_edit`:

- the edited table still parses as the shortened table (same header, same number of rows and
  of cells in each row: nothing added, nothing removed, so only its cells can change);
- one or two cells changed (:data:`MAX_EDITED_CELLS`), the header untouched;
- "answer changes": a new answer is given and differs from the old one; "answer stays the
  same": the new answer, if given, equals the old one.

Every refusal is an :class:`EditRejected` whose message tells the annotator what to do.

The grid (:func:`to_grid` / :func:`parse_grid`) is one line per row, the header first, cells
separated by `` | ``; a ``|`` or ``\\`` inside a cell is written ``\\|`` / ``\\\\``.
Surrounding spaces do not count: ``$3,574 `` and ``$3,574`` are the same value.

>>> t = Table.build(["name", "votes"], [["Olsson", "4"], ["Leslie", "12"]])
>>> edited = parse_grid(to_grid(t).replace("| 4", "| 361"))
>>> [e.as_dict() for e in diff_tables(t, edited)]
[{'row': 0, 'col': 1, 'old': '4', 'new': '361'}]
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Literal, Mapping, Sequence

from tqaforge.errors import TableError
from tqaforge.tables.matching import same_answer
from tqaforge.tables.table import Table

#: At most this many cells may change in one value modification (FREB-TQA: "one or two").
MAX_EDITED_CELLS = 2
#: The two kinds of value modification, named as the variants' perturbations are.
EditMode = Literal["answer_changes", "answer_same"]
EDIT_MODES: tuple[EditMode, ...] = ("answer_changes", "answer_same")
#: The perturbation name of a validated value modification, per mode.
PERTURBATION_OF: dict[str, str] = {
    "answer_changes": "value_change_answer_changes",
    "answer_same": "value_change_answer_same",
}

_SEPARATOR = re.compile(r"(?<!\\)((?:\\\\)*)\|")


class EditRejected(TableError):
    """A value modification that cannot be accepted; the message says what to change."""


@dataclass(frozen=True)
class CellEdit:
    """One changed cell: data row and column from 0 (row -1: a header cell, in published edits only;
    ours never change the header), its old and new value."""

    row: int
    col: int
    old: str
    new: str

    @property
    def cell_id(self) -> str:
        """The id an annotator sees for the cell: ``r{row}c{col}``, or ``h{col}`` for a header cell."""
        return cell_id(self.row, self.col)

    def describe(self) -> str:
        """``r0c1: 4 -> 361`` (an empty value shown as ``(empty)``)."""
        return f"{self.cell_id}: {self.old.strip() or '(empty)'} -> {self.new.strip() or '(empty)'}"

    def as_dict(self) -> dict[str, Any]:
        return {"row": self.row, "col": self.col, "old": self.old, "new": self.new}

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> CellEdit:
        """The inverse of :meth:`as_dict` (:class:`EditRejected` on a malformed entry)."""
        try:
            row, col = value["row"], value["col"]
            old, new = value["old"], value["new"]
        except (KeyError, TypeError):
            raise EditRejected(f"a changed cell needs row, col, old and new, got {value!r}") from None
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in (row, col)) or row < -1 or col < 0:
            raise EditRejected(f"a changed cell's row (-1: the header) and col (from 0) are whole numbers, got {value!r}")
        if not all(isinstance(x, str) for x in (old, new)):
            raise EditRejected(f"a changed cell's old and new values are text, got {value!r}")
        return cls(row, col, old, new)


def cell_id(row: int, col: int) -> str:
    """The id of a cell as shown to annotators: ``r{row}c{col}`` for data cells (rows from 0,
    header excluded), ``h{col}`` for a header cell (``row`` -1)."""
    return f"h{col}" if row < 0 else f"r{row}c{col}"


_CELL_ID = re.compile(r"^(?:r(\d+)c(\d+)|h(\d+))$")


def parse_cell_id(text: str) -> tuple[int, int]:
    """``r3c1`` -> (3, 1); ``h2`` -> (-1, 2) (a header cell); :class:`TableError` otherwise."""
    found = _CELL_ID.match(text.strip())
    if not found:
        raise TableError(f"{text!r} is not a cell id (r<row>c<column>, or h<column> for the header)")
    if found.group(3) is not None:
        return -1, int(found.group(3))
    return int(found.group(1)), int(found.group(2))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _unescape(value: str) -> str:
    return re.sub(r"\\([\\|])", r"\1", value)


def to_grid(table: Table) -> str:
    """The table as an editable text grid (module docs): the header line, then one line per row."""
    lines = [" | ".join(_escape(h) for h in table.header)]
    lines += [" | ".join(_escape(v) for v in row) for row in table.rows]
    return "\n".join(lines)


def _split(line: str) -> list[str]:
    cells, start = [], 0
    for found in _SEPARATOR.finditer(line):
        end = found.start() + len(found.group(1))
        cells.append(_unescape(line[start:end]).strip())
        start = found.end()
    cells.append(_unescape(line[start:]).strip())
    return cells


def parse_grid(text: str) -> tuple[tuple[str, ...], list[list[str]]]:
    """(header, rows) of a text grid, as written: rows may be ragged (:func:`check_value_edit`
    says what is wrong with them). Blank lines are ignored."""
    lines = [line for line in text.replace("\r\n", "\n").split("\n") if line.strip()]
    if not lines:
        return (), []
    return tuple(_split(lines[0])), [_split(line) for line in lines[1:]]


def _same(a: str, b: str) -> bool:
    return a.strip() == b.strip()


def diff_tables(before: Table, after: Table | tuple[Sequence[str], Sequence[Sequence[str]]]) -> list[CellEdit]:
    """The cells whose value differs (surrounding spaces ignored), row by row; the shapes must be
    equal (:func:`check_grid_shape` first)."""
    rows = after.rows if isinstance(after, Table) else after[1]
    edits = []
    for r, (old_row, new_row) in enumerate(zip(before.rows, rows)):
        for c, (old, new) in enumerate(zip(old_row, new_row)):
            if not _same(old, new):
                edits.append(CellEdit(r, c, old, new.strip()))
    return edits


def check_grid_shape(shortened: Table, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Raise :class:`EditRejected` unless the edited grid has the shortened table's shape and header."""
    if not header and not rows:
        raise EditRejected("the table is empty: edit the values in the table you were given, keep everything else")
    if len(header) != shortened.n_cols or not all(_same(a, b) for a, b in zip(header, shortened.header)):
        raise EditRejected(
            "the header (first line) was changed: keep the column names as they are and change one or two values "
            f"below them (expected: {' | '.join(shortened.header)})"
        )
    if len(rows) > shortened.n_rows:
        raise EditRejected(
            f"the table has {len(rows)} rows now but the shortened table has {shortened.n_rows}: "
            f"row r{shortened.n_rows} and after are outside the shortened table; change values of the rows shown, add none"
        )
    if len(rows) < shortened.n_rows:
        raise EditRejected(
            f"the table has {len(rows)} rows now but the shortened table has {shortened.n_rows}: a row was removed; "
            "keep every row and change values only"
        )
    for r, row in enumerate(rows):
        if len(row) != shortened.n_cols:
            raise EditRejected(
                f"row r{r} has {len(row)} cells but the table has {shortened.n_cols} columns: keep the | separators "
                "(write a | inside a value as \\|), change values only"
            )


def check_value_edit(
    shortened: Table,
    edits: Iterable[CellEdit],
    *,
    mode: EditMode,
    old_answers: Sequence[str],
    new_answers: Sequence[str] | None,
) -> tuple[str, ...]:
    """Check one value modification of ``shortened`` (module docs); the gold answer it gives.

    ``new_answers`` None means none was given: allowed for "answer stays the same" (the old answer
    stands), refused for "answer changes"."""
    edits = list(edits)
    where = "answer changes" if mode == "answer_changes" else "answer stays the same"
    if not edits:
        raise EditRejected(f"{where}: no value was changed; change one or two values in the table")
    if any(e.row < 0 for e in edits):
        raise EditRejected(f"{where}: the header (column names) cannot be changed; change one or two values below it")
    outside = [e for e in edits if not (0 <= e.row < shortened.n_rows and 0 <= e.col < shortened.n_cols)]
    if outside:
        ids = ", ".join(e.cell_id for e in outside)
        raise EditRejected(f"{where}: {ids} is outside the shortened table; change only the cells shown")
    for e in edits:
        if not _same(shortened.cell(e.row, e.col), e.old):
            raise EditRejected(
                f"{where}: {e.cell_id} held {shortened.cell(e.row, e.col)!r}, not {e.old!r}; edit the table you were given"
            )
    if len(edits) > MAX_EDITED_CELLS:
        ids = ", ".join(e.cell_id for e in edits)
        raise EditRejected(f"{where}: {len(edits)} cells changed ({ids}); change at most {MAX_EDITED_CELLS}")
    given = tuple(a.strip() for a in new_answers or () if a.strip())
    old = tuple(old_answers)
    if mode == "answer_changes":
        if not given:
            raise EditRejected(f"{where}: give the new answer to the question on the changed table")
        if old and same_answer(given, old):
            raise EditRejected(
                f"{where}: the new answer {', '.join(given)!r} is the old one ({', '.join(old)!r}); change values "
                "so that the answer changes, and give the new answer"
            )
        return given
    if given and old and not same_answer(given, old):
        raise EditRejected(
            f"{where}: the answer {', '.join(given)!r} differs from the old one ({', '.join(old)!r}); "
            "change values that leave the answer as it was, or leave the answer field empty"
        )
    return given or old


def apply_edits(table: Table, edits: Iterable[CellEdit]) -> Table:
    """The table with each edit's new value in its cell."""
    rows = [list(row) for row in table.rows]
    for e in edits:
        if not (0 <= e.row < len(rows) and 0 <= e.col < table.n_cols):
            raise TableError(f"{e.cell_id} is outside the table ({table.n_rows} rows x {table.n_cols} columns)")
        rows[e.row][e.col] = e.new
    return Table.build(table.header, rows, caption=table.caption, source=table.source, licence=table.licence)


def read_value_edit(
    shortened: Table, grid: str, *, mode: EditMode, old_answers: Sequence[str], new_answers: Sequence[str] | None,
) -> tuple[list[CellEdit], tuple[str, ...]]:
    """An annotator's edited grid, checked: (the changed cells, the gold answer after the edit)."""
    header, rows = parse_grid(grid)
    check_grid_shape(shortened, header, rows)
    edits = diff_tables(shortened, (header, rows))
    answers = check_value_edit(shortened, edits, mode=mode, old_answers=old_answers, new_answers=new_answers)
    return edits, answers

"""The perturbations' and the table id's fast paths against plain references, on tables chosen
to sit at their edges: cells holding the packing separators, repeated header names, equal
columns (where a drawn order can leave the table as it was and must be drawn again), no rows,
rows given as tuples and as packed strings."""

from __future__ import annotations

import json
import random

import pytest

from tqaforge import ids
from tqaforge.tables.perturb import PERTURBATIONS, PerturbationSkipped
from tqaforge.tables.perturb._ops import columns_taken, reorder
from tqaforge.tables.perturb.base import ItemContext, rng_for
from tqaforge.tables.perturb.relevant import shorten
from tqaforge.tables.perturb.structure import target_columns_back, target_columns_front
from tqaforge.tables.serialize import SERIALIZATIONS
from tqaforge.tables.table import PackedRows, Table

CELLS = ["a", "b", "1", "", "x\x1fy", "r\x1es", "\\", '"', "é", "a"]


def _hostile_table(rng: random.Random) -> Table:
    width = rng.randint(1, 5)
    names = rng.choice([[f"c{i}" for i in range(width)], [rng.choice(["n", "m"]) for _ in range(width)]])
    rows = [[rng.choice(CELLS[: rng.choice([3, len(CELLS)])]) for _ in range(width)] for _ in range(rng.randint(0, 5))]
    if rng.random() < 0.3:  # every column the same: the shuffle must skip
        rows = [[row[0]] * width for row in rows]
        names = [names[0]] * width
    table = Table.build(names, rows)
    return Table(table.header, PackedRows(table.rows)) if rng.random() < 0.5 else table


def _reference_shuffle_columns(table: Table, seed: int, *, redraw: bool = True) -> tuple[tuple[str, ...], list[tuple[str, ...]], tuple[int, ...]] | None:
    """shuffle_columns as first written: every column made, each draw compared with them."""
    m = table.n_cols
    rows = [tuple(row) for row in table.rows]
    columns = list(zip(table.header, zip(*rows) if rows else [()] * m))
    if m < 2 or all(col == columns[0] for col in columns):
        return None
    rng = rng_for(table, "shuffle_columns", seed)
    for _ in range(64):
        order = tuple(rng.sample(range(m), m))
        if not redraw or [columns[i] for i in order] != columns:
            break
    return tuple(table.header[i] for i in order), [tuple(row[i] for i in order) for row in rows], order


def _tables() -> list[Table]:
    rng = random.Random(26)
    return [_hostile_table(rng) for _ in range(400)]


def test_shuffle_columns_equals_the_reference_on_hostile_tables() -> None:
    seen_skips = seen_packed = seen_tuples = 0
    for i, table in enumerate(_tables()):
        expected = _reference_shuffle_columns(table, seed=i % 3)
        try:
            got = PERTURBATIONS["shuffle_columns"](table, ItemContext(), i % 3)
        except PerturbationSkipped:
            assert expected is None, table
            seen_skips += 1
            continue
        assert expected is not None, table
        header, rows, order = expected
        assert got.table.header == header and list(got.table.rows) == rows and got.change.col_order == order
        assert got.change.row_order == tuple(range(table.n_rows))
        if isinstance(got.table.rows, PackedRows):
            seen_packed += 1
        else:
            seen_tuples += 1  # a cell holds the packing separator: the rows stay tuples
        reference = Table.build(header, rows)
        for name, serializer in SERIALIZATIONS.items():
            assert serializer(got.table) == serializer(reference), name
    assert seen_skips and seen_packed and seen_tuples  # every path was taken


def test_control_the_tables_make_the_redraw_matter() -> None:
    """Without the redraw of orders that leave the table as it was, some results differ: the
    tables above reach the acceptance rule, so a wrong rule would be seen."""
    differ = sum(
        1
        for i, table in enumerate(_tables())
        if _reference_shuffle_columns(table, i % 3) != _reference_shuffle_columns(table, i % 3, redraw=False)
    )
    assert differ > 10


@pytest.mark.parametrize("shift", [target_columns_front, target_columns_back])
def test_target_columns_move_whole_columns(shift: object) -> None:
    rng = random.Random(7)
    checked = 0
    for table in _tables():
        if table.n_rows == 0:
            continue
        answer = rng.choice([cell for row in table.rows for cell in row])
        try:
            got = shift(table, ItemContext(answers=(answer,)), 0)  # type: ignore[operator]
        except PerturbationSkipped:
            continue
        order = got.change.col_order
        assert got.table.header == tuple(table.header[i] for i in order)
        assert list(got.table.rows) == [tuple(row[i] for i in order) for row in table.rows]
        checked += 1
    assert checked > 50


def test_columns_taken_by_any_order_or_selection_equal_the_picked_rows() -> None:
    """Permutations (the shuffles), selections and repeats (a shortened table keeps some
    columns; ``reorder`` takes this path whenever every row stays where it was)."""
    rng = random.Random(11)
    for table in _tables():
        for order in (
            tuple(rng.sample(range(table.n_cols), table.n_cols)),
            tuple(sorted(rng.sample(range(table.n_cols), rng.randint(1, table.n_cols)))),
            tuple(rng.choice(range(table.n_cols)) for _ in range(rng.randint(1, 4))),
        ):
            expected = [tuple(row[i] for i in order) for row in table.rows]
            assert list(columns_taken(table, order)) == expected, (table, order)
            moved = reorder(table, tuple(range(table.n_rows)), order)
            assert moved.header == tuple(table.header[i] for i in order) and list(moved.rows) == expected


def test_shorten_keeps_the_rows_and_columns_of_its_cells() -> None:
    table = Table(("name", "a", "b", "c"), PackedRows([["x", "1", "2", "3"], ["y", "4", "5", "6"]]))
    short, change = shorten(table, [(0, 2), (1, 2)])
    assert short.header == ("name", "b") and list(short.rows) == [("x", "2"), ("y", "5")]
    assert change.col_order == (0, 2) and change.row_order == (0, 1)


@pytest.mark.parametrize(
    "header",
    [["a", "é", '"q"', "\\", "\x1f", "\u2028", "\x00", "😀"], ["x"], [], ["dup", "dup"]],
)
def test_the_table_ids_header_text_is_the_encoders(header: list[str]) -> None:
    assert ids.json_string_list(header) == json.dumps(header, ensure_ascii=False, separators=(",", ":"))


def test_a_header_of_other_values_is_left_to_the_encoder() -> None:
    assert ids.json_string_list([1, "a", None]) == '[1,"a",null]'  # type: ignore[list-item]


def test_the_joined_id_equals_the_row_by_row_id_on_hostile_tables() -> None:
    for table in _tables():
        rows = [list(row) for row in table.rows]
        expected = ids.content_hash({"header": list(table.header), "rows": rows})
        assert ids.table_id(table.header, rows) == expected
        assert Table(table.header, table.rows).id == expected

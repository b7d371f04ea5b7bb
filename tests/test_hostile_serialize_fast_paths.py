"""The serializers' fast paths against plain references, on cells chosen to sit at their edges:
floats the pattern takes without parsing next to those it must leave to the exact check, cells
that csv must quote, and tables whose rows change under the one-entry caches."""

from __future__ import annotations

import csv
import io
import json
import random

import pytest

from tqaforge.tables.serialize import _column_values, serialize_csv, serialize_dataframe, serialize_json
from tqaforge.tables.table import PackedRows, Table

# Around every boundary of the float pattern: digit counts (7 + 8), trailing zeros, 1e-4,
# exponents, leading zeros, signs, and ints mixed in.
EDGE_NUMBERS = [
    "0.0", "-0.0", "0.00", "0.0001", "0.00001", "0.00012", "1.5", "1.50", "12.0", "10.0", "01.5",
    "1234567.12345678", "12345678.5", "1234567.123456789", "123456789012345.5", "0.1", "0.30000000000000004",
    "1e+16", "1.5e-07", "1e5", "5.", ".5", "-1.25", "3", "-7", "007", "-0", "", "1,234", "1.2.3", "nan", "inf",
    "9007199254740993.0", "2.675", "99999999.99999999",
]


def _reference_dataframe(table: Table) -> str:
    columns = list(zip(*table.rows)) if table.rows else [()] * table.n_cols
    names = table.header  # the tables here have unique names
    body = ", ".join(f"{json.dumps(n, ensure_ascii=False)}: {json.dumps(_column_values(tuple(c)), ensure_ascii=False)}"
                     for n, c in zip(names, columns))
    return f"pd.DataFrame({{{body}}}, index={list(range(table.n_rows))})"


@pytest.mark.parametrize("seed", range(40))
def test_dataframe_number_columns_match_the_value_by_value_reference(seed: int) -> None:
    rng = random.Random(seed)
    width = rng.randint(1, 6)
    columns = []
    for _ in range(width):
        pool = rng.choice([EDGE_NUMBERS, [c for c in EDGE_NUMBERS if "." in c], ["1", "22", "-3", "0"]])
        columns.append([rng.choice(pool) for _ in range(rng.randint(1, 8))])
    n = min(map(len, columns))
    rows = [[col[r] for col in columns] for r in range(n)]
    table = Table.build([f"c{i}" for i in range(width)], rows)
    assert serialize_dataframe(table) == _reference_dataframe(table)
    packed = Table(table.header, PackedRows(table.rows))
    assert serialize_dataframe(packed) == _reference_dataframe(table)


@pytest.mark.parametrize("seed", range(40))
def test_csv_quotes_exactly_as_the_csv_module(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = ['a', '1', ',', '"', '""', '\n', '\r\n', ' ', 'é', ';', '']
    width = rng.randint(2, 5)
    rows = [["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 4))) for _ in range(width)]
            for _ in range(rng.randint(0, 6))]
    header = [f"h{i}" for i in range(width)]
    out = io.StringIO(newline="")
    others = any(d in cell for row in rows for cell in row for d in ";\t|")
    csv.writer(out, lineterminator="\r\n", quoting=csv.QUOTE_ALL if others else csv.QUOTE_MINIMAL).writerows([header, *rows])
    table = Table.build(header, rows)
    assert serialize_csv(table) == out.getvalue().removesuffix("\r\n")
    assert serialize_csv(Table(table.header, PackedRows(table.rows))) == out.getvalue().removesuffix("\r\n")


# Every character a fast path treats specially: JSON escapes (quote, backslash, controls), the
# packed-row separators, DEL (the dataframe's column separator), % (a format character), pipes.
HOSTILE_CHARACTERS = ['a', '1', '"', '\\', '\n', '\t', '\x00', '\x1e', '\x1f', '\x7f', '%', '%s', '|', 'é', '\u2028', ' ', '']


@pytest.mark.parametrize("seed", range(60))
def test_json_and_dataframe_of_hostile_cells_match_the_references(seed: int) -> None:
    rng = random.Random(seed)
    width = rng.randint(1, 5)
    def cell() -> str:
        return "".join(rng.choice(HOSTILE_CHARACTERS) for _ in range(rng.randint(0, 4)))
    rows = [[cell() if rng.random() < 0.7 else rng.choice(EDGE_NUMBERS) for _ in range(width)] for _ in range(rng.randint(0, 6))]
    header = [f"h{i}{rng.choice(HOSTILE_CHARACTERS)}" for i in range(width)]
    table = Table.build(header, rows)
    for t in (table, Table(table.header, PackedRows(table.rows))):
        want_json = json.dumps({str(i): dict(zip(header, row)) for i, row in enumerate(rows)}, ensure_ascii=False)
        assert serialize_json(t) == want_json
        assert serialize_dataframe(t) == _reference_dataframe(table)


def test_rows_appended_after_a_serialization_are_not_served_from_the_cache() -> None:
    rows = PackedRows([["a", "1"]])
    table = Table(("x", "y"), rows)
    assert serialize_json(table) == '{"0": {"x": "a", "y": "1"}}'
    rows.append(["b", "2"])  # what a reader does while reading (never after, but the cache must not care)
    assert serialize_json(Table(("x", "y"), rows)) == '{"0": {"x": "a", "y": "1"}, "1": {"x": "b", "y": "2"}}'


def test_a_list_header_changed_in_place_is_keyed_afresh() -> None:
    header = ["a", "b"]
    table = Table(header, (("1", "x"),))  # type: ignore[arg-type]  # a list, as careless code may pass
    assert serialize_json(table) == '{"0": {"a": "1", "b": "x"}}'
    header[1] = "c"
    assert serialize_json(table) == '{"0": {"a": "1", "c": "x"}}'


def test_rows_given_as_a_list_changed_in_place_are_joined_afresh() -> None:
    """The one-entry cache of joined rows keeps a Table's immutable rows only: a list of rows a
    caller changes between two calls is joined again, never served from the cache."""
    from tqaforge.tables.table import joined_rows

    rows = [["a", "b"], ["c", "d"]]
    first = joined_rows(rows, 2)
    rows[1][0] = "changed"
    second = joined_rows(rows, 2)
    assert first != second and second is not None and "changed" in second


def test_a_hostile_file_without_its_own_pytestmark_is_in_the_hostile_suite(request: pytest.FixtureRequest) -> None:
    """This file marks nothing itself: tests/conftest.py puts every test of tests/test_hostile_*.py
    in the suite `-m hostile` selects (eleven such files were left out before)."""
    assert "pytestmark" not in globals()  # the condition the test is about
    assert request.node.get_closest_marker("hostile") is not None

"""TEDS (tqaforge.tables.teds) against a reference implementation, and hand-computed values.

The reference is ``table-recognition-metric`` (PyPI, a packaging of IBM's PubTabNet TEDS code by
Zhong et al.): it reads HTML with lxml, builds its own trees and costs (python-Levenshtein). Ours
builds trees from our layouts, so the HTML the reference reads is written here, independently of
tqaforge's writers.
"""

from __future__ import annotations

import html
import random

import pytest
from table_recognition_metric import TEDS as ReferenceTEDS

from tqaforge.tables.table import Table
from tqaforge.tables.teds import Layout, SpanCell, TedsTooLarge, teds, teds_scores, tree_edit_distance


def _cell_html(cell: SpanCell) -> str:
    attrs = (f' colspan="{cell.colspan}"' if cell.colspan != 1 else "") + (f' rowspan="{cell.rowspan}"' if cell.rowspan != 1 else "")
    return f"<td{attrs}>{html.escape(cell.text, quote=False)}</td>"


def reference_html(layout: Layout) -> str:
    """The layout as PubTabNet HTML (a whole document: the reference looks for body/table)."""
    parts = []
    for tag, rows in (("thead", layout.head), ("tbody", layout.body)):
        if rows:
            parts.append(f"<{tag}>" + "".join("<tr>" + "".join(map(_cell_html, row)) + "</tr>" for row in rows) + f"</{tag}>")
    return "<html><body><table>" + "".join(parts) + "</table></body></html>"


def _reference(a: Layout, b: Layout, structure_only: bool) -> float:
    return float(ReferenceTEDS(structure_only=structure_only)(reference_html(a), reference_html(b)))


def _levenshtein(x: str, y: str) -> int:
    """Plain dynamic programming, for the hand-computed checks."""
    previous = list(range(len(y) + 1))
    for i, cx in enumerate(x, 1):
        current = [i]
        for j, cy in enumerate(y, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (cx != cy)))
        previous = current
    return previous[-1]


def _table(rng: random.Random, n_rows: int, n_cols: int) -> Table:
    words = ["Oslo", "Bergen", "12", "3.5", "", "naïve café", "x < y & z", "東京", "a b", "-7", "2020", "N/A"]
    return Table.build([f"col{c}" for c in range(n_cols)], [[rng.choice(words) for _ in range(n_cols)] for _ in range(n_rows)])


def _edits(t: Table, rng: random.Random) -> list[tuple[str, Layout]]:
    """Named variants of ``t`` as layouts: the edits commanding asks for, and merged cells."""
    base = Layout.of(t)
    header, rows = list(t.header), [list(r) for r in t.rows]
    out: list[tuple[str, Layout]] = [("identical", base)]
    r, c = rng.randrange(len(rows)), rng.randrange(len(header))
    changed = [row[:] for row in rows]
    changed[r][c] = changed[r][c] + "!" if changed[r][c] != "Oslo" else "Oslp"
    out.append(("one cell changed", Layout.build([header], changed)))
    out.append(("a row removed", Layout.build([header], rows[:r] + rows[r + 1:])))
    out.append(("a row added", Layout.build([header], rows + [["new"] * len(header)])))
    if len(header) > 1:
        order = list(range(len(header)))
        order[0], order[-1] = order[-1], order[0]
        out.append(("columns swapped", Layout.build([[header[i] for i in order]], [[row[i] for i in order] for row in rows])))
        out.append(("a column removed", Layout.build([header[1:]], [row[1:] for row in rows])))
        merged = [SpanCell(rows[0][0] + " " + rows[0][1], colspan=2)] + [SpanCell(x) for x in rows[0][2:]]
        out.append(("a merged cell (colspan)", Layout.build([header], [merged] + rows[1:])))
    if len(rows) > 1:
        out.append(("rows reversed", Layout.build([header], rows[::-1])))
        spanned = [[SpanCell(rows[0][0], rowspan=2)] + [SpanCell(x) for x in rows[0][1:]], [SpanCell(x) for x in rows[1][1:]]]
        out.append(("a merged cell (rowspan)", Layout.build([header], spanned + rows[2:])))
    out.append(("header only", Layout.build([header], [])))
    out.append(("empty table", Layout()))
    out.append(("header in the body", Layout.build([], [header] + rows)))
    return out


def _pairs() -> list[tuple[str, Layout, Layout]]:
    rng = random.Random(27)
    pairs: list[tuple[str, Layout, Layout]] = []
    for n_rows, n_cols in [(1, 1), (2, 2), (3, 4), (5, 3), (4, 6), (1, 5)]:
        t = _table(rng, n_rows, n_cols)
        base = Layout.of(t)
        for name, edited in _edits(t, rng):
            pairs.append((f"{n_rows}x{n_cols} {name}", edited, base))
    pairs.append(("empty vs empty", Layout(), Layout()))
    pairs.append(("two merged headers", Layout.build([[SpanCell("year", rowspan=2), SpanCell("sales", colspan=2)], ["Q1", "Q2"]],
                                                     [["2020", "1", "2"]]),
                  Layout.build([["year", "Q1", "Q2"]], [["2020", "1", "2"]])))
    pairs.append(("whitespace and entities", Layout.build([["a&b"]], [[" x "], ["<td>"]]), Layout.build([["a&b"]], [["x"], ["td"]])))
    return pairs


PAIRS = _pairs()


def test_there_are_at_least_fifty_pairs_of_every_kind() -> None:
    assert len(PAIRS) >= 50
    kinds = " ".join(name for name, _, _ in PAIRS)
    for kind in ("identical", "one cell changed", "a row removed", "columns swapped", "colspan", "rowspan", "empty table"):
        assert kind in kinds


@pytest.mark.parametrize("structure_only", [False, True])
def test_teds_equals_the_reference_implementation_on_every_pair(structure_only: bool) -> None:
    differences = []
    for name, a, b in PAIRS:
        ours = teds(a, b, structure_only=structure_only)
        reference = _reference(a, b, structure_only)
        differences.append((abs(ours - reference), name, ours, reference))
    worst = max(differences)
    assert worst[0] <= 1e-6, worst
    # Not all trivially 1: the pairs do differ.
    assert sum(d[3] < 0.999 for d in differences) >= 30


def test_teds_is_symmetric_and_one_only_for_equal_tables() -> None:
    for name, a, b in PAIRS:
        assert teds(a, b) == pytest.approx(teds(b, a), abs=1e-12), name
        assert (teds(a, b) == 1.0) == (a == b), name


def test_hand_computed_values() -> None:
    a = Table.build(["name", "age"], [["Ann", "26"], ["Bo", "34"]])
    # 1 table + thead + tr + 2 td + tbody + 2 tr + 4 td = 12 nodes.
    assert Layout.of(a).n_nodes == 12
    b = Table.build(["name", "age"], [["Ann", "26"], ["Bob", "34"]])
    assert teds(a, b) == pytest.approx(1 - (_levenshtein("Bo", "Bob") / 3) / 12)
    # A row removed: its tr and two td deleted.
    c = Table.build(["name", "age"], [["Ann", "26"]])
    assert tree_edit_distance(a, c) == 3.0
    assert teds(a, c) == pytest.approx(1 - 3 / 12)
    # Columns swapped: six cells renamed (or three moved); structure-only sees no difference.
    d = Table.build(["age", "name"], [["26", "Ann"], ["34", "Bo"]])
    assert teds(a, d, structure_only=True) == 1.0
    assert teds(a, d) < 1.0
    # An empty table against a table: every node but the root inserted.
    assert teds(Layout(), a) == pytest.approx(1 - 11 / 12)
    assert teds(Layout(), Layout()) == 1.0
    # A merged cell: a different span costs 1 whatever the text.
    merged = Layout.build([["name", "age"]], [[SpanCell("Ann 26", colspan=2)], ["Bo", "34"]])
    assert tree_edit_distance(merged, a) == pytest.approx(2.0)  # one td renamed (span), one inserted


def test_scores_both() -> None:
    a = Table.build(["k"], [["abc"]])
    b = Table.build(["k"], [["abd"]])
    scores = teds_scores(a, b)
    assert scores.structure == 1.0
    assert scores.teds == pytest.approx(1 - (1 / 3) / 7)


def test_too_large_is_refused_before_any_work() -> None:
    big = Table.build(["a"] * 10, [["x"] * 10] * 200)
    with pytest.raises(TedsTooLarge, match="too large for TEDS"):
        teds(big, Table.build(["a"] * 10, [["y"] * 10] * 200))


def test_equal_trees_of_any_size_need_no_tree_edit_distance() -> None:
    big = Table.build(["a", "b"], [[str(i), "x"] for i in range(5_000)])
    assert teds(big, Table.build(big.header, big.rows)) == 1.0
    renamed = Table.build(big.header, [[str(i), "y"] for i in range(5_000)])
    assert teds(big, renamed, structure_only=True) == 1.0
    with pytest.raises(TedsTooLarge):
        teds(big, renamed)
    # The shortcut agrees with APTED where both run.
    small, other = Table.build(["a"], [["x"], ["y"]]), Table.build(["a"], [["p"], ["q"]])
    assert teds(small, other, structure_only=True) == 1.0 == _reference(Layout.of(small), Layout.of(other), True)

"""Target-cell matching: the four rules on hand-made cells, properties on random tables, and the
share of FREB-TQA extraction questions whose target row is found (skipped without ../shared)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tqaforge.tables.matching import (
    core_text,
    find_matches,
    find_target_cells,
    fold_text,
    match_answer,
    target_columns,
    target_rows,
)
from tqaforge.tables.table import Table

FREB_STR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "freb-tqa" / "01_str"


def one_column(*cells: str) -> Table:
    return Table.build(["c"], [[c] for c in cells])


@pytest.mark.parametrize(
    ("answer", "cell", "rule"),
    [
        ("Oslo", "Oslo", "exact"),
        ("oslo", " OSLO ", "exact"),
        ("1694", "1,694", "numeric"),
        ("1,694", "1694", "numeric"),
        ("1305", "$1,305", "numeric"),
        ("$1,305", "1305", "numeric"),
        ("24,264", "$24,264", "numeric"),
        ("65.7", "65.7%", "numeric"),
        ("-5906", "(5,906)", "numeric"),
        ("1887-1890", "1887\u20131890", "loose"),
        ("Anna Zagorska", "Anna Zag\u00f3rska", "loose"),
        ("Eu so quero", '"Eu s\u00f3 quero"', "loose"),
        ("Year Ended May 31", "Year Ended May 31,", "loose"),
        ("365,223", "(365,223)", "core"),
        ("Dzhebariki-Khaya", "Dzhebariki-Khaya\\n(\u0414\u0436\u0435\u0431\u0430\u0440\u0438\u043a\u0438)", "core"),
        ("Javine H", "Javine H[1]", "core"),
        ("Gold", "Gold*", "core"),
    ],
)
def test_rules(answer: str, cell: str, rule: str) -> None:
    matches = match_answer(one_column("other", cell), answer)
    assert [(m.cell, m.rule) for m in matches] == [((1, 0), rule)]


@pytest.mark.parametrize(
    ("answer", "cell"),
    [
        ("20", "20 - Indefinite"),  # a prefix is not the cell
        ("2019", "2018"),
        ("1", "10"),
        ("in millions", "(in millions)x"),
        ("Anna", "Anna Zagorska"),
        ("12", "(12) apples"),
    ],
)
def test_non_matches(answer: str, cell: str) -> None:
    assert match_answer(one_column(cell), answer) == ()


def test_blank_answers_match_nothing() -> None:
    table = one_column("", " ", "x")
    assert find_target_cells(table, ["", "  "]) == ()
    # A wholly parenthesised cell keeps its text; a remark in parentheses is dropped; a cell
    # that is only a footnote marker has no core and matches nothing.
    assert core_text("(in millions)") == "in millions"
    assert core_text("Total (in millions)") == "total"
    assert core_text("[3]") == ""
    assert find_target_cells(one_column("[3]", "*"), ["3"]) == ()


def test_stricter_rule_wins() -> None:
    # "1,694" matches the cell "1,694" exactly; "1694" (numeric) is not added next to it.
    table = one_column("1694", "1,694", "$1,694")
    assert [m.cell for m in match_answer(table, "1,694")] == [(1, 0)]
    # With no exact cell, every numerically equal cell is a target.
    assert [m.cell for m in match_answer(table, "1694.0")] == [(0, 0), (1, 0), (2, 0)]


def test_header_is_not_searched() -> None:
    table = Table.build(["No", "Yes"], [["a", "b"]])
    assert find_target_cells(table, ["No"]) == ()


def test_several_answers_union() -> None:
    table = Table.build(["name", "country"], [["Ann", "NO"], ["Bo", "SE"], ["Cy", "NO"]])
    assert find_target_cells(table, ["Bo", "Cy"]) == ((1, 0), (2, 0))
    assert target_rows(table, ["NO"]) == (0, 2)
    assert target_columns(table, ["NO", "Ann"]) == (0, 1)
    assert {m.answer for m in find_matches(table, ["Bo", "nobody"])} == {"Bo"}


def test_fold_text() -> None:
    assert fold_text("  \u201cCaf\u00e9\u201d \u2014 Bar. ") == "cafe - bar"


cells = st.one_of(
    st.sampled_from(["", "Oslo", "oslo", "1,694", "1694", "$5", "(12)", "12", "a-b", "a\u2013b", "x [1]"]),
    st.text(alphabet="abc 1,.$()-", max_size=6),
)


@st.composite
def tables(draw: st.DrawFn) -> Table:
    n_cols = draw(st.integers(1, 5))
    n_rows = draw(st.integers(1, 12))
    header = draw(st.lists(cells, min_size=n_cols, max_size=n_cols))
    rows = draw(st.lists(st.lists(cells, min_size=n_cols, max_size=n_cols), min_size=n_rows, max_size=n_rows))
    return Table.build(header, rows)


@settings(max_examples=150, deadline=None)
@given(tables(), st.data())
def test_every_non_blank_cell_finds_itself(table: Table, data: st.DataObject) -> None:
    r = data.draw(st.integers(0, table.n_rows - 1))
    c = data.draw(st.integers(0, table.n_cols - 1))
    text = table.cell(r, c)
    found = find_target_cells(table, [text])
    if text.strip():
        assert (r, c) in found
        # The stricter rules found it, so every hit is exactly equal after normalisation.
        assert all(m.rule == "exact" for m in match_answer(table, text))
    else:
        assert found == ()
    assert target_rows(table, [text]) == tuple(sorted({x for x, _ in found}))
    assert target_columns(table, [text]) == tuple(sorted({y for _, y in found}))


@pytest.mark.shared
def test_freb_target_rows_found() -> None:
    """Share of FREB-TQA extraction questions whose answer cell (hence target row) is found.

    Measured with these rules: WTQ 202/205, SQA 155/157, TAT 112/114, overall 469/476
    (98.5%); FREB-TQA's exact string match finds 202, 142 and 107 (94.7%). The 7 misses are
    answers found only in the header (WTQ "No", "Chromic catgut", "Javine H", TAT "Year Ended
    May 31"), a transliteration and a reformatted coordinate in SQA, and TAT's "20" for the
    cell "20 - Indefinite". The thresholds leave a margin of about three items per file so a
    deliberate tightening of the rules shows up here rather than as silently skipped variants.
    """
    if not FREB_STR.is_dir():
        pytest.skip(f"shared data not available: {FREB_STR}")
    thresholds = {"wtq": 0.97, "sqa": 0.965, "tat": 0.955}
    found_all = total_all = 0
    for name, threshold in thresholds.items():
        found = total = 0
        with (FREB_STR / f"{name}_factoid_dev.jsonl").open(encoding="utf-8") as fh:
            for line in fh:
                if not line.strip():
                    continue
                obj = json.loads(line)
                table = Table.build(obj["table"]["header"], obj["table"]["rows"])
                total += 1
                found += bool(target_rows(table, obj["answers"]))
        share = found / total
        print(f"FREB-TQA {name}: target row found for {found}/{total} = {share:.1%}")
        assert share >= threshold, f"{name}: {share:.3f} < {threshold}"
        found_all += found
        total_all += total
    print(f"FREB-TQA overall: {found_all}/{total_all} = {found_all / total_all:.1%}")
    assert found_all / total_all >= 0.975

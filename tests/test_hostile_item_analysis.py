"""Hostile input to item analysis (issue 28, item 1): one system, no system, all-equal scores,
NaN, infinite or out-of-range scores, a score twice, items nobody scored, holes, identical
systems, names with terminal controls. Each ends in a clear EvaluateError (what, where, what to
do) or in a report that says what it could not compute; never a crash or a NaN in the JSON."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tqaforge.errors import EvaluateError
from tqaforge.evaluate.items import (
    SOLVED_BY_ALL,
    SOLVED_BY_NONE,
    ItemAnalysisOptions,
    ItemScores,
    adjudication_requests,
    analyse_items,
    fit_2pl,
    item_matrix,
)

pytestmark = pytest.mark.hostile


def _rows(data: list[list[float]]) -> list[tuple[str, str, float]]:
    return [(f"s{j}", f"q{i}", v) for i, row in enumerate(data) for j, v in enumerate(row)]


def test_one_system_is_refused_with_what_to_do() -> None:
    m = item_matrix([("gpt/DP", "q1", 1.0), ("gpt/DP", "q2", 0.0)])
    with pytest.raises(EvaluateError, match=r"1 is scored \(gpt/DP\)") as info:
        analyse_items(m)
    assert "2 or more systems" in (info.value.hint or "")


def test_no_system_at_all_is_refused() -> None:
    with pytest.raises(EvaluateError, match=r"0 is scored \(none\)"):
        analyse_items(item_matrix([], items=["q1", "q2"]))


@pytest.mark.parametrize("value", [1.0, 0.0])
def test_all_equal_scores_flag_every_item_and_fit_nothing(value: float) -> None:
    analysis = analyse_items(item_matrix(_rows([[value] * 12 for _ in range(6)])))
    flag = SOLVED_BY_ALL if value else SOLVED_BY_NONE
    assert all(s.flags == (flag,) and s.discrimination is None and s.difficulty == value for s in analysis.items)
    assert analysis.irt is None and "fewer than two items" in analysis.irt_note
    assert adjudication_requests(analysis) == []
    json.dumps(analysis.as_dict(), allow_nan=False)


def test_identical_systems_have_no_rest_variance_and_no_discrimination() -> None:
    analysis = analyse_items(item_matrix(_rows([[1, 1, 1], [0, 0, 0], [1, 1, 1]])))
    assert all(s.discrimination is None for s in analysis.items)
    assert [s.flags for s in analysis.items] == [(SOLVED_BY_ALL,), (SOLVED_BY_NONE,), (SOLVED_BY_ALL,)]


def test_two_systems_give_difficulty_but_no_correlation() -> None:
    analysis = analyse_items(item_matrix(_rows([[1, 0], [0, 1], [1, 1]])))
    assert [s.difficulty for s in analysis.items] == [0.5, 0.5, 1.0]
    assert all(s.discrimination is None and s.p_negative is None for s in analysis.items)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -0.1, 1.5, "abc", None])
def test_a_score_that_is_not_in_0_1_names_the_system_and_item(bad: object) -> None:
    rows: list[tuple[str, str, object]] = [("a/DP", "q1", 1.0), ("b/DP", "q1", 0.0), ("b/DP", "q7", bad)]
    with pytest.raises(EvaluateError, match=r"system b/DP, item q7") as info:
        item_matrix(rows)  # type: ignore[arg-type]
    assert "[0, 1]" in (info.value.hint or "")


def test_a_second_score_for_one_system_and_item_is_refused() -> None:
    with pytest.raises(EvaluateError, match=r"system a, item q1: scored twice"):
        item_matrix([("a", "q1", 1.0), ("a", "q1", 0.0)])


def test_items_nobody_scored_are_reported_not_flagged() -> None:
    rows = _rows([[1, 1, 0, 0], [1, 0, 1, 0], [0, 1, 1, 1]])
    analysis = analyse_items(item_matrix(rows, items=["q0", "q1", "q2", "lonely"], subtypes={"lonely": "Counting"}))
    lonely = analysis.items[-1]
    assert lonely.item_id == "lonely" and lonely.systems == 0 and lonely.difficulty is None and lonely.flags == ()
    assert analysis.unscored() == ["lonely"] and "1 items nobody scored" in analysis.lines()[0]
    assert "Counting" not in {s.subtype for s in analysis.subtypes}  # no share over nothing
    json.dumps(analysis.as_dict(), allow_nan=False)


def test_a_system_with_holes_is_scored_on_what_it_has() -> None:
    """A system run on only some items: its holes are skipped, not counted as wrong (the harness
    already scores a missing prediction in a scored group as 0)."""
    rows = _rows([[1, 1, 0, 0, 1], [1, 0, 1, 0, 0], [0, 1, 1, 1, 0], [1, 1, 1, 0, 0]])
    rows += [("partial", "q0", 1.0)]
    analysis = analyse_items(item_matrix(rows))
    assert analysis.items[0].systems == 6 and analysis.items[1].systems == 5
    assert analysis.items[1].difficulty == pytest.approx(2 / 5)
    # The partial system has no other item, so no rest score: q0's correlation uses the other five.
    assert analysis.items[0].discrimination is not None
    json.dumps(analysis.as_dict(), allow_nan=False)


def test_a_matrix_of_the_wrong_shape_is_refused() -> None:
    with pytest.raises(EvaluateError, match="shape"):
        ItemScores(("q1",), ("a", "b"), ("",), np.zeros((2, 2)))


@pytest.mark.parametrize("options", [ItemAnalysisOptions(right_at=0.0), ItemAnalysisOptions(suspect_alpha=1.5)])
def test_options_out_of_range_are_refused(options: ItemAnalysisOptions) -> None:
    with pytest.raises(EvaluateError, match="right_at"):
        analyse_items(item_matrix(_rows([[1, 0, 1], [0, 1, 1]])), options)


def test_the_irt_fit_skips_holes_and_degenerate_items() -> None:
    rng = np.random.default_rng(11)
    theta = np.linspace(-2, 2, 12)
    data = (rng.uniform(size=(15, 12)) < 1 / (1 + np.exp(-(theta[None, :] - rng.normal(0, 1, (15, 1)))))).astype(float)
    data[0] = 1.0
    rows = [r for r in _rows(data.tolist()) if not (r[1] == "q3" and r[0] in ("s0", "s5"))]
    fit = fit_2pl(item_matrix(rows, items=[f"q{i}" for i in range(15)] + ["nobody"]))
    assert fit is not None and "q0" in fit.left_out and "nobody" in fit.left_out and "q3" in fit.items
    assert all(np.isfinite(fit.a)) and all(np.isfinite(fit.b)) and len(fit.ability) == 12


def test_names_with_terminal_controls_are_escaped_in_the_text() -> None:
    rows = [("\x1b[31mevil", "q\x1b]0;x\x07", 0.0), ("good", "q\x1b]0;x\x07", 1.0), ("third", "q\x1b]0;x\x07", 1.0),
            ("\x1b[31mevil", "q2", 1.0), ("good", "q2", 1.0), ("third", "q2", 1.0)]
    text = "\n".join(analyse_items(item_matrix(rows)).lines())
    assert "\x1b" not in text and "\x07" not in text

"""Hostile input to the paired statistics (evaluate/significance.py): unequal lengths, NaN and
infinite scores, scores outside 0-1 (percentages), text, nested lists, mismatched item ids,
impossible settings, and a large input that must stay fast. Each is a ComparisonError (or the
bootstrap's own AgreementError for its settings) that says what and what to do; nothing is
silently dropped or truncated."""

from __future__ import annotations

import math

import numpy as np
import pytest
from cpu_clock import cpu_now

from tqaforge.errors import AgreementError, ComparisonError, EvaluateError, TqaforgeError
from tqaforge.evaluate.significance import (
    CompareOptions,
    compare,
    holm,
    mcnemar_exact,
    mcnemar_power,
    mdd_paired_binary,
    mdd_paired_means,
    paired_bootstrap,
    paired_permutation,
)

pytestmark = pytest.mark.hostile

PAIRED = [paired_bootstrap, mcnemar_exact, paired_permutation]


@pytest.mark.parametrize("fn", PAIRED)
def test_unequal_lengths(fn) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ComparisonError, match=r"one score per item from each system: got 3 and 2") as info:
        fn([1, 0, 1], [1, 0])
    assert "same items, in the same order" in str(info.value)


@pytest.mark.parametrize("fn", PAIRED)
@pytest.mark.parametrize("bad, what", [(math.nan, "NaN"), (math.inf, "NaN/inf"), (None, "NaN")])
def test_missing_scores(fn, bad, what) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ComparisonError, match=r"missing or infinite value\(s\) \(NaN/inf\), first at position 1") as info:
        fn([1.0, 0.0, 1.0], [1.0, bad, 0.0])
    assert "unanswered item is wrong (0)" in str(info.value)


@pytest.mark.parametrize("fn", PAIRED)
@pytest.mark.parametrize("bad", [1.5, -0.1, 80.0])
def test_scores_outside_zero_one(fn, bad) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ComparisonError, match=r"must lie from 0 to 1") as info:
        fn([bad, 0.0], [1.0, 0.0])
    assert "not percentages" in str(info.value) and "position 0" in str(info.value)


@pytest.mark.parametrize("bad", [["right", "wrong"], [[1, 0], [0, 1]], "10", {"a": 1}])
def test_not_a_list_of_numbers(bad) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ComparisonError, match=r"the scores of the first system must be"):
        paired_permutation(bad, [1, 0])


def test_mcnemar_refuses_graded_scores() -> None:
    with pytest.raises(ComparisonError, match=r"right/wrong scores \(0 or 1\); the scores of the second system are graded") as info:
        mcnemar_exact([1, 0, 1], [1, 0.5, 1])
    assert "paired_permutation" in str(info.value)


def test_mismatched_item_ids() -> None:
    scores = {"a": {"q1": 1.0, "q2": 0.0, "q3": 1.0}, "b": {"q1": 1.0, "q2": 1.0, "q9": 0.0}}
    with pytest.raises(ComparisonError, match=r"'b' is scored on other items than 'a': 1 missing \(first \['q3'\]\), "
                                               r"1 extra \(first \['q9'\]\)") as info:
        compare(scores)
    assert "same items" in str(info.value)
    fewer = {"a": {"q1": 1.0, "q2": 0.0}, "b": {"q1": 1.0}}
    with pytest.raises(ComparisonError, match=r"1 missing \(first \['q2'\]\), 0 extra"):
        compare(fewer)


def test_compare_bad_shapes_and_names() -> None:
    with pytest.raises(ComparisonError, match="two systems or more"):
        compare({"only": {"q": 1.0}})
    with pytest.raises(ComparisonError, match="mapping of item id to score"):
        compare({"a": {"q": 1.0}, "b": [1.0]})  # type: ignore[dict-item]
    with pytest.raises(ComparisonError, match=r"the baseline 'c' is not among the systems compared \('a', 'b'\)"):
        compare({"a": {"q": 1.0}, "b": {"q": 0.0}}, CompareOptions(baseline="c"))
    with pytest.raises(ComparisonError, match=r"the scores of 'b' hold 1 missing"):
        compare({"a": {"q": 1.0, "r": 0.0}, "b": {"q": math.nan, "r": 0.0}})
    with pytest.raises(ComparisonError, match="test must be auto, mcnemar or permutation"):
        compare({"a": {"q": 1.0}, "b": {"q": 0.0}}, CompareOptions(test="t-test"))  # type: ignore[arg-type]
    with pytest.raises(ComparisonError, match="graded"):
        compare({"a": {"q": 1.0}, "b": {"q": 0.5}}, CompareOptions(test="mcnemar"))


@pytest.mark.parametrize("options, pattern", [
    (CompareOptions(alpha=0.0), "alpha"), (CompareOptions(alpha=1.5), "alpha"), (CompareOptions(power=1.0), "power"),
    (CompareOptions(alpha=0.5, power=0.3), r"power \(0.3\) must exceed alpha"), (CompareOptions(alpha=True), "alpha"),  # type: ignore[arg-type]
    (CompareOptions(exact_up_to=40), "exact_up_to"), (CompareOptions(exact_up_to=-1), "exact_up_to"),
    (CompareOptions(n_permutations=0), "n_permutations"), (CompareOptions(n_permutations=2.5), "n_permutations"),  # type: ignore[arg-type]
])
def test_impossible_settings(options: CompareOptions, pattern: str) -> None:
    graded = {"a": {"q": 1.0, "r": 0.2}, "b": {"q": 0.5, "r": 0.0}}
    with pytest.raises(ComparisonError, match=pattern):
        compare(graded, options)


@pytest.mark.parametrize("kwargs", [{"n_resamples": -1}, {"n_resamples": 1.5}, {"confidence": 1.0}, {"seed": -3}])
def test_bootstrap_settings(kwargs) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(AgreementError) as info:
        paired_bootstrap([1, 0], [0, 0], **kwargs)
    assert isinstance(info.value, TqaforgeError) and "must" in str(info.value)


def test_bad_p_values_to_holm() -> None:
    for bad in ([0.01, math.nan], [0.2, 1.2], [-0.01]):
        with pytest.raises(ComparisonError, match="p-values"):
            holm(bad)


def test_bad_power_inputs() -> None:
    with pytest.raises(ComparisonError, match=r"discordant .* must lie in \(0, 1\]"):
        mdd_paired_binary(100, 0.0)
    with pytest.raises(ComparisonError, match="cannot exceed the share of discordant items"):
        mcnemar_power(100, 0.2, 0.3)
    with pytest.raises(ComparisonError, match=r"n \(the number of items\)"):
        mcnemar_power(0, 0.2, 0.1)
    with pytest.raises(ComparisonError, match=r"sd .* must be a positive number"):
        mdd_paired_means(100, 0.0)
    with pytest.raises(ComparisonError, match=r"sd .* must be a positive number"):
        mdd_paired_means(100, math.nan)


def test_a_comparison_error_is_an_evaluate_error() -> None:
    """The CLI prints TqaforgeError messages (no traceback); evaluate's handlers catch it too."""
    assert issubclass(ComparisonError, EvaluateError)


def test_large_release_stays_fast() -> None:
    """100,000 items, four systems (6 pairs, graded: Monte Carlo permutations; and binary: exact
    McNemar power over 100,001 discordant counts): seconds, not minutes."""
    rng = np.random.default_rng(0)
    n = 100_000
    ids = [f"i{k}" for k in range(n)]
    graded = {name: dict(zip(ids, rng.random(n).round(2).tolist())) for name in "abcd"}
    start = cpu_now()
    result = compare(graded, CompareOptions(n_resamples=1000, n_permutations=1000))
    binary = compare({k: {i: float(v >= 0.5) for i, v in s.items()} for k, s in graded.items()},
                     CompareOptions(n_resamples=1000))
    elapsed = cpu_now() - start
    assert len(result.pairs) == len(binary.pairs) == 6 and all(p.mdd is not None for p in binary.pairs)
    assert elapsed < 30, elapsed


def test_item_ids_of_mixed_types_are_aligned_not_crashed() -> None:
    """Ids as numbers in one system and text in another are other items (said so), and numbers
    mixed with text within one system still sort (as text) instead of raising a TypeError."""
    with pytest.raises(ComparisonError, match=r"2 missing \(first \[1, 2\]\), 2 extra \(first \['1', '2'\]\)"):
        compare({"a": {1: 1.0, 2: 0.0}, "b": {"1": 1.0, "2": 0.0}})  # type: ignore[dict-item]
    mixed = compare({"a": {1: 1.0, "q": 0.0}, "b": {1: 0.0, "q": 0.0}}, CompareOptions(n_resamples=10))  # type: ignore[dict-item]
    assert mixed.items == 2 and mixed.pairs[0].difference == pytest.approx(0.5)


def test_control_characters_in_names_are_escaped_in_the_text() -> None:
    result = compare({"evil\x1b[2J": {"q": 1.0}, "b\r": {"q": 0.0}}, CompareOptions(n_resamples=10))
    text = "\n".join(result.lines())
    assert "\x1b" not in text and "\r" not in text and "\\x1b" in text

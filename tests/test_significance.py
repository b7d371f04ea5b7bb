"""The paired statistics of evaluate/significance.py, each checked against an independent
implementation: statsmodels' McNemar test, multipletests (Holm) and NormalIndPower; scipy's
permutation_test and bootstrap (paired); a brute-force enumeration of sign assignments and of
small McNemar tables; and simulations (bootstrap coverage, McNemar power at the MDD)."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import NormalIndPower

from tqaforge.errors import ComparisonError
from tqaforge.evaluate.predictions import Reference
from tqaforge.evaluate.scoring import Scored
from tqaforge.evaluate.significance import (
    CompareOptions,
    compare,
    configuration_scores,
    holm,
    mcnemar_exact,
    mcnemar_power,
    mdd_paired_binary,
    mdd_paired_means,
    paired_bootstrap,
    paired_permutation,
    system_scores,
)


def _mean_diff(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x - y, axis=axis)


# --- McNemar -----------------------------------------------------------------------------------


def _statsmodels_mcnemar(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(bool), b.astype(bool)
    table = [[int((a & b).sum()), int((a & ~b).sum())], [int((~a & b).sum()), int((~a & ~b).sum())]]
    return float(mcnemar(table, exact=True).pvalue)


@pytest.mark.parametrize("n, p_a, p_b, seed", [(1, 0.5, 0.5, 0), (5, 0.5, 0.5, 1), (40, 0.7, 0.5, 2),
                                               (300, 0.6, 0.55, 3), (1000, 0.3, 0.35, 4)])
def test_mcnemar_equals_statsmodels_on_random_pairs(n: int, p_a: float, p_b: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a, b = (rng.random(n) < p_a).astype(float), (rng.random(n) < p_b).astype(float)
    result = mcnemar_exact(a, b)
    assert result.n == n
    assert result.only_first == int(((a == 1) & (b == 0)).sum()) and result.only_second == int(((a == 0) & (b == 1)).sum())
    assert result.p_value == pytest.approx(_statsmodels_mcnemar(a, b), rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("a, b", [
    ([1, 1, 0, 0], [1, 1, 0, 0]),   # no discordant pair: p = 1
    ([1, 1, 1], [1, 1, 1]),         # all ties, all right
    ([0], [1]),                     # one item, one discordant pair
    ([1], [1]),                     # one item, concordant
    ([1] * 10, [0] * 10),           # every pair discordant, one way
    ([True, False, True, False], [False, True, False, True]),  # booleans; balanced
])
def test_mcnemar_edges_equal_statsmodels(a: list, b: list) -> None:
    result = mcnemar_exact(a, b)
    assert result.p_value == pytest.approx(_statsmodels_mcnemar(np.array(a), np.array(b)), rel=1e-12)
    if result.discordant == 0:
        assert result.p_value == 1.0


def test_mcnemar_known_value() -> None:
    """6 discordant pairs all one way: p = 2 / 2^6."""
    assert mcnemar_exact([1] * 6 + [0, 1], [0] * 6 + [0, 1]).p_value == pytest.approx(2 / 64)


# --- Sign-flip permutation test ----------------------------------------------------------------


def _brute_force(a: np.ndarray, b: np.ndarray) -> float:
    """Every one of the 2^n swaps of an item's two scores, counted directly."""
    d = a - b
    observed = abs(d.mean())
    hits = sum(abs(np.mean(np.array(signs) * d)) >= observed - 1e-12 for signs in itertools.product((1, -1), repeat=len(d)))
    return hits / 2 ** len(d)


def _scipy_permutation(a: np.ndarray, b: np.ndarray) -> float:
    result = stats.permutation_test((a, b), _mean_diff, permutation_type="samples", vectorized=True,
                                    n_resamples=np.inf, alternative="two-sided")
    return float(result.pvalue)


@pytest.mark.parametrize("n, seed", [(1, 0), (2, 1), (6, 2), (9, 3), (12, 4), (14, 5)])
def test_permutation_exact_equals_scipy_and_brute_force(n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a, b = rng.random(n), rng.random(n)
    a[: n // 3] = b[: n // 3]  # a few ties: items that change nothing
    result = paired_permutation(a, b)
    assert result.exact and result.nonzero == n - n // 3 and result.n_permutations == 2 ** result.nonzero
    assert result.difference == pytest.approx(float(np.mean(a - b)))
    if n >= 2:  # scipy refuses a single item
        assert result.p_value == pytest.approx(_scipy_permutation(a, b), rel=1e-9)
    if n <= 12:
        assert result.p_value == pytest.approx(_brute_force(a, b), rel=1e-9)


def test_permutation_on_graded_scores_with_repeated_values_equals_scipy() -> None:
    """Scores on a grid (ROUGE-like steps): many equal |differences|, so ties of the statistic."""
    rng = np.random.default_rng(7)
    a, b = rng.integers(0, 5, 13) / 4, rng.integers(0, 5, 13) / 4
    assert paired_permutation(a, b).p_value == pytest.approx(_scipy_permutation(a, b), rel=1e-9)


def test_permutation_all_ties_and_one_item() -> None:
    ties = paired_permutation([0.5, 0.2, 1.0], [0.5, 0.2, 1.0])
    assert ties.p_value == 1.0 and ties.nonzero == 0 and ties.exact
    assert _scipy_permutation(np.array([0.5, 0.2, 1.0]), np.array([0.5, 0.2, 1.0])) == 1.0
    one = paired_permutation([0.9], [0.1])
    assert one.p_value == 1.0 and one.difference == pytest.approx(0.8)  # either sign is as far from 0


def test_permutation_exact_at_twenty_nonzero_equals_brute_force_count() -> None:
    """The largest default exact case (2^20 assignments, enumerated in two halves) against the
    direct count over a (2^20 x 20) sign matrix."""
    rng = np.random.default_rng(11)
    a, b = rng.random(20), rng.random(20)
    result = paired_permutation(a, b)
    d = a - b
    hits = 0
    for start in range(0, 2 ** 20, 2 ** 16):  # in pieces: a whole sign matrix would take 160 MB
        signs = 1 - 2 * ((np.arange(start, start + 2 ** 16)[:, None] >> np.arange(20)) & 1)
        hits += int(np.sum(np.abs(signs @ d) >= abs(d.sum()) - 1e-9))
    direct = hits / 2 ** 20
    assert result.exact and result.p_value == pytest.approx(direct, rel=1e-12)


def test_permutation_monte_carlo_agrees_with_exact_and_is_seeded() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.random(18), rng.random(18) * 0.8
    exact = paired_permutation(a, b).p_value
    mc = paired_permutation(a, b, exact_up_to=10, n_permutations=40_000, seed=5)
    assert not mc.exact and mc.n_permutations == 40_000 and mc.seed == 5
    se = math.sqrt(exact * (1 - exact) / 40_000)
    assert abs(mc.p_value - exact) < 4 * se + 1e-4
    assert paired_permutation(a, b, exact_up_to=10, n_permutations=40_000, seed=5).p_value == mc.p_value
    # Beyond the exact limit (30 non-zero differences): against scipy's own Monte Carlo.
    a, b = rng.random(30), rng.random(30)
    mc = paired_permutation(a, b, n_permutations=40_000, seed=1)
    reference = stats.permutation_test((a, b), _mean_diff, permutation_type="samples", vectorized=True,
                                       n_resamples=40_000, rng=np.random.default_rng(2)).pvalue
    assert not mc.exact and abs(mc.p_value - reference) < 8 * math.sqrt(reference * (1 - reference) / 40_000) + 1e-4


def test_permutation_monte_carlo_on_repeated_differences_agrees_with_exact() -> None:
    """Differences on a grid (few distinct sizes): the Monte Carlo draws how many of each size
    get a + sign (binomially) instead of one sign each; the same distribution, so the same p."""
    rng = np.random.default_rng(12)
    d = rng.integers(1, 5, 22) / 4 * rng.choice([-1, 1], 22)
    d[:4] = np.abs(d[:4])  # lean one way
    a = np.clip(d, 0, 1)
    b = np.clip(-d, 0, 1)
    exact = paired_permutation(a, b).p_value
    mc = paired_permutation(a, b, exact_up_to=10, n_permutations=40_000, seed=2)
    assert not mc.exact and abs(mc.p_value - exact) < 4 * math.sqrt(exact * (1 - exact) / 40_000) + 1e-4


def test_permutation_monte_carlo_p_is_never_zero() -> None:
    p = paired_permutation([1.0] * 40, [0.0] * 40, n_permutations=1000, seed=0).p_value
    assert p == pytest.approx(1 / 1001)


# --- Holm --------------------------------------------------------------------------------------


@pytest.mark.parametrize("m, seed", [(1, 0), (2, 1), (5, 2), (12, 3), (40, 4)])
def test_holm_equals_statsmodels(m: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    p = rng.random(m) ** 3  # several small ones
    if m > 3:
        p[1] = p[2]  # a tie
        p[0] = 1.0
    adjusted = holm(list(p))
    reject, reference, _, _ = multipletests(p, alpha=0.05, method="holm")
    assert adjusted == pytest.approx(list(reference), rel=1e-12, abs=1e-15)
    assert [a <= 0.05 for a in adjusted] == list(reject)


def test_holm_edges() -> None:
    assert holm([]) == []
    assert holm([0.0, 0.0]) == [0.0, 0.0]
    assert holm([1.0, 1.0, 1.0]) == [1.0, 1.0, 1.0]
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])


# --- Paired bootstrap --------------------------------------------------------------------------


@pytest.mark.parametrize("binary", [False, True])
def test_bootstrap_interval_matches_scipy_paired_percentile(binary: bool) -> None:
    rng = np.random.default_rng(21)
    n = 150
    if binary:
        a, b = (rng.random(n) < 0.7).astype(float), (rng.random(n) < 0.6).astype(float)
    else:
        a, b = rng.beta(3, 2, n), rng.beta(2, 2, n)
    ours = paired_bootstrap(a, b, n_resamples=20_000, confidence=0.9, seed=4)
    theirs = stats.bootstrap((a, b), _mean_diff, paired=True, vectorized=True, method="percentile",
                             n_resamples=20_000, confidence_level=0.9, rng=np.random.default_rng(9))
    assert ours.difference == pytest.approx(float(np.mean(a - b)), abs=1e-12)
    se = float(np.std(a - b, ddof=1) / math.sqrt(n))
    # Two seeds, two Monte Carlo estimates of the same quantiles: close within a small share of the SE.
    assert ours.low == pytest.approx(theirs.confidence_interval.low, abs=0.1 * se)
    assert ours.high == pytest.approx(theirs.confidence_interval.high, abs=0.1 * se)
    assert paired_bootstrap(a, b, n_resamples=20_000, confidence=0.9, seed=4) == ours  # seeded


def test_bootstrap_coverage_on_simulated_data() -> None:
    """The 90% interval covers the true difference in about 90% of 300 simulated benchmarks."""
    rng = np.random.default_rng(5)
    true = 0.7 - 0.6
    covered = 0
    for i in range(300):
        a, b = (rng.random(120) < 0.7).astype(float), (rng.random(120) < 0.6).astype(float)
        ci = paired_bootstrap(a, b, n_resamples=1000, confidence=0.9, seed=i)
        assert ci.low is not None and ci.high is not None
        covered += ci.low <= true <= ci.high
    assert 0.84 <= covered / 300 <= 0.95


def test_bootstrap_edges() -> None:
    one = paired_bootstrap([0.8], [0.3], n_resamples=100)
    assert (one.difference, one.low, one.high) == pytest.approx((0.5, 0.5, 0.5))
    same = paired_bootstrap([1, 0, 1], [1, 0, 1], n_resamples=100)
    assert (same.difference, same.low, same.high) == (0.0, 0.0, 0.0)
    none = paired_bootstrap([1, 0], [0, 0], n_resamples=0)
    assert none.low is None and none.high is None and none.reason and "n_boot = 0" in none.reason


# --- Minimum detectable differences ------------------------------------------------------------


@pytest.mark.parametrize("n, sd, alpha, power", [(30, 0.4, 0.05, 0.8), (500, 0.3, 0.01, 0.9), (2, 1.0, 0.1, 0.5)])
def test_mdd_means_equals_statsmodels_normal_power(n: int, sd: float, alpha: float, power: float) -> None:
    mdd = mdd_paired_means(n, sd, alpha=alpha, power=power)
    analysis = NormalIndPower()
    # At our MDD, statsmodels' one-sample normal power is the target...
    assert analysis.power(effect_size=mdd / sd, nobs1=n, alpha=alpha, ratio=0) == pytest.approx(power, abs=1e-9)
    # ...and its own solver finds the same effect size (to its tolerance).
    solved = analysis.solve_power(effect_size=None, nobs1=n, alpha=alpha, power=power, ratio=0)
    assert mdd / sd == pytest.approx(solved, rel=1e-4)
    z = stats.norm.isf(alpha / 2) + stats.norm.ppf(power)
    assert mdd == pytest.approx(z * sd / math.sqrt(n), rel=0.02)  # the textbook one-tail formula


def _enumerated_mcnemar_power(n: int, psi: float, delta: float, alpha: float) -> float:
    """Every table of n items (right only in the first, only in the second, the rest), weighted by
    its multinomial probability, tested by statsmodels."""
    p10, p01 = (psi + delta) / 2, (psi - delta) / 2
    total = 0.0
    for b in range(n + 1):
        for c in range(n + 1 - b):
            prob = stats.multinomial.pmf([b, c, n - b - c], n, [p10, p01, 1 - psi])
            if mcnemar([[0, b], [c, n - b - c]], exact=True).pvalue <= alpha:
                total += prob
    return total


@pytest.mark.parametrize("n, psi, delta, alpha", [(12, 0.5, 0.3, 0.05), (15, 0.3, 0.1, 0.1), (10, 1.0, 0.6, 0.05)])
def test_mcnemar_power_equals_enumeration_with_statsmodels(n: int, psi: float, delta: float, alpha: float) -> None:
    assert mcnemar_power(n, psi, delta, alpha=alpha) == pytest.approx(_enumerated_mcnemar_power(n, psi, delta, alpha), abs=1e-12)


def test_mdd_binary_reaches_its_power_in_simulation_with_statsmodels() -> None:
    n, psi = 200, 0.25
    mdd = mdd_paired_binary(n, psi)
    assert mdd is not None and 0 < mdd < psi
    assert mcnemar_power(n, psi, mdd) == pytest.approx(0.8, abs=1e-8)
    rng = np.random.default_rng(8)
    tables = rng.multinomial(n, [(psi + mdd) / 2, (psi - mdd) / 2, 1 - psi], size=3000)
    rejected = np.mean([mcnemar([[0, b], [c, r]], exact=True).pvalue <= 0.05 for b, c, r in tables])
    assert rejected == pytest.approx(0.8, abs=4 * math.sqrt(0.8 * 0.2 / 3000))
    # Larger releases detect smaller differences.
    larger = mdd_paired_binary(4 * n, psi)
    assert larger is not None and larger < mdd


def test_mdd_binary_none_when_too_few_items() -> None:
    """Five items: the exact test's smallest p is 2/32 > 0.05, nothing is detectable."""
    assert mdd_paired_binary(5, 0.4) is None
    assert mcnemar_power(5, 1.0, 1.0) == 0.0


# --- The comparison ----------------------------------------------------------------------------


def _systems(rng: np.random.Generator, rates: dict[str, float], n: int) -> dict[str, dict[str, float]]:
    return {name: {f"item-{i:03d}": float(rng.random() < rate) for i in range(n)} for name, rate in rates.items()}


def test_compare_binary_family_against_statsmodels() -> None:
    rng = np.random.default_rng(0)
    scores = _systems(rng, {"strong": 0.9, "mid": 0.6, "also-mid": 0.58, "weak": 0.3}, 120)
    result = compare(scores, CompareOptions(n_resamples=2000, seed=3))
    assert result.items == 120 and len(result.pairs) == 6
    ids = sorted(scores["strong"])
    raw = []
    for pair in result.pairs:
        a = np.array([scores[pair.first][i] for i in ids])
        b = np.array([scores[pair.second][i] for i in ids])
        assert pair.test == "mcnemar" and pair.p_value == pytest.approx(_statsmodels_mcnemar(a, b), rel=1e-12)
        assert pair.difference == pytest.approx(a.mean() - b.mean())
        assert pair.interval.low is not None and pair.interval.low <= pair.difference <= (pair.interval.high or 0)
        assert pair.mdd == pytest.approx(mdd_paired_binary(120, float(np.mean(a != b))))
        assert pair.below_mdd == (abs(pair.difference) < (pair.mdd or 0))
        raw.append(pair.p_value)
    reject, adjusted, _, _ = multipletests(raw, alpha=0.05, method="holm")
    assert [p.p_holm for p in result.pairs] == pytest.approx(list(adjusted), rel=1e-12)
    assert [p.significant for p in result.pairs] == list(reject)
    by = {(p.first, p.second): p for p in result.pairs}
    assert by["strong", "weak"].significant
    assert not by["mid", "also-mid"].significant and by["mid", "also-mid"].below_mdd
    text = "\n".join(result.lines())
    assert "Holm" in text and "below MDD" in text and "significant" in text
    data = json.loads(json.dumps(result.as_dict()))
    assert data["pairs"][0]["p_holm"] == result.pairs[0].p_holm and data["systems"] == list(scores)


def test_compare_graded_configurations_against_a_baseline() -> None:
    rng = np.random.default_rng(1)
    base = rng.beta(4, 2, 60)
    scores = {
        "csv/none": {f"i{k}": float(v) for k, v in enumerate(base)},
        "json/none": {f"i{k}": float(np.clip(v + rng.normal(0, 0.05), 0, 1)) for k, v in enumerate(base)},
        "csv/transpose": {f"i{k}": float(np.clip(v - 0.3, 0, 1)) for k, v in enumerate(base)},
    }
    result = compare(scores, CompareOptions(baseline="csv/none", n_resamples=1000, n_permutations=5000))
    assert [(p.first, p.second) for p in result.pairs] == [("csv/none", "json/none"), ("csv/none", "csv/transpose")]
    for pair in result.pairs:
        ids = sorted(scores["csv/none"])
        a = np.array([scores[pair.first][i] for i in ids])
        b = np.array([scores[pair.second][i] for i in ids])
        assert pair.test == "permutation" and pair.permutation is not None and not pair.permutation.exact
        assert pair.mdd == pytest.approx(mdd_paired_means(60, float(np.std(a - b, ddof=1))))
    assert result.pairs[1].significant and result.pairs[1].difference > 0.2
    assert holm([p.p_value for p in result.pairs]) == [p.p_holm for p in result.pairs]


def test_compare_mdd_reasons_and_forced_test() -> None:
    same = {"a": {"x": 1.0, "y": 0.0}, "b": {"x": 1.0, "y": 0.0}}
    result = compare(same, CompareOptions(n_resamples=100))
    assert result.pairs[0].mdd is None and result.pairs[0].below_mdd is None
    assert "no discordant item" in (result.pairs[0].mdd_reason or "") and "no MDD" in "\n".join(result.lines())
    forced = compare(same, CompareOptions(test="permutation", n_resamples=100))
    assert forced.pairs[0].test == "permutation" and "never vary" in (forced.pairs[0].mdd_reason or "")
    one = compare({"a": {"x": 0.4}, "b": {"x": 0.6}}, CompareOptions(n_resamples=100))
    assert one.pairs[0].mdd is None and "one item" in (one.pairs[0].mdd_reason or "")


def test_planted_difference_below_the_detectable_one_is_flagged() -> None:
    """Two models whose true accuracies differ by 2 points on 300 items (the issue's planted
    case): the MDD is far larger, so the pair is reported below it."""
    rng = np.random.default_rng(4)
    latent = rng.random(300)
    scores = {"m1": {f"q{i}": float(u < 0.62) for i, u in enumerate(latent)},
              "m2": {f"q{i}": float(v < 0.60) for i, v in enumerate(rng.random(300))}}
    pair = compare(scores, CompareOptions(n_resamples=500)).pairs[0]
    assert pair.mdd is not None and pair.mdd > 0.05 and pair.below_mdd and not pair.significant


def _scored(system: str, subset: str, config: str, item: str, score: float) -> Scored:
    model, method = system.split("/")
    ref = Reference(id=f"{item}-{config}", subset=subset, item_id=item, config=config, qtype="FactChecking",
                    qsubtype="MatchBased", answer=("x",), answer_text="x", row=0)
    return Scored(ref=ref, model=model, method=method, answered=True, score=score, correct=score == 1.0)


def test_scores_from_evaluate_rows() -> None:
    rows = [_scored("m/DP", "base", "base", "a", 1.0), _scored("m/DP", "base", "base", "b", 0.5),
            _scored("n/PoT", "base", "base", "a", 0.0), _scored("n/PoT", "base", "base", "b", 1.0),
            _scored("m/DP", "configurations", "csv/none", "a", 1.0), _scored("m/DP", "configurations", "json/none", "a", 0.25),
            _scored("n/PoT", "configurations", "csv/none", "a", 0.0)]
    assert system_scores(rows) == {"m/DP": {"a-base": 1.0, "b-base": 0.5}, "n/PoT": {"a-base": 0.0, "b-base": 1.0}}
    assert system_scores(rows, binary=True)["m/DP"] == {"a-base": 1.0, "b-base": 0.0}
    assert configuration_scores(rows, "m/DP") == {"csv/none": {"a": 1.0}, "json/none": {"a": 0.25}}
    assert compare(configuration_scores(rows, "m/DP"), CompareOptions(n_resamples=10)).pairs[0].difference == pytest.approx(0.75)


# --- n = 0 ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("call", [
    lambda: paired_bootstrap([], []), lambda: mcnemar_exact([], []), lambda: paired_permutation([], []),
    lambda: compare({"a": {}, "b": {}}),
])
def test_no_items_is_a_clear_error(call) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ComparisonError, match=r"no items to compare \(n = 0\)"):
        call()

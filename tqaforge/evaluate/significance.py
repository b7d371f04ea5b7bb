"""Differences that count: paired comparisons of systems (or configurations) on the same items.

Two systems scored on the same items are compared item by item (the pairs, not the two means):

- :func:`paired_bootstrap`: the difference in mean score, ``mean(a) - mean(b)``, with a seeded
  percentile bootstrap interval over items (the items are resampled, each with both its scores;
  the resampling is :func:`tqaforge.annotation.bootstrap.bootstrap_ci`, the agreement reports' own);
- :func:`mcnemar_exact`: McNemar's exact test for right/wrong scores, the two-sided binomial
  test (p = 1/2) on the discordant pairs: ``p = min(1, 2 * P(Bin(b + c, 1/2) <= min(b, c)))``;
- :func:`paired_permutation`: the sign-flip permutation test for graded scores. Under the null
  hypothesis that the two systems are exchangeable on each item, every per-item difference is
  as likely to have either sign; the p-value is the share of the ``2^m`` sign assignments of
  the ``m`` non-zero differences whose mean is at least as far from 0 as the observed one
  (two-sided). Exact (every assignment, in two halves: ``2^(m/2)`` sums each) when ``m`` is at
  most ``exact_up_to`` (20), else a seeded Monte Carlo of ``n_permutations`` random assignments
  with ``p = (1 + hits) / (1 + n_permutations)`` (never 0; Phipson and Smyth 2010);
- :func:`holm`: Holm's step-down adjustment of a family of p-values (adjusted ``p <= alpha``
  exactly when Holm's procedure rejects at ``alpha``);
- the **minimum detectable difference** at a size, power and alpha, in one of two ways, each
  matching the test that is run on the pair:

  * :func:`mdd_paired_binary` (right/wrong, McNemar): the smallest difference in accuracy that
    McNemar's *exact* test detects with the given power, given the share of discordant items
    ``psi`` (taken from the observed pair). Its power is computed exactly (:func:`mcnemar_power`:
    the number of discordant items is Bin(n, psi), and given it the test's rejection region is
    summed under Bin(d, (psi + delta) / (2 psi))), not by the normal approximation, which is
    poor at the small discordant counts a benchmark release has;
  * :func:`mdd_paired_means` (graded scores): the normal approximation of a paired test of the
    mean difference with the observed standard deviation of the per-item differences, solved
    with both tails (as statsmodels' ``NormalIndPower(ratio=0)``). The permutation test has no
    closed-form power; for a mean of n independent differences the normal approximation is what
    it converges to, and it needs only that one observed variance.

  The MDD is computed at the per-comparison ``alpha``: a difference below it is undetectable at
  that power even before any correction; within a Holm-corrected family the first step compares
  with ``alpha / m``, so the family's true MDD is larger (the MDD shown is a lower bound).

:func:`compare` runs all of this on several systems' per-item scores (all pairs, or each against
a baseline), corrects the family by Holm and returns a :class:`Comparison` that renders itself
(:meth:`Comparison.lines` for the terminal, :meth:`Comparison.as_dict` for JSON).
:func:`system_scores` and :func:`configuration_scores` take those per-item scores from what
:mod:`tqaforge.evaluate.scoring` gives (its ``Scored`` rows): the systems on one subset and
configuration, or one system across the configurations (serializations x perturbations).

>>> paired_bootstrap([1, 1, 0, 1], [0, 1, 0, 0], n_resamples=1000, seed=0).difference
0.5
>>> mcnemar_exact([1, 1, 1, 1, 1, 1, 0], [0, 0, 0, 0, 0, 0, 0]).p_value
0.03125
>>> holm([0.01, 0.04, 0.03])
[0.03, 0.06, 0.06]

Scores are fractions (0 to 1: the normalised item scores evaluate gives), finite, one per item
in the same order for both systems; anything else is a :class:`~tqaforge.errors.ComparisonError`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Literal, Mapping, Sequence

import numpy as np
from scipy import optimize, stats

from tqaforge.annotation.agreement import check_bootstrap
from tqaforge.annotation.bootstrap import bootstrap_ci, group_rows
from tqaforge.errors import ComparisonError
from tqaforge.evaluate.predictions import BASE_CONFIG, CONFIGURATIONS
from tqaforge.evaluate.scoring import Scored
from tqaforge.printable import escape_controls

__all__ = [
    "BootstrapInterval", "McNemarResult", "PermutationResult", "PairComparison", "Comparison", "CompareOptions",
    "paired_bootstrap", "mcnemar_exact", "paired_permutation", "holm", "mcnemar_power", "mdd_paired_binary",
    "mdd_paired_means", "compare", "system_scores", "configuration_scores",
]

#: The most non-zero differences whose 2^m sign assignments are enumerated (2^22 sums: 32 MB).
MAX_EXACT = 22
#: The most Monte Carlo sign assignments accepted.
MAX_PERMUTATIONS = 10_000_000
#: Random sign values drawn per chunk (bounds the memory of the Monte Carlo test).
_CHUNK = 2_000_000

TestName = Literal["auto", "mcnemar", "permutation"]
#: Per-item scores of one system, in item order (a list, or an array).
Scores = Sequence[float] | np.ndarray


# ---------------------------------------------------------------------------------------------
# Checks


def _whole(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _scores(values: Any, name: str) -> np.ndarray:
    """``values`` as a 1-D float array of fractions, or a ComparisonError saying what is wrong."""
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ComparisonError(f"the scores of {name} must be numbers (one per item), got {values!r:.80}",
                              hint="pass one score from 0 to 1 per item") from None
    if array.ndim != 1:
        raise ComparisonError(f"the scores of {name} must be a flat list (one per item), got shape {array.shape}",
                              hint="pass one score from 0 to 1 per item")
    bad = np.flatnonzero(~np.isfinite(array))
    if bad.size:
        raise ComparisonError(f"the scores of {name} hold {bad.size} missing or infinite value(s) (NaN/inf), "
                              f"first at position {int(bad[0])}",
                              hint="score every item: an unanswered item is wrong (0), as evaluate counts it")
    outside = np.flatnonzero((array < 0.0) | (array > 1.0))
    if outside.size:
        raise ComparisonError(f"the scores of {name} must lie from 0 to 1; {outside.size} do not, first "
                              f"{array[outside[0]]!r} at position {int(outside[0])}",
                              hint="pass the normalised item scores (fractions), not percentages")
    return array


def _paired(a: Any, b: Any) -> tuple[np.ndarray, np.ndarray]:
    x, y = _scores(a, "the first system"), _scores(b, "the second system")
    if x.shape != y.shape:
        raise ComparisonError(f"paired scores need one score per item from each system: got {x.size} and {y.size}",
                              hint="score both systems on the same items, in the same order (compare() pairs them by item id)")
    if x.size == 0:
        raise ComparisonError("no items to compare (n = 0)", hint="score both systems on at least one item")
    return x, y


def _binary(x: np.ndarray, name: str) -> np.ndarray:
    if not np.isin(x, (0.0, 1.0)).all():
        raise ComparisonError(f"McNemar's test needs right/wrong scores (0 or 1); the scores of {name} are graded",
                              hint="use paired_permutation for graded scores")
    return x.astype(bool)


def _level(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or not 0.0 < value < 1.0:
        raise ComparisonError(f"{name} must lie strictly between 0 and 1, got {value!r}")
    return float(value)


def _count(value: Any, name: str, low: int, high: int) -> int:
    if not _whole(value) or not low <= value <= high:
        raise ComparisonError(f"{name} must be a whole number from {low} to {high}, got {value!r}")
    return int(value)


def _power_alpha(alpha: Any, power: Any) -> tuple[float, float]:
    alpha, power = _level(alpha, "alpha (the significance level)"), _level(power, "power")
    if power <= alpha:
        raise ComparisonError(f"power ({power}) must exceed alpha ({alpha}): any test has power alpha at no difference",
                              hint="e.g. alpha 0.05, power 0.8")
    return alpha, power


# ---------------------------------------------------------------------------------------------
# The statistics


@dataclass(frozen=True)
class BootstrapInterval:
    """``difference`` = mean(first) - mean(second) over ``n`` items and its percentile interval
    ``[low, high]`` at ``confidence`` from ``n_resamples`` resamples of the items drawn with
    ``seed`` (None, with ``reason``, when no interval was asked for)."""

    n: int
    difference: float
    low: float | None
    high: float | None
    confidence: float
    n_resamples: int
    seed: int
    reason: str | None = None


def paired_bootstrap(a: Scores, b: Scores, *, n_resamples: int = 10_000,
                     confidence: float = 0.95, seed: int = 0) -> BootstrapInterval:
    """The difference in mean score of two systems on the same items and its seeded percentile
    bootstrap interval: items are drawn with replacement, each with both its scores, and the
    interval is the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles of the
    resampled differences. ``n_resamples`` 0 gives the difference alone."""
    x, y = _paired(a, b)
    check_bootstrap(n_resamples, confidence, seed)
    d = x - y
    n = d.size
    difference = float(d.mean())
    patterns, counts = group_rows(d[:, None])
    boot = bootstrap_ci(patterns, counts, lambda sums: sums[:, 0] / n, n_boot=n_resamples, seed=seed, ci_level=confidence)
    low, high = boot.ci if boot.ci is not None else (None, None)
    return BootstrapInterval(n, difference, low, high, float(confidence), n_resamples, seed, boot.reason)


@dataclass(frozen=True)
class McNemarResult:
    """McNemar's exact test on ``n`` items: ``only_first`` right only in the first system,
    ``only_second`` right only in the second; ``p_value`` two-sided."""

    n: int
    only_first: int
    only_second: int
    p_value: float

    @property
    def discordant(self) -> int:
        return self.only_first + self.only_second


def _mcnemar_p(only_first: int, only_second: int) -> float:
    total = only_first + only_second
    return float(min(1.0, 2.0 * stats.binom.cdf(min(only_first, only_second), total, 0.5))) if total else 1.0


def mcnemar_exact(a: Scores, b: Scores) -> McNemarResult:
    """McNemar's exact test of two systems' right/wrong scores (0/1, or booleans) on the same
    items: the two-sided binomial test with p = 1/2 on the discordant pairs (no discordant pair:
    p = 1). The same p-value as statsmodels' ``mcnemar(table, exact=True)``."""
    x, y = _paired(a, b)
    rx, ry = _binary(x, "the first system"), _binary(y, "the second system")
    only_first, only_second = int((rx & ~ry).sum()), int((~rx & ry).sum())
    return McNemarResult(int(x.size), only_first, only_second, _mcnemar_p(only_first, only_second))


@dataclass(frozen=True)
class PermutationResult:
    """The sign-flip test of ``difference`` = mean(first) - mean(second) over ``n`` items, ``nonzero``
    of them with a non-zero difference: two-sided ``p_value``, ``exact`` (all ``n_permutations`` =
    2^nonzero sign assignments) or Monte Carlo (``n_permutations`` random ones drawn with ``seed``)."""

    n: int
    nonzero: int
    difference: float
    p_value: float
    exact: bool
    n_permutations: int
    seed: int | None


def _signed_sums(values: np.ndarray) -> np.ndarray:
    """The sums of ``values`` under each of their 2^len sign assignments."""
    sums = np.zeros(1)
    for v in values:
        sums = np.concatenate([sums + v, sums - v])
    return sums


def paired_permutation(a: Scores, b: Scores, *, exact_up_to: int = 20,
                       n_permutations: int = 10_000, seed: int = 0) -> PermutationResult:
    """The paired permutation (sign-flip) test of two systems' graded scores on the same items
    (module docs): exact over the 2^m sign assignments of the m non-zero differences when
    m <= ``exact_up_to`` (at most :data:`MAX_EXACT`), else ``n_permutations`` seeded random
    assignments, ``p = (1 + hits) / (1 + n_permutations)``. Items whose scores are equal do not
    change the statistic under any sign and are left out of the enumeration (the p-value is the
    same with them). No non-zero difference: p = 1."""
    x, y = _paired(a, b)
    exact_up_to = _count(exact_up_to, "exact_up_to (the most non-zero differences enumerated)", 0, MAX_EXACT)
    n_permutations = _count(n_permutations, "n_permutations (Monte Carlo sign assignments)", 1, MAX_PERMUTATIONS)
    seed = _count(seed, "seed (of the Monte Carlo test)", 0, 2**63 - 1)
    d = x - y
    nz = d[d != 0.0]
    m = int(nz.size)
    observed = abs(float(nz.sum()))
    tolerance = 1e-9 * max(1.0, float(np.abs(nz).sum()))  # the same sum, added up in another order
    if m <= exact_up_to:
        half = m // 2
        first, second = _signed_sums(nz[:half]), _signed_sums(nz[half:])
        hits = sum(int((np.abs(s + second) >= observed - tolerance).sum()) for s in first)
        total = 2 ** m
        return PermutationResult(int(d.size), m, float(d.mean()), hits / total, True, total, None)
    rng = np.random.default_rng(seed)
    hits = 0
    # Under the null the statistic sum(sign * d) is distributed as sum(sign * |d|); with
    # 2 * (the sum of the |d| drawn +) - sum(|d|) it needs one random bit per difference. Equal
    # |d| are interchangeable: with few distinct values, how many of each get + is Bin(count, 1/2).
    magnitudes = np.abs(nz)
    total = float(magnitudes.sum())
    values, counts = np.unique(magnitudes, return_counts=True)
    grouped = values.size * 4 <= m
    width = values.size if grouped else m
    step = max(1, _CHUNK // width)
    for start in range(0, n_permutations, step):
        k = min(step, n_permutations - start)
        if grouped:
            plus = rng.binomial(counts, 0.5, size=(k, values.size)) @ values
        else:
            bits = np.unpackbits(rng.integers(0, 256, size=(k, (m + 7) // 8), dtype=np.uint8), axis=1, count=m)
            plus = bits @ magnitudes
        hits += int((np.abs(2.0 * plus - total) >= observed - tolerance).sum())
    return PermutationResult(int(d.size), m, float(d.mean()), (1 + hits) / (1 + n_permutations), False, n_permutations, seed)


def holm(p_values: Scores) -> list[float]:
    """Holm's step-down adjustment of a family of p-values, in their order: the i-th smallest
    becomes ``max over j <= i of min(1, (m - j + 1) * p_(j))``. A hypothesis is rejected at
    level alpha by Holm's procedure exactly when its adjusted p-value is at most alpha. The same
    values as statsmodels' ``multipletests(p, method="holm")[1]``; an empty family gives []."""
    p = _scores(p_values, "the p-values") if len(p_values) else np.zeros(0)
    m = p.size
    order = np.argsort(p, kind="mergesort")
    adjusted = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adjusted
    return [float(v) for v in out]


# ---------------------------------------------------------------------------------------------
# Minimum detectable differences


def _mcnemar_regions(n: int, psi: float, alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The discordant counts ``d`` that carry any probability under Bin(n, psi) (within 12 SD of
    the mean: the rest weighs below 1e-30), their probabilities, and for each the largest
    ``min(b, c)`` the exact test rejects at ``alpha`` (-1: none)."""
    sd = math.sqrt(n * psi * (1.0 - psi))
    low, high = max(0, math.floor(n * psi - 12 * sd - 1)), min(n, math.ceil(n * psi + 12 * sd + 1))
    d = np.arange(low, high + 1)
    k = stats.binom.ppf(alpha / 2.0, d, 0.5)
    k = np.where(2.0 * stats.binom.cdf(k, d, 0.5) <= alpha, k, k - 1)  # p = 2 cdf(min(b, c)), as the test
    return d, stats.binom.pmf(d, n, psi), k


def _power_given(regions: tuple[np.ndarray, np.ndarray, np.ndarray], psi: float, delta: float) -> float:
    d, weights, k = regions
    pi = (psi + delta) / (2.0 * psi)
    reject = np.where(k >= 0, stats.binom.cdf(k, d, pi) + stats.binom.sf(d - k - 1, d, pi), 0.0)
    return float(np.clip((weights * reject).sum(), 0.0, 1.0))


def _share(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or not 0.0 < value <= 1.0:
        raise ComparisonError(f"{name} must lie in (0, 1], got {value!r}",
                              hint="with no discordant item the two systems agree everywhere: no difference to detect")
    return float(value)


def mcnemar_power(n: int, discordant: float, difference: float, *, alpha: float = 0.05) -> float:
    """The exact power of :func:`mcnemar_exact` at level ``alpha`` on ``n`` items when a share
    ``discordant`` (psi) of the items is right in one system only and the true difference in
    accuracy is ``difference`` (delta, ``|delta| <= psi``): the discordant count is Bin(n, psi),
    and given ``d`` of them the number right only in the first is Bin(d, (psi + delta) / (2 psi)).
    (statsmodels has no power function for McNemar's test; the tests check this against a full
    enumeration of small tables and a simulation with statsmodels' test.)"""
    n = _count(n, "n (the number of items)", 1, 10**9)
    alpha = _level(alpha, "alpha (the significance level)")
    psi = _share(discordant, "discordant (the share of items right in one system only)")
    delta = abs(float(difference))
    if not delta <= psi:
        raise ComparisonError(f"a difference in accuracy ({delta}) cannot exceed the share of discordant items ({psi})")
    return _power_given(_mcnemar_regions(n, psi, alpha), psi, delta)


def mdd_paired_binary(n: int, discordant: float, *, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """The minimum detectable difference in accuracy of two right/wrong systems on ``n`` items:
    the smallest delta at which :func:`mcnemar_power` reaches ``power``, given the share of
    discordant items ``discordant`` (psi, in (0, 1]). None when no difference is detectable at
    this size (even delta = psi, every discordant item going one way, falls short of ``power``)."""
    alpha, power = _power_alpha(alpha, power)
    n = _count(n, "n (the number of items)", 1, 10**9)
    psi = _share(discordant, "discordant (the share of items right in one system only)")
    regions = _mcnemar_regions(n, psi, alpha)
    if _power_given(regions, psi, psi) < power:
        return None
    return float(optimize.brentq(lambda delta: _power_given(regions, psi, delta) - power, 0.0, psi, xtol=1e-10))


def mdd_paired_means(n: int, sd: float, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """The minimum detectable difference in mean score of two systems on ``n`` items whose per-item
    differences have standard deviation ``sd`` (> 0), by the normal approximation of the paired
    test, both tails counted: delta such that ``Phi(delta sqrt(n) / sd - z) + Phi(-delta sqrt(n) / sd - z)
    = power`` with ``z = Phi^-1(1 - alpha / 2)`` (about ``(z + Phi^-1(power)) sd / sqrt(n)``)."""
    n = _count(n, "n (the number of items)", 1, 10**9)
    alpha, power = _power_alpha(alpha, power)
    if isinstance(sd, bool) or not isinstance(sd, (int, float, np.floating)) or not (np.isfinite(sd) and sd > 0):
        raise ComparisonError(f"sd (of the per-item differences) must be a positive number, got {sd!r}",
                              hint="with differences that never vary the normal approximation gives no minimum")
    z = float(stats.norm.isf(alpha / 2.0))
    root = np.sqrt(n)

    def gap(effect: float) -> float:
        return float(stats.norm.cdf(effect * root - z) + stats.norm.cdf(-effect * root - z)) - power

    effect = optimize.brentq(gap, 0.0, (z + float(stats.norm.ppf(power)) + 1.0) / root, xtol=1e-14)
    return float(effect * sd)


# ---------------------------------------------------------------------------------------------
# Comparing several systems


@dataclass(frozen=True)
class CompareOptions:
    """How :func:`compare` compares: each system against ``baseline`` (a system's name), or every
    pair when None; the ``test`` (``auto``: McNemar when every score is 0 or 1, else the
    permutation test); ``alpha`` of the Holm-corrected family and of the MDD at ``power``;
    the bootstrap's ``confidence`` and ``n_resamples``; the permutation test's ``exact_up_to`` and
    ``n_permutations``; one ``seed`` for every random draw (each pair is drawn with it)."""

    baseline: str | None = None
    test: TestName = "auto"
    alpha: float = 0.05
    power: float = 0.8
    confidence: float = 0.95
    n_resamples: int = 10_000
    exact_up_to: int = 20
    n_permutations: int = 10_000
    seed: int = 0


@dataclass(frozen=True)
class PairComparison:
    """``first`` against ``second`` on the same ``n`` items: their mean scores, the bootstrap
    ``interval`` of the difference (first - second), the ``test`` run and its ``p_value``, the
    Holm-adjusted ``p_holm`` and whether it is ``significant`` (``p_holm <= alpha``), the minimum
    detectable difference ``mdd`` (None with ``mdd_reason`` when there is none) and whether the
    observed difference is ``below_mdd`` (None when there is no MDD)."""

    first: str
    second: str
    n: int
    first_mean: float
    second_mean: float
    interval: BootstrapInterval
    test: Literal["mcnemar", "permutation"]
    p_value: float
    p_holm: float
    significant: bool
    mdd: float | None
    mdd_method: str
    mdd_reason: str | None
    below_mdd: bool | None
    mcnemar: McNemarResult | None = None
    permutation: PermutationResult | None = None

    @property
    def difference(self) -> float:
        return self.interval.difference


@dataclass(frozen=True)
class Comparison:
    """The paired comparisons of ``systems`` on the same ``items`` items, corrected by Holm over
    the family of ``pairs``; renders itself (:meth:`lines`, :meth:`as_dict`)."""

    items: int
    systems: tuple[str, ...]
    options: CompareOptions
    pairs: tuple[PairComparison, ...] = field(default_factory=tuple)

    @property
    def below_mdd(self) -> tuple[PairComparison, ...]:
        """The pairs whose observed difference is smaller than the minimum detectable one."""
        return tuple(p for p in self.pairs if p.below_mdd)

    def lines(self) -> list[str]:
        """The family as a table, then what it says (the terminal's view)."""
        o = self.options
        against = f"each against {o.baseline}" if o.baseline is not None else "every pair"
        out = [f"Paired comparisons of {len(self.systems)} systems on the same {self.items} items ({against}; "
               f"{len(self.pairs)} in the family, Holm-corrected at alpha {o.alpha:g}; MDD at power {o.power:g}):",
               f"  {'first':<24} {'second':<24} {'diff':>7} {f'{o.confidence:.0%} CI':>17} {'test':<11} "
               f"{'p':>8} {'p (Holm)':>8} {'MDD':>6}"]
        for p in self.pairs:
            ci = (f"[{p.interval.low:+.3f}, {p.interval.high:+.3f}]" if p.interval.low is not None
                  and p.interval.high is not None else "—")
            mdd = f"{p.mdd:.3f}" if p.mdd is not None else "—"
            mark = "  significant" if p.significant else "  below MDD" if p.below_mdd else ""
            out.append(f"  {p.first:<24} {p.second:<24} {p.difference:>+7.3f} {ci:>17} {p.test:<11} "
                       f"{p.p_value:>8.4f} {p.p_holm:>8.4f} {mdd:>6}{mark}")
        for p in self.pairs:
            if p.mdd_reason:
                out.append(f"  {p.first} vs {p.second}: no MDD: {p.mdd_reason}")
        significant = sum(p.significant for p in self.pairs)
        below = len(self.below_mdd)
        out.append(f"  {significant} of {len(self.pairs)} differences significant after Holm; {below} smaller than "
                   f"the minimum detectable difference at this size (too small to tell apart with {self.items} items)")
        return [escape_controls(line, lines=False) for line in out]

    def as_dict(self) -> dict[str, Any]:
        """Everything, JSON-ready (``pairs`` with their interval and test details)."""
        data = asdict(self)
        data["systems"] = list(self.systems)
        for entry, pair in zip(data["pairs"], self.pairs):
            entry["difference"] = pair.difference
        return data


def _align(scores: Mapping[str, Mapping[str, float]]) -> tuple[list[str], list[str], dict[str, np.ndarray]]:
    if not isinstance(scores, Mapping) or len(scores) < 2:
        raise ComparisonError(f"a comparison needs the scores of two systems or more, got {len(scores) if isinstance(scores, Mapping) else scores!r}",
                              hint="pass {system: {item_id: score}} for each system")
    names = list(scores)
    for name in names:
        if not isinstance(name, str) or not isinstance(scores[name], Mapping):
            raise ComparisonError(f"the scores of {name!r} must be a mapping of item id to score, got {type(scores[name]).__name__}",
                                  hint="pass {system: {item_id: score}} for each system")
    items = sorted(scores[names[0]], key=str)
    wanted = set(items)
    for name in names[1:]:
        have = set(scores[name])
        if have != wanted:
            missing, extra = sorted(wanted - have, key=str), sorted(have - wanted, key=str)
            raise ComparisonError(
                f"{name!r} is scored on other items than {names[0]!r}: "
                f"{len(missing)} missing (first {missing[:3]}), {len(extra)} extra (first {extra[:3]})",
                hint="compare systems on the same items; an unanswered item scores 0 (evaluate counts it wrong)")
    if not items:
        raise ComparisonError("no items to compare (n = 0)", hint="score the systems on at least one item")
    arrays = {name: _scores([scores[name][i] for i in items], repr(name)) for name in names}
    return names, items, arrays


def compare(scores: Mapping[str, Mapping[str, float]], options: CompareOptions | None = None) -> Comparison:
    """Paired comparisons of several systems (or one system's configurations) scored on the same
    items: ``scores`` maps each system to ``{item_id: score}`` (fractions from 0 to 1; every system
    on the same item ids). Per pair (every pair, or each against ``options.baseline``, in the
    order given): the bootstrap interval of the difference, McNemar's exact test (right/wrong
    scores) or the sign-flip permutation test (graded), the Holm adjustment over the family and
    the minimum detectable difference (:func:`mdd_paired_binary` for McNemar with the pair's
    observed share of discordant items, :func:`mdd_paired_means` for the permutation test with
    the observed standard deviation of its differences)."""
    o = options or CompareOptions()
    alpha, power = _power_alpha(o.alpha, o.power)
    check_bootstrap(o.n_resamples, o.confidence, o.seed)
    if o.test not in ("auto", "mcnemar", "permutation"):
        raise ComparisonError(f"test must be auto, mcnemar or permutation, got {o.test!r}")
    names, items, arrays = _align(scores)
    if o.baseline is not None and o.baseline not in arrays:
        raise ComparisonError(f"the baseline {o.baseline!r} is not among the systems compared ({', '.join(map(repr, names))})")
    binary = all(np.isin(a, (0.0, 1.0)).all() for a in arrays.values())
    test: Literal["mcnemar", "permutation"] = "mcnemar" if o.test == "mcnemar" or (o.test == "auto" and binary) else "permutation"
    if o.baseline is not None:
        pairs = [(o.baseline, name) for name in names if name != o.baseline]
    else:
        pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
    n = len(items)
    raw = []
    for first, second in pairs:
        x, y = arrays[first], arrays[second]
        interval = paired_bootstrap(x, y, n_resamples=o.n_resamples, confidence=o.confidence, seed=o.seed)
        mc: McNemarResult | None = None
        perm: PermutationResult | None = None
        mdd: float | None
        reason: str | None
        if test == "mcnemar":
            mc = mcnemar_exact(x, y)
            p_value = mc.p_value
            method = "McNemar's exact power at the observed share of discordant items"
            if mc.discordant == 0:
                mdd, reason = None, "no discordant item: the two agree on every item"
            else:
                mdd = mdd_paired_binary(n, mc.discordant / n, alpha=alpha, power=power)
                reason = None if mdd is not None else (
                    f"{n} items are too few: even all {mc.discordant} discordant items going one way "
                    f"reach power below {power:g}")
        else:
            perm = paired_permutation(x, y, exact_up_to=o.exact_up_to, n_permutations=o.n_permutations, seed=o.seed)
            p_value = perm.p_value
            method = "normal approximation with the observed SD of the per-item differences"
            sd = float(np.std(x - y, ddof=1)) if n > 1 else 0.0
            if n < 2:
                mdd, reason = None, "one item: the variance of the differences is unknown"
            elif sd == 0.0:
                mdd, reason = None, "the per-item differences never vary: the normal approximation gives no minimum"
            else:
                mdd, reason = mdd_paired_means(n, sd, alpha=alpha, power=power), None
        raw.append((first, second, x, y, interval, p_value, mdd, method, reason, mc, perm))
    adjusted = holm([r[5] for r in raw])
    out = []
    for (first, second, x, y, interval, p_value, mdd, method, reason, mc, perm), p_holm in zip(raw, adjusted):
        out.append(PairComparison(
            first, second, n, float(x.mean()), float(y.mean()), interval, test, p_value, p_holm, p_holm <= alpha,
            mdd, method, reason, None if mdd is None else abs(interval.difference) < mdd, mc, perm))
    return Comparison(n, tuple(names), o, tuple(out))


# ---------------------------------------------------------------------------------------------
# Per-item scores from evaluate's scored rows


def system_scores(scored: Iterable[Scored], *, subset: str = "base", config: str = BASE_CONFIG,
                  binary: bool = False) -> dict[str, dict[str, float]]:
    """Per system (``model/method``), its score per row id on one subset and configuration of a
    release (default: the base items): the normalised ``score`` (0-1), or with ``binary`` its
    exact ``correct`` (0 or 1). Ready for :func:`compare`."""
    out: dict[str, dict[str, float]] = {}
    for s in scored:
        if s.ref.subset == subset and s.ref.config == config:
            out.setdefault(s.system, {})[s.ref.id] = float(s.correct) if binary else s.score
    return dict(sorted(out.items()))


def configuration_scores(scored: Iterable[Scored], system: str, *, binary: bool = False) -> dict[str, dict[str, float]]:
    """One system's score per item in each configuration of the configurations subset
    (``SERIALIZATION/PERTURBATION``, ToRR's grid), keyed by the item id: the configurations
    compared as systems by :func:`compare` (a configuration that misses an item is refused there)."""
    out: dict[str, dict[str, float]] = {}
    for s in scored:
        if s.ref.subset == CONFIGURATIONS and s.system == system:
            out.setdefault(s.ref.config, {})[s.ref.item_id] = float(s.correct) if binary else s.score
    return dict(sorted(out.items()))

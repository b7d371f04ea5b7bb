"""Agreement statistics at scale: tqaforge against statsmodels and the krippendorff package, same run.

Three measurements on seeded synthetic ratings (a true category per item out of 3, each of 5
raters keeping it with probability 0.8, else a uniform draw):

1. Fleiss' kappa of 100,000 items x 5 raters, from the raw ratings (count matrix included) and
   from a ready count matrix: ``tqaforge.annotation.agreement.fleiss_kappa`` against
   ``statsmodels.stats.inter_rater`` (``aggregate_raters`` + ``fleiss_kappa``).
2. Krippendorff's nominal alpha of the same 100,000 units x 5 raters, complete and with 10% of
   the ratings missing: ``krippendorff_alpha`` against ``krippendorff.alpha``.
3. A 1,000-sample bootstrap interval on 10,000 items: tqaforge's vectorised bootstrap (resampled
   sums of per-item statistics) against the naive bootstrap that resamples the items and calls
   statsmodels' ``fleiss_kappa`` / ``krippendorff.alpha`` once per resample.

Point values: best and median of ``--repeat`` runs (targets: under 1 s each). Bootstrap: one run
each (target: under 5 s); the naive krippendorff bootstrap takes a while, ``--naive-samples``
runs fewer resamples and scales the time up (printed as such).

    .venv/bin/python benchmarks/agreement.py [--repeat 5] [--naive-samples 1000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Callable

import krippendorff
import numpy as np
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from tqaforge.annotation.agreement import category_counts, fleiss_kappa, krippendorff_alpha

SEED = 0
N_BIG, N_BOOT_ITEMS, RATERS, K, N_BOOT = 100_000, 10_000, 5, 3, 1000


def ratings(n: int, *, missing: float = 0.0, seed: int = SEED) -> np.ndarray:
    """Items x raters labels 0..K-1 as floats, NaN for a missing rating."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, K, n)
    labels = np.where(rng.random((n, RATERS)) < 0.8, truth[:, None], rng.integers(0, K, (n, RATERS))).astype(float)
    if missing:
        labels[rng.random(labels.shape) < missing] = np.nan
    return labels


def timed(fn: Callable[[], float], repeat: int) -> tuple[float, float, float]:
    """(best, median, value) of ``repeat`` calls after one warm-up."""
    value = fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times), value


def row(label: str, ours: tuple[float, float, float], theirs: tuple[float, float, float], target: float) -> None:
    ratio = theirs[0] / ours[0]
    status = "met" if ours[0] < target else "MISSED"
    print(
        f"  {label:<34} tqaforge {ours[0]:7.3f} s (median {ours[1]:.3f})   reference {theirs[0]:7.3f} s "
        f"(median {theirs[1]:.3f})   reference/tqaforge {ratio:5.2f}x   target < {target:g} s: {status}"
    )
    assert abs(ours[2] - theirs[2]) < 1e-9, (label, ours[2], theirs[2])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--naive-samples", type=int, default=N_BOOT, help="resamples of the naive bootstraps (scaled to 1,000)")
    args = parser.parse_args()

    big = ratings(N_BIG)
    big_missing = ratings(N_BIG, missing=0.10)
    counts, _ = category_counts(big)
    print(f"{N_BIG:,} items x {RATERS} raters, {K} categories (seed {SEED}); best of {args.repeat}")

    row(
        "Fleiss' kappa, from ratings",
        timed(lambda: fleiss_kappa(category_counts(big)[0], n_boot=0).value, args.repeat),
        timed(lambda: sm_fleiss_kappa(aggregate_raters(big)[0]), args.repeat),
        1.0,
    )
    row(
        "Fleiss' kappa, from counts",
        timed(lambda: fleiss_kappa(counts, n_boot=0).value, args.repeat),
        timed(lambda: sm_fleiss_kappa(counts), args.repeat),
        1.0,
    )
    row(
        "nominal alpha, complete",
        timed(lambda: krippendorff_alpha(big.T, "nominal", n_boot=0).value, args.repeat),
        timed(lambda: float(krippendorff.alpha(reliability_data=big.T, level_of_measurement="nominal")), args.repeat),
        1.0,
    )
    row(
        "nominal alpha, 10% missing",
        timed(lambda: krippendorff_alpha(big_missing.T, "nominal", n_boot=0).value, args.repeat),
        timed(lambda: float(krippendorff.alpha(reliability_data=big_missing.T, level_of_measurement="nominal")), args.repeat),
        1.0,
    )

    small = big[:N_BOOT_ITEMS]
    small_counts = counts[:N_BOOT_ITEMS]
    print(f"\n{N_BOOT:,}-sample bootstrap on {N_BOOT_ITEMS:,} items x {RATERS} raters (one run each)")
    rng = np.random.default_rng(1)
    naive = args.naive_samples
    for label, ours_fn, naive_fn in (
        (
            "Fleiss' kappa",
            lambda: fleiss_kappa(small_counts, n_boot=N_BOOT, seed=1),
            lambda idx: sm_fleiss_kappa(small_counts[idx]),
        ),
        (
            "nominal alpha",
            lambda: krippendorff_alpha(small.T, "nominal", n_boot=N_BOOT, seed=1),
            lambda idx: krippendorff.alpha(reliability_data=small[idx].T, level_of_measurement="nominal"),
        ),
    ):
        start = time.perf_counter()
        result = ours_fn()
        ours_s = time.perf_counter() - start
        start = time.perf_counter()
        values = [naive_fn(rng.integers(0, N_BOOT_ITEMS, N_BOOT_ITEMS)) for _ in range(naive)]
        naive_s = (time.perf_counter() - start) * N_BOOT / naive
        low, high = np.quantile(values, [0.025, 0.975])
        scaled = "" if naive == N_BOOT else f" (scaled from {naive})"
        print(
            f"  {label:<34} tqaforge {ours_s:7.3f} s   naive loop {naive_s:7.3f} s{scaled}   ratio {naive_s / ours_s:6.1f}x   "
            f"target < 5 s: {'met' if ours_s < 5 else 'MISSED'}\n"
            f"  {'':<34} 95% CI tqaforge [{result.ci[0]:.4f}, {result.ci[1]:.4f}], naive [{low:.4f}, {high:.4f}]"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

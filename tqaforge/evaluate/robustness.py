"""Robustness metrics, as the papers define them (pure functions of per-item scores).

FREB-TQA (section 4): **Em** is exact match over items; **Emd** = Em(perturbed) - Em(original),
over the items scored in both; **VP** (variation percentage) = (correct -> wrong + wrong -> correct) / N:
how often a perturbation flips an answer either way.

ToRR (section 2.3): a model's **performance** P is the mean score over configurations (prompt
format x perturbation), averaged over the items of each dataset and then over datasets; its
**robustness** R is 1 minus the mean, per dataset then over datasets, of each item's score range
(max - min) across configurations. **Kendall's W** measures how much several rankings of the same
models agree (1: identical), with the tie correction of Kendall and Smith (1939).

>>> vp([True, True, False, False], [True, False, True, False])
0.5
>>> emd([True, True, False, False], [True, False, False, False])
-0.25
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np


def _paired(original: Sequence[bool], perturbed: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(original, dtype=bool), np.asarray(perturbed, dtype=bool)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"original and perturbed need one score per item each, got {a.shape} and {b.shape}")
    if a.size == 0:
        raise ValueError("no items to compare")
    return a, b


def em(correct: Sequence[bool]) -> float:
    """Exact match: the share of items answered correctly."""
    values = np.asarray(correct, dtype=bool)
    if values.size == 0:
        raise ValueError("no items to score")
    return float(values.mean())


def emd(original: Sequence[bool], perturbed: Sequence[bool]) -> float:
    """Em on the perturbed items minus Em on the same items unperturbed (FREB-TQA)."""
    a, b = _paired(original, perturbed)
    return float(b.mean() - a.mean())


def vp(original: Sequence[bool], perturbed: Sequence[bool]) -> float:
    """Variation percentage: the share of items whose correctness flips (FREB-TQA)."""
    a, b = _paired(original, perturbed)
    return float((a != b).mean())


def _per_dataset(scores: Mapping[str, np.ndarray] | np.ndarray) -> list[np.ndarray]:
    groups = list(scores.values()) if isinstance(scores, Mapping) else [scores]
    out = []
    for g in groups:
        array = np.asarray(g, dtype=np.float64)
        if array.ndim != 2 or array.size == 0:
            raise ValueError("scores are items x configurations, per dataset")
        out.append(array)
    if not out:
        raise ValueError("no dataset to score")
    return out


def torr_performance(scores: Mapping[str, np.ndarray] | np.ndarray) -> float:
    """ToRR's P: the mean over configurations, then items, then datasets (items x configurations
    arrays, one per dataset, or one array)."""
    return float(np.mean([g.mean(axis=1).mean() for g in _per_dataset(scores)]))


def torr_robustness(scores: Mapping[str, np.ndarray] | np.ndarray) -> float:
    """ToRR's R: 1 minus the mean score range (max - min over configurations) per item, averaged
    per dataset and then over datasets."""
    return float(1.0 - np.mean([(g.max(axis=1) - g.min(axis=1)).mean() for g in _per_dataset(scores)]))


def _ranks(values: np.ndarray) -> tuple[np.ndarray, float]:
    """Ranks from 1 (ties get their mean rank) and the tie term sum(t^3 - t)."""
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), dtype=np.float64)
    ties = 0.0
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[order[j + 1]] == values[order[i]]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0 + 1.0
        t = j - i + 1
        ties += t ** 3 - t
        i = j + 1
    return ranks, ties


def kendall_w(scores: Sequence[Sequence[float]]) -> float:
    """Kendall's coefficient of concordance of m rankings (rows: judges such as configurations or
    subsets) of the same n models (columns: their scores, higher is better); tie-corrected."""
    matrix = np.asarray(scores, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] < 2 or matrix.shape[1] < 2:
        raise ValueError("Kendall's W needs at least two rankings of at least two models (rankings x models)")
    m, n = matrix.shape
    ranked = [_ranks(row) for row in matrix]
    totals = np.sum([r for r, _ in ranked], axis=0)
    s = float(((totals - totals.mean()) ** 2).sum())
    ties = sum(t for _, t in ranked)
    denominator = m * m * (n ** 3 - n) - m * ties
    if denominator <= 0:
        raise ValueError("every ranking is one tie: Kendall's W is undefined")
    return 12.0 * s / denominator

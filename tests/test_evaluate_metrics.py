"""Robustness metrics against values computed by hand on small fixtures."""

from __future__ import annotations

import numpy as np
import pytest

from tqaforge.evaluate.robustness import em, emd, kendall_w, torr_performance, torr_robustness, vp

# Five items answered before and after a perturbation: c->c, c->w, w->c, w->w, c->c.
ORIGINAL = [True, True, False, False, True]
PERTURBED = [True, False, True, False, True]


def test_freb_tqa_em_emd_vp_by_hand() -> None:
    assert em(ORIGINAL) == pytest.approx(3 / 5) and em(PERTURBED) == pytest.approx(3 / 5)
    assert emd(ORIGINAL, PERTURBED) == pytest.approx(0.0)  # one lost, one gained
    assert vp(ORIGINAL, PERTURBED) == pytest.approx(2 / 5)  # but two of five flipped
    assert emd(ORIGINAL, [False] * 5) == pytest.approx(-3 / 5) and vp(ORIGINAL, [False] * 5) == pytest.approx(3 / 5)
    with pytest.raises(ValueError, match="one score per item"):
        vp(ORIGINAL, PERTURBED[:3])


def test_torr_performance_and_robustness_by_hand() -> None:
    # Dataset A: 2 items x 3 configurations; dataset B: 1 item x 3 configurations.
    a = np.array([[1.0, 0.0, 1.0], [0.5, 0.5, 0.5]])
    b = np.array([[0.2, 0.8, 0.5]])
    # P: A = mean(2/3, 0.5) = 7/12; B = 0.5; mean = 13/24.
    assert torr_performance({"A": a, "B": b}) == pytest.approx(13 / 24)
    # R: ranges A = (1, 0) -> 0.5; B = 0.6; 1 - mean(0.5, 0.6) = 0.45.
    assert torr_robustness({"A": a, "B": b}) == pytest.approx(0.45)
    assert torr_robustness(np.array([[0.3, 0.3], [1.0, 1.0]])) == pytest.approx(1.0)


def test_kendall_w_by_hand() -> None:
    # Three judges rank four models identically: W = 1; reversed halves disagree.
    same = [[0.9, 0.5, 0.3, 0.1]] * 3
    assert kendall_w(same) == pytest.approx(1.0)
    assert kendall_w([[1, 2, 3, 4], [4, 3, 2, 1]]) == pytest.approx(0.0)
    # m=3, n=3 rankings (1,2,3), (1,3,2), (2,1,3): R = (4, 6, 8), S = 8, W = 12*8 / (9*24) = 4/9.
    assert kendall_w([[3, 2, 1], [3, 1, 2], [2, 3, 1]]) == pytest.approx(4 / 9)
    # A tie: ranks (2.5, 2.5, 1) and (3, 2, 1): R = (5.5, 4.5, 2), S = 6.5, T = 2^3 - 2 = 6,
    # W = 12*6.5 / (2^2 * 24 - 2*6) = 78/84.
    assert kendall_w([[1, 1, 0], [2, 1, 0]]) == pytest.approx(78 / 84)
    with pytest.raises(ValueError, match="at least two rankings"):
        kendall_w([[1, 2, 3]])

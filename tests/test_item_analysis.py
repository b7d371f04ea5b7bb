"""Item analysis (issue 28, item 1): difficulty and discrimination against independent
computations (pandas, scipy.stats), the flags on a simulated benchmark with planted defects, and
girth's 2PL fit against known parameters and against statsmodels' logistic regression."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.special import expit

from tqaforge.evaluate.items import (
    SOLVED_BY_ALL,
    SOLVED_BY_NONE,
    SUSPECT_GOLD,
    ItemAnalysisOptions,
    ItemScores,
    adjudication_requests,
    analyse_items,
    corrected_item_total,
    difficulty,
    fit_2pl,
    item_matrix,
    item_scores,
)
from tqaforge.evaluate.predictions import Reference
from tqaforge.evaluate.scoring import Scored

# Six systems (columns) on five items (rows), right/wrong, made by hand.
HAND = pd.DataFrame(
    [[1, 1, 1, 1, 0, 0],   # q1: the strong four right
     [1, 1, 0, 1, 0, 1],   # q2
     [0, 0, 1, 0, 1, 1],   # q3: the weak right, the strong wrong
     [1, 1, 1, 1, 1, 1],   # q4: everyone right
     [1, 0, 1, 0, 0, 0]],  # q5
    index=["q1", "q2", "q3", "q4", "q5"], columns=["s1", "s2", "s3", "s4", "s5", "s6"], dtype=float)


def _matrix(frame: pd.DataFrame, subtypes: dict[str, str] | None = None) -> ItemScores:
    return item_matrix([(s, i, frame.loc[i, s]) for i in frame.index for s in frame.columns if not np.isnan(frame.loc[i, s])],
                       items=list(frame.index), subtypes=subtypes)


def test_difficulty_is_the_share_of_systems_right() -> None:
    m = _matrix(HAND)
    assert m.items == tuple(HAND.index) and m.systems == tuple(HAND.columns)
    assert difficulty(m) == pytest.approx(HAND.mean(axis=1).to_numpy())
    assert difficulty(m)[3] == 1.0 and difficulty(m)[0] == pytest.approx(4 / 6)


def test_discrimination_is_the_point_biserial_r_with_the_rest_score() -> None:
    r, p, n = corrected_item_total(_matrix(HAND))
    for i, item in enumerate(HAND.index):
        rest = HAND.drop(index=item).sum(axis=0)  # each system's total over the other items
        if HAND.loc[item].nunique() == 1:
            assert np.isnan(r[i]) and np.isnan(p[i])  # q4: no variance, no correlation
            continue
        expected = stats.pointbiserialr(HAND.loc[item].astype(bool), rest)
        assert r[i] == pytest.approx(expected.statistic, abs=1e-12), item
        # The one-sided p-value of r < 0 is scipy's Pearson test with alternative="less".
        assert p[i] == pytest.approx(stats.pearsonr(HAND.loc[item], rest, alternative="less").pvalue, abs=1e-12), item
    assert list(n) == [6] * 5
    # By hand: q3 = (0,0,1,0,1,1), rest totals (4,3,3,3,1,2): sum of cross deviations -2,
    # sums of squares 1.5 and 16/3, so r = -2 / sqrt(8) = -1/sqrt(2).
    assert r[2] == pytest.approx(-1 / np.sqrt(2), abs=1e-12)


def test_graded_scores_and_holes_use_pearson_r_over_the_systems_present() -> None:
    frame = HAND.copy()
    frame.loc["q5"] = [0.9, 0.2, 0.7, 0.4, 0.1, 0.0]  # ROUGE-L scores
    frame.loc["q2", "s6"] = np.nan  # s6 was not run on q2
    r, _, n = corrected_item_total(_matrix(frame))
    present = frame.notna()
    for item in ["q1", "q5"]:
        row = frame.index.get_loc(item)
        rest = frame.drop(index=item).mean(axis=0, skipna=True)  # mean over the other items a system has
        ok = present.loc[item]
        assert r[row] == pytest.approx(stats.pearsonr(frame.loc[item][ok], rest[ok]).statistic, abs=1e-12), item
    assert n[1] == 5  # q2: five systems scored it
    assert difficulty(_matrix(frame))[1] == pytest.approx(frame.loc["q2"].mean(skipna=True))


def test_the_hand_made_matrix_flags_and_evidence() -> None:
    subtypes = {"q1": "A", "q2": "A", "q3": "B", "q4": "B", "q5": "B"}
    # q3's r = -1/sqrt(2) over 6 systems: t = -2 on 4 degrees of freedom, one-sided p 0.058:
    # not significant at the default 0.05, flagged at 0.1.
    default = analyse_items(_matrix(HAND, subtypes))
    assert {s.item_id: s.flags for s in default.items}["q3"] == ()
    assert next(s for s in default.items if s.item_id == "q3").p_negative == pytest.approx(stats.t.cdf(-2.0, 4), abs=1e-6)
    analysis = analyse_items(_matrix(HAND, subtypes), ItemAnalysisOptions(suspect_alpha=0.1))
    flags = {s.item_id: s.flags for s in analysis.items}
    assert flags["q4"] == (SOLVED_BY_ALL,) and flags["q3"] == (SUSPECT_GOLD,)
    assert flags["q1"] == flags["q2"] == flags["q5"] == ()
    q3 = next(s for s in analysis.items if s.item_id == "q3")
    assert set(q3.right) == {"s3", "s5", "s6"} and set(q3.wrong) == {"s1", "s2", "s4"}
    assert q3.rest_wrong is not None and q3.rest_right is not None and q3.rest_wrong > q3.rest_right
    assert {s.subtype: (s.items, s.flagged, round(s.share, 4)) for s in analysis.subtypes} == {"A": (2, 0, 0.0), "B": (3, 2, 0.6667)}
    (request,) = adjudication_requests(analysis)
    assert request.item_id == "q3" and "strongest failing: s1" in request.evidence and "3 of 6 systems right" in request.evidence
    assert "  2PL IRT: not fitted: 6 systems, 10 or more needed" in analysis.lines()


# --- a simulated benchmark with planted defects ------------------------------------------------

SEEDS = (20261126, 1, 2)
N_SYSTEMS, N_CLEAN = 25, 480


def _planted(seed: int) -> ItemScores:
    """25 systems with abilities evenly from -2 to 2; 480 clean 2PL items (a ~ lognormal around 1.2,
    b ~ N(0, 0.8)); 10 items with wrong gold (right with probability expit(-2 (theta - c)): the
    strong fail, the weak pass); 5 items everyone solves, 5 nobody solves."""
    rng = np.random.default_rng(seed)
    theta = np.linspace(-2, 2, N_SYSTEMS)
    a, b = rng.lognormal(0.2, 0.25, N_CLEAN), rng.normal(0, 0.8, N_CLEAN)
    clean = rng.uniform(size=(N_CLEAN, N_SYSTEMS)) < expit(a[:, None] * (theta[None, :] - b[:, None]))
    wrong_gold = rng.uniform(size=(10, N_SYSTEMS)) < expit(-2.0 * (theta[None, :] - rng.normal(0, 0.5, (10, 1))))
    data = np.vstack([clean, wrong_gold, np.ones((5, N_SYSTEMS)), np.zeros((5, N_SYSTEMS))]).astype(float)
    ids = [f"clean{i}" for i in range(N_CLEAN)] + [f"gold{i}" for i in range(10)] + [f"all{i}" for i in range(5)] + [f"none{i}" for i in range(5)]
    subtypes = {item: ("Counting" if i % 2 else "Comparison") for i, item in enumerate(ids)}
    systems = [f"m{j:02d}/DP" for j in range(N_SYSTEMS)]  # m24 the strongest
    return item_matrix([(systems[j], ids[i], data[i, j]) for i in range(len(ids)) for j in range(N_SYSTEMS)], subtypes=subtypes)


@pytest.mark.parametrize("seed", SEEDS)
def test_planted_defects_are_all_found_and_clean_items_rarely_flagged(seed: int) -> None:
    analysis = analyse_items(_planted(seed), ItemAnalysisOptions(irt=False))
    found = {flag: {s.item_id for s in analysis.flagged(flag)} for flag in (SUSPECT_GOLD, SOLVED_BY_ALL, SOLVED_BY_NONE)}
    assert {f"gold{i}" for i in range(10)} <= found[SUSPECT_GOLD]
    assert {f"all{i}" for i in range(5)} <= found[SOLVED_BY_ALL]
    assert {f"none{i}" for i in range(5)} <= found[SOLVED_BY_NONE]
    false_alarms = [s.item_id for s in analysis.flagged() if s.item_id.startswith("clean")]
    assert len(false_alarms) <= 0.02 * N_CLEAN, false_alarms
    # The evidence: strong systems fail a wrong-gold item together while weak ones pass.
    for s in analysis.flagged(SUSPECT_GOLD):
        if s.item_id.startswith("gold"):
            assert s.rest_wrong is not None and s.rest_right is not None and s.rest_wrong > s.rest_right + 0.2
    requests = adjudication_requests(analysis)
    assert {f"gold{i}" for i in range(10)} <= {r.item_id for r in requests}
    assert [r.discrimination for r in requests] == sorted(r.discrimination for r in requests)
    # Per subtype, the shares add up to the flagged items.
    assert sum(sub.flagged for sub in analysis.subtypes) == len(analysis.flagged())
    assert sum(sub.items for sub in analysis.subtypes) == N_CLEAN + 20
    text = "\n".join(analysis.lines())
    assert "gold0:" in text and "strongest failing: m2" in text and "Comparison" in text
    json.dumps(analysis.as_dict(), allow_nan=False)


def test_item_scores_reads_the_harness_scores_of_the_base_items() -> None:
    def ref(i: int, subset: str = "base", config: str = "base") -> Reference:
        return Reference(f"r{i}-{subset}", subset, f"it{i}", config, "FactChecking", "MatchBased", ("yes",), "yes", i)

    scored = [Scored(ref(i), model, "DP", True, score=float((i + k) % 2), correct=bool((i + k) % 2))
              for i in range(4) for k, model in enumerate(("gpt", "llama", "qwen"))]
    scored += [Scored(ref(i, "structure", "transpose"), "gpt", "DP", True, score=1.0, correct=True) for i in range(4)]
    m = item_scores(scored)
    assert m.systems == ("gpt/DP", "llama/DP", "qwen/DP") and m.items == ("r0-base", "r1-base", "r2-base", "r3-base")
    assert m.subtypes == ("FactChecking_MatchBased",) * 4
    assert m.scores[1].tolist() == [1.0, 0.0, 1.0]
    assert item_scores(scored, subset="structure", config="transpose").systems == ("gpt/DP",)


# --- the 2PL fit (girth) ------------------------------------------------------------------------

def test_girth_recovers_known_2pl_parameters_and_agrees_with_statsmodels() -> None:
    """girth's own generator, 30 items, 600 simulated respondents (seed 7): girth's MML estimates
    correlate > 0.9 with the true a and b, and with an independent fit: statsmodels' logistic
    regression of each item on the known abilities (slope a, intercept -a b)."""
    import statsmodels.api as sm
    from girth.synthetic import create_synthetic_irt_dichotomous

    rng = np.random.default_rng(7)
    a, b, theta = rng.uniform(0.6, 2.0, 30), rng.normal(0, 1, 30), rng.normal(0, 1, 600)
    data = create_synthetic_irt_dichotomous(b, a, theta, seed=7)
    m = item_matrix([(f"s{j:03d}", f"q{i:02d}", float(data[i, j])) for i in range(30) for j in range(600)])
    fit = fit_2pl(m)
    assert fit is not None and fit.items == m.items and not fit.left_out
    got_a, got_b = np.array(fit.a), np.array(fit.b)
    assert np.corrcoef(got_a, a)[0, 1] > 0.9 and np.corrcoef(got_b, b)[0, 1] > 0.95
    assert np.corrcoef(np.array(fit.ability), theta)[0, 1] > 0.9
    logit_a, logit_b = [], []
    for i in range(30):
        res = sm.Logit(data[i], sm.add_constant(theta)).fit(disp=0)
        intercept, slope = res.params
        logit_a.append(slope)
        logit_b.append(-intercept / slope)
    assert np.corrcoef(got_a, logit_a)[0, 1] > 0.9 and np.corrcoef(got_b, logit_b)[0, 1] > 0.95
    assert np.median(np.abs(got_b - np.array(logit_b))) < 0.2


def test_the_2pl_fit_needs_ten_systems() -> None:
    rng = np.random.default_rng(3)
    def matrix(n: int) -> ItemScores:
        theta = np.linspace(-2, 2, n)
        data = rng.uniform(size=(20, n)) < expit(theta[None, :] - rng.normal(0, 1, (20, 1)))
        return item_matrix([(f"s{j}", f"q{i}", float(data[i, j])) for i in range(20) for j in range(n)])
    nine = analyse_items(matrix(9))
    assert nine.irt is None and "not fitted: 9 systems, 10 or more needed" in nine.irt_note
    ten = analyse_items(matrix(10))
    assert ten.irt is not None and len(ten.irt.items) + len(ten.irt.left_out) == 20
    fitted = [s for s in ten.items if s.irt_a is not None]
    assert len(fitted) == len(ten.irt.items) and all(0.2 <= (s.irt_a or 0) <= 5.0 for s in fitted)
    assert all(s.irt_a is None for s in ten.items if SOLVED_BY_ALL in s.flags or SOLVED_BY_NONE in s.flags)
    saved = json.loads(json.dumps(ten.as_dict(), allow_nan=False))
    assert saved["irt"]["items"] == list(ten.irt.items) and len(saved["irt"]["ability"]) == 10

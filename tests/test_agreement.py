"""Agreement statistics, workflows, adjudication and the `agreement` commands.

Every statistic is checked three ways: against an independent implementation on random data
(statsmodels, the ``krippendorff`` package, NLTK's ``AnnotationTask``; for Gwet's AC1, which
none of them has, a plain loop over items written from Gwet (2008) below), against published
worked examples (cited where they are used), and on degenerate inputs. The end-to-end test runs
``tqaforge agreement report`` on annotations from three simulated annotators whose error rates
are known, and checks the reported intervals against the values those rates imply.
"""

from __future__ import annotations

import dataclasses
import json
import math
from itertools import combinations
from pathlib import Path

import krippendorff
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nltk.metrics.agreement import AnnotationTask
from nltk.metrics.distance import binary_distance, interval_distance, masi_distance
from sqlmodel import func, select
from statsmodels.stats.inter_rater import cohens_kappa as sm_cohens_kappa
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa
from typer.testing import CliRunner

from tqaforge.annotation.adjudication import adjudicate, adjudication_queue, final_labels, resolve
from tqaforge.annotation.agreement import (
    AgreementResult,
    category_counts,
    cohen_kappa,
    cohen_kappa_matrix,
    conger_kappa,
    fleiss_kappa,
    gwet_ac1,
    krippendorff_alpha,
    landis_koch,
    masi_alpha,
    masi_distance_matrix,
    percent_agreement,
    percent_agreement_matrix,
    proportion,
)
from tqaforge.annotation.bootstrap import group_rows, resampled_sums
from tqaforge.annotation.report_format import to_markdown
from tqaforge.annotation.workflows import Settings, agreement_report, answers_match, load_rater_data, write_report
from tqaforge.cli import app
from tqaforge.errors import AdjudicationError, AgreementError
from tqaforge.ids import content_hash
from tqaforge.schemas.records import Adjudication, Annotation, Answer, Question, TableRecord, Variant
from tqaforge.schemas.records import AnnotationTask as TaskRecord

runner = CliRunner(env={"COLUMNS": "200"})
SETTINGS = settings(max_examples=60, deadline=None)

# ---------------------------------------------------------------------------------------------
# Random data

@st.composite
def complete_ratings(draw, min_raters: int = 2, max_raters: int = 5):
    """Items x raters integer labels, every item rated by every rater."""
    n_items = draw(st.integers(2, 30))
    n_raters = draw(st.integers(min_raters, max_raters))
    k = draw(st.integers(2, 4))
    rows = draw(st.lists(st.lists(st.integers(0, k - 1), min_size=n_raters, max_size=n_raters), min_size=n_items, max_size=n_items))
    return np.array(rows), k


@st.composite
def reliability_with_missing(draw, values=st.integers(1, 5)):
    """Raters x units with None for missing values."""
    n_raters = draw(st.integers(2, 5))
    n_units = draw(st.integers(2, 25))
    cell = st.one_of(st.none(), values)
    return draw(st.lists(st.lists(cell, min_size=n_units, max_size=n_units), min_size=n_raters, max_size=n_raters))


def _to_nan(data):
    return np.array([[np.nan if x is None else x for x in row] for row in data], dtype=float)


def _task(data):
    """NLTK AnnotationTask triples from raters x units data (missing values left out)."""
    return [(f"c{r}", f"u{u}", x) for r, row in enumerate(data) for u, x in enumerate(row) if x is not None]


def _same(ours: AgreementResult, reference: float) -> None:
    if ours.value is None:
        assert math.isnan(reference), (ours.reason, reference)
    else:
        assert ours.value == pytest.approx(reference, abs=1e-9)


# ---------------------------------------------------------------------------------------------
# Property tests against independent implementations


@SETTINGS
@given(complete_ratings(max_raters=7))
def test_fleiss_kappa_equals_statsmodels(data):
    ratings, k = data
    counts, _ = category_counts(ratings, list(range(k)))
    with np.errstate(all="ignore"):
        reference = sm_fleiss_kappa(counts, method="fleiss")
    _same(fleiss_kappa(counts, n_boot=0), reference)


@SETTINGS
@given(complete_ratings(min_raters=2, max_raters=2), st.sampled_from([None, "linear", "quadratic"]))
def test_cohen_kappa_equals_statsmodels(data, weights):
    ratings, k = data
    table = np.zeros((k, k))
    np.add.at(table, (ratings[:, 0], ratings[:, 1]), 1)
    with np.errstate(all="ignore"):
        reference = sm_cohens_kappa(table, wt=weights, return_results=False) if weights else sm_cohens_kappa(table, return_results=False)
    ours = cohen_kappa(ratings[:, 0], ratings[:, 1], weights=weights, categories=list(range(k)), n_boot=0)
    _same(ours, reference)


@SETTINGS
@given(complete_ratings(min_raters=3, max_raters=5))
def test_many_rater_kappas_equal_nltk(data):
    """Light's kappa (mean pairwise Cohen), Conger / Davies-Fleiss, multi-pi (= Fleiss) and
    average observed agreement, each against NLTK's AnnotationTask on complete data."""
    ratings, k = data
    task = AnnotationTask([(f"c{r}", f"i{i}", int(ratings[i, r])) for i in range(len(ratings)) for r in range(ratings.shape[1])])
    counts, _ = category_counts(ratings, list(range(k)))
    matrix = cohen_kappa_matrix(ratings, n_boot=0)
    if all(r.value is not None for r in matrix.pairs.values()):
        assert matrix.mean == pytest.approx(task.kappa(), abs=1e-9)
    conger = conger_kappa(ratings, n_boot=0)
    fleiss = fleiss_kappa(counts, n_boot=0)
    for ours, nltk_fn in ((conger, task.multi_kappa), (fleiss, task.pi)):
        if ours.value is None:
            assert "one category" in ours.reason
        else:
            assert ours.value == pytest.approx(nltk_fn(), abs=1e-9)
    assert percent_agreement(counts, n_boot=0).value == pytest.approx(task.avg_Ao(), abs=1e-9)
    pairs = percent_agreement_matrix(ratings, n_boot=0)
    for a, b in combinations(range(ratings.shape[1]), 2):
        assert pairs.get(f"rater{a + 1}", f"rater{b + 1}").value == pytest.approx(task.Ao(f"c{a}", f"c{b}"), abs=1e-9)


@SETTINGS
@given(reliability_with_missing(), st.sampled_from(["nominal", "ordinal", "interval", "ratio"]))
def test_krippendorff_alpha_equals_the_krippendorff_package(data, level):
    ours = krippendorff_alpha(data, level, n_boot=0)
    values = {x for row in data for x in row if x is not None}
    pairable = sum(sum(row[u] is not None for row in data) >= 2 for u in range(len(data[0])))
    if len(values) < 2 or pairable == 0:
        assert ours.value is None and ours.reason  # the package raises or divides by zero here
        return
    with np.errstate(all="ignore"):
        reference = krippendorff.alpha(reliability_data=_to_nan(data), level_of_measurement=level)
    _same(ours, float(reference))


@SETTINGS
@given(reliability_with_missing(), st.sampled_from([("nominal", binary_distance), ("interval", interval_distance)]))
def test_krippendorff_alpha_equals_nltk(data, level_distance):
    level, distance = level_distance
    ours = krippendorff_alpha(data, level, n_boot=0)
    task = AnnotationTask(_task(data), distance=distance)
    if ours.value is None:
        return  # NLTK returns 1 (one value) or raises (no data) where alpha is undefined
    assert ours.value == pytest.approx(task.alpha(), abs=1e-9)


label_sets = st.frozensets(st.tuples(st.integers(0, 3), st.integers(0, 2)), min_size=1, max_size=4)


@SETTINGS
@given(st.lists(label_sets, min_size=2, max_size=12))
def test_masi_distance_matrix_equals_nltk(sets):
    matrix = masi_distance_matrix(sets)
    for i, a in enumerate(sets):
        for j, b in enumerate(sets):
            assert matrix[i, j] == pytest.approx(masi_distance(set(a), set(b)), abs=1e-12)


@SETTINGS
@given(reliability_with_missing(values=label_sets))
def test_masi_alpha_equals_nltk_annotation_task(data):
    ours = masi_alpha(data, n_boot=0)
    if ours.value is None:
        return
    task = AnnotationTask(_task(data), distance=masi_distance)
    assert ours.value == pytest.approx(task.alpha(), abs=1e-9)


def _ac1_reference(units: list[list], categories: list) -> float:
    """Gwet (2008), eq. for AC1 with missing ratings, one item at a time (no numpy)."""
    rated = [[x for x in u if x is not None] for u in units]
    rated = [u for u in rated if u]
    q = len(categories)
    two = [u for u in rated if len(u) >= 2]
    pa = sum(sum(u.count(c) * (u.count(c) - 1) for c in categories) / (len(u) * (len(u) - 1)) for u in two) / len(two)
    pi = [sum(u.count(c) / len(u) for u in rated) / len(rated) for c in categories]
    pe = sum(p * (1 - p) for p in pi) / (q - 1)
    return (pa - pe) / (1 - pe)


@SETTINGS
@given(reliability_with_missing(values=st.integers(0, 3)))
def test_gwet_ac1_equals_an_item_by_item_reference(data):
    units = [list(u) for u in zip(*data)]
    cats = [0, 1, 2, 3]
    counts, _ = category_counts(units, cats)
    ours = gwet_ac1(counts, n_boot=0)
    if not any(sum(x is not None for x in u) >= 2 for u in units):
        assert ours.value is None and ("two or more" in ours.reason or "no item has a rating" in ours.reason)
        return
    assert ours.value == pytest.approx(_ac1_reference(units, cats), abs=1e-9)


def test_vectorised_bootstrap_matches_a_naive_bootstrap_rerunning_statsmodels():
    """The percentile interval from resampled sums equals, up to Monte Carlo error, the one from
    resampling items and re-running statsmodels' fleiss_kappa on each resample."""
    rng = np.random.default_rng(3)
    truth = rng.integers(0, 3, 400)
    ratings = np.where(rng.random((400, 4)) < 0.7, truth[:, None], rng.integers(0, 3, (400, 4)))
    counts, _ = category_counts(ratings)
    ours = fleiss_kappa(counts, n_boot=4000, seed=1)
    naive = [sm_fleiss_kappa(counts[rng.integers(0, 400, 400)]) for _ in range(4000)]
    low, high = np.quantile(naive, [0.025, 0.975])
    assert ours.ci[0] == pytest.approx(low, abs=0.01)
    assert ours.ci[1] == pytest.approx(high, abs=0.01)


def test_resampled_sums_both_paths_draw_n_items_per_resample():
    rng = np.random.default_rng(0)
    few = np.array([[1.0], [2.0]])
    sums = next(resampled_sums(few, np.array([60, 40]), 500, rng))  # multinomial path
    assert sums.shape == (500, 1) and abs(sums.mean() - 140.0) < 2.0
    many = np.arange(50, dtype=float)[:, None]
    sums = next(resampled_sums(many, np.ones(50, dtype=int), 500, rng))  # index path
    assert sums.shape == (500, 1) and abs(sums.mean() - many.sum()) < 25.0
    patterns, counts = group_rows(np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]))
    assert counts.tolist() == [1, 2] and patterns.tolist() == [[0.0, 1.0], [1.0, 0.0]]


def test_bootstrap_is_seeded_and_its_coverage_is_near_nominal():
    """Over 300 simulated studies, the 95% interval of Cohen's kappa contains the population
    kappa in about 95% of them (binomial sd 1.3 points; the band is +-4 sd)."""
    p_truth, e_a, e_b, n = 0.6, 0.1, 0.2, 300
    po = (1 - e_a) * (1 - e_b) + e_a * e_b
    pa1 = p_truth * (1 - e_a) + (1 - p_truth) * e_a
    pb1 = p_truth * (1 - e_b) + (1 - p_truth) * e_b
    pe = pa1 * pb1 + (1 - pa1) * (1 - pb1)
    kappa = (po - pe) / (1 - pe)
    hits = 0
    for study in range(300):
        rng = np.random.default_rng(study)
        truth = rng.random(n) < p_truth
        a = truth ^ (rng.random(n) < e_a)
        b = truth ^ (rng.random(n) < e_b)
        r = cohen_kappa(a.astype(int), b.astype(int), n_boot=400, seed=study)
        hits += r.ci[0] <= kappa <= r.ci[1]
        if study == 0:
            again = cohen_kappa(a.astype(int), b.astype(int), n_boot=400, seed=study)
            other = cohen_kappa(a.astype(int), b.astype(int), n_boot=400, seed=study + 1)
            assert again.ci == r.ci and other.ci != r.ci and r.seed == 0 and r.n_boot == 400
    assert 0.90 <= hits / 300 <= 0.99


# ---------------------------------------------------------------------------------------------
# Published worked examples

#: Fleiss (1971), "Measuring nominal scale agreement among many raters", Psychological Bulletin
#: 76(5): 378-382: 30 patients, 6 psychiatrists, 5 diagnoses (1 depression, 2 personality
#: disorder, 3 schizophrenia, 4 neurosis, 5 other). Raw ratings as in R's irr::diagnoses.
FLEISS_1971 = [
    [4, 4, 4, 4, 4, 4], [2, 2, 2, 5, 5, 5], [2, 3, 3, 3, 3, 5], [5, 5, 5, 5, 5, 5], [2, 2, 2, 4, 4, 4],
    [1, 1, 3, 3, 3, 3], [3, 3, 3, 3, 5, 5], [1, 1, 3, 3, 3, 4], [1, 1, 4, 4, 4, 4], [5, 5, 5, 5, 5, 5],
    [1, 4, 4, 4, 4, 4], [1, 2, 4, 4, 4, 4], [2, 2, 2, 3, 3, 3], [1, 4, 4, 4, 4, 4], [2, 2, 4, 4, 4, 5],
    [3, 3, 3, 3, 3, 5], [1, 1, 1, 4, 5, 5], [1, 1, 1, 1, 1, 2], [2, 2, 4, 4, 4, 4], [1, 3, 3, 5, 5, 5],
    [5, 5, 5, 5, 5, 5], [2, 4, 4, 4, 4, 4], [2, 2, 4, 5, 5, 5], [1, 1, 4, 4, 4, 4], [1, 4, 4, 4, 4, 5],
    [2, 2, 2, 2, 2, 4], [1, 1, 1, 1, 5, 5], [2, 2, 4, 4, 4, 4], [1, 3, 3, 3, 3, 3], [5, 5, 5, 5, 5, 5],
]

#: Wikipedia, "Fleiss' kappa", worked example: 10 subjects, 14 raters, 5 categories.
WIKIPEDIA_FLEISS = [
    [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
]

N = None
#: Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", example C: observers A-D,
#: 12 units, values 1-5, with missing values.
KRIPPENDORFF_2011_C = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, N, N, N],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, N, 3],
    [N, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, N],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, N],
]

#: Gwet (2014), Handbook of Inter-Rater Reliability, 4th ed., as the datasets of his irrCAC
#: package, with the values its README prints (github.com/kgwet/irrCAC): ``cac.raw4raters``
#: (12 units x 4 raters, missing ratings), ``cont3x3abstractors`` (2 raters, 3 x 3 table),
#: ``distrib.6raters`` (15 subjects x 5 categories, 6 raters each).
CAC_RAW4RATERS = [
    [1, 1, N, 1], [2, 2, 3, 2], [3, 3, 3, 3], [3, 3, 3, 3], [2, 2, 2, 2], [1, 2, 3, 4],
    [4, 4, 4, 4], [1, 1, 2, 1], [2, 2, 2, 2], [N, 5, 5, 5], [N, N, 1, 1], [N, N, 3, N],
]
CONT3X3_ABSTRACTORS = [[13, 0, 0], [0, 20, 7], [0, 4, 56]]
DISTRIB_6RATERS = [
    [0, 0, 0, 6, 0], [0, 3, 0, 0, 3], [0, 1, 4, 0, 1], [0, 0, 0, 0, 6], [0, 3, 0, 3, 0],
    [2, 0, 4, 0, 0], [0, 0, 4, 0, 2], [2, 0, 3, 1, 0], [2, 0, 0, 4, 0], [0, 0, 0, 0, 6],
    [1, 0, 0, 5, 0], [1, 1, 0, 4, 0], [0, 3, 3, 0, 0], [1, 0, 0, 5, 0], [0, 2, 0, 3, 1],
]


def test_fleiss_1971_psychiatric_diagnoses():
    counts, cats = category_counts(FLEISS_1971)
    r = fleiss_kappa(counts, categories=["depression", "personality disorder", "schizophrenia", "neurosis", "other"])
    assert round(r.value, 3) == 0.430  # Fleiss (1971), p. 380
    per = r.components["per_category_kappa"]
    assert [round(per[c], 3) for c in ("depression", "personality disorder", "schizophrenia", "neurosis", "other")] == [
        0.245, 0.245, 0.520, 0.471, 0.566
    ]
    assert r.band == "moderate" and r.n_items == 30 and r.n_raters == 6
    assert r.ci[0] < r.value < r.ci[1]


def test_wikipedia_fleiss_example():
    r = fleiss_kappa(WIKIPEDIA_FLEISS, n_boot=0)
    assert round(r.value, 3) == 0.210
    assert round(r.components["P_bar"], 3) == 0.378 and round(r.components["P_e"], 3) == 0.213
    assert [round(p, 3) for p in r.components["proportions"].values()] == [0.143, 0.200, 0.279, 0.150, 0.229]
    assert r.band == "fair"


def test_wikipedia_cohen_example():
    """Wikipedia, "Cohen's kappa": 50 grant proposals, 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no."""
    a = ["yes"] * 25 + ["no"] * 25
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    r = cohen_kappa(a, b)
    assert r.value == pytest.approx(0.4) and r.components["P_o"] == pytest.approx(0.7) and r.components["P_e"] == pytest.approx(0.5)


def test_krippendorff_2011_example_c():
    expected = {"nominal": 0.743, "ordinal": 0.815, "interval": 0.849, "ratio": 0.797}
    for level, value in expected.items():
        r = krippendorff_alpha(KRIPPENDORFF_2011_C, level)
        assert round(r.value, 3) == value, level
        assert r.n_items == 11  # unit 12 has one value: not pairable
    assert krippendorff_alpha(KRIPPENDORFF_2011_C, n_boot=0).components["pairable_values"] == 40


def test_gwet_handbook_examples():
    counts, _ = category_counts(CAC_RAW4RATERS)
    ac1 = gwet_ac1(counts)
    assert round(ac1.value, 5) == 0.77544
    assert round(ac1.components["P_a"], 7) == 0.8181818 and round(ac1.components["P_e"], 7) == 0.1903212
    assert round(percent_agreement(counts).value, 7) == 0.8181818
    conger = conger_kappa(CAC_RAW4RATERS)
    assert round(conger.value, 5) == 0.76282 and round(conger.components["P_e"], 7) == 0.2334252
    assert round(krippendorff_alpha([list(c) for c in zip(*CAC_RAW4RATERS)]).value, 5) == 0.74342

    a, b = [], []
    for i, row in enumerate(CONT3X3_ABSTRACTORS):
        for j, n in enumerate(row):
            a += [i] * n
            b += [j] * n
    pair_counts, _ = category_counts(list(zip(a, b)))
    assert round(cohen_kappa(a, b).value, 7) == 0.7964094
    assert round(gwet_ac1(pair_counts).value, 7) == 0.8493305
    assert round(krippendorff_alpha([a, b]).value, 7) == 0.7972585
    assert percent_agreement(pair_counts).value == pytest.approx(0.89)

    ac1 = gwet_ac1(DISTRIB_6RATERS)
    assert round(ac1.value, 7) == 0.4448007 and round(ac1.components["P_e"], 7) == 0.1914815
    fleiss = fleiss_kappa(DISTRIB_6RATERS)
    assert round(fleiss.value, 7) == 0.4139265 and round(fleiss.components["P_e"], 7) == 0.2340741
    assert round(fleiss.components["P_bar"], 7) == 0.5511111


def test_landis_koch_bands_of_the_freb_tqa_figures():
    # FREB-TQA appendix A.2: 0.85 "good agreement" on question typing, 0.53 "moderate" on
    # relevant-cell validity (Landis and Koch 1977).
    assert landis_koch(0.85) == "almost perfect" and landis_koch(0.53) == "moderate"
    assert [landis_koch(v) for v in (-0.01, 0.0, 0.2, 0.21, 0.4, 0.6, 0.61, 0.8, 1.0)] == [
        "poor", "slight", "slight", "fair", "fair", "moderate", "substantial", "substantial", "almost perfect"
    ]
    with pytest.raises(AgreementError):
        landis_koch(float("nan"))


# ---------------------------------------------------------------------------------------------
# Degenerate and malformed inputs


def _strict_json(result) -> None:
    json.dumps(result.as_dict(), allow_nan=False)


def test_one_category_only_is_explained_not_nan():
    counts = [[3, 0], [3, 0], [3, 0]]
    r = fleiss_kappa(counts)
    assert r.value is None and "one category" in r.reason and r.ci is None and r.band is None
    _strict_json(r)
    c = cohen_kappa(["x"] * 5, ["x"] * 5)
    assert c.value is None and "'x'" in c.reason
    a = krippendorff_alpha([[1, 1, 1], [1, 1, None]])
    assert a.value is None and "every pairable value is 1" in a.reason
    m = masi_alpha([[[[0, 1]], [[0, 1]]], [[[0, 1]], None]])
    assert m.value is None and "same set" in m.reason
    # AC1 stays defined (and perfect) when every rating is in one of two possible categories.
    assert gwet_ac1(counts).value == pytest.approx(1.0)
    assert gwet_ac1([[3], [3]]).value is None and "only one category" in gwet_ac1([[3], [3]]).reason
    _strict_json(c), _strict_json(a), _strict_json(m)


def test_fewer_than_two_raters_per_item():
    r = fleiss_kappa([[1, 0], [0, 1]])
    assert r.value is None and "fewer than two" in r.reason
    a = krippendorff_alpha([[1, None, 2], [None, 2, None]])
    assert a.value is None and "no unit has two or more" in a.reason
    assert percent_agreement([[1, 0], [0, 1]]).value is None
    assert gwet_ac1([[1, 0], [0, 1]]).value is None
    assert cohen_kappa([1, None], [None, 2]).value is None
    assert cohen_kappa_matrix([[1]]).reason == "fewer than two raters"


def test_unequal_raters_per_item_is_a_clear_error_for_fleiss():
    with pytest.raises(AgreementError) as exc:
        fleiss_kappa([[2, 1], [1, 1], [3, 0]])
    assert "2 items with 3" in str(exc.value) and "1 items with 2" in str(exc.value)
    assert "Krippendorff" in exc.value.hint


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: fleiss_kappa([1, 2, 3]), "2-D"),
        (lambda: fleiss_kappa([[1, -1]]), "non-negative whole numbers"),
        (lambda: fleiss_kappa([[0.5, 1.5]]), "non-negative whole numbers"),
        (lambda: fleiss_kappa(np.zeros((0, 2))), "no items"),
        (lambda: cohen_kappa([1, 2], [1]), "one per item"),
        (lambda: cohen_kappa(["lo", "hi"], ["hi", "lo"], weights="linear"), "order of the categories"),
        (lambda: cohen_kappa([1, 2], [1, 2], weights="cubic"), "unknown weights"),
        (lambda: cohen_kappa([1, 3], [1, 2], categories=[1, 2]), "not in the value domain"),
        (lambda: krippendorff_alpha([[1, 2], [1]]), "ragged"),
        (lambda: krippendorff_alpha([[1, 2], [1, 2]], "fuzzy"), "unknown level"),
        (lambda: krippendorff_alpha([["a", "b"], ["a", "b"]], "interval"), "numeric values"),
        (lambda: krippendorff_alpha([[1, -2], [1, 2]], "ratio"), "non-negative"),
        (lambda: masi_alpha([["ab", None], [None, None]]), "collection"),
        (lambda: fleiss_kappa([[1, 1]], n_boot=-1), "n_boot"),
        (lambda: fleiss_kappa([[1, 1]], ci_level=1.5), "ci_level"),
        (lambda: proportion([2], [1]), "between 0 and the trials"),
    ],
)
def test_malformed_inputs_raise_agreement_error(call, message):
    with pytest.raises(AgreementError, match=message):
        call()


def test_results_are_frozen_and_json_ready():
    r = fleiss_kappa(WIKIPEDIA_FLEISS, n_boot=50)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.value = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        r.components["P_e"] = 0.0  # type: ignore[index]
    d = r.as_dict()
    assert d["ci"] and d["ci_level"] == 0.95 and d["n_boot"] == 50 and d["seed"] == 0 and d["band"] == "fair"
    _strict_json(r)


def test_large_inputs_meet_the_speed_targets():
    """The benchmark (benchmarks/agreement.py) times these against statsmodels and krippendorff;
    here only a generous bound that keeps an accidental Python loop from slipping in."""
    import time

    rng = np.random.default_rng(0)
    truth = rng.integers(0, 3, 100_000)
    ratings = np.where(rng.random((100_000, 5)) < 0.8, truth[:, None], rng.integers(0, 3, (100_000, 5))).astype(float)
    start = time.perf_counter()
    counts, _ = category_counts(ratings)
    fleiss_kappa(counts, n_boot=0)
    krippendorff_alpha(ratings.T, n_boot=0)
    mid = time.perf_counter()
    fleiss_kappa(counts[:10_000], n_boot=1000)
    end = time.perf_counter()
    assert mid - start < 3.0 and end - mid < 5.0


# ---------------------------------------------------------------------------------------------
# Workflows: records -> rater data -> report


def _seed_records(ws, rows_by_stage) -> None:
    """Insert records stage by stage (parents before children: the store enforces foreign keys)."""
    with ws.session() as s:
        for stage in rows_by_stage:
            s.add_all(stage)
            s.flush()


def _ann(task_id: str, annotator: str, kind: str, label, source_ref: str = "", source: str = "simulation") -> Annotation:
    return Annotation(
        id=content_hash([task_id, annotator, source_ref]), task_id=task_id, annotator=annotator, kind=kind,
        label=label, source=source, source_ref=source_ref,
    )


def _table() -> TableRecord:
    return TableRecord(id="t1", header=["a", "b"], rows=[["1", "2"]], n_rows=1, n_cols=2, numeric_share=1.0)


def test_latest_label_counts_and_unreadable_labels_are_reported(sqlite_workspace):
    ws = sqlite_workspace
    q = Question(id="q1", table_id="t1", text="how many?", subtype="Counting")
    q2 = Question(id="q2", table_id="t1", text="which?", subtype="Lookup")
    tasks = [TaskRecord(id=f"r{i}", kind="question_review", target_type="question", target_id=qq.id) for i, qq in enumerate((q, q2))]
    anns = [
        # ana changed her mind on q1: reject (cli:1) then accept (cli:2); the later one counts.
        _ann("r0", "ana", "question_review", {"decision": "reject", "status": "rejected", "reason": "?"}, "cli:1"),
        _ann("r0", "ana", "question_review", {"decision": "accept", "status": "accepted"}, "cli:2"),
        _ann("r0", "ben", "question_review", {"decision": "edit", "status": "accepted", "text": "how many teams?"}, "cli:1"),
        _ann("r1", "ana", "question_review", {"decision": "promote", "status": "seed"}, "cli:1"),
        _ann("r1", "ben", "question_review", {"verdict": "accept"}, "cli:1"),  # wrong key
        _ann("r1", "cy", "question_review", {"decision": "maybe"}, "cli:1"),  # unknown decision
    ]
    _seed_records(ws, [[_table()], [q, q2], tasks, anns])
    data = load_rater_data(ws, "question_review")
    assert data.raters == ("ana", "ben") and data.items == ("r0", "r1")
    assert data.labels == (("accept", "accept"), ("accept", None))  # edit and promote keep the question
    assert data.subtypes == ("Counting", "Lookup")
    assert len(data.problems) == 2 and any("'maybe' is not one of accept, reject" in p for p in data.problems)
    report = agreement_report(ws, settings=Settings(n_boot=0))
    kr = report.kinds["question_review"]
    assert kr.overall["percent_agreement"].value == 1.0
    assert kr.overall["krippendorff_alpha"].value is None  # one value only: explained
    assert kr.problems == data.problems
    assert kr.per_subtype["Lookup"]["fleiss_kappa"].value is None  # one rating only: explained
    assert "undefined: no item has two or more ratings" in to_markdown(report)

def test_annotations_hash_is_the_content_hash_of_every_annotation_read(sqlite_workspace):
    """The report's annotations hash (the labels read once, with the statistics' labels) is
    ``content_hash`` of the sorted ``[id, label]`` of every annotation on a task of a kind
    reported: older labels, imported ones (not the statistics'), unreadable ones, ids that are
    not plain, and a kind no statistic reads (authored edits), not other kinds. A control: one
    label changed changes it."""
    ws = sqlite_workspace
    q = Question(id="q1", table_id="t1", text="how many?", subtype="Counting")
    tasks = [
        TaskRecord(id="r0", kind="question_review", target_type="question", target_id="q1"),
        TaskRecord(id="e0", kind="value_modification", target_type="variant", target_id="v1"),
        TaskRecord(id="c0", kind="question_typing", target_type="question", target_id="q1"),
    ]
    anns = [
        _ann("r0", "ana", "question_review", {"decision": "reject", "status": "rejected", "reason": "?"}, "cli:1"),
        _ann("r0", "ana", "question_review", {"decision": "accept", "status": "accepted"}, "cli:2"),
        _ann("r0", "ben", "question_review", {"decision": "accept", "status": "accepted"}, "cli:1"),
        _ann("r0", "cy", "question_review", {"verdict": "é"}, "cli:1"),  # unreadable
        _ann("r0", "pub", "question_review", {"decision": "reject", "status": "rejected"}, "x:1", source="imported"),
        _ann("e0", "ana", "value_modification", {"edits": [{"row": 0, "col": 1, "value": "3"}]}, "cli:1"),
        _ann("c0", "ana", "question_typing", {"type": "reasoning"}, "cli:1"),
    ]
    anns[2].id = "odd id/é"  # not a plain id: written as json.dumps writes it
    _seed_records(ws, [[_table()], [q], tasks, anns])
    kinds = ["question_review", "value_modification"]

    def expected() -> str:
        with ws.session() as s:
            rows = s.exec(select(Annotation).where(Annotation.task_id.in_(["r0", "e0"]))).all()
            return content_hash(sorted([a.id, a.label] for a in rows))

    report = agreement_report(ws, kinds=kinds, settings=Settings(n_boot=0))
    assert "value_modification" in report.skipped_kinds and "question_review" in report.kinds
    assert report.annotations_hash == expected()
    every = agreement_report(ws, settings=Settings(n_boot=0))  # every kind present: question_typing too
    with ws.session() as s:
        assert every.annotations_hash == content_hash(sorted([a.id, a.label] for a in s.exec(select(Annotation)).all()))
    with ws.session() as s:  # the control: one label changed (an imported one, which no statistic reads)
        imported = s.get(Annotation, anns[4].id)
        imported.label = {"decision": "accept", "status": "accepted"}
        s.add(imported)
    again = agreement_report(ws, kinds=kinds, settings=Settings(n_boot=0))
    assert again.annotations_hash == expected() != report.annotations_hash



def test_question_review_decisions_written_by_the_review_function(sqlite_workspace):
    from tqaforge.annotation.review import review_question

    ws = sqlite_workspace
    qs = [Question(id="q1", table_id="t1", text="How many teams?", subtype="Counting"),
          Question(id="q2", table_id="t1", text="Which team won?", subtype="Lookup")]
    _seed_records(ws, [[_table()], qs])
    review_question(ws, "q1", "reject", annotator="ana", reason="ambiguous", new=True)
    review_question(ws, "q1", "accept", annotator="ana")  # changed her mind: the latest counts
    review_question(ws, "q1", "edit", annotator="ben", text="How many teams scored?", new=True)
    review_question(ws, "q2", "reject", annotator="ana", reason="answer not in the table")
    review_question(ws, "q2", "promote", annotator="ben")
    data = load_rater_data(ws, "question_review")
    assert data.raters == ("ana", "ben") and not data.problems
    assert dict(zip(data.targets, data.labels)) == {"q1": ("accept", "accept"), "q2": ("reject", "accept")}
    assert dict(zip(data.targets, data.subtypes)) == {"q1": "Counting", "q2": "Lookup"}
    summary = adjudicate(ws, kinds=["question_review"])["question_review"]
    # q1: ana accepted the wording as it was, ben edited it: not a keep of the old wording
    # (issue 24), both wordings wait for a person; q2: reject against promote.
    assert (summary.unanimous, summary.open) == (0, 2)

    def status(qid: str) -> str:
        with ws.session() as s:
            return s.get(Question, qid).status

    # Reviewers who disagree leave the question waiting (proposed), whoever reviewed last; a
    # person's "reject" settles it, a later "accept" makes it accepted.
    assert status("q2") == status("q1") == "proposed"
    queue = {item.target_id: item for item in adjudication_queue(ws, kind="question_review")}
    assert {json.dumps(v["label"]) for v in queue["q1"].votes} == {
        '{"decision": "accept"}', '{"decision": "edit", "text": "How many teams scored?"}'}
    resolve(ws, queue["q2"].task_id, {"decision": "reject"}, by="chair")
    assert status("q2") == "rejected"
    resolve(ws, queue["q2"].task_id, {"decision": "accept"}, by="chair")
    assert status("q2") == "accepted"
    # The chosen edit becomes the question, the old wording kept in its lineage.
    resolve(ws, queue["q1"].task_id, {"decision": "edit", "text": "How many teams scored?"}, by="chair")
    with ws.session() as s:
        q1 = s.get(Question, "q1")
        assert (q1.status, q1.text) == ("accepted", "How many teams scored?")
        assert q1.lineage["edits"][-1]["previous_text"] == "How many teams?"


def test_freb_codes_and_per_subtype_through_variants_and_answers(sqlite_workspace):
    ws = sqlite_workspace
    qs = [Question(id=f"q{i}", table_id="t1", text=f"q {i}", subtype="A" if i < 4 else "B") for i in range(8)]
    answers = [Answer(id=f"a{i}", question_id=f"q{i}", value="1", values=["1"]) for i in range(8)]
    tasks = [TaskRecord(id=f"v{i}", kind="answer_verification", target_type="answer", target_id=f"a{i}") for i in range(8)]
    tasks += [TaskRecord(id=f"t{i}", kind="question_typing", target_type="question", target_id=f"q{i}") for i in range(8)]
    anns = []
    for i in range(8):
        anns += [_ann(f"t{i}", "ana", "question_typing", {"type": 1 if i % 2 else 0}), _ann(f"t{i}", "ben", "question_typing", 1 if i % 2 else "reasoning")]
        anns += [_ann(f"v{i}", "ana", "answer_verification", {"decision": "correct"}),
                 _ann(f"v{i}", "ben", "answer_verification", {"decision": "Correct" if i < 6 else "incorrect"})]
    _seed_records(ws, [[_table()], qs, answers, tasks, anns])
    typing = load_rater_data(ws, "question_typing")
    assert {x for row in typing.labels for x in row} == {"extraction", "reasoning"}
    report = agreement_report(ws, kinds=["question_typing", "answer_verification"], settings=Settings(n_boot=100))
    t = report.kinds["question_typing"]
    assert t.overall["fleiss_kappa"].value == pytest.approx(1.0) and t.overall["fleiss_kappa"].band == "almost perfect"
    v = report.kinds["answer_verification"]
    assert set(v.per_subtype) == {"A", "B"}
    assert v.per_subtype["A"]["percent_agreement"].value == 1.0
    assert v.per_subtype["B"]["percent_agreement"].value == pytest.approx(0.5)
    assert v.pairwise["percent_agreement"].get("ana", "ben").value == pytest.approx(6 / 8)


def test_blind_reanswer_accuracy_uses_the_table_normalisation(sqlite_workspace):
    ws = sqlite_workspace
    q = Question(id="q1", table_id="t1", text="total?", subtype="Aggregation")
    variants = [
        Variant(id="v1", question_id="q1", table_id="t1", perturbation="value_change", answers=["1694"]),
        Variant(id="v2", question_id="q1", table_id="t1", perturbation="value_change", answers=["-5%"]),
        Variant(id="v3", question_id="q1", table_id="t1", perturbation="value_change", answers=["Oslo", "Bergen"]),
        Variant(id="v4", question_id="q1", table_id="t1", perturbation="value_change", answers=None),  # no gold yet
    ]
    tasks = [TaskRecord(id=f"b{i}", kind="blind_reanswer", target_type="variant", target_id=f"v{i}") for i in range(1, 5)]
    # A question as the target: its corrected answer is preferred over the imported gold.
    gold = [Answer(id="a1", question_id="q1", value="Bergen", values=["Bergen"], status="gold"),
            Answer(id="a2", question_id="q1", value="Oslo", values=["Oslo"], status="corrected")]
    tasks.append(TaskRecord(id="b5", kind="blind_reanswer", target_type="question", target_id="q1"))
    anns = [
        _ann("b1", "dee", "blind_reanswer", {"answer": "1,694"}), _ann("b1", "eve", "blind_reanswer", {"answer": "1694.0"}),
        _ann("b2", "dee", "blind_reanswer", {"answer": "5%"}), _ann("b2", "eve", "blind_reanswer", {"answer": "-5 %"}),
        _ann("b3", "dee", "blind_reanswer", {"answers": ["bergen", "OSLO"]}), _ann("b3", "eve", "blind_reanswer", {"answers": ["Oslo"]}),
        _ann("b4", "dee", "blind_reanswer", {"answer": "x"}),
        _ann("b5", "dee", "blind_reanswer", "oslo"),
    ]
    _seed_records(ws, [[_table()], [q], variants + gold, tasks, anns])
    kr = agreement_report(ws, settings=Settings(n_boot=200)).kinds["blind_reanswer"]
    # dee: 1,694 ok; 5% is not -5% (FREB-TQA's typical miss); bergen/OSLO ok -> 2 of 3
    assert kr.per_annotator["dee"].value == pytest.approx(3 / 4)  # and "oslo" against the corrected "Oslo"
    assert kr.per_annotator["eve"].value == pytest.approx(2 / 3)  # 1694.0 ok, -5 % ok, one of two answers
    assert kr.overall["accuracy"].value == pytest.approx(5 / 7) and kr.overall["accuracy"].n_items == 4
    assert any("no gold answer yet" in p for p in kr.problems)
    assert answers_match(["1694"], ["1,694"]) and not answers_match(["-5%"], ["5%"])
    assert not answers_match(["Ｏslo"], ["Oslo"], rules=()) and answers_match(["Ｏslo"], ["oslo"])


def test_relevant_cells_use_masi(sqlite_workspace):
    ws = sqlite_workspace
    qs = [Question(id=f"q{i}", table_id="t1", text=f"q {i}", subtype="S") for i in range(6)]
    tasks = [TaskRecord(id=f"c{i}", kind="relevant_cells", target_type="question", target_id=f"q{i}") for i in range(6)]
    anns = []
    for i in range(6):
        cells = [[i, 0], [i, 1]]
        anns += [_ann(f"c{i}", "ana", "relevant_cells", {"cells": cells}),
                 _ann(f"c{i}", "ben", "relevant_cells", {"cells": cells if i < 4 else cells[:1]}),
                 _ann(f"c{i}", "cy", "relevant_cells", {"cells": cells}),
                 _ann(f"c{i}", "dee", "relevant_cells", {"cells": cells})]
    anns.append(_ann("c0", "dan", "relevant_cells", {"cells": [[0, "x"]]}))
    _seed_records(ws, [[_table()], qs, tasks, anns])
    kr = agreement_report(ws, settings=Settings(n_boot=100)).kinds["relevant_cells"]
    data = load_rater_data(ws, "relevant_cells")
    reference = AnnotationTask(
        [(r, i, frozenset(x)) for i, row in enumerate(data.labels) for r, x in zip(data.raters, row) if x is not None],
        distance=masi_distance,
    ).alpha()
    assert kr.overall["masi_alpha"].value == pytest.approx(reference)
    # A cell is in the others' majority set when more than half of them marked it.
    assert kr.per_annotator["ana"].value == pytest.approx(1.0)
    assert kr.per_annotator["ben"].value == pytest.approx((4 + 2 * (1 - masi_distance({1}, {1, 2}))) / 6)
    assert any("not a [row, col] pair" in p for p in kr.problems)


# ---------------------------------------------------------------------------------------------
# Adjudication


def test_adjudication_rules_queue_person_and_history(sqlite_workspace):
    ws = sqlite_workspace
    qs = [Question(id=f"q{i}", table_id="t1", text=f"q {i}", subtype="S") for i in range(5)]
    tasks = [TaskRecord(id=f"t{i}", kind="question_typing", target_type="question", target_id=f"q{i}") for i in range(5)]
    tasks.append(TaskRecord(id="c0", kind="relevant_cells", target_type="question", target_id="q0"))
    votes = [("extraction",) * 3, ("extraction", "extraction", "reasoning"), ("extraction", "reasoning", "unanswerable"), ("reasoning",), ("reasoning", "extraction")]
    anns = [_ann(f"t{i}", who, "question_typing", {"type": v}) for i, vs in enumerate(votes) for who, v in zip(("ana", "ben", "cy"), vs)]
    anns += [_ann("c0", "ana", "relevant_cells", {"cells": [[0, 0], [1, 1]]}), _ann("c0", "ben", "relevant_cells", {"cells": [[0, 0]]}),
             _ann("c0", "cy", "relevant_cells", {"cells": [[0, 0], [1, 1], [2, 2]]})]
    _seed_records(ws, [[_table()], qs, tasks, anns])

    summary = adjudicate(ws)
    s = summary["question_typing"]
    assert (s.unanimous, s.rule, s.open, s.single, s.new) == (1, 1, 2, 1, 4)
    assert summary["relevant_cells"].rule == 1
    cells = final_labels(ws, "relevant_cells")["c0"]
    assert cells.label == {"cells": [[0, 0], [1, 1]]} and cells.decided_by == "cells marked by at least 2 of 3"
    final = final_labels(ws, "question_typing")
    assert final["t1"].label == {"type": "extraction"} and final["t1"].method == "rule" and final["t1"].decided_by == "majority 2 of 3 (at least 2)"
    assert final["t0"].method == "unanimous"
    assert [q.task_id for q in adjudication_queue(ws)] == ["t2", "t4"]
    again = adjudicate(ws)["question_typing"]
    assert (again.new, again.updated) == (0, 0)  # idempotent

    # At least 3 of 3: the 2-of-3 item goes back to the queue, its rule decision into history.
    strict = adjudicate(ws, kinds=["question_typing"], min_agree=3)["question_typing"]
    assert strict.open == 3 and strict.updated == 1
    with ws.session() as s_:
        row = s_.exec(select(Adjudication).where(Adjudication.task_id == "t1")).one()
        assert row.status == "open" and row.history[-1]["method"] == "rule"

    resolved = resolve(ws, "t2", "reasoning", by="judge", note="the question counts")
    assert resolved.method == "person" and resolved.decided_by == "judge" and resolved.label == {"type": "reasoning"}
    with pytest.raises(AdjudicationError, match="not one of"):
        resolve(ws, "t4", {"type": "both"}, by="judge")
    with pytest.raises(AdjudicationError, match="name of the person"):
        resolve(ws, "t4", "reasoning", by=" ")

    # A new annotation on a person-decided item: the rules keep the decision and flag it.
    _seed_records(ws, [[_ann("t2", "dan", "question_typing", {"type": "extraction"})]])
    after = adjudicate(ws, kinds=["question_typing"])["question_typing"]
    assert after.person == 1 and after.stale == ["t2"]
    assert final_labels(ws, "question_typing")["t2"].label == {"type": "reasoning"}
    # A person overriding a rule keeps the rule's decision in history.
    resolve(ws, "t0", "reasoning", by="chief")
    row = final_labels(ws, "question_typing")["t0"]
    assert row.method == "person" and row.history[-1]["method"] == "unanimous"
    with ws.session() as s_:
        assert s_.exec(select(func.count()).select_from(Annotation)).one() == len(anns) + 1  # nothing deleted
        assert s_.get(TaskRecord, "t0").status == "adjudicated"
    with pytest.raises(AdjudicationError, match="not adjudicated"):
        adjudicate(ws, kinds=["blind_reanswer"])


# ---------------------------------------------------------------------------------------------
# End to end: simulated annotators with known error rates


CATEGORIES = ("extraction", "reasoning", "unanswerable")
PRIOR = np.array([0.5, 0.3, 0.2])
ERRORS = {"ana": 0.05, "ben": 0.15, "cy": 0.30}


def _implied(errors: dict[str, float]) -> dict[str, object]:
    """Population agreement of annotators who keep the true category with probability 1 - e and
    otherwise pick one of the K - 1 others uniformly: P(a = b) = (1 - e_a)(1 - e_b) +
    e_a e_b / (K - 1); P(a = k) = pi_k (1 - e_a) + (1 - pi_k) e_a / (K - 1); Cohen's kappa from
    those; Fleiss' kappa (and, for large N, alpha) from the mean pairwise agreement and the mean
    marginals."""
    k = len(PRIOR)
    marg = {a: PRIOR * (1 - e) + (1 - PRIOR) * e / (k - 1) for a, e in errors.items()}
    po, kappa = {}, {}
    for a, b in combinations(errors, 2):
        po[(a, b)] = (1 - errors[a]) * (1 - errors[b]) + errors[a] * errors[b] / (k - 1)
        pe = float(marg[a] @ marg[b])
        kappa[(a, b)] = (po[(a, b)] - pe) / (1 - pe)
    mean_marg = np.mean(list(marg.values()), axis=0)
    pe_f = float(mean_marg @ mean_marg)
    fleiss = (np.mean(list(po.values())) - pe_f) / (1 - pe_f)
    return {"po": po, "kappa": kappa, "fleiss": fleiss}


def _simulate(ws, n_items: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    qs = [Question(id=f"q{i:05d}", table_id="t1", text=f"question {i}", subtype=("Counting", "MatchBased")[i % 2]) for i in range(n_items)]
    tasks = [TaskRecord(id=f"t{i:05d}", kind="question_typing", target_type="question", target_id=q.id) for i, q in enumerate(qs)]
    truth = rng.choice(len(CATEGORIES), size=n_items, p=PRIOR)
    anns = []
    for who, e in ERRORS.items():
        wrong = rng.random(n_items) < e
        shift = rng.integers(1, len(CATEGORIES), n_items)  # uniformly one of the K - 1 other categories
        labels = np.where(wrong, (truth + shift) % len(CATEGORIES), truth)
        anns += [_ann(t.id, who, "question_typing", {"type": CATEGORIES[int(c)]}) for t, c in zip(tasks, labels)]
    _seed_records(ws, [[_table()], qs, tasks, anns])


def test_agreement_report_end_to_end_recovers_the_simulated_error_rates(sqlite_workspace):
    # SQLite only (suite time): the statistics are numpy's whatever the store; PostgreSQL runs
    # the report path in test_labelstudio_sync.py and the hostile agreement tests.
    ws = sqlite_workspace
    _simulate(ws, n_items=3000, seed=11)
    implied = _implied(ERRORS)
    # Eight intervals are checked; even when everything is right, eight 95% intervals all hold
    # only about two times in three. Bonferroni: 99.9% intervals keep the chance that any of the
    # eight misses below 1% (the coverage test above checks the 95% level itself).
    result = runner.invoke(app, ["-w", str(ws.root), "agreement", "report", "--format", "json", "--ci-level", "0.999", "--seed", "5"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    kind = report["kinds"]["question_typing"]
    assert kind["n_items"] == 3000 and kind["raters"] == ["ana", "ben", "cy"] and report["settings"]["seed"] == 5

    pairs = {tuple(p["raters"]): p for p in kind["pairwise"]["percent_agreement"]["pairs"]}
    kappas = {tuple(p["raters"]): p for p in kind["pairwise"]["cohen_kappa"]["pairs"]}
    for pair in combinations(ERRORS, 2):
        low, high = pairs[pair]["ci"]
        assert low <= implied["po"][pair] <= high, (pair, implied["po"][pair], pairs[pair]["ci"])
        low, high = kappas[pair]["ci"]
        assert low <= implied["kappa"][pair] <= high, (pair, implied["kappa"][pair], kappas[pair]["ci"])
    for name in ("fleiss_kappa", "krippendorff_alpha"):
        low, high = kind["overall"][name]["ci"]
        assert low <= implied["fleiss"] <= high, (name, implied["fleiss"], kind["overall"][name]["ci"])
    # The annotators come out in the order of their error rates.
    per = kind["per_annotator"]
    assert per["ana"]["value"] > per["ben"]["value"] > per["cy"]["value"]

    stored = json.loads((Path(ws.root) / "reports" / "agreement.json").read_text())
    assert stored == report
    assert "Fleiss' kappa" in (Path(ws.root) / "reports" / "agreement.md").read_text()

    table = runner.invoke(app, ["-w", str(ws.root), "agreement", "report", "--kind", "question_typing", "--n-boot", "100"])
    assert table.exit_code == 0 and "Cohen's kappa for each pair" in table.output and "Traceback" not in table.output
    md = runner.invoke(app, ["-w", str(ws.root), "agreement", "report", "--format", "markdown", "--n-boot", "0", "--no-store"])
    assert md.exit_code == 0 and md.stdout.startswith("# Agreement report")

    adj = runner.invoke(app, ["-w", str(ws.root), "agreement", "adjudicate"])
    assert adj.exit_code == 0 and "question_typing:" in adj.output and "open (the queue)" in adj.output
    queue = runner.invoke(app, ["-w", str(ws.root), "agreement", "queue", "--limit", "5"])
    assert queue.exit_code == 0
    first = adjudication_queue(ws, limit=1)[0]
    done = runner.invoke(app, ["-w", str(ws.root), "agreement", "resolve", first.task_id[:6], "reasoning", "--by", "judge"])
    assert done.exit_code == 0, done.output
    assert final_labels(ws, "question_typing")[first.task_id].decided_by == "judge"

    bad = runner.invoke(app, ["-w", str(ws.root), "agreement", "report", "--kind", "nonsense"])
    assert bad.exit_code == 1 and "unknown annotation kind" in bad.output and "Traceback" not in bad.output


def test_write_report_is_atomic_and_named_by_kind(sqlite_workspace):
    ws = sqlite_workspace
    report = agreement_report(ws, settings=Settings(n_boot=0))
    assert report.kinds == {}
    json_path, md_path = write_report(ws, report, kinds=["question_typing"])
    assert json_path.name == "agreement-question_typing.json" and md_path.exists()
    assert not list(json_path.parent.glob("*.partial"))


def _random_cell_study(n_units: int, n_tables: int, seed: int, rows: int = 5, cols: int = 4) -> tuple[list[list], list[str]]:
    """Three raters marking 1-3 cells of each unit's table (sometimes the same, sometimes not)."""
    import random

    rng = random.Random(seed)
    tables = [f"t{u % n_tables}" for u in range(n_units)]
    data: list[list] = [[], [], []]
    for _ in range(n_units):
        truth = {(rng.randrange(rows), rng.randrange(cols)) for _ in range(rng.randint(1, 3))}
        for r in range(3):
            if rng.random() < 0.1:
                data[r].append(None)
                continue
            mine = set(truth) if rng.random() < 0.7 else {(rng.randrange(rows), rng.randrange(cols))}
            data[r].append([list(c) for c in mine])
    return data, tables


def test_masi_alpha_in_blocks_equals_the_textbook_alpha_on_table_keyed_cells():
    """Per-table blocks give exactly alpha over cells named with their table (sets of different
    tables share no cell: MASI distance 1), interval included, without the all-pairs matrix."""
    data, tables = _random_cell_study(120, 15, seed=3)
    keyed = [[None if v is None else [[t, r, c] for r, c in v] for v, t in zip(row, tables)] for row in data]
    blocked = masi_alpha(data, blocks=tables, n_boot=300, seed=5)
    textbook = masi_alpha(keyed, n_boot=300, seed=5)
    assert blocked.value == pytest.approx(textbook.value, abs=1e-12)
    assert blocked.ci is not None and textbook.ci is not None
    assert blocked.ci == (pytest.approx(textbook.ci[0], abs=1e-12), pytest.approx(textbook.ci[1], abs=1e-12))
    assert blocked.components["blocks"] == 15 and textbook.components["blocks"] == 1
    with pytest.raises(AgreementError, match="give one block"):
        masi_alpha(data, blocks=tables[:-1])


def test_masi_alpha_runs_over_thousands_of_questions_in_blocks():
    data, tables = _random_cell_study(8000, 4000, seed=7, rows=40, cols=10)
    with pytest.raises(AgreementError, match="distinct label sets in one block"):
        masi_alpha(data, n_boot=0)
    result = masi_alpha(data, blocks=tables, n_boot=100, seed=1)
    assert result.value is not None and 0.3 < result.value < 0.95
    assert result.components["blocks"] == 4000 and result.ci is not None and result.ci[0] <= result.value <= result.ci[1]


def test_report_on_a_generated_study_equals_the_golden_report(sqlite_workspace):
    """The whole report (every kind, statistic, interval, note and problem) on a generated study
    (tests/agreement_study.py: five kinds, one of each label shape) is identical to the golden
    file written by the code before the report read labels as columns (issue 26): same JSON text,
    so every float to the last bit."""
    import sys
    from datetime import datetime, timezone

    sys.path.insert(0, str(Path(__file__).parent))
    from agreement_study import build_study

    build_study(sqlite_workspace, 400, seed=3)
    golden = json.loads((Path(__file__).parent / "data" / "agreement_report_golden.json").read_text())
    for name, chosen in (("default", Settings(n_boot=200, seed=7)), ("every_source", Settings(n_boot=0, exclude_sources=()))):
        report = agreement_report(sqlite_workspace, settings=chosen, now=lambda: datetime(2026, 1, 2, tzinfo=timezone.utc))
        got = json.loads(json.dumps(report.as_dict(), ensure_ascii=False))
        assert got["workspace"] == "test"
        got["workspace"] = golden[name]["workspace"]  # the study's workspace name, not a statistic
        for kind, expected in golden[name]["kinds"].items():
            assert got["kinds"][kind] == expected, (name, kind)
        assert got == golden[name], name


def test_sparse_sums_and_drawing_in_pieces_give_the_former_bits():
    """SparseRows' sums (integers by column, fractions entry by entry) equal ``np.add.at``'s bit
    for bit, and drawing a chunk's items in pieces gives the weights of one draw: the MASI
    bootstrap of a large study (the sparse path, which the golden study is too small to take)
    is unchanged. A control shows the comparison sees a one-ulp change."""
    from tqaforge.annotation import bootstrap
    from tqaforge.annotation.bootstrap import SparseRows

    rng = np.random.default_rng(11)
    for trial in range(60):
        n, v, b = int(rng.integers(1, 400)), int(rng.integers(1, 60)), int(rng.integers(1, 30))
        keys = np.unique(rng.integers(0, n * v, int(rng.integers(1, 3 * n))))
        sparse = SparseRows(
            n, 1 + v, np.concatenate([np.arange(n), keys // v]),
            np.concatenate([np.zeros(n, dtype=np.int64), keys % v + 1]),
            np.concatenate([rng.random(n) * 3, rng.integers(1, 5, len(keys))]),
        )
        weights = rng.integers(0, 4, (b, n)).astype(np.float64) + (0.5 if trial % 7 == 0 else 0.0)
        expected = np.zeros((b, 1 + v))
        np.add.at(expected, (np.arange(b)[:, None], sparse.cols[None, :]), weights[:, sparse.rows] * sparse.values)
        got = weights @ sparse
        assert np.array_equal(got, expected), trial
    assert not np.array_equal(np.nextafter(got, np.inf), expected)  # the control: one ulp is seen

    counts = np.ones(5000, dtype=np.int64)  # every row distinct: items are drawn
    patterns = rng.random((5000, 3))
    one_piece = []
    draws = np.random.default_rng(3)
    step = bootstrap._CHUNK_CELLS // 5000
    for start in range(0, 1000, step):
        k = min(step, 1000 - start)
        drawn = np.arange(5000)[draws.integers(0, 5000, size=(k, 5000))] + (np.arange(k) * 5000)[:, None]
        one_piece.append(np.bincount(drawn.ravel(), minlength=k * 5000).reshape(k, 5000).astype(np.float64) @ patterns)
    pieces = list(bootstrap.resampled_sums(patterns, counts, 1000, np.random.default_rng(3)))
    assert np.array_equal(np.concatenate(pieces), np.concatenate(one_piece))
    # Sparse patterns are summed a piece of resamples at a time: the same sums as the whole chunk's.
    units = np.arange(5000)
    sparse = SparseRows(5000, 3, np.concatenate([units, units]), np.concatenate([np.zeros(5000, dtype=np.int64), units % 2 + 1]),
                        np.concatenate([patterns[:, 0], np.ones(5000)]))
    whole = []
    draws = np.random.default_rng(4)
    for start in range(0, 1000, step):
        k = min(step, 1000 - start)
        drawn = np.arange(5000)[draws.integers(0, 5000, size=(k, 5000))] + (np.arange(k) * 5000)[:, None]
        whole.append(np.bincount(drawn.ravel(), minlength=k * 5000).reshape(k, 5000).astype(np.float64) @ sparse)
    got = list(bootstrap.resampled_sums(sparse, counts, 1000, np.random.default_rng(4)))  # type: ignore[arg-type]
    assert [g.shape for g in got] == [w.shape for w in whole]
    assert np.array_equal(np.concatenate(got), np.concatenate(whole))


def test_grouping_rows_from_their_few_entries_equals_grouping_the_dense_rows():
    """``group_sparse_rows`` (MASI's units x sets statistics, never held densely) gives
    ``group_rows``' distinct rows, order and counts: ties, empty rows, entries in any order."""
    from tqaforge.annotation.bootstrap import group_rows, group_sparse_rows

    rng = np.random.default_rng(0)
    for trial in range(300):
        n, v = int(rng.integers(1, 300)), int(rng.integers(1, 30))
        dense = np.zeros((n, 1 + v))
        dense[:, 0] = rng.integers(0, 3, n) / 3.0 if trial % 2 else rng.random(n)  # ties in the first column
        places = np.unique(rng.integers(0, n, int(rng.integers(0, n * 3))) * (v + 1) + rng.integers(1, 1 + v, 1))
        places = np.unique(np.concatenate([places, rng.integers(0, n, n) * (v + 1) + rng.integers(1, 1 + v, n)]))
        rows, cols = places // (v + 1), places % (v + 1)
        values = rng.integers(1, 4, len(rows)).astype(np.float64)
        dense[rows, cols] = values
        shuffled = rng.permutation(len(rows))
        expected = group_rows(dense)
        got = group_sparse_rows(dense[:, 0], rows[shuffled], cols[shuffled], values[shuffled], v + 1)
        assert np.array_equal(got[0], expected[0]) and np.array_equal(got[1], expected[1]), trial

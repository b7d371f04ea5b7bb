"""Label quality: Dawid-Skene against crowd-kit on crowd-kit's own example data, a simulated crowd
with planted defects, and the workspace path end to end (SQLite, and PostgreSQL when set).

crowd-kit (a development dependency: ``pip install crowd-kit==1.4.2``) is the independent
implementation; its example data here are the toy data sets of its own test suite
(github.com/Toloka/crowd-kit, tests/conftest.py ``toy_answers_df`` and ``simple_answers_df``,
tests/aggregation/test_ds_aggregation.py ``data``): ``crowdkit.datasets`` downloads its larger
sets from the network, which the tests do not have.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from sqlmodel import select

from tests.test_agreement import TaskRecord, _ann, _seed_records, _table
from tqaforge.annotation.adjudication import adjudicate, final_labels, resolve
from tqaforge.annotation.kinds import kind_spec
from tqaforge.annotation.label_quality import (
    LabelQualityOptions,
    dawid_skene,
    kind_label_quality,
    label_quality,
)
from tqaforge.annotation.rater_data import RaterData
from tqaforge.schemas.records import Adjudication, Annotation, Question

# --- crowd-kit's example data ------------------------------------------------------------------

#: crowd-kit tests/conftest.py toy_answers_df (worker, task, label); its ground truth: t1 yes,
#: t2 yes, t3 no, t4 yes, t5 no.
TOY = [
    ("w1", "t1", "no"), ("w1", "t2", "yes"), ("w1", "t3", "yes"), ("w1", "t4", "yes"), ("w1", "t5", "yes"),
    ("w2", "t1", "yes"), ("w2", "t2", "yes"), ("w2", "t3", "no"), ("w2", "t4", "yes"), ("w2", "t5", "no"),
    ("w3", "t2", "yes"), ("w3", "t3", "no"), ("w3", "t4", "yes"), ("w3", "t5", "no"),
    ("w4", "t1", "yes"), ("w4", "t2", "no"), ("w4", "t3", "yes"), ("w4", "t4", "yes"), ("w4", "t5", "no"),
    ("w5", "t1", "no"), ("w5", "t2", "no"), ("w5", "t3", "no"), ("w5", "t4", "yes"), ("w5", "t5", "no"),
]
TOY_TRUTH = {"t1": "yes", "t2": "yes", "t3": "no", "t4": "yes", "t5": "no"}

#: crowd-kit tests/aggregation/test_ds_aggregation.py ``data`` (task, worker, label): the step-by-step case.
STEPS = [
    ("w1", "t1", "no"), ("w2", "t1", "yes"), ("w4", "t1", "yes"), ("w5", "t1", "no"),
    ("w1", "t2", "yes"), ("w2", "t2", "yes"), ("w3", "t2", "yes"), ("w4", "t2", "no"), ("w5", "t2", "no"),
    ("w1", "t3", "yes"), ("w2", "t3", "no"), ("w3", "t3", "no"), ("w4", "t3", "yes"), ("w5", "t3", "no"),
    ("w1", "t4", "yes"), ("w2", "t4", "yes"), ("w3", "t4", "yes"), ("w4", "t4", "yes"), ("w5", "t4", "yes"),
    ("w1", "t5", "yes"), ("w2", "t5", "no"), ("w3", "t5", "no"), ("w4", "t5", "no"), ("w5", "t5", "no"),
]

_W = {"g1": "bde3b214b06c1efa6cb1bc6284dc72d2", "g2": "b17c3301ad2ccbb798716fdd405d16e8",
      "g3": "a452e450f913cfa987cad58d50393718", "g4": "0f65edea0a6dc7b9acba1dea313bbb3d",
      "fraud": "0c3eb7d5fcc414db137c4180a654c06e", "careless": "e563e2fb32fce9f00123a65a1bc78c55"}
_T = "1231239876--5fac0d234ffb2f3b00893"
#: crowd-kit tests/conftest.py simple_answers_df: four good workers, a fraudster always answering
#: "parrot", a careless one; its ground truth below (simple_ground_truth).
SIMPLE = [(_W[w], _T + t, label) for w, t, label in [
    ("g1", "eec", "goose"), ("g1", "efb", "parrot"), ("g1", "f03", "goose"), ("g1", "f05", "goose"),
    ("g1", "f02", "parrot"), ("g1", "f08", "parrot"),
    ("g2", "efb", "parrot"), ("g2", "ee8", "chicken"), ("g2", "f07", "parrot"), ("g2", "efd", "chicken"),
    ("g2", "ee4", "chicken"), ("g2", "f03", "goose"),
    ("g3", "ee8", "chicken"), ("g3", "eec", "goose"), ("g3", "f05", "goose"), ("g3", "f02", "parrot"),
    ("g3", "f08", "parrot"),
    ("g4", "eec", "goose"), ("g4", "ee8", "chicken"), ("g4", "f03", "goose"), ("g4", "ee4", "chicken"),
    ("fraud", "eec", "parrot"), ("fraud", "efb", "parrot"), ("fraud", "f07", "parrot"), ("fraud", "efd", "parrot"),
    ("fraud", "ee4", "parrot"), ("fraud", "f05", "parrot"),
    ("careless", "efb", "parrot"), ("careless", "ee8", "goose"), ("careless", "f02", "parrot"),
    ("careless", "f08", "parrot"), ("careless", "f07", "parrot"), ("careless", "efd", "goose"),
]]
SIMPLE_TRUTH = {_T + t: v for t, v in [
    ("eec", "goose"), ("f03", "goose"), ("f05", "goose"), ("efb", "parrot"), ("f02", "parrot"),
    ("f08", "parrot"), ("f07", "parrot"), ("ee8", "chicken"), ("efd", "chicken"), ("ee4", "chicken"),
]}


def _codes(rows):
    """(worker, task, label) rows as items x workers codes, with the task, worker and value orders."""
    tasks = sorted({t for _, t, _ in rows})
    workers = sorted({w for w, _, _ in rows})
    values = sorted({v for _, _, v in rows})
    codes = np.full((len(tasks), len(workers)), -1, dtype=np.int64)
    for w, t, v in rows:
        codes[tasks.index(t), workers.index(w)] = values.index(v)
    return codes, tasks, workers, values


def _crowdkit(rows, n_iter: int, tol: float):
    import pandas as pd  # the reference is a dev dependency: CI must run it, never skip it
    from crowdkit import aggregation
    df = pd.DataFrame(rows, columns=["worker", "task", "label"])
    with warnings.catch_warnings():  # crowd-kit 1.4.2 uses pandas' deprecated inplace arguments
        warnings.simplefilter("ignore")
        return aggregation.DawidSkene(n_iter=n_iter, tol=tol).fit(df)


@pytest.mark.parametrize("rows", [TOY, STEPS, SIMPLE], ids=["toy_ysda", "step_by_step", "simple"])
@pytest.mark.parametrize("n_iter, tol", [(0, 1e-5), (1, 1e-5), (2, 1e-5), (10, 0.0), (100, 1e-5), (100500, 1e-5)])
def test_dawid_skene_equals_crowdkit_on_its_example_data(rows, n_iter, tol):
    """Posteriors, priors, confusion matrices, labels and the number of iterations equal
    crowd-kit's DawidSkene (1.4.2) within 1e-6, at every stopping point."""
    ds = _crowdkit(rows, n_iter, tol)
    codes, tasks, workers, values = _codes(rows)
    fit = dawid_skene(codes, len(values), max_iter=n_iter, tol=tol)
    theirs = ds.probas_.loc[tasks, values].to_numpy()
    np.testing.assert_allclose(fit.posteriors, theirs, atol=1e-6, rtol=0)
    # Labels: the most probable value; on a tie (the majority vote of two against two) crowd-kit
    # takes the first of its columns, in an order of its own: any of the tied values then.
    for row, theirs_label in zip(fit.posteriors, ds.labels_.loc[tasks].tolist()):
        assert theirs_label in {values[c] for c in np.flatnonzero(row >= row.max() - 1e-12)}
    assert sum(values[c] != t for c, t in zip(fit.labels, ds.labels_.loc[tasks])) <= (1 if n_iter == 0 else 0)
    if n_iter:
        assert fit.iterations == len(ds.loss_history_)
    np.testing.assert_allclose(fit.priors, ds.priors_.loc[values].to_numpy(), atol=1e-6, rtol=0)
    for w, worker in enumerate(workers):
        table = ds.errors_.loc[worker]
        for given, observed in enumerate(values):
            if observed in table.index:
                np.testing.assert_allclose(fit.errors[w, given], table.loc[observed, values].to_numpy(), atol=1e-6, rtol=0)
            else:  # a value the worker never gave: no row in crowd-kit, probability 0 here
                assert not fit.errors[w, given].any()


def test_dawid_skene_finds_crowdkits_ground_truth_and_fraudster():
    """Without crowd-kit: the ground truths its tests state, and the fraudster is the least accurate."""
    for rows, truth in ((TOY, TOY_TRUTH), (SIMPLE, SIMPLE_TRUTH)):
        codes, tasks, workers, values = _codes(rows)
        fit = dawid_skene(codes, len(values))
        assert fit.converged and {t: values[c] for t, c in zip(tasks, fit.labels)} == truth
    codes, _, workers, values = _codes(SIMPLE)
    accuracy = dawid_skene(codes, len(values)).accuracy()
    assert workers[int(accuracy.argmin())] == _W["fraud"]
    # Published by the step-by-step test after one iteration (two decimals): t1 0.35/0.65, t3 0.87/0.13.
    codes, tasks, _, values = _codes(STEPS)
    one = dawid_skene(codes, len(values), max_iter=1)
    np.testing.assert_allclose(one.posteriors[[0, 2]], [[0.35, 0.65], [0.87, 0.13]], atol=0.006)


# --- a simulated crowd with planted defects ----------------------------------------------------

def _rater_data(kind: str, labels, raters) -> RaterData:
    n = len(labels)
    items = tuple(f"task{i:03d}" for i in range(n))
    return RaterData(kind_spec(kind), items, ("question",) * n, tuple(f"q{i}" for i in range(n)), ("S",) * n,
                     tuple(raters), tuple(tuple(row) for row in labels), tuple((None,) * len(raters) for _ in range(n)))


def test_simulated_crowd_finds_planted_bad_annotator_and_wrong_gold():
    """120 items, three types; six careful annotators (right 85% of the time), one who answers at
    random; gold from the truth except ten items whose gold was planted wrong. The report finds
    exactly the planted gold items and exactly the random annotator."""
    rng = np.random.default_rng(7)
    cats = ("extraction", "reasoning", "unanswerable")
    truth = rng.choice(3, size=120, p=[0.5, 0.35, 0.15])
    raters = [f"good{j}" for j in range(6)] + ["random"]
    labels = []
    for t in truth:
        row = []
        for j in range(7):
            if j < 6:
                row.append(cats[t] if rng.random() < 0.85 else cats[rng.choice([c for c in range(3) if c != t])])
            else:
                row.append(cats[rng.integers(3)])
        labels.append(row)
    data = _rater_data("question_typing", labels, raters)
    wrong = set(rng.choice(120, size=10, replace=False).tolist())
    gold = {item: (cats[(t + 1) % 3] if i in wrong else cats[t], "person" if i in wrong else "rule", "lead" if i in wrong else None)
            for i, (item, t) in enumerate(zip(data.items, truth))}
    report = kind_label_quality(data, gold, LabelQualityOptions())
    assert {g.task_id for g in report.suspect_gold} == {data.items[i] for i in wrong}
    assert [a.annotator for a in report.poor_annotators] == ["random"]
    random_one = next(a for a in report.annotators if a.annotator == "random")
    assert random_one.n_labels == 120 and random_one.accuracy < 0.5
    assert all(a.accuracy > 0.75 for a in report.annotators if a.annotator != "random")
    # the estimate recovers the truth on (nearly) every item, and the evidence is the votes
    right = sum(it.estimate == cats[t] for it, t in zip(report.items, truth))
    assert right >= 118
    some = report.suspect_gold[0]
    i = data.items.index(some.task_id)
    assert some.votes == dict(zip(raters, labels[i])) and some.method == "person" and some.decided_by == "lead"
    assert some.gold_posterior < 0.5 < some.posterior
    # agreement: the share of the labels equal to the most frequent one
    for it, row in zip(report.items, labels):
        top = max(row.count(v) for v in set(row))
        assert it.agreement == pytest.approx(top / 7) and it.n_labels == 7
    text = "\n".join(report.lines())
    assert "10 where the estimate disagrees" in text and "random: estimated accuracy" in text
    uncertain = [it for it in report.items if it.posterior < 0.9]
    assert f"posterior below 0.9: {len(uncertain)}" in text
    assert all(f"    {it.task_id}: {it.estimate} ({it.posterior:.3f})" in text for it in uncertain[:20])


# --- the workspace path -------------------------------------------------------------------------

def test_workspace_label_quality_end_to_end_reports_and_changes_nothing(workspace):
    """Question typing in a real store (SQLite; PostgreSQL when TQAFORGE_TEST_DATABASE_URL is set):
    three annotators who agree on the type, one who always says "unanswerable"; the rules
    adjudicate, then a person overrides two items against every annotator. The report lists those
    two with the evidence and the contrarian as poor; no label or adjudication changes."""
    ws = workspace
    cats = ("extraction", "reasoning")
    n = 12
    qs = [Question(id=f"q{i}", table_id="t1", text=f"q {i}", subtype="S") for i in range(n)]
    tasks = [TaskRecord(id=f"t{i:02d}", kind="question_typing", target_type="question", target_id=f"q{i}") for i in range(n)]
    anns = [_ann(f"t{i:02d}", who, "question_typing", {"type": cats[i % 2]}) for i in range(n) for who in ("ana", "ben", "cy")]
    anns += [_ann(f"t{i:02d}", "dee", "question_typing", {"type": "unanswerable"}) for i in range(n)]
    _seed_records(ws, [[_table()], qs, tasks, anns])
    adjudicate(ws, kinds=["question_typing"])
    resolve(ws, "t03", "extraction", by="lead")  # the annotators said reasoning
    resolve(ws, "t04", "unanswerable", by="lead")  # they said extraction (dee's constant answer)

    def snapshot():
        with ws.session() as s:
            a = sorted((r.id, json.dumps(r.label, sort_keys=True)) for r in s.exec(select(Annotation)).all())
            d = sorted((r.task_id, json.dumps(r.label, sort_keys=True), str(r.method), r.decided_by) for r in s.exec(select(Adjudication)).all())
        return a, d

    before = snapshot()
    report = label_quality(ws, LabelQualityOptions(kinds=("question_typing",), min_labels=5))
    assert snapshot() == before  # reports only
    kq = report.kinds["question_typing"]
    assert kq.n_gold == len(final_labels(ws, "question_typing")) == n
    assert {g.task_id for g in kq.suspect_gold} == {"t03", "t04"}
    t03 = next(g for g in kq.suspect_gold if g.task_id == "t03")
    assert (t03.gold, t03.estimate, t03.method, t03.decided_by) == ("extraction", "reasoning", "person", "lead")
    assert t03.votes == {"ana": "reasoning", "ben": "reasoning", "cy": "reasoning", "dee": "unanswerable"}
    assert [a.annotator for a in kq.poor_annotators] == ["dee"]
    assert next(a for a in kq.annotators if a.annotator == "dee").n_labels == n
    assert all(it.agreement == 0.75 and it.n_labels == 4 for it in kq.items)
    assert {it.task_id: it.estimate for it in kq.items} == {f"t{i:02d}": cats[i % 2] for i in range(n)}
    as_dict = report.as_dict()
    json.dumps(as_dict)  # JSON-ready
    assert as_dict["kinds"]["question_typing"]["poor_annotators"] == ["dee"]
    text = report.text()
    assert "t03: gold extraction (person by lead" in text and "dee: estimated accuracy" in text
    # The default (every category kind): kinds without labels are left out.
    assert list(label_quality(ws).kinds) == ["question_typing"]

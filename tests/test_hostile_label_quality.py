"""Hostile inputs for the label-quality report (Dawid-Skene; issue 28, item 3): one annotator, no
labels, an annotator with one label, label values nobody gave, lying codes, kinds that are not
categories, unreadable gold, a large crowd. The store-backed cases run on SQLite and, when
configured, PostgreSQL."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tests.test_agreement import TaskRecord, _ann, _seed_records, _table
from tests.test_label_quality import _rater_data
from tqaforge.annotation.adjudication import adjudicate, resolve
from tqaforge.annotation.label_quality import LabelQualityOptions, dawid_skene, kind_label_quality, label_quality
from tqaforge.errors import AgreementError
from tqaforge.schemas.records import Adjudication, Question

pytestmark = pytest.mark.hostile


def _typing_store(ws, votes: dict[str, dict[str, object]]) -> None:
    """question_typing tasks t<i> on questions q<i>, with the given {task: {annotator: label}}."""
    n = len(votes)
    qs = [Question(id=f"q{i}", table_id="t1", text=f"q {i}", subtype="S") for i in range(n)]
    tasks = [TaskRecord(id=f"t{i}", kind="question_typing", target_type="question", target_id=f"q{i}") for i in range(n)]
    anns = [_ann(f"t{i}", who, "question_typing", label) for i, per in enumerate(votes.values()) for who, label in per.items()]
    _seed_records(ws, [[_table()], qs, tasks, anns])


def test_no_labels_at_all(workspace):
    """An empty store: no kind reported by default; a kind asked for says it has no labels."""
    assert label_quality(workspace).kinds == {}
    assert "no category labels" in label_quality(workspace).text()
    asked = label_quality(workspace, LabelQualityOptions(kinds=("question_typing",)))
    kq = asked.kinds["question_typing"]
    assert kq.items == () and kq.annotators == () and kq.suspect_gold == ()
    assert kq.lines() == ["question_typing: no labels"]


def test_only_unreadable_labels_are_problems_not_items(workspace):
    _typing_store(workspace, {"t0": {"ana": {"type": "both"}, "ben": {"kind": "x"}}})
    kq = label_quality(workspace, LabelQualityOptions(kinds=("question_typing",))).kinds["question_typing"]
    assert kq.items == () and len(kq.problems) == 2
    assert any("'both' is not one of" in p for p in kq.problems)


def test_one_annotator(workspace):
    """One annotator: the estimate is their label (nothing to weigh it against), their accuracy
    1 by the model; a person's gold against it is still listed."""
    _typing_store(workspace, {f"t{i}": {"ana": {"type": "extraction" if i % 3 else "reasoning"}} for i in range(6)})
    resolve(workspace, "t1", "reasoning", by="lead")
    kq = label_quality(workspace, LabelQualityOptions(kinds=("question_typing",))).kinds["question_typing"]
    assert [it.estimate for it in kq.items] == ["reasoning", "extraction", "extraction", "reasoning", "extraction", "extraction"]
    assert all(it.posterior == pytest.approx(1.0) and it.agreement == 1.0 and it.n_labels == 1 for it in kq.items)
    assert [(g.task_id, g.gold, g.estimate) for g in kq.suspect_gold] == [("t1", "reasoning", "extraction")]
    (ana,) = kq.annotators
    assert ana.n_labels == 6 and ana.accuracy == pytest.approx(1.0) and not ana.poor


def test_annotator_with_one_label_is_listed_not_judged(workspace):
    """Dee gave one label, against the others: too few to call her poor; she is named with her count."""
    votes = {f"t{i}": {who: {"type": "extraction" if i % 2 else "reasoning"} for who in ("ana", "ben", "cy")} for i in range(8)}
    votes["t0"]["dee"] = {"type": "unanswerable"}
    _typing_store(workspace, votes)
    kq = label_quality(workspace, LabelQualityOptions(kinds=("question_typing",), min_labels=2)).kinds["question_typing"]
    dee = next(a for a in kq.annotators if a.annotator == "dee")
    assert dee.n_labels == 1 and not dee.judged and not dee.poor
    assert kq.poor_annotators == ()
    assert "too few labels to judge: dee (1)" in "\n".join(kq.lines())
    t0 = next(it for it in kq.items if it.task_id == "t0")
    assert (t0.n_labels, t0.majority, t0.agreement, t0.estimate) == (4, "reasoning", 0.75, "reasoning")


def test_gold_value_no_annotator_gave(workspace):
    """Unseen label value: the gold is a category no annotator used; its posterior is 0, it is listed."""
    _typing_store(workspace, {f"t{i}": {w: {"type": "extraction"} for w in ("ana", "ben")} for i in range(3)})
    adjudicate(workspace, kinds=["question_typing"])
    resolve(workspace, "t2", "unanswerable", by="lead")
    kq = label_quality(workspace, LabelQualityOptions(kinds=("question_typing",))).kinds["question_typing"]
    assert kq.values == ("extraction",)  # the values used, not every category of the kind
    (g,) = kq.suspect_gold
    assert (g.task_id, g.gold, g.gold_posterior, g.estimate, g.method) == ("t2", "unanswerable", 0.0, "extraction", "person")
    assert kq.n_gold == 3


def test_unreadable_final_label_is_no_gold(workspace):
    """A resolved adjudication whose label the kind cannot read (written around the API) is left out."""
    _typing_store(workspace, {"t0": {"ana": {"type": "reasoning"}, "ben": {"type": "reasoning"}}})
    with workspace.session() as s:
        s.add(Adjudication(id="adj-x", task_id="t0", kind="question_typing", status="resolved", label={"type": "both"}, method="person", decided_by="x"))
    kq = label_quality(workspace, LabelQualityOptions(kinds=("question_typing",))).kinds["question_typing"]
    assert kq.n_gold == 0 and kq.suspect_gold == () and kq.items[0].gold is None


def test_value_of_the_kind_never_used_and_a_larger_k():
    """k larger than the codes used: the unused value gets no mass; posteriors stay probabilities."""
    codes = np.array([[0, 0, 1], [1, 1, 1], [0, -1, 0]])
    fit = dawid_skene(codes, 4)
    assert fit.posteriors.shape == (3, 4) and np.allclose(fit.posteriors.sum(axis=1), 1.0, atol=1e-8)
    assert np.all(fit.posteriors[:, 2:] <= 1e-9) and np.all(np.isfinite(fit.errors))
    assert list(fit.labels) == [0, 1, 0]


def test_an_annotator_column_without_labels():
    """A column of -1 (an annotator who labelled none of these items): zeros, no NaN, no weight."""
    with_empty = dawid_skene(np.array([[0, 0, -1], [1, 1, -1], [0, 1, -1]]), 2)
    without = dawid_skene(np.array([[0, 0], [1, 1], [0, 1]]), 2)
    assert np.all(np.isfinite(with_empty.errors)) and not with_empty.errors[2].any()
    np.testing.assert_allclose(with_empty.posteriors, without.posteriors)
    assert with_empty.accuracy()[2] == 0.0


def test_all_labels_the_same_value():
    fit = dawid_skene(np.zeros((4, 3), dtype=int))
    assert fit.converged and np.allclose(fit.posteriors, 1.0) and np.allclose(fit.accuracy(), 1.0)


@pytest.mark.parametrize("codes, k, message", [
    (np.array([[0, 1], [-1, -1]]), None, r"item 1 \(row\) has no label"),
    (np.array([[0, 3]]), 2, "code 3 is not below the number of values 2"),
    (np.array([[0.0, np.nan]]), None, "integer codes"),
    (np.array([["a", "b"]]), None, "integer codes"),
    (np.array([0, 1]), None, "items x annotators"),
    (np.array([[0, -2]]), None, "with code -2"),
])
def test_lying_codes_are_refused(codes, k, message):
    with pytest.raises(AgreementError, match=message) as err:
        dawid_skene(codes, k)
    assert err.value.hint


def test_no_items_is_an_empty_fit():
    fit = dawid_skene(np.zeros((0, 3), dtype=int), 2)
    assert fit.posteriors.shape == (0, 2) and fit.labels.size == 0 and fit.iterations == 0


@pytest.mark.parametrize("options, message", [
    (LabelQualityOptions(kinds=("relevant_cells",)), "has set labels"),
    (LabelQualityOptions(kinds=("blind_reanswer",)), "has answer labels"),
    (LabelQualityOptions(kinds=("no_such_kind",)), "unknown annotation kind"),
    (LabelQualityOptions(poor_accuracy=1.5), "between 0 and 1"),
    (LabelQualityOptions(min_labels=0), "at least 1"),
    (LabelQualityOptions(tol=float("nan")), "at least 0"),
])
def test_bad_options_and_kinds_are_refused(sqlite_workspace, options, message):
    with pytest.raises(AgreementError, match=message) as err:
        label_quality(sqlite_workspace, options)
    assert err.value.hint


def test_large_crowd_is_fast():
    """50,000 items by 7 annotators (one random) with three values: the report in seconds."""
    rng = np.random.default_rng(3)
    truth = rng.integers(0, 3, 50_000)
    codes = np.where(rng.random((50_000, 7)) < 0.85, truth[:, None], rng.integers(0, 3, (50_000, 7)))
    codes[:, 6] = rng.integers(0, 3, 50_000)
    codes[rng.random((50_000, 7)) < 0.3] = -1
    codes[codes.max(axis=1) < 0, 0] = truth[codes.max(axis=1) < 0]
    start = time.perf_counter()
    fit = dawid_skene(codes, 3)
    took = time.perf_counter() - start
    assert (fit.labels == truth).mean() > 0.97 and int(fit.accuracy().argmin()) == 6
    assert took < 10.0


def test_raters_who_labelled_nothing_here_and_a_tie():
    """A tie of two against two: no majority, agreement 0.5; the estimate still picks one."""
    data = _rater_data("question_typing", [["reasoning", "reasoning", "extraction", "extraction"]] * 2
                       + [["reasoning", "reasoning", "reasoning", "extraction"]] * 6, ["ana", "ben", "cy", "dee"])
    kq = kind_label_quality(data)
    assert kq.items[0].majority is None and kq.items[0].agreement == 0.5
    assert kq.items[0].estimate in {"reasoning", "extraction"}
    assert kq.n_gold == 0 and kq.suspect_gold == ()

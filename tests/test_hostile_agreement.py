"""Hostile inputs for agreement statistics, adjudication and the review queue (issue 10).

Each test names the case of the issue it guards. Statistics are exercised on the tiny inputs
a pilot produces (1-30 items, 2-3 annotators, all agreeing, all disagreeing, one category,
missing ratings); the store-backed cases run on SQLite and, when configured, PostgreSQL.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tqaforge.annotation.adjudication import adjudicate, adjudication_queue, resolve
from tqaforge.annotation.agreement import (
    LEVELS,
    AgreementResult,
    PairwiseResult,
    category_counts,
    cohen_kappa,
    cohen_kappa_matrix,
    conger_kappa,
    fleiss_kappa,
    gwet_ac1,
    krippendorff_alpha,
    masi_alpha,
    percent_agreement,
    percent_agreement_matrix,
    proportion,
)
from tqaforge.annotation.kinds import KINDS, KindSpec, LabelError, feeding_kinds, register_kind
from tqaforge.annotation.report_format import to_markdown
from tqaforge.annotation.review import review_queue
from tqaforge.annotation.workflows import Settings, agreement_report
from tqaforge.errors import AdjudicationError, AgreementError, TqaforgeError
from tqaforge.ids import content_hash
from tqaforge.schemas.records import Annotation, AnnotationTask, Question, TableRecord

pytestmark = pytest.mark.hostile

CATEGORIES = ("a", "b", "c")


# ---------------------------------------------------------------------------------------------
# Helpers


def _seed(ws, *stages) -> None:
    """Insert records stage by stage (parents first: the store enforces foreign keys)."""
    with ws.session() as s:
        for stage in stages:
            s.add_all(stage)
            s.flush()


def _ann(task_id: str, annotator: str, kind: str, label) -> Annotation:
    return Annotation(
        id=content_hash([task_id, annotator]), task_id=task_id, annotator=annotator, kind=kind,
        label=label, source="simulation", source_ref="sim:1",
    )


def _table(n_rows: int = 3, n_cols: int = 2) -> TableRecord:
    rows = [[str(r * n_cols + c) for c in range(n_cols)] for r in range(n_rows)]
    return TableRecord(
        id="t1", header=[f"h{c}" for c in range(n_cols)], rows=rows, n_rows=n_rows, n_cols=n_cols, numeric_share=1.0
    )


def _questions(n: int) -> list[Question]:
    return [Question(id=f"q{i}", table_id="t1", text=f"question {i}?", subtype="S") for i in range(n)]


def _tasks(kind: str, n: int) -> list[AnnotationTask]:
    return [AnnotationTask(id=f"{kind[:3]}{i}", kind=kind, target_type="question", target_id=f"q{i}") for i in range(n)]


def _assert_well_formed(result: AgreementResult | PairwiseResult) -> None:
    """A value with a finite interval (or a stated reason), or no value and a stated reason."""
    results = list(result.pairs.values()) if isinstance(result, PairwiseResult) else [result]
    for r in results:
        if r.value is None:
            assert r.reason, r
        else:
            assert math.isfinite(r.value), r
            if r.n_boot:
                assert r.ci is not None or r.ci_reason, r
        if r.ci is not None:
            assert all(math.isfinite(x) for x in r.ci) and r.ci[0] <= r.ci[1] + 1e-12, r
        r.as_dict()  # JSON-ready


def _every_statistic(rows: list[list], n_boot: int, seed: int):
    """Every statistic of the agreement module on one items x raters table of labels."""
    kw = {"n_boot": n_boot, "seed": seed}
    reliability = [list(col) for col in zip(*rows)]
    numbers = [[None if x is None else CATEGORIES.index(x) + 1 for x in col] for col in reliability]
    sets = [[None if x is None else [[CATEGORIES.index(x), 0]] for x in col] for col in reliability]
    yield lambda: cohen_kappa([r[0] for r in rows], [r[1] for r in rows], **kw)
    yield lambda: cohen_kappa([r[0] for r in rows], [r[1] for r in rows], weights="quadratic", categories=CATEGORIES, **kw)
    yield lambda: cohen_kappa_matrix(rows, **kw)
    yield lambda: percent_agreement_matrix(rows, **kw)
    yield lambda: conger_kappa(rows, **kw)
    for level in LEVELS:
        yield lambda level=level: krippendorff_alpha(numbers if level in ("interval", "ratio") else reliability, level, **kw)
    yield lambda: masi_alpha(sets, **kw)
    counts, _ = category_counts(rows, CATEGORIES)
    yield lambda: fleiss_kappa(counts, **kw)
    yield lambda: gwet_ac1(counts, **kw)
    yield lambda: percent_agreement(counts, **kw)
    yield lambda: proportion([1.0 if len(set(r)) == 1 else 0.0 for r in rows], **kw)  # blind re-answering


@st.composite
def pilot_ratings(draw):
    """Items x raters labels as a pilot makes them: few items, 2-3 raters, maybe missing ratings."""
    n_items = draw(st.sampled_from([1, 2, 3, 5, 30]))
    n_raters = draw(st.sampled_from([2, 3]))
    mode = draw(st.sampled_from(["random", "all_agree", "all_disagree", "one_category"]))
    used = CATEGORIES[: draw(st.integers(1, 3))]
    rows = []
    for i in range(n_items):
        if mode == "all_agree":
            row = [draw(st.sampled_from(used))] * n_raters
        elif mode == "one_category":
            row = [used[0]] * n_raters
        elif mode == "all_disagree":
            row = [CATEGORIES[(i + j) % 3] for j in range(n_raters)]
        else:
            row = [draw(st.sampled_from(used)) for _ in range(n_raters)]
        rows.append(row)
    if draw(st.booleans()):
        rows = [[None if draw(st.integers(0, 3)) == 0 else x for x in row] for row in rows]
    return rows


# ---------------------------------------------------------------------------------------------
# Case 1: `agreement report` on a pilot-sized set dies in the bootstrap


def test_cohen_kappa_bootstrap_on_three_items_reproduction():
    """Case: `cohen_kappa(['a','b','a'], ['a','a','b'], n_boot=100)` raised TypeError (float counts
    in the bootstrap); it gives kappa -0.5 with a finite interval."""
    r = cohen_kappa(["a", "b", "a"], ["a", "a", "b"], n_boot=100)
    assert r.value == pytest.approx(-0.5)
    assert r.ci is not None and all(math.isfinite(x) for x in r.ci)
    assert r.n_boot == 100


@settings(max_examples=120, deadline=None)
@given(rows=pilot_ratings(), n_boot=st.sampled_from([0, 60]), seed=st.integers(0, 2**32))
def test_every_statistic_on_pilot_sized_ratings_returns_a_value_or_a_reason(rows, n_boot, seed):
    """Case: `agreement report` on a pilot (3-30 items, 2-3 annotators) crashed. Every statistic,
    with and without bootstrap, on tiny/all-agree/all-disagree/one-category/missing-rating
    inputs gives a value (with an interval or why not) or an AgreementError: never another error."""
    for call in _every_statistic(rows, n_boot, seed):
        try:
            result = call()
        except AgreementError:
            continue
        _assert_well_formed(result)


def test_all_agree_gives_one_or_is_stated_as_undefined():
    """Case: all annotators agree. Over several categories kappa is 1 with its interval (the
    bootstrap crashed here); all in one category (chance agreement 1) kappa is undefined and
    says so in words, with and without bootstrap."""
    agree = cohen_kappa(["a", "b", "a"], ["a", "b", "a"], n_boot=100)
    assert agree.value == pytest.approx(1.0) and agree.band == "almost perfect"
    assert agree.ci == pytest.approx((1.0, 1.0)) and agree.boot_undefined > 0  # resamples of one category
    for n_boot in (0, 100):
        r = cohen_kappa(["a"] * 3, ["a"] * 3, n_boot=n_boot)
        assert r.value is None and "chance agreement is 1" in r.reason and r.ci is None
        f = fleiss_kappa([[3, 0]] * 5, n_boot=n_boot)
        assert f.value is None and "one category" in f.reason


def test_items_without_any_rating_do_not_crash_the_encoder():
    """Case: a subset of items with no rater left (a per-subtype slice) made numpy try to turn
    the category names into floats (ValueError); the counts are simply zero."""
    counts, cats = category_counts([[], [], []], CATEGORIES)
    assert counts.shape == (3, 3) and counts.sum() == 0 and cats == CATEGORIES


@pytest.mark.parametrize(
    "call",
    [
        lambda: krippendorff_alpha([[None, (1, 2), (1, 2)], [(1, 2), (1, 2), None]], "interval", n_boot=20),
        lambda: proportion(["yes", "no"], n_boot=20),
        lambda: proportion([1.0, float("nan")], n_boot=20),
    ],
    ids=["pairs-as-interval-values", "text-as-scores", "nan-score"],
)
def test_labels_of_the_wrong_kind_raise_agreement_error(call):
    """Case (class of the pilot crash): labels numpy half-reads (pairs as interval values, text
    or NaN as blind re-answering scores) raised ValueError from numpy; they are AgreementErrors."""
    with pytest.raises(AgreementError):
        call()


@pytest.mark.parametrize(
    "kwargs, flag",
    [({"seed": -1}, "--seed"), ({"n_boot": 2.5}, "--n-boot"), ({"n_boot": 10**9}, "--n-boot"), ({"ci_level": float("nan")}, "--ci-level")],
)
def test_bad_bootstrap_settings_raise_agreement_error_naming_the_flag(kwargs, flag):
    """Case: `agreement report --seed -1` (and a float or huge --n-boot) reached numpy and raised
    ValueError/TypeError/MemoryError; it is an AgreementError whose hint names the flag."""
    with pytest.raises(AgreementError) as info:
        cohen_kappa(["a", "b", "a"], ["a", "a", "b"], **kwargs)
    assert flag in str(info.value)


def test_pilot_agreement_report_end_to_end(workspace):
    """Case: `tqaforge agreement report` on a pilot (3 items, 3 annotators) died with TypeError;
    the report has every statistic, each with a value and interval or a stated reason."""
    questions = _questions(3)
    tasks = _tasks("question_typing", 3)
    votes = [("extraction", "extraction", "reasoning"), ("reasoning", "extraction", "reasoning"), ("extraction",) * 3]
    anns = [_ann(t.id, who, "question_typing", {"type": v}) for t, vs in zip(tasks, votes) for who, v in zip(("ana", "ben", "cy"), vs)]
    _seed(workspace, [_table()], questions, tasks, anns)
    report = agreement_report(workspace, settings=Settings(n_boot=100))
    kr = report.kinds["question_typing"]
    for result in [*kr.overall.values(), *kr.pairwise.values(), *kr.per_annotator.values()]:
        _assert_well_formed(result)
    assert kr.pairwise["cohen_kappa"].get("ana", "ben").n_boot == 100
    assert "Cohen's kappa" in to_markdown(report)


# ---------------------------------------------------------------------------------------------
# Case 2: `agreement resolve` accepts cells outside the table


def _cells_workspace(ws) -> None:
    """One relevant-cells task on a 3 x 2 table, annotators disagreeing (so it is open)."""
    _seed(
        ws, [_table(3, 2)], _questions(1), _tasks("relevant_cells", 1),
        [_ann("rel0", "ana", "relevant_cells", {"cells": [[0, 0]]}), _ann("rel0", "ben", "relevant_cells", {"cells": [[1, 1]]})],
    )


def test_resolve_refuses_cells_outside_the_table(workspace):
    """Case: `agreement resolve TASK '{"cells": [[5, 0]]}'` was accepted on a 3-row table; it is
    an AdjudicationError naming the cell and the table's size, and nothing is stored."""
    _cells_workspace(workspace)
    for bad, named in (([[5, 0]], "[5, 0]"), ([[0, 2]], "[0, 2]"), ([[2, 1], [3, 0]], "[3, 0]")):
        with pytest.raises(AdjudicationError) as info:
            resolve(workspace, "rel0", {"cells": bad}, by="chair")
        message = str(info.value)
        assert named in message and "3 data rows x 2 columns" in message and "header excluded" in message
    assert adjudication_queue(workspace).total == 0  # nothing was written
    row = resolve(workspace, "rel0", {"cells": [[2, 1], [0, 0]]}, by="chair")  # the corners fit
    assert row.label == {"cells": [[0, 0], [2, 1]]}


def test_resolve_checks_every_kind_against_its_target(workspace):
    """Case (class of `resolve` accepting cells outside the table): a category must be one of its
    kind's values, a set label must be cells, and a blank answer is not an answer."""
    _seed(workspace, [_table()], _questions(1), _tasks("question_typing", 1), _tasks("relevant_cells", 1))
    with pytest.raises(AdjudicationError, match="extraction, reasoning, unanswerable"):
        resolve(workspace, "que0", {"type": "both"}, by="chair")
    with pytest.raises(AdjudicationError, match="cells"):
        resolve(workspace, "rel0", "reasoning", by="chair")
    with pytest.raises(LabelError, match="non-blank"):
        KINDS["blind_reanswer"].read({"answer": "   "})
    with pytest.raises(LabelError, match="non-blank"):
        KINDS["blind_reanswer"].read({"answers": ["Oslo", ""]})


# ---------------------------------------------------------------------------------------------
# Case 3: `agreement queue --kind nonsense` prints an empty table


def test_queue_with_an_unknown_kind_lists_the_known_kinds(workspace):
    """Case: `agreement queue --kind nonsense` printed an empty table; it raises an error listing
    the known kinds (and blind_reanswer, which is never adjudicated, is refused too)."""
    with pytest.raises(AgreementError) as info:
        adjudication_queue(workspace, kind="nonsense")
    message = str(info.value)
    assert "nonsense" in message and "--kind" in message
    assert all(kind in message for kind in KINDS)
    with pytest.raises(AdjudicationError, match="not adjudicated"):
        adjudication_queue(workspace, kind="blind_reanswer")


@pytest.mark.parametrize("command", ["report", "adjudicate", "queue"])
def test_every_command_taking_a_kind_names_the_flag_and_the_known_kinds(sqlite_workspace, command):
    """Case (class of `agreement queue --kind nonsense`): report, adjudicate and queue all refuse
    an unknown kind with the same message, whose hint names --kind and every known kind."""
    calls = {
        "report": lambda: agreement_report(sqlite_workspace, kinds=["question_typing", "nonsense"], settings=Settings(n_boot=0)),
        "adjudicate": lambda: adjudicate(sqlite_workspace, kinds=["nonsense"]),
        "queue": lambda: adjudication_queue(sqlite_workspace, kind="nonsense"),
    }
    with pytest.raises(AgreementError) as info:
        calls[command]()
    assert info.value.hint is not None and info.value.hint.startswith("give --kind one of:")
    assert all(kind in info.value.hint for kind in KINDS)


# ---------------------------------------------------------------------------------------------
# Case 4: `agreement report` and `adjudicate` print nothing when there is nothing to do


def test_report_on_a_workspace_without_annotations_says_so(workspace):
    """Case: `agreement report` printed nothing on a workspace without annotations; the report
    is explicitly empty and says what to do, in the result, its JSON and its Markdown."""
    report = agreement_report(workspace, settings=Settings(n_boot=0))
    assert report.is_empty
    assert report.message.startswith("no annotations yet") and "tqaforge questions review" in report.message
    assert report.as_dict()["is_empty"] is True and report.as_dict()["message"] == report.message
    assert report.message in to_markdown(report)
    # Asked for one kind that has tasks but no readable label: the reason is given.
    _seed(workspace, [_table()], _questions(1), _tasks("question_typing", 1), [_ann("que0", "ana", "question_typing", {"type": "?"})])
    one = agreement_report(workspace, kinds=["question_typing"], settings=Settings(n_boot=0))
    assert one.is_empty and "question_typing: no readable annotations (1 unreadable" in one.message


def test_adjudicate_with_nothing_to_do_says_so(workspace):
    """Case: `agreement adjudicate` printed nothing when there were no annotations; the result is
    explicitly empty with one line to print, and not empty once there is something."""
    run = adjudicate(workspace)
    assert run.is_empty and run.message.startswith("nothing to adjudicate: no annotations yet")
    assert "tqaforge questions review" in run.message and set(run) == set(run.as_dict()["kinds"])
    _cells_workspace(workspace)
    run = adjudicate(workspace)
    assert not run.is_empty and run.message is None and run["relevant_cells"].open == 1


# ---------------------------------------------------------------------------------------------
# Case 5: lists stop at 50 without saying "50 of 811"


def test_adjudication_queue_returns_the_total(workspace):
    """Case: the adjudication queue stopped at --limit without saying how many are open; it
    returns a page with the total ("showing 1-2 of 3 ...")."""
    tasks = _tasks("question_typing", 3)
    anns = [_ann(t.id, who, "question_typing", {"type": v}) for t in tasks for who, v in (("ana", "extraction"), ("ben", "reasoning"))]
    _seed(workspace, [_table()], _questions(3), tasks, anns)
    adjudicate(workspace)
    page = adjudication_queue(workspace, limit=2)
    assert len(page) == 2 and page.total == 3 and page.more == 1
    assert "of 3" in page.describe("open items")
    assert adjudication_queue(workspace, kind="question_typing", offset=2).total == 3
    assert adjudication_queue(workspace, kind="relevant_cells").total == 0


def test_review_queue_returns_the_total(workspace):
    """Case: `questions queue` stopped at 50 without saying "50 of 811"; the review queue
    returns a page with the total number of proposed questions."""
    _seed(workspace, [_table()], _questions(3))
    page = review_queue(workspace, limit=2)
    assert [q.id for q in page] and len(page) == 2 and page.total == 3
    assert "showing 1-2 of 3" in page.describe("proposed questions")


@pytest.mark.parametrize("queue", [adjudication_queue, review_queue])
def test_queue_windows_are_checked(workspace, queue):
    """Case (class of the unbounded lists): a negative --limit or --offset reached the database
    (PostgreSQL: DataError; SQLite: every row); both queues refuse it with a message."""
    for window in ({"limit": -1}, {"offset": -5}, {"limit": 0}):
        with pytest.raises(TqaforgeError, match="--limit|--offset"):
            queue(workspace, **window)


def test_a_kind_needs_a_known_shape_and_a_name_of_its_own() -> None:
    before = dict(KINDS)
    with pytest.raises(AgreementError, match="unknown label shape 'ranking'"):
        register_kind(KindSpec("table_rank", "ranking", "rank", "a ranking"))  # type: ignore[arg-type]
    with pytest.raises(AgreementError, match="'question_typing' is already defined"):
        register_kind(KindSpec("question_typing", "category", "type", "again", ("a", "b")))
    assert KINDS == before  # neither refused kind is half registered, nor replaced an existing one
    # A kind that does not gate releases (no release_order, or an edit with no gate statistic) stays out of the gate.
    for spec in (KindSpec("table_note", "category", "note", "a note", ("a", "b")),
                 KindSpec("table_edit", "edit", "edits", "an edit", release_order=1)):
        register_kind(spec)
        try:
            assert spec.name not in feeding_kinds() and spec.name in KINDS
        finally:
            KINDS.pop(spec.name)
    assert feeding_kinds() == ("question_review", "answer_verification", "question_typing", "relevant_cells",
                               "relevant_cell_validity", "blind_reanswer")  # the gate's order before this change

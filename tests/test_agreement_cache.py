"""The agreement report read back from its JSON, and kept on disk for the Agreement page
(:mod:`tqaforge.annotation.report_cache`): the same report, and never one from before a change
of what it was computed from. Damaged, foreign and concurrent cache files are in
tests/test_hostile_agreement_cache.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from sqlmodel import select

from tqaforge.annotation.adjudication import resolve
from tqaforge.annotation.report import AgreementReport, Settings, agreement_report
from tqaforge.annotation.report_cache import cache_path, cached_agreement_report, report_inputs
from tqaforge.annotation.report_format import to_markdown
from tqaforge.ids import annotation_task_id
from tqaforge.labels import record_annotation
from tqaforge.people import merge
from tqaforge.store import Workspace

sys.path.insert(0, str(Path(__file__).parent))
from agreement_study import build_study  # noqa: E402

SETTINGS = Settings(n_boot=50, seed=3)


@pytest.fixture
def study(workspace: Workspace) -> Workspace:
    build_study(workspace, 60, seed=2)  # SQLite, and PostgreSQL when configured
    return workspace


def _never(ws: Workspace, settings: Settings) -> AgreementReport:
    raise AssertionError("the report was computed, not read from the cache")


def test_a_report_read_back_from_its_json_is_the_same_report(study: Workspace) -> None:
    for settings in (SETTINGS, Settings(n_boot=0, exclude_sources=())):
        report = agreement_report(study, settings=settings)
        text = json.dumps(report.as_dict(), ensure_ascii=False)
        again = AgreementReport.from_dict(json.loads(text))
        assert json.dumps(again.as_dict(), ensure_ascii=False) == text
        assert to_markdown(again) == to_markdown(report)  # what the page and the CLI show


def test_the_second_report_is_read_from_disk_and_equals_the_first(study: Workspace) -> None:
    first = cached_agreement_report(study, SETTINGS)
    assert cache_path(study, SETTINGS).is_file()
    again = cached_agreement_report(study, SETTINGS, compute=_never)
    assert again.as_dict() == json.loads(json.dumps(first.as_dict()))
    # Other settings are another report: computed, in a file of their own.
    other = cached_agreement_report(study, Settings(n_boot=0))
    assert other.settings.n_boot == 0 and cache_path(study, Settings(n_boot=0)) != cache_path(study, SETTINGS)


def test_a_new_label_a_decision_or_a_new_person_make_the_report_computed_again(study: Workspace) -> None:
    before = cached_agreement_report(study, SETTINGS)
    inputs = report_inputs(study)
    with study.session() as s:
        record_annotation(s, kind="question_typing", target_type="question", target_id="q000000",
                          annotator="newcomer", label={"type": "reasoning"}, source="cli")
    assert report_inputs(study) != inputs
    after = cached_agreement_report(study, SETTINGS)
    assert after.kinds["question_typing"].n_annotations == before.kinds["question_typing"].n_annotations + 1
    assert "newcomer" in after.kinds["question_typing"].raters
    assert cached_agreement_report(study, SETTINGS, compute=_never).as_dict() == json.loads(json.dumps(after.as_dict()))

    inputs = report_inputs(study)
    resolve(study, annotation_task_id("question_typing", "question", "q000001"), {"type": "extraction"}, by="lead")
    assert report_inputs(study) != inputs  # a person's decision is never hidden behind a stored report

    # Two identities found to be one person: their labels are one rater's from now on.
    kept = cached_agreement_report(study, SETTINGS)
    merge(study, "Person 0", "Person 2")
    merged = cached_agreement_report(study, SETTINGS)
    assert "Person 2" in kept.kinds["question_typing"].raters and "Person 2" not in merged.kinds["question_typing"].raters


def test_two_answers_swapping_their_statuses_change_the_fingerprint(study: Workspace) -> None:
    """A person's verification may reject one answer and verify another at once, leaving every
    count per status as it was; the fingerprint still sees it (the gold of blind re-answering)."""
    from tqaforge.schemas.records import Answer, AnswerStatus, Question

    with study.session() as s:
        question = s.exec(select(Question)).first()
        assert question is not None
        for n, status in enumerate((AnswerStatus.VERIFIED, AnswerStatus.REJECTED)):
            s.add(Answer(id=f"swap{n}", question_id=question.id, method="human", value=str(n), values=[str(n)],
                         status=status))
    inputs = report_inputs(study)
    with study.session() as s:
        first, second = s.get(Answer, "swap0"), s.get(Answer, "swap1")
        assert first is not None and second is not None
        first.status, second.status = AnswerStatus.REJECTED, AnswerStatus.VERIFIED
        s.add(first)
        s.add(second)
    assert report_inputs(study) != inputs


def test_the_report_covers_the_kinds_whose_tasks_hold_labels_and_no_other(study: Workspace) -> None:
    """Kinds are found from the tasks' index, then one label each: a kind with tasks but no label
    is not reported (nor skipped), a kind's first label brings it in."""
    from tqaforge.schemas.records import AnnotationTask

    kinds = set(agreement_report(study, settings=SETTINGS).kinds)
    assert kinds and "value_modification" not in kinds
    task_id = annotation_task_id("value_modification", "question", "q000003")
    with study.session() as s:
        s.add(AnnotationTask(id=task_id, kind="value_modification", target_type="question", target_id="q000003"))
    empty = agreement_report(study, settings=SETTINGS)
    assert set(empty.kinds) == kinds and "value_modification" not in empty.skipped_kinds
    with study.session() as s:
        record_annotation(s, kind="value_modification", target_type="question", target_id="q000003",
                          annotator="newcomer", label={"edits": []}, source="cli")
    labelled = agreement_report(study, settings=SETTINGS)
    assert "value_modification" in set(labelled.kinds) | set(labelled.skipped_kinds)

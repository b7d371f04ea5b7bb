"""The label ledger: the only code that writes AnnotationTask and Annotation rows.

Every label -- a person's in the CLI, the app or Label Studio, or an agent's -- is one
:class:`~tqaforge.schemas.records.Annotation` on the one
:class:`~tqaforge.schemas.records.AnnotationTask` of its (kind, target), written by
:func:`record_annotation`. What the labels of each kind look like, and what a final label does
to its item, is :mod:`tqaforge.annotation.kinds`.

Each label names the person behind it (``annotator_id``, :mod:`tqaforge.people`) besides its
author string, and :func:`rater` is who it counts for. The precedence of who decides a field
is here too, in one place: :class:`Authority` (a person's final label beats a model's, which
beats a rule's), :func:`may_change`, and :func:`left_alone`, which every automatic writer
(question typing, the verification agent, the answer vote, variant validation) asks before it
changes a field people settled (:func:`settled_by_people`).

This is a shared service below the stages, like the LLM ledger, because a stage earlier in the
data flow than ``annotation`` labels too: the verification agent of question generation records
its verdict as a question review, in the same transaction as the questions it judged.

>>> record_annotation(s, kind="question_review", target_type="question", target_id=q.id,
...                   annotator="ana", label={"decision": "accept", "status": "accepted"})  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from enum import IntEnum
from typing import Any, Iterable

from sqlmodel import Session, col, select

from tqaforge.ids import annotation_id, annotation_task_id
from tqaforge.people import person_for_author
from tqaforge.schemas.enums import AdjudicationStatus, TaskStatus
from tqaforge.schemas.records import Adjudication, Annotation, AnnotationTask, Question, utcnow

#: The kind of a question review (a person's or the verification agent's decision on a question).
QUESTION_REVIEW = "question_review"
#: The kind whose final label settles a question's ``question_type``.
QUESTION_TYPING = "question_typing"
#: ``Question.meta["typing"]["method"]`` of a type people settled (a note for the record).
TYPED_BY_PEOPLE = "human"
#: The kind whose final label settles an answer's status (and a people's correction).
ANSWER_VERIFICATION = "answer_verification"
#: The kind whose final label settles a value-modified variant's status.
VALUE_MODIFICATION_REVIEW = "value_modification_review"
#: The source of labels imported from published work (FREB-TQA's relevant cells): not our annotators'.
IMPORTED_SOURCE = "imported"
#: Sources that agreement figures and adjudication leave out unless asked otherwise.
NOT_OURS: tuple[str, ...] = (IMPORTED_SOURCE,)


@dataclass(frozen=True, slots=True)
class Recorded:
    """The task a label went to, the annotator's latest annotation on it, and whether it is new."""

    task: AnnotationTask
    annotation: Annotation
    recorded: bool


class Authority(IntEnum):
    """Who set a field, in the order of precedence: a person's final label beats a model's, which
    beats a rule's. The one rule is :func:`may_change`; :func:`settled_by_people` says which
    fields people hold."""

    RULE = 1  # a rule's output: lexical typing, the answer vote, re-answers that agree
    MODEL = 2  # a model's: the verification agent, model typing
    PERSON = 3  # people's final label (their labels, adjudicated), or a person's review


def may_change(by: Authority, held: Authority | None) -> bool:
    """Whether a writer of authority ``by`` may change a field last settled with ``held``
    (None: nobody settled it): only an equal or higher authority may."""
    return held is None or by >= held


#: Kinds where one person's label is final by itself (a review sets the question's status at
#: once); for the other kinds people hold a field once their labels are adjudicated.
_ONE_LABEL_SETTLES = (QUESTION_REVIEW,)


def settled_by_people(s: Session, kind: str, target_type: str, target_ids: Iterable[str]) -> set[str]:
    """The targets among ``target_ids`` whose field of ``kind`` people settled: the task has a
    resolved adjudication (unanimous, by rule over people's labels, or by a person), or, for a
    question review, any person's label (agents' and imported labels do not count). Every
    automatic writer asks this before it changes the field (:func:`may_change` with
    :attr:`Authority.PERSON`) and counts what it left alone."""
    wanted = {annotation_task_id(kind, target_type, t): t for t in dict.fromkeys(target_ids)}
    held: set[str] = set()
    ids = list(wanted)
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        held.update(wanted[t] for t in s.exec(select(Adjudication.task_id).where(
            col(Adjudication.task_id).in_(chunk), Adjudication.status == AdjudicationStatus.RESOLVED.value)).all())
        if kind in _ONE_LABEL_SETTLES:
            held.update(wanted[t] for t in s.exec(select(Annotation.task_id).where(
                col(Annotation.task_id).in_(chunk), col(Annotation.annotator_id).is_not(None))).all())
    return held


def left_alone(s: Session, kind: str, target_type: str, target_ids: Iterable[str], *, by: Authority) -> set[str]:
    """The targets among ``target_ids`` whose field of ``kind`` a writer of authority ``by`` must
    leave alone: :func:`may_change` against what people settled (:func:`settled_by_people`).
    The one check every automatic writer makes before it changes a settled field."""
    if may_change(by, Authority.PERSON):
        return set()
    return settled_by_people(s, kind, target_type, target_ids)


def rater(annotation: Annotation) -> str:
    """Who a label counts for in agreement, adjudication, workload and progress: the person
    (``annotator_id``) when it is a person's, else its author string (an agent, an import)."""
    return getattr(annotation, "annotator_id", None) or annotation.annotator


def source_sequence(source_ref: str) -> int:
    """The number at the end of a ``source_ref`` (``cli:2`` -> 2; 0 when there is none)."""
    tail = source_ref.rpartition(":")[2]
    return int(tail) if tail.isdigit() else 0


def _as_utc(moment: datetime) -> datetime:
    # SQLite hands back naive datetimes; they were written in UTC.
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def label_order(annotation: Annotation) -> tuple[datetime, int, str]:
    """Sort key of one annotator's labels on a task: the greatest is their latest (a person may
    change their mind): by ``created_at``, then the number at the end of ``source_ref``, then id."""
    return (_as_utc(annotation.created_at), source_sequence(annotation.source_ref), annotation.id)


def latest_of(annotations: Iterable[Annotation]) -> Annotation | None:
    """The latest of one annotator's annotations on one task (None when there are none)."""
    return max(annotations, key=label_order, default=None)


def task_for(
    s: Session, kind: str, target_type: str, target_id: str, payload: dict[str, Any] | None = None
) -> AnnotationTask:
    """The one task of ``kind`` about a record, created (with ``payload``) the first time."""
    task_id = annotation_task_id(kind, target_type, target_id)
    task = s.get(AnnotationTask, task_id)
    if task is None:
        task = AnnotationTask(id=task_id, kind=kind, target_type=target_type, target_id=target_id, payload=payload)
        s.add(task)
        s.flush()
    return task


def record_annotation(
    s: Session,
    *,
    kind: str,
    target_type: str,
    target_id: str,
    annotator: str,
    label: dict[str, Any],
    source: str = "cli",
    lead_time: float | None = None,
    payload: dict[str, Any] | None = None,
    source_ref: str | None = None,
    created_at: datetime | None = None,
    annotator_id: str | None = None,
) -> Recorded:
    """Record one annotator's ``label`` on the task of ``kind`` about a record, inside an open session.

    A new label is a new row (``source_ref`` ``SOURCE:N``, counting up per task and annotator),
    so changing one's mind keeps the earlier label; repeating one's latest label writes nothing.
    The task (created with ``payload`` if new) becomes ``annotated``. The caller validates the
    label and commits.

    A label from elsewhere (Label Studio) brings its own ``source_ref`` (e.g. ``ls:17:<revision>``)
    and ``created_at`` (when it was given there): a ``source_ref`` already recorded for this task
    and annotator writes nothing, so pulling the same revision twice adds nothing.

    ``annotator`` is the author string as the surface gave it (kept for audit); ``annotator_id``
    the person behind it (:mod:`tqaforge.people`), looked up from the author string when not
    given (None for an agent's or an imported label).
    """
    if annotator_id is None:
        annotator_id = person_for_author(s, annotator, source)
    task = task_for(s, kind, target_type, target_id, payload)
    mine = s.exec(select(Annotation).where(Annotation.task_id == task.id, Annotation.annotator == annotator)).all()
    latest = latest_of(mine)
    task.status = TaskStatus.ANNOTATED
    s.add(task)
    if source_ref is not None:
        same = next((a for a in mine if a.source_ref == source_ref), None)
        if same is not None:
            return Recorded(task, same, False)
    if latest is not None and latest.label == label:
        return Recorded(task, latest, False)
    source_ref = source_ref if source_ref is not None else f"{source}:{len(mine) + 1}"
    annotation = Annotation(
        id=annotation_id(task.id, annotator, source_ref), task_id=task.id, annotator=annotator, kind=kind,
        label=label, source=source, source_ref=source_ref, lead_time=lead_time, annotator_id=annotator_id,
    )
    if created_at is not None:
        annotation.created_at = created_at
    s.add(annotation)
    return Recorded(task, annotation, True)


def record_question_review(
    s: Session, question: Question, label: dict[str, Any], *, annotator: str, source: str, lead_time: float | None = None,
    annotator_id: str | None = None,
) -> Recorded:
    """:func:`record_annotation` of a ``question_review`` label on ``question`` (its task shows
    the question's text, table and subtype). Setting the question's status is the caller's part."""
    return record_annotation(
        s, kind=QUESTION_REVIEW, target_type="question", target_id=question.id, annotator=annotator, label=label,
        source=source, lead_time=lead_time, annotator_id=annotator_id,
        payload={"text": question.text, "table_id": question.table_id, "subtype": question.subtype},
    )


def agent_review(s: Session, question: Question, label: dict[str, Any], *, model: str) -> bool:
    """The verification agent's verdict on ``question`` (a model's review): recorded as a
    ``question_review`` label by ``agent:MODEL`` and made the question's status, unless people
    reviewed it (:func:`settled_by_people`; a person's label beats a model's): then nothing is
    written and False is returned, for the caller to count."""
    if left_alone(s, QUESTION_REVIEW, "question", [question.id], by=Authority.MODEL):
        return False
    record_question_review(s, question, label, annotator=f"agent:{model}", source="agent")
    question.status = label["status"]
    question.updated_at = utcnow()
    s.add(question)
    return True


def mark_task_synced(s: Session, task: AnnotationTask, *, ls_project_id: int, ls_task_id: int) -> None:
    """Note that ``task`` is in Label Studio: a pending task becomes ``synced``, and its
    ``ls_project_id``/``ls_task_id`` name its first copy (every annotator's copy is a
    ``LabelStudioTaskCopy``). A task already annotated keeps its status."""
    if task.status == TaskStatus.PENDING.value:
        task.status = TaskStatus.SYNCED
    if task.ls_project_id is None:
        task.ls_project_id, task.ls_task_id = ls_project_id, ls_task_id
    s.add(task)

"""The label ledger: the only code that writes AnnotationTask and Annotation rows.

Every label -- a person's in the CLI, the app or Label Studio, or an agent's -- is one
:class:`~tqaforge.schemas.records.Annotation` on the one
:class:`~tqaforge.schemas.records.AnnotationTask` of its (kind, target), written by
:func:`record_annotation`. What the labels of each kind look like, and what a final label does
to its item, is :mod:`tqaforge.annotation.kinds`.

This is a shared service below the stages, like the LLM ledger, because a stage earlier in the
data flow than ``annotation`` labels too: the verification agent of question generation records
its verdict as a question review, in the same transaction as the questions it judged.

>>> record_annotation(s, kind="question_review", target_type="question", target_id=q.id,
...                   annotator="ana", label={"decision": "accept", "status": "accepted"})  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterable

from sqlmodel import Session, select

from tqaforge.ids import annotation_id, annotation_task_id
from tqaforge.schemas.enums import TaskStatus
from tqaforge.schemas.records import Annotation, AnnotationTask, Question

#: The kind of a question review (a person's or the verification agent's decision on a question).
QUESTION_REVIEW = "question_review"
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
) -> Recorded:
    """Record one annotator's ``label`` on the task of ``kind`` about a record, inside an open session.

    A new label is a new row (``source_ref`` ``SOURCE:N``, counting up per task and annotator),
    so changing one's mind keeps the earlier label; repeating one's latest label writes nothing.
    The task (created with ``payload`` if new) becomes ``annotated``. The caller validates the
    label and commits.

    A label from elsewhere (Label Studio) brings its own ``source_ref`` (e.g. ``ls:17:<revision>``)
    and ``created_at`` (when it was given there): a ``source_ref`` already recorded for this task
    and annotator writes nothing, so pulling the same revision twice adds nothing.
    """
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
        label=label, source=source, source_ref=source_ref, lead_time=lead_time,
    )
    if created_at is not None:
        annotation.created_at = created_at
    s.add(annotation)
    return Recorded(task, annotation, True)


def record_question_review(
    s: Session, question: Question, label: dict[str, Any], *, annotator: str, source: str, lead_time: float | None = None
) -> Recorded:
    """:func:`record_annotation` of a ``question_review`` label on ``question`` (its task shows
    the question's text, table and subtype). Setting the question's status is the caller's part."""
    return record_annotation(
        s, kind=QUESTION_REVIEW, target_type="question", target_id=question.id, annotator=annotator, label=label,
        source=source, lead_time=lead_time,
        payload={"text": question.text, "table_id": question.table_id, "subtype": question.subtype},
    )


def mark_task_synced(s: Session, task: AnnotationTask, *, ls_project_id: int, ls_task_id: int) -> None:
    """Note that ``task`` is in Label Studio: a pending task becomes ``synced``, and its
    ``ls_project_id``/``ls_task_id`` name its first copy (every annotator's copy is a
    ``LabelStudioTaskCopy``). A task already annotated keeps its status."""
    if task.status == TaskStatus.PENDING.value:
        task.status = TaskStatus.SYNCED
    if task.ls_project_id is None:
        task.ls_project_id, task.ls_task_id = ls_project_id, ls_task_id
    s.add(task)

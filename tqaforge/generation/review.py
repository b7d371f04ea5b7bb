"""Question review: accept, edit, reject, promote to seed. One function for the CLI, app and Label Studio.

Every decision does two things in one transaction:

1. it is recorded as an :class:`~tqaforge.schemas.records.Annotation` (kind ``question_review``)
   on the question's :class:`~tqaforge.schemas.records.AnnotationTask` (kind ``question_review``,
   target the question), with the annotator's name and where it came from (``cli``, ``app``,
   ``labelstudio``, ``agent``), so agreement statistics can later be computed on the decisions;
2. it sets ``Question.status``: accept and edit -> ``accepted``, reject -> ``rejected``,
   promote -> ``seed`` (a seed also counts as accepted, and joins the seed corpus of its
   subtype, see :mod:`tqaforge.generation.corpus`).

A person may change their mind: each new decision is a new annotation (``source_ref``
``cli:1``, ``cli:2``...) and the question takes the latest decision's status; repeating one's
latest decision is a no-op. An edit keeps the question's id and records the old text in
``Question.lineage["edits"]``.

>>> review_question(ws, "3fa2c1", "reject", annotator="ana", reason="needs the caption")  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, select

from tqaforge.queries import Page, check_window, get_by_prefix
from tqaforge.errors import TqaforgeError
from tqaforge.generation.dedup import clean_question, tokens
from tqaforge.schemas.enums import QuestionStatus, TaskStatus
from tqaforge.schemas.records import Annotation, AnnotationTask, Question, utcnow
from tqaforge.store import Workspace
from tqaforge.tables.table import content_hash

REVIEW_KIND = "question_review"

#: Decision -> the status it gives the question.
DECISIONS: dict[str, str] = {
    "accept": QuestionStatus.ACCEPTED.value,
    "edit": QuestionStatus.ACCEPTED.value,
    "reject": QuestionStatus.REJECTED.value,
    "promote": QuestionStatus.SEED.value,
}


class ReviewError(TqaforgeError):
    """A review decision cannot be applied as given."""


@dataclass(frozen=True, slots=True)
class ReviewResult:
    """The question after the decision, and whether a new annotation was written."""

    question: Question
    annotation: Annotation
    recorded: bool
    previous_status: str


def review_task_id(question_id: str) -> str:
    """The id of a question's review task (one per question)."""
    return content_hash({"kind": REVIEW_KIND, "target_type": "question", "target_id": question_id})


def review_question(
    ws: Workspace,
    question_id: str,
    decision: str,
    *,
    annotator: str,
    reason: str | None = None,
    text: str | None = None,
    source: str = "cli",
    lead_time: float | None = None,
) -> ReviewResult:
    """Apply one person's decision on a question (id or unique prefix); see the module docs.

    ``reason`` is required for ``reject``; ``text`` (the new wording) for ``edit``.
    """
    with ws.session() as s:
        question = get_by_prefix(s, Question, question_id)
        return apply_decision(
            s, question, decision, annotator=annotator, reason=reason, text=text,
            source=source, lead_time=lead_time,
        )


def accept_question(ws: Workspace, question_id: str, *, annotator: str, source: str = "cli") -> ReviewResult:
    """Accept a question as it is."""
    return review_question(ws, question_id, "accept", annotator=annotator, source=source)


def reject_question(ws: Workspace, question_id: str, *, annotator: str, reason: str, source: str = "cli") -> ReviewResult:
    """Reject a question, saying why."""
    return review_question(ws, question_id, "reject", annotator=annotator, reason=reason, source=source)


def edit_question(ws: Workspace, question_id: str, text: str, *, annotator: str, source: str = "cli") -> ReviewResult:
    """Accept a question with new wording; the old text stays in its lineage."""
    return review_question(ws, question_id, "edit", annotator=annotator, text=text, source=source)


def promote_question(ws: Workspace, question_id: str, *, annotator: str, source: str = "cli") -> ReviewResult:
    """Make a question a seed of its subtype (it also counts as accepted)."""
    return review_question(ws, question_id, "promote", annotator=annotator, source=source)


def apply_decision(
    s: Session,
    question: Question,
    decision: str,
    *,
    annotator: str,
    reason: str | None = None,
    text: str | None = None,
    source: str = "cli",
    lead_time: float | None = None,
    extra: dict[str, Any] | None = None,
) -> ReviewResult:
    """:func:`review_question` inside an open session (the verification agent uses this so its
    verdict commits with the questions it judged)."""
    if decision not in DECISIONS:
        raise ReviewError(f"unknown decision {decision!r}", hint="one of " + ", ".join(DECISIONS))
    annotator = annotator.strip()
    if not annotator:
        raise ReviewError("give the annotator's name", hint="--annotator NAME (or TQAFORGE_ANNOTATOR)")
    label: dict[str, Any] = {"decision": decision, "status": DECISIONS[decision]}
    if decision == "reject":
        if not reason or not reason.strip():
            raise ReviewError("a rejection needs a reason", hint='--reason "why"')
    if reason and reason.strip():
        label["reason"] = reason.strip()
    if decision == "edit":
        if text is None or not clean_question(text):
            raise ReviewError("an edit needs the new text", hint='--edit "the new question"')
        new_text = clean_question(text)
        if tokens(new_text) == tokens(question.text):
            raise ReviewError("the new text is the same question", hint="use --accept to accept it as it is")
        _check_not_duplicate(s, question, new_text)
        label["text"] = new_text
        label["previous_text"] = question.text
    if extra:
        label.update(extra)

    task = _task(s, question)
    previous_status = question.status
    mine = s.exec(
        select(Annotation).where(Annotation.task_id == task.id, Annotation.annotator == annotator)
    ).all()
    # Our own refs count up per (task, annotator): the highest is the latest decision.
    latest = max(mine, key=lambda a: _sequence(a.source_ref), default=None)
    recorded = latest is None or latest.label != label
    if recorded:
        source_ref = f"{source}:{len(mine) + 1}"
        annotation = Annotation(
            id=content_hash({"task": task.id, "annotator": annotator, "source_ref": source_ref}),
            task_id=task.id, annotator=annotator, kind=REVIEW_KIND, label=label,
            source=source, source_ref=source_ref, lead_time=lead_time,
        )
        s.add(annotation)
    else:
        assert latest is not None
        annotation = latest

    if decision == "edit":
        lineage = dict(question.lineage or {})
        lineage["edits"] = [
            *lineage.get("edits", []),
            {"previous_text": question.text, "annotator": annotator, "source": source,
             "at": utcnow().isoformat(timespec="seconds")},
        ] if recorded else lineage.get("edits", [])
        question.lineage = lineage
        question.text = label["text"]
    question.status = DECISIONS[decision]
    question.updated_at = utcnow()
    task.status = TaskStatus.ANNOTATED.value
    s.add(question)
    s.add(task)
    s.flush()
    return ReviewResult(question=question, annotation=annotation, recorded=recorded, previous_status=previous_status)


def settle_question(s: Session, question_id: str, decision: str) -> None:
    """Apply the adjudicated final review ``decision`` (``accept`` or ``reject``) to a question.

    ``reject`` makes it rejected, a promoted seed included (so it stops steering generation);
    ``accept`` makes a proposed or rejected question accepted and leaves an accepted one or a
    seed as it is. No annotation is written: the adjudication record says who decided.
    """
    question = s.get(Question, question_id)
    if question is None:
        return
    kept = (QuestionStatus.ACCEPTED.value, QuestionStatus.SEED.value)
    if decision not in ("accept", "reject") or (decision == "accept" and question.status in kept):
        return
    status = DECISIONS[decision]
    if question.status != status:
        question.status = status
        question.updated_at = utcnow()
        s.add(question)


def decisions_of(ws: Workspace, question_id: str) -> list[Annotation]:
    """Every review decision on a question, oldest first."""
    with ws.session() as s:
        question = get_by_prefix(s, Question, question_id)
        return list(
            s.exec(
                select(Annotation)
                .where(Annotation.task_id == review_task_id(question.id))
                .order_by(Annotation.created_at, Annotation.source_ref)  # type: ignore[arg-type]
            ).all()
        )


def review_queue(
    ws: Workspace, *, subtype: str | None = None, table_id: str | None = None, limit: int = 50, offset: int = 0
) -> Page[Question]:
    """Questions waiting for a person (status ``proposed``), oldest round first.

    A :class:`~tqaforge.queries.Page`: it iterates like a list, and ``total`` says how many wait
    in all, so a caller can say "showing 1-50 of 811 proposed questions".
    """
    check_window(limit, offset)
    where = [Question.status == QuestionStatus.PROPOSED.value]
    if subtype:
        where.append(Question.subtype == subtype)
    if table_id:
        where.append(Question.table_id.startswith(table_id.strip()))  # type: ignore[attr-defined]
    with ws.session() as s:
        total = s.exec(select(func.count()).select_from(Question).where(*where)).one()
        q = select(Question).where(*where).order_by(Question.round, Question.subtype, Question.created_at, Question.id)
        items = list(s.exec(q.offset(offset).limit(limit)).all())
    return Page(items, int(total), offset, limit)


def _sequence(source_ref: str) -> int:
    head, _, tail = source_ref.rpartition(":")
    return int(tail) if head and tail.isdigit() else 0


def _task(s: Session, question: Question) -> AnnotationTask:
    task_id = review_task_id(question.id)
    task = s.get(AnnotationTask, task_id)
    if task is None:
        task = AnnotationTask(
            id=task_id, kind=REVIEW_KIND, target_type="question", target_id=question.id,
            payload={"text": question.text, "table_id": question.table_id, "subtype": question.subtype},
        )
        s.add(task)
        s.flush()
    return task


def _check_not_duplicate(s: Session, question: Question, new_text: str) -> None:
    wanted = tokens(new_text)
    others = s.exec(
        select(Question).where(
            Question.table_id == question.table_id, Question.subtype == question.subtype, Question.id != question.id
        )
    ).all()
    for other in others:
        if tokens(other.text) == wanted:
            raise ReviewError(
                f"the new text repeats question {other.id[:10]} ({other.status}) of the same table and subtype",
                hint="review that question instead",
            )

"""Question review: accept, edit, reject, promote to seed. One function for the CLI, app and Label Studio.

Every decision does two things in one transaction:

1. it is recorded (through :func:`tqaforge.labels.record_annotation`) as an
   :class:`~tqaforge.schemas.records.Annotation` (kind ``question_review``) on the question's
   :class:`~tqaforge.schemas.records.AnnotationTask` (kind ``question_review``, target the
   question), with the annotator's name and where it came from (``cli``, ``app``,
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
from typing import Any, Mapping

from sqlalchemy import func
from sqlmodel import Session, col, select

from tqaforge.errors import TqaforgeError
from tqaforge.generation.dedup import clean_question, tokens
from tqaforge.ids import annotation_task_id
from tqaforge.labels import QUESTION_REVIEW, record_question_review
from tqaforge.queries import Page, check_window, get_by_prefix
from tqaforge.schemas.enums import QuestionStatus
from tqaforge.schemas.records import Annotation, Question, utcnow
from tqaforge.store import Workspace

REVIEW_KIND = QUESTION_REVIEW

#: Decision -> the status it gives the question.
DECISIONS: dict[str, QuestionStatus] = {
    "accept": QuestionStatus.ACCEPTED,
    "edit": QuestionStatus.ACCEPTED,
    "reject": QuestionStatus.REJECTED,
    "promote": QuestionStatus.SEED,
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

    def lines(self) -> list[str]:
        """What the CLI prints: the question's status before and after."""
        note = "" if self.recorded else " (same as your last decision; nothing new recorded)"
        return [f"{self.question.id[:10]}: {self.previous_status} -> {self.question.status}{note}"]


def review_task_id(question_id: str) -> str:
    """The id of a question's review task (one per question)."""
    return annotation_task_id(REVIEW_KIND, "question", question_id)


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
) -> ReviewResult:
    """:func:`review_question` on a question of an open session (the caller commits)."""
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

    previous_status = question.status
    done = record_question_review(s, question, label, annotator=annotator, source=source, lead_time=lead_time)
    recorded = done.recorded
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
    s.add(question)
    s.flush()
    return ReviewResult(question=question, annotation=done.annotation, recorded=recorded, previous_status=previous_status)


def settle_question(s: Session, question_id: str, final_label: Mapping[str, Any]) -> None:
    """Apply an adjudicated final review label (decision ``accept`` or ``reject``) to a question.

    ``reject`` makes it rejected, a promoted seed included (so it stops steering generation);
    ``accept`` makes a proposed or rejected question accepted and leaves an accepted one or a
    seed as it is. No annotation is written: the adjudication record says who decided.
    """
    decision = final_label.get("decision", "")
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
    if decision == "accept":
        _settle_edit(s, question)


def _settle_edit(s: Session, question: Question) -> None:
    """An accepted question whose annotators all chose *edit* with the same wording (Label Studio
    reviews: the final label only says "accept") takes that wording, recorded in its lineage as
    a CLI edit is. Different wordings, or an edit among plain accepts, leave the text as it is."""
    task_id = annotation_task_id(QUESTION_REVIEW, "question", question.id)
    latest: dict[str, Any] = {}
    for row in s.exec(select(Annotation).where(Annotation.task_id == task_id).order_by(col(Annotation.created_at), col(Annotation.id))):
        latest[row.annotator] = row.label
    texts = [clean_question(label.get("text") or "") if isinstance(label, dict) and label.get("decision") == "edit" else ""
             for label in latest.values()]
    if not texts or not all(texts) or len({tuple(tokens(t)) for t in texts}) != 1 or tokens(texts[0]) == tokens(question.text):
        return
    try:
        _check_not_duplicate(s, question, texts[0])
    except ReviewError:
        return  # it would repeat another question: the text stays, the edits stay in the annotations
    lineage = dict(question.lineage or {})
    lineage["edits"] = [*lineage.get("edits", []), {"previous_text": question.text, "annotator": "adjudication",
                                                    "source": "adjudication", "at": utcnow().isoformat(timespec="seconds")}]
    question.lineage = lineage
    question.text = texts[0]
    question.updated_at = utcnow()
    s.add(question)


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
        q = select(Question).where(*where).order_by(col(Question.round), col(Question.subtype), col(Question.created_at), col(Question.id))
        items = list(s.exec(q.offset(offset).limit(limit)).all())
    return Page(items, int(total), offset, limit)


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

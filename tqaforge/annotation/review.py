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
``cli:1``, ``cli:2``...); repeating one's latest decision is a no-op. A CLI or app review is a
label like any other: while one person has reviewed the question it takes their latest
decision; once two or more have, its status follows the adjudication rule over all of their
labels (:func:`tqaforge.annotation.adjudication.adjudicate_task`), never the last command:
accept by ana then reject by ben puts the question in the adjudication queue (``proposed``).
People's labels outrank the verification agent's (:class:`tqaforge.labels.Authority`).

An edit keeps the question's id and records the old text in ``Question.lineage["edits"]``. Its
text is part of the decision (:func:`review_wording`): an edit and a plain accept are not a
keep of the old wording, two different edits wait in the queue with both texts, and the
wording that wins (by the same rule, or a person's ``agreement resolve``) becomes the question.

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
from tqaforge.people import resolve_annotator
from tqaforge.queries import Page, check_window, get_by_prefix
from tqaforge.schemas.enums import QuestionStatus
from tqaforge.schemas.records import Annotation, AnnotationTask, Question, utcnow
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
    #: How the status was decided once several people reviewed: None (one reviewer), or what
    #: adjudication made of it ("open": waiting in the queue, "resolved", "person": a person's
    #: final decision stands).
    adjudication: str | None = None

    def lines(self) -> list[str]:
        """What the CLI prints: the question's status before and after, and how it was decided."""
        note = "" if self.recorded else " (same as your last decision; nothing new recorded)"
        how = {
            "open": " (the reviewers disagree: it waits in the adjudication queue, `tqaforge agreement queue`)",
            "resolved": " (decided by the adjudication rule over every reviewer's label)",
            "person": " (a person's final decision stands; `tqaforge agreement resolve` to change it)",
        }.get(self.adjudication or "", "")
        return [f"{self.question.id[:10]}: {self.previous_status} -> {self.question.status}{note}{how}"]


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
    new: bool = False,
) -> ReviewResult:
    """Apply one person's decision on a question (id or unique prefix); see the module docs.

    ``reason`` is required for ``reject``; ``text`` (the new wording) for ``edit``. ``annotator``
    must name a known person (:func:`tqaforge.people.resolve_annotator`: an unknown name is
    refused with the known ones) unless ``new`` registers it.
    """
    with ws.session() as s:
        question = get_by_prefix(s, Question, question_id)
        person = resolve_annotator(s, annotator, new=new)
        return apply_decision(
            s, question, decision, annotator=annotator.strip(), reason=reason, text=text,
            source=source, lead_time=lead_time, annotator_id=person.id,
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
    annotator_id: str | None = None,
) -> ReviewResult:
    """:func:`review_question` on a question of an open session (the caller commits).

    ``annotator_id``: the person (:func:`tqaforge.people.resolve_annotator`); else looked up
    from ``annotator``."""
    if decision not in DECISIONS:
        raise ReviewError(f"unknown decision {decision!r}", hint="one of " + ", ".join(DECISIONS))
    annotator = annotator.strip()
    if not annotator:
        raise ReviewError("give the annotator's name", hint="--annotator NAME (or TQAFORGE_ANNOTATOR)",
                          app_hint="type your name in the name field")
    label: dict[str, Any] = {"decision": decision, "status": DECISIONS[decision]}
    if decision == "reject":
        if not reason or not reason.strip():
            raise ReviewError("a rejection needs a reason", hint='--reason "why"', app_hint="say why in the reason field")
    if reason and reason.strip():
        label["reason"] = reason.strip()
    if decision == "edit":
        if text is None or not clean_question(text):
            raise ReviewError("an edit needs the new text", hint='--edit "the new question"',
                              app_hint="type the new wording in its field")
        new_text = clean_question(text)
        if tokens(new_text) == tokens(question.text):
            raise ReviewError("the new text is the same question", hint="use --accept to accept it as it is",
                              app_hint="accept it as it is")
        _check_not_duplicate(s, question, new_text)
        label["text"] = new_text
        label["previous_text"] = question.text

    elif decision in ("accept", "promote"):
        original = _original_text(s, question)
        if tokens(question.text) != tokens(original):
            label["text"] = question.text  # accepted as worded now (an earlier edit), not as first shown

    previous_status = question.status
    done = record_question_review(s, question, label, annotator=annotator, source=source, lead_time=lead_time,
                                  annotator_id=annotator_id)
    recorded = done.recorded
    # The status follows the rule over every reviewer's label; with one reviewer, their decision.
    from tqaforge.annotation.adjudication import adjudicate_task  # it imports this module (kinds' settle)

    summary = adjudicate_task(s, done.task.id)
    if not summary.single:
        how = "person" if summary.person else ("open" if summary.open else "resolved")
        s.flush()
        return ReviewResult(question=question, annotation=done.annotation, recorded=recorded,
                            previous_status=previous_status, adjudication=how)
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
    seed as it is; its ``text``, when the final label has one (an agreed or chosen edit),
    becomes the question's wording, the old one kept in its lineage. No annotation is written:
    the adjudication record says who decided.
    """
    decision = final_label.get("decision", "")
    question = s.get(Question, question_id)
    if question is None or decision not in ("accept", "reject"):
        return
    kept = (QuestionStatus.ACCEPTED.value, QuestionStatus.SEED.value)
    status = DECISIONS[decision]
    if question.status != status and not (decision == "accept" and question.status in kept):
        question.status = status
        question.updated_at = utcnow()
        s.add(question)
    text = final_label.get("text")
    if decision == "accept" and isinstance(text, str) and clean_question(text):
        _take_wording(s, question, clean_question(text))


def unsettle_question(s: Session, question_id: str) -> None:
    """The reviewers disagree and no rule decides: the question waits as ``proposed`` (the
    adjudication queue holds it) whatever the last reviewer said."""
    question = s.get(Question, question_id)
    if question is not None and question.status != QuestionStatus.PROPOSED.value:
        question.status = QuestionStatus.PROPOSED
        question.updated_at = utcnow()
        s.add(question)


def _take_wording(s: Session, question: Question, text: str) -> None:
    """``text`` becomes the question (lineage kept); a wording that repeats another question of
    the same table and subtype leaves the text as it is (the edits stay in the annotations)."""
    if tokens(text) == tokens(question.text):
        return
    try:
        _check_not_duplicate(s, question, text)
    except ReviewError:
        return
    lineage = dict(question.lineage or {})
    lineage["edits"] = [*lineage.get("edits", []), {"previous_text": question.text, "annotator": "adjudication",
                                                    "source": "adjudication", "at": utcnow().isoformat(timespec="seconds")}]
    question.lineage = lineage
    question.text = text
    question.updated_at = utcnow()
    s.add(question)


def _original_text(s: Session, question: Question) -> str:
    """The wording the question's review task was made with (what a plain accept keeps)."""
    task = s.get(AnnotationTask, review_task_id(question.id))
    shown = (task.payload or {}).get("text") if task is not None else None
    return shown if isinstance(shown, str) and shown.strip() else question.text


def _wording(label: Any, original: str) -> str | None:
    """The wording a review label keeps (None for a rejection or an unreadable label)."""
    if not isinstance(label, Mapping):
        return None
    decision = label.get("decision")
    text = label.get("text")
    if decision == "edit":
        return clean_question(text) if isinstance(text, str) and clean_question(text) else None
    if decision in ("accept", "promote"):
        return clean_question(text) if isinstance(text, str) and clean_question(text) else original
    return None


def review_wording(
    task: AnnotationTask, labels: Mapping[str, Any], final_label: Mapping[str, Any], min_agree: int | None,
) -> tuple[dict[str, Any] | None, list[dict[str, Any]] | None]:
    """The wording of a kept question, decided by the rule that decided to keep it
    (:data:`tqaforge.annotation.kinds.Detail`).

    Each keeping label gives a wording: an edit its text, an accept the wording it accepted (the
    task's text unless it says otherwise). One wording among them, or one held by at least
    ``min_agree`` (default: a strict majority) of the keepers, wins: the final label carries it
    as ``text`` when it is not the task's. Otherwise (None, votes): the queue shows each wording
    and who chose it.
    """
    if final_label.get("decision") != "accept":
        return dict(final_label), None
    original = clean_question(str((task.payload or {}).get("text") or ""))
    groups: dict[tuple[str, ...], tuple[str, list[str]]] = {}
    rejecters: list[str] = []
    for who, label in sorted(labels.items()):
        wording = _wording(label, original)
        if wording is None:
            rejecters.append(who)
            continue
        groups.setdefault(tuple(tokens(wording)), (wording, []))[1].append(who)
    keepers = sum(len(names) for _, names in groups.values())
    need = min_agree if min_agree is not None else keepers // 2 + 1
    winners = [text for text, names in groups.values() if len(groups) == 1 or len(names) >= need]
    if len(winners) == 1:
        final = {"decision": "accept"}
        if tokens(winners[0]) != tokens(original):
            final["text"] = winners[0]
        return final, None
    votes: list[dict[str, Any]] = [
        {"label": {"decision": "edit", "text": text} if tokens(text) != tokens(original) else {"decision": "accept"},
         "annotators": names}
        for text, names in sorted(groups.values(), key=lambda g: (-len(g[1]), g[0]))
    ]
    if rejecters:
        votes.append({"label": {"decision": "reject"}, "annotators": rejecters})
    return None, votes


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

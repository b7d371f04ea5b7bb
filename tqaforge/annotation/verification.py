"""What a final answer-verification or question-typing label does to its item.

Adjudication compares the ``decision`` (or ``type``) of each annotator's label; when a task is
resolved, :func:`settle_answer` or :func:`settle_question_type` carries the final label over
(called in the adjudication's session, as :func:`tqaforge.annotation.review.settle_question`
is for question reviews):

- answer verification ``correct``: the answer becomes ``verified`` (people confirmed it);
- ``incorrect``: it becomes ``rejected``; when every annotator who typed a corrected answer typed
  the same one (:func:`tqaforge.tables.matching.same_answer` under the subtype's rule, the
  comparator of the vote), a new answer holds it, status ``corrected``, origin ``human``: the
  question's gold from now on. Different corrections leave the question without a gold answer
  (its answer task shows the corrections for a person to settle with ``agreement resolve``);
- ``unanswerable``: ``rejected``; the question keeps its status (its review decides that);
- question typing ``extraction`` / ``reasoning``: the question's ``question_type``
  (``unanswerable`` leaves it unset).

Nothing here writes an annotation: the adjudication record says who decided.
"""

from __future__ import annotations

from typing import Any, Mapping

from sqlmodel import Session, col, select

from tqaforge.answers.parse import split_answer
from tqaforge.ids import annotation_task_id
from tqaforge.labels import TYPED_BY_PEOPLE, rater
from tqaforge.schemas.enums import AnswerStatus, Origin, QuestionType, VariantStatus
from tqaforge.schemas.records import Annotation, Answer, Question, Variant, utcnow
from tqaforge.tables.matching import answer_rule, same_answer
from tqaforge.variants.human import HumanVariantError, store_shortened_table

VERIFICATION_KIND = "answer_verification"
TYPING_KIND = "question_typing"
#: ``Answer.method`` of an answer typed by people when they rejected the proposed one.
CORRECTED_METHOD = "verification"


def _corrections(s: Session, answer_id: str) -> list[tuple[str, ...]]:
    """The corrected answers typed on this answer's verification task: each annotator's latest."""
    task_id = annotation_task_id(VERIFICATION_KIND, "answer", answer_id)
    latest: dict[str, Any] = {}
    rows = s.exec(select(Annotation).where(Annotation.task_id == task_id).order_by(col(Annotation.created_at), col(Annotation.id)))
    for row in rows:
        latest[rater(row)] = row.label
    typed = []
    for label in latest.values():
        if isinstance(label, dict) and isinstance(label.get("answer"), str) and label.get("decision") != "correct":
            items = split_answer(label["answer"])
            if items:
                typed.append(items)
    return typed


def settle_answer(s: Session, answer_id: str, final_label: Mapping[str, Any]) -> None:
    """Apply a resolved answer-verification label to the answer (module docs)."""
    answer = s.get(Answer, answer_id)
    decision = final_label.get("decision")
    if answer is None or decision not in ("correct", "incorrect", "unanswerable"):
        return
    if decision == "correct":
        if answer.status != AnswerStatus.GOLD.value:
            answer.status = AnswerStatus.VERIFIED
            s.add(answer)
        return
    answer.status = AnswerStatus.REJECTED
    s.add(answer)
    if decision != "incorrect":
        return
    typed = _corrections(s, answer_id)
    question = s.get(Question, answer.question_id)
    rule = answer_rule(question.subtype if question is not None else None)
    if not typed or not all(same_answer(typed[0], other, rule) for other in typed[1:]):
        return
    values = list(typed[0])
    corrected_id = Answer.make_id(answer.question_id, Origin.HUMAN.value, values)
    if s.get(Answer, corrected_id) is None:
        s.add(Answer(
            id=corrected_id, question_id=answer.question_id, value=", ".join(values), values=values,
            status=AnswerStatus.CORRECTED, origin=Origin.HUMAN, method=CORRECTED_METHOD, created_by="people",
            votes={"corrects": answer_id}, created_at=utcnow(),
        ))


def settle_question_type(s: Session, question_id: str, final_label: Mapping[str, Any]) -> None:
    """Apply a resolved question-typing label: the question's ``question_type`` (module docs)."""
    question = s.get(Question, question_id)
    kind = final_label.get("type")
    if question is None or kind not in (QuestionType.EXTRACTION.value, QuestionType.REASONING.value):
        return
    # The record says who typed it; what keeps rules and models off it is the adjudication itself
    # (tqaforge.labels.settled_by_people), not this note.
    meta = dict(question.meta or {})
    typing = {"method": TYPED_BY_PEOPLE, "type": kind, "decision": "people's labels, adjudicated"}
    if question.question_type != kind or meta.get("typing") != typing:
        meta["typing"] = typing
        question.meta = meta
        question.question_type = QuestionType(kind)
        question.updated_at = utcnow()
        s.add(question)


def settle_relevant_cells(s: Session, question_id: str, final_label: Mapping[str, Any]) -> None:
    """A final set of relevant cells becomes the question's ``relevant_cells`` and its shortened
    table (:func:`tqaforge.variants.human.store_shortened_table`). An empty set shortens nothing."""
    cells = [c for c in final_label.get("cells") or [] if isinstance(c, (list, tuple)) and len(c) == 2]
    if not cells:
        return
    try:
        store_shortened_table(s, question_id, cells)
    except HumanVariantError:
        # Cells that do not fit the question's table (labels recorded around the checks, e.g. a
        # seeded study): the final label stands in its adjudication; no table is shortened by it.
        return


def settle_value_modification(s: Session, variant_id: str, final_label: Mapping[str, Any]) -> None:
    """A person's decision on a value modification whose re-answers disagreed: ``accept``
    validates the variant (with its author's gold), ``reject`` rejects it."""
    variant = s.get(Variant, variant_id)
    if variant is None:
        return
    decision = final_label.get("decision")
    variant.status = VariantStatus.VALIDATED if decision == "accept" else VariantStatus.REJECTED
    variant.skip_reason = None if decision == "accept" else "rejected by a person after blind re-answering"
    s.add(variant)

"""What final labels do to their items: an answer verified, rejected or corrected by people; a
question's type; a question edited in Label Studio (where the final label only says accept)."""

from __future__ import annotations

from labelstudio_helpers import build_workspace
from sqlmodel import select

from tqaforge.annotation.adjudication import adjudicate
from tqaforge.labels import record_annotation
from tqaforge.schemas.enums import AnswerStatus, Origin, QuestionStatus, QuestionType
from tqaforge.schemas.records import Answer, Question
from tqaforge.store import Workspace


def _label(ws: Workspace, kind: str, target_type: str, target_id: str, labels: dict[str, dict]) -> None:
    with ws.session() as s:
        for who, label in labels.items():
            record_annotation(s, kind=kind, target_type=target_type, target_id=target_id, annotator=who, label=label,
                              source="labelstudio", source_ref=f"ls:{who}:1")


def _answers(ws: Workspace, question_id: str) -> dict[str, Answer]:
    with ws.session() as s:
        return {a.id: a for a in s.exec(select(Answer).where(Answer.question_id == question_id)).all()}


def test_verified_answer(workspace: Workspace) -> None:
    answer_id = build_workspace(workspace, proposed=0)["answers"][0]
    _label(workspace, "answer_verification", "answer", answer_id, {"ls:a": {"decision": "correct"}, "ls:b": {"decision": "correct"}})
    assert adjudicate(workspace, kinds=["answer_verification"])["answer_verification"].unanimous == 1
    with workspace.session() as s:
        assert s.get(Answer, answer_id).status == AnswerStatus.VERIFIED  # type: ignore[union-attr]


def test_agreed_correction_becomes_the_gold_and_different_ones_do_not(workspace: Workspace) -> None:
    answer_id = build_workspace(workspace, proposed=0)["answers"][0]
    with workspace.session() as s:
        question_id = s.get(Answer, answer_id).question_id  # type: ignore[union-attr]
    _label(workspace, "answer_verification", "answer", answer_id, {
        "ls:a": {"decision": "incorrect", "answer": "1,234.0"}, "ls:b": {"decision": "incorrect", "answer": "1234"},
    })
    adjudicate(workspace, kinds=["answer_verification"])
    answers = _answers(workspace, question_id)
    assert answers[answer_id].status == AnswerStatus.REJECTED
    corrected = [a for a in answers.values() if a.status == AnswerStatus.CORRECTED]
    assert len(corrected) == 1 and corrected[0].origin == Origin.HUMAN and corrected[0].values == ["1,234.0"]
    assert corrected[0].votes == {"corrects": answer_id}



def test_different_corrections_leave_the_question_without_gold(workspace: Workspace) -> None:
    answer_id = build_workspace(workspace, proposed=0)["answers"][0]
    with workspace.session() as s:
        question_id = s.get(Answer, answer_id).question_id  # type: ignore[union-attr]
    _label(workspace, "answer_verification", "answer", answer_id, {
        "ls:a": {"decision": "incorrect", "answer": "41"}, "ls:b": {"decision": "incorrect", "answer": "17"},
    })
    adjudicate(workspace, kinds=["answer_verification"])
    statuses = sorted(a.status for a in _answers(workspace, question_id).values() if a.origin != Origin.IMPORT)
    assert statuses == [AnswerStatus.REJECTED]


def test_unanswerable_rejects_and_typing_sets_the_type(workspace: Workspace) -> None:
    ids = build_workspace(workspace, proposed=2)
    answer_id, (q1, q2) = ids["answers"][0], sorted(ids["questions"])
    _label(workspace, "answer_verification", "answer", answer_id, {"ls:a": {"decision": "unanswerable"}, "ls:b": {"decision": "unanswerable"}})
    _label(workspace, "question_typing", "question", q1, {"ls:a": {"type": "extraction"}, "ls:b": {"type": "extraction"}})
    _label(workspace, "question_typing", "question", q2, {"ls:a": {"type": "unanswerable"}, "ls:b": {"type": "unanswerable"}})
    adjudicate(workspace, kinds=["answer_verification", "question_typing"])
    with workspace.session() as s:
        assert s.get(Answer, answer_id).status == AnswerStatus.REJECTED  # type: ignore[union-attr]
        assert s.get(Question, q1).question_type == QuestionType.EXTRACTION  # type: ignore[union-attr]
        assert s.get(Question, q2).question_type is None  # type: ignore[union-attr]


def test_a_label_studio_edit_applies_when_both_editors_typed_the_same_wording(workspace: Workspace) -> None:
    q1, q2 = sorted(build_workspace(workspace, proposed=2)["questions"])
    with workspace.session() as s:
        before = {q: s.get(Question, q).text for q in (q1, q2)}  # type: ignore[union-attr]
    edit = {"decision": "edit", "subtype_ok": True, "text": "How many rows does the table have?"}
    _label(workspace, "question_review", "question", q1, {"ls:a": edit, "ls:b": {**edit, "text": "how many rows does the table have"}})
    _label(workspace, "question_review", "question", q2, {"ls:a": edit, "ls:b": {"decision": "accept", "subtype_ok": True}})
    run = adjudicate(workspace, kinds=["question_review"])
    # Two editors with one wording agree; an edit and a plain accept do not (issue 24): the
    # wording waits in the queue, and the question for it.
    assert (run["question_review"].unanimous, run["question_review"].open) == (1, 1)
    with workspace.session() as s:
        first, second = s.get(Question, q1), s.get(Question, q2)
        assert first is not None and second is not None
        assert first.status == QuestionStatus.ACCEPTED and second.status == QuestionStatus.PROPOSED
        assert first.text == "How many rows does the table have?"
        assert first.lineage["edits"][-1]["previous_text"] == before[q1]  # type: ignore[index]
        assert second.text == before[q2]  # not settled yet: the text stays


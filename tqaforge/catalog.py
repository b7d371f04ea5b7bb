"""Read-only queries over a workspace: listings, lookups by id prefix, the pipeline funnel.

The CLI, the app and the tests all call these; none of them query the store on their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, TypeVar

from sqlalchemy import func
from sqlmodel import Session, SQLModel, select

from tqaforge.errors import NotFound
from tqaforge.schemas.records import (
    Annotation,
    AnnotationTask,
    Answer,
    AnswerCandidate,
    LLMCall,
    Question,
    Release,
    TableRecord,
    Variant,
)
from tqaforge.store import Workspace

R = TypeVar("R", bound=SQLModel)


def get_by_prefix(session: Session, model: type[R], prefix: str) -> R:
    """The one record whose id starts with ``prefix`` (ids are long hashes; 6+ chars usually do)."""
    prefix = prefix.strip()
    if not prefix:
        raise NotFound(f"give a {model.__name__} id")
    rows = session.exec(select(model).where(model.id.startswith(prefix)).limit(2)).all()  # type: ignore[attr-defined]
    if not rows:
        raise NotFound(f"no {model.__name__} with id {prefix!r}", hint="list them to see the ids")
    if len(rows) > 1:
        raise NotFound(f"id {prefix!r} matches several {model.__name__} records", hint="give more characters")
    return rows[0]


def list_tables(ws: Workspace, *, limit: int = 50, offset: int = 0) -> list[TableRecord]:
    """Tables, oldest import first."""
    with ws.session() as s:
        q = select(TableRecord).order_by(TableRecord.created_at, TableRecord.id).offset(offset).limit(limit)
        return list(s.exec(q).all())


def count_questions_by_table(ws: Workspace, table_ids: Sequence[str]) -> dict[str, int]:
    with ws.session() as s:
        rows = s.exec(
            select(Question.table_id, func.count()).where(Question.table_id.in_(list(table_ids))).group_by(Question.table_id)  # type: ignore[attr-defined]
        ).all()
    return {tid: n for tid, n in rows}


@dataclass
class TableDetail:
    table: TableRecord
    questions: list[Question]
    answers: dict[str, list[Answer]]


def show_table(ws: Workspace, table_id: str) -> TableDetail:
    """One table with its questions and their answers."""
    with ws.session() as s:
        table = get_by_prefix(s, TableRecord, table_id)
        questions = list(s.exec(select(Question).where(Question.table_id == table.id).order_by(Question.subtype, Question.id)).all())
        answers: dict[str, list[Answer]] = {q.id: [] for q in questions}
        if questions:
            for a in s.exec(select(Answer).where(Answer.question_id.in_(list(answers)))).all():  # type: ignore[attr-defined]
                answers[a.question_id].append(a)
    return TableDetail(table=table, questions=questions, answers=answers)


def list_questions(
    ws: Workspace,
    *,
    table_id: str | None = None,
    subtype: str | None = None,
    status: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> list[Question]:
    """Questions filtered by table (id prefix), subtype and status."""
    with ws.session() as s:
        q = select(Question)
        if table_id:
            q = q.where(Question.table_id.startswith(table_id))  # type: ignore[attr-defined]
        if subtype:
            q = q.where(Question.subtype == subtype)
        if status:
            q = q.where(Question.status == status)
        q = q.order_by(Question.created_at, Question.id).offset(offset).limit(limit)
        return list(s.exec(q).all())


@dataclass
class Funnel:
    """Counts per pipeline stage, in data-flow order (see DESIGN.md)."""

    stages: list[tuple[str, dict[str, int]]]
    llm_cost: float

    def as_dict(self) -> dict[str, dict[str, int]]:
        return dict(self.stages)


def _count_by(s: Session, model: type[SQLModel], column: object | None) -> dict[str, int]:
    if column is None:
        return {"total": s.exec(select(func.count()).select_from(model)).one()}
    rows = s.exec(select(column, func.count()).group_by(column)).all()  # type: ignore[call-overload]
    counts = {str(k): n for k, n in rows}
    counts = {"total": sum(counts.values()), **dict(sorted(counts.items()))}
    return counts


def funnel(ws: Workspace) -> Funnel:
    """How many records each stage holds, split by status: the pipeline at a glance."""
    with ws.session() as s:
        stages = [
            ("tables", _count_by(s, TableRecord, None)),
            ("questions", _count_by(s, Question, Question.status)),
            ("answer candidates", _count_by(s, AnswerCandidate, AnswerCandidate.method)),
            ("answers", _count_by(s, Answer, Answer.status)),
            ("variants", _count_by(s, Variant, Variant.status)),
            ("annotation tasks", _count_by(s, AnnotationTask, AnnotationTask.status)),
            ("annotations", _count_by(s, Annotation, None)),
            ("llm calls", _count_by(s, LLMCall, LLMCall.status)),
            ("releases", _count_by(s, Release, None)),
        ]
        cost = s.exec(select(func.coalesce(func.sum(LLMCall.cost), 0.0))).one()
    return Funnel(stages=stages, llm_cost=float(cost))


def subtype_counts(ws: Workspace) -> dict[str, int]:
    """Questions per subtype (None grouped as "(none)")."""
    with ws.session() as s:
        rows = s.exec(select(Question.subtype, func.count()).group_by(Question.subtype)).all()
    return {k or "(none)": n for k, n in sorted(rows, key=lambda r: r[0] or "")}

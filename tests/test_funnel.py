"""The pipeline funnel counted on table names (tqaforge.funnel) agrees with the records.

The funnel is counted with plain SQL so that ``tqaforge status`` needs neither the records nor
SQLAlchemy; these tests hold it to what the records' own ORM queries count (the way it was counted
before), on SQLite and PostgreSQL, through the engine and through the quick SQLite read.
"""

from __future__ import annotations

import sys
from pathlib import Path

from sqlalchemy import func, text
from sqlmodel import Session, SQLModel, select

from tqaforge.funnel import COST, STAGES, Funnel, funnel, quick_funnel
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

sys.path.insert(0, str(Path(__file__).parent))
from app_demo import stage_everything  # noqa: E402

#: The funnel as the records count it: the stages, their models and split columns, in order.
REFERENCE = [
    ("tables", TableRecord, None),
    ("questions", Question, Question.status),
    ("answer candidates", AnswerCandidate, AnswerCandidate.method),
    ("answers", Answer, Answer.status),
    ("variants", Variant, Variant.status),
    ("annotation tasks", AnnotationTask, AnnotationTask.status),
    ("annotations", Annotation, None),
    ("llm calls", LLMCall, LLMCall.status),
    ("releases", Release, None),
]


def _records_funnel(ws: Workspace) -> Funnel:
    """The funnel through the records and the ORM (how tqaforge.queries counted it before)."""

    def count_by(s: Session, model: type[SQLModel], column: object | None) -> dict[str, int]:
        if column is None:
            return {"total": s.exec(select(func.count()).select_from(model)).one()}
        counts = {str(k): n for k, n in s.exec(select(column, func.count()).group_by(column)).all()}  # type: ignore[call-overload]
        return {"total": sum(counts.values()), **dict(sorted(counts.items()))}

    with ws.session() as s:
        stages = [(name, count_by(s, model, column)) for name, model, column in REFERENCE]
        cost = s.exec(select(func.coalesce(func.sum(LLMCall.cost), 0.0))).one()
    return Funnel(stages=stages, llm_cost=float(cost))


def test_stages_name_the_records_tables_and_columns() -> None:
    """A renamed table or column in the records fails here, not in a user's `tqaforge status`."""
    named = [(name, model.__tablename__, column.key if column is not None else None)  # type: ignore[attr-defined]
             for name, model, column in REFERENCE]
    assert list(STAGES) == named
    assert COST == (LLMCall.__tablename__, "cost") and "cost" in LLMCall.__table__.c  # type: ignore[attr-defined]


def _fill(ws: Workspace) -> Funnel:
    """Every stage filled, a failed call with its cost, and a status this version does not know (a
    later version wrote it); the records' own counts of it."""
    stage_everything(ws)
    with ws.session() as s:
        s.add(LLMCall(id="failed-call", model="m", messages=[], text="", cost=0.125, status="error", purpose="demo"))
        s.exec(text("UPDATE questions SET status = 'from_the_future' WHERE id = (SELECT MIN(id) FROM questions)"))  # type: ignore[call-overload]
    expected = _records_funnel(ws)
    assert expected.as_dict()["llm calls"] == {"total": 4, "error": 1, "ok": 3}
    assert expected.as_dict()["questions"]["from_the_future"] == 1
    assert all(counts["total"] > 0 for _, counts in expected.stages), expected.stages  # a real check of every stage
    assert abs(expected.llm_cost - 0.185) < 1e-9
    return expected


def test_funnel_counts_what_the_records_count(workspace: Workspace) -> None:
    """Through the engine, on SQLite and PostgreSQL (named by TQAFORGE_DATABASE_URL)."""
    expected = _fill(workspace)
    assert funnel(workspace) == expected
    # The environment names the database: the quick read, which knows only the workspace's own
    # SQLite file, must leave it to the usual way.
    assert quick_funnel(workspace.root) is None


def test_quick_funnel_counts_what_the_records_count(sqlite_workspace: Workspace) -> None:
    """Through the standard library's driver, on the workspace's own SQLite file."""
    expected = _fill(sqlite_workspace)
    assert quick_funnel(sqlite_workspace.root) == expected
    assert funnel(sqlite_workspace) == expected


def test_empty_workspace_counts_zero(sqlite_workspace: Workspace) -> None:
    expected = _records_funnel(sqlite_workspace)
    assert funnel(sqlite_workspace) == quick_funnel(sqlite_workspace.root) == expected
    assert expected.llm_cost == 0.0 and all(counts == {"total": 0} for _, counts in expected.stages)

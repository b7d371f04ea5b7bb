"""The pipeline funnel: how many records each stage holds, split by status.

``tqaforge status`` and the app's overview show it. It is counted with plain SQL on the tables'
and columns' names, not through the records: a command that only counts must not pay for
building every SQLModel class (the ORM, SQLModel and pydantic), and ``tqaforge status`` need not
even import SQLAlchemy (:func:`quick_funnel`). :data:`STAGES` names what is counted; a test checks
those names against the records (:mod:`tqaforge.schemas.records`), and the counts against the
records' own queries, so a renamed table or column cannot go unnoticed.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ContextManager, Protocol, Sequence

from tqaforge.quickopen import connect_if_current

#: Each stage of the funnel in data-flow order (see DESIGN.md): its name, its table, and the
#: column its records are split by (None: a total only).
STAGES: tuple[tuple[str, str, str | None], ...] = (
    ("tables", "tables", None),
    ("questions", "questions", "status"),
    ("answer candidates", "answer_candidates", "method"),
    ("answers", "answers", "status"),
    ("variants", "variants", "status"),
    ("annotation tasks", "annotation_tasks", "status"),
    ("annotations", "annotations", None),
    ("llm calls", "llm_calls", "status"),
    ("releases", "releases", None),
)
#: The table and column the money spent on models is summed from.
COST = ("llm_calls", "cost")

#: Runs one SQL statement and returns its rows.
Run = Callable[[str], Sequence[Sequence[Any]]]


class Workspace(Protocol):
    """What :func:`funnel` needs of a :class:`tqaforge.store.Workspace` (named structurally, so
    that not even a type-only import ties this module to the store and SQLAlchemy)."""

    def connection(self) -> ContextManager[Any]: ...


@dataclass
class Funnel:
    """Counts per pipeline stage, in data-flow order (see DESIGN.md)."""

    stages: list[tuple[str, dict[str, int]]]
    llm_cost: float

    def as_dict(self) -> dict[str, dict[str, int]]:
        return dict(self.stages)


def funnel(ws: Workspace) -> Funnel:
    """How many records each stage holds, split by status: the pipeline at a glance.

    Each stage's counts are ``{"total": n, value: n, ...}``, the values (as stored, ``"None"``
    for a missing one) in sorted order; a stage with no split has its total only."""
    with ws.connection() as conn:
        return _count(lambda sql: conn.exec_driver_sql(sql).all())


def quick_funnel(root: Path | None = None) -> Funnel | None:
    """:func:`funnel` of the workspace at ``root`` (or around the cwd) read with the standard
    library's SQLite driver, without SQLAlchemy; None when the workspace must be opened the
    usual way (another database, a store to migrate, a damaged file, any error of the driver:
    :func:`tqaforge.quickopen.connect_if_current`), where any problem is reported as always."""
    conn = connect_if_current(root)
    if conn is None:
        return None
    with closing(conn):
        try:
            conn.execute("BEGIN")  # one snapshot for every count
            return _count(lambda sql: conn.execute(sql).fetchall())
        except sqlite3.Error:
            return None
        finally:
            if conn.in_transaction:
                conn.rollback()


def _count(run: Run) -> Funnel:
    stages = [(name, _count_by(run, table, by)) for name, table, by in STAGES]
    table, column = COST
    (cost,), = run(f'SELECT COALESCE(SUM("{column}"), 0.0) FROM "{table}"')
    return Funnel(stages=stages, llm_cost=float(cost))


def _count_by(run: Run, table: str, by: str | None) -> dict[str, int]:
    if by is None:
        (n,), = run(f'SELECT COUNT(*) FROM "{table}"')
        return {"total": int(n)}
    counts = {str(value): int(n) for value, n in run(f'SELECT "{by}", COUNT(*) FROM "{table}" GROUP BY "{by}"')}
    return {"total": sum(counts.values()), **dict(sorted(counts.items()))}

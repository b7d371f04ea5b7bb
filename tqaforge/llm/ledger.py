"""The ledger of model calls: the LLMCall rows, which are at once the cache, the cost ledger and
the provenance of every reply.

One thread of its own reads and writes the store, on one connection: commits never block the
event loop, SQLite never sees two writers of ours at once, and a commit costs a statement and a
COMMIT, nothing more (the gateway's throughput depends on it). A row is written with one
INSERT .. ON CONFLICT where the database has it; an error row never replaces an ok one (another
run may have answered the request meanwhile).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, TypeVar

from sqlalchemy import Connection, bindparam, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from tqaforge.errors import StoreError
from tqaforge.llm.calls import Completion
from tqaforge.schemas.records import LLMCall
from tqaforge.store import Workspace

__all__ = ["Ledger", "upsert_statement"]

T = TypeVar("T")

_CALLS = LLMCall.__table__  # type: ignore[attr-defined]
_CACHED = select(_CALLS.c.text, _CALLS.c.prompt_tokens, _CALLS.c.completion_tokens).where(
    _CALLS.c.id == bindparam("id"), _CALLS.c.status == "ok"
)


def upsert_statement(dialect: str) -> Any:
    """One INSERT .. ON CONFLICT statement for the whole row, built once (SQLite, PostgreSQL).

    An error row never replaces an ok one (another run may have answered the request
    meanwhile); anything else replaces what was there. None for other databases. Shared with
    :mod:`~tqaforge.llm.batches`, whose collected replies obey the same rule.
    """
    if dialect not in ("sqlite", "postgresql"):
        return None
    stmt = (sqlite_insert if dialect == "sqlite" else pg_insert)(_CALLS)
    return stmt.on_conflict_do_update(
        index_elements=[_CALLS.c.id],
        set_={c.name: stmt.excluded[c.name] for c in _CALLS.columns if c.name != "id"},
        where=(_CALLS.c.status != "ok") | (stmt.excluded.status == "ok"),
    )



class Ledger:
    """The LLMCall rows of one workspace: :meth:`lookup` answers a request from the store,
    :meth:`record` commits a call's row before its caller sees the reply. :meth:`close` waits
    for the last commits."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self._db = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tqaforge-llm-store")
        self._db_conn: Connection | None = None  # opened and used by that thread only
        self._upsert = upsert_statement(ws.engine.dialect.name)

    async def lookup(self, call_id: str) -> Completion | None:
        """The stored ok answer to this request (a cached Completion), None when there is none."""
        return await self._in_db(self._load, call_id)

    async def record(self, row: dict[str, Any]) -> None:
        """Insert or update a call's row (the columns of LLMCall) and commit."""
        await self._in_db(self._save, row)

    def close(self) -> None:
        """Close the connection once every queued commit is done."""
        self._db.submit(self._close_conn)
        self._db.shutdown(wait=True)

    async def _in_db(self, fn: Callable[..., T], *args: Any) -> T:
        # Shielded: a Ctrl-C while a commit waits its turn must not drop a paid reply; close()
        # waits for the queue.
        return await asyncio.shield(asyncio.get_running_loop().run_in_executor(self._db, fn, *args))

    def _conn(self) -> Connection:
        if self._db_conn is None:
            self._db_conn = self.ws.engine.connect()
        return self._db_conn

    def _close_conn(self) -> None:
        if self._db_conn is not None:
            self._db_conn.close()
            self._db_conn = None

    def _load(self, call_id: str) -> Completion | None:
        """The stored ok answer to this request, if any (only the columns a Completion needs)."""
        conn = self._conn()
        try:
            row = conn.execute(_CACHED, {"id": call_id}).first()
            conn.rollback()  # end the read so that the next one sees newer commits
        except SQLAlchemyError as exc:
            self._close_conn()
            raise StoreError(f"cannot read the LLM call cache: {exc}") from None
        if row is None:
            return None
        return Completion(call_id, row.text or "", True, 0.0, row.prompt_tokens, row.completion_tokens)

    def _save(self, record: dict[str, Any]) -> None:
        if self._upsert is None:
            return self._save_portable(record)
        conn = self._conn()
        try:
            conn.execute(self._upsert, record)
            conn.commit()
        except SQLAlchemyError as exc:
            self._close_conn()
            raise StoreError(f"cannot store LLM call {record['id']}: {exc}") from None

    def _save_portable(self, values: dict[str, Any]) -> None:
        record = LLMCall(**values)
        for attempt in (1, 2):  # databases without ON CONFLICT: read, then merge
            try:
                with self.ws.session() as s:
                    existing = s.get(LLMCall, record.id)
                    if existing is not None and existing.status == "ok" and record.status != "ok":
                        return
                    s.merge(record)
                return
            except IntegrityError:
                if attempt == 2:  # another process inserted the same id between get and insert
                    raise

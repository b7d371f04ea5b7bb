"""Work claims: how several workers (in one process, in several, on several machines) split a
step's work through the store.

A claim is a ``work_claims`` row (step, piece, owner, expires_at). Taking pieces is one
``INSERT .. ON CONFLICT (step, piece) DO UPDATE .. WHERE the claim lapsed RETURNING piece``: a
piece nobody holds, or whose holder stopped renewing its lease, becomes ours; a live claim of
another worker is left alone. SQLite runs the statement alone (one writer); PostgreSQL decides
conflicts row by row, so two workers taking the same pieces at once get disjoint sets. Pieces
are taken in sorted order, so two PostgreSQL workers lock rows in the same order and never
deadlock. A worker renews its claims while it lives (:meth:`Claims.renew`); one that dies
(SIGKILL, a lost machine) stops renewing, and its pieces are taken again once the lease lapses.
Lease times are the workers' own clocks in UTC: machines sharing a store keep NTP time.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterable, Sequence
from datetime import timedelta

from sqlalchemy import Connection, delete, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import SQLAlchemyError

from tqaforge.errors import StoreError
from tqaforge.schemas.records import WorkClaim, utcnow
from tqaforge.store import Workspace

__all__ = ["Claims", "worker_name"]

_CLAIMS = WorkClaim.__table__  # type: ignore[attr-defined]
_CHUNK = 500  # pieces per statement


def worker_name(index: int = 0) -> str:
    """A name for a worker that no other worker anywhere has: host, pid, a random part, index."""
    return f"{socket.gethostname()[:40]}:{os.getpid()}:{uuid.uuid4().hex[:8]}:{index}"


class Claims:
    """The claims of one worker (``owner``) on one step's pieces (synchronous: call it from a thread
    or accept a short wait; each method is one or two statements)."""

    def __init__(self, ws: Workspace, step: str, owner: str, *, lease_s: float = 60.0) -> None:
        if len(step) > 128:
            raise ValueError(f"a step's name is at most 128 characters: {step!r}")
        self.ws = ws
        self.step = step
        self.owner = owner
        self.lease = timedelta(seconds=lease_s)
        self.retaken = 0  # pieces this worker took over from a worker whose lease had lapsed
        dialect = ws.engine.dialect.name
        self._insert = pg_insert if dialect == "postgresql" else sqlite_insert

    def _run(self, fn: object, *args: object) -> object:
        try:
            with self.ws.engine.begin() as conn:
                return fn(conn, *args)  # type: ignore[operator]
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot use the work claims of {self.step}: {exc}") from None

    def held_by_others(self, pieces: Iterable[str]) -> set[str]:
        """The pieces among ``pieces`` that another worker holds under a live lease."""
        wanted = list(dict.fromkeys(pieces))

        def go(conn: Connection) -> set[str]:
            found: set[str] = set()
            now = utcnow()
            for start in range(0, len(wanted), _CHUNK):
                found.update(conn.execute(select(_CLAIMS.c.piece).where(
                    _CLAIMS.c.step == self.step, _CLAIMS.c.piece.in_(wanted[start:start + _CHUNK]),
                    _CLAIMS.c.owner != self.owner, _CLAIMS.c.expires_at >= now)).scalars())
            return found
        return self._run(go)  # type: ignore[return-value]

    def take(self, pieces: Sequence[str], limit: int) -> list[str]:
        """Claim up to ``limit`` of ``pieces`` (free or lapsed ones, in the given order); the pieces
        now ours, in that order."""
        others = self.held_by_others(pieces)
        candidates = [p for p in dict.fromkeys(pieces) if p not in others][:limit]
        if not candidates:
            return []

        def go(conn: Connection) -> set[str]:
            now = utcnow()
            lapsed = set(conn.execute(select(_CLAIMS.c.piece).where(
                _CLAIMS.c.step == self.step, _CLAIMS.c.piece.in_(candidates), _CLAIMS.c.owner != self.owner,
                _CLAIMS.c.expires_at < now)).scalars())
            values = self._insert(_CLAIMS).values(
                [{"step": self.step, "piece": p, "owner": self.owner, "expires_at": now + self.lease}
                 for p in sorted(candidates)])
            stmt = values.on_conflict_do_update(
                index_elements=[_CLAIMS.c.step, _CLAIMS.c.piece],
                set_={"owner": values.excluded.owner, "expires_at": values.excluded.expires_at},
                where=(_CLAIMS.c.expires_at < now) | (_CLAIMS.c.owner == self.owner),
            ).returning(_CLAIMS.c.piece)
            mine = set(conn.execute(stmt).scalars())
            self.retaken += len(mine & lapsed)
            return mine

        mine = self._run(go)
        return [p for p in candidates if p in mine]  # type: ignore[operator]

    def renew(self) -> int:
        """Extend the lease of every claim of this worker; how many it holds."""
        def go(conn: Connection) -> int:
            return int(conn.execute(update(_CLAIMS).where(_CLAIMS.c.owner == self.owner)
                                    .values(expires_at=utcnow() + self.lease)).rowcount)
        return self._run(go)  # type: ignore[return-value]

    def release(self, pieces: Iterable[str]) -> None:
        """Give up these claims (the pieces are done, or left for another pass)."""
        done = list(pieces)

        def go(conn: Connection) -> None:
            for start in range(0, len(done), _CHUNK):
                conn.execute(delete(_CLAIMS).where(_CLAIMS.c.step == self.step, _CLAIMS.c.owner == self.owner,
                                                   _CLAIMS.c.piece.in_(done[start:start + _CHUNK])))
        if done:
            self._run(go)

    def release_all(self) -> None:
        """Give up every claim of this worker (it is stopping), and clear the step's lapsed claims:
        those a dead worker left on pieces it finished before it died, which nobody takes again."""
        self._run(lambda conn: conn.execute(delete(_CLAIMS).where(
            (_CLAIMS.c.owner == self.owner) | ((_CLAIMS.c.step == self.step) & (_CLAIMS.c.expires_at < utcnow())))))

"""The hard budget: what has been spent, what the requests in flight may still cost, and the
refusal of a paid request that could pass ``max_cost``, before it is sent.

Two kinds, one interface (``hold = await budget.reserve(worst)``, then ``budget.settle(hold, cost)``
once the attempt is over, whatever it cost):

- :class:`Budget`: this process's own (a command's ``--max-cost``; ``evaluate --model`` and its
  judge share one). Nothing of it is stored: it ends with the command.
- :class:`SharedBudget`: a named budget in the store (``--budget NAME`` or ``[llm] budget``), one
  ledger for every worker, process, machine and the app that names it. Its ``spent`` and
  ``reserved`` are columns of one ``llm_budgets`` row, changed only by single conditional
  UPDATEs (``... SET reserved = reserved + w WHERE spent + reserved + w <= max_cost``), which
  SQLite runs one at a time and PostgreSQL re-checks against the newest row version, so two
  workers can never both take the last dollar. Each reservation is also a ``llm_budget_holds`` row
  with a lease: a hold whose worker died (SIGKILL, a lost machine) is charged in full when its
  lease lapses, never given back, since its request may have been billed.

The gateway computes each request's worst case (:class:`~tqaforge.llm.replies.UsageBounds`: its
prompt as sent, a reply of its ``max_tokens``, which it always sends) and:

- ``hold = await budget.reserve(worst)`` before sending: when spent + held + worst would pass
  the limit it waits for the requests in flight to settle, and refuses (:class:`BudgetExceeded`)
  once spent + worst alone would pass it. A refusal sticks: every later request is refused too,
  so a run stops cleanly with its finished calls stored;
- ``budget.settle(hold, cost)`` when the attempt is over: the hold is given back and what it cost
  (clamped by the gateway to that worst case, whatever the endpoint claims) is spent, in one step.

So spent never passes ``max_cost``: every request sent was reserved within it first, and none
is charged more than it reserved.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import Connection, and_, delete, insert, select, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from tqaforge.errors import BudgetExceeded, ConfigError, StoreError
from tqaforge.schemas.records import BudgetHold, LLMBudget, utcnow
from tqaforge.store import Workspace

__all__ = ["Budget", "Hold", "SharedBudget", "check_max_cost", "open_budget"]

_BUDGETS = LLMBudget.__table__  # type: ignore[attr-defined]
_HOLDS = BudgetHold.__table__  # type: ignore[attr-defined]
#: How long a shared budget waits before looking again when other processes hold what it needs.
POLL_S = 0.2
#: How long a batch's hold lives: the provider's 24-hour completion window, and time to collect.
BATCH_HOLD = timedelta(days=3)


@dataclass(frozen=True)
class Hold:
    """What one reservation holds: ``amount`` USD; ``id`` its row in a shared budget."""

    amount: float
    id: str | None = None


def check_max_cost(max_cost: float | None) -> None:
    """ConfigError unless ``max_cost`` is None or a positive finite number (NaN and inf are no budget)."""
    if max_cost is not None and not (isinstance(max_cost, (int, float)) and math.isfinite(max_cost) and max_cost > 0):
        raise ConfigError(f"the budget (--max-cost or [llm] max_cost) must be a positive finite number, not {max_cost!r}",
                          hint="give --max-cost a positive amount in USD, e.g. --max-cost 2.50 (leave it out for no budget)")


def _refusal(spent: float, reserved: float, worst: float, limit: float) -> str:
    return (f"budget: ${spent:.4f} spent + ${reserved:.4f} in flight + up to ${worst:.4f} "
            f"for the next call would pass max_cost ${limit:.4f}; stopped before sending")


class Budget:
    """USD spent and held against ``max_cost`` (None: no limit, only counted), in this process."""

    def __init__(self, max_cost: float | None) -> None:
        check_max_cost(max_cost)
        self.max_cost = max_cost
        self.spent = 0.0  # USD charged (cached calls cost 0)
        self.reserved = 0.0  # worst-case cost of the requests in flight
        self._holds = 0  # requests in flight (reserved may keep a rounding residue when it is 0)
        self._stop: str | None = None  # why the first request was refused
        self._waiters: list[asyncio.Future[None]] = []

    async def reserve(self, worst: float) -> Hold:
        """Hold ``worst`` USD for a request about to be sent, waiting while the requests in
        flight hold what it needs; BudgetExceeded when it could pass ``max_cost``."""
        while True:
            if self._stop is not None:
                raise BudgetExceeded(self._stop)
            limit = self.max_cost
            if limit is None or self.spent + self.reserved + worst <= limit:
                self.reserved += worst
                self._holds += 1
                return Hold(worst)
            if self._holds == 0 or self.spent + worst > limit:
                # Whatever the requests in flight end up costing, this one could pass the limit.
                self._stop = _refusal(self.spent, self.reserved, worst, limit)
                raise BudgetExceeded(self._stop)
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def settle(self, hold: Hold, cost: float) -> None:
        """Give back what :meth:`reserve` held for a request that is over and spend ``cost``."""
        self._holds -= 1
        self.reserved = self.reserved - hold.amount if self._holds else 0.0
        self.spent += cost
        self._wake()

    def charge(self, cost: float) -> None:
        """Spend ``cost`` with no hold (a cost known after the fact)."""
        self.spent += cost

    def hold_batch(self, batch_id: str, worst: float) -> str | None:
        """Hold a submitted batch's worst case (BudgetExceeded when it does not fit); the name of
        the shared budget that keeps the hold until :meth:`SharedBudget.settle_batch`, or None.

        This process's budget ends with the command, before the batch is collected: it spends
        the worst case at once, so the rest of the run stays within ``max_cost`` whatever the
        batch costs."""
        if self._stop is not None:
            raise BudgetExceeded(self._stop)
        if self.max_cost is not None and self.spent + self.reserved + worst > self.max_cost:
            self._stop = _refusal(self.spent, self.reserved, worst, self.max_cost) + f" (batch {batch_id[:12]})"
            raise BudgetExceeded(self._stop)
        self.spent += worst
        return None

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def flush(self) -> None:
        """Wait until every settlement is recorded (nothing to wait for in this process's budget)."""

    def close(self) -> None:
        """Release what the budget holds open (nothing for this process's budget)."""


class SharedBudget(Budget):
    """A named budget in the store, shared by every worker, process and the app (module docs).

    ``max_cost``: the limit to set (the latest command that names one wins; None keeps the
    stored one, or no limit for a new budget). ``hold_lease_s``: how long a hold lives without its
    request settling: past it the hold is charged in full. The store's work runs on one thread
    of its own, in order, so a settlement is always written before a later reservation.
    """

    def __init__(self, ws: Workspace, name: str, max_cost: float | None = None, *, owner: str | None = None,
                 hold_lease_s: float = 180.0) -> None:
        super().__init__(max_cost)
        if not name or len(name) > 128:
            raise ConfigError(f"a budget's name must be 1-128 characters, not {name!r}")
        self.ws = ws
        self.name = name
        self.owner = owner or f"budget-{uuid.uuid4().hex[:12]}"
        self.hold_lease = timedelta(seconds=hold_lease_s)
        self._db = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tqaforge-budget")
        self._conn: Connection | None = None
        self._pending: set[Future[Any]] = set()
        self._db.submit(self._ensure, max_cost).result()

    # -- the interface ---------------------------------------------------------------------
    async def reserve(self, worst: float) -> Hold:
        loop = asyncio.get_running_loop()
        while True:
            if self._stop is not None:
                raise BudgetExceeded(self._stop)
            granted, refusal = await asyncio.wrap_future(self._db.submit(self._try_reserve, worst), loop=loop)
            if granted is not None:
                self.reserved += worst
                self._holds += 1
                return granted
            if refusal is not None:
                self._stop = refusal
                raise BudgetExceeded(refusal)
            # Held by requests in flight, here or in another process: look again when one of
            # ours settles or after a short while (another process's settle sends no signal).
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            try:
                await asyncio.wait_for(asyncio.shield(waiter), timeout=POLL_S)
            except asyncio.TimeoutError:
                pass
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def settle(self, hold: Hold, cost: float) -> None:
        # This process's figures now; the store's on the budget's thread, queued before any later
        # reservation (a waiter woken now asks the store after this settlement is written).
        super().settle(hold, cost)
        self._pending.add(done := self._db.submit(self._settle, hold, cost))
        done.add_done_callback(self._pending.discard)

    def charge(self, cost: float) -> None:
        self.spent += cost
        self._pending.add(done := self._db.submit(self._settle, None, cost))
        done.add_done_callback(self._pending.discard)

    async def flush(self) -> None:
        for f in list(self._pending):
            await asyncio.wrap_future(f)

    def close(self) -> None:
        self._db.submit(self._close_conn)
        self._db.shutdown(wait=True)

    def hold_batch(self, batch_id: str, worst: float) -> str | None:
        """Hold a submitted batch's worst case in the store until it is collected (the hold's id is
        the batch's, so holding it again after a kill is a no-op); BudgetExceeded when it does not
        fit. Returns this budget's name, for the batch's row."""
        refusal = self._db.submit(self._hold_batch, batch_id, worst).result()
        if refusal is not None:
            self._stop = refusal
            raise BudgetExceeded(refusal)
        self.spent += worst  # held, as far as this process can tell, until the batch is collected
        return self.name

    def settle_batch(self, batch_id: str, cost: float) -> None:
        """A collected batch: give back its hold and spend what its replies cost (once: a second
        collect finds no hold and changes nothing)."""
        self._db.submit(self._settle, Hold(0.0, batch_id), cost).result()

    def state(self) -> tuple[float, float, float | None]:
        """(spent, reserved, max_cost) as the store holds them now, for every process together."""
        return self._db.submit(self._read).result()

    # -- on the budget's thread ------------------------------------------------------------
    def _connection(self) -> Connection:
        if self._conn is None:
            self._conn = self.ws.engine.connect()
        return self._conn

    def _close_conn(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _run(self, fn: Any) -> Any:
        conn = self._connection()
        try:
            result = fn(conn)
            conn.commit()
            return result
        except SQLAlchemyError as exc:
            try:
                conn.rollback()
            finally:
                self._close_conn()
            raise StoreError(f"budget {self.name!r}: cannot use the store: {exc}") from None

    def _ensure(self, max_cost: float | None) -> None:
        def go(conn: Connection) -> None:
            if conn.execute(select(_BUDGETS.c.id).where(_BUDGETS.c.id == self.name)).first() is None:
                try:
                    with conn.begin_nested():
                        conn.execute(insert(_BUDGETS).values(id=self.name, max_cost=max_cost, spent=0.0, reserved=0.0,
                                                             created_at=utcnow(), updated_at=utcnow()))
                    return
                except IntegrityError:
                    pass  # made by another process meanwhile
            if max_cost is not None:
                conn.execute(update(_BUDGETS).where(_BUDGETS.c.id == self.name).values(max_cost=max_cost,
                                                                                         updated_at=utcnow()))
        self._run(go)
        self.max_cost = self._read()[2]

    def _read(self) -> tuple[float, float, float | None]:
        def go(conn: Connection) -> tuple[float, float, float | None]:
            row = conn.execute(select(_BUDGETS.c.spent, _BUDGETS.c.reserved, _BUDGETS.c.max_cost)
                               .where(_BUDGETS.c.id == self.name)).one()
            return float(row.spent), float(row.reserved), row.max_cost
        result: tuple[float, float, float | None] = self._run(go)
        return result

    def _try_reserve(self, worst: float) -> tuple[Hold | None, str | None]:
        """(the hold, None) when granted; (None, why) when refused for good; (None, None) to wait."""
        def grant(conn: Connection) -> Hold | None:
            fits = (_BUDGETS.c.max_cost.is_(None)) | (_BUDGETS.c.spent + _BUDGETS.c.reserved + worst <= _BUDGETS.c.max_cost)
            taken = conn.execute(update(_BUDGETS).where(and_(_BUDGETS.c.id == self.name, fits))
                                 .values(reserved=_BUDGETS.c.reserved + worst, updated_at=utcnow()))
            if taken.rowcount != 1:
                return None
            hold = Hold(worst, uuid.uuid4().hex)
            conn.execute(insert(_HOLDS).values(id=hold.id, budget_id=self.name, amount=worst, owner=self.owner,
                                               expires_at=utcnow() + self.hold_lease))
            return hold

        hold = self._run(grant)
        if hold is not None:
            return hold, None
        if self._run(self._charge_lapsed):
            hold = self._run(grant)
            if hold is not None:
                return hold, None
        spent, reserved, limit = self._read()
        if limit is not None and spent + worst > limit:
            return None, _refusal(spent, reserved, worst, limit)
        if limit is not None and reserved <= 1e-12:
            return None, _refusal(spent, reserved, worst, limit)
        return None, None

    def _hold_batch(self, batch_id: str, worst: float) -> str | None:
        """None when the batch's hold is in the store (now or from before); else why not."""
        def grant(conn: Connection) -> bool:
            if conn.execute(select(_HOLDS.c.id).where(_HOLDS.c.id == batch_id)).first() is not None:
                return True
            fits = (_BUDGETS.c.max_cost.is_(None)) | (_BUDGETS.c.spent + _BUDGETS.c.reserved + worst <= _BUDGETS.c.max_cost)
            if conn.execute(update(_BUDGETS).where(and_(_BUDGETS.c.id == self.name, fits))
                            .values(reserved=_BUDGETS.c.reserved + worst, updated_at=utcnow())).rowcount != 1:
                return False
            conn.execute(insert(_HOLDS).values(id=batch_id, budget_id=self.name, amount=worst, owner="batch",
                                               expires_at=utcnow() + BATCH_HOLD))
            return True

        if self._run(grant) or (self._run(self._charge_lapsed) and self._run(grant)):
            return None
        spent, reserved, limit = self._read()
        return _refusal(spent, reserved, worst, limit or 0.0) + f" (batch {batch_id[:12]})"

    def _charge_lapsed(self, conn: Connection) -> int:
        """Charge in full every hold of this budget whose lease lapsed (its worker is gone)."""
        lapsed = conn.execute(select(_HOLDS.c.id, _HOLDS.c.amount).where(
            _HOLDS.c.budget_id == self.name, _HOLDS.c.expires_at < utcnow())).all()
        charged = 0
        for row in lapsed:
            if conn.execute(delete(_HOLDS).where(_HOLDS.c.id == row.id)).rowcount == 1:
                conn.execute(update(_BUDGETS).where(_BUDGETS.c.id == self.name).values(
                    reserved=_BUDGETS.c.reserved - row.amount, spent=_BUDGETS.c.spent + row.amount))
                charged += 1
        return charged

    def _settle(self, hold: Hold | None, cost: float) -> None:
        def go(conn: Connection) -> None:
            held = 0.0
            if hold is not None:
                row = conn.execute(select(_HOLDS.c.amount).where(_HOLDS.c.id == hold.id)).first()
                if row is None or conn.execute(delete(_HOLDS).where(_HOLDS.c.id == hold.id)).rowcount != 1:
                    return  # lapsed and charged in full already: nothing more to give back or spend
                held = float(row.amount)  # as the store holds it (a batch's hold outlives its process)
            conn.execute(update(_BUDGETS).where(_BUDGETS.c.id == self.name).values(
                reserved=_BUDGETS.c.reserved - held, spent=_BUDGETS.c.spent + cost, updated_at=utcnow()))
        self._run(go)


def open_budget(ws: Workspace, name: str | None, max_cost: float | None, *,
                hold_lease_s: float = 180.0) -> Budget | None:
    """The budget a command's model calls share: the store's budget ``name`` (its limit set to
    ``max_cost`` when given), else this process's own ``max_cost``, else None (no limit; each
    gateway only counts). Close it with ``close()`` when the command is done."""
    if name is not None:
        return SharedBudget(ws, name, max_cost, hold_lease_s=hold_lease_s)
    return Budget(max_cost) if max_cost is not None else None

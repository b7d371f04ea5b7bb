"""The hard budget: what has been spent, what the requests in flight may still cost, and the
refusal of a paid request that could pass ``max_cost``, before it is sent.

One :class:`Budget` may serve several gateways (``evaluate --model`` and its judge share the
command's ``--max-cost``); a gateway makes its own when given none. The gateway computes each
request's worst case (:class:`~tqaforge.llm.replies.UsageBounds`: its prompt as sent, a reply of
its ``max_tokens``, which it always sends) and:

- ``held = await budget.reserve(worst)`` before sending: when spent + held + worst would pass
  the limit it waits for the requests in flight to settle, and refuses (:class:`BudgetExceeded`)
  once spent + worst alone would pass it. A refusal sticks: every later request is refused too,
  so a run stops cleanly with its finished calls stored;
- ``budget.release(held)`` when the attempt is over, and ``budget.charge(cost)`` with what it
  cost, which the gateway clamps to that worst case, whatever the endpoint claims.

So spent never passes ``max_cost``: every request sent was reserved within it first, and none
is charged more than it reserved.
"""

from __future__ import annotations

import asyncio
import math

from tqaforge.errors import BudgetExceeded, ConfigError

__all__ = ["Budget"]


class Budget:
    """USD spent and held against ``max_cost`` (None: no limit, only counted)."""

    def __init__(self, max_cost: float | None) -> None:
        if max_cost is not None and not (math.isfinite(max_cost) and max_cost > 0):
            # NaN compares false with everything and inf passes every check: either is no budget.
            raise ConfigError(f"the budget (--max-cost or [llm] max_cost) must be a positive finite number, not {max_cost!r}",
                              hint="give --max-cost a positive amount in USD, e.g. --max-cost 2.50 (leave it out for no budget)")
        self.max_cost = max_cost
        self.spent = 0.0  # USD charged (cached calls cost 0)
        self.reserved = 0.0  # worst-case cost of the requests in flight
        self._holds = 0  # requests in flight (reserved may keep a rounding residue when it is 0)
        self._stop: str | None = None  # why the first request was refused
        self._waiters: list[asyncio.Future[None]] = []

    async def reserve(self, worst: float) -> float:
        """Hold ``worst`` USD for a request about to be sent and return it, waiting while the
        requests in flight hold what it needs; BudgetExceeded when it could pass ``max_cost``."""
        while True:
            if self._stop is not None:
                raise BudgetExceeded(self._stop)
            limit = self.max_cost
            if limit is None or self.spent + self.reserved + worst <= limit:
                self.reserved += worst
                self._holds += 1
                return worst
            if self._holds == 0 or self.spent + worst > limit:
                # Whatever the requests in flight end up costing, this one could pass the limit.
                self._stop = (
                    f"budget: ${self.spent:.4f} spent + ${self.reserved:.4f} in flight + up to ${worst:.4f} "
                    f"for the next call would pass max_cost ${limit:.4f}; stopped before sending"
                )
                raise BudgetExceeded(self._stop)
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def release(self, held: float) -> None:
        """Give back what :meth:`reserve` held for a request that is over (answered or not)."""
        self._holds -= 1
        self.reserved = self.reserved - held if self._holds else 0.0
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def charge(self, cost: float) -> None:
        """Add what a reply cost to what is spent."""
        self.spent += cost

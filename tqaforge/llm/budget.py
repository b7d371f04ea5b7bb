"""The hard budget of one gateway: what it has spent, what the requests in flight may still
cost, and the refusal of a paid request that could pass ``max_cost``.

Before each paid request its worst case is reserved (estimated prompt tokens x input price +
``max_tokens``, or ``default_max_tokens`` when the call sets none, x output price); after the
reply the reservation is replaced by the real cost. Once a request is refused, every later one
is refused too, so a run stops cleanly with its finished calls stored. A model with no price
costs 0 and is never stopped.
"""

from __future__ import annotations

from tqaforge.errors import BudgetExceeded
from tqaforge.llm.settings import LLMSettings

__all__ = ["Budget"]


class Budget:
    """USD spent and reserved against ``settings.max_cost`` (None: no limit)."""

    def __init__(self, settings: LLMSettings) -> None:
        self.settings = settings
        self.spent = 0.0  # USD paid (cached calls cost 0)
        self.reserved = 0.0  # worst-case cost of the requests in flight
        self._stop: str | None = None  # why the first request was refused

    def worst(self, est_prompt: int, max_tokens: int | None) -> float:
        """The most a request can honestly cost: its estimated prompt and a full-length reply."""
        price = self.settings.price
        if price is None:
            return 0.0
        return price.cost(est_prompt, max_tokens if max_tokens is not None else self.settings.default_max_tokens)

    def reserve(self, est_prompt: int, max_tokens: int | None) -> float:
        """Reserve the worst-case cost of the next request and return it, or raise BudgetExceeded."""
        price, limit = self.settings.price, self.settings.max_cost
        if price is None or limit is None:
            return 0.0
        if self._stop is not None:
            raise BudgetExceeded(self._stop)
        worst = self.worst(est_prompt, max_tokens)
        if self.spent + self.reserved + worst > limit:
            self._stop = (
                f"budget: ${self.spent:.4f} spent + ${self.reserved:.4f} in flight + up to ${worst:.4f} "
                f"for the next call would pass max_cost ${limit:.4f}; stopped before sending"
            )
            raise BudgetExceeded(self._stop)
        self.reserved += worst
        return worst

    def release(self, reserved: float) -> None:
        """Give back what :meth:`reserve` held for a request that is over (answered or not)."""
        self.reserved -= reserved

    def charge(self, cost: float) -> None:
        """Add what a reply cost to what is spent."""
        self.spent += cost

    def cost(self, usage: tuple[int, int] | None, worst: float) -> float:
        """What a reply cost: its (prompt, completion) usage at the model's price, or ``worst``
        when the reply carried no usage to go by."""
        price = self.settings.price
        if price is None:
            return 0.0
        return worst if usage is None else price.cost(*usage)

"""How fast the gateway may go: token buckets for requests and tokens per minute, and how long
to wait before a retry (exponential backoff with jitter, or what ``Retry-After`` says)."""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Mapping

__all__ = ["RETRYABLE_STATUS", "RETRY_AFTER_CAP_S", "TokenBucket", "backoff_delay", "retry_after"]

RETRY_AFTER_CAP_S = 300.0  # a broken Retry-After header must not park a run for hours
RETRYABLE_STATUS = frozenset({408, 409, 429})  # and every 5xx


class TokenBucket:
    """``per_minute`` units a minute, with about one second's worth (at least one unit) of burst.

    The level may go negative: a request bigger than the burst waits for the bucket to be full,
    then leaves a debt that later requests wait out. ``refund`` corrects an estimate afterwards.
    Waiters are served first come, first served.
    """

    def __init__(self, per_minute: float) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate)
        self.level = self.capacity
        self.updated = time.monotonic()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = time.monotonic()
        self.level = min(self.capacity, self.level + (now - self.updated) * self.rate)
        self.updated = now

    async def acquire(self, amount: float) -> None:
        """Take ``amount`` units, waiting until the bucket holds them (or is full)."""
        async with self._lock:
            self._refill()
            need = min(amount, self.capacity)
            if self.level < need:
                await asyncio.sleep((need - self.level) / self.rate)
                self._refill()
            self.level -= amount

    def refund(self, amount: float) -> None:
        """Give back ``amount`` units (negative: take more) once the real figure is known."""
        self._refill()
        self.level = min(self.capacity, self.level + amount)


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        when = email.utils.parsedate_to_datetime(value) if value else None
        if when is None:
            return None
        return max(0.0, when.timestamp() - time.time())


def backoff_delay(
    retry: int, retry_after_s: float | None, *, first_s: float, max_s: float, jitter: random.Random
) -> float:
    """Seconds to wait before retry number ``retry`` (1, 2, ...).

    The endpoint's ``Retry-After`` when it sent one (capped, plus up to 10% so that the calls
    told to wait the same time do not come back at once); else ``first_s`` doubling each retry up
    to ``max_s``, times a random 0.5-1.0.
    """
    if retry_after_s is not None:
        return min(max(retry_after_s, 0.0), RETRY_AFTER_CAP_S) * jitter.uniform(1.0, 1.1)
    base = min(max_s, first_s * 2 ** (retry - 1))
    return base * jitter.uniform(0.5, 1.0)

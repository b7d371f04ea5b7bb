"""The ordered, resumable, budgeted runner: many jobs through one gateway, one engine for every
stage that calls a model many times (question rounds, question typing, answer agents)::

    jobs = [Job(q.id, functools.partial(ask, question=q)) for q in questions]  # ask(gateway, question=q)
    outcome = await run_ordered(gateway, jobs, window=32, on_result=store, on_progress=show)
    if outcome.stopped:
        print(outcome.stop_reason, outcome.stopped)

- **Concurrent.** Up to ``window`` jobs run at once, counted from the oldest one not yet
  finished (the gateway's ``concurrency`` and rate limits bound the requests further).
- **In order.** ``on_result(job, result)`` is called in submission order, as soon as a job and
  all jobs before it are done, so decisions that depend on earlier results (deduplication) see
  the same results whatever the timing. It returns None (the result is finished) or an awaitable
  that finishes it: follow-up calls (a verification agent), then the commit. The runner awaits
  those in submission order too, while later results keep coming in; a stage whose results need
  follow-up calls commits in the awaitable, so that no commit ever follows a failure.
- **Budgeted.** An :class:`~tqaforge.errors.LLMError` that escapes a job or its follow-up (the
  budget would be passed, the key is refused, impossible usage, the endpoint failed after its
  retries) ends the run cleanly: what was finished before it stays finished, nothing after it is
  committed, the jobs in flight are cancelled unpaid, and :class:`RunOutcome` says what stopped it
  (:class:`StopReason`). A job that can live with an invalid reply catches
  :class:`~tqaforge.errors.InvalidReply` itself. Anything else (a bug, Ctrl-C) cancels every job
  and propagates.
- **Accounted.** When it returns, every paid call is in the ledger and in ``gateway.spent``,
  also those of jobs cancelled after their reply came (a run stopped meanwhile).
- **Resumable.** Every call is an LLMCall record keyed by its request, so a re-run of the same
  jobs is answered from the store up to where the last run stopped, and pays only for the rest.
- **Progress.** ``on_progress(RunProgress)`` after every model call (cached or paid) and every
  finished result.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from tqaforge.errors import BudgetExceeded, EndpointAuthError, EndpointUnreachable, ImpossibleUsage, LLMError
from tqaforge.llm.gateway import Gateway

__all__ = ["Job", "RunOutcome", "RunProgress", "StopReason", "run_ordered", "settle"]

T = TypeVar("T")


class StopReason(str, enum.Enum):
    """What stopped a run early; each asks for a different remedy."""

    BUDGET = "budget"  # the next call could pass max_cost: a larger --max-cost resumes
    AUTH = "auth"  # no API key, or the endpoint refused it (401/403)
    IMPOSSIBLE_USAGE = "impossible_usage"  # the endpoint reported usage its request cannot have
    ENDPOINT = "endpoint"  # the endpoint failed after the retries (down, 5xx, 4xx, malformed replies)
    UNREACHABLE = "unreachable"  # nothing listens at the endpoint's address, or its host does not exist

    @classmethod
    def of(cls, exc: LLMError) -> "StopReason":
        """The reason an LLMError stands for."""
        if isinstance(exc, BudgetExceeded):
            return cls.BUDGET
        if isinstance(exc, EndpointAuthError):
            return cls.AUTH
        if isinstance(exc, ImpossibleUsage):
            return cls.IMPOSSIBLE_USAGE
        if isinstance(exc, EndpointUnreachable):
            return cls.UNREACHABLE
        return cls.ENDPOINT


@dataclass(frozen=True)
class Job(Generic[T]):
    """One unit of work: ``key`` names it (a step id, a question id), ``call`` makes its model
    calls through the gateway it is given and returns the result."""

    key: str
    call: Callable[[Gateway], Coroutine[Any, Any, T]]


@dataclass(frozen=True)
class RunProgress:
    """How far a run is: finished results of all, and the gateway's running cost and calls."""

    done: int
    total: int
    cost: float
    paid_calls: int
    cached_calls: int


@dataclass
class RunOutcome:
    """What :func:`run_ordered` did: ``done`` of ``total`` results finished in order; when an
    LLMError ended the run, ``error`` is it, ``stopped`` its message and ``stop_reason`` its kind."""

    total: int
    done: int = 0
    error: LLMError | None = None

    @property
    def stopped(self) -> str | None:
        """The message of what stopped the run early (with its hint), None when nothing did."""
        return None if self.error is None else str(self.error)

    @property
    def stop_reason(self) -> StopReason | None:
        """What kind of stop ``stopped`` is, None when the run was not stopped."""
        return None if self.error is None else StopReason.of(self.error)


OnResult = Callable[[Job[T], T], Awaitable[None] | None]


async def run_ordered(
    gateway: Gateway,
    jobs: Sequence[Job[T]],
    *,
    window: int,
    on_result: OnResult[T],
    on_progress: Callable[[RunProgress], None] | None = None,
) -> RunOutcome:
    """Run ``jobs`` concurrently and finish their results in submission order (module docs)."""
    if window < 1:
        raise ValueError(f"window must be at least 1, not {window}")
    outcome = RunOutcome(total=len(jobs))
    running: dict[int, asyncio.Task[T]] = {}
    finishing: asyncio.Queue[Awaitable[None] | None] = asyncio.Queue(maxsize=window)
    launched = 0

    def report(_completion: Any = None) -> None:
        if on_progress is not None:
            on_progress(RunProgress(outcome.done, outcome.total, gateway.spent, gateway.paid_calls,
                                    gateway.cached_calls))

    def stop(exc: LLMError) -> None:
        if outcome.error is None:
            outcome.error = exc

    def launch_more(upto: int) -> None:
        nonlocal launched
        while launched < min(upto, len(jobs)) and outcome.error is None:
            running[launched] = asyncio.create_task(jobs[launched].call(gateway))
            launched += 1

    async def collect() -> None:
        try:
            for i in range(len(jobs)):
                launch_more(i + window)
                if outcome.error is not None or i not in running:
                    break
                try:
                    result = await running.pop(i)
                except LLMError as exc:
                    stop(exc)
                    break
                if outcome.error is not None:
                    break
                await finishing.put(_done() if (rest := on_result(jobs[i], result)) is None else rest)
        finally:
            await finishing.put(None)

    async def finish() -> None:
        while (rest := await finishing.get()) is not None:
            if outcome.error is not None:
                _discard(rest)  # nothing after the first failure is finished (submission order)
                continue
            try:
                await rest
            except LLMError as exc:
                stop(exc)
                continue
            outcome.done += 1
            report()

    stages = [asyncio.create_task(collect()), asyncio.create_task(finish())]
    with gateway.watching(report):
        try:
            await asyncio.gather(*stages)
        finally:
            # An error or Ctrl-C in one stage: stop the other and every job not yet answered
            # (its request is dropped unpaid; a re-run sends it again).
            await settle([*stages, *running.values()])
            while not finishing.empty():
                if (rest := finishing.get_nowait()) is not None:
                    _discard(rest)
            # A job cancelled after its reply came still has it recorded: wait for that, so the
            # gateway's spent is what the ledger holds when the run returns.
            await gateway.settled()
    return outcome


async def settle(tasks: Any) -> None:
    """Cancel tasks and wait for them, so none is left running or with an unread exception."""
    tasks = list(tasks)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _done() -> None:
    """The follow-up of a result that needs none."""


def _discard(rest: Awaitable[None]) -> None:
    """Drop a follow-up that will never be awaited, without a "never awaited" warning."""
    if inspect.iscoroutine(rest):
        rest.close()
    elif isinstance(rest, asyncio.Future):
        rest.cancel()

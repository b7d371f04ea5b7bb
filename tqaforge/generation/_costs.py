"""How a run's model costs and stops read, in a summary and in a progress note; shared by question
rounds, typing and answer annotation."""

from __future__ import annotations

from typing import Any, Protocol

from tqaforge.errors import LLMError
from tqaforge.llm.runner import StopReason

_REMEDY = {
    StopReason.BUDGET: "run the command again with a larger --max-cost to resume",
    StopReason.AUTH: "set the API key (OPENAI_API_KEY or the variable named by [llm] api_key_env) and run the "
                     "command again to resume",
    StopReason.IMPOSSIBLE_USAGE: "the endpoint's token counts cannot be trusted: check OPENAI_BASE_URL / [llm] "
                                 "base_url before running the command again",
    StopReason.ENDPOINT: "fix the problem above (is the endpoint up, is --model right?) and run the command again "
                         "to resume",
}


def stop_advice(reason: StopReason, finished: str) -> str:
    """What to do after a run stopped for ``reason``: ``finished <things> are stored; <remedy>``."""
    return f"finished {finished} are stored; {_REMEDY[reason]}"


def cost_line(cost: float, paid_calls: int, cached_calls: int) -> str:
    """The summary line: ``cost $0.0123: 4 paid calls, 2 from the cache``."""
    return f"cost ${cost:.4f}: {paid_calls} paid calls, {cached_calls} from the cache"


def cost_note(cost: float, paid_calls: int, cached_calls: int, *more: str) -> str:
    """The progress note: ``$0.0123 (4 paid, 2 cached, 7 new questions)`` (``more`` adds the last parts)."""
    return f"${cost:.4f} (" + ", ".join((f"{paid_calls} paid", f"{cached_calls} cached", *more)) + ")"


class RunTotals(Protocol):
    """What a run's summary holds about its model calls and its stop (question rounds, answers)."""

    cost: float
    paid_calls: int
    cached_calls: int
    stopped: str | None
    stop_reason: StopReason | None


def sync_costs(summary: RunTotals, gateway: Any) -> None:
    """Copy the gateway's running cost and call counts into ``summary`` (no-op before it exists)."""
    if gateway is not None:
        summary.cost = gateway.spent
        summary.paid_calls = gateway.paid_calls
        summary.cached_calls = gateway.cached_calls


def record_stop(summary: RunTotals, exc: LLMError) -> None:
    """Note the first error that stopped a run: its message and its kind."""
    if summary.stopped is None:
        summary.stopped = str(exc)
        summary.stop_reason = StopReason.of(exc)

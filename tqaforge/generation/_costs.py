"""How a run's model costs read, in a summary and in a progress note; shared by question rounds and typing."""

from __future__ import annotations


def cost_line(cost: float, paid_calls: int, cached_calls: int) -> str:
    """The summary line: ``cost $0.0123: 4 paid calls, 2 from the cache``."""
    return f"cost ${cost:.4f}: {paid_calls} paid calls, {cached_calls} from the cache"


def cost_note(cost: float, paid_calls: int, cached_calls: int, *more: str) -> str:
    """The progress note: ``$0.0123 (4 paid, 2 cached, 7 new questions)`` (``more`` adds the last parts)."""
    return f"${cost:.4f} (" + ", ".join((f"{paid_calls} paid", f"{cached_calls} cached", *more)) + ")"

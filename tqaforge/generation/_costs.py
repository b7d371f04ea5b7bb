"""What to do after a run stopped, shared by question rounds, typing and answer annotation (their
costs and stops are the step runner's CallSummary now)."""

from __future__ import annotations

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

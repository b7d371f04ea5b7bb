"""What one model call is: its identity (:func:`request_params`, :func:`request_id`, the seed
sent for a sample) and its answer (:class:`Completion`).

The id is a hash of everything that makes the request what it is, so the LLMCall row it keys is
the cache: the same request is never paid twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tqaforge import ids
from tqaforge.ids import content_hash

__all__ = ["BatchRequest", "Completion", "request_id", "request_params", "wire_seed"]


@dataclass(frozen=True)
class Completion:
    """One answered request. ``cost`` is what this call paid now (0 when ``cached``), so the
    costs of all completions of a gateway add up to its ``spent``."""

    call_id: str  # LLMCall.id
    text: str
    cached: bool  # True when it came from the store (or an identical request in flight)
    cost: float
    prompt_tokens: int
    completion_tokens: int


def request_params(
    temperature: float, max_tokens: int | None, response_format: dict[str, Any] | None
) -> dict[str, Any]:
    """The request parameters that are part of a call's identity, normalised (0 == 0.0)."""
    params: dict[str, Any] = {"temperature": float(temperature)}
    if max_tokens is not None:
        params["max_tokens"] = int(max_tokens)
    if response_format is not None:
        params["response_format"] = response_format
    return params


def request_id(
    model: str, messages: list[dict[str, str]], params: Mapping[str, Any], seed: int | None, sample: int
) -> str:
    """The LLMCall id: a hash of everything that makes the request what it is (:func:`tqaforge.ids.request_id`)."""
    return ids.request_id(model, messages, params, seed, sample)


def wire_seed(seed: int | None, sample: int) -> int | None:
    """The seed sent for sample ``sample``: the caller's for sample 0, a derived one after."""
    if sample == 0:
        return seed
    return int(content_hash({"seed": seed, "sample": sample})[:8], 16) & 0x7FFFFFFF


@dataclass(frozen=True)
class BatchRequest:
    """A request the gateway did not send but put aside for a batch (the Batch API or an offline
    batch file): what the batch's JSONL line sends and what the LLMCall row of its reply keeps.

    ``body`` is the chat/completions body exactly as the online transport would send it (model,
    messages, temperature, ``max_tokens`` always, the wire seed, response_format); ``params`` the
    same parameters as the LLMCall row stores them; ``worst_prompt`` and ``max_tokens`` bound what
    its reply may cost (:class:`~tqaforge.llm.replies.UsageBounds`).
    """

    call_id: str  # LLMCall.id, the batch line's custom_id
    model: str
    body: dict[str, Any]
    messages: list[dict[str, str]]
    params: dict[str, Any]
    seed: int | None
    sample: int
    purpose: str
    worst_prompt: int
    max_tokens: int

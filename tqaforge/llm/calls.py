"""What one model call is: its identity (:func:`request_params`, :func:`request_id`, the seed
sent for a sample) and its answer (:class:`Completion`).

The id is a hash of everything that makes the request what it is, so the LLMCall row it keys is
the cache: the same request is never paid twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable

from tqaforge import ids
from tqaforge.ids import content_hash

__all__ = ["BatchRequest", "Completion", "Deferred", "PutAside", "request_id", "request_params", "wire_params",
           "wire_seed"]


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


def wire_params(params: Mapping[str, Any], seed: int | None, sample: int, default_max_tokens: int) -> tuple[dict[str, Any], int]:
    """The parameters as sent, and the ``max_tokens`` sent: the wire seed of the sample, and
    ``max_tokens`` always (the call's, else ``default_max_tokens``: without it a reply has no
    worst case; it is not part of the call's identity)."""
    wire = dict(params)
    sent_seed = wire_seed(seed, sample)
    if sent_seed is not None:
        wire["seed"] = sent_seed
    max_tokens = params.get("max_tokens")
    wire["max_tokens"] = cap = int(max_tokens) if max_tokens is not None else default_max_tokens
    return wire, cap


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

    @classmethod
    def of(cls, model: str, messages: list[dict[str, str]], params: Mapping[str, Any], seed: int | None, sample: int,
           purpose: str, default_max_tokens: int) -> "BatchRequest":
        """The request the online transport would send for this call (same id, body and stored
        parameters as ``Gateway.complete``), put aside for a batch."""
        from tqaforge.llm.replies import UsageBounds  # replies needs the HTTP library; calls stays light

        wire, cap = wire_params(params, seed, sample, default_max_tokens)
        return cls(request_id(model, messages, params, seed, sample), model, {"model": model, "messages": messages, **wire},
                   messages, wire, seed, sample, purpose, UsageBounds.of(messages, cap).worst_prompt, cap)


class Deferred(Exception):
    """A request that was not sent now: put aside for a batch, or already waiting in an open one.

    Not an LLMError: it stops nothing. The step runner leaves the piece that made it for a later
    pass (after the batch is collected, its reply is in the store).
    """

    def __init__(self, call_id: str, batch_id: str | None = None) -> None:
        where = f"waiting in batch {batch_id}" if batch_id else "put aside for the next batch"
        super().__init__(f"request {call_id}: {where}")
        self.call_id = call_id
        self.batch_id = batch_id


class PutAside:
    """Where a gateway's unsent requests go instead of out (see ``Gateway.put_aside``).

    ``waiting``: call ids in batches submitted and not yet collected (call id -> batch id): such a
    request is never sent again, online or in another batch, until its batch is collected or
    ended. ``collect``: True when requests not in the store are put aside for a batch (the
    batch and offline transports), False online (only the waiting ones are held back).
    """

    def __init__(self, waiting: dict[str, str], *, collect: bool) -> None:
        self.waiting = waiting
        self.collect = collect
        self.requests: dict[str, BatchRequest] = {}

    def offer(self, call_id: str, make: Callable[[], BatchRequest]) -> Deferred | None:
        """The Deferred to raise for this request, or None to send it now."""
        if call_id in self.waiting:
            return Deferred(call_id, self.waiting[call_id])
        if not self.collect:
            return None
        if call_id not in self.requests:
            self.requests[call_id] = make()
        return Deferred(call_id)

"""What comes back from the endpoint, checked before anything is believed.

- **Size caps**: every response body is read behind a byte limit (:func:`hard_cap_hook`,
  :class:`Meter`); the limit of one request is :func:`reply_limit` of its ``max_tokens``.
- **Usage checks**: :func:`usable_reply` takes a chat completion's text and token counts, and
  raises :class:`Impossible` for usage its request cannot have produced (:class:`UsageBounds`),
  :class:`Malformed` for a reply with no usable text.
- **JSON replies**: :func:`parse_json_reply` finds the JSON in a reply; :func:`repair_request`
  is the follow-up that shows the model its invalid reply and the problem, once.
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx2  # the HTTP library of the openai client (openai >= 3); its response hook caps bodies

from tqaforge.tables.readers.jsonio import loads

__all__ = [
    "KEPT_BODY_CHARS", "METER", "Impossible", "Malformed", "Meter", "Oversize", "UsageBounds",
    "hard_cap_hook", "map_strings", "parse_json_reply", "repair_request", "reply_limit", "short",
    "usable_reply", "usage_of",
]

# A reply body cannot honestly be larger than this many bytes per token of max_tokens (a token
# is a few characters; JSON escapes a non-ASCII character as \uXXXX, 6 bytes) plus the JSON
# envelope around the text (ids, usage, finish reason).
REPLY_BYTES_PER_TOKEN = 32
REPLY_ENVELOPE_BYTES = 64 * 1024
KEPT_BODY_CHARS = 2000  # how much of an unusable reply body an error record keeps
# Prompt tokens cannot outnumber the prompt's UTF-8 bytes (byte-level BPE: a token is at least
# one byte), plus the chat template per message and a server-side system prompt.
PROMPT_TOKENS_PER_MESSAGE_SLACK = 64
PROMPT_TOKENS_SLACK = 8192
# What a prompt as sent can cost at most: a token per byte, plus the chat template's tokens around
# each message (OpenAI's: 3-4, Llama's: 5) and once per request (the reply's start, a template's
# default system prompt: Llama 3's dated one is about 30). A claim between this and the slack
# above is recorded as claimed but charged at this.
TEMPLATE_TOKENS_PER_MESSAGE = 8
TEMPLATE_TOKENS = 128


_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n(.*?)\n?[ \t]*```", re.DOTALL)


def parse_json_reply(text: str) -> Any:
    """The JSON value in a reply: the whole text, or the first ``` / ```json fenced block.

    Raises ValueError (json.JSONDecodeError) naming the problem.
    """
    stripped = text.strip()
    try:
        return _loads(stripped)
    except ValueError:
        match = _FENCE.search(stripped)
        if match is None:
            raise
        return _loads(match.group(1))


def _loads(text: str) -> Any:
    # The one bounded reader: a hostile reply such as "[[[[..." 100,000 deep is a ValueError
    # (nested too deeply) that the repair path handles, never a RecursionError that ends the run.
    return loads(text)


def repair_request(messages: list[dict[str, str]], reply: str, problem: str) -> list[dict[str, str]]:
    """The messages that ask again after an unusable JSON reply: the model sees its own reply
    and what is wrong with it, and is asked for only the corrected JSON."""
    return [
        *messages,
        {"role": "assistant", "content": reply},
        {"role": "user", "content": (
            f"That reply could not be used: {problem}. "
            "Reply again with only the corrected JSON, nothing else."
        )},
    ]


class Malformed(Exception):
    """A 200 reply we cannot use (no JSON, no choices, no content)."""

    def __init__(self, message: str, prompt_tokens: int = 0, completion_tokens: int = 0) -> None:
        super().__init__(message)
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens


class Impossible(Exception):
    """A reply whose usage figures its request cannot have produced; the message is the claim."""




class Oversize(Exception):
    """A reply body cut off at its byte limit (or refused, e.g. compressed)."""


@dataclass
class Meter:
    """The byte limit of one response body, and what the response hook saw of it.

    Set per attempt through :data:`METER` (the hook runs in the task that sends the request).
    """

    limit: int
    received: int = 0
    head: bytearray = field(default_factory=bytearray)  # the first KEPT_BODY_CHARS bytes
    problem: str | None = None  # set when the body was cut off or refused

    def keep(self, chunk: bytes) -> None:
        """Keep the start of the body (for the error record), up to KEPT_BODY_CHARS bytes."""
        if len(self.head) < KEPT_BODY_CHARS:
            self.head += chunk[: KEPT_BODY_CHARS - len(self.head)]

    @property
    def head_text(self) -> str:
        """The kept start of the body as text."""
        return bytes(self.head).decode("utf-8", "replace")


METER: contextvars.ContextVar[Meter | None] = contextvars.ContextVar("tqaforge_llm_meter", default=None)


class CappedStream(httpx2.AsyncByteStream):
    """A response body that ends at its meter's limit; what lies beyond is never read."""

    def __init__(self, inner: httpx2.AsyncByteStream, meter: Meter) -> None:
        self._inner = inner
        self._meter = meter

    async def __aiter__(self) -> Any:
        meter = self._meter
        async for chunk in self._inner:
            room = meter.limit - meter.received
            if len(chunk) > room:
                meter.received += room
                meter.keep(chunk[:room])
                meter.problem = f"reply too large: more than {meter.limit:,} bytes"
                if room:
                    yield chunk[:room]
                return  # the connection is closed with the response, not read to the end
            meter.received += len(chunk)
            meter.keep(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


def hard_cap_hook(hard_limit: int) -> Callable[[httpx2.Response], Awaitable[None]]:
    """The httpx response hook that puts every body behind its byte limit before it is read."""

    async def cap(response: httpx2.Response) -> None:
        meter = METER.get() or Meter(hard_limit)
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            # We ask for identity: a compressed body could inflate far past any byte limit.
            meter.limit = 0
            meter.problem = f"the endpoint compressed its reply (Content-Encoding: {short(encoding, 40)}) although asked not to"
        response.stream = CappedStream(response.stream, meter)  # type: ignore[arg-type]

    return cap


def reply_limit(max_tokens: int | None, default_max_tokens: int, max_reply_bytes: int) -> int:
    """The most bytes an honest reply to a request with this ``max_tokens`` can have (a call
    that sets none is taken to allow ``default_max_tokens``), never more than ``max_reply_bytes``."""
    tokens = max_tokens if max_tokens is not None else default_max_tokens
    return min(max_reply_bytes, REPLY_BYTES_PER_TOKEN * tokens + REPLY_ENVELOPE_BYTES)


@dataclass(frozen=True)
class UsageBounds:
    """What a request's reply can honestly report (beyond it: :class:`Impossible`), and the most
    its usage can be charged (:meth:`clamp`): the request's own worst case."""

    max_prompt: int  # prompt tokens beyond this are a lie (a server-side system prompt fits below)
    max_completion: int  # the request's max_tokens: the gateway always sends one
    worst_prompt: int  # the most prompt tokens what was sent can cost: its bytes and the chat template

    @classmethod
    def of(cls, messages: list[dict[str, str]], max_tokens: int) -> "UsageBounds":
        """The bounds of a request with these messages and this ``max_tokens``."""
        size = sum(len(str(m.get("content") or "").encode("utf-8")) for m in messages)
        slack = PROMPT_TOKENS_PER_MESSAGE_SLACK * len(messages) + PROMPT_TOKENS_SLACK
        sent = size + TEMPLATE_TOKENS_PER_MESSAGE * len(messages) + TEMPLATE_TOKENS
        return cls(size + slack, max_tokens, sent)

    def clamp(self, usage: tuple[int, int]) -> tuple[int, int]:
        """(prompt, completion) tokens as charged: as claimed, but never more than the request's
        worst case (its prompt as sent, ``max_tokens`` of reply)."""
        return min(usage[0], self.worst_prompt), min(usage[1], self.max_completion)


def usage_of(reply: Any) -> Any:
    """The ``usage`` a reply claims, whatever its shape (None when it has none)."""
    return reply.get("usage") if isinstance(reply, dict) else None


def usable_reply(reply: Any, bounds: UsageBounds) -> tuple[str, tuple[int, int] | None]:
    """The text and (prompt, completion) tokens of a chat completion (parsed JSON); the tokens
    are None when the reply reports no usage. Impossible for usage the request cannot have
    produced, Malformed for a reply with no usable text."""
    if not isinstance(reply, dict):
        raise Malformed(f"a JSON {type(reply).__name__}, not an object")
    usage = checked_usage(reply.get("usage"), bounds)
    prompt_tokens, completion_tokens = usage or (0, 0)
    choices = reply.get("choices")
    if not isinstance(choices, list) or not choices:
        raise Malformed("no choices", prompt_tokens, completion_tokens)
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        refusal = message.get("refusal") if isinstance(message, dict) else None
        why = f"refused: {short(str(refusal))}" if refusal else "no content"
        raise Malformed(why, prompt_tokens, completion_tokens)
    return content, usage


def checked_usage(usage: Any, bounds: UsageBounds) -> tuple[int, int] | None:
    """(prompt, completion) tokens of a reply's usage, None when it has none; Impossible
    names the claim when the numbers are not counts or exceed what the request allows."""
    if usage is None:
        return None
    if not isinstance(usage, dict):
        raise Impossible(f"usage is {short(repr(usage), 80)}, not an object of token counts")
    if usage.get("prompt_tokens") is None and usage.get("completion_tokens") is None:
        return None
    counts = []
    for key in ("prompt_tokens", "completion_tokens"):
        value = usage.get(key, 0)
        if value is None:
            value = 0
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # 12.0 is a count some servers write
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise Impossible(f"{key} = {short(repr(value), 80)}, not a token count")
        counts.append(value)
    prompt, completion = counts
    if completion > bounds.max_completion:
        raise Impossible(
            f"completion_tokens = {completion:,} for a request with max_tokens {bounds.max_completion:,}"
        )
    if prompt > bounds.max_prompt:
        raise Impossible(
            f"prompt_tokens = {prompt:,} for a prompt that can be at most {bounds.max_prompt:,} tokens"
        )
    return prompt, completion


def map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    """``value`` (parsed JSON) with ``fn`` applied to every string in it."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {k: map_strings(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [map_strings(v, fn) for v in value]
    return value


def short(text: str, limit: int = 300) -> str:
    """``text`` on one line, at most ``limit`` characters (for messages and error records)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


"""The LLM gateway: the only module that talks to a model.

Any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp server) through the real
``openai`` client::

    settings = load_llm_settings(ws, max_cost=2.0)

    async def main() -> None:
        async with Gateway(ws, settings) as gw:
            done = await gw.complete([{"role": "user", "content": "2+2?"}], purpose="demo")
            value, calls = await gw.complete_json(msgs, validate=check, purpose="generate_questions")

    run(main())

What it guarantees:

- **Every call is a record.** Each reply is committed as one :class:`LLMCall` row right after it
  arrives (a SIGKILL loses at most the calls in flight). The row's id is a hash of the request
  (model, messages, temperature / max_tokens / response_format, seed, sample), so the row is the
  cache: a request whose row says ``ok`` is answered from the store and never sent again. Calls
  that failed for good are stored with ``status = "error"`` and are retried by the next run.
- **Samples.** ``sample = 0..k-1`` make k distinct cache entries and k distinct requests: sample
  i > 0 is sent with a seed derived from (seed, i), so endpoints that honour seeds reproduce it.
- **Limits.** At most ``concurrency`` requests in flight; requests and tokens per minute through
  token buckets (about one second of burst); prompt tokens are estimated from characters (4 per
  token until the endpoint's usage figures show denser text) and corrected after each reply.
- **Retries** with exponential backoff and jitter on 429, 408, 409, 5xx, timeouts and connection
  errors, honouring ``Retry-After`` / ``retry-after-ms``; the ``openai`` client's own retries are
  off so every retry is counted (``Gateway.retries``) and logged (logger ``tqaforge.llm``).
  Malformed replies (not JSON, no choices, no content) are retried too, at most
  ``malformed_retries`` times (default 2: a model that returns nothing at temperature 0 tends to
  do so again, and each such reply may be billed). Other 4xx errors fail at once.
- **A hard budget.** Before each paid request its worst case is reserved: estimated prompt tokens
  x input price + ``max_tokens`` (or ``default_max_tokens``, 4096, when the call sets none) x output
  price. If spent + reserved + this worst case would pass ``max_cost``, :class:`BudgetExceeded` is
  raised *before* sending, and every later paid call of this gateway is refused too, so a run
  stops cleanly with its finished calls stored. After the reply the reservation is replaced by
  the real cost. A model with no entry in ``prices`` costs 0, and ``max_cost`` then never stops
  it. The bound holds as far as the estimates do: a call without ``max_tokens`` whose reply is
  longer than ``default_max_tokens`` can pass it by the difference, and a prompt denser than
  estimated by its extra prompt tokens. ``max_cost`` must be a positive finite number.
- **Usage is checked, not believed.** A reply whose usage its request cannot have produced
  (completion tokens above ``max_tokens``, prompt tokens far beyond the prompt's bytes, negative
  or non-numeric counts) raises :class:`ImpossibleUsage`: the call is recorded as an error at
  the worst-case cost that was reserved for it, and every later paid call of the gateway is
  refused. A reply with no usage at all is charged that worst case too.
- **Hard limits per request.** ``timeout_s`` bounds the whole request (connect, headers and
  body), not each read, so an endpoint that drips bytes times out like one that is silent. The
  body is read with a byte limit (``REPLY_BYTES_PER_TOKEN`` x ``max_tokens`` + an envelope, at
  most ``max_reply_bytes``); a larger reply is cut off there and never held, stored or sent back
  whole: it is a malformed reply (retried like one), recorded with a truncated body, and fails
  for good as :class:`ReplyTooLarge` (an :class:`InvalidReply`).
- **Secrets stay ours.** The API key and the password of the base URL are masked
  (:mod:`tqaforge.redact`) in every text that came from the endpoint or a URL before it is
  stored, logged or raised; the stored ``endpoint`` is the URL without its password.
"""

from __future__ import annotations

import asyncio
import contextvars
import email.utils
import json
import logging
import math
import os
import random
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeVar

import httpx2  # the HTTP library of the openai client (openai >= 3); its response hook caps bodies
import openai
from sqlalchemy import Connection, bindparam, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from tqaforge.errors import (
    BudgetExceeded,
    ConfigError,
    EndpointAuthError,
    ImpossibleUsage,
    InvalidReply,
    LLMError,
    ReplyTooLarge,
    StoreError,
)
from tqaforge.redact import MASK, MIN_SECRET_LENGTH, redact_secrets, redact_url
from tqaforge.schemas.records import LLMCall, utcnow
from tqaforge.store import Workspace
from tqaforge.tables.table import content_hash

__all__ = [
    "BudgetExceeded",
    "Completion",
    "EndpointAuthError",
    "Gateway",
    "ImpossibleUsage",
    "InvalidReply",
    "LLMError",
    "LLMSettings",
    "Price",
    "ReplyTooLarge",
    "load_llm_settings",
    "parse_json_reply",
    "request_id",
    "run",
]

T = TypeVar("T")
log = logging.getLogger("tqaforge.llm")

MODEL_ENV = "TQAFORGE_LLM_MODEL"
BASE_URL_ENV = "OPENAI_BASE_URL"
API_KEY_ENV = "OPENAI_API_KEY"
RETRY_AFTER_CAP_S = 300.0  # a broken Retry-After header must not park a run for hours
RETRYABLE_STATUS = frozenset({408, 409, 429})  # and every 5xx
MESSAGE_OVERHEAD_TOKENS = 4  # role and separators per message, in OpenAI's chat format
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

_CALLS = LLMCall.__table__  # type: ignore[attr-defined]
_CACHED = select(_CALLS.c.text, _CALLS.c.prompt_tokens, _CALLS.c.completion_tokens).where(
    _CALLS.c.id == bindparam("id"), _CALLS.c.status == "ok"
)


def _upsert_statement(dialect: str) -> Any:
    """One INSERT .. ON CONFLICT statement for the whole row, built once (SQLite, PostgreSQL).

    An error row never replaces an ok one (another run may have answered the request
    meanwhile); anything else replaces what was there. None for other databases.
    """
    if dialect not in ("sqlite", "postgresql"):
        return None
    stmt = (sqlite_insert if dialect == "sqlite" else pg_insert)(_CALLS)
    return stmt.on_conflict_do_update(
        index_elements=[_CALLS.c.id],
        set_={c.name: stmt.excluded[c.name] for c in _CALLS.columns if c.name != "id"},
        where=(_CALLS.c.status != "ok") | (stmt.excluded.status == "ok"),
    )


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float

    def __post_init__(self) -> None:
        # A NaN or infinite price makes every budget comparison false: the budget would be off.
        for name in ("input", "output"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
                raise ConfigError(
                    f"[llm.prices] {name} = {value!r} is not a price",
                    hint="USD per million tokens, a finite number >= 0, e.g. input = 0.15, output = 0.60",
                )

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1_000_000


@dataclass(frozen=True, repr=False)
class LLMSettings:
    """Where and how to call the model; see :func:`load_llm_settings`.

    Its repr masks the API key and the base URL's password, so printing settings leaks nothing.
    """

    model: str
    base_url: str | None = None  # OPENAI_BASE_URL or [llm] base_url; None: OpenAI
    api_key: str | None = None  # OPENAI_API_KEY or the variable named by [llm] api_key_env
    concurrency: int = 8
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    max_retries: int = 5
    timeout_s: float = 60.0
    prices: Mapping[str, Price] = field(default_factory=dict)  # model -> price
    max_cost: float | None = None  # USD for this run; None: no limit
    backoff_s: float = 1.0  # first retry waits about this long, doubling each time
    backoff_max_s: float = 60.0
    malformed_retries: int = 2  # retries of replies with no usable content (within max_retries)
    default_max_tokens: int = 4096  # worst-case reply length for the budget when a call sets none
    max_reply_bytes: int = 4 * 1024 * 1024  # hard cap on a reply body, whatever max_tokens says

    def __post_init__(self) -> None:
        if not self.model:
            raise ConfigError("no model set for the LLM", hint=_MODEL_HINT)
        if self.concurrency < 1:
            raise ConfigError(f"[llm] concurrency must be at least 1, not {self.concurrency}")
        # NaN compares false with everything and inf passes every check: either would switch
        # the limit it sets off without a word, so only positive finite numbers pass.
        for name in ("requests_per_minute", "tokens_per_minute", "max_cost", "timeout_s", "backoff_s", "backoff_max_s"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ConfigError(f"{_SETTING_NAMES.get(name, f'[llm] {name}')} must be a positive finite number, "
                                  f"not {value!r}", hint=_SETTING_HINTS.get(name))
        if self.max_retries < 0 or self.malformed_retries < 0:
            raise ConfigError("[llm] max_retries and malformed_retries cannot be negative")
        if self.default_max_tokens < 1:
            raise ConfigError(f"[llm] default_max_tokens must be at least 1, not {self.default_max_tokens}")
        if self.max_reply_bytes < 1024:
            raise ConfigError(f"[llm] max_reply_bytes must be at least 1024, not {self.max_reply_bytes}")

    def __repr__(self) -> str:
        shown = {f.name: getattr(self, f.name) for f in fields(self)}
        shown["api_key"] = None if self.api_key is None else "***"
        shown["base_url"] = None if self.base_url is None else redact_url(self.base_url)
        return "LLMSettings(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"

    @property
    def price(self) -> Price | None:
        """The price of this settings' model, None when the table has none."""
        return self.prices.get(self.model)


_MODEL_HINT = f'set [llm] model = "..." in tqaforge.toml, {MODEL_ENV}, or pass --model'
_SETTING_NAMES = {"max_cost": "the budget (--max-cost or [llm] max_cost)"}
_SETTING_HINTS = {
    "max_cost": "give --max-cost a positive amount in USD, e.g. --max-cost 2.50 (leave it out for no budget)",
    "timeout_s": "[llm] timeout_s is the seconds a whole request may take, e.g. 60",
}
_INT_KEYS = {"concurrency", "max_retries", "malformed_retries", "default_max_tokens", "max_reply_bytes"}
_FLOAT_KEYS = {"requests_per_minute", "tokens_per_minute", "timeout_s", "max_cost", "backoff_s", "backoff_max_s"}
_STR_KEYS = {"model", "base_url", "api_key"}


def _parse_prices(raw: Any, where: str) -> dict[str, Price]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: [llm.prices] must be a table of models")
    prices: dict[str, Price] = {}
    for model, entry in raw.items():
        if isinstance(entry, Price):
            prices[model] = entry
            continue
        try:
            prices[model] = Price(input=float(entry["input"]), output=float(entry["output"]))
        except (TypeError, KeyError, ValueError):
            raise ConfigError(
                f"{where}: [llm.prices.{json.dumps(model)}] needs numbers input = ... and output = ...",
                hint="USD per million tokens, e.g. input = 0.15, output = 0.60",
            ) from None
    return prices


def _coerce(key: str, value: Any, where: str) -> Any:
    try:
        if key in _INT_KEYS:
            if isinstance(value, bool) or float(value) != int(value):
                raise ValueError
            return int(value)
        if key in _FLOAT_KEYS:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        if key in _STR_KEYS:
            return str(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: [llm] {key} = {value!r} is not a valid value") from None
    return value


def load_llm_settings(ws: Workspace, **overrides: Any) -> LLMSettings:
    """The LLM settings of a workspace.

    The ``[llm]`` section of ``tqaforge.toml`` first, then the environment (``OPENAI_BASE_URL``,
    ``OPENAI_API_KEY`` or the variable named by ``[llm] api_key_env``, ``TQAFORGE_LLM_MODEL``),
    then ``overrides`` (CLI options; ``None`` values are ignored). ConfigError when no model is
    set or a value has the wrong type.
    """
    where = str(ws.root / "tqaforge.toml")
    section = ws.config.raw.get("llm", {}) or {}
    if not isinstance(section, Mapping):
        raise ConfigError(f"{where}: [llm] must be a table")
    known = {f.name for f in fields(LLMSettings)}
    values: dict[str, Any] = {}
    for key, value in section.items():
        if key == "prices":
            values["prices"] = _parse_prices(value, where)
        elif key == "api_key_env":
            continue
        elif key == "api_key":
            raise ConfigError(
                f"{where}: [llm] api_key: keys do not belong in the config file",
                hint='put the key in an environment variable and name it: api_key_env = "MY_KEY"',
            )
        elif key in known:
            values[key] = _coerce(key, value, where)
        else:
            log.debug("ignoring unknown [llm] key %s", key)
    if values.get("base_url") == "":
        values.pop("base_url")
    if os.environ.get(BASE_URL_ENV):
        values["base_url"] = os.environ[BASE_URL_ENV]
    key_env = str(section.get("api_key_env") or API_KEY_ENV)
    key = os.environ.get(key_env) or os.environ.get(API_KEY_ENV)
    if key:
        values["api_key"] = key
    if os.environ.get(MODEL_ENV):
        values["model"] = os.environ[MODEL_ENV]
    for key_name, value in overrides.items():
        if value is None:
            continue
        if key_name not in known:
            raise TypeError(f"load_llm_settings() got an unknown setting {key_name!r}")
        values[key_name] = _parse_prices(value, "overrides") if key_name == "prices" else _coerce(key_name, value, "overrides")
    if not values.get("model"):
        raise ConfigError("no model set for the LLM", hint=_MODEL_HINT)
    return LLMSettings(**values)


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
    """The LLMCall id: a hash of everything that makes the request what it is."""
    return content_hash(
        {"model": model, "messages": messages, "params": dict(params), "seed": seed, "sample": int(sample)}
    )


def wire_seed(seed: int | None, sample: int) -> int | None:
    """The seed sent for sample ``sample``: the caller's for sample 0, a derived one after."""
    if sample == 0:
        return seed
    return int(content_hash({"seed": seed, "sample": sample})[:8], 16) & 0x7FFFFFFF


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
    # A hostile reply such as "[[[[..." 100,000 deep makes json raise RecursionError, which is
    # no ValueError: it would escape the repair path and end the run with a traceback.
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("the JSON is nested too deeply to be a reply") from None


class _TokenBucket:
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
        async with self._lock:
            self._refill()
            need = min(amount, self.capacity)
            if self.level < need:
                await asyncio.sleep((need - self.level) / self.rate)
                self._refill()
            self.level -= amount

    def refund(self, amount: float) -> None:
        self._refill()
        self.level = min(self.capacity, self.level + amount)


class _Malformed(Exception):
    """A 200 reply we cannot use (no JSON, no choices, no content)."""

    def __init__(self, message: str, prompt_tokens: int = 0, completion_tokens: int = 0) -> None:
        super().__init__(message)
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens


class _Impossible(Exception):
    """A reply whose usage figures its request cannot have produced; the message is the claim."""


@dataclass
class _Meter:
    """The byte limit of one response body, and what the response hook saw of it.

    Set per attempt through :data:`_METER` (the hook runs in the task that sends the request).
    """

    limit: int
    received: int = 0
    head: bytearray = field(default_factory=bytearray)  # the first KEPT_BODY_CHARS bytes
    problem: str | None = None  # set when the body was cut off or refused

    def keep(self, chunk: bytes) -> None:
        if len(self.head) < KEPT_BODY_CHARS:
            self.head += chunk[: KEPT_BODY_CHARS - len(self.head)]

    @property
    def head_text(self) -> str:
        return bytes(self.head).decode("utf-8", "replace")


_METER: contextvars.ContextVar[_Meter | None] = contextvars.ContextVar("tqaforge_llm_meter", default=None)


class _CappedStream(httpx2.AsyncByteStream):
    """A response body that ends at its meter's limit; what lies beyond is never read."""

    def __init__(self, inner: httpx2.AsyncByteStream, meter: _Meter) -> None:
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


def _hard_cap_hook(hard_limit: int) -> Callable[[httpx2.Response], Awaitable[None]]:
    """The httpx response hook that puts every body behind its byte limit before it is read."""

    async def cap(response: httpx2.Response) -> None:
        meter = _METER.get() or _Meter(hard_limit)
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            # We ask for identity: a compressed body could inflate far past any byte limit.
            meter.limit = 0
            meter.problem = f"the endpoint compressed its reply (Content-Encoding: {_short(encoding, 40)}) although asked not to"
        response.stream = _CappedStream(response.stream, meter)  # type: ignore[arg-type]

    return cap


class Gateway:
    """Calls one model with limits, retries, a budget and a cache; see the module docstring.

    Create it inside the coroutine that :func:`run` runs (it binds to that event loop) and close
    it with ``await gw.aclose()`` or ``async with``. ``on_call`` sees every Completion, cached or
    paid, e.g. to drive a progress bar with the running cost (``gw.spent``).
    """

    def __init__(
        self, ws: Workspace, settings: LLMSettings, *, on_call: Callable[[Completion], None] | None = None
    ) -> None:
        self.ws = ws
        self.settings = settings
        self.on_call = on_call
        self.spent = 0.0  # USD paid in this gateway's lifetime (cached calls cost 0)
        self.paid_calls = 0
        self.cached_calls = 0
        self.failed_calls = 0  # calls that raised LLMError after their retries
        self.retries = 0  # retried attempts, all calls together
        self.reserved = 0.0  # worst-case cost of the requests in flight
        self._budget_stop: str | None = None
        self._usage_stop: str | None = None  # set by the first reply with impossible usage
        # Our credentials, masked in whatever the endpoint sends back or a URL shows.
        self._secrets = tuple(x for x in (settings.api_key, _url_password(settings.base_url)) if x)
        self._sem = asyncio.Semaphore(settings.concurrency)
        self._rpm = _TokenBucket(settings.requests_per_minute) if settings.requests_per_minute else None
        self._tpm = _TokenBucket(settings.tokens_per_minute) if settings.tokens_per_minute else None
        self._chars_per_token = 4.0  # lowered when the endpoint reports denser prompts
        self._jitter = random.Random()  # timing only: never affects what is asked or stored
        # One thread writes (and reads) the store: commits never block the event loop, and
        # SQLite never sees two writers of ours at once.
        self._db = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tqaforge-llm-store")
        self._db_conn: Connection | None = None  # opened and used by that thread only
        self._upsert = _upsert_statement(ws.engine.dialect.name)
        self._inflight: dict[str, asyncio.Future[Completion]] = {}
        self._client: openai.AsyncOpenAI | None = None
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------------
    async def __aenter__(self) -> "Gateway":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client and wait for the last commits."""
        if self._closed:
            return
        self._closed = True
        if self._client is not None:
            await self._client.close()
        self._db.submit(self._close_conn)
        self._db.shutdown(wait=True)

    @property
    def endpoint(self) -> str:
        """The endpoint's URL as stored and shown: without its password."""
        return redact_url(self.settings.base_url or os.environ.get(BASE_URL_ENV) or "https://api.openai.com/v1")

    def redact(self, text: str) -> str:
        """``text`` (from the endpoint or a URL) with our API key and URL password masked."""
        return redact_secrets(text, self._secrets)

    def _openai(self) -> openai.AsyncOpenAI:
        # Made on the first paid call, so a fully cached re-run needs no key and no endpoint.
        if self._client is None:
            key = self.settings.api_key
            if key is None:
                if self.settings.base_url is None:
                    raise EndpointAuthError(
                        "no API key for OpenAI",
                        hint=f"set {API_KEY_ENV} (or [llm] api_key_env), or point [llm] base_url at a local server",
                    )
                key = "unused"  # vLLM, Ollama and llama.cpp accept any key unless told otherwise
            # The response hook caps every body (ok or error) before the client reads it, and
            # identity encoding keeps a compressed body from inflating past the cap.
            http = openai.DefaultAsyncHttpxClient(
                event_hooks={"response": [_hard_cap_hook(self.settings.max_reply_bytes)]}
            )
            self._client = openai.AsyncOpenAI(
                api_key=key, base_url=self.settings.base_url, max_retries=0, timeout=self.settings.timeout_s,
                http_client=http, default_headers={"Accept-Encoding": "identity"},
            )
        return self._client

    # -- the public calls --------------------------------------------------------------------
    async def complete(
        self,
        messages: list[dict[str, str]],
        *,
        purpose: str,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        seed: int | None = None,
        sample: int = 0,
        response_format: dict[str, Any] | None = None,
    ) -> Completion:
        """One chat completion: from the store when this request was answered before, else paid.

        Raises BudgetExceeded before a paid request that could pass ``max_cost``, LLMError when
        the endpoint fails after the retries.
        """
        if self._closed:
            raise LLMError("this Gateway is closed")
        params = request_params(temperature, max_tokens, response_format)
        call_id = request_id(self.settings.model, messages, params, seed, sample)
        while (leader := self._inflight.get(call_id)) is not None:
            # The same request is already on its way: wait for it instead of paying twice.
            try:
                done = await asyncio.shield(leader)
            except asyncio.CancelledError:
                if leader.cancelled():
                    continue  # the first caller was cancelled; this one takes over
                raise
            self.cached_calls += 1
            return self._notify(replace(done, cached=True, cost=0.0))
        future: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        future.add_done_callback(lambda f: f.cancelled() or f.exception())  # no "never retrieved"
        self._inflight[call_id] = future
        try:
            done = await self._complete(call_id, messages, params, seed, sample, purpose)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except BaseException as exc:
            future.set_exception(exc)
            raise
        else:
            future.set_result(done)
        finally:
            del self._inflight[call_id]
        return self._notify(done)

    async def complete_json(
        self,
        messages: list[dict[str, str]],
        *,
        validate: Callable[[Any], T],
        purpose: str,
        **kwargs: Any,
    ) -> tuple[T, list[Completion]]:
        """A reply parsed as JSON and checked by ``validate``, with one repair call if needed.

        ``validate`` gets the parsed value and returns what the caller wants, raising ValueError
        with a message when the shape is wrong. On failure the model sees its reply and the error
        and answers again (same parameters); still invalid: InvalidReply with both call ids.
        Returns the validated value and the completions made (one or two).
        """
        first = await self.complete(messages, purpose=purpose, **kwargs)
        try:
            return validate(parse_json_reply(first.text)), [first]
        except ValueError as exc:
            problem = _short(str(exc))
        repair = [
            *messages,
            {"role": "assistant", "content": first.text},
            {"role": "user", "content": (
                f"That reply could not be used: {problem}. "
                "Reply again with only the corrected JSON, nothing else."
            )},
        ]
        second = await self.complete(repair, purpose=purpose, **kwargs)
        try:
            return validate(parse_json_reply(second.text)), [first, second]
        except ValueError as exc:
            raise InvalidReply(
                f"{purpose}: the model's JSON reply was invalid twice ({_short(str(exc))}); "
                f"calls {first.call_id}, {second.call_id}",
                call_ids=[first.call_id, second.call_id],
                hint="see the replies with the call ids; a larger model or a clearer prompt may help",
            ) from None

    # -- internals ---------------------------------------------------------------------------
    def _notify(self, done: Completion) -> Completion:
        if self.on_call is not None:
            self.on_call(done)
        return done

    async def _in_db(self, fn: Callable[..., T], *args: Any) -> T:
        # Shielded: a Ctrl-C while a commit waits its turn must not drop a paid reply; aclose()
        # waits for the queue.
        return await asyncio.shield(asyncio.get_running_loop().run_in_executor(self._db, fn, *args))

    # The store is read and written by the gateway's own thread, on one connection: a commit
    # costs a statement and a COMMIT, nothing more (the gateway's throughput depends on it).
    def _conn(self) -> Connection:
        if self._db_conn is None:
            self._db_conn = self.ws.engine.connect()
        return self._db_conn

    def _close_conn(self) -> None:
        if self._db_conn is not None:
            self._db_conn.close()
            self._db_conn = None

    def _load(self, call_id: str) -> Completion | None:
        """The stored ok answer to this request, if any (only the columns a Completion needs)."""
        conn = self._conn()
        try:
            row = conn.execute(_CACHED, {"id": call_id}).first()
            conn.rollback()  # end the read so that the next one sees newer commits
        except SQLAlchemyError as exc:
            self._close_conn()
            raise StoreError(f"cannot read the LLM call cache: {exc}") from None
        if row is None:
            return None
        return Completion(call_id, row.text or "", True, 0.0, row.prompt_tokens, row.completion_tokens)

    def _save(self, record: dict[str, Any]) -> None:
        """Insert or update the call's row and commit, before the caller sees the reply."""
        if self._upsert is None:
            return self._save_portable(record)
        conn = self._conn()
        try:
            conn.execute(self._upsert, record)
            conn.commit()
        except SQLAlchemyError as exc:
            self._close_conn()
            raise StoreError(f"cannot store LLM call {record['id']}: {exc}") from None

    def _save_portable(self, values: dict[str, Any]) -> None:
        record = LLMCall(**values)
        for attempt in (1, 2):  # databases without ON CONFLICT: read, then merge
            try:
                with self.ws.session() as s:
                    existing = s.get(LLMCall, record.id)
                    if existing is not None and existing.status == "ok" and record.status != "ok":
                        return
                    s.merge(record)
                return
            except IntegrityError:
                if attempt == 2:  # another process inserted the same id between get and insert
                    raise

    async def _complete(
        self,
        call_id: str,
        messages: list[dict[str, str]],
        params: dict[str, Any],
        seed: int | None,
        sample: int,
        purpose: str,
    ) -> Completion:
        stored = await self._in_db(self._load, call_id)
        if stored is not None:
            self.cached_calls += 1
            return stored
        async with self._sem:
            record, outcome = await self._paid_call(call_id, messages, params, seed, sample, purpose)
        # Committed outside the slot: the slot bounds requests to the endpoint, not commits.
        await self._in_db(self._save, record)
        if isinstance(outcome, LLMError):
            raise outcome
        return outcome

    def _estimate_prompt_tokens(self, messages: list[dict[str, str]]) -> int:
        chars = sum(len(str(m.get("content") or "")) for m in messages)
        return math.ceil(chars / self._chars_per_token) + MESSAGE_OVERHEAD_TOKENS * len(messages) + 3

    def _learn_density(self, messages: list[dict[str, str]], prompt_tokens: int) -> None:
        chars = sum(len(str(m.get("content") or "")) for m in messages)
        if prompt_tokens >= 32 and chars > 0:
            self._chars_per_token = max(1.0, min(self._chars_per_token, chars / prompt_tokens))

    def _worst(self, est_prompt: int, max_tokens: int | None) -> float:
        """The most a request can honestly cost: its estimated prompt and a full-length reply."""
        price = self.settings.price
        if price is None:
            return 0.0
        return price.cost(est_prompt, max_tokens if max_tokens is not None else self.settings.default_max_tokens)

    def _reserve(self, est_prompt: int, max_tokens: int | None) -> float:
        """Reserve the worst-case cost of the next request, or raise BudgetExceeded."""
        price, limit = self.settings.price, self.settings.max_cost
        if price is None or limit is None:
            return 0.0
        if self._budget_stop is not None:
            raise BudgetExceeded(self._budget_stop)
        worst = self._worst(est_prompt, max_tokens)
        if self.spent + self.reserved + worst > limit:
            self._budget_stop = (
                f"budget: ${self.spent:.4f} spent + ${self.reserved:.4f} in flight + up to ${worst:.4f} "
                f"for the next call would pass max_cost ${limit:.4f}; stopped before sending"
            )
            raise BudgetExceeded(self._budget_stop)
        self.reserved += worst
        return worst

    def _backoff(self, retry: int, retry_after: float | None) -> float:
        if retry_after is not None:
            # Up to 10% more, so that the calls told to wait the same time do not come back at once.
            return min(max(retry_after, 0.0), RETRY_AFTER_CAP_S) * self._jitter.uniform(1.0, 1.1)
        base = min(self.settings.backoff_max_s, self.settings.backoff_s * 2 ** (retry - 1))
        return base * self._jitter.uniform(0.5, 1.0)

    def _reply_limit(self, max_tokens: int | None) -> int:
        """The most bytes an honest reply to a request with this ``max_tokens`` can have."""
        tokens = max_tokens if max_tokens is not None else self.settings.default_max_tokens
        return min(self.settings.max_reply_bytes, REPLY_BYTES_PER_TOKEN * tokens + REPLY_ENVELOPE_BYTES)

    def _halted(self) -> None:
        """Refuse a paid call after an endpoint claimed impossible usage in this gateway."""
        if self._usage_stop is not None:
            raise ImpossibleUsage(f"{self._usage_stop}; no further requests were sent", hint=_USAGE_HINT)

    async def _send(self, client: openai.AsyncOpenAI, body: dict[str, Any], meter: _Meter) -> Any:
        """POST the request under a deadline for the whole exchange and a byte limit for its body.

        client.post is the openai client's documented way to send a body as is: the same auth,
        errors and timeouts as chat.completions.create, without its typed request transform and
        response model (half the CPU of a call), and the record keeps the endpoint's JSON exactly
        as it came. The client's own timeout applies to each read only; wait_for makes
        ``timeout_s`` a deadline for the request as a whole (cancelling it closes the connection).
        """
        token = _METER.set(meter)
        try:
            return await asyncio.wait_for(
                client.post("/chat/completions", body=body, cast_to=dict), timeout=self.settings.timeout_s
            )
        finally:
            _METER.reset(token)

    async def _paid_call(
        self,
        call_id: str,
        messages: list[dict[str, str]],
        params: dict[str, Any],
        seed: int | None,
        sample: int,
        purpose: str,
    ) -> tuple[dict[str, Any], Completion | LLMError]:
        """Send with retries; the record to store and the completion or the error to raise."""
        s = self.settings
        wire = dict(params)
        sent_seed = wire_seed(seed, sample)
        if sent_seed is not None:
            wire["seed"] = sent_seed
        max_tokens = params.get("max_tokens")
        est_prompt = self._estimate_prompt_tokens(messages)
        bounds = _UsageBounds.of(messages, max_tokens)
        failure = _Attempts(call_id, messages, wire, seed, sample, purpose)
        retries = malformed = 0
        while True:
            self._halted()
            if self._rpm is not None:
                await self._rpm.acquire(1)
            est_tokens = est_prompt + (max_tokens or 0)
            if self._tpm is not None:
                await self._tpm.acquire(est_tokens)
            client = self._openai()
            worst = self._reserve(est_prompt, max_tokens)  # 0 without a budget
            bound = self._worst(est_prompt, max_tokens)  # charged when the reply's usage cannot be used
            meter = _Meter(self._reply_limit(max_tokens))
            started = time.perf_counter()
            retry_after: float | None = None
            try:
                reply = await self._send(client, {"model": s.model, "messages": messages, **wire}, meter)
                if meter.problem is not None:
                    raise _Oversize(meter.problem)
                text, usage = _usable(reply, bounds)
            except (_Oversize, _Malformed, ValueError) as exc:
                # Unusable: cut off at the byte limit, not JSON, no choices or no content. An
                # oversize reply may have been billed up to its worst case.
                self.reserved -= worst
                if meter.problem is not None:
                    exc = _Oversize(meter.problem)
                tokens = (exc.prompt_tokens, exc.completion_tokens) if isinstance(exc, _Malformed) else None
                # A body that is not JSON is no model's billed reply (a proxy's page): it costs 0.
                cost = 0.0 if tokens is None and not isinstance(exc, _Oversize) else self._cost(tokens, bound)
                self.spent += cost
                failure.charge(cost, tokens)
                failure.body = self._kept_body(meter, exc)
                malformed += 1
                problem = self._problem(exc, meter)
                retryable = malformed <= s.malformed_retries
                failure.error_cls = ReplyTooLarge if isinstance(exc, _Oversize) else LLMError
            except _Impossible as exc:
                # The endpoint's figures cannot be trusted: charge the worst case, refuse the rest.
                self.reserved -= worst
                self.spent += bound
                failure.charge(bound, None)
                failure.body = {"claimed_usage": _short(self.redact(json.dumps(_usage_of(reply), default=str)), 500)}
                problem = self.redact(f"impossible usage from the endpoint: {exc}")
                self._usage_stop = f"{purpose}: model {s.model} at {self.endpoint}: {problem}"
                return self._failure(failure, problem, hint=_USAGE_HINT, error_cls=ImpossibleUsage)
            except openai.APIStatusError as exc:
                self.reserved -= worst
                failure.error_cls = LLMError
                problem = self.redact(f"HTTP {exc.status_code}: {_status_message(exc)}")
                retryable = exc.status_code in RETRYABLE_STATUS or exc.status_code >= 500
                retry_after = _retry_after(exc.response.headers)
                if not retryable:
                    auth = exc.status_code in (401, 403)
                    return self._failure(failure, problem, hint=_status_hint(exc.status_code),
                                         error_cls=EndpointAuthError if auth else LLMError)
            except (openai.APITimeoutError, asyncio.TimeoutError):
                self.reserved -= worst
                failure.error_cls = LLMError
                problem, retryable = f"no complete reply within {s.timeout_s:g} s", True
            except openai.APIConnectionError as exc:
                self.reserved -= worst
                failure.error_cls = LLMError
                problem, retryable = self.redact(f"connection failed: {_short(str(exc.__cause__ or exc))}"), True
            except BaseException:
                self.reserved -= worst  # cancelled (Ctrl-C) or a bug: release, record nothing
                raise
            else:
                latency_ms = (time.perf_counter() - started) * 1000
                prompt_tokens, completion_tokens = usage or (0, 0)
                cost = self._cost(usage, bound)
                self.reserved -= worst
                self.spent += cost
                self.paid_calls += 1
                if self._tpm is not None:
                    self._tpm.refund(est_tokens - (prompt_tokens + completion_tokens))
                self._learn_density(messages, prompt_tokens)
                if self._secrets:  # an endpoint that echoes our key must not get it stored
                    text, reply = self.redact_own(text), _map_strings(reply, self.redact_own)
                total = cost + failure.cost
                record = dict(
                    id=call_id, model=s.model, endpoint=self.endpoint, messages=messages, params=wire,
                    seed=seed, sample=sample, response=reply,
                    text=text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                    cost=total, latency_ms=latency_ms, status="ok", error=None, purpose=purpose,
                    created_at=utcnow(),
                )
                # The call's cost includes replies that came back unusable but were billed.
                return record, Completion(call_id, text, False, total, prompt_tokens, completion_tokens)
            if not retryable or retries >= s.max_retries:
                return self._failure(
                    failure, f"{problem} (gave up after {retries + 1} attempt{'s' if retries else ''})",
                    hint=_GAVE_UP_HINT if failure.error_cls is LLMError else _TOO_LARGE_HINT,
                    error_cls=failure.error_cls,
                )
            retries += 1
            self.retries += 1
            wait = self._backoff(retries, retry_after)
            log.warning("%s: %s; retry %d/%d in %.2f s (call %s)", purpose, problem, retries, s.max_retries,
                        wait, call_id)
            await asyncio.sleep(wait)

    def redact_own(self, text: str) -> str:
        """``text`` with our own secrets masked, and nothing else changed (for model output)."""
        for secret in self._secrets:
            if len(secret) >= MIN_SECRET_LENGTH and secret in text:
                text = text.replace(secret, MASK)
        return text

    def _cost(self, usage: tuple[int, int] | None, worst: float) -> float:
        """What a reply cost: its usage at the model's price, or the reserved worst case when
        the reply carried no usage to go by."""
        price = self.settings.price
        if price is None:
            return 0.0
        return worst if usage is None else price.cost(*usage)

    def _problem(self, exc: Exception, meter: _Meter) -> str:
        if isinstance(exc, _Oversize):
            return (f"{exc} (the most an honest reply to max_tokens allows); cut off there after "
                    f"{meter.received:,} bytes, not stored whole and never sent back")
        return self.redact(f"malformed reply: {_short(str(exc))}")

    def _kept_body(self, meter: _Meter, exc: Exception) -> dict[str, Any]:
        """What an error record keeps of an unusable body: its redacted start and its size."""
        kept: dict[str, Any] = {"body_start": self.redact(meter.head_text), "bytes_received": meter.received,
                                "byte_limit": meter.limit}
        if isinstance(exc, _Oversize):
            kept["truncated"] = True
        return kept

    def _failure(
        self, attempts: "_Attempts", problem: str, *, hint: str | None, error_cls: type[LLMError] = LLMError
    ) -> tuple[dict[str, Any], LLMError]:
        """The failure's record (never ok: a later run retries the call) and its error."""
        self.failed_calls += 1
        problem = self.redact(problem)
        record = dict(
            id=attempts.call_id, model=self.settings.model, endpoint=self.endpoint, messages=attempts.messages,
            params=attempts.params, seed=attempts.seed, sample=attempts.sample, response=attempts.body, text=None,
            prompt_tokens=attempts.tokens[0], completion_tokens=attempts.tokens[1], cost=attempts.cost,
            latency_ms=None, status="error", error=problem, purpose=attempts.purpose, created_at=utcnow(),
        )
        message = f"{attempts.purpose}: model {self.settings.model} at {self.endpoint}: {problem}"
        if issubclass(error_cls, InvalidReply):
            return record, error_cls(message, call_ids=[attempts.call_id], hint=hint)
        return record, error_cls(message, hint=hint)


_USAGE_HINT = ("the endpoint's token counts cannot be trusted, so no budget can hold; check that [llm] base_url "
               "(or OPENAI_BASE_URL) is the endpoint you mean. The call is recorded at its worst-case cost")
_GAVE_UP_HINT = "check that the endpoint is up and the model name is right; re-run to retry"
_TOO_LARGE_HINT = ("the endpoint sends replies far longer than max_tokens allows; check the endpoint, or raise "
                   "[llm] max_reply_bytes if its replies are honest")


class _Oversize(Exception):
    """A reply body cut off at its byte limit (or refused, e.g. compressed)."""


@dataclass
class _Attempts:
    """One request's identity and what its failed attempts cost, for the error record."""

    call_id: str
    messages: list[dict[str, str]]
    params: dict[str, Any]
    seed: int | None
    sample: int
    purpose: str
    cost: float = 0.0
    tokens: list[int] = field(default_factory=lambda: [0, 0])
    body: dict[str, Any] | None = None  # what is kept of the last unusable body
    error_cls: type[LLMError] = LLMError

    def charge(self, cost: float, tokens: tuple[int, int] | None) -> None:
        self.cost += cost
        if tokens is not None:
            self.tokens[0] += tokens[0]
            self.tokens[1] += tokens[1]


@dataclass(frozen=True)
class _UsageBounds:
    """The most tokens a request's reply can honestly report."""

    max_prompt: int
    max_completion: int | None  # None: the call set no max_tokens

    @classmethod
    def of(cls, messages: list[dict[str, str]], max_tokens: int | None) -> "_UsageBounds":
        size = sum(len(str(m.get("content") or "").encode("utf-8")) for m in messages)
        slack = PROMPT_TOKENS_PER_MESSAGE_SLACK * len(messages) + PROMPT_TOKENS_SLACK
        return cls(size + slack, max_tokens)


def _usage_of(reply: Any) -> Any:
    return reply.get("usage") if isinstance(reply, dict) else None


def _usable(reply: Any, bounds: _UsageBounds) -> tuple[str, tuple[int, int] | None]:
    """The text and (prompt, completion) tokens of a chat completion (parsed JSON); the tokens
    are None when the reply reports no usage. _Impossible for usage the request cannot have
    produced, _Malformed for a reply with no usable text."""
    if not isinstance(reply, dict):
        raise _Malformed(f"a JSON {type(reply).__name__}, not an object")
    usage = _checked_usage(reply.get("usage"), bounds)
    prompt_tokens, completion_tokens = usage or (0, 0)
    choices = reply.get("choices")
    if not isinstance(choices, list) or not choices:
        raise _Malformed("no choices", prompt_tokens, completion_tokens)
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        refusal = message.get("refusal") if isinstance(message, dict) else None
        why = f"refused: {_short(str(refusal))}" if refusal else "no content"
        raise _Malformed(why, prompt_tokens, completion_tokens)
    return content, usage


def _checked_usage(usage: Any, bounds: _UsageBounds) -> tuple[int, int] | None:
    """(prompt, completion) tokens of a reply's usage, None when it has none; _Impossible
    names the claim when the numbers are not counts or exceed what the request allows."""
    if usage is None:
        return None
    if not isinstance(usage, dict):
        raise _Impossible(f"usage is {_short(repr(usage), 80)}, not an object of token counts")
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
            raise _Impossible(f"{key} = {_short(repr(value), 80)}, not a token count")
        counts.append(value)
    prompt, completion = counts
    if bounds.max_completion is not None and completion > bounds.max_completion:
        raise _Impossible(
            f"completion_tokens = {completion:,} for a request with max_tokens {bounds.max_completion:,}"
        )
    if prompt > bounds.max_prompt:
        raise _Impossible(
            f"prompt_tokens = {prompt:,} for a prompt that can be at most {bounds.max_prompt:,} tokens"
        )
    return prompt, completion


def _map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    """``value`` (parsed JSON) with ``fn`` applied to every string in it."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {k: _map_strings(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [_map_strings(v, fn) for v in value]
    return value


def _url_password(url: str | None) -> str | None:
    """The password in a URL's user information (split at the last '@'), else None."""
    if not url or "://" not in url:
        return None
    rest = url.split("://", 1)[1]
    head = rest.split("?", 1)[0]
    at = head.rfind("@") if "@" in head else rest.rfind("@")
    if at < 0:
        return None
    _, colon, password = rest[:at].partition(":")
    return password if colon and password else None


def _retry_after(headers: Mapping[str, str]) -> float | None:
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


def _status_message(exc: openai.APIStatusError) -> str:
    """The endpoint's own error message (OpenAI's {"error": {"message": ...}}), else the body."""
    body = exc.body
    if isinstance(body, Mapping) and body.get("message"):
        return _short(str(body["message"]))
    return _short(exc.response.text or exc.message)


def _status_hint(status: int) -> str:
    if status in (401, 403):
        return f"check the API key ({API_KEY_ENV} or the variable named by [llm] api_key_env)"
    if status == 404:
        return "check [llm] base_url (it usually ends in /v1) and the model name"
    return "the endpoint rejected the request; see the message above"


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def run(coro: Awaitable[T]) -> T:
    """Run a coroutine to completion for the CLI.

    Ctrl-C cancels the tasks (in-flight requests are dropped, finished calls are already
    committed) and raises KeyboardInterrupt, which the CLI reports as a clean stop. Called from
    a thread whose event loop is running (a notebook), it runs the coroutine in a new thread.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)  # type: ignore[arg-type]
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()  # type: ignore[arg-type]

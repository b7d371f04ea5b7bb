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
  longer than ``default_max_tokens`` can pass it by the difference.
"""

from __future__ import annotations

import asyncio
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

import openai
from sqlalchemy import Connection, bindparam, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from tqaforge.errors import BudgetExceeded, ConfigError, InvalidReply, LLMError, StoreError
from tqaforge.schemas.records import LLMCall, utcnow
from tqaforge.store import Workspace
from tqaforge.tables.table import content_hash

__all__ = [
    "BudgetExceeded",
    "Completion",
    "Gateway",
    "InvalidReply",
    "LLMError",
    "LLMSettings",
    "Price",
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

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1_000_000


@dataclass(frozen=True)
class LLMSettings:
    """Where and how to call the model; see :func:`load_llm_settings`."""

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

    def __post_init__(self) -> None:
        if not self.model:
            raise ConfigError("no model set for the LLM", hint=_MODEL_HINT)
        if self.concurrency < 1:
            raise ConfigError(f"[llm] concurrency must be at least 1, not {self.concurrency}")
        for name in ("requests_per_minute", "tokens_per_minute", "max_cost"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(f"[llm] {name} must be positive, not {value}")
        if self.max_retries < 0 or self.malformed_retries < 0:
            raise ConfigError("[llm] max_retries and malformed_retries cannot be negative")
        if self.timeout_s <= 0:
            raise ConfigError(f"[llm] timeout_s must be positive, not {self.timeout_s}")

    @property
    def price(self) -> Price | None:
        """The price of this settings' model, None when the table has none."""
        return self.prices.get(self.model)


_MODEL_HINT = f'set [llm] model = "..." in tqaforge.toml, {MODEL_ENV}, or pass --model'
_INT_KEYS = {"concurrency", "max_retries", "malformed_retries", "default_max_tokens"}
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
        return json.loads(stripped)
    except ValueError:
        match = _FENCE.search(stripped)
        if match is None:
            raise
        return json.loads(match.group(1))


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
        return self.settings.base_url or os.environ.get(BASE_URL_ENV) or "https://api.openai.com/v1"

    def _openai(self) -> openai.AsyncOpenAI:
        # Made on the first paid call, so a fully cached re-run needs no key and no endpoint.
        if self._client is None:
            key = self.settings.api_key
            if key is None:
                if self.settings.base_url is None:
                    raise LLMError(
                        "no API key for OpenAI",
                        hint=f"set {API_KEY_ENV} (or [llm] api_key_env), or point [llm] base_url at a local server",
                    )
                key = "unused"  # vLLM, Ollama and llama.cpp accept any key unless told otherwise
            self._client = openai.AsyncOpenAI(
                api_key=key, base_url=self.settings.base_url, max_retries=0, timeout=self.settings.timeout_s
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

    def _reserve(self, est_prompt: int, max_tokens: int | None) -> float:
        """Reserve the worst-case cost of the next request, or raise BudgetExceeded."""
        price, limit = self.settings.price, self.settings.max_cost
        if price is None or limit is None:
            return 0.0
        if self._budget_stop is not None:
            raise BudgetExceeded(self._budget_stop)
        worst = price.cost(est_prompt, max_tokens if max_tokens is not None else self.settings.default_max_tokens)
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
        retries = malformed = 0
        failed_cost = 0.0
        failed_tokens = [0, 0]
        while True:
            if self._rpm is not None:
                await self._rpm.acquire(1)
            est_tokens = est_prompt + (max_tokens or 0)
            if self._tpm is not None:
                await self._tpm.acquire(est_tokens)
            client = self._openai()
            worst = self._reserve(est_prompt, max_tokens)
            started = time.perf_counter()
            retry_after: float | None = None
            try:
                # client.post is the openai client's documented way to send a body as is: the
                # same auth, errors and timeouts as chat.completions.create, without its typed
                # request transform and response model (half the CPU of a call), and the
                # record keeps the endpoint's JSON exactly as it came.
                reply = await client.post("/chat/completions", body={"model": s.model, "messages": messages, **wire},
                                          cast_to=dict)
                text, prompt_tokens, completion_tokens = _usable(reply)
            except _Malformed as exc:
                cost = s.price.cost(exc.prompt_tokens, exc.completion_tokens) if s.price else 0.0
                self.reserved -= worst
                self.spent += cost
                failed_cost += cost
                failed_tokens[0] += exc.prompt_tokens
                failed_tokens[1] += exc.completion_tokens
                malformed += 1
                problem, retryable = f"malformed reply: {exc}", malformed <= s.malformed_retries
            except openai.APIStatusError as exc:
                self.reserved -= worst
                problem = f"HTTP {exc.status_code}: {_status_message(exc)}"
                retryable = exc.status_code in RETRYABLE_STATUS or exc.status_code >= 500
                retry_after = _retry_after(exc.response.headers)
                if not retryable:
                    return self._failure(call_id, messages, wire, seed, sample, purpose, problem,
                                         failed_cost, failed_tokens, hint=_status_hint(exc.status_code))
            except openai.APITimeoutError:
                self.reserved -= worst
                problem, retryable = f"no reply within {s.timeout_s:g} s", True
            except openai.APIConnectionError as exc:
                self.reserved -= worst
                problem, retryable = f"connection failed: {_short(str(exc.__cause__ or exc))}", True
            except ValueError as exc:  # the body was not JSON
                self.reserved -= worst
                malformed += 1
                problem, retryable = f"malformed reply: {_short(str(exc))}", malformed <= s.malformed_retries
            except BaseException:
                self.reserved -= worst  # cancelled (Ctrl-C) or a bug: release, record nothing
                raise
            else:
                latency_ms = (time.perf_counter() - started) * 1000
                cost = s.price.cost(prompt_tokens, completion_tokens) if s.price else 0.0
                self.reserved -= worst
                self.spent += cost
                self.paid_calls += 1
                if self._tpm is not None:
                    self._tpm.refund(est_tokens - (prompt_tokens + completion_tokens))
                self._learn_density(messages, prompt_tokens)
                record = dict(
                    id=call_id, model=s.model, endpoint=self.endpoint, messages=messages, params=wire,
                    seed=seed, sample=sample, response=reply,
                    text=text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                    cost=cost + failed_cost, latency_ms=latency_ms, status="ok", error=None, purpose=purpose,
                    created_at=utcnow(),
                )
                # The call's cost includes replies that came back unusable but were billed.
                return record, Completion(call_id, text, False, cost + failed_cost, prompt_tokens, completion_tokens)
            if not retryable or retries >= s.max_retries:
                return self._failure(
                    call_id, messages, wire, seed, sample, purpose,
                    f"{problem} (gave up after {retries + 1} attempt{'s' if retries else ''})",
                    failed_cost, failed_tokens,
                    hint="check that the endpoint is up and the model name is right; re-run to retry",
                )
            retries += 1
            self.retries += 1
            wait = self._backoff(retries, retry_after)
            log.warning("%s: %s; retry %d/%d in %.2f s (call %s)", purpose, problem, retries, s.max_retries,
                        wait, call_id)
            await asyncio.sleep(wait)

    def _failure(
        self,
        call_id: str,
        messages: list[dict[str, str]],
        params: dict[str, Any],
        seed: int | None,
        sample: int,
        purpose: str,
        problem: str,
        cost: float,
        tokens: list[int],
        *,
        hint: str | None,
    ) -> tuple[dict[str, Any], LLMError]:
        """The failure's record (never ok: a later run retries the call) and its LLMError."""
        self.failed_calls += 1
        record = dict(
            id=call_id, model=self.settings.model, endpoint=self.endpoint, messages=messages, params=params,
            seed=seed, sample=sample, response=None, text=None, prompt_tokens=tokens[0],
            completion_tokens=tokens[1], cost=cost, latency_ms=None, status="error", error=problem,
            purpose=purpose, created_at=utcnow(),
        )
        return record, LLMError(f"{purpose}: model {self.settings.model} at {self.endpoint}: {problem}", hint=hint)


def _usable(reply: Any) -> tuple[str, int, int]:
    """The text and token counts of a chat completion (parsed JSON), or _Malformed."""
    if not isinstance(reply, dict):
        raise _Malformed(f"a JSON {type(reply).__name__}, not an object")
    usage = reply.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    prompt_tokens, completion_tokens = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    choices = reply.get("choices")
    if not isinstance(choices, list) or not choices:
        raise _Malformed("no choices", prompt_tokens, completion_tokens)
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        refusal = message.get("refusal") if isinstance(message, dict) else None
        why = f"refused: {_short(str(refusal))}" if refusal else "no content"
        raise _Malformed(why, prompt_tokens, completion_tokens)
    return content, prompt_tokens, completion_tokens


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


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

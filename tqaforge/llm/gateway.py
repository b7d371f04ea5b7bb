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
  A connection that no retry can mend -- refused (nothing listens on the port) or to a host
  name that does not exist -- fails at once as :class:`EndpointUnreachable`, naming host:port
  and the fix (with several endpoints: once every one of them refused the request).
  Malformed replies (not JSON, no choices, no content) are retried too, at most
  ``malformed_retries`` times (default 2: a model that returns nothing at temperature 0 tends to
  do so again, and each such reply may be billed). Other 4xx errors fail at once.
- **A hard budget** (:class:`~tqaforge.llm.budget.Budget`, the gateway's own or one shared by the
  gateways of a command). Every request is sent with a ``max_tokens`` (the call's, else
  ``default_max_tokens``, 4096), so it has a worst case: its prompt as sent (a token per UTF-8 byte
  plus the chat template) x input price + ``max_tokens`` x output price. That worst case is
  reserved *before* sending; when spent + reserved + it would pass ``max_cost`` the request waits
  for those in flight, and once spent + it alone would pass, :class:`BudgetExceeded` is raised
  before sending and every later paid call is refused too, so a run stops cleanly with its
  finished calls stored. A reply is charged its usage clamped to that worst case, whatever the
  endpoint claims, so spent never passes ``max_cost``. Prices come from ``[llm.prices]``, else
  genai-prices (:mod:`tqaforge.llm.prices`); a model with neither and a ``max_cost`` is refused
  when the gateway is made, before any call. ``max_cost`` must be a positive finite number.
- **Usage is checked, not believed.** A reply whose usage its request cannot have produced
  (completion tokens above ``max_tokens``, prompt tokens far beyond the prompt's bytes, negative
  or non-numeric counts) raises :class:`ImpossibleUsage`: the call is recorded as an error at
  the worst-case cost that was reserved for it, and every later paid call of the gateway is
  refused. A reply with no usage at all is charged that worst case too. ``gw.spent`` is what
  this gateway's calls hold in the ledger: the costs of the rows it wrote.
- **Hard limits per request.** ``timeout_s`` bounds the whole request (connect, headers and
  body), not each read, so an endpoint that drips bytes times out like one that is silent. The
  body is read with a byte limit (``REPLY_BYTES_PER_TOKEN`` x ``max_tokens`` + an envelope, at
  most ``max_reply_bytes``); a larger reply is cut off there and never held, stored or sent back
  whole: it is a malformed reply (retried like one), recorded with a truncated body, and fails
  for good as :class:`ReplyTooLarge` (an :class:`InvalidReply`).
- **One endpoint or several.** Requests go out through a
  :class:`~tqaforge.llm.transport.ChatTransport`: with ``[llm] base_urls`` they are spread over
  the endpoints (fewest in flight first, ``endpoint_concurrency`` each), an endpoint that keeps
  failing is left alone for a while, and a retry prefers another endpoint. The record's
  ``endpoint`` is the one that answered; :meth:`Gateway.endpoint_stats` counts each one's work.
- **Secrets stay ours.** The API key and the password of every base URL are masked
  (:mod:`tqaforge.redact`) in every text that came from the endpoint or a URL before it is
  stored, logged or raised; the stored ``endpoint`` is the URL without its password.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import openai

from tqaforge.errors import (
    EndpointAuthError,
    EndpointUnreachable,
    ImpossibleUsage,
    InvalidReply,
    LLMError,
    ReplyTooLarge,
)
from tqaforge.llm.budget import Budget, Hold
from tqaforge.llm.calls import BatchRequest, Completion, PutAside, request_id, request_params, wire_params
from tqaforge.llm.ledger import Ledger
from tqaforge.llm.limits import RETRYABLE_STATUS, TokenBucket, backoff_delay, retry_after
from tqaforge.llm.prices import require_price
from tqaforge.llm.replies import (
    Impossible,
    Malformed,
    Meter,
    Oversize,
    UsageBounds,
    map_strings,
    parse_json_reply,
    repair_request,
    reply_limit,
    short,
    usable_reply,
    usage_of,
)
from tqaforge.llm.settings import API_KEY_ENV, LLMSettings
from tqaforge.llm.transport import ChatTransport, Endpoint, EndpointStats, Unreachable, unreachable
from tqaforge.redact import MASK, MIN_SECRET_LENGTH, redact_secrets, url_password
from tqaforge.schemas.records import utcnow
from tqaforge.store import Workspace

__all__ = ["Gateway", "run"]

T = TypeVar("T")
log = logging.getLogger("tqaforge.llm")

MESSAGE_OVERHEAD_TOKENS = 4  # role and separators per message, in OpenAI's chat format


class Gateway:
    """Calls one model with limits, retries, a budget and a cache; see the module docstring.

    Create it inside the coroutine that :func:`run` runs (it binds to that event loop) and close
    it with ``await gw.aclose()`` or ``async with``. ``on_call`` sees every Completion, cached or
    paid, e.g. to drive a progress bar with the running cost (``gw.spent``).
    """

    def __init__(
        self,
        ws: Workspace,
        settings: LLMSettings,
        *,
        on_call: Callable[[Completion], None] | None = None,
        budget: Budget | None = None,
    ) -> None:
        require_price(settings, budget=budget)  # a budget that could never stop the model: refused before any call
        self.ws = ws
        self.settings = settings
        self._listeners: list[Callable[[Completion], None]] = [on_call] if on_call is not None else []
        # A shared budget (one command's several gateways) wins over settings.max_cost.
        self.budget = budget if budget is not None else Budget(settings.max_cost)
        self._spent = 0.0  # the costs of the ledger rows this gateway wrote
        self._saving: set[asyncio.Task[None]] = set()  # rows being committed (their callers may be gone)
        self.paid_calls = 0
        self.cached_calls = 0
        self.failed_calls = 0  # calls that raised LLMError after their retries
        self.retries = 0  # retried attempts, all calls together
        self._usage_stop: str | None = None  # set by the first reply with impossible usage
        # Our credentials, masked in whatever the endpoint sends back or a URL shows.
        self._secrets = tuple(x for x in (settings.api_key, *map(url_password, settings.endpoint_urls)) if x)
        self._sem = asyncio.Semaphore(settings.concurrency)
        self._rpm = TokenBucket(settings.requests_per_minute) if settings.requests_per_minute else None
        self._tpm = TokenBucket(settings.tokens_per_minute) if settings.tokens_per_minute else None
        self._chars_per_token = 4.0  # lowered when the endpoint reports denser prompts
        self._jitter = random.Random()  # timing only: never affects what is asked or stored
        self.ledger = Ledger(ws)
        self._inflight: dict[str, asyncio.Future[Completion]] = {}
        # Set by the step runner: requests not in the store go aside for a batch instead of out.
        self.put_aside: PutAside | None = None
        self.deferred_calls = 0  # requests put aside (or waiting in an open batch)
        self._transport = ChatTransport(settings, self._secrets)
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
        await self.settled()
        await self._transport.aclose()
        self.ledger.close()

    @property
    def spent(self) -> float:
        """USD this gateway's calls cost, as its ledger rows hold it (cached calls cost 0)."""
        return self._spent

    @property
    def reserved(self) -> float:
        """The worst-case cost of the requests in flight."""
        return self.budget.reserved

    @property
    def endpoint(self) -> str:
        """The endpoint's URL as stored and shown, without its password (several: comma-separated)."""
        return ", ".join(e.shown for e in self._transport.endpoints)

    def endpoint_stats(self) -> list[EndpointStats]:
        """Each endpoint's requests, failures and down events so far, in the settings' order."""
        return self._transport.stats()

    def redact(self, text: str) -> str:
        """``text`` (from the endpoint or a URL) with our API key and URL password masked."""
        return redact_secrets(text, self._secrets)

    @contextlib.contextmanager
    def watching(self, listener: Callable[[Completion], None]) -> Iterator[None]:
        """Call ``listener`` with every Completion, like ``on_call``, while the block runs."""
        self._listeners.append(listener)
        try:
            yield
        finally:
            self._listeners.remove(listener)

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
            problem = short(str(exc))
        repair = repair_request(messages, first.text, problem)
        second = await self.complete(repair, purpose=purpose, **kwargs)
        try:
            return validate(parse_json_reply(second.text)), [first, second]
        except ValueError as exc:
            raise InvalidReply(
                f"{purpose}: the model's JSON reply was invalid twice ({short(str(exc))}); "
                f"calls {first.call_id}, {second.call_id}",
                call_ids=[first.call_id, second.call_id],
                hint="see the replies with the call ids; a larger model or a clearer prompt may help",
            ) from None

    # -- internals ---------------------------------------------------------------------------
    def _notify(self, done: Completion) -> Completion:
        for listener in self._listeners:
            listener(done)
        return done

    async def _complete(
        self,
        call_id: str,
        messages: list[dict[str, str]],
        params: dict[str, Any],
        seed: int | None,
        sample: int,
        purpose: str,
    ) -> Completion:
        stored = await self.ledger.lookup(call_id)
        if stored is not None:
            self.cached_calls += 1
            return stored
        if self.put_aside is not None:
            deferred = self.put_aside.offer(call_id, lambda: self._batch_request(call_id, messages, params, seed,
                                                                                 sample, purpose))
            if deferred is not None:
                self.deferred_calls += 1
                raise deferred
        async with self._sem:
            record, outcome = await self._paid_call(call_id, messages, params, seed, sample, purpose)
        # Committed outside the slot: the slot bounds requests to the endpoint, not commits. A
        # task of its own, shielded: a caller cancelled now (the run stopped) loses the reply, but
        # the paid call is still recorded and counted in ``spent``.
        saving = asyncio.ensure_future(self._save(record))
        self._saving.add(saving)
        saving.add_done_callback(self._saving.discard)
        await asyncio.shield(saving)
        if isinstance(outcome, LLMError):
            raise outcome
        return outcome

    async def _save(self, record: dict[str, Any]) -> None:
        await self.ledger.record(record)
        self._spent += record["cost"]

    async def settled(self) -> None:
        """Wait until every call answered so far is in the ledger and in :attr:`spent`, including
        those whose callers were cancelled meanwhile (a stopped run)."""
        while self._saving:
            await asyncio.gather(*list(self._saving), return_exceptions=True)
        await self.budget.flush()

    def _estimate_prompt_tokens(self, messages: list[dict[str, str]]) -> int:
        chars = sum(len(str(m.get("content") or "")) for m in messages)
        return math.ceil(chars / self._chars_per_token) + MESSAGE_OVERHEAD_TOKENS * len(messages) + 3

    def _learn_density(self, messages: list[dict[str, str]], prompt_tokens: int) -> None:
        chars = sum(len(str(m.get("content") or "")) for m in messages)
        if prompt_tokens >= 32 and chars > 0:
            self._chars_per_token = max(1.0, min(self._chars_per_token, chars / prompt_tokens))

    def _halted(self) -> None:
        """Refuse a paid call after an endpoint claimed impossible usage in this gateway."""
        if self._usage_stop is not None:
            raise ImpossibleUsage(f"{self._usage_stop}; no further requests were sent", hint=_USAGE_HINT)

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
        wire, cap = wire_params(params, seed, sample, s.default_max_tokens)
        max_tokens = params.get("max_tokens")
        est_prompt = self._estimate_prompt_tokens(messages)
        bounds = UsageBounds.of(messages, cap)
        price = s.price
        worst = 0.0 if price is None else price.cost(bounds.worst_prompt, cap)  # what one attempt may cost

        def charged(tokens: tuple[int, int] | None) -> float:
            """What an attempt costs: its usage within the worst case, the worst case without usage."""
            if price is None:
                return 0.0
            return worst if tokens is None else price.cost(*bounds.clamp(tokens))

        failure = _Attempts(call_id, messages, wire, seed, sample, purpose)
        retries = malformed = 0
        nowhere: dict[Endpoint, Unreachable] = {}  # the endpoints that refused this request's connection
        endpoint: Endpoint | None = None  # the last attempt's: a retry prefers another
        while True:
            self._halted()
            if self._rpm is not None:
                await self._rpm.acquire(1)
            est_tokens = est_prompt + (max_tokens or 0)
            if self._tpm is not None:
                await self._tpm.acquire(est_tokens)
            self._transport.open()
            # An unpriced model costs nothing and is never stopped by a budget.
            held = None if price is None else await self.budget.reserve(worst)
            try:
                self._halted()  # again: another reply may have stopped the gateway while this one waited
            except ImpossibleUsage:
                self._settle(held, 0.0)
                raise
            meter = Meter(reply_limit(cap, s.default_max_tokens, s.max_reply_bytes))
            started = time.perf_counter()
            wait_hint: float | None = None  # what the endpoint said to wait
            try:
                endpoint = await self._transport.pick(avoid=endpoint)
                failure.endpoint = endpoint.shown
                reply = await self._transport.send(endpoint, {"model": s.model, "messages": messages, **wire}, meter)
                if meter.problem is not None:
                    raise Oversize(meter.problem)
                text, usage = usable_reply(reply, bounds)
            except (Oversize, Malformed, ValueError) as raised:
                # Unusable: cut off at the byte limit, not JSON, no choices or no content. An
                # oversize reply may have been billed up to its worst case.
                exc: Exception = raised if meter.problem is None else Oversize(meter.problem)
                tokens = (exc.prompt_tokens, exc.completion_tokens) if isinstance(exc, Malformed) else None
                # A body that is not JSON is no model's billed reply (a proxy's page): it costs 0.
                cost = 0.0 if tokens is None and not isinstance(exc, Oversize) else charged(tokens)
                self._settle(held, cost)
                failure.charge(cost, tokens)
                failure.body = self._kept_body(meter, exc)
                malformed += 1
                problem = self._problem(exc, meter)
                retryable = malformed <= s.malformed_retries
                failure.error_cls = ReplyTooLarge if isinstance(exc, Oversize) else LLMError
            except Impossible as exc:
                # The endpoint's figures cannot be trusted: charge the worst case, refuse the rest.
                self._settle(held, worst)
                failure.charge(worst, None)
                failure.body = {"claimed_usage": short(self.redact(json.dumps(usage_of(reply), default=str)), 500)}
                problem = self.redact(f"impossible usage from the endpoint: {exc}")
                self._usage_stop = f"{purpose}: model {s.model} at {failure.endpoint}: {problem}"
                return self._failure(failure, problem, hint=_USAGE_HINT, error_cls=ImpossibleUsage)
            except openai.APIStatusError as exc:
                self._settle(held, 0.0)
                failure.error_cls = LLMError
                problem = self.redact(f"HTTP {exc.status_code}: {_status_message(exc)}")
                retryable = exc.status_code in RETRYABLE_STATUS or exc.status_code >= 500
                wait_hint = retry_after(exc.response.headers)
                if not retryable:
                    auth = exc.status_code in (401, 403)
                    return self._failure(failure, problem, hint=_status_hint(exc.status_code),
                                         error_cls=EndpointAuthError if auth else LLMError)
            except (openai.APITimeoutError, asyncio.TimeoutError):
                self._settle(held, 0.0)
                failure.error_cls = LLMError
                problem, retryable = f"no complete reply within {s.timeout_s:g} s", True
            except openai.APIConnectionError as exc:
                self._settle(held, 0.0)
                failure.error_cls = LLMError
                assert endpoint is not None  # only send() raises it
                if (cannot := unreachable(exc, endpoint.shown)) is not None:
                    # Refused, or no such host: no retry mends it. Another endpoint may still be up.
                    nowhere[endpoint] = cannot
                    if len(nowhere) == len(self._transport.endpoints):
                        return self._failure(failure, "; ".join(c.problem for c in nowhere.values()),
                                             hint=" / ".join(dict.fromkeys(c.hint for c in nowhere.values())),
                                             error_cls=EndpointUnreachable)
                problem, retryable = self.redact(f"connection failed: {short(str(exc.__cause__ or exc))}"), True
            except BaseException:
                self._settle(held, 0.0)  # cancelled (Ctrl-C) or a bug: release, record nothing
                raise
            else:
                latency_ms = (time.perf_counter() - started) * 1000
                prompt_tokens, completion_tokens = usage or (0, 0)
                cost = charged(usage)
                self._settle(held, cost)
                self.paid_calls += 1
                if self._tpm is not None:
                    self._tpm.refund(est_tokens - (prompt_tokens + completion_tokens))
                self._learn_density(messages, prompt_tokens)
                if self._secrets:  # an endpoint that echoes our key must not get it stored
                    text, reply = self.redact_own(text), map_strings(reply, self.redact_own)
                total = cost + failure.cost
                record = dict(
                    id=call_id, model=s.model, endpoint=endpoint.shown, messages=messages, params=wire,
                    seed=seed, sample=sample, response=reply,
                    text=text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                    cost=total, latency_ms=latency_ms, status="ok", error=None, purpose=purpose,
                    created_at=utcnow(), **_price_fields(s),
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
            wait = backoff_delay(retries, wait_hint, first_s=s.backoff_s, max_s=s.backoff_max_s, jitter=self._jitter)
            log.warning("%s: %s; retry %d/%d in %.2f s (call %s)", purpose, problem, retries, s.max_retries,
                        wait, call_id)
            await asyncio.sleep(wait)

    def _batch_request(self, call_id: str, messages: list[dict[str, str]], params: dict[str, Any], seed: int | None,
                       sample: int, purpose: str) -> BatchRequest:
        """This request as a batch line would send it (the same body as the online transport)."""
        return BatchRequest.of(self.settings.model, messages, params, seed, sample, purpose,
                               self.settings.default_max_tokens)

    def _settle(self, held: Hold | None, cost: float) -> None:
        """Give back an attempt's hold on the budget and spend what it cost (an unpriced model
        took no hold and costs nothing)."""
        if held is not None:
            self.budget.settle(held, cost)

    def redact_own(self, text: str) -> str:
        """``text`` with our own secrets masked, and nothing else changed (for model output)."""
        for secret in self._secrets:
            if len(secret) >= MIN_SECRET_LENGTH and secret in text:
                text = text.replace(secret, MASK)
        return text

    def _problem(self, exc: Exception, meter: Meter) -> str:
        if isinstance(exc, Oversize):
            return (f"{exc} (the most an honest reply to max_tokens allows); cut off there after "
                    f"{meter.received:,} bytes, not stored whole and never sent back")
        return self.redact(f"malformed reply: {short(str(exc))}")

    def _kept_body(self, meter: Meter, exc: Exception) -> dict[str, Any]:
        """What an error record keeps of an unusable body: its redacted start and its size."""
        kept: dict[str, Any] = {"body_start": self.redact(meter.head_text), "bytes_received": meter.received,
                                "byte_limit": meter.limit}
        if isinstance(exc, Oversize):
            kept["truncated"] = True
        return kept

    def _failure(
        self, attempts: "_Attempts", problem: str, *, hint: str | None, error_cls: type[LLMError] = LLMError
    ) -> tuple[dict[str, Any], LLMError]:
        """The failure's record (never ok: a later run retries the call) and its error."""
        self.failed_calls += 1
        problem = self.redact(problem)
        endpoint = attempts.endpoint or self.endpoint  # the last attempt's; before any: all of them
        record = dict(
            id=attempts.call_id, model=self.settings.model, endpoint=endpoint, messages=attempts.messages,
            params=attempts.params, seed=attempts.seed, sample=attempts.sample, response=attempts.body, text=None,
            prompt_tokens=attempts.tokens[0], completion_tokens=attempts.tokens[1], cost=attempts.cost,
            latency_ms=None, status="error", error=problem, purpose=attempts.purpose, created_at=utcnow(),
            **_price_fields(self.settings),
        )
        message = f"{attempts.purpose}: model {self.settings.model} at {endpoint}: {problem}"
        if issubclass(error_cls, InvalidReply):
            return record, error_cls(message, call_ids=[attempts.call_id], hint=hint)
        return record, error_cls(message, hint=hint)


_USAGE_HINT = ("the endpoint's token counts cannot be trusted, so the run stopped; check that [llm] base_url "
               "(or OPENAI_BASE_URL) is the endpoint you mean. The call is recorded at its worst-case cost")
_GAVE_UP_HINT = "check that the endpoint is up and the model name is right; re-run to retry"
_TOO_LARGE_HINT = ("the endpoint sends replies far longer than max_tokens allows; check the endpoint, or raise "
                   "[llm] max_reply_bytes if its replies are honest")


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
    endpoint: str = ""  # the endpoint of the last attempt, without its password

    def charge(self, cost: float, tokens: tuple[int, int] | None) -> None:
        self.cost += cost
        if tokens is not None:
            self.tokens[0] += tokens[0]
            self.tokens[1] += tokens[1]


def _status_message(exc: openai.APIStatusError) -> str:
    """The endpoint's own error message (OpenAI's {"error": {"message": ...}}), else the body."""
    body = exc.body
    if isinstance(body, Mapping) and body.get("message"):
        return short(str(body["message"]))
    return short(exc.response.text or exc.message)


def _status_hint(status: int) -> str:
    if status in (401, 403):
        return f"check the API key ({API_KEY_ENV} or the variable named by [llm] api_key_env)"
    if status == 404:
        return "check [llm] base_url (it usually ends in /v1) and the model name"
    return "the endpoint rejected the request; see the message above"



def _price_fields(settings: LLMSettings) -> dict[str, Any]:
    """What a call record says of its price: the rates it was charged at and their source."""
    price = settings.price
    return dict(price_input=None if price is None else price.input, price_output=None if price is None else price.output,
                price_source=settings.price_source, transport="online")


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

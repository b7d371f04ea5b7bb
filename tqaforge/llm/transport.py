"""How a chat request reaches a model: :class:`ChatTransport`, the online chat transport, over
one endpoint or several.

The gateway owns one and, for each attempt, asks it for an endpoint, then sends through it::

    endpoint = await transport.pick(avoid=last_endpoint)  # waits while every usable one is full
    reply = await transport.send(endpoint, body, meter)    # the endpoint's JSON reply, as it came

``pick`` and ``send`` are two calls because a failed attempt has no reply to name its endpoint:
the gateway keeps the endpoint it picked for the record (:attr:`Endpoint.shown`, without the
password) and passes it as ``avoid`` to the retry, which then prefers another endpoint. ``send``
always gives the endpoint's slot back and judges its health, whatever happens.

Several endpoints (``[llm] base_urls``):

- **Spread.** Each request goes to the usable endpoint with the fewest requests in flight (ties in
  turn), each endpoint taking at most ``endpoint_concurrency`` at once (default: ``concurrency``,
  which still bounds all of them together, in the gateway).
- **Down and back.** ``endpoint_failures`` failures in a row (connection errors, timeouts, 5xx;
  not 4xx such as 400/401/404/429 and not malformed replies: the endpoint answered) mark an
  endpoint down: it is left alone for ``endpoint_cooldown_s``, then one request probes it; a
  reply brings it back, a failure starts another cool-off. Both are logged (``tqaforge.llm``).
  A lone endpoint is never marked down: there is nowhere else to send its requests.
- **Never stuck.** When every endpoint is down, a request goes to the one whose cool-off ends
  first (the gateway's retries and backoff pace it); a request waits only while every endpoint it
  may use is full, and then a reply is on its way to free a slot.

The choice is a scan of the few endpoints, with no lock: the event loop runs one task at a time.

**Nowhere to send.** :func:`unreachable` tells a failed connection that no retry can mend (the
port refuses it: nothing listens there; the host name does not exist) from one that may mend (a
timeout, a reset, a temporary DNS failure), so that the gateway stops at once with the fix
instead of backing off for half a minute.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import openai

from tqaforge.errors import EndpointAuthError
from tqaforge.llm.replies import METER, Meter, hard_cap_hook, short
from tqaforge.llm.settings import API_KEY_ENV, BASE_URL_ENV, LLMSettings
from tqaforge.redact import redact_secrets, redact_url

__all__ = ["ChatTransport", "Endpoint", "EndpointStats", "Unreachable", "unreachable"]

log = logging.getLogger("tqaforge.llm")

DEFAULT_URL = "https://api.openai.com/v1"


@dataclass(eq=False)
class Endpoint:
    """One OpenAI-compatible endpoint and its state; counted and judged by :class:`ChatTransport`."""

    url: str | None = field(repr=False)  # as configured, password included; None: the client's default
    shown: str  # the URL as stored and shown: without its password
    limit: int  # requests in flight at most
    in_flight: int = 0
    requests: int = 0  # attempts sent
    failures: int = 0  # attempts that failed as the endpoint's fault (connection, timeout, 5xx)
    down_events: int = 0  # times it was marked down
    failed_in_row: int = 0
    down_until: float = 0.0  # time.monotonic() its cool-off ends; 0.0: up
    probing: bool = False  # the one request after a cool-off is on its way
    client: openai.AsyncOpenAI | None = field(default=None, repr=False)

    @property
    def down(self) -> bool:
        """True while the endpoint is marked down (cooling off or being probed)."""
        return self.down_until > 0.0


@dataclass(frozen=True)
class EndpointStats:
    """What one endpoint did so far (:meth:`ChatTransport.stats`)."""

    endpoint: str  # the URL without its password
    requests: int
    failures: int
    down_events: int
    down: bool
    in_flight: int


class ChatTransport:
    """POSTs ``/chat/completions`` to one of the settings' endpoints; see the module docstring.

    Clients are made by :meth:`open` (the gateway calls it before its first paid request, so a
    fully cached run needs no key and no endpoint); :meth:`aclose` closes them.
    """

    def __init__(self, settings: LLMSettings, secrets: tuple[str, ...] = ()) -> None:
        self.settings = settings
        self._secrets = secrets  # masked in what the log says of a failure
        limit = settings.endpoint_concurrency or settings.concurrency
        self.endpoints = [
            Endpoint(url, redact_url(url or _default_url()), limit) for url in settings.endpoint_urls
        ]
        self._turn = 0  # where the next scan starts: ties go round
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._opened = False

    # -- lifecycle ---------------------------------------------------------------------------
    def open(self) -> None:
        """Make the HTTP clients (once); EndpointAuthError when OpenAI is meant and no key is set."""
        if self._opened:
            return
        s = self.settings
        key = s.api_key
        if key is None:
            if s.endpoint_urls == (None,):
                raise EndpointAuthError(
                    "no API key for OpenAI",
                    hint=f"set {API_KEY_ENV} (or [llm] api_key_env), or point [llm] base_url at a local server",
                )
            key = "unused"  # vLLM, Ollama and llama.cpp accept any key unless told otherwise
        for endpoint in self.endpoints:
            # The response hook caps every body (ok or error) before the client reads it, and
            # identity encoding keeps a compressed body from inflating past the cap.
            http = openai.DefaultAsyncHttpxClient(event_hooks={"response": [hard_cap_hook(s.max_reply_bytes)]})
            endpoint.client = openai.AsyncOpenAI(
                api_key=key, base_url=endpoint.url, max_retries=0, timeout=s.timeout_s,
                http_client=http, default_headers={"Accept-Encoding": "identity"},
            )
        self._opened = True

    async def aclose(self) -> None:
        """Close the HTTP clients."""
        for endpoint in self.endpoints:
            if endpoint.client is not None:
                await endpoint.client.close()
                endpoint.client = None
        self._opened = False

    def stats(self) -> list[EndpointStats]:
        """Each endpoint's counters, in the order of the settings."""
        return [EndpointStats(e.shown, e.requests, e.failures, e.down_events, e.down, e.in_flight)
                for e in self.endpoints]

    # -- one attempt -------------------------------------------------------------------------
    async def pick(self, avoid: Endpoint | None = None) -> Endpoint:
        """An endpoint for one attempt, its slot taken; waits while every usable one is full.

        ``avoid`` (the endpoint of the previous, failed attempt) is taken only when no other
        will do. The slot must be given back by :meth:`send`, called right after.
        """
        first = True
        while True:
            endpoint = self._choose(avoid)
            if endpoint is not None:
                endpoint.in_flight += 1
                endpoint.requests += 1
                if endpoint.down and not endpoint.probing and time.monotonic() >= endpoint.down_until:
                    endpoint.probing = True  # the one request that tells whether it is back
                return endpoint
            waiter = asyncio.get_running_loop().create_future()
            # A waiter woken for a slot that another request took first keeps its place.
            if first:
                self._waiters.append(waiter)
            else:
                self._waiters.appendleft(waiter)
            first = False
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake()  # woken and cancelled at once: the wake-up goes to the next
                elif waiter in self._waiters:  # not yet dropped by a wake-up that skipped it
                    self._waiters.remove(waiter)
                raise

    async def send(self, endpoint: Endpoint, body: dict[str, Any], meter: Meter) -> Any:
        """POST the request to ``endpoint`` under a deadline for the whole exchange and a byte
        limit for its body; the endpoint's JSON as it came.

        client.post is the openai client's documented way to send a body as is: the same auth,
        errors and timeouts as chat.completions.create, without its typed request transform and
        response model (half the CPU of a call). The client's own timeout applies to each read
        only; wait_for makes ``timeout_s`` a deadline for the request as a whole (cancelling it
        closes the connection). Raises what the client raises; the slot is given back either way.
        """
        healthy: bool | None = True  # None: the attempt says nothing about the endpoint
        problem = ""
        token = METER.set(meter)
        try:
            assert endpoint.client is not None, "ChatTransport.open() first"
            return await asyncio.wait_for(
                endpoint.client.post("/chat/completions", body=body, cast_to=dict), timeout=self.settings.timeout_s
            )
        except openai.APIStatusError as exc:
            # A 4xx is the request's fault (or a rate limit): the endpoint is up.
            if exc.status_code >= 500:
                healthy, problem = False, f"HTTP {exc.status_code}"
            raise
        except (openai.APIConnectionError, asyncio.TimeoutError) as exc:
            # A body cut off at its byte limit is a reply, not a dead endpoint.
            if meter.problem is None:
                healthy = False
                problem = "timed out" if isinstance(exc, (openai.APITimeoutError, asyncio.TimeoutError)) else \
                    f"connection failed: {short(str(exc.__cause__ or exc), 200)}"
            raise
        except asyncio.CancelledError:
            healthy = None
            raise
        finally:
            METER.reset(token)
            self._finish(endpoint, healthy, problem)

    # -- internals ---------------------------------------------------------------------------
    def _choose(self, avoid: Endpoint | None) -> Endpoint | None:
        """The usable endpoint with a free slot and the fewest in flight (``avoid`` last, ties in
        turn); when every endpoint is down, the one whose cool-off ends first; None: wait."""
        endpoints = self.endpoints
        if len(endpoints) == 1:  # the common case, kept short: nothing to choose between
            only = endpoints[0]
            return only if only.in_flight < only.limit else None
        n = len(endpoints)
        start = self._turn
        self._turn = (start + 1) % n
        now = 0.0
        best: Endpoint | None = None
        any_up = False
        for i in range(n):
            e = endpoints[(start + i) % n]
            if e.down_until:
                if not now:
                    now = time.monotonic()
                if e.probing or now < e.down_until:
                    continue  # cooling off, or its probe is on its way
            else:
                any_up = True
            if e.in_flight >= e.limit:
                continue
            if best is None or (best is avoid and e is not avoid) or (
                (e is avoid) == (best is avoid) and e.in_flight < best.in_flight
            ):
                best = e
        if best is not None or any_up:
            return best  # None: the endpoints that are up are all full, and will free a slot
        # Every endpoint is down: the one whose cool-off ends first, rather than waiting for it.
        for i in range(n):
            e = endpoints[(start + i) % n]
            if e.in_flight < e.limit and (best is None or (best is avoid and e is not avoid) or (
                (e is avoid) == (best is avoid) and e.down_until < best.down_until
            )):
                best = e
        return best

    def _finish(self, endpoint: Endpoint, healthy: bool | None, problem: str) -> None:
        """Give the slot back and update the endpoint's health with the attempt's outcome."""
        endpoint.in_flight -= 1
        if healthy:
            endpoint.failed_in_row = 0
            if endpoint.down_until:
                endpoint.down_until, endpoint.probing = 0.0, False
                log.warning("LLM endpoint %s is back: it answered again", endpoint.shown)
        elif healthy is None:
            endpoint.probing = False  # a cancelled probe: the next request probes instead
        else:
            endpoint.failures += 1
            endpoint.failed_in_row += 1
            problem = redact_secrets(problem, self._secrets)
            if endpoint.down_until:
                # Still down (its probe, or a request sent while every endpoint was down): another cool-off.
                endpoint.down_until, endpoint.probing = time.monotonic() + self.settings.endpoint_cooldown_s, False
            elif endpoint.failed_in_row >= self.settings.endpoint_failures and len(self.endpoints) > 1:
                endpoint.down_until = time.monotonic() + self.settings.endpoint_cooldown_s
                endpoint.down_events += 1
                log.warning("LLM endpoint %s is down after %d failures in a row (last: %s); left alone for %g s",
                            endpoint.shown, endpoint.failed_in_row, problem, self.settings.endpoint_cooldown_s)
        if self._waiters:
            self._wake()

    def _wake(self) -> None:
        """Wake the first request waiting for a slot."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return


def _default_url() -> str:
    """Where the ``openai`` client sends requests when no base URL is set."""
    return os.environ.get(BASE_URL_ENV) or DEFAULT_URL


class Unreachable(NamedTuple):
    """Why a connection can never reach an endpoint: ``problem`` names its host and port,
    ``hint`` says what to do."""

    problem: str
    hint: str


# getaddrinfo's answers for a host name that does not exist (EAI_AGAIN, a temporary failure, is retried).
_NO_SUCH_HOST = frozenset(x for x in (getattr(socket, "EAI_NONAME", None), getattr(socket, "EAI_NODATA", None))
                          if x is not None)


def unreachable(exc: BaseException, url: str) -> Unreachable | None:
    """What a failed connection to ``url`` (the endpoint's URL, best without its password) says
    when no retry can help: the port refused it (nothing listens there) or the host name does
    not exist. None when a retry may help (a timeout, a reset, a temporary DNS failure).

    The ``openai`` client wraps the socket's error in its own and httpx's (``__cause__``), and
    a host with several addresses in an ``OSError("All connection attempts failed")``: the
    whole chain is searched."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = 443 if parts.scheme == "https" else 80
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    for cause in _causes(exc):
        if isinstance(cause, ConnectionRefusedError):
            return Unreachable(
                f"nothing listens on {where} (connection refused)",
                f"start the model server there (vLLM: vllm serve MODEL --host {host} --port {port}), or set "
                f"{BASE_URL_ENV} (or [llm] base_url) to where one listens; nothing was lost: run the command "
                "again to resume")
        if isinstance(cause, socket.gaierror) and cause.errno in _NO_SUCH_HOST:
            return Unreachable(
                f"the host name {host} does not resolve ({where}: {cause.strerror or 'no such host'})",
                f"check the host in {BASE_URL_ENV} (or [llm] base_url); nothing was lost: run the command again "
                "to resume")
    return None


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, its causes and contexts, and the members of exception groups among them."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo += [e.__cause__, e.__context__]
        if isinstance(e, BaseExceptionGroup):
            todo += list(e.exceptions)

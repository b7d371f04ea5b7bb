"""The HTTP client of Label Studio's API: every call retried with backoff, then a clear error.

Plain ``httpx`` (which ``label-studio-sdk`` is built on) rather than the SDK's generated client,
so that every request goes through one place: :meth:`LabelStudioClient.request`, which

- retries a call that failed for a passing reason (the server down, restarting, overloaded:
  connection refused, a timeout, HTTP 429 or 5xx) with exponential backoff, a few attempts within
  a bounded total time (:class:`ClientSettings`);
- retries a request that creates something (POST) only when it surely did not reach the server
  (the connection could not be made): a timed-out import may have created its tasks, and the
  next push finds them by their ``tqaforge_task_id`` instead of importing them twice;
- then raises :class:`~tqaforge.annotation.labelstudio.server.LabelStudioError` saying what was
  being done, where (the URL), what went wrong and what to do. What to do depends on what went
  wrong: a server that cannot be reached is to be started (or ``--url`` checked), but one that
  answers HTTP 5xx on every try is running and failing on this request
  (:class:`LabelStudioServerError`: its log says why), and telling its user to start it would
  send them the wrong way.

The URL is shown without its password (``--url http://admin:PW@host`` reads ``admin:***@host``),
and the API token and that password are masked in whatever the server or httpx says back
(:mod:`tqaforge.redact`), so no message of ours holds them.

>>> client = LabelStudioClient(client_settings("http://127.0.0.1:8080", token))  # doctest: +SKIP
>>> client.request("GET", "/api/projects/", what="list the projects")  # doctest: +SKIP
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any, Callable, Iterator

import httpx

from tqaforge.annotation.labelstudio.server import LabelStudioError
from tqaforge.redact import redact_secrets, redact_url, url_password
from tqaforge.tables.readers.jsonio import JSONNestingError, loads

#: HTTP statuses worth another try: the server is overloaded or (re)starting.
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
#: Methods that change nothing, or change to the same end state when repeated.
_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "PATCH", "DELETE", "OPTIONS"})
#: Items per page of a listing. Label Studio spends far more per request than per item (1,000
#: tasks, ~9 MB with their tables, come back in 1-2 s), so pages are large.
PAGE_SIZE = 1000


class LabelStudioRequestError(LabelStudioError):
    """Label Studio refused a request (HTTP 4xx other than 429): retrying would not help."""

    def __init__(self, message: str, *, status: int, detail: str = "", hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status
        self.detail = detail


class LabelStudioServerError(LabelStudioError):
    """Label Studio answered every try with HTTP 5xx: it runs, but fails on this request (a bug or
    data it cannot handle, such as a lone surrogate in an annotation; its log has the traceback)."""

    def __init__(self, message: str, *, status: int, detail: str = "", hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status
        self.detail = detail


#: What to do after the last try, by what went wrong with it.
_KEPT = "what was synced so far is kept, and running the same command again completes the rest without duplicating anything"
_HINT_UNREACHABLE = f"start Label Studio (`tqaforge labelstudio start`) or check --url; {_KEPT}"
_HINT_BUSY = f"Label Studio is overloaded or restarting: wait a little and run the command again; {_KEPT}"
_HINT_FAILING = (
    "Label Studio is running but fails on this request (an error inside the server: its log says why, "
    f"label-studio/label-studio.log in the workspace for its own server); {_KEPT}"
)
_HINT_SILENT = f"Label Studio did not answer in time: is it overloaded, or is --url another program? {_KEPT}"


@dataclass(frozen=True)
class ClientSettings:
    """Where Label Studio is, the token to call it with, and how hard to try.

    Each call gets ``attempts`` tries at most, waiting ``backoff``, then twice that, ... between
    them, and gives up once ``max_total`` seconds have passed since its first try.
    """

    url: str = field(repr=False)  # shown as display_url: never with its password
    token: str = field(repr=False)
    timeout: float = 15.0
    attempts: int = 4
    backoff: float = 0.5
    max_total: float = 30.0

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise LabelStudioError(
                f"Label Studio's URL must start with http:// or https://, got {redact_url(self.url)!r}",
                hint="give the URL the server prints, e.g. http://127.0.0.1:8080",
            )
        try:
            httpx.URL(self.url)  # a port that is no number, a broken [IPv6] address: here, not a traceback later
        except (httpx.InvalidURL, ValueError) as exc:
            raise LabelStudioError(
                f"Label Studio's URL {redact_url(self.url)!r} is not a valid URL: {self.redact(str(exc))}",
                hint="give the URL the server prints, e.g. http://127.0.0.1:8080",
            ) from None
        if not self.token.strip():
            raise LabelStudioError("no Label Studio API token given", hint="copy it from Label Studio: Account & Settings")
        if self.attempts < 1 or self.timeout <= 0 or self.backoff < 0 or self.max_total <= 0:
            raise LabelStudioError("attempts must be 1 or more, and timeout, backoff and max_total positive")

    @property
    def base_url(self) -> str:
        """The URL requests go to, with any user information: never shown (see :attr:`display_url`)."""
        return self.url.rstrip("/")

    @property
    def display_url(self) -> str:
        """The URL as messages show it: its password masked."""
        return redact_url(self.base_url)

    def redact(self, text: str) -> str:
        """``text`` (a reply, an httpx error) with the API token and the URL's password masked."""
        return redact_secrets(text, [self.token, url_password(self.url)])

    def __repr__(self) -> str:
        return (f"ClientSettings(url={self.display_url!r}, timeout={self.timeout!r}, attempts={self.attempts!r}, "
                f"backoff={self.backoff!r}, max_total={self.max_total!r})")


def client_settings(url: str, token: str, **options: Any) -> ClientSettings:
    """:class:`ClientSettings` for the server at ``url`` called with ``token`` (``options``:
    ``timeout``, ``attempts``, ``backoff``, ``max_total``)."""
    return ClientSettings(url=url, token=token, **options)


def _auth_header(token: str) -> str:
    # Legacy tokens (40 hex characters) go as "Token"; personal access tokens (JWTs) as "Bearer".
    return f"Bearer {token}" if token.count(".") == 2 else f"Token {token}"


def _date_header(response: httpx.Response) -> datetime | None:
    try:
        moment = parsedate_to_datetime(response.headers.get("date", ""))
    except (TypeError, ValueError):
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _detail(response: httpx.Response) -> str:
    text = response.text.strip()
    if text[:200].lstrip().lower().startswith(("<!doctype html", "<html")):
        # An error page (Label Studio's 500 page is 4 kB of script): its title says all it can.
        title = re.search(r"(?is)<title[^>]*>(.*?)</title>", text)
        text = f"an HTML error page ({' '.join(title.group(1).split())})" if title else "an HTML error page"
    text = text.replace("\n", " ")
    return text[:300] + ("..." if len(text) > 300 else "")


def _encode(body: Any, what: str) -> bytes:
    """``body`` as the UTF-8 JSON httpx would send. Text that UTF-8 cannot carry (a lone surrogate)
    is refused here, naming the request, instead of escaping as a traceback from inside httpx;
    it is never sent escaped either: Label Studio would store it and then fail with HTTP 500 on
    every listing that includes it."""
    try:
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise LabelStudioError(
            f"cannot {what}: the data holds text that is not valid Unicode ({exc.reason}: "
            f"{exc.object[max(exc.start - 20, 0):exc.end + 20]!r})",
            hint="the text came from the store (an imported file, a model's reply): fix it there; nothing was sent",
        ) from None
    except ValueError as exc:
        raise LabelStudioError(f"cannot {what}: the data is not JSON ({exc}); nothing was sent") from None


class LabelStudioClient:
    """One connection to one Label Studio server (close it, or use it as a context manager)."""

    def __init__(
        self,
        settings: ClientSettings,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.settings = settings
        self._sleep = sleep
        #: The server's clock (the ``Date`` header) at its latest reply, when it sends one: the
        #: watermark of an incremental pull is taken from the server, never from this machine.
        self.server_time: datetime | None = None
        self._http = httpx.Client(
            base_url=settings.base_url,
            headers={"Authorization": _auth_header(settings.token), "Accept": "application/json"},
            timeout=settings.timeout,
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> LabelStudioClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        what: str,
        json: Any = None,
        params: dict[str, Any] | None = None,
        ok_missing: bool = False,
        safe: bool = False,
        attempts: int | None = None,
    ) -> Any:
        """Send one request, retrying passing failures; the decoded JSON reply (None when empty,
        or on HTTP 404 with ``ok_missing``). ``what`` says what the call is for, in error messages;
        ``safe`` marks a POST that changes nothing (a validation), so it is retried like a GET;
        ``attempts`` (at most the settings' own) tries fewer times, for a probe whose failure
        the caller handles itself.

        Raises :class:`LabelStudioRequestError` on HTTP 4xx, :class:`LabelStudioServerError`
        when every try was answered with HTTP 5xx, :class:`LabelStudioError` otherwise."""
        method = method.upper()
        where = f"{method} {self.settings.display_url}{path}"
        shown = self.settings.redact
        content = _encode(json, what) if json is not None else None
        headers = {"Content-Type": "application/json"} if content is not None else None
        tries = min(attempts, self.settings.attempts) if attempts is not None else self.settings.attempts
        started = time.monotonic()
        wait = self.settings.backoff
        problem, hint, status = "", _HINT_UNREACHABLE, 0
        for attempt in range(1, tries + 1):
            retry_safe = safe or method in _IDEMPOTENT
            status = 0
            try:
                response = self._http.request(method, path, content=content, headers=headers, params=params)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                problem, hint = shown(f"cannot connect ({exc.__class__.__name__}: {exc})"), _HINT_UNREACHABLE
                retry_safe = True  # nothing reached the server
            except httpx.TransportError as exc:
                problem, hint = shown(f"{exc.__class__.__name__}: {exc or 'no reply'}"), _HINT_SILENT
            else:
                if response.status_code in RETRY_STATUSES:
                    status = response.status_code
                    problem = shown(f"HTTP {status}: {_detail(response)}")
                    hint = _HINT_BUSY if status in (429, 502, 503, 504) else _HINT_FAILING
                    retry_safe = retry_safe or status == 429
                elif ok_missing and response.status_code == 404:
                    return None
                elif response.status_code >= 400:
                    hint = (
                        "check the API token (Label Studio: Account & Settings)"
                        if response.status_code in (401, 403) else "this is a bug or a changed server; the reply says what it refused"
                    )
                    detail = shown(_detail(response))
                    raise LabelStudioRequestError(
                        f"Label Studio refused to {what}: HTTP {response.status_code} from {where}: {detail}",
                        status=response.status_code, detail=detail, hint=hint,
                    )
                else:
                    self.server_time = _date_header(response) or self.server_time
                    if not response.content:
                        return None
                    try:
                        # The one bounded JSON reader: a result an annotator nested 100,000 deep
                        # (Label Studio stores any JSON) is an error naming the request, not a
                        # RecursionError traceback.
                        return loads(response.text)
                    except JSONNestingError as exc:
                        raise LabelStudioError(
                            f"Label Studio's reply to {what} ({where}): {exc}",
                            hint="a task or an annotation holds a value nested that deep: find it in Label Studio and delete it",
                        ) from None
                    except ValueError:
                        raise LabelStudioError(
                            f"Label Studio's reply to {what} is not JSON ({where}): {shown(_detail(response))}",
                            hint="is this URL a Label Studio server? check --url",
                        ) from None
            elapsed = time.monotonic() - started
            if not retry_safe or attempt == tries or elapsed + wait > self.settings.max_total:
                made = f"{attempt} attempt{'s' if attempt > 1 else ''} in {elapsed:.1f} s"
                message = f"could not {what}: {where} failed after {made}: {problem}"
                if status >= 500:
                    raise LabelStudioServerError(message, status=status, detail=problem, hint=hint)
                raise LabelStudioError(message, hint=hint)
            self._sleep(wait)
            wait *= 2
        raise AssertionError("unreachable")  # pragma: no cover

    def pages(
        self, path: str, *, what: str, params: dict[str, Any], key: str, page_size: int = PAGE_SIZE,
    ) -> Iterator[dict[str, Any]]:
        """Every item of a paged listing (``page``/``page_size``; the items under ``key``, or a bare list);
        :class:`LabelStudioRequestError` (status 404) when the listing does not exist.

        Pages are large (fewer round trips: Label Studio's cost per request is high), and when the
        reply says how many items there are, that count decides the end, not a short page: a
        server capping ``page_size`` (``TASK_API_PAGE_SIZE_MAX``) sends short pages that are not
        the last one."""
        page = 1
        seen = 0
        while True:
            # Label Studio answers 404 "Invalid page" past the end; on the first page (which an
            # empty listing has too) a 404 means the listing itself is gone (a deleted project),
            # which must not read as "nothing there".
            reply = self.request("GET", path, what=what, params={**params, "page": page, "page_size": page_size}, ok_missing=page > 1)
            if reply is None:
                return
            items = reply if isinstance(reply, list) else reply.get(key) or []
            yield from items
            seen += len(items)
            total = reply.get("total", reply.get("count")) if isinstance(reply, dict) else None
            if isinstance(reply, list) or not items:
                return
            if isinstance(total, int) and not isinstance(total, bool):
                if seen >= total:
                    return
            elif len(items) < page_size:
                return
            page += 1

"""A loopback OpenAI-compatible chat completions server for tests and benchmarks.

Serves ``POST /v1/chat/completions`` with the JSON shape the real ``openai`` client parses, with
scripted replies, latencies and faults (HTTP errors, ``Retry-After``, timeouts, malformed JSON,
empty choices, missing content, a reply dripped one byte at a time, an error that echoes the
request's ``Authorization`` header, any ``usage`` figures). It counts what it *delivers*: ``paid`` only grows when a 200
reply with choices was written to a client that was still connected, so a test can assert that
no request was paid twice.

In a test::

    with OpenAIServer(lambda body: "hello", latency_s=0.05) as server:
        settings = LLMSettings(model="m", base_url=server.url, api_key="x")

As a process (benchmarks, subprocess tests); prints ``ready http://127.0.0.1:PORT/v1``::

    python tests/openai_server.py --port 0 --latency 0.2 --echo
    python tests/openai_server.py --reply tests/my_replies.py:reply --stall-after 10
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import importlib
import importlib.util
import json
import select
import socket
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable


@dataclass
class Scripted:
    """What the server does for one request."""

    text: str | None = None  # assistant content; None with status 200 sends "content": null
    status: int = 200  # e.g. 429, 500
    delay_s: float | None = None  # overrides the server latency (> client timeout: a timeout)
    raw: bytes | None = None  # this body instead (malformed JSON), sent with `status`
    empty_choices: bool = False
    prompt_tokens: int | None = None  # default: about chars / 4 of the messages
    completion_tokens: int | None = None  # default: about chars / 4 of the text
    headers: dict[str, str] | None = None  # extra response headers, e.g. {"Retry-After": "1"}
    finish_reason: str = "stop"
    drip_s: float | None = None  # send the response (head and body) one byte every drip_s seconds
    echo_headers: bool = False  # a non-200 error message that quotes the request's Authorization header
    usage: Any = None  # this "usage" value as is (e.g. {"completion_tokens": "lots"}), instead of the counts


Reply = Callable[[dict], "Scripted | str"]


def fingerprint(body: dict) -> str:
    """The hash of a request body (canonical JSON): two equal requests share it."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def estimate_tokens(text: str) -> int:
    return max(1, (len(text) + 3) // 4)


def echo_reply(body: dict) -> str:
    """The content of the last message: deterministic and distinct for distinct requests."""
    messages = body.get("messages") or [{}]
    return str(messages[-1].get("content", ""))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the openai client expects
    disable_nagle_algorithm = True  # headers and body go out at once; no 40 ms delayed-ACK stalls
    server: "_Server"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    def do_GET(self) -> None:  # health check / model list
        self._send(200, json.dumps({"object": "list", "data": []}).encode())

    def do_POST(self) -> None:
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, _error_body(404, f"no route {self.path}"))
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._send(400, _error_body(400, "request body is not JSON"))
            return
        script, stalled, promised = owner._receive(body, dict(self.headers.items()))
        answered = False  # in_flight is decremented before the client can see the reply
        try:
            if stalled:
                self._wait(None)
                owner._unstall()
                return
            owner._held()
            delay = script.delay_s if script.delay_s is not None else owner.latency_s
            if not self._wait(delay):
                return  # the client hung up while we were "thinking": nothing delivered
            status, payload, headers = owner._render(body, script, dict(self.headers.items()))
            owner._answering()
            answered = True
            try:
                if script.drip_s is not None:
                    if not self._drip(self._frame(status, payload, headers), script.drip_s):
                        owner._settle(None, promised)
                        return
                else:
                    self._send(status, payload, headers)
            except OSError:
                owner._settle(None, promised)
                return
            owner._settle((body, status, script), promised)
        finally:
            if not answered:
                owner._answering()
                owner._settle(None, promised)

    def _wait(self, delay: float | None) -> bool:
        """Sleep ``delay`` (None: until shutdown); False when the client closed meanwhile."""
        deadline = None if delay is None else time.monotonic() + delay
        while True:
            if self.server.owner._closing.is_set():
                return False
            left = 0.2 if deadline is None else min(0.2, deadline - time.monotonic())
            if left <= 0:
                return True
            # Readable before we replied means EOF or a reset: httpx never pipelines requests.
            readable, _, _ = select.select([self.connection], [], [], left)
            if readable:
                try:
                    if not self.connection.recv(1, socket.MSG_PEEK):
                        return False
                except OSError:
                    return False

    def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
        self.wfile.write(self._frame(status, payload, headers))
        self.wfile.flush()

    @staticmethod
    def _frame(status: int, payload: bytes, headers: dict[str, str] | None = None) -> bytes:
        head = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}", "Content-Type: application/json",
                f"Content-Length: {len(payload)}"]
        for key, value in (headers or {}).items():
            head.append(f"{key}: {value}")
        return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + payload

    def _drip(self, data: bytes, every_s: float) -> bool:
        """Write ``data`` one byte every ``every_s`` s; False when the client left meanwhile."""
        for i in range(len(data)):
            self.wfile.write(data[i : i + 1])
            self.wfile.flush()
            if i + 1 < len(data) and not self._wait(every_s):
                return False
        return True


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
            429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway",
            503: "Service Unavailable"}


def _error_body(status: int, message: str) -> bytes:
    kind = "rate_limit_exceeded" if status == 429 else "server_error" if status >= 500 else "invalid_request_error"
    return json.dumps({"error": {"message": message, "type": kind, "code": str(status)}}).encode()


class QuietServer(ThreadingHTTPServer):
    """A threading HTTP server for test endpoints: a client hanging up is not printed."""

    daemon_threads = True
    request_queue_size = 256  # the default backlog of 5 drops SYNs when 32 clients connect at once

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hung up (a deadline, a budget stop) resets its keep-alive connection: that
        # is expected, and socketserver's traceback would land on the stderr a CliRunner captures,
        # in the very output the tests read. Anything else is a bug in this server: printed.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Server(QuietServer):
    owner: "OpenAIServer"


class OpenAIServer:
    """An OpenAI-compatible HTTP server on 127.0.0.1:<free port>, run in a thread.

    ``reply`` gets the parsed JSON body of each request and returns a :class:`Scripted` or a
    plain string (the content). It is called under a lock, in arrival order, so a closure may
    keep state (e.g. "fail the first two requests") without locking of its own.
    """

    def __init__(self, reply: Reply, *, latency_s: float = 0.0, host: str = "127.0.0.1", port: int = 0) -> None:
        self.reply = reply
        self.latency_s = latency_s
        self.requests: list[dict] = []
        self.request_headers: list[dict[str, str]] = []  # the HTTP headers of each request, as `requests`
        self.errors: list[Exception] = []  # exceptions raised by `reply`
        self.arrivals: list[float] = []  # time.monotonic() of each request, as `requests`
        self.paid: collections.Counter[str] = collections.Counter()
        self.statuses: collections.Counter[int] = collections.Counter()  # replies written, by status
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Condition()
        self._stall_after: int | None = None
        self._promised = 0  # requests admitted under stall_after that may still become paid
        self._unsettled = 0  # requests received and not yet settled (delivered, failed or hung up)
        self._stalled = 0  # of those, the ones held by stall_after (they can never become paid)
        self._hold: tuple[int, float] | None = None  # (in flight wanted, deadline): see hold_until_in_flight
        self._closing = threading.Event()
        self._httpd = _Server((host, port), _Handler)
        self._httpd.owner = self
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "OpenAIServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="openai-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._closing.set()
        if self._thread is not None:  # shutdown() waits for serve_forever, which must be running
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> "OpenAIServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what tests ask ----------------------------------------------------------------------
    @property
    def total_paid(self) -> int:
        with self._lock:
            return sum(self.paid.values())

    def stall_after(self, n: int | None) -> None:
        """After ``n`` paid replies, every further request hangs (unpaid) until the client leaves.

        ``None`` lifts the stall for requests that arrive from now on.
        """
        with self._lock:
            self._stall_after = n

    def hold_until_in_flight(self, n: int, timeout: float) -> None:
        """Hold every reply until ``n`` requests are in flight at once, or ``timeout`` s passed.

        A one-shot gate: once either happens every request is answered as usual. A test that
        asserts concurrency (``max_in_flight``) then does not depend on the host being quick
        enough for requests to overlap by chance, and a client that never overlaps costs one
        ``timeout``, not one per request.
        """
        with self._lock:
            self._hold = (n, time.monotonic() + timeout)

    def _held(self) -> None:
        with self._lock:
            while self._hold is not None:
                n, deadline = self._hold
                left = deadline - time.monotonic()
                if self.in_flight >= n or left <= 0 or self._closing.is_set():
                    self._hold = None
                    self._lock.notify_all()
                    break
                self._lock.wait(min(left, 0.2))

    def only_stalled_left(self) -> bool:
        """True when every request not yet settled is held by :meth:`stall_after`: no reply is on
        its way, so the paid count cannot grow until the stall is lifted."""
        with self._lock:
            return self._unsettled == self._stalled

    def _unstall(self) -> None:
        with self._lock:
            self._stalled -= 1

    def wait_paid(self, n: int, timeout: float) -> None:
        """Block until at least ``n`` replies were paid; TimeoutError after ``timeout`` seconds."""
        self._wait_count(lambda: sum(self.paid.values()), n, timeout, "paid replies")

    def wait_requests(self, n: int, timeout: float) -> None:
        """Block until at least ``n`` requests were received; TimeoutError after ``timeout`` s.

        A client that gave up on a request may have sent it before the accept loop read it: a test
        that counts attempts waits here, inside the server's lifetime, before it counts.
        """
        self._wait_count(lambda: len(self.requests), n, timeout, "requests")

    def _wait_count(self, count: Callable[[], int], n: int, timeout: float, what: str) -> None:
        """Block until ``count()`` (read under the lock) is at least ``n``; TimeoutError after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while count() < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{count()} {what} after {timeout}s, wanted {n}")
                self._lock.wait(left)

    # -- called by the handler threads -------------------------------------------------------
    def _receive(self, body: dict, headers: dict[str, str] | None = None) -> tuple[Scripted, bool, bool]:
        with self._lock:
            self.requests.append(body)
            self.request_headers.append(dict(headers or {}))
            self.arrivals.append(time.monotonic())
            self.in_flight += 1
            self._unsettled += 1
            self._lock.notify_all()
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            if self._stall_after is not None:
                if sum(self.paid.values()) + self._promised >= self._stall_after:
                    self._stalled += 1
                    return Scripted(), True, False
                self._promised += 1
            promised = self._stall_after is not None
            try:
                script = self.reply(body)
            except Exception as exc:  # a broken test script: answer 500 and keep it for the test
                self.errors.append(exc)
                script = Scripted(status=500)
        return (Scripted(text=script) if isinstance(script, str) else script), False, promised

    def _answering(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _settle(self, delivered: tuple[dict, int, Scripted] | None, promised: bool) -> None:
        """Count a delivered reply (billing 200s with choices) and release its stall promise."""
        with self._lock:
            self._unsettled -= 1
            if delivered is not None:
                body, status, script = delivered
                self.statuses[status] += 1
                if status == 200 and script.raw is None and not script.empty_choices:
                    self.paid[fingerprint(body)] += 1
            if promised:
                self._promised -= 1
            self._lock.notify_all()

    def _render(self, body: dict, script: Scripted, request_headers: dict[str, str] | None = None
                ) -> tuple[int, bytes, dict[str, str]]:
        return render_reply(body, script, request_headers)


def render_reply(body: dict, script: Scripted, request_headers: dict[str, str] | None = None
                 ) -> tuple[int, bytes, dict[str, str]]:
    """The status, body and headers of the reply that ``script`` scripts for request ``body``
    (shared with tests/batch_server.py, whose batch lines carry the same bodies)."""
    headers = dict(script.headers or {})
    if script.raw is not None:
        return script.status, script.raw, headers
    if script.status != 200:
        message = f"scripted {script.status}"
        if script.echo_headers:  # what careless proxies do: quote the request back
            auth = {k.lower(): v for k, v in (request_headers or {}).items()}.get("authorization", "")
            message += f"; you sent Authorization: {auth}"
        return script.status, _error_body(script.status, message), headers
    prompt = script.prompt_tokens
    if prompt is None:
        prompt = sum(estimate_tokens(str(m.get("content", ""))) for m in body.get("messages", []))
    completion = script.completion_tokens
    if completion is None:
        completion = estimate_tokens(script.text or "")
    choices = [] if script.empty_choices else [{
        "index": 0,
        "message": {"role": "assistant", "content": script.text},
        "finish_reason": script.finish_reason,
        "logprobs": None,
    }]
    reply = {
        "id": "chatcmpl-" + fingerprint(body),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "unknown"),
        "choices": choices,
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                  "total_tokens": prompt + completion} if script.usage is None else script.usage,
    }
    return 200, json.dumps(reply).encode(), headers


def _load_reply(spec: str) -> Reply:
    """``path/to/file.py:func`` or ``package.module:func``."""
    target, _, name = spec.rpartition(":")
    if not target or not name:
        raise SystemExit(f"--reply wants FILE.py:FUNC or MODULE:FUNC, got {spec!r}")
    if target.endswith(".py"):
        module_spec = importlib.util.spec_from_file_location("_replies", target)
        assert module_spec is not None and module_spec.loader is not None
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    return getattr(module, name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Loopback OpenAI-compatible server.")
    parser.add_argument("--port", type=int, default=0, help="0: a free port (printed)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each reply")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--echo", action="store_true", help="reply with the last message's content")
    group.add_argument("--reply", help="FILE.py:FUNC or MODULE:FUNC returning Scripted or str")
    parser.add_argument("--stall-after", type=int, default=None, help="hang every request after N paid")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    reply = echo_reply if args.echo else _load_reply(args.reply)
    server = OpenAIServer(reply, latency_s=args.latency, port=args.port)
    if args.stall_after is not None:
        server.stall_after(args.stall_after)
    server.start()
    print(f"ready {server.url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

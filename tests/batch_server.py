"""A loopback OpenAI Batch API server (files + batches) for tests and benchmarks, with the online
``/v1/chat/completions`` too, so a test can show that a later online run pays nothing.

Serves what the real ``openai`` client's ``files`` and ``batches`` resources call:
``POST /v1/files`` (multipart, purpose batch), ``GET /v1/files`` (paginated), ``GET
/v1/files/{id}``, ``GET /v1/files/{id}/content``, ``POST /v1/batches``, ``GET /v1/batches``
(newest first, paginated), ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``.

A batch moves validating -> in_progress -> finalizing -> completed, one state per
``polls_per_state`` reads of it (``GET /v1/batches/{id}``), or per ``state_s`` seconds when set.
Its lines are *processed* (answered by ``reply``, as in tests/openai_server.py, and counted per
custom_id in :attr:`BatchServer.processed`) when it reaches finalizing. The next batches created
follow the scripted :class:`Outcome` s queued with :meth:`BatchServer.script`: expired with a
partial output, failed validation, a batch that lies about its state, extra raw lines in the output
file (malformed, unknown custom ids). A line whose reply is not a 200 goes to the error file.

Kill points: :meth:`BatchServer.kill_at` SIGKILLs a process right after an uploaded file is
stored (``file_stored``), right after a batch is created (``batch_created``), both before the
reply is sent, or after half of an output file's bytes were sent (``output_midstream``). A
control endpoint returns the counts: ``GET /_control/counts``; ``POST /_control/kill`` with
``{"at": POINT, "pid": PID}`` sets a kill point from outside.

    with BatchServer(lambda body: "hello") as server:
        settings = LLMSettings(model="m", base_url=server.url, api_key="x")
"""

from __future__ import annotations

import collections
import json
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))

from openai_server import QuietServer, Reply, Scripted, _error_body, echo_reply, fingerprint, render_reply  # noqa: E402

KILL_POINTS = ("file_stored", "batch_created", "output_midstream")
FLOW = ("validating", "in_progress", "finalizing", "completed")


@dataclass
class Outcome:
    """How one batch ends.

    ``kind``: ``complete``; ``expire`` (the first ``partial`` lines answered, the rest in the
    error file as batch_expired); ``fail`` (validation fails, nothing answered); ``stay`` (stays
    in_progress until cancelled). ``extra_lines`` are raw lines appended to the output file.
    ``lie``: ``completed_early`` (reports completed at once with no output file and nothing
    answered), ``unknown_state`` (reports a state no API has), ``missing_output`` (completed,
    its output file id names no file).
    """

    kind: str = "complete"
    partial: int = 0
    extra_lines: list[bytes] = field(default_factory=list)
    lie: str | None = None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: "_Server"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    # -- plumbing ----------------------------------------------------------------------------
    def _body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            data = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return bytes(data)
                data += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _json(self, status: int, payload: Any) -> None:
        self._send(status, json.dumps(payload).encode())

    def _send(self, status: int, data: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _route(self) -> tuple[list[str], dict[str, str]]:
        parts = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        segments = [p for p in parts.path.split("/") if p]
        if segments[:1] == ["v1"]:
            segments = segments[1:]
        return segments, query

    # -- verbs -------------------------------------------------------------------------------
    def do_GET(self) -> None:
        owner = self.server.owner
        segments, query = self._route()
        try:
            if segments == ["_control", "counts"]:
                self._json(200, owner.counts())
            elif segments == ["files"]:
                self._json(200, owner.list_files(query))
            elif len(segments) == 2 and segments[0] == "files":
                self._json(*owner.file_object(segments[1]))
            elif len(segments) == 3 and segments[0] == "files" and segments[2] == "content":
                self._content(segments[1])
            elif segments == ["batches"]:
                self._json(200, owner.list_batches(query))
            elif len(segments) == 2 and segments[0] == "batches":
                self._json(*owner.poll(segments[1]))
            else:
                self._send(404, _error_body(404, f"no route {self.path}"))
        except OSError:
            pass  # the client is gone (killed)

    def do_POST(self) -> None:
        owner = self.server.owner
        segments, _ = self._route()
        raw = self._body()
        try:
            if segments == ["files"]:
                status, payload = owner.upload(self.headers.get("Content-Type") or "", raw)
                if owner.maybe_kill("file_stored"):
                    return
                self._json(*owner.lost_reply("file_stored", status, payload))
            elif segments == ["batches"]:
                status, payload = owner.create(raw)
                if status == 200 and owner.maybe_kill("batch_created"):
                    return
                self._json(*owner.lost_reply("batch_created", status, payload))
            elif len(segments) == 3 and segments[0] == "batches" and segments[2] == "cancel":
                self._json(*owner.cancel(segments[1]))
            elif segments == ["chat", "completions"]:
                status, data = owner.online(raw)
                self._send(status, data)
            elif segments == ["_control", "kill"]:
                order = json.loads(raw)
                owner.kill_at(order["at"], int(order["pid"]))
                self._json(200, {"ok": True})
            else:
                self._send(404, _error_body(404, f"no route {self.path}"))
        except OSError:
            pass

    def _content(self, file_id: str) -> None:
        owner = self.server.owner
        data = owner.file_bytes(file_id)
        if data is None:
            self._send(404, _error_body(404, f"no file {file_id}"))
            return
        is_output = owner.is_output(file_id)
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if is_output and owner.armed("output_midstream"):
            half = len(data) // 2
            self.wfile.write(data[:half])
            self.wfile.flush()
            owner.maybe_kill("output_midstream")
            return
        for start in range(0, len(data), 1 << 16):
            self.wfile.write(data[start : start + (1 << 16)])
        self.wfile.flush()


class _Server(QuietServer):
    owner: "BatchServer"


class BatchServer:
    """The server, on 127.0.0.1:<free port>, in a thread (see the module docstring).

    ``reply(body)`` answers each line and each online request (a :class:`Scripted` or a string);
    it is called under the server's lock.
    """

    def __init__(self, reply: Reply = echo_reply, *, polls_per_state: int = 1, state_s: float | None = None,
                 latency_s: float = 0.0, page_size: int = 20, host: str = "127.0.0.1", port: int = 0) -> None:
        self.reply = reply
        self.polls_per_state = polls_per_state
        self.state_s = state_s
        self.latency_s = latency_s  # online requests only
        self.page_size = page_size  # default page of the batches listing (OpenAI's: 20)
        self.files: dict[str, dict[str, Any]] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.processed: collections.Counter[str] = collections.Counter()  # custom_id -> times answered
        self.online_paid: collections.Counter[str] = collections.Counter()  # fingerprint(body) -> online replies
        self.uploads = 0
        self.creates = 0
        self.outcomes: list[Outcome] = []
        self.errors: list[Exception] = []
        self._kills: dict[str, int | Callable[[], int | None]] = {}
        self.killed: list[tuple[str, int]] = []
        self._when: dict[str, Callable[[], bool] | None] = {}
        self._lost: dict[str, list[int]] = {}
        self._seq = 0
        self._lock = threading.RLock()
        self._httpd = _Server((host, port), _Handler)
        self._httpd.owner = self
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> "BatchServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="batch-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> "BatchServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what tests set and ask --------------------------------------------------------------
    def script(self, *outcomes: Outcome) -> None:
        """The outcomes of the next batches created, in order (then: complete)."""
        with self._lock:
            self.outcomes.extend(outcomes)

    def kill_at(self, point: str, pid: int | Callable[[], int | None], *, when: Callable[[], bool] | None = None) -> None:
        """SIGKILL ``pid`` (or the pid the callable returns once it knows it) at ``point``, once;
        with ``when``, only once ``when()`` holds (e.g. the client has written part of a download),
        waiting up to 10 s for it."""
        if point not in KILL_POINTS:
            raise ValueError(f"kill point must be one of {KILL_POINTS}")
        with self._lock:
            self._kills[point] = pid
            self._when[point] = when

    def lose_replies(self, point: str, *statuses: int) -> None:
        """The next replies at ``point`` (file_stored, batch_created) are these error statuses,
        sent after the file or batch was stored: a reply lost on the way, as a proxy's 502 is."""
        with self._lock:
            self._lost.setdefault(point, []).extend(statuses)

    def lost_reply(self, point: str, status: int, payload: Any) -> tuple[int, Any]:
        with self._lock:
            lost = self._lost.get(point)
            if status == 200 and lost:
                code = lost.pop(0)
                return code, json.loads(_error_body(code, f"scripted {code} after storing"))
        return status, payload

    def counts(self) -> dict[str, Any]:
        with self._lock:
            return {"processed": dict(self.processed), "online": dict(self.online_paid), "uploads": self.uploads,
                    "creates": self.creates, "batches": len(self.batches), "killed": list(self.killed)}

    @property
    def total_processed(self) -> int:
        with self._lock:
            return sum(self.processed.values())

    @property
    def total_online(self) -> int:
        with self._lock:
            return sum(self.online_paid.values())

    # -- kill points -------------------------------------------------------------------------
    def armed(self, point: str) -> bool:
        with self._lock:
            return point in self._kills

    def maybe_kill(self, point: str) -> bool:
        """SIGKILL the process set for ``point`` (waiting up to 10 s to learn its pid); True if it did."""
        with self._lock:
            target = self._kills.pop(point, None)
            when = self._when.pop(point, None)
        if target is None:
            return False
        pid = target if isinstance(target, int) else None
        deadline = time.monotonic() + 10
        while pid is None and time.monotonic() < deadline:
            pid = target() if callable(target) else None
            if pid is None:
                time.sleep(0.01)
        while when is not None and not when() and time.monotonic() < deadline:
            time.sleep(0.01)
        if pid is None:
            return False
        os.kill(pid, signal.SIGKILL)
        with self._lock:
            self.killed.append((point, pid))
        return True

    # -- files -------------------------------------------------------------------------------
    def _next_id(self, prefix: str) -> str:
        self._seq += 1
        return f"{prefix}-{self._seq:06d}"

    def upload(self, content_type: str, raw: bytes) -> tuple[int, Any]:
        message = BytesParser(policy=HTTP).parsebytes(b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + raw)
        fields: dict[str, tuple[str | None, bytes]] = {}
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            fields[str(name)] = (part.get_filename(), part.get_payload(decode=True) or b"")
        if "file" not in fields or fields.get("purpose", (None, b""))[1].decode() != "batch":
            return 400, json.loads(_error_body(400, "a file and purpose=batch are required"))
        filename, data = fields["file"]
        with self._lock:
            file_id = self._next_id("file")
            self.files[file_id] = {"id": file_id, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                                   "filename": filename or "upload.jsonl", "purpose": "batch", "status": "processed",
                                   "data": data, "output": False}
            self.uploads += 1
            return 200, self._public_file(file_id)

    def _public_file(self, file_id: str) -> dict[str, Any]:
        return {k: v for k, v in self.files[file_id].items() if k not in ("data", "output")}

    def _store_output(self, data: bytes, name: str) -> str:
        file_id = self._next_id("file")
        self.files[file_id] = {"id": file_id, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                               "filename": name, "purpose": "batch_output", "status": "processed", "data": data,
                               "output": True}
        return file_id

    def list_files(self, query: dict[str, str]) -> dict[str, Any]:
        with self._lock:
            ids = [f for f in reversed(self.files) if not query.get("purpose") or self.files[f]["purpose"] == query["purpose"]]
            return self._page(ids, query, 10_000, self._public_file)

    def file_object(self, file_id: str) -> tuple[int, Any]:
        with self._lock:
            if file_id not in self.files:
                return 404, json.loads(_error_body(404, f"no file {file_id}"))
            return 200, self._public_file(file_id)

    def file_bytes(self, file_id: str) -> bytes | None:
        with self._lock:
            entry = self.files.get(file_id)
            return None if entry is None else entry["data"]

    def is_output(self, file_id: str) -> bool:
        with self._lock:
            return bool(self.files.get(file_id, {}).get("output"))

    def _page(self, ids: list[str], query: dict[str, str], default: int, render: Callable[[str], Any]) -> dict[str, Any]:
        if query.get("after") in ids:
            ids = ids[ids.index(query["after"]) + 1 :]
        limit = int(query.get("limit") or default)
        page = ids[:limit]
        return {"object": "list", "data": [render(i) for i in page], "has_more": len(ids) > limit,
                "first_id": page[0] if page else None, "last_id": page[-1] if page else None}

    # -- batches -----------------------------------------------------------------------------
    def create(self, raw: bytes) -> tuple[int, Any]:
        request = json.loads(raw)
        with self._lock:
            file_id = request.get("input_file_id")
            if file_id not in self.files:
                return 400, json.loads(_error_body(400, f"no file {file_id}"))
            if request.get("endpoint") != "/v1/chat/completions" or request.get("completion_window") != "24h":
                return 400, json.loads(_error_body(400, "unsupported endpoint or completion window"))
            batch_id = self._next_id("batch")
            lines = [line for line in self.files[file_id]["data"].splitlines() if line.strip()]
            outcome = self.outcomes.pop(0) if self.outcomes else Outcome()
            self.batches[batch_id] = {
                "id": batch_id, "object": "batch", "endpoint": request["endpoint"], "errors": None,
                "input_file_id": file_id, "completion_window": "24h", "status": "validating",
                "output_file_id": None, "error_file_id": None, "created_at": int(time.time()),
                "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
                "metadata": request.get("metadata"),
                "_outcome": outcome, "_polls": 0, "_since": time.monotonic(), "_seq": self._seq, "_cancel": False,
            }
            self.creates += 1
            return 200, self._public_batch(batch_id)

    def _public_batch(self, batch_id: str) -> dict[str, Any]:
        batch = {k: v for k, v in self.batches[batch_id].items() if not k.startswith("_")}
        lie = self.batches[batch_id]["_outcome"].lie
        if lie == "unknown_state" and batch["status"] != "validating":
            batch["status"] = "almost_done"
        return batch

    def list_batches(self, query: dict[str, str]) -> dict[str, Any]:
        with self._lock:
            return self._page(list(reversed(self.batches)), query, self.page_size, self._public_batch)

    def poll(self, batch_id: str) -> tuple[int, Any]:
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                return 404, json.loads(_error_body(404, f"no batch {batch_id}"))
            batch["_polls"] += 1
            if self._due(batch):
                self._advance(batch)
            return 200, self._public_batch(batch_id)

    def _due(self, batch: dict[str, Any]) -> bool:
        if self.state_s is not None:
            return time.monotonic() - batch["_since"] >= self.state_s
        return batch["_polls"] >= self.polls_per_state

    def _advance(self, batch: dict[str, Any]) -> None:
        """One step of a batch's life (called under the lock)."""
        batch["_polls"], batch["_since"] = 0, time.monotonic()
        outcome: Outcome = batch["_outcome"]
        status = batch["status"]
        now = int(time.time())
        if status == "cancelling":
            done = outcome.partial
            self._finish(batch, done, "cancelled", "batch_cancelled")
            batch["cancelled_at"] = now
            return
        if status not in FLOW[:-1]:
            return
        if outcome.lie == "completed_early":
            batch.update(status="completed", completed_at=now,
                         request_counts={**batch["request_counts"], "completed": batch["request_counts"]["total"]})
            return
        if status == "validating":
            if outcome.kind == "fail":
                batch.update(status="failed", failed_at=now, errors={"object": "list", "data": [
                    {"code": "invalid_request", "message": "scripted validation failure", "line": 1, "param": "body"}]})
                return
            batch.update(status="in_progress", in_progress_at=now)
        elif status == "in_progress":
            if outcome.kind == "stay":
                return
            if outcome.kind == "expire":
                self._finish(batch, outcome.partial, "expired", "batch_expired")
                batch["expired_at"] = now
                return
            batch.update(status="finalizing", finalizing_at=now)
        elif status == "finalizing":
            self._finish(batch, None, "completed", "")
            batch["completed_at"] = now
            if outcome.lie == "missing_output":
                batch["output_file_id"] = "file-gone"

    def _finish(self, batch: dict[str, Any], answered: int | None, status: str, left_code: str) -> None:
        """Answer the first ``answered`` lines (None: all), write the output and error files."""
        lines = [line for line in self.files[batch["input_file_id"]]["data"].splitlines() if line.strip()]
        output: list[bytes] = []
        errors: list[bytes] = []
        for n, raw in enumerate(lines):
            line = json.loads(raw)
            custom_id = line["custom_id"]
            if answered is not None and n >= answered:
                errors.append(json.dumps({
                    "id": f"batch_req_{batch['id']}_{n}", "custom_id": custom_id, "response": None,
                    "error": {"code": left_code, "message": f"This request was not executed: {status}."}}).encode())
                continue
            try:
                script = self.reply(line["body"])
            except Exception as exc:  # a broken test script: a 500 line, kept for the test
                self.errors.append(exc)
                script = Scripted(status=500)
            script = Scripted(text=script) if isinstance(script, str) else script
            code, payload, _ = render_reply(line["body"], script)
            self.processed[custom_id] += 1
            entry = {"id": f"batch_req_{batch['id']}_{n}", "custom_id": custom_id,
                     "response": {"status_code": code, "request_id": f"req_{n}", "body": json.loads(payload)},
                     "error": None}
            (output if code == 200 else errors).append(json.dumps(entry).encode())
        output.extend(batch["_outcome"].extra_lines)
        if output:
            batch["output_file_id"] = self._store_output(b"\n".join(output) + b"\n", f"{batch['id']}_output.jsonl")
        if errors:
            batch["error_file_id"] = self._store_output(b"\n".join(errors) + b"\n", f"{batch['id']}_error.jsonl")
        failed = len(errors)
        batch.update(status=status, request_counts={"total": len(lines), "completed": len(lines) - failed, "failed": failed})

    def run_all(self) -> None:
        """Take every batch to its end, watched or not, as a provider does (an orphan batch of a
        killed client is processed too)."""
        with self._lock:
            for batch in self.batches.values():
                for _ in range(len(FLOW) + 1):
                    if batch["status"] not in ("validating", "in_progress", "finalizing", "cancelling"):
                        break
                    if batch["_outcome"].kind == "stay" and batch["status"] == "in_progress":
                        break
                    self._advance(batch)

    def cancel(self, batch_id: str) -> tuple[int, Any]:
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                return 404, json.loads(_error_body(404, f"no batch {batch_id}"))
            if batch["status"] in ("validating", "in_progress", "finalizing"):
                batch.update(status="cancelling", cancelling_at=int(time.time()), _polls=0, _since=time.monotonic())
            return 200, self._public_batch(batch_id)

    # -- online ------------------------------------------------------------------------------
    def online(self, raw: bytes) -> tuple[int, bytes]:
        body = json.loads(raw)
        if self.latency_s:
            time.sleep(self.latency_s)
        with self._lock:
            script = self.reply(body)
            script = Scripted(text=script) if isinstance(script, str) else script
            status, payload, _ = render_reply(body, script)
            if status == 200:
                self.online_paid[fingerprint(body)] += 1
        return status, payload


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Loopback OpenAI Batch API server (echo replies).")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--polls-per-state", type=int, default=1)
    parser.add_argument("--state-s", type=float, default=None)
    args = parser.parse_args(argv)
    server = BatchServer(polls_per_state=args.polls_per_state, state_s=args.state_s, port=args.port).start()
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

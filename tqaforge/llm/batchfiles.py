"""Batch files in the OpenAI batch format, the one ``vllm run-batch`` reads and writes too: the
request file we write (:func:`write_requests`) and the output and error files we read back into
LLMCall rows (:class:`LineReader`), with bounded memory and nothing believed unchecked.

A request line::

    {"custom_id": CALL_ID, "method": "POST", "url": "/v1/chat/completions", "body": {...}}

An output (or error) line::

    {"id": "...", "custom_id": CALL_ID, "response": {"status_code": 200, "body": {...}}, "error": null}

Every line is parsed on its own: a malformed line, an id that is not in the batch or a second
line for the same id is counted and reported, never fatal, and never becomes an ok row. A 200
line goes through the gateway's own reply checks (:func:`~tqaforge.llm.replies.usable_reply`
within the request's :class:`~tqaforge.llm.replies.UsageBounds`): impossible usage or no content
makes an error row charged the request's worst case, like the online transport does.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import select

from tqaforge.llm.calls import BatchRequest
from tqaforge.llm.ledger import upsert_statement
from tqaforge.llm.replies import (
    KEPT_BODY_CHARS,
    REPLY_ENVELOPE_BYTES,
    Impossible,
    Malformed,
    UsageBounds,
    map_strings,
    short,
    usable_reply,
)
from tqaforge.llm.settings import Price
from tqaforge.redact import MASK, MIN_SECRET_LENGTH, redact_secrets
from tqaforge.schemas.records import LLMCall, utcnow
from tqaforge.store import Workspace
from tqaforge.tables.readers.jsonio import loads

__all__ = [
    "BATCH_URL", "CollectSummary", "LineReader", "Pricing", "first_custom_ids", "line_limit", "request_line",
    "stored_request", "write_requests",
]

BATCH_URL = "/v1/chat/completions"  # the endpoint every line of our batches calls
_CALLS = LLMCall.__table__  # type: ignore[attr-defined]
_FLUSH_ROWS = 500  # rows per transaction while collecting: memory stays flat, commits stay few
_KEPT_PROBLEMS = 10  # malformed lines named in a summary (the rest are only counted)


def request_line(request: BatchRequest) -> bytes:
    """One line of a batch request file (with its newline)."""
    line = {"custom_id": request.call_id, "method": "POST", "url": BATCH_URL, "body": request.body}
    return json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def write_requests(path: Path, requests: Iterable[BatchRequest]) -> tuple[str, int]:
    """Write the request file at ``path`` whole or not at all (a temporary name, then a rename);
    its SHA-256 and size in bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    size = 0
    part = path.with_name(path.name + ".part")
    with part.open("wb") as f:
        for request in requests:
            data = request_line(request)
            digest.update(data)
            size += len(data)
            f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(part, path)
    return digest.hexdigest(), size


def stored_request(request: BatchRequest) -> dict[str, Any]:
    """What the batch row keeps of a request: all its LLMCall row needs besides the reply."""
    return {
        "messages": request.messages, "params": request.params, "seed": request.seed, "sample": request.sample,
        "purpose": request.purpose, "worst_prompt": request.worst_prompt, "max_tokens": request.max_tokens,
    }


@dataclass
class CollectSummary:
    """What collecting a batch's output (or importing an offline output file) found and stored;
    ``lines()`` for the CLI, ``as_dict()`` for ``--json``."""

    batch_id: str
    state: str = ""
    ok: int = 0  # 200 lines with a usable reply: ok rows
    errors: int = 0  # error-file lines, non-200 lines and unusable replies: error rows (retried later)
    unknown: int = 0  # lines whose custom_id is not a request of this batch (ignored)
    missing: int = 0  # requests with no line in either file (no row: a later run sends them again)
    malformed: int = 0  # lines that are no batch output line at all (not JSON, no custom_id, too long)
    duplicates: int = 0  # further lines for an id already read (the first one counts)
    answered_elsewhere: int = 0  # requests another run had answered meanwhile: their row kept
    cost: float = 0.0  # USD the batch's lines cost (what the provider bills), the sum of its rows' costs
    charged: float = 0.0  # USD this collect added to the ledger (0 when collecting again)
    price_source: str = ""
    problems: list[str] = field(default_factory=list)  # the first malformed lines, named

    def lines(self) -> list[str]:
        """The collect in a few lines."""
        out = [
            f"batch {self.batch_id[:12]}: {self.state}; {self.ok} ok, {self.errors} errors "
            f"(retried by the next run), {self.missing} without a reply",
            f"cost ${self.cost:.4f} ({self.price_source or 'no price'}); newly charged ${self.charged:.4f}",
        ]
        odd = [f"{n} {what}" for n, what in (
            (self.unknown, "lines for requests not in this batch (ignored)"),
            (self.malformed, "malformed lines"),
            (self.duplicates, "repeated lines (the first kept)"),
            (self.answered_elsewhere, "requests already answered by another run (kept)"),
        ) if n]
        if odd:
            out.append("also: " + "; ".join(odd))
        out.extend(f"  {p}" for p in self.problems)
        return out

    def as_dict(self) -> dict[str, Any]:
        """The summary as JSON-ready values."""
        return asdict(self)


@dataclass(frozen=True)
class Pricing:
    """What a collected reply is charged at: the price (None: free) and where it came from."""

    price: Price | None
    source: str
    transport: str  # batch or offline


class LineReader:
    """Reads one batch's output and error files into LLMCall rows: see the module docstring.

    ``requests`` is the batch row's ``requests`` ({call_id: stored request}); ``secrets`` are our
    credentials, masked in anything stored.
    """

    def __init__(
        self,
        ws: Workspace,
        *,
        batch_id: str,
        model: str,
        endpoint: str | None,
        requests: Mapping[str, Mapping[str, Any]],
        pricing: Pricing,
        secrets: Sequence[str] = (),
        max_line_bytes: int,
    ) -> None:
        self.ws = ws
        self.batch_id = batch_id
        self.model = model
        self.endpoint = endpoint
        self.requests = requests
        self.pricing = pricing
        self.secrets = tuple(s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH)  # shorter ones protect nothing
        self.max_line_bytes = max_line_bytes
        self.summary = CollectSummary(batch_id, price_source=pricing.source)
        self._seen: set[str] = set()
        self._pending: list[dict[str, Any]] = []
        self._upsert = upsert_statement(ws.engine.dialect.name)

    # -- reading -----------------------------------------------------------------------------
    def read(self, path: Path, *, label: str) -> None:
        """Read one output or error file, line by line, storing rows as it goes."""
        for number, raw in _lines(path, self.max_line_bytes):
            where = f"{label} line {number}"
            if raw is None:
                self._malformed(f"{where}: longer than {self.max_line_bytes:,} bytes")
                continue
            if not raw.strip():
                continue
            try:
                line = loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as exc:
                self._malformed(f"{where}: not JSON ({short(str(exc), 120)})")
                continue
            custom_id = line.get("custom_id") if isinstance(line, dict) else None
            if not isinstance(custom_id, str):
                self._malformed(f"{where}: no custom_id")
                continue
            request = self.requests.get(custom_id)
            if request is None:
                self.summary.unknown += 1  # a hostile or confused server: never stored
                continue
            if custom_id in self._seen:
                self.summary.duplicates += 1
                continue
            self._seen.add(custom_id)
            self._pending.append(self._row(custom_id, request, line))
            if len(self._pending) >= _FLUSH_ROWS:
                self.flush()

    def finish(self) -> CollectSummary:
        """Store what is pending and count the requests that got no line."""
        self.flush()
        self.summary.missing = sum(1 for call_id in self.requests if call_id not in self._seen)
        return self.summary

    def _malformed(self, problem: str) -> None:
        self.summary.malformed += 1
        if len(self.summary.problems) < _KEPT_PROBLEMS:
            self.summary.problems.append(self._redact(problem))

    # -- one line -> one row -----------------------------------------------------------------
    def _row(self, call_id: str, request: Mapping[str, Any], line: dict[str, Any]) -> dict[str, Any]:
        price = self.pricing.price
        max_tokens = int(request["max_tokens"])
        messages = request["messages"]
        bounds = UsageBounds(UsageBounds.of(messages, max_tokens).max_prompt, max_tokens, int(request["worst_prompt"]))
        worst = 0.0 if price is None else price.cost(bounds.worst_prompt, bounds.max_completion)
        response = line.get("response")
        status_code = response.get("status_code") if isinstance(response, dict) else None
        body = response.get("body") if isinstance(response, dict) else None
        row = self._base(call_id, request)
        if status_code != 200 or line.get("error"):
            # Not answered (the error file, or a non-200 line): not billed, retried by a later run.
            row.update(status="error", error=self._redact(f"batch line: {_line_problem(status_code, body, line)}"),
                       response=self._kept(body if body is not None else line))
            return row
        try:
            text, usage = usable_reply(body, bounds)
        except Impossible as exc:
            # The figures cannot be trusted: the worst case, as the online transport charges it.
            row.update(status="error", cost=worst, error=self._redact(f"impossible usage in the batch output: {exc}"),
                       response=self._kept(body))
            return row
        except Malformed as exc:
            tokens = (exc.prompt_tokens, exc.completion_tokens)
            billed = worst if tokens == (0, 0) or price is None else price.cost(*bounds.clamp(tokens))
            row.update(status="error", cost=billed, prompt_tokens=tokens[0], completion_tokens=tokens[1],
                       error=self._redact(f"malformed reply in the batch output: {short(str(exc))}"),
                       response=self._kept(body))
            return row
        prompt_tokens, completion_tokens = usage or (0, 0)
        cost = 0.0 if price is None else (worst if usage is None else price.cost(*bounds.clamp(usage)))
        if self.secrets:  # a server that echoes our key must not get it stored
            text, body = self._own(text), map_strings(body, self._own)
        row.update(status="ok", text=text, response=body, prompt_tokens=prompt_tokens,
                   completion_tokens=completion_tokens, cost=cost)
        return row

    def _base(self, call_id: str, request: Mapping[str, Any]) -> dict[str, Any]:
        price = self.pricing.price
        return dict(
            id=call_id, model=self.model, endpoint=self.endpoint, messages=request["messages"],
            params=request.get("params"), seed=request.get("seed"), sample=int(request.get("sample") or 0),
            response=None, text=None, prompt_tokens=0, completion_tokens=0, cost=0.0, latency_ms=None,
            status="error", error=None, purpose=request.get("purpose"), created_at=utcnow(),
            price_input=None if price is None else price.input, price_output=None if price is None else price.output,
            price_source=self.pricing.source, transport=self.pricing.transport, batch_id=self.batch_id,
        )

    def _kept(self, body: Any) -> dict[str, Any]:
        """What an error row keeps of an unusable body: its redacted start."""
        text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False, default=str)
        return {"body_start": self._redact(text[:KEPT_BODY_CHARS])}

    def _redact(self, text: str) -> str:
        return redact_secrets(text, self.secrets)

    def _own(self, text: str) -> str:
        """Our own secrets masked and nothing else changed (model output)."""
        for secret in self.secrets:
            if len(secret) >= MIN_SECRET_LENGTH and secret in text:
                text = text.replace(secret, MASK)
        return text

    # -- storing -----------------------------------------------------------------------------
    def flush(self) -> None:
        """Commit the pending rows in one transaction.

        A row this batch already wrote (a collect run again, or resumed after a kill) is left as
        it is and not charged again; an ok row another run wrote is kept (it is the one the
        cache has served); anything else is written, an error never over an ok row.
        """
        rows, self._pending = self._pending, []
        if not rows:
            return
        for row in rows:
            self.summary.cost += row["cost"]
            if row["status"] == "ok":
                self.summary.ok += 1
            else:
                self.summary.errors += 1
        with self.ws.engine.connect() as conn:
            existing = {
                r.id: r for r in conn.execute(
                    select(_CALLS.c.id, _CALLS.c.status, _CALLS.c.batch_id).where(_CALLS.c.id.in_([r["id"] for r in rows]))
                )
            }
            conn.rollback()
        fresh: list[dict[str, Any]] = []
        for row in rows:
            old = existing.get(row["id"])
            if old is not None and old.batch_id == self.batch_id and (old.status == "ok" or row["status"] != "ok"):
                continue  # ours already: collected before
            if old is not None and old.status == "ok" and old.batch_id != self.batch_id:
                self.summary.answered_elsewhere += 1
                continue
            fresh.append(row)
        if not fresh:
            return
        if self._upsert is not None:
            with self.ws.engine.begin() as conn:
                conn.execute(self._upsert, fresh)
        else:
            self._save_portable(fresh)
        self.summary.charged += sum(row["cost"] for row in fresh)

    def _save_portable(self, rows: list[dict[str, Any]]) -> None:
        with self.ws.session() as s:  # databases without ON CONFLICT: read, then merge
            for row in rows:
                old = s.get(LLMCall, row["id"])
                if old is not None and old.status == "ok" and row["status"] != "ok":
                    continue
                s.merge(LLMCall(**row))


def _line_problem(status_code: Any, body: Any, line: Mapping[str, Any]) -> str:
    """Why a line is not an answer, from its error object or its response body."""
    error = line.get("error")
    if isinstance(error, dict):
        return short(f"{error.get('code') or 'error'}: {error.get('message') or ''}")
    if error:
        return short(str(error))
    message = body.get("error", {}).get("message") if isinstance(body, dict) and isinstance(body.get("error"), dict) else None
    if status_code is None:
        return "no response status"
    return short(f"HTTP {status_code}" + (f": {message}" if message else ""))


def _lines(path: Path, max_bytes: int) -> Iterator[tuple[int, bytes | None]]:
    """The lines of a file, numbered from 1; None for a line longer than ``max_bytes`` (read past,
    never held whole)."""
    with path.open("rb") as f:
        number = 0
        while True:
            chunk = f.readline(max_bytes + 1)
            if not chunk:
                return
            number += 1
            if len(chunk) > max_bytes and not chunk.endswith(b"\n"):
                while chunk and not chunk.endswith(b"\n"):  # skip the rest of the overlong line
                    chunk = f.readline(1024 * 1024)
                yield number, None
                continue
            yield number, chunk


def line_limit(max_reply_bytes: int) -> int:
    """The longest output line read: a reply body of at most ``max_reply_bytes`` and its envelope."""
    return max_reply_bytes + REPLY_ENVELOPE_BYTES


def first_custom_ids(path: Path, max_bytes: int, want: int = 50) -> list[str]:
    """The custom ids of the first ``want`` readable lines of an output file (to find its batch)."""
    found: list[str] = []
    for _, raw in _lines(path, max_bytes):
        if raw is None or not raw.strip():
            continue
        try:
            line = loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            continue
        if isinstance(line, dict) and isinstance(line.get("custom_id"), str):
            found.append(line["custom_id"])
            if len(found) >= want:
                break
    return found


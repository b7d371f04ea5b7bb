"""Batches: requests put aside by the gateway, sent through a provider's Batch API (OpenAI's
``/v1/files`` + ``/v1/batches``, about half the price) or written to a file for local inference
(``vllm run-batch -i in.jsonl -o out.jsonl``), and their replies read back into the ledger.

::

    batch = submit_batch(ws, settings, requests, step="answers")   # an LLMBatch row
    batch = wait_batch(ws, settings, batch.id, poll_s=60)            # or refresh_batch, later
    summary = collect_batch(ws, settings, batch.id)                  # LLMCall rows: the cache

    export_offline(ws, requests, Path("in.jsonl"), step="answers")  # then vllm run-batch ...
    import_offline(ws, Path("out.jsonl"))

Collected replies are LLMCall rows like the online transport's (``transport`` batch or offline,
``batch_id``, the price they were charged at), so the next run of the same step, online or in a
batch, finds them in the cache and pays nothing; error lines become error rows, which that run
sends again.

**Exactly once.** An :class:`LLMBatch` row goes prepared -> uploaded -> submitted, each state
committed as soon as the provider has done its part: the request file and the row are written
before anything is sent; before uploading, the provider's files (purpose batch) are searched for
ours by name and size; before creating, its batches are searched for one whose metadata names our
batch id. So a process killed anywhere (after the upload, after the create, before a commit) is
resumed by :func:`resume_batch` (or by submitting the same requests again) without uploading or
creating twice. No request is put in two open batches (:func:`open_call_ids`). Collecting writes
the output to a temporary name and renames it when whole, and writes rows idempotently, so a
collect killed mid-download or mid-parse is simply run again and charges nothing twice.

A batch's id is a content hash of its requests, model, endpoint and kind (:func:`tqaforge.ids.batch_id`).
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

import httpx2
import openai
from sqlalchemy import func
from sqlalchemy import update as sa_update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import defer
from sqlmodel import col, select

from tqaforge import ids
from tqaforge.errors import BudgetExceeded, EndpointAuthError, EndpointUnreachable, LLMError, NotFound
from tqaforge.files import file_sha256
from tqaforge.llm.batchfiles import (
    CollectSummary,
    LineReader,
    Pricing,
    first_custom_ids,
    line_limit,
    stored_request,
    write_requests,
)
from tqaforge.llm.budget import Budget, SharedBudget
from tqaforge.llm.calls import BatchRequest, request_params
from tqaforge.llm.limits import RETRYABLE_STATUS, backoff_delay, retry_after
from tqaforge.llm.prices import OFFLINE_SOURCE, quote
from tqaforge.llm.replies import short
from tqaforge.llm.settings import API_KEY_ENV, LLMSettings, Price
from tqaforge.llm.transport import unreachable
from tqaforge.progress import Progress
from tqaforge.redact import MASK, MIN_SECRET_LENGTH, redact_secrets, redact_url, url_password
from tqaforge.schemas.records import LLMBatch, utcnow
from tqaforge.store import Workspace

__all__ = [
    "COLLECTABLE", "ENDED_STATES", "BatchView", "CollectSummary", "OFFLINE_SOURCE", "PROVIDER_STATES", "batch_cost",
    "batch_request", "budget_reserver", "cancel_batch", "collect_batch",
    "export_offline", "find_batch", "import_offline", "is_open", "list_batches", "open_call_ids", "refresh_batch",
    "resume_batch", "submit_batch", "wait_batch",
]

T = TypeVar("T")
log = logging.getLogger("tqaforge.llm")

OPENAI, OFFLINE = "openai", "offline"
PREPARED, UPLOADED, SUBMITTED, EXPORTED, COLLECTED = "prepared", "uploaded", "submitted", "exported", "collected"
PROVIDER_STATES = ("validating", "in_progress", "finalizing", "completed", "expired", "cancelling", "cancelled", "failed")
COLLECTABLE = frozenset({"completed", "expired", "cancelled"})  # the last two may hold a partial output
ABANDONED = "abandoned"  # cancelled before it reached the provider, or an offline file given up
#: States after which a batch's requests no longer wait for it: collected (the replies are in the
#: store), failed (the provider processed none), abandoned (never sent, or a file given up).
ENDED_STATES = (COLLECTED, "failed", ABANDONED)
FINISHED = COLLECTABLE | set(ENDED_STATES)
METADATA_KEY = "tqaforge_batch"  # the provider batch's metadata that names our batch id
DEFAULT_LINE_BYTES = line_limit(LLMSettings(model="-").max_reply_bytes)  # for offline files (no settings)


# -- requests --------------------------------------------------------------------------------
def batch_request(
    settings: LLMSettings,
    messages: list[dict[str, str]],
    *,
    purpose: str,
    temperature: float = 0.0,
    max_tokens: int | None = None,
    seed: int | None = None,
    sample: int = 0,
    response_format: dict[str, Any] | None = None,
) -> BatchRequest:
    """The request the online transport would send for this call, put aside for a batch: the
    same LLMCall id, body and stored parameters as :meth:`Gateway.complete <tqaforge.llm.gateway.Gateway.complete>`."""
    return BatchRequest.of(settings.model, messages, request_params(temperature, max_tokens, response_format), seed,
                           sample, purpose, settings.default_max_tokens)


# -- prices ------------------------------------------------------------------------------------
def _batch_price(settings: LLMSettings) -> tuple[Price | None, str]:
    """The price of a batch call and where it comes from (:func:`tqaforge.llm.prices.quote`)."""
    found = quote(settings, transport="batch")
    return found.price, found.source


def budget_reserver(budget: Budget) -> Callable[[str, float], str | None]:
    """``reserve`` for :func:`submit_batch` from a step's budget: holds the batch's worst case
    before anything is sent (:meth:`~tqaforge.llm.budget.Budget.hold_batch`) and returns the name
    of the shared budget that keeps the hold until the batch is collected (None: this process's
    budget, which spends the worst case at once)."""
    return budget.hold_batch


# -- the rows ----------------------------------------------------------------------------------
def is_open(batch: LLMBatch) -> bool:
    """True while a batch holds its requests: not collected, not failed, not cancelled before
    it ever reached the provider."""
    return batch.state not in ENDED_STATES


def waiting_call_ids(ws: Workspace) -> dict[str, str]:
    """LLMCall id -> batch id of every request in an open batch (prepared, submitted or written
    and not yet collected or ended): such a request is never sent again, online or in another
    batch, before its batch is collected."""
    query = select(LLMBatch.id, LLMBatch.custom_ids).where(col(LLMBatch.state).notin_(ENDED_STATES))
    with ws.session() as s:  # the columns the rule needs, not the stored requests
        rows = s.exec(query).all()
    return {call_id: batch_id for batch_id, custom_ids in rows for call_id in custom_ids or []}


def open_call_ids(ws: Workspace) -> set[str]:
    """The LLMCall ids of the requests in open batches (never put in another one)."""
    return set(waiting_call_ids(ws))


@dataclass(frozen=True)
class BatchView:
    """A batch as the CLI and the app show it; ``lines()`` and ``as_dict()``."""

    batch: LLMBatch

    def lines(self) -> list[str]:
        """The batch in a few lines, with what to do next."""
        b = self.batch
        lines = [f"batch {b.id}  ({b.kind}, step {b.step or '-'}, model {b.model})",
                 f"state {b.state}; {b.request_count} requests; cost ${b.cost:.4f}"
                 + (f" (worst case held ${b.reserved:.4f})" if b.reserved and b.state != COLLECTED else "")]
        if b.provider_batch_id:
            lines.append(f"provider batch {b.provider_batch_id}; input file {b.file_id}"
                         + (f"; output {b.output_file_id}" if b.output_file_id else "")
                         + (f"; errors {b.error_file_id}" if b.error_file_id else ""))
        if b.counts:
            shown = {k: v for k, v in b.counts.items() if k != "collected"}
            if shown:
                lines.append("provider counts: " + ", ".join(f"{k} {v}" for k, v in shown.items()))
            if "collected" in b.counts:
                lines.append("collected: " + ", ".join(f"{k} {v}" for k, v in b.counts["collected"].items()))
        if b.file_path:
            lines.append(f"request file {b.file_path}")
        if b.error:
            lines.append(f"error: {b.error}")
        advice = _NEXT.get(b.state)
        if advice:
            lines.append(advice.format(id=b.id[:12]))
        return lines

    def as_dict(self) -> dict[str, Any]:
        """The batch row as JSON-ready values (without its stored requests)."""
        data = self.batch.model_dump(exclude={"requests", "custom_ids"})
        return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in data.items()}


_NEXT = {
    PREPARED: "not sent yet: tqaforge batches resume {id}",
    UPLOADED: "uploaded, not created: tqaforge batches resume {id}",
    EXPORTED: "run it locally (vllm run-batch -i FILE -o OUT.jsonl), then: tqaforge batches import OUT.jsonl --batch {id}",
    "completed": "finished: tqaforge batches collect {id}",
    "expired": "expired with part of it answered: tqaforge batches collect {id}",
    "cancelled": "cancelled with part of it answered: tqaforge batches collect {id}",
    ABANDONED: "abandoned before it was answered: its requests are free for the next run",
}


def list_batches(ws: Workspace) -> list[LLMBatch]:
    """Every batch, newest first, without its ``requests`` (read one with :func:`find_batch`)."""
    query = select(LLMBatch).options(defer(LLMBatch.requests))  # type: ignore[arg-type]
    with ws.session() as s:  # without their stored requests (megabytes each): not shown
        return list(s.exec(query.order_by(col(LLMBatch.created_at).desc(), col(LLMBatch.id))).all())


def find_batch(ws: Workspace, batch_id: str) -> LLMBatch:
    """The batch with this id or unique id prefix (NotFound otherwise)."""
    prefix = batch_id.strip()
    if not prefix:
        raise NotFound("give a batch id", hint="tqaforge batches list shows them")
    with ws.session() as s:
        rows = s.exec(select(LLMBatch).where(col(LLMBatch.id).startswith(prefix, autoescape=True)).limit(2)).all()
    if not rows:
        raise NotFound(f"no batch with id {short(prefix, 80)!r}", hint="tqaforge batches list shows them")
    if len(rows) > 1:
        raise NotFound(f"id {short(prefix, 80)!r} matches several batches", hint="give more characters")
    return rows[0]


def _update(ws: Workspace, row: LLMBatch, **values: Any) -> LLMBatch:
    """Set some columns of a batch row and commit (one UPDATE: the stored requests, which can be
    megabytes, are neither read nor written again); ``row`` with the new values."""
    values["updated_at"] = utcnow()
    with ws.session() as s:
        done = s.execute(sa_update(LLMBatch).where(col(LLMBatch.id) == row.id).values(**values))
        if done.rowcount != 1:  # type: ignore[attr-defined]
            raise NotFound(f"batch {row.id} is gone from the store")
    for key, value in values.items():
        setattr(row, key, value)
    return row


def _prepare(
    ws: Workspace, requests: Sequence[BatchRequest], *, kind: str, endpoint: str | None, step: str,
    state: str, path_of: Callable[[str], Path],
) -> tuple[LLMBatch, bool]:
    """The batch row of these requests, committed with its request file: the open batch of the
    same set when there is one (and False), else a new one (and True). Requests already in
    another open batch are left out."""
    unique = {r.call_id: r for r in requests}
    if not unique:
        raise LLMError("no requests to put in a batch")
    models = sorted({r.model for r in unique.values()})
    if len(models) > 1:
        raise LLMError(f"one batch calls one model, these requests name {len(models)}: {', '.join(models[:5])}")
    model = models[0]
    found = _same_set(ws, unique, model, endpoint, kind)
    if isinstance(found, LLMBatch):
        return found, False
    busy = open_call_ids(ws) & unique.keys()
    if busy:
        unique = {k: v for k, v in unique.items() if k not in busy}
        if not unique:
            raise LLMError(f"all {len(busy)} requests are already in open batches",
                           hint="collect or cancel those first: tqaforge batches list")
        log.info("%d requests are already in open batches and were left out", len(busy))
        found = _same_set(ws, unique, model, endpoint, kind)
        if isinstance(found, LLMBatch):
            return found, False
    batch_id = found
    path = path_of(batch_id)
    # The file first, then the row: a row never names a file that was not written whole.
    sha256, _ = write_requests(path, unique.values())
    row = LLMBatch(
        id=batch_id, kind=kind, step=step, model=model, endpoint=endpoint, state=state, file_path=str(path),
        file_sha256=sha256, request_count=len(unique), custom_ids=sorted(unique),
        requests={call_id: stored_request(r) for call_id, r in unique.items()},
    )
    try:
        with ws.session() as s:
            s.add(row)
    except IntegrityError:  # another process prepared the same set at the same moment
        return find_batch(ws, batch_id), False
    return row, True


def _same_set(ws: Workspace, unique: Mapping[str, BatchRequest], model: str, endpoint: str | None, kind: str
              ) -> LLMBatch | str:
    """The open batch of exactly these requests, else the id a new batch of them gets (the
    attempt after the last one that ended)."""
    attempt = 0
    with ws.session() as s:
        while True:
            batch_id = ids.batch_id(unique, model, endpoint, kind, attempt)
            row = s.get(LLMBatch, batch_id)
            if row is None:
                return batch_id
            if is_open(row):
                return row
            attempt += 1


# -- the provider ------------------------------------------------------------------------------
def _endpoint(settings: LLMSettings) -> str:
    return redact_url(settings.base_url or "https://api.openai.com/v1")


def _secrets(settings: LLMSettings) -> tuple[str, ...]:
    return tuple(x for x in (settings.api_key, url_password(settings.base_url)) if x)


def _client(settings: LLMSettings) -> openai.OpenAI:
    key = settings.api_key
    if key is None:
        if settings.base_url is None:
            raise EndpointAuthError("no API key for OpenAI", hint=f"set {API_KEY_ENV} (or [llm] api_key_env)")
        key = "unused"  # local servers accept any key unless told otherwise
    # The client's own retries are off: ours re-check what the server already has before a
    # second POST, so a lost reply never uploads or creates twice.
    return openai.OpenAI(api_key=key, base_url=settings.base_url, max_retries=0, timeout=settings.timeout_s,
                         default_headers={"Accept-Encoding": "identity"})


def _retrying(settings: LLMSettings, what: str, fn: Callable[[], T], *, hint: str | None = None) -> T:
    """``fn()``, retried with backoff on 408/409/429/5xx, timeouts and lost connections (at most
    ``max_retries`` times); LLMError naming ``what`` when it fails for good, at once
    (EndpointUnreachable) when nothing listens at the endpoint's address or its host does not exist."""
    jitter = random.Random()
    retries = 0
    while True:
        wait_hint: float | None = None
        try:
            return fn()
        except openai.APIStatusError as exc:
            problem = redact_secrets(f"HTTP {exc.status_code}: {_status_message(exc)}", _secrets(settings))
            if not (exc.status_code in RETRYABLE_STATUS or exc.status_code >= 500):
                cls = EndpointAuthError if exc.status_code in (401, 403) else LLMError
                raise cls(f"{what}: {problem}", hint=hint) from None
            wait_hint = retry_after(exc.response.headers)
        except (openai.APIConnectionError, httpx2.TransportError) as exc:
            if (cannot := unreachable(exc, _endpoint(settings))) is not None:  # no retry mends it
                raise EndpointUnreachable(f"{what}: {cannot.problem}", hint=cannot.hint) from None
            problem = redact_secrets(f"connection failed: {short(str(exc.__cause__ or exc))}", _secrets(settings))
        if retries >= settings.max_retries:
            raise LLMError(f"{what}: {problem} (gave up after {retries + 1} attempt{'s' if retries else ''})",
                           hint=hint) from None
        retries += 1
        wait = backoff_delay(retries, wait_hint, first_s=settings.backoff_s, max_s=settings.backoff_max_s, jitter=jitter)
        log.warning("%s: %s; retry %d/%d in %.2f s", what, problem, retries, settings.max_retries, wait)
        time.sleep(wait)


def _status_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, Mapping) and body.get("message"):
        return short(str(body["message"]))
    try:
        return short(exc.response.text or exc.message)
    except httpx2.ResponseNotRead:  # a streamed response
        return short(exc.message)


def _file_name(batch_id: str) -> str:
    return f"tqaforge-{batch_id}.jsonl"


def _find_or_upload(client: openai.OpenAI, row: LLMBatch, path: Path) -> str:
    """The provider's id of our request file: the one already there (by name and size), else
    a new upload."""
    name, size = _file_name(row.id), path.stat().st_size
    for found in client.files.list(purpose="batch"):
        if found.filename == name and found.bytes == size:
            return found.id
    with path.open("rb") as f:
        return client.files.create(file=(name, f, "application/jsonl"), purpose="batch").id


def _find_created(client: openai.OpenAI, row: LLMBatch) -> Any:
    """The provider's batch whose metadata names ours, None when there is none.

    Batches are listed newest first; the listing stops at batches older than our row (less an
    hour of clock skew) only while the server keeps that order, so a server that lists in
    another order is read to its end."""
    since = _timestamp(row.created_at) - 3600
    newest_first, previous = True, None
    for found in client.batches.list(limit=100):
        if (found.metadata or {}).get(METADATA_KEY) == row.id:
            return found
        created = found.created_at
        if previous is not None and created > previous:
            newest_first = False
        previous = created
        if newest_first and created < since:
            return None
    return None


def _find_or_create(client: openai.OpenAI, row: LLMBatch) -> Any:
    """Our batch at the provider: the one already created (by metadata), else a new one."""
    found = _find_created(client, row)
    if found is not None:
        return found
    assert row.file_id is not None
    return client.batches.create(
        input_file_id=row.file_id, endpoint="/v1/chat/completions", completion_window="24h", metadata={METADATA_KEY: row.id},
    )


def _timestamp(when: datetime) -> float:
    # SQLite hands back naive datetimes: ours are always UTC.
    return (when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)).timestamp()


def _check_settings(settings: LLMSettings, row: LLMBatch) -> None:
    if row.kind != OPENAI:
        raise LLMError(f"batch {row.id[:12]} is an offline batch file, not a provider's batch",
                       hint=f"run its requests locally and import the output: tqaforge batches import OUT.jsonl --batch {row.id[:12]}")
    if settings.model != row.model:
        raise LLMError(f"batch {row.id[:12]} calls model {row.model}, these settings model {settings.model}",
                       hint="load the settings with the batch's model")


def _worst_total(settings: LLMSettings, row: LLMBatch) -> float:
    """What the whole batch may cost at the batch price: every request at its worst case."""
    price, _ = _batch_price(settings)
    if price is None:
        return 0.0
    return sum(price.cost(int(r["worst_prompt"]), int(r["max_tokens"])) for r in (row.requests or {}).values())


# -- submitting --------------------------------------------------------------------------------
def submit_batch(
    ws: Workspace,
    settings: LLMSettings,
    requests: Sequence[BatchRequest],
    *,
    step: str,
    reserve: Callable[[str, float], object] | None = None,
) -> LLMBatch:
    """Send these requests as one batch through the provider's Batch API; the batch row.

    The request file (``WORKSPACE/batches/ID.jsonl``) and the row (state prepared) are committed
    first; ``reserve(worst)`` is called with the batch's worst-case cost at the batch price before
    anything is sent (it raises BudgetExceeded to refuse: the batch is then marked failed and
    nothing is sent); then upload (uploaded) and create (submitted), each committed. The same
    requests while their batch is open give that batch, continued where it stopped
    (:func:`resume_batch`); requests already in another open batch are left out.
    """
    if any(r.model != settings.model for r in requests):
        raise LLMError(f"these requests are not all for model {settings.model}")
    row, _ = _prepare(ws, requests, kind=OPENAI, endpoint=_endpoint(settings), step=step, state=PREPARED,
                      path_of=lambda batch_id: ws.paths.batches / f"{batch_id}.jsonl")
    return _advance(ws, settings, row, reserve)


def resume_batch(
    ws: Workspace, settings: LLMSettings, batch_id: str, *, reserve: Callable[[str, float], object] | None = None
) -> LLMBatch:
    """Carry a batch left prepared or uploaded (a killed or failed submit) through to submitted,
    reusing what the provider already has; a batch already submitted is returned as it is."""
    row = find_batch(ws, batch_id)
    _check_settings(settings, row)
    return _advance(ws, settings, row, reserve)


def _advance(ws: Workspace, settings: LLMSettings, row: LLMBatch, reserve: Callable[[str, float], object] | None) -> LLMBatch:
    hint = f"run `tqaforge batches resume {row.id[:12]}` to carry on: nothing is sent twice"
    if row.state == PREPARED:
        path = Path(row.file_path or "")
        if not path.is_file() or file_sha256(path) != row.file_sha256:
            row = _update(ws, row, state="failed", error=f"the request file {path} is missing or changed")
            raise LLMError(f"batch {row.id[:12]}: the request file {path} is missing or changed; nothing was sent",
                           hint="run the step again: its requests are free for a new batch")
        worst = _worst_total(settings, row)
        held_in: object = None
        if reserve is not None:
            try:
                held_in = reserve(row.id, worst)
            except BudgetExceeded as exc:
                _update(ws, row, state="failed", error=f"refused by the budget before sending: {exc}")
                raise
        row = _update(ws, row, reserved=worst, budget_id=held_in if isinstance(held_in, str) else row.budget_id)
        client = _client(settings)
        file_id = _retrying(settings, f"uploading batch {row.id[:12]}", lambda: _find_or_upload(client, row, path), hint=hint)
        row = _update(ws, row, state=UPLOADED, file_id=file_id)
    if row.state == UPLOADED:
        client = _client(settings)
        created = _retrying(settings, f"creating batch {row.id[:12]}", lambda: _find_or_create(client, row), hint=hint)
        row = _update(ws, row, state=SUBMITTED, provider_batch_id=created.id)
    return row


# -- following ---------------------------------------------------------------------------------
def refresh_batch(ws: Workspace, settings: LLMSettings, batch_id: str) -> LLMBatch:
    """The provider's view of a submitted batch into its row: state, request counts, output and
    error files. A batch not yet submitted, an offline one or one collected is returned as it is."""
    row = find_batch(ws, batch_id)
    if row.kind != OPENAI or row.provider_batch_id is None or row.state == COLLECTED:
        return row
    _check_settings(settings, row)
    client = _client(settings)
    provider_id = row.provider_batch_id
    found = _retrying(settings, f"reading batch {row.id[:12]}", lambda: client.batches.retrieve(provider_id))
    return _apply(ws, settings, row, found)


def _apply(ws: Workspace, settings: LLMSettings, row: LLMBatch, found: Any) -> LLMBatch:
    """Store what the provider says of a batch, after checking it is the batch we asked about."""
    if found.id != row.provider_batch_id:
        raise LLMError(f"batch {row.id[:12]}: asked for provider batch {row.provider_batch_id}, got {short(str(found.id), 80)}")
    if found.status not in PROVIDER_STATES:
        raise LLMError(f"batch {row.id[:12]}: the provider reports an unknown state {short(str(found.status), 40)!r}")
    counts = found.request_counts.model_dump() if found.request_counts is not None else None
    error = None
    if found.errors is not None and found.errors.data:
        error = "; ".join(short(f"{e.line and f'line {e.line}: ' or ''}{e.code or 'error'}: {e.message or ''}", 200)
                          for e in found.errors.data[:5])
        error = redact_secrets(error, _secrets(settings))
    return _update(ws, row, state=found.status, counts=counts, output_file_id=found.output_file_id,
                   error_file_id=found.error_file_id, error=error)


def wait_batch(
    ws: Workspace,
    settings: LLMSettings,
    batch_id: str,
    *,
    poll_s: float = 30.0,
    timeout_s: float | None = None,
    on_progress: Progress | None = None,
) -> LLMBatch:
    """Refresh a batch every ``poll_s`` seconds until it is finished (completed, expired,
    cancelled, failed, collected or abandoned); LLMError after ``timeout_s`` (None: no limit).
    ``on_progress(done, total, note)`` after each look: the requests the provider has finished,
    and the batch's state."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        row = refresh_batch(ws, settings, batch_id)
        if on_progress is not None:
            counts = row.counts or {}
            done = int(counts.get("completed") or 0) + int(counts.get("failed") or 0)
            on_progress(done, int(counts.get("total") or row.request_count), f"batch {row.id[:12]}: {row.state}")
        if row.state in FINISHED or row.state in (PREPARED, UPLOADED) or row.kind != OPENAI:
            return row
        if deadline is not None and time.monotonic() >= deadline:
            raise LLMError(f"batch {row.id[:12]} is still {row.state} after {timeout_s:g} s",
                           hint=f"collect it later: tqaforge batches collect {row.id[:12]} --wait")
        time.sleep(poll_s if deadline is None else max(0.0, min(poll_s, deadline - time.monotonic())))


def cancel_batch(ws: Workspace, settings: LLMSettings | None, batch_id: str) -> LLMBatch:
    """Cancel a batch. At the provider, a submitted batch goes cancelling, then cancelled, and
    what it answered meanwhile can still be collected; a batch not yet created there (nor found
    there by its metadata) and an offline batch are abandoned at once, their requests free."""
    row = find_batch(ws, batch_id)
    if row.state in FINISHED:
        raise LLMError(f"batch {row.id[:12]} is {row.state}: nothing to cancel")
    if row.kind == OFFLINE:
        return _update(ws, row, state=ABANDONED)
    if settings is None:
        raise LLMError("cancelling a provider's batch needs the LLM settings")
    _check_settings(settings, row)
    client = _client(settings)
    if row.provider_batch_id is None:
        found = _retrying(settings, f"looking for batch {row.id[:12]}", lambda: _find_created(client, row)) \
            if row.state == UPLOADED else None
        if found is None:
            return _update(ws, row, state=ABANDONED)
        row = _update(ws, row, state=SUBMITTED, provider_batch_id=found.id)
    provider_id = row.provider_batch_id
    assert provider_id is not None
    cancelled = _retrying(settings, f"cancelling batch {row.id[:12]}", lambda: client.batches.cancel(provider_id))
    return _apply(ws, settings, row, cancelled)


# -- collecting --------------------------------------------------------------------------------
def collect_batch(ws: Workspace, settings: LLMSettings, batch_id: str) -> CollectSummary:
    """Read a finished batch's output and error files into LLMCall rows; the batch is then
    collected, its ``cost`` the sum of its rows' costs.

    For a completed batch, and an expired or cancelled one (whose output may be partial): each
    file is streamed to ``WORKSPACE/batches/ID.output.jsonl`` (``.errors.jsonl``) under a
    temporary name and renamed when whole, then read line by line (see
    :mod:`~tqaforge.llm.batchfiles`). Collecting again, or after a kill, writes the same rows and
    charges nothing twice.
    """
    row = find_batch(ws, batch_id)
    _check_settings(settings, row)
    if row.state not in COLLECTABLE and row.state != COLLECTED:
        row = refresh_batch(ws, settings, row.id)
    if row.state == "failed":
        raise LLMError(f"batch {row.id[:12]} failed at the provider: {row.error or 'no reason given'}",
                       hint="nothing was answered; its requests are free for the next run")
    if row.state in (PREPARED, UPLOADED):
        raise LLMError(f"batch {row.id[:12]} was never submitted (it is {row.state})",
                       hint=f"carry it on: tqaforge batches resume {row.id[:12]}")
    if row.state not in COLLECTABLE and row.state != COLLECTED:
        raise LLMError(f"batch {row.id[:12]} is {row.state}, not finished",
                       hint=f"wait for it: tqaforge batches collect {row.id[:12]} --wait")
    price, source = _batch_price(settings)
    limit = line_limit(settings.max_reply_bytes)
    reader = LineReader(ws, batch_id=row.id, model=row.model, endpoint=row.endpoint, requests=row.requests or {},
                        pricing=Pricing(price, source, "batch"), secrets=_secrets(settings), max_line_bytes=limit)
    # An honest output file has a line per request, each within the line limit.
    most_bytes = (row.request_count + 16) * limit
    client: openai.OpenAI | None = None
    for file_id, suffix, label in ((row.output_file_id, "output", "output"), (row.error_file_id, "errors", "error file")):
        if not file_id:
            continue
        dest = ws.paths.batches / f"{row.id}.{suffix}.jsonl"
        if not dest.is_file():
            client = client or _client(settings)
            _download(settings, client, file_id, dest, most_bytes, f"downloading the {label} of batch {row.id[:12]}")
        reader.read(dest, label=label)
    summary = reader.finish()
    summary.state = COLLECTED
    counts = dict(row.counts or {})
    counts["collected"] = {"ok": summary.ok, "errors": summary.errors, "missing": summary.missing,
                           "unknown": summary.unknown, "malformed": summary.malformed}
    if row.budget_id:
        # The batch's worst case was held in a shared budget since its submission: now what its
        # replies cost is spent instead (once: a second collect finds no hold).
        shared = SharedBudget(ws, row.budget_id)
        try:
            shared.settle_batch(row.id, summary.cost)
        finally:
            shared.close()
    _update(ws, row, state=COLLECTED, cost=summary.cost, counts=counts,
            collected_at=row.collected_at or utcnow())
    return summary


def _download(settings: LLMSettings, client: openai.OpenAI, file_id: str, dest: Path, most_bytes: int, what: str) -> None:
    """Stream a provider file to ``dest`` (a temporary name, renamed when whole), in chunks."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")

    # Our own secrets never reach the disk, even split across two chunks: the last bytes of each
    # chunk wait for the next one before they are masked and written.
    secrets = [x.encode("utf-8") for x in _secrets(settings) if len(x) >= MIN_SECRET_LENGTH]
    keep = max((len(x) for x in secrets), default=1) - 1

    def fetch() -> None:
        received = 0
        pending = b""
        with client.files.with_streaming_response.content(file_id) as response, part.open("wb") as f:
            for chunk in response.iter_bytes():  # as the bytes arrive
                received += len(chunk)
                if received > most_bytes:
                    raise LLMError(f"{what}: the file is larger than {most_bytes:,} bytes, more than any honest "
                                   "output of this batch; not read further")
                pending += chunk
                for secret in secrets:
                    pending = pending.replace(secret, MASK.encode())
                cut = max(0, len(pending) - keep)
                f.write(pending[:cut])
                pending = pending[cut:]
            f.write(pending)
            f.flush()
            os.fsync(f.fileno())

    _retrying(settings, what, fetch, hint="run the collect again: it starts the download over")
    os.replace(part, dest)


# -- offline batch files -----------------------------------------------------------------------
def export_offline(ws: Workspace, requests: Sequence[BatchRequest], path: Path, *, step: str) -> LLMBatch:
    """Write these requests as a batch file for local inference (``vllm run-batch -i PATH -o
    OUT``, or any tool that reads the OpenAI batch format) and record the batch (kind offline,
    state exported) so its output can be imported (:func:`import_offline`). Requests already in
    an open batch are left out; the same requests while their batch is open give that batch."""
    path = Path(path)
    row, new = _prepare(ws, requests, kind=OFFLINE, endpoint=None, step=step, state=EXPORTED, path_of=lambda _: path)
    if not new:
        chosen = [r for r in {r.call_id: r for r in requests}.values() if r.call_id in set(row.custom_ids)]
        sha256, _ = write_requests(path, chosen)  # the file where it was asked for this time
        row = _update(ws, row, file_path=str(path), file_sha256=sha256)
    return row


def import_offline(ws: Workspace, output_path: Path, *, batch_id: str | None = None) -> CollectSummary:
    """Read an offline batch's output file into LLMCall rows (price 0, transport offline).

    The batch is the one named, else the offline batch whose requests the file's custom ids
    are. The file is read line by line; a malformed line is counted and named in the summary,
    never fatal. Importing the same file again changes nothing.
    """
    output_path = Path(output_path)
    if not output_path.is_file():
        raise NotFound(f"no output file {output_path}")
    if batch_id is not None:
        row = find_batch(ws, batch_id)
        if row.kind != OFFLINE:
            raise LLMError(f"batch {row.id[:12]} went to a provider; collect it with tqaforge batches collect {row.id[:12]}")
    else:
        row = _batch_of_file(ws, output_path)
    if row.state == ABANDONED:
        raise LLMError(f"batch {row.id[:12]} was abandoned; export its requests again")
    reader = LineReader(ws, batch_id=row.id, model=row.model, endpoint=row.endpoint, requests=row.requests or {},
                        pricing=Pricing(Price(0.0, 0.0), OFFLINE_SOURCE, "offline"), max_line_bytes=DEFAULT_LINE_BYTES)
    reader.read(output_path, label=output_path.name)
    summary = reader.finish()
    summary.state = COLLECTED
    counts = {"collected": {"ok": summary.ok, "errors": summary.errors, "missing": summary.missing,
                            "unknown": summary.unknown, "malformed": summary.malformed}}
    _update(ws, row, state=COLLECTED, cost=summary.cost, counts=counts, collected_at=row.collected_at or utcnow())
    return summary


def _batch_of_file(ws: Workspace, path: Path) -> LLMBatch:
    """The offline batch whose requests an output file answers (an open one first)."""
    wanted = set(first_custom_ids(path, DEFAULT_LINE_BYTES))
    if not wanted:
        raise LLMError(f"{path}: no line with a custom_id; is this a batch output file?")
    with ws.session() as s:
        rows = s.exec(select(LLMBatch).where(LLMBatch.kind == OFFLINE).order_by(col(LLMBatch.created_at).desc())).all()
    best: tuple[int, int, LLMBatch] | None = None
    for row in rows:
        hits = len(wanted.intersection(row.custom_ids))
        if hits and (best is None or (hits, is_open(row)) > (best[0], best[1])):
            best = (hits, int(is_open(row)), row)
    if best is None:
        raise LLMError(f"{path}: no offline batch has the requests of this file",
                       hint="name the batch: tqaforge batches import OUT.jsonl --batch ID")
    return best[2]


def batch_cost(ws: Workspace, batch_id: str) -> float:
    """USD the ledger holds for a batch's rows."""
    from tqaforge.schemas.records import LLMCall

    with ws.session() as s:
        return float(s.exec(select(func.coalesce(func.sum(LLMCall.cost), 0.0)).where(LLMCall.batch_id == batch_id)).one())

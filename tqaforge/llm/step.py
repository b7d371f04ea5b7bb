"""The step runner: one engine for every stage that calls a model (question rounds, question
typing, answers, ``evaluate --model`` and its judge). A stage is a :class:`Step`; a new LLM
stage is a new Step and nothing else::

    class Typing:                      # what is left, the calls of a piece, its commit
        name = "classify:gpt-4o-mini"
        def pending(self) -> list[Work]: ...          # from the store: what is not done yet
        def key(self, piece: Work) -> str: ...         # unique within the step
        async def call(self, gw: Gateway, piece: Work) -> Typed: ...   # its model calls
        def commit(self, piece: Work, result: Typed) -> None: ...       # into the store

    summary = run_step(ws, Typing(...), settings, RunnerOptions(workers=3, budget="pilot"))
    print("\\n".join(summary.lines()))

The runner does the rest:

- **Selection and claims.** Each worker asks the step what is left, claims a chunk of it in the
  store (:class:`~tqaforge.llm.claims.Claims`, leases renewed while it lives), runs it, commits,
  and asks again, until nothing is left that another worker does not hold. ``workers`` run in
  this process; any number of processes or machines on one PostgreSQL split the same work the
  same way; a worker killed mid-claim loses its lease and its pieces are taken again. Every
  call is a ledger row keyed by its request (the cache), and pieces are claimed one worker at a
  time, so no request is paid twice (but one in flight when its worker was killed: its reply
  died with it). On SQLite the store has one writer: the step holds a workspace lock, and a
  second process is refused at once, with the fix (PostgreSQL) in the message.
- **Ordering, retries, repairs, budget**: through :func:`~tqaforge.llm.runner.run_ordered` and
  the :class:`~tqaforge.llm.gateway.Gateway` (one per run, shared by the workers; a shared
  budget when one is named).
- **Transports.** ``online`` sends; ``batch`` puts every request that is not in the store aside
  (:class:`~tqaforge.llm.calls.Deferred`), and at the end of the pass submits them as one batch
  through the provider's Batch API (:mod:`tqaforge.llm.batches`); ``offline`` writes them as a
  batch file for local inference. A piece that waits for a batch is simply not committed: the
  next run, after ``tqaforge batches collect``, finds its replies in the store and goes on
  (follow-up calls, such as a repair or a verification, go into the next batch). ``wait``
  does that loop itself. Requests already waiting in a submitted batch are never sent again,
  by any transport, until that batch is collected.
- **One summary** (:class:`CallSummary`): paid, cached, failed and put-aside calls, cost, by model;
  the batches submitted; what stopped the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import uuid
from collections.abc import Awaitable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from sqlmodel import col, delete

from tqaforge.errors import ConfigError, InvalidReply, LLMError, StoreError
from tqaforge.llm import batches
from tqaforge.llm.budget import Budget, open_budget
from tqaforge.llm.calls import Deferred, PutAside
from tqaforge.llm.claims import Claims, worker_name
from tqaforge.llm.gateway import Gateway, run
from tqaforge.llm.runner import Job, StopReason, run_ordered
from tqaforge.llm.settings import LLMSettings
from tqaforge.progress import Progress
from tqaforge.schemas.records import WorkClaim
from tqaforge.store import Workspace

__all__ = ["TRANSPORTS", "CallSummary", "HasCalls", "ModelCalls", "ReplyStep", "RunnerOptions", "Step", "run_name", "run_step", "run_step_async"]

P = TypeVar("P")
R = TypeVar("R")
#: online: send now; batch: the provider's Batch API; offline: a batch file for local inference.
TRANSPORTS = ("online", "batch", "offline")


class Step(Protocol[P, R]):
    """One LLM stage as the runner sees it (module docs)."""

    name: str  # names its claims and its SQLite lock: the stage and what makes its work distinct

    def pending(self) -> Sequence[P]:
        """What is left to do, read from the store now, in the order to do it."""
        ...

    def key(self, piece: P) -> str:
        """A piece's name, unique within the step (at most 256 characters)."""
        ...

    async def call(self, gateway: Gateway, piece: P) -> R:
        """The piece's model calls; its result. InvalidReply for a reply that cannot be used is
        the step's to catch (or it stops the run, like any LLMError)."""
        ...

    def commit(self, piece: P, result: R) -> Awaitable[None] | None:
        """Store the result (None), or return an awaitable that makes follow-up calls and then
        stores it; called in the order of :meth:`pending`.

        A step that starts tasks of its own on the gateway may also have ``async def aclose()``:
        the runner awaits it at the end of each pass, before it closes the pass's gateway."""
        ...


def run_name(family: str, *parts: str) -> str:
    """A step name of this run's own (``family:parts:random``): its claims split this run's work
    among its workers only (a step whose results stay in the run, not in the store)."""
    return f"{family}:{':'.join(parts)[:100]}:{uuid.uuid4().hex[:12]}"


class ReplyStep(Generic[P]):
    """A step whose results stay in this run, not in the store: each piece's reply text in
    :attr:`replies` by key (the model run of ``evaluate --model``, question-only answering, the
    memorisation probes). The work left is what this run has not answered yet; the ledger makes
    asking again free. A subclass gives the pieces, each one's :meth:`key` and its
    :meth:`request`; a reply the gateway cannot use (empty, too large) counts as the empty text,
    its call on record.

    ``name`` is this run's own (:func:`run_name`)."""

    def __init__(self, family: str, parts: Sequence[str], pieces: Sequence[P]) -> None:
        self.name = run_name(family, *parts)
        self.pieces = list(pieces)
        self.replies: dict[str, str] = {}

    def key(self, piece: P) -> str:
        raise NotImplementedError

    def request(self, piece: P) -> tuple[list[dict[str, str]], str, dict[str, Any]]:
        """The piece's messages, the ledger's purpose and the other arguments of
        :meth:`~tqaforge.llm.gateway.Gateway.complete` (temperature, max_tokens, seed)."""
        raise NotImplementedError

    def pending(self) -> list[P]:
        return [p for p in self.pieces if self.key(p) not in self.replies]

    async def call(self, gateway: Gateway, piece: P) -> str:
        messages, purpose, arguments = self.request(piece)
        try:
            done = await gateway.complete(messages, purpose=purpose, **arguments)
        except InvalidReply:
            return ""  # a reply the gateway could not use: the empty text (scored wrong, matches nothing)
        return done.text

    def commit(self, piece: P, result: str) -> None:
        self.replies[self.key(piece)] = result


@dataclass(frozen=True)
class RunnerOptions:
    """How the runner runs a step: ``workers`` in this process; ``transport`` (:data:`TRANSPORTS`);
    ``budget``: the name of a budget shared in the store (None: this run's own ``max_cost``);
    ``lease_s``: how long a claim lives without renewal; ``chunk``: pieces a worker claims at a
    time (default 4 x window); ``offline_file``: where the offline transport writes its requests;
    ``wait``: with the batch transport, wait for each batch, collect it and go on until done."""

    workers: int = 1
    window: int = 32
    transport: str = "online"
    budget: str | None = None
    lease_s: float = 60.0
    chunk: int | None = None
    offline_file: Path | None = None
    wait: bool = False
    poll_s: float = 10.0
    batch_timeout_s: float = 86_400.0

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ConfigError(f"--workers must be at least 1, not {self.workers}")
        if self.window < 1:
            raise ConfigError(f"the window must be at least 1, not {self.window}")
        if self.transport not in TRANSPORTS:
            raise ConfigError(f"unknown transport {self.transport!r}", hint="one of " + ", ".join(TRANSPORTS))
        if not self.lease_s > 0:
            raise ConfigError(f"the lease must be a positive number of seconds, not {self.lease_s!r}")
        if self.transport == "offline" and self.offline_file is None:
            raise ConfigError("the offline transport writes a batch file: say where",
                              hint="e.g. --batch-file requests.jsonl")


@dataclass
class ModelCalls:
    """One model's calls in a run."""

    paid: int = 0
    cached: int = 0
    failed: int = 0
    deferred: int = 0
    cost: float = 0.0


@dataclass
class CallSummary:
    """What a run's model calls did, the same for every step; ``lines()`` for the CLI and the app,
    ``as_dict()`` for ``--json``. A stage's own summary holds one (``summary.calls``)."""

    paid: int = 0
    cached: int = 0
    failed: int = 0
    deferred: int = 0  # requests put aside for a batch (or waiting in one): their pieces wait
    cost: float = 0.0
    by_model: dict[str, ModelCalls] = field(default_factory=dict)
    batches: list[str] = field(default_factory=list)  # batches submitted (or files written) by this run
    waiting: int = 0  # pieces left for a later pass (their requests wait in a batch)
    workers: int = 1
    retaken: int = 0  # pieces taken over from workers whose lease lapsed
    stopped: str | None = None
    stop_reason: StopReason | None = None
    notes: list[str] = field(default_factory=list)

    def add(self, gateway: Gateway) -> None:
        """Count a gateway's calls (once, when it is done)."""
        model = self.by_model.setdefault(gateway.settings.model, ModelCalls())
        for target in (self, model):
            target.paid += gateway.paid_calls
            target.cached += gateway.cached_calls
            target.failed += gateway.failed_calls
            target.deferred += gateway.deferred_calls
            target.cost += gateway.spent

    def advice(self, finished: str) -> str | None:
        """What to do after the run stopped: ``finished <things> are stored; <remedy>``; None when
        nothing stopped it."""
        if self.stop_reason is None:
            return None
        return f"finished {finished} are stored; {_REMEDY[self.stop_reason]}"

    def stop(self, exc: LLMError) -> None:
        """Note the first error that stopped the run: its message and its kind."""
        if self.stopped is None:
            self.stopped = str(exc)
            self.stop_reason = StopReason.of(exc)

    # The names the stages' summaries used before (kept for their readers and the app).
    @property
    def paid_calls(self) -> int:
        return self.paid

    @property
    def cached_calls(self) -> int:
        return self.cached

    def line(self) -> str:
        """``cost $0.0123: 4 paid calls, 2 from the cache`` (+ failed, put aside, by model)."""
        parts = [f"cost ${self.cost:.4f}: {self.paid} paid calls, {self.cached} from the cache"]
        if self.failed:
            parts.append(f"{self.failed} failed")
        if self.deferred:
            parts.append(f"{self.deferred} put aside for a batch")
        text = ", ".join(parts)
        if len(self.by_model) > 1:
            text += " (" + "; ".join(f"{m}: ${c.cost:.4f}, {c.paid} paid" for m, c in self.by_model.items()) + ")"
        return text

    def lines(self) -> list[str]:
        """The calls in a few lines: cost, batches, workers, notes."""
        out = [self.line()]
        if self.batches:
            out.append(f"batches: {', '.join(self.batches)}; {self.waiting} pieces wait for them "
                       "(tqaforge batches status / collect, then run the command again)")
        elif self.waiting:
            out.append(f"{self.waiting} pieces wait for a batch submitted before "
                       "(tqaforge batches status / collect, then run the command again)")
        if self.workers > 1 or self.retaken:
            out.append(f"{self.workers} workers" + (f"; {self.retaken} pieces taken over from stopped workers"
                                                    if self.retaken else ""))
        out.extend(self.notes)
        return out

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["stop_reason"] = self.stop_reason.value if self.stop_reason is not None else None
        return data


class HasCalls:
    """For a stage's summary that holds a ``calls`` (:class:`CallSummary`): the names its cost,
    counts and stop had before the runner, read from ``calls``."""

    calls: CallSummary

    @property
    def cost(self) -> float:
        return self.calls.cost

    @property
    def paid_calls(self) -> int:
        return self.calls.paid

    @property
    def cached_calls(self) -> int:
        return self.calls.cached

    @property
    def stopped(self) -> str | None:
        """What stopped the run early (with its hint), None when nothing did."""
        return self.calls.stopped

    @property
    def stop_reason(self) -> StopReason | None:
        return self.calls.stop_reason


_REMEDY = {
    StopReason.BUDGET: "run again with a larger budget to resume",  # the CLI's --max-cost, the app's budget field
    StopReason.AUTH: "set the API key (OPENAI_API_KEY or the variable named by [llm] api_key_env) and run again to resume",
    StopReason.IMPOSSIBLE_USAGE: "the endpoint's token counts cannot be trusted: check OPENAI_BASE_URL / [llm] "
                                 "base_url before running again",
    StopReason.UNREACHABLE: "start the model server (or point OPENAI_BASE_URL / [llm] base_url at one) and run again to resume",
    StopReason.ENDPOINT: "fix the problem above (is the endpoint up, is the model name right?) and run again to resume",
}
_DEFERRED = object()  # a piece's result when one of its requests was put aside


def run_step(ws: Workspace, step: Step[P, R], llm: LLMSettings, options: RunnerOptions | None = None, *,
             budget: Budget | None = None, on_progress: Progress | None = None,
             summary: CallSummary | None = None) -> CallSummary:
    """Run ``step`` to its end, or until something stops it (module docs); the summary of its calls.

    ``budget``: one shared with other steps of the command (e.g. a model run and its judge);
    else ``options.budget`` names a shared one, else the run has its own (``llm.max_cost``).
    """
    return run(run_step_async(ws, step, llm, options, budget=budget, on_progress=on_progress, summary=summary))


async def run_step_async(ws: Workspace, step: Step[P, R], llm: LLMSettings, options: RunnerOptions | None = None, *,
                         budget: Budget | None = None, on_progress: Progress | None = None,
                         summary: CallSummary | None = None) -> CallSummary:
    """:func:`run_step` inside a running event loop."""
    options = options or RunnerOptions()
    summary = summary if summary is not None else CallSummary()
    summary.workers = options.workers
    with _one_writer(ws, step, summary):
        own_budget = budget is None and options.budget is not None
        if own_budget:
            assert options.budget is not None
            budget = open_budget(ws, options.budget, llm.max_cost, hold_lease_s=llm.timeout_s + 60.0)
        try:
            while True:
                submitted = await _one_pass(ws, step, llm, options, budget, on_progress, summary)
                if not (submitted and options.wait and options.transport == "batch"):
                    break
                await asyncio.to_thread(_wait_and_collect, ws, llm, submitted, options, on_progress)
        finally:
            if own_budget and budget is not None:
                budget.close()
    return summary


@contextlib.contextmanager
def _one_writer(ws: Workspace, step: Step[Any, Any], summary: CallSummary) -> Iterator[None]:
    """On SQLite, the step's workspace lock for the whole run (a second process is refused)."""
    if ws.engine.dialect.name != "sqlite":
        yield
        return
    family = step.name.split(":", 1)[0]
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(ws.lock(f"step {family}", wait=False))
        except StoreError as exc:  # the lock only: an error of the run itself keeps its own message
            raise StoreError(f"{exc}; SQLite has one writer, so one process at a time runs {family}",
                             hint="wait for it, or keep the workspace on PostgreSQL (TQAFORGE_DATABASE_URL) to run "
                                  "several workers or machines at once") from None
        summary.notes.append("SQLite: one process at a time runs this step (use PostgreSQL to run several)")
        _drop_dead_claims(ws, family)
        yield


def _drop_dead_claims(ws: Workspace, family: str) -> None:
    """Under the SQLite lock no other worker of ``family`` lives: claims left in the store are a
    killed run's, and are dropped now rather than waited for until their lease lapses."""
    with ws.session() as s:
        s.exec(delete(WorkClaim).where(  # type: ignore[call-overload]
            (col(WorkClaim.step) == family) | col(WorkClaim.step).startswith(f"{family}:")))


async def _one_pass(ws: Workspace, step: Step[P, R], llm: LLMSettings, options: RunnerOptions, budget: Budget | None,
                    on_progress: Progress | None, summary: CallSummary) -> list[str]:
    """Run what is left once, with every worker; the batches this pass submitted."""
    # The workers share one gateway with ``concurrency`` requests in flight for each of them (as
    # many as that many worker processes would have), one budget and one set of requests put aside.
    shared = budget if budget is not None else Budget(llm.max_cost)
    put_aside = PutAside(batches.waiting_call_ids(ws), collect=options.transport != "online")
    together = llm if options.workers == 1 else replace(llm, concurrency=llm.concurrency * options.workers)
    gateway = Gateway(ws, together, budget=shared)
    gateway.put_aside = put_aside
    gateways = [gateway]
    waiting: set[str] = set()  # pieces whose requests wait in a batch: left for the next pass
    # Pieces this pass finished: never taken again in it, even when the step's commit leaves
    # them pending (a person's decision the commit must not overwrite, say).
    finished: set[str] = set()
    done = [0]
    total = [len(step.pending())]
    workers = [_Worker(ws, step, options, i) for i in range(options.workers)]
    stop_renewing = asyncio.Event()

    def report() -> None:
        if on_progress is not None:
            on_progress(done[0], total[0], f"${sum(g.spent for g in gateways):.4f} "
                                           f"({sum(g.paid_calls for g in gateways)} paid, "
                                           f"{sum(g.cached_calls for g in gateways)} cached)")

    async def renew() -> None:
        while not stop_renewing.is_set():
            try:
                await asyncio.wait_for(stop_renewing.wait(), timeout=options.lease_s / 3)
            except asyncio.TimeoutError:
                for w in workers:
                    await asyncio.to_thread(w.claims.renew)

    async def work(worker: _Worker[P, R], gateway: Gateway) -> None:
        chunk = options.chunk or 8 * options.window
        while summary.stopped is None:
            todo = [p for p in step.pending() if step.key(p) not in waiting and step.key(p) not in finished]
            if not todo:
                return
            by_key = {step.key(p): p for p in todo}
            mine = await asyncio.to_thread(worker.claims.take, list(by_key), chunk)
            if not mine:
                if await asyncio.to_thread(worker.claims.held_by_others, by_key):
                    await asyncio.sleep(min(1.0, options.lease_s / 10))  # others hold them: wait for them or their lease
                    continue
                return
            # Another worker may have finished some of them between our look and our claim (it
            # commits, then lets go): look again, now that they are ours.
            still = {step.key(p) for p in step.pending()} - finished
            gone = [k for k in mine if k not in still]
            if gone:
                await asyncio.to_thread(worker.claims.release, gone)
                mine = [k for k in mine if k in still]
                if not mine:
                    continue

            async def call(gw: Gateway, piece: P) -> Any:
                try:
                    return await step.call(gw, piece)
                except Deferred:
                    return _DEFERRED

            follow_ups: dict[str, Awaitable[None]] = {}  # commits with follow-up calls, not yet awaited

            def finish(job: Job[Any], result: Any, by_key: dict[str, P] = by_key,
                       follow_ups: dict[str, Awaitable[None]] = follow_ups) -> Awaitable[None] | None:
                if result is _DEFERRED:
                    waiting.add(job.key)
                    return None
                finished.add(job.key)
                rest = step.commit(by_key[job.key], result)
                if rest is not None:
                    follow_ups[job.key] = rest
                return follow_up(job.key, follow_ups)

            async def follow_up(key: str, follow_ups: dict[str, Awaitable[None]]) -> None:
                if key in follow_ups:
                    try:
                        await follow_ups.pop(key)
                    except Deferred:  # a follow-up call waits for a batch: not committed, left for the next pass
                        waiting.add(key)
                        return
                done[0] += 1
                # Committed: let go of it at once, so the claims in the store are the work in progress.
                await asyncio.to_thread(worker.claims.release, [key])

            jobs = [Job(k, functools.partial(call, piece=by_key[k])) for k in mine]
            try:
                outcome = await run_ordered(gateway, jobs, window=options.window, on_result=finish,
                                            on_progress=lambda _p: report())
            finally:
                for rest in follow_ups.values():  # dropped by run_ordered (a stop): never started
                    if inspect.iscoroutine(rest):
                        rest.close()
                await asyncio.to_thread(worker.claims.release, mine)
            if outcome.error is not None:
                summary.stop(outcome.error)

    renewing = asyncio.create_task(renew())
    try:
        await asyncio.gather(*(work(w, gateway) for w in workers))
    finally:
        stop_renewing.set()
        await renewing
        # A step's own tasks on the gateway (follow-ups started early) end before the gateway does.
        closing = getattr(step, "aclose", None)
        if closing is not None:
            await closing()
        for w in workers:
            await asyncio.to_thread(w.claims.release_all)
            summary.retaken += w.claims.retaken
        for gw in gateways:
            await gw.aclose()
            summary.add(gw)
    summary.waiting += len(waiting)
    if not put_aside.requests or summary.stopped is not None:
        return []
    try:
        return await asyncio.to_thread(_submit, ws, llm, step, options, shared, list(put_aside.requests.values()),
                                       summary)
    except LLMError as exc:  # the batch's worst case would pass the budget
        summary.stop(exc)
        return []


class _Worker(Generic[P, R]):
    def __init__(self, ws: Workspace, step: Step[P, R], options: RunnerOptions, index: int) -> None:
        self.claims = Claims(ws, step.name, worker_name(index), lease_s=options.lease_s)


def _submit(ws: Workspace, llm: LLMSettings, step: Step[Any, Any], options: RunnerOptions, budget: Budget | None,
            requests: list[Any], summary: CallSummary) -> list[str]:
    """Submit the requests put aside (batch) or write them to the batch file (offline)."""
    if options.transport == "offline":
        assert options.offline_file is not None
        batch = batches.export_offline(ws, requests, options.offline_file, step=step.name)
        summary.batches.append(batch.id)
        summary.notes.append(f"{len(requests)} requests written to {options.offline_file} for local inference "
                             f"(then: tqaforge batches import OUTPUT.jsonl)")
        return []
    reserve = batches.budget_reserver(budget) if budget is not None and budget.max_cost is not None else None
    batch = batches.submit_batch(ws, llm, requests, step=step.name, reserve=reserve)
    summary.batches.append(batch.id)
    return [batch.id]


def _wait_and_collect(ws: Workspace, llm: LLMSettings, ids: list[str], options: RunnerOptions,
                      on_progress: Progress | None) -> None:
    for batch_id in ids:
        batches.wait_batch(ws, llm, batch_id, poll_s=options.poll_s, timeout_s=options.batch_timeout_s,
                           on_progress=on_progress)
        batches.collect_batch(ws, llm, batch_id)

"""Self-inspired question generation rounds (TableBench, "Question Annotation").

For each (round, subtype, table) -- a *step* -- the agent sees the table (serialized, markdown
by default), the subtype's definition and ``few_shot`` seed questions drawn from the round's
seed pool, and proposes ``per_round`` questions as a JSON list. New questions are normalised
(:func:`~tqaforge.generation.dedup.clean_question`) and dropped when they repeat an existing
question of the subtype, exactly or by ROUGE-L >= ``rouge_threshold`` (all statuses count: a
rejected question does not come back). The rest are stored as ``Question(status="proposed",
origin="llm")`` with their lineage (round, seeds shown, model, LLMCall ids, serialization).

Rounds. ``--rounds N`` means "rounds 1..N are done", so running the same command twice does
nothing the second time, and a later ``--rounds N+1`` adds one round. When round *r* of a
subtype first starts, a :class:`~tqaforge.schemas.records.GenerationRound` row freezes what the
round shows and how it routes: the seed pool (the workspace corpus: file seeds + promoted
questions, see :mod:`tqaforge.generation.corpus`), the definition, and whether the subtype had
reached ``target`` accepted questions (accepted + seed). Each step is one
:class:`~tqaforge.schemas.records.GenerationStep` row, written in the same transaction as its
questions, so "the step exists" means "its questions are stored".

Resuming. Prompts depend only on the frozen round, the table, the options and questions stored
before the round began, and the few-shot draw is seeded from (seed, round, subtype, table); so
a re-run after a crash or Ctrl-C sends the very same requests, which the gateway answers from
its LLMCall cache (no request is paid twice). Model calls run concurrently, but steps are
deduplicated and committed strictly in step order (subtype, then table id): the questions a
step is compared with are always those of the steps before it, whether the run was
interrupted or not, so an interrupted and resumed run stores the same records as an
uninterrupted one.

Workers and transports. The rounds are a step of the runner (:class:`QuestionStep`,
:mod:`tqaforge.llm.step`): ``--workers`` in one process, or several processes on one
PostgreSQL store, split the steps through claims and store the same records as one worker
(see :class:`QuestionStep` for how, and for what a killed worker changes); the batch
transport puts the generation requests aside, then the verification requests, then commits.

Routing past the target (TableBench: beyond 50 per category, 30% are checked by people, the
rest by another agent). In a round that started with the subtype at or past ``target``, each
new question draws a number in [0, 1) from a hash of (seed, question id): below
``human_share`` it stays ``proposed`` for people (lineage ``route="human"``); otherwise the
verification agent judges it (answerable from this table? matches the subtype? unambiguous?),
and the verdict -- all three yes: ``accepted``, else ``rejected`` -- is stored with its reasons
and call id in ``Question.meta["verification"]`` and as an Annotation by ``agent:MODEL``.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import func
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from tqaforge.errors import (
    InvalidReply,
    StoreError,
    TaxonomyError,
    TqaforgeError,
)
from tqaforge.generation.corpus import workspace_corpus
from tqaforge.generation.dedup import DedupIndex, Duplicate, clean_question
from tqaforge.ids import content_hash, round_id, step_id
from tqaforge.labels import agent_review
from tqaforge.llm import Gateway, LLMSettings, run
from tqaforge.llm.budget import Budget
from tqaforge.llm.calls import Deferred
from tqaforge.llm.runner import settle
from tqaforge.llm.step import CallSummary, HasCalls, RunnerOptions, run_step_async
from tqaforge.progress import Progress
from tqaforge.prompts import render
from tqaforge.queries import get_by_prefix
from tqaforge.schemas.enums import Origin, QuestionStatus, StepStatus
from tqaforge.schemas.records import GenerationRound, GenerationStep, Question, TableRecord, WorkClaim, utcnow
from tqaforge.store import Workspace
from tqaforge.tables.serialize import SERIALIZATIONS, serialize
from tqaforge.tables.table import Table

GENERATE_PURPOSE = "generate_questions"
VERIFY_PURPOSE = "verify_question"
STEP_DONE = StepStatus.DONE
STEP_INVALID = StepStatus.INVALID_REPLY
_AVOID_MAX = 30  # earlier questions of the same table shown as "do not repeat"
_QUESTION_MAX_CHARS = 1000
_WAIT_S = 0.05  # how often a step waiting for an earlier one held by another worker looks again
_LOOK_BACK = timedelta(minutes=2)  # how far back a refresh of the stored questions reads (commits are quick)


class GenerationError(TqaforgeError):
    """The generation options cannot be used (unknown subtype, no tables, bad numbers)."""


@dataclass(frozen=True)
class GenerationOptions:
    """What to generate. Defaults come from ``[generation]`` in ``tqaforge.toml``.

    ``subtypes`` empty: every subtype of the workspace corpus; ``tables`` empty: every table.
    """

    subtypes: tuple[str, ...] = ()
    tables: tuple[str, ...] = ()  # ids or unique prefixes
    rounds: int = 1
    per_round: int = 5
    target: int = 50
    few_shot: int = 3
    seed: int = 0
    serialization: str = "markdown"
    temperature: float = 0.7
    max_tokens: int = 1024
    rouge_threshold: float = 0.7
    dedup_scope: str = "subtype"  # "subtype": all questions of the subtype; "table": same table only
    human_share: float = 0.3
    retry_failed: bool = False

    def __post_init__(self) -> None:
        for name in ("rounds", "per_round", "few_shot", "max_tokens"):
            if getattr(self, name) < 1:
                raise GenerationError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.target < 0:
            raise GenerationError(f"target must not be negative, got {self.target}")
        for name in ("rouge_threshold", "human_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise GenerationError(f"{name} must be between 0 and 1, got {getattr(self, name)}")
        if self.serialization not in SERIALIZATIONS:
            raise GenerationError(
                f"unknown serialization {self.serialization!r}", hint="one of " + ", ".join(SERIALIZATIONS)
            )
        if self.dedup_scope not in ("subtype", "table"):
            raise GenerationError(f"dedup_scope must be 'subtype' or 'table', got {self.dedup_scope!r}")


def load_generation_options(ws: Workspace, **overrides: Any) -> GenerationOptions:
    """``[generation]`` of the workspace config, then ``overrides`` (None values ignored)."""
    # The keys the file sets; names and types checked by load_config, ranges by GenerationOptions.
    values: dict[str, Any] = ws.config.generation.values()
    values.update({k: v for k, v in overrides.items() if v is not None})
    return GenerationOptions(**values)




@dataclass
class GenerationSummary(HasCalls):
    """What one run did.

    A run *failed* (:attr:`failed`; the CLI exits non-zero) when it stopped early
    (``stop_reason`` says why, ``stopped`` is the message, :attr:`advice` the next step) or
    when every step it ran got an invalid reply (:attr:`all_invalid`). Its model calls (cost,
    paid, cached, put aside for a batch, what stopped the run) are in :attr:`calls`.
    """

    steps_total: int = 0
    steps_done: int = 0  # committed by this run
    steps_present: int = 0  # already done before this run
    steps_failed: int = 0  # committed with an invalid model reply
    questions_new: int = 0
    duplicates_exact: int = 0
    duplicates_rouge: int = 0
    routed_human: int = 0
    routed_agent: int = 0
    verified_accepted: int = 0
    verified_rejected: int = 0
    verification_failed: int = 0
    left_to_people: int = 0  # verdicts on questions people had reviewed: left alone
    rounds: list[int] = field(default_factory=list)
    calls: CallSummary = field(default_factory=CallSummary)

    # The calls' figures under the names this summary had before it held a CallSummary.





    @property
    def all_invalid(self) -> bool:
        """True when this run ran steps and every one of them got an invalid reply."""
        return self.steps_done > 0 and self.steps_failed == self.steps_done

    @property
    def failed(self) -> bool:
        """True when the run stopped early or produced nothing but invalid replies."""
        return self.stopped is not None or self.all_invalid

    @property
    def advice(self) -> str | None:
        """What to do next, for a run that failed; None for one that did not."""
        if self.stop_reason is not None:
            return self.calls.advice("steps")
        if self.all_invalid:
            return ("every step got an invalid model reply (see the step errors and the LLM calls); try a larger "
                    "model or check the endpoint, then run the command again with --retry-failed")
        return None

    def lines(self) -> list[str]:
        """What the CLI prints on stdout after the run: steps and questions, routing (when any), calls.

        What went wrong (:attr:`stopped`, :attr:`advice`) is for stderr and not among these lines.
        """
        lines = [
            f"rounds {', '.join(map(str, self.rounds)) or '-'}: {self.steps_done} steps done, {self.steps_present} "
            f"already done, {self.steps_failed} with an invalid reply; {self.questions_new} new questions, duplicates "
            f"dropped: {self.duplicates_exact} exact, {self.duplicates_rouge} ROUGE-L"
        ]
        if self.routed_human or self.routed_agent:
            lines.append(
                f"past the target: {self.routed_human} to people, {self.routed_agent} to the verification agent "
                f"({self.verified_accepted} accepted, {self.verified_rejected} rejected, "
                f"{self.verification_failed} unjudged)"
            )
        if self.left_to_people:
            lines.append(f"{self.left_to_people} verdicts on questions people had reviewed: left alone")
        lines.extend(self.calls.lines())
        return lines

    def as_dict(self) -> dict[str, Any]:
        """The counters, the calls, the stop and the verdict (``failed``, ``advice``) as JSON-able data."""
        data = asdict(self)
        data["calls"] = self.calls.as_dict()
        data.update(cost=self.cost, paid_calls=self.paid_calls, cached_calls=self.cached_calls, stopped=self.stopped,
                    stop_reason=self.stop_reason.value if self.stop_reason is not None else None,
                    all_invalid=self.all_invalid, failed=self.failed, advice=self.advice)
        return data


@dataclass(frozen=True)
class _Pair:
    """One step to run: its round, subtype, table and (for a retry) the attempt number."""

    round: GenerationRound
    subtype: str
    table_id: str
    attempt: int = 0

    @property
    def step_id(self) -> str:
        return step_id(self.subtype, self.round.round, self.table_id)

    @property
    def key(self) -> str:
        return piece_key(self.subtype, self.round.round, self.table_id, self.attempt)


def piece_key(subtype: str, round_no: int, table_id: str, attempt: int) -> str:
    """A step's name among the runner's pieces: its id and its attempt (a retry is new work)."""
    return f"{step_id(subtype, round_no, table_id)}:{attempt}"


@dataclass
class _Generated:
    pair: _Pair
    seeds_shown: list[str]
    questions: list[str] = field(default_factory=list)
    call_ids: list[str] = field(default_factory=list)
    error: str | None = None
    gateway: Gateway | None = field(default=None, repr=False)  # this pass's: the verifications go through it


@dataclass
class _Verdict:
    answerable: bool
    matches_subtype: bool
    unambiguous: bool
    reasons: Any

    @property
    def accepted(self) -> bool:
        return self.answerable and self.matches_subtype and self.unambiguous


_VerifyResult = tuple["_Verdict | None", list[str], "str | None"]


@dataclass
class _Prepared:
    """A step after dedup and routing: what its commit stores."""

    generated: _Generated
    new: list[tuple[str, str, dict[str, Any]]]  # (question id, text, lineage extras)
    duplicates: list[dict[str, Any]]


def generate_questions(
    ws: Workspace,
    options: GenerationOptions,
    llm: LLMSettings,
    *,
    on_progress: Progress | None = None,
    runner: RunnerOptions | None = None,
    budget: Budget | None = None,
) -> GenerationSummary:
    """Run generation rounds (see the module docs); the CLI's ``generate questions``.

    Stops cleanly -- everything finished is stored, ``summary.stopped`` says what and
    ``summary.stop_reason`` which kind -- when the budget (``llm.max_cost``, or the shared one
    ``runner.budget`` names, or ``budget``) would be exceeded, the key is missing or refused, the
    endpoint reports impossible usage, or it fails after its retries. ``summary.failed`` tells the
    CLI to exit non-zero, ``summary.advice`` what to say, ``summary.lines()`` what to print.
    ``runner`` (:class:`~tqaforge.llm.step.RunnerOptions`): workers, transport (online, batch,
    offline), a shared budget. ``on_progress`` (:class:`~tqaforge.progress.Progress`) is called
    after every model call and step with the steps committed, the steps to run and a note of the
    running cost, calls and new questions.
    """
    return run(generate_questions_async(ws, options, llm, on_progress=on_progress, runner=runner, budget=budget))


async def generate_questions_async(
    ws: Workspace,
    options: GenerationOptions,
    llm: LLMSettings,
    *,
    on_progress: Progress | None = None,
    runner: RunnerOptions | None = None,
    budget: Budget | None = None,
) -> GenerationSummary:
    """:func:`generate_questions` for callers that already run an event loop."""
    step = QuestionStep(ws, options, llm)
    summary = step.summary
    summary.steps_total, summary.steps_present = step.counts()
    runner = runner or RunnerOptions(window=max(4, 4 * llm.concurrency))

    def progress(done: int, total: int | None, note: str = "") -> None:  # the runner's counts: ours instead
        if on_progress is not None:
            # The runner's note, "$0.0123 (4 paid, 2 cached)", with the new questions inside.
            more = f"{summary.questions_new} new questions"
            note = f"{note[:-1]}, {more})" if note.endswith(")") else f"{note} ({more})".strip()
            on_progress(summary.steps_done, summary.steps_total, note)

    try:
        await run_step_async(ws, step, llm, runner, budget=budget, on_progress=progress, summary=summary.calls)
    finally:
        await step.aclose()
    return summary


class QuestionStep:
    """Question rounds as a step of the runner (:mod:`tqaforge.llm.step`).

    A piece is a (round, subtype, table, attempt) generation step still to do in the store: the
    lowest round with work left, whose rounds rows are made (frozen) when it is first returned;
    a later round only once every step of the ones before it is committed. Its call is the one
    generation request (with its repair); its commit, in step order, is dedup and routing, the
    verification agent's calls, then the questions, verdicts and step row in one transaction.

    Dedup with several workers (in this process or in others on one PostgreSQL store). The
    stored questions are read again (what was added since the last look) before every dedup, and
    a step's final dedup runs when every earlier step of its round and subtype is committed: it
    waits while one is held by a live worker (a claim in the store). So the questions a step is
    compared with are exactly those of the steps before it, and the records are those of one
    worker running the steps in order, whatever the number of workers or processes. What that
    cannot cover: an earlier step held by a worker that died is waited for until its lease lapses,
    then passed over (it is compared with what is stored when it runs again); a question stored
    meanwhile by other means (``questions add``, a run of another model on the same step) is
    caught by id in the commit, not by ROUGE-L. The verifications a step needs are started as
    soon as its commit is called, from a prediction (the store plus the earlier steps' questions
    not yet committed); the final dedup keeps those it still needs and asks for any it lacks.

    Batch transport: the first pass puts every generation request aside; the next (after the
    batch is collected) dedups and routes, and puts the verification requests aside: a step
    whose verification is put aside is not committed (nor, to keep the order, any later step of
    its round and subtype in that pass); the pass after that finds everything in the store and
    commits.
    """

    def __init__(self, ws: Workspace, options: GenerationOptions, llm: LLMSettings) -> None:
        self.ws = ws
        self.options = options
        self.llm = llm
        self.name = f"questions:{llm.model}"[:128]
        self.taxonomy = ws.config.taxonomy()
        self.summary = GenerationSummary()
        self.subtypes = self._subtypes()
        self.table_ids = self._table_ids()
        self._order = {tid: i for i, tid in enumerate(self.table_ids)}
        self._retry = self._invalid_at_start() if options.retry_failed else {}
        self._rounds: dict[str, GenerationRound] = {}
        self._tables: dict[str, Table] = {}
        self._stored = _StoredIndex(ws, self.subtypes, options)
        # Steps whose commit was called but that are not committed yet: their predicted new
        # questions, which the steps after them are compared with when their verifications start.
        self._predicted: dict[str, tuple[_Pair, list[tuple[str, str]]]] = {}
        # Steps whose call or follow-up was put aside for a batch, with the pass (its gateway).
        self._deferred: dict[str, Gateway] = {}
        self._verifying: set[asyncio.Task[_VerifyResult]] = set()

    # -- the plan ----------------------------------------------------------------------------
    def _subtypes(self) -> tuple[str, ...]:
        corpus = workspace_corpus(self.ws)
        wanted = self.options.subtypes or corpus.subtypes
        if not wanted:
            raise GenerationError(
                "the seed corpus has no categories",
                hint='add one: tqaforge seeds add SUBTYPE "question" --definition "..."',
                app_hint="add a definition and seed questions on the Taxonomy and seeds page",
            )
        for subtype in wanted:
            self.taxonomy.type_of(subtype)  # unknown subtype: error listing the known ones
            if subtype not in corpus.subtypes:
                raise TaxonomyError(
                    f"the seed corpus has no definition or seeds for {subtype!r}",
                    hint=f'tqaforge seeds add "{subtype}" "a seed question" --definition "..."',
                    app_hint=f"add a definition and seed questions for {subtype} on the Taxonomy and seeds page",
                )
        return tuple(dict.fromkeys(wanted))

    def _table_ids(self) -> list[str]:
        with self.ws.session() as s:
            if not self.options.tables:
                ids = list(s.exec(select(TableRecord.id).order_by(TableRecord.id)).all())
            else:
                ids = sorted({get_by_prefix(s, TableRecord, t).id for t in self.options.tables})
        if not ids:
            raise GenerationError("no tables to generate questions for", hint="import tables first: tqaforge tables import PATH")
        return ids

    def _invalid_at_start(self) -> dict[str, int]:
        """Step id -> attempt of the steps with an invalid reply before this run: --retry-failed
        runs each once more (a retry that is invalid again waits for the next run)."""
        with self.ws.session() as s:
            rows = s.exec(select(GenerationStep.id, GenerationStep.attempt).where(
                GenerationStep.status == STEP_INVALID, col(GenerationStep.subtype).in_(list(self.subtypes)))).all()
        return {sid: attempt for sid, attempt in rows}

    def _ensure_round(self, subtype: str, round_no: int) -> GenerationRound:
        """The frozen round, created from the current corpus and counts when first needed."""
        rid = round_id(subtype, round_no)
        known = self._rounds.get(rid)
        if known is not None:
            return known
        with self.ws.session() as s:
            existing = s.get(GenerationRound, rid)
        if existing is None:
            existing = self._new_round(rid, subtype, round_no)
        self._rounds[rid] = existing
        return existing

    def _new_round(self, rid: str, subtype: str, round_no: int) -> GenerationRound:
        corpus = workspace_corpus(self.ws)
        category = corpus.category(subtype)
        promoted = _promoted_sources(self.ws, subtype)
        pool = [{"text": text, "source": promoted.get(text, "corpus")} for text in category.seeds]
        try:
            with self.ws.session() as s:
                accepted = s.exec(
                    select(func.count()).select_from(Question).where(
                        Question.subtype == subtype,
                        Question.status.in_([QuestionStatus.ACCEPTED.value, QuestionStatus.SEED.value]),  # type: ignore[attr-defined]
                    )
                ).one()
                record = GenerationRound(
                    id=rid, subtype=subtype, round=round_no, definition=category.definition, seed_pool=pool,
                    target=self.options.target, accepted_at_start=accepted, past_target=accepted >= self.options.target,
                )
                s.add(record)
            return record
        except (IntegrityError, StoreError):
            # Another worker froze it first: its row is the round.
            with self.ws.session() as s:
                existing = s.get(GenerationRound, rid)
            if existing is None:
                raise
            return existing

    def _todo(self, round_no: int, subtypes: Sequence[str]) -> tuple[list[tuple[str, str, int]], int]:
        """(subtype, table, attempt) of the steps of a round still to run, and how many are done."""
        with self.ws.session() as s:
            steps = {
                (st.subtype, st.table_id): st
                for st in s.exec(
                    select(GenerationStep).where(GenerationStep.round == round_no, GenerationStep.subtype.in_(list(subtypes)))  # type: ignore[attr-defined]
                ).all()
            }
        todo: list[tuple[str, str, int]] = []
        present = 0
        for subtype in subtypes:
            for table_id in self.table_ids:
                step = steps.get((subtype, table_id))
                if step is None:
                    todo.append((subtype, table_id, 0))
                elif self._retryable(step):
                    todo.append((subtype, table_id, step.attempt + 1))
                else:
                    present += 1
        return todo, present

    def _retryable(self, step: GenerationStep) -> bool:
        return step.status == STEP_INVALID and self._retry.get(step.id) == step.attempt

    def counts(self) -> tuple[int, int]:
        """Steps to run and steps already done, over every round asked for (for the summary)."""
        total = present = 0
        for round_no in range(1, self.options.rounds + 1):
            todo, done = self._todo(round_no, self.subtypes)
            total += len(todo)
            present += done
        return total, present

    # -- the Step protocol -------------------------------------------------------------------
    def pending(self) -> list[_Pair]:
        """The steps still to run of the lowest round that has any, in step order (subtype, then
        table id), read from the store; its rounds rows made first."""
        for round_no in range(1, self.options.rounds + 1):
            todo, _ = self._todo(round_no, self.subtypes)
            if todo:
                rounds = {st: self._ensure_round(st, round_no) for st in dict.fromkeys(t[0] for t in todo)}
                return [_Pair(rounds[st], st, tid, attempt) for st, tid, attempt in todo]
        return []

    def key(self, piece: _Pair) -> str:
        return piece.key

    async def call(self, gateway: Gateway, piece: _Pair) -> _Generated:
        """The generation request (and its repair); a Deferred one is noted for the steps after it."""
        self._deferred.pop(piece.key, None)
        try:
            return await self._generate(gateway, piece)
        except Deferred:
            self._deferred[piece.key] = gateway
            raise

    def commit(self, piece: _Pair, result: _Generated) -> Awaitable[None]:
        """Dedup and route now (a prediction, so the verifications start at once); the awaitable
        waits for the steps before it, dedups for good, verifies and commits."""
        self._stored.refresh()
        new, _ = self._dedup(result, [self._stored.index(piece.subtype, piece.table_id), self._overlay(piece)])
        self._predicted[piece.key] = (piece, [(qid, text) for qid, text, _ in new])
        tasks = {qid: self._start_verification(result, text) for qid, text, extra in new if extra.get("route") == "agent"}
        return self._verify_and_commit(piece, result, tasks)

    async def aclose(self) -> None:
        """Cancel the verifications of steps the runner dropped (a stopped run)."""
        await settle(list(self._verifying))

    # -- one step ----------------------------------------------------------------------------
    async def _generate(self, gateway: Gateway, pair: _Pair) -> _Generated:
        seeds = self._draw_seeds(pair)
        generated = _Generated(pair, seeds, gateway=gateway)
        messages = [{"role": "user", "content": self._prompt(pair, seeds)}]
        per_round = self.options.per_round
        try:
            questions, completions = await gateway.complete_json(
                messages,
                validate=lambda value: parse_question_list(value, per_round),
                purpose=GENERATE_PURPOSE,
                temperature=self.options.temperature,
                max_tokens=self.options.max_tokens,
                seed=self.options.seed,
                sample=pair.attempt,
            )
        except InvalidReply as exc:
            generated.error = str(exc)
            generated.call_ids = list(exc.call_ids)
            return generated
        generated.questions = questions
        generated.call_ids = [c.call_id for c in completions]
        return generated

    def _draw_seeds(self, pair: _Pair) -> list[str]:
        pool = [entry["text"] for entry in pair.round.seed_pool]
        rng = random.Random(
            int(content_hash({"seed": self.options.seed, "round": pair.round.round, "subtype": pair.subtype,
                              "table": pair.table_id, "purpose": "few_shot"}), 16)
        )
        return rng.sample(pool, min(self.options.few_shot, len(pool)))

    def _prompt(self, pair: _Pair, seeds: list[str]) -> str:
        table = self._table(pair.table_id)
        return render(
            "generate_questions",
            subtype=pair.subtype,
            type=self.taxonomy.type_of(pair.subtype),
            definition=pair.round.definition,
            examples="\n".join(f"- {s}" for s in seeds),
            serialization=self.options.serialization,
            table=serialize(table, self.options.serialization),
            avoid="\n".join(f"- {q}" for q in self._earlier_questions(pair)) or "(none)",
            n=str(self.options.per_round),
        )

    def _table(self, table_id: str) -> Table:
        table = self._tables.get(table_id)
        if table is None:
            with self.ws.session() as s:
                rec = s.get(TableRecord, table_id)
                assert rec is not None
                table = rec.to_table()
            self._tables[table_id] = table
        return table

    def _earlier_questions(self, pair: _Pair) -> list[str]:
        # Only questions stored before the round began: a resumed run sees the same list.
        with self.ws.session() as s:
            rows = s.exec(
                select(Question.text)
                .where(Question.table_id == pair.table_id, Question.subtype == pair.subtype,
                       Question.created_at < pair.round.created_at)
                .order_by(Question.created_at.desc(), Question.id)  # type: ignore[attr-defined]
                .limit(_AVOID_MAX)
            ).all()
        return list(reversed(rows))

    # -- dedup and routing -------------------------------------------------------------------
    def _in_scope_before(self, other: _Pair, pair: _Pair) -> bool:
        """True when ``other`` is a step before ``pair`` whose questions ``pair`` is compared with."""
        if other.round.round != pair.round.round or other.subtype != pair.subtype:
            return False
        if self.options.dedup_scope == "table":
            return False  # one step per (round, subtype, table): nothing before it in its scope
        return self._order[other.table_id] < self._order[pair.table_id]

    def _overlay(self, pair: _Pair) -> DedupIndex:
        """The predicted questions of the steps before ``pair`` that are not committed yet."""
        overlay = DedupIndex(self.options.rouge_threshold)
        earlier = sorted((p for p, _ in self._predicted.values() if self._in_scope_before(p, pair)),
                         key=lambda p: self._order[p.table_id])
        for p in earlier:
            for qid, text in self._predicted[p.key][1]:
                overlay.add(qid, text)
        return overlay

    def _dedup(self, generated: _Generated, indexes: list[DedupIndex]) -> tuple[list[tuple[str, str, dict[str, Any]]], list[dict[str, Any]]]:
        """The step's new questions (with their route) and its duplicates, against ``indexes``
        (in order: what came first wins a tie) and the step's own earlier questions."""
        pair = generated.pair
        own = DedupIndex(self.options.rouge_threshold)
        new: list[tuple[str, str, dict[str, Any]]] = []
        duplicates: list[dict[str, Any]] = []
        for text in generated.questions:
            dup = _first_duplicate([*indexes, own], text)
            if dup is not None:
                duplicates.append(dup.as_dict(text))
                continue
            qid = Question.make_id(pair.table_id, text, pair.subtype)
            own.add(qid, text)
            extra: dict[str, Any] = {}
            if pair.round.past_target:
                draw = int(content_hash({"seed": self.options.seed, "question": qid, "purpose": "route"}), 16) / 16**32
                extra = {"route": "human" if draw < self.options.human_share else "agent", "route_draw": round(draw, 6)}
            new.append((qid, text, extra))
        return new, duplicates

    def _start_verification(self, generated: _Generated, text: str) -> asyncio.Task[_VerifyResult]:
        assert generated.gateway is not None
        task = asyncio.ensure_future(self._verify(generated.gateway, generated.pair, text))
        self._verifying.add(task)
        task.add_done_callback(self._verifying.discard)
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # read when dropped: no warning
        return task

    async def _wait_for_earlier(self, pair: _Pair, gateway: Gateway | None) -> bool:
        """Wait until every earlier step of the round and subtype is committed or held by no
        live worker. False when one of them waits for a batch in this pass: this step waits too."""
        if self.options.dedup_scope == "table":
            return True
        while True:
            todo, _ = self._todo(pair.round.round, [pair.subtype])
            earlier = [piece_key(st, pair.round.round, tid, attempt) for st, tid, attempt in todo
                       if self._order[tid] < self._order[pair.table_id]]
            if not earlier:
                return True
            if any(self._deferred.get(k) is gateway for k in earlier):
                return False
            if not self._claimed(earlier):
                return True  # left by a stopped worker, or waiting for a batch of another pass
            await asyncio.sleep(_WAIT_S)

    def _claimed(self, keys: list[str]) -> bool:
        with self.ws.session() as s:
            return s.exec(select(WorkClaim.piece).where(
                WorkClaim.step == self.name, col(WorkClaim.piece).in_(keys), WorkClaim.expires_at >= utcnow(),
            ).limit(1)).first() is not None

    async def _verify_and_commit(self, pair: _Pair, generated: _Generated,
                                 tasks: dict[str, asyncio.Task[_VerifyResult]]) -> None:
        """After the earlier steps: the final dedup, the verdicts, the commit (in step order)."""
        try:
            prepared: _Prepared | None = None
            if await self._wait_for_earlier(pair, generated.gateway):
                self._stored.refresh()
                new, duplicates = self._dedup(generated, [self._stored.index(pair.subtype, pair.table_id)])
                wanted = {qid: text for qid, text, extra in new if extra.get("route") == "agent"}
                for qid in [q for q in tasks if q not in wanted]:
                    tasks.pop(qid).cancel()  # predicted, but a duplicate after all
                for qid, text in wanted.items():
                    if qid not in tasks:
                        tasks[qid] = self._start_verification(generated, text)
                prepared = _Prepared(generated, new, duplicates)
            # Every verification reaches the gateway (or the batch) before anything is raised.
            results = await asyncio.gather(*tasks.values(), return_exceptions=True)
            for result in results:
                if isinstance(result, BaseException) and not isinstance(result, Deferred):
                    raise result
            deferred = next((r for r in results if isinstance(r, Deferred)), None)
            if prepared is None or deferred is not None:
                # Not committed: the step (and so the steps after it) waits for the next pass.
                assert generated.gateway is not None
                self._deferred[pair.key] = generated.gateway
                raise deferred if deferred is not None else Deferred(pair.key)
            verdicts = {qid: r for qid, r in zip(tasks, results) if not isinstance(r, BaseException)}
            self._commit(prepared, verdicts)
            self._predicted.pop(pair.key, None)
        finally:
            await settle([t for t in tasks.values() if not t.done()])

    async def _verify(self, gateway: Gateway, pair: _Pair, question: str) -> _VerifyResult:
        """The verification agent's verdict, its call ids, and an error if its reply was invalid."""
        prompt = render(
            "verify_question",
            subtype=pair.subtype,
            type=self.taxonomy.type_of(pair.subtype),
            definition=pair.round.definition,
            serialization=self.options.serialization,
            table=serialize(self._table(pair.table_id), self.options.serialization),
            question=question,
        )
        try:
            verdict, completions = await gateway.complete_json(
                [{"role": "user", "content": prompt}],
                validate=parse_verdict,
                purpose=VERIFY_PURPOSE,
                temperature=0.0,
                max_tokens=self.options.max_tokens,
                seed=self.options.seed,
            )
        except InvalidReply as exc:
            return None, list(exc.call_ids), str(exc)
        return verdict, [c.call_id for c in completions], None

    def _commit(
        self, prepared: _Prepared, verdicts: dict[str, tuple[_Verdict | None, list[str], str | None]]
    ) -> None:
        """One step's questions, verdicts and step row, in one transaction."""
        generated = prepared.generated
        pair = generated.pair
        model = self.llm.model
        params = {
            "per_round": self.options.per_round, "few_shot": self.options.few_shot, "seed": self.options.seed,
            "serialization": self.options.serialization, "temperature": self.options.temperature,
            "max_tokens": self.options.max_tokens, "rouge_threshold": self.options.rouge_threshold,
            "dedup_scope": self.options.dedup_scope, "human_share": self.options.human_share,
        }
        counts = {"agent": 0, "human": 0, "accepted": 0, "rejected": 0, "failed": 0, "left_alone": 0, "present": 0}
        with self.ws.session() as s:
            held_step = s.get(GenerationStep, pair.step_id)
            if held_step is not None and not (held_step.status == STEP_INVALID and held_step.attempt < pair.attempt):
                # Committed meanwhile by a run that does not share our claims (another model):
                # its records stand.
                self.summary.steps_present += 1
                return
            for qid, text, extra in prepared.new:
                held = s.get(Question, qid)
                if held is not None:
                    # Stored meanwhile (another run on the same store): never rewritten here. The
                    # agent's verdict goes through the one rule: a question people reviewed keeps
                    # their decision (counted), any other takes the verdict as a model's review.
                    counts["present"] += 1
                    verdict_info = verdicts.get(qid)
                    if verdict_info is not None and verdict_info[0] is not None:
                        v0 = verdict_info[0]
                        label0: dict[str, Any] = {"decision": "accept" if v0.accepted else "reject",
                                                  "status": "accepted" if v0.accepted else "rejected"}
                        if not v0.accepted:
                            label0["reason"] = _reason_text(v0.reasons).strip()
                        if not agent_review(s, held, label0, model=model):
                            counts["left_alone"] += 1
                    continue
                lineage: dict[str, Any] = {
                    "round": pair.round.round, "step": pair.step_id, "seeds_shown": generated.seeds_shown,
                    "model": model, "llm_call_ids": generated.call_ids,
                    "table_serialization": self.options.serialization, "prompt_template": "generate_questions",
                    **extra,
                }
                meta: dict[str, Any] | None = None
                verdict_info = verdicts.get(qid)
                if verdict_info is not None:
                    verdict, call_ids, error = verdict_info
                    lineage["verification_call_ids"] = call_ids
                    if verdict is None:
                        # The agent could not judge it: it goes to people after all.
                        lineage["route"] = "human"
                        lineage["route_reason"] = "verification reply invalid"
                        meta = {"verification": {"error": error, "call_ids": call_ids, "model": model}}
                        counts["failed"] += 1
                    else:
                        meta = {"verification": {
                            "answerable": verdict.answerable, "matches_subtype": verdict.matches_subtype,
                            "unambiguous": verdict.unambiguous, "reasons": verdict.reasons,
                            "verdict": "accepted" if verdict.accepted else "rejected",
                            "call_id": call_ids[-1], "call_ids": call_ids, "model": model,
                        }}
                if "route" in lineage:
                    counts[lineage["route"]] += 1
                question = Question(
                    id=qid, table_id=pair.table_id, text=text, taxonomy=self.taxonomy.name,
                    qtype=self.taxonomy.type_of(pair.subtype), subtype=pair.subtype,
                    status=QuestionStatus.PROPOSED, origin=Origin.LLM, created_by=f"agent:{model}",
                    lineage=lineage, meta=meta, round=pair.round.round, seed=self.options.seed,
                )
                s.add(question)
                s.flush()
                if meta is not None and "verdict" in meta["verification"]:
                    v = meta["verification"]
                    accepted = v["verdict"] == "accepted"
                    # The verdict is a question review by the agent, as a person's would be.
                    label: dict[str, Any] = {"decision": "accept" if accepted else "reject", "status": v["verdict"]}
                    if not accepted:
                        label["reason"] = _reason_text(v["reasons"]).strip()
                    label.update({k: v[k] for k in ("answerable", "matches_subtype", "unambiguous", "reasons", "call_id")})
                    agent_review(s, question, label, model=model)
                    counts["accepted" if accepted else "rejected"] += 1
            step = held_step or GenerationStep(
                id=pair.step_id, round_id=pair.round.id, table_id=pair.table_id, subtype=pair.subtype,
                round=pair.round.round, model=model,
            )
            step.status = STEP_INVALID if generated.error else STEP_DONE
            step.attempt = pair.attempt
            step.model = model
            step.params = params
            step.seeds_shown = generated.seeds_shown
            step.llm_call_ids = generated.call_ids
            step.question_ids = [qid for qid, _, _ in prepared.new]
            step.duplicates = prepared.duplicates
            step.error = generated.error
            s.add(step)
        summary = self.summary
        if pair.round.round not in summary.rounds:
            summary.rounds.append(pair.round.round)
            summary.rounds.sort()
        summary.steps_done += 1
        summary.steps_failed += bool(generated.error)
        summary.questions_new += len(prepared.new) - counts["present"]
        summary.left_to_people += counts["left_alone"]
        summary.duplicates_exact += sum(d["kind"] == "exact" for d in prepared.duplicates)
        summary.duplicates_rouge += sum(d["kind"] == "rouge" for d in prepared.duplicates)
        summary.routed_human += counts["human"] - counts["failed"]
        summary.routed_agent += counts["agent"] + counts["failed"]
        summary.verified_accepted += counts["accepted"]
        summary.verified_rejected += counts["rejected"]
        summary.verification_failed += counts["failed"]


class _StoredIndex:
    """Dedup indexes of the stored questions of the run's subtypes (one per subtype, or per
    subtype and table), brought up to date from the store by :meth:`refresh`: it reads what was
    stored since its last look (by anyone), so a step sees the other workers' commits."""

    def __init__(self, ws: Workspace, subtypes: Sequence[str], options: GenerationOptions) -> None:
        self.ws = ws
        self.subtypes = list(subtypes)
        self.options = options
        self._indexes: dict[Any, DedupIndex] = {}
        self._known: set[str] = set()
        self._seen_until: Any = None  # the newest created_at read so far

    def index(self, subtype: str, table_id: str) -> DedupIndex:
        key = subtype if self.options.dedup_scope == "subtype" else (subtype, table_id)
        index = self._indexes.get(key)
        if index is None:
            index = self._indexes[key] = DedupIndex(self.options.rouge_threshold)
        return index

    def refresh(self) -> None:
        query = select(  # type: ignore[call-overload]
            Question.id, Question.text, Question.subtype, Question.table_id, Question.created_at,
        ).where(col(Question.subtype).in_(self.subtypes))
        if self._seen_until is not None:
            # A question is stamped before its transaction commits: look back a while, so one
            # committed late by another worker is still read (the ids read are skipped).
            query = query.where(col(Question.created_at) >= self._seen_until - _LOOK_BACK)
        with self.ws.session() as s:
            rows = s.exec(query.order_by(col(Question.created_at), col(Question.id))).all()
        for qid, text, subtype, table_id, created_at in rows:
            if self._seen_until is None or created_at > self._seen_until:
                self._seen_until = created_at
            if qid in self._known or subtype is None:  # the query selects subtypes in a list: never None
                continue
            self._known.add(qid)
            self.index(subtype, table_id).add(qid, text)


def _first_duplicate(indexes: Sequence[DedupIndex], text: str) -> Duplicate | None:
    """What ``text`` duplicates in several indexes read as one, in order: the first exact
    repeat, else the best ROUGE-L match (the earliest of equal ones)."""
    found = [d for d in (index.find(text) for index in indexes) if d is not None]
    exact = next((d for d in found if d.kind == "exact"), None)
    if exact is not None:
        return exact
    best: Duplicate | None = None
    for d in found:
        if best is None or d.score > best.score:
            best = d
    return best


def parse_question_list(value: Any, limit: int) -> list[str]:
    """The questions of a generation reply: a JSON list of strings (or of ``{"question": ...}``,
    or ``{"questions": [...]}``), cleaned, at most ``limit``. ValueError names what is wrong."""
    if isinstance(value, dict):
        if "questions" not in value:
            raise ValueError('expected a JSON list of question strings, got an object without "questions"')
        value = value["questions"]
    if not isinstance(value, list):
        raise ValueError(f"expected a JSON list of question strings, got {type(value).__name__}")
    out: list[str] = []
    for n, item in enumerate(value, start=1):
        if isinstance(item, dict) and isinstance(item.get("question"), str):
            item = item["question"]
        if not isinstance(item, str):
            raise ValueError(f"item {n} of the list is {type(item).__name__}, not a question string")
        text = clean_question(item)
        if not text:
            continue
        if len(text) > _QUESTION_MAX_CHARS:
            raise ValueError(f"item {n} is {len(text)} characters long; a question has at most {_QUESTION_MAX_CHARS}")
        out.append(text)
    if not out:
        raise ValueError("the list holds no questions")
    return list(dict.fromkeys(out))[:limit]


_VERDICT_KEYS = ("answerable", "matches_subtype", "unambiguous")


def parse_verdict(value: Any) -> _Verdict:
    """The verification agent's reply: an object with three booleans and ``reasons``."""
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object with {', '.join(_VERDICT_KEYS)} and reasons, got {type(value).__name__}")
    flags = {}
    for key in _VERDICT_KEYS:
        if key not in value:
            raise ValueError(f'the object lacks "{key}"')
        flag = value[key]
        if isinstance(flag, str) and flag.strip().lower() in ("yes", "true", "no", "false"):
            flag = flag.strip().lower() in ("yes", "true")
        if not isinstance(flag, bool):
            raise ValueError(f'"{key}" must be true or false, got {flag!r}')
        flags[key] = flag
    reasons = value.get("reasons")
    if not isinstance(reasons, (str, dict, list)) or not reasons:
        raise ValueError('"reasons" must be a non-empty string (or an object of strings)')
    return _Verdict(reasons=reasons, **flags)


def _reason_text(reasons: Any) -> str:
    if isinstance(reasons, str):
        return reasons
    if isinstance(reasons, dict):
        return "; ".join(f"{k}: {v}" for k, v in reasons.items())
    return "; ".join(str(r) for r in reasons)


def _promoted_sources(ws: Workspace, subtype: str) -> dict[str, str]:
    with ws.session() as s:
        rows = s.exec(
            select(Question.id, Question.text).where(Question.subtype == subtype, Question.status == QuestionStatus.SEED.value)
        ).all()
    return {text: f"promoted:{qid}" for qid, text in rows}


__all__ = [
    "GenerationError", "GenerationOptions", "GenerationSummary", "QuestionStep",
    "generate_questions", "generate_questions_async", "load_generation_options",
    "parse_question_list", "parse_verdict", "round_id", "step_id",
]

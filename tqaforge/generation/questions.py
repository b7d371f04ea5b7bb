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
import functools
import random
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from sqlalchemy import func
from sqlmodel import col, select

from tqaforge.errors import (
    InvalidReply,
    TaxonomyError,
    TqaforgeError,
)
from tqaforge.generation._costs import cost_line, cost_note, record_stop, stop_advice, sync_costs
from tqaforge.generation.corpus import workspace_corpus
from tqaforge.generation.dedup import DedupIndex, Duplicate, clean_question
from tqaforge.ids import content_hash, round_id, step_id
from tqaforge.labels import agent_review
from tqaforge.llm import Gateway, LLMSettings, run
from tqaforge.llm.runner import Job, StopReason, run_ordered, settle
from tqaforge.progress import Progress
from tqaforge.prompts import render
from tqaforge.queries import get_by_prefix
from tqaforge.schemas.enums import Origin, QuestionStatus, StepStatus
from tqaforge.schemas.records import GenerationRound, GenerationStep, Question, TableRecord
from tqaforge.store import Workspace
from tqaforge.tables.serialize import SERIALIZATIONS, serialize
from tqaforge.tables.table import Table

GENERATE_PURPOSE = "generate_questions"
VERIFY_PURPOSE = "verify_question"
STEP_DONE = StepStatus.DONE
STEP_INVALID = StepStatus.INVALID_REPLY
_AVOID_MAX = 30  # earlier questions of the same table shown as "do not repeat"
_QUESTION_MAX_CHARS = 1000


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
class GenerationSummary:
    """What one run did.

    A run *failed* (:attr:`failed`; the CLI exits non-zero) when it stopped early
    (``stop_reason`` says why, ``stopped`` is the message, :attr:`advice` the next step) or
    when every step it ran got an invalid reply (:attr:`all_invalid`).
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
    cost: float = 0.0
    paid_calls: int = 0
    cached_calls: int = 0
    rounds: list[int] = field(default_factory=list)
    stopped: str | None = None  # the message of what stopped the run early (with its hint), else None
    stop_reason: StopReason | None = None  # what kind of stop ``stopped`` is

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
            return stop_advice(self.stop_reason, "steps")
        if self.all_invalid:
            return ("every step got an invalid model reply (see the step errors and the LLM calls); try a larger "
                    "model or check the endpoint, then run the command again with --retry-failed")
        return None

    def lines(self) -> list[str]:
        """What the CLI prints on stdout after the run: steps and questions, routing (when any), cost.

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
        lines.append(cost_line(self.cost, self.paid_calls, self.cached_calls))
        return lines

    def as_dict(self) -> dict[str, Any]:
        """The counters, the stop and the verdict (``failed``, ``advice``) as JSON-able data."""
        data = asdict(self)
        data["stop_reason"] = self.stop_reason.value if self.stop_reason is not None else None
        data.update(all_invalid=self.all_invalid, failed=self.failed, advice=self.advice)
        return data

    def progress_note(self) -> str:
        """The note passed to ``on_progress``: running cost, calls and new questions."""
        return cost_note(self.cost, self.paid_calls, self.cached_calls, f"{self.questions_new} new questions")


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


@dataclass
class _Generated:
    pair: _Pair
    seeds_shown: list[str]
    questions: list[str] = field(default_factory=list)
    call_ids: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass
class _Verdict:
    answerable: bool
    matches_subtype: bool
    unambiguous: bool
    reasons: Any

    @property
    def accepted(self) -> bool:
        return self.answerable and self.matches_subtype and self.unambiguous


@dataclass
class _Prepared:
    """A step after dedup and routing, waiting for its verifications before the commit."""

    generated: _Generated
    new: list[tuple[str, str, dict[str, Any]]]  # (question id, text, lineage extras)
    duplicates: list[dict[str, Any]]
    verifications: dict[str, asyncio.Task[tuple[_Verdict | None, list[str], str | None]]]


def generate_questions(
    ws: Workspace,
    options: GenerationOptions,
    llm: LLMSettings,
    *,
    on_progress: Progress | None = None,
) -> GenerationSummary:
    """Run generation rounds (see the module docs); the CLI's ``generate questions``.

    Stops cleanly -- everything finished is stored, ``summary.stopped`` says what and
    ``summary.stop_reason`` which kind -- when the budget (``llm.max_cost``) would be exceeded,
    the key is missing or refused, the endpoint reports impossible usage, or it fails after its
    retries. ``summary.failed`` tells the CLI to exit non-zero, ``summary.advice`` what to say,
    ``summary.lines()`` what to print. ``on_progress`` (:class:`~tqaforge.progress.Progress`) is
    called after every model call and step with the steps committed, the steps to run and a note
    of the running cost, calls and new questions.
    """
    return run(generate_questions_async(ws, options, llm, on_progress=on_progress))


async def generate_questions_async(
    ws: Workspace,
    options: GenerationOptions,
    llm: LLMSettings,
    *,
    on_progress: Progress | None = None,
) -> GenerationSummary:
    """:func:`generate_questions` for callers that already run an event loop."""
    generator = _Generator(ws, options, llm, on_progress)
    return await generator.run()


class _Generator:
    """One run: the plan, the gateway, the dedup indexes and the counters."""

    def __init__(
        self,
        ws: Workspace,
        options: GenerationOptions,
        llm: LLMSettings,
        on_progress: Progress | None,
    ) -> None:
        self.ws = ws
        self.options = options
        self.llm = llm
        self.on_progress = on_progress
        self.taxonomy = ws.config.taxonomy()
        self.summary = GenerationSummary()
        self.gateway: Gateway | None = None
        self.tables: dict[str, Table] = {}
        self.indexes: dict[Any, DedupIndex] = {}
        self.verifying: list[asyncio.Task[Any]] = []  # cancelled when the run stops

    # -- the plan ----------------------------------------------------------------------------
    def _subtypes(self) -> tuple[str, ...]:
        corpus = workspace_corpus(self.ws)
        wanted = self.options.subtypes or corpus.subtypes
        if not wanted:
            raise GenerationError(
                "the seed corpus has no categories",
                hint='add one: tqaforge seeds add SUBTYPE "question" --definition "..."',
            )
        for subtype in wanted:
            self.taxonomy.type_of(subtype)  # unknown subtype: error listing the known ones
            if subtype not in corpus.subtypes:
                raise TaxonomyError(
                    f"the seed corpus has no definition or seeds for {subtype!r}",
                    hint=f'tqaforge seeds add "{subtype}" "a seed question" --definition "..."',
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

    def _ensure_round(self, subtype: str, round_no: int) -> GenerationRound:
        """The frozen round, created from the current corpus and counts when first needed."""
        rid = round_id(subtype, round_no)
        with self.ws.session() as s:
            existing = s.get(GenerationRound, rid)
            if existing is not None:
                return existing
        corpus = workspace_corpus(self.ws)
        category = corpus.category(subtype)
        promoted = _promoted_sources(self.ws, subtype)
        pool = [{"text": text, "source": promoted.get(text, "corpus")} for text in category.seeds]
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

    def _pending(self, subtypes: Sequence[str], table_ids: Sequence[str], round_no: int) -> tuple[list[tuple[str, str, int]], int]:
        """(subtype, table, attempt) of the steps still to run in a round, and how many are done."""
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
            for table_id in table_ids:
                step = steps.get((subtype, table_id))
                if step is None:
                    todo.append((subtype, table_id, 0))
                elif step.status == STEP_INVALID and self.options.retry_failed:
                    todo.append((subtype, table_id, step.attempt + 1))
                else:
                    present += 1
        return todo, present

    # -- the run -----------------------------------------------------------------------------
    async def run(self) -> GenerationSummary:
        subtypes = self._subtypes()
        table_ids = self._table_ids()
        plan = []
        for round_no in range(1, self.options.rounds + 1):
            todo, present = self._pending(subtypes, table_ids, round_no)
            plan.append((round_no, todo))
            self.summary.steps_present += present
            self.summary.steps_total += len(todo)
        self.gateway = Gateway(self.ws, self.llm)
        try:
            for round_no, todo in plan:
                if not todo:
                    continue
                rounds = {st: self._ensure_round(st, round_no) for st in dict.fromkeys(p[0] for p in todo)}
                pairs = [_Pair(rounds[st], st, tid, attempt) for st, tid, attempt in todo]
                self.summary.rounds.append(round_no)
                self._load_indexes(subtypes)
                await self._run_steps(pairs)
                if self.summary.stopped:
                    break
        finally:
            sync_costs(self.summary, self.gateway)
            await self.gateway.aclose()
        return self.summary

    async def _run_steps(self, pairs: list[_Pair]) -> None:
        """Generate concurrently; dedup and route, verify and commit in step order (module docs)."""
        assert self.gateway is not None
        jobs = [Job(pair.step_id, functools.partial(self._generate, pair=pair)) for pair in pairs]
        try:
            outcome = await run_ordered(
                self.gateway, jobs, window=max(4, 4 * self.llm.concurrency),
                on_result=lambda _job, generated: self._verify_and_commit(self._dedup_and_route(generated)),
                on_progress=lambda _progress: self._report(),
            )
        finally:
            # Verification calls of steps that will not be committed are dropped unpaid.
            await settle(self.verifying)
            self.verifying = []
        if outcome.error is not None:
            record_stop(self.summary, outcome.error)

    async def _verify_and_commit(self, prepared: _Prepared) -> None:
        """A step's verdicts, then its commit; the runner awaits this in step order."""
        verdicts = {}
        try:
            for qid, task in prepared.verifications.items():
                verdicts[qid] = await task
        except BaseException:
            await settle(prepared.verifications.values())
            raise
        self._commit(prepared, verdicts)

    # -- one step ----------------------------------------------------------------------------
    async def _generate(self, gateway: Gateway, pair: _Pair) -> _Generated:
        seeds = self._draw_seeds(pair)
        generated = _Generated(pair, seeds)
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
        table = self.tables.get(table_id)
        if table is None:
            with self.ws.session() as s:
                rec = s.get(TableRecord, table_id)
                assert rec is not None
                table = rec.to_table()
            self.tables[table_id] = table
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

    def _load_indexes(self, subtypes: Sequence[str]) -> None:
        self.indexes = {}
        with self.ws.session() as s:
            rows = s.exec(
                select(Question.id, Question.text, Question.subtype, Question.table_id)
                .where(Question.subtype.in_(list(subtypes)))  # type: ignore[union-attr]
                .order_by(col(Question.created_at), col(Question.id))
            ).all()
        for qid, text, subtype, table_id in rows:
            if subtype is not None:  # the query selects subtypes in a list, so never None
                self._index(subtype, table_id).add(qid, text)

    def _index(self, subtype: str, table_id: str) -> DedupIndex:
        key = subtype if self.options.dedup_scope == "subtype" else (subtype, table_id)
        index = self.indexes.get(key)
        if index is None:
            index = self.indexes[key] = DedupIndex(self.options.rouge_threshold)
        return index

    def _dedup_and_route(self, generated: _Generated) -> _Prepared:
        pair = generated.pair
        index = self._index(pair.subtype, pair.table_id)
        new: list[tuple[str, str, dict[str, Any]]] = []
        duplicates: list[dict[str, Any]] = []
        verifications: dict[str, asyncio.Task[tuple[_Verdict | None, list[str], str | None]]] = {}
        for text in generated.questions:
            dup: Duplicate | None = index.find(text)
            if dup is not None:
                duplicates.append(dup.as_dict(text))
                continue
            qid = Question.make_id(pair.table_id, text, pair.subtype)
            index.add(qid, text)
            extra: dict[str, Any] = {}
            if pair.round.past_target:
                draw = int(content_hash({"seed": self.options.seed, "question": qid, "purpose": "route"}), 16) / 16**32
                extra = {"route": "human" if draw < self.options.human_share else "agent", "route_draw": round(draw, 6)}
                if extra["route"] == "agent":
                    verifications[qid] = asyncio.create_task(self._verify(pair, text))
                    self.verifying.append(verifications[qid])
            new.append((qid, text, extra))
        return _Prepared(generated, new, duplicates, verifications)

    async def _verify(self, pair: _Pair, question: str) -> tuple[_Verdict | None, list[str], str | None]:
        """The verification agent's verdict, its call ids, and an error if its reply was invalid."""
        assert self.gateway is not None
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
            verdict, completions = await self.gateway.complete_json(
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
            step = s.get(GenerationStep, pair.step_id) or GenerationStep(
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

    # -- progress ----------------------------------------------------------------------------
    def _report(self) -> None:
        sync_costs(self.summary, self.gateway)
        if self.on_progress is not None:
            s = self.summary
            self.on_progress(s.steps_done, s.steps_total, s.progress_note())


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
    "GenerationError", "GenerationOptions", "GenerationSummary",
    "generate_questions", "generate_questions_async", "load_generation_options",
    "parse_question_list", "parse_verdict", "round_id", "step_id",
]

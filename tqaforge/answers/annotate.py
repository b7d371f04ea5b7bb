"""Self-consistency answer annotation (TableBench, "Answer Annotation"): the CLI's ``generate answers``.

For every selected question that has no voted answer yet, each method asked for (default TCoT,
SCoT and PoT) answers ``samples`` times (:mod:`tqaforge.answers.agents`; PoT and chart code run
in the sandbox), then the candidates vote (:mod:`tqaforge.answers.vote`):

- **consistent** (the agents agree): an :class:`Answer` with status ``consistent`` and route
  ``verify``: it waits for people to verify it before anything trusts it as gold.
- **inconsistent**: every candidate is kept; a seeded draw (a hash of the run's seed and the
  question id, uniform in [0, 1)) below ``manual_share`` (default 0.3, TableBench's 30%) routes it
  to ``manual`` annotation, the rest are ``set_aside`` with the reason (no answer from PoT, three
  different answers, ...). The draw is stored, so the routing can be checked and repeated.
- A question that came with a gold answer (TableBench, FREB-TQA) keeps it: its vote is stored
  (status consistent or inconsistent, route ``keep_gold``) to measure the agents against the gold
  (``tqaforge answers report``), and no one is asked to look at it.

Resumable and idempotent like question generation: the agents' calls run through the ordered,
budgeted runner (:func:`tqaforge.llm.runner.run_ordered`), each question's candidates and vote
are committed in one transaction in question order, and every model call is an LLMCall record,
so a second run sends nothing and a killed run, run again, gets its finished calls from the
store and pays only for the rest.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlmodel import col, select

from tqaforge.answers.agents import (
    AGENTS,
    CHART_SUBTYPE,
    AnswerItem,
    Candidate,
    answer_once,
    chart_answer_text,
    chart_type_for,
)
from tqaforge.answers.methods import parse_methods
from tqaforge.answers.vote import VOTE_RULES, Ballot, vote
from tqaforge.errors import ConfigError, NotFound, TqaforgeError
from tqaforge.ids import candidate_id, content_hash
from tqaforge.labels import ANSWER_VERIFICATION, Authority, left_alone
from tqaforge.llm import Gateway, LLMSettings
from tqaforge.llm.step import CallSummary, HasCalls, RunnerOptions, run_step
from tqaforge.progress import Progress
from tqaforge.queries import get_by_prefix
from tqaforge.sandbox import Limits, Sandbox
from tqaforge.schemas.enums import AnswerMethod, AnswerRoute, AnswerStatus, CandidateStatus, Origin, QuestionStatus
from tqaforge.schemas.records import Answer, AnswerCandidate, Question, TableRecord
from tqaforge.schemas.shapes import AnswerVotes
from tqaforge.store import Workspace
from tqaforge.tables.matching import answer_rule
from tqaforge.tables.serialize import SERIALIZATIONS
from tqaforge.tables.writers import write_csv

VOTE_METHOD = "vote"  # Answer.method of a voted answer
#: Question selections besides explicit ids.
SELECTIONS = ("accepted", "all")
#: Answer statuses that mean "this question already has its gold" (people's word or a benchmark's).
GOLD_STATUSES = (AnswerStatus.GOLD, AnswerStatus.VERIFIED, AnswerStatus.CORRECTED)


class AnswerOptionsError(TqaforgeError):
    """The answering options cannot be used (unknown method or vote rule, bad numbers)."""


@dataclass(frozen=True)
class AnswerOptions:
    """What to answer and how. Defaults come from ``[answers]`` in ``tqaforge.toml``.

    ``questions``: ``("accepted",)`` (accepted and seed questions), ``("all",)`` (every question
    that is not rejected) or question ids / unique prefixes.
    """

    methods: tuple[AnswerMethod, ...] = (AnswerMethod.TCOT, AnswerMethod.SCOT, AnswerMethod.POT)
    samples: int = 1
    vote: str = "unanimous"
    questions: tuple[str, ...] = ("accepted",)
    manual_share: float = 0.3
    seed: int = 0
    serialization: str = "markdown"
    temperature: float = 0.0
    max_tokens: int = 2048

    def __post_init__(self) -> None:
        object.__setattr__(self, "methods", parse_methods(list(self.methods)))
        if self.samples < 1:
            raise AnswerOptionsError(f"samples must be at least 1, got {self.samples}")
        if self.max_tokens < 1:
            raise AnswerOptionsError(f"max_tokens must be at least 1, got {self.max_tokens}")
        if self.vote not in VOTE_RULES:
            raise AnswerOptionsError(f"unknown vote rule {self.vote!r}", hint="one of " + ", ".join(VOTE_RULES))
        if not 0.0 <= self.manual_share <= 1.0:
            raise AnswerOptionsError(f"manual_share must be between 0 and 1, got {self.manual_share}")
        if self.serialization not in SERIALIZATIONS:
            raise AnswerOptionsError(f"unknown serialization {self.serialization!r}", hint="one of " + ", ".join(SERIALIZATIONS))
        if not self.questions:
            raise AnswerOptionsError("no questions selected", hint="--questions accepted, --questions all, or question ids",
                                     app_hint="accepted, all, or question ids in the questions field")

    def params(self) -> dict[str, Any]:
        """The options as stored with each vote (what made it)."""
        data = asdict(self)
        data["methods"] = [m.value for m in self.methods]
        data["questions"] = list(self.questions)
        return data


def load_answer_options(ws: Workspace, **overrides: Any) -> AnswerOptions:
    """``[answers]`` of the workspace config, then ``overrides`` (None values ignored)."""
    values: dict[str, Any] = ws.config.answers.values()
    values.update({k: v for k, v in overrides.items() if v is not None})
    if isinstance(values.get("methods"), str):
        values["methods"] = parse_methods(values["methods"])
    return AnswerOptions(**values)


def sandbox_for(ws: Workspace) -> Sandbox:
    """A sandbox with the workspace's ``[sandbox]`` limits (defaults for keys it does not set)."""
    values = ws.config.sandbox.values()
    workers = values.pop("workers", 2)
    try:
        return Sandbox(workers=workers, limits=Limits(**values))
    except ValueError as exc:
        raise ConfigError(f"[sandbox] in {ws.paths.config}: {exc}") from None


@dataclass
class AnswerSummary(HasCalls):
    """What one ``generate answers`` run did; ``lines()`` for the CLI, ``as_dict()`` for --json."""

    questions_total: int = 0  # selected questions without a vote, to answer in this run
    questions_done: int = 0  # voted and committed by this run
    questions_present: int = 0  # selected, already voted before this run
    candidates: int = 0
    unparsed: int = 0
    exec_errors: int = 0
    consistent: int = 0
    inconsistent: int = 0
    routed_verify: int = 0
    routed_manual: int = 0
    set_aside: int = 0
    kept_gold: int = 0
    left_to_people: int = 0  # questions whose answer people settled: their decision left alone
    isolation_missing: list[str] = field(default_factory=list)
    calls: CallSummary = field(default_factory=CallSummary)






    @property
    def failed(self) -> bool:
        """True when the run stopped early (the CLI exits non-zero)."""
        return self.stopped is not None

    @property
    def advice(self) -> str | None:
        """What to do next after a stop; None when the run was not stopped."""
        return self.calls.advice("questions")

    def lines(self) -> list[str]:
        """The run in a few lines (stderr gets :attr:`stopped` and :attr:`advice`)."""
        lines = [
            f"{self.questions_done} questions voted, {self.questions_present} already voted; "
            f"{self.candidates} candidates ({self.unparsed} unparsed, {self.exec_errors} code failures)",
            f"consistent {self.consistent} (to people for verification: {self.routed_verify}); inconsistent "
            f"{self.inconsistent} (manual annotation: {self.routed_manual}, set aside: {self.set_aside}); "
            f"gold kept: {self.kept_gold}",
        ]
        if self.left_to_people:
            lines.append(f"{self.left_to_people} questions whose answer people settled: left alone (their gold kept)")
        if self.isolation_missing:
            lines.append("sandbox isolation not available here: " + ", ".join(self.isolation_missing))
        lines.extend(self.calls.lines())
        return lines

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["calls"] = self.calls.as_dict()
        data.update(cost=self.cost, paid_calls=self.paid_calls, cached_calls=self.cached_calls, stopped=self.stopped,
                    stop_reason=self.stop_reason.value if self.stop_reason is not None else None,
                    failed=self.failed, advice=self.advice)
        return data


def routing_draw(seed: int, question_id: str) -> float:
    """The seeded number in [0, 1) that routes an inconsistent answer (below the share: manual)."""
    return int(content_hash({"seed": seed, "question": question_id, "purpose": "manual_share"})[:13], 16) / 16**13


def select_questions(ws: Workspace, selection: tuple[str, ...]) -> list[Question]:
    """The questions a selection names, in id order (module docs of :class:`AnswerOptions`)."""
    with ws.session() as s:
        if selection == ("accepted",):
            statuses = [QuestionStatus.ACCEPTED.value, QuestionStatus.SEED.value]
            rows = s.exec(select(Question).where(col(Question.status).in_(statuses)).order_by(Question.id)).all()
        elif selection == ("all",):
            rows = s.exec(
                select(Question).where(Question.status != QuestionStatus.REJECTED.value).order_by(Question.id)
            ).all()
        else:
            if any(name in SELECTIONS for name in selection):
                raise AnswerOptionsError(
                    "give either 'accepted', 'all' or question ids, not a mix", hint="e.g. --questions accepted",
                    app_hint="e.g. accepted in the questions field",
                )
            found = {q.id: q for q in (get_by_prefix(s, Question, p) for p in selection)}
            rows = [found[k] for k in sorted(found)]
        return list(rows)


def _unvoted(ws: Workspace, selection: tuple[str, ...]) -> tuple[list[Question], int]:
    """The selected questions without a vote, in id order, and how many selected ones have one."""
    questions = select_questions(ws, selection)
    ids = [q.id for q in questions]
    voted: set[str] = set()
    with ws.session() as s:
        for start in range(0, len(ids), 500):
            voted.update(s.exec(
                select(Answer.question_id).where(col(Answer.question_id).in_(ids[start:start + 500]),
                                                 Answer.method == VOTE_METHOD)
            ).all())
    return [q for q in questions if q.id not in voted], len(voted)


def generate_answers(
    ws: Workspace,
    options: AnswerOptions,
    llm: LLMSettings,
    *,
    sandbox: Sandbox | None = None,
    on_progress: Progress | None = None,
    runner: RunnerOptions | None = None,
) -> AnswerSummary:
    """Answer, vote and route (module docs). ``sandbox``: a running pool to use (else one is started
    from ``[sandbox]`` when PoT or a chart question needs it, and closed at the end). ``runner``:
    workers, transport and a shared budget (:class:`~tqaforge.llm.step.RunnerOptions`).

    Stops cleanly, with everything finished stored, when the budget would be passed, the key is
    refused or the endpoint fails (``summary.stopped``, ``summary.stop_reason``, ``summary.advice``).
    """
    answering = AnswerStep(ws, options, llm, sandbox)
    todo, present = _unvoted(ws, options.questions)
    if not todo and not present:
        raise NotFound(
            f"no questions to answer (selection: {' '.join(options.questions)})",
            hint="accept questions first (tqaforge questions review), or pass --questions all",
            app_hint="accept questions first (Review page), or type all in the questions field",
        )
    summary = answering.summary
    summary.questions_total, summary.questions_present = len(todo), present
    if not todo:
        return summary
    runner = runner or RunnerOptions(window=max(4, 2 * llm.concurrency))

    def progress(done: int, total: int | None, note: str = "") -> None:
        if on_progress is not None:
            on_progress(summary.questions_done, summary.questions_total, f"{note}, {summary.consistent} consistent")

    try:
        run_step(ws, answering, llm, runner, on_progress=progress, summary=summary.calls)
    finally:
        answering.close()
    return summary


class AnswerStep:
    """Answering as a step of the runner (:mod:`tqaforge.llm.step`): a piece is a selected
    question without a vote; its calls are every method's samples (PoT and charts run in the
    sandbox); its commit is the candidates and the vote, in one transaction."""

    def __init__(self, ws: Workspace, options: AnswerOptions, llm: LLMSettings, sandbox: Sandbox | None) -> None:
        self.ws = ws
        self.options = options
        self.llm = llm
        self.name = f"answers:{llm.model}"[:128]
        self.sandbox = sandbox
        self.own_sandbox = False
        self.summary = AnswerSummary()
        self._tables: dict[str, tuple[Any, str]] = {}  # table id -> (Table, its CSV)
        self._counting = threading.Lock()

    def pending(self) -> list[Question]:
        return _unvoted(self.ws, self.options.questions)[0]

    def key(self, piece: Question) -> str:
        return piece.id

    def close(self) -> None:
        if self.own_sandbox and self.sandbox is not None:
            self.sandbox.close()

    def _item(self, q: Question) -> tuple[AnswerItem, str]:
        if q.table_id not in self._tables:
            with self.ws.session() as s:
                record = s.get(TableRecord, q.table_id)
                if record is None:
                    raise NotFound(f"question {q.id}: its table {q.table_id} is not in the store")
                table = record.to_table()
            self._tables[q.table_id] = (table, write_csv(table))
        table, table_csv = self._tables[q.table_id]
        chart = chart_type_for(q.text, q.meta) if q.subtype == CHART_SUBTYPE else None
        return AnswerItem(q.id, q.text, q.subtype, table, chart), table_csv

    async def call(self, gateway: Gateway, piece: Question) -> tuple[AnswerItem, list[Candidate]]:
        item, table_csv = self._item(piece)
        o = self.options
        needs_code = AnswerMethod.POT in o.methods or item.is_chart
        if needs_code and self.sandbox is None:
            self.sandbox = sandbox_for(self.ws)
            self.own_sandbox = True
        tasks = [
            asyncio.ensure_future(answer_once(
                gateway, self.sandbox, AGENTS[method], item, sample=sample, serialization=o.serialization,
                temperature=o.temperature, max_tokens=o.max_tokens, seed=o.seed, table_csv=table_csv,
            ))
            for method in o.methods for sample in range(o.samples)
        ]
        try:
            # Every method's request reaches the gateway before a failure or a Deferred (a request
            # put aside for a batch) ends the piece, so one batch carries all of them.
            results = await asyncio.gather(*tasks, return_exceptions=True)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return item, list(results)  # type: ignore[arg-type]

    def commit(self, piece: Question, result: tuple[AnswerItem, list[Candidate]]) -> Awaitable[None]:
        # In a thread: the event loop keeps sending requests while the store writes (in order:
        # the runner awaits each commit before the next of the same worker).
        return asyncio.to_thread(self._commit, *result)

    def _commit(self, item: AnswerItem, candidates: list[Candidate]) -> None:
        """One question's candidates and its vote, in one transaction."""
        model = self.llm.model
        options = self.options
        keyed = [(candidate_id(item.question_id, c.method.value, c.sample, model), c) for c in candidates]
        result = vote([Ballot(key, c.method.value, c.values if c.ok else None) for key, c in keyed],
                      answer_rule(item.subtype), options.vote)  # type: ignore[arg-type]
        with self.ws.session() as s:
            answers = s.exec(select(Answer.id, Answer.status).where(Answer.question_id == item.question_id)).all()
            # People outrank the vote (tqaforge.labels.Authority): an answer whose verification
            # they settled stays as they left it, and so does the question's gold.
            by_people = left_alone(s, ANSWER_VERIFICATION, "answer", [a for a, _ in answers], by=Authority.RULE)
            has_gold = bool(by_people) or any(st in [g.value for g in GOLD_STATUSES] for _, st in answers)
            for key, c in keyed:
                row = s.get(AnswerCandidate, key) or AnswerCandidate(id=key, question_id=item.question_id, method=c.method)
                row.sample, row.raw, row.code, row.status, row.error = c.sample, c.raw, c.code, c.status, c.error
                row.values = list(c.values) if c.ok else None
                row.value = ", ".join(c.values) if c.ok else None
                row.details = dict(c.details) or None
                row.llm_call_id, row.model = c.call_id or None, model
                s.add(row)
            votes = AnswerVotes(
                rule=options.vote, methods=[m.value for m in options.methods], samples=options.samples,
                candidates=[{"id": key, "method": c.method.value, "sample": c.sample, "status": c.status.value,
                             "values": list(c.values) if c.ok else None, "error": c.error} for key, c in keyed],
                groups=[list(g) for g in result.groups], reason=result.reason, seed=options.seed, model=model,
            )
            if has_gold:
                route = AnswerRoute.KEEP_GOLD
            elif result.consistent:
                route = AnswerRoute.VERIFY
            else:
                draw = routing_draw(options.seed, item.question_id)
                votes["draw"] = draw
                votes["manual_share"] = options.manual_share
                route = AnswerRoute.MANUAL if draw < options.manual_share else AnswerRoute.SET_ASIDE
            values = list(result.values)
            value = ", ".join(values)
            if item.is_chart and result.consistent:
                winner = dict(keyed)[result.winner or ""]
                value = chart_answer_text(winner.chart_y or [])
                values = [value]
            vote_id = Answer.make_id(item.question_id, Origin.RULE, values if result.consistent else [])
            held = s.get(Answer, vote_id)  # voted meanwhile by another run: a rule rewrites a rule's row only
            if held is None or vote_id not in by_people:
                answer = held or Answer(id=vote_id, question_id=item.question_id, value=value, values=values)
                answer.value, answer.values = value, values
                answer.status = AnswerStatus.CONSISTENT if result.consistent else AnswerStatus.INCONSISTENT
                answer.origin, answer.method, answer.votes, answer.route, answer.created_by = (
                    Origin.RULE, VOTE_METHOD, dict(votes), route, f"vote:{model}")
                s.add(answer)
        with self._counting:  # workers commit in threads of their own
            self._count(item, candidates, result, route, bool(by_people))

    def _count(self, item: AnswerItem, candidates: list[Candidate], result: Any, route: AnswerRoute,
               by_people: bool) -> None:
        summary = self.summary
        summary.left_to_people += by_people
        summary.questions_done += 1
        summary.candidates += len(candidates)
        summary.unparsed += sum(c.status == CandidateStatus.UNPARSED for c in candidates)
        summary.exec_errors += sum(c.status == CandidateStatus.EXEC_ERROR for c in candidates)
        summary.consistent += result.consistent
        summary.inconsistent += not result.consistent
        summary.routed_verify += route == AnswerRoute.VERIFY
        summary.routed_manual += route == AnswerRoute.MANUAL
        summary.set_aside += route == AnswerRoute.SET_ASIDE
        summary.kept_gold += route == AnswerRoute.KEEP_GOLD
        for c in candidates:
            for layer in c.details.get("execution", {}).get("missing", []):
                if layer not in summary.isolation_missing:
                    summary.isolation_missing.append(layer)


__all__ = [
    "AnswerOptions", "AnswerStep", "AnswerOptionsError", "AnswerSummary", "SELECTIONS", "VOTE_METHOD",
    "generate_answers", "load_answer_options", "routing_draw", "sandbox_for", "select_questions",
]

"""Run a model over a release through the gateway, and judge replies with a model.

``tqaforge evaluate --release DIR --model NAME`` asks the model every selected row of the release
with one answering method's prompt (DP, TCoT, SCoT or PoT, the agents' own templates), writes the
replies as a predictions file and scores it like any other. Base items and variants are shown in
``serialization`` (Markdown by default); a configuration prompt in its own serialization. Every
call is a ledger record keyed by its request: a second run is answered from the store and costs
nothing, and a run stopped by the budget resumes where it stopped.

**Reference-guided judge** (Wolff and Hulsebos): a judge model reads the question, the reference
answer and the whole reply and says whether the reply is correct (``prompts/judge_answer.txt``);
for variants with a missing value or duplicate rows it also says whether the reply acknowledges
them. Verdicts are calls like any other (cached, budgeted).

**One budget.** Both go through the gateway's :class:`~tqaforge.llm.budget.Budget`, as question
rounds, typing and answers do: every request is reserved at its worst case before it is sent and
charged at most that, whatever the endpoint claims. Pass the same ``budget`` to :func:`run_model`
and :func:`judge_replies` to hold a command's model calls and verdicts to one ``--max-cost``. The
summaries' costs are what the ledger holds for the calls made.

>>> summary = run_model(ws, ModelRunOptions(release=Path("releases/b-1.0.0"), model="gpt-4o-mini"))  # doctest: +SKIP
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from tqaforge.answers.agents import AGENTS, parse_methods
from tqaforge.errors import InvalidReply
from tqaforge.evaluate.predictions import CONFIGURATIONS, EvaluateError, Reference, Release, load_release
from tqaforge.files import atomic_write_text
from tqaforge.llm.budget import Budget
from tqaforge.llm.gateway import Gateway, run
from tqaforge.llm.runner import Job, RunProgress, run_ordered
from tqaforge.llm.settings import LLMSettings, load_llm_settings
from tqaforge.progress import Progress
from tqaforge.prompts import render
from tqaforge.schemas.enums import AnswerMethod
from tqaforge.store import Workspace
from tqaforge.tables.serialize import SERIALIZATIONS
from tqaforge.tables.table import Table

#: What a judge is asked to notice, per realistic perturbation (Wolff and Hulsebos, section 5).
ACKNOWLEDGE = {
    "missing_value": "The table the model was given has a value missing in a cell the answer needs. Say also whether the "
                     "reply explicitly notes that a value is missing, empty or unknown.",
    "duplicate_rows": "The table the model was given has duplicated rows. Say also whether the reply explicitly notes "
                      "that some rows or entries are duplicated.",
}
_WINDOW = 32


@dataclass(frozen=True)
class ModelRunOptions:
    """Which model answers which rows of a release, with which method and serialization; the
    predictions file (default ``evaluations/RELEASE/MODEL-METHOD.jsonl``); the budget."""

    release: Path
    model: str
    method: str = "DP"
    subsets: tuple[str, ...] = ("base",)
    serialization: str = "markdown"
    out: Path | None = None
    max_cost: float | None = None
    temperature: float = 0.0
    max_tokens: int | None = None
    seed: int = 0
    limit: int | None = None


@dataclass
class ModelRunSummary:
    """What a model run did; ``lines()`` for the CLI."""

    predictions: str
    rows: int
    answered: int = 0
    paid_calls: int = 0
    cached_calls: int = 0
    cost: float = 0.0
    stopped: str | None = None

    def lines(self) -> list[str]:
        out = [f"{self.answered} of {self.rows} rows answered -> {self.predictions} "
               f"({self.paid_calls} paid calls, {self.cached_calls} from the store, {self.cost:.4f} USD)"]
        if self.stopped:
            out.append(f"stopped early: {self.stopped}; run again to resume (the calls made are stored)")
        return out


def _one_method(name: str) -> AnswerMethod:
    methods = parse_methods(name)
    if len(methods) != 1:
        raise EvaluateError(f"one answering method per run, got {name!r}", hint="--method DP (or TCoT, SCoT, PoT)")
    return methods[0]


def _prompt(release: Release, ref: Reference, method: AnswerMethod, serialization: str) -> str:
    fmt = ref.config.split("/", 1)[0] if ref.subset == CONFIGURATIONS else serialization
    return AGENTS[method].prompt(Table.from_dict(dict(release.table(ref))), ref.question, ref.qsubtype or None, fmt)


def default_predictions_path(release: Path, model: str, method: str) -> Path:
    """Where a model run writes its replies unless told: ``evaluations/RELEASE/MODEL-METHOD.jsonl``."""
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in model)
    return Path("evaluations") / release.resolve().name / f"{safe}-{method}.jsonl"


def run_model(ws: Workspace, options: ModelRunOptions, *, llm: LLMSettings | None = None,
              on_progress: Progress | None = None, budget: Budget | None = None) -> ModelRunSummary:
    """Ask ``options.model`` every selected row and write the predictions file (module docs);
    ``llm``: the endpoint settings (default: the workspace's, :func:`load_llm_settings`);
    ``budget``: one shared with other paid calls of the command (default: ``max_cost``'s own)."""
    method = _one_method(options.method)
    if options.serialization not in SERIALIZATIONS:
        raise EvaluateError(f"unknown serialization {options.serialization!r}", hint=f"choose from {', '.join(SERIALIZATIONS)}")
    release = load_release(options.release)
    missing = [s for s in options.subsets if s not in (release.manifest.get("counts") or {})]
    if missing:
        raise EvaluateError(f"release {release.name} has no subset {', '.join(missing)}",
                            hint=f"its subsets: {', '.join(release.manifest.get('counts') or {})}")
    refs = [r for r in release.references if r.subset in options.subsets]
    if options.limit is not None:
        refs = refs[: max(options.limit, 0)]
    settings = llm if llm is not None else load_llm_settings(ws, model=options.model, max_cost=options.max_cost)
    out = options.out or default_predictions_path(options.release, options.model, method.value)
    summary = ModelRunSummary(str(out), len(refs))
    replies: dict[str, str] = {}

    async def ask(gw: Gateway, ref: Reference) -> str:
        messages = [{"role": "user", "content": _prompt(release, ref, method, options.serialization)}]
        try:
            done = await gw.complete(messages, purpose=f"evaluate_{method.value.lower()}", temperature=options.temperature,
                                     max_tokens=options.max_tokens, seed=options.seed)
        except InvalidReply:
            return ""  # a reply the gateway could not use: scored as unparsed, the call is on record
        return done.text

    def on_result(job: Job[str], text: str) -> None:
        replies[job.key] = text
        if on_progress is not None:
            on_progress(len(replies), len(refs), "rows answered")

    def costs(progress: RunProgress) -> None:
        summary.paid_calls, summary.cached_calls, summary.cost = progress.paid_calls, progress.cached_calls, progress.cost

    async def main() -> None:
        async with Gateway(ws, settings, budget=budget) as gw:
            outcome = await run_ordered(gw, [Job(r.id, functools.partial(ask, ref=r)) for r in refs], window=_WINDOW,
                                        on_result=on_result, on_progress=costs)
            summary.paid_calls, summary.cached_calls, summary.cost = gw.paid_calls, gw.cached_calls, gw.spent
            summary.stopped = outcome.stopped

    run(main())
    lines = [json.dumps({"id": r.id, "model": options.model, "method": method.value, "prediction": replies[r.id]}, ensure_ascii=False)
             for r in refs if r.id in replies]
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, "".join(line + "\n" for line in lines))
    summary.answered = len(lines)
    return summary


# ---------------------------------------------------------------------------------------------
# The judge


@dataclass(frozen=True)
class Verdict:
    """A judge's verdict on one reply; ``acknowledges`` only for realistic variants."""

    correct: bool
    acknowledges: bool | None = None


@dataclass
class JudgeRun:
    """Verdicts by (model, method, row id), and what the judging cost."""

    verdicts: dict[tuple[str, str, str], Verdict] = field(default_factory=dict)
    invalid: int = 0
    paid_calls: int = 0
    cached_calls: int = 0
    cost: float = 0.0
    stopped: str | None = None


def _yes(value: object, key: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("yes", "no"):
        return value.strip().lower() == "yes"
    raise ValueError(f'"{key}" must be "yes" or "no"')


def _validator(perturbation: str | None) -> Any:
    def check(value: Any) -> Verdict:
        if not isinstance(value, Mapping) or "correct" not in value:
            raise ValueError('reply with a JSON object {"correct": "yes" or "no"}')
        acknowledges = _yes(value.get("acknowledges"), "acknowledges") if perturbation in ACKNOWLEDGE else None
        return Verdict(_yes(value["correct"], "correct"), acknowledges)
    return check


def judge_prompt(ref: Reference, reply: str) -> tuple[str, str | None]:
    """The judge's prompt for one reply, and the realistic perturbation it also asks about (or None)."""
    perturbation = ref.config if ref.subset == "realistic" and ref.config in ACKNOWLEDGE else None
    prompt = render(
        "judge_answer", question=ref.question, reference=ref.answer_text, reply=reply[:20_000],
        acknowledgement=ACKNOWLEDGE[perturbation] if perturbation else "",
        ack_field=', "acknowledges": "yes" or "no"' if perturbation else "",
    )
    return prompt, perturbation


def judge_replies(
    ws: Workspace, model: str, items: Sequence[tuple[Reference, str, str, str]], *, max_cost: float | None = None,
    on_progress: Progress | None = None, budget: Budget | None = None,
) -> JudgeRun:
    """Verdicts of judge ``model`` on ``items`` (reference, system model, method, reply);
    ``budget``: one shared with the command's other paid calls (then ``max_cost`` is unused)."""
    settings = load_llm_settings(ws, model=model, max_cost=max_cost)
    result = JudgeRun()
    keyed = {f"{m}\0{meth}\0{ref.id}": (ref, m, meth, text) for ref, m, meth, text in items}

    async def ask(gw: Gateway, key: str) -> Verdict | None:
        ref, _, _, text = keyed[key]
        prompt, perturbation = judge_prompt(ref, text)
        try:
            verdict, _ = await gw.complete_json([{"role": "user", "content": prompt}], validate=_validator(perturbation),
                                                purpose="evaluate_judge", temperature=0.0, max_tokens=200)
        except InvalidReply:
            result.invalid += 1
            return None
        return verdict

    def on_result(job: Job[Verdict | None], verdict: Verdict | None) -> None:
        if verdict is not None:
            _, m, meth, _ = keyed[job.key]
            result.verdicts[(m, meth, keyed[job.key][0].id)] = verdict
        if on_progress is not None:
            on_progress(len(result.verdicts) + result.invalid, len(keyed), "replies judged")

    async def main() -> None:
        async with Gateway(ws, settings, budget=budget) as gw:
            outcome = await run_ordered(gw, [Job(k, functools.partial(ask, key=k)) for k in keyed], window=_WINDOW, on_result=on_result)
            result.paid_calls, result.cached_calls, result.cost = gw.paid_calls, gw.cached_calls, gw.spent
            result.stopped = outcome.stopped

    run(main())
    return result

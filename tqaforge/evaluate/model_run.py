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

**Steps of the runner.** Both are steps of :mod:`tqaforge.llm.step` (``runner``: workers,
transport, a budget by name), with one :class:`~tqaforge.llm.step.CallSummary` each. Unlike the
other stages they keep their results in a file (the predictions) or hand them back (the
verdicts), not in the store: their work left is what *this run* has not answered yet, and their
claims are this run's own. Workers in one process split a run; several processes each run the
whole of their own (the ledger still answers a request already answered from the store, so no
one pays twice for it).

>>> summary = run_model(ws, ModelRunOptions(release=Path("releases/b-1.0.0"), model="gpt-4o-mini"))  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from tqaforge.answers.agents import AGENTS
from tqaforge.answers.methods import parse_methods
from tqaforge.errors import InvalidReply
from tqaforge.evaluate.predictions import CONFIGURATIONS, EvaluateError, Reference, Release, load_release
from tqaforge.files import atomic_write_text
from tqaforge.llm.budget import Budget
from tqaforge.llm.gateway import Gateway
from tqaforge.llm.settings import LLMSettings, load_llm_settings
from tqaforge.llm.step import CallSummary, HasCalls, ReplyStep, RunnerOptions, run_name, run_step
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
class ModelRunSummary(HasCalls):
    """What a model run did; ``lines()`` for the CLI, ``as_dict()`` for JSON."""

    predictions: str
    rows: int
    answered: int = 0
    calls: CallSummary = field(default_factory=CallSummary)





    @property
    def complete(self) -> bool:
        """True when every selected row has its reply (not stopped, none waiting for a batch)."""
        return self.answered == self.rows

    def lines(self) -> list[str]:
        out = [f"{self.answered} of {self.rows} rows answered -> {self.predictions}"]
        if self.stopped:
            out.append(f"stopped early: {self.stopped}; run again to resume (the calls made are stored)")
        return out + self.calls.lines()

    def as_dict(self) -> dict[str, Any]:
        return {"predictions": self.predictions, "rows": self.rows, "answered": self.answered,
                "complete": self.complete, "calls": self.calls.as_dict()}


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
              on_progress: Progress | None = None, budget: Budget | None = None,
              runner: RunnerOptions | None = None) -> ModelRunSummary:
    """Ask ``options.model`` every selected row and write the predictions file (module docs);
    ``llm``: the endpoint settings (default: the workspace's, :func:`load_llm_settings`);
    ``budget``: one shared with other paid calls of the command (default: ``max_cost``'s own, or
    the budget ``runner`` names); ``runner``: the step runner's options. The file holds the rows
    answered: all of them unless the run stopped, or rows wait for a batch (``complete``)."""
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
    step = _Answering(release, refs, method, options)
    run_step(ws, step, settings, runner, budget=budget, on_progress=on_progress, summary=summary.calls)
    lines = [json.dumps({"id": r.id, "model": options.model, "method": method.value, "prediction": step.replies[r.id]},
                        ensure_ascii=False) for r in refs if r.id in step.replies]
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, "".join(line + "\n" for line in lines))
    summary.answered = len(lines)
    return summary


class _Answering(ReplyStep[Reference]):
    """The model run as a step (:mod:`tqaforge.llm.step`): a piece is a row of the release; its
    result the reply's text. The replies are kept here, in this run (the predictions file is
    written from them at the end), so the work left is the rows this run has not answered yet;
    the ledger makes asking again free. Several processes each write their own file and run the
    whole of it; claims only split one run's rows among its workers."""

    def __init__(self, release: Release, refs: list[Reference], method: AnswerMethod, options: ModelRunOptions) -> None:
        super().__init__("evaluate", (options.model, method.value, release.name), refs)
        self.release, self.refs, self.method, self.options = release, refs, method, options

    def key(self, piece: Reference) -> str:
        return piece.id

    def request(self, piece: Reference) -> tuple[list[dict[str, str]], str, dict[str, Any]]:
        o = self.options
        return ([{"role": "user", "content": _prompt(self.release, piece, self.method, o.serialization)}],
                f"evaluate_{self.method.value.lower()}", {"temperature": o.temperature, "max_tokens": o.max_tokens, "seed": o.seed})


# ---------------------------------------------------------------------------------------------
# The judge


@dataclass(frozen=True)
class Verdict:
    """A judge's verdict on one reply; ``acknowledges`` only for realistic variants."""

    correct: bool
    acknowledges: bool | None = None


@dataclass
class JudgeRun(HasCalls):
    """Verdicts by (model, method, row id), and the judge's calls."""

    verdicts: dict[tuple[str, str, str], Verdict] = field(default_factory=dict)
    invalid: int = 0
    calls: CallSummary = field(default_factory=CallSummary)





    def lines(self) -> list[str]:
        return [f"{len(self.verdicts)} replies judged, {self.invalid} verdicts unreadable", *self.calls.lines()]

    def as_dict(self) -> dict[str, Any]:
        return {"judged": len(self.verdicts), "invalid": self.invalid, "calls": self.calls.as_dict()}


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
    on_progress: Progress | None = None, budget: Budget | None = None, runner: RunnerOptions | None = None,
) -> JudgeRun:
    """Verdicts of judge ``model`` on ``items`` (reference, system model, method, reply);
    ``budget``: one shared with the command's other paid calls (then ``max_cost`` is unused);
    ``runner``: the step runner's options. An item whose verdict waits for a batch has none."""
    settings = load_llm_settings(ws, model=model, max_cost=max_cost)
    result = JudgeRun()
    run_step(ws, _Judging(model, items, result), settings, runner, budget=budget, on_progress=on_progress,
             summary=result.calls)
    return result


_Item = tuple[Reference, str, str, str]


class _Judging:
    """The judge as a step (:mod:`tqaforge.llm.step`): a piece is an item (reference, system
    model, method, reply); its result the verdict, None when unreadable. Like the model run
    (:class:`_Answering`) its results stay in this run (``result``): the work left is the items
    this run has not judged yet, and its claims are this run's own."""

    def __init__(self, model: str, items: Sequence[_Item], result: JudgeRun) -> None:
        self.name = run_name("judge", model)
        self.result = result
        # Keys name an item within the step: hashed, as models, methods and ids may be long.
        self.items = {self._key(i): i for i in items}
        self._judged: set[str] = set()

    @staticmethod
    def _key(item: _Item) -> str:
        ref, m, meth, _ = item
        return hashlib.sha256(json.dumps([m, meth, ref.id]).encode("utf-8")).hexdigest()[:32]

    def pending(self) -> list[_Item]:
        return [i for k, i in self.items.items() if k not in self._judged]

    def key(self, piece: _Item) -> str:
        return self._key(piece)

    async def call(self, gw: Gateway, piece: _Item) -> Verdict | None:
        ref, _, _, text = piece
        prompt, perturbation = judge_prompt(ref, text)
        try:
            verdict, _ = await gw.complete_json([{"role": "user", "content": prompt}], validate=_validator(perturbation),
                                                purpose="evaluate_judge", temperature=0.0, max_tokens=200)
        except InvalidReply:
            return None  # counted, never "correct"
        return verdict

    def commit(self, piece: _Item, result: Verdict | None) -> None:
        ref, m, meth, _ = piece
        self._judged.add(self._key(piece))
        if result is None:
            self.result.invalid += 1
        else:
            self.result.verdicts[(m, meth, ref.id)] = result

"""Items answerable from the question alone: a model is asked each base item's question with the
table withheld (issue 28, answer bias).

>>> found = question_only(ws, release, QuestionOnlyOptions(model="gpt-4o-mini", max_cost=0.5))  # doctest: +SKIP
>>> print("\\n".join(found.lines()))                                                             # doctest: +SKIP

Each scorable base item (charts and items whose gold is a table are left out: they are scored by
running code or by table similarity, not by a final answer) is asked once, at temperature 0, with
``prompts/answer_question_only.txt``: the question, the subtype's answer-format rules, a statement
that no table is given and a request for a best guess on the DP agent's ``Final Answer:`` line.
The prompt holds nothing of the table (not its cells, not its header). Each reply is scored like
a DP prediction by evaluate's scorer (:func:`tqaforge.evaluate.scoring.score_one`) against the gold.

Per subtype the section reports the items asked, the share answered **right** without the table
(evaluate's exact verdict, within the subtype's numeric tolerance) and the mean score, next to the
score of the best constant answer (:mod:`tqaforge.health.bias`): a subtype whose question-only
share right is above ``threshold`` (with ``min_items`` items answered or more) is flagged, and its
items answered right are listed (at most ``list_most``) with their question.

**Through the gateway.** The asking is a step of the runner (:mod:`tqaforge.llm.step`), like
``evaluate --model``: every call is a ledger record in the workspace (a second run is answered
from the store and costs nothing), and ``max_cost`` is a hard budget (no request that could pass
it is sent). Items the budget left unasked are counted as **not asked**, never as not answerable;
the run resumes where it stopped with a larger budget. An endpoint that fails (down, refusing the
key) stops the run with a :class:`~tqaforge.errors.HealthError` naming the cause; the calls made
before it are kept in the ledger, so running again pays only for the rest.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Sequence

from tqaforge.errors import ConfigError, HealthError
from tqaforge.evaluate.predictions import Prediction, Reference, Release
from tqaforge.evaluate.scoring import gold_table, is_chart, score_one
from tqaforge.health.bias import BiasOptions, answer_bias, subtype_of
from tqaforge.llm.budget import Budget
from tqaforge.llm.runner import StopReason
from tqaforge.llm.settings import LLMSettings, load_llm_settings
from tqaforge.llm.step import CallSummary, ReplyStep, RunnerOptions, run_step
from tqaforge.progress import Progress
from tqaforge.prompts import format_rules, render
from tqaforge.store import Workspace

__all__ = ["PROMPT", "QuestionOnlyOptions", "QuestionOnlySection", "SubtypeQuestionOnly", "question_only", "question_only_prompt"]

#: The prompt template (``prompts/answer_question_only.txt``).
PROMPT = "answer_question_only"
#: The method the replies are scored as: the DP agent's final-answer line.
METHOD = "DP"


@dataclass(frozen=True)
class QuestionOnlyOptions:
    """Which ``model`` is asked, its budget ``max_cost`` (USD; None: the workspace's), the share
    right above which a subtype is flagged (``threshold``), the fewest items answered for a flag
    (``min_items``), how many items answered right are listed per subtype (``list_most``) and the
    reply's ``max_tokens`` (a best guess is one line)."""

    model: str
    max_cost: float | None = None
    threshold: float = 0.5
    min_items: int = 5
    list_most: int = 10
    max_tokens: int = 256
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.model.strip():
            raise ConfigError("question-only answering: the model name is empty", hint="give --model NAME")
        if isinstance(self.threshold, bool) or not 0.0 <= self.threshold <= 1.0:
            raise ConfigError(f"question-only threshold must be a share from 0 to 1, got {self.threshold!r}",
                              hint="write shares as fractions: 0.5 for 50%")
        if self.min_items < 1 or self.list_most < 0 or self.max_tokens < 1:
            raise ConfigError("question-only options: min_items and max_tokens must be positive, list_most not negative",
                              hint=f"got min_items={self.min_items}, list_most={self.list_most}, max_tokens={self.max_tokens}")


@dataclass
class SubtypeQuestionOnly:
    """One subtype's figures: items scorable (``n``), asked, answered right, mean score; the best
    constant answer's score for comparison; the items answered right (id, question, answer)."""

    subtype: str
    n: int
    asked: int = 0
    right: int = 0
    score_sum: float = 0.0
    best_constant: str = ""
    best_constant_score: float = 0.0
    answered_right: list[tuple[str, str, str]] = field(default_factory=list)
    flag: bool = False

    @property
    def not_asked(self) -> int:
        return self.n - self.asked

    @property
    def share_right(self) -> float:
        """Of the items asked, the share answered right (0 when none was asked)."""
        return self.right / self.asked if self.asked else 0.0

    @property
    def mean_score(self) -> float:
        return self.score_sum / self.asked if self.asked else 0.0

    def as_dict(self, list_most: int) -> dict[str, Any]:
        return {
            "subtype": self.subtype, "items": self.n, "asked": self.asked, "not_asked": self.not_asked,
            "right": self.right, "share_right": round(self.share_right, 4), "mean_score": round(self.mean_score, 4),
            "best_constant": self.best_constant, "best_constant_score": round(self.best_constant_score, 4),
            "flag": self.flag,
            "answered_right": [{"id": i, "question": q, "answer": a} for i, q, a in self.answered_right[:list_most]],
        }


@dataclass
class QuestionOnlySection:
    """The question-only figures per subtype (module docs); ``calls``: what the asking cost (not
    part of ``as_dict``: paid or cached depends on the run, the report must not)."""

    options: QuestionOnlyOptions
    subtypes: list[SubtypeQuestionOnly] = field(default_factory=list)
    skipped: int = 0  # charts and items whose gold is a table
    calls: CallSummary = field(default_factory=CallSummary)
    #: Why some items were not asked (the budget's message), None when every item was.
    stopped: str | None = None

    @property
    def n_items(self) -> int:
        return sum(s.n for s in self.subtypes)

    @property
    def asked(self) -> int:
        return sum(s.asked for s in self.subtypes)

    @property
    def not_asked(self) -> int:
        return self.n_items - self.asked

    @property
    def flagged(self) -> list[str]:
        return [s.subtype for s in self.subtypes if s.flag]

    @property
    def checkable(self) -> list[str]:
        """The subtypes with ``min_items`` items asked or more: the ones a flag can be raised on."""
        return [s.subtype for s in self.subtypes if s.asked >= self.options.min_items]

    def lines(self) -> list[str]:
        o = self.options
        out = [f"Question only ({o.model}, table withheld): {self.asked} of {self.n_items} items asked"
               f" ({self.skipped} charts or table answers left out)"]
        if self.not_asked:
            out.append(f"  {self.not_asked} items NOT ASKED (not counted as unanswerable): {self.stopped or 'the budget'};"
                       " run again with a larger budget to ask them (the calls made are stored)")
        for s in self.subtypes:
            more = f", {s.not_asked} not asked" if s.not_asked else ""
            out.append(f"  {s.subtype} ({s.asked} asked{more}): {s.right} right without the table ({s.share_right:.0%}),"
                       f" mean score {s.mean_score:.2f}; best constant {_short(s.best_constant)!r} scores"
                       f" {s.best_constant_score:.2f}" + ("  [QUESTION ONLY]" if s.flag else ""))
            if s.flag:
                for item_id, question, answer in s.answered_right[: o.list_most]:
                    out.append(f"    {item_id}: {_short(question, 100)!r} -> {_short(answer)!r}")
                if len(s.answered_right) > o.list_most:
                    out.append(f"    ... and {len(s.answered_right) - o.list_most} more")
        out.append(f"  flagged: {len(self.flagged)} of {len(self.checkable)} subtypes with {o.min_items} items asked or more"
                   f" answered right above {o.threshold:.0%} without the table")
        return out

    def as_dict(self) -> dict[str, Any]:
        o = self.options
        return {
            "model": o.model,
            "options": {"threshold": o.threshold, "min_items": o.min_items, "list_most": o.list_most,
                        "max_tokens": o.max_tokens, "seed": o.seed, "temperature": 0.0},
            "items": self.n_items, "asked": self.asked, "not_asked": self.not_asked, "skipped": self.skipped,
            "stopped": self.stopped, "flagged": self.flagged, "checkable": self.checkable,
            "subtypes": [s.as_dict(o.list_most) for s in self.subtypes],
        }


def _short(text: str, most: int = 60) -> str:
    return text if len(text) <= most else text[: most - 3] + "..."


def question_only_prompt(ref: Reference) -> str:
    """The prompt for one item: its question and its subtype's format rules, nothing of its table."""
    return render(PROMPT, question=ref.question, format_rules=format_rules(ref.qsubtype or None))


def scorable(release: Release) -> tuple[list[Reference], int]:
    """The base items a final answer is scored on (in release order), and how many were left out."""
    base = release.base_references()
    kept = [r for r in base if r.answer and not is_chart(r) and gold_table(r) is None]
    return kept, len(base) - len(kept)


def question_only(ws: Workspace, release: Release, options: QuestionOnlyOptions, *, llm: LLMSettings | None = None,
                  budget: Budget | None = None, runner: RunnerOptions | None = None,
                  on_progress: Progress | None = None) -> QuestionOnlySection:
    """Ask ``options.model`` every scorable base item of ``release`` with the table withheld, score
    the replies and build the section (module docs). ``llm``: the endpoint settings (default the
    workspace's, with ``options.max_cost``); ``budget``: one shared with the command's other paid
    calls. A release with no scorable base item is a :class:`HealthError`; so is an endpoint that
    stops the run (the calls made stay in the ledger); the budget running out is not."""
    refs, skipped = scorable(release)
    if not refs:
        raise HealthError(f"release {release.name} has no base item scored by a final answer: nothing to ask without the table"
                          + (f" ({skipped} charts or table answers left out)" if skipped else ""),
                          hint="question-only answering needs base items with text or number golds; leave out --model")
    settings = llm if llm is not None else load_llm_settings(ws, model=options.model, max_cost=options.max_cost)
    section = QuestionOnlySection(options, skipped=skipped)
    step = _Asking(refs, options, settings.model)
    run_step(ws, step, settings, runner, budget=budget, on_progress=on_progress, summary=section.calls)
    calls = section.calls
    if calls.stop_reason is not None and calls.stop_reason != StopReason.BUDGET:
        raise HealthError(f"question-only answering stopped after {len(step.replies)} of {len(refs)} items: {calls.stopped}",
                          hint=calls.advice("calls") or "run again to resume")
    section.stopped = calls.stopped
    _score(section, refs, step.replies, settings.model)
    return section


def _score(section: QuestionOnlySection, refs: Sequence[Reference], replies: dict[str, str], model: str) -> None:
    o = section.options
    constants = {s.subtype: s for s in answer_bias(refs, None, BiasOptions(min_items=o.min_items)).subtypes}
    groups: dict[str, list[Reference]] = defaultdict(list)
    for ref in refs:
        groups[subtype_of(ref)].append(ref)
    for name in sorted(groups):
        best = constants.get(name)
        figures = SubtypeQuestionOnly(name, len(groups[name]), best_constant=best.best_constant if best else "",
                                      best_constant_score=best.best_score if best else 0.0)
        for ref in groups[name]:
            if ref.id not in replies:
                continue
            scored = score_one(ref, Prediction(0, ref.id, model, METHOD, replies[ref.id]), {})
            figures.asked += 1
            figures.score_sum += scored.score
            if scored.correct:
                figures.right += 1
                figures.answered_right.append((ref.id, ref.question, ref.answer_text))
        figures.flag = figures.asked >= o.min_items and figures.share_right > o.threshold
        section.subtypes.append(figures)


class _Asking(ReplyStep[Reference]):
    """The asking as a step (:mod:`tqaforge.llm.step`): a piece is a base item; its result the
    reply's text (empty for a reply the gateway could not use: scored wrong, the call on record).
    Like ``evaluate --model`` the replies stay in this run (the work left is the items it has not
    asked yet); the ledger makes asking again free."""

    def __init__(self, refs: list[Reference], options: QuestionOnlyOptions, model: str) -> None:
        super().__init__("health_question_only", (model,), refs)
        self.options = options

    def key(self, piece: Reference) -> str:
        return piece.id

    def request(self, piece: Reference) -> tuple[list[dict[str, str]], str, dict[str, Any]]:
        return ([{"role": "user", "content": question_only_prompt(piece)}], "health_question_only",
                {"temperature": 0.0, "max_tokens": self.options.max_tokens, "seed": self.options.seed})

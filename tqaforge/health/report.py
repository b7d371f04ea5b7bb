"""Benchmark health: is a release any good before it is frozen (issue 28)?

>>> report = run(HealthOptions(release=Path("releases/b-1.0.0"), evaluations=(Path("evaluations/b/gpt"),)))  # doctest: +SKIP
>>> print("\\n".join(report.lines()))                                                                       # doctest: +SKIP

A stage after ``evaluate``: it reads a release and the per-item scores (``items.jsonl``,
:mod:`tqaforge.evaluate.item_file`) of several evaluations of it (none: the sections that compare
systems say they did not run, and their checks fail unchecked), and builds a report of
**sections**, each from a builder in :data:`SECTION_BUILDERS` (a function of the
:class:`HealthContext` returning a :class:`HealthSection`, or None when it has nothing to say):

- ``items``: item analysis (:mod:`tqaforge.evaluate.items`) of the base items over every system
  scored: difficulty, corrected item-total discrimination, flags (solved by all, by none, suspect
  gold with its evidence: the adjudication requests), the 2PL IRT fit only when asked (``irt``;
  girth is slow);
- ``differences``: paired comparisons (:func:`tqaforge.evaluate.significance.compare`) of the
  systems on their common base items, and of each system's configurations (serialization x
  perturbation) against a baseline configuration when the configurations subset was scored: the
  pairs too close to tell apart (below the minimum detectable difference) are named;
- ``labels``: Dawid-Skene label quality (:mod:`tqaforge.annotation.label_quality`) over the
  workspace's annotations, when a workspace is given;
- ``leakage``: exact and near duplicates of tables and questions, within the release and against
  reference sets (:mod:`tqaforge.health.leakage`);
- ``bias``: per subtype, the best constant answer, the gold's table position and the share of
  golds that are the first option a question lists (:mod:`tqaforge.health.bias`);
- ``question_only``: with a ``model`` (and a ``workspace``, whose ledger caches its calls), per
  subtype the share of base items the model answers right from the question alone, the table
  withheld (:mod:`tqaforge.health.question_only`);
- ``memorisation``: with a ``model`` (and a ``workspace`` for the ledger), header, row and cell
  completion probes of each distinct table in the manner of tabmemcheck, through the gateway,
  cached and budgeted (:mod:`tqaforge.health.memorisation`).

A new kind of finding is one more builder in :data:`SECTION_BUILDERS`. Each section carries its threshold **checks** (:class:`Check`):
:class:`Thresholds` sets the limits (None: reported, not checked); the report ``passed`` when
every check does; ``tqaforge release build --require-health`` refuses to freeze otherwise.

:func:`tqaforge.health.suspects.send_suspects` files the suspect gold of both sections in a
workspace's adjudication queue with its evidence (a person's decision is never reopened).

:func:`write_report` writes ``health.json``, ``health.md`` and two plots (difficulty histogram,
discrimination against difficulty), each atomically. Nothing in ``health.json`` or ``health.md``
depends on the clock or the machine (seeded resampling, sorted keys): the same release and
evaluations give the same bytes, so a release that carries them rebuilds byte for byte.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from tqaforge.errors import EvaluateError, HealthError, ReaderError, TqaforgeError
from tqaforge.evaluate.item_file import (
    ItemScore,
    open_item_scores,
    read_item_scores,
    saved_configuration_scores,
    saved_system_scores,
)
from tqaforge.evaluate.items import (
    SOLVED_BY_ALL,
    SOLVED_BY_NONE,
    SUSPECT_GOLD,
    ItemAnalysis,
    ItemAnalysisOptions,
    adjudication_requests,
    analyse_items,
    item_matrix,
)
from tqaforge.evaluate.predictions import BASE_CONFIG, Release, load_release
from tqaforge.evaluate.significance import CompareOptions, compare
from tqaforge.files import atomic_write_text
from tqaforge.printable import escape_controls

if TYPE_CHECKING:  # the release build (Parquet and all) is loaded only by the gate that feeds it
    from tqaforge.release.build import AttachedReport

__all__ = [
    "FLAG_TEXT", "HEALTH_JSON", "HEALTH_MD", "THRESHOLD_TEXT", "Check", "Evaluation", "HealthContext", "HealthOptions", "HealthReport", "HealthSection",
    "SECTION_BUILDERS", "SectionBuilder", "Thresholds", "run", "write_report",
]

HEALTH_JSON = "health.json"
HEALTH_MD = "health.md"
PLOTS = ("difficulty.png", "discrimination.png")


@dataclass(frozen=True)
class Thresholds:
    """The limits the report checks (None: reported only). Shares are fractions (0.05 = 5%).

    ``max_suspect_gold``: of the base items scored by ``min_systems`` systems or more, the share
    flagged suspect gold; ``max_solved_by_all`` / ``max_solved_by_none`` likewise;
    ``max_below_mdd``: of the pairs of systems compared, the share whose difference is below the
    minimum detectable one; ``max_label_suspect_gold``: of the adjudicated items of the label-
    quality section, the share whose Dawid-Skene estimate disagrees with the gold."""

    max_suspect_gold: float | None = 0.05
    max_solved_by_all: float | None = None
    max_solved_by_none: float | None = None
    max_below_mdd: float | None = None
    max_label_suspect_gold: float | None = None
    #: Of the release's items, the share whose question and table both recur in a reference set
    #: (``leaked``) or in another item (``duplicated``); of its subtypes, the share that a constant
    #: answer or the gold's table position gives away (``biased_subtypes``). Reported only by
    #: default: a release made from a reference set's own items (the shipped sample) leaks by design.
    max_leaked: float | None = None
    max_duplicated: float | None = None
    max_biased_subtypes: float | None = None
    #: Of the subtypes a model was asked with the table withheld (``--model``; those with enough
    #: items asked), the share it answers right above ``HealthOptions.question_only_threshold``
    #: (:mod:`tqaforge.health.question_only`). Reported only by default.
    max_question_only: float | None = None
    #: Of the tables the memorisation probes selected, the share the model has memorised (the verdict
    #: of :mod:`tqaforge.health.memorisation`); reported only by default, like max_leaked. Tables left unprobed
    #: (the budget) make the check fail unchecked: a gate never passes blind.
    max_memorised: float | None = None
    min_systems: int = 5

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "min_systems":
                if isinstance(value, bool) or not isinstance(value, int) or value < 2:
                    raise HealthError(f"health threshold min_systems must be a whole number of 2 or more, got {value!r}")
            elif value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                        or not math.isfinite(value) or not 0.0 <= value <= 1.0):
                raise HealthError(f"health threshold {f.name} must be a share from 0 to 1 (or none), got {value!r}",
                                  hint="write shares as fractions: 0.05 for 5%")

    @classmethod
    def parse(cls, text: str, base: Thresholds | None = None) -> Thresholds:
        """``"max_suspect_gold=0.1, min_systems=8, max_below_mdd=none"`` over ``base`` (default the defaults)."""
        known = {f.name for f in fields(cls)}
        changes: dict[str, Any] = {}
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            name, sep, value = (x.strip() for x in part.partition("="))
            name = name.replace("-", "_")
            if not sep or name not in known:
                raise HealthError(f"unknown health threshold {part!r}", hint=f"write NAME=VALUE with NAME one of {', '.join(sorted(known))}")
            if value.lower() in ("none", "off", ""):
                if name == "min_systems":
                    raise HealthError("min_systems cannot be none", hint="give a whole number of 2 or more")
                changes[name] = None
                continue
            try:
                changes[name] = int(value) if name == "min_systems" else float(value)
            except ValueError:
                raise HealthError(f"health threshold {name}: {value!r} is not a number") from None
        return replace(base or cls(), **changes)

    @classmethod
    def from_values(cls, values: Mapping[str, float | int | None], base: Thresholds | None = None) -> Thresholds:
        """``values`` by name (None: off) over ``base`` (default the defaults): what a form of one
        number per threshold gives (the app's Health page). An unknown name or a value out of range
        is a :class:`~tqaforge.errors.HealthError` saying which and what to give."""
        unknown = sorted(set(values) - {f.name for f in fields(cls)})
        if unknown:
            raise HealthError(f"unknown health threshold {unknown[0]!r}", hint=f"use one of {', '.join(THRESHOLD_TEXT)}")
        changes: dict[str, Any] = dict(values)  # each checked by __post_init__
        return replace(base or cls(), **changes)


#: Each threshold in words (what a form that sets them shows); the shares are fractions, 0.05 = 5%.
THRESHOLD_TEXT: dict[str, str] = {
    "max_suspect_gold": "suspect gold: largest share of base items whose gold looks wrong (strong systems fail them, weak ones pass)",
    "max_solved_by_all": "solved by all: largest share of base items every system gets right",
    "max_solved_by_none": "solved by none: largest share of base items no system gets right",
    "max_below_mdd": "too close to tell apart: largest share of pairs of systems differing by less than the minimum detectable difference",
    "max_label_suspect_gold": "label quality: largest share of adjudicated items whose Dawid-Skene estimate disagrees with the gold",
    "max_leaked": "leaked: largest share of items whose question and table recur in a reference set",
    "max_duplicated": "duplicated: largest share of items whose question and table recur in another item",
    "max_biased_subtypes": "answer bias: largest share of subtypes a constant answer, the gold's position or the first option gives away",
    "max_question_only": "question only: largest share of subtypes a model answers right with the table withheld",
    "max_memorised": "memorised: largest share of the tables probed that the model has memorised (header, row and cell completion)",
    "min_systems": "systems: items count toward the item checks when this many systems or more scored them",
}


#: The sections that ask a model (``HealthOptions.model``), by name.
MODEL_CHECKS = ("question_only", "memorisation")
#: Each model check in words (the app's form).
MODEL_CHECK_TEXT = {"question_only": "each question with its table withheld", "memorisation": "memorisation probes of each table"}


@dataclass(frozen=True)
class HealthOptions:
    """What to report on: the ``release`` directory, the ``evaluations`` (directories ``tqaforge
    evaluate`` wrote, or their ``items.jsonl``), an optional ``workspace`` (label quality), the
    ``thresholds``; ``irt``: fit girth's 2PL model (slow); ``suspect_alpha``: the one-sided level
    of a negative discrimination; ``alpha``/``power``/``n_resamples``/``seed`` of the paired
    comparisons; ``config_baseline``: the configuration each other one is compared with (default:
    the first unperturbed ``SERIALIZATION/none`` in name order, else the first); ``plots``."""

    release: Path
    evaluations: tuple[Path, ...] = ()
    workspace: Path | None = None
    thresholds: Thresholds = field(default_factory=Thresholds)
    irt: bool = False
    suspect_alpha: float = 0.05
    alpha: float = 0.05
    power: float = 0.8
    n_resamples: int = 2000
    seed: int = 0
    config_baseline: str | None = None
    plots: bool = True
    #: Reference sets of the leakage section (files of questions and tables); None: the shipped ones
    #: (:func:`tqaforge.health.leakage.default_references`).
    references: tuple[Path, ...] | None = None
    #: A model for the sections that ask one (question-only answering, memorisation probes; with
    #: ``workspace``: the ledger caches their calls) and the one budget of all their calls in USD
    #: (None: no limit).
    model: str | None = None
    max_cost: float | None = None
    #: Which of the model's checks run (a subset of :data:`MODEL_CHECKS`; default: all).
    model_checks: tuple[str, ...] = ("question_only", "memorisation")
    #: Question only: a subtype whose share answered right without the table is above this is
    #: flagged (with ``question_only_min_items`` items asked or more); items right listed per subtype.
    question_only_threshold: float = 0.5
    question_only_min_items: int = 5
    question_only_list: int = 10
    #: The memorisation probes' share of the distinct tables: the first so many (None: all).
    memorisation_tables: int | None = None
    memorisation_seed: int = 0


@dataclass(frozen=True)
class Check:
    """One threshold check of a section: ``value`` against ``limit`` (passes when value <= limit)."""

    name: str
    section: str
    value: float
    limit: float
    passed: bool
    detail: str
    #: False: the data cannot tell (too few systems, say): the check fails, ``detail`` says why.
    checked: bool = True

    def line(self) -> str:
        value = f"{self.value:.2%}" if self.checked else "cannot be checked"
        return f"[{'pass' if self.passed else 'FAIL'}] {self.name}: {value} (limit {self.limit:.2%}); {self.detail}"


def check(name: str, section: str, count: int, total: int, limit: float | None, what: str) -> list[Check]:
    """The check ``count / total <= limit`` (none when ``limit`` is None); ``what`` names the counted things."""
    if limit is None:
        return []
    if total == 0:  # a threshold asked for and nothing to check it on: fails (a gate never passes blind)
        return [Check(name, section, 0.0, limit, False, f"no {what}: nothing to check it on", checked=False)]
    value = count / total if total else 0.0
    return [Check(name, section, round(value, 6), limit, value <= limit, f"{count} of {total} {what}")]


#: Why an item is flagged, by reason (the keys of ``HealthSection.flagged`` and of the report's
#: ``flagged_items``): the item analysis's flags, then one per kind of finding of the other sections.
FLAG_TEXT: dict[str, str] = {
    SUSPECT_GOLD: "the strong systems fail it and the weak ones pass: its gold may be wrong",
    SOLVED_BY_ALL: "every system gets it right",
    SOLVED_BY_NONE: "no system gets it right",
    "table_duplicate": "its table is an exact or near copy of another release table or of a reference set's",
    "question_duplicate": "its question is an exact or near copy of another release question or of a reference set's",
    "constant_answer": "its subtype is answered by a constant",
    "position": "its subtype's gold sits at one end of the table more often than chance",
    "first_option": "its subtype's gold is the first option the question lists more often than chance",
    "question_only": "its subtype is answered right by a model with the table withheld",
    "memorised": "a model reproduces its table (memorisation probes)",
}


def subtype_flags(release: Release, reasons: Mapping[str, Sequence[str]]) -> dict[str, tuple[str, ...]]:
    """The base items of each subtype in ``reasons`` (subtype -> reasons), with those reasons."""
    from tqaforge.health.bias import subtype_of

    return {r.id: tuple(reasons[subtype_of(r)]) for r in release.base_references() if subtype_of(r) in reasons}


_REASON_RANK = {name: k for k, name in enumerate(FLAG_TEXT)}


def reason_order(reason: str) -> tuple[int, str]:
    """Sort key of a reason: :data:`FLAG_TEXT`'s order, a custom section's reasons after (by name)."""
    return _REASON_RANK.get(reason, len(_REASON_RANK)), reason


def merge_flags(*parts: Mapping[str, Sequence[str]]) -> dict[str, tuple[str, ...]]:
    """Item -> reasons of several parts, each item's reasons in :func:`reason_order`, no repeats."""
    merged: dict[str, set[str]] = {}
    for part in parts:
        for item, why in part.items():
            merged.setdefault(item, set()).update(why)
    return {item: tuple(sorted(why, key=reason_order)) for item, why in sorted(merged.items()) if why}


@dataclass(frozen=True)
class HealthSection:
    """One section of the report: its ``name`` (a key), ``title``, text ``body`` (lines), JSON
    ``data`` and threshold ``checks``. A builder of another kind of finding wraps its own summary:
    ``HealthSection(name, title, summary.lines(), summary.as_dict(), checks)``."""

    name: str
    title: str
    body: tuple[str, ...]
    data: Mapping[str, Any]
    checks: tuple[Check, ...] = ()
    #: The summary object the section was built from (the item analysis draws the plots), not serialised.
    source: Any = field(default=None, compare=False, repr=False)
    #: The release items this section flags, each with its reasons (keys of :data:`FLAG_TEXT`);
    #: :meth:`HealthReport.flagged_items` merges them over the sections.
    flagged: Mapping[str, tuple[str, ...]] = field(default_factory=dict, compare=False, repr=False)

    def lines(self) -> list[str]:
        return [self.title, *("  " + line if line else "" for line in self.body), *("  " + c.line() for c in self.checks)]

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "title": self.title, "checks": [asdict(c) for c in self.checks], "data": dict(self.data)}


@dataclass(frozen=True)
class Evaluation:
    """One evaluation read: where, the release its header names, its rows (every subset)."""

    path: str
    release: str
    rows: tuple[ItemScore, ...]

    @property
    def systems(self) -> tuple[str, ...]:
        return tuple(sorted({r.system for r in self.rows}))


@dataclass(frozen=True)
class HealthContext:
    """What a section builder reads: the options, the verified release and the evaluations."""

    options: HealthOptions
    release: Release
    evaluations: tuple[Evaluation, ...]
    #: The one budget of every model call the sections make (``options.max_cost``; a
    #: :class:`~tqaforge.llm.budget.Budget`, made only when a model is given): question-only
    #: answering and the memorisation probes spend from it together, so ``--max-cost`` holds for both.
    budget: Any = None

    def rows(self) -> list[ItemScore]:
        return [r for e in self.evaluations for r in e.rows]


SectionBuilder = Callable[[HealthContext], "HealthSection | None"]


@dataclass
class HealthReport:
    """The sections, their checks and the verdict; ``lines()``, ``as_dict()``, ``markdown()``."""

    release: str
    evaluations: list[dict[str, Any]]
    sections: list[HealthSection]
    analysis: ItemAnalysis | None = None
    outputs: list[str] = field(default_factory=list)
    #: The release's base items (the denominator of :meth:`flagged_items`' share).
    n_items: int = 0

    @property
    def checks(self) -> list[Check]:
        return [c for s in self.sections for c in s.checks]

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    @property
    def passed(self) -> bool:
        return not self.failed

    def calls(self) -> list[tuple[str, Any]]:
        """(section name, its :class:`~tqaforge.llm.step.CallSummary`) of each section that asked
        a model: what the calls cost, shown beside the report, never in it (the report's bytes
        must not depend on the cache)."""
        return [(s.name, calls) for s in self.sections if (calls := getattr(s.source, "calls", None)) is not None]

    def flagged_items(self) -> dict[str, tuple[str, ...]]:
        """Every release item some section flags, with its reasons (keys of :data:`FLAG_TEXT`):
        the items to look at first, whatever the thresholds say."""
        return merge_flags(*(s.flagged for s in self.sections))

    def flagged_line(self) -> str:
        """``items flagged: N of M base items (reason k, ...)``."""
        flagged = self.flagged_items()
        counts: dict[str, int] = {}
        for why in flagged.values():
            for name in why:
                counts[name] = counts.get(name, 0) + 1
        detail = ", ".join(f"{name} {counts[name]}" for name in sorted(counts, key=reason_order))
        return f"items flagged: {len(flagged)} of {self.n_items} base items" + (f" ({detail})" if detail else "")

    def verdict(self) -> str:
        if not self.checks:
            return "no threshold checked"
        if self.passed:
            return f"healthy: all {len(self.checks)} checks pass"
        return f"UNHEALTHY: {len(self.failed)} of {len(self.checks)} checks fail (" + "; ".join(c.line()[7:] for c in self.failed) + ")"

    def lines(self) -> list[str]:
        out = [f"health of release {self.release}: {self.verdict()}", f"  {self.flagged_line()}"]
        for e in self.evaluations:
            out.append(f"  evaluation {e['path']} (release {e['release']}): {e['rows']} rows, {len(e['systems'])} systems")
        for s in self.sections:
            out += ["", *s.lines()]
        if self.outputs:
            out += ["", "written: " + ", ".join(self.outputs)]
        return [escape_controls(line, lines=False) for line in out]

    def as_dict(self) -> dict[str, Any]:
        return {"release": self.release, "passed": self.passed, "verdict": self.verdict(), "evaluations": self.evaluations,
                "checks": [asdict(c) for c in self.checks], "sections": [s.as_dict() for s in self.sections],
                "n_items": self.n_items, "flagged_items": {k: list(v) for k, v in self.flagged_items().items()}}

    def markdown(self) -> str:
        out = [f"# Health of release {_md(self.release)}", "", f"**{_md(self.verdict())}**", "", _md(self.flagged_line()), ""]
        if self.checks:
            out += ["| check | section | value | limit | result | detail |", "|---|---|---|---|---|---|"]
            out += [f"| {c.name} | {c.section} | {f'{c.value:.2%}' if c.checked else 'cannot be checked'} | {c.limit:.2%} | {'pass' if c.passed else 'FAIL'} | {_md(c.detail)} |"
                    for c in self.checks]
            out.append("")
        out += ["Evaluations:", ""] + [f"- `{_md(e['path'])}` (release {_md(e['release'])}): {e['rows']} rows, "
                                         f"{len(e['systems'])} systems" for e in self.evaluations]
        for s in self.sections:
            out += ["", f"## {_md(s.title)}", "", "```text", *(escape_controls(line, lines=False).replace("```", "'''") for line in s.body), "```"]
        return "\n".join(out) + "\n"


def _md(text: str) -> str:
    return escape_controls(str(text), lines=False).replace("|", "\\|")


# ---------------------------------------------------------------------------------------------
# Reading the evaluations


def _evaluation(path: Path, release: Release, known: set[str]) -> Evaluation:
    header = open_item_scores(path)
    rows = tuple(read_item_scores(header.path))
    if not rows:
        raise HealthError(f"{header.path} holds no scored row", hint="score predictions on the release with `tqaforge evaluate`")
    unknown = [r.id for r in rows if r.id not in known]
    if unknown:
        raise HealthError(
            f"{header.path} scored release {header.release}, and {len(unknown)} of its {len(rows)} rows are not rows of "
            f"release {release.name} (e.g. {escape_controls(unknown[0], lines=False)})",
            hint="give evaluations of this release (`tqaforge evaluate --release` it)")
    return Evaluation(str(path), header.release, rows)


def _read(options: HealthOptions) -> HealthContext:
    try:
        release = load_release(options.release)
    except EvaluateError as exc:
        raise HealthError(str(exc.args[0]), hint=exc.hint) from None
    if options.references:  # checked before any section runs: a typo is said at once, not after the IRT fit
        from tqaforge.health.leakage import check_reference

        for path in options.references:
            try:
                check_reference(path)
            except ReaderError as exc:
                raise HealthError(f"reference set {exc.args[0]}", hint=exc.hint) from None
    known = {r.id for r in release.references}
    evaluations: list[Evaluation] = []
    owner: dict[tuple[str, str], int] = {}
    for k, path in enumerate(options.evaluations):
        try:
            e = _evaluation(path, release, known)
        except EvaluateError as exc:
            raise HealthError(str(exc.args[0]), hint=exc.hint) from None
        for r in e.rows:
            first = owner.setdefault((r.system, r.id), k)
            if first != k:
                raise HealthError(f"system {escape_controls(r.system, lines=False)} is scored on row {escape_controls(r.id, lines=False)} "
                                  f"in {evaluations[first].path} and again in {e.path}",
                                  hint="give each system's evaluation once")
        evaluations.append(e)
    unknown = sorted(set(options.model_checks) - set(MODEL_CHECKS))
    if unknown:
        raise HealthError(f"unknown model check {', '.join(unknown)}", hint=f"choose among {', '.join(MODEL_CHECKS)}")
    budget = None
    if options.model is not None:
        from tqaforge.llm.budget import Budget

        try:
            budget = Budget(options.max_cost)
        except TqaforgeError as exc:  # a bad --max-cost: refused before any section or call
            raise HealthError(str(exc.args[0]), hint=exc.hint) from None
    return HealthContext(options, release, tuple(evaluations), budget)


# ---------------------------------------------------------------------------------------------
# The sections


def items_section(ctx: HealthContext) -> HealthSection | None:
    """Item analysis of the base items over every system scored (module docs)."""
    t = ctx.options.thresholds
    base = [r for r in ctx.rows() if r.subset == "base" and r.config == BASE_CONFIG]
    systems = sorted({r.system for r in base})
    if len(systems) < 2:
        what = f"base items scored by {t.min_systems} systems or more ({len(systems)} system scored: {', '.join(systems) or 'none'})"
        blind = [c for name, limit in (("suspect_gold", t.max_suspect_gold), ("solved_by_all", t.max_solved_by_all),
                                       ("solved_by_none", t.max_solved_by_none)) for c in check(name, "items", 0, 0, limit, what)]
        return HealthSection("items", "Item analysis", (f"not run: {len(systems)} system scored on the base items "
                                                         f"({', '.join(systems) or 'none'}); it compares two or more",),
                             {"systems": systems}, tuple(blind))
    references = ctx.release.base_references()  # the same rows as ``base``: subset and configuration
    subtypes = {r.id: f"{r.qtype}_{r.qsubtype}" for r in references}
    matrix = item_matrix(((r.system, r.id, r.score) for r in base), items=[r.id for r in references], subtypes=subtypes)
    analysis = analyse_items(matrix, ItemAnalysisOptions(suspect_alpha=ctx.options.suspect_alpha, irt=ctx.options.irt))
    enough = [s for s in analysis.items if s.systems >= t.min_systems]
    what = f"base items scored by {t.min_systems} systems or more"
    checks = (check("suspect_gold", "items", sum(SUSPECT_GOLD in s.flags for s in enough), len(enough), t.max_suspect_gold, what)
              + check("solved_by_all", "items", sum(SOLVED_BY_ALL in s.flags for s in enough), len(enough), t.max_solved_by_all, what)
              + check("solved_by_none", "items", sum(SOLVED_BY_NONE in s.flags for s in enough), len(enough), t.max_solved_by_none, what))
    data = analysis.as_dict()
    data["adjudication_requests"] = [asdict(r) for r in adjudication_requests(analysis)]
    flagged = {s.item_id: tuple(s.flags) for s in analysis.items if s.flags}
    return HealthSection("items", "Item analysis", tuple(analysis.lines()), data, tuple(checks), analysis, flagged)


def _common(scores: Mapping[str, Mapping[str, float]]) -> tuple[dict[str, dict[str, float]], int]:
    """The scores on the items every system has; how many items some system lacked."""
    items = set.intersection(*(set(s) for s in scores.values()))
    every = set.union(*(set(s) for s in scores.values()))
    return {name: {i: s[i] for i in items} for name, s in scores.items()}, len(every - items)


def differences_section(ctx: HealthContext) -> HealthSection | None:
    """Paired comparisons of the systems, and of each system's configurations (module docs)."""
    o, t = ctx.options, ctx.options.thresholds
    rows = ctx.rows()
    options = CompareOptions(alpha=o.alpha, power=o.power, n_resamples=o.n_resamples, seed=o.seed)
    body: list[str] = []
    data: dict[str, Any] = {}
    checks: list[Check] = []
    scores = saved_system_scores(rows)
    if len(scores) < 2:
        body.append(f"systems: {len(scores)} scored on the base items: nothing to compare")
        checks += check("below_mdd", "differences", 0, 0, t.max_below_mdd, "pairs of systems")
    else:
        common, dropped = _common(scores)
        if not next(iter(common.values())):
            body.append("systems: no base item is scored for every system: nothing to compare")
        else:
            if dropped:
                body.append(f"systems compared on the {len(next(iter(common.values())))} base items every one has ({dropped} left out)")
            comparison = compare(common, options)
            body += comparison.lines()
            below = comparison.below_mdd
            if below:
                body.append("  too close to tell apart at this size: " + "; ".join(
                    f"{p.first} vs {p.second} ({p.difference:+.3f}, MDD {p.mdd:.3f})" for p in below))
            data["systems"] = comparison.as_dict()
            checks += check("below_mdd", "differences", len(below), len(comparison.pairs), t.max_below_mdd,
                            "pairs of systems differ by less than the minimum detectable difference")
    configurations: dict[str, Any] = {}
    for system in sorted({r.system for r in rows if r.subset == "configurations"}):
        per = saved_configuration_scores(rows, system)
        if len(per) < 2:
            continue
        common, dropped = _common(per)
        if not next(iter(common.values())):
            continue
        baseline = o.config_baseline if o.config_baseline in common else next(
            (c for c in sorted(common) if c.endswith("/none")), sorted(common)[0])
        comparison = compare(common, replace(options, baseline=baseline))
        body += ["", f"{system} across configurations (each against {baseline})"
                 + (f"; {dropped} items not scored in every configuration left out" if dropped else "") + ":"]
        body += comparison.lines()
        configurations[system] = comparison.as_dict()
    if configurations:
        data["configurations"] = configurations
    return HealthSection("differences", "Differences that count", tuple(body), data, tuple(checks))


def labels_section(ctx: HealthContext) -> HealthSection | None:
    """Dawid-Skene label quality over the workspace's annotations (when a workspace is given)."""
    if ctx.options.workspace is None:
        return None
    from tqaforge.annotation.label_quality import label_quality
    from tqaforge.store import open_workspace

    ws = open_workspace(ctx.options.workspace)
    try:
        quality = label_quality(ws)
    finally:
        ws.close()
    suspect = sum(len(k.suspect_gold) for k in quality.kinds.values())
    gold = sum(k.n_gold for k in quality.kinds.values())
    checks = check("label_suspect_gold", "labels", suspect, gold, ctx.options.thresholds.max_label_suspect_gold,
                   "adjudicated items whose Dawid-Skene estimate disagrees with the gold")
    return HealthSection("labels", "Label quality", tuple(quality.lines()), quality.as_dict(), tuple(checks))


def leakage_section(ctx: HealthContext) -> HealthSection:
    """Exact and near duplicates of the release's tables and questions, within it and against the
    reference sets (:mod:`tqaforge.health.leakage`; no model)."""
    from tqaforge.health.leakage import RELEASE, LeakageOptions, release_leakage

    found = release_leakage(ctx.options.release, LeakageOptions(references=ctx.options.references), release=ctx.release)
    t = ctx.options.thresholds
    checks = [*check("leaked", "leakage", len(found.leaked_items), found.n_items, t.max_leaked,
                     "items whose question and table recur in a reference set"),
              *check("duplicated", "leakage", len(found.internal_items), found.n_items, t.max_duplicated,
                     "items whose question and table recur in another item")]
    tables = {item: ("table_duplicate",) for d in found.tables
              for item in (*d.items, *(d.other_items if d.other_source == RELEASE else ()))}
    questions = {d.item: ("question_duplicate",) for d in found.questions}
    return HealthSection("leakage", "Memorisation and leakage (duplicates)", tuple(found.lines()), found.as_dict(),
                         tuple(checks), source=found, flagged=merge_flags(tables, questions))


def bias_section(ctx: HealthContext) -> HealthSection:
    """Per subtype, the best constant answer's score, the gold's table position and the first
    listed option (:mod:`tqaforge.health.bias`; no model)."""
    from tqaforge.health.bias import release_bias

    found = release_bias(ctx.options.release, release=ctx.release)
    flagged = set(found.constant_flagged) | set(found.position_flagged) | set(found.first_option_flagged)
    checks = check("biased_subtypes", "bias", len(flagged), len(found.subtypes), ctx.options.thresholds.max_biased_subtypes,
                   "subtypes a constant answer, the gold's table position or the first listed option gives away")
    reasons: dict[str, list[str]] = {}
    for reason, subtypes in (("constant_answer", found.constant_flagged), ("position", found.position_flagged),
                             ("first_option", found.first_option_flagged)):
        for name in subtypes:
            reasons.setdefault(name, []).append(reason)
    return HealthSection("bias", "Answer bias", tuple(found.lines()), found.as_dict(), tuple(checks), source=found,
                         flagged=subtype_flags(ctx.release, reasons))


def question_only_section(ctx: HealthContext) -> HealthSection | None:
    """With a model: per subtype, the share of base items it answers right from the question alone,
    the table withheld (:mod:`tqaforge.health.question_only`; cached in the workspace's ledger,
    budgeted). Without one: nothing, or a failing unchecked check when ``max_question_only`` is set."""
    o, limit = ctx.options, ctx.options.thresholds.max_question_only
    what = "subtypes answered right from the question alone"
    if o.model is None or "question_only" not in o.model_checks:
        if limit is None:
            return None
        return HealthSection("question_only", "Answerable from the question alone",
                             (f"not run: {'no model given' if o.model is None else 'not among the model checks asked'}",),
                             {"model": None}, tuple(check("question_only", "question_only", 0, 0, limit, what + " (no model asked)")))
    if o.workspace is None:
        raise HealthError("question-only answering asks a model, and its calls are kept in a workspace's ledger: no workspace given",
                          hint="give --workspace DIR (the workspace whose [llm] endpoint to use), or leave out --model")
    from tqaforge.health.question_only import QuestionOnlyOptions, question_only
    from tqaforge.store import open_workspace

    options = QuestionOnlyOptions(model=o.model, max_cost=o.max_cost, threshold=o.question_only_threshold,
                                  min_items=o.question_only_min_items, list_most=o.question_only_list)
    ws = open_workspace(o.workspace)
    try:
        found = question_only(ws, ctx.release, options, budget=ctx.budget)
    finally:
        ws.close()
    checks = check("question_only", "question_only", len(found.flagged), len(found.checkable), limit,
                   f"{what} (more than {o.question_only_threshold:.0%}, {o.question_only_min_items} items asked or more)")
    return HealthSection("question_only", "Answerable from the question alone", tuple(found.lines()), found.as_dict(),
                         tuple(checks), source=found,
                         flagged=subtype_flags(ctx.release, {name: ["question_only"] for name in found.flagged}))


def memorisation_section(ctx: HealthContext) -> HealthSection | None:
    """Memorisation probes of the release's tables by ``options.model`` (only when one is given;
    :mod:`tqaforge.health.memorisation`): through the gateway, each call a ledger record in the
    workspace, the run held to ``max_cost``."""
    o = ctx.options
    if o.model is None or "memorisation" not in o.model_checks:
        if o.thresholds.max_memorised is None:
            return None
        why = "no model given" if o.model is None else "not among the model checks asked"
        return HealthSection("memorisation", "Memorisation probes (model)", (f"not run: {why}",), {"model": None},
                             tuple(check("memorised", "memorisation", 0, 0, o.thresholds.max_memorised,
                                         "tables memorised by the model (no model asked)")))
    if o.workspace is None:
        raise HealthError(f"memorisation probes with model {o.model} need a workspace: its store holds the ledger of calls "
                          "(the cache and the budget)", hint="add --workspace DIR (the workspace the release was built from)")
    from tqaforge.health.memorisation import MEMORISED, MemorisationOptions, items_showing, probe_memorisation
    from tqaforge.store import open_workspace

    options = MemorisationOptions(model=o.model, max_cost=o.max_cost, max_tables=o.memorisation_tables, seed=o.memorisation_seed)
    ws = open_workspace(o.workspace)
    try:
        found = probe_memorisation(ws, ctx.release, options, budget=ctx.budget)
    finally:
        ws.close()
    limit = o.thresholds.max_memorised
    what = "tables memorised by the model"
    if limit is not None and found.not_probed:
        checks = [Check("memorised", "memorisation", 0.0, limit, False,
                        f"{len(found.not_probed)} of {found.selected} tables not probed (stopped: {found.stopped}); "
                        "run again with a larger budget", checked=False)]
    else:
        checks = check("memorised", "memorisation", len(found.of(MEMORISED)), found.selected, limit, what)
    flagged = {item: ("memorised",) for item in items_showing(ctx.release, {t.table for t in found.of(MEMORISED)})}
    return HealthSection("memorisation", "Memorisation probes (model)", tuple(found.lines()), found.as_dict(), tuple(checks),
                         source=found, flagged=flagged)


#: The builders, run in order: each a ``SectionBuilder`` returning a :class:`HealthSection` (its
#: ``checks`` from :func:`check` with a :class:`Thresholds` field).
SECTION_BUILDERS: list[SectionBuilder] = [items_section, differences_section, labels_section, leakage_section, bias_section,
                                          question_only_section, memorisation_section]


def run(options: HealthOptions, *, builders: Sequence[SectionBuilder] | None = None) -> HealthReport:
    """Read the release and the evaluations, build every section (module docs); nothing written
    (:func:`write_report`). A missing or mismatched evaluation is a :class:`HealthError`."""
    ctx = _read(options)
    sections: list[HealthSection] = []
    analysis: ItemAnalysis | None = None
    for build in builders if builders is not None else SECTION_BUILDERS:
        try:
            section = build(ctx)
        except HealthError:
            raise
        except TqaforgeError as exc:
            raise HealthError(f"health section {getattr(build, '__name__', build)}: {exc.args[0]}", hint=exc.hint) from None
        if section is not None:
            sections.append(section)
            if isinstance(section.source, ItemAnalysis):
                analysis = section.source
    evaluations = [{"path": e.path, "release": e.release, "rows": len(e.rows), "systems": list(e.systems)} for e in ctx.evaluations]
    n_items = len(ctx.release.base_references())
    return HealthReport(ctx.release.name, evaluations, sections, analysis, n_items=n_items)


# ---------------------------------------------------------------------------------------------
# The release gate


class UnhealthyRelease(HealthError):
    """A release's health fails a threshold its build requires (the message names the checks)."""


def release_gate(options: HealthOptions) -> Callable[[Path], AttachedReport]:
    """What ``release build --require-health`` passes as ``ReleaseOptions.attach``: run the report
    on the rendered release (``options.release`` is replaced by its folder) and refuse the build
    (:class:`UnhealthyRelease`, naming each failing check) when a threshold fails; else the
    release carries ``health.json`` and ``health.md``, and its dataset card and Croissant
    metadata name them with the verdict and the checks (:class:`~tqaforge.release.build.AttachedReport`)."""

    def attach(root: Path) -> AttachedReport:
        from tqaforge.release.build import AttachedReport

        report = run(replace(options, release=root))
        if not report.passed:
            raise UnhealthyRelease(
                f"release {report.release} fails its health checks, not frozen:\n  " + "\n  ".join(c.line() for c in report.failed),
                hint="fix the items (`tqaforge health ... --workspace WS --send-suspects` puts the suspect gold in the "
                     "adjudication queue with its evidence), "
                     "or relax the threshold (--health-thresholds NAME=VALUE)")
        return AttachedReport(report_files(report), HEALTH_JSON, "Health report", report.passed, report.verdict(),
                              tuple(c.line() for c in report.checks))

    return attach


# ---------------------------------------------------------------------------------------------
# Writing


def report_files(report: HealthReport) -> dict[str, bytes]:
    """``health.json`` and ``health.md`` as bytes (what a release carries; deterministic)."""
    text = escape_controls(json.dumps(report.as_dict(), indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False), json=True)
    return {HEALTH_JSON: (text + "\n").encode("utf-8"), HEALTH_MD: report.markdown().encode("utf-8")}


def default_health_dir(release: Path, root: Path = Path(".")) -> Path:
    """Where ``tqaforge health`` writes unless told: ``ROOT/health/RELEASE``."""
    return root / "health" / release.resolve().name


def write_report(report: HealthReport, out: Path, *, plots: bool = True) -> list[str]:
    """``health.json``, ``health.md`` and (``plots``, with an item analysis) the two plots in
    ``out``, each written atomically; their paths (also in ``report.outputs``)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        written: list[Path] = []
        for name, data in report_files(report).items():
            atomic_write_text(out / name, data.decode("utf-8"))
            written.append(out / name)
        if plots and report.analysis is not None:
            written += _plots(report.analysis, report.release, out)
    except OSError as exc:
        raise HealthError(f"cannot write the health report to {out}: {exc.strerror or exc}", hint="give --out a writable directory") from None
    report.outputs = [str(p) for p in written]
    return report.outputs


def _save(fig: Any, path: Path) -> Path:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".png", dir=path.parent)
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=100)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _plots(analysis: ItemAnalysis, release: str, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    with matplotlib.rc_context({"text.parse_math": False}):
        scored = [s for s in analysis.items if s.difficulty is not None]
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.hist([float(s.difficulty or 0.0) for s in scored], bins=20, range=(0, 1), color="#4c72b0")
        ax.set_xlabel("difficulty (share of systems right; high = easy)")
        ax.set_ylabel("items")
        ax.set_title(f"{release}: {len(scored)} items, {len(analysis.systems)} systems", fontsize=10)
        fig.tight_layout()
        written.append(_save(fig, out / PLOTS[0]))
        plt.close(fig)
        fig, ax = plt.subplots(figsize=(7, 4.5))
        points = [s for s in scored if s.discrimination is not None]
        for flagged, colour, label in ((False, "#4c72b0", "items"), (True, "#c44e52", "suspect gold")):
            chosen = [s for s in points if (SUSPECT_GOLD in s.flags) == flagged]
            ax.scatter([float(s.difficulty or 0.0) for s in chosen], [float(s.discrimination or 0.0) for s in chosen], s=12, c=colour, label=f"{label} ({len(chosen)})")
        ax.axhline(0.0, color="grey", linewidth=0.8)
        ax.set_xlabel("difficulty (share of systems right)")
        ax.set_ylabel("discrimination (corrected item-total r)")
        ax.set_title(f"{release}: discrimination against difficulty", fontsize=10)
        ax.legend(fontsize=8)
        fig.tight_layout()
        written.append(_save(fig, out / PLOTS[1]))
        plt.close(fig)
    return written


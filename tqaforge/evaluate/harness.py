"""Score a predictions file on a release: ``tqaforge evaluate --release DIR --predictions FILE``.

>>> report = evaluate(EvaluateOptions(release=Path("releases/b-1.0.0"), predictions=Path("p.jsonl")))  # doctest: +SKIP
>>> print("\\n".join(report.lines()))                                                                   # doctest: +SKIP

A **system** is a model and an answering method (``o3-mini/DP``). For each system, each subset
and each configuration (``base``, a perturbation, or ``SERIALIZATION/PERTURBATION``) that has
predictions, per subtype, per question type and overall:

- TableBench-compatible: its metric of the subtype (EM, EM within 10%, ROUGE-L, chart Pass@1),
  Parse@1 and, where code runs, ECR@1; types and Overall aggregated as TableBench's evaluation
  script does (pooled items per metric bucket, each bucket rounded, weighted by size; DataAnalysis
  is its ``Mix_Metric``; Overall counts Pass@1 as a fraction, TableBench's quirk, kept here so
  that Overall compares with published numbers);
- normalised: the same metric with our parser and matcher (:mod:`tqaforge.evaluate.scoring`),
  Overall the mean item score with Pass@1 as a percentage like the rest.

A row of the release with no prediction, in a group (and dataset) that has predictions, counts
as unanswered (wrong): leaving out hard items cannot raise a score. Across groups:

- per robustness aspect (the variant subsets, by perturbation): FREB-TQA's Em of the items and of
  their variants, Emd and VP, on normalised exact match of paired (item, variant) predictions;
- over the configurations subset: ToRR's performance P and robustness R per system (items x
  configurations per dataset), and Kendall's W of the systems' ranking across configurations
  when two or more systems are scored;
- format understanding (the capability-based TableBench; :mod:`tqaforge.evaluate.formats`): per
  system, the mean score of the same items in each serialization (the unperturbed
  configurations), the best and worst format and their spread;
- large-table understanding (:mod:`tqaforge.evaluate.large_tables`): per system, the accuracy of
  the base ``LargeTableUnderstanding`` probes per token bucket of their table;
- with a judge model (``judge_model``): the share of replies it grades correct against the
  reference, per group, and per realistic perturbation the share that acknowledges the missing
  value or the duplicates (:mod:`tqaforge.evaluate.model_run`).

Outputs: :meth:`EvaluationReport.lines` (the terminal table), ``scores.json`` and PNG plots by
subtype, by configuration and by format (:func:`write_outputs`), and every row's score in
``items.jsonl`` (:mod:`tqaforge.evaluate.item_file`: what ``tqaforge health`` reads).
"""

from __future__ import annotations

import gc
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from tqaforge.errors import ReaderError
from tqaforge.evaluate.batches import BATCH_SIZE
from tqaforge.evaluate.formats import FormatUnderstanding, format_understanding, read_format_understanding
from tqaforge.evaluate.item_file import ITEMS_FILE, write_item_scores
from tqaforge.evaluate.large_tables import (
    LargeTableUnderstanding,
    large_table_understanding,
    read_large_table_understanding,
)
from tqaforge.evaluate.predictions import (
    BASE_CONFIG,
    CONFIGURATIONS,
    ROBUSTNESS_SUBSETS,
    EvaluateError,
    Matched,
    Reference,
    Release,
    load_release,
    match,
    read_predictions,
)
from tqaforge.evaluate.scoring import (
    Results,
    SandboxStart,
    Scored,
    code_predictions,
    metric_name,
    sandbox_workers,
    score_one,
    start_programs,
    unanswered,
    uses_code,
)
from tqaforge.evaluate.tablebench import percent
from tqaforge.files import atomic_write_text
from tqaforge.printable import escape_controls
from tqaforge.progress import Progress
from tqaforge.sandbox import Limits, Sandbox
from tqaforge.tables.readers.jsonio import read_json_file

if TYPE_CHECKING:  # the judge imports the LLM gateway (and openai), the store SQLAlchemy: only when a judge is asked for
    from tqaforge.evaluate.model_run import Verdict
    from tqaforge.llm.budget import Budget
    from tqaforge.store import Workspace

#: TableBench's four question types, in its order.
TABLEBENCH_TYPES = ("FactChecking", "NumericalReasoning", "DataAnalysis", "Visualization")
OVERALL = "Overall"
#: Judge verdicts by (model, method, row id).
Verdicts = dict[tuple[str, str, str], "Verdict"]


@dataclass(frozen=True)
class EvaluateOptions:
    """What to score: a release directory and a predictions file; ``model`` names predictions that
    name none; ``out`` receives ``scores.json`` and the plots (default
    ``evaluations/RELEASE/PREDICTIONS`` under the current directory);
    ``workers`` sandbox workers at most (one per 64 programs: :func:`~tqaforge.evaluate.scoring.sandbox_workers`);
    ``wall_seconds`` per program (TableBench allows 15); ``programs_per_run``: programs run one
    after another in one sandbox run at most (:mod:`tqaforge.evaluate.batches`: what a program
    leaves in a library it changed in place is seen by the next ones of its run, as in TableBench's
    own single process; 1 runs each program in a fresh sandbox child of its own)."""

    release: Path
    predictions: Path
    model: str | None = None
    out: Path | None = None
    workers: int = 2
    wall_seconds: float = 15.0
    programs_per_run: int = BATCH_SIZE
    plots: bool = True
    #: A judge model (reference-guided grading and acknowledgement; needs a workspace for its calls).
    judge_model: str | None = None
    judge_max_cost: float | None = None


@dataclass(frozen=True)
class GroupRow:
    """The scores of one group: a subtype (``qtype_qsubtype``), a question type or Overall, of one
    system, subset and configuration. Scores in percent; ``ecr`` None where no code runs."""

    system: str
    subset: str
    config: str
    group: str
    level: str
    n: int
    answered: int
    metric: str
    tablebench: float
    normalised: float
    parse: float
    ecr: float | None
    judge: float | None = None
    teds_structure: float | None = None  # structure-only TEDS (percent) of the group's items whose gold is a table


@dataclass(frozen=True)
class RobustnessRow:
    """FREB-TQA's metrics of one perturbation for one system, over paired (item, variant) predictions."""

    system: str
    subset: str
    perturbation: str
    n: int
    em_original: float
    em_perturbed: float
    emd: float
    vp: float
    acknowledgement: float | None = None


@dataclass(frozen=True)
class TorrRow:
    """ToRR's performance and robustness of one system over the configurations subset."""

    system: str
    configs: int
    items: int
    performance: float
    robustness: float


@dataclass
class EvaluationReport:
    """Everything :func:`evaluate` computed; ``lines()`` for the terminal, ``as_dict()`` for JSON."""

    release: str
    predictions: str
    matched: int
    unmatched: list[str]
    programs_run: int
    rows: list[GroupRow] = field(default_factory=list)
    robustness: list[RobustnessRow] = field(default_factory=list)
    torr: list[TorrRow] = field(default_factory=list)
    kendall_w: float | None = None
    formats: list[FormatUnderstanding] = field(default_factory=list)
    large_tables: list[LargeTableUnderstanding] = field(default_factory=list)
    judge: dict[str, Any] | None = None
    outputs: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"release {self.release}; {self.matched} predictions scored from {self.predictions}"
               + (f"; {len(self.unmatched)} matched no row (e.g. {', '.join(self.unmatched[:3])})" if self.unmatched else "")]
        if self.programs_run:
            out.append(f"{self.programs_run} distinct programs run in the sandbox")
        judged = self.judge is not None
        head = f"  {'group':<44} {'n':>5} {'metric':<17} {'TableBench':>10} {'normalised':>10} {'Parse@1':>8} {'ECR@1':>7}" + (f" {'judge':>7}" if judged else "")
        for system, subset, config in _keys(self.rows):
            group = [r for r in self.rows if (r.system, r.subset, r.config) == (system, subset, config)]
            if subset != "base":
                continue
            out += ["", f"{system} - {subset}" + ("" if config == BASE_CONFIG else f" ({config})"), head]
            for r in group:
                label = ("    " if r.level == "subtype" else "  ") + r.group
                missing = f" ({r.n - r.answered} unanswered)" if r.answered < r.n else ""
                ecr = "" if r.ecr is None else f"{r.ecr:.2f}"
                judge = f" {r.judge:>7.2f}" if judged and r.judge is not None else (" " * 8 if judged else "")
                structure = "" if r.teds_structure is None else f"  (TEDS structure only {r.teds_structure:.2f})"
                out.append(f"  {label:<44} {r.n:>5} {r.metric:<17} {r.tablebench:>10.2f} {r.normalised:>10.2f} {r.parse:>8.2f} {ecr:>7}{judge}{missing}{structure}")
        overall = [r for r in self.rows if r.level == "overall" and r.subset != "base"]
        if overall:
            out += ["", "Overall per subset and configuration:", f"  {'system':<20} {'subset':<15} {'config':<32} {'n':>6} {'TableBench':>10} {'normalised':>10}"]
            for r in overall:
                out.append(f"  {r.system:<20} {r.subset:<15} {r.config:<32} {r.n:>6} {r.tablebench:>10.2f} {r.normalised:>10.2f}")
        if self.robustness:
            out += ["", "Robustness (FREB-TQA; normalised exact match on paired items):",
                    f"  {'system':<20} {'subset':<15} {'perturbation':<28} {'n':>5} {'Em orig':>8} {'Em pert':>8} {'Emd':>8} {'VP':>7}"]
            for b in self.robustness:
                ack = "" if b.acknowledgement is None else f"  acknowledged {b.acknowledgement:.2%}"
                out.append(f"  {b.system:<20} {b.subset:<15} {b.perturbation:<28} {b.n:>5} {b.em_original:>8.2%} {b.em_perturbed:>8.2%} {b.emd:>+8.2%} {b.vp:>7.2%}{ack}")
        if self.torr:
            out += ["", "ToRR over the configurations subset:", f"  {'system':<20} {'configs':>7} {'items':>6} {'P':>7} {'R':>7}"]
            for t in self.torr:
                out.append(f"  {t.system:<20} {t.configs:>7} {t.items:>6} {t.performance:>7.3f} {t.robustness:>7.3f}")
            if self.kendall_w is not None:
                out.append(f"  Kendall's W of the systems' ranking across configurations: {self.kendall_w:.3f}")
        if self.formats:
            out += ["", "Format understanding (the configurations without perturbation: the same items in each "
                        "serialization; mean normalised score, 0-1):"]
            for fu in self.formats:
                out += fu.lines()
        if self.large_tables:
            out += ["", "Large-table understanding (the base LargeTableUnderstanding probes by their table's token "
                        "bucket; normalised exact match):"]
            for lt in self.large_tables:
                out += lt.lines()
        if self.judge is not None:
            out += ["", f"judge {self.judge['model']}: {self.judge['judged']} replies judged, {self.judge['invalid']} verdicts unreadable, "
                        f"{self.judge['paid_calls']} paid calls, {self.judge['cost']:.4f} USD"
                        + (f"; stopped early: {self.judge['stopped']}" if self.judge.get("stopped") else "")]
        if self.outputs:
            out += ["", "written: " + ", ".join(self.outputs)]
        # Names, ids, subtypes and configurations come from the predictions file and the release:
        # shown with their control characters escaped (each line is one line).
        return [escape_controls(line, lines=False) for line in out]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _keys(rows: Iterable[GroupRow]) -> list[tuple[str, str, str]]:
    seen: dict[tuple[str, str, str], None] = {}
    for r in rows:
        seen.setdefault((r.system, r.subset, r.config), None)
    return list(seen)


def _bucket(s: Scored) -> str:
    return metric_name(s.ref)


def _structure(items: Sequence[Scored]) -> float | None:
    values = [s.teds_structure for s in items if s.teds_structure is not None]
    return percent(values) if values else None


def _ecr(items: Sequence[Scored]) -> float | None:
    flags = [s.executed for s in items if s.executed is not None]
    return percent([float(bool(x)) for x in flags]) if flags else None


def _mixed(items: Sequence[Scored], *, pass_as_fraction: bool) -> tuple[str, float]:
    """TableBench's size-weighted mean of metric buckets (each pooled and rounded first)."""
    buckets: dict[str, list[float]] = {}
    for s in items:
        buckets.setdefault(_bucket(s), []).append(s.tb)
    if len(buckets) == 1:
        (name, values), = buckets.items()
        return name, percent(values)
    total = 0.0
    for name, values in buckets.items():
        score = sum(values) / len(values) if (pass_as_fraction and name == "Pass@1") else percent(values)
        total += score * len(values)
    return "Mix_Metric", round(total / len(items), 2)


def _group_rows(system: str, subset: str, config: str, items: Sequence[Scored], verdicts: Verdicts | None = None) -> list[GroupRow]:
    def judged(chunk: Sequence[Scored]) -> float | None:
        if verdicts is None:
            return None
        flags = [verdicts.get((s.model, s.method, s.ref.id)) for s in chunk]
        return percent([float(v is not None and v.correct) for v in flags])  # unanswered or unreadable: not correct

    def row(group: str, level: str, chunk: Sequence[Scored], metric: str, tb: float, ours: float | None = None) -> GroupRow:
        return GroupRow(
            system, subset, config, group, level, len(chunk), sum(s.answered for s in chunk), metric, tb,
            percent([s.score for s in chunk]) if ours is None else ours, percent([float(s.tb_parsed) for s in chunk]), _ecr(chunk),
            judged(chunk), _structure(chunk),
        )

    by_type: dict[str, list[Scored]] = {}
    for s in items:
        by_type.setdefault(s.ref.qtype or "(no type)", []).append(s)
    order = [t for t in TABLEBENCH_TYPES if t in by_type] + sorted(t for t in by_type if t not in TABLEBENCH_TYPES)
    rows: list[GroupRow] = []
    for qtype in order:
        chunk = by_type[qtype]
        by_subtype: dict[str, list[Scored]] = {}
        for s in chunk:
            by_subtype.setdefault(s.ref.qsubtype or "(no subtype)", []).append(s)
        for subtype in sorted(by_subtype):
            part = by_subtype[subtype]
            rows.append(row(f"{qtype}_{subtype}", "subtype", part, _bucket(part[0]), percent([s.tb for s in part])))
        metric, value = _mixed(chunk, pass_as_fraction=False)
        rows.append(row(qtype, "type", chunk, metric, value))
    metric, value = _mixed(items, pass_as_fraction=True)
    rows.append(row(OVERALL, "overall", items, metric, value))
    return rows


def _robustness(scored: Sequence[Scored], verdicts: Verdicts | None = None) -> list[RobustnessRow]:
    base = {(s.system, s.ref.item_id): s for s in scored if s.ref.subset == "base"}
    pairs: dict[tuple[str, str, str], list[tuple[bool, bool]]] = {}
    acknowledged: dict[tuple[str, str, str], list[bool]] = {}
    for s in scored:
        if s.ref.subset not in ROBUSTNESS_SUBSETS:
            continue
        original = base.get((s.system, s.ref.item_id))
        if original is None or not original.answered:
            continue
        key = (s.system, s.ref.subset, s.ref.config)
        pairs.setdefault(key, []).append((original.correct, s.correct))
        verdict = verdicts.get((s.model, s.method, s.ref.id)) if verdicts is not None else None
        if verdict is not None and verdict.acknowledges is not None:
            acknowledged.setdefault(key, []).append(verdict.acknowledges)
    if not pairs:
        return []
    # Imported here, not at the top: scoring base items alone needs no numpy (about 0.05 s of every run).
    import numpy as np

    from tqaforge.evaluate.robustness import emd, vp

    out = []
    for key, flags in sorted(pairs.items()):
        a, b = [x for x, _ in flags], [y for _, y in flags]
        ack = acknowledged.get(key)
        out.append(RobustnessRow(*key, len(flags), float(np.mean(a)), float(np.mean(b)), emd(a, b), vp(a, b),
                                 float(np.mean(ack)) if ack else None))
    return out


def _torr(scored: Sequence[Scored]) -> tuple[list[TorrRow], float | None]:
    grid: dict[str, dict[str, dict[str, float]]] = {}  # system -> item -> config -> score
    dataset: dict[str, str] = {}
    for s in scored:
        if s.ref.subset != CONFIGURATIONS:
            continue
        grid.setdefault(s.system, {}).setdefault(s.ref.item_id, {})[s.ref.config] = s.score
        dataset[s.ref.item_id] = s.ref.dataset or "all"
    if not grid:
        return [], None
    import numpy as np  # as in _robustness

    from tqaforge.evaluate.robustness import kendall_w, torr_performance, torr_robustness

    rows: list[TorrRow] = []
    means: dict[str, dict[str, float]] = {}
    for system, items in sorted(grid.items()):
        configs = sorted({c for per in items.values() for c in per})
        full = {i: per for i, per in items.items() if len(per) == len(configs)}
        if len(configs) < 2 or not full:
            continue
        matrices: dict[str, list[list[float]]] = {}
        for item, per in sorted(full.items()):
            matrices.setdefault(dataset[item], []).append([per[c] for c in configs])
        arrays = {name: np.asarray(m) for name, m in matrices.items()}
        rows.append(TorrRow(system, len(configs), len(full), round(torr_performance(arrays), 4), round(torr_robustness(arrays), 4)))
        means[system] = {c: float(np.mean([per[c] for per in full.values()])) for c in configs}
    w = None
    if len(means) >= 2:
        common = sorted(set.intersection(*(set(m) for m in means.values())))
        systems = sorted(means)
        if len(common) >= 2:
            try:
                w = round(kendall_w([[means[s][c] for s in systems] for c in common]), 4)
            except ValueError:
                w = None  # every configuration ties every system: no ranking to agree on
    return rows, w


def default_evaluation_dir(release: Path, predictions: Path, root: Path = Path(".")) -> Path:
    """Where ``evaluate`` writes unless told: ``ROOT/evaluations/RELEASE/PREDICTIONS`` (the
    predictions file's name). A name of dots only (``...jsonl`` has the stem ``..``) would put the
    scores in the release's directory or above it: such a file's scores go under ``predictions``."""
    name = predictions.stem if predictions.stem.strip(".") else "predictions"
    return root / "evaluations" / release.resolve().name / name


def evaluate(options: EvaluateOptions, *, ws: Workspace | None = None, on_progress: Progress | None = None,
             sandbox_factory: Callable[[], Sandbox] | None = None, judge_budget: Budget | None = None) -> EvaluationReport:
    """Score ``options.predictions`` on ``options.release`` (module docs) and write the outputs;
    ``ws`` holds the judge's calls when ``options.judge_model`` is set; ``judge_budget``, when
    given, is the budget they share with the command's other paid calls (``judge_max_cost`` unused)."""
    # Tens of thousands of references, predictions and scores, none in a reference cycle: the
    # collector's youngest generation is collected every 50,000 allocations here, not every 700
    # (hundreds of passes over them otherwise, a tenth of this function's CPU time); as before after.
    threshold = gc.get_threshold()
    gc.set_threshold(max(threshold[0], 50_000), *threshold[1:])
    try:
        return _evaluate(options, ws=ws, on_progress=on_progress, sandbox_factory=sandbox_factory, judge_budget=judge_budget)
    finally:
        gc.set_threshold(*threshold)


def _evaluate(options: EvaluateOptions, *, ws: Workspace | None, on_progress: Progress | None,
              sandbox_factory: Callable[[], Sandbox] | None, judge_budget: Budget | None) -> EvaluationReport:
    if options.judge_model and ws is None:
        raise EvaluateError("the judge's calls are recorded in a workspace, and none was given",
                            hint="run in a workspace (or pass --workspace DIR) to use --judge-model")
    predictions = read_predictions(options.predictions, model=options.model)

    likely = code_predictions(predictions)
    workers = [sandbox_workers(options.workers, likely)]

    def factory() -> Sandbox:
        return Sandbox(workers=workers[0], limits=Limits(wall_seconds=options.wall_seconds))

    # The sandbox starts now, in the background, when a reply holds a program (or is PoT): its
    # workers warm up while the release is read and verified and the text is scored. Else it
    # starts only when a program does run (the first one asks for it).
    sandbox = SandboxStart(sandbox_factory or factory, now=likely > 0)
    try:
        release = load_release(options.release, ids={p.id for p in predictions})
        matched = match(release, predictions)
        if not matched.pairs:
            sample = escape_controls(", ".join(p.id for p in predictions[:3]), lines=False)
            raise EvaluateError(
                f"no prediction of {options.predictions} matches a row of release {release.name} (ids such as {sample})",
                hint="predictions carry the release's row ids (or TableBench's ids for a release of TableBench)",
            )
        seen: dict[tuple[str, str, str], int] = {}
        for ref, p in matched.pairs:
            key = (p.model, p.method, ref.id)
            if key in seen:
                raise EvaluateError(
                    f"{options.predictions}:{p.line}: a second prediction of {p.model}/{p.method} for row "
                    f"{escape_controls(ref.id, lines=False)} (first at line {seen[key]})",
                    hint="keep one prediction per model, method and row",
                )
            seen[key] = p.line
        programs = sum(uses_code(ref, p.method) for ref, p in matched.pairs)
        if not programs and likely:
            sandbox.close(wait=False)  # started for replies that run nothing (PoT on a commanding item, say)
        elif not likely:
            workers[0] = sandbox_workers(options.workers, programs)  # sized for the programs that do run
        pending = start_programs(matched.pairs, release.table, sandbox.get, workers=workers[0],
                                 per_run=options.programs_per_run)
        # The text while the programs run (the same scores, in the same order: only the time changes).
        text = {i: score_one(ref, p, {}) for i, (ref, p) in enumerate(matched.pairs) if not uses_code(ref, p.method)}
        results = pending.wait(on_progress)
    except BaseException:
        sandbox.close()
        raise
    sandbox.close(wait=False)  # its workers take a moment to exit: in the background, waited for below
    try:
        scored = [text.get(i) or score_one(ref, p, results) for i, (ref, p) in enumerate(matched.pairs)]
        return _report(options, release, matched, scored, results, ws=ws, on_progress=on_progress, judge_budget=judge_budget)
    finally:
        sandbox.close()


def _report(options: EvaluateOptions, release: Release, matched: Matched, scored: list[Scored], results: Results, *,
            ws: Workspace | None, on_progress: Progress | None, judge_budget: Budget | None) -> EvaluationReport:
    """The report of the scored predictions (and the judge's verdicts when one is asked), written out."""
    scored = scored + _unanswered(release, scored)
    report = EvaluationReport(release.name, str(options.predictions), len(matched.pairs),
                              sorted({escape_controls(p.id, lines=False) for p in matched.unmatched}),
                              len({id(r) for r in results.values()}))
    verdicts: Verdicts | None = None
    if options.judge_model:
        from tqaforge.evaluate.model_run import judge_replies

        assert ws is not None
        judged = judge_replies(ws, options.judge_model, [(ref, p.model, p.method, p.text) for ref, p in matched.pairs],
                               max_cost=options.judge_max_cost, on_progress=on_progress, budget=judge_budget)
        verdicts = judged.verdicts
        report.judge = {"model": options.judge_model, "judged": len(judged.verdicts), "invalid": judged.invalid,
                        "paid_calls": judged.paid_calls, "cost": round(judged.cost, 6), "stopped": judged.stopped}
    groups: dict[tuple[str, str, str], list[Scored]] = {}
    for s in scored:
        groups.setdefault((s.system, s.ref.subset, s.ref.config), []).append(s)
    subset_order = {name: i for i, name in enumerate(("base", *ROBUSTNESS_SUBSETS, CONFIGURATIONS))}
    for key in sorted(groups, key=lambda k: (k[0], subset_order.get(k[1], 99), k[1], k[2] != BASE_CONFIG, k[2])):
        report.rows += _group_rows(*key, groups[key], verdicts)
    report.robustness = _robustness(scored, verdicts)
    report.torr, report.kendall_w = _torr(scored)
    report.formats = format_understanding(scored)
    report.large_tables = large_table_understanding(scored)
    out = options.out or default_evaluation_dir(options.release, options.predictions)
    report.outputs = write_outputs(report, out, plots=options.plots)
    try:
        report.outputs.insert(1, str(write_item_scores(scored, out / ITEMS_FILE, release=release.name, rows=len(scored))))
    except OSError as exc:
        raise EvaluateError(f"cannot write the item scores to {out}: {exc.strerror or exc}", hint="give --out a writable directory") from None
    return report


def _unanswered(release: Release, scored: Sequence[Scored]) -> list[Scored]:
    """The rows without a prediction of every (system, subset, config, dataset) group that has
    predictions (a release holding two datasets scores a system on the one it was run on)."""
    by_group: dict[tuple[str, str, str], list[Reference]] = {}
    for ref in release.references:
        by_group.setdefault((ref.subset, ref.config, ref.dataset), []).append(ref)
    answered: dict[tuple[str, str, str, str, str], set[str]] = {}
    for s in scored:
        answered.setdefault((s.model, s.method, s.ref.subset, s.ref.config, s.ref.dataset), set()).add(s.ref.id)
    out = []
    for (model, method, subset, config, dataset), ids in answered.items():
        out += [unanswered(ref, model, method) for ref in by_group[(subset, config, dataset)] if ref.id not in ids]
    return out


def write_outputs(report: EvaluationReport, out: Path, *, plots: bool = True) -> list[str]:
    """``scores.json`` and (``plots``) ``by_subtype.png``, ``by_configuration.png`` and
    ``by_format.png`` (when there is something to draw) in ``out``; their paths."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        written = [out / "scores.json"]
        # Atomic: a killed run leaves the previous scores.json or the new one, never half of one.
        # Text from the predictions and the release may hold C1 controls, bidirectional overrides
        # or lone surrogates, which json.dumps leaves raw: written as \uXXXX escapes (still JSON).
        text = escape_controls(json.dumps(report.as_dict(), indent=2, ensure_ascii=False), json=True)
        atomic_write_text(out / "scores.json", text + "\n")
        if plots:
            import matplotlib

            # Model names, subtypes and the release's name are data: "$...$" in one is text, not
            # TeX (mathtext fails on it, and the run would end in a traceback after the scores).
            with matplotlib.rc_context({"text.parse_math": False}):
                written += _plots(report, out)
    except OSError as exc:
        raise EvaluateError(f"cannot write the scores to {out}: {exc.strerror or exc}", hint="give --out a writable directory") from None
    return [str(p) for p in written]


def _plots(report: EvaluationReport, out: Path) -> list[Path]:
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: list[Path] = []
    systems = sorted({r.system for r in report.rows})
    base = [r for r in report.rows if r.subset == "base" and r.level == "subtype"]
    if base:
        groups = sorted({r.group for r in base})
        fig, ax = plt.subplots(figsize=(max(8, len(groups) * 0.6), 5))
        width = 0.8 / len(systems)
        for i, system in enumerate(systems):
            value = {r.group: r.tablebench for r in base if r.system == system}
            ax.bar([x + i * width for x in range(len(groups))], [value.get(g, 0.0) for g in groups], width, label=system)
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(groups))], [g.split("_", 1)[-1] for g in groups], rotation=60, ha="right", fontsize=8)
        ax.set_ylabel("TableBench-compatible score (%)")
        ax.set_title(f"{report.release}: base items by subtype")
        ax.legend(fontsize=8)
        fig.tight_layout()
        written.append(out / "by_subtype.png")
        fig.savefig(written[-1], dpi=100)
        plt.close(fig)
    overall = [r for r in report.rows if r.level == "overall"]
    configs = sorted({(r.subset, r.config) for r in overall})
    if len(configs) > 1:
        fig, ax = plt.subplots(figsize=(max(8, len(configs) * 0.35), 5))
        for system in systems:
            by_config = {(r.subset, r.config): r.normalised for r in overall if r.system == system}
            ax.plot(range(len(configs)), [by_config.get(c, np.nan) for c in configs], marker="o", label=system)
        ax.set_xticks(range(len(configs)), [c if s in ("base", CONFIGURATIONS) else f"{s}:{c}" for s, c in configs], rotation=70, ha="right", fontsize=7)
        ax.set_ylabel("normalised score (%)")
        ax.set_title(f"{report.release}: Overall by configuration")
        ax.legend(fontsize=8)
        fig.tight_layout()
        written.append(out / "by_configuration.png")
        fig.savefig(written[-1], dpi=100)
        plt.close(fig)
    if report.formats:
        written.append(_format_plot(report, out / "by_format.png"))
    return written


def _format_plot(report: EvaluationReport, path: Path) -> Path:
    """Format understanding as bars: a group per serialization (best first, by the mean over the
    systems), a bar per system, its spread in the legend."""
    import matplotlib.pyplot as plt
    import numpy as np

    scores = {fu.system: {f.serialization: f.score for f in fu.formats} for fu in report.formats}
    formats = sorted({f for per in scores.values() for f in per},
                     key=lambda f: (-float(np.mean([per[f] for per in scores.values() if f in per])), f))
    width = 0.8 / len(report.formats)
    fig, ax = plt.subplots(figsize=(max(6, len(formats) * 0.9), 4.5))
    for i, fu in enumerate(report.formats):
        ax.bar([x + i * width for x in range(len(formats))], [scores[fu.system].get(f, np.nan) for f in formats],
               width, label=f"{fu.system} ({fu.items} items; spread {fu.spread:.2f})")
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(formats))], formats, rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("mean normalised score")
    ax.set_title(f"{report.release}: score per format (no perturbation)", fontsize=10)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


#: The largest ``scores.json`` the app reads back (a real one is kilobytes to a few megabytes).
MAX_SCORES_BYTES = 256 * 1024**2


@dataclass(frozen=True)
class SavedEvaluation:
    """A ``scores.json`` written by :func:`evaluate` and the plots beside it."""

    release: str
    predictions: str
    scores: dict[str, Any]
    plots: tuple[Path, ...]

    def summary_rows(self) -> list[dict[str, Any]]:
        """The type and Overall rows of every system, subset and configuration."""
        return [r for r in self.scores.get("rows", []) if r.get("level") in ("type", "overall")]

    def formats(self) -> list[FormatUnderstanding]:
        """Its format-understanding summaries (none in an evaluation without configurations)."""
        return read_format_understanding(self.scores)

    def large_tables(self) -> list[LargeTableUnderstanding]:
        """Its accuracy per token bucket (none in an evaluation without large-table probes)."""
        return read_large_table_understanding(self.scores)


def saved_evaluations(directory: Path) -> list[SavedEvaluation]:
    """Every evaluation under ``directory`` (``RELEASE/PREDICTIONS/scores.json``, :func:`evaluate`'s
    default layout); an unreadable file (damaged, too deep, a FIFO) is skipped, not fatal."""
    out = []
    for path in sorted(directory.glob("*/*/scores.json")):
        try:
            scores = read_json_file(path, max_bytes=MAX_SCORES_BYTES)
        except ReaderError:
            continue
        if not isinstance(scores, dict):
            continue
        out.append(SavedEvaluation(path.parent.parent.name, path.parent.name, scores, tuple(sorted(path.parent.glob("*.png")))))
    return out

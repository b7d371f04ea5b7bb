"""Agreement on the annotation workflows: Annotation records -> rater data -> statistics -> a report.

Each :class:`~tqaforge.schemas.records.AnnotationTask` has a ``kind``; every
:class:`~tqaforge.schemas.records.Annotation` on it holds one person's ``label`` in the shape of
that kind (:mod:`tqaforge.annotation.kinds` lists the kinds and their label shapes).

When a person labels a task twice (changed their mind), their latest annotation counts (by
``created_at``, then the number at the end of ``source_ref``). Labels that cannot be read are
not guessed at: they are left out and listed in the report's ``problems``.

The report (:func:`agreement_report`) gives, per kind: percent agreement, Fleiss' kappa (on the
items with the most common number of ratings, since it needs the same number on every item),
Krippendorff's alpha and Gwet's AC1 (all items, missing ratings allowed), pairwise percent
agreement and Cohen's kappa, each annotator's agreement with the majority of the others, and
the same per question subtype; for set labels MASI alpha; for blind re-answering the accuracy
of each annotator and overall. Every value has its seeded bootstrap interval.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Iterable, Mapping, Sequence, cast

import numpy as np
from sqlmodel import Session, select

from tqaforge.annotation.agreement import (
    DEFAULT_CI_LEVEL,
    DEFAULT_N_BOOT,
    AgreementResult,
    PairwiseResult,
    check_bootstrap,
    proportion,
)
from tqaforge.annotation.kinds import KINDS, KindSpec, LabelError, Shape, check_kinds, kind_spec
from tqaforge.errors import AgreementError
from tqaforge.files import atomic_write_text
from tqaforge.ids import content_hash
from tqaforge.labels import NOT_OURS, label_order
from tqaforge.labels import rater as person_of
from tqaforge.people import people_names
from tqaforge.queries import CHECKED_BY_PEOPLE, trusted_answers
from tqaforge.schemas.records import Annotation, AnnotationTask, Answer, Question, Variant
from tqaforge.store import Workspace
from tqaforge.tables.matching import RULES, Rule, value_match

#: Matching rules of blind re-answering by default: normalised text, or the same number.
DEFAULT_MATCH_RULES: tuple[Rule, ...] = ("exact", "numeric")

NO_SUBTYPE = "(none)"

#: What to do when there are no annotations yet (the CLI prints it as the one line of an empty report).
RECORD_SOME = (
    "Record some with `tqaforge questions review QUESTION_ID --accept --annotator NAME` "
    "(or label in Label Studio or the app), then run this again."
)
NO_ANNOTATIONS = f"no annotations yet, so no agreement to report. {RECORD_SOME}"


# ---------------------------------------------------------------------------------------------
# From records to rater data


@dataclass(frozen=True)
class RaterData:
    """One kind's labels as items (tasks) x raters (annotators); None where a rater gave none."""

    kind: KindSpec
    items: tuple[str, ...]
    target_types: tuple[str, ...]
    targets: tuple[str, ...]
    subtypes: tuple[str, ...]
    raters: tuple[str, ...]
    labels: tuple[tuple[Any, ...], ...]
    annotation_ids: tuple[tuple[str | None, ...], ...]
    problems: tuple[str, ...] = ()
    #: Per item, the table its cells are on (set kinds): MASI alpha keeps tables apart.
    tables: tuple[str, ...] = ()

    @property
    def n_annotations(self) -> int:
        return sum(x is not None for row in self.labels for x in row)

    def ratings(self) -> list[list[Any]]:
        """Items x raters."""
        return [list(row) for row in self.labels]

    def reliability_data(self) -> list[list[Any]]:
        """Raters x items (the layout of Krippendorff's alpha)."""
        return [list(col) for col in zip(*self.labels)] if self.labels else []

    def select(self, keep: Sequence[bool]) -> RaterData:
        """The items where ``keep`` is true (raters who labelled none of them are dropped)."""
        idx = [i for i, k in enumerate(keep) if k]
        used = [r for r in range(len(self.raters)) if any(self.labels[i][r] is not None for i in idx)]

        def pick(rows: tuple[tuple[Any, ...], ...]) -> tuple[tuple[Any, ...], ...]:
            return tuple(tuple(rows[i][r] for r in used) for i in idx)

        return RaterData(
            self.kind,
            tuple(self.items[i] for i in idx),
            tuple(self.target_types[i] for i in idx),
            tuple(self.targets[i] for i in idx),
            tuple(self.subtypes[i] for i in idx),
            tuple(self.raters[r] for r in used),
            pick(self.labels),
            pick(self.annotation_ids),
            self.problems,
            tuple(self.tables[i] for i in idx) if self.tables else (),
        )


#: What a read-only reader of labels needs of a task and an annotation (the task's payload, often
#: large, is left out).
_TASK_COLUMNS = ("id", "kind", "target_type", "target_id", "status")
_ANNOTATION_COLUMNS = ("id", "task_id", "annotator", "kind", "label", "source", "source_ref", "lead_time", "created_at", "annotator_id")


def latest_annotations(
    s: Session, kind: str, *, exclude_sources: Iterable[str] = (), task_id: str | None = None, read_only: bool = False,
) -> list[tuple[AnnotationTask, Annotation]]:
    """Each annotator's latest annotation on each task of ``kind`` (or on the one task given); an
    annotator is a person (:func:`tqaforge.labels.rater`), whatever surfaces their labels came from.

    ``read_only``: the records are detached copies built from the columns a statistic needs (no
    task payload), several times faster on tens of thousands of labels; never change or add them."""
    excluded = set(exclude_sources)
    rows: Sequence[tuple[AnnotationTask, Annotation]]
    if read_only:
        columns = [getattr(AnnotationTask, c) for c in _TASK_COLUMNS] + [getattr(Annotation, c) for c in _ANNOTATION_COLUMNS]
        flat = select(*columns).join(Annotation, Annotation.task_id == AnnotationTask.id).where(AnnotationTask.kind == kind)  # type: ignore[arg-type]
        if task_id is not None:
            flat = flat.where(AnnotationTask.id == task_id)
        n = len(_TASK_COLUMNS)
        # Plain attribute holders: a record's constructor (even pydantic's model_construct, which
        # resolves every default) costs more than the query on tens of thousands of labels.
        rows = [
            (cast(AnnotationTask, SimpleNamespace(**dict(zip(_TASK_COLUMNS, row[:n])))),
             cast(Annotation, SimpleNamespace(**dict(zip(_ANNOTATION_COLUMNS, row[n:])))))
            for row in s.exec(flat).all()  # type: ignore[call-overload]
        ]
    else:
        query = (
            select(AnnotationTask, Annotation)
            .join(Annotation, Annotation.task_id == AnnotationTask.id)  # type: ignore[arg-type]
            .where(AnnotationTask.kind == kind)
        )
        if task_id is not None:
            query = query.where(AnnotationTask.id == task_id)
        rows = s.exec(query).all()
    latest: dict[tuple[str, str], tuple[AnnotationTask, Annotation]] = {}
    for task, ann in rows:
        if ann.source in excluded:
            continue
        key = (task.id, person_of(ann))  # one person is one rater, whatever the surface
        held = latest.get(key)
        if held is None or label_order(ann) > label_order(held[1]):
            latest[key] = (task, ann)
    return list(latest.values())


def _chunks(values: Sequence[str], size: int = 500) -> Iterable[Sequence[str]]:
    for start in range(0, len(values), size):
        yield values[start:start + size]


def _subtypes(s: Session, targets: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """The question subtype of each (target_type, target_id), through answers and variants."""
    by_type: dict[str, set[str]] = defaultdict(set)
    for target_type, target_id in targets:
        by_type[target_type].add(target_id)
    question_of: dict[tuple[str, str], str] = {("question", q): q for q in by_type.get("question", ())}
    for model, target_type in ((Answer, "answer"), (Variant, "variant")):
        ids = sorted(by_type.get(target_type, ()))
        for chunk in _chunks(ids):
            for rid, qid in s.exec(select(model.id, model.question_id).where(model.id.in_(chunk))).all():  # type: ignore[attr-defined]
                question_of[(target_type, rid)] = qid
    subtype: dict[str, str | None] = {}
    qids = sorted(set(question_of.values()))
    for chunk in _chunks(qids):
        for qid, st in s.exec(select(Question.id, Question.subtype).where(Question.id.in_(chunk))).all():  # type: ignore[attr-defined]
            subtype[qid] = st
    return {key: subtype.get(qid) or NO_SUBTYPE for key, qid in question_of.items()}


def _cell_tables(s: Session, targets: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """The table each (target_type, target_id)'s cells are on: a question's table; a variant's own."""
    found: dict[tuple[str, str], str] = {}
    questions = sorted({t for kind, t in targets if kind == "question"})
    for chunk in _chunks(questions):
        for qid, table_id in s.exec(select(Question.id, Question.table_id).where(Question.id.in_(chunk))).all():  # type: ignore[attr-defined]
            found[("question", qid)] = table_id
    for kind, t in targets:
        found.setdefault((kind, t), f"{kind}:{t}")
    return found


def load_rater_data(ws: Workspace, kind: str, *, exclude_sources: Iterable[str] = ()) -> RaterData:
    """The labels of every task of ``kind`` as items x annotators (latest label per annotator)."""
    spec = kind_spec(kind)
    with ws.session() as s:
        pairs = latest_annotations(s, kind, exclude_sources=exclude_sources, read_only=True)
        targets = {(t.target_type, t.target_id) for t, _ in pairs}
        subtype_of = _subtypes(s, targets)
        table_of = _cell_tables(s, targets) if spec.strategy.needs_tables else {}
        names = people_names(s)  # raters are people, shown by name (unique among active people)
    problems: list[str] = []
    values: dict[str, dict[str, tuple[Any, str]]] = defaultdict(dict)
    tasks: dict[str, AnnotationTask] = {}
    for task, ann in pairs:
        try:
            value = spec.read(ann.label)
        except LabelError as exc:
            problems.append(f"task {task.id[:10]}, annotator {ann.annotator}: {exc}")
            continue
        who = person_of(ann)
        values[task.id][names.get(who, who)] = (value, ann.id)
        tasks[task.id] = task
    items = tuple(sorted(values))
    raters = tuple(sorted({a for per in values.values() for a in per}))
    labels = tuple(tuple(values[i][r][0] if r in values[i] else None for r in raters) for i in items)
    ann_ids = tuple(tuple(values[i][r][1] if r in values[i] else None for r in raters) for i in items)
    return RaterData(
        spec, items,
        tuple(tasks[i].target_type for i in items),
        tuple(tasks[i].target_id for i in items),
        tuple(subtype_of.get((tasks[i].target_type, tasks[i].target_id), NO_SUBTYPE) for i in items),
        raters, labels, ann_ids, tuple(sorted(problems)),
        tuple(table_of[(tasks[i].target_type, tasks[i].target_id)] for i in items) if table_of else (),
    )


# ---------------------------------------------------------------------------------------------
# Statistics per kind


@dataclass(frozen=True)
class KindReport:
    """Every statistic of one annotation kind."""

    kind: str
    description: str
    shape: Shape
    n_items: int
    n_raters: int
    n_annotations: int
    raters: tuple[str, ...]
    overall: Mapping[str, AgreementResult]
    pairwise: Mapping[str, PairwiseResult]
    per_annotator: Mapping[str, AgreementResult]
    per_subtype: Mapping[str, Mapping[str, AgreementResult]]
    notes: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "description": self.description,
            "shape": self.shape,
            "n_items": self.n_items,
            "n_raters": self.n_raters,
            "n_annotations": self.n_annotations,
            "raters": list(self.raters),
            "overall": {k: v.as_dict() for k, v in self.overall.items()},
            "pairwise": {k: v.as_dict() for k, v in self.pairwise.items()},
            "per_annotator": {k: v.as_dict() for k, v in self.per_annotator.items()},
            "per_subtype": {st: {k: v.as_dict() for k, v in stats.items()} for st, stats in self.per_subtype.items()},
            "notes": list(self.notes),
            "problems": list(self.problems),
        }


@dataclass(frozen=True)
class Settings:
    """The choices a report was made with (stored with it)."""

    n_boot: int = DEFAULT_N_BOOT
    seed: int = 0
    ci_level: float = DEFAULT_CI_LEVEL
    exclude_sources: tuple[str, ...] = NOT_OURS  # imported published labels are not our annotators' work
    match_rules: tuple[Rule, ...] = DEFAULT_MATCH_RULES

    def boot(self) -> dict[str, Any]:
        return {"n_boot": self.n_boot, "seed": self.seed, "ci_level": self.ci_level}


def majority_agreement(data: RaterData, settings: Settings) -> dict[str, AgreementResult]:
    """Each annotator's agreement with the majority of the other annotators, item by item.

    Categories: the share of items where the annotator gives the others' strict-majority value
    (items without one are left out and counted). Sets: the mean MASI agreement (1 - distance)
    with the cells more than half of the others chose (the shape's
    :meth:`~tqaforge.annotation.shapes.LabelShape.agreement_with_majority`).
    """
    shape = data.kind.strategy
    out: dict[str, AgreementResult] = {}
    for r, rater in enumerate(data.raters):
        scores: list[float] = []
        no_majority = 0
        for row in data.labels:
            mine = row[r]
            others = [x for j, x in enumerate(row) if j != r and x is not None]
            if mine is None or not others:
                continue
            score = shape.agreement_with_majority(mine, others)
            if score is None:
                no_majority += 1
                continue
            scores.append(score)
        result = proportion(scores, statistic=shape.majority_statistic, n_raters=len(data.raters), **settings.boot())
        if no_majority:
            result = _with_component(result, "items_without_majority", no_majority)
        out[rater] = result
    return out


def _with_component(result: AgreementResult, key: str, value: Any) -> AgreementResult:
    return replace(result, components={**result.components, key: value})


def kind_report(data: RaterData, settings: Settings = Settings(), *, gold: Mapping[str, Sequence[str]] | None = None) -> KindReport:
    """Every statistic of one kind's rater data (``gold`` per item for blind re-answering)."""
    shape = data.kind.strategy
    if shape.scored_against_gold:
        return _reanswer_report(data, settings, gold or {})
    overall, notes = shape.overall(data, settings)
    per_subtype: dict[str, dict[str, AgreementResult]] = {}
    for subtype in sorted(set(data.subtypes)):
        part = data.select([st == subtype for st in data.subtypes])
        stats, _ = shape.overall(part, settings)
        per_subtype[subtype] = stats
    return KindReport(
        data.kind.name, data.kind.description, data.kind.shape, len(data.items), len(data.raters),
        data.n_annotations, data.raters, overall, shape.pairwise(data, settings),
        majority_agreement(data, settings), per_subtype, tuple(notes), data.problems,
    )


def answers_match(given: Sequence[str], gold: Sequence[str], rules: Iterable[Rule] = DEFAULT_MATCH_RULES) -> bool:
    """Whether a person's answer values equal the gold values, one to one in any order."""
    rules = tuple(rules)
    left = list(gold)
    if len(given) != len(left):
        return False
    for value in given:
        hit = next((i for i, g in enumerate(left) if value_match(value, g, rules) is not None), None)
        if hit is None:
            return False
        left.pop(hit)
    return True


def _reanswer_report(data: RaterData, settings: Settings, gold: Mapping[str, Sequence[str]]) -> KindReport:
    problems = list(data.problems)
    missing = [i for i in data.items if not gold.get(i)]
    if missing:
        problems.append(f"{len(missing)} items have no gold answer yet and are not scored")
    scored = [bool(gold.get(i)) for i in data.items]
    correct = np.full((len(data.items), len(data.raters)), np.nan)
    for i, (item, row) in enumerate(zip(data.items, data.labels)):
        if not scored[i]:
            continue
        for r, given in enumerate(row):
            if given is not None:
                correct[i, r] = 1.0 if answers_match(given, gold[item], settings.match_rules) else 0.0
    answered = ~np.isnan(correct)
    hits = np.nan_to_num(correct)

    def accuracy(rows: np.ndarray, cols: slice | int = slice(None)) -> AgreementResult:
        num = hits[rows][:, cols] if isinstance(cols, int) else hits[rows][:, cols].sum(axis=1)
        den = answered[rows][:, cols] if isinstance(cols, int) else answered[rows][:, cols].sum(axis=1)
        return proportion(num, den, statistic="accuracy", n_raters=len(data.raters), **settings.boot())

    everything = np.ones(len(data.items), dtype=bool)
    per_annotator = {rater: accuracy(everything, r) for r, rater in enumerate(data.raters)}
    subtypes = np.array(data.subtypes, dtype=object)
    per_subtype = {st: {"accuracy": accuracy(subtypes == st)} for st in sorted(set(data.subtypes))}
    notes = [f"exact match after normalisation (rules: {', '.join(settings.match_rules)})"]
    return KindReport(
        data.kind.name, data.kind.description, data.kind.shape, len(data.items), len(data.raters),
        data.n_annotations, data.raters, {"accuracy": accuracy(everything)}, {}, per_annotator, per_subtype,
        tuple(notes), tuple(problems),
    )


def gold_answers(ws: Workspace, data: RaterData) -> dict[str, list[str]]:
    """The author's gold per item of blind re-answering: the variant's answers, or the question's best Answer."""
    out: dict[str, list[str]] = {}
    with ws.session() as s:
        variants = [t for t, tt in zip(data.targets, data.target_types) if tt == "variant"]
        answers_of: dict[str, list[str] | None] = {}
        for chunk in _chunks(sorted(set(variants))):
            for vid, answers in s.exec(select(Variant.id, Variant.answers).where(Variant.id.in_(chunk))).all():  # type: ignore[attr-defined]
                answers_of[vid] = list(answers) if answers is not None else None
        questions = [t for t, tt in zip(data.targets, data.target_types) if tt == "question"]
        # Only answers people vouched for: re-answering is scored against the author's gold.
        best = trusted_answers(s, questions, at_least=CHECKED_BY_PEOPLE)
    for item, target, target_type in zip(data.items, data.targets, data.target_types):
        values = answers_of.get(target) if target_type == "variant" else (best[target].values if target in best else None)
        if values:
            out[item] = [str(v) for v in values]
    return out


# ---------------------------------------------------------------------------------------------
# The report


@dataclass(frozen=True)
class AgreementReport:
    """Agreement on every (or the chosen) annotation kind of a workspace, with its settings."""

    workspace: str
    generated_at: str
    settings: Settings
    annotations_hash: str
    kinds: Mapping[str, KindReport]
    skipped_kinds: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_empty(self) -> bool:
        """True when no kind had annotations to compute anything on."""
        return not self.kinds

    @property
    def message(self) -> str | None:
        """One line saying why the report is empty (None when it is not)."""
        if not self.is_empty:
            return None
        if not self.skipped_kinds:
            return NO_ANNOTATIONS
        why = "; ".join(f"{k}: {reason}" for k, reason in self.skipped_kinds.items())
        return f"no agreement to report ({why}). {RECORD_SOME}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "workspace": self.workspace,
            "is_empty": self.is_empty,
            "message": self.message,
            "generated_at": self.generated_at,
            "settings": {
                **self.settings.boot(),
                "exclude_sources": list(self.settings.exclude_sources),
                "match_rules": list(self.settings.match_rules),
            },
            "annotations_hash": self.annotations_hash,
            "kinds": {k: r.as_dict() for k, r in self.kinds.items()},
            "skipped_kinds": dict(self.skipped_kinds),
        }


def _kinds_present(ws: Workspace) -> list[str]:
    with ws.session() as s:
        rows = s.exec(
            select(AnnotationTask.kind).join(Annotation, Annotation.task_id == AnnotationTask.id).distinct()  # type: ignore[arg-type]
        ).all()
    return sorted(set(rows))


def _annotations_hash(ws: Workspace, kinds: Iterable[str]) -> str:
    """A hash of every annotation the report read (ids and labels), to tell a stale report."""
    with ws.session() as s:
        rows = s.exec(
            select(Annotation.id, Annotation.label)
            .join(AnnotationTask, Annotation.task_id == AnnotationTask.id)  # type: ignore[arg-type]
            .where(AnnotationTask.kind.in_(list(kinds)))  # type: ignore[attr-defined]
        ).all()
    return content_hash(sorted([rid, label] for rid, label in rows))


def agreement_report(
    ws: Workspace,
    *,
    kinds: Sequence[str] | None = None,
    settings: Settings = Settings(),
    now: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
) -> AgreementReport:
    """Agreement statistics for each annotation kind (default: every kind with annotations)."""
    if settings.match_rules and not set(settings.match_rules) <= set(RULES):
        unknown = sorted(set(settings.match_rules) - set(RULES))
        raise AgreementError(f"unknown match rules {unknown}", hint="give --match-rules from: " + ", ".join(RULES))
    # Settings are checked before any data is read, so a bad --seed fails at once, not per statistic.
    check_bootstrap(settings.n_boot, settings.ci_level, settings.seed)
    asked = check_kinds(kinds)  # a kind asked for by name must be known
    wanted = asked if asked else _kinds_present(ws)
    reports: dict[str, KindReport] = {}
    skipped: dict[str, str] = {}
    for kind in wanted:
        if kind not in KINDS:
            skipped[kind] = "no label shape is defined for this kind"
            continue
        if not KINDS[kind].strategy.compared:
            skipped[kind] = "authored edits are not compared between annotators: blind re-answering checks them (blind_reanswer)"
            continue
        data = load_rater_data(ws, kind, exclude_sources=settings.exclude_sources)
        if not data.items:
            skipped[kind] = "no readable annotations" + (
                f" ({len(data.problems)} unreadable, e.g. {data.problems[0]})" if data.problems else ""
            )
            continue
        gold = gold_answers(ws, data) if data.kind.strategy.scored_against_gold else None
        reports[kind] = kind_report(data, settings, gold=gold)
    return AgreementReport(
        ws.config.name, now().isoformat(timespec="seconds"), settings,
        _annotations_hash(ws, wanted), reports, skipped,
    )


def report_paths(ws: Workspace, kinds: Sequence[str] | None = None) -> tuple[Path, Path]:
    """Where a report is stored: ``WORKSPACE/reports/agreement[-KIND...].{json,md}``."""
    stem = "agreement" + "".join(f"-{k}" for k in (kinds or ()))
    folder = ws.paths.reports
    return folder / f"{stem}.json", folder / f"{stem}.md"


def write_report(ws: Workspace, report: AgreementReport, *, kinds: Sequence[str] | None = None) -> tuple[Path, Path]:
    """Store the report as JSON and Markdown under ``WORKSPACE/reports/`` (atomically, by rename)."""
    from tqaforge.annotation.report_format import to_markdown

    json_path, md_path = report_paths(ws, kinds)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    for path, text in (
        (json_path, json.dumps(report.as_dict(), indent=2, ensure_ascii=False) + "\n"),
        (md_path, to_markdown(report)),
    ):
        atomic_write_text(path, text)
    return json_path, md_path

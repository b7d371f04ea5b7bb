"""Computing the agreement report: rater data -> statistics per kind -> an :class:`AgreementReport`.

The report (:func:`agreement_report`) gives, per kind: percent agreement, Fleiss' kappa (on the
items with the most common number of ratings, since it needs the same number on every item),
Krippendorff's alpha and Gwet's AC1 (all items, missing ratings allowed), pairwise percent
agreement and Cohen's kappa, each annotator's agreement with the majority of the others, and
the same per question subtype; for set labels MASI alpha; for blind re-answering the accuracy
of each annotator and overall. Every value has its seeded bootstrap interval. Which statistics
a kind gets is its shape's (:mod:`tqaforge.annotation.shapes`); the labels are read by
:mod:`tqaforge.annotation.rater_data`, the report written by :mod:`tqaforge.annotation.report_files`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
from sqlalchemy import Text, cast
from sqlmodel import select
from threadpoolctl import threadpool_limits

from tqaforge.annotation.agreement import (
    DEFAULT_CI_LEVEL,
    DEFAULT_N_BOOT,
    AgreementResult,
    PairwiseResult,
    check_bootstrap,
    proportion,
)
from tqaforge.annotation.kinds import KINDS, Shape, check_kinds
from tqaforge.annotation.rater_data import LabelsRead, RaterData, gold_answers, load_rater_data
from tqaforge.annotation.shapes import SHAPES
from tqaforge.errors import AgreementError
from tqaforge.ids import ID_LENGTH
from tqaforge.labels import NOT_OURS
from tqaforge.schemas.records import Annotation, AnnotationTask
from tqaforge.store import Workspace
from tqaforge.tables.matching import RULES, Rule, value_match

#: Matching rules of blind re-answering by default: normalised text, or the same number.
DEFAULT_MATCH_RULES: tuple[Rule, ...] = ("exact", "numeric")

#: What to do when there are no annotations yet (the CLI prints it as the one line of an empty report).
RECORD_SOME = (
    "Record some with `tqaforge questions review QUESTION_ID --accept --annotator NAME` "
    "(or label in Label Studio or the app), then run this again."
)
NO_ANNOTATIONS = f"no annotations yet, so no agreement to report. {RECORD_SOME}"


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

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> KindReport:
        """The report :meth:`as_dict` wrote (``KeyError``, ``TypeError`` or ``ValueError`` otherwise)."""
        shape = d["shape"]
        if shape not in SHAPES:
            raise ValueError(f"unknown label shape {shape!r}")
        return cls(
            str(d["kind"]), str(d["description"]), shape, int(d["n_items"]), int(d["n_raters"]), int(d["n_annotations"]),
            tuple(str(r) for r in d["raters"]),
            {str(k): AgreementResult.from_dict(v) for k, v in d["overall"].items()},
            {str(k): PairwiseResult.from_dict(v) for k, v in d["pairwise"].items()},
            {str(k): AgreementResult.from_dict(v) for k, v in d["per_annotator"].items()},
            {str(st): {str(k): AgreementResult.from_dict(v) for k, v in stats.items()} for st, stats in d["per_subtype"].items()},
            tuple(str(n) for n in d["notes"]), tuple(str(p) for p in d["problems"]),
        )


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
    for rater, (scores, no_majority) in zip(data.raters, shape.majority_scores(data)):
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
    # Answers repeat (the same few values against the same gold): each pair is matched once.
    matched: dict[tuple[Any, tuple[str, ...]], float] = {}
    for i, (item, row) in enumerate(zip(data.items, data.labels)):
        if not scored[i]:
            continue
        expected = tuple(gold[item])
        for r, given in enumerate(row):
            if given is not None:
                hit = matched.get((given, expected))
                if hit is None:
                    hit = matched[(given, expected)] = 1.0 if answers_match(given, expected, settings.match_rules) else 0.0
                correct[i, r] = hit
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

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AgreementReport:
        """The report :meth:`as_dict` wrote, e.g. read back from its JSON file: ``as_dict`` of the
        result gives ``d`` again. Anything else raises ``KeyError``, ``TypeError`` or ``ValueError``."""
        s = d["settings"]
        settings = Settings(
            int(s["n_boot"]), int(s["seed"]), float(s["ci_level"]),
            tuple(str(x) for x in s["exclude_sources"]), tuple(str(x) for x in s["match_rules"]),  # type: ignore[misc]
        )
        return cls(
            str(d["workspace"]), str(d["generated_at"]), settings, str(d["annotations_hash"]),
            {str(k): KindReport.from_dict(v) for k, v in d["kinds"].items()},
            {str(k): str(v) for k, v in d["skipped_kinds"].items()},
        )


def _kinds_present(ws: Workspace) -> list[str]:
    """The kinds of the tasks that hold at least one annotation. The few kinds come from the
    tasks' (kind, target) index; each is then asked for one annotation, which stops at the first
    (a join of every annotation to its task, made distinct, read them all)."""
    with ws.session() as s:
        kinds = s.exec(select(AnnotationTask.kind).distinct()).all()
        return sorted(kind for kind in set(kinds) if s.exec(
            select(Annotation.id).join(AnnotationTask, Annotation.task_id == AnnotationTask.id)  # type: ignore[arg-type]
            .where(AnnotationTask.kind == kind).limit(1)).first() is not None)


def _annotation_labels(ws: Workspace, kinds: Sequence[str]) -> Iterable[tuple[str, str | None]]:
    """``(id, label JSON text)`` of every annotation on a task of ``kinds`` (those whose labels
    the statistics do not read: their annotations are in the hash all the same)."""
    if not kinds:
        return []
    query = (
        select(Annotation.id, cast(Annotation.label, Text))  # type: ignore[call-overload]
        .join(AnnotationTask, Annotation.task_id == AnnotationTask.id)  # type: ignore[arg-type]
        .where(AnnotationTask.kind.in_(list(kinds)))  # type: ignore[attr-defined]
    )
    with ws.session() as s:
        return [(rid, text) for rid, text in s.connection().execute(query)]  # Core: plain rows


def _annotations_hash(labels: LabelsRead) -> str:
    """A hash of every annotation the report read (ids and labels), to tell a stale report.

    ``content_hash(sorted([id, label] ...))`` of ``labels`` (read with the statistics' labels:
    each label is read once for both), sorted here by id (ids are unique; sorted as Python sorts,
    whatever the database's collation): each distinct label is decoded and written canonically
    once, and the canonical text of the sorted list is fed to the hash a batch at a time (the
    same bytes as the one-shot form)."""
    ids, numbers, texts = labels.columns()
    canonical = [_canonical_json(None if text is None else json.loads(text)) for text in texts]
    written = list(map(canonical.__getitem__, numbers))
    order = sorted(range(len(ids)), key=ids.__getitem__)  # ids are unique: the order of the sorted pairs
    # An id of ASCII letters and digits is written quoted (as json.dumps writes it); were any
    # other, every id goes through json.dumps (the same text for the plain ones).
    joined = "".join(ids)
    plain = bool(ids) and min(map(len, ids)) > 0 and joined.isascii() and joined.encode("ascii").isalnum()
    write = '["{}",{}]'.format if plain else (lambda rid, label: f"[{_canonical_json(rid)},{label}]")
    digest = hashlib.sha256(b"[")
    for start in range(0, len(order), _BATCH):  # a batch's text hashed at once (one call per batch)
        batch = order[start:start + _BATCH]
        part = ",".join(map(write, map(ids.__getitem__, batch), map(written.__getitem__, batch)))
        digest.update((part if start == 0 else "," + part).encode())
    digest.update(b"]")
    return digest.hexdigest()[:ID_LENGTH]


#: Labels hashed at a time.
_BATCH = 5000


def _canonical_json(value: Any) -> str:
    """JSON text as :func:`tqaforge.ids.content_hash` writes it."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


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
    labels = LabelsRead()  # every annotation read (id, label text): the hash's
    _kind_reports(ws, wanted, settings, reports, skipped, labels)
    return AgreementReport(
        ws.config.name, now().isoformat(timespec="seconds"), settings, _annotations_hash(labels), reports, skipped,
    )


def _kind_reports(ws: Workspace, wanted: Sequence[str], settings: Settings, reports: dict[str, KindReport],
                  skipped: dict[str, str], labels: LabelsRead) -> None:
    """The report of each kind of ``wanted`` into ``reports`` (or why not into ``skipped``); every
    annotation of those kinds (id, label text) into ``labels``, read with the statistics' labels."""
    unread: list[str] = []  # kinds whose labels no statistic reads: read for the hash alone
    for kind in wanted:
        if kind not in KINDS:
            skipped[kind] = "no label shape is defined for this kind"
            unread.append(kind)
            continue
        if not KINDS[kind].strategy.compared:
            skipped[kind] = "authored edits are not compared between annotators: blind re-answering checks them (blind_reanswer)"
            unread.append(kind)
            continue
        data = load_rater_data(ws, kind, exclude_sources=settings.exclude_sources, every=labels)
        if not data.items:
            skipped[kind] = "no readable annotations" + (
                f" ({len(data.problems)} unreadable, e.g. {data.problems[0]})" if data.problems else ""
            )
            continue
        gold = gold_answers(ws, data) if data.kind.strategy.scored_against_gold else None
        # One BLAS thread: the bootstrap's many small matrix products gain nothing from more (they
        # cost about a quarter more CPU on two cores), and the sums come out the same on every
        # machine whatever its core count (a threaded product may add in another order).
        with threadpool_limits(limits=1, user_api="blas"):
            reports[kind] = kind_report(data, settings, gold=gold)
    labels.extend(_annotation_labels(ws, unread))

"""Adjudication: one final label per annotation task, and how and by whom it was decided.

:func:`adjudicate` looks at every task of a kind with two or more annotators (each annotator's
latest label, as in :mod:`tqaforge.annotation.rater_data`) and stores an
:class:`~tqaforge.schemas.records.Adjudication`:

- all annotators agree: ``resolved``, method ``unanimous``;
- otherwise, when at least ``M`` of the ``N`` annotators gave the same value (default ``M``: a
  strict majority, ``N // 2 + 1``): ``resolved``, method ``rule``, ``decided_by`` naming the rule
  ("majority 2 of 3"). For relevant cells (sets) the rule works cell by cell: the final set is
  the cells that at least ``M`` annotators marked (an empty result goes to a person);
- otherwise ``open``: the item waits in the queue (:func:`adjudication_queue`) for a person,
  who decides with :func:`resolve` (the app page will call the same function).

Nothing here deletes or edits an annotation. A person's decision is never overwritten by the
rules: re-running :func:`adjudicate` after new annotations arrive updates rule and unanimous
decisions, keeps people's, and reports the people's decisions whose annotations have changed
since (``stale``), so someone can look again. A decision that is replaced (a person overriding a
rule, or a second person) stays in ``history``. Blind re-answering is scored against gold, not
adjudicated.

A resolved label also changes its item where its kind says so (:attr:`KindSpec.settle` in
:mod:`tqaforge.annotation.kinds`): a resolved ``question_review`` settles its question's status
(``reject``: rejected, a promoted seed included; ``accept``: accepted unless already accepted or
a seed); while it is open the question waits as ``proposed``. A review's wording counts too
(:func:`tqaforge.annotation.review.review_wording`): an *edit* and a plain *accept* are not a
unanimous keep of the old wording, and two different edits wait in the queue with both texts.

People outrank machines here as everywhere (:class:`tqaforge.labels.Authority`): when people
labelled a task, agents' labels on it do not vote.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Sequence

from sqlalchemy import func, or_
from sqlmodel import Session, col, select

from tqaforge.annotation.kinds import KINDS, KindSpec, LabelError, check_against_target, check_kinds, kind_spec
from tqaforge.annotation.rater_data import latest_annotations
from tqaforge.annotation.reopen import FlagView, settle_flags, task_flags
from tqaforge.annotation.report import RECORD_SOME
from tqaforge.errors import AdjudicationError
from tqaforge.ids import adjudication_id
from tqaforge.labels import NOT_OURS, rater
from tqaforge.people import people_names
from tqaforge.queries import Page, check_window, get_by_prefix
from tqaforge.schemas.enums import AdjudicationMethod, AdjudicationStatus, FlagStatus, TaskStatus
from tqaforge.schemas.records import Adjudication, AdjudicationFlag, AnnotationTask, utcnow
from tqaforge.store import Workspace

ADJUDICATED_KINDS: tuple[str, ...] = tuple(k for k, spec in KINDS.items() if spec.adjudicated)


@dataclass(frozen=True)
class Decision:
    """What the rules make of one task's labels."""

    status: AdjudicationStatus
    label: Any | None
    method: AdjudicationMethod | None
    decided_by: str | None


@dataclass
class KindSummary:
    """What one run of :func:`adjudicate` did for one kind (counts of tasks)."""

    unanimous: int = 0
    rule: int = 0
    open: int = 0
    person: int = 0
    single: int = 0
    new: int = 0
    updated: int = 0
    stale: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def is_empty(self) -> bool:
        """True when the kind has no annotated task at all (not even unreadable labels)."""
        return not any((self.unanimous, self.rule, self.open, self.person, self.single, self.problems))

    def lines(self, kind: str) -> list[str]:
        """What the CLI prints for this kind: the counts, then stale decisions and unreadable labels (ten of each)."""
        out = [
            f"{kind}: {self.unanimous} unanimous, {self.rule} by rule, {self.open} open (the queue), "
            f"{self.person} decided by a person, {self.single} with one annotator; {self.new} new, {self.updated} updated"
        ]
        if self.stale:
            shown = ", ".join(t[:10] for t in self.stale[:10])
            out.append(f"  {len(self.stale)} decisions by a person predate new annotations: {shown}")
        out.extend(f"  unreadable: {problem}" for problem in self.problems[:10])
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "unanimous": self.unanimous, "rule": self.rule, "open": self.open, "person": self.person,
            "single": self.single, "new": self.new, "updated": self.updated,
            "stale": list(self.stale), "problems": list(self.problems),
        }


@dataclass(frozen=True)
class AdjudicationRun(Mapping[str, KindSummary]):
    """What :func:`adjudicate` did, per kind; a mapping kind -> :class:`KindSummary`.

    ``is_empty`` and ``message`` make "nothing to do" explicit, so a caller prints one line
    instead of nothing.
    """

    summaries: Mapping[str, KindSummary]

    def __getitem__(self, kind: str) -> KindSummary:
        return self.summaries[kind]

    def __iter__(self) -> Iterator[str]:
        return iter(self.summaries)

    def __len__(self) -> int:
        return len(self.summaries)

    @property
    def is_empty(self) -> bool:
        """True when no kind asked for has any annotated task."""
        return all(summary.is_empty for summary in self.summaries.values())

    @property
    def message(self) -> str | None:
        """One line saying why nothing was adjudicated (None when something was looked at)."""
        if not self.is_empty:
            return None
        kinds = ", ".join(self.summaries)
        return f"nothing to adjudicate: no annotations yet ({kinds}). {RECORD_SOME}"

    def lines(self) -> list[str]:
        """What the CLI prints: the one-line message when nothing was looked at, else each kind's lines."""
        if self.message is not None:
            return [self.message]
        return [line for kind, summary in self.summaries.items() if not summary.is_empty for line in summary.lines(kind)]

    def as_dict(self) -> dict[str, Any]:
        return {
            "is_empty": self.is_empty,
            "message": self.message,
            "kinds": {k: v.as_dict() for k, v in self.summaries.items()},
        }


@dataclass(frozen=True)
class QueueItem:
    """An open adjudication: the task, its target and who said what."""

    task_id: str
    kind: str
    target_type: str
    target_id: str
    votes: list[dict[str, Any]]
    created_at: Any
    #: Findings that sent the task back to a person (suspect gold), with their evidence
    #: (:mod:`tqaforge.annotation.reopen`): open ones put it here, settled ones are shown as evidence.
    flags: tuple[FlagView, ...] = ()


def _votes(spec: KindSpec, labels: dict[str, Any]) -> list[dict[str, Any]]:
    """Annotators grouped by equal value, most votes first (ties in label order)."""
    groups: dict[Any, list[str]] = defaultdict(list)
    for annotator, value in sorted(labels.items()):
        groups[value].append(annotator)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), repr(spec.final_label(kv[0]))))
    return [{"label": spec.final_label(value), "annotators": names} for value, names in ordered]


def decide(spec: KindSpec, labels: Sequence[Any], min_agree: int | None = None) -> Decision:
    """The rules' decision on one task's labels (one value per annotator, two or more)."""
    n = len(labels)
    m = min_agree if min_agree is not None else n // 2 + 1
    if len(set(labels)) == 1:
        return Decision(AdjudicationStatus.RESOLVED, spec.final_label(labels[0]), AdjudicationMethod.UNANIMOUS, "unanimous")
    combined = spec.strategy.combine(labels, m)  # a majority value, or the cells enough annotators marked
    if combined is not None:
        final, why = combined
        return Decision(AdjudicationStatus.RESOLVED, spec.final_label(final), AdjudicationMethod.RULE, why)
    return Decision(AdjudicationStatus.OPEN, None, None, None)


def _previous(row: Adjudication) -> dict[str, Any]:
    return {
        "label": row.label, "method": row.method, "decided_by": row.decided_by, "note": row.note,
        "decided_at": row.decided_at.isoformat(timespec="seconds") if row.decided_at else None,
        "annotation_ids": row.annotation_ids,
    }


def adjudicate(
    ws: Workspace,
    *,
    kinds: Sequence[str] | None = None,
    min_agree: int | None = None,
    exclude_sources: Iterable[str] = NOT_OURS,
) -> AdjudicationRun:
    """Run the rules on every task with two or more annotators; see the module docs.

    ``min_agree`` is ``M`` of "at least M of N agree" (default: a strict majority of each task's
    annotators). Idempotent: a second run with no new annotations changes nothing.
    """
    if min_agree is not None and (isinstance(min_agree, bool) or not isinstance(min_agree, int) or min_agree < 1):
        raise AdjudicationError(f"the number of annotators who must agree must be 1 or more, got {min_agree!r}", hint="give --min-agree 1 or more")
    wanted = check_kinds(kinds) or list(ADJUDICATED_KINDS)
    specs = [_adjudicated_spec(kind) for kind in wanted]  # every kind checked before any is written
    return AdjudicationRun({spec.name: _adjudicate_kind(ws, spec, min_agree, tuple(exclude_sources)) for spec in specs})


def _adjudicated_spec(kind: str) -> KindSpec:
    """The spec of a kind that has final labels (blind re-answering is scored, not adjudicated)."""
    spec = kind_spec(kind)
    if not spec.adjudicated:
        raise AdjudicationError(
            f"{kind} is scored against gold answers, not adjudicated",
            hint=f"see its accuracy with `tqaforge agreement report --kind {kind}`; adjudicated kinds: {', '.join(ADJUDICATED_KINDS)}",
        )
    return spec


@dataclass(frozen=True)
class _Entry:
    """One rater's latest readable label on a task."""

    value: Any
    annotation_id: str
    label: Any
    person: bool


def _people_first(entries: dict[str, _Entry]) -> dict[str, _Entry]:
    """The labels that decide: people's when any person labelled the task (a person's label
    beats a model's: :class:`tqaforge.labels.Authority`), else all (agents' among themselves)."""
    people = {who: e for who, e in entries.items() if e.person}
    return people or entries


def _read_entries(
    s: Session, spec: KindSpec, exclude: tuple[str, ...], problems: list[str], task_id: str | None = None,
) -> tuple[dict[str, dict[str, _Entry]], dict[str, AnnotationTask]]:
    per_task: dict[str, dict[str, _Entry]] = defaultdict(dict)
    tasks: dict[str, AnnotationTask] = {}
    for task, ann in latest_annotations(s, spec.name, exclude_sources=exclude, task_id=task_id):
        try:
            per_task[task.id][rater(ann)] = _Entry(spec.read(ann.label), ann.id, ann.label, ann.annotator_id is not None)
        except LabelError as exc:
            problems.append(f"task {task.id[:10]}, annotator {ann.annotator}: {exc}")
        tasks[task.id] = task
    return per_task, tasks


def _adjudicate_kind(ws: Workspace, spec: KindSpec, min_agree: int | None, exclude: tuple[str, ...]) -> KindSummary:
    summary = KindSummary()
    with ws.session() as s:
        per_task, tasks = _read_entries(s, spec, exclude, summary.problems)
        existing = {
            a.task_id: a for a in s.exec(select(Adjudication).where(Adjudication.kind == spec.name)).all()
        }
        for task_id in sorted(per_task):
            _adjudicate_one(s, spec, tasks[task_id], per_task[task_id], existing.get(task_id), min_agree, summary)
    return summary


def adjudicate_task(s: Session, task_id: str, *, min_agree: int | None = None) -> KindSummary:
    """:func:`adjudicate` on one task of an open session (the caller commits): what a review
    calls after recording a label, so the question's status follows the rule over all of its
    labels, never the last command."""
    task = s.get(AnnotationTask, task_id)
    if task is None:
        raise AdjudicationError(f"no annotation task {task_id[:10]}", hint="record a label first")
    spec = _adjudicated_spec(task.kind)
    summary = KindSummary()
    per_task, tasks = _read_entries(s, spec, NOT_OURS, summary.problems, task_id=task.id)
    row = s.exec(select(Adjudication).where(Adjudication.task_id == task.id)).first()
    if task.id in per_task:
        _adjudicate_one(s, spec, tasks[task.id], per_task[task.id], row, min_agree, summary)
    return summary


def _adjudicate_one(
    s: Session, spec: KindSpec, task: AnnotationTask, entries: dict[str, _Entry], row: Adjudication | None,
    min_agree: int | None, summary: KindSummary,
) -> None:
    """The rules on one task's labels (module docs); counts what it did in ``summary``."""
    entries = _people_first(entries)
    labels = {who: e.value for who, e in entries.items()}
    if len(labels) < 2:
        summary.single += 1
        return
    ann_ids = sorted(e.annotation_id for e in entries.values())
    votes = _votes(spec, labels)
    if row is not None and row.method == AdjudicationMethod.PERSON.value:
        summary.person += 1
        if row.annotation_ids != ann_ids:
            summary.stale.append(task.id)
        return
    d = decide(spec, [labels[k] for k in sorted(labels)], min_agree)
    if spec.detail is not None and d.status == AdjudicationStatus.RESOLVED.value and d.label is not None:
        # The compared value leaves a part out (a question's new wording): it must be agreed too.
        final, detail_votes = spec.detail(task, {who: e.label for who, e in entries.items()}, d.label, min_agree)
        if final is None:
            d, votes = Decision(AdjudicationStatus.OPEN, None, None, None), detail_votes or votes
        else:
            d = Decision(d.status, final, d.method, d.decided_by)
    _count(summary, d)
    if row is None:
        row = Adjudication(id=adjudication_id(task.id), task_id=task.id, kind=spec.name, history=[])
        summary.new += 1
    elif (row.status, row.label, row.method, row.decided_by, row.annotation_ids, row.votes) == (
        d.status, d.label, d.method, d.decided_by, ann_ids, votes
    ):
        return
    else:
        summary.updated += 1
        if row.status == AdjudicationStatus.RESOLVED.value:
            row.history = [*(row.history or []), _previous(row)]
    row.status, row.label, row.method, row.decided_by = d.status, d.label, d.method, d.decided_by
    row.votes, row.annotation_ids = votes, ann_ids
    row.decided_at = utcnow() if d.status == AdjudicationStatus.RESOLVED.value else None
    s.add(row)
    _mark_task(s, task, d.status)
    _settle_target(s, spec, task, row)


def _count(summary: KindSummary, d: Decision) -> None:
    if d.method == AdjudicationMethod.UNANIMOUS.value:
        summary.unanimous += 1
    elif d.method == AdjudicationMethod.RULE.value:
        summary.rule += 1
    else:
        summary.open += 1


def _mark_task(s: Session, task: AnnotationTask, status: str) -> None:
    if status == AdjudicationStatus.RESOLVED.value:
        task.status = TaskStatus.ADJUDICATED
    elif task.status == TaskStatus.ADJUDICATED.value:
        task.status = TaskStatus.ANNOTATED  # new annotations reopened it
    s.add(task)


def _settle_target(s: Session, spec: KindSpec, task: AnnotationTask, row: Adjudication) -> None:
    """Carry a resolved final label over to its target, as its kind says (see the module docs);
    an open one leaves the target undecided where its kind says how (``KindSpec.unsettle``)."""
    if spec.settle is not None and row.status == AdjudicationStatus.RESOLVED.value:
        spec.settle(s, task.target_id, row.label or {})
    elif spec.unsettle is not None and row.status == AdjudicationStatus.OPEN.value:
        spec.unsettle(s, task.target_id)


def adjudication_queue(
    ws: Workspace, *, kind: str | None = None, limit: int = 50, offset: int = 0
) -> Page[QueueItem]:
    """Open adjudications (annotators disagree, no rule decided) and tasks with an open flag
    (suspect gold sent back with its evidence: :mod:`tqaforge.annotation.reopen`; a rule's label
    on them stays until a person decides), oldest first.

    A :class:`~tqaforge.queries.Page`: it iterates like a list, and ``total`` says how many are
    open in all (``page.describe("open items")`` gives "showing 1-50 of 811 open items ...").
    An unknown ``kind`` raises :class:`AdjudicationError` listing the adjudicated kinds.
    """
    if kind is not None:
        _adjudicated_spec(kind)
    check_window(limit, offset)
    with ws.session() as s:
        flagged = select(AdjudicationFlag.task_id).where(AdjudicationFlag.status == FlagStatus.OPEN.value)
        where: list[Any] = [or_(col(Adjudication.status) == AdjudicationStatus.OPEN.value, col(AnnotationTask.id).in_(flagged))]
        if kind is not None:
            where.append(AnnotationTask.kind == kind)
        joined = (select(func.count()).select_from(AnnotationTask)
                  .outerjoin(Adjudication, Adjudication.task_id == AnnotationTask.id))  # type: ignore[arg-type]
        total = s.exec(joined.where(*where)).one()
        since = func.coalesce(Adjudication.created_at, AnnotationTask.created_at)
        q = (
            select(AnnotationTask, Adjudication)
            .outerjoin(Adjudication, Adjudication.task_id == AnnotationTask.id)  # type: ignore[arg-type]
            .where(*where)
            .order_by(since, AnnotationTask.id)  # type: ignore[arg-type]
            .offset(offset)
            .limit(limit)
        )
        rows = s.exec(q).all()
        names = people_names(s)  # votes name raters by person id: shown by name
        flags = task_flags(s, [t.id for t, _ in rows])
        items = [
            QueueItem(t.id, t.kind, t.target_type, t.target_id,
                      [{**v, "annotators": [names.get(w, w) for w in v.get("annotators", [])]} for v in (a.votes if a else None) or []],
                      a.created_at if a else t.created_at, tuple(flags.get(t.id, ())))
            for t, a in rows
        ]
    return Page(items, int(total), offset, limit)


def label_choices(item: QueueItem) -> list[Any]:
    """The final labels a person may pick for a queue item: the annotators' (most votes first), then
    the kind's other categories. Suspect gold sent back after a unanimous "correct" must be
    answerable with "incorrect", which no annotator gave."""
    given = [v.get("label") for v in item.votes]
    spec = KINDS.get(item.kind)
    more = [spec.final_label(c) for c in spec.categories] if spec is not None and spec.categories else []
    return given + [label for label in more if label not in given]


def resolve(ws: Workspace, task_id: str, label: Any, *, by: str, note: str | None = None) -> Adjudication:
    """A person's final label for a task (id or unique prefix), in the label shape of its kind.

    Works on open items and, to override a rule, on resolved ones; the replaced decision is kept
    in ``history``. The annotations themselves are left as they are.
    """
    by = by.strip()
    if not by:
        raise AdjudicationError("give the name of the person deciding", hint="--by NAME", app_hint="type your name in the name field")
    with ws.session() as s:
        task = get_by_prefix(s, AnnotationTask, task_id)
        spec = kind_spec(task.kind)
        if not spec.adjudicated:
            raise AdjudicationError(f"{task.kind} is scored against gold answers, not adjudicated")
        try:
            value = spec.read(label)
            # The label must also fit what the task is about (cells inside its table...).
            check_against_target(s, spec, task.target_type, task.target_id, value)
        except LabelError as exc:
            raise AdjudicationError(f"task {task.id[:10]} ({task.kind}): {exc}", hint=_label_hint(spec)) from None
        row = s.exec(select(Adjudication).where(Adjudication.task_id == task.id)).first()
        entries = _people_first({
            rater(ann): _Entry(spec.read(ann.label), ann.id, ann.label, ann.annotator_id is not None)
            for _, ann in latest_annotations(s, task.kind, task_id=task.id)
            if _readable(spec, ann.label)
        })
        labels = {who: (e.value, e.annotation_id) for who, e in entries.items()}
        final = spec.final_label(value)
        if spec.detail is not None and isinstance(label, dict):
            # A person's choice of the part the value leaves out (the wording of an edit).
            final = spec.detail(task, {"": label}, final, 1)[0] or final
        if row is None:
            row = Adjudication(id=adjudication_id(task.id), task_id=task.id, kind=task.kind, history=[])
        elif row.status == AdjudicationStatus.RESOLVED.value:
            row.history = [*(row.history or []), _previous(row)]
        row.votes = _votes(spec, {k: v for k, (v, _) in labels.items()})
        row.annotation_ids = sorted(aid for _, aid in labels.values())
        row.status = AdjudicationStatus.RESOLVED
        row.label = final
        row.method = AdjudicationMethod.PERSON
        row.decided_by = by
        row.note = note
        row.decided_at = utcnow()
        s.add(row)
        _mark_task(s, task, row.status)
        _settle_target(s, spec, task, row)
        settle_flags(s, task.id, by=by)  # a person decided: the findings that sent it here are answered
        s.flush()
        return row


def _label_hint(spec: KindSpec) -> str:
    """How to write a final label of this kind on the command line."""
    return spec.strategy.label_hint(spec)


def _readable(spec: KindSpec, label: Any) -> bool:
    try:
        spec.read(label)
        return True
    except LabelError:
        return False


def final_labels(ws: Workspace, kind: str) -> dict[str, Adjudication]:
    """The resolved adjudications of a kind, by task id."""
    _adjudicated_spec(kind)
    with ws.session() as s:
        rows = s.exec(
            select(Adjudication).where(Adjudication.kind == kind, Adjudication.status == AdjudicationStatus.RESOLVED.value)
        ).all()
        return {r.task_id: r for r in rows}

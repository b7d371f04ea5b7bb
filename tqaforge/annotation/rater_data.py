"""Reading labels: Annotation records -> rater data (items x annotators), and the gold answers.

Each :class:`~tqaforge.schemas.records.AnnotationTask` has a ``kind``; every
:class:`~tqaforge.schemas.records.Annotation` on it holds one person's ``label`` in the shape of
that kind (:mod:`tqaforge.annotation.kinds` lists the kinds and their label shapes).

When a person labels a task twice (changed their mind), their latest annotation counts (by
``created_at``, then the number at the end of ``source_ref``). Labels that cannot be read are
not guessed at: they are left out and listed in the data's ``problems``. The statistics on this
data are :mod:`tqaforge.annotation.report`'s.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from itertools import chain
from operator import itemgetter
from types import SimpleNamespace
from typing import Any, Iterable, Iterator, Protocol, Sequence

import numpy as np
from sqlalchemy import Text, and_, case, cast, type_coerce
from sqlmodel import Session, select

from tqaforge.annotation.agreement import Coded
from tqaforge.annotation.kinds import KindSpec, LabelError, kind_spec
from tqaforge.labels import label_order
from tqaforge.labels import rater as person_of
from tqaforge.people import people_names
from tqaforge.queries import CHECKED_BY_PEOPLE, trusted_answer_values
from tqaforge.schemas.records import Annotation, AnnotationTask, Answer, Question, Variant
from tqaforge.store import Workspace

NO_SUBTYPE = "(none)"


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
    #: The labels coded once (:meth:`coded` with no values), shared by every statistic on the data.
    _base: list[Coded] = field(default_factory=list, compare=False, repr=False)

    @property
    def n_annotations(self) -> int:
        return int((self._base_codes().codes >= 0).sum())

    def _base_codes(self) -> Coded:
        """The labels coded in one pass (codes numbered as first seen row by row), once."""
        if not self._base:
            index: dict[Any, int] = {}
            flat = [-1 if x is None else index.setdefault(x, len(index)) for row in self.labels for x in row]
            codes = np.array(flat, dtype=np.int64).reshape(len(self.labels), len(self.raters))
            self._base.append(Coded(codes, tuple(index)))
        return self._base[0]

    def coded(self, values: Sequence[Any] | None = None) -> Coded:
        """The labels as integer codes, items x raters (-1: none): what every statistic takes in
        place of :meth:`ratings` (``.T`` for :meth:`reliability_data`), read in one pass.

        Codes index ``values`` (default: the distinct labels, numbered as first seen row by row);
        a label not among ``values`` is added after them (in the order first seen). The labels
        are read once per data (:meth:`_base_codes`); other values renumber those codes."""
        base = self._base_codes()
        if values is None:
            return base
        index: dict[Any, int] = {v: i for i, v in enumerate(values)}
        # The base values are in the order first seen, so unknown ones are added in that order too.
        remap = np.array([index.setdefault(v, len(index)) for v in base.values] + [-1], dtype=np.int64)
        return Coded(remap[base.codes], tuple(index))  # -1 (none) takes the last entry: still -1

    def ratings(self) -> list[list[Any]]:
        """Items x raters."""
        return [list(row) for row in self.labels]

    def reliability_data(self) -> list[list[Any]]:
        """Raters x items (the layout of Krippendorff's alpha)."""
        return [list(col) for col in zip(*self.labels)] if self.labels else []

    def select(self, keep: Sequence[bool]) -> RaterData:
        """The items where ``keep`` is true (raters who labelled none of them are dropped)."""
        idx = [i for i, k in enumerate(keep) if k]
        given = set().union(*(
            {r for r, x in enumerate(self.labels[i]) if x is not None} for i in idx
        ))
        used = [r for r in range(len(self.raters)) if r in given]

        def pick(rows: tuple[tuple[Any, ...], ...]) -> tuple[tuple[Any, ...], ...]:
            if len(used) == len(self.raters):
                return tuple(rows[i] for i in idx)  # every rater stays: the rows as they are
            take = itemgetter(*used) if len(used) > 1 else (lambda row: (row[used[0]],) if used else ())
            return tuple(tuple(take(rows[i])) for i in idx)

        base = self._base_codes()
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
            [_renumbered(base.codes[np.array(idx, dtype=np.int64)][:, used], base.values)],
        )


def _renumbered(codes: np.ndarray, values: tuple[Any, ...]) -> Coded:
    """Codes of a part of the labels numbered as first seen row by row in that part: what coding
    the part's labels afresh gives, without reading them again."""
    flat = codes.ravel()
    given = flat[flat >= 0]
    found, first = np.unique(given, return_index=True)
    order = found[np.argsort(first, kind="stable")]
    remap = np.full(len(values) + 1, -1, dtype=np.int64)  # the last entry: none stays -1
    remap[order] = np.arange(len(order))
    return Coded(remap[codes], tuple(values[int(c)] for c in order))


def latest_annotations(
    s: Session, kind: str, *, exclude_sources: Iterable[str] = (), task_id: str | None = None,
) -> list[tuple[AnnotationTask, Annotation]]:
    """Each annotator's latest annotation on each task of ``kind`` (or on the one task given); an
    annotator is a person (:func:`tqaforge.labels.rater`), whatever surfaces their labels came from.

    Records, for callers that change or add them; statistics read :func:`label_columns` instead."""
    excluded = set(exclude_sources)
    query = (
        select(AnnotationTask, Annotation)
        .join(Annotation, Annotation.task_id == AnnotationTask.id)  # type: ignore[arg-type]
        .where(AnnotationTask.kind == kind)
    )
    if task_id is not None:
        query = query.where(AnnotationTask.id == task_id)
    rows: Sequence[tuple[AnnotationTask, Annotation]] = s.exec(query).all()
    latest: dict[tuple[str, str], tuple[AnnotationTask, Annotation]] = {}
    for task, ann in rows:
        if ann.source in excluded:
            continue
        key = (task.id, person_of(ann))  # one person is one rater, whatever the surface
        held = latest.get(key)
        if held is None or label_order(ann) > label_order(held[1]):
            latest[key] = (task, ann)
    return list(latest.values())


class LabelsRead:
    """Every annotation read, as ``(id, label JSON text)``, whatever its source or age: what the
    report's annotations hash is of, collected while the statistics' labels are read (each label
    is read once for both).

    Held compactly until the statistics are done (it grows kind by kind while they run): each
    kind's ids as one JSON text, its labels as numbers of the distinct texts (about 40 bytes a
    label, not a tuple and a string of about 150)."""

    def __init__(self) -> None:
        self._ids: list[str] = []  # per kind added, its ids as a JSON array
        self._numbers: list[np.ndarray] = []  # per kind added, each label's text as a number
        self._texts: dict[str | None, int] = {}  # the distinct label texts, numbered

    def add(self, ids: list[str], texts: list[str | None]) -> None:
        """Annotations read: their ids and label texts, in the same order."""
        number = self._texts
        for text in dict.fromkeys(texts):  # the distinct ones, in the order first seen
            number.setdefault(text, len(number))
        self._ids.append(json.dumps(ids))
        self._numbers.append(np.fromiter(map(number.__getitem__, texts), dtype=np.int32, count=len(texts)))

    def extend(self, rows: Iterable[tuple[str, str | None]]) -> None:
        """Annotations read as ``(id, label text)`` rows."""
        pairs = list(rows)
        self.add([rid for rid, _ in pairs], [text for _, text in pairs])

    def columns(self) -> tuple[list[str], list[int], list[str | None]]:
        """Every annotation added as columns: the ids and the numbers of their label texts, in the
        order added, and the distinct texts (``texts[number]``)."""
        ids = list(chain.from_iterable(json.loads(part) for part in self._ids))
        numbers = np.concatenate(self._numbers).tolist() if self._numbers else []
        return ids, numbers, list(self._texts)


class LabelRow(Protocol):
    """One annotation as :func:`label_columns` reads it: plain values, the label still JSON text;
    also a tuple of these columns in this order (unpacked by position where every label is read)."""

    task_id: str
    target_type: str
    target_id: str
    id: str
    annotator: str
    annotator_id: str | None
    source_ref: str
    created_at: Any  # as the driver hands it over (SQLite: text); parsed only to break a tie
    label: str | None  # the label's JSON text (None: no label)
    source: str

    def __iter__(self) -> Iterator[Any]: ...


def label_columns(
    s: Session, kind: str, *, exclude_sources: Iterable[str] = (), every: LabelsRead | None = None,
) -> list[LabelRow]:
    """Each annotator's latest label on each task of ``kind``, read as plain columns: what
    :func:`latest_annotations` picks, without building a record (or decoding a label, or parsing
    a time) per row, which is most of the cost on hundreds of thousands of labels.

    One query; the rows are the driver's (named columns, built in C); the created time of a
    label is parsed (by the column's own type, as the records would have it) only when one
    person labelled a task twice and the latest must be found. ``every``, when given, receives
    the id and label text of every annotation of the kind read, whatever its source or age (what
    the report's annotations hash is of: the labels are read once for both)."""
    excluded = set(exclude_sources)
    query = (
        select(  # type: ignore[call-overload]
            AnnotationTask.id.label("task_id"), AnnotationTask.target_type, AnnotationTask.target_id,  # type: ignore[attr-defined]
            Annotation.id, Annotation.annotator, Annotation.annotator_id, Annotation.source_ref,
            type_coerce(Annotation.created_at, Text).label("created_at"), cast(Annotation.label, Text).label("label"),
            Annotation.source,
        )
        .join(Annotation, Annotation.task_id == AnnotationTask.id)  # type: ignore[arg-type]
        .where(AnnotationTask.kind == kind)
    )
    dialect = s.get_bind().dialect
    parse = Annotation.__table__.c.created_at.type.dialect_impl(dialect).result_processor(dialect, None)  # type: ignore[attr-defined]

    def order(row: LabelRow) -> tuple[datetime, int, str]:
        moment = parse(row.created_at) if parse is not None and isinstance(row.created_at, str) else row.created_at
        # the same key as labels.label_order on the record
        return label_order(SimpleNamespace(created_at=moment, source_ref=row.source_ref, id=row.id))  # type: ignore[arg-type]

    latest: dict[tuple[str, str], LabelRow] = {}
    ids: list[str] = []
    texts: list[str | None] = []
    # Core, not the ORM: plain rows, fetched in batches
    for batch in s.connection().execute(query).partitions(5000):
        if every is not None:
            ids.extend(map(itemgetter(3), batch))
            texts.extend(map(itemgetter(8), batch))
        for row in batch:
            # By position (the columns above): a lookup by name costs more, and this runs per label.
            if row[9] in excluded:  # source
                continue
            key = (row[0], row[5] or row[4])  # task, person: one person is one rater (labels.rater)
            held = latest.get(key)
            if held is None or order(row) > order(held):
                latest[key] = row
    if every is not None:
        every.add(ids, texts)
    return list(latest.values())


def _chunks(values: Sequence[str], size: int = 500) -> Iterable[Sequence[str]]:
    for start in range(0, len(values), size):
        yield values[start:start + size]


def _task_context(s: Session, kind: str) -> dict[tuple[str, str], tuple[str, str]]:
    """Per (target_type, target_id) of the tasks of ``kind``: the question subtype (through the
    answer or variant a task is about) and the table its cells are on (a question's table; a
    variant's or an answer's own), in one query joining the tasks to their targets (no list of
    ids sent back to the database)."""
    task, answer, variant, question = (m.__table__ for m in (AnnotationTask, Answer, Variant, Question))  # type: ignore[attr-defined,union-attr]
    asked = case(
        (task.c.target_type == "question", task.c.target_id),
        (task.c.target_type == "answer", answer.c.question_id),
        (task.c.target_type == "variant", variant.c.question_id),
        else_=None,
    )
    query = (
        select(task.c.target_type, task.c.target_id, question.c.subtype, question.c.table_id)
        .select_from(task)
        .outerjoin(answer, and_(task.c.target_type == "answer", answer.c.id == task.c.target_id))
        .outerjoin(variant, and_(task.c.target_type == "variant", variant.c.id == task.c.target_id))
        .outerjoin(question, question.c.id == asked)
        .where(task.c.kind == kind)
    )
    out: dict[tuple[str, str], tuple[str, str]] = {}
    for target_type, target_id, subtype, table_id in s.connection().execute(query):
        # Cells of different tables are never the same cell; a variant has a table of its own.
        table = table_id if target_type == "question" and table_id is not None else f"{target_type}:{target_id}"
        out[(target_type, target_id)] = (subtype or NO_SUBTYPE, table)
    return out


def load_rater_data(
    ws: Workspace, kind: str, *, exclude_sources: Iterable[str] = (), every: LabelsRead | None = None,
) -> RaterData:
    """The labels of every task of ``kind`` as items x annotators (latest label per annotator);
    ``every``: :func:`label_columns`' (every annotation's id and label text, read on the way)."""
    spec = kind_spec(kind)
    with ws.session() as s:
        rows = label_columns(s, kind, exclude_sources=exclude_sources, every=every)
        context = _task_context(s, kind)
        names = people_names(s)  # raters are people, shown by name (unique among active people)
    problems: list[str] = []
    values: dict[str, dict[str, tuple[Any, str, int]]] = defaultdict(dict)
    tasks: dict[str, tuple[str, str]] = {}
    # Labels repeat (a few categories, the same cells): each distinct JSON text is decoded and
    # read once. A value read is immutable (a string, a frozenset, a tuple), so rows share it,
    # and equal values share a number (texts differing only in spacing read alike).
    read: dict[str | None, Any] = {}
    number: dict[Any, int] = {}
    # The columns unpacked by position (label_columns' order): a row's attributes by name cost
    # a lookup each, several per label.
    for task_id, target_type, target_id, aid, annotator, annotator_id, _, _, text, _ in rows:
        value = read.get(text, _UNREAD)
        if value is _UNREAD:
            try:
                value = spec.read(None if text is None else json.loads(text))
            except LabelError as exc:
                # A copy without the traceback: a raised one holds this frame, and so every row
                # read, in a reference cycle freed only by the garbage collector.
                value = LabelError(str(exc))
            read[text] = value
        if isinstance(value, LabelError):
            problems.append(f"task {task_id[:10]}, annotator {annotator}: {value}")
            continue
        who = annotator_id or annotator
        try:
            n = number[value]
        except KeyError:  # a value not seen yet (few: labels repeat)
            n = number[value] = len(number)
        except TypeError:  # an unhashable value (an authored edit, never compared): no codes
            n, number = -1, {}
        values[task_id][names.get(who, who)] = (value, aid, n)
        tasks[task_id] = (target_type, target_id)
    items = tuple(sorted(values))
    raters = tuple(sorted({a for per in values.values() for a in per}))
    column = {r: j for j, r in enumerate(raters)}
    # Rows of labels and their ids, and the labels' numbers, filled per label given (not per cell).
    width = len(raters)
    blank = (None,) * width
    label_rows: list[tuple[Any, ...]] = []
    id_rows: list[tuple[str | None, ...]] = []
    cells: list[int] = []
    numbers: list[int] = []
    for i, item in enumerate(items):
        given: list[Any] = list(blank)
        ids: list[str | None] = list(blank)
        first = i * width
        for who, (value, aid, n) in values[item].items():
            j = column[who]
            given[j], ids[j] = value, aid
            cells.append(first + j)
            numbers.append(n)
        label_rows.append(tuple(given))
        id_rows.append(tuple(ids))
    by_number = np.full(len(items) * width, -1, dtype=np.int64)
    by_number[np.array(cells, dtype=np.int64)] = numbers
    # What coded() gives, without a pass per cell (left to coded() when a value is unhashable).
    base = [_renumbered(by_number.reshape(len(items), width), tuple(number))] if -1 not in numbers else []
    of_items = [tasks[i] for i in items]
    target_types, targets = (tuple(col) for col in zip(*of_items)) if items else ((), ())
    subtypes, tables = (tuple(col) for col in zip(*map(context.__getitem__, of_items))) if items else ((), ())
    return RaterData(
        spec, items, target_types, targets, subtypes,
        raters, tuple(label_rows), tuple(id_rows), tuple(sorted(problems)),
        tables if spec.strategy.needs_tables else (),
        base,
    )


#: A label not read yet (None is a label's JSON text when it has none).
_UNREAD = object()


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
        best = trusted_answer_values(s, questions, at_least=CHECKED_BY_PEOPLE)
    for item, target, target_type in zip(data.items, data.targets, data.target_types):
        values = answers_of.get(target) if target_type == "variant" else best.get(target)
        if values:
            out[item] = [str(v) for v in values]
    return out

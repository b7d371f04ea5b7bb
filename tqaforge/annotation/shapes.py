"""Label shapes: one strategy object per shape of human label, looked up once per kind.

A kind (:mod:`tqaforge.annotation.kinds`) names its shape; everything that depends on the shape
and not on the kind lives here, so a new shape is one class and no other module branches on it:

- how a label's compared value is read and validated (:meth:`LabelShape.read`), written back as
  a final label (:meth:`LabelShape.final_label`) and checked against its target
  (:meth:`LabelShape.check_target`);
- how the rules combine two or more annotators' values into a final one
  (:meth:`LabelShape.combine`) and how a person is told to write one (:meth:`LabelShape.label_hint`);
- which statistics describe agreement (:meth:`LabelShape.overall`, :meth:`LabelShape.pairwise`,
  :meth:`LabelShape.agreement_with_majority`) and which one gates a release
  (:attr:`LabelShape.gate_statistic`).

``category`` labels get percent agreement, Fleiss' kappa, Krippendorff's alpha, Gwet's AC1 and
Cohen's kappa and are adjudicated by majority; ``set`` labels MASI alpha and set agreement,
adjudicated cell by cell; ``answer`` labels are scored against the author's gold (accuracy),
not adjudicated; ``edit`` labels (an authored table edit) are not compared at all.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any, Iterable, Literal, Mapping, Sequence

import numpy as np
from sqlmodel import Session, select

from tqaforge.annotation.agreement import (
    AgreementResult,
    Coded,
    PairwiseResult,
    category_counts,
    cohen_kappa_matrix,
    fleiss_kappa,
    gwet_ac1,
    krippendorff_alpha,
    masi_alpha,
    masi_distance,
    percent_agreement,
    percent_agreement_matrix,
)
from tqaforge.schemas.records import Answer, Question, TableRecord, Variant
from tqaforge.tables.edits import EDIT_MODES, CellEdit, EditRejected, check_value_edit
from tqaforge.tables.table import Table

if TYPE_CHECKING:  # only for types: the statistics read these duck-typed, and the report imports this module
    from tqaforge.annotation.kinds import KindSpec
    from tqaforge.annotation.rater_data import RaterData
    from tqaforge.annotation.report import Settings

#: The names of the shapes (a kind's ``shape``).
Shape = Literal["category", "set", "answer", "edit"]


class LabelError(ValueError):
    """One annotation's label does not have its kind's shape (reported, not raised to the user)."""


class LabelShape:
    """What a label shape does; the base is what every compared shape shares."""

    name: str = ""
    #: Whether disagreements are adjudicated into a final label.
    adjudicated: bool = False
    #: Whether annotators' labels are compared at all (an authored edit is checked another way).
    compared: bool = True
    #: Whether labels are scored against the author's gold answers instead of each other.
    scored_against_gold: bool = False
    #: Whether statistics keep the items' tables apart (cells of different tables never match).
    needs_tables: bool = False
    #: The statistic a release gate reads (None: the shape does not gate a release).
    gate_statistic: str | None = None
    #: The name of each annotator's agreement with the majority of the others.
    majority_statistic: str = "majority_agreement"
    #: The caption of the per-annotator table in a report.
    per_annotator_caption: str = "Each annotator against the majority of the others"
    #: How a report names each statistic the shape computes (statistic -> words).
    statistic_names: Mapping[str, str] = {}

    def read(self, spec: KindSpec, label: Any) -> Any:
        """The comparable value of a label (:class:`LabelError` when it has not this shape)."""
        value = label.get(spec.key) if isinstance(label, dict) else label
        if value is None:
            raise LabelError(f"no {spec.key!r} in the label {label!r}")
        return self.read_value(spec, value)

    def read_value(self, spec: KindSpec, value: Any) -> Any:
        """The comparable value of a label's value under the kind's key."""
        raise NotImplementedError

    def final_label(self, spec: KindSpec, value: Any) -> dict[str, Any]:
        """A value back in the label shape (for adjudicated final labels)."""
        return {spec.key: value}

    def check_target(self, s: Session, target_type: str, target_id: str, value: Any) -> None:
        """Raise :class:`LabelError` when a read value does not fit its task's target (here: it must exist)."""
        models: dict[str, type[Question] | type[Answer] | type[Variant]] = {
            "question": Question, "answer": Answer, "variant": Variant,
        }
        model = models.get(target_type)
        if model is None or s.get(model, target_id) is None:
            raise LabelError(f"the task's {target_type} {target_id[:10]} does not exist")

    def combine(self, labels: Sequence[Any], m: int) -> tuple[Any, str] | None:
        """The rules' final value of two or more differing values and why, or None (left open)."""
        tally: dict[Any, int] = defaultdict(int)
        for value in labels:
            tally[value] += 1
        winners = [v for v, k in tally.items() if k >= m]
        if m <= len(labels) and len(winners) == 1:
            return winners[0], f"majority {tally[winners[0]]} of {len(labels)} (at least {m})"
        return None

    def label_hint(self, spec: KindSpec) -> str:
        """How to write a final label of this kind on the command line."""
        return f"give the label as one of: {', '.join(spec.categories)}"

    def agreement_with_majority(self, mine: Any, others: Sequence[Any]) -> float | None:
        """One item's agreement of a value with the others' strict majority (None: they have none)."""
        majority = _majority(others)
        if majority is None:
            return None
        return 1.0 if mine == majority else 0.0

    def majority_scores(self, data: RaterData) -> list[tuple[np.ndarray, int]]:
        """Per rater: the scores of :meth:`agreement_with_majority` on the items they and another
        rater labelled (in item order; items where the others have no majority left out) and how
        many items were left out so."""
        out: list[tuple[np.ndarray, int]] = []
        memo: dict[tuple[Any, tuple[Any, ...]], float | None] = {}  # labels repeat: score each case once
        for r in range(len(data.raters)):
            scores: list[float] = []
            no_majority = 0
            for row in data.labels:
                mine = row[r]
                others = [x for j, x in enumerate(row) if j != r and x is not None]
                if mine is None or not others:
                    continue
                key = (mine, tuple(others))
                score = memo[key] if key in memo else memo.setdefault(key, self.agreement_with_majority(mine, others))
                if score is None:
                    no_majority += 1
                    continue
                scores.append(score)
            out.append((np.asarray(scores, dtype=np.float64), no_majority))
        return out

    def overall(self, data: RaterData, settings: Settings) -> tuple[dict[str, AgreementResult], list[str]]:
        """The overall statistics of rater data, and notes on how they were computed."""
        raise NotImplementedError

    def pairwise(self, data: RaterData, settings: Settings) -> dict[str, PairwiseResult]:
        """The statistics of each pair of annotators."""
        return {}


class CategoryShape(LabelShape):
    """One category out of the kind's ``categories`` (aliases read as their category)."""

    name = "category"
    adjudicated = True
    gate_statistic = "fleiss_kappa"
    statistic_names = {
        "percent_agreement": "Percent agreement",
        "fleiss_kappa": "Fleiss' kappa",
        "krippendorff_alpha": "Krippendorff's alpha (nominal)",
        "gwet_ac1": "Gwet's AC1",
        "cohen_kappa": "Cohen's kappa",
        "majority_agreement": "Agreement with the majority",
    }

    def read_value(self, spec: KindSpec, value: Any) -> str:
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise LabelError(f"{spec.key} must be one of {', '.join(spec.categories)}, got {value!r}")
        key = value.strip().lower() if isinstance(value, str) else value
        key = spec.aliases.get(key, spec.aliases.get(str(key), key))
        if key not in spec.categories:
            raise LabelError(f"{spec.key} {value!r} is not one of {', '.join(spec.categories)}")
        return str(key)

    def overall(self, data: RaterData, settings: Settings) -> tuple[dict[str, AgreementResult], list[str]]:
        notes: list[str] = []
        cats = data.kind.categories
        coded = data.coded(cats)  # read once; every statistic below takes the codes
        counts, _ = category_counts(coded, cats)
        per_item = counts.sum(axis=1)
        stats: dict[str, AgreementResult] = {"percent_agreement": percent_agreement(counts, **settings.boot())}
        sizes = Counter(int(n) for n in per_item if n >= 2)
        if not sizes:
            stats["fleiss_kappa"] = AgreementResult(
                "fleiss_kappa", None, 0, 0, reason="no item has two or more ratings: nothing to compare"
            )
        else:
            n_common = max(sizes, key=lambda n: (sizes[n], n))
            keep = per_item == n_common
            stats["fleiss_kappa"] = fleiss_kappa(counts[keep], categories=cats, **settings.boot())
            if keep.sum() < len(per_item):
                notes.append(
                    f"Fleiss' kappa on the {int(keep.sum())} of {len(per_item)} items with {n_common} ratings "
                    "(it needs the same number on every item); alpha and AC1 use every item"
                )
        stats["krippendorff_alpha"] = krippendorff_alpha(coded.T, "nominal", value_domain=cats, **settings.boot())
        stats["gwet_ac1"] = gwet_ac1(counts, n_categories=len(cats), categories=cats, **settings.boot())
        return stats, notes

    def majority_scores(self, data: RaterData) -> list[tuple[np.ndarray, int]]:
        """As the base's, on the codes of all items at once: the others' strict majority of an
        item is the category holding more than half of their ratings (at most one does)."""
        codes = data.coded(data.kind.categories).codes
        n_items, n_raters = codes.shape
        k = int(codes.max(initial=-1)) + 1
        rated = codes >= 0
        counts = np.zeros((n_items, max(k, 1)), dtype=np.int64)
        ii, rr = np.nonzero(rated)
        np.add.at(counts, (ii, codes[ii, rr]), 1)
        per_item = rated.sum(axis=1)
        out: list[tuple[np.ndarray, int]] = []
        for r in range(n_raters):
            mine = codes[:, r]
            asked = (mine >= 0) & (per_item >= 2)  # the rater labelled it, and someone else did
            others = counts[asked].copy()
            others[np.arange(len(others)), mine[asked]] -= 1
            top = others.argmax(axis=1)
            has = others[np.arange(len(others)), top] * 2 > per_item[asked] - 1
            scores = (top[has] == mine[asked][has]).astype(np.float64)
            out.append((scores, int((~has).sum())))
        return out

    def pairwise(self, data: RaterData, settings: Settings) -> dict[str, PairwiseResult]:
        ratings = data.coded(data.kind.categories)
        return {
            "percent_agreement": percent_agreement_matrix(ratings, raters=data.raters, **settings.boot()),
            "cohen_kappa": cohen_kappa_matrix(ratings, raters=data.raters, categories=data.kind.categories, **settings.boot()),
        }


class SetShape(LabelShape):
    """A set of table cells (row, col), compared with the MASI distance."""

    name = "set"
    adjudicated = True
    needs_tables = True
    gate_statistic = "masi_alpha"
    majority_statistic = "masi_majority_agreement"
    statistic_names = {
        "masi_alpha": "Krippendorff's alpha (MASI, sets)",
        "percent_agreement": "Percent agreement",
        "masi_majority_agreement": "MASI agreement with the majority",
    }

    def read_value(self, spec: KindSpec, value: Any) -> frozenset[tuple[int, int]]:
        return _cells(value)

    def final_label(self, spec: KindSpec, value: Any) -> dict[str, Any]:
        return {spec.key: [list(c) for c in sorted(value)]}

    def check_target(self, s: Session, target_type: str, target_id: str, value: Any) -> None:
        """The cells must lie inside the target's table: data rows from 0 (-1: the header), columns from 0."""
        n_rows, n_cols = target_table_size(s, target_type, target_id)
        outside = sorted((r, c) for r, c in value if not (-1 <= r < n_rows and c < n_cols))
        if outside:
            shown = ", ".join(f"[{r}, {c}]" for r, c in outside[:5]) + (f" and {len(outside) - 5} more" if len(outside) > 5 else "")
            raise LabelError(
                f"cell {shown} lies outside the table of {target_type} {target_id[:10]} "
                f"({n_rows} data rows x {n_cols} columns; rows 0-{max(n_rows - 1, 0)} (-1: the header) and columns 0-{max(n_cols - 1, 0)})"
            )

    def combine(self, labels: Sequence[Any], m: int) -> tuple[Any, str] | None:
        counts: dict[Any, int] = defaultdict(int)
        for cells in labels:
            for c in cells:
                counts[c] += 1
        final = frozenset(c for c, k in counts.items() if k >= m)
        if m <= len(labels) and final:
            return final, f"cells marked by at least {m} of {len(labels)}"
        return None

    def label_hint(self, spec: KindSpec) -> str:
        return 'give the label as JSON, e.g. \'{"cells": [[0, 1], [2, 1]]}\' (data rows from 0, header excluded; columns from 0)'

    def agreement_with_majority(self, mine: Any, others: Sequence[Any]) -> float | None:
        """The MASI agreement (1 - distance) with the cells more than half of the others chose."""
        return 1.0 - masi_distance(mine, _majority_cells(others))

    def overall(self, data: RaterData, settings: Settings) -> tuple[dict[str, AgreementResult], list[str]]:
        counts, _ = category_counts(_set_codes(data))
        return {
            "masi_alpha": masi_alpha(data.reliability_data(), blocks=data.tables or None, **settings.boot()),
            "percent_agreement": percent_agreement(counts, **settings.boot()),  # identical sets
        }, []

    def pairwise(self, data: RaterData, settings: Settings) -> dict[str, PairwiseResult]:
        return {"percent_agreement": percent_agreement_matrix(_set_codes(data), raters=data.raters, **settings.boot())}


class AnswerShape(LabelShape):
    """Answer values, scored by exact match against the author's gold, not adjudicated."""

    name = "answer"
    scored_against_gold = True
    gate_statistic = "accuracy"
    per_annotator_caption = "Each annotator's accuracy"
    statistic_names = {"accuracy": "Accuracy"}

    def read(self, spec: KindSpec, label: Any) -> tuple[str, ...]:
        value = label.get(spec.key) if isinstance(label, dict) else label
        if isinstance(label, dict) and value is None and "answers" in label:
            value = label["answers"]  # {"answers": [...]} as well as {"answer": "..."}
        if value is None:
            raise LabelError(f"no {spec.key!r} in the label {label!r}")
        return _answers(value)

    def read_value(self, spec: KindSpec, value: Any) -> tuple[str, ...]:
        return _answers(value)

    def final_label(self, spec: KindSpec, value: Any) -> dict[str, Any]:
        return {"answers": list(value)}


class EditShape(LabelShape):
    """A person's edit of a shortened table: authored, not compared (blind re-answering checks it)."""

    name = "edit"
    compared = False

    def read(self, spec: KindSpec, label: Any) -> dict[str, Any]:
        return _value_edit(label)

    def check_target(self, s: Session, target_type: str, target_id: str, value: Any) -> None:
        """A value modification against the shortened table it was made on (the target variant)."""
        if target_type != "variant":
            raise LabelError(f"a value modification is made on a variant (a shortened table), not a {target_type}")
        variant = s.get(Variant, target_id)
        if variant is None or variant.table is None:
            raise LabelError(f"the task's variant {target_id[:10]} (a shortened table) does not exist")
        if value.get("unanswerable"):
            return
        table = Table.from_dict(variant.table)
        for mode in EDIT_MODES:
            edits, answers = value[mode]
            try:
                check_value_edit(table, edits, mode=mode, old_answers=variant.answers or (), new_answers=answers)
            except EditRejected as exc:
                raise LabelError(str(exc)) from None


#: Every shape by name.
SHAPES: dict[str, LabelShape] = {shape.name: shape for shape in (CategoryShape(), SetShape(), AnswerShape(), EditShape())}


def statistic_name(statistic: str) -> str:
    """How a report names a statistic (the first shape that names it; else the statistic's own name)."""
    return next((shape.statistic_names[statistic] for shape in SHAPES.values() if statistic in shape.statistic_names), statistic)


# ---------------------------------------------------------------------------------------------
# Reading values


def _cells(value: Any) -> frozenset[tuple[int, int]]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise LabelError(f"cells must be a list of [row, col] pairs, got {value!r}")
    cells = set()
    for cell in value:
        if (
            not isinstance(cell, (list, tuple)) or len(cell) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in cell) or cell[0] < -1 or cell[1] < 0
        ):
            raise LabelError(f"cell {cell!r} is not a [row, col] pair of integers (row -1: a header cell; columns from 0)")
        cells.add((cell[0], cell[1]))
    return frozenset(cells)


def _value_edit(label: Any) -> dict[str, Any]:
    """A value_modification label, its shape checked: {mode: (edits, answers or None)} or
    {"unanswerable": True}; the checks against the table are :meth:`EditShape.check_target`'s."""
    if not isinstance(label, Mapping):
        raise LabelError(f"a value modification is an object with {' and '.join(EDIT_MODES)}, got {label!r}")
    if label.get("unanswerable") is True:
        return {"unanswerable": True}
    read: dict[str, Any] = {}
    for mode in EDIT_MODES:
        part = label.get(mode)
        if not isinstance(part, Mapping):
            raise LabelError(f"the value modification has no {mode!r} part")
        try:
            edits = tuple(CellEdit.from_dict(e) for e in part.get("edits") or [])
        except EditRejected as exc:
            raise LabelError(f"{mode}: {exc}") from None
        answers = part.get("answers")
        if answers is not None and (not isinstance(answers, list) or not all(isinstance(a, str) for a in answers)):
            raise LabelError(f"{mode}: answers must be a list of texts, got {answers!r}")
        read[mode] = (edits, tuple(answers) if answers is not None else None)
    return read


def _answers(value: Any) -> tuple[str, ...]:
    values = [value] if not isinstance(value, list) else value
    if values and all(isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in values):
        answers = tuple(str(x).strip() for x in values)
        if all(answers):  # a blank answer is no answer: scoring it would count as a miss
            return answers
    raise LabelError(f"an answer must be a non-blank string or a non-empty list of them, got {value!r}")


def target_table_size(s: Session, target_type: str, target_id: str) -> tuple[int, int]:
    """(data rows, columns) of the table a task's target is about; :class:`LabelError` if it is gone.

    A question points at a stored table; a variant carries its own (perturbed) table, on which
    its cells were marked.
    """
    if target_type == "variant":
        variant = s.get(Variant, target_id)
        if variant is None:
            raise LabelError(f"the task's variant {target_id[:10]} does not exist")
        if variant.table:
            rows = variant.table.get("rows") or []
            header = variant.table.get("header") or []
            return len(rows), len(header)
        target_id = variant.question_id
    elif target_type == "answer":
        answer = s.get(Answer, target_id)
        if answer is None:
            raise LabelError(f"the task's answer {target_id[:10]} does not exist")
        target_id = answer.question_id
    elif target_type != "question":
        raise LabelError(f"the task's target type {target_type!r} has no table")
    row = s.exec(
        select(TableRecord.n_rows, TableRecord.n_cols)
        .join(Question, Question.table_id == TableRecord.id)  # type: ignore[arg-type]
        .where(Question.id == target_id)
    ).first()
    if row is None:
        raise LabelError(f"the task's question {target_id[:10]} (or its table) does not exist")
    return int(row[0]), int(row[1])


# ---------------------------------------------------------------------------------------------
# Statistics helpers


def _majority(values: Sequence[Any]) -> Any | None:
    """The value given by more than half of ``values`` (None when there is no strict majority)."""
    if not values:
        return None
    value, n = Counter(values).most_common(1)[0]
    return value if n * 2 > len(values) else None


def _majority_cells(sets: Sequence[frozenset]) -> frozenset:
    """The cells chosen by more than half of the sets."""
    counts = Counter(c for s in sets for c in s)
    return frozenset(c for c, n in counts.items() if n * 2 > len(sets))


def _set_codes(data: RaterData) -> Coded:
    """Set labels as integer codes (equal sets, equal codes) for exact-agreement statistics."""
    coded = data.coded()
    return Coded(coded.codes, tuple(range(len(coded.values))))  # compared as the numbers they were

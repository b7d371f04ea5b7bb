"""People's value modifications, from labels to validated variants (FREB-TQA 3.5 and A.2).

:func:`settle_human_variants` is the step between pulls:

1. each annotator's latest ``value_modification`` label (checked when it was pulled: one or two
   cells of the shortened table, the answer changed or not as asked) becomes two variants,
   ``value_change_answer_changes`` and ``value_change_answer_same``, waiting for blind
   re-answers (``pending_review``); a label saying "unanswerable" makes none (filtered out, as in
   the paper);
2. a waiting variant with at least ``min_reanswers`` blind re-answers by people other than its
   author is judged: every re-answer equal to the author's gold (the shared normaliser,
   :func:`tqaforge.tables.matching.same_answer`) validates it, with that gold; otherwise it goes
   to adjudication: an open ``value_modification_review`` item, listing the re-answers, that a
   person decides with ``tqaforge agreement resolve TASK accept|reject --by NAME``.

Re-answer accuracy per annotator and overall is the agreement report's ``blind_reanswer``
section (FREB-TQA reports 92.5% and 93.5%). Safe to repeat: variants are keyed by content and an
item already sent to adjudication is not opened twice.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlmodel import Session, col, select

from tqaforge.annotation.kinds import LabelError, kind_spec
from tqaforge.annotation.rater_data import latest_annotations
from tqaforge.errors import AgreementError
from tqaforge.ids import adjudication_id
from tqaforge.labels import NOT_OURS, VALUE_MODIFICATION_REVIEW, Authority, left_alone, rater, task_for
from tqaforge.people import find_annotator
from tqaforge.schemas.enums import AdjudicationStatus, Origin, VariantStatus
from tqaforge.schemas.records import Adjudication, Variant
from tqaforge.store import Workspace
from tqaforge.tables.edits import EDIT_MODES
from tqaforge.variants.human import VALUE_PERTURBATIONS, judge_reanswers, store_value_modification

MODIFICATION_REVIEW = VALUE_MODIFICATION_REVIEW


@dataclass
class HumanVariantsSummary:
    """What one :func:`settle_human_variants` did; ``lines()`` for the CLI."""

    labels: int = 0  # value_modification labels read
    variants_new: int = 0  # value-modified variants made from them
    unanswerable: int = 0  # labels saying the question cannot be answered: no variant
    validated: int = 0  # re-answers all equal the author's gold
    to_adjudicate: int = 0  # re-answers disagree: sent to a person
    waiting: int = 0  # fewer re-answers than needed so far
    left_to_people: int = 0  # decided by a person (value_modification_review): left alone
    problems: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        lines = [
            f"{self.labels} value modifications read: {self.variants_new} new variants, {self.unanswerable} unanswerable (left out)",
            f"blind re-answers: {self.validated} variants validated, {self.to_adjudicate} sent to adjudication "
            f"(`tqaforge agreement queue --kind {MODIFICATION_REVIEW}`), {self.waiting} waiting for re-answers",
        ]
        if self.left_to_people:
            lines.append(f"{self.left_to_people} variants a person decided: left alone")
        return lines + [f"skipped: {p}" for p in self.problems]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _collect(ws: Workspace, summary: HumanVariantsSummary) -> None:
    spec = kind_spec("value_modification")
    with ws.session() as s:
        for task, ann in latest_annotations(s, "value_modification", exclude_sources=NOT_OURS):
            summary.labels += 1
            try:
                value = spec.read(ann.label)
            except LabelError as exc:
                summary.problems.append(f"value_modification by {ann.annotator} on {task.target_id[:10]}: {exc}")
                continue
            if value.get("unanswerable"):
                summary.unanswerable += 1
                continue
            shortened = s.get(Variant, task.target_id)
            if shortened is None:
                summary.problems.append(f"value_modification by {ann.annotator}: its shortened table {task.target_id[:10]} is gone")
                continue
            for mode in EDIT_MODES:
                edits, answers = value[mode]
                _, new = store_value_modification(
                    s, shortened, mode=mode, edits=list(edits), answers=list(answers or shortened.answers or []),
                    author=ann.annotator, source={"source": ann.source, "annotation": ann.id},
                )
                summary.variants_new += new


def _judge(ws: Workspace, summary: HumanVariantsSummary, min_reanswers: int) -> None:
    with ws.session() as s:
        human = s.exec(select(Variant).where(
            col(Variant.perturbation).in_(VALUE_PERTURBATIONS), Variant.origin == Origin.HUMAN.value)).all()
        # People outrank the re-answer rule (tqaforge.labels.Authority): a variant a person
        # decided keeps their decision, whatever re-answers arrive later.
        held = left_alone(s, MODIFICATION_REVIEW, "variant", [v.id for v in human], by=Authority.RULE)
        summary.left_to_people = len(held)
        waiting = {v.id: v for v in human if v.status == VariantStatus.PENDING_REVIEW.value and v.id not in held}
        reanswers: dict[str, dict[str, list[str]]] = defaultdict(dict)
        authors: dict[str, set[str]] = {}
        reader = kind_spec("blind_reanswer")
        for task, ann in latest_annotations(s, "blind_reanswer", exclude_sources=NOT_OURS):
            variant = waiting.get(task.target_id)
            if task.target_type != "variant" or variant is None or rater(ann) in _author(s, variant, authors):
                continue  # the author's own answer (whatever surface they gave it on) is the gold, not a re-answer
            try:
                reanswers[variant.id][rater(ann)] = list(reader.read(ann.label))
            except LabelError as exc:
                summary.problems.append(f"blind_reanswer by {ann.annotator} on {variant.id[:10]}: {exc}")
        opened = {row.task_id: row for row in s.exec(select(Adjudication).where(Adjudication.kind == MODIFICATION_REVIEW)).all()}
        for vid, variant in sorted(waiting.items()):
            given = reanswers.get(vid, {})
            if len(given) < min_reanswers:
                summary.waiting += 1
                continue
            verdict = judge_reanswers(variant, given)
            if verdict.agreed:
                variant.status = VariantStatus.VALIDATED
                s.add(variant)
                summary.validated += 1
                continue
            task = task_for(s, MODIFICATION_REVIEW, "variant", vid, {"question_id": variant.question_id, "perturbation": variant.perturbation})
            summary.to_adjudicate += 1
            if task.id in opened:
                continue
            shown = "; ".join(f"{who}: {', '.join(a)} ({'=' if verdict.matches[who] else '!='})" for who, a in sorted(given.items()))
            s.add(Adjudication(
                id=adjudication_id(task.id), task_id=task.id, kind=MODIFICATION_REVIEW, status=AdjudicationStatus.OPEN, history=[],
                votes=[{"value": list(a), "annotators": [who]} for who, a in sorted(given.items())],
                note=f"re-answers disagree with the author's gold {', '.join(variant.answers or [])!r}: {shown}",
            ))


def _author(s: Session, variant: Variant, cache: dict[str, set[str]]) -> set[str]:
    """Who authored a value modification: its author string and the person behind it."""
    if variant.created_by not in cache:
        person = find_annotator(s, variant.created_by)
        cache[variant.created_by] = {variant.created_by, *([person.id] if person is not None else [])}
    return cache[variant.created_by]


def settle_human_variants(ws: Workspace, *, min_reanswers: int = 2) -> HumanVariantsSummary:
    """Turn value-modification labels into variants and judge them by their blind re-answers
    (module docs). ``min_reanswers``: re-answers a variant needs before it is judged."""
    if isinstance(min_reanswers, bool) or not isinstance(min_reanswers, int) or min_reanswers < 1:
        raise AgreementError(f"min_reanswers must be 1 or more, got {min_reanswers!r}", hint="give --min-reanswers 1 or more")
    summary = HumanVariantsSummary()
    _collect(ws, summary)
    _judge(ws, summary, min_reanswers)
    return summary

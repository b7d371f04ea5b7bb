"""The variant grid: items x perturbations x seeds x serializations.

One :class:`~tqaforge.schemas.records.Variant` is stored per (question, perturbation, seed): the
perturbed table, what changed and what happened to the gold answer, or the reason the
perturbation was skipped. Serializations are a pure function of the stored table, so they are
not stored again per format; they are rendered into the prompts stream (JSONL, one line per
configuration). The full ToRR grid is 7 serializations x 5 conditions (none + 4 perturbations).

Variant ids hash (question, perturbation, seed): building the grid twice adds nothing, and a
run killed half-way resumes where it stopped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence, TextIO

from sqlalchemy import insert
from sqlmodel import Session, select

from tqaforge.errors import TqaforgeError
from tqaforge.generation.templates import render
from tqaforge.schemas.enums import AnswerEffect, Origin, VariantStatus
from tqaforge.schemas.records import Answer, Question, TableRecord, Variant, utcnow
from tqaforge.store import Workspace
from tqaforge.generation.classify import structural_words
from tqaforge.tables.perturb import MOVES_CELLS, PERTURBATIONS, PerturbationSkipped, perturb
from tqaforge.tables.perturb.base import ItemContext, Perturbed
from tqaforge.tables.serialize import SERIALIZATIONS, serialize
from tqaforge.tables.table import Table, content_hash

#: Perturbations whose result does not depend on the seed: built once, with seed 0.
SEED_FREE = frozenset({"none", "transpose", "remove_table", "remove_relevant_cells", "shorten_to_relevant"})

_BATCH = 500  # questions per transaction: a killed run loses at most one batch of work


class GridError(TqaforgeError):
    """The grid specification names unknown serializations or perturbations."""


@dataclass(frozen=True, slots=True)
class GridSpec:
    """Which configurations to build."""

    serializations: tuple[str, ...]
    perturbations: tuple[str, ...]
    seeds: tuple[int, ...] = (0,)
    #: Skip perturbations that move cells for questions that name positions (FREB-TQA's filter).
    skip_structural: bool = True

    def __post_init__(self) -> None:
        for kind, names, known in (
            ("serialization", self.serializations, SERIALIZATIONS),
            ("perturbation", self.perturbations, PERTURBATIONS),
        ):
            unknown = [n for n in names if n not in known]
            if unknown:
                raise GridError(f"unknown {kind}(s): {', '.join(unknown)}", hint="known: " + ", ".join(known))
        if not self.seeds:
            raise GridError("give at least one seed")

    def seeds_for(self, perturbation: str) -> tuple[int, ...]:
        return (self.seeds[0],) if perturbation in SEED_FREE else self.seeds


@dataclass(frozen=True, slots=True)
class Item:
    """A question with its table and gold answer: what the grid perturbs."""

    question_id: str
    question: str
    table_id: str
    table: Table
    context: ItemContext

    @property
    def structural_words(self) -> tuple[str, ...]:
        """Position and order words in the question (see :func:`classify.structural_words`)."""
        return structural_words(self.question)


@dataclass(slots=True)
class GridSummary:
    items: int = 0
    variants_new: int = 0
    variants_present: int = 0
    prompts: int = 0
    skipped: dict[str, int] = field(default_factory=dict)  # perturbation -> count
    skip_reasons: dict[str, int] = field(default_factory=dict)  # reason -> count


def variant_id(question_id: str, perturbation: str, seed: int) -> str:
    """The id of the variant of a question under one perturbation and seed."""
    return content_hash({"question": question_id, "perturbation": perturbation, "seed": seed})


def item_context(question: Question, answers: Sequence[str]) -> ItemContext:
    """What perturbations may use: the gold answers, relevant cells and a derivation if any."""
    derivation = (question.meta or {}).get("derivation")
    return ItemContext(
        question=question.text,
        answers=tuple(answers),
        relevant_cells=tuple(tuple(c) for c in question.relevant_cells) if question.relevant_cells else None,  # type: ignore[misc]
        derivation=derivation if isinstance(derivation, str) and derivation.strip() else None,
    )


def load_items(
    ws: Workspace,
    *,
    subtype: str | None = None,
    status: str | None = "accepted",
    question_ids: Sequence[str] | None = None,
    limit: int | None = None,
) -> list[Item]:
    """Questions (with their tables and gold answers) to build variants for."""
    with ws.session() as s:
        q = select(Question)
        if subtype:
            q = q.where(Question.subtype == subtype)
        if status:
            q = q.where(Question.status == status)
        if question_ids:
            q = q.where(Question.id.in_(list(question_ids)))  # type: ignore[attr-defined]
        q = q.order_by(Question.created_at, Question.id)
        if limit:
            q = q.limit(limit)
        questions = list(s.exec(q).all())
        ids = [x.id for x in questions]
        answers: dict[str, list[str]] = {}
        for start in range(0, len(ids), _BATCH):
            for a in s.exec(select(Answer).where(Answer.question_id.in_(ids[start : start + _BATCH]))).all():  # type: ignore[attr-defined]
                answers.setdefault(a.question_id, list(a.values))
        tables: dict[str, Table] = {}
        table_ids = sorted({x.table_id for x in questions})
        for start in range(0, len(table_ids), _BATCH):
            for t in s.exec(select(TableRecord).where(TableRecord.id.in_(table_ids[start : start + _BATCH]))).all():  # type: ignore[attr-defined]
                tables[t.id] = Table.build(t.header, t.rows)
    return [
        Item(x.id, x.text, x.table_id, tables[x.table_id], item_context(x, answers.get(x.id, [])))
        for x in questions
    ]


def perturb_item(item: Item, perturbation: str, seed: int, *, skip_structural: bool = True) -> Perturbed | PerturbationSkipped:
    """One cell of the grid, before serialization; a skip is returned, not raised."""
    if skip_structural and perturbation in MOVES_CELLS:
        words = item.structural_words
        if words:
            return PerturbationSkipped(f"the question names positions ({', '.join(words)}): moving cells may change its answer")
    try:
        return perturb(perturbation, item.table, item.context, seed)
    except PerturbationSkipped as skipped:
        return skipped


def render_prompt(table: Table, question: str, serialization: str) -> str:
    """The answering prompt for one configuration (template ``answer_dp``)."""
    return render("answer_dp", serialization=serialization, table=serialize(table, serialization), question=question)


def iter_grid(items: Iterable[Item], spec: GridSpec) -> Iterator[tuple[Item, str, int, Perturbed | PerturbationSkipped]]:
    """Every (item, perturbation, seed) with its outcome; pure, no store (used by benchmarks too)."""
    for item in items:
        for name in spec.perturbations:
            for seed in spec.seeds_for(name):
                yield item, name, seed, perturb_item(item, name, seed, skip_structural=spec.skip_structural)


def _variant_row(item: Item, name: str, seed: int, outcome: Perturbed | PerturbationSkipped, now: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": variant_id(item.question_id, name, seed),
        "question_id": item.question_id,
        "table_id": item.table_id,
        "perturbation": name,
        "seed": seed,
        "serialization": None,
        "origin": Origin.RULE.value,
        "created_by": "tqaforge",
        "created_at": now,
    }
    if isinstance(outcome, PerturbationSkipped):
        row.update(params=None, table=None, changes=None, answer_effect=None, answers=None,
                   status=VariantStatus.SKIPPED.value, skip_reason=outcome.reason)
    else:
        row.update(
            params=outcome.params or None,
            table=outcome.table.to_dict(),
            changes=outcome.change.to_dict(),
            answer_effect=outcome.answer_effect.value,
            answers=list(outcome.answers) if outcome.answers is not None else None,
            # A person must settle the gold before such a variant can be used.
            status=(VariantStatus.PENDING_REVIEW if outcome.answer_effect == AnswerEffect.NEEDS_PERSON
                    else VariantStatus.BUILT).value,
            skip_reason=None,
        )
    return row


def _existing(session: Session, ids: list[str]) -> dict[str, Variant]:
    found: dict[str, Variant] = {}
    for start in range(0, len(ids), _BATCH):
        for v in session.exec(select(Variant).where(Variant.id.in_(ids[start : start + _BATCH]))).all():  # type: ignore[attr-defined]
            found[v.id] = v
    return found


def build_variants(
    ws: Workspace,
    items: Sequence[Item],
    spec: GridSpec,
    *,
    prompts: TextIO | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> GridSummary:
    """Build and store the grid for ``items``; stream one prompt line per configuration to
    ``prompts`` (JSONL). Already stored variants are reused, never rebuilt or duplicated."""
    summary = GridSummary(items=len(items))
    for start in range(0, len(items), _BATCH):
        batch = items[start : start + _BATCH]
        ids = [variant_id(it.question_id, n, s) for it in batch for n in spec.perturbations for s in spec.seeds_for(n)]
        with ws.session() as session:
            present = _existing(session, ids)
            now = utcnow()
            new_rows: list[dict[str, Any]] = []
            for item in batch:
                for name in spec.perturbations:
                    for seed in spec.seeds_for(name):
                        vid = variant_id(item.question_id, name, seed)
                        stored = present.get(vid)
                        if stored is None:
                            row = _variant_row(item, name, seed, perturb_item(item, name, seed, skip_structural=spec.skip_structural), now)
                            new_rows.append(row)
                            summary.variants_new += 1
                        else:
                            row = stored.model_dump()
                            summary.variants_present += 1
                        if row["status"] == VariantStatus.SKIPPED.value:
                            summary.skipped[name] = summary.skipped.get(name, 0) + 1
                            summary.skip_reasons[row["skip_reason"]] = summary.skip_reasons.get(row["skip_reason"], 0) + 1
                        elif prompts is not None:
                            summary.prompts += _write_prompts(prompts, item, row, spec)
                if on_progress:
                    on_progress(1)
            if new_rows:
                session.execute(insert(Variant), new_rows)
    return summary


def _write_prompts(out: TextIO, item: Item, row: dict[str, Any], spec: GridSpec) -> int:
    table = Table.from_dict(row["table"])
    for serialization in spec.serializations:
        line = {
            "variant_id": row["id"],
            "question_id": item.question_id,
            "perturbation": row["perturbation"],
            "seed": row["seed"],
            "serialization": serialization,
            "prompt": render_prompt(table, item.question, serialization),
            "answers": row["answers"],
            "answer_effect": row["answer_effect"],
        }
        out.write(json.dumps(line, ensure_ascii=False) + "\n")
    return len(spec.serializations)


def write_prompts_file(path: Path, write: Callable[[TextIO], GridSummary]) -> GridSummary:
    """Write the prompts stream atomically: a killed run never leaves a half file in place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".partial")
    with tmp.open("w", encoding="utf-8") as fh:
        summary = write(fh)
    tmp.replace(path)
    return summary

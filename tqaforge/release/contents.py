"""What goes into a release: the trusted items and the variants built on them, as plain rows.

An **item** is a question whose gold answer people vouched for (verified, corrected, or gold
imported with a curated benchmark: :data:`tqaforge.queries.CHECKED_BY_PEOPLE`) and that was not
rejected, with its table, category, question type and relevant cells. A **variant** row is a
variant of an item that can be trusted as it is: built by a rule that keeps (or recomputes) the
gold, or validated by people; variants waiting for a person, skipped or rejected are left out.

The **configurations** subset is ToRR's grid as prompts: for every item, the item's own table
and each of its stored structure variants of ToRR's four perturbations (shuffle rows, shuffle
columns, transpose, insert empty rows), rendered in each serialization (ToRR's seven by default)
with the direct-prompting template: 35 prompts an item when every perturbation was built. Its
``config`` column (``SERIALIZATION/PERTURBATION``) is what ToRR's performance and robustness are
computed across.

**Streamed**: :func:`collect` keeps only the ids of the items and variants (for the agreement
gate); :func:`subset_rows` reads the store a chunk of :data:`CHUNK` items or variants at a time
and yields one subset's rows in id order, so a release of any size is built in bounded memory
(the configurations subset, sorted by prompt id, goes through an external sort,
:class:`~tqaforge.release.stream.SortedSpill`).

Rows carry no path, e-mail or secret: a question's source file becomes its dataset name, and
people appear only as the pseudonymous ids their labels carry (``ls:`` + hash, ``freb-tqa``).
Every row is sorted by id, so the same store always gives the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any, Callable, Iterator, Sequence

from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from tqaforge.answers.agents import chart_type_for
from tqaforge.ids import content_hash
from tqaforge.queries import CHECKED_BY_PEOPLE, tables_by_id, trusted_answers
from tqaforge.release.stream import EncodedRow, RowTemplate, SortedSpill
from tqaforge.schemas.enums import QuestionStatus, VariantStatus
from tqaforge.schemas.records import Question, Variant
from tqaforge.tables.perturb import TORR_PERTURBATIONS
from tqaforge.tables.serialize import TORR_SERIALIZATIONS
from tqaforge.tables.table import Table
from tqaforge.tables.tokens import LARGE_TABLE
from tqaforge.variants.grid import render_prompt

#: Which subset each perturbation's variants go to (FREB-TQA's three aspects, ToRR's structure,
#: realistic corruptions after Wolff and Hulsebos).
SUBSET_OF: dict[str, str] = {
    **{p: "structure" for p in (
        "shuffle_rows", "shuffle_columns", "target_rows_top", "target_rows_middle", "target_rows_bottom",
        "target_columns_front", "target_columns_back", "transpose", "insert_empty_rows",
    )},
    **{p: "relevant_cells" for p in ("remove_relevant_cells", "remove_table", "shift_relevant_rows")},
    **{p: "values" for p in ("shorten_to_relevant", "value_change_answer_changes", "value_change_answer_same")},
    **{p: "realistic" for p in ("missing_value", "duplicate_rows")},
}
SUBSETS: tuple[str, ...] = ("base", "structure", "relevant_cells", "values", "realistic", "configurations")
#: The conditions of the configurations subset: the item itself and ToRR's perturbations.
CONFIGURATION_PERTURBATIONS: tuple[str, ...] = ("none", *TORR_PERTURBATIONS)
CHART_SUBTYPE = "ChartGeneration"
#: Variant statuses a release takes: built by a rule that keeps the gold, or validated by people.
RELEASED_VARIANTS = (VariantStatus.BUILT.value, VariantStatus.VALIDATED.value)
#: Items (or variants) read from the store at once; also the size of an IN (...) list.
CHUNK = 200


@dataclass(frozen=True)
class Contents:
    """What a release holds, as ids (for the gate and the manifest); rows come from :func:`subset_rows`."""

    subsets: tuple[str, ...]
    serializations: tuple[str, ...]
    question_ids: tuple[str, ...]
    variant_ids: tuple[str, ...]
    #: Whether the base rows carry a ``token_bucket`` column: only when an item is a large-table
    #: probe (any other release keeps its columns, and its bytes).
    token_buckets: bool = False


def _dataset(question: Question) -> str:
    """The dataset a question came from, never a path: its taxonomy or the source file's stem."""
    if question.source:
        stem = PurePath(question.source.rsplit(":", 1)[0]).stem
        return question.taxonomy or stem
    return question.taxonomy or str(question.origin)


def configuration_id(source_id: str, serialization: str) -> str:
    """The id of one prompt of the configurations subset (its item or variant, and the format)."""
    return content_hash({"of": source_id, "serialization": serialization})


def _chunks(ids: Sequence[str], size: int = CHUNK) -> Iterator[Sequence[str]]:
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


def _wanted(subsets: tuple[str, ...]) -> set[str]:
    """The perturbations whose variants the subsets take (the configurations: ToRR's)."""
    wanted = {p for p, subset in SUBSET_OF.items() if subset in subsets}
    return wanted | set(TORR_PERTURBATIONS) if "configurations" in subsets else wanted


def _released(perturbations: set[str]) -> Any:
    """The variants a release may take: released status, one of ``perturbations``, a table and answers."""
    return (col(Variant.status).in_(RELEASED_VARIANTS) & col(Variant.perturbation).in_(sorted(perturbations))
            & col(Variant.table).is_not(None) & col(Variant.answers).is_not(None))


def collect(
    s: Session, subsets: tuple[str, ...] = SUBSETS, serializations: tuple[str, ...] = TORR_SERIALIZATIONS,
) -> Contents:
    """The ids of the items and variants a release of ``subsets`` holds (module docs)."""
    candidates = list(s.exec(select(Question.id).where(Question.status != QuestionStatus.REJECTED.value).order_by(Question.id)).all())
    items: list[str] = []
    for chunk in _chunks(candidates, 500):
        items += sorted(trusted_answers(s, chunk, at_least=CHECKED_BY_PEOPLE))
    items.sort()
    wanted = _wanted(subsets)
    kept: list[str] = []
    if wanted:
        for chunk in _chunks(items, 500):
            kept += s.exec(select(Variant.id).where(_released(wanted), col(Variant.question_id).in_(chunk))).all()
    large = any(s.exec(select(Question.id).where(col(Question.id).in_(chunk), Question.subtype == LARGE_TABLE).limit(1)).first()
                for chunk in _chunks(items, 500))
    return Contents(tuple(subsets), tuple(serializations), tuple(items), tuple(sorted(kept)), token_buckets=large)


def subset_rows(s: Session, contents: Contents, subset: str, spill: Path) -> Iterator[dict[str, Any] | EncodedRow]:
    """The rows of ``subset``, sorted by id, read a chunk at a time (``spill``: a folder for the
    external sort of the configurations subset, whose rows come as their JSON Lines lines, with
    :data:`SUBSET_SCHEMAS` giving their Arrow schema)."""
    if subset == "base":
        yield from _base_rows(s, contents)
    elif subset == "configurations":
        yield from _configurations(s, contents, spill)
    else:
        yield from _variant_rows(s, contents, subset)


def _items(s: Session, chunk: Sequence[str]) -> tuple[list[Question], dict[str, Any], dict[str, Table]]:
    """One chunk of items (in id order), their gold answers and tables."""
    questions = {q.id: q for q in s.exec(select(Question).where(col(Question.id).in_(chunk))).all()}
    items = [questions[qid] for qid in chunk]
    gold = trusted_answers(s, chunk, at_least=CHECKED_BY_PEOPLE)
    return items, gold, tables_by_id(s, {q.table_id for q in items})


def _base_rows(s: Session, contents: Contents) -> Iterator[dict[str, Any]]:
    for chunk in _chunks(contents.question_ids):
        items, gold, tables = _items(s, chunk)
        for q in items:
            table = tables[q.table_id]
            yield {
                "id": q.id, "source_id": q.source_id or "", "dataset": _dataset(q), "qtype": q.qtype or "",
                "qsubtype": q.subtype or "", "chart_type": _chart_type(q),
                "question_type": str(q.question_type) if q.question_type else "", "question": q.text,
                "answer": list(gold[q.id].values), "answer_text": gold[q.id].value, "answer_status": str(gold[q.id].status),
                "table": {"header": list(table.header), "rows": [list(r) for r in table.rows]},
                "relevant_cells": [list(c) for c in q.relevant_cells or []],
                **({"token_bucket": token_bucket(q)} if contents.token_buckets else {}),
            }
        s.expunge_all()  # the session keeps nothing of a chunk once it is out


def variant_page(perturbations: set[str], last: str) -> Any:
    """The query of one page of a variant subset: the released variants of ``perturbations``
    whose id follows ``last``, :data:`CHUNK` of them in id order (keyset paging)."""
    return select(Variant).where(_released(perturbations), col(Variant.id) > last).order_by(Variant.id).limit(CHUNK)


def _variant_rows(s: Session, contents: Contents, subset: str) -> Iterator[dict[str, Any]]:
    """A variant subset's rows: the kept variants of its perturbations, in id order, a page at a time."""
    perturbations = {p for p, sub in SUBSET_OF.items() if sub == subset}
    items = set(contents.question_ids)
    last = ""
    while True:
        page = s.exec(variant_page(perturbations, last)).all()
        if not page:
            return
        last = page[-1].id
        page = [v for v in page if v.question_id in items]
        asked = sorted({v.question_id for v in page})
        questions = {qid: (text, subtype) for qid, text, subtype in
                     s.exec(select(Question.id, Question.text, Question.subtype).where(col(Question.id).in_(asked))).all()} if asked else {}
        for v in page:
            changes = v.changes or {}
            text, subtype = questions[v.question_id]
            table = v.table or {}
            yield {
                "id": v.id, "item_id": v.question_id, "perturbation": v.perturbation, "seed": -1 if v.seed is None else v.seed,
                "origin": str(v.origin), "made_by": v.created_by, "question": text,
                "qsubtype": subtype or "", "answer": list(v.answers or []),
                "answer_effect": str(v.answer_effect) if v.answer_effect else "",
                "table": {"header": list(table.get("header") or []), "rows": [list(r) for r in table.get("rows") or []]},
                "edits": [{"row": int(e["row"]), "col": int(e["col"]), "old": str(e["old"]), "new": str(e["new"])}
                          for e in changes.get("edits") or []],
            }
        s.expunge_all()


def token_bucket(q: Question) -> str:
    """A base row's ``token_bucket``: the bucket of a large-table probe (``meta["large_table"]
    ["bucket"]``, :mod:`tqaforge.generation.large_tables`); '' for any other question."""
    large = (q.meta or {}).get("large_table")
    bucket = large.get("bucket") if isinstance(large, dict) else None
    return bucket if isinstance(bucket, str) else ""


def _chart_type(q: Question) -> str:
    return (chart_type_for(q.text, q.meta) or "") if q.subtype == CHART_SUBTYPE else ""


#: The configurations subset's columns, in the order its rows list them (and the Parquet file).
CONFIGURATION_COLUMNS = ("id", "item_id", "variant_id", "perturbation", "seed", "serialization", "config", "qtype",
                         "qsubtype", "chart_type", "question", "answer", "prompt", "table")
# A configuration row's shape bits (stream.EncodedRow.shape): which of its lists hold items.
_ANSWER_ITEMS, _HEADER_ITEMS, _ROWS, _ROW_ITEMS = 1, 2, 4, 8


def _configuration_shape(answer: Sequence[str], table: dict[str, Any]) -> int:
    shape = _ANSWER_ITEMS if answer else 0
    shape |= _HEADER_ITEMS if table["header"] else 0
    if table["rows"]:
        shape |= _ROWS | (_ROW_ITEMS if any(table["rows"]) else 0)
    return shape


def configuration_schema(shape: int) -> Any:
    """The Arrow schema ``pyarrow.Table.from_pylist`` infers for a batch of configuration rows
    whose shapes OR to ``shape``: every column a string but ``seed`` (int64), ``answer`` and the
    table's ``header`` lists of strings and its ``rows`` lists of those, where a list that is
    empty in every row of the batch has items of Arrow's ``null`` type, as inferred."""
    import pyarrow as pa

    def items(bit: int) -> Any:
        return pa.string() if shape & bit else pa.null()

    rows = pa.list_(pa.list_(items(_ROW_ITEMS))) if shape & _ROWS else pa.list_(pa.null())
    table = pa.struct([("header", pa.list_(items(_HEADER_ITEMS))), ("rows", rows)])
    types = {"seed": pa.int64(), "answer": pa.list_(items(_ANSWER_ITEMS)), "table": table}
    return pa.schema([(name, types.get(name, pa.string())) for name in CONFIGURATION_COLUMNS])


#: The subsets whose rows :func:`subset_rows` gives as lines, and their schema functions.
SUBSET_SCHEMAS: dict[str, Callable[[int], Any]] = {"configurations": configuration_schema}


def _configurations(s: Session, contents: Contents, spill: Path) -> Iterator[EncodedRow]:
    """The configurations subset's rows (module docs), sorted by id through an external sort, as
    their JSON Lines lines (:class:`~tqaforge.release.stream.EncodedRow`): the values the rows of
    one condition share (the table above all) are encoded once for its serializations."""
    if not contents.question_ids:
        return
    runs = SortedSpill(spill, "configurations")
    for chunk in _chunks(contents.question_ids):
        items, gold, tables = _items(s, chunk)
        # The columns used, not whole records: no JSON decoded for a variant's changes and
        # parameters, no ORM object built (measured: within the noise of the 10x build).
        grid: dict[str, list[tuple[str, str, int | None, Any, Any]]] = {}
        columns = [col(c) for c in (Variant.id, Variant.question_id, Variant.perturbation, Variant.seed, Variant.table, Variant.answers)]
        query = sa_select(*columns).where(_released(set(TORR_PERTURBATIONS)), col(Variant.question_id).in_(chunk))
        for v_id, question_id, perturbation, seed, table, answers in s.execute(query.order_by(col(Variant.id))).all():
            grid.setdefault(question_id, []).append((v_id, perturbation, seed, table, answers))
        for q in items:
            conditions: list[tuple[str, str, int, Table, list[str]]] = [("", "none", 0, tables[q.table_id], list(gold[q.id].values))]
            conditions += [(v_id, perturbation, -1 if seed is None else seed, Table.from_dict(table or {}), list(answers or []))
                           for v_id, perturbation, seed, table, answers in grid.get(q.id, [])]
            subtype, chart_type = q.subtype or "", _chart_type(q)
            for variant_id, perturbation, seed, table, answer in conditions:
                table_data = {"header": list(table.header), "rows": [list(r) for r in table.rows]}
                shared = {
                    "item_id": q.id, "variant_id": variant_id, "perturbation": perturbation, "seed": seed, "qtype": q.qtype or "",
                    "qsubtype": subtype, "chart_type": chart_type, "question": q.text, "answer": answer, "table": table_data,
                }
                line = RowTemplate(shared, ("id", "serialization", "config", "prompt"))
                shape = _configuration_shape(answer, table_data)
                for serialization in contents.serializations:
                    row_id = configuration_id(variant_id or q.id, serialization)
                    text = line(row_id, serialization, f"{serialization}/{perturbation}",
                                render_prompt(table, q.text, serialization, q.subtype))
                    runs.add(row_id, EncodedRow((text + "\n").encode("utf-8"), subtype, shape))
        s.expunge_all()
    yield from runs

"""Importing people's published robustness work: FREB-TQA's relevant cells, shortened tables and
value modifications (``02_rel`` and ``03_agg_com``), so that every later step can be tried on
real human work.

:func:`import_human_work` takes the paths ``tqaforge tables import`` takes. Files of questions
on their own tables (``*_ori_table``, ``02_rel``, any other format) are imported as usual
(:func:`tqaforge.ingest.import_paths`). FREB-TQA's derived files are not questions of their own:

- ``*_short_table``: the question's shortened table, stored as its ``shorten_to_relevant``
  variant (origin ``import``, validated). When a dataset has no ``*_ori_table`` file
  (WikiTableQuestions: the original tables were not published with the modifications), the
  short-table file is also imported as the questions themselves, on the shortened tables.
- ``*_ans_change`` / ``*_ans_no_change``: one validated variant per published modification
  (``value_change_answer_changes`` / ``value_change_answer_same``) holding the published table
  and new answer; its changed cells (old -> new) come from comparing it with the shortened
  table. A row is left out, and counted with its reason, when it modifies nothing (its table is
  the shortened table), or when its shortened table or its question is missing.
- a question's ``rel_cell`` (in ``*_ori_table`` and ``02_rel``) is recorded as a
  ``relevant_cells`` annotation by ``freb-tqa``, source ``imported``, ``source_ref`` the file and
  line. Agreement and adjudication leave source ``imported`` out by default
  (:data:`tqaforge.labels.NOT_OURS`): it is not our annotators' work.

Published edits are taken as published: FREB-TQA's annotators sometimes changed three or more
cells, a header, or the number of rows (a removed entry); our checks for new edits
(:func:`tqaforge.tables.edits.check_value_edit`) are not applied to them. Everything is keyed by
content, so importing the same files again adds nothing.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from sqlmodel import col, select

from tqaforge.errors import ReaderError
from tqaforge.ingest import FileOutcome, ImportOptions, ImportSummary, import_paths, walk_paths
from tqaforge.labels import IMPORTED_SOURCE, record_annotation
from tqaforge.progress import Progress
from tqaforge.schemas.enums import Origin, VariantStatus
from tqaforge.schemas.records import Question, Variant
from tqaforge.store import Workspace
from tqaforge.tables.edits import CellEdit
from tqaforge.tables.readers.datasets import DERIVED_TABLE_VARIANTS, read_freb_tqa, table_variant
from tqaforge.tables.source import ReadRecord
from tqaforge.tables.table import Table
from tqaforge.variants.human import store_imported_shortened, store_value_modification

#: The annotator name of FREB-TQA's published labels.
FREB_ANNOTATOR = "freb-tqa"
_MODES = {"ans_change": "answer_changes", "ans_no_change": "answer_same"}


@dataclass
class HumanFileCount:
    """What became of one derived file's rows."""

    file: str
    kind: str  # short_table, ans_change, ans_no_change
    rows: int = 0
    stored: int = 0  # variants (shortened or modified) now in the store for these rows
    new: int = 0  # of which new in this run
    left_out: dict[str, int] = field(default_factory=dict)  # reason -> rows


@dataclass
class HumanWorkSummary:
    """What one import of people's published work did; ``lines()`` for the CLI."""

    questions: ImportSummary
    files: list[HumanFileCount] = field(default_factory=list)
    relevant_cell_labels: int = 0  # new imported relevant_cells annotations

    def lines(self) -> list[str]:
        lines = list(self.questions.lines())
        for f in self.files:
            what = "shortened tables" if f.kind == "short_table" else "validated value modifications"
            lines.append(f"{Path(f.file).name}: {f.rows} rows -> {f.stored} {what} ({f.new} new)")
            lines += [f"  left out {n}: {reason}" for reason, n in sorted(f.left_out.items())]
        if self.relevant_cell_labels:
            lines.append(f"{self.relevant_cell_labels} relevant-cell labels imported (annotator {FREB_ANNOTATOR}, source {IMPORTED_SOURCE})")
        return lines

    def as_dict(self) -> dict[str, Any]:
        return {"questions": [asdict(f) for f in self.questions.files], "files": [asdict(f) for f in self.files],
                "relevant_cell_labels": self.relevant_cell_labels}


def _prefix(path: Path, variant: str) -> Path:
    return path.with_name(path.stem[: -len(variant)].rstrip("_"))


def _rows(path: Path) -> dict[str, tuple[int, ReadRecord]]:
    """{source id: (line, record)} of a FREB-TQA file."""
    found: dict[str, tuple[int, ReadRecord]] = {}
    for record in read_freb_tqa(path).records:
        item = record.items[0]
        if item.source_id is not None:
            found.setdefault(item.source_id, (int(record.location.rsplit(":", 1)[1]), record))
    return found


def _questions(ws: Workspace, base: Path) -> dict[str, Question]:
    """The questions imported from ``base``, by source id (their ``source`` is ``PATH:LINE``)."""
    with ws.session() as s:
        rows = s.exec(select(Question).where(col(Question.source).startswith(f"{base}:"))).all()
    return {q.source_id: q for q in rows if q.source_id is not None}


def _same_table(a: Table, b: Table) -> bool:
    return (
        [h.strip() for h in a.header] == [h.strip() for h in b.header]
        and len(a.rows) == len(b.rows)
        and all([x.strip() for x in ra] == [y.strip() for y in rb] for ra, rb in zip(a.rows, b.rows))
    )


def published_edits(short: Table, modified: Table) -> list[CellEdit]:
    """The cells a published modification changed (header cells as row -1); empty when the
    shapes differ (rows added or removed), which the variant's note then says."""
    if short.n_cols != modified.n_cols or short.n_rows != modified.n_rows:
        return []
    edits = [CellEdit(-1, c, a, b.strip()) for c, (a, b) in enumerate(zip(short.header, modified.header)) if a.strip() != b.strip()]
    for r, (ra, rb) in enumerate(zip(short.rows, modified.rows)):
        edits += [CellEdit(r, c, a, b.strip()) for c, (a, b) in enumerate(zip(ra, rb)) if a.strip() != b.strip()]
    return edits


def _record_relevant_cells(ws: Workspace, path: Path) -> int:
    """Record each question's published ``rel_cell`` of a questions file as an imported label."""
    questions = _questions(ws, path)
    new = 0
    with ws.session() as s:
        for source_id, (line, record) in _rows(path).items():
            cells = record.items[0].relevant_cells
            question = questions.get(source_id)
            if not cells or question is None:
                continue
            done = record_annotation(
                s, kind="relevant_cells", target_type="question", target_id=question.id, annotator=FREB_ANNOTATOR,
                label={"cells": [list(c) for c in cells]}, source=IMPORTED_SOURCE, source_ref=f"{path.name}:{line}",
            )
            new += done.recorded
    return new


def import_human_work(
    ws: Workspace, paths: Sequence[Path | str], options: ImportOptions | None = None, *, on_progress: Progress | None = None,
) -> HumanWorkSummary:
    """Import questions as usual and FREB-TQA's published human work with them (module docs)."""
    derived: dict[Path, dict[str, Path]] = defaultdict(dict)
    plain: list[Path] = []
    # Paths the walk cannot import (broken links, loops, FIFOs, unreadable directories) are
    # failed paths of the summary, never dropped: the import then says so and exits non-zero.
    unwalkable: list[FileOutcome] = []
    for path, problem in walk_paths(paths):
        if problem is not None:
            unwalkable.append(FileOutcome(path=str(path), error=str(problem)))
            continue
        variant = table_variant(path)
        if variant in DERIVED_TABLE_VARIANTS:
            derived[_prefix(path, variant)][variant] = path
        else:
            plain.append(path)
    bases: dict[Path, Path] = {}
    for prefix, group in derived.items():
        original = prefix.with_name(prefix.name + "_ori_table.jsonl")
        if original in plain:
            bases[prefix] = original
        elif "short_table" in group:
            bases[prefix] = group["short_table"]
            plain.append(group["short_table"])
    summary = HumanWorkSummary(import_paths(ws, plain, options, on_progress=on_progress))
    summary.questions.files += unwalkable
    for path in plain:
        if table_variant(path) in ("ori_table", None) and path.suffix == ".jsonl":
            try:
                summary.relevant_cell_labels += _record_relevant_cells(ws, path)
            except ReaderError:  # not a FREB-TQA file: it has no relevant cells to record
                continue
    for prefix, group in sorted(derived.items()):
        summary.files += _import_group(ws, group, bases.get(prefix))
    return summary


def _import_group(ws: Workspace, group: dict[str, Path], base: Path | None) -> list[HumanFileCount]:
    counts: list[HumanFileCount] = []
    short_path = group.get("short_table")
    shorts = _rows(short_path) if short_path is not None else {}
    questions = _questions(ws, base) if base is not None else {}
    shortened: dict[str, Any] = {}
    with ws.session() as s:  # what is stored already, in a few queries, not one per row
        ids = sorted(q.id for q in questions.values())
        stored: dict[str, Variant] = {
            v.id: v for start in range(0, len(ids), 500)
            for v in s.exec(select(Variant).where(col(Variant.question_id).in_(ids[start:start + 500]))).all()
        }
    if short_path is not None:
        count = HumanFileCount(str(short_path), "short_table")
        left = Counter[str]()
        with ws.session() as s, s.no_autoflush:
            for source_id, (line, record) in shorts.items():
                count.rows += 1
                question = questions.get(source_id)
                if question is None:
                    left[f"its question is not in the store (not imported from {Path(str(base)).name})"] += 1
                    continue
                variant, new = store_imported_shortened(
                    s, question, record.table, record.items[0].answers,
                    source={"source": IMPORTED_SOURCE, "file": short_path.name, "line": line}, known=stored,
                )
                shortened[source_id] = variant
                count.stored += 1
                count.new += new
        count.left_out = dict(left)
        counts.append(count)
    stored_ids = set(stored)
    for variant_name in ("ans_change", "ans_no_change"):
        path = group.get(variant_name)
        if path is None:
            continue
        count = HumanFileCount(str(path), variant_name)
        left = Counter[str]()
        with ws.session() as s, s.no_autoflush:
            for source_id, (line, record) in _rows(path).items():
                count.rows += 1
                base_variant = shortened.get(source_id)
                if base_variant is None:
                    left["no shortened table for its question (short_table file or question missing)"] += 1
                    continue
                short = Table.from_dict(base_variant.table)
                if _same_table(short, record.table):
                    left["the published table equals the shortened table: nothing was modified"] += 1
                    continue
                edits = published_edits(short, record.table)
                _, new = store_value_modification(
                    s, base_variant, mode=_MODES[variant_name], edits=edits, answers=list(record.items[0].answers),  # type: ignore[arg-type]
                    author=FREB_ANNOTATOR, origin=Origin.IMPORT, status=VariantStatus.VALIDATED, table=record.table, known=stored_ids,
                    source={"source": IMPORTED_SOURCE, "file": path.name, "line": line,
                            **({} if edits else {"structure": f"{short.n_rows}x{short.n_cols} -> {record.table.n_rows}x{record.table.n_cols}"})},
                )
                count.stored += 1
                count.new += new
        count.left_out = dict(left)
        counts.append(count)
    return counts



def import_uploads(
    ws: Workspace, files: Sequence[tuple[str, bytes]], options: ImportOptions | None = None, *,
    on_progress: Progress | None = None,
) -> HumanWorkSummary:
    """Import files given as (name, content), as from a browser upload: each is kept under
    ``WORKSPACE/uploads/`` (the record of where the tables came from), then imported like any
    path. A file that fails to import is removed from there again (nothing of it was stored);
    the summary says why it failed."""
    folder = ws.root / "uploads"
    folder.mkdir(exist_ok=True)
    paths = []
    for name, content in files:
        target = folder / Path(name).name  # never a path the sender chose
        target.write_bytes(content)
        paths.append(target)
    summary = import_human_work(ws, paths, options, on_progress=on_progress)
    uploaded = {str(p) for p in paths}
    for failed in summary.questions.failed:
        if failed.path in uploaded:
            Path(failed.path).unlink(missing_ok=True)
    return summary

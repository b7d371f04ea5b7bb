"""People's robustness variants (FREB-TQA 3.4-3.5): relevant cells adjudicated into a shortened
table, and FREB-TQA's published human work imported as imported labels and validated variants."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import shared_data_path
from sqlmodel import select

from tqaforge.annotation.adjudication import adjudicate
from tqaforge.annotation.human_import import FREB_ANNOTATOR, import_human_work
from tqaforge.annotation.workflows import Settings, agreement_report
from tqaforge.ingest import import_paths
from tqaforge.labels import IMPORTED_SOURCE, record_annotation
from tqaforge.schemas.enums import Origin, VariantStatus
from tqaforge.schemas.records import Annotation, Question, TableRecord, Variant
from tqaforge.store import Workspace
from tqaforge.tables.table import Table
from tqaforge.variants.human import SHORTENED, shortened_variant, variant_edits
from tqaforge.variants.view import show_variant

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "sample"


def _variants(ws: Workspace, perturbation: str) -> list[Variant]:
    with ws.session() as s:
        return list(s.exec(select(Variant).where(Variant.perturbation == perturbation)).all())


def test_final_relevant_cells_make_the_shortened_table(workspace: Workspace) -> None:
    assert not import_paths(workspace, [SAMPLE / "tat_nonfactoid_dev_sample.jsonl"]).failed
    with workspace.session() as s:
        question = s.exec(select(Question).order_by(Question.id)).first()
        assert question is not None
        table = s.get(TableRecord, question.table_id).to_table()  # type: ignore[union-attr]
        qid = question.id
        # Two annotators agree on two data cells; one also marks a header cell (row -1).
        for who, cells in (("ana", [[1, 1], [2, 2]]), ("ben", [[1, 1], [2, 2], [-1, 3]]), ("cy", [[1, 1], [2, 2]])):
            record_annotation(s, kind="relevant_cells", target_type="question", target_id=qid, annotator=who, label={"cells": cells})
    run = adjudicate(workspace, kinds=["relevant_cells"])
    assert run["relevant_cells"].open == 0
    with workspace.session() as s:
        question = s.get(Question, qid)
        short = shortened_variant(s, qid)
    assert question is not None and question.relevant_cells == [[1, 1], [2, 2]]  # cell by cell: one of three marked the header cell
    assert short is not None and short.status == VariantStatus.VALIDATED and short.origin == Origin.HUMAN
    shortened = Table.from_dict(short.table)  # type: ignore[arg-type]
    # Rows 1 and 2 (and the leading label rows), columns 1 and 2 plus the row labels.
    assert shortened.n_cols == 3 and shortened.header == (table.header[0], table.header[1], table.header[2])
    assert {table.rows[1][1], table.rows[2][2]} <= {cell for row in shortened.rows for cell in row}
    assert short.params["cells"] == [[1, 1], [2, 2]]  # type: ignore[index]


@pytest.mark.shared
def test_importing_freb_tqa_human_work_gives_one_validated_variant_per_published_modification(sqlite_workspace: Workspace) -> None:
    folder = shared_data_path("freb-tqa", "03_agg_com")
    ws = sqlite_workspace
    summary = import_human_work(ws, [folder])
    counts = {Path(f.file).name: (f.rows, f.stored, f.left_out) for f in summary.files}
    nothing = "the published table equals the shortened table: nothing was modified"
    missing = "no shortened table for its question (short_table file or question missing)"
    # TAT-QA: every question comes from the original-table file. Three published "answer changes"
    # rows and one "answer stays" row hold the shortened table unchanged: nothing to import.
    assert counts["tat_nonfactoid_dev_no_shuffle_short_table.jsonl"] == (537, 537, {})
    assert counts["tat_nonfactoid_dev_no_shuffle_ans_change.jsonl"] == (537, 534, {nothing: 3})
    assert counts["tat_nonfactoid_dev_no_shuffle_ans_no_change.jsonl"] == (537, 536, {nothing: 1})
    # WikiTableQuestions: no original tables were published, so the questions are imported on the
    # shortened tables; three of those are a header without rows (a counting question whose answer
    # is 0), which the import's selection (at least one data row) rejects, and their edits with them.
    short_wtq = counts["wtq_nonfactoid_dev_no_shuffle_short_table.jsonl"]
    assert short_wtq[:2] == (1470, 1467) and sum(short_wtq[2].values()) == 3
    assert counts["wtq_nonfactoid_dev_no_shuffle_ans_change.jsonl"] == (1470, 1458, {missing: 3, nothing: 9})
    assert counts["wtq_nonfactoid_dev_no_shuffle_ans_no_change.jsonl"] == (1470, 1390, {missing: 3, nothing: 77})
    assert summary.relevant_cell_labels == 537  # TAT-QA's rel_cell, one label per question

    changed = _variants(ws, "value_change_answer_changes")
    same = _variants(ws, "value_change_answer_same")
    assert (len(changed), len(same)) == (534 + 1458, 536 + 1390)
    assert all(v.status == VariantStatus.VALIDATED and v.origin == Origin.IMPORT for v in changed + same)
    # The first TAT-QA question: "In which year was the amount of Property, Plant, and Equipment,
    # Net larger?" 2019 ($3,574 vs $3,497); the published edit raises 2018 to $3,697: answer 2018.
    first = next(v for v in changed if v.params["file"].startswith("tat") and v.params["line"] == 1)  # type: ignore[index]
    assert first.answers == ["2018"]
    assert [(e.row, e.col, e.old.strip(), e.new) for e in variant_edits(first)] == [(2, 2, "$3,497", "$3,697")]
    view = show_variant(ws, first.id)
    assert view.edit_lines() == ["r2c2 (Fiscal Year End): $3,497 -> $3,697"]
    assert any("$3,497 -> $3,697*" in cell for row in view.marked_rows() for cell in row)
    published = [json.loads(line) for line in (folder / "tat_nonfactoid_dev_no_shuffle_ans_change.jsonl").open()]
    assert Table.from_dict(first.table).rows[2][2].strip() == published[0]["table"]["rows"][2][2].strip()  # type: ignore[arg-type]

    # Imported relevant cells are labels by freb-tqa, source imported: not counted as our work.
    with ws.session() as s:
        labels = s.exec(select(Annotation).where(Annotation.kind == "relevant_cells")).all()
    assert len(labels) == 537 and {(a.annotator, a.source) for a in labels} == {(FREB_ANNOTATOR, IMPORTED_SOURCE)}
    assert "relevant_cells" not in agreement_report(ws, settings=Settings(n_boot=0)).kinds
    assert "relevant_cells" in agreement_report(ws, settings=Settings(n_boot=0, exclude_sources=())).kinds

    assert len(_variants(ws, SHORTENED)) == 537 + 1467


def test_the_demo_sample_of_value_modifications_imports(sqlite_workspace: Workspace) -> None:
    summary = import_human_work(sqlite_workspace, [SAMPLE / "freb_agg_com"])
    assert [(Path(f.file).name.rsplit("_shuffle_", 1)[1], f.rows, f.stored) for f in summary.files] == [
        ("short_table.jsonl", 6, 6), ("ans_change.jsonl", 6, 6), ("ans_no_change.jsonl", 6, 6),
    ]
    assert any("6 validated value modifications" in line for line in summary.lines())
    again = import_human_work(sqlite_workspace, [SAMPLE / "freb_agg_com"])  # importing again adds nothing
    assert sum(f.new for f in again.files) == 0 and again.relevant_cell_labels == 0 and sum(f.stored for f in again.files) == 18
    rel = import_human_work(sqlite_workspace, [SAMPLE / "tat_nonfactoid_dev_sample.jsonl"])  # 02_rel: rel_cell as labels
    assert rel.relevant_cell_labels == 10


def test_value_modifications_read_at_80_columns_without_colour(sqlite_workspace: Workspace) -> None:
    """`variants show` and `variants list` name each changed cell old -> new in plain text."""
    from typer.testing import CliRunner

    from tqaforge.cli import app

    import_human_work(sqlite_workspace, [SAMPLE / "freb_agg_com"])
    changed = sorted(_variants(sqlite_workspace, "value_change_answer_changes"), key=lambda v: v.id)[0]
    edit = variant_edits(changed)[0]
    runner = CliRunner(env={"COLUMNS": "80", "NO_COLOR": "1"})
    root = ["-w", str(sqlite_workspace.root)]
    shown = runner.invoke(app, [*root, "variants", "show", changed.id[:12]])
    assert shown.exit_code == 0, shown.output
    assert "changed cells (old -> new):" in shown.output and f"{edit.cell_id} (" in shown.output
    assert f"{edit.old.strip()} -> {edit.new.strip()}" in shown.output and "shortened table" in shown.output
    assert max(len(line) for line in shown.output.splitlines()) <= 80
    assert "\x1b[" not in shown.output  # no colour codes: the marks are text
    listed = runner.invoke(app, [*root, "variants", "list", "--perturbation", "value_change_answer_changes"])
    assert listed.exit_code == 0 and "changed (old" in listed.output and "->" in listed.output, listed.output
    assert max(len(line) for line in listed.output.splitlines()) <= 80


def test_value_modification_labels_become_variants_that_blind_reanswers_validate(workspace: Workspace) -> None:
    """Without Label Studio: labels recorded directly go the same way (an unanswerable one makes
    no variant; a re-answer by the author does not count; a disagreement goes to a person)."""
    from tqaforge.annotation.adjudication import adjudication_queue, resolve
    from tqaforge.annotation.robustness import MODIFICATION_REVIEW, settle_human_variants
    from tqaforge.variants.human import store_shortened_table

    assert not import_paths(workspace, [SAMPLE / "tat_nonfactoid_dev_sample.jsonl"]).failed
    with workspace.session() as s:
        q1, q2 = [q.id for q in s.exec(select(Question).order_by(Question.id)).all()[:2]]
        short1 = store_shortened_table(s, q1, [[1, 1], [2, 1]])
        short2 = store_shortened_table(s, q2, [[0, 1]])
        table = Table.from_dict(short1.table)  # type: ignore[arg-type]
        old = table.rows[1][1]
        label = {
            "answer_changes": {"edits": [{"row": 1, "col": 1, "old": old, "new": old + "9"}], "answers": ["77"]},
            "answer_same": {"edits": [{"row": 0, "col": 1, "old": table.rows[0][1], "new": table.rows[0][1] + "x"}], "answers": None},
        }
        record_annotation(s, kind="value_modification", target_type="variant", target_id=short1.id, annotator="ana", label=label)
        record_annotation(s, kind="value_modification", target_type="variant", target_id=short2.id, annotator="ben",
                          label={"unanswerable": True})
        gold = list(short1.answers or [])
    first = settle_human_variants(workspace)
    assert (first.labels, first.variants_new, first.unanswerable, first.waiting) == (2, 2, 1, 2)
    made = {v.perturbation: v for v in _variants(workspace, "value_change_answer_changes") + _variants(workspace, "value_change_answer_same")}
    assert made["value_change_answer_changes"].answers == ["77"] and made["value_change_answer_same"].answers == gold
    assert all(v.status == VariantStatus.PENDING_REVIEW and v.created_by == "ana" for v in made.values())

    with workspace.session() as s:
        for who, changed, same in (("ana", "77", gold), ("ben", "77", gold), ("cy", "78", gold)):
            record_annotation(s, kind="blind_reanswer", target_type="variant", target_id=made["value_change_answer_changes"].id,
                              annotator=who, label={"answers": [changed]})
            record_annotation(s, kind="blind_reanswer", target_type="variant", target_id=made["value_change_answer_same"].id,
                              annotator=who, label={"answers": same})
    second = settle_human_variants(workspace)
    # ana is the author: her answers are not re-answers. ben and cy agree on "stays the same";
    # cy disagrees on "changes": a person decides.
    assert (second.validated, second.to_adjudicate, second.variants_new) == (1, 1, 0)
    [item] = adjudication_queue(workspace, kind=MODIFICATION_REVIEW)
    assert item.target_id == made["value_change_answer_changes"].id
    resolve(workspace, item.task_id, {"decision": "reject"}, by="lead")
    with workspace.session() as s:
        statuses = {v.perturbation: v.status for v in s.exec(select(Variant).where(Variant.id.in_([v.id for v in made.values()]))).all()}  # type: ignore[attr-defined]
    assert statuses == {"value_change_answer_changes": VariantStatus.REJECTED, "value_change_answer_same": VariantStatus.VALIDATED}
    third = settle_human_variants(workspace)
    assert (third.validated, third.to_adjudicate, third.variants_new) == (0, 0, 0)

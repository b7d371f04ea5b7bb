"""People make the robustness variants, end to end against the real Label Studio fixture, three
real annotators through the API (FREB-TQA 3.4-3.5, A.2):

relevant cells -> adjudicated set -> shortened table -> value modifications (both kinds; a bad
edit refused and sent back) -> blind re-answers (never by the author) -> validated variants with
their new gold, or adjudication; the agreement report covers each step; the release holds the
variants, verifies, and scores a model that ignores the edits (Emd -1, VP 1 where the answer changes)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from labelstudio_helpers import annotate, choice, new_email, signup, text
from sqlmodel import select

from tqaforge.annotation.adjudication import adjudicate, adjudication_queue, resolve
from tqaforge.annotation.labelstudio.client import client_settings
from tqaforge.annotation.labelstudio.sync import PushOptions, pull, push
from tqaforge.annotation.robustness import MODIFICATION_REVIEW, settle_human_variants
from tqaforge.annotation.workflows import Settings, agreement_report
from tqaforge.evaluate.harness import EvaluateOptions, evaluate
from tqaforge.ids import labelstudio_annotator
from tqaforge.ingest import import_paths
from tqaforge.release.build import ReleaseOptions, build_release
from tqaforge.release.verify import verify_release
from tqaforge.schemas.enums import Origin, QuestionType, VariantStatus
from tqaforge.schemas.records import Annotation, AnnotationTask, LabelStudioTaskCopy, Question, Variant
from tqaforge.store import Workspace
from tqaforge.tables.edits import parse_grid, to_grid
from tqaforge.tables.table import Table
from tqaforge.variants.human import SHORTENED, VALUE_PERTURBATIONS, variant_edits

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample" / "tat_nonfactoid_dev_sample.jsonl"


def _reasoning_questions(ws: Workspace, n: int = 2) -> list[str]:
    """The sample's questions, n of them reasoning questions without relevant cells (pending)."""
    assert not import_paths(ws, [SAMPLE]).failed
    with ws.session() as s:
        questions = s.exec(select(Question).order_by(Question.id)).all()
        for i, q in enumerate(questions):
            q.question_type = QuestionType.REASONING if i < n else QuestionType.EXTRACTION
            if i < n:
                q.relevant_cells = None
            s.add(q)
        return [q.id for q in questions[:n]]


def _copies(ws: Workspace, kind: str) -> list[LabelStudioTaskCopy]:
    with ws.session() as s:
        return list(s.exec(select(LabelStudioTaskCopy).where(LabelStudioTaskCopy.kind == kind).order_by(LabelStudioTaskCopy.id)).all())


def _target(ws: Workspace, copy: LabelStudioTaskCopy) -> AnnotationTask:
    with ws.session() as s:
        task = s.get(AnnotationTask, copy.task_id)
    assert task is not None
    return task


def _task(url: str, token: str, ls_task_id: int) -> dict[str, Any]:
    with httpx.Client(base_url=url, headers={"Authorization": f"Token {token}"}) as c:
        return c.get(f"/api/tasks/{ls_task_id}/").raise_for_status().json()


def _edited(grid: str, cells: list[tuple[int, int]], suffix: str) -> str:
    """The grid with each (row, col) cell's value changed (``suffix`` appended)."""
    header, rows = parse_grid(grid)
    for r, c in cells:
        rows[r][c] = (rows[r][c] or "0") + suffix
    return to_grid(Table.build(header, rows))


def _value_cells(table: Table) -> list[tuple[int, int]]:
    """Two data cells of the shortened table outside the label column, to edit."""
    cells = [(r, c) for r in range(table.n_rows) for c in range(1, table.n_cols) if table.rows[r][c].strip()]
    assert len(cells) >= 2, table
    return cells


def test_people_make_validated_variants_end_to_end(label_studio, sqlite_workspace: Workspace) -> None:
    # SQLite only, to keep the suite within its time: the records it writes are the same on
    # PostgreSQL, where test_human_variants.py runs the same steps without Label Studio.
    ws = sqlite_workspace
    url, admin = label_studio.url, label_studio.token
    settings = client_settings(url, admin)
    question_ids = _reasoning_questions(ws)
    people = [new_email(n) for n in ("rc-ana", "rc-ben", "rc-cy")]
    tokens = {who: signup(url, admin, who)[1] for who in people}

    # 1. Relevant cells: two annotators per question, every cell offered by its id.
    cells = push(ws, "relevant_cells", settings, people, PushOptions(overlap=2))
    assert (cells.pending, cells.copies_created) == (2, 4)
    copies = _copies(ws, "relevant_cells")
    data = _task(url, admin, copies[0].ls_task_id)["data"]
    assert "table_html" not in data and data["feedback"] == ""  # the table is the cells themselves
    assert data["cell_choices"][0]["value"] == "h0" and "r0c1" in [c["value"] for c in data["cell_choices"]]
    marked: dict[str, list[str]] = {}
    for copy in copies:
        task = _target(ws, copy)
        # Everyone marks r1c1 and r2c1; the first annotator of the second question adds r2c2.
        ids = ["r1c1", "r2c1"]
        if task.target_id == question_ids[1] and task.target_id not in marked:
            ids = ids + ["r2c2"]
        marked.setdefault(task.target_id, ids)
        annotate(url, tokens[copy.annotator], copy.ls_task_id,
                 [{"from_name": "cells", "to_name": "question", "type": "choices", "value": {"choices": ids}}])
    pulled = pull(ws, settings, kinds=["relevant_cells"])
    assert (pulled.recorded, pulled.problems) == (4, [])
    run = adjudicate(ws, kinds=["relevant_cells"])
    assert run["relevant_cells"].open == 0 and run["relevant_cells"].unanimous == 1

    # 2. The final set (cell by cell) is each question's relevant cells and shortened table.
    with ws.session() as s:
        final = {qid: s.get(Question, qid).relevant_cells for qid in question_ids}  # type: ignore[union-attr]
        shortened = {v.question_id: v for v in s.exec(select(Variant).where(Variant.perturbation == SHORTENED)).all()}
    assert final == {question_ids[0]: [[1, 1], [2, 1]], question_ids[1]: [[1, 1], [2, 1]]}
    assert set(shortened) == set(question_ids)
    assert all(v.status == VariantStatus.VALIDATED and v.origin == Origin.HUMAN and v.answers for v in shortened.values())

    # Relevant-cell validity, as FREB-TQA checked LLM-made cells: both say valid but one.
    validity = push(ws, "relevant_cell_validity", settings, people[:2], PushOptions(overlap=2))
    assert validity.copies_created >= 4
    for i, copy in enumerate(_copies(ws, "relevant_cell_validity")):
        annotate(url, tokens[copy.annotator], copy.ls_task_id, [choice("decision", "question", "invalid" if i == 0 else "valid")])
    assert pull(ws, settings, kinds=["relevant_cell_validity"]).problems == []

    # 3. Value modifications on the shortened tables, one author each.
    mods = push(ws, "value_modification", settings, people, PushOptions(overlap=1))
    assert (mods.pending, mods.copies_created) == (2, 2)
    mod_copies = _copies(ws, "value_modification")
    authors = {}
    first = True
    for copy in mod_copies:
        data = _task(url, admin, copy.ls_task_id)["data"]
        with ws.session() as s:
            variant = s.get(Variant, _target(ws, copy).target_id)
        assert variant is not None and data["grid_change"] == to_grid(Table.from_dict(variant.table))  # type: ignore[arg-type]
        assert data["feedback"] == "" and "answer_text" in data
        authors[variant.id] = copy.annotator
        editable = _value_cells(Table.from_dict(variant.table))  # type: ignore[arg-type]
        if first:  # a bad first try: three cells changed; it comes back with the reason
            bad = _edited(data["grid_change"], editable[:3] if len(editable) >= 3 else editable + editable[:1], "9")
            annotate(url, tokens[copy.annotator], copy.ls_task_id, [
                text("changed_table", "question", bad), text("changed_answer", "question", "12345"),
                text("same_table", "question", _edited(data["grid_same"], editable[:1], "0")),
            ])
            refused = pull(ws, settings, kinds=["value_modification"])
            assert refused.recorded == 0 and refused.sent_back == 1
            assert re.search(r"(3 cells changed|change at most 2|r\dc\d held)", refused.problems[0]), refused.problems
            back = _task(url, admin, copy.ls_task_id)
            assert back["data"]["feedback"].startswith("Sent back: ") and back["data"]["grid_change"] == bad
            assert back["total_annotations"] == 0  # the refused annotation is gone: the task is open again
            first = False
        annotate(url, tokens[copy.annotator], copy.ls_task_id, [
            text("changed_table", "question", _edited(data["grid_change"], editable[:1], "7")),
            text("changed_answer", "question", "12345"),
            text("same_table", "question", _edited(data["grid_same"], editable[1:2], "0")),
        ])
    good = pull(ws, settings, kinds=["value_modification"])
    assert good.problems == []
    assert (good.recorded, good.sent_back) == (2, 0)
    with ws.session() as s:
        labels = s.exec(select(Annotation).where(Annotation.kind == "value_modification")).all()
    assert all(len(a.label["answer_changes"]["edits"]) == 1 and a.label["answer_changes"]["answers"] == ["12345"] for a in labels)
    assert all({"row", "col", "old", "new"} == set(a.label["answer_same"]["edits"][0]) for a in labels)

    settled = settle_human_variants(ws)
    assert (settled.labels, settled.variants_new, settled.waiting, settled.validated) == (2, 4, 4, 0)

    # 4. Blind re-answers by the two who did not make the modification.
    reanswers = push(ws, "blind_reanswer", settings, people, PushOptions(overlap=2))
    assert (reanswers.pending, reanswers.copies_created) == (4, 8)
    with ws.session() as s:
        modified = {v.id: v for v in s.exec(select(Variant).where(Variant.perturbation.in_(VALUE_PERTURBATIONS))).all()}  # type: ignore[attr-defined]
    re_copies = [(c, _target(ws, c).target_id) for c in _copies(ws, "blind_reanswer")]
    for copy, vid in re_copies:
        author = modified[vid].created_by
        assert labelstudio_annotator(copy.annotator) != author  # never the author
        task_data = _task(url, admin, copy.ls_task_id)["data"]
        assert "12345" not in str(task_data)  # blind: the author's answer is not shown
    wrong = sorted(vid for vid in modified if modified[vid].perturbation == "value_change_answer_changes")[0]
    disagreeing = None
    for copy, vid in re_copies:
        gold = ", ".join(modified[vid].answers or [])
        given = gold
        if vid == wrong and disagreeing is None:
            given, disagreeing = "999999", copy.annotator
        annotate(url, tokens[copy.annotator], copy.ls_task_id, [text("answer", "question", given)])
    assert pull(ws, settings, kinds=["blind_reanswer"]).recorded == 8

    done = settle_human_variants(ws)
    assert (done.validated, done.to_adjudicate, done.waiting) == (3, 1, 0)
    queue = adjudication_queue(ws, kind=MODIFICATION_REVIEW)
    assert len(queue) == 1 and queue[0].target_id == wrong
    resolve(ws, queue[0].task_id, {"decision": "accept"}, by="lead")
    with ws.session() as s:
        final_variants = s.exec(select(Variant).where(Variant.perturbation.in_(VALUE_PERTURBATIONS))).all()  # type: ignore[attr-defined]
    assert {v.status for v in final_variants} == {VariantStatus.VALIDATED}
    changed = [v for v in final_variants if v.perturbation == "value_change_answer_changes"]
    assert all(v.answers == ["12345"] and len(variant_edits(v)) == 1 for v in changed)  # the new gold, the one edit
    assert settle_human_variants(ws).variants_new == 0  # repeated: nothing new

    # 5. The agreement report covers each step.
    report = agreement_report(ws, settings=Settings(n_boot=50))
    assert "masi_alpha" in report.kinds["relevant_cells"].overall
    validity_stats = report.kinds["relevant_cell_validity"].overall
    assert {"percent_agreement", "fleiss_kappa"} <= set(validity_stats)
    accuracy = report.kinds["blind_reanswer"]
    assert accuracy.overall["accuracy"].value == pytest.approx(7 / 8)
    assert set(accuracy.per_annotator) == {labelstudio_annotator(c.annotator) for c, _ in re_copies}
    assert accuracy.per_annotator[labelstudio_annotator(disagreeing)].value < 1.0  # type: ignore[arg-type]
    assert "blind re-answering checks them" in report.skipped_kinds["value_modification"]

    # 6. The release freezes them, verifies, and a model that ignores the edits is scored on it.
    release = ws.root / "releases" / "rc-1.0.0"
    built = build_release(ws, ReleaseOptions(version="1.0.0", out=release, n_boot=50, accept_low_agreement="two questions only"))
    assert built.counts["values"] == 2 + 4  # two shortened tables, four value modifications
    manifest = json.loads((release / "manifest.json").read_text())
    assert {"relevant_cells", "blind_reanswer"} <= set(manifest["agreement"])
    assert verify_release(release).ok
    base = [json.loads(line) for line in (release / "data" / "base.jsonl").read_text().splitlines()]
    values = [json.loads(line) for line in (release / "data" / "values.jsonl").read_text().splitlines()]
    gold = {b["id"]: ", ".join(b["answer"]) for b in base}
    preds = [{"id": b["id"], "prediction": f"Final Answer: {gold[b['id']]}"} for b in base]
    preds += [{"id": v["id"], "prediction": f"Final Answer: {gold[v['item_id']]}"} for v in values]  # the old answer
    path = ws.root / "ignores-edits.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in preds))
    scored = evaluate(EvaluateOptions(release=release, predictions=path, plots=False, out=ws.root / "scores"))
    aspects = {b.perturbation: b for b in scored.robustness}
    assert (aspects["value_change_answer_changes"].n, aspects["value_change_answer_changes"].vp) == (2, 1.0)
    assert aspects["value_change_answer_changes"].emd == -1.0  # every changed answer missed
    assert (aspects["value_change_answer_same"].vp, aspects["value_change_answer_same"].emd) == (0.0, 0.0)

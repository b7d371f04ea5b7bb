"""Bad value modifications in Label Studio: each is refused with a message the annotator can act
on, the task goes back to them (reason and attempt in the task, their annotation removed), and
nothing else is lost: other labels stay, and a good edit afterwards is recorded."""

from __future__ import annotations

import httpx
import pytest
from labelstudio_helpers import annotate, new_email, signup, text
from sqlmodel import func, select
from test_labelstudio_robustness import SAMPLE

from tqaforge.annotation.labelstudio.client import client_settings
from tqaforge.annotation.labelstudio.sync import PushOptions, pull, push
from tqaforge.ingest import import_paths
from tqaforge.labels import record_annotation
from tqaforge.schemas.records import Annotation, AnnotationTask, LabelStudioTaskCopy, Question, Variant
from tqaforge.store import Workspace
from tqaforge.tables.edits import parse_grid, to_grid
from tqaforge.tables.table import Table
from tqaforge.variants.human import store_shortened_table


def _grid_with(grid: str, changes: dict[tuple[int, int], str], extra_row: bool = False) -> str:
    header, rows = parse_grid(grid)
    for (r, c), value in changes.items():
        rows[r][c] = value
    text_ = to_grid(Table.build(header, rows))
    return text_ + ("\n" + " | ".join(["extra"] * len(header)) if extra_row else "")


@pytest.mark.hostile
def test_bad_edits_are_sent_back_with_the_reason_and_nothing_else_is_lost(label_studio, sqlite_workspace: Workspace) -> None:
    ws = sqlite_workspace
    url, admin = label_studio.url, label_studio.token
    settings = client_settings(url, admin)
    assert not import_paths(ws, [SAMPLE]).failed
    with ws.session() as s:
        question = s.exec(select(Question).order_by(Question.id)).first()
        assert question is not None
        short = store_shortened_table(s, question.id, [[1, 1], [2, 1], [1, 2]])
        # Someone else's label elsewhere: it must survive every refusal.
        record_annotation(s, kind="question_typing", target_type="question", target_id=question.id, annotator="cli-ann", label={"type": "reasoning"})
        table = Table.from_dict(short.table)  # type: ignore[arg-type]
        gold = list(short.answers or [])
    assert gold and table.n_rows >= 2 and table.n_cols >= 3
    ana = new_email("vm-ana")
    token = signup(url, admin, ana)[1]
    assert push(ws, "value_modification", settings, [ana], PushOptions(overlap=1)).copies_created == 1
    with ws.session() as s:
        copy = s.exec(select(LabelStudioTaskCopy).where(LabelStudioTaskCopy.kind == "value_modification")).one()
    grid = to_grid(table)
    one = _grid_with(grid, {(0, 1): table.rows[0][1] + "1"})
    other = _grid_with(grid, {(1, 2): table.rows[1][2] + "5"})
    cases = {
        "a cell outside the shortened table": (
            _grid_with(grid, {}, extra_row=True), "NEW", other, f"row r{table.n_rows} and after are outside the shortened table"),
        "three cells": (
            _grid_with(grid, {(0, 1): "1", (1, 1): "2", (1, 2): "3"}), "NEW", other, "3 cells changed"),
        "a no-change edit whose answer changes": (one, "NEW", other, "differs from the old one"),
        "an empty edit": (grid, "NEW", other, "answer changes: no value was changed"),
    }
    for name, (changed, answer, same, message) in cases.items():
        result = [text("changed_table", "question", changed), text("changed_answer", "question", answer), text("same_table", "question", same)]
        if name == "a no-change edit whose answer changes":  # the author's own answer after "no change" is another one
            result.append(text("same_answer", "question", "a different answer"))
        annotate(url, token, copy.ls_task_id, result)
        pulled = pull(ws, settings, kinds=["value_modification"])
        assert (pulled.recorded, pulled.sent_back, len(pulled.problems)) == (0, 1, 1), (name, pulled.lines())
        assert message in pulled.problems[0], (name, pulled.problems)
        with httpx.Client(base_url=url, headers={"Authorization": f"Token {admin}"}) as c:
            back = c.get(f"/api/tasks/{copy.ls_task_id}/").raise_for_status().json()
        assert back["total_annotations"] == 0, name
        assert message in back["data"]["feedback"] and back["data"]["grid_change"] == changed, name
        assert back["data"]["tqaforge_task_id"] == copy.task_id  # our id travels on: nothing duplicated
        with ws.session() as s:
            assert s.exec(select(func.count()).select_from(Annotation).where(Annotation.kind == "value_modification")).one() == 0
            assert s.exec(select(func.count()).select_from(Annotation).where(Annotation.kind == "question_typing")).one() == 1

    # Fixed: a good edit is recorded, with its cells old -> new.
    annotate(url, token, copy.ls_task_id, [
        text("changed_table", "question", one), text("changed_answer", "question", "NEW"), text("same_table", "question", other),
    ])
    fixed = pull(ws, settings, kinds=["value_modification"])
    assert (fixed.recorded, fixed.sent_back, fixed.problems) == (1, 0, [])
    with ws.session() as s:
        label = s.exec(select(Annotation.label).where(Annotation.kind == "value_modification")).one()
        assert s.get(AnnotationTask, copy.task_id) is not None and s.get(Variant, short.id) is not None
    assert label["answer_changes"] == {"edits": [{"row": 0, "col": 1, "old": table.rows[0][1], "new": table.rows[0][1] + "1"}], "answers": ["NEW"]}
    assert label["answer_same"]["answers"] == gold

"""The robustness kinds in a real browser (headless Chromium, the session's Label Studio): an
annotator clicks the relevant cells of a question, and edits a value of its shortened table in
the value-modification screen; the next pulls have exactly those cells and that edit.
Screenshots of both screens (and of blind re-answering) for the README."""

from __future__ import annotations

from pathlib import Path

from browser import click_element, element, page_text, wait_until
from labelstudio_helpers import new_email, signup
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from sqlmodel import select
from test_labelstudio_browser import PASSWORD, annotations_of, api, browser, copies, login, screenshot, task_page, wait
from test_labelstudio_browser_cells import click_cell
from test_labelstudio_robustness import _reasoning_questions

from tqaforge.annotation.adjudication import resolve
from tqaforge.annotation.labelstudio.client import client_settings
from tqaforge.annotation.labelstudio.sync import PushOptions, pull, push
from tqaforge.annotation.robustness import settle_human_variants
from tqaforge.schemas.records import Annotation, Question, Variant
from tqaforge.tables.edits import parse_grid, to_grid
from tqaforge.tables.table import Table
from tqaforge.variants.human import SHORTENED


def _screen_ready(driver, needle: str) -> bool:
    return needle in page_text(driver) and bool(driver.find_elements(By.CSS_SELECTOR, ".lsf-choices input"))


def test_annotator_marks_cells_and_modifies_a_value_in_the_browser(label_studio, sqlite_workspace, chromium, tmp_path: Path) -> None:
    ws = sqlite_workspace
    url, admin = label_studio.url, label_studio.token
    settings = client_settings(url, admin)
    [question_id] = _reasoning_questions(ws, n=1)
    with ws.session() as s:
        question = s.get(Question, question_id)
        assert question is not None
        question_text = question.text
    ana = new_email("br-ana")
    signup(url, admin, ana, PASSWORD)
    assert push(ws, "relevant_cells", settings, [ana], PushOptions(overlap=1)).copies_created == 1
    cells_copy = copies(ws)[("relevant_cells", ana)]

    with browser(chromium, tmp_path / "ana") as a:
        login(a, url, ana, then=task_page(cells_copy.ls_project_id, cells_copy.ls_task_id))
        wait(a).until(lambda d: _screen_ready(d, question_text))
        for cell in ("r1c1", "r2c1"):  # clicked in the table (the README's screenshot: test_labelstudio_browser_cells.py)
            click_cell(a, cell)
        click_element(a, By.CSS_SELECTOR, "[data-testid=bottombar-submit-button]", "Submit")
        wait(a).until(lambda _: annotations_of(url, admin, cells_copy.ls_task_id))
    pulled = pull(ws, settings, kinds=["relevant_cells"])
    assert (pulled.recorded, pulled.problems) == (1, [])
    with ws.session() as s:
        label = s.exec(select(Annotation).where(Annotation.kind == "relevant_cells")).one()
    assert label.label == {"cells": [[1, 1], [2, 1]]}
    # One annotator: a person makes it final (as the adjudication queue would), which shortens the table.
    resolve(ws, label.task_id, label.label, by="lead")
    with ws.session() as s:
        short = s.exec(select(Variant).where(Variant.perturbation == SHORTENED, Variant.question_id == question_id)).one()
    table = Table.from_dict(short.table)  # type: ignore[arg-type]

    assert push(ws, "value_modification", settings, [ana], PushOptions(overlap=1)).copies_created == 1
    mod_copy = copies(ws)[("value_modification", ana)]
    old = table.rows[1][1]
    header, rows = parse_grid(to_grid(table))
    rows[1][1] = "999"
    changed_grid = to_grid(Table.build(header, rows))
    rows[1][1], rows[2][1] = old, (table.rows[2][1] or "0") + "0"
    same_grid = to_grid(Table.build(header, rows))
    with browser(chromium, tmp_path / "ana2") as a:
        login(a, url, ana, then=task_page(mod_copy.ls_project_id, mod_copy.ls_task_id))
        wait(a).until(lambda d: _screen_ready(d, question_text) and d.find_elements(By.NAME, "same_answer"))
        screenshot(a, tmp_path, "labelstudio-value_modification")
        # Each table box starts with the shortened table; the annotator edits it in place and adds
        # it (Shift+Enter, as the box says), then types the new answer (Enter adds it).
        for name, grid in (("changed_table", changed_grid), ("same_table", same_grid)):
            wait_until(a, lambda d, name=name: any(b.get_attribute("value") == to_grid(table) for b in d.find_elements(By.NAME, name)),
                       f"the box {name} to hold the shortened table")
            box = element(a, By.NAME, name, f"the box {name}")
            box.click()
            box.send_keys(Keys.CONTROL, "a")
            box.send_keys(Keys.DELETE)
            box.send_keys(grid)
            box.send_keys(Keys.SHIFT, Keys.ENTER)
        answer = element(a, By.NAME, "changed_answer", "the answer box")
        answer.click()
        answer.send_keys("42", Keys.ENTER)
        # Added, each box turns into the text it holds (editable again with its pencil).
        wait(a).until(lambda d: not d.find_elements(By.NAME, "changed_table") and not d.find_elements(By.NAME, "same_table"))
        click_element(a, By.CSS_SELECTOR, "[data-testid=bottombar-submit-button]", "Submit")
        wait(a).until(lambda _: annotations_of(url, admin, mod_copy.ls_task_id))
    pulled = pull(ws, settings, kinds=["value_modification"])
    assert (pulled.recorded, pulled.problems) == (1, []), pulled.problems
    with ws.session() as s:
        edit = s.exec(select(Annotation).where(Annotation.kind == "value_modification")).one()
    assert edit.label["answer_changes"] == {"edits": [{"row": 1, "col": 1, "old": old, "new": "999"}], "answers": ["42"]}
    assert [(e["row"], e["col"]) for e in edit.label["answer_same"]["edits"]] == [(2, 1)]

    # Blind re-answering, by someone else: the modified table and the question, not the author's answer.
    assert settle_human_variants(ws).variants_new == 2
    ben = new_email("br-ben")
    signup(url, admin, ben, PASSWORD)
    assert push(ws, "blind_reanswer", settings, [ana, ben], PushOptions(overlap=1)).copies_created == 2
    held = copies(ws)
    assert ("blind_reanswer", ana) not in held  # the author never re-answers their own edit
    reanswer = held[("blind_reanswer", ben)]
    with api(url, admin) as client:  # blind: the task holds the table and the question, no answer
        data = client.get(f"/api/tasks/{reanswer.ls_task_id}/").json()["data"]
        assert set(data) == {"table_html", "question", "tqaforge_task_id", "feedback"} and data["feedback"] == ""
    with browser(chromium, tmp_path / "ben") as b:
        login(b, url, ben, then=task_page(reanswer.ls_project_id, reanswer.ls_task_id))
        wait(b).until(lambda d: question_text in page_text(d) and d.find_elements(By.NAME, "answer"))
        assert "Answer on this table" not in page_text(b)
        screenshot(b, tmp_path, "labelstudio-blind_reanswer")

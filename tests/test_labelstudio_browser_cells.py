"""Relevant cells marked by clicking the table's cells (headless Chromium, the session's real
Label Studio): the cells are laid out as the table (each cell under its column name, beside its
row), a click marks a cell, a second click unmarks it, and the pull holds exactly the ids of the
cells left marked, as FREB-TQA's ``[row, col]`` pairs. The screenshot for the README.
Hostile cell text is in ``test_hostile_labelstudio_cells.py``."""

from __future__ import annotations

from pathlib import Path

from browser import click_element, element, wait_for_text
from conftest import REPO
from labelstudio_helpers import annotate, new_email, signup
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from sqlmodel import select
from test_labelstudio_browser import PASSWORD, annotations_of, browser, copies, login, screenshot, task_page, wait

from tqaforge.annotation.labelstudio.client import client_settings
from tqaforge.annotation.labelstudio.sync import PushOptions, pull, push
from tqaforge.ingest import import_paths
from tqaforge.schemas.enums import Origin, QuestionStatus, QuestionType
from tqaforge.schemas.records import Annotation, AnnotationTask, Question, TableRecord
from tqaforge.store import Workspace
from tqaforge.tables.table import Table

#: A real table shipped with tqaforge (10 x 10: Brazilian football league, WikiTableQuestions).
FOOTBALL = REPO / "data" / "tables" / "wtq_football_league_table.csv"


def add_reasoning_question(ws: Workspace, path: Path, text: str) -> tuple[str, Table]:
    """Import the table at ``path`` and add an accepted reasoning question about it (pending for
    relevant cells); (question id, table)."""
    assert not import_paths(ws, [path]).failed
    with ws.session() as s:
        table = s.exec(select(TableRecord)).one()
        question = Question(
            id=Question.make_id(table.id, text, "Aggregation"), table_id=table.id, text=text, qtype="NumericalReasoning",
            subtype="Aggregation", status=QuestionStatus.ACCEPTED, origin=Origin.HUMAN, question_type=QuestionType.REASONING,
        )
        s.add(question)
        return question.id, table.to_table()


def cell(driver: WebDriver, cell_id: str) -> WebElement:
    """The clickable cell ``cell_id`` (``r1c2``, ``h0``) of the relevant-cells screen."""
    return driver.find_element(By.XPATH, f"//div[contains(@class,'tq-cells')]//label[.//input[@name='{cell_id}']]")


def cell_text(driver: WebDriver, cell_id: str) -> str:
    """A cell's text, found again if Label Studio re-rendered the grid meanwhile (a stale element)."""
    return str(wait(driver).until(lambda d: _text_or_none(d, cell_id)))


def _text_or_none(driver: WebDriver, cell_id: str) -> str | None:
    try:
        return cell(driver, cell_id).text or None
    except (StaleElementReferenceException, NoSuchElementException):
        return None


def in_grid(driver: WebDriver, selector: str) -> list[WebElement]:
    """The elements under the cell grid that match ``selector`` (the grid found again each time)."""
    return list(driver.find_elements(By.CSS_SELECTOR, ", ".join(f".tq-cells {part.strip()}" for part in selector.split(","))))


def marked(driver: WebDriver) -> set[str]:
    """The ids of the cells marked on the screen (one script, not a request per cell)."""
    return set(driver.execute_script("return [...document.querySelectorAll('.tq-cells input:checked')].map(i => i.name)"))


def click_cell(driver: WebDriver, cell_id: str) -> None:
    """Click a cell and wait until the screen shows it toggled."""
    before = cell_id in marked(driver)
    click_element(driver, By.XPATH, f"//div[contains(@class,'tq-cells')]//label[.//input[@name='{cell_id}']]", f"the cell {cell_id}")
    wait(driver).until(lambda d: (cell_id in marked(d)) != before)


def open_cells_screen(driver: WebDriver, url: str, email: str, project_id: int, ls_task_id: int, n_cells: int) -> None:
    """Log in and wait until the table's ``n_cells`` cells are on the screen."""
    login(driver, url, email, then=task_page(project_id, ls_task_id))
    wait(driver).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".tq-cells .lsf-choice__item")) == n_cells)


def test_annotator_clicks_three_cells_of_a_shipped_table_and_the_pull_holds_exactly_those(
    label_studio, sqlite_workspace: Workspace, chromium, tmp_path: Path,
) -> None:
    ws = sqlite_workspace
    url, admin = label_studio.url, label_studio.token
    settings = client_settings(url, admin)
    question_id, table = add_reasoning_question(ws, FOOTBALL, "How many points did the top three teams score together?")
    assert table.header[2] == "Points" and table.n_rows == 10
    ana = new_email("cells-ana")
    signup(url, admin, ana, PASSWORD)
    assert push(ws, "relevant_cells", settings, [ana], PushOptions(overlap=1)).copies_created == 1
    copy = copies(ws)[("relevant_cells", ana)]
    with browser(chromium, tmp_path / "ana") as a:
        open_cells_screen(a, url, ana, copy.ls_project_id, copy.ls_task_id, (table.n_rows + 1) * table.n_cols)
        # Each cell is where the table has it: under its column name, on its row's line (the
        # old screen listed tick boxes below the table, and fails this).
        spot = {i: cell(a, i).rect for i in ("h2", "h5", "r2c0", "r2c2", "r2c5", "r7c2")}
        assert abs(spot["r2c2"]["x"] - spot["h2"]["x"]) < 2 and abs(spot["r7c2"]["x"] - spot["h2"]["x"]) < 2
        assert abs(spot["r2c2"]["y"] - spot["r2c0"]["y"]) < 2 and abs(spot["r2c5"]["y"] - spot["r2c0"]["y"]) < 2
        assert spot["h2"]["y"] < spot["r2c2"]["y"] < spot["r7c2"]["y"] and spot["r2c0"]["x"] < spot["r2c2"]["x"] < spot["r2c5"]["x"]
        assert "Palestra" in cell_text(a, "r0c1") and "18" in cell_text(a, "r0c2")
        assert marked(a) == set()
        # The points of the top three, and one cell marked by mistake, then unmarked by a second click.
        for cell_id in ("r0c2", "r1c2", "r3c2", "r2c2"):
            click_cell(a, cell_id)
        unmarked_colour = cell(a, "r3c3").find_element(By.XPATH, "..").value_of_css_property("background-color")
        wait(a).until(lambda d: cell(d, "r3c2").find_element(By.XPATH, "..").value_of_css_property("background-color") != unmarked_colour)
        click_cell(a, "r3c2")
        assert marked(a) == {"r0c2", "r1c2", "r2c2"}
        ActionChains(a).move_to_element(element(a, By.XPATH, "//h1|//h2|//h3|//h4", "a heading")).perform()  # no cell under the mouse
        screenshot(a, tmp_path, "labelstudio-relevant_cells")
        click_element(a, By.CSS_SELECTOR, "[data-testid=bottombar-submit-button]", "Submit")
        wait(a).until(lambda _: annotations_of(url, admin, copy.ls_task_id))
    pulled = pull(ws, settings, kinds=["relevant_cells"])
    assert (pulled.recorded, pulled.problems, pulled.sent_back) == (1, [], 0), pulled.lines()
    with ws.session() as s:
        label = s.exec(select(Annotation).where(Annotation.kind == "relevant_cells")).one()
        task = s.get(AnnotationTask, label.task_id)
    assert task is not None and task.target_id == question_id
    assert label.label == {"cells": [[0, 2], [1, 2], [2, 2]]}


def test_a_refused_selection_comes_back_to_the_annotator_with_the_reason_on_the_screen(
    label_studio, sqlite_workspace: Workspace, chromium, tmp_path: Path,
) -> None:
    """A label the pull refuses (here a cell outside the table, sent through the API as a broken
    client would) is back in the annotator's queue: her screen shows why at the top, no cell is
    marked, and what she then clicks is recorded."""
    ws = sqlite_workspace
    url, admin = label_studio.url, label_studio.token
    settings = client_settings(url, admin)
    add_reasoning_question(ws, FOOTBALL, "Which team lost the most games?")
    ana = new_email("cells-back")
    _, token = signup(url, admin, ana, PASSWORD)
    assert push(ws, "relevant_cells", settings, [ana], PushOptions(overlap=1)).copies_created == 1
    copy = copies(ws)[("relevant_cells", ana)]
    annotate(url, token, copy.ls_task_id, [{"from_name": "cells", "to_name": "question", "type": "choices", "value": {"choices": ["r0c6", "r12c6"]}}])
    refused = pull(ws, settings, kinds=["relevant_cells"])
    assert (refused.recorded, refused.sent_back) == (0, 1), refused.lines()
    with browser(chromium, tmp_path / "ana") as a:
        open_cells_screen(a, url, ana, copy.ls_project_id, copy.ls_task_id, 11 * 10)
        wait_for_text(a, "Sent back: cell [12, 6] lies outside the table", "submit again")
        assert marked(a) == set()
        screenshot(a, tmp_path, "labelstudio-sent-back")
        click_cell(a, "h6")
        click_cell(a, "r9c6")
        click_element(a, By.CSS_SELECTOR, "[data-testid=bottombar-submit-button]", "Submit")
        wait(a).until(lambda _: annotations_of(url, admin, copy.ls_task_id))
    fixed = pull(ws, settings, kinds=["relevant_cells"])
    assert (fixed.recorded, fixed.sent_back, fixed.problems) == (1, 0, []), fixed.lines()
    with ws.session() as s:
        assert s.exec(select(Annotation.label).where(Annotation.kind == "relevant_cells")).one() == {"cells": [[-1, 6], [9, 6]]}

"""Hostile cell text on the relevant-cells screen: HTML, script, markup that would close the cell's
own tags, and a right-to-left override are shown as text in the annotator's browser (nothing runs,
no element is made), every cell stays clickable under its id, and the pull maps the clicks to
exactly those ids."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from browser import click_element
from labelstudio_helpers import new_email, signup
from selenium.webdriver.common.by import By
from sqlmodel import select
from test_labelstudio_browser import PASSWORD, annotations_of, browser, copies, wait
from test_labelstudio_browser_cells import add_reasoning_question, cell_text, click_cell, in_grid, marked, open_cells_screen

from tqaforge.annotation.labelstudio.client import client_settings
from tqaforge.annotation.labelstudio.registry import cell_choices
from tqaforge.annotation.labelstudio.sync import PushOptions, pull, push
from tqaforge.schemas.records import Annotation
from tqaforge.store import Workspace
from tqaforge.tables.table import Table

pytestmark = pytest.mark.hostile

IMG = '<img src=x onerror="document.title=\'pwned-img\'">'
SCRIPT = "<script>document.title='pwned-script'</script>"
CLOSE = '</span></label><b id="forged">forged</b><input name="r9c9" type="checkbox">'
RLO = "\u202e1.3"  # would show reversed, as "3.1"


def _hostile_table(tmp_path: Path) -> Path:
    path = tmp_path / "hostile.csv"
    with path.open("w", encoding="utf-8", newline="") as out:
        csv.writer(out).writerows([["team", IMG, "points"], [SCRIPT, "a", "1"], ["b", CLOSE, RLO], ["c", "&lt;b&gt;", "3"]])
    return path


def test_cell_choices_escape_every_text() -> None:
    table = Table.build(["team", IMG], [[SCRIPT, CLOSE], ["x\x1b[2J", RLO]])
    html = " ".join(c["html"] for c in cell_choices(table))
    for raw in (IMG, SCRIPT, CLOSE, "\x1b", "\u202e"):
        assert raw not in html
    assert "&lt;script&gt;" in html and "&lt;img src=x onerror=&quot;" in html
    assert [c["value"] for c in cell_choices(table)] == ["h0", "h1", "r0c0", "r0c1", "r1c0", "r1c1"]


def test_hostile_cells_show_as_text_and_map_to_their_ids(label_studio, sqlite_workspace: Workspace, chromium, tmp_path: Path) -> None:
    ws = sqlite_workspace
    url, admin = label_studio.url, label_studio.token
    settings = client_settings(url, admin)
    _, table = add_reasoning_question(ws, _hostile_table(tmp_path), "Which team has the most points?")
    assert table.header[1] == IMG and table.rows[0][0] == SCRIPT and table.rows[1][1] == CLOSE
    ana = new_email("cells-hostile")
    signup(url, admin, ana, PASSWORD)
    assert push(ws, "relevant_cells", settings, [ana], PushOptions(overlap=1)).copies_created == 1
    copy = copies(ws)[("relevant_cells", ana)]
    with browser(chromium, tmp_path / "ana") as a:
        open_cells_screen(a, url, ana, copy.ls_project_id, copy.ls_task_id, (table.n_rows + 1) * table.n_cols)
        # Shown as text: the characters themselves, no element made from them, nothing run. (Each
        # read finds its element again: Label Studio may re-render the grid after it loads.)
        assert IMG in cell_text(a, "h1") and SCRIPT in cell_text(a, "r0c0") and "forged" in cell_text(a, "r1c1")
        assert "&lt;b&gt;" in cell_text(a, "r2c1")
        assert "\\u202e1.3" in cell_text(a, "r1c2")  # the override made visible, not obeyed
        assert not in_grid(a, "img, script, b, #forged, input[name=r9c9]")
        assert "pwned" not in a.title
        # Control: the same screen does render markup that is not escaped (the cell ids' spans).
        assert len(in_grid(a, "span.tq-id")) == (table.n_rows + 1) * table.n_cols
        for cell_id in ("h1", "r0c0", "r1c1", "r1c2"):
            click_cell(a, cell_id)
        click_cell(a, "r0c0")  # unmarked again
        assert marked(a) == {"h1", "r1c1", "r1c2"}
        assert "pwned" not in a.title
        click_element(a, By.CSS_SELECTOR, "[data-testid=bottombar-submit-button]", "Submit")
        wait(a).until(lambda _: annotations_of(url, admin, copy.ls_task_id))
    pulled = pull(ws, settings, kinds=["relevant_cells"])
    assert (pulled.recorded, pulled.problems) == (1, []), pulled.lines()
    with ws.session() as s:
        label = s.exec(select(Annotation.label).where(Annotation.kind == "relevant_cells")).one()
    assert label == {"cells": [[-1, 1], [1, 1], [1, 2]]}

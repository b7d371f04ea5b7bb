"""Label Studio in a real browser (headless Chromium, the session's real server): an annotator
logs in, reviews a question by clicking, submits, and `pull` records exactly that label; what a
second annotator can see (blindness); a screenshot of each kind's labelling screen.

What these tests show about blindness in the community edition of Label Studio (1.23.2):

- it has no per-project permissions: every member of the organisation sees every project in the
  projects list and can open any task of it;
- a task's page shows every annotation of the task (a tab per annotator, the chosen values
  filled in), so in a shared project the second annotator sees the first one's label;
- tqaforge keeps labels blind by giving each annotator their own copy of a task in their own
  project (``tqaforge · KIND · EMAIL``): there the copy has no annotation but one's own.
  It is a convention, not a lock: B can still open A's project and see A's label there, which is
  why ``pull`` leaves out a label made in someone else's project;
- any member can even change another's annotation (the task page offers Update): Label Studio
  keeps ``completed_by`` (the author) and sets ``updated_by`` to whoever changed it.

Screenshots go to ``tmp_path``; with ``TQAFORGE_SAVE_SCREENSHOTS=1`` they are also copied to
``docs/screenshots/`` (the committed ones).
"""

from __future__ import annotations

import os
import shutil
import uuid
import xml.etree.ElementTree as ET
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import quote

import httpx
import pytest
from browser import click_element, element, wait_for_text, wait_until, waiter
from conftest import REPO, start_chrome
from labelstudio_helpers import annotate, build_workspace, choice, new_email, signup
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait
from sqlmodel import select

from tqaforge.annotation.labelstudio.client import client_settings
from tqaforge.annotation.labelstudio.registry import LS_KINDS
from tqaforge.annotation.labelstudio.sync import PushOptions, pull, push
from tqaforge.ids import labelstudio_annotator
from tqaforge.schemas.enums import QuestionType
from tqaforge.schemas.records import Annotation, AnnotationTask, Answer, LabelStudioTaskCopy, Question, TableRecord

PASSWORD = "tqaforge-browser-pw-1"
SCREENSHOTS = REPO / "docs" / "screenshots"
SAVE_ENV = "TQAFORGE_SAVE_SCREENSHOTS"
#: Seconds any one page or server reply may take (the labelling screen loads in 2-3 s here).
WAIT = 45


# ---------------------------------------------------------------------------------------------
# The browser


@contextmanager
def browser(chromium: tuple[str, str], profile: Path) -> Iterator[WebDriver]:
    """A headless Chromium with its own profile (its own cookies: one person per browser), its
    window tall enough for the longest labelling screen (answer_verification)."""
    driver = start_chrome(chromium, profile, window="1400,1500")
    try:
        yield driver
    finally:
        driver.quit()


def wait(driver: WebDriver, timeout: float = WAIT) -> WebDriverWait:
    """The browser tests' one waiter (tests/browser.py), with Label Studio's timeout."""
    return waiter(driver, timeout)


def task_page(project_id: int, ls_task_id: int) -> str:
    """The path of one task of a project (the data manager with the task open)."""
    return f"/projects/{project_id}/data?task={ls_task_id}"


def login(driver: WebDriver, url: str, email: str, then: str, password: str = PASSWORD) -> None:
    """Log in through Label Studio's own login page, as a person would, landing on ``then`` (a
    path: the page a person was sent to, e.g. a task's link)."""
    driver.get(f"{url}/user/login/?next={quote(then, safe='')}")
    element(driver, By.ID, "email", "the login form").send_keys(email)
    element(driver, By.ID, "password", "the password field").send_keys(password)
    click_element(driver, By.CSS_SELECTOR, "#login-form button[type=submit]", "the login button")
    wait(driver).until(lambda d: "/user/login" not in d.current_url)


def _table_shown(driver: WebDriver) -> bool:
    """Whether the labelling screen is there: its choices, and the table inside the HyperText frame
    (or, for relevant cells, the table's cells, which are the choices)."""
    if not driver.find_elements(By.CSS_SELECTOR, ".lsf-choices input"):
        return False
    if driver.find_elements(By.CSS_SELECTOR, ".tq-cells .lsf-choice__item"):
        return True
    frames = driver.find_elements(By.CSS_SELECTOR, "iframe.lsf-richtext__iframe")
    if not frames:
        return False
    driver.switch_to.frame(frames[0])
    try:
        return bool(driver.find_elements(By.CSS_SELECTOR, "table td"))
    finally:
        driver.switch_to.default_content()


def open_task(driver: WebDriver, url: str | None, project_id: int, ls_task_id: int) -> None:
    """Open one task of a project (``url`` None: the browser is there already) and wait for its
    labelling screen."""
    if url is not None:
        driver.get(url + task_page(project_id, ls_task_id))
    wait(driver).until(_table_shown)


def project_links(driver: WebDriver, url: str | None, must_show: int) -> set[int]:
    """The ids of the projects the projects page lists, once ``must_show`` is among them (``url``
    None: the browser is on the projects page already)."""
    if url is not None:
        driver.get(f"{url}/projects/")
    wait(driver).until(lambda d: d.find_elements(By.CSS_SELECTOR, f"a[href='/projects/{must_show}/data']"))
    links = driver.execute_script(_PROJECT_LINKS)  # one read in the page: no element can go stale between two calls
    return {int(href.rstrip("/").split("/")[-2]) for href in links}


def click_choice(driver: WebDriver, value: str) -> None:
    """Click the choice whose value is ``value`` (Label Studio names each radio after its value)."""
    click_element(driver, By.XPATH, f"//label[contains(@class,'lsf-choice__checkbox')][.//input[@name='{value}']]", f"the choice {value!r}")


# Reads of the labelling screen made in the page, each in one script: Label Studio re-renders its
# annotation panel as it loads, so elements found by one WebDriver call can be stale by the next
# (a fast machine saw it: StaleElementReferenceException between find_elements and is_selected).
_PROJECT_LINKS = "return Array.from(document.querySelectorAll('a.lsf-projects-page__link'), a => a.href || '');"
_CHOSEN = "return Array.from(document.querySelectorAll('.lsf-choices input')).filter(i => i.checked).map(i => i.name || '');"
_SUBMITTED = ("return Array.from(document.querySelectorAll('.lsf-annotation-button_submitted'), t => {"
              " const img = t.querySelector('img[alt]');"
              " return [t.getAttribute('data-annotation-id') || '0', img ? img.alt.toLowerCase() : '']; });")
# Drawn: the choices and the bottom bar's Submit or Update button (the row of annotation buttons is
# not drawn in the "Label All Tasks" stream).
_PANEL = ("return document.querySelector('.lsf-choices input') !== null"
          " && document.querySelector('[data-testid^=bottombar-]') !== null;")


def chosen(driver: WebDriver) -> set[str]:
    """The values whose radio is checked on the screen (one read in the page)."""
    return set(driver.execute_script(_CHOSEN))


def submitted_tabs(driver: WebDriver) -> dict[int, str]:
    """The submitted annotations the task's page shows: {annotation id: its author's e-mail} (one
    read in the page)."""
    return {int(number): author for number, author in driver.execute_script(_SUBMITTED)}


def panel_shows(driver: WebDriver, choices: set[str], authors: list[str] | None = None, timeout: float = WAIT) -> dict[int, str]:
    """Wait until the task's annotation panel is drawn (its choices and its bottom bar: a read
    before that would find nothing whatever the task holds) and shows exactly ``choices`` checked
    and, when ``authors`` is given, submitted annotations by exactly those authors in that order;
    the submitted annotations the matching read saw."""
    last: dict[str, object] = {"drawn": False}  # what the last look saw, for the message of a timeout

    def shows(d: WebDriver) -> tuple[dict[int, str]] | None:  # a tuple: truthy even when no annotation
        if not d.execute_script(_PANEL):
            last.update(drawn=False)
            return None
        tabs, checked = submitted_tabs(d), chosen(d)
        last.update(drawn=True, checked=sorted(checked), submitted=tabs)
        if checked != choices or (authors is not None and list(tabs.values()) != authors):
            return None
        return (tabs,)
    what = f"the annotation panel with {sorted(choices)} checked" + ("" if authors is None else f" and submitted annotations by {authors}")
    try:
        return wait_until(driver, shows, what, timeout)[0]
    except TimeoutError as exc:
        raise TimeoutError(f"the last look saw {last}; {exc}") from None


def shows_hers(driver: WebDriver, tabs: dict[int, str], choices: set[str]) -> None:
    """Wait until the task's page shows exactly these submitted annotations and checked choices
    (the annotation panel renders after the task's text: a single read can come too early)."""
    assert panel_shows(driver, choices, authors=list(tabs.values())) == tabs


def screenshot(driver: WebDriver, tmp_path: Path, name: str, keep: bool = True) -> Path:
    """Save the screen to tmp_path (always) and to docs/screenshots (with TQAFORGE_SAVE_SCREENSHOTS=1,
    unless ``keep`` is False: a screen that only goes into a combined image)."""
    from PIL import Image

    path = tmp_path / f"{name}.png"
    assert driver.save_screenshot(str(path))
    with Image.open(path) as image:
        grey = image.convert("L")
        low, high = grey.getextrema()
        colours = len(grey.getcolors(256) or [])
    assert high - low > 100 and colours > 20, f"{name}.png looks blank ({colours} shades)"
    if keep and os.environ.get(SAVE_ENV) == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, SCREENSHOTS / path.name)
    return path


# ---------------------------------------------------------------------------------------------
# Label Studio through its API (as the admin, or as a user with their own token)


def api(url: str, token: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Token {token}"}, timeout=30)


def annotations_of(url: str, token: str, ls_task_id: int) -> list[dict[str, Any]]:
    with api(url, token) as client:
        return client.get(f"/api/tasks/{ls_task_id}/annotations/").raise_for_status().json()


def copies(ws) -> dict[tuple[str, str], LabelStudioTaskCopy]:
    """{(kind, annotator): their copy} (each test pushes one task per kind and annotator)."""
    with ws.session() as s:
        return {(c.kind, c.annotator): c for c in s.exec(select(LabelStudioTaskCopy)).all()}


def question_of(ws, copy: LabelStudioTaskCopy) -> Question:
    with ws.session() as s:
        task = s.get(AnnotationTask, copy.task_id)
        assert task is not None
        if task.target_type == "answer":
            answer = s.get(Answer, task.target_id)
            assert answer is not None
            question = s.get(Question, answer.question_id)
        else:
            question = s.get(Question, task.target_id)
        assert question is not None
        return question


# ---------------------------------------------------------------------------------------------
# The tests


def test_annotator_reviews_a_question_in_the_browser_and_pull_records_that_label(
    label_studio, sqlite_workspace, chromium, tmp_path
) -> None:
    ws = sqlite_workspace
    url, admin = label_studio.url, label_studio.token
    settings = client_settings(url, admin)
    build_workspace(ws, proposed=3)
    ana, ben = new_email("ana"), new_email("ben")
    ana_id, _ = signup(url, admin, ana, PASSWORD)
    _, ben_token = signup(url, admin, ben, PASSWORD)
    pushed = push(ws, "question_review", settings, [ana, ben], PushOptions(overlap=2, limit=1))
    assert (pushed.tasks_created, pushed.copies_created) == (1, 2)
    held = copies(ws)
    mine, bens = held[("question_review", ana)], held[("question_review", ben)]
    assert mine.task_id == bens.task_id and mine.ls_project_id != bens.ls_project_id
    question = question_of(ws, mine)

    # Ana: the login page, her project in the list, "Label All Tasks", two clicks, Submit.
    with browser(chromium, tmp_path / "ana") as a:
        login(a, url, ana, then="/projects/")
        assert mine.ls_project_id in project_links(a, None, must_show=mine.ls_project_id)
        click_element(a, By.CSS_SELECTOR, f"a[href='/projects/{mine.ls_project_id}/data']", "ana's project")
        click_element(a, By.XPATH, "//button[normalize-space()='Label All Tasks']", "Label All Tasks")
        wait(a).until(_table_shown)
        wait_for_text(a, question.text, "Category: NumericalReasoning / Aggregation")
        panel_shows(a, set(), authors=[])
        click_choice(a, "accept")
        click_choice(a, "yes")
        panel_shows(a, {"accept", "yes"})
        click_element(a, By.CSS_SELECTOR, "[data-testid=bottombar-submit-button]", "Submit")
        wait(a).until(lambda _: annotations_of(url, admin, mine.ls_task_id))
    [made] = annotations_of(url, admin, mine.ls_task_id)
    assert made["completed_by"] == ana_id and not made["was_cancelled"]

    pulled = pull(ws, settings)
    assert (pulled.recorded, pulled.changed, pulled.problems, pulled.by_kind) == (1, 0, [], {"question_review": 1})
    with ws.session() as s:
        recorded = s.exec(select(Annotation)).all()
    assert len(recorded) == 1
    label = recorded[0]
    assert label.label == {"decision": "accept", "subtype_ok": True}
    assert (label.kind, label.task_id) == ("question_review", mine.task_id)
    assert question_of(ws, mine).id == question.id  # the task is the review of the question shown
    assert label.annotator == labelstudio_annotator(ana) and label.source == "labelstudio"
    assert label.source_ref.startswith(f"ls:{made['id']}:")

    # Ben: his own copy of the same question shows no annotation; but nothing stops him seeing
    # Ana's project in the list, opening it, and seeing her label there.
    with browser(chromium, tmp_path / "ben") as b:
        login(b, url, ben, then="/projects/")
        listed = project_links(b, None, must_show=bens.ls_project_id)
        assert mine.ls_project_id in listed, "community Label Studio lists every project to every member"
        open_task(b, url, bens.ls_project_id, bens.ls_task_id)
        wait_for_text(b, question.text)
        panel_shows(b, set(), authors=[])
        assert b.find_elements(By.CSS_SELECTOR, ".lsf-annotation-button_draft")  # only his own, empty one
        open_task(b, url, mine.ls_project_id, mine.ls_task_id)
        shows_hers(b, {made["id"]: ana}, {"accept", "yes"})
        # The control for the blind checks (panel_shows with no author): on a task that holds a
        # label, the same read sees it and never reports an empty panel.
        with pytest.raises(TimeoutError, match="'drawn': True.*submitted annotations by"):
            panel_shows(b, set(), authors=[], timeout=3)
    with api(url, ben_token) as as_ben:  # the API agrees: his token lists and reads her project
        assert as_ben.get(f"/api/projects/{mine.ls_project_id}/").status_code == 200
    assert pull(ws, settings).recorded == 0  # looking changes nothing


def test_in_a_shared_project_the_second_annotator_sees_the_first_ones_label(
    label_studio, sqlite_workspace, chromium, tmp_path
) -> None:
    ws = sqlite_workspace
    url, admin = label_studio.url, label_studio.token
    ids = build_workspace(ws, proposed=1)
    spec = LS_KINDS["question_review"]
    assert spec.task_data is not None
    with ws.session() as s:
        data = spec.task_data(s, ids["questions"][0])
        question = s.get(Question, ids["questions"][0])
        assert question is not None and s.get(TableRecord, question.table_id) is not None
    ana, ben = new_email("ana"), new_email("ben")
    _, ana_token = signup(url, admin, ana, PASSWORD)
    signup(url, admin, ben, PASSWORD)

    # One project for both, as Label Studio is usually used: the admin makes it and imports the task.
    with api(url, admin) as client:
        project = client.post(
            "/api/projects/", json={"title": f"shared review {uuid.uuid4().hex[:6]}", "label_config": spec.config_text()}
        ).raise_for_status().json()
        client.post(f"/api/projects/{project['id']}/import", json=[{"data": {"feedback": "", **data}}]).raise_for_status()
        [task] = client.get("/api/tasks/", params={"project": project["id"]}).raise_for_status().json()["tasks"]
    made = annotate(url, ana_token, task["id"], [choice("decision", "question", "reject"), choice("subtype_right", "category", "no")])

    with browser(chromium, tmp_path / "ben") as b:
        login(b, url, ben, then=task_page(project["id"], task["id"]))  # the task's link, as sent to him
        open_task(b, None, project["id"], task["id"])
        wait_for_text(b, question.text)
        # Ben sees Ana's annotation: her tab (her e-mail), and her choices checked on his screen.
        shows_hers(b, {made["id"]: ana}, {"reject", "no"})
        screenshot(b, tmp_path, "labelstudio-shared-project-second-annotator")


def test_a_label_another_member_changed_in_an_annotators_project_is_not_pulled_as_theirs(
    label_studio, sqlite_workspace, chromium, tmp_path
) -> None:
    """Community Label Studio lets any member change anyone's annotation (the task page shows an
    Update button): it keeps ``completed_by`` (the author) and sets ``updated_by``. Such a label
    is neither blind nor the author's, so pull must not record it as the author's."""
    ws = sqlite_workspace
    url, admin = label_studio.url, label_studio.token
    settings = client_settings(url, admin)
    build_workspace(ws, proposed=1)
    ana, ben = new_email("ana"), new_email("ben")
    ana_id, ana_token = signup(url, admin, ana, PASSWORD)
    ben_id, _ = signup(url, admin, ben, PASSWORD)
    push(ws, "question_review", settings, [ana], PushOptions(overlap=1, limit=1))
    mine = copies(ws)[("question_review", ana)]
    made = annotate(url, ana_token, mine.ls_task_id, [choice("decision", "question", "accept"), choice("subtype_right", "category", "yes")])
    assert pull(ws, settings).recorded == 1

    with browser(chromium, tmp_path / "ben") as b:
        login(b, url, ben, then=task_page(mine.ls_project_id, mine.ls_task_id))
        open_task(b, None, mine.ls_project_id, mine.ls_task_id)
        shows_hers(b, {made["id"]: ana}, {"accept", "yes"})
        click_choice(b, "reject")
        click_element(b, By.CSS_SELECTOR, "[data-testid=bottombar-update-button]", "Update")
        wait(b).until(lambda _: annotations_of(url, admin, mine.ls_task_id)[0].get("updated_by") == ben_id)
    [changed] = annotations_of(url, admin, mine.ls_task_id)
    assert (changed["id"], changed["completed_by"], changed["updated_by"]) == (made["id"], ana_id, ben_id)
    assert {r["from_name"]: r["value"]["choices"] for r in changed["result"]} == {"decision": ["reject"], "subtype_right": ["yes"]}

    pulled = pull(ws, settings)
    with ws.session() as s:
        labels = [a.label for a in s.exec(select(Annotation).where(Annotation.annotator == labelstudio_annotator(ana)))]
    assert {"decision": "reject", "subtype_ok": True} not in labels  # Ben's edit is not recorded as Ana's
    assert {"decision": "accept", "subtype_ok": True} in labels  # and Ana's own label, pulled before, stays
    assert pulled.recorded == 0 and len(pulled.problems) == 1, pulled.problems


def test_labelling_screen_of_every_kind(label_studio, sqlite_workspace, chromium, tmp_path) -> None:
    ws = sqlite_workspace
    url, admin = label_studio.url, label_studio.token
    settings = client_settings(url, admin)
    ids = build_workspace(ws, proposed=2)
    with ws.session() as s:  # relevant_cell_validity waits for questions with relevant cells
        marked = s.get(Question, sorted(ids["questions"])[0])
        assert marked is not None
        marked.relevant_cells = [[0, 0], [1, 0]]
        s.add(marked)
        reasoning = s.get(Question, sorted(ids["questions"])[1])  # relevant_cells waits for reasoning questions
        assert reasoning is not None
        reasoning.question_type = QuestionType.REASONING
        s.add(reasoning)
    # The kinds on variants (value modification, blind re-answering) are shown by
    # test_labelstudio_browser_robustness.py, which makes their variants through the UI.
    kinds = [kind for kind, spec in LS_KINDS.items() if spec.supported and spec.target_type != "variant"]
    assert kinds == ["question_review", "answer_verification", "question_typing", "relevant_cell_validity", "relevant_cells"]
    ana = new_email("ana")
    signup(url, admin, ana, PASSWORD)
    for kind in kinds:
        assert push(ws, kind, settings, [ana], PushOptions(overlap=1, limit=1)).copies_created == 1, kind
    held = copies(ws)
    # The screen's title: the first Header of the kind's configuration (whatever it says today).
    shown = {kind: next(ET.fromstring(LS_KINDS[kind].config_text()).iter("Header")).get("value") for kind in kinds}

    with browser(chromium, tmp_path / "ana") as a:
        first = held[(kinds[0], ana)]
        login(a, url, ana, then=task_page(first.ls_project_id, first.ls_task_id))
        for kind in kinds:
            copy = held[(kind, ana)]
            open_task(a, None if copy is first else url, copy.ls_project_id, copy.ls_task_id)
            wait_for_text(a, shown[kind], question_of(ws, copy).text)
            panel_shows(a, set(), authors=[])
            if kind == "relevant_cells":  # the README's screen is a shipped table's: test_labelstudio_browser_cells.py
                continue
            path = screenshot(a, tmp_path, f"labelstudio-{kind}")
            assert path.stat().st_size > 20_000

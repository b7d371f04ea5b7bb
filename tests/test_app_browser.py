"""The app in headless Chromium, in real time (Streamlit needs its live connection): Overview,
Variants and Agreement render; a review decision and an adjudication made with clicks reach the
store; screenshots of each in the test's directory (the README's, one per page of the demo workspace, are
made by tests/app_screenshots.py)."""

from __future__ import annotations

import os
from pathlib import Path

from app_demo import stage_everything
from browser import chart_labels, click_button, read_element, running_app, wait_for_text
from conftest import start_chrome, wait_for
from test_labelstudio_browser import screenshot

from tqaforge import queries
from tqaforge.annotation.adjudication import adjudication_queue
from tqaforge.ingest import import_paths
from tqaforge.launch import APP
from tqaforge.people import register
from tqaforge.schemas.enums import QuestionStatus
from tqaforge.schemas.records import Question
from tqaforge.store import init_workspace


def test_researcher_walks_the_app_in_chromium(tmp_path: Path, chromium) -> None:
    ws = init_workspace(tmp_path / "ws", name="demo")
    ids = stage_everything(ws)
    register(ws, "researcher")  # the review page's default name: a known person (one person, one annotator)
    env = {**os.environ, "TQAFORGE_WORKSPACE": str(ws.root)}
    with running_app(env) as url:
        driver = start_chrome(chromium, tmp_path / "profile", window="1400,1800")
        try:
            driver.get(url)
            # Every text asserted is waited for: Streamlit draws a page's elements one after another.
            wait_for_text(driver, "Annotation progress per kind", "Pipeline funnel", "Releases", "Variants", "Agreement")
            # Every stage of the funnel chart is labelled, and its counts read as counts: a fixed
            # height once squeezed nine bars until Vega hid every other name, and the axis read
            # "1e+2", "1.2e+2" (both seen on the old chart with this same helper).
            labels, _ = chart_labels(driver, "records per stage")
            stages = [stage for stage, _ in queries.funnel(ws).stages]
            assert set(stages) <= set(labels), f"stage names not drawn: {sorted(set(stages) - set(labels))}"
            assert not [label for label in labels if "e+" in label], labels
            screenshot(driver, tmp_path, "app-overview", keep=False)

            driver.get(url + "variants")
            wait_for_text(driver, "as the model sees it", "blue: moved", "shuffle_rows (", "original", "perturbed")
            screenshot(driver, tmp_path, "app-variants", keep=False)

            driver.get(url + "review")
            wait_for_text(driver, "proposed questions")
            click_button(driver, "accept")
            wait_for_text(driver, "showing 1-2 of 2 proposed questions")
            with ws.session() as s:
                accepted = [q for q in ids["questions"] if s.get(Question, q).status == QuestionStatus.ACCEPTED]  # type: ignore[union-attr]
            assert len(accepted) == 1

            driver.get(url + "agreement")
            wait_for_text(driver, "Adjudication queue", "question_typing: 6 items, 2 annotators")
            # A bar chart's plot keeps its height: its title, axes and rotated subtype names come on
            # top (Streamlit's default sizing put all of them inside 220 px, leaving a thin strip).
            _, height = chart_labels(driver, "per annotator: majority_agreement")
            assert height >= 300, height
            before = adjudication_queue(ws).total
            screenshot(driver, tmp_path, "app-agreement", keep=False)
            click_button(driver, "decide")
            wait_for(lambda: adjudication_queue(ws).total == before - 1, 30, "the decision to reach the store")
            assert adjudication_queue(ws).total == before - 1
        finally:
            driver.quit()


def _first_view(url: str, chromium, profile: Path) -> tuple[str, str, int, bool]:
    """A deep link (the Variants page) opened first after the app started: the sidebar's text,
    the page's text, the width of the main column, and whether a "Deploy" button shows."""
    from selenium.webdriver.common.by import By

    driver = start_chrome(chromium, profile, window="1400,1200")
    try:
        driver.get(url + "variants")
        body = wait_for_text(driver, "perturbation")  # the page's own words, rendered
        sidebar = read_element(driver, '[data-testid="stSidebar"]', "the sidebar", lambda e: str(e.text))
        width = read_element(driver, '[data-testid="stMainBlockContainer"]', "the main column", lambda e: int(e.size["width"]))
        # The toolbar renders with the page (waited for above): its Deploy button is there or not by now.
        deploy = bool(driver.find_elements(By.CSS_SELECTOR, '[data-testid="stAppDeployButton"]'))
        return sidebar, body, width, deploy
    finally:
        driver.quit()


def test_a_deep_link_opened_first_after_a_start_shows_our_navigation_wide_and_no_deploy(tmp_path: Path, chromium) -> None:
    """Issue 29: after a restart, a page's URL opened first showed Streamlit's own sidebar of file
    names (lowercase, alphabetical), the narrow layout and a "Deploy" button. Control: the main
    script with a ``pages/`` folder beside it (as it was) and the developer toolbar shows all three
    to the same checks."""
    ws = init_workspace(tmp_path / "ws", name="demo")
    import_paths(ws, [Path(__file__).resolve().parents[1] / "data" / "tables"])
    env = {**os.environ, "TQAFORGE_WORKSPACE": str(ws.root)}
    with running_app(env) as url:
        sidebar, body, width, deploy = _first_view(url, chromium, tmp_path / "profile")
    assert "Taxonomy and seeds" in sidebar and "Overview" in sidebar, sidebar
    assert "taxonomy" not in sidebar.split("\n") and "overview" not in sidebar.split("\n"), sidebar  # no file names
    assert width > 900, width  # wide: the narrow layout is 736 px wide whatever the window
    assert not deploy and "Deploy" not in body

    old = tmp_path / "old"  # the layout of before: pages/ beside the main script
    old.mkdir()
    (old / "pages").symlink_to(APP.parents[1] / "pages")
    (old / "Home.py").write_text(f"import runpy\nrunpy.run_path({str(APP)!r}, run_name='__main__')\n", encoding="utf-8")

    def as_before(command: list[str]) -> list[str]:
        command = [str(old / "Home.py") if part == str(APP) else part for part in command]
        return [("developer" if part == "minimal" else part) for part in command]

    with running_app(env, as_before) as url:
        sidebar, body, width, deploy = _first_view(url, chromium, tmp_path / "profile-before")
    assert "taxonomy" in sidebar.split("\n") and "Taxonomy and seeds" not in sidebar, sidebar
    assert width < 900 and deploy, (width, deploy)

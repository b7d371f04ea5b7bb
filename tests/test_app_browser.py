"""The app in headless Chromium, in real time (Streamlit needs its live connection): Overview,
Variants and Agreement render; a review decision and an adjudication made with clicks reach the
store; screenshots of each (committed ones in docs/screenshots with TQAFORGE_SAVE_SCREENSHOTS=1)."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Mapping

from app_demo import stage_everything
from conftest import free_port, start_chrome, wait_for
from test_labelstudio_browser import screenshot

from tqaforge.annotation.adjudication import adjudication_queue
from tqaforge.people import register
from tqaforge.schemas.enums import QuestionStatus
from tqaforge.schemas.records import Question
from tqaforge.store import init_workspace

HOME = Path(__file__).resolve().parents[1] / "tqaforge" / "app" / "Home.py"


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=2).close()
        return True
    except OSError:
        return False


@contextmanager
def running_app(env: Mapping[str, str]) -> Iterator[str]:
    """The app (Home.py) served on a free loopback port with ``env``: yields its URL once it
    answers, and stops it after."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(HOME), "--server.address", "127.0.0.1", "--server.port", str(port),
         "--server.headless", "true", "--browser.gatherUsageStats", "false"],
        env=dict(env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}/"
        wait_for(lambda: _answers(url + "_stcore/health"), 60, "streamlit to start")
        yield url
    finally:
        server.terminate()
        server.wait(timeout=20)


def _wait_for(driver, *texts: str, timeout: float = 60) -> str:
    """The page's text once every one of ``texts`` is on it (the page streams in: each is waited for)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, timeout).until(lambda d: all(t in d.find_element(By.TAG_NAME, "body").text for t in texts))
    return str(driver.find_element(By.TAG_NAME, "body").text)


def _click(driver, label: str, timeout: float = 60) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    where = (By.XPATH, f"//button[.//p[normalize-space()='{label}']]")
    button = WebDriverWait(driver, timeout).until(ec.presence_of_element_located(where))
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", button)
    WebDriverWait(driver, timeout).until(ec.element_to_be_clickable(where)).click()


def test_researcher_walks_the_app_in_chromium(tmp_path: Path, chromium) -> None:
    ws = init_workspace(tmp_path / "ws", name="demo")
    ids = stage_everything(ws)
    register(ws, "researcher")  # the review page's default name: a known person (one person, one annotator)
    env = {**os.environ, "TQAFORGE_WORKSPACE": str(ws.root)}
    with running_app(env) as url:
        driver = start_chrome(chromium, tmp_path / "profile", window="1400,1800")
        try:
            driver.get(url)
            body = _wait_for(driver, "Annotation progress per kind", "Pipeline funnel", "Releases")
            assert "Pipeline funnel" in body and all(p in body for p in ("Variants", "Agreement", "Releases"))
            screenshot(driver, tmp_path, "app-overview")

            driver.get(url + "variants")
            body = _wait_for(driver, "as the model sees it", "blue: moved")
            assert "shuffle_rows (" in body and "original" in body and "perturbed" in body and "blue: moved" in body
            screenshot(driver, tmp_path, "app-variants")

            driver.get(url + "review")
            _wait_for(driver, "proposed questions")
            _click(driver, "accept")
            _wait_for(driver, "showing 1-2 of 2 proposed questions")
            with ws.session() as s:
                accepted = [q for q in ids["questions"] if s.get(Question, q).status == QuestionStatus.ACCEPTED]  # type: ignore[union-attr]
            assert len(accepted) == 1

            driver.get(url + "agreement")
            body = _wait_for(driver, "Adjudication queue", "question_typing: 6 items")
            assert "question_typing: 6 items, 2 annotators" in body
            before = adjudication_queue(ws).total
            screenshot(driver, tmp_path, "app-agreement")
            _click(driver, "decide")
            wait_for(lambda: adjudication_queue(ws).total == before - 1, 30, "the decision to reach the store")
            assert adjudication_queue(ws).total == before - 1
        finally:
            driver.quit()

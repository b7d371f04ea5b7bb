"""The app's login in headless Chromium (issue 29, item 4): the app started the remote way by the
real launcher (`tqaforge app --require-login`, on loopback so the test stays on this machine) shows
only the sign-in form, also on a deep link and with a forged session key in the URL; a wrong
password is refused; the right one shows the pages; Sign out returns to the form."""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from browser import answers, app_settled, click_button, page_text, type_keys, wait_for_elements, wait_for_text, wait_until
from conftest import free_port, start_chrome, wait_for
from test_labelstudio_browser import screenshot

from tqaforge.logins import LOGIN_ENV, add_user
from tqaforge.store import init_workspace

PASSWORD = "correct horse battery"
CANARY = "canaryws9b1"


@contextmanager
def launched_app(workspace: Path, *extra: str) -> Iterator[str]:
    """`tqaforge app -w WORKSPACE --port P *extra` (the launcher, not Streamlit directly), on a free
    loopback port: yields its URL once it answers, and stops it (SIGTERM: the launcher stops the app)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != LOGIN_ENV}  # the launcher alone decides
    proc = subprocess.Popen([sys.executable, "-m", "tqaforge", "app", "-w", str(workspace), "--port", str(port), *extra],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/"
        wait_for(lambda: answers(url + "_stcore/health") or proc.poll() is not None, 60, "the app to start")
        assert proc.poll() is None, f"the launcher exited with {proc.returncode}"
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _sign_in(driver, name: str, password: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    wait_for_elements(driver, "input[type=text], input[type=password]", "the sign-in form's two fields", count=2)
    for css, text in (("input[type=text]", name), ("input[type=password]", password)):
        # Select and delete what is there (clear() empties the DOM but not Streamlit's state).
        type_keys(driver, By.CSS_SELECTOR, css, f"the sign-in field {css}", [(Keys.CONTROL, "a"), (Keys.DELETE,), (text,)])
    click_button(driver, "Sign in")


def _holding(text: str, *wanted: str) -> str | None:
    return text if all(w in text for w in wanted) else None


def test_login_flow_in_chromium(tmp_path: Path, chromium) -> None:
    ws = init_workspace(tmp_path / "ws", name=CANARY)
    add_user(ws.root, "ada", PASSWORD)
    with launched_app(ws.root, "--require-login") as url:
        driver = start_chrome(chromium, tmp_path / "profile", window="1400,1400")
        try:
            driver.get(url + "tables?_tqaforge_signed_in_as=ada")  # a deep link with a forged session key
            body = wait_for_text(driver, "tqaforge: sign in", "User name", "Password")
            assert CANARY not in body and "min numeric share" not in body and "Import files" not in body

            _sign_in(driver, "ada", "not the password")
            body = wait_for_text(driver, "Wrong user name or password.")
            assert CANARY not in body and "Sign out" not in body

            _sign_in(driver, "ada", PASSWORD)
            body = wait_for_text(driver, "Sign out", "signed in as ada", "min numeric share")  # the Tables page asked for
            assert "tqaforge: sign in" not in body and "Wrong user name" not in body

            driver.get(url)  # a new browser tab load is a new session: sign in again
            body = wait_for_text(driver, "tqaforge: sign in")
            assert "Releases" not in body and "Taxonomy and seeds" not in body  # the page list is hidden too
            screenshot(driver, tmp_path, "app-sign-in")
            _sign_in(driver, "ada", PASSWORD)
            body = wait_for_text(driver, "Pipeline funnel", CANARY, "Sign out", "Taxonomy and seeds")  # and now shown

            click_button(driver, "Sign out")
            # The form's title comes first, while the signed-in page is still on screen (dimmed as
            # stale) until the rerun ends: what counts is the page once it has settled.
            body = wait_until(driver, lambda d: app_settled(d) and _holding(page_text(d), "tqaforge: sign in"),
                              "the sign-in form, settled")
            assert CANARY not in body and "Pipeline funnel" not in body
        finally:
            driver.quit()


def test_without_the_switch_the_loopback_app_opens_directly(tmp_path: Path, chromium) -> None:
    """Control: the same launcher without --require-login (loopback) shows the pages at once, so the
    form above comes from the switch and not from the workspace's users."""
    ws = init_workspace(tmp_path / "ws", name=CANARY)
    add_user(ws.root, "ada", PASSWORD)
    with launched_app(ws.root) as url:
        driver = start_chrome(chromium, tmp_path / "profile", window="1400,1400")
        try:
            driver.get(url)
            body = wait_for_text(driver, "Pipeline funnel", CANARY)
            assert "tqaforge: sign in" not in body
        finally:
            driver.quit()

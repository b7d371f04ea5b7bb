"""Hostile pages for the one wait helper (tests/browser.py), in headless Chromium: text that comes
late, an element re-rendered under the test, a button under an overlay, a text that never comes.
Each has a control showing that a single-shot read or click, as the browser tests did before, sees
the failure the helper waits out."""

from __future__ import annotations

from pathlib import Path

import pytest
from browser import click_element, element, page_text, wait_for_text, wait_until
from conftest import start_chrome
from selenium.common.exceptions import ElementClickInterceptedException, StaleElementReferenceException
from selenium.webdriver.common.by import By

PAGE = """<!doctype html><html><body>
<h1>waits</h1>
<div id="slot"><button id="go">go</button></div>
<div id="cover" style="position:fixed; inset:0; background:rgba(0,0,0,.3); display:none"></div>
<p id="log"></p>
<script>
window.clicks = 0;
function render() {  // a fresh button, as a re-rendering framework makes one
  document.getElementById('slot').innerHTML = '<button id="go">go</button>';
  document.getElementById('go').onclick = () => { window.clicks += 1; };
}
render();
function say(text) { document.getElementById('log').textContent = text; }
</script>
</body></html>"""


@pytest.fixture
def page(tmp_path: Path, chromium):
    path = tmp_path / "page.html"
    path.write_text(PAGE, encoding="utf-8")
    driver = start_chrome(chromium, tmp_path / "profile", window="800,600")
    try:
        driver.get(path.as_uri())
        element(driver, By.ID, "go", "the page's button")
        yield driver
    finally:
        driver.quit()


def test_text_that_comes_late_is_waited_for_and_returned(page) -> None:
    assert "late words" not in page_text(page)  # control: a read before it comes misses it
    page.execute_script("setTimeout(() => say('late words'), 300);")
    text = wait_for_text(page, "late words", "waits")
    assert "late words" in text and "waits" in text  # the text that matched, not a second read


def test_a_click_on_an_element_re_rendered_under_the_test_lands_once(page) -> None:
    stale = page.find_element(By.ID, "go")
    page.execute_script("render();")
    with pytest.raises(StaleElementReferenceException):  # control: a click on what was found before
        stale.click()
    # Re-rendered 40 times, every 5 ms, while the helper looks for it and clicks.
    page.execute_script("let n = 0; const t = setInterval(() => { render(); if (++n >= 40) clearInterval(t); }, 5);")
    click_element(page, By.ID, "go", "the go button")
    assert page.execute_script("return window.clicks;") == 1  # landed, and never repeated


def test_a_click_under_an_overlay_waits_until_the_overlay_is_gone(page) -> None:
    page.execute_script("document.getElementById('cover').style.display = 'block';")
    with pytest.raises(ElementClickInterceptedException):  # control: a plain click hits the overlay
        page.find_element(By.ID, "go").click()
    assert page.execute_script("return window.clicks;") == 0
    page.execute_script("setTimeout(() => document.getElementById('cover').style.display = 'none', 300);")
    click_element(page, By.ID, "go", "the go button")
    assert page.execute_script("return window.clicks;") == 1


def test_a_text_that_never_comes_is_a_timeout_naming_what_and_showing_the_page(page) -> None:
    with pytest.raises(TimeoutError) as caught:
        wait_for_text(page, "waits", "never shown", timeout=0.5)
    message = str(caught.value)
    assert "missing ['never shown']" in message and "page.html" in message and "waits" in message
    with pytest.raises(TimeoutError, match="the impossible"):
        wait_until(page, lambda d: False, "the impossible", timeout=0.3)

"""Hostile pages for the one wait helper (tests/browser.py), in headless Chromium: text that comes
late, an element re-rendered under the test, a button under an overlay, a text that never comes.
Each has a control showing that a single-shot read or click, as the browser tests did before, sees
the failure the helper waits out."""

from __future__ import annotations

from pathlib import Path

import pytest
from browser import click_button, click_element, element, page_text, type_keys, wait_for_text, wait_until
from conftest import start_chrome
from selenium.common.exceptions import (
    ElementClickInterceptedException,
    ElementNotInteractableException,
    StaleElementReferenceException,
)
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

PAGE = """<!doctype html><html><body>
<h1>waits</h1>
<div id="slot"><button id="go">go</button></div>
<div id="st"></div>
<div id="field"></div>
<div id="cover" style="position:fixed; inset:0; background:rgba(0,0,0,.3); display:none"></div>
<p id="log"></p>
<script>
window.clicks = 0;
function render() {  // a fresh button, as a re-rendering framework makes one
  document.getElementById('slot').innerHTML = '<button id="go">go</button>';
  document.getElementById('go').onclick = () => { window.clicks += 1; };
}
render();
window.stClicks = 0;
function stButton(shown) {  // a Streamlit button (its label in a <p>), made afresh, shown or hidden
  document.getElementById('st').innerHTML = '<button style="display:' + (shown ? 'inline' : 'none') + '"><p>pull</p></button>';
  document.querySelector('#st button').onclick = () => { window.stClicks += 1; };
}
stButton(true);
function field() {  // a text input made afresh, its value kept (as a framework keeps its state)
  const old = document.querySelector('#field input');
  document.getElementById('field').innerHTML = '<input id="box">';
  if (old) document.getElementById('box').value = old.value;
}
field();
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


def test_a_button_hidden_and_re_rendered_under_the_test_is_clicked_once(page) -> None:
    """What a CI run saw: the button found clickable, then hidden by a re-render before the click."""
    found = page.find_element(By.XPATH, "//button[.//p[normalize-space()='pull']]")
    page.execute_script("stButton(false);")
    with pytest.raises(StaleElementReferenceException):  # control: what was found is gone
        found.click()
    hidden = page.find_element(By.XPATH, "//button[.//p[normalize-space()='pull']]")
    with pytest.raises(ElementNotInteractableException):  # control: a hidden button takes no click
        hidden.click()
    # Re-rendered 40 times, every 5 ms, hidden and shown in turn, while the helper clicks.
    page.execute_script("let n = 0; const t = setInterval(() => { stButton(n % 2 === 1); if (++n >= 40) clearInterval(t); }, 5);")
    click_button(page, "pull")
    assert page.execute_script("return window.stClicks;") == 1


def test_keys_go_to_the_field_as_it_is_now_not_as_it_was_found(page) -> None:
    box = page.find_element(By.ID, "box")
    page.execute_script("window.rendered = 0; const t = setInterval(() => { field(); if (++window.rendered >= 40) clearInterval(t); }, 5);")
    wait_until(page, lambda d: d.execute_script("return window.rendered;") >= 40, "the field re-rendered 40 times")
    with pytest.raises(StaleElementReferenceException):  # control: typing into what was found before
        box.send_keys("x")
    type_keys(page, By.ID, "box", "the box", [(Keys.CONTROL, "a"), (Keys.DELETE,), ("forty-two",)])
    assert page.execute_script("return document.getElementById('box').value;") == "forty-two"


def test_a_text_that_never_comes_is_a_timeout_naming_what_and_showing_the_page(page) -> None:
    with pytest.raises(TimeoutError) as caught:
        wait_for_text(page, "waits", "never shown", timeout=0.5)
    message = str(caught.value)
    assert "missing ['never shown']" in message and "page.html" in message and "waits" in message
    with pytest.raises(TimeoutError, match="the impossible"):
        wait_until(page, lambda d: False, "the impossible", timeout=0.3)

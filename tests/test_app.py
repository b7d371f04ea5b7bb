"""The Streamlit app: the home page shows the funnel and the tables of a real workspace.

``AppTest`` runs the page script for real (no browser); tests/test_app_browser.py walks the
served app in headless Chromium.
"""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import free_port
from streamlit.testing.v1 import AppTest

from tqaforge.ingest import import_paths

HOME = Path(__file__).resolve().parents[1] / "tqaforge" / "app" / "main" / "Home.py"
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
    tables = AppTest.from_file(str(HOME.parents[1] / "pages" / "tables.py"), default_timeout=60).run()
    tables_frame = next(f.value for f in tables.dataframe if "numeric share" in f.value.columns)
    assert len(tables_frame) == min(summary.total("tables_new"), 50)  # the tables page shows 50 at a time


def test_home_page_without_workspace_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("TQAFORGE_WORKSPACE", str(tmp_path))
    at = AppTest.from_file(str(HOME), default_timeout=60).run()
    assert at.error and "tqaforge init" in at.error[0].value


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

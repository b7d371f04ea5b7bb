"""The Health page in headless Chromium: on a workspace with a release and three evaluations of
it (the simulated benchmark, tests/health_sim.py), a click on the run button shows the verdict
and the checks, and writes the report where the page says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import free_port, start_chrome, wait_for
from test_app_browser import HOME, _answers, _click, _wait_for

from tests import health_sim as sim
from tqaforge.health import HEALTH_JSON


def test_health_page_runs_the_report_in_chromium(tmp_path: Path, chromium) -> None:
    ws, _ = sim.build_app_workspace(tmp_path / "sim")
    port = free_port()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("TQAFORGE_", "OPENAI_"))}, "TQAFORGE_WORKSPACE": str(ws)}
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(HOME), "--server.address", "127.0.0.1", "--server.port", str(port),
         "--server.headless", "true", "--browser.gatherUsageStats", "false"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}/"
        wait_for(lambda: _answers(url + "_stcore/health"), 60, "streamlit to start")
        driver = start_chrome(chromium, tmp_path / "profile", window="1400,2000")
        try:
            driver.get(url + "health")
            body = _wait_for(driver, "3 evaluations found", "no health report of candidate yet")
            assert all(f"candidate / e{k}" in body for k in range(3))
            _click(driver, "run the health report")
            body = _wait_for(driver, "health of release sim 0.9.0: UNHEALTHY", "[FAIL] suspect_gold", "Item analysis")
            assert "1 of 1 checks fail" in body and "10 of 150 base items" in body
            assert (ws / "health" / "candidate" / HEALTH_JSON).is_file()
        finally:
            driver.quit()
    finally:
        server.terminate()
        server.wait(timeout=20)

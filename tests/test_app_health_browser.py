"""The Health page in headless Chromium: on a workspace with a release and three evaluations of
it (the simulated benchmark, tests/health_sim.py), a click on the run button shows the verdict
and the checks, and writes the report where the page says; a click on the send button files the
suspect gold in the adjudication queue and says how many."""

from __future__ import annotations

import os
from pathlib import Path

from browser import click_button, running_app, wait_for_text
from conftest import start_chrome

from tests import health_sim as sim
from tqaforge.annotation.reopen import adjudication_flags
from tqaforge.health import HEALTH_JSON
from tqaforge.store import open_workspace


def test_health_page_runs_the_report_in_chromium(tmp_path: Path, chromium) -> None:
    ws, _ = sim.build_app_workspace(tmp_path / "sim")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("TQAFORGE_", "OPENAI_"))}, "TQAFORGE_WORKSPACE": str(ws)}
    with running_app(env) as url:
        driver = start_chrome(chromium, tmp_path / "profile", window="1400,2000")
        try:
            driver.get(url + "health")
            wait_for_text(driver, "3 evaluations found", "no health report of candidate yet",
                          *(f"candidate / e{k}" for k in range(3)))
            click_button(driver, "run the health report")
            # Every text asserted is waited for: Streamlit draws a page's elements one after another.
            wait_for_text(driver, "health of release sim 0.9.0: UNHEALTHY", "[FAIL] suspect_gold", "Item analysis",
                          "1 of 1 checks fail", "10 of 150 base items")
            assert (ws / "health" / "candidate" / HEALTH_JSON).is_file()
            # The same report again, its suspect gold filed in the adjudication queue; the page says what became of it.
            click_button(driver, "send suspect gold to adjudication")
            wait_for_text(driver, "10 queued, 0 already queued, 0 settled by a person", "Suspect gold sent to adjudication",
                          "suspect gold sent to adjudication: 10 queued")
            workspace = open_workspace(ws)
            try:
                assert adjudication_flags(workspace, status="open").total == 10
            finally:
                workspace.close()
        finally:
            driver.quit()

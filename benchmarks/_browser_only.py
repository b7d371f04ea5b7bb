"""A pytest plugin for benchmarks/browser_stress.py: keep only the tests that drive Chromium (those
whose fixtures include ``chromium``), so a round of a file mixing browser and other tests runs its
browser tests alone."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep = [item for item in items if "chromium" in getattr(item, "fixturenames", ())]
    dropped = [item for item in items if "chromium" not in getattr(item, "fixturenames", ())]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep

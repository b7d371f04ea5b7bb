"""What a test needs from the machine that CI provides: missing here, the test is skipped; missing
in CI (``CI=true``, as ``.ci/run`` sets it), it fails. ``.ci/run`` and ``make test`` install Label
Studio, Chromium and the dev extra, so there a skip would only hide a test that no longer runs."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    """Whether this is a CI run (CI=true): there, a missing tool fails a test instead of skipping it."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def unavailable(what: str, *, install: str) -> NoReturn:
    """Stop the test because ``what`` is missing: a skip here, a failure in CI; ``install`` says how
    to get it."""
    message = f"{what} ({install})"
    if in_ci():
        pytest.fail(f"{message}; CI provides it, so the test must run there, not be skipped")
    pytest.skip(message)

"""A prerequisite CI provides (Label Studio, Chromium, the dev extra) that is missing skips a test
on a developer's machine and fails it in CI, where a skip would hide a test that no longer runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

PROBE = '''
from prerequisites import unavailable

def test_needs_a_tool():
    unavailable("the tool is not installed", install="apt-get install the-tool")
'''


def _outcome(tmp_path: Path, ci: str | None) -> str:
    (tmp_path / "test_probe.py").write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k != "CI"} | {"PYTHONPATH": str(TESTS)}
    if ci is not None:
        env["CI"] = ci
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), "test_probe.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    return done.stdout


@pytest.mark.parametrize("ci", ["true", "1", "yes"])
def test_in_ci_a_missing_prerequisite_fails_the_test(tmp_path: Path, ci: str) -> None:
    out = _outcome(tmp_path, ci)
    assert "1 failed" in out and "CI provides it" in out and "apt-get install the-tool" in out, out


@pytest.mark.parametrize("ci", [None, "", "false"])
def test_outside_ci_a_missing_prerequisite_skips_the_test(tmp_path: Path, ci: str | None) -> None:
    out = _outcome(tmp_path, ci)
    assert "1 skipped" in out and "the tool is not installed (apt-get install the-tool)" in out, out

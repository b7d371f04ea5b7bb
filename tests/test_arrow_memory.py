"""Arrow's allocator in tqaforge's own processes (tqaforge.arrow_memory): the CLI and the app
choose the C library's pool before pyarrow loads, and a pool the user chose is kept."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tqaforge.arrow_memory import ARROW_POOL_ENV, prefer_system_allocator
from tqaforge.launch import _parse, app_environment

REPO = Path(__file__).resolve().parents[1]

# What a `tqaforge` command's process ends up with: the CLI package imported (as the console
# script does), then pyarrow loaded by whatever the command runs.
PROBE = """
import sys
import tqaforge.cli
loaded_before = "pyarrow" in sys.modules
import pyarrow
print(loaded_before, pyarrow.default_memory_pool().backend_name)
"""


def _probe(env_pool: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != ARROW_POOL_ENV}
    if env_pool is not None:
        env[ARROW_POOL_ENV] = env_pool
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_cli_process_allocates_arrow_memory_from_the_system_pool() -> None:
    # pyarrow must not be loaded by the CLI's import: Arrow reads the variable when it loads.
    assert _probe(None) == "False system"


def test_a_pool_the_user_chose_is_kept() -> None:
    # The control: the probe sees the variable, so "system" above is the CLI's doing.
    assert _probe("mimalloc") == "False mimalloc"


def test_the_app_is_started_with_the_same_choice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    args = _parse(["--workspace", str(tmp_path)])
    monkeypatch.delenv(ARROW_POOL_ENV, raising=False)
    assert app_environment(args, tmp_path)[ARROW_POOL_ENV] == "system"
    monkeypatch.setenv(ARROW_POOL_ENV, "jemalloc")
    assert app_environment(args, tmp_path)[ARROW_POOL_ENV] == "jemalloc"


def test_prefer_system_allocator_sets_only_an_unset_choice() -> None:
    env: dict[str, str] = {}
    prefer_system_allocator(env)
    assert env == {ARROW_POOL_ENV: "system"}
    env = {ARROW_POOL_ENV: "mimalloc"}
    assert prefer_system_allocator(env) is None
    assert env == {ARROW_POOL_ENV: "mimalloc"}


def test_the_app_is_started_with_the_system_pool_in_place_of_one_arrow_does_not_know(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args = _parse(["--workspace", str(tmp_path)])
    monkeypatch.setenv(ARROW_POOL_ENV, "Mimalloc")
    assert app_environment(args, tmp_path)[ARROW_POOL_ENV] == "system"
    assert "ARROW_DEFAULT_MEMORY_POOL='Mimalloc' is not one of Arrow's memory pools" in capsys.readouterr().err

"""Shared fixtures: workspaces on SQLite and (when configured) PostgreSQL, and the shared data."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Iterator

import pytest
from sqlalchemy import create_engine, text

from tqaforge.store import Workspace, init_workspace

PG_ENV = "TQAFORGE_TEST_DATABASE_URL"


def _hypothesis_profile() -> str:
    """Hypothesis explores new examples locally but is derandomised in CI (CI=true), so a CI run is
    repeatable and never fails on an example no earlier run met. Loaded here, at conftest import,
    before any test module builds its own ``settings(...)`` on top of the default."""
    from hypothesis import settings

    # No example database in CI either: examples saved by earlier runs must not change what runs.
    settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
    settings.register_profile("dev")
    name = "ci" if os.environ.get("CI", "").lower() in ("1", "true", "yes") else "dev"
    profile = os.environ.get("HYPOTHESIS_PROFILE", name)
    settings.load_profile(profile)
    return profile


# Hypothesis's own pytest plugin prints the active profile in the header ("hypothesis profile 'ci'").
HYPOTHESIS_PROFILE = _hypothesis_profile()

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


def shared_data_path(*parts: str) -> Path:
    """A path under ../shared/data; the test is skipped when it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data not available: {path}")
    return path


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.exists():
        pytest.skip("../shared/data is absent")
    return SHARED_DATA


def _pg_schema_url(base: str) -> Iterator[str]:
    """A fresh PostgreSQL schema per test, so tests never see each other's rows."""
    schema = "tqf_" + uuid.uuid4().hex[:12]
    admin = create_engine(base)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    sep = "&" if "?" in base else "?"
    try:
        yield f"{base}{sep}options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Each store test runs on SQLite and, when TQAFORGE_TEST_DATABASE_URL is set, PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(f"{PG_ENV} not set")
    yield from _pg_schema_url(base)


@pytest.fixture
def workspace(tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    """A fresh workspace whose database is the parametrised one."""
    monkeypatch.setenv("TQAFORGE_DATABASE_URL", database_url)
    ws = init_workspace(tmp_path / "ws", name="test")
    yield ws
    ws.close()


@pytest.fixture
def sqlite_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    """A workspace on its own SQLite file (for tests about files, not about the database)."""
    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    ws = init_workspace(tmp_path / "ws", name="test")
    yield ws
    ws.close()


def wait_for(condition, timeout: float, what: str, interval: float = 0.05) -> None:
    """Poll ``condition`` until it is true; TimeoutError naming ``what`` after ``timeout`` s."""
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout:g} s for {what}")
        time.sleep(interval)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def label_studio(tmp_path_factory: pytest.TempPathFactory):
    """A real Label Studio server (from .venv-ls, which `make test` installs), one per session."""
    from tqaforge.annotation.labelstudio.server import (
        LabelStudioError,
        LabelStudioSettings,
        executable,
        is_healthy,
        start_server,
    )

    try:
        executable()
    except LabelStudioError as exc:  # a bare pytest run may lack it; `make test` never does
        pytest.skip(str(exc))
    settings = LabelStudioSettings(data_dir=tmp_path_factory.mktemp("label-studio"), port=free_port())
    server = start_server(settings)
    yield server
    server.stop()
    assert not is_healthy(settings.url)

"""Shared fixtures: workspaces on SQLite and (when configured) PostgreSQL, and the shared data."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import dataclass
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


# --- the one real Label Studio of a test run -----------------------------------------------------
#
# Starting Label Studio takes a minute or more, so a run starts ONE, for a workspace of its own,
# with `tqaforge labelstudio start` (the command a user runs), as soon as collection shows that a
# test needs it; it comes up while other tests run. Tests marked `stops_label_studio` run last.

_SHARED_LS: dict[str, object] = {}


@dataclass(frozen=True)
class SharedLabelStudio:
    """The run's Label Studio: its workspace, URL, admin token, server settings and pid."""

    root: Path
    url: str
    token: str
    settings: object  # LabelStudioSettings
    pid: int


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.get_closest_marker("stops_label_studio") is not None)


def pytest_collection_finish(session: pytest.Session) -> None:
    import subprocess
    import sys
    import tempfile

    from tqaforge.annotation.labelstudio.server import LabelStudioError, executable

    if any("annotator_servers" in getattr(item, "fixturenames", ()) for item in session.items):
        _start_annotator_servers()
    if not any("label_studio" in getattr(item, "fixturenames", ()) for item in session.items):
        return
    try:
        executable()
    except LabelStudioError as exc:  # a bare pytest run may lack it; `make test` never does
        _SHARED_LS["missing"] = str(exc)
        return
    root = Path(tempfile.mkdtemp(prefix="tqaforge-ls-")) / "ws"
    init_workspace(root)
    port = free_port()
    config = root / "tqaforge.toml"
    config.write_text(config.read_text() + f"\n[labelstudio]\nport = {port}\n")
    log = (root.parent / "start.out").open("wb")
    _SHARED_LS["root"] = root
    _SHARED_LS["start"] = subprocess.Popen([sys.executable, "-m", "tqaforge", "-w", str(root), "labelstudio", "start"],
                                           stdout=log, stderr=subprocess.STDOUT)


# --- one Label Studio per annotator: ana's and ben's, started together ------------------------
#
# Two annotators (the fewest that can see a leak), each with their own server on 127.0.0.2 and
# 127.0.0.3, for a workspace of their own, with the commands a user runs (`annotators add`,
# `labelstudio start`, which starts both in parallel), as soon as collection shows a test needs
# them; they come up while other tests run.

_ANNOTATOR_LS: dict[str, object] = {}


@dataclass(frozen=True)
class AnnotatorServers:
    """The run's two annotator servers: the workspace (``root``), the logins, and what start printed."""

    root: Path
    ana: str
    ben: str
    start_output: str


def _start_annotator_servers() -> None:
    import subprocess
    import sys
    import tempfile

    from tqaforge.annotation.labelstudio.server import LabelStudioError, executable

    try:
        executable()
    except LabelStudioError as exc:
        _ANNOTATOR_LS["missing"] = str(exc)
        return
    root = Path(tempfile.mkdtemp(prefix="tqaforge-ls-annotators-")) / "ws"
    init_workspace(root)
    config = root / "tqaforge.toml"
    config.write_text(config.read_text() + f"\n[labelstudio]\nport = {free_port()}\n")
    ana, ben = (f"{who}-{uuid.uuid4().hex[:8]}@example.org" for who in ("ana", "ben"))
    cli = [sys.executable, "-m", "tqaforge", "-w", str(root)]
    for email, name in ((ana, "Ana Lopez"), (ben, "Ben Okafor")):
        subprocess.run([*cli, "annotators", "add", email, "--name", name], check=True, capture_output=True)
    _ANNOTATOR_LS.update(root=root, ana=ana, ben=ben, out=root.parent / "start.out")
    _ANNOTATOR_LS["start"] = subprocess.Popen([*cli, "labelstudio", "start"], stdout=(root.parent / "start.out").open("wb"),
                                              stderr=subprocess.STDOUT)


@pytest.fixture(scope="session")
def annotator_servers() -> AnnotatorServers:
    """ana's and ben's own Label Studio servers, started by `tqaforge labelstudio start` (conftest)."""
    if "missing" in _ANNOTATOR_LS:
        pytest.skip(str(_ANNOTATOR_LS["missing"]))
    start, root, out = _ANNOTATOR_LS.get("start"), _ANNOTATOR_LS.get("root"), _ANNOTATOR_LS.get("out")
    assert start is not None and isinstance(root, Path) and isinstance(out, Path), "collection did not start them"
    if start.wait(400) != 0:  # type: ignore[attr-defined]
        raise RuntimeError("tqaforge labelstudio start failed:\n" + out.read_text(errors="replace"))
    return AnnotatorServers(root=root, ana=str(_ANNOTATOR_LS["ana"]), ben=str(_ANNOTATOR_LS["ben"]),
                            start_output=out.read_text(errors="replace"))


def _stop_annotator_servers() -> None:
    import subprocess
    import sys

    start, root = _ANNOTATOR_LS.get("start"), _ANNOTATOR_LS.get("root")
    if start is None or not isinstance(root, Path):
        return
    start.wait(400)  # type: ignore[attr-defined]
    subprocess.run([sys.executable, "-m", "tqaforge", "-w", str(root), "labelstudio", "stop"], capture_output=True)
    shutil.rmtree(root.parent, ignore_errors=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    import shutil

    _stop_annotator_servers()
    start = _SHARED_LS.get("start")
    if start is None:
        return
    from tqaforge.annotation.labelstudio import manage

    root = _SHARED_LS["root"]
    assert isinstance(root, Path)
    start.wait(400)  # type: ignore[attr-defined]
    manage.stop(root)
    shutil.rmtree(root.parent, ignore_errors=True)


@pytest.fixture(scope="session")
def label_studio() -> SharedLabelStudio:
    """The run's real Label Studio (from .venv-ls, which `make test` installs), started by
    `tqaforge labelstudio start` for a workspace of its own (``.root``)."""
    from tqaforge.annotation.labelstudio import manage

    if "missing" in _SHARED_LS:
        pytest.skip(str(_SHARED_LS["missing"]))
    start, root = _SHARED_LS.get("start"), _SHARED_LS.get("root")
    assert start is not None and isinstance(root, Path), "collection did not start Label Studio"
    if start.wait(400) != 0:  # type: ignore[attr-defined]
        raise RuntimeError("tqaforge labelstudio start failed:\n" + (root.parent / "start.out").read_text(errors="replace"))
    state = manage.status(root)
    credentials = manage.read_credentials(root)
    assert state.pid is not None and state.answers and credentials is not None, state
    return SharedLabelStudio(root=root, url=credentials.url, token=credentials.token,
                             settings=manage.workspace_settings(root), pid=state.pid)


def in_ci() -> bool:
    """Whether this is a CI run (CI=true): there, a missing tool fails a test instead of skipping it."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture
def chromium() -> tuple[str, str]:
    """Paths of chromium and chromedriver. Missing ones skip the test locally, but fail it in CI
    (CI=true): `.ci/run` installs them, so there a skip would hide a broken browser test."""
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if browser and driver:
        return browser, driver
    message = "chromium/chromedriver not installed (apt-get install chromium chromium-driver)"
    if in_ci():
        pytest.fail(f"{message}; CI must run the browser tests (.ci/run installs them)")
    pytest.skip(message)


def start_chrome(chromium: tuple[str, str], profile: Path, window: str = "1400,2000"):
    """A headless Chromium driven by the installed chromedriver (given to Selenium through a
    Service, so Selenium never downloads one), with its own fresh ``profile`` directory: cookies
    and sessions are never shared between two drivers. The caller quits it."""
    from selenium import webdriver

    browser_path, driver_path = chromium
    opts = webdriver.ChromeOptions()
    opts.binary_location = browser_path
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", f"--user-data-dir={profile}",
                 f"--window-size={window}"):
        opts.add_argument(flag)
    return webdriver.Chrome(options=opts, service=webdriver.ChromeService(executable_path=driver_path))


def freeze_sample_release(root: Path, *, serializations: tuple[str, ...] = (), perturbations: tuple[str, ...] = (),
                          without_subtypes: tuple[str, ...] = ()) -> Path:
    """TableBench's shipped sample imported into a fresh SQLite workspace under ``root`` and frozen
    as release 1.0.0 (base subset) at ``root/release``.

    With ``serializations``, the release also holds the configurations subset in those formats,
    each item as it is and (``perturbations``, built first with seed 0) perturbed; the sample's
    rows of ``without_subtypes`` are left out (a copy of the sample without them is imported)."""
    from tqaforge.ingest import import_paths
    from tqaforge.release.build import ReleaseOptions, build_release
    from tqaforge.store import init_workspace
    from tqaforge.variants.grid import GridOptions, build_variant_grid

    sample = Path(__file__).resolve().parents[1] / "data" / "sample" / "tablebench_sample.jsonl"
    if without_subtypes:
        kept = [line for line in sample.read_text(encoding="utf-8").splitlines()
                if json.loads(line)["qsubtype"] not in without_subtypes]
        sample = root / sample.name
        sample.parent.mkdir(parents=True, exist_ok=True)
        sample.write_text("\n".join(kept) + "\n", encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("TQAFORGE_DATABASE_URL", raising=False)
        ws = init_workspace(root / "ws", name="test")
        try:
            assert not import_paths(ws, [sample]).failed
            if perturbations:
                build_variant_grid(ws, GridOptions(write_prompts=False, perturbations=perturbations,
                                                   serializations=serializations or ("markdown",), skip_structural=False))
            options = ReleaseOptions(version="1.0.0", out=root / "release", subsets=("base",))
            if serializations:
                options = ReleaseOptions(version="1.0.0", out=root / "release", subsets=("base", "configurations"),
                                         serializations=serializations)
            build_release(ws, options)
        finally:
            ws.close()
    return root / "release"

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
from prerequisites import unavailable
from sqlalchemy import create_engine, text

from tqaforge.files import atomic_write_text
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
#
# Under pytest-xdist (`make test` runs `-n 2`) every worker collects the whole suite, so the
# servers are shared, not started per worker: the run's directory (made by the controller, or by
# a plain pytest process, and handed to the workers through RUN_DIR_ENV) holds one folder per
# server set; the first process to create that folder starts the servers, writing the start
# command's output and exit code there, and any process waits for that code. The process that
# made the run's directory (the controller) stops them once every worker has finished.
# Every test that uses a shared server runs on ONE worker, in collection order (the scheduler
# below), so they never run beside each other and the `stops_label_studio` ones still run after
# all the others, as in a serial run.

RUN_DIR_ENV = "TQAFORGE_TEST_RUN_DIR"
TERMINAL_ENV = "TQAFORGE_TEST_TERMINAL"
SERVER_FIXTURES = ("label_studio", "annotator_servers")
SERVERS_SCOPE = "label-studio-servers"
_RUN: dict[str, Path] = {}  # "dir": the run's directory; "owned": the same, in the process that made it


@dataclass(frozen=True)
class SharedLabelStudio:
    """The run's Label Studio: its workspace, URL, admin token, server settings and pid."""

    root: Path
    url: str
    token: str
    settings: object  # LabelStudioSettings
    pid: int


def pytest_configure(config: pytest.Config) -> None:
    import tempfile

    if hasattr(config, "workerinput"):  # an xdist worker: the controller made the run's directory
        _RUN["dir"] = Path(os.environ[RUN_DIR_ENV])
        # A worker starts with COLUMNS=80 and LINES=24 in its environment, which the run's own
        # process does not have; the CLI's consoles (made at import) would then wrap every line
        # at 80 columns, whatever width a test's CliRunner asks for. The run's values come back.
        for name, value in json.loads(os.environ[TERMINAL_ENV]).items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        return
    run_dir = Path(tempfile.mkdtemp(prefix="tqaforge-test-run-"))
    _RUN["dir"] = _RUN["owned"] = run_dir
    os.environ[RUN_DIR_ENV] = str(run_dir)  # the workers, started after this, inherit it
    os.environ[TERMINAL_ENV] = json.dumps({name: os.environ.get(name) for name in ("COLUMNS", "LINES")})


def _uses_servers(item: pytest.Item, fixtures: tuple[str, ...] = SERVER_FIXTURES) -> bool:
    """Whether the test asks for any of ``fixtures`` (by default, any shared server)."""
    return any(name in getattr(item, "fixturenames", ()) for name in fixtures)


# The longest work units first (seconds of one CI run on the 2-core machine, 2026-11-27), so that
# the last units handed out are short ones and neither worker idles long at the end. The unit of
# the shared servers' tests is the longest of all; files not named here keep collection order.
LONG_FILES = {
    "test_readme_walkthrough.py": 330, "test_health.py": 200, "test_app_browser.py": 160,
    "test_demo.py": 150, "test_app_health_browser.py": 135, "test_app_pipeline_browser.py": 120,
    "test_workers_postgres.py": 120, "test_perturb.py": 110, "test_app_login_browser.py": 95,
    "test_hostile_labelstudio.py": 80, "test_answers.py": 65, "test_generation.py": 60,
    "test_hostile_urls.py": 60, "test_release_stream.py": 55, "test_app_health_controls.py": 50,
}


def _unit_weight(item: pytest.Item) -> int:
    return 10_000 if _uses_servers(item) else LONG_FILES.get(Path(str(item.fspath)).name, 0)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    # The hostile-input suite is every test of tests/test_hostile_*.py (and the tests elsewhere marked
    # so by hand): a file of it cannot be left out of `-m hostile` by forgetting its pytestmark.
    for item in items:
        if Path(str(item.fspath)).name.startswith("test_hostile_"):
            item.add_marker(pytest.mark.hostile)
    # Under xdist the collection order is the order work units are handed out (see the scheduler
    # below): the longest first. The sort is stable, so each file keeps its own order.
    by_length = hasattr(config, "workerinput")
    items.sort(key=lambda item: (item.get_closest_marker("stops_label_studio") is not None,
                                 -_unit_weight(item) if by_length else 0))
    if by_length:  # for the controller's scheduler: which tests use a shared server
        path = _RUN["dir"] / f"server-tests-{config.workerinput['workerid']}.json"  # type: ignore[attr-defined]
        atomic_write_text(path, json.dumps([item.nodeid for item in items if _uses_servers(item)]))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Under xdist (whatever --dist says), a work unit is a test file, as with --dist loadfile (a
    module's fixtures are made once), except that every test using a shared server is in ONE unit,
    in collection order (the `stops_label_studio` ones last). The workers name those tests (in the
    run's directory) before they report their collection, so the names are there when it is split.
    (xdist's own --dist loadgroup cannot do it here: with pytest 9 the group never reaches the id.)"""
    from xdist.scheduler import LoadScopeScheduling

    class Scheduling(LoadScopeScheduling):
        _server_tests: set[str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._server_tests is None:
                self._server_tests = set()
                for path in _RUN["dir"].glob("server-tests-*.json"):
                    self._server_tests.update(json.loads(path.read_text()))
            return SERVERS_SCOPE if nodeid in self._server_tests else nodeid.split("::", 1)[0]

    config.option.loadscopereorder = False  # hand units out in collection order (longest first), not by test count
    return Scheduling(config, log)


def _claim(name: str) -> Path | None:
    """The run's folder ``name`` when this process made it (and so starts its servers), else None."""
    folder = _RUN["dir"] / name
    try:
        folder.mkdir()
    except FileExistsError:
        return None
    return folder


def _start_detached(cli: list[str], folder: Path) -> None:
    """``cli`` in the background, its output to ``folder/start.out`` and, when it ends, its exit
    code to ``folder/start.rc`` (written whole), so that any process of the run can wait for it."""
    import subprocess

    script = 'rc=0; "$@" >"$OUT" 2>&1 || rc=$?; echo $rc >"$RC.tmp"; mv "$RC.tmp" "$RC"'
    subprocess.Popen(["sh", "-c", script, "sh", *cli], env={**os.environ, "OUT": str(folder / "start.out"),
                                                               "RC": str(folder / "start.rc")},
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def _wait_started(folder: Path, timeout: float = 400) -> int:
    """The exit code of the start command of ``folder`` (waiting for it), or -1 after ``timeout`` s."""
    rc = folder / "start.rc"
    try:
        wait_for(rc.exists, timeout, f"{rc} (the servers' start)", interval=0.2)
    except TimeoutError:
        return -1
    return int(rc.read_text().strip() or -1)


def pytest_collection_finish(session: pytest.Session) -> None:
    import sys

    from tqaforge.annotation.labelstudio.server import LabelStudioError, executable

    if session.config.option.collectonly or not any(_uses_servers(item) for item in session.items):
        return
    try:
        executable()
    except LabelStudioError:  # a bare pytest run may lack it; `make test` never does (the fixtures skip)
        return
    if any(_uses_servers(item, ("annotator_servers",)) for item in session.items):
        folder = _claim("annotators")
        if folder is not None:
            _start_annotator_servers(folder)
    if any(_uses_servers(item, ("label_studio",)) for item in session.items):
        folder = _claim("labelstudio")
        if folder is not None:
            root = folder / "ws"
            init_workspace(root)
            config = root / "tqaforge.toml"
            config.write_text(config.read_text() + f"\n[labelstudio]\nport = {free_port()}\n")
            _start_detached([sys.executable, "-m", "tqaforge", "-w", str(root), "labelstudio", "start"], folder)


def _label_studio_missing() -> None:
    """Skips the test when Label Studio is not installed (a bare pytest run may lack it); fails it in CI."""
    from tqaforge.annotation.labelstudio.server import LabelStudioError, executable

    try:
        executable()
    except LabelStudioError as exc:
        unavailable(str(exc), install="make labelstudio; make test installs it")


# --- one Label Studio per annotator: ana's and ben's, started together ------------------------
#
# Two annotators (the fewest that can see a leak), each with their own server on 127.0.0.2 and
# 127.0.0.3, for a workspace of their own, with the commands a user runs (`annotators add`,
# `labelstudio start`, which starts both in parallel), as soon as collection shows a test needs
# them; they come up while other tests run.


@dataclass(frozen=True)
class AnnotatorServers:
    """The run's two annotator servers: the workspace (``root``), the logins, and what start printed."""

    root: Path
    ana: str
    ben: str
    start_output: str


def _start_annotator_servers(folder: Path) -> None:
    import subprocess
    import sys

    root = folder / "ws"
    init_workspace(root)
    config = root / "tqaforge.toml"
    config.write_text(config.read_text() + f"\n[labelstudio]\nport = {free_port()}\n")
    ana, ben = (f"{who}-{uuid.uuid4().hex[:8]}@example.org" for who in ("ana", "ben"))
    cli = [sys.executable, "-m", "tqaforge", "-w", str(root)]
    for email, name in ((ana, "Ana Lopez"), (ben, "Ben Okafor")):
        subprocess.run([*cli, "annotators", "add", email, "--name", name], check=True, capture_output=True)
    atomic_write_text(folder / "logins.json", json.dumps({"ana": ana, "ben": ben}))
    _start_detached([*cli, "labelstudio", "start"], folder)


@pytest.fixture(scope="session")
def annotator_servers() -> AnnotatorServers:
    """ana's and ben's own Label Studio servers, started by `tqaforge labelstudio start` (conftest)."""
    _label_studio_missing()
    folder = _RUN["dir"] / "annotators"
    assert folder.is_dir(), "collection did not start them"
    if _wait_started(folder) != 0:
        raise RuntimeError("tqaforge labelstudio start failed:\n" + (folder / "start.out").read_text(errors="replace"))
    logins = json.loads((folder / "logins.json").read_text())
    return AnnotatorServers(root=folder / "ws", ana=logins["ana"], ben=logins["ben"],
                            start_output=(folder / "start.out").read_text(errors="replace"))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The process that made the run's directory (the controller under xdist, which ends after
    every worker) stops the servers the run started and removes the directory."""
    import subprocess
    import sys

    run_dir = _RUN.get("owned")
    if run_dir is None:
        return
    annotators = run_dir / "annotators"
    if annotators.is_dir():
        _wait_started(annotators)
        subprocess.run([sys.executable, "-m", "tqaforge", "-w", str(annotators / "ws"), "labelstudio", "stop"],
                       capture_output=True)
    shared = run_dir / "labelstudio"
    if shared.is_dir():
        from tqaforge.annotation.labelstudio import manage

        _wait_started(shared)
        manage.stop(shared / "ws")
    shutil.rmtree(run_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def label_studio() -> SharedLabelStudio:
    """The run's real Label Studio (from .venv-ls, which `make test` installs), started by
    `tqaforge labelstudio start` for a workspace of its own (``.root``)."""
    from tqaforge.annotation.labelstudio import manage

    _label_studio_missing()
    folder = _RUN["dir"] / "labelstudio"
    root = folder / "ws"
    assert folder.is_dir(), "collection did not start Label Studio"
    if _wait_started(folder) != 0:
        raise RuntimeError("tqaforge labelstudio start failed:\n" + (folder / "start.out").read_text(errors="replace"))
    state = manage.status(root)
    credentials = manage.read_credentials(root)
    assert state.pid is not None and state.answers and credentials is not None, state
    return SharedLabelStudio(root=root, url=credentials.url, token=credentials.token,
                             settings=manage.workspace_settings(root), pid=state.pid)


@pytest.fixture
def chromium() -> tuple[str, str]:
    """Paths of chromium and chromedriver. Missing ones skip the test locally, but fail it in CI
    (CI=true): `.ci/run` installs them, so there a skip would hide a broken browser test."""
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if browser and driver:
        return browser, driver
    unavailable("chromium/chromedriver not installed", install="apt-get install chromium chromium-driver; .ci/run installs them")


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

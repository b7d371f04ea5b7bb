"""`tqaforge labelstudio start|stop|status` and the workspace's login, on the run's real Label Studio,
which conftest starts detached with `tqaforge labelstudio start` for a workspace of its own (the
stop test runs last of the whole run). Cases that need no server are in tests/test_hostile_labelstudio.py."""

from __future__ import annotations

import json
import re
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import free_port, wait_for
from typer.testing import CliRunner

from tqaforge.annotation.labelstudio import manage
from tqaforge.annotation.labelstudio.server import (
    DEMO_PASSWORD,
    DEMO_TOKEN,
    LabelStudioError,
    is_healthy,
    token_works,
)
from tqaforge.cli import app

runner = CliRunner(env={"COLUMNS": "200"})


def _tqaforge(*args: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tqaforge", *args], capture_output=True, text=True, timeout=timeout)


def _group(pgid: int) -> list[int]:
    return manage.group_members(pgid)


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_make_run_banner_shows_only_the_demo_login(tmp_path: Path) -> None:
    """The launcher prints the demo login in full (it is public, in the README), a workspace's own
    login only by where it is kept."""
    from tqaforge.launch import _login_lines

    demo = manage.workspace_settings(tmp_path, demo_login=True)
    assert DEMO_PASSWORD in " ".join(_login_lines(tmp_path, demo)) and DEMO_TOKEN in " ".join(_login_lines(tmp_path, demo))
    own = manage.workspace_settings(tmp_path)
    banner = " ".join(_login_lines(tmp_path, own))
    assert own.password not in banner and own.token not in banner and str(manage.credentials_path(tmp_path)) in banner


@pytest.fixture
def managed(label_studio) -> Path:
    """The workspace of the run's Label Studio, which `tqaforge labelstudio start` started (conftest)."""
    return label_studio.root


def test_start_printed_progress_then_ready_and_the_login_without_secrets(managed: Path) -> None:
    output = (managed.parent / "start.out").read_text()
    port = manage.configured_port(managed)
    first = output.splitlines()[0]
    assert first.startswith(f"starting Label Studio on http://127.0.0.1:{port}") and first.endswith(" ready"), first
    credentials = manage.read_credentials(managed)
    assert credentials is not None and str(manage.credentials_path(managed)) in output
    assert credentials.password not in output and credentials.token not in output


def test_start_runs_it_detached_with_a_private_random_login(managed: Path) -> None:
    """The CLI has exited; the server runs on in its own session, with the workspace's own login."""
    credentials = manage.read_credentials(managed)
    assert credentials is not None and not credentials.demo
    assert re.fullmatch(r"[0-9a-f]{40}", credentials.token) and credentials.token != DEMO_TOKEN
    assert credentials.password != DEMO_PASSWORD and len(credentials.password) >= 24
    path = manage.credentials_path(managed)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert set(json.loads(path.read_text())) >= {"url", "username", "password", "token"}
    assert token_works(credentials.url, credentials.token)
    assert not token_works(credentials.url, DEMO_TOKEN)  # not the public demo token
    state = manage.status(managed)
    assert state.running and state.answers and state.pid == int(manage.pid_path(managed).read_text())
    # A session of its own, so closing the terminal that started it does not stop it.
    assert subprocess.run(["ps", "-o", "sid=", "-p", str(state.pid)], capture_output=True, text=True).stdout.strip() \
        == str(state.pid)


def test_client_settings_reach_the_workspace_server(managed: Path) -> None:
    from label_studio_sdk import LabelStudio

    settings = manage.client_settings(managed)
    assert settings.token not in repr(settings)
    client = LabelStudio(base_url=settings.url, api_key=settings.token)
    assert isinstance(list(client.projects.list()), list)


@pytest.mark.hostile
def test_status_never_shows_the_secrets_unless_asked(managed: Path) -> None:
    """Case: `status` printed the admin password and token to the terminal (and logs of it)."""
    credentials = manage.read_credentials(managed)
    assert credentials is not None
    plain = runner.invoke(app, ["-w", str(managed), "labelstudio", "status"])
    as_json = runner.invoke(app, ["-w", str(managed), "labelstudio", "status", "--json"])
    for result in (plain, as_json):
        assert result.exit_code == 0, result.output
        assert credentials.password not in result.output and credentials.token not in result.output
    assert credentials.url in plain.output and str(manage.credentials_path(managed)) in plain.output
    assert f"pid {manage.status(managed).pid}" in plain.output and "answers /health" in plain.output
    data = json.loads(as_json.output)
    assert data["running"] and data["answers"] and data["url"] == credentials.url and "token" not in data
    shown = runner.invoke(app, ["-w", str(managed), "labelstudio", "status", "--json", "--show-secrets"])
    assert json.loads(shown.output)["token"] == credentials.token


@pytest.mark.hostile
def test_no_secret_on_any_command_line(managed: Path) -> None:
    """Case: the login of a `labelstudio start` server showed in `ps` (argv is world-readable)."""
    credentials = manage.read_credentials(managed)
    pid = manage.status(managed).pid
    assert credentials is not None and pid is not None
    listing = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert f"--data-dir {manage.data_dir(managed)}" in listing
    assert credentials.password not in listing and credentials.token not in listing


@pytest.mark.hostile
def test_a_second_start_says_it_runs_and_exits_0(managed: Path) -> None:
    """Case: a second `start` while one runs tried to start another server on the same port."""
    pid = manage.status(managed).pid
    started = time.monotonic()
    again = _tqaforge("-w", str(managed), "labelstudio", "start", timeout=60)
    assert again.returncode == 0, again.stderr
    assert "already running for this workspace" in again.stdout and f"pid {pid}" in again.stdout
    assert time.monotonic() - started < 30
    assert manage.status(managed).pid == pid


def test_make_run_uses_the_running_server_and_leaves_it_running(managed: Path, tmp_path: Path) -> None:
    """`tqaforge serve` (make run) on a workspace whose Label Studio runs: it uses that server (the
    workspace's login, not printed) and leaves it running when it stops."""
    credentials = manage.read_credentials(managed)
    assert credentials is not None
    app_port = free_port()
    out_path = tmp_path / "launcher.out"
    with out_path.open("wb") as out:
        launcher = subprocess.Popen([sys.executable, "-m", "tqaforge.launch", "--workspace", str(managed),
                                     "--app-port", str(app_port)], stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: "stop both with Ctrl-C" in out_path.read_text(errors="replace"), 60, "the launcher's banner")
        output = out_path.read_text(errors="replace")
        assert "already runs for this workspace" in output and credentials.url in output, output
        assert credentials.password not in output and credentials.token not in output, output
        launcher.send_signal(signal.SIGTERM)
        launcher.wait(60)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert manage.status(managed).running and is_healthy(credentials.url)


@pytest.mark.stops_label_studio
def test_stop_ends_the_whole_process_group(managed: Path) -> None:
    """Last of the run (marked): `stop` ends the server and all it spawned, removes the pid file, frees the port."""
    state = manage.status(managed)
    assert state.pid is not None
    port = int(state.url.rsplit(":", 1)[1])
    stopped = runner.invoke(app, ["-w", str(managed), "labelstudio", "stop"])
    assert stopped.exit_code == 0 and f"stopped Label Studio (pid {state.pid})" in stopped.output, stopped.output
    assert not _group(state.pid) and not manage.pid_path(managed).exists()
    wait_for(lambda: not _port_open(port), 10, "the port to be free")
    with pytest.raises(LabelStudioError, match="Label Studio is not running for this workspace") as info:
        manage.client_settings(managed)
    assert "tqaforge labelstudio start" in str(info.value)
    after = runner.invoke(app, ["-w", str(managed), "labelstudio", "status"])
    assert after.exit_code == 3 and "not running" in after.output

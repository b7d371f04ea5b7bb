"""Hostile-input suite, issue 10: the managed Label Studio server and `make run`'s launcher.

Real parts only: a real Label Studio (the session fixture, or one the launcher starts), real
processes whose command lines are read from /proc, real sockets holding ports.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import free_port, wait_for
from prerequisites import unavailable

from tqaforge.annotation.labelstudio.server import (
    LabelStudioError,
    LabelStudioSettings,
    executable,
    is_healthy,
    start_server,
)
from tqaforge.errors import RemoteBindingRefused

pytestmark = pytest.mark.hostile


def _process_group(pgid: int) -> list[int]:
    """Every live process in process group ``pgid`` (the server and all it spawned)."""
    from tqaforge.annotation.labelstudio.manage import group_members

    return group_members(pgid)


def _cmdline(pid: int) -> str:
    return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")


def _require_label_studio() -> None:
    try:
        executable()
    except LabelStudioError as exc:
        unavailable(str(exc), install="make labelstudio; make test installs it")


def _launcher(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[bytes], Path]:
    # Output to a file, not a pipe: an orphaned child would keep a pipe open and hang the read.
    out_path = tmp_path / "launcher.out"
    with out_path.open("wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "tqaforge.launch", "--workspace", str(tmp_path / "ws"), *args],
                                   stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path)
    return process, out_path


def _end(launcher: subprocess.Popen[bytes]) -> None:
    """Stop a launcher the way Ctrl-C would (so it stops its Label Studio too); SIGKILL if stuck."""
    if launcher.poll() is None:
        launcher.send_signal(signal.SIGTERM)
        try:
            launcher.wait(60)
        except subprocess.TimeoutExpired:
            launcher.kill()


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_admin_password_and_token_are_not_on_any_command_line(label_studio) -> None:
    """Case: Label Studio's admin password and token were passed on its command line, visible to
    every local user in `ps`."""
    members = _process_group(label_studio.pid)
    assert label_studio.pid in members
    for pid in members:
        line = _cmdline(pid)
        assert label_studio.settings.password not in line, line
        assert label_studio.settings.token not in line, line
    # ...and still the preset login works: the account came through the environment.
    request = urllib.request.Request(f"{label_studio.url}/api/projects",
                                     headers={"Authorization": f"Token {label_studio.token}"})
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (loopback)
        assert response.status == 200


def test_label_studio_database_and_data_dir_are_private(label_studio) -> None:
    """Case: Label Studio's database was world-readable (0644)."""
    data_dir = label_studio.settings.data_dir
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    database = data_dir / "label_studio.sqlite3"
    assert database.exists()
    assert stat.S_IMODE(database.stat().st_mode) == 0o600
    for path in data_dir.rglob("*"):
        if path.is_symlink():
            continue
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o077 == 0, f"{path} is {oct(mode)}"


def test_launcher_refuses_to_bind_beyond_loopback_without_the_flag(tmp_path: Path) -> None:
    """Case: `HOST=0.0.0.0 make run` exposed both servers without a word; binding beyond loopback
    now needs --allow-remote (ALLOW_REMOTE=1) and is otherwise refused at once."""
    app_port, ls_port = free_port(), free_port()
    started = time.monotonic()
    launcher, out_path = _launcher(tmp_path, "--host", "0.0.0.0", "--app-port", str(app_port), "--ls-port", str(ls_port))
    try:
        code = launcher.wait(30)
    finally:
        _end(launcher)
    output = out_path.read_text(errors="replace")
    assert code != 0, output
    assert time.monotonic() - started < 20, output
    assert "--allow-remote" in output and "ALLOW_REMOTE=1" in output and "0.0.0.0" in output, output
    assert not _port_open(app_port) and not _port_open(ls_port)
    assert not (tmp_path / "ws" / "label-studio").exists()  # nothing was started
    # The library refuses too, so no other caller can expose Label Studio by accident.
    with pytest.raises(RemoteBindingRefused, match="--allow-remote"):
        start_server(LabelStudioSettings(data_dir=tmp_path / "d", host="0.0.0.0", port=ls_port))


def test_taken_port_fails_at_once_naming_the_port(tmp_path: Path) -> None:
    """Case: with its port taken, Label Studio silently moved to the next port and the launcher
    waited 180 s, then blamed Label Studio."""
    _require_label_studio()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(LabelStudioError) as info:
            start_server(LabelStudioSettings(data_dir=tmp_path / "ls", port=port), wait_s=30)
        elapsed = time.monotonic() - started
        assert elapsed < 5, f"took {elapsed:.0f} s: {info.value}"
        assert f"port {port}" in str(info.value) and "in use" in str(info.value)
        assert "LS_PORT=" in str(info.value)
        # The launcher checks the app's port the same way, before starting anything.
        launcher, out_path = _launcher(tmp_path, "--app-port", str(port), "--ls-port", str(free_port()))
        try:
            code = launcher.wait(30)
        finally:
            _end(launcher)
        output = out_path.read_text(errors="replace")
        assert code == 2 and f"port {port}" in output and "APP_PORT=" in output, output
        assert not (tmp_path / "ws" / "label-studio").exists()


def test_launcher_shows_progress_and_an_honest_estimate(tmp_path: Path) -> None:
    """Case: a cold `make run` took 320 s while the launcher said "about 30 s" and printed nothing
    while waiting; it now gives an honest estimate, shows progress, and Label Studio calls nothing outside
    the machine (no PyPI version check, no Sentry)."""
    _require_label_studio()
    app_port, ls_port = free_port(), free_port()
    ls_url = f"http://127.0.0.1:{ls_port}"
    launcher, out_path = _launcher(tmp_path, "--app-port", str(app_port), "--ls-port", str(ls_port))
    try:
        wait_for(lambda: is_healthy(ls_url) and _port_open(app_port), 330, "Label Studio and the app to answer", 0.5)
        wait_for(lambda: "stop both with Ctrl-C" in out_path.read_text(errors="replace"), 30, "the launcher's banner")
        output = out_path.read_text(errors="replace")
        assert "about 10 s; about 90 s the first time on this machine" in output and "about 30 s" not in output, output
        first_line = next(line for line in output.splitlines() if line.startswith("starting Label Studio"))
        # A dot a second while waiting (a new server starts from the install's database template
        # in about 10 s, so the " 10 s " mark may not be reached).
        assert "..." in first_line and first_line.endswith("ready"), first_line
        server_pid = next(pid for pid in _process_group(_ls_group(launcher.pid)) if "label-studio" in _cmdline(pid))
        environ = dict(item.split("=", 1) for item in
                       (Path("/proc") / str(server_pid) / "environ").read_bytes().decode().split("\0") if "=" in item)
        assert environ["LABEL_STUDIO_LATEST_VERSION_CHECK"] == "false" and environ["LABEL_STUDIO_SENTRY_DSN"] == ""
        log = (tmp_path / "ws" / "label-studio" / "label-studio.log").read_text(errors="replace")
        assert "pypi.org" not in log and "sentry.io" not in log
        launcher.send_signal(signal.SIGTERM)
        launcher.wait(60)
        wait_for(lambda: not _port_open(ls_port) and not _port_open(app_port), 30, "both servers to stop", 0.5)
    finally:
        _end(launcher)


def _ls_group(launcher_pid: int) -> int:
    """The process group of the launcher's Label Studio child (it runs in a session of its own)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == launcher_pid and "label-studio" in _cmdline(int(entry.name)):
            return int(fields[2])
    raise AssertionError("the launcher has no Label Studio child")


def test_serve_command_refuses_remote_binding_without_the_flag(tmp_path: Path) -> None:
    """`make run` calls `tqaforge serve`: it passes the binding check through (a real process,
    refused at once, naming the flag) and names a missing workspace instead of starting anything."""
    ws = tmp_path / "ws"
    subprocess.run([sys.executable, "-m", "tqaforge", "init", str(ws)], check=True, capture_output=True)
    refused = subprocess.run([sys.executable, "-m", "tqaforge", "serve", "-w", str(ws), "--host", "0.0.0.0"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2
    assert "--allow-remote" in refused.stderr
    missing = subprocess.run([sys.executable, "-m", "tqaforge", "serve", "-w", str(tmp_path / "nowhere")],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and "not a tqaforge workspace" in missing.stderr


# --- the workspace's server: `tqaforge labelstudio start|stop|status` (no real server needed here;
# the cases that need one run against the one server of tests/test_labelstudio_manage.py) ---


def _tqaforge(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tqaforge", *args], capture_output=True, text=True, timeout=timeout)


def _init(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    assert _tqaforge("init", str(root)).returncode == 0
    return root


def test_labelstudio_start_on_a_taken_port_fails_at_once_naming_it(tmp_path: Path) -> None:
    """Case: `tqaforge labelstudio start` with its port taken waited minutes for a server that
    had moved to another port (or answered for another workspace)."""
    from tqaforge.annotation.labelstudio import manage

    _require_label_studio()
    root = _init(tmp_path)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        started = time.monotonic()
        result = _tqaforge("-w", str(root), "labelstudio", "start", "--port", str(port))
        elapsed = time.monotonic() - started
    assert result.returncode == 1 and elapsed < 10, (elapsed, result.stderr)
    assert f"port {port}" in result.stderr and "in use" in result.stderr and "--port" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    # Nothing was started or written: no pid file, no login made for a server that never ran.
    assert not manage.pid_path(root).exists() and not manage.credentials_path(root).exists()


def _fake_label_studio(tmp_path: Path, data_dir: Path, *, ignore_term: bool = False) -> subprocess.Popen[bytes]:
    """A process whose command line looks like `label-studio start --data-dir DATA_DIR` (its own session)."""
    script = tmp_path / "bin" / "label-studio"
    script.parent.mkdir(exist_ok=True)
    script.write_text("#!/bin/sh\n" + ("trap '' TERM\n" if ignore_term else "") + "while :; do sleep 0.2; done\n")
    script.chmod(0o700)
    process = subprocess.Popen(["/bin/sh", str(script), "start", "--data-dir", str(data_dir)], start_new_session=True)
    wait_for(lambda: "label-studio" in _cmdline(process.pid), 10, "the fake server to exec")
    return process


def test_stale_pid_files_are_removed_and_nothing_else_is_signalled(tmp_path: Path) -> None:
    """Case: `stop` with a pid file left by a crashed server either failed, or signalled whatever
    process had since been given that pid."""
    from tqaforge.annotation.labelstudio import manage

    root = _init(tmp_path)
    pid_file = manage.pid_path(root)
    pid_file.parent.mkdir(mode=0o700)
    # The process is gone.
    gone = subprocess.Popen(["true"])
    gone.wait()
    pid_file.write_text(f"{gone.pid}\n")
    assert manage.status(root).stale == f"process {gone.pid} is gone" and not manage.status(root).running
    result = _tqaforge("-w", str(root), "labelstudio", "stop")
    assert result.returncode == 0 and "stale pid file" in result.stdout and "is gone" in result.stdout, result.stdout
    assert not pid_file.exists()
    # The pid now belongs to another program, or to a Label Studio of another data directory: left alone.
    other = subprocess.Popen(["sleep", "300"], start_new_session=True)
    elsewhere = _fake_label_studio(tmp_path, tmp_path / "another-workspace" / "label-studio")
    try:
        for process in (other, elsewhere):
            pid_file.write_text(f"{process.pid}\n")
            stopped = manage.stop(root, timeout=2)
            assert stopped.stale is not None and "not this workspace's Label Studio" in stopped.stale, stopped
            assert process.poll() is None, "a process that is not our server was signalled"
            assert not pid_file.exists()
        pid_file.write_text("garbage\n")
        assert "not a pid" in (manage.stop(root).stale or "")
    finally:
        for process in (other, elsewhere):
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_stop_kills_a_server_that_ignores_sigterm(tmp_path: Path) -> None:
    """Case: a server stuck in shutdown kept its port forever; `stop` sends SIGKILL to its whole
    process group after the timeout."""
    from tqaforge.annotation.labelstudio import manage

    root = _init(tmp_path)
    server = _fake_label_studio(tmp_path, manage.data_dir(root), ignore_term=True)
    try:
        manage.data_dir(root).mkdir(mode=0o700)
        manage.pid_path(root).write_text(f"{server.pid}\n")
        assert manage.status(root).running
        started = time.monotonic()
        stopped = manage.stop(root, timeout=1)
        assert stopped.killed and stopped.pid == server.pid and "killed after 1 s" in stopped.message
        assert time.monotonic() - started < 15
        server.wait(5)  # ended (stop reaped it already: it is this test's child)
        # Its children too (a zombie has ended and is not counted; init reaps it when it gets to it).
        assert _process_group(server.pid) == []
        assert not manage.pid_path(root).exists()
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)


def test_credentials_file_is_private_whatever_the_umask(tmp_path: Path) -> None:
    """Case: the admin password and token were written world-readable (umask 022, or 000)."""
    from tqaforge.annotation.labelstudio import manage

    root = tmp_path / "ws"
    (root / "label-studio").mkdir(parents=True, mode=0o755)
    (root / "label-studio").chmod(0o755)
    old = os.umask(0)
    try:
        settings = manage.workspace_settings(root)
        path = manage.write_credentials(root, manage.Credentials(settings.url, settings.username, settings.password,
                                                                 settings.token))
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert manage.read_credentials(root) == manage.Credentials(settings.url, settings.username, settings.password,
                                                               settings.token)


def test_each_workspace_gets_its_own_random_login_and_only_the_demo_the_public_one(tmp_path: Path) -> None:
    """Case: every workspace's Label Studio had the public demo login of the README."""
    from tqaforge.annotation.labelstudio import manage
    from tqaforge.annotation.labelstudio.server import DEMO_PASSWORD, DEMO_TOKEN

    first, second = manage.workspace_settings(tmp_path / "a"), manage.workspace_settings(tmp_path / "b")
    assert len({first.token, second.token, DEMO_TOKEN}) == 3 and DEMO_PASSWORD not in (first.password, second.password)
    assert first.token not in repr(first) and first.password not in repr(first)
    demo = manage.workspace_settings(tmp_path / "demo", demo_login=True)
    assert (demo.password, demo.token, demo.demo_login) == (DEMO_PASSWORD, DEMO_TOKEN, True)
    # Once a workspace has a login, it keeps it: --demo-login does not replace it.
    manage.write_credentials(tmp_path / "a", manage.Credentials(first.url, first.username, first.password, first.token))
    assert manage.workspace_settings(tmp_path / "a", demo_login=True).token == first.token
    # A database made by an earlier tqaforge (always the demo login) keeps working with that login.
    (tmp_path / "old" / "label-studio").mkdir(parents=True)
    (tmp_path / "old" / "label-studio" / "label_studio.sqlite3").write_bytes(b"")
    assert manage.workspace_settings(tmp_path / "old").token == DEMO_TOKEN


def test_status_when_stopped_says_so_without_secrets(tmp_path: Path) -> None:
    """Case: `status` of a stopped server printed its login, or failed instead of saying "not running";
    and sync code reached a server that was not running with a bare connection error."""
    from tqaforge.annotation.labelstudio import manage

    root = _init(tmp_path)
    with pytest.raises(LabelStudioError, match="Label Studio is not running for this workspace") as info:
        manage.client_settings(root)
    assert "tqaforge labelstudio start" in str(info.value)
    from typer.testing import CliRunner

    from tqaforge.cli import app

    def run(*args: str) -> tuple[int, str]:
        result = CliRunner(env={"COLUMNS": "200"}).invoke(app, ["-w", str(root), "labelstudio", *args])
        return result.exit_code, result.output

    code, output = run("status")
    assert code == 3 and "not running" in output and "none yet" in output, output
    settings = manage.workspace_settings(root, port=free_port())
    manage.write_credentials(root, manage.Credentials(settings.url, settings.username, settings.password, settings.token))
    for args in ((), ("--json",)):
        code, output = run("status", *args)
        assert code == 3, output
        assert settings.password not in output and settings.token not in output
        assert str(manage.credentials_path(root)) in output and settings.url in output
    assert json.loads(run("status", "--json")[1])["running"] is False
    code, output = run("stop")
    assert code == 0 and "not running" in output
    with pytest.raises(LabelStudioError, match="not running for this workspace"):
        manage.client_settings(root)

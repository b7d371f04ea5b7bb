"""Hostile-input suite, issue 10: the managed Label Studio server and `make run`'s launcher.

Real parts only: a real Label Studio (the session fixture, or one the launcher starts), real
processes whose command lines are read from /proc, real sockets holding ports.
"""

from __future__ import annotations

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
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended while we looked
        if int(fields[2]) == pgid:  # fields after "pid (comm)": state, ppid, pgrp
            members.append(int(entry.name))
    return members


def _cmdline(pid: int) -> str:
    return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")


def _require_label_studio() -> None:
    try:
        executable()
    except LabelStudioError as exc:
        pytest.skip(str(exc))


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
    members = _process_group(label_studio.process.pid)
    assert label_studio.process.pid in members
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
    while waiting; it now says about 90 s, shows progress, and Label Studio calls nothing outside
    the machine (no PyPI version check, no Sentry)."""
    _require_label_studio()
    app_port, ls_port = free_port(), free_port()
    ls_url = f"http://127.0.0.1:{ls_port}"
    launcher, out_path = _launcher(tmp_path, "--app-port", str(app_port), "--ls-port", str(ls_port))
    try:
        wait_for(lambda: is_healthy(ls_url) and _port_open(app_port), 330, "Label Studio and the app to answer", 0.5)
        wait_for(lambda: "stop both with Ctrl-C" in out_path.read_text(errors="replace"), 30, "the launcher's banner")
        output = out_path.read_text(errors="replace")
        assert "about 90 s on first start" in output and "about 30 s" not in output, output
        first_line = next(line for line in output.splitlines() if line.startswith("starting Label Studio"))
        assert "..." in first_line and " 10 s " in first_line and first_line.endswith("ready"), first_line
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

"""The local Label Studio server: a real one, started and stopped by a fixture."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import free_port, wait_for
from label_studio_sdk import LabelStudio
from prerequisites import unavailable

from tqaforge.annotation.labelstudio.server import LabelStudioError, LabelStudioSettings, start_server


def test_preset_account_token_works_and_data_persist(label_studio) -> None:
    client = LabelStudio(base_url=label_studio.url, api_key=label_studio.token)
    project = client.projects.create(
        title="smoke", label_config='<View><Text name="t" value="$text"/><Choices name="c" toName="t"><Choice value="a"/></Choices></View>'
    )
    titles = [p.title for p in client.projects.list()]
    assert "smoke" in titles
    client.projects.delete(id=project.id)


def test_wrong_token_is_refused(label_studio) -> None:
    client = LabelStudio(base_url=label_studio.url, api_key="0" * 40)
    with pytest.raises(Exception) as info:
        list(client.projects.list())
    assert "401" in str(info.value)


def test_a_second_server_on_the_same_port_is_refused(label_studio, tmp_path: Path) -> None:
    with pytest.raises(LabelStudioError, match="already answers"):
        start_server(LabelStudioSettings(data_dir=tmp_path, port=label_studio.settings.port))


def test_missing_installation_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LabelStudioError) as info:
        start_server(LabelStudioSettings(data_dir=tmp_path / "d", venv=tmp_path / "nowhere", port=free_port()))
    assert "make labelstudio" in (info.value.hint or "")


def _port_open(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.parametrize("when", ["starting"])
def test_launcher_stopped_by_sigterm_leaves_no_server_behind(tmp_path: Path, when: str) -> None:
    """`make run` killed with SIGTERM (or its terminal closed) stops Label Studio and the app
    while Label Studio is still starting. (Once both are up: the hostile suite's
    test_launcher_shows_progress_and_an_honest_estimate, which saves a Label Studio start.)"""
    import os
    import signal
    import subprocess
    import sys

    from tqaforge.annotation.labelstudio.server import executable, is_healthy

    try:
        executable()
    except LabelStudioError as exc:
        unavailable(str(exc), install="make labelstudio; make test installs it")
    app_port, ls_port = free_port(), free_port()
    ls_url = f"http://127.0.0.1:{ls_port}"
    # Output to a file, not a pipe: an orphaned child would keep a pipe open and hang the read.
    out_path = tmp_path / "launcher.out"
    with out_path.open("wb") as out:
        launcher = subprocess.Popen(
            [sys.executable, "-m", "tqaforge.launch", "--workspace", str(tmp_path / "ws"),
             "--app-port", str(app_port), "--ls-port", str(ls_port)],
            stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path,
        )
    try:
        if when == "running":
            wait_for(lambda: is_healthy(ls_url) and _port_open(app_port), 180, "Label Studio and the app to answer", 0.5)
        else:
            # Label Studio's process exists (its log file appears) but does not answer yet.
            log = tmp_path / "ws" / "label-studio" / "label-studio.log"
            wait_for(log.exists, 60, "Label Studio's log file", 0.2)
            assert not is_healthy(ls_url)
        launcher.send_signal(signal.SIGTERM)
        code = launcher.wait(60)
        output = out_path.read_text(errors="replace")
        assert code in (0, 130, -signal.SIGINT, 143), output
        wait_for(lambda: not is_healthy(ls_url) and not _port_open(ls_port), 30, "Label Studio to stop", 0.5)
        wait_for(lambda: not _port_open(app_port), 30, "the app to stop", 0.5)
    finally:
        if launcher.poll() is None:
            os.kill(launcher.pid, signal.SIGKILL)


def test_make_run_passes_allow_remote_only_when_asked() -> None:
    """`HOST=0.0.0.0 make run` alone must not allow remote binding; ALLOW_REMOTE=1 must; the demo
    workspace starts with the demo login."""
    import subprocess

    repo = Path(__file__).resolve().parents[1]

    def launch_line(*assignments: str) -> str:
        dry = subprocess.run(["make", "-n", "run", *assignments], cwd=repo, capture_output=True, text=True, check=True)
        return dry.stdout.split("tqaforge serve", 1)[1]

    assert "--allow-remote" not in launch_line("HOST=0.0.0.0")
    assert "--allow-remote" in launch_line("HOST=0.0.0.0", "ALLOW_REMOTE=1")
    # The demo workspace gets the README's public demo login (any other workspace a random one).
    assert "--demo-login" in launch_line() and "--workspace demo-workspace" in launch_line()


def test_remote_warning_says_who_reaches_what_with_which_login(tmp_path: Path) -> None:
    """With --allow-remote the launcher warns: both ports, the app's sign-in, the public demo
    login for Label Studio."""
    from tqaforge.launch import _parse, remote_warning

    args = _parse(["--workspace", str(tmp_path), "--host", "0.0.0.0", "--allow-remote",
                   "--app-port", "8501", "--ls-port", "8080"])
    settings = LabelStudioSettings(data_dir=tmp_path, host="0.0.0.0", port=8080, allow_remote=True)
    warning = remote_warning(args, settings, "sign-in required: 2 app users")
    assert "0.0.0.0" in warning and "8501" in warning and "8080" in warning
    assert "sign-in required: 2 app users" in warning and settings.password in warning and settings.token in warning

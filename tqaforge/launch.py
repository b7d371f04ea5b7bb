"""``make run``: Label Studio and the Streamlit app side by side on 127.0.0.1.

Starts Label Studio (its own virtualenv, see ``[labelstudio] venv``; data under
``WORKSPACE/label-studio``), prints both URLs and the logins, then runs the app in the
foreground; Ctrl-C stops both, and so do SIGTERM and SIGHUP (``kill``, a closed terminal), so no
Label Studio is left holding its port. Without Label Studio installed the app still starts, with
a note saying how to install it.

Both servers listen on loopback only. Another address (``--host 0.0.0.0``) is refused unless
``--allow-remote`` (``ALLOW_REMOTE=1 make run``) says so, and then a warning says who can reach
what. A taken port is reported before anything starts.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

from tqaforge.annotation.labelstudio.server import (
    STARTUP_ESTIMATE,
    LabelStudioError,
    LabelStudioSettings,
    RunningServer,
    check_host_allowed,
    check_label_studio_port,
    check_port_free,
    http_url,
    is_loopback,
    resolve_venv,
    start_server,
)
from tqaforge.config import WorkspacePaths, load_config
from tqaforge.errors import ConfigError, ServerBindError

APP = Path(__file__).resolve().parent / "app" / "Home.py"
ALLOW_FLAG = "--allow-remote (ALLOW_REMOTE=1 for make run)"


def _stop_like_ctrl_c(signum: int, _frame: object) -> None:
    # Python's default for SIGTERM/SIGHUP ends the process without running `finally`, which
    # would leave Label Studio (its own process group) running.
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tqaforge.launch", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--host", default="127.0.0.1", help="address both servers listen on (default: loopback)")
    parser.add_argument("--allow-remote", action="store_true",
                        help="allow a --host other machines can reach (both servers, with the printed logins)")
    parser.add_argument("--app-port", type=int, default=8501)
    parser.add_argument("--ls-port", type=int, default=8080)
    parser.add_argument("--no-label-studio", action="store_true")
    return parser.parse_args(argv)


def label_studio_settings(args: argparse.Namespace, workspace: Path) -> LabelStudioSettings:
    """Label Studio's settings: data in the workspace's ``label-studio/``, the virtualenv of
    ``[labelstudio] venv`` (or what :func:`resolve_venv` finds), host and port from ``args``."""
    paths = WorkspacePaths(workspace)
    # The launcher may run before `init` made the workspace: no config, the defaults.
    configured = load_config(paths.config).labelstudio.venv_path(workspace) if paths.config.is_file() else None
    return LabelStudioSettings(data_dir=paths.label_studio, host=args.host, port=args.ls_port,
                               allow_remote=args.allow_remote, venv=resolve_venv(configured))


def check_before_start(args: argparse.Namespace, settings: LabelStudioSettings) -> None:
    """Everything that can be known to fail before starting anything: the host and both ports."""
    check_host_allowed(args.host, allow_remote=args.allow_remote, server_name="the app and Label Studio",
                       flag=ALLOW_FLAG)
    check_port_free(args.host, args.app_port, server_name="the tqaforge app",
                    other_port_hint=f"choose another port: `make run APP_PORT={args.app_port + 1}` (or --app-port)")
    if not args.no_label_studio:
        if args.app_port == args.ls_port:
            raise ServerBindError(f"the app and Label Studio cannot both use port {args.app_port}",
                                  hint="give them different ports (APP_PORT=..., LS_PORT=...)")
        check_label_studio_port(settings)


def remote_warning(args: argparse.Namespace, settings: LabelStudioSettings) -> str:
    """What binding beyond loopback exposes, to whom, with which login."""
    lines = [
        f"WARNING: listening on {args.host}, not on loopback: anyone who can reach this machine",
        f"  - on port {args.app_port} can use the tqaforge app with no login (it reads and changes the workspace);",
    ]
    if not args.no_label_studio:
        lines.append(f"  - on port {args.ls_port} can use Label Studio as admin with the login {settings.username} / "
                     f"{settings.password} and API token {settings.token}, which are the public demo")
        lines.append("    credentials from the README: change the password in Label Studio (Account & Settings) first.")
    lines.append("  Use a firewall or an SSH tunnel (ssh -L) instead if only you need to reach them.")
    return "\n".join(lines)


def _start_label_studio(settings: LabelStudioSettings) -> RunningServer | None:
    """Start Label Studio, printing progress; None (with a note) when it cannot start."""
    print(f"starting Label Studio on {settings.url} ({STARTUP_ESTIMATE}) ", end="", flush=True)

    def progress(elapsed: float) -> None:
        # One mark a second, the seconds every ten, so a long first start never looks hung.
        second = int(elapsed)
        print(f" {second} s " if second and second % 10 == 0 else ".", end="", flush=True)

    try:
        server = start_server(settings, on_wait=progress)
    except LabelStudioError as exc:
        print("", flush=True)
        print(f"Label Studio not started: {exc}", file=sys.stderr)
        return None
    print(" ready", flush=True)
    return server


def main(argv: list[str] | None = None) -> int:
    """Run Label Studio and the app until Ctrl-C; the exit code is the app's (2 when refused)."""
    args = _parse(argv)
    workspace = args.workspace.resolve()
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _stop_like_ctrl_c)
    try:
        settings = label_studio_settings(args, workspace)
        check_before_start(args, settings)
    except (ServerBindError, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not is_loopback(args.host):
        print(remote_warning(args, settings), file=sys.stderr, flush=True)

    server: RunningServer | None = None
    if not args.no_label_studio:
        try:
            server = _start_label_studio(settings)
        except KeyboardInterrupt:
            return 130  # interrupted while Label Studio started; start_server stopped it
    print("")
    print(f"  tqaforge app:   {http_url(args.host, args.app_port)}   (workspace: {workspace}; no login needed)")
    if server is not None:
        print(f"  Label Studio:   {server.url}   login {settings.username} / {settings.password}")
        print(f"                  API token {settings.token}")
    print("  stop both with Ctrl-C\n", flush=True)
    return _run_app(args, workspace, server)


def _run_app(args: argparse.Namespace, workspace: Path, server: RunningServer | None) -> int:
    """Run the app in the foreground; stop it and Label Studio on Ctrl-C, SIGTERM or SIGHUP."""
    env = {**os.environ, "TQAFORGE_WORKSPACE": str(workspace)}
    if server is not None:
        env.update(LABEL_STUDIO_URL=server.url, LABEL_STUDIO_API_KEY=server.token)
    try:
        app = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(APP), "--server.address", args.host,
             "--server.port", str(args.app_port), "--server.headless", "true",
             "--browser.gatherUsageStats", "false"],
            env=env,
        )
        try:
            return app.wait()
        except KeyboardInterrupt:
            app.terminate()
            return app.wait()
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    raise SystemExit(main())

"""``make run``: Label Studio and the Streamlit app side by side on 127.0.0.1.

Starts Label Studio (its own virtualenv, data under ``WORKSPACE/label-studio``), prints both
URLs and the logins, then runs the app in the foreground; Ctrl-C stops both, and so do SIGTERM
and SIGHUP (``kill``, a closed terminal), so no Label Studio is left holding its port. Without
Label Studio installed the app still starts, with a note saying how to install it.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

from tqaforge.annotation.labelstudio.server import LabelStudioError, LabelStudioSettings, RunningServer, start_server

APP = Path(__file__).resolve().parent / "app" / "Home.py"


def _stop_like_ctrl_c(signum: int, _frame: object) -> None:
    # Python's default for SIGTERM/SIGHUP ends the process without running `finally`, which
    # would leave Label Studio (its own process group) running.
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    """Run Label Studio and the app until Ctrl-C; the exit code is the app's."""
    parser = argparse.ArgumentParser(prog="python -m tqaforge.launch", description=__doc__)
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--app-port", type=int, default=8501)
    parser.add_argument("--ls-port", type=int, default=8080)
    parser.add_argument("--no-label-studio", action="store_true")
    args = parser.parse_args(argv)
    workspace = args.workspace.resolve()
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _stop_like_ctrl_c)

    server: RunningServer | None = None
    settings = LabelStudioSettings(data_dir=workspace / "label-studio", host=args.host, port=args.ls_port)
    if not args.no_label_studio:
        print(f"starting Label Studio on {settings.url} (about 30 s) ...", flush=True)
        try:
            server = start_server(settings)
        except LabelStudioError as exc:
            print(f"Label Studio not started: {exc}" + (f"\n  hint: {exc.hint}" if exc.hint else ""), file=sys.stderr)
        except KeyboardInterrupt:
            return 130  # interrupted while Label Studio started; start_server stopped it
    print("")
    print(f"  tqaforge app:   http://{args.host}:{args.app_port}   (workspace: {workspace}; no login needed)")
    if server is not None:
        print(f"  Label Studio:   {server.url}   login {settings.username} / {settings.password}")
        print(f"                  API token {settings.token}")
    print("  stop both with Ctrl-C\n", flush=True)
    env = {**os.environ, "TQAFORGE_WORKSPACE": str(workspace)}
    if server is not None:
        env.update(LABEL_STUDIO_URL=server.url, LABEL_STUDIO_API_KEY=server.token)
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

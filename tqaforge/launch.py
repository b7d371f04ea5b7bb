"""``make run``: Label Studio and the Streamlit app side by side on loopback.

In a workspace whose annotators have servers of their own (``tqaforge annotators add``), every
annotator's server is started in parallel (each on its own address, 127.0.0.2, 127.0.0.3, ...)
and each one's URL and login is printed; Ctrl-C stops those this launcher started. Otherwise:

Starts the workspace's Label Studio with :func:`tqaforge.annotation.labelstudio.manage.start`, the
function behind ``tqaforge labelstudio start`` (its own virtualenv, see ``[labelstudio] venv``; data
and login under ``WORKSPACE/label-studio``), prints both URLs and the logins, then runs the app in
the foreground; Ctrl-C stops both, and so do SIGTERM and SIGHUP (``kill``, a closed terminal), so
no Label Studio is left holding its port. A Label Studio that ``tqaforge labelstudio start`` already
runs for the workspace is used as it is and left running. Without Label Studio installed the app
still starts, with a note saying how to install it.

The login is the workspace's own (random, in ``label-studio/credentials.json``); ``--demo-login``
(which ``make run`` passes for its demo workspace) gives a new workspace the README's public demo
login instead.

Both servers listen on loopback only. Another address (``--host 0.0.0.0``) is refused unless
``--allow-remote`` (``ALLOW_REMOTE=1 make run``) says so, and then a warning says who can reach
what. Beyond loopback the app requires a login: an app user of the workspace (``tqaforge app users
add NAME``, :mod:`tqaforge.logins`) or Streamlit's OIDC ``[auth]`` in ``.streamlit/secrets.toml``;
without either the launcher refuses before it binds or starts anything. ``--require-login`` asks
for the login on loopback too (a shared machine; the tests). A taken port is reported before
anything starts.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

from tqaforge.annotation.labelstudio import manage
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
)
from tqaforge.arrow_memory import prefer_system_allocator
from tqaforge.errors import ConfigError, LoginError, LoginRequired, ServerBindError, TqaforgeError
from tqaforge.logins import LOGIN_ENV, oidc_secrets_file, read_users, users_file
from tqaforge.redact import redact_url

APP = Path(__file__).resolve().parent / "app" / "main" / "Home.py"
ALLOW_FLAG = "--allow-remote (ALLOW_REMOTE=1 for make run)"
#: Streamlit settings the app is served with, wherever it is started from (a
#: ``.streamlit/config.toml`` is read from the working directory only): the toolbar shows no
#: "Deploy" button (there is nothing to deploy to). Not ``client.showSidebarNavigation = false``:
#: it hides ``st.navigation``'s sidebar too; Streamlit's own sidebar of file names is avoided
#: where it came from (see tqaforge/app/main/Home.py).
STREAMLIT_OPTIONS = (
    "--server.headless", "true", "--browser.gatherUsageStats", "false", "--client.toolbarMode", "minimal",
)


def app_command(host: str, port: int) -> list[str]:
    """The command that serves the app (Home.py) on ``host``:``port`` with :data:`STREAMLIT_OPTIONS`."""
    return [sys.executable, "-m", "streamlit", "run", str(APP), "--server.address", host, "--server.port", str(port),
            *STREAMLIT_OPTIONS]


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
    parser.add_argument("--require-login", action="store_true",
                        help="require a sign-in to the app on loopback too (beyond loopback it always is)")
    parser.add_argument("--app-port", type=int, default=8501)
    parser.add_argument("--ls-port", type=int, default=None, help="default: [labelstudio] port, else 8080")
    parser.add_argument("--demo-login", action="store_true",
                        help="a new workspace gets the README's public demo login (make run's demo workspace)")
    parser.add_argument("--push-pending", action="store_true",
                        help="once Label Studio answers, push every kind's pending items to it, one copy each (make run's demo)")
    parser.add_argument("--no-label-studio", action="store_true")
    return parser.parse_args(argv)


def push_pending_lines(workspace: Path) -> list[str]:
    """Push every kind's pending items to the workspace's own Label Studio, one copy each
    (:func:`tqaforge.annotation.labelstudio.sync.push_pending`), shared among its annotator
    accounts, or to the admin's login when it has none (the demo's: whoever opens it labels): a
    line per kind that has items, or the reason nothing was pushed. Pushing again sends nothing new."""
    from tqaforge.annotation.labelstudio.annotators import list_accounts
    from tqaforge.annotation.labelstudio.sync import PushOptions, push_pending
    from tqaforge.store import open_workspace

    try:
        ws = open_workspace(workspace)
        try:
            settings = manage.connection(ws)
            credentials = manage.read_credentials(ws)
            people = None if list_accounts(settings) or credentials is None else [credentials.username]
            summaries = push_pending(ws, settings, people, PushOptions(overlap=1))
        finally:
            ws.close()
    except TqaforgeError as exc:
        return [f"nothing pushed to Label Studio: {exc}"]
    return [f"pushed {s.lines()[0]}" for s in summaries if s.pending]


def label_studio_settings(args: argparse.Namespace, workspace: Path) -> LabelStudioSettings:
    """Label Studio's settings (:func:`manage.workspace_settings`): data and login in the
    workspace's ``label-studio/``, the virtualenv of ``[labelstudio] venv``, host and port from
    ``args`` (port: else ``[labelstudio] port``, else 8080). The launcher may run before ``init``
    made the workspace: no config, the defaults."""
    return manage.workspace_settings(workspace, port=args.ls_port, host=args.host, allow_remote=args.allow_remote,
                                     demo_login=args.demo_login)


def login_needed(args: argparse.Namespace) -> bool:
    """Whether the app must ask for a sign-in: beyond loopback always, on loopback with ``--require-login``."""
    return bool(args.require_login) or not is_loopback(args.host)


def check_login_ready(args: argparse.Namespace, workspace: Path) -> str:
    """When :func:`login_needed`, how the app's visitors sign in (for the banner); refused
    (:class:`LoginRequired`) when they could not: no app user and no OIDC ``[auth]``. A users
    file that cannot be trusted is a :class:`LoginError`. Reads files only: nothing is bound."""
    if not login_needed(args):
        return "no login needed"
    users = read_users(workspace)
    oidc = oidc_secrets_file(Path.cwd())
    ways = ([f"{len(users)} app user{'s' * (len(users) != 1)} ({users_file(workspace)})"] if users else []) + \
        ([f"OIDC ({oidc})"] if oidc else [])
    if not ways:
        where = "beyond loopback" if not is_loopback(args.host) else "with --require-login"
        raise LoginRequired(
            f"refusing to start the app on {args.host} {where} without a login: no app user in "
            f"{users_file(workspace)} and no Streamlit [auth] section in .streamlit/secrets.toml",
            hint=f"add a user first: `tqaforge --workspace {workspace} app users add NAME` (then start again), "
                 "or configure Streamlit's OIDC login in .streamlit/secrets.toml",
        )
    return "sign-in required: " + ", ".join(ways)


def check_before_start(args: argparse.Namespace, settings: LabelStudioSettings, *, ls_running: bool = False,
                       workspace: Path | None = None) -> str:
    """Everything that can be known to fail before starting anything: the host, the app's login
    (:func:`check_login_ready`, for ``workspace``) and both ports (not Label Studio's when
    ``ls_running``: the workspace's server already has it). Returns how the app is signed in to."""
    check_host_allowed(args.host, allow_remote=args.allow_remote, server_name="the app and Label Studio",
                       flag=ALLOW_FLAG)
    app_login = check_login_ready(args, workspace or args.workspace.resolve())
    check_port_free(args.host, args.app_port, server_name="the tqaforge app",
                    other_port_hint=f"choose another port: `make run APP_PORT={args.app_port + 1}` (or --app-port)")
    if not args.no_label_studio:
        if args.app_port == settings.port:
            raise ServerBindError(f"the app and Label Studio cannot both use port {args.app_port}",
                                  hint="give them different ports (APP_PORT=..., LS_PORT=...)")
        if not ls_running:
            check_label_studio_port(settings)
    return app_login


def remote_warning(args: argparse.Namespace, settings: LabelStudioSettings, app_login: str) -> str:
    """What binding beyond loopback exposes, to whom, with which login (``app_login``: the app's,
    from :func:`check_login_ready`)."""
    lines = [
        f"WARNING: listening on {args.host}, not on loopback: anyone who can reach this machine",
        f"  - on port {args.app_port} reaches the tqaforge app ({app_login}); whoever signs in reads and changes "
        "the workspace;",
    ]
    if not args.no_label_studio:
        lines.append(f"  - on port {settings.port} can use Label Studio as admin with the login {settings.username} / "
                     f"{settings.password} and API token {settings.token}, if they know them;")
        if settings.demo_login:
            lines.append("    these are the public demo credentials from the README: change the password in Label Studio "
                         "(Account & Settings) first.")
        else:
            lines.append(f"    they are this workspace's own, kept in {settings.data_dir / manage.CREDENTIALS_NAME}.")
    lines.append("  Use a firewall or an SSH tunnel (ssh -L) instead if only you need to reach them.")
    return "\n".join(lines)


def print_progress(elapsed: float) -> None:
    """One mark a second, the seconds every ten, so a long first start never looks hung."""
    second = int(elapsed)
    print(f" {second} s " if second and second % 10 == 0 else ".", end="", flush=True)


def _start_label_studio(workspace: Path, settings: LabelStudioSettings) -> manage.StartResult | None:
    """Start the workspace's Label Studio, printing progress; None (with a note) when it cannot start."""
    print(f"starting Label Studio on {redact_url(settings.url)} ({STARTUP_ESTIMATE}) ", end="", flush=True)
    try:
        result = manage.start(workspace, settings=settings, on_wait=print_progress,
                              on_note=lambda text: print(f"\nnote: {text}", file=sys.stderr, flush=True))
    except LabelStudioError as exc:
        print("", flush=True)
        print(f"Label Studio not started: {exc}", file=sys.stderr)
        return None
    print(" already running (started by another command meanwhile)" if result.already_running else " ready", flush=True)
    return result


def _login_lines(workspace: Path, settings: LabelStudioSettings) -> list[str]:
    """The banner's login: the demo's in full (it is public), a workspace's own by where it is kept."""
    if settings.demo_login:
        return [f"login {settings.username} / {settings.password}", f"API token {settings.token}"]
    return [f"login {settings.username}; password and API token in {manage.credentials_path(workspace)}",
            "(`tqaforge labelstudio status --show-secrets` prints them)"]


def main(argv: list[str] | None = None) -> int:
    """Run Label Studio and the app until Ctrl-C; the exit code is the app's (2 when refused)."""
    args = _parse(argv)
    workspace = args.workspace.resolve()
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _stop_like_ctrl_c)
    from tqaforge.annotation.labelstudio.annotator_servers import annotator_servers

    if not args.no_label_studio and annotator_servers(workspace):
        return _run_with_annotator_servers(args, workspace)
    try:
        settings = label_studio_settings(args, workspace)
        running = None if args.no_label_studio else manage.status(workspace)
        app_login = check_before_start(args, settings, ls_running=bool(running and running.running), workspace=workspace)
    except (ServerBindError, ConfigError, LabelStudioError, LoginError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not is_loopback(args.host):
        print(remote_warning(args, settings, app_login), file=sys.stderr, flush=True)

    server: RunningServer | None = None  # the Label Studio this launcher started (and stops)
    ls_url: str | None = None
    if running is not None and running.running:
        ls_url = running.url
        print(f"Label Studio already runs for this workspace (pid {running.pid}); it keeps running after Ctrl-C "
              "(`tqaforge labelstudio stop` stops it)", flush=True)
    elif not args.no_label_studio:
        try:
            result = _start_label_studio(workspace, settings)
        except KeyboardInterrupt:
            return 130  # interrupted while Label Studio started; manage.start stopped it
        if result is not None:
            server, ls_url = result.server, result.url
    if args.push_pending and ls_url is not None:
        for line in push_pending_lines(workspace):
            print(f"  {line}", flush=True)
    print("")
    # Every URL printed goes through the one redaction (the host was checked to hold no login).
    print(f"  tqaforge app:   {redact_url(http_url(args.host, args.app_port))}   (workspace: {workspace}; {app_login})")
    if ls_url is not None:
        login = _login_lines(workspace, settings)
        print(f"  Label Studio:   {redact_url(ls_url)}   {login[0]}")
        for line in login[1:]:
            print(f"                  {line}")
    print("  stop both with Ctrl-C\n", flush=True)
    return _run_app(args, workspace, server, ls_url, settings.token)


def _run_with_annotator_servers(args: argparse.Namespace, workspace: Path) -> int:
    """Start every annotator's server in parallel, print each URL and login, run the app; stop the
    servers this launcher started when the app ends."""
    from tqaforge.annotation.labelstudio.annotator_servers import annotator_servers, login_lines, start_servers

    try:
        check_host_allowed(args.host, allow_remote=args.allow_remote, server_name="the app", flag=ALLOW_FLAG)
        app_login = check_login_ready(args, workspace)
        check_port_free(args.host, args.app_port, server_name="the tqaforge app",
                        other_port_hint=f"choose another port: `make run APP_PORT={args.app_port + 1}` (or --app-port)")
    except (ServerBindError, ConfigError, LoginError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"starting the annotators' Label Studio servers in parallel ({STARTUP_ESTIMATE} each)", flush=True)
    servers = annotator_servers(workspace)
    running_before = {server for server in servers if manage.status(server).running}
    try:
        started = start_servers(workspace, on_ready=lambda done: print(f"  {done.line()}", flush=True),
                                on_note=lambda text: print(f"note: {text}", file=sys.stderr, flush=True))
    except KeyboardInterrupt:
        # Interrupted while they started: the starts in flight finish, then those this launcher
        # started are stopped again, so none is left holding its port.
        for server in servers:
            if server not in running_before:
                manage.stop(server)
        return 130
    ours = [done for done in started if done.result is not None and done.result.server is not None]
    print("")
    print(f"  tqaforge app:   {redact_url(http_url(args.host, args.app_port))}   (workspace: {workspace}; {app_login})")
    for line in login_lines(started):
        print(f"  {line}")
    print("  stop with Ctrl-C\n", flush=True)
    try:
        return _app_in_foreground(args, app_environment(args, workspace))
    finally:
        for done in ours:
            assert done.server is not None and done.result is not None and done.result.server is not None
            manage.stop_started(done.server, done.result.server)


def app_environment(args: argparse.Namespace, workspace: Path) -> dict[str, str]:
    """The app's environment: ours, its workspace, and ``TQAFORGE_APP_LOGIN=1`` when a login is
    needed (the app's one switch for its sign-in gate; a browser cannot reach the environment)."""
    env = {**os.environ, "TQAFORGE_WORKSPACE": str(workspace)}
    pool_warning = prefer_system_allocator(env)  # as the CLI does (tqaforge.arrow_memory)
    if pool_warning:
        print(pool_warning, file=sys.stderr)
    if login_needed(args):
        env[LOGIN_ENV] = "1"
    return env


def _app_in_foreground(args: argparse.Namespace, env: dict[str, str]) -> int:
    """Run the Streamlit app until it ends or Ctrl-C (SIGTERM and SIGHUP act as Ctrl-C); its exit status."""
    app = subprocess.Popen(app_command(args.host, args.app_port), env=env)
    try:
        return app.wait()
    except KeyboardInterrupt:
        app.terminate()
        return app.wait()


def _run_app(args: argparse.Namespace, workspace: Path, server: RunningServer | None, ls_url: str | None,
             token: str) -> int:
    """Run the app in the foreground; stop it and the Label Studio we started on Ctrl-C, SIGTERM or SIGHUP."""
    env = app_environment(args, workspace)
    if ls_url is not None:
        env.update(LABEL_STUDIO_URL=ls_url, LABEL_STUDIO_API_KEY=token)
    try:
        return _app_in_foreground(args, env)
    finally:
        if server is not None:
            manage.stop_started(workspace, server)


if __name__ == "__main__":
    raise SystemExit(main())

"""``tqaforge labelstudio start|stop|status|push|pull|migrate`` (each annotator's Label Studio
server, or the workspace's one server, in the background, and the sync) and ``tqaforge annotators add|list``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from tqaforge.cli._common import WORKSPACE_OPTION, echo_json, err, friendly_errors, open_ws, out, print_summary

if TYPE_CHECKING:
    from tqaforge.annotation.labelstudio.annotator_servers import Started
    from tqaforge.annotation.labelstudio.manage import ServerStatus

labelstudio_app = typer.Typer(
    help="Run each annotator's own Label Studio server in the background (data in WORKSPACE/label-studio/annotators), "
    "and push and pull tasks.",
    no_args_is_help=True, rich_markup_mode=None,
)

#: ``status`` exits with this when the server is not running or does not answer (like ``systemctl status``).
NOT_RUNNING_EXIT = 3


def _root(ctx: typer.Context, workspace: Optional[Path]) -> Path:
    from tqaforge.config import find_workspace_root

    root_obj = ctx.find_root().obj or {}
    return find_workspace_root(workspace or root_obj.get("workspace"))


ANNOTATOR_OPTION = typer.Option(None, "--annotator", "-a",
                                help="Only this annotator's server (their e-mail; repeat; default: every annotator's).")


def _per_annotator(root: Path, annotators: Optional[list[str]]) -> bool:
    """True when the command acts on the annotators' own servers (the workspace has some, or one
    is named), not on the workspace's one server of the earlier layout."""
    from tqaforge.annotation.labelstudio.annotator_servers import annotator_servers

    return bool(annotators) or bool(annotator_servers(root))


def _start_annotators(root: Path, annotators: Optional[list[str]], timeout: float) -> None:
    from tqaforge.annotation.labelstudio.annotator_servers import login_lines, select_servers, start_servers
    from tqaforge.annotation.labelstudio.server import STARTUP_ESTIMATE
    from tqaforge.printable import escape_controls

    servers = select_servers(root, annotators)
    out.print(escape_controls(f"starting {len(servers)} Label Studio servers in parallel, one per annotator "
                              f"({STARTUP_ESTIMATE} each)"), soft_wrap=True)

    def ready(done: Started) -> None:
        out.print(escape_controls(f"  {done.line()}"), soft_wrap=True, markup=False, highlight=False)

    results = start_servers(root, annotators, wait_s=timeout, on_ready=ready,
                            on_note=lambda text: err.print(f"note: {text}", soft_wrap=True, markup=False))
    out.print("")
    for line in login_lines(results):
        out.print(escape_controls(line), soft_wrap=True, markup=False, highlight=False)
    failed = [done.annotator for done in results if done.error is not None]
    if failed:
        err.print(escape_controls(f"not started: {', '.join(failed)} (see above); the others run"), soft_wrap=True, markup=False)
        raise typer.Exit(1)


@labelstudio_app.command("start")
@friendly_errors
def start(
    ctx: typer.Context,
    port: Optional[int] = typer.Option(None, "--port", min=1, max=65535,
                                       help="Port on 127.0.0.1 (default: [labelstudio] port, else 8080)."),
    demo_login: bool = typer.Option(False, "--demo-login",
                                    help="On the first start, use the README's public demo login instead of a random one."),
    timeout: float = typer.Option(300.0, "--timeout", min=1.0, help="Seconds to wait for it to answer."),
    annotators: Optional[list[str]] = ANNOTATOR_OPTION,
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Start each annotator's Label Studio (or those given) in parallel, in the background, and wait
    until they answer; print each one's URL and login. A workspace without annotators yet starts
    its one server (every account on it sees every project: add annotators for blind labelling).

    Already running: says so and exits 0. A taken port fails at once, naming it."""
    from tqaforge.annotation.labelstudio import manage
    from tqaforge.annotation.labelstudio.server import STARTUP_ESTIMATE
    from tqaforge.launch import print_progress
    from tqaforge.printable import escape_controls

    root = _root(ctx, workspace)
    if _per_annotator(root, annotators):
        _start_annotators(root, annotators, timeout)
        return
    settings = manage.workspace_settings(root, port=port, demo_login=demo_login)
    started: list[bool] = []

    def on_wait(elapsed: float) -> None:
        if not started:  # the first mark: the process exists and is starting
            started.append(True)
            print(escape_controls(f"starting Label Studio on {settings.url} ({STARTUP_ESTIMATE}) "), end="", flush=True)
        print_progress(elapsed)

    try:
        result = manage.start(root, settings=settings, demo_login=demo_login, wait_s=timeout, on_wait=on_wait,
                              on_note=lambda text: err.print(f"note: {text}", soft_wrap=True))
    except BaseException:
        if started:
            print("", flush=True)
        raise
    if result.already_running:
        answering = "answers" if result.answers else "does not answer yet (still starting?)"
        out.print(f"Label Studio is already running for this workspace: {result.url} (pid {result.pid}; {answering})",
                  soft_wrap=True)
        return
    if started:
        print(" ready", flush=True)
    lines = [f"Label Studio:  {result.url}   (pid {result.pid}; stop it with `tqaforge labelstudio stop`)",
             f"login:         {result.username}; password and API token in {result.credentials_path}",
             "               (`tqaforge labelstudio status --show-secrets` prints them)"]
    if result.demo_login:
        lines.append("               this is the README's public demo login: for local demos only")
    for line in lines:
        out.print(line, soft_wrap=True)


@labelstudio_app.command("stop")
@friendly_errors
def stop(
    ctx: typer.Context,
    timeout: float = typer.Option(20.0, "--timeout", min=0.0, help="Seconds after SIGTERM before SIGKILL."),
    annotators: Optional[list[str]] = ANNOTATOR_OPTION,
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Stop each annotator's Label Studio (or those given), and the workspace's one server if it
    runs: each whole process group; remove stale pid files."""
    from tqaforge.annotation.labelstudio import manage
    from tqaforge.annotation.labelstudio.annotator_servers import stop_servers
    from tqaforge.printable import escape_controls

    root = _root(ctx, workspace)
    if _per_annotator(root, annotators):
        for result in stop_servers(root, annotators, timeout=timeout):
            out.print(escape_controls(result.message), soft_wrap=True, markup=False, highlight=False)
        if annotators or not manage.status(root).running:
            return
    out.print(manage.stop(root, timeout=timeout).message, soft_wrap=True)


@labelstudio_app.command("status")
@friendly_errors
def status(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print the status as JSON."),
    show_secrets: bool = typer.Option(False, "--show-secrets", help="Also print the passwords and API tokens."),
    annotators: Optional[list[str]] = ANNOTATOR_OPTION,
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Per server (each annotator's, or the workspace's one): URL, whether it answers, pid, memory,
    and where the login is. Exit 0 when all answer, 3 when one does not."""
    from tqaforge.annotation.labelstudio import manage
    from tqaforge.annotation.labelstudio.annotator_servers import select_servers

    root = _root(ctx, workspace)
    if _per_annotator(root, annotators):
        states, found = [], []
        for server in select_servers(root, annotators):
            state = manage.status(server)
            credentials = manage.read_credentials(server)
            shown = ({"password": credentials.password, "token": credentials.token}
                     if show_secrets and credentials is not None else {})
            states.append(state)
            found.append({**state.to_dict(), **shown})
            if not as_json:
                for line in _status_lines(state, shown):
                    out.print(line, soft_wrap=True)
        if as_json:
            echo_json({"servers": found})
        if not all(state.running and state.answers for state in states):
            raise typer.Exit(NOT_RUNNING_EXIT)
        return
    state = manage.status(root)
    secrets: dict[str, str] = {}
    if show_secrets:
        credentials = manage.read_credentials(root)
        if credentials is not None:
            secrets = {"password": credentials.password, "token": credentials.token}
    if as_json:
        echo_json({**state.to_dict(), **secrets})
    else:
        for line in _status_lines(state, secrets):
            out.print(line, soft_wrap=True)
    if not (state.running and state.answers):
        raise typer.Exit(NOT_RUNNING_EXIT)


def _status_lines(state: ServerStatus, secrets: dict[str, str]) -> list[str]:
    if state.running:
        health = "answers /health" if state.answers else "does not answer /health (still starting, or stuck: see the log)"
        running = f"running (pid {state.pid}), {health}"
    else:
        running = "not running (`tqaforge labelstudio start` starts it)"
        if state.annotator:
            running = f"not running (`tqaforge labelstudio start -a {state.annotator}` starts it)"
    whose = f"{state.annotator}'s Label Studio" if state.annotator else f"Label Studio for {state.workspace}"
    lines = [whose, f"  url:          {state.url}", f"  state:        {running}"]
    if state.rss_mb is not None:
        lines.append(f"  memory:       {state.rss_mb:.0f} MB (resident, the server's whole process tree)")
    if state.stale:
        lines.append(f"  pid file:     stale: {state.stale} (`tqaforge labelstudio stop` removes it)")
    if state.username is None:
        lines.append("  login:        none yet (made on the first start)")
    else:
        demo = " (the public demo login of the README)" if state.demo_login else ""
        lines.append(f"  login:        {state.username}{demo}")
        lines.append(f"  credentials:  {state.credentials_path}")
        if secrets:
            lines += [f"  password:     {secrets['password']}", f"  API token:    {secrets['token']}"]
    lines.append(f"  log:          {state.log_path}")
    return lines


URL_OPTION = typer.Option(None, "--url", envvar="TQAFORGE_LABEL_STUDIO_URL",
                          help="Another Label Studio than this workspace's own server (a team's shared one); its API "
                          "token in TQAFORGE_LABEL_STUDIO_TOKEN.")


@labelstudio_app.command("push")
@friendly_errors
def push(
    ctx: typer.Context,
    kind: str = typer.Argument(..., help="question_review, answer_verification, question_typing or relevant_cell_validity."),
    annotators: Optional[list[str]] = typer.Option(
        None, "--annotator", "-a", help="Label Studio e-mail of an annotator (repeat; default: every annotator account)."),
    overlap: Optional[int] = typer.Option(None, "--overlap", min=1,
                                          help="Annotators per task (default: [labelstudio] overlap, else 2)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the draw that assigns tasks to annotators."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", min=1, help="Tasks per import request."),
    limit: Optional[int] = typer.Option(None, "--limit", min=0, help="At most this many new items."),
    url: Optional[str] = URL_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Send the pending items of KIND to Label Studio, each to its annotators' own projects.

    Idempotent: our task id travels in the task data, so pushing again creates nothing, and a push
    that was interrupted completes the rest."""
    from tqaforge.annotation.labelstudio import manage
    from tqaforge.annotation.labelstudio.sync import PushOptions
    from tqaforge.annotation.labelstudio.sync import push as push_kind

    ws = open_ws(ctx, workspace)
    options = PushOptions(overlap=overlap, seed=seed, batch_size=batch_size or PushOptions().batch_size, limit=limit)
    summary = push_kind(ws, kind, manage.connections(ws, url), annotators or None, options)
    print_summary(summary, as_json)
    if summary.down:
        err.print(f"not sent to {len(summary.down)} annotator(s) whose server is down (see above); the others got theirs")
        raise typer.Exit(1)


@labelstudio_app.command("pull")
@friendly_errors
def pull(
    ctx: typer.Context,
    kinds: Optional[list[str]] = typer.Option(None, "--kind", "-k", help="Only this kind (repeat; default: every kind pushed)."),
    url: Optional[str] = URL_OPTION,
    full: bool = typer.Option(False, "--full", help="Read every task again, not only those updated since the last pull."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Record every new or changed annotation from Label Studio as labels (safe to repeat; reads only
    tasks updated since the last pull of each project, or all with --full).

    Final labels then come from `tqaforge agreement adjudicate`, as for labels given in the CLI.
    Exits 1 after recording what it could when a project was deleted in Label Studio with tasks
    still to label, or Label Studio fails to send a task: no later pull fixes those by itself."""
    from tqaforge.annotation.labelstudio import manage
    from tqaforge.annotation.labelstudio.sync import pull as pull_labels
    from tqaforge.cli._common import styled

    ws = open_ws(ctx, workspace)
    summary = pull_labels(ws, manage.connections(ws, url), kinds=kinds or None, full=full)
    print_summary(summary, as_json)
    if summary.incomplete:
        err.print(styled(("incomplete: ", "bold red"), f"{summary.incomplete}; everything else is recorded (see above)"))
        raise typer.Exit(1)


@labelstudio_app.command("migrate")
@friendly_errors
def migrate(
    ctx: typer.Context,
    url: Optional[str] = URL_OPTION,
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Move a workspace from its one Label Studio server to the annotators' own servers.

    Pulls every label from the one server first (it must run, or give --url); only when that pull
    read everything are the tasks still waiting for a label handed over: the next push sends them
    to each annotator's own server. Every annotator with tasks needs a server first
    (`tqaforge annotators add EMAIL`). Nothing is deleted: the one server's data stays where it was."""
    from tqaforge.annotation.labelstudio import manage
    from tqaforge.annotation.labelstudio.annotator_servers import migrate as migrate_workspace

    ws = open_ws(ctx, workspace)
    print_summary(migrate_workspace(ws, manage.connection(ws.root, url)), False)


annotators_app = typer.Typer(help="The people who label in Label Studio: their accounts and progress.",
                             no_args_is_help=True, rich_markup_mode=None)


@annotators_app.command("add")
@friendly_errors
def annotators_add(
    ctx: typer.Context,
    email: str = typer.Argument(..., help="The annotator's e-mail: their Label Studio login."),
    name: Optional[str] = typer.Option(None, "--name", help="Their name, shown in Label Studio."),
    url: Optional[str] = URL_OPTION,
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Give the annotator a Label Studio server of their own (its own loopback address, port and
    database; they are its only user, with a random password) and print how to log in; with --url,
    an account on that shared server instead. The store keeps only a pseudonymous id (ls:...),
    never the e-mail, on the labels."""
    from tqaforge.annotation.labelstudio import manage
    from tqaforge.annotation.labelstudio.annotator_servers import add_annotator_server
    from tqaforge.annotation.labelstudio.annotators import add_annotator

    if url is None:
        lines = add_annotator_server(open_ws(ctx, workspace), email, name=name).lines()
    else:
        lines = add_annotator(manage.connection(_root(ctx, workspace), url), email, name=name).lines()
    for line in lines:
        out.print(line, soft_wrap=True, markup=False, highlight=False)


@annotators_app.command("list")
@friendly_errors
def annotators_list(
    ctx: typer.Context,
    url: Optional[str] = URL_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Each annotator's progress per task kind: tasks pushed to them and tasks they labelled (pulled)."""
    from tqaforge.annotation.labelstudio import manage
    from tqaforge.annotation.labelstudio.annotator_servers import own_accounts
    from tqaforge.annotation.labelstudio.annotators import annotator_progress, list_accounts
    from tqaforge.annotation.labelstudio.client import ClientSettings
    from tqaforge.annotation.labelstudio.sync import missing_projects

    ws = open_ws(ctx, workspace)
    servers = manage.connections(ws, url)
    accounts = list_accounts(servers) if isinstance(servers, ClientSettings) else own_accounts(ws)
    print_summary(annotator_progress(ws, accounts, gone=missing_projects(ws, servers)), as_json)

"""``tqaforge labelstudio start|stop|status|push|pull`` (the workspace's Label Studio server, in the
background, and the sync) and ``tqaforge annotators add|list``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from tqaforge.cli._common import WORKSPACE_OPTION, echo_json, err, friendly_errors, open_ws, out, print_summary

if TYPE_CHECKING:
    from tqaforge.annotation.labelstudio.manage import ServerStatus

labelstudio_app = typer.Typer(
    help="Run this workspace's Label Studio server in the background (its own login, data in WORKSPACE/label-studio).",
    no_args_is_help=True, rich_markup_mode=None,
)

#: ``status`` exits with this when the server is not running or does not answer (like ``systemctl status``).
NOT_RUNNING_EXIT = 3


def _root(ctx: typer.Context, workspace: Optional[Path]) -> Path:
    from tqaforge.config import find_workspace_root

    root_obj = ctx.find_root().obj or {}
    return find_workspace_root(workspace or root_obj.get("workspace"))


@labelstudio_app.command("start")
@friendly_errors
def start(
    ctx: typer.Context,
    port: Optional[int] = typer.Option(None, "--port", min=1, max=65535,
                                       help="Port on 127.0.0.1 (default: [labelstudio] port, else 8080)."),
    demo_login: bool = typer.Option(False, "--demo-login",
                                    help="On the first start, use the README's public demo login instead of a random one."),
    timeout: float = typer.Option(300.0, "--timeout", min=1.0, help="Seconds to wait for it to answer."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Start Label Studio for this workspace in the background and wait until it answers.

    Already running for this workspace: says so and exits 0. A taken port fails at once, naming it."""
    from tqaforge.annotation.labelstudio import manage
    from tqaforge.annotation.labelstudio.server import STARTUP_ESTIMATE
    from tqaforge.launch import print_progress
    from tqaforge.printable import escape_controls

    root = _root(ctx, workspace)
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
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Stop this workspace's Label Studio (its whole process group); remove a stale pid file."""
    from tqaforge.annotation.labelstudio import manage

    out.print(manage.stop(_root(ctx, workspace), timeout=timeout).message, soft_wrap=True)


@labelstudio_app.command("status")
@friendly_errors
def status(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print the status as JSON."),
    show_secrets: bool = typer.Option(False, "--show-secrets", help="Also print the admin password and API token."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """URL, whether it answers, pid, and where the login is. Exit 0 when it answers, 3 when not."""
    from tqaforge.annotation.labelstudio import manage

    root = _root(ctx, workspace)
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
    lines = [f"Label Studio for {state.workspace}", f"  url:          {state.url}", f"  state:        {running}"]
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
    print_summary(push_kind(ws, kind, manage.connection(ws.root, url), annotators or None, options), as_json)


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
    summary = pull_labels(ws, manage.connection(ws.root, url), kinds=kinds or None, full=full)
    print_summary(summary, as_json)
    if summary.incomplete:
        err.print(styled(("incomplete: ", "bold red"), f"{summary.incomplete}; everything else is recorded (see above)"))
        raise typer.Exit(1)


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
    """Make a Label Studio account (random password) and print how to log in. The store keeps only a
    pseudonymous id (ls:...), never the e-mail, on the labels."""
    from tqaforge.annotation.labelstudio import manage
    from tqaforge.annotation.labelstudio.annotators import add_annotator

    account = add_annotator(manage.connection(_root(ctx, workspace), url), email, name=name)
    for line in account.lines():
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
    from tqaforge.annotation.labelstudio.annotators import annotator_progress, list_accounts
    from tqaforge.annotation.labelstudio.sync import missing_projects

    ws = open_ws(ctx, workspace)
    settings = manage.connection(ws.root, url)
    print_summary(annotator_progress(ws, list_accounts(settings), gone=missing_projects(ws, settings)), as_json)

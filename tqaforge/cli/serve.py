"""``tqaforge serve``: Label Studio and the app side by side (what ``make run`` calls);
``tqaforge app``: the app alone; ``tqaforge app users add|list|remove``: who may sign in to it
(:mod:`tqaforge.logins`; needed beyond loopback)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer

from tqaforge.cli._common import WORKSPACE_OPTION, echo_json, friendly_errors, out

# `tqaforge app` still starts the app (a group that runs without a subcommand); `users` is its one group.
app_group = typer.Typer(help="Start the researcher app (Streamlit); `app users` manages who may sign in to it.",
                        invoke_without_command=True, add_completion=False, rich_markup_mode=None)
users_app = typer.Typer(help="The app's sign-in users, stored hashed in WORKSPACE/app-users.json (mode 600). "
                             "The app requires one beyond loopback.", no_args_is_help=True, rich_markup_mode=None)
app_group.add_typer(users_app, name="users")

REQUIRE_LOGIN_OPTION = typer.Option(
    False, "--require-login", help="Require a sign-in to the app on loopback too (beyond loopback it always is).",
)


def register(app: typer.Typer) -> None:
    """Add ``serve`` and ``app`` (with ``app users``) to the root app."""
    app.command()(serve)  # registered after @friendly_errors has wrapped it
    app_group.callback()(app_only)
    app.add_typer(app_group, name="app")


@friendly_errors
def serve(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", "--host", help="Address both servers listen on (default: loopback)."),
    app_port: int = typer.Option(8501, "--app-port", min=1, max=65535, help="Port of the tqaforge app."),
    ls_port: Optional[int] = typer.Option(None, "--ls-port", min=1, max=65535,
                                          help="Port of Label Studio (default: [labelstudio] port, else 8080)."),
    demo_login: bool = typer.Option(
        False, "--demo-login", help="A new workspace's Label Studio gets the README's public demo login (make run's demo).",
    ),
    allow_remote: bool = typer.Option(
        False, "--allow-remote", help="Allow a --host other machines can reach (both servers, with the printed logins).",
    ),
    push_pending: bool = typer.Option(
        False, "--push-pending", help="Push every kind's pending items to Label Studio once it answers, one copy each "
        "(make run's demo; pushing again sends nothing new).",
    ),
    no_label_studio: bool = typer.Option(False, "--no-label-studio", help="Start the app only."),
    require_login: bool = REQUIRE_LOGIN_OPTION,
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Start Label Studio and the app on this workspace, print the URLs and logins; Ctrl-C stops both.

    Label Studio is the workspace's own (`tqaforge labelstudio start`): one already running is used and left running."""
    from tqaforge.config import find_workspace_root
    from tqaforge.launch import main as launch

    root_obj = ctx.find_root().obj or {}
    root = find_workspace_root(workspace or root_obj.get("workspace"))
    argv = ["--workspace", str(root), "--host", host, "--app-port", str(app_port)]
    argv += ["--ls-port", str(ls_port)] if ls_port is not None else []
    argv += ["--allow-remote"] * allow_remote + ["--demo-login"] * demo_login + ["--push-pending"] * push_pending
    argv += ["--no-label-studio"] * no_label_studio + ["--require-login"] * require_login
    raise typer.Exit(launch(argv))


@friendly_errors
def app_only(
    ctx: typer.Context,
    port: int = typer.Option(8501, "--port", min=1, max=65535, help="Port of the app."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address the app listens on (default: loopback)."),
    allow_remote: bool = typer.Option(False, "--allow-remote",
                                      help="Allow a --host other machines can reach (needs an app user: `app users add`)."),
    require_login: bool = REQUIRE_LOGIN_OPTION,
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Start the researcher app (Streamlit) on this workspace and print its URL; Ctrl-C stops it."""
    if ctx.invoked_subcommand is not None:
        return  # `app users ...`: the subcommand runs
    from tqaforge.config import find_workspace_root
    from tqaforge.launch import main as launch

    root_obj = ctx.find_root().obj or {}
    root = find_workspace_root(workspace or root_obj.get("workspace"))
    argv = ["--workspace", str(root), "--host", host, "--app-port", str(port), "--no-label-studio"]
    argv += ["--allow-remote"] * allow_remote + ["--require-login"] * require_login
    raise typer.Exit(launch(argv))


def _root(ctx: typer.Context, workspace: Optional[Path]) -> Path:
    """The workspace given after ``users ...``, after ``app``, before it, or around the cwd."""
    from tqaforge.config import find_workspace_root

    here: Any = ctx  # typer's Context is a click Context of its own vendored click
    while workspace is None and here is not None:
        given = here.params.get("workspace")
        # A parent command's parameters are as given (a str) or converted (a Path), depending
        # on Typer's version: Typer converts them when it calls that command, and it has not.
        workspace = Path(given) if given is not None else None
        here = here.parent
    return find_workspace_root(workspace)


@users_app.command("add")
@friendly_errors
def users_add(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="User name: letters, digits and . _ @ - (1-64)."),
    password_stdin: bool = typer.Option(False, "--password-stdin",
                                        help="Read the password from the first line of stdin instead of prompting."),
    replace: bool = typer.Option(False, "--replace", help="Give an existing user a new password."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Add a user who may sign in to the app (the password is asked twice, never echoed, stored
    only as a salted scrypt hash)."""
    from tqaforge.logins import add_user, check_password, check_user_name, users_file

    root = _root(ctx, workspace)
    check_user_name(name)  # before asking for a password
    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = typer.prompt("Password", hide_input=True, confirmation_prompt=True,
                                value_proc=lambda value: check_password(str(value)))
    add_user(root, name, password, replace=replace)
    out.print(f"app user {name} {'updated' if replace else 'added'} ({users_file(root)}, mode 600)")


@users_app.command("list")
@friendly_errors
def users_list(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print JSON (names only)."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """The app's users, by name (the file holds no password)."""
    from tqaforge.logins import read_users, users_file

    root = _root(ctx, workspace)
    names = sorted(read_users(root))
    if as_json:
        echo_json({"file": str(users_file(root)), "users": names})
        return
    out.print("\n".join(names) if names else f"no app users yet ({users_file(root)}): `tqaforge app users add NAME`")


@users_app.command("remove")
@friendly_errors
def users_remove(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="The user to remove."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Remove a user: they cannot sign in again, and a session of theirs ends at its next click."""
    from tqaforge.logins import remove_user

    remove_user(_root(ctx, workspace), name)
    out.print(f"app user {name} removed")

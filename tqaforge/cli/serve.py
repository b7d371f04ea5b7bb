"""``tqaforge serve``: Label Studio and the app side by side (what ``make run`` calls)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tqaforge.cli._common import WORKSPACE_OPTION, friendly_errors


def register(app: typer.Typer) -> None:
    """Add ``serve`` and ``app`` to the root app."""
    app.command()(serve)  # registered after @friendly_errors has wrapped it
    app.command("app")(app_only)


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
    argv += ["--no-label-studio"] * no_label_studio
    raise typer.Exit(launch(argv))


@friendly_errors
def app_only(
    ctx: typer.Context,
    port: int = typer.Option(8501, "--port", min=1, max=65535, help="Port of the app."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address the app listens on (default: loopback)."),
    allow_remote: bool = typer.Option(False, "--allow-remote", help="Allow a --host other machines can reach."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Start the researcher app (Streamlit) on this workspace and print its URL; Ctrl-C stops it."""
    from tqaforge.config import find_workspace_root
    from tqaforge.launch import main as launch

    root_obj = ctx.find_root().obj or {}
    root = find_workspace_root(workspace or root_obj.get("workspace"))
    argv = ["--workspace", str(root), "--host", host, "--app-port", str(port), "--no-label-studio"] + ["--allow-remote"] * allow_remote
    raise typer.Exit(launch(argv))

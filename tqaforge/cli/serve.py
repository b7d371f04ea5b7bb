"""``tqaforge serve``: Label Studio and the app side by side (what ``make run`` calls)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tqaforge.cli._common import WORKSPACE_OPTION, friendly_errors


def register(app: typer.Typer) -> None:
    """Add ``serve`` to the root app."""
    app.command()(serve)  # registered after @friendly_errors has wrapped it


@friendly_errors
def serve(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", "--host", help="Address both servers listen on (default: loopback)."),
    app_port: int = typer.Option(8501, "--app-port", min=1, max=65535, help="Port of the tqaforge app."),
    ls_port: int = typer.Option(8080, "--ls-port", min=1, max=65535, help="Port of Label Studio."),
    allow_remote: bool = typer.Option(
        False, "--allow-remote", help="Allow a --host other machines can reach (both servers, with the printed logins).",
    ),
    no_label_studio: bool = typer.Option(False, "--no-label-studio", help="Start the app only."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Start Label Studio and the app on this workspace, print the URLs and logins; Ctrl-C stops both."""
    from tqaforge.config import find_workspace_root
    from tqaforge.launch import main as launch

    root_obj = ctx.find_root().obj or {}
    root = find_workspace_root(workspace or root_obj.get("workspace"))
    argv = ["--workspace", str(root), "--host", host, "--app-port", str(app_port), "--ls-port", str(ls_port)]
    argv += ["--allow-remote"] * allow_remote + ["--no-label-studio"] * no_label_studio
    raise typer.Exit(launch(argv))

"""``tqaforge init``, ``tqaforge status`` and ``tqaforge demo``: create a workspace, show its funnel,
build the model-free demo workspace."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tqaforge.cli._common import WORKSPACE_OPTION, echo_json, friendly_errors, open_ws, out, plain_table, workspace_dir


def register(app: typer.Typer) -> None:
    """Add the workspace commands to the root app."""
    app.command()(init)
    app.command()(status)
    app.command()(demo)


@friendly_errors
def init(
    directory: Path = typer.Argument(Path("."), help="Where to create the workspace."),
    name: Optional[str] = typer.Option(None, help="Workspace name (default: the directory name)."),
    taxonomy: Optional[str] = typer.Option(None, help="tablebench (default for a new workspace), freb-tqa, capability or custom."),
    database_url: Optional[str] = typer.Option(None, help="SQLAlchemy URL instead of the SQLite file."),
) -> None:
    """Create a benchmark workspace (tqaforge.toml + database), or bring one up to date."""
    from tqaforge.store import init_workspace

    ws = init_workspace(directory, name=name, taxonomy=taxonomy, database_url=database_url)
    out.print(f"workspace {ws.config.name} ready in {ws.root}")
    out.print(f"database: {ws.database_url}")


@friendly_errors
def status(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Counts per pipeline stage: the funnel from tables to releases."""
    from tqaforge.funnel import funnel, quick_funnel

    # Most of the time the workspace's SQLite file can be read without SQLAlchemy (a third of
    # this command's CPU); else it is opened, and migrated or refused, the usual way.
    f = quick_funnel(workspace_dir(ctx, workspace)) or funnel(open_ws(ctx, workspace))
    if as_json:
        echo_json({"stages": f.as_dict(), "llm_cost": f.llm_cost})
        return
    t = plain_table("stage", "total", "by status", title="pipeline funnel")
    t.columns[1].justify = "right"
    for stage, counts in f.stages:
        detail = ", ".join(f"{k}: {v}" for k, v in counts.items() if k != "total")
        t.add_row(stage, str(counts["total"]), detail)
    out.print(t)
    out.print(f"LLM cost so far: ${f.llm_cost:.4f}")


@friendly_errors
def demo(
    directory: Path = typer.Argument(Path("demo-workspace"), help="Where to build the demo workspace."),
    data: Path = typer.Option(Path("data"), "--data", help="The shipped data directory (tables/, sample/, predictions/)."),
) -> None:
    """Build (or complete) the demo workspace from the shipped data without a model: probes answered
    by rule, example reviews, variants, a release and two scored predictions files (make run's demo)."""
    from tqaforge.demo import build_demo

    summary = build_demo(directory, data)
    for line in summary.lines():
        out.print(line, soft_wrap=True)

"""``tqaforge sandbox run``: run one program in the sandbox (no workspace needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from tqaforge.cli._common import friendly_errors, out

sandbox_app = typer.Typer(help="Run model-written code in the sandbox.", no_args_is_help=True, rich_markup_mode=None)


@sandbox_app.command("run")
@friendly_errors
def sandbox_run(
    program: Path = typer.Argument(..., help="The Python program to run (it reads table.csv)."),
    table: Path = typer.Option(..., "--table", help="CSV file given to the program as table.csv."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    chart_type: Optional[str] = typer.Option(None, "--chart-type", help="Read the drawn chart as this type (line, bar, pie...)."),
    timeout: float = typer.Option(15.0, "--timeout", help="Wall-clock limit in seconds."),
    memory_mb: int = typer.Option(1024, "--memory-mb", help="Memory the program may use, in MB."),
) -> None:
    """Run PROGRAM isolated with TABLE as table.csv; exit status 0 when the outcome is ok, else 1."""
    from tqaforge.errors import SandboxError
    from tqaforge.sandbox import Limits, Sandbox

    texts = []
    for what, path in (("program", program), ("table", table)):
        try:
            texts.append(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise SandboxError(f"{path}: cannot read the {what}: {exc}", hint="pass a readable UTF-8 file") from None
    # CPU time can never exceed wall time by much for one thread: cap it at the timeout (at least 0.1 s).
    limits = Limits(wall_seconds=timeout, cpu_seconds=max(0.1, min(timeout, Limits.cpu_seconds)), memory_mb=memory_mb)
    with Sandbox(workers=1, limits=limits) as box:
        result = box.run(texts[0], texts[1], chart_type=chart_type)
    if as_json:
        out.print_json(json.dumps(result.to_dict()))
    else:
        for line in result.lines():
            out.print(line)
    if not result.ok:
        raise typer.Exit(1)

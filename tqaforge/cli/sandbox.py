"""``tqaforge sandbox run``: run one program in the sandbox (no workspace needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tqaforge.cli._common import echo_json, friendly_errors, out

_MAX_PROGRAM_BYTES = 1024 * 1024  # a program a model wrote: far below this
_MAX_TABLE_BYTES = 256 * 1024 * 1024  # sent to the worker in one frame

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
    from tqaforge.errors import ReaderError, SandboxError
    from tqaforge.sandbox import Limits, Sandbox
    from tqaforge.tables.readers._common import read_bytes

    texts = []
    for what, path, cap in (("program", program, _MAX_PROGRAM_BYTES), ("table", table, _MAX_TABLE_BYTES)):
        # Only regular files of a bounded size: a FIFO would hang the command, /dev/zero fill the memory.
        try:
            texts.append(read_bytes(path, cap).decode("utf-8"))
        except ReaderError as exc:
            raise SandboxError(f"cannot read the {what}: {exc.args[0]}", hint=exc.hint or "pass a regular UTF-8 file") from None
        except UnicodeDecodeError as exc:
            raise SandboxError(f"{path}: the {what} is not UTF-8 (byte offset {exc.start})",
                               hint="save the file as UTF-8") from None
    # CPU time can never exceed wall time by much for one thread: cap it at the timeout (at least 0.1 s).
    limits = Limits(wall_seconds=timeout, cpu_seconds=max(0.1, min(timeout, Limits.cpu_seconds)), memory_mb=memory_mb)
    with Sandbox(workers=1, limits=limits) as box:
        result = box.run(texts[0], texts[1], chart_type=chart_type)
    if as_json:
        echo_json(result.to_dict())
    else:
        for line in result.lines():
            out.print(line)
    if not result.ok:
        raise typer.Exit(1)

"""What every command module shares: the consoles, error handling, the workspace option, paging.

Two rules hold for the whole CLI and live here so no command can forget them:

* **No text is ever read as Rich markup.** Headers such as ``[km]``, hints such as ``[row, col]``
  and paths such as ``runs/[bold]`` are data. Both consoles are made with ``markup=False``, every
  progress column is built with ``markup=False``, and our own styling is applied with
  :class:`rich.text.Text` spans (``styled``), never with ``[tags]`` in strings.
* **Nothing heavy is imported at module level.** ``tqaforge --help`` must start about as fast as
  Typer and Rich themselves, so commands import the library (SQLAlchemy, pandas, openai) inside
  their bodies.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, Sequence, TypeVar

import typer
from rich.console import Console
from rich.text import Text

if TYPE_CHECKING:
    from rich.progress import Progress, ProgressColumn

    from tqaforge.progress import Progress as ProgressFn
    from tqaforge.store import Workspace

out = Console(markup=False, highlight=False, emoji=False)
err = Console(stderr=True, markup=False, highlight=False, emoji=False)

F = TypeVar("F", bound=Callable[..., Any])


def styled(*parts: str | tuple[str, str]) -> Text:
    """A line built from plain strings and ``(text, style)`` pairs; the text is never markup."""
    return Text.assemble(*parts)


def friendly_errors(fn: F) -> F:
    """Turn tqaforge errors into their message on stderr and exit status 1 (130 on Ctrl-C)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from tqaforge.errors import TqaforgeError

        try:
            return fn(*args, **kwargs)
        except TqaforgeError as exc:
            err.print(styled(("error: ", "bold red"), str(exc)))
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            err.print("interrupted: finished work is stored; run the command again to resume")
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


# Every command that reads or writes a workspace takes --workspace itself, so it may be given
# before or after the subcommand (`tqaforge -w DIR tables list` and `tqaforge tables list -w DIR`).
WORKSPACE_OPTION: Any = typer.Option(
    None, "--workspace", "-w", help="Workspace directory (default: the current one or a parent).",
)

LIMIT_OPTION: Any = typer.Option(50, "--limit", min=1, max=10_000, help="How many to show.")
OFFSET_OPTION: Any = typer.Option(0, "--offset", min=0, help="How many to skip.")


def open_ws(ctx: typer.Context, workspace: Optional[Path] = None) -> "Workspace":
    """The workspace named after the subcommand, else before it, else $TQAFORGE_WORKSPACE or cwd."""
    from tqaforge.store import open_workspace

    root_obj = ctx.find_root().obj or {}
    return open_workspace(workspace or root_obj.get("workspace"))


def names(value: str) -> tuple[str, ...]:
    """``"a, b,,a"`` -> ``("a", "b")``: comma-separated names, blanks and repeats dropped."""
    return tuple(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))


def progress_bar(*extra: "ProgressColumn") -> "Progress":
    """The progress bar of long commands, on stderr; descriptions are plain text, never markup."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(), *extra,
        TimeElapsedColumn(), console=err, transient=not sys.stderr.isatty(),
    )


@contextlib.contextmanager
def progress_reporter(
    description: str, *, total: int | None = None, describe: Callable[[str], str] | None = None, lazy: bool = False,
) -> Iterator["ProgressFn"]:
    """A progress bar (:func:`progress_bar`) driven through :class:`tqaforge.progress.Progress`.

    The bar shows at once with ``total`` (None: not known yet), or with ``lazy`` only from the
    first report (so a step that fails its checks first leaves no empty bar on the terminal);
    ``describe(note)`` turns a step's note into the bar's description.

        with progress_reporter("building variants", lazy=True) as on_progress:
            summary = build_variant_grid(ws, options, on_progress=on_progress)"""
    bar = progress_bar()
    task: list[Any] = []

    def report(done: int, total: int | None, note: str = "") -> None:
        if not task:
            bar.start()
            task.append(bar.add_task(description, total=total))
        bar.update(task[0], completed=done, total=total, description=describe(note) if describe and note else None)

    if not lazy:
        report(0, total)
    try:
        yield report
    finally:
        bar.stop()


@contextlib.contextmanager
def noted_progress(description: str) -> Iterator["ProgressFn"]:
    """A progress bar whose extra column shows each report's note (cost, paid and cached calls)."""
    with progress_bar(field_column("note")) as bar:
        task = bar.add_task(description, total=None, note="")

        def report(done: int, total: int | None, note: str = "") -> None:
            bar.update(task, completed=done, total=total, note=note)

        yield report


def field_column(name: str) -> "ProgressColumn":
    """A progress column showing ``task.fields[name]`` as plain text."""
    from rich.progress import TextColumn

    return TextColumn("{task.fields[" + name + "]}", markup=False)


@dataclass(frozen=True)
class Shown:
    """What a listing printed: ``shown`` rows from ``offset`` out of ``total``."""

    shown: int
    offset: int
    total: int


def print_count(what: str, shown: Shown) -> None:
    """``"50 of 811 questions (1-50); next: --offset 50"`` under every listing."""
    if shown.total == 0:
        out.print(f"no {what}")
        return
    first, last = shown.offset + 1, shown.offset + shown.shown
    line = f"{shown.shown} of {shown.total} {what}"
    if shown.shown and (shown.shown < shown.total):
        line += f" ({first}-{last})"
    if last < shown.total:
        line += f"; next: --offset {last}"
    out.print(line)


def plain_table(*headers: str, title: str | None = None) -> Any:
    """A Rich table whose headers and title are plain text (cells added as str stay plain too).

    Cells fold onto more lines instead of being cut with an ellipsis: an id or a path cut short
    at 80 columns is of no use to anyone.
    """
    from rich.table import Table

    table = Table(title=Text(title) if title else None, title_justify="left")
    for h in headers:
        table.add_column(Text(h), overflow="fold")
    return table


def check_choice(option: str, value: str, allowed: Sequence[str]) -> None:
    """A clear BadParameter for a value outside ``allowed``."""
    if value not in allowed:
        raise typer.BadParameter(f"{option} must be one of {', '.join(allowed)}, got {value!r}")


def print_summary(summary: Any, as_json: bool = False) -> None:
    """Print a library summary the one way every command does: its ``lines()``, or with
    ``--json`` its ``as_dict()`` (both render themselves, for the CLI and the app alike)."""
    import json

    if as_json:
        typer.echo(json.dumps(summary.as_dict(), indent=2, ensure_ascii=False))
    else:
        for line in summary.lines():
            out.print(line, soft_wrap=True, markup=False, highlight=False)

"""What every command module shares: the consoles, error handling, the workspace option, paging.

Two rules hold for the whole CLI and live here so no command can forget them:

* **No text is ever read as Rich markup.** Headers such as ``[km]``, hints such as ``[row, col]``
  and paths such as ``runs/[bold]`` are data. Both consoles are made with ``markup=False``, every
  progress column is built with ``markup=False``, and our own styling is applied with
  :class:`rich.text.Text` spans (``styled``), never with ``[tags]`` in strings.
* **No control character of data reaches the terminal.** A program's output, a model's reply, a
  cell or a name can hold ``ESC[2J``, an OSC 52 clipboard write, a carriage return or a cursor move
  that forges an ``outcome: ok`` line, or a bidirectional override. Both consoles are
  :class:`DataConsole`: every string they are given is shown through
  :func:`tqaforge.printable.escape_controls` (before layout, so tables keep their widths), and so
  is every text they write, whatever renderable carries it; our own styling is Rich styles, which
  are not text, and stays. JSON goes out through :func:`echo_json` (still JSON), other text that
  bypasses the consoles through :func:`echo`.
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
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Optional, Sequence, TypeVar

import typer
from rich.console import Console
from rich.segment import Segment
from rich.text import Text

from tqaforge.printable import escape_controls

if TYPE_CHECKING:
    from rich.progress import Progress, ProgressColumn
    from sqlalchemy.engine import URL

    from tqaforge.llm.step import RunnerOptions
    from tqaforge.progress import Progress as ProgressFn
    from tqaforge.store import Workspace


class DataConsole(Console):
    """A Rich console that never writes a control character of the text it shows (module docs).

    Strings are escaped where Rich turns them into text (:meth:`render_str`: printed strings, table
    cells, rule titles), so widths are measured on what is shown; everything else (a
    :class:`~rich.text.Text` made elsewhere, a progress column, ``print_json``) is escaped as it is
    written. Rich's own control segments (cursor moves of a live progress bar) and the styles it
    renders are ours and pass.
    """

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(escape_controls(text), **kwargs)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        # The last point where data text and our styling are still apart: a segment's text is data,
        # its style and control codes are Rich's. Already-escaped text passes unchanged.
        return super()._render_buffer(
            segment if segment.control else Segment(escape_controls(segment.text), segment.style) for segment in buffer
        )


out = DataConsole(markup=False, highlight=False, emoji=False)
err = DataConsole(stderr=True, markup=False, highlight=False, emoji=False)

F = TypeVar("F", bound=Callable[..., Any])


def styled(*parts: str | tuple[str, str]) -> Text:
    """A line built from plain strings and ``(text, style)`` pairs; the text is never markup and
    its control characters are shown escaped (the styles are ours)."""
    return Text.assemble(*(
        escape_controls(part) if isinstance(part, str) else (escape_controls(part[0]), part[1]) for part in parts
    ))


def echo(text: str) -> None:
    """Print ``text`` as it is (no Rich layout: a Markdown report, for pipes), control characters escaped."""
    typer.echo(escape_controls(text))


def echo_json(data: Any) -> None:
    """Print ``data`` as indented JSON that stays valid JSON and readable (non-ASCII as written), with
    every control character, bidirectional override and lone surrogate escaped as ``\\uXXXX``."""
    import json

    typer.echo(escape_controls(json.dumps(data, indent=2, ensure_ascii=False), json=True))


def friendly_errors(fn: F) -> F:
    """Turn tqaforge errors into their message on stderr and exit status 1 (130 on Ctrl-C).

    A full, over-quota or read-only disk, or a path this user may not write, is such an error
    wherever it happens (:func:`tqaforge.store.disk_failure`): the message names the path and
    the fix instead of an ``OSError [Errno 28]`` traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from tqaforge.errors import TqaforgeError

        _OPENED.clear()  # a workspace of an earlier command (in the same process) is not this one's
        try:
            return fn(*args, **kwargs)
        except TqaforgeError as exc:
            err.print(styled(("error: ", "bold red"), str(exc)))
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            err.print("interrupted: finished work is stored; run the command again to resume")
            raise typer.Exit(130) from None
        except Exception as exc:
            from tqaforge.store import disk_failure

            problem = disk_failure(exc, *(_OPENED[-1] if _OPENED else (None, None)))
            if problem is None:
                raise
            err.print(styled(("error: ", "bold red"), str(problem)))
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]


# Every command that reads or writes a workspace takes --workspace itself, so it may be given
# before or after the subcommand (`tqaforge -w DIR tables list` and `tqaforge tables list -w DIR`).
WORKSPACE_OPTION: Any = typer.Option(
    None, "--workspace", "-w", help="Workspace directory (default: the current one or a parent).",
)

LIMIT_OPTION: Any = typer.Option(50, "--limit", min=1, max=10_000, help="How many to show.")
OFFSET_OPTION: Any = typer.Option(0, "--offset", min=0, help="How many to skip.")


# The step runner's options, the same on every command that calls a model (tqaforge.llm.step).
WORKERS_OPTION: Any = typer.Option(
    1, "--workers", min=1,
    help="Workers in this process. Any number of processes or machines on one PostgreSQL store split the "
         "work too (claims with a lease); on SQLite one process at a time runs a step.",
)
TRANSPORT_OPTION: Any = typer.Option(
    "online", "--transport",
    help="online (default); batch: the provider's Batch API (about half the price; follow it with tqaforge "
         "batches); offline: write the requests to --batch-file for local inference (vllm run-batch).",
)
BUDGET_OPTION: Any = typer.Option(
    None, "--budget",
    help="Name of a budget kept in the store and shared by every worker, process and the app that names it; "
         "--max-cost sets its limit (what it spent before counts).",
)
BATCH_FILE_OPTION: Any = typer.Option(None, "--batch-file", help="Where --transport offline writes its requests (JSONL).")
WAIT_OPTION: Any = typer.Option(False, "--wait", help="With --transport batch: wait for each batch, collect it and go on until done.")


def runner_options(workers: int = 1, transport: str = "online", budget: Optional[str] = None,
                   batch_file: Optional[Path] = None, wait: bool = False, **more: Any) -> "RunnerOptions":
    """The step runner's options from the shared command-line options."""
    from tqaforge.llm.step import TRANSPORTS, RunnerOptions

    check_choice("--transport", transport, TRANSPORTS)
    return RunnerOptions(workers=workers, transport=transport, budget=budget, offline_file=batch_file, wait=wait,
                         **more)


def workspace_dir(ctx: typer.Context, workspace: Optional[Path] = None) -> Optional[Path]:
    """The workspace directory named after the subcommand, else before it (or $TQAFORGE_WORKSPACE);
    None: the one around the cwd."""
    root_obj = ctx.find_root().obj or {}
    found: Optional[Path] = workspace or root_obj.get("workspace")
    return found


def open_ws(ctx: typer.Context, workspace: Optional[Path] = None) -> "Workspace":
    """The workspace named after the subcommand, else before it, else $TQAFORGE_WORKSPACE or cwd."""
    from tqaforge.store import open_workspace

    ws = open_workspace(workspace_dir(ctx, workspace))
    _OPENED[:] = [(ws.root, ws.engine.url)]  # for disk_failure: a write error that names no file
    return ws


#: The root and database URL of the workspace the command opened (the last one only; the
#: workspace itself is not held, so its engine and files close with it).
_OPENED: list[tuple[Path, "URL"]] = []


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
        shown = escape_controls(describe(note), lines=False) if describe and note else None
        bar.update(task[0], completed=done, total=total, description=shown)

    description = escape_controls(description, lines=False)
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
        task = bar.add_task(escape_controls(description, lines=False), total=None, note="")

        def report(done: int, total: int | None, note: str = "") -> None:
            bar.update(task, completed=done, total=total, note=escape_controls(note, lines=False))

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

    table = Table(title=Text(escape_controls(title)) if title else None, title_justify="left")
    for h in headers:
        table.add_column(Text(escape_controls(h)), overflow="fold")
    return table


def check_choice(option: str, value: str, allowed: Sequence[str]) -> None:
    """A clear BadParameter for a value outside ``allowed``."""
    if value not in allowed:
        raise typer.BadParameter(f"{option} must be one of {', '.join(allowed)}, got {value!r}")


def print_summary(summary: Any, as_json: bool = False) -> None:
    """Print a library summary the one way every command does: its ``lines()``, or with
    ``--json`` its ``as_dict()`` (both render themselves, for the CLI and the app alike)."""
    if as_json:
        echo_json(summary.as_dict())
    else:
        for line in summary.lines():
            out.print(line, soft_wrap=True, markup=False, highlight=False)

"""The ``tqaforge`` command line. Thin: parse, call one library function, print.

One module per command group. Every command works on the workspace in the current directory (or
a parent), or the one given with ``--workspace DIR`` (before or after the subcommand). Errors
print their message (no traceback) and exit with status 1.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from tqaforge.arrow_memory import prefer_system_allocator
from tqaforge.cli import annotators as _annotators  # noqa: F401  registers `annotators people|new|merge`
from tqaforge.cli import evaluate as _evaluate
from tqaforge.cli import health as _health
from tqaforge.cli import serve as _serve
from tqaforge.cli import workspace as _workspace
from tqaforge.cli.agreement import agreement_app
from tqaforge.cli.answers import answers_app
from tqaforge.cli.batches import batches_app
from tqaforge.cli.generate import generate_app
from tqaforge.cli.labelstudio import annotators_app, labelstudio_app
from tqaforge.cli.questions import questions_app
from tqaforge.cli.release import release_app
from tqaforge.cli.sandbox import sandbox_app
from tqaforge.cli.seeds import seeds_app
from tqaforge.cli.tables import tables_app
from tqaforge.cli.variants import variants_app

# Before any command imports pyarrow (no command module does at import: tests/test_arrow_memory.py).
_pool_warning = prefer_system_allocator()
if _pool_warning:
    print(_pool_warning, file=sys.stderr)

# rich_markup_mode=None: help texts are plain text, so "[llm]" or "[row, col]" in a help string
# prints as written (and --help does not pay for Rich's markup machinery).
app = typer.Typer(
    help="Build table-reasoning benchmarks for LLMs.", no_args_is_help=True, add_completion=False,
    rich_markup_mode=None,
)


@app.callback()
def main(
    ctx: typer.Context,
    workspace: Optional[Path] = typer.Option(
        None, "--workspace", "-w", help="Workspace directory (default: the current one or a parent).",
        envvar="TQAFORGE_WORKSPACE",
    ),
) -> None:
    ctx.obj = {"workspace": workspace}


_workspace.register(app)
app.add_typer(tables_app, name="tables")
app.add_typer(questions_app, name="questions")
app.add_typer(variants_app, name="variants")
app.add_typer(seeds_app, name="seeds")
app.add_typer(generate_app, name="generate")
app.add_typer(agreement_app, name="agreement")
app.add_typer(sandbox_app, name="sandbox")
app.add_typer(answers_app, name="answers")
app.add_typer(labelstudio_app, name="labelstudio")
app.add_typer(annotators_app, name="annotators")
app.add_typer(release_app, name="release")
app.add_typer(batches_app, name="batches")
_evaluate.register(app)
_health.register(app)
_serve.register(app)

__all__ = ["app"]

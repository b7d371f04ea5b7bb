"""``tqaforge evaluate``: score a predictions file on a release."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tqaforge.cli._common import friendly_errors, print_summary, progress_reporter


def register(app: typer.Typer) -> None:
    """Add ``evaluate`` to the top-level app (it needs no workspace)."""
    app.command("evaluate")(evaluate_cmd)


@friendly_errors
def evaluate_cmd(
    release: Path = typer.Option(..., "--release", help="The release directory (`tqaforge release build` wrote it)."),
    predictions: Path = typer.Option(..., "--predictions", help="JSONL: id and prediction per line (TableBench's inference format is read as it is)."),
    model: Optional[str] = typer.Option(None, "--model-name", help="The model of predictions that name none (default: the file's name)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Where scores.json and the plots go (default: evaluations/RELEASE/PREDICTIONS)."),
    workers: int = typer.Option(2, "--workers", help="Sandbox workers for PoT and chart code."),
    no_plots: bool = typer.Option(False, "--no-plots", help="Write scores.json only."),
    as_json: bool = typer.Option(False, "--json", help="Print the scores as JSON."),
) -> None:
    """Score predictions on a release: TableBench-compatible and normalised scores per subtype, type and
    configuration; Em, Emd and VP per robustness aspect; ToRR's P and R and Kendall's W."""
    from tqaforge.evaluate.harness import EvaluateOptions, evaluate

    options = EvaluateOptions(release=release, predictions=predictions, model=model, out=out, workers=workers, plots=not no_plots)
    with progress_reporter("running programs", lazy=True) as on_progress:
        report = evaluate(options, on_progress=on_progress)
    print_summary(report, as_json)

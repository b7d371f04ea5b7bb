"""``tqaforge health``: is a release any good before it is frozen (:mod:`tqaforge.health`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

import typer

from tqaforge.cli._common import friendly_errors, print_summary

if TYPE_CHECKING:
    from tqaforge.health import Thresholds


def register(app: typer.Typer) -> None:
    """Add ``health`` to the top-level app (a workspace only for the label-quality section)."""
    app.command("health")(health_cmd)


def thresholds_from(text: Optional[str], *, max_suspect_gold: Optional[float] = None, min_systems: Optional[int] = None) -> "Thresholds":
    """The thresholds of ``--health-thresholds NAME=VALUE,...`` and the single-threshold flags."""
    from tqaforge.health import Thresholds

    base = Thresholds.parse(text or "")
    extra = ",".join(f"{k}={v}" for k, v in (("max_suspect_gold", max_suspect_gold), ("min_systems", min_systems)) if v is not None)
    return Thresholds.parse(extra, base) if extra else base


@friendly_errors
def health_cmd(
    release: Path = typer.Option(..., "--release", help="The release directory (`tqaforge release build` wrote it)."),
    evaluations: List[Path] = typer.Option([], "--evaluations", help="A directory `tqaforge evaluate` wrote (scores.json, items.jsonl); repeat for each."),
    workspace: Optional[Path] = typer.Option(None, "--workspace", help="A workspace: adds Dawid-Skene label quality of its annotations."),
    out: Optional[Path] = typer.Option(None, "--out", help="Where health.json, health.md and the plots go (default: health/RELEASE)."),
    irt: bool = typer.Option(False, "--irt", help="Also fit girth's 2PL IRT model (slow: minutes for hundreds of items)."),
    max_suspect_gold: Optional[float] = typer.Option(None, "--max-suspect-gold", help="Largest share of suspect-gold items (default 0.05)."),
    min_systems: Optional[int] = typer.Option(None, "--min-systems", help="Items count toward the item checks with this many systems (default 5)."),
    thresholds: Optional[str] = typer.Option(None, "--thresholds", help="NAME=VALUE,... (max_suspect_gold, max_solved_by_all, max_solved_by_none, max_below_mdd, max_label_suspect_gold, max_leaked, max_duplicated, max_biased_subtypes, max_memorised, min_systems; none turns one off)."),
    reference: List[Path] = typer.Option([], "--reference", help="A file of questions and tables to look for duplicates in (TableBench, FREB-TQA, ... JSONL); repeat for each (default: the shipped ones)."),
    model: Optional[str] = typer.Option(None, "--model", help="A model to probe: memorisation probes (header, row and cell completion) of each table, through the gateway; needs --workspace."),
    max_cost: Optional[float] = typer.Option(None, "--max-cost", help="Stop the model's calls before they could cost more than this (USD); tables left unprobed are named."),
    memorisation_tables: Optional[int] = typer.Option(None, "--memorisation-tables", help="Probe the first N distinct tables only (default: all)."),
    no_plots: bool = typer.Option(False, "--no-plots", help="Write no PNG plots."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Item analysis, differences that count, label quality, duplicates, answer bias and (--model) memorisation probes of a release; exit 1 when a threshold fails."""
    from tqaforge.health import HealthOptions, run, write_report

    options = HealthOptions(release=release, evaluations=tuple(evaluations), workspace=workspace, irt=irt, plots=not no_plots,
                            references=tuple(reference) if reference else None, model=model, max_cost=max_cost,
                            memorisation_tables=memorisation_tables,
                            thresholds=thresholds_from(thresholds, max_suspect_gold=max_suspect_gold, min_systems=min_systems))
    report = run(options)
    write_report(report, out or Path("health") / release.resolve().name, plots=options.plots)
    print_summary(report, as_json)
    for section in report.sections:
        calls = getattr(section.source, "calls", None)
        if calls is not None:  # not in the report (its bytes do not depend on the cache): on stderr
            typer.echo(f"{section.name} calls: {calls.line()}", err=True)
    if not report.passed:
        raise typer.Exit(1)

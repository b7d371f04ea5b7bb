"""``tqaforge health``: is a release any good before it is frozen (:mod:`tqaforge.health`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

import typer

from tqaforge.cli._common import echo_json, friendly_errors, print_summary

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
    thresholds: Optional[str] = typer.Option(None, "--thresholds", help="NAME=VALUE,... (max_suspect_gold, max_solved_by_all, max_solved_by_none, max_below_mdd, max_label_suspect_gold, max_leaked, max_duplicated, max_biased_subtypes, max_question_only, max_memorised, min_systems; none turns one off)."),
    reference: List[Path] = typer.Option([], "--reference", help="A file of questions and tables to look for duplicates in (TableBench, FREB-TQA, ... JSONL); repeat for each (default: the shipped ones)."),
    model: Optional[str] = typer.Option(None, "--model", help="A model to ask (the --workspace's [llm] endpoint): every base item's question with the table withheld, and memorisation probes (header, row and cell completion) of each table."),
    max_cost: Optional[float] = typer.Option(None, "--max-cost", help="One budget in USD for all the model's calls; items left unasked and tables left unprobed are named."),
    question_only_threshold: float = typer.Option(0.5, "--question-only-threshold", help="With --model: flag a subtype whose share answered right without the table is above this."),
    model_check: List[str] = typer.Option([], "--model-check", help="With --model: run only this check (question_only, memorisation); repeat for each (default: both)."),
    memorisation_tables: Optional[int] = typer.Option(None, "--memorisation-tables", help="With --model: probe the first N distinct tables only (default: all)."),
    no_plots: bool = typer.Option(False, "--no-plots", help="Write no PNG plots."),
    send_suspects: bool = typer.Option(False, "--send-suspects", help="Put the suspect gold in the --workspace's adjudication queue with its evidence (a person's decision is never reopened)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Item analysis, differences that count, label quality, duplicates, answer bias and (--model) question-only answering and memorisation probes of a release; exit 1 when a threshold fails."""
    from tqaforge.errors import HealthError
    from tqaforge.health import HealthOptions, run, write_report
    from tqaforge.health.report import MODEL_CHECKS, default_health_dir

    if send_suspects and workspace is None:
        raise HealthError("--send-suspects needs the workspace whose adjudication queue takes them", hint="add --workspace DIR")
    options = HealthOptions(release=release, evaluations=tuple(evaluations), workspace=workspace, irt=irt, plots=not no_plots,
                            references=tuple(reference) if reference else None, model=model, max_cost=max_cost,
                            question_only_threshold=question_only_threshold, memorisation_tables=memorisation_tables,
                            model_checks=tuple(model_check) or MODEL_CHECKS,
                            thresholds=thresholds_from(thresholds, max_suspect_gold=max_suspect_gold, min_systems=min_systems))
    report = run(options)
    write_report(report, out or default_health_dir(release), plots=options.plots)
    if send_suspects and workspace is not None:
        from tqaforge.health.suspects import send_suspects as send

        sent = send(report, workspace)
        if as_json:
            echo_json({**report.as_dict(), "sent_to_adjudication": sent.as_dict()})
        else:
            print_summary(report)
            print_summary(sent)
    else:
        print_summary(report, as_json)
    for name, calls in report.calls():  # not in the report (its bytes do not depend on the cache): on stderr
        typer.echo(f"{name} calls: {calls.line()}", err=True)
    if not report.passed:
        raise typer.Exit(1)

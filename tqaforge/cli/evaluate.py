"""``tqaforge evaluate``: score a predictions file (or a model run through the gateway) on a release."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from tqaforge.cli._common import (
    BATCH_FILE_OPTION,
    BUDGET_OPTION,
    TRANSPORT_OPTION,
    WAIT_OPTION,
    WORKSPACE_OPTION,
    err,
    friendly_errors,
    names,
    open_ws,
    out,
    print_summary,
    progress_reporter,
    runner_options,
)

if TYPE_CHECKING:
    from tqaforge.llm.budget import Budget


def register(app: typer.Typer) -> None:
    """Add ``evaluate`` to the top-level app (it needs a workspace only for --model and --judge-model)."""
    app.command("evaluate")(evaluate_cmd)


@friendly_errors
def evaluate_cmd(
    ctx: typer.Context,
    release: Path = typer.Option(..., "--release", help="The release directory (`tqaforge release build` wrote it)."),
    predictions: Optional[Path] = typer.Option(None, "--predictions", help="JSONL: id and prediction per line (TableBench's inference format is read as it is)."),
    model: Optional[str] = typer.Option(None, "--model", help="Instead of --predictions: ask this model (the workspace's [llm] endpoint) every selected row first."),
    method: str = typer.Option("DP", "--method", help="With --model: the answering method's prompt (DP, TCoT, SCoT, PoT)."),
    subsets: str = typer.Option("base", "--subsets", help="With --model: the release subsets to ask, comma-separated."),
    serialization: str = typer.Option("markdown", "--serialization", help="With --model: how items and variants show their table (configurations carry their own)."),
    max_cost: Optional[float] = typer.Option(None, "--max-cost", help="The budget in USD of this command's model calls: the --model run's and the judge's together (unless --judge-max-cost gives the judge its own)."),
    limit: Optional[int] = typer.Option(None, "--limit", help="With --model: ask only the first N rows."),
    model_name: Optional[str] = typer.Option(None, "--model-name", help="The model of predictions that name none (default: the file's name)."),
    judge_model: Optional[str] = typer.Option(None, "--judge-model", help="Also grade every reply with this model against the reference (and acknowledgement of missing values and duplicates)."),
    judge_max_cost: Optional[float] = typer.Option(None, "--judge-max-cost", help="The judge's budget in USD."),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Where scores.json and the plots go (default: evaluations/RELEASE/PREDICTIONS)."),
    workers: int = typer.Option(2, "--workers", help="Sandbox workers for PoT and chart code, at most (one per 64 programs)."),
    programs_per_run: Optional[int] = typer.Option(None, "--programs-per-run", min=1, help="Programs run one after another in one sandbox run, at most (default 25; 1: every program in a fresh sandbox child of its own, slower; more than 1: a program that changes a library in place is seen by the next ones of its run, as in TableBench's own run)."),
    model_workers: int = typer.Option(1, "--model-workers", min=1, help="With --model: workers in this process asking the model (the step runner's --workers; --workers here is the sandbox's)."),
    transport: str = TRANSPORT_OPTION,
    budget_name: Optional[str] = BUDGET_OPTION,
    batch_file: Optional[Path] = BATCH_FILE_OPTION,
    wait: bool = WAIT_OPTION,
    no_plots: bool = typer.Option(False, "--no-plots", help="Write scores.json only."),
    as_json: bool = typer.Option(False, "--json", help="Print the scores as JSON."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Score predictions on a release: TableBench-compatible and normalised scores per subtype, type and
    configuration; Em, Emd and VP per robustness aspect; ToRR's P and R and Kendall's W."""
    from tqaforge.errors import EvaluateError
    from tqaforge.evaluate.harness import EvaluateOptions, evaluate

    if (predictions is None) == (model is None):
        raise EvaluateError("give either --predictions FILE or --model NAME", hint="--model asks the model first, then scores its replies")
    # The model run's options, and the budget, import the LLM gateway (and openai, SQLAlchemy):
    # only when a model is asked or they are given. Scoring a predictions file calls no model.
    # The runner's budget by name is made here, not by the runner: the judge spends from it too.
    runner = (runner_options(model_workers, transport, None, batch_file, wait)
              if model is not None or transport != "online" or batch_file is not None or wait else None)
    ws = open_ws(ctx, workspace) if model or judge_model else None
    if budget_name is not None and ws is None:
        raise EvaluateError("--budget names the budget of --model and --judge-model runs", hint="give one of them")
    budget: Budget | None = None
    if ws is not None or max_cost is not None:
        from tqaforge.llm.budget import Budget, open_budget

        # One budget for every paid call of the command: the model run's and the judge's.
        budget = open_budget(ws, budget_name, max_cost) if ws is not None else Budget(max_cost)
    try:
        if model is not None:
            from tqaforge.evaluate.model_run import ModelRunOptions, run_model

            assert ws is not None
            with progress_reporter(f"asking {model}", lazy=True) as on_progress:
                ran = run_model(ws, ModelRunOptions(release=release, model=model, method=method, subsets=names(subsets),
                                                    serialization=serialization, max_cost=max_cost, limit=limit),
                                on_progress=on_progress, budget=budget, runner=runner)
            for line in ran.lines():
                out.print(line, soft_wrap=True, markup=False, highlight=False)
            if ran.stopped:  # a partial run's scores would not be the model's: resume it first
                raise typer.Exit(1)
            if not ran.complete:  # rows wait for a batch: scored once every row has its reply
                err.print(f"{ran.rows - ran.answered} rows wait for their replies; run the command again once the "
                          "batch is collected (tqaforge batches status / collect) to score them")
                raise typer.Exit(0)
            predictions = Path(ran.predictions)
        assert predictions is not None
        options = EvaluateOptions(release=release, predictions=predictions, model=model_name, out=out_dir, workers=workers,
                                  plots=not no_plots, judge_model=judge_model, judge_max_cost=judge_max_cost)
        if programs_per_run is not None:
            options = replace(options, programs_per_run=programs_per_run)
        with progress_reporter("scoring", lazy=True) as on_progress:
            report = evaluate(options, ws=ws, on_progress=on_progress, judge_budget=budget if judge_max_cost is None else None)
    finally:
        if budget is not None:
            budget.close()
    print_summary(report, as_json)
    if report.judge is not None and report.judge.get("stopped"):
        raise typer.Exit(1)

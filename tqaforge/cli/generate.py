"""``tqaforge generate questions``: self-inspired question generation rounds."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from tqaforge.cli._common import WORKSPACE_OPTION, err, field_column, friendly_errors, names, open_ws, out, progress_bar, styled

generate_app = typer.Typer(help="Generate with an LLM (question generation rounds).", no_args_is_help=True, rich_markup_mode=None)


@generate_app.command("questions")
@friendly_errors
def generate_questions_cmd(
    ctx: typer.Context,
    subtypes: Optional[str] = typer.Option(None, "--subtypes", help="Comma-separated subtypes (default: all of the seed corpus)."),
    tables: str = typer.Option("all", "--tables", help="Comma-separated table ids (or unique prefixes), or 'all'."),
    per_round: Optional[int] = typer.Option(None, "--per-round", min=1, help="Questions asked for per (table, subtype) and round (default 5)."),
    target: Optional[int] = typer.Option(None, "--target", min=0, help="Accepted questions per subtype before routing to the verification agent (default 50)."),
    rounds: int = typer.Option(1, "--rounds", min=1, help="Make sure rounds 1..N are done (done steps are skipped)."),
    model: Optional[str] = typer.Option(None, "--model", help="Model name (default: model in the llm section of tqaforge.toml or TQAFORGE_LLM_MODEL)."),
    max_cost: Optional[float] = typer.Option(None, "--max-cost", help="Stop before this run's cost in USD would pass X."),
    seed: int = typer.Option(0, "--seed", min=0, help="Seed of the few-shot draws and the routing draws (stored)."),
    few_shot: Optional[int] = typer.Option(None, "--few-shot", min=0, help="Seed questions shown per prompt (default 3)."),
    serialization: Optional[str] = typer.Option(None, "--serialization", help="How the table is shown (default markdown)."),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Run again the steps whose model reply was invalid."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Self-inspired question generation rounds (TableBench); re-running resumes without paying twice."""
    from tqaforge.generation.questions import generate_questions, load_generation_options
    from tqaforge.llm import load_llm_settings

    ws = open_ws(ctx, workspace)
    options = load_generation_options(
        ws, subtypes=names(subtypes) if subtypes else None,
        tables=None if tables.strip().lower() == "all" else names(tables),
        rounds=rounds, per_round=per_round, target=target, seed=seed, few_shot=few_shot,
        serialization=serialization, retry_failed=retry_failed,
    )
    llm = load_llm_settings(ws, model=model, max_cost=max_cost)
    with progress_bar(field_column("cost")) as progress:
        task = progress.add_task(f"generating ({llm.model})", total=None, cost="$0.0000")

        def on_progress(p: Any) -> None:
            progress.update(
                task, completed=p.steps_done, total=p.steps_total,
                cost=f"${p.cost:.4f} ({p.paid_calls} paid, {p.cached_calls} cached, {p.questions_new} new questions)",
            )

        # One generation per workspace at a time: two would send the same requests and pay twice
        # before either could store the reply the other would have read from the cache.
        with ws.lock("generate", wait=False):
            summary = generate_questions(ws, options, llm, on_progress=on_progress)
    out.print(
        f"rounds {', '.join(map(str, summary.rounds)) or '-'}: {summary.steps_done} steps done, {summary.steps_present} already done, "
        f"{summary.steps_failed} with an invalid reply; {summary.questions_new} new questions, duplicates dropped: "
        f"{summary.duplicates_exact} exact, {summary.duplicates_rouge} ROUGE-L"
    )
    if summary.routed_human or summary.routed_agent:
        out.print(
            f"past the target: {summary.routed_human} to people, {summary.routed_agent} to the verification agent "
            f"({summary.verified_accepted} accepted, {summary.verified_rejected} rejected, {summary.verification_failed} unjudged)"
        )
    out.print(f"cost ${summary.cost:.4f}: {summary.paid_calls} paid calls, {summary.cached_calls} from the cache")
    if summary.stopped:
        err.print(styled(("stopped: ", "bold red"), summary.stopped))
    if summary.failed:
        err.print(summary.advice)
        raise typer.Exit(1)

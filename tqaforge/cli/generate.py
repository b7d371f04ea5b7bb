"""``tqaforge generate questions``: self-inspired question generation rounds."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tqaforge.cli._common import WORKSPACE_OPTION, err, friendly_errors, names, noted_progress, open_ws, out, styled

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
    with noted_progress(f"generating ({llm.model})") as on_progress:
        # One generation per workspace at a time: two would send the same requests and pay twice
        # before either could store the reply the other would have read from the cache.
        with ws.lock("generate", wait=False):
            summary = generate_questions(ws, options, llm, on_progress=on_progress)
    for line in summary.lines():
        out.print(line)
    if summary.stopped:
        err.print(styled(("stopped: ", "bold red"), summary.stopped))
    if summary.failed:
        err.print(summary.advice)
        raise typer.Exit(1)

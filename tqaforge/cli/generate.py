"""``tqaforge generate questions`` (self-inspired question rounds), ``generate answers`` (self-consistency answers) and ``generate probes`` (questions answered by rule)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from tqaforge.cli._common import (
    BATCH_FILE_OPTION,
    BUDGET_OPTION,
    TRANSPORT_OPTION,
    WAIT_OPTION,
    WORKERS_OPTION,
    WORKSPACE_OPTION,
    err,
    friendly_errors,
    names,
    noted_progress,
    open_ws,
    print_summary,
    runner_options,
    styled,
)

generate_app = typer.Typer(help="Generate questions and answers: with an LLM (question rounds, answers by self-consistency) or by rule (probes).", no_args_is_help=True, rich_markup_mode=None)


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
    workers: int = WORKERS_OPTION,
    transport: str = TRANSPORT_OPTION,
    budget: Optional[str] = BUDGET_OPTION,
    batch_file: Optional[Path] = BATCH_FILE_OPTION,
    wait: bool = WAIT_OPTION,
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Self-inspired question generation rounds (TableBench); re-running resumes without paying twice.
    Several workers (--workers, or several processes on one PostgreSQL store) store the same records
    as one."""
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
    runner = runner_options(workers, transport, budget, batch_file, wait)
    with noted_progress(f"generating ({llm.model})") as on_progress:
        summary = generate_questions(ws, options, llm, on_progress=on_progress, runner=runner)
    _finish(summary)


def _finish(summary: Any, json_out: bool = False) -> None:
    """Print a run's summary (lines, or JSON), what stopped it and the advice; exit 1 when it failed."""
    print_summary(summary, json_out)
    if summary.stopped:
        err.print(styled(("stopped: ", "bold red"), summary.stopped))
    if summary.failed:
        err.print(summary.advice)
        raise typer.Exit(1)


@generate_app.command("answers")
@friendly_errors
def generate_answers_cmd(
    ctx: typer.Context,
    methods: Optional[str] = typer.Option(None, "--methods", help="Comma-separated reasoning methods: dp, tcot, scot, pot (default tcot,scot,pot)."),
    samples: Optional[int] = typer.Option(None, "--samples", min=1, help="Replies per method and question (default 1)."),
    vote: Optional[str] = typer.Option(None, "--vote", help="unanimous (TableBench, default) or majority."),
    questions: list[str] = typer.Option(["accepted"], "--questions", help="accepted (default), all, or question ids / prefixes (repeat or comma-separate)."),
    model: Optional[str] = typer.Option(None, "--model", help="Model name (default: model in the llm section of tqaforge.toml or TQAFORGE_LLM_MODEL)."),
    max_cost: Optional[float] = typer.Option(None, "--max-cost", help="Stop before this run's cost in USD would pass X."),
    manual_share: Optional[float] = typer.Option(None, "--manual-share", min=0.0, max=1.0, help="Share of inconsistent answers routed to manual annotation (default 0.3)."),
    seed: Optional[int] = typer.Option(None, "--seed", min=0, help="Seed of the routing draw and the requests (stored)."),
    serialization: Optional[str] = typer.Option(None, "--serialization", help="How the table is shown (default markdown)."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    workers: int = WORKERS_OPTION,
    transport: str = TRANSPORT_OPTION,
    budget: Optional[str] = BUDGET_OPTION,
    batch_file: Optional[Path] = BATCH_FILE_OPTION,
    wait: bool = WAIT_OPTION,
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Answer questions with TCoT / SCoT / PoT agents (PoT runs in the sandbox), vote, and route: consistent
    answers to people for verification, a seeded share of the inconsistent ones to manual annotation.
    Re-running answers only questions without a vote and never pays twice."""
    from tqaforge.answers.annotate import generate_answers, load_answer_options
    from tqaforge.llm import load_llm_settings

    ws = open_ws(ctx, workspace)
    selection = tuple(n for q in questions for n in names(q))
    options = load_answer_options(
        ws, methods=names(methods) if methods else None, samples=samples, vote=vote, questions=selection,
        manual_share=manual_share, seed=seed, serialization=serialization,
    )
    llm = load_llm_settings(ws, model=model, max_cost=max_cost)
    runner = runner_options(workers, transport, budget, batch_file, wait, window=max(4, 2 * llm.concurrency))
    with noted_progress(f"answering ({llm.model})") as on_progress:
        summary = generate_answers(ws, options, llm, on_progress=on_progress, runner=runner)
    _finish(summary, json_out)


@generate_app.command("probes")
@friendly_errors
def generate_probes_cmd(
    ctx: typer.Context,
    kinds: Optional[str] = typer.Option(None, "--kinds", help="Comma-separated probe kinds (rows, columns, header, cell, range, has_header), or 'all' (the default; with --large-table: rows,columns,header)."),
    tables: str = typer.Option("all", "--tables", help="Comma-separated table ids (or unique prefixes), or 'all'."),
    seed: int = typer.Option(0, "--seed", min=0, help="Seed of the draws (template, column, cell; with --large-table also the tables per bucket and the grown rows); stored on each probe."),
    per_table: int = typer.Option(1, "--per-table", min=1, help="Header and cell probes drawn per table (distinct columns / cells)."),
    capability: Optional[str] = typer.Option(None, "--capability", help="File the probes under this capability (default: StructureUnderstanding; cell probes Grounding)."),
    large_table: bool = typer.Option(False, "--large-table", help="The large-table set: up to --per-bucket tables per token bucket (<4k, 4-8k, 8-16k, 16-32k, >32k), filed under LargeTableUnderstanding with the bucket on each probe."),
    per_bucket: int = typer.Option(1, "--per-bucket", min=1, help="With --large-table: tables drawn per token bucket."),
    buckets: str = typer.Option("all", "--buckets", help="With --large-table: comma-separated buckets (<4k, 4-8k, 8-16k, 16-32k, >32k), or 'all'."),
    grow: bool = typer.Option(True, "--grow/--no-grow", help="With --large-table: grow the largest table below an empty bucket into it (default), or only report the empty bucket."),
    format: str = typer.Option("markdown", "--format", "-f", help="With --large-table: the serialization tokens are counted in."),
    encoding: str = typer.Option("cl100k_base", "--encoding", help="With --large-table: the token encoding (cl100k_base or o200k_base)."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Questions whose exact answers come from the table itself (rows, columns, a column's header, a
    cell, the range, whether it has a header), stored with their gold answer by rule; no model needed.
    Seeded and idempotent: the same seed adds nothing the second time. Exits 1 when no probe exists."""
    from tqaforge.generation.probes import PROBE_KINDS, ProbeOptions, generate_probes

    ws = open_ws(ctx, workspace)
    every = kinds is None or kinds.strip().lower() == "all"
    selection = () if tables.strip().lower() == "all" else names(tables)
    summary: Any
    if large_table:
        from tqaforge.generation.large_tables import LARGE_TABLE_KINDS, LargeTableOptions, generate_large_table_probes
        from tqaforge.tables.tokens import BUCKET_NAMES

        if capability is not None:
            err.print("--capability does not go with --large-table: the large-table set is filed under LargeTableUnderstanding")
            raise typer.Exit(2)
        large = LargeTableOptions(
            per_bucket=per_bucket, seed=seed, kinds=LARGE_TABLE_KINDS if kinds is None else PROBE_KINDS if every else names(kinds),
            buckets=BUCKET_NAMES if buckets.strip().lower() == "all" else names(buckets), grow=grow, tables=selection,
            serialization=format, encoding=encoding, per_table=per_table,
        )
        with noted_progress("probing large tables") as on_progress:
            summary = generate_large_table_probes(ws, large, on_progress=on_progress)
    else:
        options = ProbeOptions(kinds=PROBE_KINDS if every else names(kinds or ""), tables=selection,
                               seed=seed, per_table=per_table, capability=capability)
        with noted_progress("probing tables") as on_progress:
            summary = generate_probes(ws, options, on_progress=on_progress)
    print_summary(summary, json_out)
    if summary.failed:
        err.print("no probe could be made: see the reasons above (tables with no data rows, blank headers, "
                  "or only repeated cell values), or probe other tables or kinds")
        raise typer.Exit(1)

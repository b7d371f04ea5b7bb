"""``tqaforge questions list|classify|queue|review``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tqaforge.cli._common import (
    BATCH_FILE_OPTION,
    BUDGET_OPTION,
    LIMIT_OPTION,
    OFFSET_OPTION,
    TRANSPORT_OPTION,
    WAIT_OPTION,
    WORKERS_OPTION,
    WORKSPACE_OPTION,
    Shown,
    check_choice,
    err,
    friendly_errors,
    noted_progress,
    open_ws,
    out,
    plain_table,
    print_count,
    runner_options,
    styled,
)

questions_app = typer.Typer(help="Inspect, type and review questions.", no_args_is_help=True, rich_markup_mode=None)


@questions_app.command("list")
@friendly_errors
def questions_list(
    ctx: typer.Context,
    table: Optional[str] = typer.Option(None, help="Only questions about this table (id prefix)."),
    subtype: Optional[str] = typer.Option(None, help="Only this subtype."),
    status: Optional[str] = typer.Option(None, help="proposed, accepted, rejected or seed."),
    limit: int = LIMIT_OPTION,
    offset: int = OFFSET_OPTION,
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """List questions, filtered by table, subtype and status."""
    from tqaforge import queries

    page = queries.list_questions(open_ws(ctx, workspace), table_id=table, subtype=subtype, status=status, limit=limit, offset=offset)
    t = plain_table("id", "table", "subtype", "status", "question")
    for q in page.items:
        t.add_row(q.id[:10], q.table_id[:10], q.subtype or "-", q.status, q.text)
    if page.items:
        out.print(t)
    print_count("questions", Shown(len(page.items), offset, page.total))


@questions_app.command("classify")
@friendly_errors
def questions_classify(
    ctx: typer.Context,
    method: str = typer.Option("lexical", "--method", help="lexical, llm or combined (FREB-TQA's question typing)."),
    subtype: Optional[str] = typer.Option(None, "--subtype", help="Only this subtype."),
    status: Optional[str] = typer.Option(None, "--status", help="Only this status (default: all but rejected)."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="At most this many questions."),
    tagger: str = typer.Option("auto", "--tagger", help="Comparative words by nltk, wordlist, or auto (nltk when its model is installed)."),
    model: Optional[str] = typer.Option(None, "--model", help="Model for llm and combined (default: the model of tqaforge.toml or TQAFORGE_LLM_MODEL)."),
    max_cost: Optional[float] = typer.Option(None, "--max-cost", help="Stop before this run's cost in USD would pass X."),
    workers: int = WORKERS_OPTION,
    transport: str = TRANSPORT_OPTION,
    budget: Optional[str] = BUDGET_OPTION,
    batch_file: Optional[Path] = BATCH_FILE_OPTION,
    wait: bool = WAIT_OPTION,
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Type questions as extraction or reasoning; sets question_type and meta["typing"] (evidence).
    With a model (llm, combined), questions this method and model typed before are left as they are."""
    from tqaforge.generation.classify import METHODS, ClassifyOptions, classify_questions
    from tqaforge.llm import load_llm_settings

    check_choice("--method", method, METHODS)

    ws = open_ws(ctx, workspace)
    options = ClassifyOptions(method=method, subtype=subtype, status=status, limit=limit, tagger=tagger)  # type: ignore[arg-type]
    runner = runner_options(workers, transport, budget, batch_file, wait)
    llm = load_llm_settings(ws, model=model, max_cost=max_cost) if method != "lexical" else None
    # The runner holds the step's lock itself (SQLite: one process at a time types with a model).
    with noted_progress(f"typing ({method})") as on_progress:
        summary = classify_questions(ws, options, llm, on_progress=on_progress, runner=runner)
    for line in summary.lines():
        out.print(line)
    if summary.stopped:
        err.print(styled(("stopped: ", "bold red"), summary.stopped))
    if summary.failed:
        err.print(summary.advice)
        raise typer.Exit(1)


@questions_app.command("queue")
@friendly_errors
def questions_queue(
    ctx: typer.Context,
    subtype: Optional[str] = typer.Option(None, help="Only this subtype."),
    table: Optional[str] = typer.Option(None, help="Only questions about this table (id prefix)."),
    limit: int = LIMIT_OPTION,
    offset: int = OFFSET_OPTION,
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Proposed questions waiting for review, oldest round first."""
    from tqaforge.annotation.review import review_queue

    page = review_queue(open_ws(ctx, workspace), subtype=subtype, table_id=table, limit=limit, offset=offset)
    t = plain_table("id", "table", "subtype", "round", "route", "question")
    for q in page.items:
        route = (q.lineage or {}).get("route") or "-"
        t.add_row(q.id[:10], q.table_id[:10], q.subtype or "-", str(q.round or "-"), route, q.text)
    if page.items:
        out.print(t)
    print_count("questions waiting for review", Shown(len(page.items), offset, page.total))


@questions_app.command("review")
@friendly_errors
def questions_review(
    ctx: typer.Context,
    question_id: str = typer.Argument(..., help="Question id or a unique prefix of it."),
    accept: bool = typer.Option(False, "--accept", help="Accept the question as it is."),
    reject: bool = typer.Option(False, "--reject", help="Reject it (give --reason)."),
    reason: Optional[str] = typer.Option(None, "--reason", help="Why (required with --reject)."),
    edit: Optional[str] = typer.Option(None, "--edit", help="Accept it with this new text."),
    promote: bool = typer.Option(False, "--promote", help="Make it a seed of its subtype (counts as accepted)."),
    annotator: str = typer.Option(..., "--annotator", envvar="TQAFORGE_ANNOTATOR",
                                  help="Your name (a known annotator; see `tqaforge annotators people`)."),
    new: bool = typer.Option(False, "--new", help="Register --annotator as a new person if no annotator has that name."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Record a review decision on a question (an annotation); its status follows the adjudication
    rule over every reviewer's label (one reviewer: their decision)."""
    chosen = [name for name, on in (("accept", accept), ("reject", reject), ("edit", edit is not None), ("promote", promote)) if on]
    if len(chosen) != 1:
        raise typer.BadParameter("give exactly one of --accept, --reject, --edit TEXT, --promote")
    from tqaforge.annotation.review import review_question

    r = review_question(open_ws(ctx, workspace), question_id, chosen[0], annotator=annotator, reason=reason, text=edit, new=new)
    for line in r.lines():
        out.print(line)

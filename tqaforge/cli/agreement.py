"""``tqaforge agreement report|adjudicate|queue|resolve``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer

from tqaforge.cli._common import (
    LIMIT_OPTION,
    OFFSET_OPTION,
    WORKSPACE_OPTION,
    Shown,
    check_choice,
    echo,
    echo_json,
    err,
    friendly_errors,
    names,
    open_ws,
    out,
    plain_table,
    print_count,
)

agreement_app = typer.Typer(
    help="Agreement between annotators, and adjudication of their disagreements.", no_args_is_help=True,
    rich_markup_mode=None,
)


def _excluded(option: str | None) -> tuple[str, ...]:
    """--exclude-source: the default leaves imported labels out; ``none`` keeps every source."""
    from tqaforge.labels import NOT_OURS

    if option is None:
        return NOT_OURS
    return () if option.strip().lower() == "none" else tuple(names(option))


@agreement_app.command("report")
@friendly_errors
def agreement_report_cmd(
    ctx: typer.Context,
    kind: Optional[str] = typer.Option(None, "--kind", "-k", help="Comma-separated kinds (default: every kind with annotations)."),
    fmt: str = typer.Option("table", "--format", "-f", help="table, json or markdown."),
    n_boot: int = typer.Option(1000, "--n-boot", min=0, help="Bootstrap resamples for the intervals (0: none)."),
    seed: int = typer.Option(0, "--seed", min=0, help="Seed of the bootstrap (stored with the report)."),
    ci_level: float = typer.Option(0.95, "--ci-level", min=0.5, max=0.999, help="Confidence level of the intervals (0.5-0.999)."),
    exclude_source: Optional[str] = typer.Option(None, "--exclude-source", help="Comma-separated annotation sources to leave out (default: imported; give 'none' to keep all)."),
    match_rules: str = typer.Option("exact,numeric", "--match-rules", help="Blind re-answering: matching rules (exact, numeric, loose, core)."),
    no_store: bool = typer.Option(False, "--no-store", help="Print only; do not write WORKSPACE/reports/."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Agreement statistics with bootstrap intervals per annotation kind, stored under WORKSPACE/reports/."""
    check_choice("--format", fmt, ("table", "json", "markdown"))
    from tqaforge.annotation.report import Settings, agreement_report
    from tqaforge.annotation.report_files import write_report
    from tqaforge.annotation.report_format import report_sections, to_markdown

    ws = open_ws(ctx, workspace)
    kinds = names(kind) if kind else None
    settings = Settings(
        n_boot=n_boot, seed=seed, ci_level=ci_level,
        exclude_sources=_excluded(exclude_source), match_rules=names(match_rules),  # type: ignore[arg-type]
    )
    report = agreement_report(ws, kinds=kinds, settings=settings)
    if report.is_empty and fmt == "table":
        out.print(report.message)
        return
    if fmt == "json":
        echo_json(report.as_dict())
    elif fmt == "markdown":
        echo(to_markdown(report))
    else:
        for section in report_sections(report):
            out.rule(section.title)
            for line in section.lines:
                out.print(line)
            for t in section.tables:
                table = plain_table(*t.headers, title=t.caption)
                for row in t.rows:
                    table.add_row(*row)
                out.print(table)
    if not no_store:
        json_path, md_path = write_report(ws, report, kinds=kinds)
        err.print(f"stored {json_path} and {md_path.name}")


@agreement_app.command("adjudicate")
@friendly_errors
def agreement_adjudicate(
    ctx: typer.Context,
    kind: Optional[str] = typer.Option(None, "--kind", "-k", help="Comma-separated kinds (default: all but blind_reanswer)."),
    min_agree: Optional[int] = typer.Option(None, "--min-agree", min=1, help="M of 'at least M of N agree' (default: a strict majority)."),
    exclude_source: Optional[str] = typer.Option(None, "--exclude-source", help="Comma-separated annotation sources to leave out (default: imported; 'none' keeps all)."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Final labels: unanimous and majority items are decided by rule, the rest wait in the queue."""
    from tqaforge.annotation.adjudication import adjudicate

    run = adjudicate(
        open_ws(ctx, workspace), kinds=names(kind) if kind else None, min_agree=min_agree,
        exclude_sources=_excluded(exclude_source),
    )
    for line in run.lines():
        out.print(line)


@agreement_app.command("queue")
@friendly_errors
def agreement_queue(
    ctx: typer.Context,
    kind: Optional[str] = typer.Option(None, "--kind", "-k", help="Only this kind."),
    limit: int = LIMIT_OPTION,
    offset: int = OFFSET_OPTION,
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Items whose annotators disagree and no rule decided, and suspect gold sent back with its evidence: they wait for a person."""
    from tqaforge.annotation.adjudication import adjudication_queue

    t = plain_table("task", "kind", "target", "votes")
    page = adjudication_queue(open_ws(ctx, workspace), kind=kind, limit=limit, offset=offset)
    for item in page.items:
        votes = " | ".join(f"{json.dumps(v['label'], ensure_ascii=False)}: {', '.join(v['annotators'])}" for v in item.votes)
        evidence = "".join("\n" + flag.line() for flag in item.flags)  # suspect gold sent back, with why
        t.add_row(item.task_id[:12], item.kind, f"{item.target_type} {item.target_id[:10]}", (votes or "(no label yet)") + evidence)
    if page.items:
        out.print(t)
    print_count("items waiting for a person", Shown(len(page.items), offset, page.total))


@agreement_app.command("resolve")
@friendly_errors
def agreement_resolve(
    ctx: typer.Context,
    task: str = typer.Argument(..., help="Annotation task id or a unique prefix of it."),
    label: str = typer.Argument(..., help='The final label: a value (reasoning), or JSON ({"cells": [[0, 1]]}).'),
    by: str = typer.Option(..., "--by", envvar="TQAFORGE_ANNOTATOR", help="Who decides."),
    note: Optional[str] = typer.Option(None, "--note", help="Why."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """A person's final label for one task (also overrides a rule; the replaced decision is kept)."""
    from tqaforge.annotation.adjudication import resolve
    from tqaforge.tables.readers.jsonio import JSONNestingError, loads

    try:
        value: Any = loads(label)
    except JSONNestingError as exc:
        raise typer.BadParameter(str(exc), param_hint="LABEL") from None
    except ValueError:  # not JSON (or a number JSON cannot convert): the label is the text itself
        value = label
    row = resolve(open_ws(ctx, workspace), task, value, by=by, note=note)
    out.print(f"{row.task_id[:12]} ({row.kind}): {json.dumps(row.label, ensure_ascii=False)} decided by {row.decided_by}")

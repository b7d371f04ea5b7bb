"""``tqaforge variants build|list|kinds|show``: the robustness variant grid."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from tqaforge.cli._common import (
    LIMIT_OPTION,
    OFFSET_OPTION,
    WORKSPACE_OPTION,
    Shown,
    friendly_errors,
    names,
    open_ws,
    out,
    plain_table,
    print_count,
    print_summary,
    progress_reporter,
    styled,
)

variants_app = typer.Typer(
    help="Build and inspect robustness variants (perturbations x serializations).", no_args_is_help=True,
    rich_markup_mode=None,
)

@variants_app.command("build")
@friendly_errors
def variants_build(
    ctx: typer.Context,
    serializations: Optional[str] = typer.Option(None, help="Comma-separated serializations (default: ToRR's seven; see `variants kinds`)."),
    perturbations: Optional[str] = typer.Option(None, help="Comma-separated perturbations (default: none + ToRR's four; see `variants kinds`)."),
    seeds: str = typer.Option("0", help="Comma-separated integer seeds (0 to 2147483647)."),
    subtype: Optional[str] = typer.Option(None, help="Only questions of this subtype."),
    status: str = typer.Option("accepted", help="Only questions with this status ('' for all)."),
    limit: Optional[int] = typer.Option(None, min=1, help="At most this many questions."),
    out_path: Optional[Path] = typer.Option(
        None, "--out", help="Prompts JSONL, one line per configuration (default: WORKSPACE/prompts/variants.jsonl)."
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace a prompts file made with other options."),
    no_prompts: bool = typer.Option(False, "--no-prompts", help="Store the variants only."),
    keep_structural: bool = typer.Option(
        False, "--keep-structural",
        help="Also move cells for questions that name positions (first, last, row, before...); skipped by default.",
    ),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Build items x perturbations x seeds (stored) x serializations (streamed as prompts).

    Every option is checked, and so is the prompts file, before anything is stored: a prompts
    file made with other options is never replaced without --overwrite.
    """
    from tqaforge.variants.grid import GridOptions, build_variant_grid, parse_seeds

    ws = open_ws(ctx, workspace)
    options = GridOptions(
        serializations=names(serializations) if serializations else None,
        perturbations=names(perturbations) if perturbations else None,
        seeds=parse_seeds(seeds), subtype=subtype, status=status or None, limit=limit,
        out=out_path, overwrite=overwrite, write_prompts=not no_prompts, skip_structural=not keep_structural,
    )
    with progress_reporter("building variants", lazy=True) as on_progress:
        summary = build_variant_grid(ws, options, on_progress=on_progress)
    for line in summary.lines():
        out.print(line)


@variants_app.command("list")
@friendly_errors
def variants_list(
    ctx: typer.Context,
    question: Optional[str] = typer.Option(None, "--question", help="Only variants of this question (id prefix)."),
    perturbation: Optional[str] = typer.Option(None, "--perturbation", help="Only this perturbation."),
    status: Optional[str] = typer.Option(None, "--status", help="Only this status."),
    limit: int = LIMIT_OPTION,
    offset: int = OFFSET_OPTION,
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Stored variants with their ids (what `variants show` takes)."""
    from tqaforge import queries

    page = queries.list_variants(
        open_ws(ctx, workspace), question=question, perturbation=perturbation, status=status, limit=limit, offset=offset,
    )
    t = plain_table("id", "question", "perturbation", "seed", "status", "question text / skip reason")
    for v in page.items:
        t.add_row(v.id[:12], v.question_id[:10], v.perturbation, "-" if v.seed is None else str(v.seed), v.status,
                  f"skipped: {v.skip_reason}" if v.skip_reason else (f"{v.question}\nchanged (old -> new): {v.edits}" if v.edits else v.question))
    if page.items:
        out.print(t)
    print_count("variants", Shown(len(page.items), offset, page.total))


@variants_app.command("validate")
@friendly_errors
def variants_validate(
    ctx: typer.Context,
    min_reanswers: int = typer.Option(2, "--min-reanswers", min=1, help="Blind re-answers a modification needs before it is judged."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """People's value modifications: pulled edits become variants; those whose blind re-answers all
    equal the author's new answer are validated, the others go to adjudication."""
    from tqaforge.annotation.robustness import settle_human_variants

    print_summary(settle_human_variants(open_ws(ctx, workspace), min_reanswers=min_reanswers), as_json)


@variants_app.command("kinds")
@friendly_errors
def variants_kinds() -> None:
    """The serializations and perturbations the grid knows."""
    from tqaforge.tables.perturb import PERTURBATIONS, TORR_PERTURBATIONS
    from tqaforge.tables.serialize import SERIALIZATIONS, TORR_SERIALIZATIONS

    out.print("serializations: " + ", ".join(SERIALIZATIONS))
    out.print("perturbations:  " + ", ".join(PERTURBATIONS))
    out.print("ToRR grid:      " + " x ".join([",".join(TORR_SERIALIZATIONS), ",".join(("none", *TORR_PERTURBATIONS))]))


_MARK_STYLE = {"same": "", "moved": "cyan", "changed": "bold red", "inserted": "green"}


@variants_app.command("show")
@friendly_errors
def variants_show(
    ctx: typer.Context,
    variant_id: str = typer.Argument(..., help="Variant id or a unique prefix of it (see `variants list`)."),
    max_rows: int = typer.Option(40, min=1, help="Rows to print of each table."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """The original and the perturbed table, changes marked by a symbol (and colour on a terminal).

    Side by side when both fit the terminal, one under the other otherwise.
    """
    from rich.columns import Columns

    from tqaforge.printable import escape_controls
    from tqaforge.variants.view import LEGEND, show_variant

    view = show_variant(open_ws(ctx, workspace), variant_id)
    v = view.variant
    out.print(styled((v.id, "bold"), f"  {v.perturbation}" + (f" (seed {v.seed})" if v.seed is not None else "") + f"  status {v.status}"))
    out.print(f"question: {escape_controls(view.question.text, lines=False)}")
    if v.params:
        out.print(f"params: {json.dumps(v.params)}")
    if view.perturbed is None:
        out.print(f"skipped: {v.skip_reason}")
        return
    out.print(f"gold answer: {v.answers if v.answers is not None else '(a person must decide)'} ({v.answer_effect})")
    if view.edits:
        out.print("changed cells (old -> new):")
        for line in view.edit_lines():
            out.print(f"  {line}")
    left = plain_table("#", *[h or "(blank)" for h in view.original.header], title="shortened table" if view.edits else "original")
    for i, row in enumerate(view.original.rows[:max_rows]):
        left.add_row(f"r{i}", *row)
    right = plain_table("from", *[h or "(blank)" for h in view.perturbed.header], title=v.perturbation)
    for origin, cells, marks in zip(view.row_origin, view.marked_rows(max_rows), view.marks):
        right.add_row(origin, *[styled((c, _MARK_STYLE[m])) for c, m in zip(cells, marks)])
    if view.layout(out.width, max_rows) == "side_by_side":
        out.print(Columns([left, right]))
    else:
        out.print(left)
        out.print(right)
    counts = view.counts()
    out.print(f"{LEGEND}   ({counts['changed']} changed, {counts['moved']} moved, {counts['inserted']} inserted)")

"""``tqaforge tables import|list|show|commanding``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tqaforge.cli._common import (
    LIMIT_OPTION,
    OFFSET_OPTION,
    WORKSPACE_OPTION,
    Shown,
    err,
    friendly_errors,
    names,
    open_ws,
    out,
    plain_table,
    print_count,
    progress_reporter,
    styled,
)

tables_app = typer.Typer(help="Import and inspect tables.", no_args_is_help=True, rich_markup_mode=None)

@tables_app.command("import")
@friendly_errors
def tables_import(
    ctx: typer.Context,
    paths: list[Path] = typer.Argument(..., help="Files or directories to import."),
    format: Optional[str] = typer.Option(
        None, "--format", "-f",
        help="csv, tsv, json, html, markdown, excel, tablebench, freb-tqa (default: detect).",
    ),
    min_rows: int = typer.Option(1, help="Reject tables with fewer data rows."),
    min_cols: int = typer.Option(1, help="Reject tables with fewer columns."),
    min_numeric_share: float = typer.Option(0.0, help="Reject tables with a smaller share of numeric cells."),
    tablebench_filter: bool = typer.Option(
        False, "--tablebench-filter", help="TableBench's selection: >= 8 rows, >= 5 columns, numeric share >= 0.5."
    ),
    lenient_headers: bool = typer.Option(
        False, "--lenient-headers", help="Accept blank or duplicate header names in generic files."
    ),
    encoding: Optional[str] = typer.Option(None, "--encoding", help="Text encoding of the files (default: detect, UTF-8 first)."),
    max_file_size: str = typer.Option("1GiB", "--max-file-size", help="Refuse larger files (e.g. 200MB, 2GiB)."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Import tables (and the questions and answers of benchmark files) into the workspace."""
    from tqaforge.annotation.human_import import import_human_work
    from tqaforge.ingest import ImportOptions
    from tqaforge.tables.readers._common import parse_size
    from tqaforge.tables.stats import TABLEBENCH_FILTER, SelectionFilter

    try:
        max_bytes = parse_size(max_file_size)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--max-file-size") from None
    if encoding is not None:
        import codecs

        try:
            codecs.lookup(encoding)
        except LookupError:
            raise typer.BadParameter(f"unknown encoding {encoding!r}", param_hint="--encoding") from None
    ws = open_ws(ctx, workspace)
    selection = TABLEBENCH_FILTER if tablebench_filter else SelectionFilter(min_rows, min_cols, min_numeric_share)
    options = ImportOptions(
        format=format, selection=selection, strict_headers=False if lenient_headers else None,
        encoding=encoding, max_file_bytes=max_bytes,
    )
    with progress_reporter("importing", total=0, describe=lambda path: f"importing {Path(path).name}") as on_progress:
        summary = import_human_work(ws, paths, options, on_progress=on_progress)
    for failure in summary.questions.failures():
        err.print(styled(("failed ", "red"), failure))
    for line in summary.lines():
        out.print(line)
    if summary.questions.failed:
        raise typer.Exit(1)


@tables_app.command("list")
@friendly_errors
def tables_list(
    ctx: typer.Context,
    limit: int = LIMIT_OPTION,
    offset: int = OFFSET_OPTION,
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """List the tables with their size and question count."""
    from tqaforge import queries

    ws = open_ws(ctx, workspace)
    page = queries.list_tables(ws, limit=limit, offset=offset)
    counts = queries.count_questions_by_table(ws, [r.id for r in page.items])
    t = plain_table("id", "rows", "cols", "numeric", "questions", "from")
    for r in page.items:
        t.add_row(r.id[:12], str(r.n_rows), str(r.n_cols), f"{r.numeric_share:.0%}", str(counts.get(r.id, 0)), _file_name(r.imported_from))
    if page.items:
        out.print(t)
    print_count("tables", Shown(len(page.items), offset, page.total))


@tables_app.command("commanding")
@friendly_errors
def tables_commanding(
    paths: list[Path] = typer.Argument(..., help="Table files (any importable format)."),
    out_path: Path = typer.Option(..., "--out", "-o", help="The JSON Lines file of commanding items to write."),
    seed: int = typer.Option(0, "--seed", help="Seed of every choice (which rows, which columns)."),
    operations: Optional[str] = typer.Option(None, "--operations", help="Comma-separated edits (default: all): "
                                             "add_row, remove_row, swap_rows, sort_rows, add_column, remove_column, "
                                             "swap_columns, reorder_columns, merge_columns, split_column."),
) -> None:
    """Write commanding (table editing) items made by known edits of the tables in PATHS; import
    them with `tqaforge tables import FILE`."""
    from tqaforge.tables.commanding import commanding_jsonl
    from tqaforge.tables.readers import read_path

    tables = [record.table for path in paths for record in read_path(path).records]
    text, n = commanding_jsonl(tables, seed=seed, operations=names(operations) if operations else None)
    out_path.write_text(text, encoding="utf-8")
    out.print(f"{n} commanding items from {len(tables)} tables written to {out_path}")


def _file_name(location: str | None) -> str:
    """The file part of an import location (``dir/file.jsonl:12`` -> ``file.jsonl:12``)."""
    return Path(location).name if location else ""


@tables_app.command("show")
@friendly_errors
def tables_show(
    ctx: typer.Context,
    table_id: str = typer.Argument(..., help="Table id or a unique prefix of it."),
    max_rows: int = typer.Option(30, min=0, help="Rows to print."),
    max_cols: int = typer.Option(12, min=1, max=100, help="Columns to print (at most 100)."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Print a table (a bounded part of a large one), its statistics and its questions with their answers."""
    from tqaforge import queries
    from tqaforge.printable import escape_controls

    d = queries.show_table(open_ws(ctx, workspace), table_id, max_rows=max_rows, max_cols=max_cols)
    rec = d.table
    out.print(styled((rec.id, "bold"), f"  {rec.n_rows} rows x {rec.n_cols} columns, numeric share {rec.numeric_share:.0%}"))
    for label, value in (("caption", rec.caption), ("source", rec.source), ("licence", rec.licence), ("imported from", rec.imported_from)):
        if value:
            out.print(f"{label}: {value}")
    t = plain_table(*[h or "(blank)" for h in d.header])
    for row in d.rows:
        t.add_row(*row)
    out.print(t)
    if len(d.rows) < rec.n_rows or len(d.header) < rec.n_cols:
        out.print(
            f"showing {len(d.rows)} of {rec.n_rows} rows and {len(d.header)} of {rec.n_cols} columns "
            "(--max-rows, --max-cols)"
        )
    for q in d.questions:
        # One line per question: a line feed in a question or an answer is shown as \n, so it cannot
        # start a line that looks like another question's.
        text = escape_controls(q.text, lines=False)
        answers = escape_controls("; ".join(a.value for a in d.answers.get(q.id, [])), lines=False)
        out.print(styled(
            f"- [{q.status}] {q.subtype or '-'}: {text}  ", (f"→ {answers or '(no answer)'}", "dim"), f"  ({q.id[:10]})",
        ))

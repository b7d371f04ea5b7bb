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
    print_summary,
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
    header_rows: Optional[int] = typer.Option(
        None, "--header-rows", min=1,
        help="CSV, TSV, Excel: rows that form the header, merged as '2019 / Q1' (default: detect; 1: the first row only).",
    ),
    numbers: str = typer.Option(
        "auto", "--numbers",
        help="CSV, TSV, Excel: auto detects each column's way of writing numbers (3,5  1.234,5  1 234  12 %  (1 234)); plain: 1,234.5 only.",
    ),
    keep_empty: bool = typer.Option(False, "--keep-empty", help="CSV, TSV, Excel: keep empty rows and empty unnamed columns."),
    exact: bool = typer.Option(False, "--exact", help="CSV, TSV, Excel: read the files exactly as written (no tidying at all)."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Import tables (and the questions and answers of benchmark files) into the workspace.
    CSV, TSV and Excel files are tidied (header rows merged, empty rows and columns dropped,
    numbers detected per column); the summary says what was done to which file."""
    from tqaforge.annotation.human_import import import_human_work
    from tqaforge.ingest import ImportOptions
    from tqaforge.tables.readers import TidyOptions
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
    if numbers not in ("auto", "plain"):
        raise typer.BadParameter(f"{numbers!r} is neither auto nor plain", param_hint="--numbers")
    tidy = None if exact else TidyOptions(header_rows=header_rows, numbers="plain" if numbers == "plain" else "auto",
                                          drop_empty=not keep_empty)
    ws = open_ws(ctx, workspace)
    selection = TABLEBENCH_FILTER if tablebench_filter else SelectionFilter(min_rows, min_cols, min_numeric_share)
    options = ImportOptions(
        format=format, selection=selection, strict_headers=False if lenient_headers else None,
        encoding=encoding, max_file_bytes=max_bytes, tidy=tidy,
    )
    with progress_reporter("importing", total=0, describe=lambda path: f"importing {Path(path).name}") as on_progress:
        summary = import_human_work(ws, paths, options, on_progress=on_progress)
    for failure in summary.questions.failures():
        err.print(styled(("failed ", "red"), failure))
    for line in summary.lines():
        out.print(line)
    if summary.questions.failed:
        raise typer.Exit(1)


# Not imported from tables.serialize: the help is built whenever the CLI starts.
FORMAT_HELP = "Serialization to count tokens in (markdown, csv, html, json, xml, latex, grid...; a wrong name lists them all)"
ENCODING_HELP = "Token encoding (bpe-openai, offline): cl100k_base (default) or o200k_base."


@tables_app.command("list")
@friendly_errors
def tables_list(
    ctx: typer.Context,
    limit: int = LIMIT_OPTION,
    offset: int = OFFSET_OPTION,
    tokens_min: Optional[int] = typer.Option(None, "--tokens-min", min=0, help="Only tables of at least this many tokens."),
    tokens_max: Optional[int] = typer.Option(None, "--tokens-max", min=0, help="Only tables of at most this many tokens."),
    format: Optional[str] = typer.Option(None, "--format", "-f", help=FORMAT_HELP + " (default markdown); shows a tokens column."),
    encoding: Optional[str] = typer.Option(None, "--encoding", help=ENCODING_HELP),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """List the tables with their size and question count (and token length, with a token option)."""
    from tqaforge import queries

    ws = open_ws(ctx, workspace)
    page = queries.list_tables(
        ws, limit=limit, offset=offset, tokens_min=tokens_min, tokens_max=tokens_max, serialization=format, encoding=encoding,
    )
    counts = queries.count_questions_by_table(ws, [r.id for r in page.items])
    counting = any(v is not None for v in (tokens_min, tokens_max, format, encoding))
    t = plain_table("id", "rows", "cols", "numeric", *(("tokens",) if counting else ()), "questions", "from")
    for r in page.items:
        tokens = (str(r.tokens),) if counting else ()
        t.add_row(r.id[:12], str(r.n_rows), str(r.n_cols), f"{r.numeric_share:.0%}", *tokens, str(counts.get(r.id, 0)),
                  _file_name(r.imported_from))
    if page.items:
        out.print(t)
    print_count("tables", Shown(len(page.items), offset, page.total))


@tables_app.command("stats")
@friendly_errors
def tables_stats(
    ctx: typer.Context,
    format: list[str] = typer.Option(
        ["markdown"], "--format", "-f", help=FORMAT_HELP + "; repeat it, or give all.",
    ),
    encoding: str = typer.Option("cl100k_base", "--encoding", help=ENCODING_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """How many tables fall in each token-length bucket of the capability-based TableBench
    (<4k, 4-8k, 8-16k, 16-32k, >32k; k = 1024), per serialization."""
    from tqaforge import queries
    from tqaforge.tables.serialize import SERIALIZATIONS

    formats = list(SERIALIZATIONS) if "all" in format else format
    summary = queries.token_buckets(open_ws(ctx, workspace), serializations=formats, encoding=encoding)
    print_summary(summary, as_json)


@tables_app.command("grow")
@friendly_errors
def tables_grow(
    ctx: typer.Context,
    table_id: str = typer.Argument(..., help="Table id or a unique prefix of it."),
    tokens: int = typer.Option(..., "--tokens", help="Grow to at least this many tokens (e.g. 40000 for >32k)."),
    seed: int = typer.Option(..., "--seed", min=0, help="Seed of the row draw (stored in the new table's source)."),
    format: str = typer.Option("markdown", "--format", "-f", help=FORMAT_HELP + "."),
    encoding: str = typer.Option("cl100k_base", "--encoding", help=ENCODING_HELP),
    id_column: str = typer.Option("source_row", "--id-column", help="Name of the column that holds each row's 0-based source row."),
    no_id_column: bool = typer.Option(False, "--no-id-column", help="Leave the source-row column out."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Grow a table to a token length by drawing its rows with replacement, and store the result
    as a new table whose source names the table it came from (same seed, same table)."""
    from tqaforge.ingest import grow_stored_table
    from tqaforge.tables.grow import GrowOptions

    options = GrowOptions(
        target_tokens=tokens, seed=seed, serialization=format, encoding=encoding, id_column=None if no_id_column else id_column,
    )
    print_summary(grow_stored_table(open_ws(ctx, workspace), table_id, options), as_json)


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
    from tqaforge.files import atomic_write_text
    from tqaforge.tables.commanding import commanding_jsonl
    from tqaforge.tables.readers import read_path

    tables = [record.table for path in paths for record in read_path(path).records]
    text, n = commanding_jsonl(tables, seed=seed, operations=names(operations) if operations else None)
    atomic_write_text(out_path, text)  # a killed run leaves the old file or the new one, never half of one
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

"""The ``tqaforge`` command line. Thin: parse, call one library function, print.

Every command works on the workspace in the current directory (or a parent), or the one given
with ``--workspace DIR``. Errors print their message (no traceback) and exit with status 1.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any, Callable, Optional, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.columns import Columns
from rich.markup import escape
from rich.table import Table as RichTable

from tqaforge import catalog
from tqaforge.errors import TqaforgeError
from tqaforge.generation import corpus as seed_corpus
from tqaforge.generation.review import review_queue, review_question
from tqaforge.store import Workspace, init_workspace, open_workspace
from tqaforge.tables.grid import GridSpec, build_variants, load_items, write_prompts_file
from tqaforge.tables.importer import ImportOptions, import_paths
from tqaforge.tables.perturb import PERTURBATIONS, TORR_PERTURBATIONS
from tqaforge.tables.serialize import SERIALIZATIONS, TORR_SERIALIZATIONS
from tqaforge.tables.variant_view import show_variant
from tqaforge.tables.stats import TABLEBENCH_FILTER, SelectionFilter

app = typer.Typer(help="Build table-reasoning benchmarks for LLMs.", no_args_is_help=True, add_completion=False)
tables_app = typer.Typer(help="Import and inspect tables.", no_args_is_help=True)
questions_app = typer.Typer(help="Inspect questions.", no_args_is_help=True)
variants_app = typer.Typer(help="Build and inspect robustness variants (perturbations x serializations).", no_args_is_help=True)
app.add_typer(tables_app, name="tables")
app.add_typer(questions_app, name="questions")
app.add_typer(variants_app, name="variants")
seeds_app = typer.Typer(help="The seed corpus: a definition and seed questions per subtype (WORKSPACE/seeds.toml).", no_args_is_help=True)
generate_app = typer.Typer(help="Generate with an LLM (question generation rounds).", no_args_is_help=True)
app.add_typer(seeds_app, name="seeds")
app.add_typer(generate_app, name="generate")

out = Console()
err = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])


def friendly_errors(fn: F) -> F:
    """Turn tqaforge errors into a one-paragraph message and exit status 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except TqaforgeError as exc:
            err.print(f"[bold red]error:[/] {exc}", highlight=False, markup=True)
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            err.print("interrupted: finished work is stored; run the command again to resume")
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


@app.callback()
def main(
    ctx: typer.Context,
    workspace: Optional[Path] = typer.Option(
        None, "--workspace", "-w", help="Workspace directory (default: the current one or a parent).",
        envvar="TQAFORGE_WORKSPACE",
    ),
) -> None:
    ctx.obj = {"workspace": workspace}


def _ws(ctx: typer.Context) -> Workspace:
    root = ctx.find_root().obj.get("workspace") if ctx.find_root().obj else None
    return open_workspace(root)


@app.command()
@friendly_errors
def init(
    directory: Path = typer.Argument(Path("."), help="Where to create the workspace."),
    name: Optional[str] = typer.Option(None, help="Workspace name (default: the directory name)."),
    taxonomy: str = typer.Option("tablebench", help="tablebench, freb-tqa or custom."),
    database_url: Optional[str] = typer.Option(None, help="SQLAlchemy URL instead of the SQLite file."),
) -> None:
    """Create a benchmark workspace (tqaforge.toml + database), or bring one up to date."""
    ws = init_workspace(directory, name=name, taxonomy=taxonomy, database_url=database_url)
    out.print(f"workspace [bold]{ws.config.name}[/] ready in {ws.root}")
    out.print(f"database: {ws.database_url}")


@app.command()
@friendly_errors
def status(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Counts per pipeline stage: the funnel from tables to releases."""
    f = catalog.funnel(_ws(ctx))
    if as_json:
        out.print_json(json.dumps({"stages": f.as_dict(), "llm_cost": f.llm_cost}))
        return
    t = RichTable(title="pipeline funnel")
    t.add_column("stage")
    t.add_column("total", justify="right")
    t.add_column("by status")
    for stage, counts in f.stages:
        detail = ", ".join(f"{k}: {v}" for k, v in counts.items() if k != "total")
        t.add_row(stage, str(counts["total"]), detail)
    out.print(t)
    out.print(f"LLM cost so far: ${f.llm_cost:.4f}")


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
) -> None:
    """Import tables (and the questions and answers of benchmark files) into the workspace."""
    ws = _ws(ctx)
    selection = TABLEBENCH_FILTER if tablebench_filter else SelectionFilter(min_rows, min_cols, min_numeric_share)
    options = ImportOptions(format=format, selection=selection, strict_headers=False if lenient_headers else None)
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=err, transient=not sys.stderr.isatty(),
    ) as progress:
        task = progress.add_task("importing", total=0)

        def on_file(path: str, n: int) -> None:
            progress.update(task, total=(progress.tasks[0].total or 0) + n, description=f"importing {Path(path).name}")

        summary = import_paths(ws, paths, options, on_file=on_file, on_progress=lambda n: progress.advance(task, n))
    for f in summary.files:
        if f.error:
            err.print(f"[red]failed[/] {f.error}", highlight=False)
    out.print(
        f"imported {summary.total('tables_new')} tables, {summary.total('questions_new')} questions, "
        f"{summary.total('answers_new')} answers; already present: {summary.total('tables_present')} tables, "
        f"{summary.total('questions_present')} questions; rejected: {len(summary.rejected)} tables; "
        f"failed files: {len(summary.failed)} of {len(summary.files)}"
    )
    for location, reason in summary.rejected[:20]:
        out.print(f"  rejected {location}: {reason}", highlight=False)
    if len(summary.rejected) > 20:
        out.print(f"  ... and {len(summary.rejected) - 20} more rejected")
    if summary.failed:
        raise typer.Exit(1)


@tables_app.command("list")
@friendly_errors
def tables_list(
    ctx: typer.Context,
    limit: int = typer.Option(50, help="How many to show."),
    offset: int = typer.Option(0, help="How many to skip."),
) -> None:
    """List the tables with their size and question count."""
    ws = _ws(ctx)
    rows = catalog.list_tables(ws, limit=limit, offset=offset)
    counts = catalog.count_questions_by_table(ws, [r.id for r in rows])
    t = RichTable()
    for col in ("id", "rows", "cols", "numeric", "questions", "from"):
        t.add_column(col)
    for r in rows:
        t.add_row(r.id[:12], str(r.n_rows), str(r.n_cols), f"{r.numeric_share:.0%}", str(counts.get(r.id, 0)), r.imported_from or "")
    out.print(t)


@tables_app.command("show")
@friendly_errors
def tables_show(
    ctx: typer.Context,
    table_id: str = typer.Argument(..., help="Table id or a unique prefix of it."),
    max_rows: int = typer.Option(30, help="Rows to print."),
) -> None:
    """Print a table, its statistics and its questions with their answers."""
    d = catalog.show_table(_ws(ctx), table_id)
    rec = d.table
    out.print(f"[bold]{rec.id}[/]  {rec.n_rows} rows x {rec.n_cols} columns, numeric share {rec.numeric_share:.0%}")
    for label, value in (("caption", rec.caption), ("source", rec.source), ("licence", rec.licence), ("imported from", rec.imported_from)):
        if value:
            out.print(f"{label}: {value}", highlight=False)
    t = RichTable(*[h or "(blank)" for h in rec.header])
    for row in rec.rows[:max_rows]:
        t.add_row(*row)
    out.print(t)
    if rec.n_rows > max_rows:
        out.print(f"... {rec.n_rows - max_rows} more rows")
    for q in d.questions:
        answers = "; ".join(a.value for a in d.answers.get(q.id, []))
        out.print(f"- [{q.status}] {q.subtype or '-'}: {q.text}  [dim]→ {answers or '(no answer)'}[/]  ({q.id[:10]})", highlight=False)


@questions_app.command("list")
@friendly_errors
def questions_list(
    ctx: typer.Context,
    table: Optional[str] = typer.Option(None, help="Only questions about this table (id prefix)."),
    subtype: Optional[str] = typer.Option(None, help="Only this subtype."),
    status: Optional[str] = typer.Option(None, help="proposed, accepted, rejected or seed."),
    limit: int = typer.Option(50, help="How many to show."),
    offset: int = typer.Option(0, help="How many to skip."),
) -> None:
    """List questions, filtered by table, subtype and status."""
    rows = catalog.list_questions(_ws(ctx), table_id=table, subtype=subtype, status=status, limit=limit, offset=offset)
    t = RichTable()
    for col in ("id", "table", "subtype", "status", "question"):
        t.add_column(col)
    for q in rows:
        t.add_row(q.id[:10], q.table_id[:10], q.subtype or "-", q.status, q.text)
    out.print(t)


@questions_app.command("classify")
@friendly_errors
def questions_classify(
    ctx: typer.Context,
    method: str = typer.Option("lexical", "--method", help="lexical, llm or combined (FREB-TQA's question typing)."),
    subtype: Optional[str] = typer.Option(None, "--subtype", help="Only this subtype."),
    status: Optional[str] = typer.Option(None, "--status", help="Only this status (default: all but rejected)."),
    limit: Optional[int] = typer.Option(None, "--limit", help="At most this many questions."),
    tagger: str = typer.Option("auto", "--tagger", help="Comparative words by nltk, wordlist, or auto (nltk when its model is installed)."),
    model: Optional[str] = typer.Option(None, "--model", help="Model for llm and combined (default: the model of tqaforge.toml or TQAFORGE_LLM_MODEL)."),
    max_cost: Optional[float] = typer.Option(None, "--max-cost", help="Stop before this run's cost in USD would pass X."),
) -> None:
    """Type questions as extraction or reasoning; sets question_type and meta["typing"] (evidence)."""
    from tqaforge.generation.classify import METHODS, classify_questions
    from tqaforge.generation.llm import load_llm_settings

    if method not in METHODS:
        raise typer.BadParameter(f"--method must be one of {', '.join(METHODS)}, got {method!r}")
    ws = _ws(ctx)
    llm = load_llm_settings(ws, model=model, max_cost=max_cost) if method != "lexical" else None
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[cost]}"),
        TimeElapsedColumn(), console=err, transient=not sys.stderr.isatty(),
    ) as progress:
        task = progress.add_task(f"typing ({method})", total=None, cost="")

        def on_progress(done: int, s: Any) -> None:
            cost = f"${s.cost:.4f} ({s.paid_calls} paid, {s.cached_calls} cached)" if llm else ""
            progress.update(task, completed=done, total=s.total, cost=cost)

        summary = classify_questions(ws, method=method, subtype=subtype, status=status, limit=limit, tagger=tagger,  # type: ignore[arg-type]
                                     settings=llm, on_progress=on_progress)
    how = f"comparative words by {summary.tagger}" if summary.tagger else ""
    if summary.model:
        how += (", " if how else "") + f"model {summary.model}"
    out.print(
        f"{summary.questions} questions typed ({how}): {summary.types.get('extraction', 0)} extraction, "
        f"{summary.types.get('reasoning', 0)} reasoning, {summary.types.get('undecided', 0)} undecided; "
        f"{summary.changed} changed; {summary.structural} with structural words", highlight=False,
    )
    for rule, n in summary.rules.most_common():
        out.print(f"  {n:6} x {rule}", highlight=False)
    if summary.no_answer:
        out.print(f"{summary.no_answer} without an answer (the lexical rule needs one): left undecided", highlight=False)
    if summary.invalid:
        out.print(f"{summary.invalid} with an invalid model reply after the repair: left as they were", highlight=False)
    if summary.human:
        out.print(f"{summary.human} typed by a person: left alone", highlight=False)
    if llm:
        out.print(f"cost ${summary.cost:.4f}: {summary.paid_calls} paid calls, {summary.cached_calls} from the cache", highlight=False)


def _names(value: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))


@variants_app.command("build")
@friendly_errors
def variants_build(
    ctx: typer.Context,
    serializations: str = typer.Option(
        ",".join(TORR_SERIALIZATIONS), help="Comma-separated serializations (see `variants list`)."
    ),
    perturbations: str = typer.Option(
        ",".join(("none", *TORR_PERTURBATIONS)), help="Comma-separated perturbations (see `variants list`)."
    ),
    seeds: str = typer.Option("0", help="Comma-separated integer seeds."),
    subtype: Optional[str] = typer.Option(None, help="Only questions of this subtype."),
    status: str = typer.Option("accepted", help="Only questions with this status ('' for all)."),
    limit: Optional[int] = typer.Option(None, help="At most this many questions."),
    out_path: Optional[Path] = typer.Option(
        None, "--out", help="Prompts JSONL, one line per configuration (default: WORKSPACE/prompts/variants.jsonl)."
    ),
    no_prompts: bool = typer.Option(False, "--no-prompts", help="Store the variants only."),
    keep_structural: bool = typer.Option(
        False, "--keep-structural",
        help="Also move cells for questions that name positions (first, last, row, before...); skipped by default.",
    ),
) -> None:
    """Build items x perturbations x seeds (stored) x serializations (streamed as prompts)."""
    ws = _ws(ctx)
    try:
        seed_values = tuple(int(x) for x in _names(seeds))
    except ValueError:
        raise typer.BadParameter(f"seeds must be integers, got {seeds!r}") from None
    spec = GridSpec(_names(serializations), _names(perturbations), seed_values, skip_structural=not keep_structural)
    items = load_items(ws, subtype=subtype, status=status or None, limit=limit)
    target = out_path or ws.root / "prompts" / "variants.jsonl"
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=err, transient=not sys.stderr.isatty(),
    ) as progress:
        task = progress.add_task("building variants", total=len(items))
        advance = lambda n: progress.advance(task, n)  # noqa: E731
        if no_prompts:
            summary = build_variants(ws, items, spec, on_progress=advance)
        else:
            summary = write_prompts_file(target, lambda fh: build_variants(ws, items, spec, prompts=fh, on_progress=advance))
    out.print(
        f"{summary.items} items: {summary.variants_new} new variants, {summary.variants_present} already present, "
        f"{sum(summary.skipped.values())} skipped" + ("" if no_prompts else f"; {summary.prompts} prompts -> {target}")
    )
    for name, n in sorted(summary.skipped.items()):
        out.print(f"  skipped {name}: {n}")
    for reason, n in sorted(summary.skip_reasons.items(), key=lambda kv: -kv[1])[:10]:
        out.print(f"    {n} x {reason}", highlight=False)


@variants_app.command("list")
@friendly_errors
def variants_list() -> None:
    """The serializations and perturbations the grid knows."""
    out.print("serializations: " + ", ".join(SERIALIZATIONS))
    out.print("perturbations:  " + ", ".join(PERTURBATIONS))
    out.print("ToRR grid:      " + " x ".join([",".join(TORR_SERIALIZATIONS), ",".join(("none", *TORR_PERTURBATIONS))]))


_MARK_STYLE = {"same": "", "moved": "cyan", "changed": "bold red", "inserted": "green"}


@variants_app.command("show")
@friendly_errors
def variants_show(
    ctx: typer.Context,
    variant_id: str = typer.Argument(..., help="Variant id or a unique prefix of it."),
    max_rows: int = typer.Option(40, help="Rows to print of each table."),
) -> None:
    """The original and the perturbed table side by side, with the changes marked."""
    view = show_variant(_ws(ctx), variant_id)
    v = view.variant
    out.print(f"[bold]{v.id}[/]  {v.perturbation} (seed {v.seed})  status {v.status}", highlight=False)
    out.print(f"question: {view.question.text}", highlight=False)
    if v.params:
        out.print(f"params: {json.dumps(v.params)}", highlight=False)
    if view.perturbed is None:
        out.print(f"skipped: {v.skip_reason}", highlight=False)
        return
    out.print(f"gold answer: {v.answers if v.answers is not None else '(a person must decide)'} ({v.answer_effect})", highlight=False)
    left = RichTable("#", *[escape(h) or "(blank)" for h in view.original.header], title="original")
    for i, row in enumerate(view.original.rows[:max_rows]):
        left.add_row(f"r{i}", *[escape(c) for c in row])
    right = RichTable("from", *[escape(h) or "(blank)" for h in view.perturbed.header], title=f"{v.perturbation}")
    for origin, row, marks in list(zip(view.row_origin, view.perturbed.rows, view.marks))[:max_rows]:
        right.add_row(origin, *[f"[{_MARK_STYLE[m]}]{escape(c)}[/]" if _MARK_STYLE[m] else escape(c) for c, m in zip(row, marks)])
    out.print(Columns([left, right]))
    out.print("[cyan]moved[/]  [bold red]changed[/]  [green]inserted[/]")


# --- seed corpus, question generation and review -------------------------------------------


@seeds_app.command("list")
@friendly_errors
def seeds_list(
    ctx: typer.Context,
    subtype: Optional[str] = typer.Option(None, "--subtype", help="Only this subtype."),
) -> None:
    """The definition and seed questions of each subtype (file seeds, then promoted questions)."""
    ws = _ws(ctx)
    corpus = seed_corpus.load_corpus_file(ws)
    entries = seed_corpus.seed_entries(ws, subtype)
    out.print(f"seed corpus: {seed_corpus.corpus_path(ws)}", highlight=False)
    for cat in corpus.categories:
        if subtype is not None and cat.subtype != subtype:
            continue
        out.print(f"\n[bold]{escape(cat.subtype)}[/] ({escape(cat.type)})")
        out.print(f"  {escape(cat.definition)}", highlight=False)
        for e in entries:
            if e.subtype == cat.subtype:
                tag = "" if e.source == "corpus" else f"  [dim](promoted {e.question_id[:10] if e.question_id else ''})[/]"
                out.print(f"  - {escape(e.text)}{tag}", highlight=False)
    if not corpus.categories:
        out.print('the corpus is empty: tqaforge seeds add SUBTYPE "question" --definition "..."')


@seeds_app.command("add")
@friendly_errors
def seeds_add(
    ctx: typer.Context,
    subtype: str = typer.Argument(..., help="The subtype (category) the seed belongs to."),
    question: Optional[str] = typer.Argument(None, help="The seed question."),
    definition: Optional[str] = typer.Option(None, "--definition", help="Set (replace) the subtype's definition."),
) -> None:
    """Add a seed question to a subtype and/or set its definition."""
    ws = _ws(ctx)
    cat = seed_corpus.add_seed(ws, subtype, question, definition=definition)
    out.print(f"{cat.subtype}: {len(cat.seeds)} seeds in {seed_corpus.corpus_path(ws)}", highlight=False)


@seeds_app.command("import")
@friendly_errors
def seeds_import(
    ctx: typer.Context,
    path: Path = typer.Argument(..., help="A seed corpus TOML file for the workspace taxonomy."),
    replace_definitions: bool = typer.Option(False, "--replace-definitions", help="Take the file's definitions where they differ."),
) -> None:
    """Merge a seed corpus file into the workspace corpus (new categories and seeds are added)."""
    r = seed_corpus.import_seeds(_ws(ctx), path, replace_definitions=replace_definitions)
    out.print(
        f"added {r.seeds_added} seeds ({len(r.categories_added)} new categories), {r.seeds_present} already present; "
        f"definitions replaced: {len(r.definitions_replaced)}", highlight=False,
    )
    if r.definitions_kept:
        out.print("kept our definition (use --replace-definitions to take the file's): " + ", ".join(r.definitions_kept), highlight=False)


@generate_app.command("questions")
@friendly_errors
def generate_questions_cmd(
    ctx: typer.Context,
    subtypes: Optional[str] = typer.Option(None, "--subtypes", help="Comma-separated subtypes (default: all of the seed corpus)."),
    tables: str = typer.Option("all", "--tables", help="Comma-separated table ids (or unique prefixes), or 'all'."),
    per_round: Optional[int] = typer.Option(None, "--per-round", help="Questions asked for per (table, subtype) and round (default 5)."),
    target: Optional[int] = typer.Option(None, "--target", help="Accepted questions per subtype before routing to the verification agent (default 50)."),
    rounds: int = typer.Option(1, "--rounds", help="Make sure rounds 1..N are done (done steps are skipped)."),
    model: Optional[str] = typer.Option(None, "--model", help="Model name (default: model in the llm section of tqaforge.toml or TQAFORGE_LLM_MODEL)."),
    max_cost: Optional[float] = typer.Option(None, "--max-cost", help="Stop before this run's cost in USD would pass X."),
    seed: int = typer.Option(0, "--seed", help="Seed of the few-shot draws and the routing draws (stored)."),
    few_shot: Optional[int] = typer.Option(None, "--few-shot", help="Seed questions shown per prompt (default 3)."),
    serialization: Optional[str] = typer.Option(None, "--serialization", help="How the table is shown (default markdown)."),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Run again the steps whose model reply was invalid."),
) -> None:
    """Self-inspired question generation rounds (TableBench); re-running resumes without paying twice."""
    from tqaforge.generation.llm import load_llm_settings
    from tqaforge.generation.questions import generate_questions, load_generation_options

    ws = _ws(ctx)
    options = load_generation_options(
        ws, subtypes=_names(subtypes) if subtypes else None,
        tables=None if tables.strip().lower() == "all" else _names(tables),
        rounds=rounds, per_round=per_round, target=target, seed=seed, few_shot=few_shot,
        serialization=serialization, retry_failed=retry_failed,
    )
    llm = load_llm_settings(ws, model=model, max_cost=max_cost)
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[cost]}"),
        TimeElapsedColumn(), console=err, transient=not sys.stderr.isatty(),
    ) as progress:
        task = progress.add_task(f"generating ({llm.model})", total=None, cost="$0.0000")

        def on_progress(p: Any) -> None:
            progress.update(
                task, completed=p.steps_done, total=p.steps_total,
                cost=f"${p.cost:.4f} ({p.paid_calls} paid, {p.cached_calls} cached, {p.questions_new} new questions)",
            )

        summary = generate_questions(ws, options, llm, on_progress=on_progress)
    out.print(
        f"rounds {', '.join(map(str, summary.rounds)) or '-'}: {summary.steps_done} steps done, {summary.steps_present} already done, "
        f"{summary.steps_failed} with an invalid reply; {summary.questions_new} new questions, duplicates dropped: "
        f"{summary.duplicates_exact} exact, {summary.duplicates_rouge} ROUGE-L", highlight=False,
    )
    if summary.routed_human or summary.routed_agent:
        out.print(
            f"past the target: {summary.routed_human} to people, {summary.routed_agent} to the verification agent "
            f"({summary.verified_accepted} accepted, {summary.verified_rejected} rejected, {summary.verification_failed} unjudged)",
            highlight=False,
        )
    out.print(f"cost ${summary.cost:.4f}: {summary.paid_calls} paid calls, {summary.cached_calls} from the cache", highlight=False)
    if summary.stopped:
        err.print(f"[bold red]stopped:[/] {escape(summary.stopped)}", highlight=False)
        err.print("finished steps are stored; run the command again (with a larger --max-cost) to resume", highlight=False)
        raise typer.Exit(1)


@questions_app.command("queue")
@friendly_errors
def questions_queue(
    ctx: typer.Context,
    subtype: Optional[str] = typer.Option(None, help="Only this subtype."),
    table: Optional[str] = typer.Option(None, help="Only questions about this table (id prefix)."),
    limit: int = typer.Option(50, help="How many to show."),
    offset: int = typer.Option(0, help="How many to skip."),
) -> None:
    """Proposed questions waiting for review, oldest round first."""
    rows = review_queue(_ws(ctx), subtype=subtype, table_id=table, limit=limit, offset=offset)
    t = RichTable()
    for col in ("id", "table", "subtype", "round", "route", "question"):
        t.add_column(col)
    for q in rows:
        route = (q.lineage or {}).get("route") or "-"
        t.add_row(q.id[:10], q.table_id[:10], q.subtype or "-", str(q.round or "-"), route, escape(q.text))
    out.print(t)


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
    annotator: str = typer.Option(..., "--annotator", envvar="TQAFORGE_ANNOTATOR", help="Your name, recorded with the decision."),
) -> None:
    """Record a review decision on a question (an annotation) and set its status."""
    chosen = [name for name, on in (("accept", accept), ("reject", reject), ("edit", edit is not None), ("promote", promote)) if on]
    if len(chosen) != 1:
        raise typer.BadParameter("give exactly one of --accept, --reject, --edit TEXT, --promote")
    r = review_question(_ws(ctx), question_id, chosen[0], annotator=annotator, reason=reason, text=edit)
    note = "" if r.recorded else " (same as your last decision; nothing new recorded)"
    out.print(f"{r.question.id[:10]}: {r.previous_status} -> {r.question.status}{note}", highlight=False)


# --- agreement statistics and adjudication ---------------------------------------------------

agreement_app = typer.Typer(help="Agreement between annotators, and adjudication of their disagreements.", no_args_is_help=True)
app.add_typer(agreement_app, name="agreement")


@agreement_app.command("report")
@friendly_errors
def agreement_report_cmd(
    ctx: typer.Context,
    kind: Optional[str] = typer.Option(None, "--kind", "-k", help="Comma-separated kinds (default: every kind with annotations)."),
    fmt: str = typer.Option("table", "--format", "-f", help="table, json or markdown."),
    n_boot: int = typer.Option(1000, "--n-boot", help="Bootstrap resamples for the intervals (0: none)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap (stored with the report)."),
    ci_level: float = typer.Option(0.95, "--ci-level", help="Confidence level of the intervals."),
    exclude_source: Optional[str] = typer.Option(None, "--exclude-source", help="Comma-separated annotation sources to leave out (e.g. agent)."),
    match_rules: str = typer.Option("exact,numeric", "--match-rules", help="Blind re-answering: matching rules (exact, numeric, loose, core)."),
    no_store: bool = typer.Option(False, "--no-store", help="Print only; do not write WORKSPACE/reports/."),
) -> None:
    """Agreement statistics with bootstrap intervals per annotation kind, stored under WORKSPACE/reports/."""
    from tqaforge.annotation.report_format import report_sections, to_markdown
    from tqaforge.annotation.workflows import Settings, agreement_report, write_report

    if fmt not in ("table", "json", "markdown"):
        raise typer.BadParameter(f"--format must be table, json or markdown, got {fmt!r}")
    ws = _ws(ctx)
    kinds = _names(kind) if kind else None
    settings = Settings(
        n_boot=n_boot, seed=seed, ci_level=ci_level,
        exclude_sources=_names(exclude_source) if exclude_source else (), match_rules=_names(match_rules),  # type: ignore[arg-type]
    )
    report = agreement_report(ws, kinds=kinds, settings=settings)
    if fmt == "json":
        typer.echo(json.dumps(report.as_dict(), indent=2, ensure_ascii=False))
    elif fmt == "markdown":
        typer.echo(to_markdown(report))
    else:
        for section in report_sections(report):
            out.rule(escape(section.title))
            for line in section.lines:
                out.print(escape(line), highlight=False)
            for t in section.tables:
                table = RichTable(*t.headers, title=escape(t.caption), title_justify="left")
                for row in t.rows:
                    table.add_row(*(escape(c) for c in row))
                out.print(table)
    if not no_store:
        json_path, md_path = write_report(ws, report, kinds=kinds)
        err.print(f"stored {json_path} and {md_path.name}", highlight=False)


@agreement_app.command("adjudicate")
@friendly_errors
def agreement_adjudicate(
    ctx: typer.Context,
    kind: Optional[str] = typer.Option(None, "--kind", "-k", help="Comma-separated kinds (default: all but blind_reanswer)."),
    min_agree: Optional[int] = typer.Option(None, "--min-agree", help="M of 'at least M of N agree' (default: a strict majority)."),
    exclude_source: Optional[str] = typer.Option(None, "--exclude-source", help="Comma-separated annotation sources to leave out."),
) -> None:
    """Final labels: unanimous and majority items are decided by rule, the rest wait in the queue."""
    from tqaforge.annotation.adjudication import adjudicate

    summaries = adjudicate(
        _ws(ctx), kinds=_names(kind) if kind else None, min_agree=min_agree,
        exclude_sources=_names(exclude_source) if exclude_source else (),
    )
    for name, s in summaries.items():
        if not any((s.unanimous, s.rule, s.open, s.person, s.single, s.problems)):
            continue
        out.print(
            f"{name}: {s.unanimous} unanimous, {s.rule} by rule, {s.open} open (the queue), {s.person} decided by a person, "
            f"{s.single} with one annotator; {s.new} new, {s.updated} updated", highlight=False,
        )
        if s.stale:
            out.print(f"  {len(s.stale)} decisions by a person predate new annotations: {', '.join(t[:10] for t in s.stale[:10])}", highlight=False)
        for problem in s.problems[:10]:
            out.print(f"  unreadable: {escape(problem)}", highlight=False)


@agreement_app.command("queue")
@friendly_errors
def agreement_queue(
    ctx: typer.Context,
    kind: Optional[str] = typer.Option(None, "--kind", "-k", help="Only this kind."),
    limit: int = typer.Option(50, help="How many to show."),
    offset: int = typer.Option(0, help="How many to skip."),
) -> None:
    """Items whose annotators disagree and no rule decided: they wait for a person."""
    from tqaforge.annotation.adjudication import adjudication_queue

    t = RichTable("task", "kind", "target", "votes")
    for item in adjudication_queue(_ws(ctx), kind=kind, limit=limit, offset=offset):
        votes = " | ".join(f"{json.dumps(v['label'], ensure_ascii=False)}: {', '.join(v['annotators'])}" for v in item.votes)
        t.add_row(item.task_id[:12], item.kind, f"{item.target_type} {item.target_id[:10]}", escape(votes))
    out.print(t)


@agreement_app.command("resolve")
@friendly_errors
def agreement_resolve(
    ctx: typer.Context,
    task: str = typer.Argument(..., help="Annotation task id or a unique prefix of it."),
    label: str = typer.Argument(..., help='The final label: a value (reasoning), or JSON ({"cells": [[0, 1]]}).'),
    by: str = typer.Option(..., "--by", envvar="TQAFORGE_ANNOTATOR", help="Who decides."),
    note: Optional[str] = typer.Option(None, "--note", help="Why."),
) -> None:
    """A person's final label for one task (also overrides a rule; the replaced decision is kept)."""
    from tqaforge.annotation.adjudication import resolve

    try:
        value: Any = json.loads(label)
    except json.JSONDecodeError:
        value = label
    row = resolve(_ws(ctx), task, value, by=by, note=note)
    out.print(f"{row.task_id[:12]} ({row.kind}): {json.dumps(row.label, ensure_ascii=False)} decided by {row.decided_by}", highlight=False)

"""``tqaforge seeds list|add|import``: the workspace seed corpus."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tqaforge.cli._common import WORKSPACE_OPTION, friendly_errors, open_ws, out, styled

seeds_app = typer.Typer(
    help="The seed corpus: a definition and seed questions per subtype (WORKSPACE/seeds.toml).",
    no_args_is_help=True, rich_markup_mode=None,
)


@seeds_app.command("list")
@friendly_errors
def seeds_list(
    ctx: typer.Context,
    subtype: Optional[str] = typer.Option(None, "--subtype", help="Only this subtype."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """The definition and seed questions of each subtype (file seeds, then promoted questions)."""
    from tqaforge.generation import corpus as seed_corpus

    ws = open_ws(ctx, workspace)
    corpus = seed_corpus.load_corpus_file(ws)
    entries = seed_corpus.seed_entries(ws, subtype)
    out.print(f"seed corpus: {seed_corpus.corpus_path(ws)}")
    for cat in corpus.categories:
        if subtype is not None and cat.subtype != subtype:
            continue
        out.print()
        out.print(styled((cat.subtype, "bold"), f" ({cat.type})"))
        out.print(f"  {cat.definition}")
        for e in entries:
            if e.subtype == cat.subtype:
                tag = "" if e.source == "corpus" else f"  (promoted {e.question_id[:10] if e.question_id else ''})"
                out.print(styled(f"  - {e.text}", (tag, "dim")))
    if not corpus.categories:
        out.print('the corpus is empty: tqaforge seeds add SUBTYPE "question" --definition "..."')


@seeds_app.command("add")
@friendly_errors
def seeds_add(
    ctx: typer.Context,
    subtype: str = typer.Argument(..., help="The subtype (category) the seed belongs to."),
    question: Optional[str] = typer.Argument(None, help="The seed question."),
    definition: Optional[str] = typer.Option(None, "--definition", help="Set (replace) the subtype's definition."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Add a seed question to a subtype and/or set its definition."""
    from tqaforge.generation import corpus as seed_corpus

    ws = open_ws(ctx, workspace)
    cat = seed_corpus.add_seed(ws, subtype, question, definition=definition)
    out.print(f"{cat.subtype}: {len(cat.seeds)} seeds in {seed_corpus.corpus_path(ws)}")


@seeds_app.command("import")
@friendly_errors
def seeds_import(
    ctx: typer.Context,
    path: Path = typer.Argument(..., help="A seed corpus TOML file for the workspace taxonomy."),
    replace_definitions: bool = typer.Option(False, "--replace-definitions", help="Take the file's definitions where they differ."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Merge a seed corpus file into the workspace corpus (new categories and seeds are added)."""
    from tqaforge.generation import corpus as seed_corpus

    r = seed_corpus.import_seeds(open_ws(ctx, workspace), path, replace_definitions=replace_definitions)
    out.print(
        f"added {r.seeds_added} seeds ({len(r.categories_added)} new categories), {r.seeds_present} already present; "
        f"definitions replaced: {len(r.definitions_replaced)}"
    )
    if r.definitions_kept:
        out.print("kept our definition (use --replace-definitions to take the file's): " + ", ".join(r.definitions_kept))

"""``tqaforge annotators people|new|merge``: the annotator registry (one person, one annotator).

The Label Studio accounts (``annotators add|list``) live in :mod:`tqaforge.cli.labelstudio`;
these commands act on the store only (:mod:`tqaforge.people`)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from tqaforge.cli._common import WORKSPACE_OPTION, friendly_errors, open_ws, out, print_summary
from tqaforge.cli.labelstudio import annotators_app


@annotators_app.command("people")
@friendly_errors
def annotators_people(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print JSON (whether an e-mail is on file, never the e-mail)."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Every annotator in the store: id, name, aliases (CLI names, Label Studio ids), labels, merges."""
    from tqaforge.people import list_people

    print_summary(list_people(open_ws(ctx, workspace)), as_json)


@annotators_app.command("new")
@friendly_errors
def annotators_new(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="The person's display name (what --annotator NAME will give)."),
    email: Optional[str] = typer.Option(None, "--email", help="Their e-mail (their Label Studio login; never released)."),
    alias: Optional[List[str]] = typer.Option(None, "--alias", help="Another name that means them (repeatable)."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Register a person: their CLI name, app name and Label Studio account (by --email) resolve to them."""
    from tqaforge.people import register
    from tqaforge.printable import escape_controls

    person = register(open_ws(ctx, workspace), name, email=email, aliases=alias or ())
    out.print(escape_controls(f"annotator {person.id}: {person.name}", lines=False), markup=False, highlight=False)


@annotators_app.command("merge")
@friendly_errors
def annotators_merge(
    ctx: typer.Context,
    keep: str = typer.Argument(..., help="The annotator who stays (name, alias or id)."),
    other: str = typer.Argument(..., help="The identity that is the same person (name, alias or id): joins KEEP."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Join two identities of one person already in the store: OTHER's labels count as KEEP's from
    now on (agreement, adjudication, workload); every label keeps its original author for audit."""
    from tqaforge.people import merge

    print_summary(merge(open_ws(ctx, workspace), keep, other), as_json)

"""``tqaforge answers ...``: how good the answering agents are, and what they said about one question."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tqaforge.cli._common import WORKSPACE_OPTION, friendly_errors, open_ws, out, print_summary

answers_app = typer.Typer(help="Answer candidates and votes (generate them with: tqaforge generate answers).",
                          no_args_is_help=True, rich_markup_mode=None)


@answers_app.command("report")
@friendly_errors
def report_cmd(
    ctx: typer.Context,
    json_out: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Per method and subtype: parse rate, PoT execution rate, consistency rate, agreement with gold answers."""
    from tqaforge.answers.report import answers_report

    print_summary(answers_report(open_ws(ctx, workspace)), json_out)


@answers_app.command("show")
@friendly_errors
def show_cmd(
    ctx: typer.Context,
    question: str = typer.Argument(..., help="Question id or unique prefix."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """A question's candidates (method, status, answer or why none) and its vote."""
    from tqaforge.answers.show import question_answers

    for line in question_answers(open_ws(ctx, workspace), question).lines():
        out.print(line)

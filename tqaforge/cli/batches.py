"""``tqaforge batches list|status|collect|cancel|import|resume``: requests sent through a
provider's Batch API or written to an offline batch file, followed and read back into the ledger."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from tqaforge.cli._common import (
    WORKSPACE_OPTION,
    echo_json,
    friendly_errors,
    open_ws,
    out,
    plain_table,
    print_summary,
)

if TYPE_CHECKING:
    from tqaforge.llm.settings import LLMSettings
    from tqaforge.schemas.records import LLMBatch
    from tqaforge.store import Workspace

batches_app = typer.Typer(
    help="Batches: requests sent through a provider's Batch API (half price) or an offline batch file.",
    no_args_is_help=True, rich_markup_mode=None,
)

ID_ARGUMENT = typer.Argument(..., help="Batch id or unique prefix (see: tqaforge batches list).")
JSON_OPTION = typer.Option(False, "--json", help="Print JSON.")


def _settings(ws: "Workspace", batch: "LLMBatch") -> "LLMSettings":
    from tqaforge.llm.settings import load_llm_settings

    return load_llm_settings(ws, model=batch.model)


@batches_app.command("list")
@friendly_errors
def list_cmd(
    ctx: typer.Context,
    json_out: bool = JSON_OPTION,
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Every batch, newest first: kind, step, model, state, requests, cost."""
    from tqaforge.llm.batches import BatchView, list_batches

    rows = list_batches(open_ws(ctx, workspace))
    if json_out:
        echo_json([BatchView(row).as_dict() for row in rows])
        return
    if not rows:
        out.print("no batches")
        return
    table = plain_table("id", "kind", "step", "model", "state", "requests", "cost", "created")
    for row in rows:
        table.add_row(row.id[:12], row.kind, row.step or "-", row.model, row.state, str(row.request_count),
                      f"${row.cost:.4f}", row.created_at.strftime("%Y-%m-%d %H:%M"))
    out.print(table)


@batches_app.command("status")
@friendly_errors
def status_cmd(
    ctx: typer.Context,
    batch_id: str = ID_ARGUMENT,
    json_out: bool = JSON_OPTION,
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """A batch's state, refreshed from the provider."""
    from tqaforge.llm.batches import BatchView, find_batch, refresh_batch

    ws = open_ws(ctx, workspace)
    row = find_batch(ws, batch_id)
    # refresh_batch returns a batch not yet submitted, an offline one or a collected one as it is.
    print_summary(BatchView(refresh_batch(ws, _settings(ws, row), row.id)), json_out)


@batches_app.command("collect")
@friendly_errors
def collect_cmd(
    ctx: typer.Context,
    batch_id: str = ID_ARGUMENT,
    wait: bool = typer.Option(False, "--wait", help="Wait until the batch is finished, then collect it."),
    poll: float = typer.Option(30.0, "--poll", min=0.01, help="Seconds between two looks at the batch (with --wait)."),
    timeout: Optional[float] = typer.Option(None, "--timeout", min=0.01, help="Give up waiting after this many seconds."),
    json_out: bool = JSON_OPTION,
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Read a finished batch's replies into the ledger (the cache of every later run)."""
    from tqaforge.llm.batches import collect_batch, find_batch, wait_batch

    ws = open_ws(ctx, workspace)
    row = find_batch(ws, batch_id)
    settings = _settings(ws, row)
    if wait:
        from tqaforge.cli._common import progress_reporter

        with progress_reporter(f"batch {row.id[:12]}", lazy=True, describe=lambda note: note) as on_progress:
            wait_batch(ws, settings, row.id, poll_s=poll, timeout_s=timeout, on_progress=on_progress)
    print_summary(collect_batch(ws, settings, row.id), json_out)


@batches_app.command("cancel")
@friendly_errors
def cancel_cmd(
    ctx: typer.Context,
    batch_id: str = ID_ARGUMENT,
    json_out: bool = JSON_OPTION,
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Cancel a batch (what the provider answered before it stops can still be collected)."""
    from tqaforge.llm.batches import BatchView, cancel_batch, find_batch

    ws = open_ws(ctx, workspace)
    row = find_batch(ws, batch_id)
    settings = _settings(ws, row) if row.kind == "openai" else None
    print_summary(BatchView(cancel_batch(ws, settings, row.id)), json_out)


@batches_app.command("import")
@friendly_errors
def import_cmd(
    ctx: typer.Context,
    output: Path = typer.Argument(..., help="The output file of an offline batch (e.g. of vllm run-batch -o)."),
    batch: Optional[str] = typer.Option(None, "--batch", help="The batch it answers (default: found by its ids)."),
    json_out: bool = JSON_OPTION,
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Read an offline batch's output file into the ledger (price 0: local inference)."""
    from tqaforge.llm.batches import import_offline

    print_summary(import_offline(open_ws(ctx, workspace), output, batch_id=batch), json_out)


@batches_app.command("resume")
@friendly_errors
def resume_cmd(
    ctx: typer.Context,
    batch_id: str = ID_ARGUMENT,
    json_out: bool = JSON_OPTION,
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Carry on a submit that stopped (killed, network down): nothing is uploaded or created twice."""
    from tqaforge.llm.batches import BatchView, find_batch, resume_batch

    ws = open_ws(ctx, workspace)
    row = find_batch(ws, batch_id)
    print_summary(BatchView(resume_batch(ws, _settings(ws, row), row.id)), json_out)

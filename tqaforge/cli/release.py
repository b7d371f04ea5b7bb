"""`tqaforge release build|verify|diff`: frozen, checksummed benchmark releases."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from tqaforge.cli._common import WORKSPACE_OPTION, friendly_errors, open_ws, print_summary
from tqaforge.errors import ReleaseError

release_app = typer.Typer(help="Freeze what is trusted into a release; verify and compare releases.",
                          no_args_is_help=True, rich_markup_mode=None)


@release_app.command("build")
@friendly_errors
def release_build(
    ctx: typer.Context,
    version: str = typer.Option(..., "--version", help="The release's version, X.Y.Z."),
    subsets: Optional[str] = typer.Option(None, "--subsets", help="Comma-separated: base, structure, relevant_cells, values, realistic, configurations (default: all)."),
    serializations: Optional[str] = typer.Option(None, "--serializations", help="The configurations subset's formats, comma-separated (default: ToRR's seven)."),
    out: Optional[Path] = typer.Option(None, "--out", help="The release directory (default: WORKSPACE/releases/NAME-VERSION)."),
    min_agreement: Optional[float] = typer.Option(None, "--min-agreement", help="The agreement every feeding kind must reach (kappa, MASI alpha, accuracy); default: [release] in tqaforge.toml, else 0.6."),
    accept_low_agreement: Optional[str] = typer.Option(None, "--accept-low-agreement", help="Build anyway below the threshold; the REASON goes into the manifest and the card."),
    require_health: bool = typer.Option(False, "--require-health", help="Refuse to freeze when a health threshold fails (`tqaforge health`); the release then carries health.json and health.md."),
    evaluations: List[Path] = typer.Option([], "--evaluations", help="With --require-health: an evaluation (`tqaforge evaluate` output) of a candidate of this release; repeat for each."),
    health_thresholds: Optional[str] = typer.Option(None, "--health-thresholds", help="With --require-health: NAME=VALUE,... (as `tqaforge health --thresholds`; default max_suspect_gold=0.05)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    workspace: Optional[Path] = WORKSPACE_OPTION,
) -> None:
    """Freeze the items people verified and their trusted variants into a read-only release directory."""
    from tqaforge.release.build import ReleaseOptions, build_release, thresholds
    from tqaforge.release.contents import SUBSETS
    from tqaforge.tables.serialize import TORR_SERIALIZATIONS

    def names(text: Optional[str], default: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(x.strip() for x in text.split(",") if x.strip()) if text else default

    ws = open_ws(ctx, workspace)
    options = ReleaseOptions(
        version=version, subsets=names(subsets, SUBSETS), serializations=names(serializations, TORR_SERIALIZATIONS),
        out=out, min_agreement=thresholds(ws, min_agreement), accept_low_agreement=accept_low_agreement,
    )
    if require_health:
        from dataclasses import replace

        from tqaforge.cli.health import thresholds_from
        from tqaforge.health import HealthOptions, release_gate

        health = HealthOptions(release=Path("."), evaluations=tuple(evaluations), thresholds=thresholds_from(health_thresholds), plots=False)
        options = replace(options, attach=release_gate(health))
    elif evaluations or health_thresholds:
        raise ReleaseError("--evaluations and --health-thresholds go with --require-health", hint="add --require-health")
    print_summary(build_release(ws, options), as_json)


@release_app.command("verify")
@friendly_errors
def release_verify(
    path: Path = typer.Argument(..., help="The release directory."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Check every file of a release against its manifest; exit 1 naming what changed, was added or removed."""
    from tqaforge.release.verify import verify_release

    report = verify_release(path)
    print_summary(report, as_json)
    if not report.ok:
        raise typer.Exit(1)


@release_app.command("diff")
@friendly_errors
def release_diff(
    a: Path = typer.Argument(..., help="The older release directory."),
    b: Path = typer.Argument(..., help="The newer release directory."),
    as_json: bool = typer.Option(False, "--json", help="Print the difference as JSON."),
) -> None:
    """Items and variants added, removed and changed between two releases."""
    from tqaforge.release.verify import diff_releases

    print_summary(diff_releases(a, b), as_json)

"""Writing the agreement report: JSON and Markdown files under ``WORKSPACE/reports/``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from tqaforge.annotation.report import AgreementReport
from tqaforge.annotation.report_format import to_markdown
from tqaforge.files import atomic_write_text
from tqaforge.store import Workspace


def report_paths(ws: Workspace, kinds: Sequence[str] | None = None) -> tuple[Path, Path]:
    """Where a report is stored: ``WORKSPACE/reports/agreement[-KIND...].{json,md}``."""
    stem = "agreement" + "".join(f"-{k}" for k in (kinds or ()))
    folder = ws.paths.reports
    return folder / f"{stem}.json", folder / f"{stem}.md"


def write_report(ws: Workspace, report: AgreementReport, *, kinds: Sequence[str] | None = None) -> tuple[Path, Path]:
    """Store the report as JSON and Markdown under ``WORKSPACE/reports/`` (atomically, by rename)."""
    json_path, md_path = report_paths(ws, kinds)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    for path, text in (
        (json_path, json.dumps(report.as_dict(), indent=2, ensure_ascii=False) + "\n"),
        (md_path, to_markdown(report)),
    ):
        atomic_write_text(path, text)
    return json_path, md_path

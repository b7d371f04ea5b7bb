"""A health report written earlier (``health.json``, :func:`tqaforge.health.write_report`), read
back for display: its verdict, its checks and where its text and plots are. A damaged file is a
:class:`~tqaforge.errors.HealthError` naming it, never a traceback."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from tqaforge.errors import HealthError, ReaderError
from tqaforge.evaluate.item_file import ITEMS_FILE
from tqaforge.health.report import HEALTH_JSON, HEALTH_MD, PLOTS, Check
from tqaforge.printable import escape_controls
from tqaforge.tables.readers.jsonio import read_json_file

__all__ = ["MAX_HEALTH_BYTES", "SavedHealth", "find_saved_health", "read_saved_health", "scored_evaluations"]

#: A health.json larger than this is refused (a real one is kilobytes).
MAX_HEALTH_BYTES = 64 * 1024**2
_CHECK_TYPES: dict[str, type | tuple[type, ...]] = {"name": str, "section": str, "value": (int, float), "limit": (int, float), "passed": bool, "detail": str, "checked": bool}


@dataclass(frozen=True)
class SavedHealth:
    """A ``health.json`` read back: ``release``, ``passed``, ``verdict``, ``checks``, section
    titles; ``markdown`` (``health.md`` next to it, or None) and the ``plots`` found there."""

    path: Path
    release: str
    passed: bool
    verdict: str
    checks: tuple[Check, ...]
    sections: tuple[str, ...]
    markdown: str | None
    plots: tuple[Path, ...]

    def lines(self) -> list[str]:
        out = [f"health of release {self.release}: {self.verdict}", *("  " + c.line() for c in self.checks)]
        return [escape_controls(line, lines=False) for line in out]


def _damaged(path: Path, what: str) -> HealthError:
    return HealthError(f"{path} is damaged: {what}", hint="run the health report again to rewrite it")


def _check(path: Path, raw: Any) -> Check:
    if not isinstance(raw, dict):
        raise _damaged(path, "a check is not an object")
    values: dict[str, Any] = {}
    for f in fields(Check):
        value = raw.get(f.name, True if f.name == "checked" else None)
        kind = _CHECK_TYPES[f.name]
        if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
            raise _damaged(path, f"a check's {f.name} is {value!r}")
        values[f.name] = value
    return Check(**values)


def read_saved_health(path: Path) -> SavedHealth:
    """``path`` (a ``health.json``, or the directory holding one) read back and checked."""
    if path.is_dir():
        path = path / HEALTH_JSON
    try:
        data = read_json_file(path, max_bytes=MAX_HEALTH_BYTES)
    except ReaderError as exc:
        raise HealthError(f"cannot read the health report: {exc}", hint="run the health report again to rewrite it") from None
    if not isinstance(data, dict):
        raise _damaged(path, "not a JSON object")
    release, passed, verdict = data.get("release"), data.get("passed"), data.get("verdict")
    if not isinstance(release, str) or not isinstance(passed, bool) or not isinstance(verdict, str):
        raise _damaged(path, "no release, passed and verdict")
    checks, sections = data.get("checks", []), data.get("sections", [])
    if not isinstance(checks, list) or not isinstance(sections, list):
        raise _damaged(path, "checks and sections are not lists")
    titles = []
    for s in sections:
        if not isinstance(s, dict) or not isinstance(s.get("title"), str):
            raise _damaged(path, "a section has no title")
        titles.append(s["title"])
    md_path = path.parent / HEALTH_MD
    try:
        markdown = md_path.read_text(encoding="utf-8", errors="replace") if md_path.is_file() else None
    except OSError:
        markdown = None
    plots = tuple(p for p in (path.parent / name for name in PLOTS) if p.is_file())
    return SavedHealth(path, release, passed, verdict, tuple(_check(path, c) for c in checks), tuple(titles), markdown, plots)


def find_saved_health(release: Path, out: Path) -> Path | None:
    """The ``health.json`` of a release: the one it carries, else the one in ``out`` (where the
    report is written by default: ``health/RELEASE``); None when neither exists."""
    for where in (release / HEALTH_JSON, out / HEALTH_JSON):
        if where.exists():
            return where
    return None


def scored_evaluations(directory: Path) -> list[Path]:
    """The evaluations under ``directory`` that the health report can read: ``RELEASE/PREDICTIONS``
    folders holding ``items.jsonl`` (``tqaforge evaluate``'s default layout), in name order."""
    return sorted(p.parent for p in directory.glob(f"*/*/{ITEMS_FILE}") if p.is_file())

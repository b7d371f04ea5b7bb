"""Systems side by side: several saved evaluations (directories ``tqaforge evaluate`` wrote) read
back, their Overall scores per subset and configuration in one table, and the significance of
their differences on the base items they share (:func:`tqaforge.evaluate.significance.compare`,
as ``tqaforge health`` compares systems).

    >>> sbs = compare_evaluations([Path("evaluations/bench-0.1.0/gpt"), Path("evaluations/bench-0.1.0/llama")])
    >>> print("\\n".join(sbs.lines()))  # doctest: +SKIP

The app's Evaluations page shows it; it reads files only (no workspace, no model)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from tqaforge.errors import EvaluateError, ReaderError
from tqaforge.evaluate.item_file import ItemScore, open_item_scores, read_item_scores, saved_system_scores
from tqaforge.evaluate.significance import CompareOptions, Comparison, compare
from tqaforge.printable import escape_controls
from tqaforge.tables.readers.jsonio import read_json_file

__all__ = ["SideBySide", "compare_evaluations"]

#: The largest ``scores.json`` read back (as :data:`tqaforge.evaluate.harness.MAX_SCORES_BYTES`).
_MAX_SCORES_BYTES = 256 * 1024**2


@dataclass(frozen=True)
class SideBySide:
    """``systems`` (``model/method``; prefixed with their evaluation's directory name when two
    evaluations hold a system of the same name) of one ``release``: ``overall`` rows (subset,
    config, then each system's normalised Overall score, None where it was not scored), the
    ``comparison`` on the ``items`` base items every system has (None with ``note`` when there
    is nothing to compare), and each evaluation's ``plots``."""

    release: str
    systems: tuple[str, ...]
    overall: tuple[dict[str, Any], ...]
    comparison: Comparison | None
    items: int
    note: str | None = None
    plots: dict[str, tuple[Path, ...]] = field(default_factory=dict)

    def lines(self) -> list[str]:
        """The Overall table, then the paired comparisons (the terminal's view)."""
        width = max([12, *(len(s) for s in self.systems)])
        out = [f"release {self.release}: {len(self.systems)} systems side by side (Overall, normalised score %)",
               f"  {'subset':<15} {'config':<28} " + " ".join(f"{s:>{width}}" for s in self.systems)]
        for row in self.overall:
            cells = " ".join(f"{'—' if row[s] is None else format(row[s], '.2f'):>{width}}" for s in self.systems)
            out.append(f"  {row['subset']:<15} {row['config']:<28} {cells}")
        out.append("")
        out += self.comparison.lines() if self.comparison is not None else [f"no significance test: {self.note}"]
        return [escape_controls(line, lines=False) for line in out]


def _overall(directory: Path) -> list[dict[str, Any]]:
    path = directory / "scores.json"
    try:
        scores = read_json_file(path, max_bytes=_MAX_SCORES_BYTES)
    except ReaderError as exc:
        raise EvaluateError(f"{directory} holds no readable scores.json: {exc}",
                            hint="choose a directory `tqaforge evaluate` (or the Evaluations page) wrote") from None
    rows = scores.get("rows") if isinstance(scores, dict) else None
    if not isinstance(rows, list):
        raise EvaluateError(f"{path} has no score rows", hint="score the predictions again to rewrite it")
    return [r for r in rows if isinstance(r, dict) and r.get("level") == "overall"]


def compare_evaluations(directories: Sequence[Path], options: CompareOptions | None = None) -> SideBySide:
    """The systems of ``directories`` (each an evaluation's output: ``scores.json`` and
    ``items.jsonl``) side by side (module docs). Refused (:class:`~tqaforge.errors.EvaluateError`)
    with fewer than two systems in all, or evaluations of different releases: their scores do
    not compare."""
    releases: dict[str, Path] = {}
    found: list[tuple[Path, str, list[dict[str, Any]], list[ItemScore]]] = []
    for directory in directories:
        directory = Path(directory)
        header = open_item_scores(directory)
        releases.setdefault(header.release, directory)
        rows = list(read_item_scores(directory))
        for system in sorted({r.system for r in rows}):
            found.append((directory, system, [r for r in _overall(directory) if r.get("system") == system],
                          [r for r in rows if r.system == system]))
    if len(releases) > 1:
        raise EvaluateError("these evaluations score different releases: "
                            + "; ".join(f"{d.name}: {name}" for name, d in releases.items()),
                            hint="compare systems scored on the same release")
    names = [system for _, system, _, _ in found]
    label = {(d, s): (f"{d.name}: {s}" if names.count(s) > 1 else s) for d, s, _, _ in found}
    systems = tuple(label[(d, s)] for d, s, _, _ in found)
    if len(systems) < 2:
        raise EvaluateError(f"a side-by-side comparison needs two systems or more, got {len(systems)}",
                            hint="choose evaluations of two systems (or one evaluation holding two)")
    table: dict[tuple[str, str], dict[str, Any]] = {}
    for d, s, overall, _ in found:
        for r in overall:
            key = (str(r.get("subset")), str(r.get("config")))
            table.setdefault(key, {"subset": key[0], "config": key[1], **{name: None for name in systems}})
            value = r.get("normalised")
            table[key][label[(d, s)]] = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    scores = {label[(d, s)]: saved_system_scores(rows).get(s, {}) for d, s, _, rows in found}
    common = set.intersection(*(set(per) for per in scores.values()))
    comparison, note = None, None
    if not common:
        note = "no base item is scored for every system"
    else:
        comparison = compare({name: {i: per[i] for i in common} for name, per in scores.items()}, options)
    plots = {label[(d, s)]: tuple(sorted(d.glob("*.png"))) for d, s, _, _ in found}
    return SideBySide(next(iter(releases)), systems, tuple(table.values()), comparison, len(common), note, plots)

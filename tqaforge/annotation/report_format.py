"""An agreement report as text: sections of tables that Markdown and the terminal both render.

:func:`report_sections` lays the report out once; :func:`to_markdown` writes it as the Markdown
stored next to the JSON (and shipped with a release); the CLI prints the same sections as rich
tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from tqaforge.annotation.agreement import AgreementResult, PairwiseResult
from tqaforge.annotation.kinds import KINDS
from tqaforge.annotation.report import AgreementReport, KindReport
from tqaforge.annotation.shapes import SHAPES, statistic_name
from tqaforge.printable import escape_controls


@dataclass(frozen=True)
class TextTable:
    caption: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Section:
    title: str
    lines: tuple[str, ...] = ()
    tables: tuple[TextTable, ...] = field(default_factory=tuple)


def fmt(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def fmt_ci(result: AgreementResult) -> str:
    """``[low, high]``; why there is none when a bootstrap was asked for; "—" otherwise."""
    if result.ci is not None:
        return f"[{result.ci[0]:.3f}, {result.ci[1]:.3f}]"
    if result.value is not None and result.n_boot > 0 and result.ci_reason:
        # A pilot-sized set often has a value but no interval: say why instead of a bare dash.
        return f"none: {result.ci_reason}"
    return "—"


def cell(result: AgreementResult) -> str:
    """``value [low, high]``, or why there is no value (or no interval)."""
    if result.value is None:
        return f"undefined: {result.reason}"
    ci = fmt_ci(result)
    if result.ci is not None:
        return f"{result.value:.3f} {ci}"
    return f"{result.value:.3f}" if ci == "—" else f"{result.value:.3f} (interval {ci})"


def _stat_rows(stats: Mapping[str, AgreementResult]) -> tuple[tuple[str, ...], ...]:
    rows = []
    for name, r in stats.items():
        value = fmt(r.value) if r.value is not None else f"undefined: {r.reason}"
        rows.append((statistic_name(name), value, fmt_ci(r), r.band or "", str(r.n_items), str(r.n_raters)))
    return tuple(rows)


def _pairwise_table(name: str, result: PairwiseResult) -> TextTable:
    raters = result.raters
    rows = []
    for a in raters:
        rows.append((a, *("—" if a == b else cell(result.get(a, b)) for b in raters)))
    mean = f"mean over pairs: {fmt(result.mean)}" + (f" ({result.reason})" if result.reason else "")
    return TextTable(f"{statistic_name(name)} for each pair of annotators; {mean}", ("", *raters), tuple(rows))


def kind_section(report: KindReport, ci_level: float) -> Section:
    pct = f"{ci_level:.0%} CI"
    lines = [
        f"{report.description}.",
        f"{report.n_items} items, {report.n_raters} annotators, {report.n_annotations} annotations.",
    ]
    tables = [TextTable("Overall", ("statistic", "value", pct, "Landis-Koch", "items", "raters"), _stat_rows(report.overall))]
    for name, pairwise in report.pairwise.items():
        tables.append(_pairwise_table(name, pairwise))
    if report.per_annotator:
        caption = SHAPES[report.shape].per_annotator_caption
        rows: list[tuple[str, ...]] = []
        for rater, r in report.per_annotator.items():
            extra = r.components.get("items_without_majority")
            rows.append((rater, fmt(r.value) if r.value is not None else f"undefined: {r.reason}", fmt_ci(r), str(r.n_items), str(extra or "")))
        tables.append(TextTable(caption, ("annotator", "value", pct, "items", "no majority"), tuple(rows)))
    if report.per_subtype:
        names = list(dict.fromkeys(n for stats in report.per_subtype.values() for n in stats))
        rows = []
        for subtype, stats in report.per_subtype.items():
            first = next(iter(stats.values()))
            rows.append((subtype, str(first.n_items), *(cell(stats[n]) if n in stats else "—" for n in names)))
        tables.append(TextTable("Per subtype", ("subtype", "items", *(statistic_name(n) for n in names)), tuple(rows)))
    lines += [f"Note: {n}" for n in report.notes]
    lines += [f"Problem: {p}" for p in report.problems[:20]]
    if len(report.problems) > 20:
        lines.append(f"... and {len(report.problems) - 20} more problems (see the JSON report)")
    spec = KINDS.get(report.kind)  # a report read back may name a kind no longer defined
    return Section(spec.report_name if spec else report.kind, tuple(lines), tuple(tables))


def report_sections(report: AgreementReport) -> list[Section]:
    s = report.settings
    head = Section(
        f"Agreement report: {report.workspace}",
        (
            f"Generated {report.generated_at}. Intervals: {s.ci_level:.0%} percentile bootstrap over items, "
            f"{s.n_boot} resamples, seed {s.seed}."
            + (f" Excluded sources: {', '.join(s.exclude_sources)}." if s.exclude_sources else ""),
            f"Annotations read: hash {report.annotations_hash[:16]}. Bands: Landis and Koch (1977).",
            *(f"Skipped {k}: {why}" for k, why in report.skipped_kinds.items()),
            # An empty report says so in words, never as a header over nothing.
            *((report.message,) if report.message else ()),
        ),
    )
    return [head, *(kind_section(k, s.ci_level) for k in report.kinds.values())]


def _md(text: str) -> str:
    """Report text as Markdown that shows it as written: annotator names, subtypes, kinds, the
    workspace path and problems quoting labels are data (an image link in a name would be fetched
    by whoever views the report); one line each, so a table row stays one row."""
    return escape_controls(text, lines=False, markdown=True)


def _md_table(t: TextTable) -> list[str]:
    out = [f"**{_md(t.caption)}**", "", "| " + " | ".join(_md(h) for h in t.headers) + " |", "|" + "---|" * len(t.headers)]
    out += ["| " + " | ".join(_md(c) for c in row) + " |" for row in t.rows]
    return out + [""]


def to_markdown(report: AgreementReport) -> str:
    """The report as a Markdown document (its text escaped where Markdown would read it)."""
    lines: list[str] = []
    for i, section in enumerate(report_sections(report)):
        lines += [("# " if i == 0 else "## ") + _md(section.title), ""]
        # Lines quote data (the workspace, excluded sources, problems); the empty report's message is ours.
        lines += [*(line if line == report.message else _md(line) for line in section.lines), ""] if section.lines else []
        for table in section.tables:
            lines += _md_table(table)
    return "\n".join(lines).rstrip() + "\n"

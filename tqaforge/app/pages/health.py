"""Health: is a release any good before it is frozen? The same report as ``tqaforge health``
(:func:`tqaforge.health.run`, :func:`tqaforge.health.write_report`) on a release and the
evaluations made of it; a report written earlier is shown without running again."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from tqaforge import queries
from tqaforge.app.common import attempt, md, require_login, workspace_or_stop
from tqaforge.errors import HealthError
from tqaforge.health import HealthOptions, HealthReport, run, write_report
from tqaforge.health.saved import SavedHealth, find_saved_health, read_saved_health, scored_evaluations
from tqaforge.printable import escape_controls

require_login()  # first: nothing of the page before someone signs in (when a login is required)
st.title("Health")
ws = workspace_or_stop()
releases = [r for r in queries.list_releases(ws) if r.path]
if not releases:
    st.info("No release yet: build one on the Releases page, score systems' predictions on it, then come back.")
    st.stop()
chosen = st.selectbox("release", [r.path or "" for r in releases], format_func=lambda p: Path(p).name)
root = Path(chosen)
out = ws.root / "health" / root.name  # where `tqaforge health` writes by default, run in the workspace

evaluations_dir = ws.root / "evaluations"
found = scored_evaluations(evaluations_dir)
mine = [p for p in found if p.parent.name == root.name]


def label(path: str) -> str:
    """``RELEASE / PREDICTIONS`` of an evaluation folder."""
    return " / ".join(Path(path).parts[-2:])


if found:
    st.caption(md(f"{len(found)} evaluations found in {evaluations_dir}: " + ", ".join(label(str(p)) for p in found)))
else:
    st.caption("no evaluation of any release yet: score predictions of this release (`tqaforge evaluate --release DIR "
               "--predictions FILE`, run in the workspace, writes evaluations/), then pick them here")
picked = st.multiselect("evaluations to report on (two or more systems)", [str(p) for p in found],
                        default=[str(p) for p in mine], format_func=label)
if found and not picked:
    st.caption("pick the evaluations of this release above to run the report")
run_now = st.button("run the health report", disabled=not picked, type="primary")


def show(verdict: str, passed: bool, check_lines: list[str], sections: list[tuple[str, list[str]]], plots: list[Path]) -> None:
    """The verdict, each check (pass/FAIL), each section's text and the plots."""
    (st.success if passed else st.error)(md(verdict))
    if check_lines:
        st.subheader("Checks")
        st.code(escape_controls("\n".join(check_lines)), language=None)
    for title, lines in sections:
        with st.expander(md(title), expanded=True):
            st.code(escape_controls("\n".join(lines)), language=None)
    for image in plots:
        st.image(str(image), caption=md(image.name))


def show_report(report: HealthReport) -> None:
    """A report just computed."""
    show(f"health of release {report.release}: {report.verdict()}", report.passed, [c.line() for c in report.checks],
         [(s.title, s.lines()[1:]) for s in report.sections], [Path(p) for p in report.outputs if p.endswith(".png")])
    st.caption(md("written: " + ", ".join(report.outputs)))


def show_saved(saved: SavedHealth) -> None:
    """A report read back from its health.json (the text from the health.md beside it)."""
    st.caption(md(f"the report written earlier: {saved.path} (the button above runs it again)"))
    body = [("report (health.md)", saved.markdown.splitlines())] if saved.markdown is not None else []
    show(f"health of release {saved.release}: {saved.verdict}", saved.passed, [c.line() for c in saved.checks], body, list(saved.plots))


def run_and_write() -> HealthReport:
    """The report of the picked evaluations (with the workspace's label quality), written to ``out``."""
    report = run(HealthOptions(release=root, evaluations=tuple(Path(p) for p in picked), workspace=ws.root))
    try:
        write_report(report, out)
    except HealthError as exc:  # its hint names the CLI's --out: this page's own words instead
        raise HealthError(str(exc.args[0]), hint=f"make {out} writable, then run the report again") from None
    return report


if run_now:
    with st.spinner("computing the health report"):
        report = attempt(run_and_write)
    if report is not None:
        show_report(report)
else:
    existing = find_saved_health(root, out)
    if existing is None:
        st.caption(md(f"no health report of {root.name} yet: pick its evaluations and run it"))
    else:
        found_at: Path = existing
        saved = attempt(lambda: read_saved_health(found_at))  # a damaged file is a message, not a traceback
        if saved is not None:
            show_saved(saved)

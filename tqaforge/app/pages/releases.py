"""Releases: build, verify, diff and download releases; evaluation results with their plots."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from tqaforge import queries
from tqaforge.app.common import attempt, md, require_login, show_summary, workspace_or_stop
from tqaforge.evaluate.harness import saved_evaluations
from tqaforge.release.build import ReleaseOptions, build_release, thresholds
from tqaforge.release.verify import diff_releases, release_archive, verify_release

require_login()  # first: nothing of the page before someone signs in (when a login is required)
st.title("Releases")
ws = workspace_or_stop()

with st.form("build"):
    version = st.text_input("version (X.Y.Z)", value="0.1.0")
    reason = st.text_input("accept agreement below the threshold, because (optional)")
    build_now = st.form_submit_button("build the release")
if build_now:
    built = attempt(lambda: build_release(ws, ReleaseOptions(version=version.strip(), min_agreement=thresholds(ws),
                                                             accept_low_agreement=reason.strip() or None)))
    if built is not None:
        show_summary(built)

with st.form("verify-path"):
    elsewhere = st.text_input("verify a release directory (one downloaded or built elsewhere)")
    verify_path = st.form_submit_button("verify that directory")
if verify_path and elsewhere.strip():
    checked = attempt(lambda: verify_release(Path(elsewhere.strip()).expanduser()))
    if checked is not None:
        (st.success if checked.ok else st.error)(md("\n".join(checked.lines())))

releases = queries.list_releases(ws)
if not releases:
    st.info("No release yet.")
    st.stop()
st.dataframe(pd.DataFrame([{"name": r.name, "version": r.version, **((r.manifest or {}).get("counts") or {}), "path": r.path}
                           for r in releases]), width="stretch", hide_index=True)
chosen = st.selectbox("release", [r.path or "" for r in releases], format_func=lambda p: Path(p).name)
root = Path(chosen)
left, right = st.columns(2)
if left.button("verify every file"):
    report = attempt(lambda: verify_release(root))  # a damaged manifest is a message, not a traceback
    if report is not None:
        (st.success if report.ok else st.error)(md("\n".join(report.lines())))
if root.is_dir():
    archive = attempt(lambda: release_archive(root))
    if archive is not None:
        right.download_button("download (zip)", archive, file_name=f"{root.name}.zip", mime="application/zip")
if len(releases) >= 2:
    other = st.selectbox("compare with", [r.path or "" for r in releases if r.path != chosen], format_func=lambda p: Path(p).name)
    if st.button("diff"):
        difference = attempt(lambda: diff_releases(Path(other), root))
        if difference is not None:
            show_summary(difference)

st.subheader("Evaluations")
evaluations = saved_evaluations(ws.root / "evaluations")
if not evaluations:
    st.caption("no evaluation yet: score predictions or a model on the Evaluations page")
for saved in evaluations:
    with st.expander(f"{md(saved.release)} / {md(saved.predictions)}: {md(saved.scores.get('matched'))} predictions"):
        rows = saved.summary_rows()
        st.dataframe(pd.DataFrame(rows)[["system", "subset", "config", "group", "n", "metric", "tablebench", "normalised"]]
                     if rows else pd.DataFrame(), width="stretch", hide_index=True)
        for fu in saved.formats():  # format understanding, as `tqaforge evaluate` prints it
            show_summary(fu)
        for lt in saved.large_tables():  # accuracy per token bucket, likewise
            show_summary(lt)
        for image in saved.plots:
            st.image(str(image), caption=md(image.name))

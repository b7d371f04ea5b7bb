"""Releases: build, verify, diff and download releases; evaluation results with their plots."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pandas as pd
import streamlit as st

from tqaforge import queries
from tqaforge.app.common import attempt, show_summary, workspace_or_stop
from tqaforge.release.build import ReleaseOptions, build_release, thresholds
from tqaforge.release.verify import diff_releases, verify_release

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
    report = verify_release(root)
    (st.success if report.ok else st.error)("\n".join(report.lines()))
if root.is_dir():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                archive.write(path, Path(root.name) / path.relative_to(root))
    right.download_button("download (zip)", buffer.getvalue(), file_name=f"{root.name}.zip", mime="application/zip")
if len(releases) >= 2:
    other = st.selectbox("compare with", [r.path or "" for r in releases if r.path != chosen], format_func=lambda p: Path(p).name)
    if st.button("diff"):
        difference = attempt(lambda: diff_releases(Path(other), root))
        if difference is not None:
            show_summary(difference)

st.subheader("Evaluations")
results = sorted(Path(ws.root, "evaluations").glob("*/*/scores.json")) + sorted(root.parent.parent.glob("evaluations/*/*/scores.json"))
if not results:
    st.caption("no evaluation yet: `tqaforge evaluate --release DIR --predictions FILE` (run in the workspace) writes evaluations/")
for path in dict.fromkeys(results):
    scores = json.loads(path.read_text(encoding="utf-8"))
    with st.expander(f"{path.parent.parent.name} / {path.parent.name}: {scores.get('matched')} predictions"):
        rows = [r for r in scores.get("rows", []) if r.get("level") in ("type", "overall")]
        st.dataframe(pd.DataFrame(rows)[["system", "subset", "config", "group", "n", "metric", "tablebench", "normalised"]]
                     if rows else pd.DataFrame(), width="stretch", hide_index=True)
        for image in sorted(path.parent.glob("*.png")):
            st.image(str(image), caption=image.name)

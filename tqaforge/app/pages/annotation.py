"""Annotation: the workspace's Label Studio server, push and pull per kind, per-annotator progress,
links into Label Studio."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from tqaforge import queries
from tqaforge.annotation.kinds import KINDS
from tqaforge.annotation.labelstudio import manage
from tqaforge.app.common import attempt, md, show_annotation_progress, show_summary, workspace_or_stop

st.title("Annotation")
ws = workspace_or_stop()
state = manage.status(ws.root)
if state.running and state.answers:
    st.success(f"Label Studio runs at {md(state.url)} (pid {state.pid})")
    st.link_button("open Label Studio", state.url)
else:
    st.warning(f"Label Studio is not running for this workspace ({md(state.stale) if state.stale else 'start it with `tqaforge labelstudio start` or `make run`'}). "
               "Push and pull need it; the figures below come from the store.")

st.subheader("Progress per kind")
show_annotation_progress(ws)
workload, labels = queries.annotator_workload(ws), queries.labels_per_annotator(ws)
left, right = st.columns(2)
with left:
    st.markdown("**task copies pushed, per annotator login**")
    st.dataframe(pd.DataFrame(workload).fillna(0).astype(int) if workload else pd.DataFrame(), width="stretch")
with right:
    st.markdown("**labels recorded, per pseudonymous annotator**")
    st.dataframe(pd.DataFrame(labels).fillna(0).astype(int) if labels else pd.DataFrame(), width="stretch")

st.subheader("Push and pull")
with st.form("push"):
    kind = st.selectbox("kind", list(KINDS))
    people = st.text_input("annotators (Label Studio logins, comma-separated; empty: the workspace's)")
    overlap = st.number_input("annotators per task", min_value=1, value=2)
    push_now = st.form_submit_button("push to Label Studio", disabled=not state.running)
if push_now:
    from tqaforge.annotation.labelstudio.sync import PushOptions, push

    who = [p.strip() for p in people.split(",") if p.strip()] or None
    pushed = attempt(lambda: push(ws, kind, manage.connection(ws.root), who, PushOptions(overlap=int(overlap))))
    if pushed is not None:
        show_summary(pushed)
if st.button("pull every label", disabled=not state.running):
    from tqaforge.annotation.labelstudio.sync import pull

    pulled = attempt(lambda: pull(ws, manage.connection(ws.root)))
    if pulled is not None:
        show_summary(pulled)
        if pulled.incomplete:  # what the CLI's exit status 1 says: a person must act (the lines above say how)
            st.warning(f"Pull incomplete: {pulled.incomplete}; everything else is recorded.")

"""Annotation: each annotator's Label Studio server (or the workspace's one), push and pull per
kind, per-annotator progress, links into Label Studio."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from tqaforge import queries
from tqaforge.annotation.kinds import KINDS
from tqaforge.annotation.labelstudio import manage
from tqaforge.annotation.labelstudio.annotator_servers import annotator_servers
from tqaforge.app.common import attempt, md, require_login, show_annotation_progress, show_summary, workspace_or_stop

require_login()  # first: nothing of the page before someone signs in (when a login is required)
st.title("Annotation")
ws = workspace_or_stop()
own = annotator_servers(ws.root)
state = manage.status(ws.root)
if own:
    # One server per annotator: the links are theirs to open (each logs in on their own server).
    states = [manage.status(server) for server in own]
    for each in states:
        running = f"runs at {md(each.url)} (pid {each.pid})" if each.running and each.answers else "is not running"
        st.markdown(f"- {md(each.annotator or '')}'s Label Studio {running}")
    if not all(each.running and each.answers for each in states):
        st.warning("Start the servers on the Annotators page (all, or the ones you choose); "
                   "push and pull skip a server that is down and name it.")
    state = next((each for each in states if each.running), state)
elif state.running and state.answers:
    st.success(f"Label Studio runs at {md(state.url)} (pid {state.pid})")
    st.link_button("open Label Studio", state.url)
else:
    st.warning(f"Label Studio is not running for this workspace ({md(state.stale) if state.stale else 'start it on the Annotators page'}). "
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
    pushed = attempt(lambda: push(ws, kind, manage.connections(ws), who, PushOptions(overlap=int(overlap))))
    if pushed is not None:
        show_summary(pushed)
if st.button("pull every label", disabled=not state.running):
    from tqaforge.annotation.labelstudio.sync import pull

    pulled = attempt(lambda: pull(ws, manage.connections(ws)))
    if pulled is not None:
        show_summary(pulled)
        if pulled.incomplete:  # what the CLI's exit status 1 says: a person must act (the lines above say how)
            st.warning(f"Pull incomplete: {pulled.incomplete}; everything else is recorded.")

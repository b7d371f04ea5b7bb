"""Annotators: the people who label (add, list, merge: one person is one annotator), each one's
Label Studio server (add, start, stop, status) and their progress per task kind. The same
library calls as ``tqaforge annotators ...`` and ``tqaforge labelstudio start|stop|status``; push
and pull are on the Annotation page."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from tqaforge.annotation.labelstudio import manage
from tqaforge.annotation.labelstudio.annotator_servers import (
    add_annotator_server,
    annotator_servers,
    login_lines,
    own_accounts,
    start_servers,
    stop_servers,
)
from tqaforge.annotation.labelstudio.annotators import annotator_progress
from tqaforge.annotation.labelstudio.server import STARTUP_ESTIMATE
from tqaforge.app.common import attempt, md, require_login, show_summary, workspace_or_stop
from tqaforge.app.jobs import find_job, start_job
from tqaforge.people import list_people, merge, register
from tqaforge.printable import escape_controls

require_login()  # first: nothing of the page before someone signs in (when a login is required)
st.title("Annotators")
ws = workspace_or_stop()
START_KEY = f"labelstudio-start:{ws.root.resolve()}"
ONE_KEY = f"labelstudio-start-one:{ws.root.resolve()}"  # the workspace's one server (the earlier layout)

st.subheader("People")
people = list_people(ws)
if people.rows:
    # The e-mail never leaves the store: the table says only whether there is one (as --json does).
    st.dataframe(pd.DataFrame([{**r, "aliases": ", ".join(map(str, r["aliases"])), "email": "on file" if r["email"] else ""}
                               for r in people.rows]), width="stretch", hide_index=True)
else:
    st.caption("no annotators yet: register one below, or give a Label Studio server to one (next section)")
left, right = st.columns(2)
with left.form("register"):
    name = st.text_input("name", help="What they are called here and in reviews on the Review page.")
    email = st.text_input("e-mail (optional; their Label Studio login, never released)")
    aliases = st.text_input("other names that mean them (comma-separated, optional)")
    register_now = st.form_submit_button("register")
if register_now:
    person = attempt(lambda: register(ws, name, email=email.strip() or None,
                                      aliases=[a.strip() for a in aliases.split(",") if a.strip()]))
    if person is not None:
        st.success(md(f"annotator {person.id}: {person.name}"))
names = [str(r["id"]) for r in people.rows]
with right.form("merge"):
    st.markdown("**one person under two identities**")
    keep = st.selectbox("keep", names, format_func=lambda i: next(str(r["name"]) for r in people.rows if r["id"] == i) + f" ({i})")
    other = st.selectbox("is the same person as", names, index=min(1, len(names) - 1) if names else 0,
                         format_func=lambda i: next(str(r["name"]) for r in people.rows if r["id"] == i) + f" ({i})")
    merge_now = st.form_submit_button("merge", disabled=len(names) < 2,
                                      help="The second one's labels count as the first one's from now on; every label keeps its author.")
if merge_now and keep and other:
    merged = attempt(lambda: merge(ws, keep, other))
    if merged is not None:
        show_summary(merged)

st.subheader("Label Studio servers")
st.caption("Each annotator labels on a Label Studio server of their own (its own address, port and database): "
           "nobody sees anyone else's work.")
with st.form("add-server"):
    new_email = st.text_input("annotator's e-mail (their Label Studio login)")
    new_name = st.text_input("their name (shown in Label Studio; optional)")
    add_now = st.form_submit_button("give them a server")
if add_now:
    added = attempt(lambda: add_annotator_server(ws, new_email, name=new_name.strip() or None))
    if added is not None:
        st.success(md(f"{added.credentials.username} gets a server at {added.credentials.url}"))
        st.code(escape_controls(f"login:    {added.credentials.username}\npassword: {added.credentials.password}"), language=None)
        st.caption("Pass the password on privately: it is shown once here (it stays in the server's credentials file).")

servers = annotator_servers(ws.root)
job = find_job(START_KEY)
starting = job is not None and job.running
if servers:
    states = [manage.status(server) for server in servers]

    def being_started(each: manage.ServerStatus) -> bool:
        return starting and job is not None and (not job.targets or each.annotator in job.targets)

    st.dataframe(pd.DataFrame([{"annotator": each.annotator, "state": each.state(being_started(each)), "url": each.url, "pid": each.pid,
                                "memory (MB)": None if each.rss_mb is None else round(each.rss_mb)} for each in states]),
                 width="stretch", hide_index=True)
    logins = [each.annotator or "" for each in states]
    chosen = st.multiselect("servers (none chosen: every one)", logins)
    left, middle, right = st.columns(3)
    if left.button("start", disabled=starting):
        who = chosen or None
        job = start_job(START_KEY, f"starting {len(chosen) or len(servers)} Label Studio servers",
                        lambda: start_servers(ws.root, who), targets=tuple(chosen))
        starting = True
    if middle.button("stop", disabled=starting):
        stopped = attempt(lambda: stop_servers(ws.root, chosen or None))
        if stopped is not None:
            st.code(escape_controls("\n".join(result.message for result in stopped)), language=None)
    right.button("refresh status")
    if starting and job is not None:
        running_job = job

        @st.fragment(run_every=2.0)
        def watch() -> None:
            """How long the start has taken, every 2 s; the whole page again once it is done."""
            if not running_job.running:
                st.rerun()
            st.info(md(f"{running_job.label} in parallel ({STARTUP_ESTIMATE} each): {running_job.seconds:.0f} s so far. "
                       "The table above shows each server's state as it was when the page was drawn."))

        watch()
    elif job is not None:
        error = job.future.exception()
        if error is not None:
            st.error(md(error))
        else:
            results = job.future.result()
            with st.expander("the last start's report", expanded=True):
                st.code(escape_controls("\n".join([done.line() for done in results] + [""] + login_lines(results)[:-1])),
                        language=None)
else:
    # The earlier layout: the workspace's one server (every account on it sees every project).
    one = manage.status(ws.root)
    one_job = find_job(ONE_KEY)
    one_starting = one_job is not None and one_job.running
    shown = one.state(one_starting)
    st.caption(md(f"no annotator has a server yet: give one a server above. The workspace's one Label Studio "
                  f"(every account on it sees every project) is {shown} at {one.url}."))
    left, right = st.columns(2)
    if left.button("start the workspace's server", disabled=one_starting or one.running):
        one_job = start_job(ONE_KEY, "starting the workspace's Label Studio server", lambda: manage.start(ws.root))
        one_starting = True
    if right.button("stop the workspace's server", disabled=one_starting or not one.running):
        st.code(manage.stop(ws.root).message, language=None)
    if one_starting and one_job is not None:
        st.info(md(f"{one_job.label} ({STARTUP_ESTIMATE}): {one_job.seconds:.0f} s so far; refresh the page to see it."))
    elif one_job is not None:
        error = one_job.future.exception()
        if error is not None:
            st.error(md(error))
        else:
            done = one_job.future.result()
            st.code(escape_controls(f"Label Studio: {done.url} (pid {done.pid}); login {done.username}, "
                                    f"password in {done.credentials_path}"), language=None)

st.subheader("Progress")
progress = annotator_progress(ws, own_accounts(ws))
if progress.rows:
    st.dataframe(pd.DataFrame(progress.rows).drop(columns=["gone"], errors="ignore"), width="stretch", hide_index=True)
else:
    st.caption("nothing pushed to them yet: push a kind on the Annotation page" if progress.accounts
               else "no annotator has a Label Studio server yet: give one a server above")

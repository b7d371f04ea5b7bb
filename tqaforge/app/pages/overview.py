"""Overview: the pipeline funnel, spend against the budget and over time, annotation progress, releases."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from tqaforge import queries
from tqaforge.app.common import md, require_login, show_annotation_progress, workspace_or_stop

require_login()  # first: nothing of the page before someone signs in (when a login is required)
st.title("tqaforge")
ws = workspace_or_stop()
st.caption(f"workspace **{md(ws.config.name)}** at {md(ws.root, code=True)} · database {md(ws.database_url, code=True)}")

f = queries.funnel(ws)
st.subheader("Pipeline funnel")
cols = st.columns(len(f.stages))
for col, (stage, counts) in zip(cols, f.stages):
    col.metric(stage, counts["total"])
st.bar_chart(pd.DataFrame({"records": [c["total"] for _, c in f.stages]}, index=[s for s, _ in f.stages]), horizontal=True)
st.dataframe(
    pd.DataFrame([{"stage": s, "total": c["total"], "by status": ", ".join(f"{k}: {v}" for k, v in c.items() if k != "total")}
                  for s, c in f.stages]),
    width="stretch", hide_index=True,
)

st.subheader("Spend")
budget = ws.config.llm.values().get("max_cost")
left, right = st.columns(2)
left.metric("LLM cost so far (USD)", f"{f.llm_cost:.4f}")
right.metric("budget per run (USD, [llm] max_cost)", f"{budget:.2f}" if isinstance(budget, (int, float)) else "not set")
spend = queries.cost_over_time(ws)
if spend:
    frame = pd.DataFrame(spend, columns=["day", "cost"]).set_index("day")
    st.line_chart(frame["cost"].cumsum().rename("cumulative cost (USD)"))
else:
    st.caption("no LLM calls yet")

st.subheader("Annotation progress per kind")
show_annotation_progress(ws)

st.subheader("Questions per subtype")
st.bar_chart(pd.Series(queries.subtype_counts(ws), name="questions"))

st.subheader("Releases")
releases = queries.list_releases(ws)
if releases:
    st.dataframe(pd.DataFrame([{"name": r.name, "version": r.version, "items": (r.manifest or {}).get("counts", {}).get("base"),
                                "path": r.path} for r in releases]), width="stretch", hide_index=True)
else:
    st.caption("no release yet (Releases page)")

"""Overview: the pipeline funnel, spend against the budget and over time, annotation progress, releases."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from tqaforge import queries
from tqaforge.app.charts import bar_spec, cumulative_cost_spec
from tqaforge.app.common import md, require_login, show_annotation_progress, usd, workspace_or_stop

require_login()  # first: nothing of the page before someone signs in (when a login is required)
st.title("tqaforge")
ws = workspace_or_stop()
st.caption(f"workspace **{md(ws.config.name)}** at {md(ws.root, code=True)} · database {md(ws.database_url, code=True)}")

f = queries.funnel(ws)
st.subheader("Pipeline funnel")
cols = st.columns(len(f.stages))
for col, (stage, counts) in zip(cols, f.stages):
    col.metric(stage, counts["total"])
# In pipeline order (the funnel's), not alphabetical as Streamlit's bar_chart sorts them.
st.vega_lite_chart(spec=bar_spec({s: c["total"] for s, c in f.stages}, "records per stage", "records",
                                 order=[s for s, _ in f.stages], horizontal=True), width="stretch")
st.dataframe(
    pd.DataFrame([{"stage": s, "total": c["total"], "by status": ", ".join(f"{k}: {v}" for k, v in c.items() if k != "total")}
                  for s, c in f.stages]),
    width="stretch", hide_index=True,
)

st.subheader("Spend")
budget = ws.config.llm.values().get("max_cost")
left, right = st.columns(2)
left.metric("LLM cost so far (USD)", usd(f.llm_cost))
right.metric("budget per run (USD, [llm] max_cost)", usd(budget) if isinstance(budget, (int, float)) else "not set")
spend = queries.cost_over_time(ws)
if not spend:
    st.caption("no LLM calls yet")
elif not any(cost for _, cost in spend):
    # A chart of a flat zero line is an empty box: say it instead.
    st.caption("nothing spent yet: every LLM call so far cost nothing (a free or local model, or no price known)")
else:
    st.vega_lite_chart(spec=cumulative_cost_spec(spend), width="stretch")

st.subheader("Annotation progress per kind")
show_annotation_progress(ws)

st.subheader("Questions per subtype")
per_subtype = queries.subtype_counts(ws)
if per_subtype:
    st.bar_chart(pd.Series(per_subtype, name="questions"))
else:  # an empty Series makes Altair warn and draws an empty box
    st.caption("no questions yet")

st.subheader("Releases")
releases = queries.list_releases(ws)
if releases:
    st.dataframe(pd.DataFrame([{"name": r.name, "version": r.version, "items": (r.manifest or {}).get("counts", {}).get("base"),
                                "path": r.path} for r in releases]), width="stretch", hide_index=True)
else:
    st.caption("no release yet (Releases page)")

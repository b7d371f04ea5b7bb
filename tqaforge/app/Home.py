"""tqaforge app, first page: the pipeline funnel and the tables of the workspace.

Thin on purpose: every figure comes from :mod:`tqaforge.queries`, the same functions the CLI uses.
Run with ``make run`` or ``TQAFORGE_WORKSPACE=DIR streamlit run tqaforge/app/Home.py``.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from tqaforge import queries
from tqaforge.app.common import workspace_or_stop

st.set_page_config(page_title="tqaforge", layout="wide")
st.title("tqaforge")
ws = workspace_or_stop()
st.caption(f"workspace **{ws.config.name}** at `{ws.root}` · database `{ws.database_url}`")

f = queries.funnel(ws)
st.subheader("Pipeline funnel")
cols = st.columns(len(f.stages))
for col, (stage, counts) in zip(cols, f.stages):
    col.metric(stage, counts["total"])
st.dataframe(
    pd.DataFrame(
        [
            {"stage": s, "total": c["total"], "by status": ", ".join(f"{k}: {v}" for k, v in c.items() if k != "total")}
            for s, c in f.stages
        ]
    ),
    width="stretch", hide_index=True,
)
st.caption(f"LLM cost so far: ${f.llm_cost:.4f}")

st.subheader("Questions per subtype")
st.bar_chart(pd.Series(queries.subtype_counts(ws), name="questions"))

st.subheader("Tables")
limit = st.number_input("show", min_value=10, max_value=1000, value=50, step=10)
tables = queries.list_tables(ws, limit=int(limit))
counts = queries.count_questions_by_table(ws, [t.id for t in tables])
st.dataframe(
    pd.DataFrame(
        [
            {
                "id": t.id[:12], "rows": t.n_rows, "columns": t.n_cols,
                "numeric share": round(t.numeric_share, 2), "questions": counts.get(t.id, 0),
                "from": t.imported_from,
            }
            for t in tables
        ]
    ),
    width="stretch", hide_index=True,
)
if tables:
    chosen = st.selectbox("look at a table", [t.id for t in tables], format_func=lambda i: i[:12])
    detail = queries.show_table(ws, chosen)
    st.dataframe(pd.DataFrame(detail.view.rows, columns=[h or f"({i})" for i, h in enumerate(detail.view.header)]), width="stretch")
    st.caption(detail.view.describe())
    for q in detail.questions:
        answers = "; ".join(a.value for a in detail.answers.get(q.id, []))
        st.markdown(f"- **{q.subtype or '-'}** · {q.text} → `{answers}`")

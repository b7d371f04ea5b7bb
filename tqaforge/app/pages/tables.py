"""Tables: browse and filter by size and numeric share, import files by upload, view a table."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from tqaforge import queries
from tqaforge.app.common import md, require_login, run_step, workspace_or_stop

require_login()  # first: nothing of the page before someone signs in (when a login is required)
st.title("Tables")
ws = workspace_or_stop()

with st.expander("Import files (CSV, TSV, JSON, HTML, Markdown, Excel, TableBench, FREB-TQA)"):
    uploads = st.file_uploader("files", accept_multiple_files=True)
    if uploads and st.button("import", key="import"):
        from tqaforge.annotation.human_import import import_uploads

        run_step("importing", lambda on_progress: import_uploads(ws, [(u.name, u.getvalue()) for u in uploads], on_progress=on_progress))

left, middle, right = st.columns(3)
min_rows = left.number_input("min rows", min_value=0, value=0)
max_rows = middle.number_input("max rows (0: any)", min_value=0, value=0)
min_share = right.slider("min numeric share", 0.0, 1.0, 0.0, 0.05)
page_size = 50
listing = queries.list_tables(ws, limit=page_size, min_rows=int(min_rows) or None, max_rows=int(max_rows) or None,
                              min_numeric_share=min_share or None)
st.caption(listing.describe("tables"))
counts = queries.count_questions_by_table(ws, [t.id for t in listing])
st.dataframe(
    pd.DataFrame([{"id": t.id[:12], "rows": t.n_rows, "columns": t.n_cols, "numeric share": round(t.numeric_share, 2),
                   "questions": counts.get(t.id, 0), "from": t.imported_from} for t in listing],
                 columns=["id", "rows", "columns", "numeric share", "questions", "from"]),
    width="stretch", hide_index=True,
)
if listing.items:
    chosen = st.selectbox("look at a table", [t.id for t in listing], format_func=lambda i: i[:12])
    detail = queries.show_table(ws, chosen)
    st.dataframe(pd.DataFrame(detail.view.rows, columns=[h or f"({i})" for i, h in enumerate(detail.view.header)]), width="stretch")
    st.caption(detail.view.describe())
    for q in detail.questions:
        answers = "; ".join(a.value for a in detail.answers.get(q.id, []))
        st.markdown(f"- **{md(q.subtype or '-')}** · {md(q.text)} → {md(answers, code=True)}")

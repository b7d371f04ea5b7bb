"""Tables: browse and filter by size and numeric share, import files by upload, view a table."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from tqaforge import queries
from tqaforge.app.common import column_labels, md, paged, require_login, run_step, window_text, workspace_or_stop

require_login()  # first: nothing of the page before someone signs in (when a login is required)
LENIENT = "accept blank or duplicate header names"
st.title("Tables")
ws = workspace_or_stop()

with st.expander("Import files (CSV, TSV, JSON, HTML, Markdown, Excel, TableBench, FREB-TQA)"):
    uploads = st.file_uploader("files", accept_multiple_files=True)
    lenient = st.checkbox(LENIENT, help="Keep a header with blank or repeated names as it is (otherwise such a file is refused).")
    rows_choice, numbers_choice = st.columns(2)
    header_rows = rows_choice.selectbox(
        "header rows", ["detect", 1, 2, 3, 4],
        help="CSV, TSV, Excel: how many rows form the header ('2019' over 'Q1' gives '2019 / Q1'); detect finds them.",
    )
    numbers = numbers_choice.selectbox(
        "numbers", ["auto", "plain"],
        help="auto: detect each column's way of writing numbers (3,5 · 1.234,5 · 1 234 · 12 % · (1 234)); plain: 1,234.5 only.",
    )
    if uploads and st.button("import", key="import"):
        from tqaforge.annotation.human_import import import_uploads
        from tqaforge.ingest import ImportOptions
        from tqaforge.tables.readers import TidyOptions

        options = ImportOptions(
            strict_headers=False if lenient else None,
            tidy=TidyOptions(header_rows=None if header_rows == "detect" else int(str(header_rows)),
                             numbers="plain" if numbers == "plain" else "auto"),
        )
        done = run_step("importing", lambda on_progress: import_uploads(
            ws, [(u.name, u.getvalue()) for u in uploads], options, on_progress=on_progress))
        if done is not None:
            # Each failure in full (the summary's count alone says nothing of why), and the way out.
            for failed in done.questions.failed:
                st.error(md(failed.error or ""))
            if any(f.header_names_failed for f in done.questions.failed):
                st.warning(md(f"A header has blank or repeated names: tick '{LENIENT}' above and import the file again."))

left, middle, right = st.columns(3)
min_rows = left.number_input("min rows", min_value=0, value=0)
max_rows = middle.number_input("max rows (0: any)", min_value=0, value=0)
min_share = right.slider("min numeric share", 0.0, 1.0, 0.0, 0.05)
listing = paged("tables-page", lambda limit, offset: queries.list_tables(
    ws, limit=limit, offset=offset, min_rows=int(min_rows) or None, max_rows=int(max_rows) or None,
    min_numeric_share=min_share or None), "tables")
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
    st.dataframe(pd.DataFrame(detail.view.rows, columns=column_labels(detail.view.header)), width="stretch")
    st.caption(detail.view.describe())
    if detail.questions.more:  # said, not cut off without a word
        st.caption(f"{window_text(detail.questions, 'questions of this table')}: the Review and Answers pages list the rest")
    for q in detail.questions:
        answers = "; ".join(a.value for a in detail.answers.get(q.id, []))
        st.markdown(f"- **{md(q.subtype or '-')}** · {md(q.text)} → {md(answers, code=True)}")

"""Review: the question review queue, for researchers who review in the app (accept, edit, reject,
promote to seed). Each decision is an annotation like a Label Studio label."""

from __future__ import annotations

import functools

import pandas as pd
import streamlit as st

from tqaforge import queries
from tqaforge.annotation.review import review_question, review_queue
from tqaforge.app.common import attempt, md, paged, require_login, show_summary, workspace_or_stop

require_login()  # first: nothing of the page before someone signs in (when a login is required)
st.title("Review")
ws = workspace_or_stop()


def decide(question_id: str, decision: str, reviewer: str, reason: str, text: str, new: bool) -> None:
    result = attempt(lambda: review_question(ws, question_id, decision, annotator=reviewer, reason=reason or None,
                                             text=text or None, source="app", new=new))
    if result is not None:
        show_summary(result)
        st.rerun()


reviewer = st.text_input("your name (recorded with each decision)", value="researcher")
# One person is one annotator: the name must be a known one, or registered here on purpose.
new_reviewer = st.checkbox("this is a new annotator: register the name", value=False)
subtype = st.selectbox("subtype", ["(all)", *ws.config.taxonomy().subtypes])
queue = paged("review-page", lambda limit, offset: review_queue(
    ws, subtype=None if subtype == "(all)" else subtype, limit=limit, offset=offset), "proposed questions", page_size=20)
for q in queue:
    with st.container(border=True):
        st.markdown(f"**{md(q.subtype or '-')}** · {md(q.id[:10], code=True)} · round {q.round if q.round is not None else '-'}")
        st.markdown(md(q.text))
        # The question is judged against its table: without it "accept" is a guess.
        table = attempt(functools.partial(queries.show_table, ws, q.table_id, max_questions=1))
        if table is not None:
            view = table.view
            st.dataframe(pd.DataFrame(view.rows, columns=[h or f"({i})" for i, h in enumerate(view.header)]),
                         width="stretch", hide_index=True)
            st.caption(f"table {md(q.table_id[:12], code=True)}: {md(view.describe())}")
        reason = st.text_input("reason (for reject)", key=f"reason-{q.id}")
        new_text = st.text_input("new wording (for edit)", key=f"wording-{q.id}")
        cols = st.columns(4)
        for col, decision in zip(cols, ("accept", "edit", "reject", "promote")):
            if col.button(decision, key=f"do-{decision}-{q.id}"):
                decide(q.id, decision, reviewer, reason, new_text, new_reviewer)

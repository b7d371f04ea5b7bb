"""Answers: per question, each agent's reasoning (DP, TCoT, SCoT, PoT), PoT code and its sandbox
output, the answers side by side with the vote and status; for charts, the drawn chart. Questions
the agents answered come first, then those whose only answer is gold (imported, or a probe's by rule)."""

from __future__ import annotations

import streamlit as st

from tqaforge import queries
from tqaforge.answers.show import question_answers
from tqaforge.app.common import attempt, md, paged, require_login, workspace_or_stop
from tqaforge.printable import escape_controls

require_login()  # first: nothing of the page before someone signs in (when a login is required)
st.title("Answers")
ws = workspace_or_stop()
answered = paged("answers-page", lambda limit, offset: queries.answered_questions(ws, limit=limit, offset=offset),
                 "answered questions", page_size=100)
if not answered.items:
    st.info("No answers yet: run answer annotation on the Generate page.")
    st.stop()
chosen = st.selectbox("question", answered.items, format_func=lambda i: i[:12])
shown = attempt(lambda: question_answers(ws, chosen))
if shown is None:
    st.stop()
q = shown.question
st.markdown(f"**{md(q.subtype or '-')}** · {md(q.status)} · {md(q.text)}")
for a in shown.answers:
    st.markdown(f"answer **{md(a.value or '-')}** · {md(a.method or a.origin)} · status **{md(a.status)}**"
                + (f" · route {md(a.route)}" if a.route else ""))
if not shown.candidates:
    st.caption("no agent answered this question: its answer above is the gold (imported, or by rule for a probe); "
               "agents answer it when answer annotation runs on the Generate page (needs a model)")
cols = st.columns(max(len(shown.candidates), 1))
for column, c in zip(cols, shown.candidates):
    with column:
        st.markdown(f"**{md(c.method)}** #{c.sample} · {md(c.status)}")
        st.markdown(f"answer: {md(c.value if c.value is not None else (c.error or 'none'), code=True)}")
        steps = (c.details or {}).get("steps")
        if steps:
            st.dataframe(steps, hide_index=True)
        with st.expander("reply"):
            st.text(escape_controls(c.raw))
        if c.code:
            st.code(escape_controls(c.code), language="python")
        execution = (c.details or {}).get("execution") or {}
        if execution:
            st.caption(f"sandbox: {md(execution.get('outcome'))} in {md(execution.get('seconds', '?'))} s")
            if execution.get("stdout"):
                st.text(escape_controls(str(execution["stdout"])))
        chart = execution.get("chart") or {}
        if chart.get("y"):
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt

            fig, ax = plt.subplots(figsize=(4, 3))
            for series in chart["y"]:
                (ax.bar if chart.get("chart_type") in ("bar", "waterfall") else ax.plot)(range(len(series)), series)
            ax.set_title(f"drawn {chart.get('chart_type')}", parse_math=False)  # data: no $math$
            st.pyplot(fig)
            plt.close(fig)

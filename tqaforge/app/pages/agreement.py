"""Agreement: the statistics with their intervals and bands, per annotator and per subtype, a
pairwise kappa heatmap, and the adjudication queue where a person decides."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from tqaforge.annotation.adjudication import adjudication_queue, resolve
from tqaforge.annotation.report import AgreementReport, Settings, agreement_report
from tqaforge.annotation.report_format import kind_section
from tqaforge.app.common import attempt, md, workspace_or_stop
from tqaforge.queries import annotations_fingerprint

st.title("Agreement")
ws = workspace_or_stop()
n_boot = st.select_slider("bootstrap resamples for the intervals (0: none, fastest)", options=[0, 100, 200, 500, 1000], value=0)


@st.cache_resource(max_entries=4, show_spinner="computing agreement over every label")
def report_for(root: str, labels: tuple[int, str], n_boot: int) -> AgreementReport:
    """The report, computed again only when a label is added (``labels``: count and newest)."""
    return agreement_report(ws, settings=Settings(n_boot=n_boot))


report = report_for(str(ws.root), annotations_fingerprint(ws), n_boot)
if not report.kinds:
    st.info("No annotations yet.")
for name, kind in report.kinds.items():
    with st.expander(f"{md(name)}: {kind.n_items} items, {kind.n_raters} annotators, {kind.n_annotations} labels", expanded=True):
        # The same tables as `tqaforge agreement report` (value, interval, Landis and Koch band).
        section = kind_section(kind, report.settings.ci_level)
        for line in section.lines[2:]:
            st.caption(md(line))
        overall = section.tables[0]
        st.dataframe(pd.DataFrame(list(overall.rows), columns=list(overall.headers)), hide_index=True, width="stretch")
        if kind.per_annotator:
            st.markdown("**per annotator**")
            st.bar_chart(pd.Series({who: r.value for who, r in kind.per_annotator.items() if r.value is not None}, name="agreement"))
        if kind.per_subtype:
            per = {sub: next((r.value for r in stats.values() if r.value is not None), None) for sub, stats in kind.per_subtype.items()}
            st.markdown("**per subtype**")
            st.bar_chart(pd.Series({k: v for k, v in per.items() if v is not None}, name="agreement"))
        for stat, pairwise in kind.pairwise.items():
            if len(pairwise.raters) >= 2:
                matrix = pd.DataFrame(index=pairwise.raters, columns=pairwise.raters, dtype=float)
                for (a, b), result in pairwise.pairs.items():
                    matrix.loc[a, b] = matrix.loc[b, a] = result.value
                st.markdown(f"**pairwise {md(stat)}**")
                st.dataframe(matrix.style.background_gradient(cmap="RdYlGn", vmin=-1, vmax=1), width="stretch")



def decide(task_id: str, label_json: str, by: str, note: str) -> None:
    decided = attempt(lambda: resolve(ws, task_id, json.loads(label_json), by=by, note=note or None))
    if decided is not None:
        st.success(f"{md(task_id[:12])}: decided")
        st.rerun()


st.subheader("Adjudication queue")
queue = adjudication_queue(ws, limit=20)
st.caption(queue.describe("open items"))
who = st.text_input("your name (recorded with each decision)", value="researcher")
for item in queue:
    with st.container(border=True):
        st.markdown(f"**{md(item.kind)}** · {md(item.target_type)} {md(item.target_id[:12], code=True)} · "
                    f"task {md(item.task_id[:12], code=True)}")
        for vote in item.votes:
            label = json.dumps(vote.get("label"), ensure_ascii=False)
            st.markdown(f"- {md(label, code=True)} by {md(', '.join(vote.get('annotators', [])))}")
        options = [json.dumps(v.get("label"), ensure_ascii=False) for v in item.votes]
        picked = st.selectbox("final label", options, key=f"pick-{item.task_id}")
        note = st.text_input("note", key=f"note-{item.task_id}")
        if st.button("decide", key=f"decide-{item.task_id}"):
            decide(item.task_id, picked, who, note)

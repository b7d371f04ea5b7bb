"""Agreement: the statistics with their intervals and bands, per annotator and per subtype, a
pairwise kappa heatmap, and the adjudication queue where a person decides."""

from __future__ import annotations

import json

import streamlit as st

from tqaforge.annotation.adjudication import adjudication_queue, resolve
from tqaforge.annotation.agreement import PairwiseResult
from tqaforge.annotation.report import AgreementReport, Settings
from tqaforge.annotation.report_cache import cached_agreement_report, report_inputs
from tqaforge.annotation.report_format import kind_section
from tqaforge.app.common import attempt, md, require_login, workspace_or_stop

require_login()  # first: nothing of the page before someone signs in (when a login is required)
st.title("Agreement")
ws = workspace_or_stop()
n_boot = st.select_slider("bootstrap resamples for the intervals (0: none, fastest)", options=[0, 100, 200, 500, 1000], value=0)


@st.cache_resource(max_entries=4, show_spinner="computing agreement over every label")
def report_for(root: str, inputs_json: str, n_boot: int) -> AgreementReport:
    """The report of these inputs (:func:`report_inputs`, as JSON): kept in this process, and on
    disk between processes (read back on a first visit), computed again when a label is added or
    a decision made."""
    return cached_agreement_report(ws, Settings(n_boot=n_boot), inputs=json.loads(inputs_json))


# Taken on every run, so that a label or a decision since the last one is always shown.
report = report_for(str(ws.root), json.dumps(report_inputs(ws), sort_keys=True), n_boot)


def bar_chart(values: dict[str, float], title: str) -> None:
    """A bar per name: a Vega-Lite spec of our own (Streamlit's ``bar_chart`` imports Altair, a
    second or so of this page's first render)."""
    data = [{"name": k, "value": v} for k, v in values.items()]
    st.vega_lite_chart(spec={
        "data": {"values": data}, "mark": "bar", "title": title,
        "encoding": {"x": {"field": "name", "type": "nominal", "sort": None, "title": None},
                     "y": {"field": "value", "type": "quantitative", "title": "agreement"}},
    }, width="stretch")


def heatmap(pairwise: PairwiseResult, title: str) -> None:
    """Each pair's value on a red (-1) to green (1) scale: a Vega-Lite spec (a styled dataframe
    needs matplotlib's colour maps, another second of the first render)."""
    data = [{"a": a, "b": b, "value": r.value} for (x, y), r in pairwise.pairs.items() if r.value is not None
            for a, b in ((x, y), (y, x))]
    st.vega_lite_chart(spec={
        "data": {"values": data}, "title": title,
        "encoding": {"x": {"field": "b", "type": "nominal", "sort": list(pairwise.raters), "title": None},
                     "y": {"field": "a", "type": "nominal", "sort": list(pairwise.raters), "title": None}},
        "layer": [
            {"mark": "rect", "encoding": {"color": {"field": "value", "type": "quantitative",
                                                    "scale": {"scheme": "redyellowgreen", "domain": [-1, 1]}}}},
            {"mark": "text", "encoding": {"text": {"field": "value", "type": "quantitative", "format": ".2f"}}},
        ],
    }, width="stretch")


if not report.kinds:
    st.info("No annotations yet.")
st.caption(md(f"computed {report.generated_at}"))
for name, kind in report.kinds.items():
    with st.expander(f"{md(name)}: {kind.n_items} items, {kind.n_raters} annotators, {kind.n_annotations} labels", expanded=True):
        # The same tables as `tqaforge agreement report` (value, interval, Landis and Koch band).
        section = kind_section(kind, report.settings.ci_level)
        for line in section.lines[2:]:
            st.caption(md(line))
        overall = section.tables[0]
        st.dataframe({h: [row[i] for row in overall.rows] for i, h in enumerate(overall.headers)}, hide_index=True, width="stretch")
        if kind.per_annotator:
            bar_chart({who: r.value for who, r in kind.per_annotator.items() if r.value is not None}, "per annotator")
        if kind.per_subtype:
            per = {sub: next((r.value for r in stats.values() if r.value is not None), None) for sub, stats in kind.per_subtype.items()}
            bar_chart({k: v for k, v in per.items() if v is not None}, "per subtype")
        for stat, pairwise in kind.pairwise.items():
            if len(pairwise.raters) >= 2:
                heatmap(pairwise, f"pairwise {stat}")


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

"""Agreement: the statistics with their intervals and bands, per annotator and per subtype, a
pairwise kappa heatmap, and the adjudication queue where a person decides."""

from __future__ import annotations

import json
from typing import Mapping

import streamlit as st

from tqaforge.annotation.adjudication import adjudicate, adjudication_queue, label_choices, resolve
from tqaforge.annotation.agreement import AgreementResult
from tqaforge.annotation.reopen import adjudication_flags
from tqaforge.annotation.report import AgreementReport, Settings
from tqaforge.annotation.report_cache import cached_agreement_report, report_inputs
from tqaforge.annotation.report_format import kind_section
from tqaforge.app.charts import agreement_domain, bar_spec, by_statistic, heatmap_spec, undefined_pairs
from tqaforge.app.common import attempt, md, paged, require_login, show_summary, workspace_or_stop
from tqaforge.queries import labels_by_source

require_login()  # first: nothing of the page before someone signs in (when a login is required)
st.title("Agreement")
ws = workspace_or_stop()
# 200 by default: with none, every interval is "—" and the bands say nothing of how sure they are.
n_boot = st.select_slider("bootstrap resamples for the intervals (0: none, fastest)", options=[0, 100, 200, 500, 1000], value=200)


@st.cache_resource(max_entries=4, show_spinner="computing agreement over every label")
def report_for(root: str, inputs_json: str, n_boot: int) -> AgreementReport:
    """The report of these inputs (:func:`report_inputs`, as JSON): kept in this process, and on
    disk between processes (read back on a first visit), computed again when a label is added or
    a decision made."""
    return cached_agreement_report(ws, Settings(n_boot=n_boot), inputs=json.loads(inputs_json))


# Taken on every run, so that a label or a decision since the last one is always shown.
report = report_for(str(ws.root), json.dumps(report_inputs(ws), sort_keys=True), n_boot)


def charts(results: Mapping[str, AgreementResult], what: str) -> None:
    """One bar chart per statistic of ``results`` (name -> result); a caption instead of an empty chart."""
    grouped = by_statistic(results)
    for statistic, values in grouped.items():
        st.vega_lite_chart(spec=bar_spec(values, f"{what}: {statistic}", statistic, domain=agreement_domain(values)),
                           width="stretch")
    if not grouped:
        reason = next((r.reason for r in results.values() if r.reason), "too few labels")
        statistics = ", ".join(sorted({r.statistic for r in results.values()}))
        st.caption(md(f"{what}: {statistics}: undefined for every one ({reason})"))


# Imported labels (published datasets' own) are not our annotators' work: agreement leaves them
# out, and says so, instead of "no annotations" beside the Overview's count of them.
left_out = {kind: n for kind, by_source in labels_by_source(ws).items()
            if (n := sum(c for source, c in by_source.items() if source in report.settings.exclude_sources))}
if left_out:
    st.info(md(f"{sum(left_out.values())} imported labels ({', '.join(f'{k}: {n}' for k, n in sorted(left_out.items()))}) "
               "are left out: they come with published datasets, not from this workspace's annotators, so they "
               "say nothing of how far its annotators agree."))
if not report.kinds:
    st.info("No annotations by this workspace's annotators yet." if left_out else "No annotations yet.")
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
            charts(kind.per_annotator, "per annotator")
        # One chart per statistic: a subtype's results hold several (kappa, alpha...).
        statistics = sorted({stat for stats in kind.per_subtype.values() for stat in stats})
        for stat in statistics:
            charts({sub: stats[stat] for sub, stats in kind.per_subtype.items() if stat in stats}, "per subtype")
        for stat, pairwise in kind.pairwise.items():
            if len(pairwise.raters) >= 2 and pairwise.pairs:
                st.vega_lite_chart(spec=heatmap_spec(pairwise, f"pairwise {stat}"), width="stretch")
                if (undefined := undefined_pairs(pairwise)) is not None:
                    st.caption(md(undefined))


def decide(task_id: str, label_json: str, by: str, note: str) -> None:
    decided = attempt(lambda: resolve(ws, task_id, json.loads(label_json), by=by, note=note or None))
    if decided is not None:
        st.success(f"{md(task_id[:12])}: decided")
        st.rerun()


st.subheader("Adjudication queue")
# What `tqaforge agreement adjudicate` does: labels pulled since the last run are decided by rule
# (unanimous, majority) or wait below for a person; without it the queue never sees new labels.
if st.button("apply the rules to new labels", help="Unanimous and majority items are decided by rule; the rest wait here."):
    ruled = attempt(lambda: adjudicate(ws))
    if ruled is not None:
        show_summary(ruled)
queue = paged("adjudication-page", lambda limit, offset: adjudication_queue(ws, limit=limit, offset=offset), "open items",
              page_size=20)
st.caption("suspect gold sent back by the health report shows its evidence")
who = st.text_input("your name (recorded with each decision)", value="researcher")
for item in queue:
    with st.container(border=True):
        st.markdown(f"**{md(item.kind)}** · {md(item.target_type)} {md(item.target_id[:12], code=True)} · "
                    f"task {md(item.task_id[:12], code=True)}")
        for flag in item.flags:  # why a finding sent it back (a rule's label stays until you decide)
            st.warning(md(flag.line()))
        for vote in item.votes:
            label = json.dumps(vote.get("label"), ensure_ascii=False)
            st.markdown(f"- {md(label, code=True)} by {md(', '.join(vote.get('annotators', [])))}")
        if not item.votes:
            st.markdown("- no label yet")
        options = [json.dumps(choice, ensure_ascii=False) for choice in label_choices(item)]
        picked = st.selectbox("final label", options, key=f"pick-{item.task_id}")
        note = st.text_input("note", key=f"note-{item.task_id}")
        if st.button("decide", key=f"decide-{item.task_id}"):
            decide(item.task_id, picked, who, note)

if adjudication_flags(ws, status="settled", limit=1).total:
    st.subheader("Suspect gold settled by a person (evidence only)")
    st.caption("a person's decision stays final; the finding is kept here as evidence for whoever reads the item next")
    settled = paged("settled-flags-page", lambda limit, offset: adjudication_flags(ws, status="settled", limit=limit,
                                                                                   offset=offset), "flags", page_size=20)
    for flag in settled:
        st.markdown(f"- task {md(flag.task_id[:12], code=True)}: {md(flag.line())}")

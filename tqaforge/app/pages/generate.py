"""Generate: question rounds and answer annotation with live progress and cost, and probes (questions
answered by rule). Without an LLM endpoint the page says how to configure one; probes and every
other page work without it."""

from __future__ import annotations

import streamlit as st

from tqaforge.app.common import app_text, attempt, md, require_login, run_step, workspace_or_stop
from tqaforge.llm import LLMSettings
from tqaforge.llm.settings import llm_readiness
from tqaforge.llm.step import RunnerOptions

require_login()  # first: nothing of the page before someone signs in (when a login is required)
st.title("Generate")
ws = workspace_or_stop()
model = st.text_input("model", value=str(ws.config.llm.values().get("model") or ""), placeholder="e.g. gpt-4o-mini")
max_cost = st.number_input("budget for this run (USD; 0: none)", min_value=0.0, value=0.0, step=0.5,
                           help="Refused for a model with no known price: add its price to [llm.prices] in tqaforge.toml.")
shared_budget = st.text_input("shared budget name (optional)",
                              help="A budget kept in the store and shared with the CLI, other workers and machines "
                                   "that name it; the amount above sets its limit.")
workers = st.number_input("workers", min_value=1, value=1, help="Requests this page runs side by side.")
readiness = llm_readiness(ws, model=model or None, max_cost=max_cost or None)
llm: LLMSettings | None = readiness.settings
ready = llm is not None
if readiness.problem is not None:
    st.error(md(app_text(readiness.problem)))
elif readiness.missing == ("model",):
    # The endpoint and key are set: only the name is missing, and the field for it is on this page.
    st.warning(f"Type the model's name in the **model** field above to generate (requests go to {md(readiness.endpoint)}; "
               "the endpoint and its key are set).")
elif readiness.missing:
    also = " and type the model's name in the **model** field above" if "model" in readiness.missing else ""
    st.warning(
        "No LLM endpoint is configured, so nothing can be generated here: set OPENAI_BASE_URL and OPENAI_API_KEY "
        "in the environment the app is started from (or [llm] base_url and api_key_env in tqaforge.toml) and "
        f"restart the app{also}. Everything else in the app works without one."
    )
elif llm is not None:
    priced = llm.price is not None
    st.caption(f"endpoint {md(readiness.endpoint)} · model {md(llm.model)} · price "
               f"{md(llm.price_source if priced else 'unknown')}")
    if not priced and max_cost:
        # A budget the run cannot keep is refused before any request (tqaforge.llm.prices.require_price).
        ready = False
        st.warning(f"The model {md(llm.model)} has no known price, so a budget cannot stop it: add its price under "
                   "[llm.prices] in tqaforge.toml (0 and 0 for a free local model) and reload, or set the budget to 0 "
                   "to run without one.")
    elif not priced:
        st.caption(f"{md(llm.model)} has no known price: its cost is unknown, so no budget can apply (set one only with a price).")
runner = RunnerOptions(workers=int(workers), budget=shared_budget.strip() or None,
                       window=max(4, 2 * (llm.concurrency if llm else 8)))

taxonomy = ws.config.taxonomy()
tab_questions, tab_answers, tab_probes = st.tabs(["Question rounds", "Answer annotation", "Probes (no model)"])
with tab_questions:
    with st.form("questions"):
        subtypes = st.multiselect("subtypes", taxonomy.subtypes, default=list(taxonomy.subtypes[:1]))
        tables = st.text_input("tables (id prefixes, comma-separated; empty: all)")
        per_round = st.number_input("questions per round and table", min_value=1, value=3)
        rounds = st.number_input("rounds", min_value=1, value=1)
        go = st.form_submit_button("generate questions", disabled=not ready)
    if go and llm is not None:
        from tqaforge.generation.questions import generate_questions, load_generation_options

        endpoint_settings = llm
        options = attempt(lambda: load_generation_options(
            ws, subtypes=tuple(subtypes), tables=tuple(t.strip() for t in tables.split(",") if t.strip()),
            per_round=int(per_round), rounds=int(rounds)))
        if options is not None:
            chosen = options
            run_step("generating", lambda on_progress: generate_questions(ws, chosen, endpoint_settings, on_progress=on_progress,
                                                                                runner=runner))
with tab_answers:
    with st.form("answers"):
        which = st.text_input("questions", value="accepted", help="accepted, all, or question ids")
        methods = st.multiselect("methods", ["DP", "TCoT", "SCoT", "PoT"], default=["TCoT", "SCoT", "PoT"])
        go_answers = st.form_submit_button("answer, vote and route", disabled=not ready)
    if go_answers and llm is not None:
        from tqaforge.answers.annotate import generate_answers, load_answer_options

        answer_settings = llm
        answer_options = attempt(lambda: load_answer_options(ws, questions=tuple(x.strip() for x in which.split(",") if x.strip()),
                                                             methods=tuple(methods)))
        if answer_options is not None:
            how = answer_options
            run_step("answering", lambda on_progress: generate_answers(ws, how, answer_settings, on_progress=on_progress,
                                                                            runner=runner))
with tab_probes:
    from tqaforge.generation.probes import PROBE_KINDS, ProbeOptions, generate_probes

    st.caption("Questions whose exact answers come from the table itself (rows, columns, a column's header, a cell, "
               "the range, whether it has a header), stored as proposed with their gold answer; the same seed adds "
               "nothing the second time.")
    with st.form("probes"):
        kinds = st.multiselect("kinds", PROBE_KINDS, default=list(PROBE_KINDS))
        probe_tables = st.text_input("tables to probe (id prefixes, comma-separated; empty: all)")
        probe_seed = st.number_input("seed", min_value=0, value=0)
        per_table = st.number_input("header and cell probes per table", min_value=1, value=1)
        large = st.checkbox("large-table set: rows, columns and header probes on up to N tables per token bucket, "
                            "growing a table into an empty bucket")
        per_bucket = st.number_input("tables per token bucket (large-table set)", min_value=1, value=1)
        go_probes = st.form_submit_button("make probes")
    if go_probes and large:
        from tqaforge.generation.large_tables import LargeTableOptions, generate_large_table_probes

        large_options = attempt(lambda: LargeTableOptions(
            per_bucket=int(per_bucket), seed=int(probe_seed), per_table=int(per_table),
            tables=tuple(t.strip() for t in probe_tables.split(",") if t.strip())))
        if large_options is not None:
            chosen_large = large_options
            run_step("probing large tables",
                     lambda on_progress: generate_large_table_probes(ws, chosen_large, on_progress=on_progress))
    elif go_probes:
        probe_options = attempt(lambda: ProbeOptions(
            kinds=tuple(kinds), tables=tuple(t.strip() for t in probe_tables.split(",") if t.strip()),
            seed=int(probe_seed), per_table=int(per_table)))
        if probe_options is not None:
            chosen_probes = probe_options
            run_step("probing tables", lambda on_progress: generate_probes(ws, chosen_probes, on_progress=on_progress))

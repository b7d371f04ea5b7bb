"""Taxonomy and seeds: each subtype's definition and seed questions (editable), and which seeds
inspired which generated questions (lineage)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from tqaforge import queries
from tqaforge.app.common import attempt, md, require_login, workspace_or_stop
from tqaforge.generation import corpus as seed_corpus

require_login()  # first: nothing of the page before someone signs in (when a login is required)
st.title("Taxonomy and seeds")
ws = workspace_or_stop()
taxonomy = ws.config.taxonomy()
subtypes = [c.subtype for c in taxonomy.categories]
st.caption(f"taxonomy **{md(taxonomy.name)}**: {len(subtypes)} subtypes; seeds in {md(seed_corpus.corpus_path(ws), code=True)}")
subtype = st.selectbox("subtype", subtypes)
category = next((c for c in seed_corpus.workspace_corpus(ws).categories if c.subtype == subtype), None)

with st.form("definition"):
    definition = st.text_area("definition", value=category.definition if category else "")
    if st.form_submit_button("save the definition") and definition.strip():
        if attempt(lambda: seed_corpus.add_seed(ws, subtype, definition=definition)) is not None:
            st.success("definition saved")

entries = seed_corpus.seed_entries(ws, subtype)
st.subheader(f"Seed questions ({len(entries)})")
st.dataframe(pd.DataFrame([{"seed question": e.text, "from": e.source} for e in entries], columns=["seed question", "from"]),
             width="stretch", hide_index=True)
with st.form("add_seed", clear_on_submit=True):
    new_seed = st.text_input("a new seed question")
    if st.form_submit_button("add the seed") and new_seed.strip():
        if attempt(lambda: seed_corpus.add_seed(ws, subtype, new_seed)) is not None:
            st.success(f"seed added to {md(subtype)}")
            st.rerun()

st.subheader("Lineage: which seeds inspired which questions")
lineage = queries.seed_lineage(ws, subtype)
if lineage:
    st.dataframe(pd.DataFrame([{"seed shown": seed, "questions": n, "e.g.": " | ".join(shown)} for seed, (n, shown) in lineage.items()]),
                 width="stretch", hide_index=True)
else:
    st.caption("no generated question of this subtype yet")

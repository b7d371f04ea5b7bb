"""Variants: build the variant grid (what ``tqaforge variants build`` does: the same
:func:`~tqaforge.variants.grid.build_variant_grid`); the original and the perturbed table side by
side, changed cells highlighted; each serialization as the model would see it."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from tqaforge import queries
from tqaforge.app.common import attempt, column_labels, md, paged, require_login, run_step, workspace_or_stop
from tqaforge.printable import escape_controls
from tqaforge.tables.perturb import PERTURBATIONS, TORR_PERTURBATIONS
from tqaforge.tables.serialize import SERIALIZATIONS, TORR_SERIALIZATIONS, serialize
from tqaforge.variants.grid import GridOptions, build_variant_grid
from tqaforge.variants.view import show_variant

require_login()  # first: nothing of the page before someone signs in (when a login is required)
#: The widest tables shown side by side by default.
SIDE_BY_SIDE_COLUMNS = 4
st.title("Variants")
ws = workspace_or_stop()
counts = queries.variant_counts(ws)
with st.expander("build variants", expanded=not counts):
    with st.form("build-variants"):
        chosen_perturbations = st.multiselect("perturbations", list(PERTURBATIONS), default=["none", *TORR_PERTURBATIONS],
                                              key="grid-perturbations")
        chosen_serializations = st.multiselect("serializations (of the prompts file)", list(SERIALIZATIONS),
                                               default=list(TORR_SERIALIZATIONS), key="grid-serializations")
        seed = st.number_input("seed", min_value=0, max_value=2147483647, value=0, step=1, key="grid-seed")
        every_status = st.checkbox("questions of every status (default: accepted ones only)")
        keep_structural = st.checkbox("also move cells for questions that name positions (first, last, row...)")
        overwrite = st.checkbox("replace a prompts file made with other choices", key="grid-overwrite")
        build = st.form_submit_button("build variants", type="primary")
    if build:
        options = GridOptions(perturbations=tuple(chosen_perturbations), serializations=tuple(chosen_serializations),
                              seeds=(int(seed),), status=None if every_status else "accepted", overwrite=overwrite,
                              skip_structural=not keep_structural)
        if run_step("building variants", lambda on_progress: build_variant_grid(ws, options, on_progress=on_progress)):
            counts = queries.variant_counts(ws)
present = [p for p in PERTURBATIONS if counts.get(p)]
# The first perturbation that changes something opens by default ("none" is the table as it was).
start = next((i for i, p in enumerate(present) if p != "none"), 0)
perturbation = st.selectbox("perturbation", present or ["(none)"], index=start,
                            format_func=lambda p: f"{p} ({counts.get(p, 0)})")
listing = paged("variants-page", lambda limit, offset: queries.list_variants(
    ws, perturbation=perturbation if present else None, limit=limit, offset=offset), "variants")
if not listing.items:
    st.info("No variants yet: build them above (automatic perturbations), or make value modifications in Label Studio "
            "(the Annotation page pushes them).")
    st.stop()
# A built variant opens by default (a skipped one has no perturbed table to show).
first_built = next((i for i, v in enumerate(listing) if v.status != "skipped"), 0)
chosen = st.selectbox("variant", [v.id for v in listing], index=first_built, format_func=lambda i: next(
    f"{v.id[:12]} · {v.perturbation} · {v.status}" for v in listing if v.id == i))
view = attempt(lambda: show_variant(ws, chosen))
if view is None:
    st.stop()
st.markdown(f"**{md(view.variant.perturbation)}** (seed {view.variant.seed}) · status **{md(view.variant.status)}** · "
            f"question: {md(view.question.text)}")
st.caption(f"gold answer: {md(', '.join(view.variant.answers or []) or '-')} · effect {md(view.variant.answer_effect or '-')}")
for line in view.edit_lines():
    st.markdown(f"- changed {md(line)}")
COLOURS = {"changed": "background-color: #ffd54f", "moved": "background-color: #b3e5fc", "inserted": "background-color: #c8e6c9"}
# Side by side only while both fit in half the page; a wider table is cut off at the edge of its
# half, so by default it goes one above the other, each the page's width.
widest = max(len(view.original.header), len(view.perturbed.header) if view.perturbed is not None else 0)
side_by_side = st.toggle("side by side", value=widest <= SIDE_BY_SIDE_COLUMNS,
                         help=f"Tables of more than {SIDE_BY_SIDE_COLUMNS} columns start one above the other.")
left, right = st.columns(2, gap="medium") if side_by_side else (st.container(), st.container())
with left:
    st.subheader("original")
    st.dataframe(pd.DataFrame(view.original.rows, columns=column_labels(view.original.header)), width="stretch")
with right:
    st.subheader("perturbed")
    if view.perturbed is None:
        st.info(f"skipped: {md(view.variant.skip_reason or 'no table')}")
    else:
        frame = pd.DataFrame(view.perturbed.rows, columns=column_labels(view.perturbed.header))
        marks = pd.DataFrame([[COLOURS.get(m, "") for m in row] for row in view.marks], columns=frame.columns)
        st.dataframe(frame.style.apply(lambda _: marks, axis=None), width="stretch")
        st.caption("yellow: changed · blue: moved · green: inserted")
if view.perturbed is not None:
    fmt = st.selectbox("serialization (as the model sees it)", SERIALIZATIONS)
    # Wrapped, in a box that scrolls down: a serialization's long lines were cut off on the right.
    with st.container(height=480, border=False):
        st.code(escape_controls(serialize(view.perturbed, fmt)), language=None, wrap_lines=True)

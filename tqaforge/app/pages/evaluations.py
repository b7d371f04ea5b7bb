"""Evaluations: score a predictions file (uploaded, or a path) or a model on a release, as
``tqaforge evaluate`` does; compare systems side by side (their scores, the plots the evaluation
wrote, and the significance of their differences)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd
import streamlit as st

from tqaforge import queries
from tqaforge.app.common import attempt, md, require_login, run_step, show_summary, workspace_or_stop
from tqaforge.errors import ConfigError
from tqaforge.evaluate.harness import EvaluateOptions, default_evaluation_dir, evaluate, saved_evaluations
from tqaforge.evaluate.model_run import ModelRunOptions, default_predictions_path, run_model
from tqaforge.evaluate.side_by_side import compare_evaluations
from tqaforge.llm.settings import configured_endpoint

require_login()  # first: nothing of the page before someone signs in (when a login is required)
st.title("Evaluations")
ws = workspace_or_stop()
# Where the CLI writes them when run in the workspace (evaluations/RELEASE/PREDICTIONS): the same place.
EVALUATIONS = ws.root / "evaluations"

releases = [r.path for r in queries.list_releases(ws) if r.path]
chosen = st.selectbox("release", releases + [""], format_func=lambda p: Path(p).name if p else "another directory (below)")
typed = st.text_input("release directory", disabled=bool(chosen),
                      help="A release built elsewhere (downloaded, say): the directory holding its manifest.json.")
release = Path(chosen or typed.strip())


def score(predictions: Path, model_name: str | None) -> None:
    """Score ``predictions`` on the chosen release where the CLI run in the workspace writes them."""
    out = default_evaluation_dir(release, predictions, ws.root)
    options = EvaluateOptions(release=release, predictions=predictions, model=model_name, out=out)
    run_step("scoring", lambda on_progress: evaluate(options, ws=ws, on_progress=on_progress))


tab_file, tab_model = st.tabs(["Score a predictions file", "Ask a model"])
with tab_file:
    st.caption("JSONL: one line per release row with its id and the prediction (TableBench's inference format is read as it is).")
    upload = st.file_uploader("predictions file", type=["jsonl", "json"])
    path = st.text_input("or its path on this machine", disabled=upload is not None)
    model_name = st.text_input("system name (for predictions that name none; default: the file's name)")
    if st.button("score", disabled=not (upload is not None or path.strip()) or not str(release).strip(".")):
        if upload is not None:
            # The upload lives only while it is scored: a file that fails leaves nothing behind.
            with tempfile.TemporaryDirectory(prefix="tqaforge-predictions-") as scratch:
                staged = Path(scratch) / Path(upload.name).name
                staged.write_bytes(upload.getvalue())
                score(staged, model_name.strip() or None)
        else:
            score(Path(path.strip()).expanduser(), model_name.strip() or None)

with tab_model:
    model = st.text_input("model", value=str(ws.config.llm.values().get("model") or ""), placeholder="e.g. gpt-4o-mini")
    ready, missing = False, ""
    try:
        # The endpoint is looked at whatever the model field holds: what is missing is said first.
        endpoint = configured_endpoint(ws) is not None
        ready = endpoint and bool(model.strip())
        missing = ("" if ready else "Enter the model's name above." if endpoint else
                   "No model endpoint is set up for this workspace: set OPENAI_BASE_URL and OPENAI_API_KEY in the "
                   "environment the app runs in (or [llm] base_url and api_key_env in tqaforge.toml), then reload this page.")
    except ConfigError as exc:
        missing = str(exc)
    if missing:
        st.info(md(missing))
    with st.form("model-run"):
        method = st.selectbox("answering method", ["DP", "TCoT", "SCoT", "PoT"])
        subsets = st.text_input("release subsets to ask (comma-separated)", value="base")
        limit = st.number_input("ask only the first N rows (0: all)", min_value=0, value=0)
        max_cost = st.number_input("budget for this run (USD; 0: none)", min_value=0.0, value=0.0, step=0.5)
        ask = st.form_submit_button("ask the model, then score its replies", disabled=not ready)
    if ask:
        name = model.strip()
        out = ws.root / default_predictions_path(release, name, method)
        options = ModelRunOptions(release=release, model=name, method=method, out=out, max_cost=max_cost or None,
                                  subsets=tuple(s.strip() for s in subsets.split(",") if s.strip()), limit=int(limit) or None)
        ran = run_step(f"asking {name}", lambda on_progress: run_model(ws, options, on_progress=on_progress))
        if ran is not None and ran.complete:
            score(Path(ran.predictions), None)
        elif ran is not None:
            st.warning("Not every row has its reply yet (see above): ask again to resume; the replies so far are kept.")

st.subheader("Compare systems")
saved = saved_evaluations(EVALUATIONS)
if not saved:
    st.caption("no evaluation yet: score a predictions file or ask a model above")
    st.stop()
by_label = {f"{s.release} / {s.predictions}": EVALUATIONS / s.release / s.predictions for s in saved}
# The latest release's evaluations are shown side by side at first (there is something to see).
first = [label for label, s in zip(by_label, saved) if s.release == saved[-1].release]
picked = st.multiselect("evaluations to put side by side (two systems or more)", list(by_label),
                        default=first if len(first) >= 2 else [])
if picked:
    side = attempt(lambda: compare_evaluations([by_label[p] for p in picked]))
    if side is not None:
        st.dataframe(pd.DataFrame(list(side.overall)), width="stretch", hide_index=True)
        if side.comparison is not None:
            show_summary(side.comparison)
        else:
            st.info(md(f"No significance test: {side.note}."))
        columns = st.columns(len(side.systems))
        for column, system in zip(columns, side.systems):
            column.markdown(f"**{md(system)}**")
            for image in side.plots.get(system, ()):
                column.image(str(image), caption=md(image.name))

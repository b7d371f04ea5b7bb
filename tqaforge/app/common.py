"""Helpers shared by the app's pages: the workspace, errors shown as messages, progress bars,
summaries rendered the way the CLI renders them (their ``lines()``)."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import streamlit as st

from tqaforge.errors import TqaforgeError
from tqaforge.progress import Progress
from tqaforge.store import Workspace, open_workspace

T = TypeVar("T")


@st.cache_resource
def _open(root: str | None) -> Workspace:
    return open_workspace(Path(root) if root else None)


def workspace_or_stop() -> Workspace:
    """The workspace named by TQAFORGE_WORKSPACE (or around the cwd); stops the page with the
    error message when there is none."""
    try:
        return _open(os.environ.get("TQAFORGE_WORKSPACE"))
    except TqaforgeError as exc:
        st.error(str(exc))
        st.stop()
        raise  # unreachable: st.stop() raises


def attempt(step: Callable[[], T]) -> T | None:
    """Run a library step; a TqaforgeError becomes a red message on the page (the CLI prints the
    same message), and None is returned."""
    try:
        return step()
    except TqaforgeError as exc:
        st.error(str(exc))
        return None


def show_summary(summary: Any) -> None:
    """A library summary as the CLI prints it (its ``lines()``), in a code block."""
    st.code("\n".join(summary.lines()), language=None)


@contextmanager
def progress(label: str) -> Iterator[Progress]:
    """A Streamlit progress bar driven through :class:`tqaforge.progress.Progress`."""
    bar = st.progress(0.0, text=label)

    def report(done: int, total: int | None, note: str = "") -> None:
        share = min(done / total, 1.0) if total else 0.0
        bar.progress(share, text=f"{label}: {done}/{total or '?'} {note}".strip())

    try:
        yield report
    finally:
        bar.empty()


def run_step(label: str, step: Callable[[Progress], T]) -> T | None:
    """A long library step with a progress bar; its summary shown as the CLI prints it, or its
    error as a red message (None returned)."""
    with progress(label) as on_progress:
        done = attempt(lambda: step(on_progress))
    if done is not None:
        show_summary(done)
    return done


def show_annotation_progress(ws: Workspace) -> None:
    """Tasks by status and labels recorded, per annotation kind (Overview and Annotation pages)."""
    import pandas as pd

    from tqaforge.queries import annotation_progress

    table = annotation_progress(ws)
    if table:
        st.dataframe(pd.DataFrame(table).T.fillna(0).astype(int), width="stretch")
    else:
        st.caption("no annotation tasks yet: push a kind to Label Studio (Annotation page) or review here (Review page)")

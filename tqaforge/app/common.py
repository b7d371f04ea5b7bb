"""Helpers shared by the app's pages."""

from __future__ import annotations

import os
from pathlib import Path

import streamlit as st

from tqaforge.errors import TqaforgeError
from tqaforge.store import Workspace, open_workspace


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

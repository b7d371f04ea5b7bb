"""tqaforge app: every stage of the pipeline on a page (sidebar). Pages call the same library
functions as the CLI; none holds logic of its own.

Run with ``make run``, ``tqaforge app`` or ``TQAFORGE_WORKSPACE=DIR streamlit run tqaforge/app/main/Home.py``.

Why a folder of its own: Streamlit serves a main script with a ``pages/`` folder beside it the old
way until that script has called ``st.navigation`` once in the process, so a page's URL opened
first after a start ran the page alone: Streamlit's own sidebar of file names (or none), the
narrow layout, no navigation of ours. Here no ``pages/`` is beside it, so every request runs this
script first, whichever page it names.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from tqaforge.app.common import login_required, signed_in_as

PAGES = Path(__file__).resolve().parents[1] / "pages"
#: (file, title, icon) in pipeline order.
PAGE_LIST = (
    ("overview.py", "Overview", ":material/monitoring:"),
    ("tables.py", "Tables", ":material/table:"),
    ("taxonomy.py", "Taxonomy and seeds", ":material/category:"),
    ("generate.py", "Generate", ":material/auto_awesome:"),
    ("review.py", "Review", ":material/rule:"),
    ("answers.py", "Answers", ":material/fact_check:"),
    ("variants.py", "Variants", ":material/shuffle:"),
    ("annotators.py", "Annotators", ":material/badge:"),
    ("annotation.py", "Annotation", ":material/groups:"),
    ("agreement.py", "Agreement", ":material/handshake:"),
    ("releases.py", "Releases", ":material/inventory_2:"),
    ("evaluations.py", "Evaluations", ":material/leaderboard:"),
    ("health.py", "Health", ":material/health_and_safety:"),
)

st.set_page_config(page_title="tqaforge", layout="wide")
# Before someone signs in (when a login is required) the page list is hidden; the page asked for
# (a deep link) runs and its first call, require_login(), shows only the sign-in form (the form
# belongs to the page: a widget of this file before page.run() would lose its state when the page
# changes). Once signed in, the page list shows (and the page's require_login() adds Sign out).
hidden = login_required() and signed_in_as() is None
page = st.navigation([st.Page(PAGES / file, title=title, icon=icon, default=(i == 0)) for i, (file, title, icon) in enumerate(PAGE_LIST)],
                     position="hidden" if hidden else "sidebar")
page.run()

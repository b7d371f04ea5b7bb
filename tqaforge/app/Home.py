"""tqaforge app: every stage of the pipeline on a page (sidebar). Pages call the same library
functions as the CLI; none holds logic of its own.

Run with ``make run``, ``tqaforge app`` or ``TQAFORGE_WORKSPACE=DIR streamlit run tqaforge/app/Home.py``.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

PAGES = Path(__file__).parent / "pages"
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
page = st.navigation([st.Page(PAGES / file, title=title, icon=icon, default=(i == 0)) for i, (file, title, icon) in enumerate(PAGE_LIST)])
page.run()

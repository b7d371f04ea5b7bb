"""Hostile input to the app's displays (issue 29): page numbers no pager offers, a broken LLM
endpoint setting, library errors whose hints name CLI flags, and agreement results with nothing
defined. Each is a message or a sensible page, never a traceback or an empty chart."""

from __future__ import annotations

from pathlib import Path

import pytest
from app_demo import page_runner
from streamlit.testing.v1 import AppTest

from tqaforge import queries
from tqaforge.annotation.agreement import AgreementResult, PairwiseResult
from tqaforge.app.charts import by_statistic, heatmap_spec, undefined_pairs
from tqaforge.app.common import CLI_FLAG, app_text
from tqaforge.errors import ConfigError, TqaforgeError
from tqaforge.ingest import import_paths
from tqaforge.store import Workspace, init_workspace

DATA = Path(__file__).resolve().parents[1] / "data"
PAGES = Path(__file__).resolve().parents[1] / "tqaforge" / "app" / "pages"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    ws = init_workspace(tmp_path_factory.mktemp("displays") / "ws", name="hostile")
    import_paths(ws, [DATA / "tables", DATA / "sample"])
    return ws


@pytest.fixture
def page(workspace: Workspace, monkeypatch: pytest.MonkeyPatch):
    return page_runner(workspace.root, monkeypatch)


def _ids(at: AppTest) -> list[str]:
    return list(next(f.value for f in at.dataframe if "numeric share" in f.value.columns)["id"])


@pytest.mark.parametrize("number", [10**9, 0, -5, None])
def test_a_page_number_no_pager_offers_shows_a_real_page(workspace: Workspace, page, number) -> None:
    """A page number past the end (a stale session after the filters narrowed the listing), zero,
    negative or unset: the last page, or the first; never an empty page or an exception."""
    every = [t.id[:12] for t in queries.list_tables(workspace, limit=500)]
    assert len(every) > 50  # two pages at least
    page("tables.py")  # the environment set
    at = AppTest.from_file(str(PAGES / "tables.py"), default_timeout=60)
    if number is not None:
        at.session_state["tables-page"] = number  # before the first run: no widget holds it yet
    at.run()
    assert not at.exception, at.exception
    pages = -(-len(every) // 50)
    expected = every[(pages - 1) * 50:] if number == 10**9 else every[:50]
    assert _ids(at) == expected, [c.value for c in at.caption]
    assert any(c.value.startswith("showing ") for c in at.caption)


def test_a_page_past_the_end_after_the_filters_narrowed_shows_the_last_one(workspace: Workspace, page) -> None:
    at = page("tables.py")
    next(b for b in at.button if b.label == "next page").click().run()
    assert any(c.value.startswith("showing 51-") for c in at.caption)
    at.number_input[0].set_value(15).run()  # min rows: one page left
    narrowed = [t.id[:12] for t in queries.list_tables(workspace, limit=500, min_rows=15)]
    assert 0 < len(narrowed) <= 50 and _ids(at) == narrowed
    at.number_input[0].set_value(0).run()  # and back: the page number kept in range, page 1
    assert _ids(at) == [t.id[:12] for t in queries.list_tables(workspace, limit=50)]


def test_a_broken_endpoint_setting_is_a_message_naming_it(page, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "ftp://user:hunter2@example.org/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    at = AppTest.from_file(str(PAGES / "generate.py"), default_timeout=60).run()
    assert not at.exception, at.exception
    errors = " ".join(str(e.value) for e in at.error).replace("\\", "")
    assert "not an http:// or https:// URL" in errors and "hunter2" not in errors, errors
    assert next(b for b in at.button if b.label == "generate questions").disabled
    assert not next(b for b in at.button if b.label == "make probes").disabled  # the rest of the page works


def test_a_cli_hint_is_left_out_and_an_app_hint_shown() -> None:
    cli_only = TqaforgeError("no reviewer", hint="--annotator NAME (or TQAFORGE_ANNOTATOR)")
    assert app_text(cli_only) == "no reviewer"  # no advice that names a control the app lacks
    both = TqaforgeError("no reviewer", hint="--annotator NAME", app_hint="type your name in the name field")
    assert app_text(both) == "no reviewer\n  hint: type your name in the name field"
    plain = ConfigError("bad price", hint="add [llm.prices] to tqaforge.toml")
    assert app_text(plain) == str(plain)  # a hint naming no flag is the same in both
    assert not CLI_FLAG.search(app_text(cli_only) + app_text(both))


def test_agreement_with_nothing_defined_draws_no_empty_chart() -> None:
    """Every pair undefined: each cell labelled "n/a" with the reason; no bar chart of nothing."""
    undefined = AgreementResult("cohen_kappa", None, 0, 2, reason="no item labelled by both")
    pairwise = PairwiseResult("cohen_kappa", ("a", "b"), {("a", "b"): undefined}, None)
    spec = heatmap_spec(pairwise, "pairwise")
    assert {v["label"] for v in spec["data"]["values"]} == {"n/a"}
    assert undefined_pairs(pairwise) == "n/a: undefined for a and b (no item labelled by both)"
    assert by_statistic({"a": undefined}) == {}

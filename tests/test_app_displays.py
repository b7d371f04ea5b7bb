"""The app's displays that misled (issue 29, item 2), each checked on the demo workspace
(``tqaforge demo``: 54 tables, 16 imported labels, LLM calls that cost nothing) with AppTest:
pagers, the Generate page's words, the review with its table, agreement and overview charts,
the variants' serialization, and no CLI flag named anywhere in the app."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from app_demo import page_runner
from streamlit.testing.v1 import AppTest

from tqaforge import queries
from tqaforge.annotation.agreement import AgreementResult, PairwiseResult
from tqaforge.annotation.review import review_queue
from tqaforge.app.charts import (
    UNDEFINED_FILL,
    UNDEFINED_TEXT,
    VALUE_FORMAT,
    agreement_domain,
    bar_spec,
    by_statistic,
    cumulative_cost_spec,
    heatmap_spec,
    undefined_pairs,
)
from tqaforge.app.common import CLI_FLAG, usd
from tqaforge.demo import build_demo
from tqaforge.store import Workspace, open_workspace

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted(p.name for p in (REPO / "tqaforge" / "app" / "pages").glob("*.py"))


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    root = tmp_path_factory.mktemp("demo") / "ws"
    build_demo(root, REPO / "data")
    return open_workspace(root)


@pytest.fixture
def page(demo: Workspace, monkeypatch: pytest.MonkeyPatch):
    return page_runner(demo.root, monkeypatch)


def shown_text(at: AppTest) -> str:
    """Every text the page shows: Markdown, captions, alerts, code, titles, metrics, expander
    and widget labels, help texts, placeholders and the options of select boxes."""
    parts: list[str] = []
    for kind in ("markdown", "caption", "info", "warning", "success", "error", "code", "title", "subheader", "header"):
        parts += [str(e.value) for e in getattr(at, kind)]
    parts += [f"{m.label} {m.value}" for m in at.metric] + [e.label for e in at.expander] + [t.label for t in at.tabs]
    for kind in ("button", "text_input", "number_input", "checkbox", "selectbox", "multiselect", "select_slider",
                 "slider", "text_area"):
        for widget in getattr(at, kind):
            parts += [widget.label, str(widget.help or ""), str(getattr(widget, "placeholder", "") or "")]
            parts += [str(o) for o in getattr(widget, "options", [])]
    return "\n".join(parts)


def charts(at: AppTest) -> list[dict[str, Any]]:
    """The Vega-Lite specs the page drew, with their data back in (Streamlit sends it as Arrow)."""
    import pyarrow as pa

    specs = []
    for chart in at.get("vega_lite_chart"):
        spec = json.loads(chart.proto.spec)
        rows = pa.ipc.open_stream(chart.proto.data.data).read_all().to_pylist() if chart.proto.data.data else []
        specs.append({**spec, "data": {"values": rows}})
    return specs


def tables_frame(at: AppTest):
    return next(f.value for f in at.dataframe if "numeric share" in f.value.columns)


def test_the_demos_tables_51_to_54_are_reached_with_the_pager(demo: Workspace, page) -> None:
    everything = [t.id[:12] for t in queries.list_tables(demo, limit=100)]
    assert len(everything) == 54
    at = page("tables.py")
    first = list(tables_frame(at)["id"])
    assert first == everything[:50] and "showing 1-50 of 54 tables" in shown_text(at)  # control: page 1 stops at 50
    assert not any(t in first for t in everything[50:])
    next(b for b in at.button if b.label == "next page").click().run()
    assert list(tables_frame(at)["id"]) == everything[50:]
    assert "showing 51-54 of 54 tables" in shown_text(at)
    assert next(b for b in at.button if b.label == "next page").disabled
    next(b for b in at.button if b.label == "previous page").click().run()
    assert list(tables_frame(at)["id"]) == everything[:50]
    next(n for n in at.number_input if n.label.startswith("page")).set_value(2).run()
    assert list(tables_frame(at)["id"]) == everything[50:]
    # A filter that narrows the listing to one page shows that page, not an empty second one.
    at.number_input[0].set_value(15).run()
    narrowed = tables_frame(at)
    assert 0 < len(narrowed) < 50 and (narrowed["rows"] >= 15).all()


def test_review_shows_each_proposed_question_with_its_table(demo: Workspace, page) -> None:
    at = page("review.py")
    queue = review_queue(demo, limit=20)
    assert queue.items
    frames = [f.value for f in at.dataframe]
    assert len(frames) == len(queue.items)
    for question, frame in zip(queue.items, frames):
        view = queries.show_table(demo, question.table_id).view
        assert [str(c) for c in frame.columns] == [h or f"({i})" for i, h in enumerate(view.header)]
        assert frame.values.tolist() == view.rows


def test_generate_says_only_the_model_is_missing_when_the_endpoint_is_set(page, monkeypatch: pytest.MonkeyPatch) -> None:
    at = page("generate.py")  # control: nothing set says the endpoint is missing
    assert "No LLM endpoint is configured" in shown_text(at)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    at = AppTest.from_file(str(REPO / "tqaforge" / "app" / "pages" / "generate.py"), default_timeout=60).run()
    text = shown_text(at).replace("\\", "")  # Markdown escapes
    assert "No LLM endpoint" not in text and "model** field" in text and "127.0.0.1:9" in text, text
    assert next(b for b in at.button if b.label == "generate questions").disabled
    at.text_input[0].set_value("a-model-nobody-prices").run()  # the field it names: ready
    assert next(b for b in at.button if b.label == "generate questions").disabled is False
    assert "no known price" in shown_text(at)
    # An unpriced model with a budget is refused on the page, before anything is clicked.
    at.number_input[0].set_value(2.0).run()
    assert next(b for b in at.button if b.label == "generate questions").disabled
    assert "a budget cannot stop it" in shown_text(at).replace("\\", "")


def test_no_page_names_a_cli_flag(page, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every page of the demo, rendered, with and without an endpoint; and the errors a page shows
    in its own words. Control: the detector sees the CLI's words the pages showed before."""
    assert CLI_FLAG.search("showing 1-50 of 54 tables (next: --offset 50)")
    assert CLI_FLAG.search("set [llm] model in tqaforge.toml, or pass --model")
    assert not CLI_FLAG.search("a budget of 0 (none) · 2026-11-26 · --- · a-b--c")
    for name in PAGES:
        text = shown_text(page(name))
        assert not CLI_FLAG.findall(text), (name, CLI_FLAG.findall(text))
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    text = shown_text(page("generate.py"))
    assert not CLI_FLAG.findall(text), CLI_FLAG.findall(text)
    # Errors a library raises with a CLI hint: the app's words instead. A selection that mixes
    # "accepted" and ids (refused before any request: the endpoint is a closed port)...
    at = page("generate.py")
    at.text_input[0].set_value("a-model").run()
    next(t for t in at.text_input if t.label == "questions").set_value("accepted, 0a1b")
    next(b for b in at.button if b.label == "answer, vote and route").click().run()
    errors = [str(e.value).replace("\\", "") for e in at.error]
    assert errors and "not a mix" in errors[0] and "in the questions field" in errors[0], errors
    assert not CLI_FLAG.findall("\n".join(errors)), errors
    # ...and an unknown reviewer.
    at = page("review.py")
    at.text_input[0].set_value("somebody-new").run()
    next(b for b in at.button if b.key and b.key.startswith("do-accept-")).click().run()
    errors = [str(e.value) for e in at.error]
    assert errors and "unknown annotator" in errors[0] and "this is a new annotator" in errors[0].replace("\\", "")
    assert not CLI_FLAG.findall("\n".join(errors)), errors


def _chart_warnings(run: Any) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run()
    return [str(w.message) for w in caught if "vegalite" in str(w.message) or "empty" in str(w.message)]


def test_the_warning_check_sees_an_empty_series_drawn() -> None:
    """Control for the pages' checks below: the warning Altair gave for the page's empty Series."""
    script = "import streamlit as st, pandas as pd\nst.bar_chart(pd.Series({}, name='x'))\n"
    assert _chart_warnings(lambda: AppTest.from_string(script).run())


def test_agreement_counts_imported_labels_shows_intervals_and_draws_nothing_empty(page) -> None:
    shown: list[AppTest] = []
    assert not _chart_warnings(lambda: shown.append(page("agreement.py")))
    at = shown[0]
    text = shown_text(at).replace("\\", "")
    assert "16 imported labels (relevant_cells: 16) are left out" in text  # the 16 the Overview counts
    assert "No annotations yet" not in text
    assert at.select_slider[0].value == 200
    overall = next(f.value for f in at.dataframe if "statistic" in f.value.columns)
    interval = next(c for c in overall.columns if "interval" in c.lower() or "ci" in c.lower())
    assert any(v not in ("—", "", None) for v in overall[interval]), overall  # intervals, not "—"
    specs = charts(at)
    assert any(spec.get("mark") == "bar" for spec in specs) and any("layer" in spec for spec in specs)
    for spec in specs:
        assert spec["data"]["values"], spec.get("title")  # never an empty chart
        y = spec.get("encoding", {}).get("y", {})
        if spec.get("mark") == "bar":  # one statistic per chart, on its axis and in its title, on a real scale
            assert y["title"] != "agreement" and spec["title"].endswith(y["title"]), spec
            assert y["scale"]["domain"][1] == 1 and y["scale"]["domain"][0] in (-1, 0), spec


def test_the_heatmap_draws_an_undefined_pair_visibly() -> None:
    """A pair with no value is an outlined light "n/a" cell named in a caption, not a gap on the
    page's background (dark in a dark theme): it used to be left out of the data."""
    defined = AgreementResult("cohen_kappa", 0.5, 6, 2)
    undefined = AgreementResult("cohen_kappa", None, 1, 2, reason="one shared item")
    pairwise = PairwiseResult("cohen_kappa", ("ana", "ben", "cy"),
                              {("ana", "ben"): defined, ("ana", "cy"): undefined, ("ben", "cy"): undefined}, 0.5)
    spec = heatmap_spec(pairwise, "pairwise cohen_kappa")
    cells = {(v["a"], v["b"]): v for v in spec["data"]["values"]}
    assert cells[("cy", "ana")]["label"] == UNDEFINED_TEXT and cells[("ana", "ben")]["label"] == "0.50"
    blank = next(layer for layer in spec["layer"] if layer["transform"][0]["filter"] == "datum.value == null")
    assert blank["mark"]["color"] == UNDEFINED_FILL and blank["mark"]["stroke"]
    text = spec["layer"][-1]
    assert text["mark"]["type"] == "text"
    assert text["encoding"]["text"]["field"] == "label"  # "n/a" written in every undefined cell
    assert undefined_pairs(pairwise) == "n/a: undefined for ana and cy, ben and cy (one shared item)"
    assert undefined_pairs(PairwiseResult("cohen_kappa", ("ana", "ben"), {("ana", "ben"): defined}, 0.5)) is None


def test_charts_of_several_statistics_never_share_an_axis() -> None:
    results = {"Counting": AgreementResult("fleiss_kappa", 0.4, 3, 2), "Ranking": AgreementResult("percent_agreement", 1.0, 3, 2),
               "Other": AgreementResult("fleiss_kappa", None, 1, 2, reason="one item")}
    assert by_statistic(results) == {"fleiss_kappa": {"Counting": 0.4}, "percent_agreement": {"Ranking": 1.0}}


def test_overview_funnel_in_pipeline_order_and_no_empty_spend_chart(demo: Workspace, page) -> None:
    shown: list[AppTest] = []
    assert not _chart_warnings(lambda: shown.append(page("overview.py")))
    at = shown[0]
    stages = [s for s, _ in queries.funnel(demo).stages]
    assert stages != sorted(stages)  # control: alphabetical order would differ
    funnel = next(s for s in charts(at) if s.get("title") == "records per stage")
    assert funnel["encoding"]["y"]["sort"] == stages
    assert [v["name"] for v in funnel["data"]["values"]] == stages
    assert queries.cost_over_time(demo) and not any(c for _, c in queries.cost_over_time(demo))  # calls, all free
    text = shown_text(at)
    assert "nothing spent yet" in text and "0.000000" not in text
    assert not any("cumulative cost (USD)" in json.dumps(s) for s in charts(at))
    assert dict((m.label, m.value) for m in at.metric)["LLM cost so far (USD)"] == "0"


def test_an_agreement_of_zero_is_drawn_on_a_real_axis() -> None:
    """A lone value of 0 made Vega-Lite an axis reading "0.000000" with no bar: the agreement
    charts span 0 to 1, or -1 to 1 when a value is negative."""
    assert agreement_domain({"a": 0.0}) == (0.0, 1.0) and agreement_domain({"a": 0.3, "b": -0.2}) == (-1.0, 1.0)
    spec = bar_spec({"a": 0.0}, "per subtype: alpha", "alpha", domain=agreement_domain({"a": 0.0}))
    assert spec["encoding"]["y"]["scale"]["domain"] == [0.0, 1.0] and spec["encoding"]["y"]["axis"]["format"] == VALUE_FORMAT


def test_the_cost_chart_draws_the_running_total_per_day() -> None:
    spec = cumulative_cost_spec([("2026-11-01", 0.25), ("2026-11-02", 0.0), ("2026-11-05", 1.5)])
    assert [(p["day"], p["cumulative cost (USD)"]) for p in spec["data"]["values"]] == [
        ("2026-11-01", 0.25), ("2026-11-02", 0.25), ("2026-11-05", 1.75)]
    assert cumulative_cost_spec([])["data"]["values"] == []


def test_costs_show_with_sensible_precision() -> None:
    assert [usd(x) for x in (0, 0.06, 1234.5, 0.0012, 0.00001234)] == ["0", "0.06", "1,234.50", "0.0012", "1.2e-05"]


def _table_columns(at: AppTest) -> list[Any]:
    return [c for c in at.columns if len(c.dataframe)]


def test_variants_serialization_wraps_and_wide_tables_are_not_cut_off(demo: Workspace, page) -> None:
    from tqaforge.variants.view import show_variant

    at = page("variants.py")
    assert at.code, "no serialization shown"
    assert all(c.proto.wrap_lines for c in at.code)
    view = show_variant(demo, at.selectbox[1].value)
    widest = max(len(view.original.header), len(view.perturbed.header) if view.perturbed else 0)
    assert widest > 4  # the demo's first variant: a table too wide for half the page
    side_by_side = next(t for t in at.toggle if t.label == "side by side")
    assert side_by_side.value is False and not _table_columns(at)  # one above the other, each the page's width
    assert len(at.dataframe) == 2
    side_by_side.set_value(True).run()
    assert len(_table_columns(at)) == 2 and len(at.dataframe) == 2  # the reader's choice: side by side
    # A table that fits in half the page starts side by side.
    narrow = next(v for v in queries.list_variants(demo, limit=500)
                  if v.status != "skipped" and len(show_variant(demo, v.id).original.header) <= 4)
    at = page("variants.py")
    at.selectbox[0].set_value(narrow.perturbation).run()
    while not any(o.startswith(narrow.id[:12]) for o in at.selectbox[1].options):  # options as shown
        next(b for b in at.button if b.label == "next page").click().run()
    at.selectbox[1].set_value(narrow.id).run()
    assert next(t for t in at.toggle if t.label == "side by side").value is True and len(_table_columns(at)) == 2

"""Hostile input to format understanding (issue 27, item 4): predictions that cover one format
or only perturbed tables, a system that skips items, a damaged or forged scores.json, names with
terminal controls. Each ends in no view (rather than a wrong one), a view over the same items, or
entries skipped; never a crash."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import freeze_sample_release
from test_evaluate_formats import FORMATS, _configurations

from tqaforge.evaluate.formats import FormatScore, FormatUnderstanding, read_format_understanding
from tqaforge.evaluate.harness import EvaluateOptions, evaluate, saved_evaluations

pytestmark = pytest.mark.hostile


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return freeze_sample_release(tmp_path_factory.mktemp("formats"), serializations=FORMATS,
                                 perturbations=("transpose",), without_subtypes=("ChartGeneration",))


def _score(release: Path, tmp_path: Path, keep: Any, right: Any = lambda r: True) -> Any:
    rows = [r for r in _configurations(release) if keep(r)]
    preds = [{"id": r["id"], "model": "m",
              "prediction": f"Final Answer: {', '.join(r['answer']) if right(r) else 'zzqx'}"} for r in rows]
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in preds))
    return evaluate(EvaluateOptions(release=release, predictions=path, out=tmp_path / "out"))


def test_one_format_only_gives_no_view_and_no_plot(release: Path, tmp_path: Path) -> None:
    """A model run in json alone has no best or worst format: no view, no by_format.png."""
    report = _score(release, tmp_path, lambda r: r["serialization"] == "json")
    assert report.formats == [] and "Format understanding" not in "\n".join(report.lines())
    assert not (tmp_path / "out" / "by_format.png").exists()
    assert report.torr  # ToRR still sees json/none and json/transpose


def test_perturbed_tables_only_give_no_view(release: Path, tmp_path: Path) -> None:
    """Predictions for the transposed tables only: the format is not the one thing that varies there."""
    report = _score(release, tmp_path, lambda r: r["perturbation"] == "transpose")
    assert report.formats == []


def test_skipped_items_count_as_wrong_in_their_format(release: Path, tmp_path: Path) -> None:
    """A system that answers only half the markdown items does not get a markdown score over its
    chosen half: the missing rows are unanswered, and every format is scored on the same items."""
    rows = _configurations(release)
    items = sorted({r["item_id"] for r in rows})
    kept = set(items[: len(items) // 2])
    report = _score(release, tmp_path, lambda r: r["perturbation"] == "none" and (r["serialization"] != "markdown"
                                                                                  or r["item_id"] in kept))
    [fu] = report.formats
    assert {f.serialization: (f.items, f.score) for f in fu.formats} == {
        "json": (34, 1.0), "csv": (34, 1.0), "markdown": (34, 0.5)}
    assert fu.worst == ("markdown",) and fu.spread == 0.5 and fu.items_varying == 17


def test_a_damaged_or_forged_saved_summary_is_skipped(tmp_path: Path) -> None:
    """scores.json is read back by the app from disk: entries that are not a summary (wrong types,
    a score of 7, NaN, negative counts, a list instead of an object) are skipped, the good one kept."""
    good = FormatUnderstanding("m/DP", 2, (FormatScore("json", 2, 1.0), FormatScore("csv", 2, 0.0)), ("json",),
                               ("csv",), 1.0, 1.0, 2)
    bad: list[Any] = [
        "json", [1, 2], {}, {**good.as_dict(), "spread": 7}, {**good.as_dict(), "item_range": float("nan")},
        {**good.as_dict(), "items": -1}, {**good.as_dict(), "items": True}, {**good.as_dict(), "formats": 5},
        {**good.as_dict(), "formats": [{"serialization": "json", "items": "2", "score": 1.0}]},
        {**good.as_dict(), "best": None},
    ]
    saved = tmp_path / "evaluations" / "rel" / "preds" / "scores.json"
    saved.parent.mkdir(parents=True)
    saved.write_text(json.dumps({"matched": 1, "rows": [], "formats": [*bad, good.as_dict()]}, allow_nan=True))
    [evaluation] = saved_evaluations(tmp_path / "evaluations")
    assert evaluation.formats() == [good]
    assert read_format_understanding({"formats": {"not": "a list"}}) == []
    assert read_format_understanding({}) == []


def test_names_with_terminal_controls_are_shown_inert() -> None:
    """A serialization or system name from a forged release or scores.json reaches the terminal
    and the app escaped: no screen clearing, no line of its own."""
    fu = FormatUnderstanding("m\x1b[2J/DP", 1, (FormatScore("json\nfake line", 1, 1.0), FormatScore("csv", 1, 0.0)),
                             ("json\nfake line",), ("csv",), 1.0, 1.0, 1)
    text = "\n".join(fu.lines())
    assert "\x1b" not in text and len(text.splitlines()) == len(fu.lines()) == 5

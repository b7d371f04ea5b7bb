"""Format understanding (issue 27, item 4): one model's scores on the same items in each
serialization, on a real release of TableBench's shipped sample with the configurations subset,
against a predictions file with a known pattern; printed by `tqaforge evaluate`, drawn in
by_format.png, saved in scores.json and shown again by the app's Releases page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from app_demo import page_runner
from conftest import freeze_sample_release
from typer.testing import CliRunner

from tqaforge.cli import app
from tqaforge.evaluate.harness import EvaluateOptions, evaluate, saved_evaluations

FORMATS = ("json", "csv", "markdown")


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample without its two chart items (their answers are code, run in the sandbox), in
    json, csv and markdown, each item as it is and transposed."""
    return freeze_sample_release(tmp_path_factory.mktemp("formats"), serializations=FORMATS,
                                 perturbations=("transpose",), without_subtypes=("ChartGeneration",))


def _configurations(release: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (release / "data" / "configurations.jsonl").read_text().splitlines()]


def _known_pattern(release: Path, path: Path) -> tuple[Path, list[str]]:
    """Model "m": right on every json item, wrong on every csv item, right on the first half of
    the items (by id) in markdown; on the transposed tables the other way round, which the view
    must ignore. Model "steady": right everywhere. The item ids, sorted."""
    rows = _configurations(release)
    items = sorted({r["item_id"] for r in rows})
    half = set(items[: len(items) // 2])
    preds = []
    for r in rows:
        right = {"json": True, "csv": False, "markdown": r["item_id"] in half}[r["serialization"]]
        if r["perturbation"] != "none":
            right = not right
        answer = ", ".join(r["answer"]) if right else "zzqx"
        preds.append({"id": r["id"], "model": "m", "prediction": f"Final Answer: {answer}"})
        preds.append({"id": r["id"], "model": "steady", "prediction": f"Final Answer: {', '.join(r['answer'])}"})
    path.write_text("".join(json.dumps(p) + "\n" for p in preds))
    return path, items


def test_per_format_scores_of_a_known_pattern(release: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _configurations(release)
    assert {(r["serialization"], r["perturbation"]) for r in rows} == {(f, p) for f in FORMATS for p in ("none", "transpose")}
    predictions, items = _known_pattern(release, tmp_path / "preds.jsonl")
    n = len(items)
    assert n == 34 and n % 2 == 0  # the sample's 36 items without its 2 charts: half of them is exact
    out = release.parent / "ws" / "evaluations" / release.name / "preds"
    report = evaluate(EvaluateOptions(release=release, predictions=predictions, out=out))

    by_system = {fu.system: fu for fu in report.formats}
    assert set(by_system) == {"m/DP", "steady/DP"}
    m = by_system["m/DP"]
    assert m.items == n and m.perturbation == "none"
    assert [(f.serialization, f.items, f.score) for f in m.formats] == [("json", n, 1.0), ("markdown", n, 0.5), ("csv", n, 0.0)]
    assert (m.best, m.worst, m.spread) == (("json",), ("csv",), 1.0)
    assert (m.item_range, m.items_varying) == (1.0, n)  # every item: right in json, wrong in csv
    steady = by_system["steady/DP"]  # a tie everywhere: every format is both the best and the worst
    assert [f.score for f in steady.formats] == [1.0, 1.0, 1.0]
    assert steady.best == steady.worst == ("csv", "json", "markdown") and steady.spread == 0.0
    assert (steady.item_range, steady.items_varying) == (0.0, 0)

    # The terminal: a table per system, then best, worst and spread.
    text = "\n".join(report.lines())
    assert "Format understanding (the configurations without perturbation" in text
    assert f"    json             {n:>6}   1.000  best" in text and f"    csv              {n:>6}   0.000  worst" in text
    assert f"best json, worst csv: spread 1.000; mean per-item range 1.000 ({n} of {n} items change" in text
    # The plot beside scores.json, and the summary read back from it, as the app reads it.
    plot = out / "by_format.png"
    assert str(plot) in report.outputs and plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    [saved] = saved_evaluations(out.parent.parent)
    assert saved.formats() == report.formats and plot in saved.plots

    # The app's Releases page shows the same lines.
    at = page_runner(release.parent / "ws", monkeypatch)("releases.py")
    shown = "\n".join(c.value for c in at.code)
    assert "\n".join(m.lines()) in shown and "\n".join(steady.lines()) in shown


def test_the_evaluate_command_prints_the_format_table(release: Path, tmp_path: Path) -> None:
    predictions, items = _known_pattern(release, tmp_path / "preds.jsonl")
    result = CliRunner().invoke(app, ["evaluate", "--release", str(release), "--predictions", str(predictions),
                                      "--out", str(tmp_path / "out"), "--no-plots"])
    assert result.exit_code == 0, result.output
    printed = result.output.splitlines()
    start = printed.index("  m/DP: 34 items in each of 3 formats")
    assert printed[start:start + 6] == [
        "  m/DP: 34 items in each of 3 formats",
        "    format            items   score",
        "    json                 34   1.000  best",
        "    markdown             34   0.500",
        "    csv                  34   0.000  worst",
        "    best json, worst csv: spread 1.000; mean per-item range 1.000 (34 of 34 items change with the format)",
    ]
    saved = json.loads((tmp_path / "out" / "scores.json").read_text())
    assert [(f["serialization"], f["score"]) for f in saved["formats"][0]["formats"]] == [("json", 1.0), ("markdown", 0.5), ("csv", 0.0)]

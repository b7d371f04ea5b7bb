"""Benchmark health (tqaforge.health, issue 28) on a simulated benchmark with planted defects
(tests/health_sim.py): ten items with wrong gold, items solved by all and by none, two systems
whose true difference is below the detectable one; the per-item scores evaluate keeps; the
release gate."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import pytest
from prerequisites import unavailable
from typer.testing import CliRunner

from tests import health_sim as sim
from tqaforge.evaluate.item_file import ITEMS_FILE, open_item_scores, read_item_scores, saved_system_scores
from tqaforge.health import HEALTH_JSON, HEALTH_MD, HealthOptions, Thresholds, UnhealthyRelease, release_gate, run, write_report


@pytest.fixture(scope="module")
def simulation(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[Path]]:
    root = tmp_path_factory.mktemp("health")
    ws, evaluations = sim.build_simulation(root)
    return root, ws, evaluations


def _options(root: Path, evaluations: list[Path], **kw: object) -> HealthOptions:
    return HealthOptions(release=root / "candidate", evaluations=tuple(evaluations), n_resamples=500, **kw)  # type: ignore[arg-type]


def _row_ids(release: Path) -> dict[int, str]:
    """Simulated item number -> the release's row id (the row carries the source id)."""
    from tqaforge.evaluate.predictions import load_release

    by_source = {r.source_id: r.id for r in load_release(release).references}
    return {i: by_source[sim.item_id(i)] for i in range(sim.N_ITEMS)}


def test_evaluate_keeps_every_row_score(simulation: tuple[Path, Path, list[Path]]) -> None:
    root, _, evaluations = simulation
    truth = sim.outcomes()
    ids = _row_ids(root / "candidate")
    header = open_item_scores(evaluations[0])
    assert header.release == "sim 0.9.0" and header.path.name == ITEMS_FILE
    rows = list(read_item_scores(evaluations[0]))
    assert len(rows) == header.rows == 5 * sim.N_ITEMS
    scores = saved_system_scores(rows, binary=True)
    assert sorted(scores) == sorted(f"{n}/DP" for n in sorted(sim.ABILITIES)[0::3])
    for system, per in scores.items():  # the rule that made the predictions, read back item by item
        name = system.split("/")[0]
        assert per == {ids[i]: float(truth[name][i]) for i in range(sim.N_ITEMS)}
    scores_json = json.loads((evaluations[0] / "scores.json").read_text())
    assert scores_json["release"] == "sim 0.9.0"


def test_report_finds_every_planted_defect(simulation: tuple[Path, Path, list[Path]]) -> None:
    """One benchmark, one report: the four kinds of defect the simulation plants (wrong gold, five
    duplicated tables, a subtype a constant answers, two systems too close to tell apart) are each
    found, and at most 2% of the clean items are flagged by any section."""
    root, _, evaluations = simulation
    ids = _row_ids(root / "candidate")
    number = {row: i for i, row in ids.items()}
    report = run(_options(root, evaluations))
    assert report.analysis is not None
    flags = {s.item_id: set(s.flags) for s in report.analysis.items}
    assert {i for i in range(sim.N_ITEMS) if "suspect_gold" in flags[ids[i]]} == set(sim.WRONG_GOLD)
    assert {i for i in range(sim.N_ITEMS) if "solved_by_all" in flags[ids[i]]} == set(sim.SOLVED_BY_ALL)
    assert {i for i in range(sim.N_ITEMS) if "solved_by_none" in flags[ids[i]]} == set(sim.SOLVED_BY_NONE)
    # The adjudication requests name exactly the wrong-gold items, with the strong systems failing.
    items = next(s for s in report.sections if s.name == "items")
    requests = items.data["adjudication_requests"]
    assert {r["item_id"] for r in requests} == {ids[i] for i in sim.WRONG_GOLD}
    assert all("sys11/DP" in r["wrong"] or "sys10/DP" in r["wrong"] for r in requests)
    # The five duplicated tables: each pair found as a near copy (13 of 15 distinct values shared), both ways.
    leakage = next(s for s in report.sections if s.name == "leakage")
    pairs = {(number[d.items[0]], number[d.other_items[0]]) for d in leakage.source.tables}
    assert pairs == set(sim.DUPLICATED_TABLES.items()) | {(b, a) for a, b in sim.DUPLICATED_TABLES.items()}
    assert {d.kind for d in leakage.source.tables} == {"near"} and not leakage.source.questions
    assert all(d.jaccard == pytest.approx(13 / 15) for d in leakage.source.tables)
    # The constant subtype: "Yes" scores 17 of 20; no other subtype is flagged.
    bias = next(s for s in report.sections if s.name == "bias")
    assert bias.source.constant_flagged == [sim.CONSTANT_SUBTYPE] and not bias.source.position_flagged
    constant = next(t for t in bias.source.subtypes if t.subtype == sim.CONSTANT_SUBTYPE)
    assert constant.best_constant == "Yes" and constant.best_score == pytest.approx(17 / 20)
    # The twins: their observed difference is below the minimum detectable one, and the report says so.
    differences = next(s for s in report.sections if s.name == "differences")
    pair = next(p for p in differences.data["systems"]["pairs"] if {p["first"], p["second"]} == set(sim.TWINS))
    assert pair["below_mdd"] is True and not pair["significant"] and abs(pair["difference"]) < pair["mdd"]
    assert "twin-a/DP vs twin-b/DP" in "\n".join(differences.body)
    # The strongest and the weakest systems are told apart.
    extremes = next(p for p in differences.data["systems"]["pairs"] if {p["first"], p["second"]} == {"sys00/DP", "sys11/DP"})
    assert extremes["significant"]
    # Item by item over every section: each planted item flagged for its own reason, few clean ones.
    flagged = {number[item]: set(why) for item, why in report.flagged_items().items()}
    assert {i for i, why in flagged.items() if "table_duplicate" in why} == set(sim.DUPLICATED_TABLES) | set(sim.DUPLICATED_TABLES.values())
    assert {i for i, why in flagged.items() if "constant_answer" in why} == set(sim.CONSTANT_ITEMS)
    assert sim.PLANTED <= set(flagged)
    clean = [i for i in range(sim.N_ITEMS) if i not in sim.PLANTED]
    assert len(clean) == 102 and sum(i in flagged for i in clean) <= 0.02 * len(clean)
    assert report.flagged_line() == (f"items flagged: {len(flagged)} of 150 base items (suspect_gold 10, solved_by_all 4, "
                                     f"solved_by_none 4, table_duplicate 10, constant_answer 20)")
    assert report.lines()[1] == "  " + report.flagged_line()
    # The default threshold (5% suspect gold) fails: 10 of 150; duplicates and bias are reported, not checked.
    assert not report.passed
    (failed,) = report.failed
    assert failed.name == "suspect_gold" and failed.value == pytest.approx(10 / 150, abs=1e-6)
    # One rule: a section's text states findings, never a verdict of its own. (The bias and leakage
    # sections once carried built-in gates: "check bias.constant_answer_subtypes: 1 (at most 0)
    # FAILED" stood in a report that checked no bias and passed it.)
    verdicts = [line for section in report.sections for line in section.body if "FAILED" in line or "check " in line]
    assert not verdicts, verdicts


def test_the_checks_of_duplicates_and_bias_fail_on_the_planted_defects(simulation: tuple[Path, Path, list[Path]]) -> None:
    """The same report with the leakage and bias thresholds set: the duplicated tables' items are not
    duplicated items (their questions differ), so that check passes; the constant subtype fails the
    bias check (1 of 3 subtypes)."""
    root, _, evaluations = simulation
    thresholds = Thresholds.parse("max_duplicated=0.02, max_biased_subtypes=0.2, max_suspect_gold=none")
    report = run(_options(root, evaluations, thresholds=thresholds))
    results = {c.name: (c.passed, c.detail) for c in report.checks}
    assert results["duplicated"] == (True, "0 of 150 items whose question and table recur in another item")
    assert results["biased_subtypes"][0] is False and results["biased_subtypes"][1].startswith("1 of 3 subtypes")


def test_report_files_are_written_and_deterministic(simulation: tuple[Path, Path, list[Path]], tmp_path: Path) -> None:
    root, _, evaluations = simulation
    first = run(_options(root, evaluations))
    written = write_report(first, tmp_path / "a")
    assert {Path(p).name for p in written} == {HEALTH_JSON, HEALTH_MD, "difficulty.png", "discrimination.png"}
    assert all((tmp_path / "a" / n).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for n in ("difficulty.png", "discrimination.png"))
    data = json.loads((tmp_path / "a" / HEALTH_JSON).read_text())
    assert data["passed"] is False and [c["name"] for c in data["checks"]] == ["suspect_gold"]
    assert [s["name"] for s in data["sections"]] == ["items", "differences", "leakage", "bias"]
    md = (tmp_path / "a" / HEALTH_MD).read_text()
    assert md.startswith("# Health of release sim 0.9.0") and "| suspect_gold | items | 6.67% | 5.00% | FAIL |" in md
    write_report(run(_options(root, evaluations)), tmp_path / "b", plots=False)
    for name in (HEALTH_JSON, HEALTH_MD):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert not list((tmp_path / "a").glob(".*"))  # no temporary file left behind


def test_gate_refuses_then_passes_and_the_release_carries_the_report(simulation: tuple[Path, Path, list[Path]]) -> None:
    from tqaforge.release.build import ReleaseOptions, build_release
    from tqaforge.release.verify import verify_release
    from tqaforge.store import open_workspace

    root, ws_dir, evaluations = simulation
    health = HealthOptions(release=Path("."), evaluations=tuple(evaluations), n_resamples=500, plots=False)
    out = root / "release"
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("TQAFORGE_DATABASE_URL", raising=False)
        ws = open_workspace(ws_dir)
        try:
            options = ReleaseOptions(version="1.0.0", out=out, subsets=("base",), attach=release_gate(health))
            with pytest.raises(UnhealthyRelease, match=r"suspect_gold: 6\.67% \(limit 5\.00%\); 10 of 150"):
                build_release(ws, options)
            assert not out.exists() and not list(root.glob(".release.*"))  # nothing frozen, nothing left
            relaxed = replace(health, thresholds=Thresholds.parse("max_suspect_gold=0.1"))
            summary = build_release(ws, replace(options, attach=release_gate(relaxed)))
            assert not summary.identical_to_existing
            again = build_release(ws, replace(options, attach=release_gate(relaxed)))
            assert again.identical_to_existing  # byte-identical rebuild, health files included
        finally:
            ws.close()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["attached"] == [HEALTH_JSON, HEALTH_MD]
    assert {HEALTH_JSON, HEALTH_MD} <= set(manifest["files"])
    assert verify_release(out).ok
    carried = json.loads((out / HEALTH_JSON).read_text())
    assert carried["passed"] is True and carried["release"] == "sim 1.0.0"
    assert carried["checks"][0]["limit"] == 0.1


def test_cli_health_and_release_gate(simulation: tuple[Path, Path, list[Path]], tmp_path: Path) -> None:
    from tqaforge.cli import app

    root, ws_dir, evaluations = simulation
    evals = [a for e in evaluations for a in ("--evaluations", str(e))]
    runner = CliRunner()
    result = runner.invoke(app, ["health", "--release", str(root / "candidate"), *evals, "--out", str(tmp_path / "h"), "--no-plots"])
    assert result.exit_code == 1, result.output
    assert "UNHEALTHY" in result.output and "suspect gold: 10" in result.output
    assert (tmp_path / "h" / HEALTH_JSON).exists() and not (tmp_path / "h" / "difficulty.png").exists()
    result = runner.invoke(app, ["health", "--release", str(root / "candidate"), *evals, "--out", str(tmp_path / "h"),
                                 "--max-suspect-gold", "0.1", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["passed"] is True
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("TQAFORGE_DATABASE_URL", raising=False)
        args = ["--workspace", str(ws_dir), "release", "build", "--version", "1.1.0", "--subsets", "base",
                "--out", str(tmp_path / "rel"), "--require-health", *evals]
        result = runner.invoke(app, args)
        assert result.exit_code == 1 and "suspect_gold" in result.output and "not frozen" in result.output
        assert not (tmp_path / "rel").exists()
        result = runner.invoke(app, [*args, "--health-thresholds", "max_suspect_gold=0.08"])
        assert result.exit_code == 0, result.output
    assert (tmp_path / "rel" / HEALTH_MD).read_text().startswith("# Health of release sim 1.1.0")


def test_configurations_compared_per_system(tmp_path_factory: pytest.TempPathFactory) -> None:
    """One system across serializations: "m" right on every markdown item and wrong on every csv
    one, "steady" right everywhere; the section compares each configuration with csv/none (the first
    unperturbed one), McNemar's p checked against scipy's binomial test."""
    from scipy.stats import binomtest

    from tests.conftest import freeze_sample_release
    from tqaforge.evaluate.harness import EvaluateOptions, evaluate

    release = freeze_sample_release(tmp_path_factory.mktemp("health-formats"), serializations=("csv", "markdown"),
                                    without_subtypes=("ChartGeneration",))
    rows = [json.loads(line) for line in (release / "data" / "configurations.jsonl").read_text().splitlines()]
    preds = []
    for r in rows:
        right = r["serialization"] == "markdown"
        preds.append({"id": r["id"], "model": "m", "prediction": f"Final Answer: {', '.join(r['answer']) if right else 'zzqx'}"})
        preds.append({"id": r["id"], "model": "steady", "prediction": f"Final Answer: {', '.join(r['answer'])}"})
    path = release.parent / "p.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in preds))
    evaluate(EvaluateOptions(release=release, predictions=path, out=release.parent / "eval", plots=False))
    report = run(HealthOptions(release=release, evaluations=(release.parent / "eval",), n_resamples=200,
                               thresholds=Thresholds(max_suspect_gold=None)))
    differences = next(s for s in report.sections if s.name == "differences")
    per = differences.data["configurations"]
    assert sorted(per) == ["m/DP", "steady/DP"]
    (pair,) = per["m/DP"]["pairs"]
    n = len({r["item_id"] for r in rows})
    assert (pair["first"], pair["second"], pair["n"]) == ("csv/none", "markdown/none", n)
    assert pair["difference"] == -1.0 and pair["significant"]
    assert pair["p_value"] == pytest.approx(binomtest(0, n, 0.5).pvalue)
    (steady,) = per["steady/DP"]["pairs"]
    assert steady["difference"] == 0.0 and steady["mdd"] is None and not steady["significant"]
    assert "m/DP across configurations (each against csv/none)" in "\n".join(differences.body)


def test_label_quality_section_from_a_workspace(simulation: tuple[Path, Path, list[Path]], sqlite_workspace: object) -> None:
    """Question typing: three annotators agree, a person overrides two items against all of them;
    the section is label_quality's report and its check counts those two of twelve gold items."""
    from tests.test_agreement import TaskRecord, _ann, _seed_records, _table
    from tqaforge.annotation.adjudication import adjudicate, resolve
    from tqaforge.annotation.label_quality import label_quality
    from tqaforge.schemas.records import Question
    from tqaforge.store import Workspace

    assert isinstance(sqlite_workspace, Workspace)
    ws = sqlite_workspace
    root, _, evaluations = simulation
    cats = ("extraction", "reasoning")
    qs = [Question(id=f"q{i}", table_id="t1", text=f"q {i}", subtype="S") for i in range(12)]
    tasks = [TaskRecord(id=f"t{i:02d}", kind="question_typing", target_type="question", target_id=f"q{i}") for i in range(12)]
    anns = [_ann(f"t{i:02d}", who, "question_typing", {"type": cats[i % 2]}) for i in range(12) for who in ("ana", "ben", "cy")]
    _seed_records(ws, [[_table()], qs, tasks, anns])
    adjudicate(ws, kinds=["question_typing"])
    resolve(ws, "t03", "extraction", by="lead")
    resolve(ws, "t04", "reasoning", by="lead")
    report = run(_options(root, evaluations, workspace=ws.root,
                          thresholds=Thresholds(max_suspect_gold=0.1, max_label_suspect_gold=0.1)))
    labels = next(s for s in report.sections if s.name == "labels")
    assert labels.data == label_quality(ws).as_dict()
    (failed,) = report.failed
    assert (failed.name, failed.section, failed.detail) == (
        "label_suspect_gold", "labels", "2 of 12 adjudicated items whose Dawid-Skene estimate disagrees with the gold")


def test_the_card_and_croissant_describe_the_attached_report(simulation: tuple[Path, Path, list[Path]], tmp_path: Path) -> None:
    """A release built with the health gate names health.json and health.md, the verdict and each
    check in its dataset card, and lists them (with their sha256) in a Croissant file that still
    validates; a release of the same items built without the gate has neither (the control)."""
    from tqaforge.release.build import ReleaseOptions, build_release
    from tqaforge.release.verify import verify_release
    from tqaforge.store import open_workspace

    root, ws_dir, evaluations = simulation
    health = HealthOptions(release=Path("."), evaluations=tuple(evaluations), n_resamples=500, plots=False,
                           thresholds=Thresholds.parse("max_suspect_gold=0.1"))
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("TQAFORGE_DATABASE_URL", raising=False)
        ws = open_workspace(ws_dir)
        try:
            build_release(ws, ReleaseOptions(version="2.0.0", out=tmp_path / "with", subsets=("base",), attach=release_gate(health)))
            build_release(ws, ReleaseOptions(version="2.0.0", out=tmp_path / "without", subsets=("base",)))
        finally:
            ws.close()
    card = (tmp_path / "with" / "README.md").read_text()
    assert "## Health report" in card and "(`health.json`, `health.md`)" in card
    assert "**passed** (healthy: all 1 checks pass)" in card
    assert "- [pass] suspect_gold: 6.67% (limit 10.00%); 10 of 150 base items" in card
    croissant = json.loads((tmp_path / "with" / "croissant.json").read_text())
    attached = {f["contentUrl"]: f for f in croissant["distribution"] if f["contentUrl"] in (HEALTH_JSON, HEALTH_MD)}
    assert attached[HEALTH_JSON]["encodingFormat"] == "application/json"
    assert attached[HEALTH_JSON]["sha256"] == hashlib.sha256((tmp_path / "with" / HEALTH_JSON).read_bytes()).hexdigest()
    assert "Health report (health.json): passed, healthy: all 1 checks pass." in croissant["description"]
    assert verify_release(tmp_path / "with").ok  # the rewritten card and Croissant are in the manifest
    plain_card = (tmp_path / "without" / "README.md").read_text()
    assert "Health report" not in plain_card and "health.json" not in (tmp_path / "without" / "croissant.json").read_text()
    try:
        import mlcroissant as mlc
    except ImportError:
        unavailable("mlcroissant is not installed", install="pip install -e '.[dev]'; make test installs it")
    dataset = mlc.Dataset(jsonld=str(tmp_path / "with" / "croissant.json"))
    assert len(list(dataset.records(record_set="base"))) == sim.N_ITEMS

"""Hostile inputs of benchmark health (tqaforge.health) and of the per-item scores file: no
evaluations, an evaluation of another release, damaged items files, one system only, a system
given twice, bad thresholds; the gate never passes blind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import health_sim as sim
from tqaforge.errors import EvaluateError, HealthError
from tqaforge.evaluate.item_file import ITEMS_FILE, read_item_scores
from tqaforge.health import HealthOptions, Thresholds, release_gate, run


@pytest.fixture(scope="module")
def simulation(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    root = tmp_path_factory.mktemp("hostile-health")
    _, evaluations = sim.build_simulation(root)
    return root, evaluations


def _copy(evaluation: Path, to: Path, edit: object = None) -> Path:
    to.mkdir(parents=True, exist_ok=True)
    lines = (evaluation / ITEMS_FILE).read_text(encoding="utf-8").splitlines()
    if callable(edit):
        lines = edit(lines)
    (to / ITEMS_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return to


def test_no_evaluations_runs_what_needs_none_and_never_passes_blind(simulation: tuple[Path, list[Path]]) -> None:
    root, evaluations = simulation
    report = run(HealthOptions(release=root / "candidate", references=()))
    sections = {s.name: s for s in report.sections}
    # Duplicates and answer bias need no system's scores: they are reported.
    assert {"leakage", "bias"} <= set(sections)
    assert sections["items"].body[0].startswith("not run: 0 system scored")
    # The item checks cannot be made without systems: they fail unchecked, so the report fails.
    unchecked = [c for c in sections["items"].checks if not c.checked]
    assert [c.name for c in unchecked] == ["suspect_gold"]  # the one item check on by default
    assert not report.passed
    # Control: with the evaluations the same checks are made.
    full = run(HealthOptions(release=root / "candidate", evaluations=tuple(evaluations), references=()))
    assert all(c.checked for s in full.sections if s.name == "items" for c in s.checks)
    # The gate with no evaluation refuses (it never passes blind).
    with pytest.raises(HealthError):
        release_gate(HealthOptions(release=Path(".")))(root / "candidate")
    # Without systems the items flagged are what the sections that need none find: the duplicated
    # tables and the constant subtype, never an item-analysis flag.
    flagged = report.flagged_items()
    assert {why for reasons in flagged.values() for why in reasons} == {"table_duplicate", "constant_answer"}
    assert report.flagged_line() == "items flagged: 30 of 150 base items (table_duplicate 10, constant_answer 20)"


def test_a_custom_section_flags_with_its_own_reasons_and_odd_item_ids(simulation: tuple[Path, list[Path]]) -> None:
    """A builder of another kind of finding (SECTION_BUILDERS is open) may flag items for a reason
    the report does not know, and an item id may hold control characters: the reasons are kept and
    counted after the known ones, and health.json keeps the id exactly."""
    from tqaforge.health import HealthSection
    from tqaforge.health.report import items_section

    root, evaluations = simulation
    odd = "row\n1\x1b[31m"

    def custom(ctx: object) -> HealthSection:
        return HealthSection("custom", "Custom", ("a custom finding",), {}, (), flagged={odd: ("zz_custom", "aa_custom")})

    report = run(HealthOptions(release=root / "candidate", evaluations=tuple(evaluations), references=()),
                 builders=[items_section, custom])
    assert report.flagged_items()[odd] == ("aa_custom", "zz_custom")
    assert report.flagged_line().endswith("suspect_gold 10, solved_by_all 4, solved_by_none 4, aa_custom 1, zz_custom 1)")
    assert json.loads(json.dumps(report.as_dict()))["flagged_items"][odd] == ["aa_custom", "zz_custom"]


def test_not_a_release_and_a_damaged_release(simulation: tuple[Path, list[Path]], tmp_path: Path) -> None:
    _, evaluations = simulation
    with pytest.raises(HealthError, match="is not a release"):
        run(HealthOptions(release=tmp_path, evaluations=tuple(evaluations)))


def test_an_evaluation_of_another_release(simulation: tuple[Path, list[Path]], tmp_path: Path) -> None:
    root, evaluations = simulation

    def foreign(lines: list[str]) -> list[str]:
        head = json.loads(lines[0])
        head["release"] = "other 2.0.0"
        rows = [json.loads(line) for line in lines[1:]]
        for r in rows:
            r["id"] = "x" + r["id"]
        return [json.dumps(head)] + [json.dumps(r) for r in rows]

    other = _copy(evaluations[0], tmp_path / "other", foreign)
    with pytest.raises(HealthError, match=r"scored release other 2\.0\.0, and 750 of its 750 rows are not rows of release sim 0\.9\.0"):
        run(HealthOptions(release=root / "candidate", evaluations=(evaluations[1], other)))


@pytest.mark.parametrize(("edit", "message"), [
    (lambda lines: lines[:-3], r"747 rows where its header says 750 \(cut off\?\)"),
    (lambda lines: lines[1:], r":1: not a tqaforge-item-scores file"),
    (lambda lines: [lines[0], "{not json", *lines[2:]], r":2: not JSON"),
    (lambda lines: [lines[0], lines[1].replace('"score": 1.0', '"score": 7.5').replace('"score": 0.0', '"score": 7.5'), *lines[2:]],
     r":2: the score 7\.5 is not a number in \[0, 1\]"),
    (lambda lines: [lines[0], lines[1].replace('"system": ', '"sys": '), *lines[2:]], r":2: system is missing"),
    (lambda lines: [lines[0].replace('"version": 1', '"version": 9'), *lines[1:]], r":1: version 9"),
    (lambda lines: [lines[0], "[1, 2]", *lines[2:]], r":2: a row that is not a JSON object"),
    (lambda lines: [], r"empty"),
])
def test_damaged_items_files(simulation: tuple[Path, list[Path]], tmp_path: Path, edit: object, message: str) -> None:
    root, evaluations = simulation
    damaged = _copy(evaluations[0], tmp_path / "damaged", edit)
    with pytest.raises(HealthError, match=message) as caught:
        run(HealthOptions(release=root / "candidate", evaluations=(damaged, evaluations[1])))
    assert "tqaforge evaluate" in str(caught.value.hint)


def test_binary_long_and_missing_items_files(simulation: tuple[Path, list[Path]], tmp_path: Path) -> None:
    root, evaluations = simulation
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / ITEMS_FILE).write_bytes(b'{"format": "tqaforge-item-scores", "version": 1, "release": "x", "rows": 1}\n\xff\xfe\x00junk\n')
    with pytest.raises(EvaluateError, match=":2: not UTF-8"):
        list(read_item_scores(tmp_path / "bin"))
    (tmp_path / "long").mkdir()
    (tmp_path / "long" / ITEMS_FILE).write_text("x" * 200_000 + "\n", encoding="utf-8")
    with pytest.raises(EvaluateError, match=":1: a line longer than"):
        list(read_item_scores(tmp_path / "long"))
    (tmp_path / "scores-only").mkdir()
    (tmp_path / "scores-only" / "scores.json").write_text("{}", encoding="utf-8")
    with pytest.raises(HealthError, match="does not exist: no per-item scores"):
        run(HealthOptions(release=root / "candidate", evaluations=(tmp_path / "scores-only",)))


def test_one_system_only_reports_and_fails_the_checks_it_cannot_make(simulation: tuple[Path, list[Path]], tmp_path: Path) -> None:
    root, evaluations = simulation

    def one(lines: list[str]) -> list[str]:
        rows = [line for line in lines[1:] if json.loads(line)["system"] == json.loads(lines[1])["system"]]
        head = json.loads(lines[0])
        head["rows"] = len(rows)
        return [json.dumps(head), *rows]

    single = _copy(evaluations[0], tmp_path / "one", one)
    report = run(HealthOptions(release=root / "candidate", evaluations=(single,),
                               thresholds=Thresholds(max_below_mdd=0.5)))
    items, differences = report.sections[:2]
    assert items.body[0].startswith("not run: 1 system scored")
    assert "nothing to compare" in differences.body[0]
    assert [c.name for c in report.failed] == ["suspect_gold", "below_mdd"]
    assert all(not c.checked for c in report.failed)
    assert "cannot be checked" in "\n".join(report.lines()) and "cannot be checked" in report.markdown()
    # Without any threshold, the same evaluation is reported and passes (nothing is asked).
    free = run(HealthOptions(release=root / "candidate", evaluations=(single,), thresholds=Thresholds(max_suspect_gold=None)))
    assert free.passed and free.verdict() == "no threshold checked"


def test_too_few_systems_for_the_item_checks(simulation: tuple[Path, list[Path]]) -> None:
    root, evaluations = simulation
    # Four systems in this evaluation, five needed per item: the suspect-gold check cannot be made.
    report = run(HealthOptions(release=root / "candidate", evaluations=(evaluations[2],), n_resamples=200))
    (failed,) = report.failed
    assert failed.name == "suspect_gold" and not failed.checked and "no base items scored by 5 systems" in failed.detail


def test_a_system_given_twice(simulation: tuple[Path, list[Path]]) -> None:
    root, evaluations = simulation
    with pytest.raises(HealthError, match=r"is scored on row .* in .*e0 and again in .*e0"):
        run(HealthOptions(release=root / "candidate", evaluations=(evaluations[0], evaluations[0])))


@pytest.mark.parametrize(("text", "message"), [
    ("max_suspect_gold=5", "a share from 0 to 1"),
    ("max_suspect_gold=nan", "a share from 0 to 1"),
    ("max_suspect_gold=lots", "is not a number"),
    ("min_systems=1", "2 or more"),
    ("min_systems=none", "cannot be none"),
    ("colour=blue", "unknown health threshold"),
    ("max_suspect_gold", "unknown health threshold"),
])
def test_bad_thresholds(text: str, message: str) -> None:
    with pytest.raises(HealthError, match=message):
        Thresholds.parse(text)


def test_thresholds_parse() -> None:
    t = Thresholds.parse("max-suspect-gold=0.1, max_below_mdd=0.3, max_solved_by_all=none,, min_systems=8")
    assert t == Thresholds(max_suspect_gold=0.1, max_below_mdd=0.3, max_solved_by_all=None, min_systems=8)
    assert Thresholds.parse("max_suspect_gold=none").max_suspect_gold is None


def test_release_attach_refuses_a_bad_file_name(tmp_path: Path) -> None:
    """What a release carries beside its files is a plain new file name: never a path out of it,
    a hidden file or one of its own files; the build is refused and nothing is left."""
    from tests.conftest import freeze_sample_release
    from tqaforge.errors import ReleaseError
    from tqaforge.release.build import ReleaseOptions, build_release
    from tqaforge.store import open_workspace

    freeze_sample_release(tmp_path)
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("TQAFORGE_DATABASE_URL", raising=False)
        ws = open_workspace(tmp_path / "ws")
        try:
            for name in ("../escape.json", "data/x.json", ".hidden", "manifest.json", "README.md"):
                with pytest.raises(ReleaseError, match="cannot attach"):
                    build_release(ws, ReleaseOptions(version="2.0.0", out=tmp_path / "r2", subsets=("base",),
                                                     attach=lambda root, name=name: {name: b"x"}))
        finally:
            ws.close()
    assert not (tmp_path / "r2").exists() and not (tmp_path / "escape.json").exists()
    assert not list(tmp_path.glob(".r2.*"))


def test_an_attached_report_with_odd_text_or_no_main_file(tmp_path: Path) -> None:
    """The card and Croissant show an attached report's verdict and checks as text (Markdown and
    control characters escaped); a report that names a file it does not attach refuses the build."""
    from tests.conftest import freeze_sample_release
    from tqaforge.errors import ReleaseError
    from tqaforge.release.build import AttachedReport, ReleaseOptions, build_release
    from tqaforge.release.verify import verify_release
    from tqaforge.store import open_workspace

    freeze_sample_release(tmp_path)
    odd = AttachedReport({"health.json": b"{}"}, "health.json", "Health report", False, "![x](http://evil/x.png)\x1b[2J",
                         ("[FAIL] <script>alert(1)</script>\n## not a heading",))
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("TQAFORGE_DATABASE_URL", raising=False)
        ws = open_workspace(tmp_path / "ws")
        try:
            with pytest.raises(ReleaseError, match="names 'health.md', which it does not attach"):
                build_release(ws, ReleaseOptions(version="2.0.0", out=tmp_path / "r2", subsets=("base",),
                                                 attach=lambda root: AttachedReport({"health.json": b"{}"}, "health.md", "Health report", True, "ok")))
            assert not (tmp_path / "r2").exists()
            build_release(ws, ReleaseOptions(version="2.0.1", out=tmp_path / "r3", subsets=("base",), attach=lambda root: odd))
        finally:
            ws.close()
    card = (tmp_path / "r3" / "README.md").read_text()
    assert "**not passed**" in card and "\x1b" not in card and "<script>" not in card and "\n## not a heading" not in card
    assert "](http://evil" not in card
    assert "\x1b" not in (tmp_path / "r3" / "croissant.json").read_text(encoding="utf-8").encode().decode("unicode_escape")
    assert verify_release(tmp_path / "r3").ok


def test_cli_health_options_only_with_the_gate(simulation: tuple[Path, list[Path]]) -> None:
    from typer.testing import CliRunner

    from tqaforge.cli import app

    root, evaluations = simulation
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("TQAFORGE_DATABASE_URL", raising=False)
        result = CliRunner().invoke(app, ["--workspace", str(root / "ws"), "release", "build", "--version", "3.0.0",
                                          "--out", str(root / "r3"), "--evaluations", str(evaluations[0])])
    assert result.exit_code == 1 and "go with --require-health" in result.output
    result = CliRunner().invoke(app, ["health", "--release", str(root / "candidate"), "--thresholds", "max_suspect_gold=2"])
    assert result.exit_code == 1 and "a share from 0 to 1" in result.output


def test_a_large_items_file_is_read_a_line_at_a_time(tmp_path: Path) -> None:
    """30,000 rows: counting them holds one row at a time (the peak
    of Python allocations stays far below the file's size)."""
    import tracemalloc

    n = 30_000
    path = tmp_path / ITEMS_FILE
    with path.open("w", encoding="utf-8") as fh:
        fh.write(json.dumps({"format": "tqaforge-item-scores", "version": 1, "release": "big 1.0.0", "rows": n}) + "\n")
        for i in range(n):
            fh.write(json.dumps({"system": f"s{i % 20}/DP", "id": f"r{i // 20}", "item_id": f"r{i // 20}", "subset": "base",
                                 "config": "base", "qtype": "A", "qsubtype": "B", "dataset": "d", "score": (i % 3) / 2,
                                 "correct": i % 3 == 2, "answered": True}) + "\n")
    tracemalloc.start()
    try:
        count = sum(1 for _ in read_item_scores(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert count == n
    assert peak < path.stat().st_size / 20


def test_every_threshold_has_its_words_and_is_parsed() -> None:
    """A threshold added to Thresholds without its words would break the app's form and --thresholds."""
    from dataclasses import fields

    from tqaforge.health import THRESHOLD_TEXT, Thresholds

    names = {f.name for f in fields(Thresholds)}
    assert set(THRESHOLD_TEXT) == names
    for name in names - {"min_systems"}:
        assert getattr(Thresholds.parse(f"{name}=0.25"), name) == 0.25

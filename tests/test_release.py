"""Frozen releases: what goes in, the agreement gate, byte-identical rebuilds, verify and diff,
and nothing private in the files."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import pytest
from prerequisites import unavailable
from sqlmodel import select
from typer.testing import CliRunner

from tqaforge.annotation.human_import import import_human_work
from tqaforge.annotation.kinds import KINDS, KindSpec, feeding_kinds, register_kind
from tqaforge.annotation.labelstudio.registry import LS_KINDS, LabelStudioKind, ls_kind, ls_kinds
from tqaforge.annotation.report import Settings, agreement_report
from tqaforge.annotation.report_format import to_markdown
from tqaforge.cli import app
from tqaforge.labels import record_annotation
from tqaforge.release.build import LowAgreement, ReleaseError, ReleaseOptions, build_release
from tqaforge.release.verify import diff_releases, verify_release
from tqaforge.schemas.records import Question
from tqaforge.store import Workspace

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"


@pytest.fixture
def released(sqlite_workspace: Workspace) -> Workspace:
    """TableBench's sample (gold imported with a curated benchmark) and FREB-TQA's value modifications."""
    summary = import_human_work(sqlite_workspace, [SAMPLE / "tablebench_sample.jsonl", SAMPLE / "freb_agg_com"])
    assert not summary.questions.failed
    return sqlite_workspace


def _test_dependency(name: str):
    """A test-only dependency (pyproject's dev extra): skipped where absent, a failure in CI."""
    try:
        return __import__(name)
    except ImportError:
        unavailable(f"{name} is a test dependency (pyproject dev extra) and is not installed", install="pip install -e '.[dev]'")


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_release_holds_the_trusted_items_and_variants_read_only(released: Workspace, tmp_path: Path) -> None:
    out = tmp_path / "r1"
    summary = build_release(released, ReleaseOptions(version="1.0.0", out=out))
    assert summary.counts["base"] == 36 + 6 and summary.counts["values"] == 6 + 6 + 6  # shortened + both edits
    files = _files(out)
    assert {"manifest.json", "README.md", "croissant.json", "agreement.json", "data/base.jsonl", "data/base.parquet"} <= set(files)
    assert all(not os.stat(out / rel).st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) for rel in files)
    base = [json.loads(line) for line in files["data/base.jsonl"].decode().splitlines()]
    assert {"id", "question", "answer", "table", "qsubtype", "relevant_cells"} <= set(base[0])
    values = [json.loads(line) for line in files["data/values.jsonl"].decode().splitlines()]
    changed = [v for v in values if v["perturbation"] == "value_change_answer_changes"]
    assert len(changed) == 6 and all(v["edits"] and v["made_by"] == "freb-tqa" for v in changed)
    manifest = json.loads(files["manifest.json"])
    assert manifest["counts"] == summary.counts and manifest["version"] == "1.0.0"
    assert set(manifest["files"]) == set(files) - {"manifest.json"}
    card = files["README.md"].decode()
    assert card.startswith("---\nlicense:") and "config_name: base" in card and "path: data/values.parquet" in card

    import pyarrow.parquet as pq

    assert pq.read_table(out / "data" / "base.parquet").to_pylist() == base


def test_built_twice_byte_identical_and_a_version_never_changes(released: Workspace, tmp_path: Path) -> None:
    first = build_release(released, ReleaseOptions(version="1.0.0", out=tmp_path / "a"))
    second = build_release(released, ReleaseOptions(version="1.0.0", out=tmp_path / "b"))
    assert _files(tmp_path / "a") == _files(tmp_path / "b") and first.counts == second.counts
    again = build_release(released, ReleaseOptions(version="1.0.0", out=tmp_path / "a"))
    assert again.identical_to_existing and "identical" in again.lines()[0]
    with released.session() as s:  # the store moves on: the same version may not be rebuilt
        q = s.exec(select(Question).order_by(Question.id)).first()
        assert q is not None
        q.text = q.text + " (edited)"
        s.add(q)
    with pytest.raises(ReleaseError, match="building it again would change .*data/base.jsonl"):
        build_release(released, ReleaseOptions(version="1.0.0", out=tmp_path / "a"))
    build_release(released, ReleaseOptions(version="1.1.0", out=tmp_path / "c"))
    diff = diff_releases(tmp_path / "a", tmp_path / "c")
    assert diff.subsets["base"]["changed"] == [q.id] and diff.subsets["base"]["added"] == []


def test_a_release_downloads_as_one_zip_of_its_files(released: Workspace, tmp_path: Path) -> None:
    import io
    import zipfile

    from tqaforge.release.verify import release_archive

    out = tmp_path / "r"
    build_release(released, ReleaseOptions(version="1.0.0", out=out))
    with zipfile.ZipFile(io.BytesIO(release_archive(out))) as archive:
        held = {name: archive.read(name) for name in archive.namelist()}
    assert held == {f"r/{rel}": data for rel, data in _files(out).items()}
    with pytest.raises(ReleaseError, match="not a release"):
        release_archive(tmp_path)


def test_verify_names_a_changed_an_added_and_a_removed_file(released: Workspace, tmp_path: Path) -> None:
    out = tmp_path / "r"
    build_release(released, ReleaseOptions(version="2.0.0", out=out))
    assert verify_release(out).ok
    target = out / "data" / "base.jsonl"
    os.chmod(target, 0o644)
    data = bytearray(target.read_bytes())
    data[10] = ord("X") if data[10] != ord("X") else ord("Y")  # one byte
    target.write_bytes(bytes(data))
    (out / "data" / "extra.jsonl").write_text("{}\n")
    os.chmod(out / "croissant.json", 0o644)
    (out / "croissant.json").unlink()
    report = verify_release(out)
    assert (report.changed, report.added, report.removed) == (["data/base.jsonl"], ["data/extra.jsonl"], ["croissant.json"])
    result = CliRunner().invoke(app, ["release", "verify", str(out)])
    assert result.exit_code == 1 and "changed: data/base.jsonl" in result.output


@pytest.mark.hostile
def test_low_agreement_stops_the_build_unless_a_reason_is_given(released: Workspace, tmp_path: Path) -> None:
    with released.session() as s:
        ids = [q.id for q in s.exec(select(Question).order_by(Question.id)).all()[:12]]
        for i, qid in enumerate(ids):  # two annotators who agree on a third of the items only
            record_annotation(s, kind="question_typing", target_type="question", target_id=qid, annotator="ana",
                              label={"type": "extraction" if i % 2 else "reasoning"})
            record_annotation(s, kind="question_typing", target_type="question", target_id=qid, annotator="ben",
                              label={"type": "extraction" if i % 3 else "reasoning"})
    with pytest.raises(LowAgreement, match=r"question_typing: fleiss_kappa -?\d\.\d+ < 0\.6 over 12 items; \d+ items with disagreement"):
        build_release(released, ReleaseOptions(version="1.0.0", out=tmp_path / "low"))
    assert not (tmp_path / "low").exists()
    reason = "pilot study: typing guidelines rewritten for the next round"
    summary = build_release(released, ReleaseOptions(version="1.0.0", out=tmp_path / "low", accept_low_agreement=reason))
    manifest = json.loads((tmp_path / "low" / "manifest.json").read_text())
    assert manifest["accepted_low_agreement"] == reason and manifest["agreement"]["question_typing"]["value"] < 0.6
    assert reason in (tmp_path / "low" / "README.md").read_text() and summary.accepted_reason == reason


@pytest.mark.hostile
def test_nothing_private_in_a_release(released: Workspace, tmp_path: Path) -> None:
    with released.session() as s:
        qid = s.exec(select(Question.id).order_by(Question.id)).first()
        record_annotation(s, kind="question_typing", target_type="question", target_id=qid, annotator="ls:0123abcd", label={"type": "reasoning"})
    out = tmp_path / "r"
    build_release(released, ReleaseOptions(version="1.0.0", out=out))
    text = "\n".join(data.decode("utf-8", "replace") for data in _files(out).values())
    for secret in (str(released.root), str(tmp_path), str(SAMPLE), os.environ.get("HOME", "/root") + "/"):
        assert secret not in text
    assert not re.search(r"[\w.+-]+@[\w-]+\.[\w.]+", text), "an e-mail address in the release"
    assert not re.search(r"(token|password|api_key)\W*[:=]", text, re.I)


def test_release_commands(released: Workspace, tmp_path: Path) -> None:
    runner = CliRunner(env={"COLUMNS": "200"})
    root = ["-w", str(released.root)]
    built = runner.invoke(app, [*root, "release", "build", "--version", "0.1.0", "--out", str(tmp_path / "a"), "--subsets", "base,values"])
    assert built.exit_code == 0 and "base: 42 rows" in built.output and "values: 18 rows" in built.output, built.output
    bad = runner.invoke(app, [*root, "release", "build", "--version", "1.0", "--out", str(tmp_path / "x")])
    assert bad.exit_code == 1 and "is not X.Y.Z" in bad.output
    unknown = runner.invoke(app, [*root, "release", "build", "--version", "1.0.0", "--subsets", "basics", "--out", str(tmp_path / "y")])
    assert unknown.exit_code == 1 and "unknown subset(s): basics" in unknown.output
    checked = runner.invoke(app, ["release", "verify", str(tmp_path / "a")])
    assert checked.exit_code == 0 and "all 7 files match the manifest" in checked.output, checked.output
    missing = runner.invoke(app, ["release", "verify", str(tmp_path)])
    assert missing.exit_code == 1 and "no manifest.json" in missing.output
    runner.invoke(app, [*root, "release", "build", "--version", "0.2.0", "--out", str(tmp_path / "b")])
    diffed = runner.invoke(app, ["release", "diff", str(tmp_path / "a"), str(tmp_path / "b"), "--json"])
    assert diffed.exit_code == 0 and json.loads(diffed.output)["subsets"]["base"]["changed"] == []


def test_common_dataset_tools_load_every_subset_and_croissant_validates(released: Workspace, tmp_path: Path) -> None:
    """`datasets` (JSON and Parquet) loads every subset; `mlcroissant` validates croissant.json
    (both test dependencies only)."""
    datasets = _test_dependency("datasets")
    out = tmp_path / "r"
    summary = build_release(released, ReleaseOptions(version="1.0.0", out=out))
    cache = tmp_path / "hf-cache"
    for subset, n in summary.counts.items():
        if not n:
            continue
        for kind in ("json", "parquet"):
            suffix = "jsonl" if kind == "json" else "parquet"
            loaded = datasets.load_dataset(kind, data_files=str(out / "data" / f"{subset}.{suffix}"), split="train", cache_dir=str(cache))
            assert loaded.num_rows == n, (subset, kind)
            assert "question" in loaded.column_names and "table" in loaded.column_names
    mlc = _test_dependency("mlcroissant")
    dataset = mlc.Dataset(jsonld=str(out / "croissant.json"))
    records = list(dataset.records(record_set="base"))
    assert len(records) == summary.counts["base"]


@pytest.mark.hostile
def test_thresholds_per_kind_come_from_the_config(released: Workspace, tmp_path: Path) -> None:
    from tqaforge.errors import ConfigError
    from tqaforge.release.build import thresholds
    from tqaforge.store import open_workspace

    with released.session() as s:
        ids = [q.id for q in s.exec(select(Question).order_by(Question.id)).all()[:12]]
        for i, qid in enumerate(ids):
            record_annotation(s, kind="question_typing", target_type="question", target_id=qid, annotator="ana",
                              label={"type": "extraction" if i % 2 else "reasoning"})
            record_annotation(s, kind="question_typing", target_type="question", target_id=qid, annotator="ben",
                              label={"type": "extraction" if i % 3 else "reasoning"})
    config = released.root / "tqaforge.toml"
    original = config.read_text()

    def with_release(text: str) -> Workspace:
        config.write_text(original + "\n[release]\n" + text)
        return open_workspace(released.root)

    lenient = with_release("min_agreement = -1\n")
    assert thresholds(lenient) == {"*": -1.0}
    assert build_release(lenient, ReleaseOptions(version="1.0.0", out=tmp_path / "a")).low_agreement == []
    strict = with_release("min_agreement = -1\n[release.min_agreement_by_kind]\nquestion_typing = 0.6\n")
    assert thresholds(strict) == {"*": -1.0, "question_typing": 0.6}
    with pytest.raises(LowAgreement, match=r"question_typing: fleiss_kappa .* < 0\.6"):
        build_release(strict, ReleaseOptions(version="1.0.0", out=tmp_path / "b"))
    assert thresholds(strict, 0.0) == {"*": 0.0}  # the command line's --min-agreement sets every kind
    for bad, message in (("question_typing = 2\n", "not a number from -1 to 1"), ("typo_kind = 0.5\n", "does not feed a release")):
        with pytest.raises(ConfigError, match=message):
            thresholds(with_release("[release.min_agreement_by_kind]\n" + bad))


@pytest.fixture
def table_quality():
    """A kind defined here, as one object, registered: nothing else in the toolkit names it."""
    spec = register_kind(KindSpec(
        "table_quality", "category", "quality", "is the table fit to ask questions about", ("good", "poor"),
        release_order=9, title="Table quality",
        labelstudio=LabelStudioKind("table_quality", "question", "question_typing.xml",
                                    to_label=lambda result: {"quality": result[0]["value"]["choices"][0]}),
    ))
    yield spec
    KINDS.pop(spec.name)


def test_a_kind_registered_as_one_object_flows_through_agreement_and_the_release_gate(
    released: Workspace, tmp_path: Path, table_quality: KindSpec,
) -> None:
    assert "table_quality" in feeding_kinds() and ls_kinds()["table_quality"] is table_quality.labelstudio
    assert ls_kind("question_typing") is LS_KINDS["question_typing"]  # control: the built-in kinds' own entries
    to_label = table_quality.labelstudio.to_label if table_quality.labelstudio else None
    assert to_label and table_quality.read(to_label([{"value": {"choices": ["Good"]}}])) == "good"
    with released.session() as s:
        ids = [q.id for q in s.exec(select(Question).order_by(Question.id)).all()[:12]]
        for i, qid in enumerate(ids):  # two annotators who agree on a third of the items only
            record_annotation(s, kind="table_quality", target_type="question", target_id=qid, annotator="ana",
                              label={"quality": "good" if i % 2 else "poor"})
            record_annotation(s, kind="table_quality", target_type="question", target_id=qid, annotator="ben",
                              label={"quality": "good" if i % 3 else "poor"})
    report = agreement_report(released, kinds=["table_quality"], settings=Settings(n_boot=20))
    kappa = report.kinds["table_quality"].overall["fleiss_kappa"].value
    assert kappa is not None and kappa < 0.6 and "## Table quality" in to_markdown(report)
    with pytest.raises(LowAgreement, match=r"table_quality: fleiss_kappa -?\d\.\d+ < 0\.6 over 12 items"):
        build_release(released, ReleaseOptions(version="1.0.0", out=tmp_path / "low"))
    # Control: the kind's own threshold lets the same labels through, and the manifest reports them.
    build_release(released, ReleaseOptions(version="1.0.0", out=tmp_path / "ok", min_agreement={"*": 0.6, "table_quality": -1.0}))
    gate = json.loads((tmp_path / "ok" / "manifest.json").read_text())["agreement"]["table_quality"]
    assert gate["statistic"] == "fleiss_kappa" and gate["items"] == 12 and gate["value"] == round(kappa, 4)


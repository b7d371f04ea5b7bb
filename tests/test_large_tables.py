"""The ``large_table`` probe set (capability-based TableBench, "Large-table Understanding"): probes
on a table grown past 32k tokens checked against the grown table read back by pandas, seeded
picks and growth, idempotent re-runs, and accuracy per token bucket in evaluate."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pandas as pd
import pytest
from sqlmodel import select
from typer.testing import CliRunner

from tqaforge.annotation.review import review_question
from tqaforge.cli import app
from tqaforge.evaluate.harness import EvaluateOptions, evaluate, saved_evaluations
from tqaforge.generation.large_tables import GROW_TARGETS, LargeTableOptions, generate_large_table_probes
from tqaforge.generation.probes import ProbeOptions, generate_probes
from tqaforge.ingest import import_paths
from tqaforge.queries import trusted_answers
from tqaforge.release.build import ReleaseOptions, build_release
from tqaforge.schemas.enums import Origin
from tqaforge.schemas.records import Question, TableRecord
from tqaforge.store import Workspace, init_workspace
from tqaforge.tables.tokens import LARGE_TABLE, bucket_of
from tqaforge.tables.writers import write_csv

TABLES = Path(__file__).resolve().parents[1] / "data" / "tables"
SMALL = TABLES / "tablebench_disease_cases.tsv"  # 9 rows x 6 columns, about 230 tokens in markdown
OTHER = TABLES / "wtq_cricket_batting.tsv"
runner = CliRunner()


def _probes(ws: Workspace) -> list[Question]:
    with ws.session() as s:
        return list(s.exec(select(Question).where(Question.subtype == LARGE_TABLE).order_by(Question.id)).all())


def _tables(ws: Workspace) -> dict[str, TableRecord]:
    with ws.session() as s:
        return {t.id: t for t in s.exec(select(TableRecord)).all()}


def test_probes_on_a_table_grown_past_32k_tokens_match_pandas(workspace: Workspace) -> None:
    ws = workspace  # SQLite, and PostgreSQL when TQAFORGE_TEST_DATABASE_URL is set
    import_paths(ws, [SMALL])
    summary = generate_large_table_probes(ws, LargeTableOptions(per_bucket=1, seed=5, buckets=(">32k",), per_table=3))
    (bucket,) = summary.buckets
    assert bucket.grown is not None and bucket.grown.new and bucket.grown.tokens >= 32 * 1024
    assert [t for t, _ in bucket.tables] == [bucket.grown.table_id]
    grown = _tables(ws)[bucket.grown.table_id]
    assert grown.origin == Origin.RULE and grown.n_rows > 1000

    # Independently: the stored table written as CSV and read back by pandas; its rows traced to
    # the source file read by pandas too.
    frame = pd.read_csv(io.StringIO(write_csv(grown.to_table())), dtype=str, keep_default_na=False)
    source = pd.read_csv(SMALL, sep="\t", dtype=str, keep_default_na=False)
    assert list(frame.columns) == ["source_row", *source.columns]
    traced = source.iloc[frame["source_row"].astype(int)].reset_index(drop=True)
    assert traced.equals(frame.drop(columns="source_row"))

    probes = _probes(ws)
    with ws.session() as s:
        gold = trusted_answers(s, [q.id for q in probes])
    kinds = sorted(q.meta["probe"]["kind"] for q in probes)  # type: ignore[index]
    assert kinds == ["columns", "header", "header", "header", "rows"]
    for q in probes:
        probe, large = q.meta["probe"], q.meta["large_table"]  # type: ignore[index]
        assert large == {"bucket": ">32k", "tokens": bucket.grown.tokens, "serialization": "markdown", "encoding": "cl100k_base"}
        assert q.taxonomy == "capability" and q.subtype == LARGE_TABLE and q.table_id == grown.id and q.seed == 5
        expected = {"rows": str(len(frame)), "columns": str(len(frame.columns))}.get(probe["kind"])
        if probe["kind"] == "header":
            expected = frame.columns[probe["column"] - 1]
        assert gold[q.id].values == [expected], (probe, gold[q.id].values)


def test_the_same_seed_gives_the_same_set_and_a_rerun_adds_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    options = LargeTableOptions(per_bucket=1, seed=9, buckets=("<4k", "4-8k", ">32k"))
    made = []
    for name in ("a", "b"):
        ws = init_workspace(tmp_path / name, name=name)
        import_paths(ws, [SMALL, OTHER])
        first = generate_large_table_probes(ws, options)
        assert [b.new for b in first.buckets] == [3, 3, 3] and not first.failed
        # <4k: one of the two real tables (drawn with the seed); 4-8k and >32k: grown ones.
        assert [b.grown is not None for b in first.buckets] == [False, True, True]
        assert all(bucket_of(n).name == b.bucket for b in first.buckets for _, n in b.tables)
        tables, probes = set(_tables(ws)), {q.id for q in _probes(ws)}
        again = generate_large_table_probes(ws, options)
        assert [b.new for b in again.buckets] == [0, 0, 0] and [b.present for b in again.buckets] == [3, 3, 3]
        assert all(b.grown is None for b in again.buckets)  # the grown tables are found, not grown again
        assert set(_tables(ws)) == tables and {q.id for q in _probes(ws)} == probes
        made.append((tables, probes, [[t for t, _ in b.tables] for b in first.buckets]))
        ws.close()
    assert made[0] == made[1]
    # Grown to the middle of the bucket, from the larger of the two real tables.
    ws = init_workspace(tmp_path / "c", name="c")
    import_paths(ws, [SMALL, OTHER])
    other = generate_large_table_probes(ws, LargeTableOptions(per_bucket=1, seed=10, buckets=("4-8k",)))
    assert other.buckets[0].grown is not None and other.buckets[0].grown.tokens >= GROW_TARGETS["4-8k"]
    assert other.buckets[0].grown.table_id not in made[0][0]  # another seed, another draw of rows
    sources = {t.id: t for t in _tables(ws).values() if t.origin != Origin.RULE}
    from tqaforge.queries import table_token_counts

    counts = table_token_counts(ws, table_ids=list(sources))
    assert other.buckets[0].grown.source_id == max(counts, key=lambda i: counts[i])
    ws.close()


def test_without_growth_an_empty_bucket_is_reported(sqlite_workspace: Workspace) -> None:
    ws = sqlite_workspace
    import_paths(ws, [SMALL])
    summary = generate_large_table_probes(ws, LargeTableOptions(seed=1, grow=False, buckets=("<4k", "16-32k")))
    assert [len(b.tables) for b in summary.buckets] == [1, 0] and summary.buckets[1].grown is None
    text = "\n".join(summary.lines())
    assert "16-32k  0 tables, 0 new probes" in text and "no table is this large (grow one with --grow" in text
    assert len(_tables(ws)) == 1 and summary.as_dict()["buckets"][1]["note"]


def test_the_cli_makes_the_set(sqlite_workspace: Workspace) -> None:
    ws = sqlite_workspace
    import_paths(ws, [SMALL])
    w = ["--workspace", str(ws.root)]
    result = runner.invoke(app, ["generate", "probes", "--large-table", "--per-bucket", "1", "--seed", "2",
                                 "--buckets", "<4k,8-16k", *w])
    assert result.exit_code == 0, result.output
    assert "large-table probes (rows, columns, header; LargeTableUnderstanding)" in result.output
    assert re.search(r"8-16k +1 table \(\d+-\d+ tokens\), 3 new probes", result.output) and "grew table" in result.output
    again = runner.invoke(app, ["generate", "probes", "--large-table", "--per-bucket", "1", "--seed", "2",
                                "--buckets", "<4k,8-16k", "--json", *w])
    data = json.loads(again.output)
    assert [sum(b["new"].values()) for b in data["buckets"]] == [0, 0]
    assert [sum(b["present"].values()) for b in data["buckets"]] == [3, 3]


def test_evaluate_reports_accuracy_per_token_bucket(sqlite_workspace: Workspace, tmp_path: Path) -> None:
    ws = sqlite_workspace
    import_paths(ws, [SMALL, OTHER])
    generate_large_table_probes(ws, LargeTableOptions(per_bucket=2, seed=4, buckets=("<4k", "4-8k", ">32k")))
    generate_probes(ws, ProbeOptions(kinds=("rows",), tables=(), seed=4))  # ordinary probes of the 4 tables: in no bucket
    with ws.session() as s:
        every = list(s.exec(select(Question)).all())
    for q in every:
        review_question(ws, q.id, "accept", annotator="ana", new=True)
    release = tmp_path / "release"
    build_release(ws, ReleaseOptions(version="1.0.0", out=release, n_boot=20, subsets=("base",)))
    base = [json.loads(line) for line in (release / "data" / "base.jsonl").read_text().splitlines()]
    buckets = {r["id"]: r["token_bucket"] for r in base}
    assert sorted(set(buckets.values())) == ["", "4-8k", "<4k", ">32k"]
    assert sum(v == "<4k" for v in buckets.values()) == 6 and sum(v == "" for v in buckets.values()) == 4

    # The known pattern: every answer right below 4k, the rows probes wrong at 4-8k, everything wrong past 32k.
    kind = {q.id: q.meta["probe"]["kind"] for q in every}  # type: ignore[index]

    def reply(r: dict) -> str:
        wrong = r["token_bucket"] == ">32k" or (r["token_bucket"] == "4-8k" and kind[r["id"]] == "rows")
        return f"Final Answer: {'no idea' if wrong else r['answer_text']}"

    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps({"id": r["id"], "model": "m", "prediction": reply(r)}) + "\n" for r in base))
    report = evaluate(EvaluateOptions(release=release, predictions=preds, plots=False, out=tmp_path / "scores"))
    (lt,) = report.large_tables
    assert lt.system == "m/DP" and lt.items == 12
    assert [(b.bucket, b.items, b.correct, b.accuracy) for b in lt.buckets] == [
        ("<4k", 6, 6, 1.0), ("4-8k", 3, 2, 0.6667), (">32k", 3, 0, 0.0)]
    text = "\n".join(report.lines())
    assert "Large-table understanding" in text and "4-8k          3        2     0.667" in text
    saved = json.loads((tmp_path / "scores" / "scores.json").read_text())
    assert saved["large_tables"][0]["buckets"][2] == {"bucket": ">32k", "items": 3, "correct": 0, "accuracy": 0.0}
    # Read back as the app reads it.
    (tmp_path / "evals" / "r").mkdir(parents=True)
    (tmp_path / "scores").rename(tmp_path / "evals" / "r" / "p")
    (read,) = saved_evaluations(tmp_path / "evals")
    assert read.large_tables() == report.large_tables


def test_a_release_without_large_table_probes_has_no_bucket_column(sqlite_workspace: Workspace, tmp_path: Path) -> None:
    """Control: other releases keep their columns (and so their bytes)."""
    ws = sqlite_workspace
    import_paths(ws, [SMALL])
    generate_probes(ws, ProbeOptions(kinds=("rows", "columns"), seed=1))
    for q in _probes(ws) or []:
        raise AssertionError(f"not a large-table probe: {q.id}")
    with ws.session() as s:
        for q in s.exec(select(Question)).all():
            review_question(ws, q.id, "accept", annotator="ana", new=True)
    build_release(ws, ReleaseOptions(version="1.0.0", out=tmp_path / "r", n_boot=20, subsets=("base",)))
    rows = [json.loads(line) for line in (tmp_path / "r" / "data" / "base.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all("token_bucket" not in r for r in rows)

"""The variant grid over stored items: counts, idempotence, skips, prompts, crashes, show."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import shared_data_path
from sqlmodel import select
from typer.testing import CliRunner

from tqaforge.cli import app
from tqaforge.ingest import import_paths
from tqaforge.schemas.records import Variant
from tqaforge.tables.perturb import TORR_PERTURBATIONS
from tqaforge.tables.serialize import TORR_SERIALIZATIONS
from tqaforge.variants.grid import GridSpec, build_variants, load_items, write_prompts_file
from tqaforge.variants.view import show_variant

DATA = Path(__file__).resolve().parents[1] / "data"
TORR = GridSpec(TORR_SERIALIZATIONS, ("none", *TORR_PERTURBATIONS), (0,))


def _variants(ws) -> list[Variant]:
    with ws.session() as s:
        return list(s.exec(select(Variant).order_by(Variant.id)).all())


def test_torr_grid_on_the_sample_is_35_configurations_per_item_and_idempotent(workspace, tmp_path):
    import_paths(workspace, [DATA / "sample" / "tablebench_sample.jsonl"])
    items = load_items(workspace)
    assert len(items) == 36
    out = tmp_path / "prompts.jsonl"
    first = write_prompts_file(out, lambda fh: build_variants(workspace, items, TORR, prompts=fh))
    stored = _variants(workspace)
    assert first.variants_new == len(stored) == 36 * 5
    built = [v for v in stored if v.status != "skipped"]
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert first.prompts == len(lines) == len(built) * 7
    configs = {(ln["question_id"], ln["perturbation"], ln["serialization"]) for ln in lines}
    assert len(configs) == len(lines)  # every configuration once
    if not first.skipped:
        assert len(lines) == 36 * 35
    for line in lines[:50]:
        assert line["prompt"].rstrip().endswith(next(i.question for i in items if i.question_id == line["question_id"]))

    before = out.read_bytes()
    second = write_prompts_file(out, lambda fh: build_variants(workspace, items, TORR, prompts=fh))
    assert second.variants_new == 0 and second.variants_present == 36 * 5
    assert len(_variants(workspace)) == 36 * 5
    assert out.read_bytes() == before  # the stream is deterministic too


def test_same_inputs_give_the_same_variants_in_another_workspace(sqlite_workspace, tmp_path, monkeypatch):
    from tqaforge.store import init_workspace

    spec = GridSpec(("csv",), ("shuffle_rows", "shuffle_columns", "insert_empty_rows"), (0, 1, 2))
    other = init_workspace(tmp_path / "other")
    for ws in (sqlite_workspace, other):
        import_paths(ws, [DATA / "sample" / "tablebench_sample.jsonl"])
        build_variants(ws, load_items(ws, limit=10), spec)
    a = {(v.id, json.dumps(v.table)) for v in _variants(sqlite_workspace)}
    b = {(v.id, json.dumps(v.table)) for v in _variants(other)}
    assert a == b and len(a) == 10 * 3 * 3
    other.close()


def test_skips_are_recorded_and_counted_never_crash(sqlite_workspace, tmp_path):
    one_row = tmp_path / "one.jsonl"
    one_row.write_text(json.dumps({
        "id": "tiny", "qtype": "NumericalReasoning", "qsubtype": "Counting",
        "table": {"columns": ["a", "b"], "data": [["x", "1"]]}, "question": "How many?", "answer": "zzz",
    }) + "\n")
    import_paths(sqlite_workspace, [one_row])
    spec = GridSpec(("markdown",), ("shuffle_rows", "target_rows_top", "remove_relevant_cells", "none"), (0,))
    summary = build_variants(sqlite_workspace, load_items(sqlite_workspace), spec)
    assert summary.skipped == {"shuffle_rows": 1, "target_rows_top": 1, "remove_relevant_cells": 1}
    by_name = {v.perturbation: v for v in _variants(sqlite_workspace)}
    assert by_name["none"].status == "built"
    for name in summary.skipped:
        assert by_name[name].status == "skipped" and by_name[name].skip_reason


def test_relevant_cell_perturbations_on_freb_items(sqlite_workspace):
    import_paths(sqlite_workspace, [DATA / "sample" / "tat_nonfactoid_dev_sample.jsonl"])
    items = load_items(sqlite_workspace)
    assert items and all(i.context.relevant_cells for i in items)
    spec = GridSpec(("html",), ("remove_relevant_cells", "shorten_to_relevant", "shift_relevant_rows", "remove_table"), (0,))
    summary = build_variants(sqlite_workspace, items, spec)
    assert summary.variants_new == len(items) * 4
    for v in _variants(sqlite_workspace):
        if v.perturbation == "remove_relevant_cells" and v.status != "skipped":
            assert v.status == "pending_review" and v.answers is None  # a person settles the gold
            assert v.changes["changed_cells"]
        if v.perturbation == "shift_relevant_rows" and v.status != "skipped":
            assert v.answer_effect == "unchanged" and v.answers


def test_variants_show_marks_changes(sqlite_workspace, monkeypatch):
    import_paths(sqlite_workspace, [DATA / "sample" / "tat_nonfactoid_dev_sample.jsonl"])
    build_variants(sqlite_workspace, load_items(sqlite_workspace, limit=1),
                   GridSpec(("csv",), ("remove_relevant_cells", "shuffle_rows"), (0,)))
    variants = {v.perturbation: v for v in _variants(sqlite_workspace)}
    view = show_variant(sqlite_workspace, variants["remove_relevant_cells"].id[:12])
    changed = {(i, j) for i, row in enumerate(view.marks) for j, m in enumerate(row) if m == "changed"}
    assert changed == {tuple(c) for c in variants["remove_relevant_cells"].changes["changed_cells"]}
    shuffled = show_variant(sqlite_workspace, variants["shuffle_rows"].id)
    assert sorted(shuffled.row_origin) == sorted(f"r{i}" for i in range(shuffled.original.n_rows))

    runner = CliRunner(env={"COLUMNS": "250"})
    result = runner.invoke(app, ["-w", str(sqlite_workspace.root), "variants", "show", variants["remove_relevant_cells"].id[:12]])
    assert result.exit_code == 0, result.output
    assert "original" in result.output and "remove_relevant_cells" in result.output and "changed" in result.output


def test_cli_build_rejects_unknown_names(sqlite_workspace):
    runner = CliRunner()
    result = runner.invoke(app, ["-w", str(sqlite_workspace.root), "variants", "build", "--perturbations", "frobnicate"])
    assert result.exit_code == 1 and "unknown perturbation(s): frobnicate" in result.output


def test_grid_killed_mid_way_resumes_to_the_same_variants(tmp_path):
    path = shared_data_path("tablebench", "TableBench.jsonl")
    env = {k: v for k, v in os.environ.items() if k != "TQAFORGE_DATABASE_URL"}
    cli = [sys.executable, "-m", "tqaforge"]
    dbs = {}
    for name in ("reference", "killed"):
        ws = tmp_path / name
        subprocess.run([*cli, "init", str(ws)], env=env, check=True, capture_output=True)
        subprocess.run([*cli, "-w", str(ws), "tables", "import", str(path)], env=env, check=True, capture_output=True)
        dbs[name] = ws
    build = ["variants", "build", "--serializations", "csv", "--seeds", "0,1"]
    subprocess.run([*cli, "-w", str(dbs["reference"]), *build], env=env, check=True, capture_output=True)
    proc = subprocess.Popen([*cli, "-w", str(dbs["killed"]), *build], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(3.0)  # somewhere mid-way; the assertions hold wherever the kill lands
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    prompts = dbs["killed"] / "prompts" / "variants.jsonl"
    assert not prompts.exists() or prompts.read_bytes() == (dbs["reference"] / "prompts" / "variants.jsonl").read_bytes()
    subprocess.run([*cli, "-w", str(dbs["killed"]), *build], env=env, check=True, capture_output=True)

    import sqlite3

    def rows(ws: Path) -> list[tuple]:
        con = sqlite3.connect(ws / "tqaforge.db")
        try:
            return con.execute("SELECT id, status, \"table\", answers FROM variants ORDER BY id").fetchall()
        finally:
            con.close()

    assert rows(dbs["killed"]) == rows(dbs["reference"])
    assert (dbs["killed"] / "prompts" / "variants.jsonl").read_bytes() == (dbs["reference"] / "prompts" / "variants.jsonl").read_bytes()


def test_questions_naming_positions_are_not_moved_unless_asked(sqlite_workspace, tmp_path):
    items_file = tmp_path / "pos.jsonl"
    rows = [[f"p{i}", str(i)] for i in range(6)]
    items_file.write_text("".join(json.dumps({
        "id": f"q{k}", "qtype": "FactChecking", "qsubtype": "MatchBased",
        "table": {"columns": ["name", "n"], "data": rows}, "question": q, "answer": "p0",
    }) + "\n" for k, q in enumerate(["Who is in the first row?", "Who has n equal to 0?"])))
    import_paths(sqlite_workspace, [items_file])
    items = sorted(load_items(sqlite_workspace, status=None), key=lambda i: i.question)
    spec = GridSpec(("csv",), ("none", "shuffle_rows", "transpose"), (0,))
    summary = build_variants(sqlite_workspace, items, spec)
    assert summary.skipped == {"shuffle_rows": 1, "transpose": 1}
    by_key = {(v.question_id, v.perturbation): v for v in _variants(sqlite_workspace)}
    positional = next(i for i in items if "first" in i.question)
    assert "first" in by_key[(positional.question_id, "shuffle_rows")].skip_reason
    assert by_key[(positional.question_id, "none")].status == "built"
    kept = GridSpec(("csv",), ("shuffle_rows",), (1,), skip_structural=False)
    build_variants(sqlite_workspace, [positional], kept)
    assert {v.status for v in _variants(sqlite_workspace) if v.seed == 1} == {"built"}

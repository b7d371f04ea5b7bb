"""Probes (capability-based TableBench): answers checked against the source files by an independent
computation (the csv module, openpyxl), seeded draws, idempotent re-runs, the capability taxonomy,
and a probe taken through review, variants, release and evaluate."""

from __future__ import annotations

import csv
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from openpyxl import Workbook
from sqlmodel import select
from typer.testing import CliRunner

from tqaforge.annotation.review import review_question
from tqaforge.cli import app
from tqaforge.evaluate.harness import EvaluateOptions, evaluate
from tqaforge.generation.corpus import workspace_corpus
from tqaforge.generation.probes import (
    PROBE_KINDS,
    TEMPLATES,
    ProbeOptions,
    draw_probes,
    generate_probes,
)
from tqaforge.ingest import import_paths
from tqaforge.queries import trusted_answers
from tqaforge.release.build import ReleaseOptions, build_release
from tqaforge.schemas.enums import AnswerStatus, Origin, QuestionStatus, VariantStatus
from tqaforge.schemas.records import Answer, Question, TableRecord, Variant
from tqaforge.schemas.taxonomy import CAPABILITY
from tqaforge.store import Workspace, init_workspace
from tqaforge.tables.perturb import MOVES_CELLS
from tqaforge.tables.perturb.structural import structural_words
from tqaforge.tables.table import Table
from tqaforge.variants.grid import GridOptions, build_variant_grid

TABLES = Path(__file__).resolve().parents[1] / "data" / "tables"
DELIMITED = [TABLES / n for n in ("tablebench_disease_cases.tsv", "tablebench_tropical_cyclones.csv",
                                  "wtq_cricket_batting.tsv", "wtq_football_league_table.csv")]


def _grid_file(tmp_path: Path) -> Path:
    """A 40 x 5 CSV written by the csv module: ids unique, a category column of repeats, a blank."""
    rng = random.Random(11)
    path = tmp_path / "grid.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "group", "score", "note", "city"])
        for i in range(40):
            w.writerow([f"r{i:03d}", rng.choice(["red", "blue"]), str(rng.randint(0, 60)),
                        "" if i % 7 == 0 else f"note {i}", rng.choice(["Oslo", "Bergen", "Tromsø", f"Town {i}"])])
    return path


def _read_source(path: Path) -> tuple[list[str], list[list[str]]]:
    """The header and rows of a delimited file, read by the csv module (not by tqaforge)."""
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t" if path.suffix == ".tsv" else ","))
    return rows[0], rows[1:]


def _openpyxl_range(header: list[str], rows: list[list[str]]) -> str:
    """The range a worksheet reports for the table written at A1 (header in row 1)."""
    sheet = Workbook().active
    for r, row in enumerate([header, *rows], start=1):
        for c, value in enumerate(row, start=1):
            sheet.cell(row=r, column=c, value=value if value != "" else " ")
    return sheet.dimensions


def _fold(text: str) -> str:
    return " ".join(text.casefold().split())


def _probes(ws: Workspace) -> list[tuple[Question, Answer]]:
    with ws.session() as s:
        questions = list(s.exec(select(Question).order_by(Question.id)).all())
        answers = {a.question_id: a for a in s.exec(select(Answer)).all()}
    return [(q, answers[q.id]) for q in questions]


def _expected(kind: str, text: str, header: list[str], rows: list[list[str]]) -> str:
    """The answer of a probe computed from its words and the source file alone."""
    if kind == "rows":
        return str(len(rows))
    if kind == "columns":
        return str(len(header))
    if kind == "has_header":
        return "yes" if any(h.strip() for h in header) else "no"
    if kind == "range":
        return _openpyxl_range(header, rows)
    if kind == "header":
        n = int(re.search(r"column (\d+)", text).group(1))  # type: ignore[union-attr]
        return header[n - 1]
    assert kind == "cell"
    row = int(re.search(r"row (\d+)", text).group(1))  # type: ignore[union-attr]
    named = re.search(r'the "(.+)" column', text)
    col = header.index(named.group(1)) if named else int(re.search(r"column (\d+)", text).group(1)) - 1  # type: ignore[union-attr]
    value = rows[row - 1][col]
    counts = sum(_fold(v) == _fold(value) for r in rows for v in r)
    assert value.strip() and counts == 1, f"cell probe {text!r} asks for an ambiguous value {value!r}"
    return value


def test_every_kind_answers_as_the_source_file_says(workspace: Workspace, tmp_path: Path) -> None:
    """On SQLite and PostgreSQL alike."""
    ws = workspace
    files = [*DELIMITED, _grid_file(tmp_path)]
    assert not import_paths(ws, files).failed
    summary = generate_probes(ws, ProbeOptions(seed=5, per_table=4))
    assert not summary.failed and not summary.skipped
    with ws.session() as s:
        source_of = {t.id: Path(t.imported_from or "") for t in s.exec(select(TableRecord)).all()}
    probes = _probes(ws)
    # rows, columns, range, has_header once per table; header and cell 4 times each.
    assert len(probes) == len(files) * (4 + 2 * 4) == sum(summary.new.values())
    seen_kinds = set()
    for q, a in probes:
        kind = q.meta["probe"]["kind"]  # type: ignore[index]
        seen_kinds.add(kind)
        header, rows = _read_source(source_of[q.table_id])
        assert a.values == [_expected(kind, q.text, header, rows)], (kind, q.text)
        assert (a.status, a.origin, a.method) == (AnswerStatus.GOLD, Origin.RULE, "probe")
        assert (q.status, q.origin, q.seed, q.taxonomy) == (QuestionStatus.PROPOSED, Origin.RULE, 5, "capability")
        assert q.subtype == ("Grounding" if kind == "cell" else "StructureUnderstanding")
        assert q.qtype == CAPABILITY.type_of(q.subtype)
        if kind != "cell":  # the stored draw says which wording was used
            assert q.text == TEMPLATES[kind][q.meta["probe"]["template"]].format(n=q.meta["probe"].get("column"))  # type: ignore[index]
    assert seen_kinds == set(PROBE_KINDS)
    # The stored gold is the trusted answer of each probe (what release and evaluate read).
    with ws.session() as s:
        gold = trusted_answers(s, [q.id for q, _ in probes])
    assert {qid: g.values for qid, g in gold.items()} == {q.id: a.values for q, a in probes}


def test_the_same_seed_gives_the_same_probes_and_a_rerun_adds_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    files = [*DELIMITED, _grid_file(tmp_path)]
    made = []
    for name in ("one", "two"):
        ws = init_workspace(tmp_path / name, name=name)
        import_paths(ws, files)
        generate_probes(ws, ProbeOptions(seed=3, per_table=3))
        made.append([(q.id, q.text, a.values, q.meta) for q, a in _probes(ws)])
        if name == "two":
            again = generate_probes(ws, ProbeOptions(seed=3, per_table=3))
            assert sum(again.new.values()) == 0 and sum(again.present.values()) == len(made[1])
            assert len(_probes(ws)) == len(made[1])
            with ws.session() as s:
                assert len(s.exec(select(Answer)).all()) == len(made[1])
            # Tables processed alone draw as when processed with the others.
            alone = init_workspace(tmp_path / "alone", name="alone")
            import_paths(alone, [files[-1]])
            generate_probes(alone, ProbeOptions(seed=3, per_table=3))
            assert {p[0] for p in made[1]} >= {q.id for q, _ in _probes(alone)}
            alone.close()
        ws.close()
    assert made[0] == made[1]


def test_another_seed_draws_other_cells_and_columns(sqlite_workspace: Workspace, tmp_path: Path) -> None:
    ws = sqlite_workspace
    import_paths(ws, [_grid_file(tmp_path)])
    with ws.session() as s:
        record = s.exec(select(TableRecord)).one()
    table = record.to_table()
    draws = {seed: [(p.kind, p.text, p.answer) for k in ("header", "cell") for p in draw_probes(table, k, seed, 2)]
             for seed in range(4)}
    assert len({tuple(d) for d in draws.values()}) == 4  # each seed its own choice
    generate_probes(ws, ProbeOptions(kinds=("cell",), seed=0, per_table=2))
    second = generate_probes(ws, ProbeOptions(kinds=("cell",), seed=1, per_table=2))
    assert second.new.get("cell", 0) >= 1  # another seed adds the probes whose draw differs
    with ws.session() as s:
        seeds = {q.seed for q in s.exec(select(Question)).all()}
    assert seeds == {0, 1}


def test_every_template_names_rows_or_columns() -> None:
    """The variant grid's structural filter keeps cell-moving perturbations off every probe."""
    for kind, templates in TEMPLATES.items():
        assert len(templates) >= 2, kind
        for template in templates:
            assert structural_words(template.format(n=2, row=3, column='the "x" column')), template


def test_init_with_the_capability_taxonomy_and_probes_from_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    runner = CliRunner()
    root = tmp_path / "cap"
    assert runner.invoke(app, ["init", str(root), "--taxonomy", "capability"]).exit_code == 0
    monkeypatch.chdir(root)
    listed = runner.invoke(app, ["seeds", "list"])
    assert listed.exit_code == 0 and "LargeTableUnderstanding" in listed.output
    assert runner.invoke(app, ["tables", "import", str(DELIMITED[1])]).exit_code == 0
    result = runner.invoke(app, ["generate", "probes", "--kinds", "rows,columns,header,cell,range,has_header",
                                 "--tables", "all", "--seed", "9", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert sum(data["new"].values()) == 6 and data["seed"] == 9 and not data["failed"]
    again = runner.invoke(app, ["generate", "probes", "--seed", "9"])
    assert again.exit_code == 0 and "0 new probes, 6 already stored" in again.output
    from tqaforge.store import open_workspace

    ws = open_workspace(root)
    try:
        assert ws.config.taxonomy() is CAPABILITY and set(workspace_corpus(ws).subtypes) == set(CAPABILITY.subtypes)
        assert {q.subtype for q, _ in _probes(ws)} <= set(CAPABILITY.subtypes)
    finally:
        ws.close()


def test_the_capability_option_files_probes_for_a_large_table_set(sqlite_workspace: Workspace) -> None:
    ws = sqlite_workspace
    import_paths(ws, DELIMITED[:2])
    with ws.session() as s:
        ids = sorted(s.exec(select(TableRecord.id)).all())
    summary = generate_probes(ws, ProbeOptions(kinds=("rows", "columns", "header", "cell"), tables=(ids[0][:10],),
                                               capability="LargeTableUnderstanding"))
    assert summary.tables == 1 and sum(summary.new.values()) == 4
    assert {(q.subtype, q.qtype, q.table_id) for q, _ in _probes(ws)} == {("LargeTableUnderstanding", "Recognition", ids[0])}


def _answer_of(row: dict[str, Any]) -> str:
    answer = row["answer"]
    return ", ".join(answer) if isinstance(answer, list) else str(answer)


def test_a_probe_goes_through_review_variants_release_and_evaluate(sqlite_workspace: Workspace, tmp_path: Path) -> None:
    ws = sqlite_workspace
    import_paths(ws, [DELIMITED[1]])
    generate_probes(ws, ProbeOptions(seed=2, per_table=2))
    probes = _probes(ws)
    kinds = {q.id: q.meta["probe"]["kind"] for q, _ in probes}  # type: ignore[index]
    rejected = next(q.id for q, _ in probes if kinds[q.id] == "has_header")
    for q, _ in probes:
        if q.id == rejected:
            review_question(ws, q.id, "reject", annotator="ana", reason="every table has a header", new=True)
        else:
            review_question(ws, q.id, "accept", annotator="ana", new=True)
    built = build_variant_grid(ws, GridOptions(perturbations=("none", "shuffle_rows", "transpose", "missing_value"),
                                               serializations=("csv",), write_prompts=False))
    assert built.items == len(probes) - 1
    with ws.session() as s:
        variants = list(s.exec(select(Variant)).all())
    moved = [v for v in variants if v.perturbation in MOVES_CELLS]
    assert moved and all(v.status == VariantStatus.SKIPPED for v in moved)  # they would change the answers
    assert all(v.status == VariantStatus.BUILT for v in variants if v.perturbation == "none")

    release = tmp_path / "release"
    summary = build_release(ws, ReleaseOptions(version="1.0.0", out=release, n_boot=20, serializations=("csv",)))
    base = [json.loads(line) for line in (release / "data" / "base.jsonl").read_text().splitlines()]
    assert summary.counts["base"] == len(probes) - 1 and rejected not in {r["id"] for r in base}
    gold = {q.id: a.values for q, a in probes}
    assert all(_answer_of(r).split(", ") == gold[r["id"]] or [_answer_of(r)] == gold[r["id"]] for r in base)
    assert {r["qsubtype"] for r in base} == {"StructureUnderstanding", "Grounding"}

    # A predictions file: right on every probe but the rows and range ones.
    wrong = {r["id"] for r in base if kinds[r["id"]] in ("rows", "range")}
    preds = [{"id": r["id"], "model": "m", "prediction": f"Final Answer: {'999' if r['id'] in wrong else _answer_of(r)}"}
             for r in base]
    path = tmp_path / "preds.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in preds))
    report = evaluate(EvaluateOptions(release=release, predictions=path, plots=False, out=tmp_path / "scores"))
    overall = {(r.subset, r.config): r for r in report.rows if r.level == "overall"}[("base", "base")]
    assert overall.n == len(base) and overall.normalised == round(100 * (len(base) - len(wrong)) / len(base), 2)
    by_group = {r.group: r for r in report.rows if r.subset == "base" and r.level == "subtype"}
    assert by_group["Locating_Grounding"].normalised == 100.0


def test_draw_probes_is_pure_and_matches_the_store() -> None:
    table = Table.build(["a", "b"], [["1", "x"], ["2", "x"], ["3", "y"]])
    assert [p.answer for p in draw_probes(table, "cell", 0, per_table=10)] == ["1", "2", "3", "y"]
    assert draw_probes(table, "range", 0)[0].answer == "A1:B4"
    assert draw_probes(table, "rows", 4) == draw_probes(table, "rows", 4)
    assert ProbeOptions(kinds=("rows", "cell", "rows")).kinds == ("rows", "cell")  # named twice, made once


def test_the_readme_probe_commands_run(tmp_path: Path) -> None:
    """The README's "Capability taxonomy and probes" block runs as written, in a checkout-like directory."""
    import os
    import subprocess
    import sys

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    section = text.split("\n### Capability taxonomy and probes", 1)[1]
    script = re.search(r"```bash\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]
    (tmp_path / "data").symlink_to(TABLES.parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TQAFORGE_", "OPENAI_"))}
    env.update(COLUMNS="200", PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '')}")
    result = subprocess.run(["bash", "-c", "set -euo pipefail\n" + script], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "2 tables, seed 7: 16 new probes" in result.stdout and "0 new probes, 16 already stored" in result.stdout
    assert "Grounding" in result.stdout and "Traceback" not in result.stderr


def test_agents_that_agree_with_a_probe_leave_its_gold_as_it_is(sqlite_workspace: Workspace) -> None:
    """The answering agents' vote is a rule answer too: agreeing with the probe it lands on a row of
    its own (routed keep-gold), and the probe's gold stays the gold."""
    from openai_server import OpenAIServer
    from test_answers import llm_settings, method_of, say

    from tqaforge.answers.annotate import AnswerOptions, generate_answers
    from tqaforge.schemas.enums import AnswerRoute

    ws = sqlite_workspace
    import_paths(ws, [DELIMITED[1]])  # 10 data rows
    generate_probes(ws, ProbeOptions(kinds=("rows",), seed=0))
    ((probe, gold),) = _probes(ws)
    review_question(ws, probe.id, "accept", annotator="ana", new=True)
    with OpenAIServer(lambda body: say(method_of(body["messages"][0]["content"]), "10")) as server:
        summary = generate_answers(ws, AnswerOptions(methods=("dp", "tcot")), llm_settings(server))  # type: ignore[arg-type]
    assert summary.kept_gold == 1
    with ws.session() as s:
        answers = {a.id: a for a in s.exec(select(Answer).where(Answer.question_id == probe.id)).all()}
        trusted = trusted_answers(s, [probe.id])[probe.id]
    assert len(answers) == 2 and answers[gold.id].status == AnswerStatus.GOLD and trusted.id == gold.id
    (vote,) = [a for a in answers.values() if a.id != gold.id]
    assert (vote.status, vote.route, vote.values) == (AnswerStatus.CONSISTENT, AnswerRoute.KEEP_GOLD, ["10"])

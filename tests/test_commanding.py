"""Commanding (table editing) items: made from edits whose targets are checked by pandas, read
from JSON Lines, imported, released, and a predictions file with known edits scored by TEDS."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from tqaforge.cli import app
from tqaforge.evaluate.harness import EvaluateOptions, evaluate
from tqaforge.ingest import ImportOptions, import_paths
from tqaforge.release.build import ReleaseOptions, build_release
from tqaforge.store import Workspace
from tqaforge.tables.commanding import (
    OPERATIONS,
    CommandItem,
    canonical_table_text,
    make_commanding_items,
    table_of_canonical_text,
)
from tqaforge.tables.readers import read_path
from tqaforge.tables.serialize import serialize
from tqaforge.tables.table import Table
from tqaforge.tables.teds import teds

CITIES = Table.build(
    ["city", "country", "population", "founded"],
    [["Oslo", "Norway", "709000", "1040"], ["Bergen", "Norway", "285900", "1070"],
     ["New York", "United States", "8336817", "1624"], ["Sao Paulo", "Brazil", "12325232", "1554"]],
)


def _frame(t: Table) -> pd.DataFrame:
    return pd.DataFrame([list(r) for r in t.rows], columns=list(t.header), dtype=str)


def _table(df: pd.DataFrame) -> Table:
    return Table.build(list(df.columns), df.astype(str).values.tolist())


def _expected(item: CommandItem, df: pd.DataFrame) -> pd.DataFrame:
    """The target computed by pandas from the instruction's parameters (read from the instruction)."""
    text = item.instruction
    names = [n for n in df.columns if f"'{n}'" in text]
    op = item.operation
    if op == "remove_column":
        return df.drop(columns=names)
    if op == "swap_columns":
        a, b = names
        cols = list(df.columns)
        i, j = cols.index(a), cols.index(b)
        cols[i], cols[j] = cols[j], cols[i]
        return df[cols]
    if op == "reorder_columns":
        order = sorted(df.columns, key=lambda n: text.index(f"'{n}'"))
        return df[order]
    if op == "sort_rows":
        (name,) = names
        return df.assign(_k=df[name].str.replace(",", "").astype(float)).sort_values("_k", kind="stable").drop(columns="_k")
    if op == "add_column":
        (name,) = [n for n in df.columns if f"values of the column '{n}'" in text]
        return df.assign(**{f"{name} (copy)": df[name]})
    if op == "merge_columns":
        a, b = sorted(names, key=lambda n: list(df.columns).index(n))
        merged = (df[a] + " " + df[b]).str.strip()
        out = df.drop(columns=[b]).rename(columns={a: f"{a} {b}"})
        out[f"{a} {b}"] = merged
        return out
    if op == "split_column":
        (name,) = [n for n in df.columns if text.startswith(f"Split the column '{n}'")]
        parts = df[name].str.partition(" ")
        out = df.copy()
        at = list(df.columns).index(name)
        out.insert(at + 1, f"{name} (2)", parts[2])
        out[name] = parts[0]
        return out.rename(columns={name: f"{name} (1)"})
    numbers = [int(w) for w in text.replace(",", " ").replace(".", " ").split() if w.isdigit()]
    if op == "remove_row":
        return df.drop(index=numbers[0] - 1)
    if op == "swap_rows":
        i, j = numbers[0] - 1, numbers[1] - 1
        order = list(range(len(df)))
        order[i], order[j] = j, i
        return df.iloc[order]
    if op == "add_row":
        values = text.split("with the values ", 1)[1].split(" (one per column")[0].split(" | ")
        return pd.concat([df, pd.DataFrame([values], columns=df.columns)])
    raise AssertionError(op)


def test_every_operation_gives_the_target_pandas_computes() -> None:
    items = make_commanding_items(CITIES, seed=3)
    assert {i.operation for i in items} == set(OPERATIONS)
    for item in items:
        assert item.source == CITIES and item.target != CITIES
        assert item.target == _table(_expected(item, _frame(CITIES))), item.instruction


def test_the_same_seed_gives_the_same_items_and_seeds_differ() -> None:
    first = make_commanding_items(CITIES, seed=3)
    assert make_commanding_items(CITIES, seed=3) == first
    others = [make_commanding_items(CITIES, seed=s) for s in range(4, 12)]
    assert any(o != first for o in others)
    assert len({i.id for i in first}) == len(first)


def test_operations_that_do_not_apply_are_skipped() -> None:
    one = Table.build(["a", "a"], [["x", "y"]])  # repeated names, one row, no space
    assert {i.operation for i in make_commanding_items(one, seed=1)} <= {"add_row", "remove_row"}


def test_canonical_text_round_trips() -> None:
    text = canonical_table_text(CITIES.with_metadata(caption="left out"))
    assert json.loads(text) == {"header": list(CITIES.header), "rows": [list(r) for r in CITIES.rows]}
    assert table_of_canonical_text(text) == CITIES
    assert table_of_canonical_text("Oslo") is None and table_of_canonical_text('{"header": 1}') is None


def _jsonl(path: Path, items: list[CommandItem]) -> Path:
    path.write_text("".join(json.dumps(i.to_json(), ensure_ascii=False) + "\n" for i in items), encoding="utf-8")
    return path


def test_the_jsonl_file_is_read_with_the_target_as_gold(tmp_path: Path) -> None:
    items = make_commanding_items(CITIES, seed=3)
    result = read_path(_jsonl(tmp_path / "edits.jsonl", items))  # the format told by the first line
    assert result.format == "commanding" and len(result.records) == len(items)
    for record, item in zip(result.records, items):
        (q,) = record.items
        assert record.table == CITIES and q.subtype == "Commanding" and q.source_id == item.id
        assert q.question == item.instruction and table_of_canonical_text(q.answers[0]) == item.target
        assert q.meta["operation"] == item.operation


def _replies(base: list[dict], items: dict[str, CommandItem]) -> tuple[list[dict], list[float], list[float]]:
    """Replies of known quality, round robin: the exact target (markdown in prose), the source
    unchanged (html), the target with one cell changed (csv in a fence), no table at all."""
    preds, want, want_structure = [], [], []
    for k, row in enumerate(base):
        item = items[row["source_id"]]
        kind = k % 4
        if kind == 0:
            reply, returned = f"Here is the edited table:\n\n{serialize(item.target, 'markdown')}\n", item.target
        elif kind == 1:
            reply, returned = serialize(item.source, "html"), item.source
        elif kind == 2:
            rows = [list(r) for r in item.target.rows]
            rows[0][0] = rows[0][0] + "x"
            returned = Table.build(item.target.header, rows)
            reply = f"```csv\n{serialize(returned, 'csv')}\n```"
        else:
            reply, returned = "I cannot edit tables, sorry.", None
        preds.append({"id": row["id"], "model": "m", "method": "DP", "prediction": reply})
        want.append(0.0 if returned is None else teds(returned, item.target))
        want_structure.append(0.0 if returned is None else teds(returned, item.target, structure_only=True))
    return preds, want, want_structure


def test_known_edits_are_scored_end_to_end_by_teds(sqlite_workspace: Workspace, tmp_path: Path) -> None:
    items = make_commanding_items(CITIES, seed=3) + make_commanding_items(
        Table.build(["name", "score"], [["Ann Lee", "3"], ["Bo", "1"], ["Cy Ray", "2"]]), seed=5)
    summary = import_paths(sqlite_workspace, [_jsonl(tmp_path / "edits.jsonl", items)], ImportOptions(format="commanding"))
    assert not summary.failed
    release = tmp_path / "release"
    build_release(sqlite_workspace, ReleaseOptions(version="1.0.0", out=release, serializations=("csv",)))
    base = [json.loads(line) for line in (release / "data" / "base.jsonl").read_text().splitlines()]
    assert len(base) == len(items)
    preds, want, want_structure = _replies(base, {i.id: i for i in items})
    assert 0.0 in want and 1.0 in want and any(0 < w < 1 for w in want)
    path = tmp_path / "preds.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in preds))
    report = evaluate(EvaluateOptions(release=release, predictions=path, out=tmp_path / "out", plots=False))
    overall = next(r for r in report.rows if r.level == "overall")
    assert overall.metric == "TEDS" and overall.n == len(items)
    assert overall.tablebench == pytest.approx(round(sum(want) / len(want) * 100, 2), abs=0.011)
    assert overall.normalised == overall.tablebench
    assert overall.teds_structure == pytest.approx(round(sum(want_structure) / len(want_structure) * 100, 2), abs=0.011)
    assert overall.parse == pytest.approx(round(sum(1 for k in range(len(base)) if k % 4 != 3) / len(base) * 100, 2), abs=0.011)
    assert any("TEDS structure only" in line for line in report.lines())


def test_the_import_command_reads_commanding_files(sqlite_workspace: Workspace, tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "edits.jsonl", make_commanding_items(CITIES, seed=3))
    result = CliRunner().invoke(app, ["tables", "import", str(path), "--workspace", str(sqlite_workspace.root)])
    assert result.exit_code == 0, result.output
    output = " ".join(result.output.split())
    assert "imported 1 tables, 10 questions, 10 answers" in output
    # The workspace's taxonomy (tablebench) has no commanding subtype: kept aside, said so.
    assert "10 questions stored without a subtype" in output


def test_the_commanding_command_writes_items_the_import_reads(sqlite_workspace: Workspace, tmp_path: Path) -> None:
    tables = Path(__file__).resolve().parents[1] / "data" / "tables"
    files = [str(tables / "wtq_football_league_table.csv"), str(tables / "tablebench_tourism_2011.md")]
    out = tmp_path / "edits.jsonl"
    made = CliRunner().invoke(app, ["tables", "commanding", *files, "--out", str(out), "--seed", "7",
                                    "--operations", "remove_column,swap_rows,sort_rows"])
    assert made.exit_code == 0, made.output
    lines = out.read_text(encoding="utf-8").splitlines()
    assert 2 <= len(lines) <= 6 and f"{len(lines)} commanding items from 2 tables" in " ".join(made.output.split())
    again = tmp_path / "again.jsonl"
    CliRunner().invoke(app, ["tables", "commanding", *files, "--out", str(again), "--seed", "7",
                             "--operations", "remove_column,swap_rows,sort_rows"])
    assert again.read_bytes() == out.read_bytes()  # the same seed, the same file
    result = CliRunner().invoke(app, ["tables", "import", str(out), "--workspace", str(sqlite_workspace.root)])
    assert result.exit_code == 0 and f"{len(lines)} questions, {len(lines)} answers" in " ".join(result.output.split())
    bad = CliRunner().invoke(app, ["tables", "commanding", files[0], "--out", str(out), "--operations", "explode"])
    assert bad.exit_code == 1 and "unknown commanding operation(s): explode" in bad.output and "Traceback" not in bad.output


def test_the_variant_grid_gives_commanding_items_only_the_unperturbed_table(sqlite_workspace: Workspace, tmp_path: Path) -> None:
    """A commanding item's gold is the edit of its original table: the grid builds only ``none`` for
    it (every serialization) and skips the rest, saying so; control: an ordinary item (a TableBench
    aggregation question) in the same build gets every perturbation."""
    from sqlmodel import select

    from tqaforge.schemas.enums import VariantStatus
    from tqaforge.schemas.records import Question, Variant
    from tqaforge.variants.grid import COMMANDING_SKIP, GridOptions, build_variant_grid, read_meta

    ws = sqlite_workspace
    items = make_commanding_items(CITIES, seed=3, operations=["swap_columns", "remove_row", "sort_rows"])
    assert len(items) == 3
    control = tmp_path / "control.jsonl"
    control.write_text((Path(__file__).resolve().parents[1] / "data" / "sample" / "tablebench_sample.jsonl").read_text().splitlines()[0] + "\n")
    assert not import_paths(ws, [_jsonl(tmp_path / "edits.jsonl", items), control]).failed
    with ws.session() as s:
        ordinary = s.exec(select(Question.id).where(Question.subtype == "Aggregation")).one()
    perturbations = ("none", "shuffle_rows", "shuffle_columns", "transpose", "insert_empty_rows", "duplicate_rows")
    prompts = tmp_path / "prompts.jsonl"
    options = GridOptions(perturbations=perturbations, serializations=("csv", "markdown"), seeds=(0, 1),
                          status=None, out=prompts)
    summary = build_variant_grid(ws, options)
    assert summary.items == 4 and summary.commanding == 3
    assert summary.commanding_skipped == {p: 3 for p in perturbations[1:]}
    text = "\n".join(summary.lines())
    assert ("3 commanding items (gold is a table): only the unperturbed table, in every serialization; skipped for them: "
            "duplicate_rows 3, insert_empty_rows 3, shuffle_columns 3, shuffle_rows 3, transpose 3") in text

    with ws.session() as s:
        variants = list(s.exec(select(Variant)).all())
    for v in variants:
        if v.question_id == ordinary:
            assert v.status == VariantStatus.BUILT, (v.perturbation, v.skip_reason)  # the control: every perturbation
        elif v.perturbation == "none":
            assert v.status == VariantStatus.BUILT and Table.from_dict(v.table or {}) == CITIES
        else:
            assert v.status == VariantStatus.SKIPPED and v.skip_reason == COMMANDING_SKIP
    assert {v.perturbation for v in variants if v.question_id == ordinary} == set(perturbations)
    lines = [json.loads(line) for line in prompts.read_text().splitlines()]
    commanding = [p for p in lines if p["question_id"] != ordinary]
    assert sorted((p["perturbation"], p["serialization"]) for p in commanding) == sorted(
        [("none", "csv"), ("none", "markdown")] * 3)
    assert len([p for p in lines if p["question_id"] == ordinary]) == 2 * (1 + 2 * 4 + 1)  # transpose is seed-free
    assert read_meta(prompts) is not None

    again = build_variant_grid(ws, GridOptions(perturbations=perturbations, serializations=("csv",), seeds=(0, 1),
                                               status=None, write_prompts=False))
    assert again.variants_new == 0 and again.commanding == 3 and again.commanding_skipped == summary.commanding_skipped


def test_replies_with_fenced_tables_start_no_sandbox(sqlite_workspace: Workspace, tmp_path: Path) -> None:
    """Commanding replies fence their tables (```csv, a bare fence round a markdown table): no
    program runs, so no sandbox starts. Control: a fenced Python reply counts as a program."""
    from tqaforge.evaluate.predictions import Prediction
    from tqaforge.evaluate.scoring import code_predictions

    items = make_commanding_items(CITIES, seed=3)
    assert not import_paths(sqlite_workspace, [_jsonl(tmp_path / "edits.jsonl", items)], ImportOptions(format="commanding")).failed
    release = tmp_path / "release"
    build_release(sqlite_workspace, ReleaseOptions(version="1.0.0", out=release, subsets=("base",)))
    base = [json.loads(line) for line in (release / "data" / "base.jsonl").read_text().splitlines()]
    by_id = {i.id: i for i in items}
    fences = ["```csv\n{}\n```", "```\n{}\n```", "~~~markdown\n{}\n~~~"]
    preds = [{"id": r["id"], "model": "m", "method": "DP",
              "prediction": fences[k % 3].format(serialize(by_id[r["source_id"]].target, "csv" if k % 3 == 0 else "markdown"))}
             for k, r in enumerate(base)]
    path = tmp_path / "preds.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in preds))
    started: list[bool] = []

    def factory():  # type: ignore[no-untyped-def]
        started.append(True)
        raise AssertionError("no sandbox should start")

    report = evaluate(EvaluateOptions(release=release, predictions=path, out=tmp_path / "out", plots=False), sandbox_factory=factory)
    overall = next(r for r in report.rows if r.level == "overall")
    assert overall.metric == "TEDS" and overall.normalised == 100.0 and report.programs_run == 0
    assert started == []
    as_prediction = [Prediction(i, "x", "m", "DP", p["prediction"]) for i, p in enumerate(preds)]
    assert code_predictions(as_prediction) == 0
    code = "```python\nimport pandas as pd\nprint(pd.read_csv('table.csv').shape)\n```"
    assert code_predictions([*as_prediction, Prediction(0, "x", "m", "DP", code), Prediction(1, "y", "m", "PoT", "none")]) == 2

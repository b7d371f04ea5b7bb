"""Hostile inputs to probes: an empty table, a one-column table, a table whose every value repeats,
duplicate and blank headers, look-alike values, a wide and a long table, bad options, and re-runs
after people reviewed (nothing of theirs is undone)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cpu_clock import cpu_now
from openpyxl.utils import get_column_letter
from sqlmodel import select
from typer.testing import CliRunner

from tqaforge.annotation.review import review_question
from tqaforge.cli import app
from tqaforge.errors import NotFound
from tqaforge.generation.probes import ProbeError, ProbeOptions, ProbeSkipped, draw_probes, generate_probes
from tqaforge.ingest import ImportOptions, import_paths
from tqaforge.schemas.enums import QuestionStatus
from tqaforge.schemas.records import Answer, Question, TableRecord
from tqaforge.store import Workspace
from tqaforge.tables.table import Table


def _tablebench(path: Path, tables: list[tuple[list[str], list[list[str]]]]) -> Path:
    """A TableBench-format file (its reader keeps empty tables and duplicate or blank headers)."""
    lines = [json.dumps({"id": f"t{i}", "qtype": "FactChecking", "qsubtype": "MatchBased", "question": "q?",
                         "answer": "a", "table": {"columns": header, "data": rows}})
             for i, (header, rows) in enumerate(tables)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _import(ws: Workspace, path: Path) -> dict[tuple[str, ...], str]:
    outcome = import_paths(ws, [path], ImportOptions(strict_headers=False))
    assert not outcome.failed, outcome.failures()
    with ws.session() as s:
        return {tuple(t.header): t.id for t in s.exec(select(TableRecord)).all()}


def _answers(ws: Workspace, table_id: str) -> dict[str, list[tuple[str, list[str]]]]:
    """Probe kind -> [(question, gold values)] of one table."""
    out: dict[str, list[tuple[str, list[str]]]] = {}
    with ws.session() as s:
        for q in s.exec(select(Question).where(Question.table_id == table_id, Question.origin == "rule")).all():
            a = s.exec(select(Answer).where(Answer.question_id == q.id)).one()
            out.setdefault(q.meta["probe"]["kind"], []).append((q.text, a.values))  # type: ignore[index]
    return out


def test_an_empty_table_gets_every_probe_but_a_cell_and_says_why(sqlite_workspace: Workspace, tmp_path: Path) -> None:
    ws = sqlite_workspace
    # No reader stores a table without rows (import refuses it); a store may hold one all the same
    # (written by another tool or a later table generator), so it is stored here directly.
    empty = Table.build(["name", "year", "score"], [])
    with ws.session() as s:
        s.add(TableRecord(id=empty.id, header=list(empty.header), rows=[], n_rows=0, n_cols=3, numeric_share=0.0))
    ids = {empty.header: empty.id}
    summary = generate_probes(ws, ProbeOptions(seed=1))
    got = _answers(ws, ids[("name", "year", "score")])
    assert got["rows"][0][1] == ["0"] and got["columns"][0][1] == ["3"] and got["range"][0][1] == ["A1:C1"]
    assert got["has_header"][0][1] == ["yes"] and "cell" not in got
    assert [(s.kind, s.reason) for s in summary.skipped] == [("cell", "the table has no data rows: no cell probe can be asked")]
    assert any("skipped cell" in line and "no data rows" in line for line in summary.lines())


def test_a_table_of_blank_cells_and_blank_headers(sqlite_workspace: Workspace, tmp_path: Path) -> None:
    ws = sqlite_workspace
    ids = _import(ws, _tablebench(tmp_path / "blank.jsonl", [(["", " "], [["", ""], [" ", ""]])]))
    summary = generate_probes(ws, ProbeOptions(seed=0))
    got = _answers(ws, ids[("", " ")])
    assert got["has_header"][0][1] == ["no"] and got["rows"][0][1] == ["2"] and got["range"][0][1] == ["A1:B3"]
    reasons = {s.kind: s.reason for s in summary.skipped}
    assert reasons == {"header": "every header name is blank: no header probe can be asked",
                       "cell": "every data cell is empty: no cell probe can be asked"}


def test_a_one_column_table(sqlite_workspace: Workspace, tmp_path: Path) -> None:
    ws = sqlite_workspace
    path = tmp_path / "one.csv"
    path.write_text("city\nOslo\nBergen\nOslo\nTromsø\n", encoding="utf-8")
    ids = _import(ws, path)
    generate_probes(ws, ProbeOptions(seed=4, per_table=5))
    got = _answers(ws, ids[("city",)])
    assert got["columns"][0][1] == ["1"] and got["range"][0][1] == ["A1:A5"] and got["rows"][0][1] == ["4"]
    assert got["header"] == [(got["header"][0][0], ["city"])] and "column 1" in got["header"][0][0]
    # Oslo is there twice: only Bergen (row 2) and Tromsø (row 4) may be asked for.
    assert sorted((text.split("row ")[1].split()[0].strip("?,"), values[0]) for text, values in got["cell"]) == [
        ("2", "Bergen"), ("4", "Tromsø")]


def test_a_table_whose_every_value_repeats_gets_no_cell_probe(sqlite_workspace: Workspace, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    ws = sqlite_workspace
    # Look-alikes repeat too: case and spacing do not make a value unambiguous.
    _import(ws, _tablebench(tmp_path / "rep.jsonl", [(["a", "b"], [["x", "Y"], ["X ", "y"], ["x", "  y"]])]))
    summary = generate_probes(ws, ProbeOptions(kinds=("cell",), seed=0))
    assert summary.failed and not summary.new
    assert "every non-empty cell's value appears elsewhere in the table" in "\n".join(summary.lines())
    with ws.session() as s:
        assert s.exec(select(Question).where(Question.origin == "rule")).all() == []
    monkeypatch.chdir(ws.root)
    result = CliRunner().invoke(app, ["generate", "probes", "--kinds", "cell"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "ambiguous" in result.output and "no probe could be made" in result.output


def test_duplicate_headers_are_asked_by_number(sqlite_workspace: Workspace, tmp_path: Path) -> None:
    ws = sqlite_workspace
    header = ["team", "team", 'say "hi"', "points"]
    rows = [["Ajax", "PSV", "a1", "10"], ["Feyenoord", "Utrecht", "a2", "11"], ["AZ", "Twente", "a3", "12"]]
    ids = _import(ws, _tablebench(tmp_path / "dup.jsonl", [(header, rows)]))
    generate_probes(ws, ProbeOptions(kinds=("header", "cell"), seed=0, per_table=12))
    got = _answers(ws, ids[tuple(header)])
    assert sorted(v[0] for _, v in got["header"]) == sorted(header)
    assert len(got["cell"]) == 12  # every cell is unique
    for text, values in got["cell"]:
        row = int(text.split("row ")[1].split()[0].strip("?,"))
        if 'the "points" column' in text:
            col = 3
        else:  # a repeated name, or one with a quote, is named by its number
            assert '"team"' not in text and '"hi"' not in text
            col = int(text.split("column ")[1].split()[0].strip("?,")) - 1
        assert values == [rows[row - 1][col]], text


def test_a_wide_and_a_long_table(sqlite_workspace: Workspace, tmp_path: Path) -> None:
    ws = sqlite_workspace
    wide = ([f"c{i}" for i in range(30)], [[f"{r}-{c}" for c in range(30)] for r in range(3)])
    long = (["k", "v", "w", "z"], [[str(i), str(i % 7), "same", f"z{i}"] for i in range(20_000)])
    ids = _import(ws, _tablebench(tmp_path / "big.jsonl", [wide, long]))
    start = cpu_now()
    summary = generate_probes(ws, ProbeOptions(seed=8, per_table=3))
    assert cpu_now() - start < 20 and not summary.skipped
    got_wide, got_long = _answers(ws, ids[tuple(wide[0])]), _answers(ws, ids[tuple(long[0])])
    assert got_wide["range"][0][1] == [f"A1:{get_column_letter(30)}4"] == ["A1:AD4"]
    assert got_long["range"][0][1] == ["A1:D20001"] and got_long["rows"][0][1] == ["20000"]
    for text, values in got_long["cell"]:  # only the unique columns k (numbers >= 7) and z
        assert values[0].startswith("z") or int(values[0]) >= 7, text


@pytest.mark.parametrize(("options", "message"), [
    ({"kinds": ("rows", "colums")}, "unknown probe kind(s) 'colums'"),
    ({"kinds": ()}, "give at least one probe kind"),
    ({"seed": -1}, "seed -1 is outside 0..2147483647"),
    ({"seed": 2**31}, "seed 2147483648 is outside"),
    ({"per_table": 0}, "per_table must be at least 1"),
    ({"capability": "Counting"}, "'Counting' is not a capability"),
])
def test_bad_options_say_what_and_what_to_do(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ProbeError) as info:
        ProbeOptions(**options)
    assert message in str(info.value)
    if "kind" in message:
        assert "rows, columns, header, cell, range, has_header" in str(info.value)


def test_no_tables_or_an_unknown_table(sqlite_workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = sqlite_workspace
    with pytest.raises(ProbeError, match="no tables to probe") as info:
        generate_probes(ws, ProbeOptions())
    assert "tqaforge tables import" in str(info.value)
    _import(ws, _tablebench(tmp_path / "t.jsonl", [(["a"], [["1"]])]))
    with pytest.raises(NotFound, match="no TableRecord with id 'ffff'"):
        generate_probes(ws, ProbeOptions(tables=("ffff",)))
    monkeypatch.chdir(ws.root)
    result = CliRunner().invoke(app, ["generate", "probes", "--kinds", "rows,nope"])
    assert result.exit_code != 0 and "unknown probe kind(s) 'nope'" in result.output and "Traceback" not in result.output
    with pytest.raises(ProbeError, match="unknown probe kind"):
        draw_probes(Table.build(["a"], [["1"]]), "rowz", 0)
    with pytest.raises(ProbeSkipped):
        draw_probes(Table.build(["a"], [["1"], ["1"]]), "cell", 0)


def test_a_rerun_never_undoes_a_review(sqlite_workspace: Workspace, tmp_path: Path) -> None:
    ws = sqlite_workspace
    _import(ws, _tablebench(tmp_path / "t.jsonl", [(["name", "n"], [["a", "1"], ["b", "2"], ["c", "3"]])]))
    generate_probes(ws, ProbeOptions(kinds=("rows", "columns"), seed=0))
    with ws.session() as s:
        probes = {q.meta["probe"]["kind"]: q for q in s.exec(select(Question).where(Question.origin == "rule")).all()}  # type: ignore[index]
    rows_q, cols_q = probes["rows"], probes["columns"]
    review_question(ws, rows_q.id, "reject", annotator="ana", reason="too easy", new=True)
    review_question(ws, cols_q.id, "edit", annotator="ana", text="How many columns are in the table?")
    again = generate_probes(ws, ProbeOptions(kinds=("rows", "columns"), seed=0))
    assert not again.new and sum(again.present.values()) == 2
    with ws.session() as s:
        stored = {q.id: q for q in s.exec(select(Question)).all() if q.origin == "rule"}
        assert len(stored) == 2 and len(s.exec(select(Answer)).all()) == 2 + 1  # the imported item's answer
    assert stored[rows_q.id].status == QuestionStatus.REJECTED
    assert stored[cols_q.id].text == "How many columns are in the table?"


def test_stored_counts_that_lie_and_stored_tables_that_cannot_be_read(sqlite_workspace: Workspace) -> None:
    """Probes count the stored rows themselves, never the n_rows/n_cols columns; a stored table that
    is not a table (ragged rows, no columns) is skipped with the reason, and the others still get probes."""
    ws = sqlite_workspace
    good = Table.build(["a", "b"], [["1", "2"], ["3", "4"]])
    with ws.session() as s:
        s.add(TableRecord(id=good.id, header=["a", "b"], rows=[["1", "2"], ["3", "4"]], n_rows=99, n_cols=7, numeric_share=1.0))
        s.add(TableRecord(id="0" * 32, header=["a", "b"], rows=[["1", "2"], ["3"]], n_rows=2, n_cols=2, numeric_share=1.0))
        s.add(TableRecord(id="1" * 32, header=[], rows=[], n_rows=0, n_cols=0, numeric_share=0.0))
    summary = generate_probes(ws, ProbeOptions(kinds=("rows", "columns", "range"), seed=0))
    got = _answers(ws, good.id)
    assert (got["rows"][0][1], got["columns"][0][1], got["range"][0][1]) == (["2"], ["2"], ["A1:B3"])
    reasons = {(s.table_id, s.reason) for s in summary.skipped}
    assert reasons == {("0" * 32, "the stored table cannot be read: row 2 has 1 cells but the header has 2 columns"),
                       ("1" * 32, "the stored table cannot be read: table has no columns")}
    assert len(summary.skipped) == 6 and not summary.failed and sum(summary.new.values()) == 3


def test_long_and_multiline_header_names_are_asked_by_number() -> None:
    header = ["n" * 81, "two\nlines", "ok"]
    table = Table.build(header, [["a", "b", "c"], ["d", "e", "f"]])
    probes = draw_probes(table, "cell", 0, per_table=6)
    assert len(probes) == 6
    for p in probes:
        col = p.params["column"] - 1
        assert ('the "ok" column' in p.text) == (col == 2) and "\n" not in p.text and "nnnn" not in p.text
        assert p.answer == table.cell(p.params["row"] - 1, col) and f"row {p.params['row']}" in p.text


# --- the large-table set ------------------------------------------------------------------------


@pytest.mark.parametrize(("options", "message"), [
    ({"per_bucket": 0}, "tables per bucket must be a whole number of at least 1"),
    ({"per_bucket": True}, "tables per bucket must be a whole number"),
    ({"buckets": ()}, "give at least one token bucket"),
    ({"buckets": ("64k",)}, "unknown token bucket '64k'"),
    ({"kinds": ("rows", "nope")}, "unknown probe kind(s) 'nope'"),
    ({"serialization": "yaml"}, "unknown serialization 'yaml'"),
    ({"encoding": "gpt2"}, "unknown token encoding 'gpt2'"),
    ({"seed": -1}, "seed -1 is outside"),
])
def test_bad_large_table_options_say_what(options: dict[str, Any], message: str) -> None:
    from tqaforge.errors import TqaforgeError
    from tqaforge.generation.large_tables import LargeTableOptions

    with pytest.raises(TqaforgeError) as caught:
        LargeTableOptions(**options)
    assert message in str(caught.value)


def test_the_large_table_set_on_empty_and_rowless_workspaces(sqlite_workspace: Workspace, tmp_path: Path) -> None:
    """No tables: a clear error. Only a table without rows: nothing can be grown, every bucket says
    why, the run fails (exit 1 from the CLI) and stores nothing but that table's own probes."""
    from tqaforge.generation.large_tables import LargeTableOptions, generate_large_table_probes

    ws = sqlite_workspace
    with pytest.raises(ProbeError, match="no tables to probe"):
        generate_large_table_probes(ws, LargeTableOptions())
    empty = Table.build(["a", "b"], [])  # stored directly: import refuses a table without rows
    with ws.session() as s:
        s.add(TableRecord(id=empty.id, header=list(empty.header), rows=[], n_rows=0, n_cols=2, numeric_share=0.0))
    summary = generate_large_table_probes(ws, LargeTableOptions(buckets=("<4k", ">32k"), kinds=("rows",)))
    small, large = summary.buckets
    assert small.new == 1 and large.tables == [] and large.grown is None
    assert "none with rows below 32768 tokens could be grown" in large.note
    with ws.session() as s:
        assert len(s.exec(select(TableRecord)).all()) == 1
    result = CliRunner().invoke(app, ["generate", "probes", "--large-table", "--buckets", ">32k", "--workspace", str(ws.root)])
    assert result.exit_code == 1 and "no probe could be made" in result.output
    result = CliRunner().invoke(app, ["generate", "probes", "--large-table", "--capability", "Grounding", "--workspace", str(ws.root)])
    assert result.exit_code == 2 and "--capability does not go with --large-table" in result.output


def test_growing_only_makes_tables_larger(workspace: Workspace, tmp_path: Path) -> None:
    """An empty <4k bucket (every table is larger) is reported, not grown into; a table grown once is
    never grown again (origin rule): the source of a growth is a table of the workspace's own."""
    from tqaforge.generation.large_tables import LargeTableOptions, generate_large_table_probes
    from tqaforge.schemas.enums import Origin

    ws = workspace
    _import(ws, _tablebench(tmp_path / "t.jsonl", [(["k", "v"], [[f"key {i}", "x" * 40] for i in range(420)])]))
    summary = generate_large_table_probes(ws, LargeTableOptions(buckets=("<4k", "8-16k", ">32k"), kinds=("rows",)))
    low, middle, high = summary.buckets
    assert low.tables == [] and "growing a table only makes it larger" in low.note
    assert middle.grown is not None and high.grown is not None
    assert middle.grown.source_id == high.grown.source_id  # not the 8-16k table grown before it
    with ws.session() as s:
        origin = {t.id: t.origin for t in s.exec(select(TableRecord)).all()}
    assert origin[high.grown.source_id] != Origin.RULE

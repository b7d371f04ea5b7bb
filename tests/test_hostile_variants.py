"""Hostile inputs for the variant grid, its prompts file and the read-only listings (issue 10)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import wait_for
from sqlalchemy import event
from sqlmodel import select

from tqaforge.queries import ListingError, Page, list_questions, list_tables, list_variants, show_table
from tqaforge.schemas.records import Answer, Question, TableRecord, Variant
from tqaforge.store import Workspace
from tqaforge.variants.grid import (
    GridError,
    GridSpec,
    OutputPathError,
    PromptsFileConflict,
    PromptsOptions,
    build_variants,
    check_output_path,
    check_prompts_target,
    load_items,
    meta_path,
    parse_seeds,
    write_prompts,
)
from tqaforge.variants.view import LEGEND, show_variant

pytestmark = pytest.mark.hostile

SMALL = GridSpec(("csv", "markdown"), ("none", "shuffle_rows", "transpose"), (0,))


def _statements(ws: Workspace) -> list[str]:
    """Every SQL statement the workspace's engine sends from now on (a real listener, no mock)."""
    seen: list[str] = []
    event.listen(ws.engine, "before_cursor_execute", lambda conn, cur, stmt, *a: seen.append(stmt))
    return seen


def _store_table(ws: Workspace, table_id: str, n_rows: int, n_cols: int) -> None:
    header = [f"c{j}" for j in range(n_cols)]
    rows = [[f"{i}:{j}" for j in range(n_cols)] for i in range(n_rows)]
    with ws.session() as s:
        s.add(TableRecord(id=table_id, header=header, rows=rows, n_rows=n_rows, n_cols=n_cols, numeric_share=0.0))


def _store_items(ws: Workspace, n_tables: int = 8, per_table: int = 5) -> None:
    """Accepted questions with gold answers and relevant cells, stored directly (the importer
    is not what these tests are about)."""
    with ws.session() as s:
        for k in range(n_tables):
            header = ["name", "a", "b", "c"]
            rows = [[f"p{k}-{i}", str(i + k), str(2 * i + k), str(3 * i)] for i in range(8)]
            table_id = f"table{k:03}"
            s.add(TableRecord(id=table_id, header=header, rows=rows, n_rows=8, n_cols=4, numeric_share=0.75))
            s.flush()
            for q in range(per_table):
                text = f"What is the a value of p{k}-{q}?"
                qid = Question.make_id(table_id, text, "MatchBased")
                s.add(Question(id=qid, table_id=table_id, text=text, subtype="MatchBased", status="accepted",
                               relevant_cells=[[q, 1]]))
                s.flush()
                s.add(Answer(id=Answer.make_id(qid, "import", [str(q + k)]), question_id=qid, value=str(q + k), values=[str(q + k)]))


def _build(ws: Workspace, path: Path, options: PromptsOptions, **kw: object):
    items = load_items(ws, subtype=options.subtype, status=options.status, limit=options.limit)
    return write_prompts(ws, path, options, lambda fh: build_variants(ws, items, options.spec, prompts=fh), **kw)  # type: ignore[arg-type]


# --- 1. a seed the store cannot hold -----------------------------------------------------------


def test_huge_seed_is_refused_before_anything_is_written(workspace):
    """Case: `variants build --seeds 99999999999999999999999999999` raised OverflowError."""
    _store_items(workspace)
    with pytest.raises(GridError, match="outside 0..2147483647") as err:
        parse_seeds("99999999999999999999999999999")
    assert "--seeds" in str(err.value)
    for bad in ((10**29,), (-1,), (2**31,), (True,)):
        with pytest.raises(GridError, match="outside"):
            GridSpec(("csv",), ("shuffle_rows",), bad)  # type: ignore[arg-type]
    with pytest.raises(GridError, match="not an integer"):
        parse_seeds("1,x")
    with pytest.raises(GridError, match="at least one perturbation"):
        GridSpec(("csv",), (), (0,))
    with pytest.raises(GridError, match="--limit"):
        load_items(workspace, limit=0)
    assert parse_seeds(" 0, 2147483647,0") == (0, 2**31 - 1)
    with workspace.session() as s:
        assert s.exec(select(Variant)).first() is None


# --- 2. a bad --out, found before the build ------------------------------------------------------


def test_out_pointing_at_a_directory_or_missing_folder_is_refused_first(tmp_path):
    """Case: `--out` at a directory or in a missing folder failed only after the variants were committed."""
    with pytest.raises(OutputPathError, match="is a directory") as err:
        check_output_path(tmp_path)
    assert "--out" in str(err.value)
    with pytest.raises(OutputPathError, match="does not exist") as err:
        check_output_path(tmp_path / "missing" / "prompts.jsonl")
    assert "--out" in str(err.value)
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(OutputPathError, match="not a regular file"):
        check_output_path(fifo)
    assert check_output_path(tmp_path / "ok.jsonl") == (tmp_path / "ok.jsonl").resolve()


# --- 3. two builds at once -------------------------------------------------------------------------

_WORKER = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    from tqaforge.store import open_workspace
    from tqaforge.variants.grid import GridSpec, PromptsOptions, build_variants, load_items, write_prompts

    root, out, go = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    ws = open_workspace(root)
    options = PromptsOptions(GridSpec(("csv", "markdown", "html"), ("none", "shuffle_rows", "shuffle_columns", "transpose"), (0, 1)))
    items = load_items(ws)
    (go.parent / f"ready-{os.getpid()}").touch()
    while not go.exists():  # start both builds at the same moment
        time.sleep(0.005)
    summary = write_prompts(ws, out, options, lambda fh: build_variants(ws, items, options.spec, prompts=fh))
    print(json.dumps({"prompts": summary.prompts, "new": summary.variants_new, "present": summary.variants_present}))
    """
)


def test_two_identical_builds_at_once_both_succeed_with_a_whole_file(workspace, tmp_path):
    """Case: two `variants build` at once shared one `.partial` file (corrupt JSONL, a crash) and
    two identical builds raised IntegrityError. Real processes, on SQLite and PostgreSQL."""
    _store_items(workspace)
    out = workspace.root / "prompts" / "variants.jsonl"
    out.parent.mkdir(exist_ok=True)
    go = tmp_path / "go"
    procs = [
        subprocess.Popen([sys.executable, "-c", _WORKER, str(workspace.root), str(out), str(go)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    wait_for(lambda: len(list(tmp_path.glob("ready-*"))) == 2 or any(p.poll() is not None for p in procs),
             60, "both builds to load their items")
    go.touch()
    results = [p.communicate(timeout=120) for p in procs]
    for proc, (_, stderr) in zip(procs, results):
        assert proc.returncode == 0, stderr
    summaries = [json.loads(stdout.strip().splitlines()[-1]) for stdout, _ in results]
    lines = out.read_text(encoding="utf-8").splitlines()
    parsed = [json.loads(line) for line in lines]  # every line is JSON
    assert len(parsed) == summaries[0]["prompts"] == summaries[1]["prompts"] > 0
    assert len({(p["variant_id"], p["serialization"]) for p in parsed}) == len(parsed)
    with workspace.session() as s:
        ids = [v.id for v in s.exec(select(Variant)).all()]
    assert len(ids) == len(set(ids)) == sum(x["new"] for x in summaries)
    assert summaries[0]["new"] + summaries[0]["present"] == len(ids)
    assert [p.name for p in out.parent.iterdir() if p.name.endswith(".partial")] == []


# --- 4. never silently replace a prompts file ----------------------------------------------------


def test_second_build_with_other_options_does_not_replace_the_prompts_file(sqlite_workspace):
    """Case: a second `variants build` with other options (or `--limit 3`) silently replaced prompts/variants.jsonl."""
    ws = sqlite_workspace
    _store_items(ws)
    out = ws.root / "prompts" / "variants.jsonl"
    out.parent.mkdir()
    first = PromptsOptions(SMALL)
    _build(ws, out, first)
    before = out.read_bytes()
    assert json.loads(meta_path(out).read_text())["options"]["serializations"] == ["csv", "markdown"]

    limited = PromptsOptions(SMALL, limit=3)
    with pytest.raises(PromptsFileConflict) as err:
        check_prompts_target(out, limited)
    message = str(err.value)
    assert str(out) in message and "--limit 3" in message and "--serializations csv,markdown" in message
    assert "--out OTHER.jsonl" in message and "--overwrite" in message
    with pytest.raises(PromptsFileConflict):
        _build(ws, out, limited)
    assert out.read_bytes() == before

    _build(ws, out, first)  # the same options: replacing with the same content is fine
    assert out.read_bytes() == before
    _build(ws, out, limited, overwrite=True)
    assert len(out.read_text().splitlines()) < len(before.splitlines())


def test_a_prompts_file_we_did_not_write_is_never_replaced(sqlite_workspace):
    """Case: a file at the --out path without our sidecar (someone else's) was replaced."""
    ws = sqlite_workspace
    _store_items(ws)
    theirs = ws.root / "mine.jsonl"
    theirs.write_text('{"my": "work"}\n')
    with pytest.raises(PromptsFileConflict, match="not written by") as err:
        _build(ws, theirs, PromptsOptions(SMALL))
    assert "--overwrite" in str(err.value)
    assert theirs.read_text() == '{"my": "work"}\n'
    with ws.session() as s:
        assert s.exec(select(Variant)).first() is None  # refused before building


# --- 5-7. listings read only what they show, bounded, and say how many there are -------------------


def test_tables_list_reads_no_cells(workspace):
    """Case: `tables list` loaded every cell of every table (2.2 GB to list 2 tables)."""
    _store_table(workspace, "wide", 1000, 200)  # 200,000 cells
    _store_table(workspace, "tiny", 2, 2)
    seen = _statements(workspace)
    page = list_tables(workspace)
    assert sorted(t.id for t in page) == ["tiny", "wide"] and page.total == 2
    assert not any(hasattr(t, "rows") or hasattr(t, "header") for t in page)
    assert {(t.n_rows, t.n_cols) for t in page} == {(1000, 200), (2, 2)}
    assert seen and not any("tables.rows" in s or "tables.header" in s for s in seen), seen


def test_tables_show_on_a_huge_table_is_bounded(workspace):
    """Case: `tables show` on a 1e6-column table took 146 s and 3.7 GB and printed only box characters."""
    _store_table(workspace, "huge", 1000, 200)
    seen = _statements(workspace)
    detail = show_table(workspace, "hu")
    view = detail.view
    assert view.describe() == "showing 30 of 1,000 rows and 12 of 200 columns"
    assert view.header == [f"c{j}" for j in range(12)]
    assert view.rows == [[f"{i}:{j}" for j in range(12)] for i in range(30)]
    assert (view.rows_left_out, view.cols_left_out) == (970, 188)
    assert not any("tables.rows" in s or "tables.header" in s for s in seen), seen
    small = show_table(workspace, "huge", max_rows=2, max_cols=1).view
    assert small.rows == [["0:0"], ["1:0"]] and small.header == ["c0"]


def test_listings_say_how_many_there_are_and_refuse_bad_windows(workspace):
    """Case: lists stopped at 50 without saying "50 of 811"; a negative --offset was a DataError on PostgreSQL."""
    for k in range(55):
        _store_table(workspace, f"t{k:03}", 1, 1)
    page = list_tables(workspace)
    assert isinstance(page, Page) and len(page) == 50 and page.total == 55
    assert page.describe("tables") == "showing 1-50 of 55 tables (next: --offset 50)"
    assert list_tables(workspace, offset=50).describe("tables") == "showing 51-55 of 55 tables"
    questions = list_questions(workspace)
    assert questions.total == 0 and questions.describe("questions") == "no questions"
    for bad in ({"offset": -1}, {"limit": 0}, {"limit": -5}):
        with pytest.raises(ListingError, match="--offset|--limit"):
            list_tables(workspace, **bad)
        with pytest.raises(ListingError):
            list_questions(workspace, **bad)
    with pytest.raises(ListingError, match="--status"):
        list_questions(workspace, status="acepted")


# --- 8. finding variants, and seeing changes without colour ---------------------------------------


def test_variant_ids_can_be_listed_and_changes_are_marked_in_text(workspace):
    """Case: `variants show` had no way to find variant ids; at 80 columns a transposed table was
    unreadable and changes were marked by colour alone."""
    _store_items(workspace, 1, 2)
    items = load_items(workspace, limit=2)
    build_variants(workspace, items, GridSpec(("csv",), ("remove_relevant_cells", "transpose", "shuffle_rows"), (0,),
                                              skip_structural=False))
    page = list_variants(workspace)
    assert page.total == 6 and len(page) == 6
    first = page[0]
    assert first.question and first.question_id in {items[0].question_id, items[1].question_id}
    removed = list_variants(workspace, perturbation="remove_relevant_cells", question=items[0].question_id[:8])
    assert removed.total == 1 and removed[0].perturbation == "remove_relevant_cells"
    with pytest.raises(ListingError, match="--perturbation"):
        list_variants(workspace, perturbation="frobnicate")

    view = show_variant(workspace, removed[0].id)
    marked = view.marked_rows()
    for i, j in (tuple(c) for c in view.variant.changes["changed_cells"]):
        assert marked[i][j].endswith("*")
    assert view.counts()["changed"] == len(view.variant.changes["changed_cells"])
    assert "* changed" in LEGEND and "~ moved" in LEGEND and "+ inserted" in LEGEND

    transposed = show_variant(workspace, list_variants(workspace, perturbation="transpose")[0].id)
    assert all(cell.endswith("~") for row in transposed.marked_rows() for cell in row)
    assert transposed.layout(80) == "stacked"
    assert transposed.layout(100_000) == "side_by_side"

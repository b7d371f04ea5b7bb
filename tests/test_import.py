"""Importing files into a workspace: real benchmark data, idempotence, bad input, crashes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from conftest import shared_data_path
from sqlmodel import func, select

from tqaforge import ingest as importer
from tqaforge.errors import TqaforgeError
from tqaforge.ingest import ImportOptions, import_paths
from tqaforge.queries import funnel, list_questions, show_table
from tqaforge.schemas.records import Answer, Question, TableRecord
from tqaforge.schemas.taxonomy import TABLEBENCH
from tqaforge.tables.stats import TABLEBENCH_FILTER, SelectionFilter


def _count(ws, model) -> int:
    with ws.session() as s:
        return s.exec(select(func.count()).select_from(model)).one()


def test_tablebench_import_yields_886_questions_and_is_idempotent(workspace):
    path = shared_data_path("tablebench", "TableBench.jsonl")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    first = import_paths(workspace, [path])
    assert first.failed == []
    assert first.total("questions_new") == 886 == _count(workspace, Question)
    assert _count(workspace, Answer) == 886
    distinct_tables = {json.dumps(r["table"], sort_keys=True) for r in lines}
    assert _count(workspace, TableRecord) == len(distinct_tables)
    with workspace.session() as s:
        subtypes = Counter(s.exec(select(Question.subtype)).all())
    assert set(subtypes) == set(TABLEBENCH.subtypes) and len(subtypes) == 18
    assert subtypes == Counter(r["qsubtype"] for r in lines)

    # every stored answer is the file's answer for that question
    with workspace.session() as s:
        stored = {(q.source_id, q.subtype): a.values for q, a in s.exec(
            select(Question, Answer).where(Answer.question_id == Question.id)).all()}
    assert stored == {(r["id"], r["qsubtype"]): [r["answer"]] for r in lines}

    second = import_paths(workspace, [path])
    assert second.total("tables_new") == second.total("questions_new") == second.total("answers_new") == 0
    assert second.total("questions_present") == 886
    assert _count(workspace, Question) == 886 and _count(workspace, Answer) == 886


def test_freb_tqa_import_keeps_relevant_cells(workspace):
    path = shared_data_path("freb-tqa", "02_rel", "tat_nonfactoid_dev.jsonl")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    summary = import_paths(workspace, [path])
    assert summary.failed == []
    with workspace.session() as s:
        questions = s.exec(select(Question)).all()
        tables = {t.id: t for t in s.exec(select(TableRecord)).all()}
    by_id = {q.source_id: q for q in questions}
    assert len(by_id) == len({r["id"] for r in lines})
    for r in lines:
        q = by_id[r["id"]]
        assert sorted(map(tuple, q.relevant_cells)) == sorted(map(tuple, r["rel_cell"]))
        # the stored cells are the cells the labels point at in the original list-of-rows table
        t = tables[q.table_id]
        for row, col in q.relevant_cells:
            assert t.rows[row][col] == r["table"][row + 1][col]


def test_all_freb_tqa_files_import(workspace):
    root = shared_data_path("freb-tqa")
    summary = import_paths(workspace, [root])
    assert summary.failed == [], [f.error for f in summary.failed]
    assert summary.total("questions_new") > 0
    with workspace.session() as s:
        with_cells = s.exec(select(func.count()).select_from(Question).where(Question.relevant_cells.is_not(None))).one()
    assert with_cells > 500


def test_a_bad_file_fails_alone_and_names_file_and_line(sqlite_workspace, tmp_path):
    good = tmp_path / "good.csv"
    good.write_text("team,pts\nA,1\nB,2\n")
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("team,pts\nA,1\nB,2,3\nC,4\n")
    truncated = tmp_path / "bench.jsonl"
    row = {"id": "x1", "qtype": "NumericalReasoning", "qsubtype": "Counting",
           "table": {"columns": ["a", "b"], "data": [["1", "2"]]}, "question": "How many?", "answer": "1"}
    truncated.write_text(json.dumps(row) + "\n" + json.dumps(row)[:40] + "\n")
    summary = import_paths(sqlite_workspace, [good, ragged, truncated])
    by_name = {Path(f.path).name: f for f in summary.files}
    assert by_name["good.csv"].ok and by_name["good.csv"].tables_new == 1
    assert "ragged.csv" in by_name["ragged.csv"].error and "3" in by_name["ragged.csv"].error
    assert "bench.jsonl" in by_name["bench.jsonl"].error and "line 2" in by_name["bench.jsonl"].error
    # nothing of the failed files was stored, not even the valid first line of bench.jsonl
    assert _count(sqlite_workspace, TableRecord) == 1
    assert _count(sqlite_workspace, Question) == 0


def test_failure_while_storing_rolls_back_the_whole_file(sqlite_workspace, tmp_path, monkeypatch):
    rows = [{"id": f"x{i}", "qtype": "NumericalReasoning", "qsubtype": "Counting",
             "table": {"columns": ["a", "b"], "data": [[str(i), "2"]]}, "question": "How many?", "answer": str(i)}
            for i in range(5)]
    path = tmp_path / "bench.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    real = importer._answer_row
    calls = {"n": 0}

    def failing(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise TqaforgeError("disk full (injected)")
        return real(*args, **kwargs)

    monkeypatch.setattr(importer, "_answer_row", failing)
    summary = import_paths(sqlite_workspace, [path])
    assert "disk full" in summary.files[0].error
    assert _count(sqlite_workspace, TableRecord) == _count(sqlite_workspace, Question) == 0
    monkeypatch.setattr(importer, "_answer_row", real)
    assert import_paths(sqlite_workspace, [path]).total("questions_new") == 5


def test_selection_filter_rejects_with_reasons(sqlite_workspace, tmp_path):
    small = tmp_path / "small.csv"
    small.write_text("a,b\n1,2\n")
    big = tmp_path / "big.csv"
    big.write_text("y,a,b,c,d\n" + "".join(f"{2000 + i},{i},{i * 2},{i * 3},x{i}\n" for i in range(10)))
    words = tmp_path / "words.csv"
    words.write_text("a,b,c,d,e\n" + "".join(f"p{i},q,r,s,t\n" for i in range(10)))
    summary = import_paths(sqlite_workspace, [small, big, words], ImportOptions(selection=TABLEBENCH_FILTER))
    reasons = dict((Path(loc.split(":")[0].split("#")[0]).name, why) for loc, why in summary.rejected)
    assert set(reasons) == {"small.csv", "words.csv"}
    assert "rows" in reasons["small.csv"] and "numeric share" in reasons["words.csv"]
    assert summary.total("tables_new") == 1
    summary = import_paths(sqlite_workspace, [small], ImportOptions(selection=SelectionFilter(min_cols=3)))
    assert "columns" in summary.rejected[0][1]


def test_catalog_views(sqlite_workspace):
    path = shared_data_path("tablebench", "TableBench.jsonl")
    import_paths(sqlite_workspace, [path])
    qs = list_questions(sqlite_workspace, subtype="Counting", limit=500)
    assert len(qs) == 50 and {q.subtype for q in qs} == {"Counting"}
    detail = show_table(sqlite_workspace, qs[0].table_id[:10])
    assert qs[0].id in {q.id for q in detail.questions}
    f = funnel(sqlite_workspace).as_dict()
    assert f["questions"] == {"total": 886, "accepted": 886}
    assert f["answers"] == {"total": 886, "gold": 886}


def _db_counts(db: Path) -> tuple[int, int, int]:
    import sqlite3

    con = sqlite3.connect(db)
    try:
        return tuple(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("tables", "questions", "answers"))
    finally:
        con.close()


def test_import_killed_mid_way_resumes_to_the_same_records(tmp_path):
    """SIGKILL the CLI at some point of a multi-file import; the store holds whole files only,
    and running the command again ends with exactly the records of an uninterrupted run."""
    source = shared_data_path("tablebench", "TableBench.jsonl").read_text().splitlines(keepends=True)
    parts = tmp_path / "parts"
    parts.mkdir()
    for i in range(4):
        (parts / f"part{i}.jsonl").write_text("".join(source[i::4]))
    env = {k: v for k, v in os.environ.items() if k != "TQAFORGE_DATABASE_URL"}
    cli = [sys.executable, "-m", "tqaforge"]

    def run(ws: Path, *args: str, **kw) -> subprocess.Popen:
        return subprocess.Popen([*cli, "--workspace", str(ws), *args], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)

    reference = tmp_path / "reference"
    killed = tmp_path / "killed"
    for ws in (reference, killed):
        assert subprocess.run([*cli, "init", str(ws)], env=env, capture_output=True).returncode == 0
    assert run(reference, "tables", "import", str(parts)).wait() == 0

    proc = run(killed, "tables", "import", str(parts))
    time.sleep(2.0)  # mid-way on this machine; the assertions hold wherever the kill lands
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    tables, questions, answers = _db_counts(killed / "tqaforge.db")
    sizes = [len(source[i::4]) for i in range(4)]
    whole_files = {sum(sizes[:k]) for k in range(5)}  # files import in name order, each whole
    assert questions in whole_files, questions
    assert questions == answers

    assert run(killed, "tables", "import", str(parts)).wait() == 0
    assert _db_counts(killed / "tqaforge.db") == _db_counts(reference / "tqaforge.db")

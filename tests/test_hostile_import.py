"""Hostile inputs to `tables import` (issue 10): files that break a reader, paths that cannot be
walked, concurrent importers, control characters, categories outside the workspace taxonomy
and memory. Real files, real SQLite and PostgreSQL stores, real processes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from sqlmodel import func, select

from tqaforge.ingest import import_paths, walk_paths
from tqaforge.schemas.records import Answer, Question, TableRecord
from tqaforge.store import Workspace, init_workspace

pytestmark = pytest.mark.hostile

REPO = Path(__file__).resolve().parents[1]


def _count(ws: Workspace, model: type) -> int:
    with ws.session() as s:
        return s.exec(select(func.count()).select_from(model)).one()


def _bench_row(i: int, **changes: object) -> dict[str, object]:
    """One TableBench line about its own small table."""
    row: dict[str, object] = {
        "id": f"q{i}", "qtype": "NumericalReasoning", "qsubtype": "Counting",
        "table": {"columns": ["team", "pts"], "data": [[f"team {i}", str(i)], ["other", "2"]]},
        "question": f"How many points has team {i}?", "answer": str(i),
    }
    row.update(changes)
    return row


def _write_jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _good_csv(path: Path, team: str) -> Path:
    path.write_text(f"team,pts\n{team},1\nother,2\n", encoding="utf-8")
    return path


# --- 1. one bad file never stops the others ---------------------------------------------------


def test_bad_files_fail_alone_between_good_files(workspace, tmp_path):
    """Case: deeply nested JSON (`[[[[...` 100k deep) raised RecursionError and stopped every
    file after it, with no summary. The class: any exception while reading or storing one file
    is that file's failure, named, its transaction rolled back, and the files after it import.
    A question holding a lone surrogate, which the database driver cannot encode and which once
    failed its file, is now cleaned by the control-character rule."""
    first = _good_csv(tmp_path / "a_first.csv", "alpha")
    nested = tmp_path / "b_nested.json"
    nested.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    # json.dumps escapes the surrogate; json.loads turns it back into an unencodable str
    surrogate = _write_jsonl(tmp_path / "c_surrogate.jsonl", [_bench_row(1), _bench_row(2, question="How many \ud800?")])
    last = _good_csv(tmp_path / "d_last.csv", "omega")
    summary = import_paths(workspace, [first, nested, surrogate, last])
    by_name = {Path(f.path).name: f for f in summary.files}
    assert list(by_name) == ["a_first.csv", "b_nested.json", "c_surrogate.jsonl", "d_last.csv"]
    assert by_name["a_first.csv"].ok and by_name["d_last.csv"].ok
    assert by_name["d_last.csv"].tables_new == 1
    error = by_name["b_nested.json"].error
    assert error is not None and "b_nested.json" in error and "Traceback" not in error
    # the lone surrogate is not a character: the control-character rule removes it and counts it
    assert by_name["c_surrogate.jsonl"].ok and by_name["c_surrogate.jsonl"].questions_new == 2
    assert by_name["c_surrogate.jsonl"].control_chars_removed == 1
    assert [Path(f.path).name for f in summary.failed] == ["b_nested.json"]
    assert _count(workspace, TableRecord) == 4 and _count(workspace, Question) == 2  # two csv, two bench tables


# --- 2. paths a directory walk cannot read are reported ------------------------------------------


def _walk_as_nobody(root: Path) -> list[tuple[str, str | None]]:
    """``walk_paths([root])`` in a forked child that dropped root's privileges (uid 65534),
    as (name, problem) pairs: root reads every directory whatever its mode."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop privileges, walk, report, exit without pytest's cleanup
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            found = [(p.name, None if problem is None else str(problem)) for p, problem in walk_paths([root])]
            os.write(write_end, json.dumps(found).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    return [tuple(x) for x in json.loads(data)]


def test_unreadable_subdirectory_is_reported(sqlite_workspace):
    """Case: an unreadable subdirectory (chmod 000) in a directory import was skipped without
    a word; now it is a failed path of the summary, and the readable files still import.
    Under root (which reads any directory) the walk runs in a child without root's rights."""
    # Not under pytest's tmp_path: its parents are private to the user running the tests.
    root = Path(tempfile.mkdtemp(prefix="tqaforge-walk-"))
    locked = root / "locked"
    try:
        root.chmod(0o755)
        _good_csv(root / "good.csv", "alpha")
        locked.mkdir()
        _good_csv(locked / "hidden_from_us.csv", "beta")
        locked.chmod(0)
        if os.access(locked, os.R_OK):  # root
            walked = dict(_walk_as_nobody(root))
            assert walked["good.csv"] is None
            problems = {name: problem for name, problem in walked.items() if problem}
        else:
            summary = import_paths(sqlite_workspace, [root])
            assert summary.total("tables_new") == 1
            problems = {Path(f.path).name: f.error for f in summary.failed}
        assert set(problems) == {"locked"}, problems
        assert "cannot read directory" in problems["locked"] and str(locked) in problems["locked"]
        assert "chmod" in problems["locked"]  # what to do
    finally:
        if locked.exists():
            locked.chmod(0o755)
        shutil.rmtree(root)


def test_broken_link_and_directory_loop_are_reported(sqlite_workspace, tmp_path):
    """Case: paths a directory import cannot read were skipped without a word. A dangling
    symlink named like a table file and a symlink looping back to its parent (both unreadable
    even for root) are failed paths of the summary; a linked data directory is walked."""
    root = tmp_path / "tables"
    root.mkdir()
    _good_csv(root / "good.csv", "alpha")
    (root / "gone.csv").symlink_to(root / "deleted.csv")
    (root / "loop").symlink_to(root)
    (root / "gone_dir").symlink_to(tmp_path / "deleted_dir")
    (root / "notes.txt").symlink_to(root / "deleted.txt")  # not a table file: not our business
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _good_csv(elsewhere / "linked.csv", "gamma")
    (root / "linked_dir").symlink_to(elsewhere)
    summary = import_paths(sqlite_workspace, [root])
    failed = {Path(f.path).name: f.error for f in summary.failed}
    assert set(failed) == {"gone.csv", "gone_dir", "loop"}, failed
    assert "broken symbolic link" in failed["gone.csv"] and "broken symbolic link" in failed["gone_dir"]
    assert "loop" in failed["loop"]
    assert summary.total("tables_new") == 2  # good.csv and linked_dir/linked.csv


# --- 3. concurrent importers of the same file -----------------------------------------------------

_IMPORTER = """
import json, sys, time
from pathlib import Path
from tqaforge.store import open_workspace
from tqaforge.ingest import import_paths, walk_paths

ws = open_workspace(Path(sys.argv[1]))
go = Path(sys.argv[2])
while not go.exists():  # start together: the race is the point
    time.sleep(0.005)
summary = import_paths(ws, [sys.argv[3]])
print(json.dumps({k: summary.total(k) for k in
                  ("tables_new", "tables_present", "questions_new", "questions_present", "answers_new")}))
for f in summary.failed:
    print(f.error, file=sys.stderr)
sys.exit(1 if summary.failed else 0)
"""


def test_three_concurrent_imports_of_one_file_all_succeed(workspace, tmp_path):
    """Case: three `tables import` of the same file at once gave IntegrityError tracebacks on
    SQLite and PostgreSQL. Now all three succeed, the store holds one copy, and between them
    each record is counted once as new and twice as already present."""
    n = 400
    path = _write_jsonl(tmp_path / "bench.jsonl", [_bench_row(i) for i in range(n)])
    go = tmp_path / "go"
    procs = [
        subprocess.Popen([sys.executable, "-c", _IMPORTER, str(workspace.root), str(go), str(path)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ), cwd=REPO)
        for _ in range(3)
    ]
    time.sleep(1.5)  # let all three open the workspace before they start
    go.touch()
    results = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0 and "Traceback" not in stderr, stderr
        results.append(json.loads(stdout))
    total = {k: sum(r[k] for r in results) for k in results[0]}
    assert total == {"tables_new": n, "tables_present": 2 * n, "questions_new": n,
                     "questions_present": 2 * n, "answers_new": n}
    assert _count(workspace, TableRecord) == n
    assert _count(workspace, Question) == n == _count(workspace, Answer)


# --- 4. control characters -------------------------------------------------------------------------


def test_nul_and_control_characters_are_removed_and_counted(workspace, tmp_path):
    """Case: a NUL in a question gave DataError on PostgreSQL (and the next file of the call was
    skipped) while SQLite stored it silently. Now question, answer and source id lose NUL and
    other control characters on both databases, the removals are counted, and the next file imports."""
    dirty = _write_jsonl(tmp_path / "a_dirty.jsonl", [
        _bench_row(1, question="How many\x00 points has team 1?\x07", answer="1\x00", id="q\x1b1"),
    ])
    clean = _good_csv(tmp_path / "b_clean.csv", "alpha")
    summary = import_paths(workspace, [dirty, clean])
    assert summary.failed == [], [f.error for f in summary.failed]
    assert summary.total("tables_new") == 2
    assert summary.control_chars_removed == 4
    assert summary.files[0].control_chars_removed == 4
    with workspace.session() as s:
        question = s.exec(select(Question)).one()
        answer = s.exec(select(Answer)).one()
    assert question.text == "How many points has team 1?"
    assert question.source_id == "q1"
    assert answer.values == ["1"] and answer.value == "1"
    # a re-import recognises the cleaned question: nothing new
    again = import_paths(workspace, [dirty])
    assert again.total("questions_new") == 0 and again.total("questions_present") == 1


# --- 5. categories outside the workspace taxonomy --------------------------------------------------


def _freb_file(directory: Path) -> Path:
    rows = [{"id": f"f{i}", "question": f"What is the total of row {i}?", "answers": [str(i)],
             "table": [["name", "value"], [f"row {i}", str(i)], ["x", "1"]]} for i in range(3)]
    return _write_jsonl(directory / "wtq_nonfactoid_dev.jsonl", rows)


def test_freb_tqa_question_kind_is_a_question_type_not_a_subtype(sqlite_workspace, tmp_path):
    """Case: FREB-TQA questions imported into a TableBench workspace got subtype `reasoning`,
    outside the workspace taxonomy. FREB-TQA's extraction/reasoning is stored as the question
    type; the subtype stays empty."""
    summary = import_paths(sqlite_workspace, [_freb_file(tmp_path)])
    assert summary.failed == [] and summary.total("questions_new") == 3
    with sqlite_workspace.session() as s:
        questions = s.exec(select(Question)).all()
    assert {(q.subtype, q.qtype, q.question_type) for q in questions} == {(None, None, "reasoning")}
    assert summary.subtypes_dropped == 0  # the kind was kept, as a question type


def test_subtypes_outside_the_workspace_taxonomy_are_left_empty_and_counted(tmp_path, monkeypatch):
    """Case (the class of the FREB-TQA subtype bug): every stored subtype belongs to the
    workspace taxonomy. TableBench items in a FREB-TQA workspace keep no subtype, are counted,
    and keep their source category in meta; FREB-TQA's own kinds are subtypes there."""
    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    ws = init_workspace(tmp_path / "ws", name="freb", taxonomy="freb-tqa")
    try:
        bench = _write_jsonl(tmp_path / "bench.jsonl", [_bench_row(i) for i in range(2)])
        summary = import_paths(ws, [bench, _freb_file(tmp_path)])
        assert summary.failed == []
        assert summary.subtypes_dropped == 2 and summary.files[0].subtypes_dropped == 2
        with ws.session() as s:
            questions = s.exec(select(Question)).all()
        by_kind = {q.source_id: q for q in questions}
        assert {(by_kind[k].subtype, by_kind[k].qtype) for k in ("q0", "q1")} == {(None, None)}
        assert by_kind["q0"].meta["source_category"] == {
            "taxonomy": "tablebench", "type": "NumericalReasoning", "subtype": "Counting"}
        freb = [by_kind[f"f{i}"] for i in range(3)]
        assert {(q.subtype, q.qtype, q.question_type, q.taxonomy) for q in freb} == {
            ("reasoning", "QuestionType", "reasoning", "freb-tqa")}
    finally:
        ws.close()


# --- 6. memory ------------------------------------------------------------------------------------

# Both runs load the same modules and open a workspace, so their peaks differ only by what
# importing (beyond reading) holds.
_PEAK = """
import os, resource, sys, tempfile
from pathlib import Path
os.environ.pop("TQAFORGE_DATABASE_URL", None)
from tqaforge.store import init_workspace
from tqaforge.ingest import import_paths, walk_paths
from tqaforge.tables.readers import read_path
ws = init_workspace(Path(tempfile.mkdtemp()) / "ws")
if sys.argv[2] == "read":
    result = read_path(Path(sys.argv[1]))
else:
    summary = import_paths(ws, [sys.argv[1]])
    assert not summary.failed and summary.total("tables_new") == 1, summary.files
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def _peak_kib(path: Path, mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", _PEAK, str(path), mode],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])


def test_importing_a_large_csv_holds_little_beyond_the_reader(tmp_path):
    """Case: a 200 MB CSV imported with 3.5 GB peak memory. The importer's share: it copied
    every row into lists for the JSON column (a Python object of some 50 bytes per cell, which
    short cells make many times the file's size). Now the rows are written as JSON text row by
    row: importing a ~3 MB CSV of two-letter cells peaks at most 8 times the file's size above
    reading it alone (it was about 20 times)."""
    path = tmp_path / "large.csv"
    letters = "abcdefghijklmnopqrstuvwxyz"
    with path.open("w", encoding="utf-8") as handle:
        handle.write(",".join(f"c{j}" for j in range(10)) + "\n")
        for i in range(100_000):
            # two-letter cells: one-letter strings are shared by Python and would hide the cost
            handle.write(",".join(letters[(i + j) % 26] + letters[(i * 7 + j) % 26] for j in range(10)) + "\n")
    size_kib = path.stat().st_size // 1024
    read_peak = _peak_kib(path, "read")
    import_peak = _peak_kib(path, "import")
    assert import_peak - read_peak < 8 * size_kib, (size_kib, read_peak, import_peak)

"""Hostile imports and displays (issue 23, items 9-11): header names repeated by spans in linear
time, the first rows of a tall table read without reading the rest, and every path a directory
import cannot read reported as a failed path. Real files, FIFOs, links, a real SQLite file (and
PostgreSQL when TQAFORGE_TEST_DATABASE_URL is set), the real CLI."""

from __future__ import annotations

import io
import json
import os
import socket
from pathlib import Path

import pytest
from cpu_clock import cpu_now
from sqlalchemy import text
from typer.testing import CliRunner

from tqaforge.cli import app
from tqaforge.queries import _summary_by_prefix, show_table, table_view
from tqaforge.schemas.records import TableRecord
from tqaforge.store import Workspace
from tqaforge.tables import corner as corner_module
from tqaforge.tables.corner import corner, first_items
from tqaforge.tables.names import NameNumberer
from tqaforge.tables.readers.html import read_html
from tqaforge.tables.serialize import unique_names

pytestmark = pytest.mark.hostile

runner = CliRunner()


# --- 9. repeated header names are numbered in linear time ---------------------------------------


class _CountingPattern(str):
    """A numbered-name pattern that counts how many candidate names were spelled (= looked up)."""

    spelled = 0

    def format(self, *args: object, **kwargs: object) -> str:  # type: ignore[override]
        type(self).spelled += 1
        return super().format(*args, **kwargs)


def _search_from_first(names: list[str]) -> int:
    """The candidates the old loop (``while f"{name} ({k})" in taken: k += 1``) looked at: the
    control that shows the count below would see a quadratic numbering."""
    taken, looked = set(names), 0
    for name in names[1:]:
        k = 2
        looked += 1
        while f"{name} ({k})" in taken:
            k += 1
            looked += 1
        taken.add(f"{name} ({k})")
    return looked


def test_numbering_100k_repeats_of_a_name_looks_at_each_number_once() -> None:
    n = 100_000
    names = ["A"] * n + [f"A ({k})" for k in range(5, 50_000, 7)]  # names a user wrote block some numbers
    _CountingPattern.spelled = 0
    numberer = NameNumberer(names, pattern=_CountingPattern("{name} ({k})"), first=2)
    started = cpu_now()
    given = [numberer.number("A") for _ in range(n - 1)]
    assert cpu_now() - started < 5  # generous: the quadratic search took minutes
    assert len(set(given) | set(names)) == len(given) + len(set(names))  # no collision with anything
    assert given[:4] == ["A (2)", "A (3)", "A (4)", "A (6)"]  # the smallest free numbers, in order
    # Every number up to the last given is looked at once: the repeats plus the numbers users took.
    assert _CountingPattern.spelled <= n + 50_000 // 7 + 1
    # Control: the old search from the first number, on a fiftieth of the names, looks far more.
    assert _search_from_first(["A"] * 2_000) > 1_000_000


def test_a_5_kb_html_header_with_colspan_1000_in_two_rows_reads_in_seconds(tmp_path: Path) -> None:
    """Case: a 5 kB HTML table with colspan=1000 in two header rows ran past 120 s."""
    cells = 100
    path = tmp_path / "spans.html"
    path.write_text(
        "<table><tr>" + "<th colspan=1000>A" * cells + "<tr>" + "<th colspan=1000>B" * cells
        + "<tr>" + "<td colspan=1000>x" * cells + "</table>"
    )
    assert path.stat().st_size < 6_000
    started = cpu_now()
    header = read_html(path, strict_headers=False).records[0].table.header
    assert cpu_now() - started < 5
    # Each of the 100 cells keeps its name in its first column (separate cells of one text stay
    # a duplicate, as strict headers then report); every column its span repeats is numbered.
    assert len(header) == cells * 1000 and header.count("A B") == cells
    assert len(set(header)) == len(header) - (cells - 1)
    assert header[:3] == ("A B", "A B (2)", "A B (3)") and header[-1] == f"A B ({cells * 999 + 1})"


def test_span_numbers_continue_past_names_a_user_wrote(tmp_path: Path) -> None:
    """The linear numbering gives exactly what the search from each span's own count gave."""
    path = tmp_path / "t.html"
    path.write_text("<table><tr><th colspan=3>A<th>A (3)<th colspan=2>A<tr><td>1<td>2<td>3<td>4<td>5<td>6</table>")
    header = read_html(path, strict_headers=False).records[0].table.header
    # A second cell of the same text is a user's duplicate ("A"), its span continues the numbers.
    assert header == ("A", "A (2)", "A (4)", "A (3)", "A", "A (5)")


def test_a_tall_html_table_with_spans_reads_in_linear_time(tmp_path: Path) -> None:
    """Same class: the check for a cell past a gap scanned the whole grid once per row."""
    rows = 10_000
    path = tmp_path / "tall.html"
    path.write_text("<table><tr><th>n<th>m" + "".join(f"<tr><td>{i}<td>x" for i in range(rows)) + "</table>")
    started = cpu_now()
    table = read_html(path).records[0].table
    assert cpu_now() - started < 5  # the per-row scan took about 10 s here
    assert table.n_rows == rows and table.rows[-1] == (str(rows - 1), "x")


def test_serializations_number_100k_repeated_names_fast_and_exactly() -> None:
    """Same class: unique_names (JSON and DataFrame keys) searched from _1 for every repeat."""
    header = ["a"] * 100_000 + ["a_2", "b", "b"]
    started = cpu_now()
    names = unique_names(header)
    assert cpu_now() - started < 5
    assert len(set(names)) == len(names) and names[:4] == ["a", "a_1", "a_3", "a_4"] and names[-2:] == ["b", "b_1"]
    assert unique_names(["a", "a", "a_1", ""]) == ["a", "a_2", "a_1", ""]


# --- 10. the first rows of a tall table, reading only those -------------------------------------


def _store_table(ws: Workspace, table_id: str, header: list[str], rows: list[list[str]]) -> None:
    with ws.session() as s:
        s.add(TableRecord(id=table_id, header=header, rows=rows, n_rows=len(rows), n_cols=len(header), numeric_share=0.0))


def _bytes_read() -> int:
    """Bytes this process has read from files so far (SQLite reads its file with pread)."""
    with open("/proc/self/io") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("rchar:"))


TALL = 300_000


def test_tables_show_of_a_300k_row_table_reads_only_the_rows_it_shows(sqlite_workspace: Workspace) -> None:
    """Case: `tables show` of a 2.97M-row table took 39 s and 8.4 GB to print 30 rows: a
    json_extract over the whole stored rows per shown row."""
    ws = sqlite_workspace
    _store_table(ws, "tall", ["a", "b", "c", "d", "e"], [[f"{i}:{j}" for j in range(5)] for i in range(TALL)])
    stored = ws.root / "tqaforge.db"
    with ws.session() as s:
        summary = _summary_by_prefix(s, "tall")
        stored_bytes = s.connection().execute(text("SELECT length(rows) FROM tables")).scalar_one()
        before = _bytes_read()
        view = table_view(s, summary, 30, 12)
        shown_read = _bytes_read() - before
        # Control: one JSON function over the stored rows (what the old query ran 30 times)
        # reads them all, so the measure sees a read of the whole table.
        before = _bytes_read()
        s.connection().execute(text("SELECT json_extract(rows, '$[0][0]') FROM tables WHERE id = 'tall'")).one()
        whole_read = _bytes_read() - before
    assert view.rows == [[f"{i}:{j}" for j in range(5)] for i in range(30)] and view.header == ["a", "b", "c", "d", "e"]
    assert stored_bytes > 15_000_000 and stored.stat().st_size > 15_000_000
    assert shown_read < 300_000, shown_read  # a few pages: the rows shown and one chunk beyond
    assert whole_read > stored_bytes * 0.8, whole_read
    # The command itself prints the 30 rows and says how many there are.
    shown = runner.invoke(app, ["-w", str(ws.root), "tables", "show", "tall"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert "29:4" in shown.output and "30:0" not in shown.output and "showing 30 of 300000 rows" in shown.output


def test_the_corner_reader_keeps_only_the_cells_it_returns() -> None:
    """A row far wider than what is shown is read past, not kept: memory is what is shown."""
    import tracemalloc

    wide = json.dumps([["x" * 1000] * 20_000, ["y"] * 3]).encode()  # one 20 MB row
    tracemalloc.start()
    try:
        got = corner(io.BytesIO(wide).read, rows=2, cols=2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got == [["x" * 1000] * 2, ["y", "y"]]
    assert peak < 2_000_000, peak  # a few chunks, not the 20 MB row
    # Control: the same measure sees a whole-row parse.
    tracemalloc.start()
    try:
        json.loads(wide)
        whole = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert whole > 20_000_000


@pytest.mark.parametrize("chunk", [1, 7, 65536])
def test_the_corner_reader_agrees_with_json_on_hostile_cells(chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Escapes, quotes, brackets and commas inside cells, non-ASCII, surrogate pairs, white space
    and a cell cut by every chunk boundary read exactly as ``json.loads`` reads them."""
    monkeypatch.setattr(corner_module, "CHUNK", chunk)
    cells = ['a"b', "c\\", "]", "[", ",", "\\u0041", "é 日 \U0001F600", "", "\n\t", "x" * 300, '\\"]"']
    rows = [[cells[(i + j) % len(cells)] for j in range(7)] for i in range(9)]
    for text_ in (json.dumps(rows), json.dumps(rows, ensure_ascii=False, indent=1), json.dumps(rows, separators=(",", ":"))):
        for n, m in ((0, 3), (1, 1), (4, 3), (9, 7), (20, 20)):
            assert corner(io.BytesIO(text_.encode()).read, rows=n, cols=m) == [r[:m] for r in rows[:n]]
        assert first_items(io.BytesIO(json.dumps(cells).encode()).read, 5) == cells[:5]


def test_a_damaged_stored_table_is_a_clear_error_not_a_hang() -> None:
    from tqaforge.errors import TableError

    with pytest.raises(TableError, match="ends in the middle"):
        corner(io.BytesIO(b'[["a", "b').read, rows=2, cols=1)
    with pytest.raises(TableError, match="where"):
        corner(io.BytesIO(b'{"a": 1}').read, rows=2, cols=1)


def test_tables_show_reads_the_same_cells_on_every_database(workspace: Workspace) -> None:
    """SQLite (a blob read) and PostgreSQL (slices of the stored text) show what was stored."""
    header = ["naïve", 'q"uote', "back\\slash", "[x]"]
    rows = [[f"{i}é", f'"{i}"', f"\\{i}", "日本" * (i % 3)] for i in range(500)]
    _store_table(workspace, "mixed", header, rows)
    _store_table(workspace, "empty", ["only"], [])
    detail = show_table(workspace, "mixed", max_rows=40, max_cols=3)
    assert detail.view.header == header[:3] and detail.view.rows == [r[:3] for r in rows[:40]]
    assert show_table(workspace, "mixed", max_rows=0).view.rows == []
    assert show_table(workspace, "mixed", max_rows=1000).view.rows == rows
    assert show_table(workspace, "empty").view.rows == [] and show_table(workspace, "empty").view.header == ["only"]


# --- 11. paths a directory import cannot read are failed paths ------------------------------------


@pytest.fixture
def ws_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    ws = tmp_path / "ws"
    assert runner.invoke(app, ["init", str(ws)]).exit_code == 0
    return ws


def _data_dir(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "good.csv").write_text("a,b\n1,2\n")
    return data


def _import(ws: Path, *paths: Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["-w", str(ws), "tables", "import", *map(str, paths)], env={"COLUMNS": "300"})
    return result.exit_code, result.stdout, result.stderr


def test_a_broken_link_a_link_cycle_and_a_fifo_in_a_directory_are_failed_paths(ws_dir: Path, tmp_path: Path) -> None:
    """Case: all three were skipped with "failed paths: 0 of 1" and rc 0 (expand_paths dropped
    what walk_paths reported)."""
    data = _data_dir(tmp_path)
    (data / "broken.csv").symlink_to(tmp_path / "gone.csv")
    (data / "sub" / "loop").symlink_to(data)
    os.mkfifo(data / "pipe.csv")
    code, out, err = _import(ws_dir, data)
    assert code == 1, out + err
    assert "imported 1 tables" in out and "failed paths: 3 of 4" in out
    assert f"failed {data / 'broken.csv'}: broken symbolic link to {tmp_path / 'gone.csv'}" in err
    assert f"failed {data / 'sub' / 'loop'}: directory loop" in err
    assert f"failed {data / 'pipe.csv'}: not a regular file" in err
    # Control: the same directory without them imports with rc 0 and nothing failed.
    for name in ("broken.csv", "pipe.csv", "sub/loop"):
        (data / name).unlink()
    code, out, err = _import(ws_dir, data)
    assert code == 0 and "failed paths: 0 of 1" in out, out + err


def test_devices_sockets_and_links_to_them_in_a_directory_are_failed_paths(ws_dir: Path, tmp_path: Path) -> None:
    """Other special files of the class: a link to /dev/zero (reads forever), a link to a
    character device, a Unix socket, each with a table ending."""
    data = _data_dir(tmp_path)
    (data / "zero.csv").symlink_to("/dev/zero")
    (data / "null.json").symlink_to("/dev/null")
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(data / "sock.csv"))
        code, out, err = _import(ws_dir, data)
    finally:
        server.close()
    assert code == 1 and "failed paths: 3 of 4" in out and "imported 1 tables" in out, out + err
    for name in ("zero.csv", "null.json", "sock.csv"):
        assert f"failed {data / name}: not a regular file" in err


def test_a_fifo_given_by_name_is_a_failed_path_not_a_hang(ws_dir: Path, tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "given.csv")
    code, out, err = _import(ws_dir, tmp_path / "given.csv")
    assert code == 1 and "failed paths: 1 of 1" in out and "not a regular file" in err, out + err

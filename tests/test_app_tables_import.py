"""The Tables page's upload, run by Streamlit's AppTest: the summary names each new table, a
failed upload shows its reason in full, offers lenient headers when that is what failed, and
leaves nothing under WORKSPACE/uploads/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from app_demo import page_runner
from streamlit.testing.v1 import AppTest

from tqaforge.queries import list_tables
from tqaforge.store import Workspace, init_workspace

DATA = Path(__file__).parent / "data" / "realworld"
LENIENT = "accept blank or duplicate header names"


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    return init_workspace(tmp_path / "ws", name="uploads")


def _upload(at: AppTest, *files: tuple[str, bytes]) -> AppTest:
    at.file_uploader[0].set_value([(name, data, "text/csv") for name, data in files]).run()
    next(b for b in at.button if b.label == "import").click().run()
    assert not at.exception, at.exception
    return at


def _errors(at: AppTest) -> list[str]:
    """The red messages as text (the page escapes Markdown: ``\\.`` is a dot)."""
    return [re.sub(r"\\(.)", r"\1", str(e.value)) for e in at.error]


def _codes(at: AppTest) -> str:
    return "\n".join(c.value for c in at.code)


def test_the_summary_lists_each_new_table_id(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    at = page_runner(ws.root, monkeypatch)("tables.py")
    _upload(at, ("german.csv", (DATA / "german_decimal_comma.csv").read_bytes()),
            ("two_rows.csv", (DATA / "two_row_header.csv").read_bytes()))
    ids = [t.id for t in list_tables(ws, limit=10).items]
    assert len(ids) == 2
    summary = _codes(at)
    for table_id in ids:
        assert f"new table {table_id}" in summary
    assert "two_rows.csv: merged the first 2 rows into one header" in summary
    assert not at.error


def test_a_failed_upload_shows_its_reason_in_full_and_is_removed(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    at = page_runner(ws.root, monkeypatch)("tables.py")
    long_name = "a_rather_long_column_name_that_would_not_fit_on_one_clipped_line_" * 2
    bad = f"{long_name},{long_name}\n1,2\n".encode()
    _upload(at, ("dup.csv", bad))
    errors = _errors(at)
    assert len(errors) == 1
    # The whole reason: the file, the problem with the full repeated name, the hint.
    assert "uploads/dup.csv, line 1" in errors[0] and f"header name '{long_name}' appears in columns 1 and 2" in errors[0]
    assert "hint: rename one of the columns" in errors[0]
    assert "failed paths: 1 of 1" in _codes(at)
    assert any(LENIENT in str(w.value) for w in at.warning)
    assert not (ws.root / "uploads" / "dup.csv").exists()
    assert list_tables(ws, limit=1).total == 0
    # The way out it offers works: tick the box and import again.
    next(c for c in at.checkbox if c.label == LENIENT).check().run()
    _upload(at, ("dup.csv", bad))
    assert not at.error and list_tables(ws, limit=1).total == 1
    assert (ws.root / "uploads" / "dup.csv").exists()


def test_binary_junk_upload_is_an_error_without_the_lenient_offer(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    at = page_runner(ws.root, monkeypatch)("tables.py")
    _upload(at, ("junk.csv", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4))
    assert any("junk.csv" in e and "not valid UTF-8" in e for e in _errors(at))
    assert not any(LENIENT in str(w.value) for w in at.warning)
    assert not (ws.root / "uploads" / "junk.csv").exists() and list_tables(ws, limit=1).total == 0

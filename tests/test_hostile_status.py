"""`tqaforge status` starts cheaply and still opens, migrates or refuses a workspace as it always did.

The cheap start (issue 26) reads the workspace's own SQLite file with the standard library's
driver when its store is current (tqaforge.quickopen), and imports neither SQLAlchemy, SQLModel,
Alembic nor the records. Guarded from both sides: a real ``python -X importtime -m tqaforge status``
process must not load them (and the same probe does see them where they are needed: a listing, a
store to migrate), and for every broken, behind, redirected or oddly named workspace the command
must give exactly what the usual way (``open_workspace``) gives, which the tests run alongside by
turning the quick read off.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable

import pytest
from typer.testing import CliRunner, Result

from tqaforge import funnel as funnel_module
from tqaforge.cli import app
from tqaforge.config import CONFIG_NAME
from tqaforge.store import current_revision, head_revision, init_workspace, make_engine, migrate

pytestmark = pytest.mark.hostile

runner = CliRunner()
DATA = Path(__file__).resolve().parents[1] / "data"

#: What `tqaforge status` must not import (each costs tens of milliseconds, SQLAlchemy the most).
HEAVY = ("sqlalchemy", "sqlmodel", "alembic", "pandas", "numpy", "pyarrow", "openai", "httpx",
         "tqaforge.store", "tqaforge.queries", "tqaforge.schemas.records")


@pytest.fixture(autouse=True)
def _no_outside_workspace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    monkeypatch.delenv("TQAFORGE_WORKSPACE", raising=False)


def _imported(args: list[str], env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``python -X importtime -m tqaforge ARGS``; the process and every module it imported."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "tqaforge", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=120)
    modules = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    return proc, modules


def _heavy(modules: set[str]) -> list[str]:
    return sorted(h for h in HEAVY if h in modules)


def _workspace_with_tables(root: Path) -> int:
    """A workspace with the bundled tables imported (by real processes: this test process then
    holds no connection to it); how many tables it holds."""
    for args in (["init", str(root)], ["-w", str(root), "tables", "import", str(DATA / "tables")]):
        done = subprocess.run([sys.executable, "-m", "tqaforge", *args], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
    with sqlite3.connect(root / "tqaforge.db") as conn:
        (total,), = conn.execute("SELECT COUNT(*) FROM tables").fetchall()
    conn.close()
    assert total > 0
    return int(total)


@pytest.mark.parametrize("folder", ["ws", "c#d ü [ws]"], ids=["plain", "odd name"])
def test_status_imports_neither_sqlalchemy_nor_the_records(folder: str, tmp_path: Path) -> None:
    """Slow start: every command that opened a workspace paid about 1.1 s of CPU for SQLAlchemy,
    SQLModel and the records, `tqaforge status` included, which only counts rows. Also in a
    directory whose name must be escaped in a SQLite URI ("#" ends a URI's path)."""
    ws = tmp_path / folder
    tables = _workspace_with_tables(ws)
    proc, modules = _imported(["status", "--json", "-w", str(ws)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["stages"]["tables"]["total"] == tables
    assert "tqaforge.funnel" in modules  # the probe saw the command's own modules
    assert _heavy(modules) == []
    plain, modules = _imported(["status", "-w", str(ws)])  # the table, not JSON
    assert plain.returncode == 0 and "pipeline funnel" in plain.stdout
    assert _heavy(modules) == []
    # Control: the same probe sees SQLAlchemy and the records where a command needs them.
    listing, modules = _imported(["tables", "list", "-w", str(ws)])
    assert listing.returncode == 0, listing.stderr[-2000:]
    assert {"sqlalchemy", "sqlmodel", "tqaforge.schemas.records"} <= set(_heavy(modules))


def _behind(root: Path) -> None:
    """A workspace whose store is at the first revision, with one table in it."""
    root.mkdir()
    (root / CONFIG_NAME).write_text('[workspace]\nname = "old"\n', encoding="utf-8")
    engine = make_engine(f"sqlite:///{root / 'tqaforge.db'}")
    migrate(engine, "0001")
    with engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO tables (id, header, rows, origin, created_by, created_at) "
                             "VALUES ('t1', '[\"a\"]', '[[\"1\"]]', 'import', 'old', '2026-01-01 00:00:00+00:00')")
    engine.dispose()


def test_status_on_a_store_behind_migrates_it(tmp_path: Path) -> None:
    """The cheap start must not skip the migration: a store at an older revision is brought to the
    newest, rows kept, as on every open; here Alembic is imported (the probe's other control)."""
    root = tmp_path / "ws"
    _behind(root)
    proc, modules = _imported(["status", "--json", "-w", str(root)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["stages"]["tables"]["total"] == 1
    assert {"alembic", "sqlalchemy"} <= modules
    engine = make_engine(f"sqlite:///{root / 'tqaforge.db'}")
    try:
        assert current_revision(engine) == head_revision()
    finally:
        engine.dispose()
    again, modules = _imported(["status", "--json", "-w", str(root)])  # now current: the cheap way
    assert again.stdout == proc.stdout and _heavy(modules) == []


# --- the same answer as the usual way, for every kind of workspace ----------------------------
# Each maker builds a workspace in ROOT and returns the TQAFORGE_DATABASE_URL to run with (or None).


def _fresh(root: Path) -> str | None:
    init_workspace(root).close()
    return None


def _db_replaced(content: bytes) -> Callable[[Path], str | None]:
    def make(root: Path) -> str | None:
        _fresh(root)
        for extra in ("-wal", "-shm"):
            (root / f"tqaforge.db{extra}").unlink(missing_ok=True)
        (root / "tqaforge.db").write_bytes(content)
        return None
    return make


def _db_missing(root: Path) -> str | None:
    _fresh(root)
    for name in ("tqaforge.db", "tqaforge.db-wal", "tqaforge.db-shm"):
        (root / name).unlink(missing_ok=True)
    return None


def _db_a_directory(root: Path) -> str | None:
    _db_missing(root)
    (root / "tqaforge.db").mkdir()
    return None


def _revision(value: str | None) -> Callable[[Path], str | None]:
    """A current store whose recorded revision says otherwise (None: no alembic_version table)."""
    def make(root: Path) -> str | None:
        _fresh(root)
        with sqlite3.connect(root / "tqaforge.db") as conn:
            if value is None:
                conn.execute("DROP TABLE alembic_version")
            else:
                conn.execute("UPDATE alembic_version SET version_num = ?", (value,))
        conn.close()
        return None
    return make


def _behind_maker(root: Path) -> str | None:
    _behind(root)
    return None


def _elsewhere(root: Path) -> str | None:
    """The environment names another SQLite file, holding tables; the workspace's own is empty."""
    other = root.parent / "other"
    _workspace_with_tables(other)
    _fresh(root)
    return f"sqlite:///{other / 'tqaforge.db'}"


def _config_url(root: Path) -> str | None:
    """The config names the workspace's SQLite file, written another way."""
    _fresh(root)
    config = root / CONFIG_NAME
    text = config.read_text(encoding="utf-8")
    assert 'url = ""' in text
    config.write_text(text.replace('url = ""', f'url = "sqlite:///{root}/./tqaforge.db"'), encoding="utf-8")
    return None


def _broken_config(root: Path) -> str | None:
    _fresh(root)
    (root / CONFIG_NAME).write_text('[workspace]\nname = "x"\nspelt_wrong = 1\n', encoding="utf-8")
    return None


def _not_a_workspace(root: Path) -> str | None:
    root.mkdir()
    return None


KINDS: dict[str, Callable[[Path], str | None]] = {
    "current": _fresh,
    "behind": _behind_maker,
    "random bytes": _db_replaced(os.urandom(4096)),
    "text file": _db_replaced(b"these are my notes, not a database\n" * 20),
    "damaged database": _db_replaced(b"SQLite format 3\x00" + b"\xff" * 4000),
    "empty file": _db_replaced(b""),
    "database missing": _db_missing,
    "database is a directory": _db_a_directory,
    "unknown revision": _revision("9999"),
    "older revision recorded": _revision("0001"),
    "no revision table": _revision(None),
    "database named by the environment": _elsewhere,
    "database named by the config": _config_url,
    "unknown config key": _broken_config,
    "not a workspace": _not_a_workspace,
}


def _outcome(result: Result, tmp: Path) -> tuple[int, str, str]:
    error = "" if result.exception is None or isinstance(result.exception, SystemExit) else repr(result.exception)
    return result.exit_code, result.output.replace(str(tmp), "TMP"), error.replace(str(tmp), "TMP")


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("folder", ["ws", "c#d ü [ws]"], ids=["plain", "odd name"])
def test_status_answers_as_the_usual_way(kind: str, folder: str, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the workspace (broken, behind, redirected, in a directory whose name must be
    escaped in a SQLite URI), `status` and `status --json` exit, print and fail exactly as they do
    when the workspace is opened the usual way; the quick read is only ever a shortcut."""
    outcomes = {}
    for way in ("quick", "usual"):
        monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
        root = tmp_path / way / folder
        root.parent.mkdir()
        url = KINDS[kind](root)
        if url is not None:
            monkeypatch.setenv("TQAFORGE_DATABASE_URL", url)
        if way == "usual":
            monkeypatch.setattr(funnel_module, "quick_funnel", lambda _root: None)
        outcomes[way] = [
            _outcome(runner.invoke(app, ["status", *flag, "-w", str(root)], terminal_width=200), tmp_path / way)
            for flag in ([], ["--json"])
        ]
        assert not (kind == "database missing" and (root / "tqaforge.db").exists()), "status created a database"
    assert outcomes["quick"] == outcomes["usual"]
    if kind in ("current", "behind", "database named by the environment", "database named by the config"):
        assert outcomes["quick"][1][0] == 0, outcomes["quick"]
    if kind == "database named by the environment":
        assert json.loads(outcomes["quick"][1][1])["stages"]["tables"]["total"] > 0  # the other file was read


def test_quick_read_declines_names_sqlalchemy_reads_as_url_syntax(tmp_path: Path) -> None:
    """SQLAlchemy cuts a SQLite URL at "?" and decodes "%41": for such a directory the usual way opens
    another file than ROOT/tqaforge.db, so the quick read must not read that one in its place."""
    fresh = tmp_path / "fresh"
    _fresh(fresh)
    assert funnel_module.quick_funnel(fresh) is not None  # control: a plain name is read the quick way
    for name in ("a%41b", "a?b"):
        root = tmp_path / name
        root.mkdir()
        shutil.copy(fresh / CONFIG_NAME, root / CONFIG_NAME)
        with sqlite3.connect(fresh / "tqaforge.db") as source, sqlite3.connect(root / "tqaforge.db") as copy:
            source.backup(copy)
        source.close()
        copy.close()
        assert funnel_module.quick_funnel(root) is None, name


def test_status_reads_while_another_process_writes(tmp_path: Path) -> None:
    """A writer holding the database (an import, a generation) does not make `status` wait or fail:
    it counts what is committed; the control shows the count then moves once the writer commits."""
    root = tmp_path / "ws"
    tables = _workspace_with_tables(root)
    writer = sqlite3.connect(root / "tqaforge.db", isolation_level=None, check_same_thread=False)
    try:
        others = [row[1] for row in writer.execute("PRAGMA table_info(tables)") if row[1] != "id"]
        writer.execute("BEGIN IMMEDIATE")  # a copy of a stored table under a new id, not committed yet
        writer.execute(f"INSERT INTO tables (id, {', '.join(others)}) SELECT 'uncommitted', {', '.join(others)} "
                       "FROM tables LIMIT 1")
        done: list[subprocess.CompletedProcess[str]] = []
        reader = threading.Thread(target=lambda: done.append(_imported(["status", "--json", "-w", str(root)])[0]))
        reader.start()
        reader.join(timeout=60)
        assert done, "status waited for the writer"
        assert json.loads(done[0].stdout)["stages"]["tables"]["total"] == tables
        writer.execute("COMMIT")
    finally:
        writer.close()
    after, _ = _imported(["status", "--json", "-w", str(root)])
    assert json.loads(after.stdout)["stages"]["tables"]["total"] == tables + 1

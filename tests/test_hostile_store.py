"""Hostile inputs to the workspace config, local TOML files and the store (issue 10).

One test per case; each names its case from the issue in its docstring. Everything is real:
files on disk, SQLite and PostgreSQL, a listening socket that never answers, separate processes.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import text as sql
from sqlmodel import select

from tqaforge.config import CONFIG_NAME, load_config
from tqaforge.errors import ConfigError, StoreError
from tqaforge.generation.corpus import load_corpus_file
from tqaforge.schemas.records import Question, TableRecord
from tqaforge.store import Workspace, init_workspace, make_engine, open_workspace

pytestmark = pytest.mark.hostile

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _no_env_database(monkeypatch: pytest.MonkeyPatch) -> None:
    # Tests that want a database URL set it themselves; the `workspace` fixture sets its own.
    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)


def _config_root(tmp_path: Path, body: bytes | str) -> Path:
    root = tmp_path / "ws"
    init_workspace(root).close()
    path = root / CONFIG_NAME
    path.write_bytes(body if isinstance(body, bytes) else body.encode("utf-8"))
    return root


# --- case: malformed local files ---------------------------------------------------------------


def test_config_not_utf8(tmp_path):
    """Malformed local files: a `tqaforge.toml` that is not UTF-8 (was UnicodeDecodeError)."""
    root = _config_root(tmp_path, '[workspace]\nname = "caf\xe9"\n'.encode("latin-1"))
    with pytest.raises(ConfigError) as info:
        open_workspace(root)
    message = str(info.value)
    assert str(root / CONFIG_NAME) in message
    assert "line 2, column 12" in message and "not UTF-8" in message and "offset 23" in message
    assert "hint:" in message


def test_seeds_toml_not_utf8(sqlite_workspace):
    """Malformed local files: a `seeds.toml` that is not UTF-8 (was UnicodeDecodeError)."""
    path = sqlite_workspace.root / "seeds.toml"
    path.write_bytes('taxonomy = "tablebench"\n# caf\xe9\n'.encode("latin-1"))
    with pytest.raises(ConfigError) as info:
        load_corpus_file(sqlite_workspace)
    assert str(path) in str(info.value) and "line 2" in str(info.value) and "not UTF-8" in str(info.value)


def test_seeds_toml_that_is_a_fifo(sqlite_workspace):
    """Malformed local files: a `seeds.toml` that is a FIFO is refused, not replaced or read."""
    path = sqlite_workspace.root / "seeds.toml"
    os.mkfifo(path)
    with pytest.raises(ConfigError, match="not a regular file"):
        load_corpus_file(sqlite_workspace)
    assert path.is_fifo()  # left as it was


def test_taxonomy_category_list_of_strings(tmp_path):
    """Malformed local files: `[taxonomy] category = ["a","b"]` (was TypeError)."""
    root = _config_root(tmp_path, '[workspace]\ntaxonomy = "mine"\n[taxonomy]\ncategory = ["a", "b"]\n')
    with pytest.raises(ConfigError) as info:
        open_workspace(root)
    assert f"{root / CONFIG_NAME}: [[taxonomy.category]] 1: expected a table" in str(info.value)
    assert "got string 'a'" in str(info.value)


def test_taxonomy_category_integer(tmp_path):
    """Malformed local files: `[taxonomy] category = 7` (was TypeError)."""
    root = _config_root(tmp_path, '[workspace]\ntaxonomy = "mine"\n[taxonomy]\ncategory = 7\n')
    with pytest.raises(ConfigError) as info:
        open_workspace(root)
    assert f"{root / CONFIG_NAME}: [taxonomy] category: expected an array of tables" in str(info.value)
    assert "got integer 7" in str(info.value)


def test_top_level_taxonomy_integer(tmp_path):
    """Malformed local files: top-level `taxonomy = 3` (was AttributeError)."""
    root = _config_root(tmp_path, '[workspace]\nname = "x"\n')
    path = root / CONFIG_NAME
    path.write_text("taxonomy = 3\n" + path.read_text())
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert f"{path}: taxonomy: expected a table ([taxonomy]), got integer 3" in str(info.value)


@pytest.mark.parametrize(
    "body",
    ['[workspace]\nname = 5\n', '[workspace]\ntaxonomy = ["tablebench"]\n', '[database]\nurl = 1\n',
     'workspace = "x"\n', 'llm = 2\n'],
)
def test_wrong_types_in_other_config_keys(tmp_path, body):
    """Malformed local files (the class): every known key of tqaforge.toml is type-checked."""
    root = _config_root(tmp_path, body)
    with pytest.raises(ConfigError, match=r": expected .*, got "):
        open_workspace(root)


# --- case: a tqaforge.db that is not a database ---------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [os.urandom(4096), b"these are my notes, not a database\n" * 20, b"SQLite format 3\x00" + b"\xff" * 4000],
    ids=["random bytes", "text file", "damaged database"],
)
def test_database_file_that_is_not_a_database(tmp_path, content):
    """A `tqaforge.db` that is not a database (was sqlalchemy DatabaseError)."""
    root = tmp_path / "ws"
    init_workspace(root).close()
    for extra in ("-wal", "-shm"):
        (root / f"tqaforge.db{extra}").unlink(missing_ok=True)
    (root / "tqaforge.db").write_bytes(content)
    with pytest.raises(StoreError) as info:
        open_workspace(root)
    assert str(root / "tqaforge.db") in str(info.value)
    assert "hint:" in str(info.value)


# --- case: a second open in a process that holds a connection -------------------------------------
#
# CI (a fast host): `test_two_pulls_at_once_record_each_label_once` saw the pull report 6 new labels
# and its own workspace count none. open_workspace (and status's quick read) opened tqaforge.db to
# read its header; closing that descriptor dropped every POSIX lock the process held on the file,
# SQLite's too, so the pull, closing last, checkpointed and deleted the WAL under the test's open
# connection.

_WRITER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], timeout=30)
conn.execute("CREATE TABLE IF NOT EXISTS probe (x INTEGER)")
conn.execute("INSERT INTO probe VALUES (1)")
conn.commit()
conn.close()
"""


def _wal_kept_through(root: Path, between) -> tuple[bool, int, str]:
    """A connection of this process open on the workspace's database; ``between()``; another process
    writes a row and closes. Whether the WAL is still there after it (it is deleted only by the last
    connection to close, so it must be while ours is open), what our connection reads then, and the
    file's integrity after a write of ours."""
    ws = open_workspace(root)
    try:
        with ws.session() as s:
            s.exec(select(TableRecord)).all()  # the pooled connection now holds its lock on the file
        between()
        subprocess.run([sys.executable, "-c", _WRITER, str(root / "tqaforge.db")], check=True, timeout=60)
        kept = (root / "tqaforge.db-wal").exists()
        with ws.engine.begin() as conn:
            seen = conn.execute(sql("SELECT COUNT(*) FROM probe")).scalar_one()
            conn.execute(sql("INSERT INTO probe VALUES (2)"))
    finally:
        ws.close()
    import sqlite3

    check = sqlite3.connect(root / "tqaforge.db")
    try:
        integrity = check.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        check.close()
    return kept, seen, integrity


def test_opening_the_workspace_again_keeps_this_process_locks(tmp_path):
    """Opening the workspace again, and the quick read `status` makes, while a connection of the
    same process is open: the other process's writer never deletes the WAL under it, our connection
    sees its row, and the file stays whole. Control: a plain open and close of the file, what both
    did before, drops the lock, and the writer, closing last, deletes the WAL."""
    from tqaforge.quickopen import connect_if_current

    def quick_read() -> None:
        conn = connect_if_current(root)
        assert conn is not None
        conn.close()

    root = tmp_path / "ws"
    init_workspace(root).close()
    assert _wal_kept_through(root, lambda: open_workspace(root).close()) == (True, 1, "ok")
    assert _wal_kept_through(root, quick_read) == (True, 3, "ok")  # two writers and one row of ours before it

    def plain_open() -> None:
        with open(root / "tqaforge.db", "rb") as fh:
            fh.read(16)

    kept, _, _ = _wal_kept_through(root, plain_open)
    assert not kept, "control: a descriptor of the file closed by this process drops its SQLite locks"


# --- case: a deleted tqaforge.db ----------------------------------------------------------------


def test_deleted_database_is_not_recreated(tmp_path):
    """A deleted `tqaforge.db` in an initialised workspace was silently recreated empty."""
    root = tmp_path / "ws"
    init_workspace(root).close()
    for name in ("tqaforge.db", "tqaforge.db-wal", "tqaforge.db-shm"):
        (root / name).unlink(missing_ok=True)
    with pytest.raises(StoreError) as info:
        open_workspace(root)
    assert "missing" in str(info.value) and "tqaforge init" in str(info.value)
    assert not (root / "tqaforge.db").exists()
    init_workspace(root).close()  # only init creates a database
    assert (root / "tqaforge.db").exists()


# --- case: init on an existing workspace with other options -------------------------------------


def test_init_with_another_taxonomy_is_refused(tmp_path):
    """`init` on an existing workspace with another taxonomy said "ready" and changed nothing."""
    root = tmp_path / "ws"
    init_workspace(root, taxonomy="freb-tqa").close()
    with pytest.raises(ConfigError) as info:
        init_workspace(root, taxonomy="tablebench")
    assert "'freb-tqa'" in str(info.value) and "'tablebench'" in str(info.value)
    assert "--taxonomy" in str(info.value)
    init_workspace(root).close()  # no options: brought up to date, fine
    init_workspace(root, taxonomy="freb-tqa").close()  # the same options: fine


def test_init_with_another_database_url_is_refused(tmp_path):
    """`init` on an existing workspace with another database URL said "ready" and changed nothing."""
    root = tmp_path / "ws"
    init_workspace(root).close()
    other = f"sqlite:///{tmp_path / 'other.db'}"
    with pytest.raises(ConfigError, match="--database-url") as info:
        init_workspace(root, database_url=other)
    assert "other.db" in str(info.value)
    assert not (tmp_path / "other.db").exists()


# --- case: a PostgreSQL that accepts and never answers ------------------------------------------


@pytest.fixture
def silent_server():
    """A TCP server on 127.0.0.1 that accepts connections and never sends a byte."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(2)
    for conn in accepted:
        conn.close()
    server.close()


def test_silent_postgresql_times_out(tmp_path, monkeypatch, silent_server):
    """A PostgreSQL that accepts TCP connections and never answers hung every command."""
    monkeypatch.setenv("TQAFORGE_DB_CONNECT_TIMEOUT", "2")
    monkeypatch.setenv("TQAFORGE_DATABASE_URL", f"postgresql+psycopg://bob:pw@127.0.0.1:{silent_server}/x")
    outcome: list[BaseException | None] = []

    def attempt() -> None:
        try:
            init_workspace(tmp_path / "ws").close()
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            outcome.append(exc)

    started = time.monotonic()
    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "opening the workspace hung on a silent server"
    assert isinstance(outcome[0], StoreError), outcome
    assert "timeout" in str(outcome[0]) and f":{silent_server}/x" in str(outcome[0])
    assert time.monotonic() - started < 8


# --- case: secrets in database URLs -------------------------------------------------------------


def test_unescaped_at_in_password_is_not_printed(tmp_path, monkeypatch):
    """A database URL with an unescaped '@' in its password printed part of it."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"postgresql+psycopg://bob:s3cr@tpart@127.0.0.1:{port}/x"
    monkeypatch.setenv("TQAFORGE_DATABASE_URL", url)
    with pytest.raises(StoreError) as info:
        init_workspace(tmp_path / "ws")
    message = str(info.value)
    assert "s3cr" not in message and "tpart" not in message, message
    assert f"bob:***@127.0.0.1:{port}/x" in message  # the real host: the '@' was in the password
    # The display URL of an opened workspace masks the whole password too.
    engine = make_engine(url)
    ws = Workspace(root=tmp_path, config=load_config(tmp_path / "ws" / CONFIG_NAME), engine=engine)
    assert ws.database_url == f"postgresql+psycopg://bob:***@127.0.0.1:{port}/x"
    ws.close()


# --- case: NUL characters reaching the store ----------------------------------------------------


def test_nul_in_question_text_is_cleaned_before_the_database(workspace):
    """PostgreSQL: a NUL character in a question (DataError); SQLite stored it silently."""
    with workspace.session() as s:
        s.add(TableRecord(id="t1", header=["a\x00b"], rows=[["1\x00"]], n_rows=1, n_cols=1, numeric_share=1.0))
        s.flush()
        s.add(Question(id="q1", table_id="t1", text="How\x00 many?\x00", meta={"note": "x\x00y", "k\x00": 1}))
    with workspace.session() as s:
        q = s.get(Question, "q1")
        assert q.text == "How many?"
        assert q.meta == {"note": "xy", "k": 1}
        table = s.get(TableRecord, "t1")
        assert (table.header, table.rows) == (["ab"], [["1"]])
    with workspace.engine.connect() as conn:  # Core statements go through the same net
        conn.execute(sql("UPDATE questions SET text = :t WHERE id = 'q1'"), {"t": "bad\x00text"})
        conn.commit()
        assert conn.execute(sql("SELECT text FROM questions WHERE id = 'q1'")).scalar() == "badtext"


# --- case: concurrency: busy timeout and the workspace lock -------------------------------------


def _python(code: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("TQAFORGE_DATABASE_URL", None)
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )


_HOLD_LOCK = """
import sys, time
from pathlib import Path
from tqaforge.store import open_workspace
ws = open_workspace(Path(sys.argv[1]), upgrade=False)
with ws.lock("variants build"):
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
print("released", flush=True)
"""


def test_workspace_lock_between_two_processes(sqlite_workspace):
    """Concurrency: two commands on one workspace: one waits or refuses with a message naming the other."""
    holder = _python(_HOLD_LOCK, str(sqlite_workspace.root), "60")
    try:
        assert holder.stdout.readline().strip() == "locked", holder.stderr.read()
        with pytest.raises(StoreError) as info:
            with sqlite_workspace.lock("variants build", wait=False):
                pass
        message = str(info.value)
        assert f"pid {holder.pid}" in message and "variants build" in message and "wait for it" in message
        started = time.monotonic()
        with pytest.raises(StoreError):
            with sqlite_workspace.lock("variants build", timeout=0.5):
                pass
        assert 0.4 < time.monotonic() - started < 3
        with sqlite_workspace.lock("generate", wait=False):  # another name is another lock
            pass
    finally:
        holder.kill()  # SIGKILL: the kernel drops a dead holder's flock
        holder.wait(10)
    with sqlite_workspace.lock("variants build", timeout=5) as path:
        assert path.read_text().startswith(f"{os.getpid()}\n")


def test_workspace_lock_waits_for_the_holder(sqlite_workspace):
    """Concurrency: a second command with wait=True gets the lock once the first releases it."""
    holder = _python(_HOLD_LOCK, str(sqlite_workspace.root), "1.0")
    try:
        assert holder.stdout.readline().strip() == "locked", holder.stderr.read()
        with sqlite_workspace.lock("variants build", timeout=10):
            assert holder.stdout.readline().strip() == "released"
    finally:
        holder.kill()
        holder.wait(10)


_HOLD_WRITE = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute("INSERT INTO tables (id, header, rows, origin, created_by, created_at, n_rows, n_cols, numeric_share) "
             "VALUES ('held', '[]', '[]', 'import', 'p', '2026-01-01', 0, 0, 0)")
print("writing", flush=True)
time.sleep(1.5)
conn.execute("COMMIT")
"""


def test_second_sqlite_writer_waits(sqlite_workspace):
    """Concurrency: a second writer waits for the first (busy timeout) instead of "database is locked"."""
    with sqlite_workspace.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 30_000
    writer = _python(_HOLD_WRITE, str(sqlite_workspace.root / "tqaforge.db"))
    try:
        assert writer.stdout.readline().strip() == "writing", writer.stderr.read()
        started = time.monotonic()
        with sqlite_workspace.session() as s:
            s.add(TableRecord(id="mine", header=[], rows=[], n_rows=0, n_cols=0, numeric_share=0.0))
        assert time.monotonic() - started > 0.5  # it waited for the other writer
        assert writer.wait(10) == 0, writer.stderr.read()
    finally:
        writer.kill()
        writer.wait(10)
    with sqlite_workspace.session() as s:
        assert {r.id for r in s.exec(select(TableRecord)).all()} == {"held", "mine"}



def test_init_in_a_directory_whose_name_needs_escaping(tmp_path):
    """Malformed local files (the class): `init` wrote a tqaforge.toml it cannot read back for a
    directory name with a backslash, or a URL with a backslash or quote."""
    root = tmp_path / 'odd\\q "dir"'
    url = f"sqlite:///{tmp_path / 'x' }\\\\y\".db"
    (tmp_path / "x").mkdir()
    ws = init_workspace(root, database_url=url)
    try:
        assert ws.config.name == 'odd\\q "dir"'
        assert load_config(root / CONFIG_NAME).database_url == url
    finally:
        ws.close()


def test_concurrent_seed_adds_all_land(sqlite_workspace):
    """Concurrency (the class of the shared `.partial` file): the seed corpus is read, changed and
    written back; six `seeds add` at once used to keep only the last writer's seed (lost about 2 runs in 3)."""
    import subprocess
    import sys

    from tqaforge.generation import corpus as seed_corpus

    ws_dir = sqlite_workspace.root
    seed_corpus.load_corpus_file(sqlite_workspace)  # the workspace copy of the shipped corpus
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tqaforge", "-w", str(ws_dir), "seeds", "add", "Counting", f"How many rows name city {i}?"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for i in range(6)
    ]
    results = [p.communicate(timeout=120) + (p.returncode,) for p in procs]
    assert all(code == 0 for _, _, code in results), results
    seeds = [e.text for e in seed_corpus.seed_entries(sqlite_workspace, "Counting")]
    assert all(f"How many rows name city {i}?" in seeds for i in range(6))
    leftovers = [p.name for p in ws_dir.iterdir() if p.name.endswith(".partial")]
    assert leftovers == []

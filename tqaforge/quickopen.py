"""Reading a workspace's own SQLite file with the standard library's driver, when nothing else is needed.

:func:`tqaforge.store.open_workspace` makes a SQLAlchemy engine, checks the store's revision and
migrates it. Importing SQLAlchemy alone costs more CPU than the rest of ``tqaforge status``, a
command that only counts rows; so a command that only reads may first ask :func:`connect_if_current`
for a plain ``sqlite3`` connection. It gives one only in the common case: the workspace keeps its
records in its default SQLite file (no ``TQAFORGE_DATABASE_URL``, no ``[database] url``), the file
is a SQLite database, and its store is at the newest revision already. In every other case
(PostgreSQL, a store that is behind and must be migrated, a missing or damaged file, any error of
the driver) it returns None and the command opens the workspace the usual way, which migrates,
refuses or reports exactly as it always has. Errors of the workspace itself (no ``tqaforge.toml``,
a broken config or taxonomy) are raised here as :func:`~tqaforge.store.open_workspace` raises them,
in the same order.

This module imports neither SQLAlchemy nor Alembic; the newest revision is read from the
migrations' file names (:func:`newest_migration`).
"""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path
from urllib.parse import quote

from tqaforge.config import WorkspacePaths, find_workspace_root, load_config, resolve_database_url

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
SQLITE_HEADER = b"SQLite format 3\x00"
#: How long a reader waits for a writer that holds the database (the store's busy timeout).
BUSY_TIMEOUT_S = 30.0


def newest_migration() -> str:
    """The newest revision shipped, from the file names alone (``NNNN_*.py`` holds revision
    ``NNNN``; a test checks it against Alembic's own head), without importing Alembic."""
    names = sorted(p.name for p in (MIGRATIONS_DIR / "versions").glob("[0-9][0-9][0-9][0-9]_*.py"))
    return names[-1][:4]


def connect_if_current(root: Path | None = None) -> sqlite3.Connection | None:
    """A ``sqlite3`` connection to the workspace's own SQLite file when its store is at the
    newest revision; None when the workspace must be opened with
    :func:`~tqaforge.store.open_workspace` (module docs). ``root`` is found as there.

    The connection never creates the file (``mode=rw``) and waits for a writer as the store's
    engine does; the caller closes it."""
    found = find_workspace_root(root)
    paths = WorkspacePaths(found)
    config = load_config(paths.config)
    config.taxonomy()  # the same early failure on a broken custom taxonomy as open_workspace
    database = str(paths.sqlite)
    # Only the default URL, and only a path SQLAlchemy would read as written (it cuts a URL at
    # "?" and decodes "%xx"): then this file is the very one the usual way would open.
    if resolve_database_url(paths, config) != f"sqlite:///{database}" or "?" in database or "%" in database:
        return None
    try:
        info = paths.sqlite.stat()
        if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
            return None
        # The file is never opened here but by SQLite (a file that is no database fails the query
        # below): closing a descriptor of it would drop every lock this process's SQLite
        # connections hold on it (see tqaforge.store._check_sqlite_file).
        conn = sqlite3.connect(f"file:{quote(database)}?mode=rw", uri=True, timeout=BUSY_TIMEOUT_S,
                               isolation_level=None)
    except (OSError, sqlite3.Error):
        return None
    try:
        rows = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    except sqlite3.Error:
        rows = []
    if rows != [(newest_migration(),)]:
        conn.close()
        return None
    return conn

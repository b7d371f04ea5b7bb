"""The record store: engine, sessions, migrations and workspace locks.

SQLite (WAL journal, busy timeout, foreign keys on) is the default; any SQLAlchemy URL, in
practice PostgreSQL, works instead. The schema is owned by the Alembic migrations in
``tqaforge/migrations``: opening a workspace brings its database to the newest revision in
place, keeping every row (principle 5: people's work is never lost). Only ``init`` creates a
database; opening a workspace whose SQLite file is gone is an error, never a fresh empty store.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import re
import sqlite3
import stat
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from hashlib import sha256
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from sqlalchemy import JSON, Connection, Engine, Text, bindparam, cast, create_engine, event, type_coerce
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError

if TYPE_CHECKING:
    # Imported where used, not here: opening a workspace (every command, `tqaforge status` first)
    # needs SQLAlchemy's core only, not the ORM, SQLModel and pydantic behind a Session (about
    # 0.1 s), nor Alembic unless a migration is due, nor the other database's dialect.
    from alembic.config import Config
    from sqlmodel import Session

from tqaforge.config import (
    DB_NAME,
    WorkspaceConfig,
    WorkspacePaths,
    find_workspace_root,
    load_config,
    resolve_database_url,
    write_default_config,
)
from tqaforge.errors import ConfigError, DiskError, StoreError, TqaforgeError, disk_error
from tqaforge.quickopen import MIGRATIONS_DIR, SQLITE_HEADER, newest_migration
from tqaforge.redact import redact_secrets, redact_url
from tqaforge.tables.cells import clean_text

log = logging.getLogger(__name__)

#: How long a second SQLite writer waits for the first before "database is locked".
SQLITE_BUSY_TIMEOUT_MS = 30_000
#: Seconds to wait for a PostgreSQL server to accept and answer the connection handshake;
#: TQAFORGE_DB_CONNECT_TIMEOUT overrides it (libpq's minimum is 2).
PG_CONNECT_TIMEOUT_S = 10
CONNECT_TIMEOUT_ENV = "TQAFORGE_DB_CONNECT_TIMEOUT"


def make_engine(url: str, **kwargs: Any) -> Engine:
    """An engine for ``url``.

    SQLite connections get WAL, a busy timeout and foreign keys; PostgreSQL connections get a
    connect timeout and TCP keepalives, so a server that accepts and never answers (or dies
    mid-command) ends in a :class:`StoreError` instead of a hang. Every engine removes NUL
    characters from the values it writes (see :func:`_strip_nul_parameters`).
    """
    try:
        parsed = _parse_url(url)
        if parsed.get_backend_name() == "sqlite":
            engine = create_engine(
                parsed,
                connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
                json_serializer=_json_dumps,
                **kwargs,
            )
            event.listen(engine, "connect", _sqlite_pragmas)
        else:
            connect_args = _pg_connect_args(parsed) if parsed.get_backend_name() == "postgresql" else {}
            engine = create_engine(
                parsed, pool_pre_ping=True, connect_args=connect_args, json_serializer=_json_dumps, **kwargs
            )
    except (SQLAlchemyError, ImportError, ValueError) as exc:
        raise StoreError(
            f"cannot use database URL {redact_url(url)}: {redact_secrets(str(exc), [_password(url)])}",
            hint="check --database-url (or [database] url / TQAFORGE_DATABASE_URL); "
            "write it as dialect+driver://user:password@host:port/dbname",
        ) from None
    event.listen(engine, "before_cursor_execute", _strip_nul_parameters, retval=True)
    return engine


def _parse_url(url: str) -> URL:
    """``url`` parsed; a password with an unescaped ``@`` is taken whole (the host follows the
    LAST ``@``), where SQLAlchemy would connect to a host made of the password's tail."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as exc:  # ValueError: a port that is no number, a broken [IPv6]
        raise StoreError(
            f"not a database URL: {redact_url(url)} ({redact_secrets(str(exc), [])})",
            hint="write it as dialect+driver://user:password@host:port/dbname, or sqlite:///path/to/file.db",
        ) from None
    if parsed.host and "@" in parsed.host:
        password, host = f"{parsed.password or ''}@{parsed.host}".rsplit("@", 1)
        parsed = parsed.set(password=password, host=host)
    return parsed


def _password(url: str) -> str | None:
    try:
        return _parse_url(url).password
    except StoreError:
        return None


def _pg_connect_args(parsed: URL) -> dict[str, Any]:
    """Timeouts for psycopg/libpq, unless the URL sets them itself."""
    timeout = os.environ.get(CONNECT_TIMEOUT_ENV) or str(PG_CONNECT_TIMEOUT_S)
    if not timeout.isdigit() or int(timeout) < 1:
        raise ConfigError(
            f"{CONNECT_TIMEOUT_ENV}={timeout!r} is not a whole number of seconds",
            hint=f"set {CONNECT_TIMEOUT_ENV} to e.g. 10, or unset it",
        )
    wanted = {
        "connect_timeout": int(timeout),
        # Keepalives notice a server that vanished mid-command (about 60 s) instead of never.
        "keepalives": 1,
        "keepalives_idle": 30,
        "keepalives_interval": 10,
        "keepalives_count": 3,
    }
    return {k: v for k, v in wanted.items() if k not in parsed.query}


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets the app read while a CLI import writes; the busy timeout makes a second writer
    # wait instead of failing with "database is locked".
    mode = cursor.execute("PRAGMA journal_mode=WAL").fetchone()
    if mode and str(mode[0]).lower() != "wal":
        log.warning("SQLite refused WAL (journal mode %s): concurrent readers may wait", mode[0])
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


# --- the NUL safety net -------------------------------------------------------------------
# The rule for control characters is tqaforge.tables.cells.clean_text, applied where text
# enters (readers, importer, model replies). This is the net under them: PostgreSQL refuses a
# NUL in text (DataError, and the rest of the command is lost) while SQLite stores it silently,
# and neither driver can encode a lone surrogate (a model's reply may hold "\ud800"),
# so a NUL that slipped through is cleaned here, with the same clean_text, and logged. We clean
# rather than raise so both databases end up with the same row, as the entry points would
# have written it. It works on the driver's parameters, so ORM flushes and Core inserts alike
# are covered.


_UNSAFE = re.compile("[\x00\ud800-\udfff]")  # NUL and lone surrogates: no database stores them
_UNSAFE_ESCAPED = re.compile(r"\\u(0000|[dD][89a-fA-F])")  # the same, as json.dumps escapes them


def _unsafe(value: Any) -> bool:
    return isinstance(value, str) and _UNSAFE.search(value) is not None


def _json_dumps(value: Any) -> str:
    """JSON for JSON columns; strings holding NUL or a lone surrogate are cleaned (json escapes
    them as \\u0000 / \\ud800)."""
    text = json.dumps(value)
    if not _UNSAFE_ESCAPED.search(text):  # fast path: the walk below only runs when needed
        return text
    cleaned, count = _clean_json(value)
    if count:
        log.warning("removed control characters from %d JSON string(s) before writing them", count)
    return json.dumps(cleaned)


def _clean_json(value: Any) -> tuple[Any, int]:
    if isinstance(value, str):
        return (clean_text(value), 1) if _unsafe(value) else (value, 0)
    if isinstance(value, list):
        pairs = [_clean_json(v) for v in value]
        return [v for v, _ in pairs], sum(n for _, n in pairs)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        total = 0
        for k, v in value.items():
            key, n_key = _clean_json(k)
            item, n_item = _clean_json(v)
            out[key] = item
            total += n_key + n_item
        return out, total
    return value, 0


def _strip_nul_parameters(
    _conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, executemany: bool
) -> tuple[str, Any]:
    """``before_cursor_execute`` hook: in statements that write (INSERT, UPDATE), str parameters
    holding NUL are passed through clean_text. Reads are left alone: cleaning a LIKE pattern
    would change what it matches."""
    if not _WRITES.match(statement):
        return statement, parameters
    rows = parameters if executemany else [parameters]
    if not any(_has_nul(row) for row in rows or ()):
        return statement, parameters
    cleaned = [_clean_row(row) for row in rows]
    log.warning(
        "removed control characters from values holding NUL or lone surrogates in: %s",
        " ".join(statement.split())[:80],
    )
    return statement, (cleaned if executemany else cleaned[0])


_WRITES = re.compile(r"\s*(INSERT|UPDATE|REPLACE|UPSERT)\b", re.IGNORECASE)


def _has_nul(row: Any) -> bool:
    values = row.values() if isinstance(row, dict) else row if isinstance(row, (list, tuple)) else ()
    return any(_unsafe(v) for v in values)


def _clean_row(row: Any) -> Any:
    def fix(v: Any) -> Any:
        return clean_text(v) if _unsafe(v) else v

    if isinstance(row, dict):
        return {k: fix(v) for k, v in row.items()}
    return type(row)(fix(v) for v in row)


# --- errors ---------------------------------------------------------------------------------


def _display_url(engine: Engine) -> str:
    return redact_url(engine.url.render_as_string(hide_password=True))


# SQLite's primary result codes a full, read-only or unwritable disk shows up as. A full disk
# is not always SQLITE_FULL: when the -shm or -wal file beside the database cannot grow, SQLite
# says "disk I/O error"; on a read-only mount it says "unable to open database file".
_SQLITE_PERM, _SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_FULL, _SQLITE_CANTOPEN = 3, 8, 10, 13, 14
#: Below this much free space, an I/O error of SQLite is taken for a full disk.
_NEARLY_FULL_BYTES = 1024**2


def disk_problem(exc: BaseException, url: URL | None) -> DiskError | None:
    """A database error that is really the disk's (full, over quota, read-only, not writable),
    as a :class:`DiskError` naming the database file and its file system; None for any other
    error (a damaged file, a lock, a constraint), which keeps its own message. ``url`` is the
    database's (``engine.url``; None when not known).

    SQLite's message does not say which: the file system of the database is asked (mounted
    read-only? space left? writable?). PostgreSQL's disk is the server's: its SQLSTATE says."""
    orig = getattr(exc, "orig", None) or exc
    code = getattr(orig, "sqlite_errorcode", None)
    if isinstance(code, int):
        database = url.database if url is not None else None
        if not database or database == ":memory:" or database.startswith("file:"):
            database = None
        number = _sqlite_disk_errno(code & 0xFF, database)
        return None if number is None else disk_error(OSError(number, os.strerror(number)), database)
    sqlstate = getattr(orig, "sqlstate", None)
    where = f"the database {redact_url(url.render_as_string(hide_password=True))}" if url is not None else "the database server"
    if sqlstate == "53100":  # disk_full
        return DiskError(f"{where} has no space left on its disk", path=None, reason="full",
                         hint="free space on the database server's disk, then run the command again")
    if sqlstate == "25006":  # read_only_sql_transaction: a replica, or default_transaction_read_only
        return DiskError(f"{where} accepts no writes (a read-only server or replica)", path=None, reason="read-only",
                         hint="point --database-url (or [database] url / TQAFORGE_DATABASE_URL) at a writable server")
    return None


def disk_failure(exc: BaseException, root: Path | None = None, url: URL | None = None) -> DiskError | None:
    """``exc`` (an ``OSError``, a database driver's error, or one raised while handling such)
    as the :class:`DiskError` it is when a disk refused a write; else None. The one conversion
    the CLI (every command) and the app apply to whatever a step raised.

    ``root`` and ``url`` are the workspace's, when known: a write error that names no file (a
    failed ``write`` or ``close``) is placed on the workspace's file system when that one is full
    or read-only, and a database error on the workspace's database file."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, DiskError):
            return cause
        if isinstance(cause, OSError):
            named = cause.filename if cause.filename is not None else _full_or_read_only(root, cause)
            return disk_error(cause, named)
        if isinstance(cause, DBAPIError):
            return disk_problem(cause, url)
        cause = cause.__cause__ or cause.__context__
    return None


def _full_or_read_only(root: Path | None, exc: OSError) -> Path | None:
    """``root`` when its file system fits ``exc``: mounted read-only for EROFS, (nearly) full
    for ENOSPC and EDQUOT; else None (the error is about some other file system)."""
    if root is None:
        return None
    try:
        st = os.statvfs(root)
    except OSError:
        return None
    if exc.errno == errno.EROFS and st.f_flag & os.ST_RDONLY:
        return root
    if exc.errno in (errno.ENOSPC, errno.EDQUOT) and st.f_bavail * st.f_frsize < _NEARLY_FULL_BYTES:
        return root
    return None


def _sqlite_disk_errno(primary: int, database: str | None) -> int | None:
    """The errno that best says why SQLite could not write ``database``, from its file system."""
    if primary not in (_SQLITE_PERM, _SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_FULL, _SQLITE_CANTOPEN):
        return None
    if database is None:
        return errno.ENOSPC if primary == _SQLITE_FULL else None
    folder = os.path.dirname(os.path.abspath(database))
    try:
        st = os.statvfs(folder)
    except OSError:
        return errno.ENOSPC if primary == _SQLITE_FULL else None
    if st.f_flag & os.ST_RDONLY:
        return errno.EROFS
    if primary == _SQLITE_FULL or st.f_bavail * st.f_frsize < _NEARLY_FULL_BYTES:
        return errno.ENOSPC
    files = [database, database + "-wal", database + "-shm"]
    if not os.access(folder, os.W_OK | os.X_OK) or any(os.path.exists(f) and not os.access(f, os.W_OK) for f in files):
        return errno.EACCES
    return None


def _database_error(engine: Engine, exc: DBAPIError, action: str) -> TqaforgeError:
    """A driver error while opening or migrating, as a StoreError that names the (redacted) URL
    (a :class:`DiskError` when the disk is full, read-only or not writable)."""
    problem = disk_problem(exc, engine.url)
    if problem is not None:
        return problem
    detail = " ".join(str(exc.orig).split()) or type(exc.orig).__name__
    detail = redact_secrets(detail, [engine.url.password])
    where = _display_url(engine)
    if engine.dialect.name == "sqlite":
        return StoreError(
            f"cannot {action} the SQLite database {engine.url.database}: {detail}",
            hint="if the file is damaged or not a database, move it away and restore a backup; "
            "`tqaforge init DIR` creates a new, empty workspace",
        )
    return StoreError(
        f"cannot {action} the database {where}: {detail}",
        hint="check that the database server is running and answering, and that --database-url "
        f"(or [database] url / TQAFORGE_DATABASE_URL) is right; {CONNECT_TIMEOUT_ENV} sets the "
        "connect timeout in seconds",
    )


def _alembic_config() -> "Config":
    # Alembic is imported only when a migration may be needed: opening a workspace that is
    # already at the newest revision (every command but the first after an upgrade) skips it.
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return cfg


def head_revision() -> str:
    """The newest migration revision this version of tqaforge knows."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
    assert head is not None  # the package always ships migrations
    return head


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at (None for an empty database)."""
    from alembic.runtime.migration import MigrationContext

    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    except DBAPIError as exc:
        raise _database_error(engine, exc, "read") from None


def migrate(engine: Engine, revision: str = "head") -> None:
    """Bring the database to ``revision`` (default: newest), keeping all rows.

    Any driver error (server unreachable or silent, not a database, no permission) becomes a
    :class:`StoreError` naming the database with its password masked.
    """
    from alembic import command

    cfg = _alembic_config()
    try:
        with engine.connect() as conn:
            if engine.dialect.name == "sqlite":
                # Table rebuilds in SQLite migrations would trip over foreign keys mid-way;
                # turn them off for the migration and check them after.
                conn.exec_driver_sql("PRAGMA foreign_keys=OFF")
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
            conn.commit()
            if engine.dialect.name == "sqlite":
                broken = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                conn.exec_driver_sql("PRAGMA foreign_keys=ON")
                if broken:
                    raise StoreError(f"migration left {len(broken)} dangling references: {broken[:5]}")
    except DBAPIError as exc:
        raise _database_error(engine, exc, "open and migrate") from None


@dataclass
class Workspace:
    """An opened workspace: where it lives, its config and its database engine."""

    root: Path
    config: WorkspaceConfig
    engine: Engine

    @property
    def paths(self) -> WorkspacePaths:
        """Where this workspace keeps its files (seeds, reports, prompts, locks, ...)."""
        return WorkspacePaths(self.root)

    @property
    def database_url(self) -> str:
        """The database URL for display: its password (however written) is masked."""
        return _display_url(self.engine)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session that commits on success and rolls back on any error."""
        from sqlmodel import Session

        with Session(self.engine, expire_on_commit=False) as s:
            yield from self._committed(s)

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        """A SQLAlchemy Core connection in a transaction that commits on success and rolls back
        on any error, with the same disk errors as :meth:`session`. For the few commands that
        read counts without records (:mod:`tqaforge.funnel`): no ORM is imported for them."""
        with self.engine.connect() as conn:
            yield from self._committed(conn)

    def _committed(self, handle: Any) -> Iterator[Any]:
        """Yield ``handle`` (a Session or a Connection), commit it when the caller's block ends,
        roll it back on any error, which is raised as a disk problem when it is one."""
        try:
            yield handle
            handle.commit()
        except BaseException as exc:
            handle.rollback()
            self._raise_disk_problem(exc)
            raise

    def _raise_disk_problem(self, exc: BaseException) -> None:
        # A full or read-only disk says so, naming the file, instead of a driver traceback; the
        # transaction is rolled back, so nothing of it was written.
        problem = disk_problem(exc, self.engine.url) if isinstance(exc, DBAPIError) else None
        if problem is not None:
            raise problem from None

    @contextmanager
    def lock(self, name: str, *, wait: bool = True, timeout: float | None = None) -> Iterator[Path]:
        """Hold the workspace-wide lock ``name`` (e.g. ``"generate"``) for the ``with`` block.

        An advisory ``flock`` on ``NAME.lock`` in :attr:`WorkspacePaths.locks` (``WORKSPACE/.locks``), so
        it works between processes and is released by the kernel when the holder dies, even by
        SIGKILL. The holder writes
        its pid and command into the file; a command that cannot get the lock (at once when
        ``wait`` is false, else within ``timeout`` seconds, or ever when ``timeout`` is None)
        gets a :class:`StoreError` naming the holder. Yields the lock file's path.

        >>> with ws.lock("variants build", wait=False):  # doctest: +SKIP
        ...     build()
        """
        path = self.paths.locks / _lock_file_name(name)
        try:
            path.parent.mkdir(exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreError(
                f"cannot create the lock file {path}: {exc.strerror}",
                hint=f"make {self.root} writable for this user",
            ) from None
        try:
            _acquire(fd, path, name, wait=wait, timeout=timeout)
            try:
                _write_holder(fd)
                yield path
            finally:
                os.ftruncate(fd, 0)  # the next reader must not blame a finished command
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def close(self) -> None:
        self.engine.dispose()


def refresh_planner_statistics(ws: Workspace) -> bool:
    """Give SQLite's query planner statistics of the workspace's indexes (``ANALYZE``: it reads
    the indexes, not the rows; 17 ms for TableBench x10's 44,300 variants); True when it ran.
    Without statistics SQLite takes an index on any column compared with ``=`` or ``IN`` for
    selective: a release build's paged read of the variants went through the index on ``status``
    (one value for all of them) and sorted every variant for each page of 200 (TableBench x10:
    63 ms a page, 11 s in all; with statistics it walks the primary key, 2 ms a page).
    ``PRAGMA optimize`` would not do: SQLite 3.40 analyses only tables that queries of the same
    connection missed statistics for. PostgreSQL analyses its tables itself (autovacuum): nothing
    is done there. A database that is busy or read-only is left as it is: the statistics only make
    queries faster."""
    if ws.engine.dialect.name != "sqlite":
        return False
    from sqlalchemy.exc import OperationalError

    try:
        with ws.engine.connect() as conn:
            conn.exec_driver_sql("ANALYZE")
            conn.commit()
    except OperationalError:
        return False
    return True


def _lock_file_name(name: str) -> str:
    """A file name for lock ``name``: readable, and distinct for distinct names."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:60]
    if slug == name:
        return f"{slug}.lock"
    return f"{slug or 'lock'}-{sha256(name.encode()).hexdigest()[:8]}.lock"


def _acquire(fd: int, path: Path, name: str, *, wait: bool, timeout: float | None) -> None:
    if wait and timeout is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    deadline = time.monotonic() + ((timeout or 0.0) if wait else 0.0)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise StoreError(f"cannot lock {path}: {exc.strerror}") from None
        if time.monotonic() >= deadline:
            raise StoreError(
                f"another tqaforge command ({_holder(path)}) is running {name} on this workspace",
                hint="wait for it or stop it, then run this command again",
            )
        time.sleep(0.05)


def _write_holder(fd: int) -> None:
    # Arguments may hold a database URL; mask passwords before anyone can read them here.
    command_line = " ".join(redact_url(a) if "://" in a else a for a in sys.argv)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n{command_line}\n".encode(), 0)


def _holder(path: Path) -> str:
    """ "pid N: COMMAND" from the lock file, as well as it can be read."""
    try:
        pid, _, command_line = path.read_text(encoding="utf-8", errors="replace").partition("\n")
    except OSError:
        return "unknown process"
    if not pid.strip():
        return "a process that is just starting"
    return f"pid {pid.strip()}: {command_line.strip()[:200] or '?'}"


def init_workspace(
    root: Path,
    *,
    name: str | None = None,
    taxonomy: str | None = None,
    database_url: str | None = None,
) -> Workspace:
    """Create (or bring up to date) a workspace in ``root``: config file plus migrated database.

    On an existing workspace, options that differ from its config (another taxonomy, database
    URL or name) are refused with what differs: ``init`` never silently ignores them. The same
    or no options bring the workspace's database up to date (and create its SQLite file if it
    is missing: ``init`` is the one command that creates a database).
    """
    root = root.resolve()
    config_path = WorkspacePaths(root).config
    if config_path.exists() or config_path.is_symlink():
        _check_same_options(load_config(config_path), name=name, taxonomy=taxonomy, database_url=database_url)
    else:
        root.mkdir(parents=True, exist_ok=True)
        write_default_config(
            root, name=name or root.name, taxonomy=taxonomy or "tablebench", database_url=database_url
        )
    return open_workspace(root, create=True)


def _check_same_options(
    config: WorkspaceConfig, *, name: str | None, taxonomy: str | None, database_url: str | None
) -> None:
    where = config.path
    differences = []
    if taxonomy is not None and taxonomy != config.taxonomy_name:
        differences.append(f"its taxonomy is {config.taxonomy_name!r}, you asked for {taxonomy!r} (--taxonomy)")
    if database_url is not None and database_url != (config.database_url or ""):
        have = redact_url(config.database_url) if config.database_url else f"the SQLite file {DB_NAME}"
        differences.append(f"its database is {have}, you asked for {redact_url(database_url)} (--database-url)")
    if name is not None and name != config.name:
        differences.append(f"its name is {config.name!r}, you asked for {name!r} (--name)")
    if differences:
        raise ConfigError(
            f"{where.parent if where else 'this directory'} is already a tqaforge workspace and "
            + "; ".join(differences),
            hint=f"run `tqaforge init` there without those options to bring it up to date, "
            f"edit {where} to change them (a taxonomy only before questions exist), "
            "or run `tqaforge init NEW_DIR` with them for a new workspace",
        )


def open_workspace(root: Path | None = None, *, upgrade: bool = True, create: bool = False) -> Workspace:
    """Open the workspace at ``root`` (or the one around the cwd), migrating its database.

    Refuses (StoreError) when the workspace's SQLite file is missing, unless ``create`` (only
    ``init`` passes it): a deleted or moved database is never silently replaced by an empty one.
    """
    found = find_workspace_root(root)
    paths = WorkspacePaths(found)
    config = load_config(paths.config)
    config.taxonomy()  # fail early on a broken custom taxonomy
    url = resolve_database_url(paths, config)
    engine = make_engine(url)
    try:
        if engine.dialect.name == "sqlite":
            _check_sqlite_file(engine, create=create)
        if upgrade and not _at_newest(engine):
            migrate(engine)
    except BaseException:
        engine.dispose()
        raise
    return Workspace(root=found, config=config, engine=engine)


def _at_newest(engine: Engine) -> bool:
    """Whether the database is at the newest revision already (one cheap query); anything
    unexpected says no, and :func:`migrate` then does the work and reports any error."""
    try:
        with engine.connect() as conn:
            rows = conn.exec_driver_sql("SELECT version_num FROM alembic_version").fetchall()
    except SQLAlchemyError:
        return False
    return [tuple(r) for r in rows] == [(newest_migration(),)]


def _check_sqlite_file(engine: Engine, *, create: bool) -> None:
    """The workspace's SQLite file exists (or ``create``), is a regular file and a database."""
    database = engine.url.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    path = Path(database)
    try:
        info = path.stat()
    except FileNotFoundError:
        if create:
            return
        raise StoreError(
            f"the workspace database {path} is missing (it may have been moved or deleted)",
            hint="put the file back, or point TQAFORGE_DATABASE_URL / [database] url at it; "
            "`tqaforge init DIR` creates a new, empty database",
        ) from None
    if not stat.S_ISREG(info.st_mode):
        raise StoreError(f"the workspace database {path} is not a regular file", hint="move it away")
    # Asked through SQLite, never opened here: closing any descriptor of a file drops every POSIX
    # lock this process holds on it, SQLite's included. A process with a connection open (the app,
    # a test, a command that opens its workspace twice) then looked like no reader at all to
    # another process, which, closing last, checkpointed and deleted the WAL under that connection:
    # rows it had committed went unseen, and a write after that broke the file ("disk I/O error").
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA schema_version")
    except DBAPIError as exc:
        if getattr(exc.orig, "sqlite_errorcode", None) != sqlite3.SQLITE_NOTADB:
            return  # reported where the store is first read (_at_newest, migrate), as before
        # SQLite refused the file: it holds no lock of ours, so its first bytes can be read.
        with open(path, "rb") as fh:
            header = fh.read(len(SQLITE_HEADER))
        raise StoreError(
            f"{path} is not a SQLite database (it starts with {header[:8]!r})",
            hint="move it away and restore the database from a backup; "
            "`tqaforge init DIR` creates a new, empty workspace",
        ) from None


def insert_new(session: Session, model: type, rows: list[dict[str, Any]], *, json_text: Iterable[str] = ()) -> set[str]:
    """Insert ``rows`` of ``model`` skipping ids already stored; the ids this call inserted.

    The one conflict-safe insert (import, variant builds). Two writers of the same content at once must both succeed: a plain INSERT raised
    IntegrityError for the second. ``ON CONFLICT DO NOTHING`` lets the database settle the race
    (PostgreSQL makes the second writer wait for the first to commit; SQLite serialises writers
    through its busy timeout), and ``RETURNING`` names the rows that were new, so "already
    present" is counted exactly. ``json_text`` names JSON columns given as JSON text already.
    """
    from sqlalchemy.dialects.postgresql import insert as postgresql_insert
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    if not rows:
        return set()
    dialect = session.get_bind().dialect.name
    if dialect not in ("postgresql", "sqlite"):
        raise StoreError(f"conflict-safe inserts need SQLite or PostgreSQL, not {dialect}")
    table = model.__table__  # type: ignore[attr-defined]
    statement: Any = (postgresql_insert if dialect == "postgresql" else sqlite_insert)(table)
    names = list(json_text)
    if names:
        # SQLite stores JSON as text as it is; PostgreSQL casts the text to its json type.
        statement = statement.values({
            n: cast(bindparam(n, type_=Text), JSON) if dialect == "postgresql" else type_coerce(bindparam(n, type_=Text), Text)
            for n in names
        })
    # Rows in id order: two writers of overlapping files then lock rows in the same order
    # (PostgreSQL would otherwise be able to deadlock them).
    rows = sorted(rows, key=lambda r: r["id"])
    statement = statement.on_conflict_do_nothing(index_elements=["id"]).returning(table.c.id)
    return set(session.execute(statement, rows).scalars().all())

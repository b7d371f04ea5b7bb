"""The record store: engine, sessions and migrations.

SQLite (WAL journal, busy timeout, foreign keys on) is the default; any SQLAlchemy URL, in
practice PostgreSQL, works instead. The schema is owned by the Alembic migrations in
``tqaforge/migrations``: opening a workspace brings its database to the newest revision in
place, keeping every row (principle 5: people's work is never lost).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlmodel import Session

from tqaforge.config import (
    WorkspaceConfig,
    WorkspacePaths,
    find_workspace_root,
    load_config,
    resolve_database_url,
    write_default_config,
)
from tqaforge.errors import StoreError

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
SQLITE_BUSY_TIMEOUT_MS = 30_000


def make_engine(url: str, **kwargs: Any) -> Engine:
    """An engine for ``url``; SQLite connections get WAL, a busy timeout and foreign keys."""
    try:
        if url.startswith("sqlite"):
            engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}, **kwargs)
            event.listen(engine, "connect", _sqlite_pragmas)
            return engine
        return create_engine(url, pool_pre_ping=True, **kwargs)
    except (SQLAlchemyError, ImportError, ValueError) as exc:
        raise StoreError(f"cannot use database URL {_redact(url)}: {exc}") from None


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets the app read while a CLI import writes; the busy timeout makes a second writer
    # wait instead of failing with "database is locked".
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _redact(url: str) -> str:
    """The URL without its password, for messages."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        return f"{scheme}://{creds.split(':', 1)[0]}:***@{host}"
    return url


def _alembic_config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return cfg


def head_revision() -> str:
    """The newest migration revision this version of tqaforge knows."""
    head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
    assert head is not None  # the package always ships migrations
    return head


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at (None for an empty database)."""
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def migrate(engine: Engine, revision: str = "head") -> None:
    """Bring the database to ``revision`` (default: newest), keeping all rows."""
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
    except OperationalError as exc:
        raise StoreError(
            f"cannot migrate the database: {exc.orig}",
            hint="check that the database server is running and the URL is right",
        ) from None


@dataclass
class Workspace:
    """An opened workspace: where it lives, its config and its database engine."""

    root: Path
    config: WorkspaceConfig
    engine: Engine

    @property
    def database_url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session that commits on success and rolls back on any error."""
        with Session(self.engine, expire_on_commit=False) as s:
            try:
                yield s
                s.commit()
            except BaseException:
                s.rollback()
                raise

    def close(self) -> None:
        self.engine.dispose()


def init_workspace(
    root: Path,
    *,
    name: str | None = None,
    taxonomy: str = "tablebench",
    database_url: str | None = None,
) -> Workspace:
    """Create (or bring up to date) a workspace in ``root``: config file plus migrated database."""
    root = root.resolve()
    root.mkdir(parents=True, exist_ok=True)
    write_default_config(root, name=name or root.name, taxonomy=taxonomy, database_url=database_url)
    return open_workspace(root)


def open_workspace(root: Path | None = None, *, upgrade: bool = True) -> Workspace:
    """Open the workspace at ``root`` (or the one around the cwd), migrating its database."""
    found = find_workspace_root(root)
    paths = WorkspacePaths(found)
    config = load_config(paths.config)
    config.taxonomy()  # fail early on a broken custom taxonomy
    engine = make_engine(resolve_database_url(paths, config))
    if upgrade:
        migrate(engine)
    return Workspace(root=found, config=config, engine=engine)

"""A new Label Studio server's database is a copy of its install's migrated template.

The fast tests use a fake virtualenv whose ``python`` is a shell script that "migrates" by writing
a file (and counts its runs); the last test starts real servers from the real template.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
from pathlib import Path

import pytest
from conftest import free_port
from label_studio_sdk import LabelStudio
from prerequisites import unavailable

from tqaforge.annotation.labelstudio import database_template
from tqaforge.annotation.labelstudio.database_template import DATABASE_NAME, seed, template_path, usable
from tqaforge.annotation.labelstudio.server import (
    LabelStudioSettings,
    child_environment,
    executable,
    resolve_venv,
    start_server,
    token_works,
)

pytestmark = pytest.mark.hostile


def _fake_venv(root: Path, *, migrate: str = 'printf "schema" > "$LABEL_STUDIO_BASE_DATA_DIR/label_studio.sqlite3"'
               ) -> Path:
    """A virtualenv with ``label_studio`` 9.9.9 "installed"; its python runs ``migrate`` (sh), logs
    each run to runs.log and its environment to env.log. Returns its ``bin/label-studio``."""
    (root / "lib" / "python3.11" / "site-packages" / "label_studio-9.9.9.dist-info").mkdir(parents=True)
    (root / "bin").mkdir()
    python = root / "bin" / "python"
    python.write_text(f'#!/bin/sh\necho run >> "{root}/runs.log"\nenv > "{root}/env.log"\nsleep 0.3\n{migrate}\n')
    python.chmod(0o700)
    command = root / "bin" / "label-studio"
    command.write_text("#!/bin/sh\nexit 1\n")
    command.chmod(0o700)
    return command


def _runs(venv: Path) -> int:
    log = venv / "runs.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.fixture
def log_fd(tmp_path: Path):
    fd = os.open(tmp_path / "server.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    yield fd
    os.close(fd)


ENV = {"LABEL_STUDIO_USERNAME": "ana@lab.org", "LABEL_STUDIO_PASSWORD": "secret-pw", "LABEL_STUDIO_USER_TOKEN": "t0ken",
       "HEARTEX_USERNAME": "x", "DJANGO_DB": "sqlite"}


def test_the_template_is_made_once_without_a_login_and_copied_private(tmp_path: Path, log_fd: int) -> None:
    command = _fake_venv(tmp_path / "venv")
    first, second = tmp_path / "a", tmp_path / "b"
    for data_dir in (first, second):
        data_dir.mkdir()
        (data_dir / f".{DATABASE_NAME}.999999.part").write_bytes(b"sc")  # a copy killed half way
        assert seed(data_dir, command, ENV, log_fd=log_fd) is True
        assert (data_dir / DATABASE_NAME).read_bytes() == b"schema"
        assert stat.S_IMODE((data_dir / DATABASE_NAME).stat().st_mode) == 0o600
    assert _runs(tmp_path / "venv") == 1, "the second server reused the template"
    template = template_path(command)
    assert template == tmp_path / "venv" / "tqaforge" / "label_studio-9.9.9.sqlite3" and usable(template)
    # The build ran with no login of anyone's (Label Studio adds the login at start, from the environment).
    build_env = (tmp_path / "venv" / "env.log").read_text()
    assert "secret-pw" not in build_env and "t0ken" not in build_env and "ana@lab.org" not in build_env
    assert "HEARTEX_USERNAME" not in build_env and "DJANGO_DB=sqlite" in build_env
    assert sorted(p.name for p in first.iterdir()) == [DATABASE_NAME], "no partial file left behind"


def test_an_existing_database_is_never_replaced(tmp_path: Path, log_fd: int) -> None:
    command = _fake_venv(tmp_path / "venv")
    data_dir = tmp_path / "d"
    data_dir.mkdir()
    (data_dir / DATABASE_NAME).write_bytes(b"people's labels")
    assert seed(data_dir, command, ENV, log_fd=log_fd) is False
    assert (data_dir / DATABASE_NAME).read_bytes() == b"people's labels"
    assert _runs(tmp_path / "venv") == 0, "nothing to seed: no template made either"


def test_a_damaged_template_is_made_again(tmp_path: Path, log_fd: int) -> None:
    command = _fake_venv(tmp_path / "venv")
    killed = tmp_path / "venv" / "tqaforge" / "build-killed"  # a build killed half way, earlier
    killed.mkdir(parents=True)
    (killed / DATABASE_NAME).write_bytes(b"sch")
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    assert seed(tmp_path / "a", command, ENV, log_fd=log_fd)
    template = template_path(command)
    assert template is not None
    template.write_bytes(b"schem")  # truncated on a full disk, say
    assert seed(tmp_path / "b", command, ENV, log_fd=log_fd)
    assert (tmp_path / "b" / DATABASE_NAME).read_bytes() == b"schema" and _runs(tmp_path / "venv") == 2
    assert not killed.exists(), "the killed build's scratch directory was cleared"
    # Control: the digest is what caught it.
    template.write_bytes(b"other")
    assert not usable(template) and not template.exists()


@pytest.mark.parametrize("migrate", ["exit 3", "true"], ids=["fails", "writes-nothing"])
def test_a_failed_build_leaves_the_start_as_before(tmp_path: Path, log_fd: int, migrate: str) -> None:
    command = _fake_venv(tmp_path / "venv", migrate=migrate)
    (tmp_path / "d").mkdir()
    assert seed(tmp_path / "d", command, ENV, log_fd=log_fd) is False
    assert not (tmp_path / "d" / DATABASE_NAME).exists()
    assert not list((tmp_path / "venv" / "tqaforge").glob("label_studio-*")), "nothing published"
    assert "Label Studio makes its own" in (tmp_path / "server.log").read_text()


def test_not_used_when_switched_off_elsewhere_or_not_a_virtualenv(tmp_path: Path, log_fd: int) -> None:
    command = _fake_venv(tmp_path / "venv")
    (tmp_path / "d").mkdir()
    for env in ({**ENV, "TQAFORGE_LABEL_STUDIO_TEMPLATE": "0"}, {**ENV, "LABEL_STUDIO_DATABASE_NAME": "/x.db"},
                {**ENV, "HEARTEX_DATABASE_NAME": "/x.db"}, {**ENV, "DATABASE_NAME": "/x.db"}):
        assert seed(tmp_path / "d", command, env, log_fd=log_fd) is False
    assert _runs(tmp_path / "venv") == 0
    assert database_template.enabled({}) and not database_template.enabled({"TQAFORGE_LABEL_STUDIO_TEMPLATE": "off"})
    loose = tmp_path / "bin" / "label-studio"  # on PATH, no virtualenv around it
    loose.parent.mkdir()
    loose.write_text("#!/bin/sh\n")
    assert template_path(loose) is None and seed(tmp_path / "d", loose, ENV, log_fd=log_fd) is False


def test_servers_starting_together_make_the_template_once(tmp_path: Path, log_fd: int) -> None:
    command = _fake_venv(tmp_path / "venv")
    results: dict[int, bool] = {}
    waited: list[int] = []

    def one(i: int) -> None:
        (tmp_path / str(i)).mkdir()
        results[i] = seed(tmp_path / str(i), command, ENV, log_fd=log_fd, on_wait=lambda: waited.append(i))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert results == {0: True, 1: True, 2: True} and _runs(tmp_path / "venv") == 1
    assert all((tmp_path / str(i) / DATABASE_NAME).read_bytes() == b"schema" for i in range(3))


def _login_rows(database: Path) -> dict[str, int]:
    with sqlite3.connect(database) as db:
        return {table: db.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]  # noqa: S608 (our names)
                for table in ("htx_user", "authtoken_token", "django_session", "organization")}


def _migration_times(database: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(database) as db:
        return db.execute("SELECT name, applied FROM django_migrations ORDER BY id").fetchall()


def test_real_servers_start_from_the_template_and_share_no_login(tmp_path: Path) -> None:
    """Two new servers of the real install: both databases are copies of one template (the same
    migration times to the microsecond), the template holds no account, token or session, and
    neither server accepts the other's token."""
    command = executable(resolve_venv())
    if template_path(command) is None:
        unavailable("Label Studio is not installed in a virtualenv", install="make labelstudio; make test installs it")
    servers = []
    try:
        for name in ("ana", "ben"):
            settings = LabelStudioSettings(data_dir=tmp_path / name, port=free_port(), username=f"{name}@lab.org")
            servers.append(start_server(settings))
        template = template_path(command)
        assert template is not None and usable(template)
        assert _login_rows(template) == {"htx_user": 0, "authtoken_token": 0, "django_session": 0, "organization": 0}
        times = _migration_times(template)
        assert len(times) > 100
        for server in servers:
            database = server.settings.data_dir / DATABASE_NAME
            assert _migration_times(database)[:len(times)] == times, "migrated by Label Studio, not copied"
            assert stat.S_IMODE(database.stat().st_mode) == 0o600
            assert "Initializing database" not in server.log_path.read_text(errors="replace")
        ana, ben = servers
        assert token_works(ana.url, ana.token) and token_works(ben.url, ben.token)
        assert not token_works(ben.url, ana.token) and not token_works(ana.url, ben.token)
        users = [u.email for u in LabelStudio(base_url=ben.url, api_key=ben.token).users.list()]
        assert users == ["ben@lab.org"], users
    finally:
        for server in servers:
            server.stop()
    # Control: the migration-time check sees a database Label Studio migrated itself.
    other = tmp_path / "control.sqlite3"
    other.write_bytes(template.read_bytes())
    with sqlite3.connect(other) as db:
        db.execute("UPDATE django_migrations SET applied = '2001-01-01 00:00:00' WHERE id = 7")
    assert _migration_times(other) != times
    assert child_environment(servers[0].settings)["LABEL_STUDIO_USERNAME"] == "ana@lab.org"

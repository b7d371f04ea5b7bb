"""A migrated, empty Label Studio database, made once per Label Studio install and copied into
every new server's data directory.

A new Label Studio server spends most of its first start creating its SQLite database: about 400
Django migrations, 60 s of CPU on a 2-core machine, against about 10 s for every later start. One
server per annotator (see DESIGN.md) means that cost again for every person added. The schema is
the same for every server of one Label Studio version, so it is made once: ``migrate`` alone, in
a scratch directory, with no account, token or session in it (Label Studio creates the login at
start, from the environment), and kept beside that install as ``tqaforge/label_studio-VERSION.sqlite3``
in its virtualenv with a SHA-256 beside it. A new server's data directory gets a copy before Label
Studio starts; Label Studio then finds its database up to date and only adds its own login.

What this never does: touch a data directory that already has a database (people's work is in
it), or fail a start. Whatever goes wrong (no recognisable virtualenv, a read-only one, a build
that fails, a template whose digest no longer matches) leaves the start as it was before: Label
Studio creates its database itself. ``TQAFORGE_LABEL_STUDIO_TEMPLATE=0`` turns it off.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from tqaforge.files import atomic_write_text

#: The file Label Studio keeps its SQLite database in, inside its data directory.
DATABASE_NAME = "label_studio.sqlite3"
#: Set to 0 (or false, no, off) to make every new server create its own database.
SWITCH_ENV = "TQAFORGE_LABEL_STUDIO_TEMPLATE"
# Label Studio's own settings module and a migrate of its database, nothing else (no runserver,
# no user): run by the virtualenv's Python, in a scratch data directory.
_MIGRATE = (
    "import os, sys, label_studio\n"
    "sys.path.insert(0, os.path.dirname(label_studio.__file__))\n"
    "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'label_studio.core.settings.label_studio')\n"
    "import django\n"
    "django.setup()\n"
    "from django.core.management import call_command\n"
    "call_command('migrate', '--no-color', verbosity=0)\n"
)


def label_studio_names(*settings: str) -> frozenset[str]:
    """Every environment name under which Label Studio reads each of ``settings`` (its get_env
    tries LABEL_STUDIO_X, HEARTEX_X, then the bare X)."""
    return frozenset(name for setting in settings
                     for name in (setting, f"LABEL_STUDIO_{setting}", f"HEARTEX_{setting}"))


# The setting that puts Label Studio's database outside its data directory.
_DATABASE_ELSEWHERE = label_studio_names("DATABASE_NAME")
# Settings that would give the scratch database a login, or put it somewhere else.
_NOT_FOR_THE_BUILD = label_studio_names("USERNAME", "PASSWORD", "USER_TOKEN", "DATABASE_NAME")


def enabled(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """False when ``TQAFORGE_LABEL_STUDIO_TEMPLATE`` switches the template off."""
    return environ.get(SWITCH_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def template_path(executable: Path) -> Path | None:
    """Where the template of the Label Studio install behind ``executable`` (its ``bin/label-studio``)
    lives; None when that is not a virtualenv holding an installed ``label_studio`` package."""
    venv = executable.parent.parent
    if not (executable.parent / "python").exists():
        return None
    installed = sorted(venv.glob("lib/python*/site-packages/label_studio-*.dist-info"))
    if not installed:
        return None
    version = installed[-1].name.removeprefix("label_studio-").removesuffix(".dist-info")
    return venv / "tqaforge" / f"label_studio-{version}.sqlite3"


def _digest_path(template: Path) -> Path:
    return template.with_name(template.name + ".sha256")


def _sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def usable(template: Path) -> bool:
    """True when ``template`` and its digest are there and agree. A damaged pair is removed, so
    the next start makes it again."""
    digest = _digest_path(template)
    try:
        if _sha256(template) == digest.read_text(encoding="ascii").strip():
            return True
    except (OSError, ValueError):
        pass
    for path in (template, digest):
        with contextlib.suppress(OSError):
            path.unlink()
    return False


def seed(data_dir: Path, executable: Path, environ: dict[str, str], *, log_fd: int,
         on_wait: Callable[[], None] | None = None, wait_s: float = 300.0) -> bool:
    """Copy the template into ``data_dir`` when it has no database yet; make the template first
    when this install has none. True when ``data_dir`` got a copy.

    ``environ`` is the environment Label Studio will start with (its data directory settings are
    read from it); the build's output goes to ``log_fd`` (the server's log). ``on_wait()`` is
    called about once a second while the template is made or another process makes it.
    """
    if not enabled(environ) or any(name in environ for name in _DATABASE_ELSEWHERE):
        return False  # a database elsewhere than the data directory is not ours to seed
    target = data_dir / DATABASE_NAME
    template = template_path(executable)
    if template is None or target.exists():
        return False
    try:
        template.parent.mkdir(parents=True, exist_ok=True)
        with _locked(template.parent / ".lock", on_wait):
            if not usable(template):
                _build(template, environ, log_fd=log_fd, on_wait=on_wait, wait_s=wait_s)
            return _copy(template, target)
    except (OSError, subprocess.SubprocessError, TimeoutError) as exc:
        os.write(log_fd, f"tqaforge: no database template ({exc}); Label Studio makes its own\n".encode())
        return False


@contextlib.contextmanager
def _locked(path: Path, on_wait: Callable[[], None] | None) -> Iterator[None]:
    """An exclusive lock on ``path``: two servers starting at once make the template once."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if on_wait is not None:
                    on_wait()
                time.sleep(1.0)
        yield
    finally:
        os.close(fd)  # releases the lock


def _build(template: Path, environ: dict[str, str], *, log_fd: int, on_wait: Callable[[], None] | None,
           wait_s: float) -> None:
    """``migrate`` into a scratch directory beside ``template``, then publish the database and its
    digest (the digest last: a template without one is not used)."""
    python = template.parent.parent / "bin" / "python"
    os.write(log_fd, b"tqaforge: making the database template (Label Studio's migrations, once per install)\n")
    for stale in template.parent.glob("build-*"):  # left by a build that was killed (we hold the lock)
        shutil.rmtree(stale, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="build-", dir=template.parent) as scratch:
        env = {key: value for key, value in environ.items() if key not in _NOT_FOR_THE_BUILD}
        env["LABEL_STUDIO_BASE_DATA_DIR"] = scratch
        process = subprocess.Popen([str(python), "-c", _MIGRATE], env=env, cwd=scratch, stdout=log_fd,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   umask=0o077)  # nothing secret in it, but private like the servers' own files
        try:
            deadline = time.monotonic() + wait_s
            while process.poll() is None:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"Label Studio's migrations took more than {wait_s:.0f} s")
                if on_wait is not None:
                    on_wait()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(1.0)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        built = Path(scratch) / DATABASE_NAME
        if process.returncode != 0 or not built.is_file():
            raise subprocess.SubprocessError(f"Label Studio's migrations exited with code {process.returncode}")
        for old in template.parent.glob("label_studio-*.sqlite3*"):  # other versions' templates
            old.unlink()
        digest = _sha256(built)
        os.replace(built, template)
        atomic_write_text(_digest_path(template), digest + "\n")


def _copy(template: Path, target: Path) -> bool:
    """A private copy of ``template`` (checked by the caller) at ``target``, never over an
    existing file; False when ``target`` appeared meanwhile."""
    for stale in target.parent.glob(f".{target.name}.*.part"):  # a copy killed half way
        stale.unlink()
    partial = target.with_name(f".{target.name}.{os.getpid()}.part")
    with template.open("rb") as source, open(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as out:
        shutil.copyfileobj(source, out)
    try:
        os.link(partial, target)  # fails when a database is there: it is never replaced
    except FileExistsError:
        return False
    finally:
        partial.unlink()
    return True

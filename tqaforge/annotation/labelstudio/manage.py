"""Label Studio for one workspace: ``tqaforge labelstudio start|stop|status``, and how to reach it.

Each function acts on a server directory: the workspace's one server (``label-studio/``, the
earlier layout, and what a workspace without annotators starts), or, given an
:class:`AnnotatorServer`, one annotator's own server (``label-studio/annotators/SLUG/``, laid out
the same way; :mod:`.annotator_servers` adds, starts and routes to them).

Everything lives in the workspace's ``label-studio/`` directory (:attr:`WorkspacePaths.label_studio`,
0700, every file in it 0600):

- ``credentials.json``: ``url``, ``username``, ``password``, ``token`` and ``demo``. Password and
  token are drawn with :mod:`secrets` on the first start, so every workspace has its own admin
  login. Only when asked (``--demo-login``, which ``make run`` passes for its demo workspace) does
  a new workspace get the public demo login of the README instead.
- ``label-studio.pid``: the pid of the server while it runs. :func:`start` leaves it running in a
  session of its own; :func:`stop` ends its whole process group. A pid file whose process is gone,
  or whose pid now belongs to another program (checked in ``/proc/PID/cmdline``: our server's
  command line names this data directory), is stale: :func:`stop` and :func:`start` remove it,
  and nothing is ever signalled through it.
- ``label-studio.log``: its log; Label Studio's own database and uploads.

``make run`` (:mod:`tqaforge.launch`) uses the same functions, so it runs the same server with the
same login, and leaves alone a server that ``tqaforge labelstudio start`` started.

>>> result = start(Path("ws"), on_wait=lambda s: None)  # doctest: +SKIP
>>> client_settings(Path("ws"))  # what sync code calls  # doctest: +SKIP
ClientSettings(url='http://127.0.0.1:8080', timeout=15.0, attempts=4, backoff=0.5, max_total=30.0)
>>> stop(Path("ws")).message  # doctest: +SKIP
'stopped Label Studio (pid 4242)'
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from tqaforge.annotation.labelstudio.client import ClientSettings
from tqaforge.annotation.labelstudio.database_template import DATABASE_NAME
from tqaforge.annotation.labelstudio.server import (
    ADMIN_USERNAME,
    DEMO_PASSWORD,
    DEMO_TOKEN,
    LabelStudioError,
    LabelStudioSettings,
    RunningServer,
    check_host_allowed,
    check_label_studio_port,
    http_url,
    is_healthy,
    make_private,
    new_password,
    new_token,
    resolve_venv,
    start_server,
    token_works,
)
from tqaforge.config import LabelStudioSection, WorkspacePaths, load_config
from tqaforge.errors import ReaderError
from tqaforge.files import atomic_write_text
from tqaforge.redact import redact_url
from tqaforge.tables.readers.jsonio import read_json_file

if TYPE_CHECKING:
    from tqaforge.annotation.labelstudio.sync import Servers
    from tqaforge.store import Workspace

CREDENTIALS_NAME = "credentials.json"
PID_NAME = "label-studio.pid"
LOG_NAME = "label-studio.log"
DEFAULT_PORT = 8080
START_COMMAND = "tqaforge labelstudio start"
_LOCK_NAME = ".start.lock"
#: Annotators' own servers live in ``label-studio/annotators/SLUG``.
ANNOTATORS_DIR = "annotators"
#: The API token of a Label Studio given with ``--url`` (not this workspace's own server).
TOKEN_ENV = "TQAFORGE_LABEL_STUDIO_TOKEN"


# --- where things are ---


@dataclass(frozen=True)
class AnnotatorServer:
    """One annotator's own Label Studio (:mod:`.annotator_servers`): a server directory laid out
    like the workspace's one-server ``label-studio/`` (credentials, pid file, log, database), at
    ``WORKSPACE/label-studio/annotators/SLUG``. Every function here that takes a workspace also
    takes one of these, and then acts on that server."""

    workspace: Path
    slug: str

    @property
    def directory(self) -> Path:
        return WorkspacePaths(self.workspace).label_studio / ANNOTATORS_DIR / self.slug


def _root(ws: Workspace | Path | AnnotatorServer) -> Path:
    """The workspace root of a :class:`~tqaforge.store.Workspace`, a path or an annotator's server, resolved."""
    if isinstance(ws, AnnotatorServer):
        return ws.workspace.resolve()
    root = ws if isinstance(ws, Path) else ws.root
    return root.resolve()


def data_dir(ws: Workspace | Path | AnnotatorServer) -> Path:
    """The server's data directory: ``WORKSPACE/label-studio``, or an annotator's own."""
    if isinstance(ws, AnnotatorServer):
        return AnnotatorServer(_root(ws), ws.slug).directory
    return WorkspacePaths(_root(ws)).label_studio


def server_name(ws: Workspace | Path | AnnotatorServer) -> str:
    """How messages name the server: "Label Studio", or "ana@lab.org's Label Studio"."""
    if isinstance(ws, AnnotatorServer):
        credentials = read_credentials(ws)
        return f"{credentials.username if credentials else ws.slug}'s Label Studio"
    return "Label Studio"


def credentials_path(ws: Workspace | Path | AnnotatorServer) -> Path:
    """``WORKSPACE/label-studio/credentials.json`` (0600)."""
    return data_dir(ws) / CREDENTIALS_NAME


def pid_path(ws: Workspace | Path | AnnotatorServer) -> Path:
    """``WORKSPACE/label-studio/label-studio.pid``, present while the server runs."""
    return data_dir(ws) / PID_NAME


def log_path(ws: Workspace | Path | AnnotatorServer) -> Path:
    """``WORKSPACE/label-studio/label-studio.log``."""
    return data_dir(ws) / LOG_NAME


# --- the login ---


@dataclass(frozen=True)
class Credentials:
    """The workspace's admin login and where its server was last started; secrets hidden in ``repr``."""

    url: str
    username: str
    password: str = field(repr=False)
    token: str = field(repr=False)
    demo: bool = False  # the public demo login of the README (``make run``'s demo workspace)
    name: str = ""  # an annotator's server: the person's name, shown with their login

    def to_json(self) -> str:
        data: dict[str, Any] = {"url": self.url, "username": self.username, "password": self.password,
                                "token": self.token, "demo": self.demo}
        if self.name:
            data["name"] = self.name
        return json.dumps(data, indent=2) + "\n"


#: credentials.json holds a URL, a name, a password and a token: far less than this.
MAX_CREDENTIALS_BYTES = 64 * 1024


def read_credentials(ws: Workspace | Path | AnnotatorServer) -> Credentials | None:
    """The workspace's credentials, None before the first start; a clear error when the file is damaged."""
    path = credentials_path(ws)
    if not os.path.lexists(path):
        return None
    try:
        # The one bounded JSON reader: a regular file (a FIFO put in its place is refused, not
        # waited on), small, not nested deeper than a credentials object can be.
        raw: Any = read_json_file(path, max_bytes=MAX_CREDENTIALS_BYTES)
    except ReaderError as exc:
        raise LabelStudioError(f"cannot read Label Studio's credentials: {exc.args[0]}", hint=_DAMAGED_HINT) from None
    strings = ("url", "username", "password", "token")
    if not isinstance(raw, dict) or not all(isinstance(raw.get(key), str) and raw[key] for key in strings):
        raise LabelStudioError(f"{path}: Label Studio's credentials must be a JSON object with {', '.join(strings)}",
                               hint=_DAMAGED_HINT)
    return Credentials(url=raw["url"], username=raw["username"], password=raw["password"], token=raw["token"],
                       demo=raw.get("demo") is True, name=str(raw.get("name") or ""))


_DAMAGED_HINT = ("restore it from a backup (it must match Label Studio's database next to it), or move the "
                 "label-studio/ directory aside to start afresh with a new login (annotations stay in the old one)")


def write_credentials(ws: Workspace | Path | AnnotatorServer, credentials: Credentials) -> Path:
    """Write ``credentials.json`` atomically, 0600, in a 0700 directory; returns its path."""
    directory = data_dir(ws)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    directory.chmod(0o700)
    path = credentials_path(ws)
    atomic_write_text(path, credentials.to_json(), mode=0o600)
    return path


def _legacy_database(ws: Workspace | Path | AnnotatorServer) -> bool:
    """A Label Studio database without credentials.json: made by a tqaforge that always used the demo login."""
    if isinstance(ws, AnnotatorServer):
        return False
    return (data_dir(ws) / DATABASE_NAME).exists() and not credentials_path(ws).exists()


# --- settings ---


def _section(root: Path) -> LabelStudioSection:
    """``[labelstudio]`` of the workspace's config; the defaults when there is no config yet
    (``make run`` may start before ``init``)."""
    config = WorkspacePaths(root).config
    return load_config(config).labelstudio if config.is_file() else LabelStudioSection()


def configured_port(ws: Workspace | Path | AnnotatorServer) -> int:
    """``[labelstudio] port`` of the workspace, else 8080."""
    return _section(_root(ws)).port or DEFAULT_PORT


def workspace_settings(ws: Workspace | Path | AnnotatorServer, *, port: int | None = None, host: str = "127.0.0.1",
                       allow_remote: bool = False, demo_login: bool = False) -> LabelStudioSettings:
    """The settings of this workspace's server: its data directory, its virtualenv, ``port`` (else
    ``[labelstudio] port``, else 8080), and its login from ``credentials.json``. Writes nothing.

    Before the first start the login is new: random, or the public demo login when ``demo_login``
    (or when a database made by an older tqaforge, which always used the demo login, is there)."""
    root = _root(ws)
    section = _section(root)
    credentials = read_credentials(ws)
    if isinstance(ws, AnnotatorServer):
        if credentials is None:
            raise LabelStudioError(f"{credentials_path(ws)} is missing: this annotator's server has no login",
                                   hint=_DAMAGED_HINT)
        address = urlsplit(credentials.url)
        return LabelStudioSettings(data_dir=data_dir(ws), host=address.hostname or "127.0.0.1",
                                   port=address.port or DEFAULT_PORT, username=credentials.username,
                                   password=credentials.password, token=credentials.token,
                                   venv=resolve_venv(section.venv_path(root)))
    if credentials is not None:
        username, password, token = credentials.username, credentials.password, credentials.token
    elif demo_login or _legacy_database(root):
        username, password, token = ADMIN_USERNAME, DEMO_PASSWORD, DEMO_TOKEN
    else:
        username, password, token = ADMIN_USERNAME, new_password(), new_token()
    return LabelStudioSettings(data_dir=WorkspacePaths(root).label_studio, host=host,
                               port=port or section.port or DEFAULT_PORT, username=username, password=password,
                               token=token, venv=resolve_venv(section.venv_path(root)), allow_remote=allow_remote)


def configured_overlap(ws: Workspace | Path | AnnotatorServer, kind: str) -> int | None:
    """``[labelstudio] overlap`` for ``kind``: how many annotators label each of its tasks (None:
    the kind's default). A kind that does not exist or a count below 1 is a clear error."""
    from tqaforge.annotation.kinds import KINDS

    table = _section(_root(ws)).overlap or {}
    where = f"{WorkspacePaths(_root(ws)).config} [labelstudio] overlap"
    for name, count in table.items():
        if name not in KINDS:
            raise LabelStudioError(f"{where}: unknown kind {name!r}", hint=f"kinds: {', '.join(KINDS)}")
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise LabelStudioError(f"{where}: {name} = {count!r} must be a whole number of annotators, 1 or more")
    value = table.get(kind)
    return int(value) if value is not None else None


def connection(ws: Workspace | Path | AnnotatorServer, url: str | None = None, **options: Any) -> ClientSettings:
    """How sync commands reach Label Studio: this workspace's own server (:func:`client_settings`),
    or, with ``url``, another one whose API token is in ``TQAFORGE_LABEL_STUDIO_TOKEN``."""
    if url is None:
        return client_settings(ws, **options)
    token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        raise LabelStudioError(f"--url {redact_url(url)} needs the API token of that server in {TOKEN_ENV}",
                               hint=f"export {TOKEN_ENV}=... (Label Studio: Account & Settings); without --url the "
                               "workspace's own server and login are used")
    return ClientSettings(url=url, token=token, **options)


def connections(ws: Workspace, url: str | None = None, **options: Any) -> Servers:
    """Where push and pull go (a :data:`~.sync.Servers`): with ``url``, that one server for
    everyone (:func:`connection`); in a workspace whose annotators have servers of their own,
    {login: route to it} (:func:`~.annotator_servers.routes`); else the workspace's one server."""
    from tqaforge.annotation.labelstudio.annotator_servers import annotator_servers, routes

    if url is None and annotator_servers(ws.root):
        return routes(ws, **options)
    return connection(ws, url, **options)


# --- the process ---


def _cmdline(pid: int) -> list[str] | None:
    try:
        raw = (Path("/proc") / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part] or None


def _alive(pid: int) -> bool:
    """True when ``pid`` exists and is not a zombie (a zombie has ended, only its exit status is left)."""
    try:
        stat = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def is_workspace_server(pid: int, directory: Path) -> bool:
    """True when ``pid`` is a live ``label-studio start`` whose ``--data-dir`` is ``directory``
    (so a pid reused by another program is never taken, or signalled, as our server)."""
    argv = _cmdline(pid)
    if not argv or not _alive(pid):
        return False
    if not any(Path(part).name == "label-studio" for part in argv[:2]) or "start" not in argv:
        return False
    try:
        given = argv[argv.index("--data-dir") + 1]
    except (ValueError, IndexError):
        return False
    return os.path.realpath(given) == os.path.realpath(directory)


@dataclass(frozen=True)
class _PidFile:
    pid: int | None  # the running server's pid
    stale: str | None  # why the pid file is stale, when it is


def _read_pid_file(root: Path | AnnotatorServer) -> _PidFile:
    path = pid_path(root)
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except FileNotFoundError:
        return _PidFile(None, None)
    except OSError as exc:
        raise LabelStudioError(f"{path}: cannot read the pid file: {exc.strerror}",
                               hint=f"make {path.parent} readable for this user") from None
    if not text.isdigit() or int(text) <= 0:
        return _PidFile(None, f"it holds {text[:20]!r}, not a pid")
    pid = int(text)
    if is_workspace_server(pid, data_dir(root)):
        return _PidFile(pid, None)
    if _alive(pid):
        return _PidFile(None, f"process {pid} is not this workspace's Label Studio (left alone)")
    return _PidFile(None, f"process {pid} is gone")


def _write_pid(root: Path | AnnotatorServer, pid: int) -> None:
    atomic_write_text(pid_path(root), f"{pid}\n", mode=0o600)


def _forget_pid(root: Path | AnnotatorServer, pid: int | None = None) -> None:
    """Remove the pid file (only when it names ``pid``, if given)."""
    path = pid_path(root)
    with contextlib.suppress(OSError):
        if pid is None or path.read_text().strip() == str(pid):
            path.unlink()


def _remove_stale_pid(root: Path | AnnotatorServer, state: _PidFile, on_note: Callable[[str], None]) -> None:
    if state.stale is not None:
        _forget_pid(root)
        on_note(f"removed a stale pid file ({pid_path(root)}): {state.stale}")


@contextlib.contextmanager
def _start_lock(root: Path | AnnotatorServer) -> Iterator[Callable[[], None]]:
    """Hold ``label-studio/.start.lock`` so two starts of one workspace do not race; yields a
    function that releases it early (once the pid file is written)."""
    directory = data_dir(root)
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(directory / _LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    held = [True]

    def release() -> None:
        if held[0]:
            held[0] = False
            os.close(fd)  # closing drops the flock

    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LabelStudioError(f"{server_name(root)} is being started for {_root(root)} by another command right now",
                                   hint="wait for it, then `tqaforge labelstudio status`") from None
        yield release
    finally:
        release()


# --- status, start, stop ---


@dataclass(frozen=True)
class ServerStatus:
    """How this workspace's Label Studio is: never holds the password or token."""

    workspace: Path
    url: str
    pid: int | None  # the running server's pid; None when not running
    answers: bool  # /health answered (only asked of our own running server)
    username: str | None  # None before the first start
    demo_login: bool
    credentials_path: Path
    log_path: Path
    stale: str | None = None  # why the pid file is stale, when it is
    annotator: str | None = None  # an annotator's own server: their login
    rss_mb: float | None = None  # memory of the server's whole process tree (resident set), while it runs

    @property
    def running(self) -> bool:
        return self.pid is not None

    def state(self, starting: bool = False) -> str:
        """In a word: "running" (it answers), "starting" (its process is up but does not answer
        yet, or ``starting``: a start of it is under way), else "not running"."""
        if self.running and self.answers:
            return "running"
        return "starting" if self.running or starting else "not running"

    def to_dict(self) -> dict[str, Any]:
        return {"workspace": str(self.workspace), "url": self.url, "running": self.running, "answers": self.answers,
                "pid": self.pid, "username": self.username, "demo_login": self.demo_login,
                "credentials": str(self.credentials_path), "log": str(self.log_path), "stale_pid_file": self.stale,
                "annotator": self.annotator, "rss_mb": self.rss_mb}


def status(ws: Workspace | Path | AnnotatorServer) -> ServerStatus:
    """Whether this workspace's server runs (pid file naming a live Label Studio on this data
    directory) and answers ``/health``; its URL, and where its login and log are. Changes nothing."""
    root = _root(ws)
    place: Path | AnnotatorServer = ws if isinstance(ws, AnnotatorServer) else root
    state = _read_pid_file(place)
    credentials = read_credentials(place)
    url = credentials.url if credentials is not None else http_url("127.0.0.1", configured_port(root))
    return ServerStatus(
        workspace=root, url=url, pid=state.pid, answers=state.pid is not None and is_healthy(url),
        username=credentials.username if credentials else None, demo_login=bool(credentials and credentials.demo),
        credentials_path=credentials_path(place), log_path=log_path(place), stale=state.stale,
        annotator=credentials.username if isinstance(ws, AnnotatorServer) and credentials else None,
        rss_mb=tree_rss_mb(state.pid) if state.pid is not None else None)


@dataclass(frozen=True)
class StartResult:
    """What :func:`start` did. ``server`` is the process it started (None when one was already running)."""

    url: str
    pid: int
    already_running: bool
    answers: bool
    credentials_path: Path
    username: str
    demo_login: bool
    server: RunningServer | None = None


def start(ws: Workspace | Path | AnnotatorServer, *, port: int | None = None, host: str = "127.0.0.1", allow_remote: bool = False,
          demo_login: bool = False, wait_s: float = 300.0, on_wait: Callable[[float], None] | None = None,
          on_note: Callable[[str], None] | None = None,
          settings: LabelStudioSettings | None = None) -> StartResult:
    """Start this workspace's Label Studio, detached, and wait until it answers ``/health``.

    Already running for this workspace: returns at once with ``already_running``. Otherwise the
    port is checked first (taken: :class:`LabelStudioPortInUse` at once, naming it), the login is
    written to ``credentials.json`` on the first start, the pid file as soon as the process
    exists, and the token is checked once the server answers. On failure or Ctrl-C nothing is
    left running. ``on_note`` receives one-line notes (a stale pid file removed, ...);
    ``settings`` (from :func:`workspace_settings`) saves reading them twice.
    """
    note = on_note or (lambda _text: None)
    root: Path | AnnotatorServer = ws if isinstance(ws, AnnotatorServer) else _root(ws)
    if settings is None:
        settings = workspace_settings(root, port=port, host=host, allow_remote=allow_remote, demo_login=demo_login)
    check_host_allowed(settings.host, allow_remote=settings.allow_remote, server_name="Label Studio",
                       flag="--allow-remote (ALLOW_REMOTE=1 for make run)")
    running = _already_running(root)
    if running is not None:
        return running
    check_label_studio_port(settings)
    with _start_lock(root) as release_lock:
        running = _already_running(root)  # started by another command while we checked
        if running is not None:
            return running
        _remove_stale_pid(root, _read_pid_file(root), note)
        credentials = read_credentials(root)
        if credentials is None and _legacy_database(root):
            note("this workspace's Label Studio database was made by an earlier tqaforge with the public demo login; "
                 f"keeping that login (change the password in Label Studio), now recorded in {credentials_path(root)}")
        elif credentials is not None and demo_login and not credentials.demo:
            note("this workspace already has its own Label Studio login; --demo-login applies only to a new one")
        new = Credentials(url=settings.url, username=settings.username, password=settings.password,
                          token=settings.token, demo=settings.demo_login, name=credentials.name if credentials else "")
        if credentials != new:
            write_credentials(root, new)  # before the process exists: its database gets this login

        def record(process: subprocess.Popen[bytes]) -> None:
            _write_pid(root, process.pid)
            release_lock()

        try:
            server = start_server(settings, wait_s=wait_s, on_wait=on_wait, on_spawn=record)
        except BaseException:
            _forget_pid(root)
            raise
    if not token_works(server.url, settings.token):
        stop_started(root, server)
        raise LabelStudioError(
            f"Label Studio started, but does not accept the API token in {credentials_path(root)}: its database "
            "was made with another login", hint=_DAMAGED_HINT)
    make_private(settings.data_dir)
    return StartResult(url=server.url, pid=server.process.pid, already_running=False, answers=True,
                       credentials_path=credentials_path(root), username=settings.username,
                       demo_login=settings.demo_login, server=server)


def _already_running(root: Path | AnnotatorServer) -> StartResult | None:
    state = status(root)
    if not state.running or state.pid is None:
        return None
    return StartResult(url=state.url, pid=state.pid, already_running=True, answers=state.answers,
                       credentials_path=state.credentials_path, username=state.username or ADMIN_USERNAME,
                       demo_login=state.demo_login)


def stop_started(ws: Workspace | Path | AnnotatorServer, server: RunningServer) -> None:
    """Stop a server this process started (``make run`` on exit) and remove its pid file."""
    server.stop()
    _forget_pid(ws if isinstance(ws, AnnotatorServer) else _root(ws), server.process.pid)


@dataclass(frozen=True)
class StopResult:
    """What :func:`stop` did; ``message`` says it in one line."""

    message: str
    pid: int | None = None  # the server stopped
    killed: bool = False  # it ignored SIGTERM and got SIGKILL
    stale: str | None = None  # a stale pid file was removed, and why it was stale


def stop(ws: Workspace | Path | AnnotatorServer, *, timeout: float = 20.0) -> StopResult:
    """Stop this workspace's server: SIGTERM to its process group, SIGKILL after ``timeout`` s;
    the pid file goes. A stale pid file is removed without signalling anything."""
    root: Path | AnnotatorServer = ws if isinstance(ws, AnnotatorServer) else _root(ws)
    name = server_name(root)
    state = _read_pid_file(root)
    if state.stale is not None:
        _forget_pid(root)
        return StopResult(f"{name} was not running; removed a stale pid file ({pid_path(root)}): {state.stale}",
                          stale=state.stale)
    if state.pid is None:
        return StopResult(f"{name} is not running for this workspace")
    killed = _end_process_group(state.pid, timeout)
    _forget_pid(root, state.pid)
    return StopResult(f"stopped {name} (pid {state.pid}{', killed after {:g} s'.format(timeout) if killed else ''})",
                      pid=state.pid, killed=killed)


def tree_rss_mb(pid: int) -> float | None:
    """Resident memory of ``pid``'s process group in MB (Label Studio and every process it
    spawned), from ``/proc/PID/status``; None when the group is gone."""
    total_kb = 0
    members = group_members(pid) or ([pid] if _alive(pid) else [])
    for member in members:
        with contextlib.suppress(OSError, ValueError, IndexError):
            for line in (Path("/proc") / str(member) / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
    return round(total_kb / 1024, 1) if members else None


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group ``pgid`` (the server and all it spawned)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry.name))
    return members


def _reap(pid: int) -> None:
    """Collect ``pid``'s exit status if it is our child (a server started in this process)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _end_process_group(pid: int, timeout: float) -> bool:
    """SIGTERM to ``pid``'s process group (it leads its own session), SIGKILL after ``timeout``;
    True when SIGKILL was needed."""
    try:
        leads_group = os.getpgid(pid) == pid
    except ProcessLookupError:
        return False

    def signal_all(signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            if leads_group:
                os.killpg(pid, signum)
            else:
                os.kill(pid, signum)

    def wait_gone(seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while True:
            _reap(pid)
            if not (group_members(pid) if leads_group else [pid] if _alive(pid) else []):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)

    signal_all(signal.SIGTERM)
    if wait_gone(timeout):
        return False
    signal_all(signal.SIGKILL)
    wait_gone(10.0)
    return True


# --- for code that talks to the server ---


def client_settings(ws: Workspace | Path | AnnotatorServer, **options: Any) -> ClientSettings:
    """How to reach this workspace's running Label Studio: its URL and API token, for the sync
    (:mod:`~tqaforge.annotation.labelstudio.client`; ``options`` as there) or ``label-studio-sdk``.

    Raises :class:`LabelStudioError` ("Label Studio is not running for this workspace") when it was
    never started, is stopped, or does not answer.

    >>> settings = client_settings(ws)  # doctest: +SKIP
    >>> LabelStudio(base_url=settings.url, api_key=settings.token)  # doctest: +SKIP
    """
    root = _root(ws)
    place: Path | AnnotatorServer = ws if isinstance(ws, AnnotatorServer) else root
    name = server_name(place)
    credentials = read_credentials(place)
    state = status(place)
    if credentials is None or not state.running:
        raise LabelStudioError(f"{name} is not running for this workspace ({root})",
                               hint=f"start it: `{START_COMMAND}` (or `make run`)")
    if not state.answers:
        raise LabelStudioError(
            f"{name} is not running for this workspace ({root}): process {state.pid} does not answer at {state.url}",
            hint=f"it may still be starting (`tqaforge labelstudio status`); else see {state.log_path}, "
            f"then `tqaforge labelstudio stop` and `{START_COMMAND}`")
    return ClientSettings(url=credentials.url, token=credentials.token, **options)

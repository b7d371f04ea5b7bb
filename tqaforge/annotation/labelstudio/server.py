"""A local Label Studio server: started, waited for, and stopped from Python.

Label Studio pins old versions of libraries tqaforge also uses (``openai<2`` among them), so it
lives in its own virtualenv and runs as a separate process (:func:`resolve_venv` says which
virtualenv: ``TQAFORGE_LABEL_STUDIO_VENV``, ``[labelstudio] venv``, or the ``.venv-ls`` that
``make labelstudio`` makes in a source checkout); tqaforge only talks to it over HTTP with ``label-studio-sdk``. The same function starts
the demo server for ``make run`` and the server the tests use; :mod:`.manage` runs it for a
workspace (``tqaforge labelstudio start|stop|status``), with the workspace's own login.

>>> server = start_server(LabelStudioSettings(data_dir=Path("ls-data")))  # doctest: +SKIP
>>> server.url, server.token  # doctest: +SKIP
('http://127.0.0.1:8080', '...')
>>> server.stop()  # doctest: +SKIP

Safety, in the order :func:`start_server` applies it:

- it listens on loopback only, unless ``allow_remote=True`` says otherwise on purpose;
- the port is checked before starting (Label Studio itself would silently move to the next free
  port), so a taken port fails at once with the port named;
- the account and its API token are random unless given (:class:`LabelStudioSettings` draws them
  with :mod:`secrets`; only the demo workspace of ``make run`` uses the public demo login), and
  are preset through the child's environment
  (``LABEL_STUDIO_USERNAME``, ``LABEL_STUDIO_PASSWORD``, ``LABEL_STUDIO_USER_TOKEN``), never on
  its command line, which every local user can read with ``ps``; preset tokens are "legacy"
  tokens, which Label Studio accepts only with ``LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN=true``;
- its data directory is 0700 and everything in it 0600 (umask 077 for the child, and a chmod
  before and after the start as a safety net), so no other user can read its database;
- nothing calls outside the machine: no version check against PyPI, no Sentry, no analytics.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tqaforge.annotation.labelstudio import database_template
from tqaforge.errors import PortInUse, RemoteBindingRefused, ServerBindError, TqaforgeError
from tqaforge.redact import redact_host, redact_url

#: The environment variable naming Label Studio's virtualenv; it overrides ``[labelstudio] venv``.
VENV_ENV = "TQAFORGE_LABEL_STUDIO_VENV"
#: The directory above the package: a source checkout when it holds pyproject.toml (a wheel
#: installs the package into site-packages, which does not).
_CHECKOUT = Path(__file__).resolve().parents[3]
#: The admin account's e-mail (Label Studio logs in by e-mail); not a secret.
ADMIN_USERNAME = "admin@tqaforge.local"
DEMO_USERNAME = ADMIN_USERNAME
# The public demo login of the README, used only where asked for (`make run`'s demo workspace).
DEMO_PASSWORD = "tqaforge-demo"
# Label Studio wants a token of 40 hex-like characters; this one is public and only for the demo.
DEMO_TOKEN = "7a3f0c5e9b1d4a6f8e2c0b7d5a3f1e9c4b6d8a20"
#: What the launcher tells people to expect. Measured on a 2-core machine: a new server 8-12 s
#: (its database is a copy of the install's template, see :mod:`.database_template`), as is a
#: restart; the very first start of an install (it makes the template) 68-90 s, up to 145 s busy.
STARTUP_ESTIMATE = "about 10 s; about 90 s the first time on this machine"
#: Label Studio prints this when it finds its port taken and moves to the next one.
_PORT_MOVED_MARK = "Trying to start at"
# Settings Label Studio reads from the environment, also under these bare names (its get_env
# tries LABEL_STUDIO_X, HEARTEX_X, then X): an unrelated HOST or USERNAME in the caller's
# environment (`HOST=0.0.0.0 make run`) must not reach it.
_LS_SETTINGS_WE_OWN = database_template.label_studio_names("HOST", "PORT", "USERNAME", "PASSWORD", "USER_TOKEN")
_PRIVATE_UMASK = 0o077


class LabelStudioError(TqaforgeError):
    """Label Studio is not installed, did not start, or cannot be reached."""


class LabelStudioPortInUse(LabelStudioError, PortInUse):
    """Label Studio's port is taken by another program (Label Studio would silently move)."""


def new_password() -> str:
    """A random admin password (96 bits)."""
    return secrets.token_hex(12)


def new_token() -> str:
    """A random API token in the form Label Studio accepts: 40 hex characters (160 bits)."""
    return secrets.token_hex(20)


@dataclass(frozen=True)
class LabelStudioSettings:
    """Where and as whom to run a local server; ``allow_remote`` must be set to listen beyond loopback.

    Password and token are random unless given (the demo passes :data:`DEMO_PASSWORD` and
    :data:`DEMO_TOKEN`); neither shows in ``repr``.
    """

    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 8080
    username: str = ADMIN_USERNAME
    password: str = field(default_factory=new_password, repr=False)
    token: str = field(default_factory=new_token, repr=False)
    venv: Path | None = None  # the virtualenv holding Label Studio; None: resolve_venv()
    allow_remote: bool = False
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return http_url(self.host, self.port)

    @property
    def demo_login(self) -> bool:
        """True when this is the public demo login of the README."""
        return self.token == DEMO_TOKEN


@dataclass
class RunningServer:
    """A started server; :meth:`stop` ends it (and everything it spawned)."""

    settings: LabelStudioSettings
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def url(self) -> str:
        return self.settings.url

    @property
    def token(self) -> str:
        return self.settings.token

    def stop(self, timeout: float = 20.0) -> None:
        """Stop the server: SIGTERM to its process group, SIGKILL if it lingers."""
        if self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        except ProcessLookupError:
            pass


# --- where a server may listen (shared with the launcher, which checks the app's port too) ---


def http_url(host: str, port: int) -> str:
    """``http://host:port``, with an IPv6 literal in brackets."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def is_loopback(host: str) -> bool:
    """True when ``host`` names only this machine: 127.0.0.0/8, ::1, or a name resolving only there
    (``localhost``). ``0.0.0.0``, ``::`` and an unresolvable name are not loopback."""
    name = host.strip("[]")
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError):
        return False
    addresses = {ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos}
    return bool(addresses) and all(address.is_loopback for address in addresses)


def check_host_allowed(host: str, *, allow_remote: bool, server_name: str, flag: str) -> None:
    """Refuse (:class:`RemoteBindingRefused`) to listen on ``host`` beyond loopback unless
    ``allow_remote``; ``flag`` is what the user passes to allow it. A host with a login in it
    (``admin:pw@127.0.0.1``, a pasted URL's) is no address, and the login is never echoed."""
    if "@" in host or "/" in host:
        raise ServerBindError(
            f"{server_name}: {redact_host(host)} is not an address to listen on (it holds a login or a path)",
            hint="give a host name or an IP address of this machine, e.g. HOST=127.0.0.1",
        )
    if allow_remote or is_loopback(host):
        return
    raise RemoteBindingRefused(
        f"refusing to start {server_name} on {host}: that address can be reached from other machines, "
        "and anyone who reaches it gets in with the login printed at start",
        hint=f"use HOST=127.0.0.1 (the default), or pass {flag} if other machines should reach it",
    )


def check_port_free(host: str, port: int, *, server_name: str, other_port_hint: str,
                    error: type[ServerBindError] = PortInUse) -> None:
    """Raise ``error`` naming ``port`` when ``host:port`` cannot be bound right now (another program
    listens there) or the port is out of range; ``other_port_hint`` says how to pick another."""
    if not 0 < port < 65536:
        raise error(f"{server_name}: port {port} is not a TCP port (1-65535)", hint=other_port_hint)
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise error(f"{server_name}: cannot listen on {redact_host(host)}: {exc}",
                    hint="give an address of this machine, e.g. HOST=127.0.0.1") from exc
    for family, kind, proto, _name, address in infos:
        with socket.socket(family, kind, proto) as probe:
            # SO_REUSEADDR like every server sets it: connections of a just-stopped server lingering
            # in TIME_WAIT do not count, a socket listening on the port does.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                raise _bind_error(exc, host, port, server_name, other_port_hint, error) from exc


def _bind_error(exc: OSError, host: str, port: int, server_name: str, other_port_hint: str,
                error: type[ServerBindError]) -> ServerBindError:
    if exc.errno == errno.EADDRINUSE:
        return error(f"port {port} on {host} is already in use by another program, so {server_name} cannot use it",
                     hint=f"stop that program (`ss -ltnp 'sport = :{port}'` names it), or {other_port_hint}")
    if exc.errno == errno.EADDRNOTAVAIL:
        return error(f"{server_name}: {host} is not an address of this machine",
                     hint="give one of its addresses, e.g. HOST=127.0.0.1")
    if exc.errno == errno.EACCES:
        return error(f"{server_name}: port {port} needs administrator rights", hint=other_port_hint)
    return error(f"{server_name}: cannot listen on {host}:{port}: {exc.strerror}", hint=other_port_hint)


def _answers_on_loopback(port: int) -> bool:
    """True when something accepts connections on 127.0.0.1:port (where Label Studio looks)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def port_hint(port: int) -> str:
    """How to choose another port, for every way of starting Label Studio."""
    other = port + 10 if port + 10 < 65536 else 8090
    return (f"choose another port: `tqaforge labelstudio start --port {other}`, `make run LS_PORT={other}`, "
            "or [labelstudio] port in tqaforge.toml")


def check_label_studio_port(settings: LabelStudioSettings) -> None:
    """Fail now, naming the port, if Label Studio could not have ``settings.port``: it would
    otherwise move to the next free port without a word and never answer where we wait."""
    hint = port_hint(settings.port)
    check_port_free(settings.host, settings.port, server_name="Label Studio",
                    other_port_hint=hint, error=LabelStudioPortInUse)
    # Label Studio's own test connects to localhost, whatever host it was given.
    if _answers_on_loopback(settings.port):
        raise LabelStudioPortInUse(
            f"port {settings.port} on 127.0.0.1 is already in use by another program, so Label Studio cannot use it",
            hint=f"stop that program (`ss -ltnp 'sport = :{settings.port}'` names it), or {hint}")


# --- the server ---


def checkout_venv() -> Path | None:
    """``.venv-ls`` of the source checkout tqaforge runs from (what ``make labelstudio`` makes);
    None when tqaforge is an installed package, which has no checkout around it."""
    if (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / "tqaforge").is_dir():
        return _CHECKOUT / ".venv-ls"
    return None


def resolve_venv(configured: Path | None = None) -> Path | None:
    """The virtualenv that holds Label Studio: ``TQAFORGE_LABEL_STUDIO_VENV``, else ``configured``
    (the workspace's ``[labelstudio] venv``), else :func:`checkout_venv`. None: look on PATH only.

    The environment comes first, as for every other setting (``TQAFORGE_DATABASE_URL``, ...).
    """
    from_env = os.environ.get(VENV_ENV)
    if from_env:
        return Path(from_env).expanduser()
    return configured if configured is not None else checkout_venv()


def executable(venv: Path | None = None) -> Path:
    """The ``label-studio`` command of ``venv`` (default: :func:`resolve_venv`), or on PATH; a
    clear error saying how to install it when neither has one."""
    venv = venv if venv is not None else resolve_venv()
    candidate = venv / "bin" / "label-studio" if venv is not None else None
    if candidate is not None and candidate.exists():
        return candidate
    found = shutil.which("label-studio")
    if found:
        return Path(found)
    looked = f"{candidate} and on PATH" if candidate is not None else "on PATH"
    raise LabelStudioError(
        f"Label Studio is not installed (looked for {looked})",
        hint="install it in a virtualenv of its own: `make labelstudio` in a tqaforge checkout, or "
        "`python3 -m venv ~/ls && ~/ls/bin/pip install label-studio`, then point "
        f"{VENV_ENV} (or [labelstudio] venv in tqaforge.toml) at that virtualenv",
    )


def is_healthy(url: str, timeout: float = 2.0) -> bool:
    """True when ``url/health`` answers 200."""
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout) as response:  # noqa: S310 (loopback URL we built)
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def token_works(url: str, token: str, timeout: float = 10.0) -> bool:
    """True when Label Studio at ``url`` accepts ``token`` (``/api/current-user/whoami`` answers 200)."""
    request = urllib.request.Request(f"{url}/api/current-user/whoami", headers={"Authorization": f"Token {token}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (loopback URL we built)
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def make_private(data_dir: Path) -> None:
    """``data_dir`` 0700, every directory in it 0700 and every file 0600: Label Studio's database
    holds the account, its token and all annotations, which no other local user may read."""
    data_dir.chmod(0o700)
    for root, dirs, files in os.walk(data_dir):
        for name in dirs:
            path = Path(root, name)
            if not path.is_symlink():
                path.chmod(0o700)
        for name in files:
            path = Path(root, name)
            if not path.is_symlink() and path.stat().st_mode & 0o077:
                path.chmod(path.stat().st_mode & 0o700)


def child_environment(settings: LabelStudioSettings) -> dict[str, str]:
    """The environment Label Studio starts with: the preset account (environment, not command line),
    its data directory, and every call outside the machine switched off."""
    inherited = {key: value for key, value in os.environ.items() if key not in _LS_SETTINGS_WE_OWN}
    return {
        **inherited,
        "LABEL_STUDIO_USERNAME": settings.username,
        "LABEL_STUDIO_PASSWORD": settings.password,
        "LABEL_STUDIO_USER_TOKEN": settings.token,
        "LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN": "true",
        "LABEL_STUDIO_BASE_DATA_DIR": str(settings.data_dir),
        "DJANGO_DB": "sqlite",
        # The machine may have no internet, and a start must not wait on it: no PyPI version check
        # (up to 10 s per start), no Sentry error reports (on by default, with personal data),
        # no analytics. Prefixed names, which Label Studio reads first.
        "LABEL_STUDIO_LATEST_VERSION_CHECK": "false",
        "LABEL_STUDIO_SENTRY_DSN": "",
        "LABEL_STUDIO_FRONTEND_SENTRY_DSN": "",
        "LABEL_STUDIO_COLLECT_ANALYTICS": "false",
        "LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK": "true",
        **settings.extra_env,
    }


def start_server(settings: LabelStudioSettings, *, wait_s: float = 300.0,
                 on_wait: Callable[[float], None] | None = None,
                 on_spawn: Callable[[subprocess.Popen[bytes]], None] | None = None) -> RunningServer:
    """Start Label Studio with its own SQLite database under ``settings.data_dir`` and wait until
    it answers; the preset account and token work as soon as this returns.

    Fails at once (before starting anything) when the host is beyond loopback without
    ``allow_remote``, or the port is taken; fails as soon as Label Studio exits or moves to another
    port, with the tail of its log. ``on_wait(elapsed_s)`` is called about once a second while waiting;
    ``on_spawn(process)`` once, as soon as the process exists (to record its pid).

    The process runs in a session of its own, so it outlives the caller unless stopped: that is how
    :func:`tqaforge.annotation.labelstudio.manage.start` leaves it running in the background.
    """
    command = executable(settings.venv)
    check_host_allowed(settings.host, allow_remote=settings.allow_remote, server_name="Label Studio",
                       flag="--allow-remote (ALLOW_REMOTE=1 for make run)")
    try:
        check_label_studio_port(settings)
    except LabelStudioPortInUse:
        if is_healthy(settings.url):  # say so when it is another Label Studio (or anything with /health)
            raise LabelStudioPortInUse(
                f"something already answers at {redact_url(settings.url)} (another Label Studio?)",
                hint=f"stop it (`tqaforge labelstudio stop` if it is a workspace's), or {port_hint(settings.port)}",
            ) from None
        raise
    settings.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    make_private(settings.data_dir)  # a data directory made by an older tqaforge may be 0755/0644
    log_path = settings.data_dir / "label-studio.log"
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    log_start = os.fstat(log_fd).st_size  # this run's part of the log starts here
    environment = child_environment(settings)
    began = time.monotonic()
    try:
        # A new server's database is a copy of this install's migrated template (made on the first
        # start of all): about 10 s to start instead of 70-90 s.
        database_template.seed(settings.data_dir, command, environment, log_fd=log_fd, wait_s=wait_s,
                               on_wait=None if on_wait is None else lambda: on_wait(time.monotonic() - began))
        process = subprocess.Popen(
            [str(command), "start", "--no-browser", "--internal-host", settings.host,
             "--port", str(settings.port), "--data-dir", str(settings.data_dir)],
            env=environment, stdout=log_fd, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            umask=_PRIVATE_UMASK,  # its database, WAL and uploads are created 0600
            start_new_session=True,  # its own process group, so stop() reaches every child
        )
    finally:
        os.close(log_fd)
    server = RunningServer(settings, process, log_path)
    try:
        if on_spawn is not None:
            on_spawn(process)
        _wait_until_healthy(server, log_start, wait_s, on_wait, began)
    except BaseException:
        server.stop()  # failed, Ctrl-C or SIGTERM while waiting: leave no server behind
        raise
    make_private(settings.data_dir)
    return server


def _log_since(path: Path, offset: int, limit: int = 1500) -> str:
    """The last ``limit`` characters this run wrote to the log."""
    with path.open("rb") as log:
        log.seek(offset)
        return log.read().decode(errors="replace")[-limit:]


def _wait_until_healthy(server: RunningServer, log_start: int, wait_s: float,
                        on_wait: Callable[[float], None] | None, started: float) -> None:
    """Wait until the server answers, up to ``wait_s`` from ``started`` (its database template included)."""
    settings, process, log_path = server.settings, server.process, server.log_path
    while (elapsed := time.monotonic() - started) < wait_s:
        if process.poll() is not None:
            raise LabelStudioError(
                f"Label Studio exited with code {process.returncode} after {elapsed:.0f} s:\n"
                f"{_log_since(log_path, log_start)}", hint=f"see {log_path}")
        recent = _log_since(log_path, log_start)
        if _PORT_MOVED_MARK in recent:
            # The port was taken between our check and its start; it would answer elsewhere.
            raise LabelStudioPortInUse(
                f"port {settings.port} was taken while Label Studio started, and it moved to another port:\n{recent}",
                hint=port_hint(settings.port))
        if is_healthy(settings.url):
            return
        if on_wait is not None:
            on_wait(elapsed)
        time.sleep(1.0)
    raise LabelStudioError(
        f"Label Studio did not answer at {redact_url(settings.url)} within {wait_s:.0f} s:\n{_log_since(log_path, log_start)}",
        hint=f"see {log_path}")

"""The app's sign-in for a small team: users with a password stored hashed in the workspace.

The app needs a login as soon as it leaves loopback (:mod:`tqaforge.launch` refuses to start it
remote without one). The users live in ``WORKSPACE/app-users.json``
(:attr:`tqaforge.config.WorkspacePaths.app_users`)::

    {"version": 1, "users": {"ada": {"scheme": "scrypt", "n": 16384, "r": 8, "p": 1,
                                     "salt": "<32 hex>", "hash": "<64 hex>"}}}

* **Never the password**: each user has a random salt of their own and an scrypt hash (the stdlib's
  :func:`hashlib.scrypt`; its parameters are stored with the hash, so stronger ones later still
  read old entries). A check compares with :func:`hmac.compare_digest`, and an unknown name costs
  the same scrypt as a known one, so neither the time nor the message tells which names exist.
* **Only its owner may change it**: written atomically with mode 0600; a file that others may
  write (they could add themselves) or read (the hashes could be attacked offline), a link, or one
  that is not this shape is refused with what to do, never half-read.
* **Guessing is slowed**: :class:`Throttle` locks a key (a browser session, a user name) out for a
  while after a few failures in a row.

Streamlit's own OIDC login (``[auth]`` in ``.streamlit/secrets.toml``) is the other way in;
:func:`oidc_secrets_file` finds it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import re
import secrets
import stat
import threading
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from tqaforge.config import WorkspacePaths
from tqaforge.errors import LoginError
from tqaforge.files import atomic_write_text

#: Set to ``1`` in the app's environment by the launcher: every page shows only the sign-in form
#: until someone signs in. The server process's environment: no browser can set or clear it.
LOGIN_ENV = "TQAFORGE_APP_LOGIN"

FORMAT_VERSION = 1
#: scrypt with n=2**14, r=8, p=1: 16 MiB and some 50 ms per check, the usual interactive setting.
SCRYPT = {"n": 2**14, "r": 8, "p": 1}
SALT_BYTES = 16
HASH_BYTES = 32
MIN_PASSWORD = 8
#: A name is shown in the app and typed at a prompt: letters, digits and ``. _ @ -``, not leading
#: with punctuation. Anything else (spaces, controls, look-alike letters, slashes) is refused.
USER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")


@dataclass(frozen=True)
class AppUser:
    """One user's stored entry (never the password)."""

    name: str
    salt: bytes
    digest: bytes
    n: int = SCRYPT["n"]
    r: int = SCRYPT["r"]
    p: int = SCRYPT["p"]

    def to_json(self) -> dict[str, object]:
        return {"scheme": "scrypt", "n": self.n, "r": self.r, "p": self.p, "salt": self.salt.hex(), "hash": self.digest.hex()}


def users_file(root: Path) -> Path:
    """Where the workspace at ``root`` keeps its app users."""
    return WorkspacePaths(root).app_users


def check_user_name(name: str) -> str:
    """``name`` if it may be a user name (:data:`USER_NAME`), else :class:`LoginError`."""
    if not USER_NAME.fullmatch(name):
        raise LoginError(f"{name!r} is not a user name: use 1-64 letters, digits and . _ @ - (starting with a letter or digit)",
                         hint="e.g. `tqaforge app users add ada`")
    return name


def check_password(password: str) -> str:
    """``password`` if it may be stored, else :class:`LoginError` (empty, blank or too short)."""
    if not password.strip():
        raise LoginError("the password is empty", hint="type a password of at least 8 characters")
    if len(password) < MIN_PASSWORD:
        raise LoginError(f"the password is shorter than {MIN_PASSWORD} characters", hint="type a longer one")
    return password


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    # surrogatepass: a password read from a terminal in another encoding still hashes, the same way every time.
    return hashlib.scrypt(password.encode("utf-8", "surrogatepass"), salt=salt, n=n, r=r, p=p, maxmem=256 * 1024 * 1024, dklen=HASH_BYTES)


def hash_password(name: str, password: str) -> AppUser:
    """A new entry for ``name``: a fresh random salt and the scrypt hash of ``password``."""
    salt = secrets.token_bytes(SALT_BYTES)
    return AppUser(check_user_name(name), salt, _scrypt(check_password(password), salt, **SCRYPT))


def read_users(root: Path) -> dict[str, AppUser]:
    """The workspace's app users by name (none when the file does not exist).

    Refused (:class:`LoginError`, naming the file and the fix): a link, a file others may read or
    write, one this user does not own, or one that is not the format above."""
    path = users_file(root)
    try:
        info = path.lstat()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise LoginError(f"{path}: cannot be read ({exc.strerror})") from exc
    if not stat.S_ISREG(info.st_mode):
        raise LoginError(f"{path} is not a regular file (a link or a directory)",
                         hint="remove it and add the users again with `tqaforge app users add NAME`")
    if info.st_mode & 0o077:
        raise LoginError(f"{path} may be read or written by others (mode {stat.S_IMODE(info.st_mode):o}): "
                         "anyone who can write it can add a login", hint=f"check who changed it, then `chmod 600 {path}`")
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise LoginError(f"{path} belongs to another user (uid {info.st_uid})",
                         hint="run the app as the workspace's owner, or remove the file and add the users again")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return _parse_users(data)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise LoginError(f"{path} is not a users file tqaforge wrote ({exc.__class__.__name__}: {exc})",
                         hint="restore it from a backup, or remove it and add the users again with "
                              "`tqaforge app users add NAME`") from None


def _parse_users(data: object) -> dict[str, AppUser]:
    if not isinstance(data, dict) or data.get("version") != FORMAT_VERSION or not isinstance(data.get("users"), dict):
        raise ValueError(f"expected {{\"version\": {FORMAT_VERSION}, \"users\": {{...}}}}")
    users: dict[str, AppUser] = {}
    for name, entry in data["users"].items():
        if not USER_NAME.fullmatch(name):
            raise ValueError(f"user name {name!r} is not allowed")
        if not isinstance(entry, dict) or entry.get("scheme") != "scrypt":
            raise ValueError(f"user {name}: expected an scrypt entry")
        n, r, p = (entry[k] for k in ("n", "r", "p"))
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (n, r, p)) or n < 2 or n & (n - 1) \
                or n > 2**20 or not 0 < r <= 32 or not 0 < p <= 16:
            raise ValueError(f"user {name}: scrypt parameters out of range")
        salt, digest = bytes.fromhex(entry["salt"]), bytes.fromhex(entry["hash"])
        if len(salt) < SALT_BYTES or len(digest) != HASH_BYTES:
            raise ValueError(f"user {name}: salt or hash of the wrong length")
        users[name] = AppUser(name, salt, digest, n, r, p)
    return users


def _write_users(root: Path, users: dict[str, AppUser]) -> None:
    data = {"version": FORMAT_VERSION, "users": {name: users[name].to_json() for name in sorted(users)}}
    atomic_write_text(users_file(root), json.dumps(data, indent=2) + "\n", mode=0o600)


@contextlib.contextmanager
def _changing(root: Path) -> Iterator[None]:
    """Hold the users file's lock while it is read and written again, so two commands that add
    users at once both keep theirs."""
    locks = WorkspacePaths(root).locks
    locks.mkdir(exist_ok=True)
    with open(locks / "app-users.lock", "a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        yield


def login_required_by(value: str | None) -> bool:
    """Whether ``TQAFORGE_APP_LOGIN``'s value asks for a login: anything but unset, empty or ``0``
    (a stray ``true`` or ``yes`` means on: the switch fails closed)."""
    return (value or "").strip() not in ("", "0")


def add_user(root: Path, name: str, password: str, *, replace: bool = False) -> AppUser:
    """Store ``name`` with ``password`` hashed; an existing name is refused unless ``replace``
    (a new password). The other users are kept as they were."""
    user = hash_password(name, password)
    with _changing(root):
        users = read_users(root)
        if name in users and not replace:
            raise LoginError(f"app user {name} exists already", hint="pass --replace to give them a new password")
        users[name] = user
        _write_users(root, users)
    return user


def remove_user(root: Path, name: str) -> None:
    """Remove ``name`` (:class:`LoginError` when there is no such user); a signed-in session of
    theirs ends at its next click (the app checks the user still exists)."""
    with _changing(root):
        users = read_users(root)
        if name not in users:
            raise LoginError(f"no app user {name!r} in {users_file(root)}", hint="`tqaforge app users list` shows them")
        del users[name]
        _write_users(root, users)


# A stand-in checked for an unknown name, so that a wrong name costs the same time as a wrong password.
_DUMMY = AppUser("-", bytes(SALT_BYTES), bytes(HASH_BYTES))


def verify(users: dict[str, AppUser], name: str, password: str) -> bool:
    """Whether ``password`` is ``name``'s (constant-time compare; an unknown name takes as long)."""
    user = users.get(name)
    probe = user or _DUMMY
    ok = hmac.compare_digest(_scrypt(password, probe.salt, probe.n, probe.r, probe.p), probe.digest)
    return ok and user is not None


@dataclass
class Throttle:
    """Failed sign-ins per key (a session, a user name): after ``max_failures`` in a row the key is
    locked out for ``lockout`` seconds. Thread-safe: the app's sessions share one."""

    max_failures: int = 5
    lockout: float = 60.0
    clock: Callable[[], float] = time.monotonic
    _failures: dict[str, int] = field(default_factory=dict)
    _locked_until: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def wait_seconds(self, *keys: str) -> float:
        """How long the longest lockout among ``keys`` still lasts (0: none is locked out)."""
        now = self.clock()
        with self._lock:
            return max([0.0, *(self._locked_until.get(key, now) - now for key in keys)])

    #: Keys kept before the idle ones are forgotten (a flood of made-up names must not grow memory).
    max_keys: int = 10_000

    def failed(self, *keys: str) -> None:
        """Count a failure for each key; the ``max_failures``-th locks it out (and starts a new count)."""
        now = self.clock()
        with self._lock:
            if len(self._failures) > self.max_keys:
                self._forget_idle(now)
            for key in keys:
                count = self._failures.get(key, 0) + 1
                if count >= self.max_failures:
                    self._locked_until[key] = now + self.lockout
                    count = 0
                self._failures[key] = count

    def _forget_idle(self, now: float) -> None:
        # Locked-out keys stay; of the rest, the oldest counts go first (dicts keep insertion order).
        self._locked_until = {k: t for k, t in self._locked_until.items() if t > now}
        idle = [k for k in self._failures if k not in self._locked_until]
        for key in idle[: len(self._failures) - self.max_keys // 2]:
            del self._failures[key]

    def succeeded(self, *keys: str) -> None:
        """A sign-in worked: the keys' counts start again."""
        with self._lock:
            for key in keys:
                self._failures.pop(key, None)


def oidc_provider(path: Path) -> str | None:
    """The provider to name in ``st.login(provider)`` for the ``[auth]`` of ``path``: the one
    ``[auth.NAME]`` section with a ``client_id`` (None: the provider is in ``[auth]`` itself)."""
    auth = tomllib.loads(path.read_text(encoding="utf-8")).get("auth", {})
    named = [name for name, value in auth.items() if isinstance(value, dict) and value.get("client_id")]
    return named[0] if named and not auth.get("client_id") else None


def oidc_secrets_file(*folders: Path) -> Path | None:
    """The first ``.streamlit/secrets.toml`` under ``folders`` (then the home directory) whose
    ``[auth]`` section configures Streamlit's OIDC login (``redirect_uri``, ``cookie_secret`` and a
    provider's ``client_id``); None when there is none. A file that is not TOML is refused
    (:class:`LoginError`) rather than taken for "no login"."""
    for folder in (*folders, Path.home()):
        path = folder / ".streamlit" / "secrets.toml"
        if not path.is_file():
            continue
        try:
            auth = tomllib.loads(path.read_text(encoding="utf-8")).get("auth")
        except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError) as exc:
            raise LoginError(f"{path}: not readable TOML ({exc})", hint="fix the file, or move it away") from None
        if isinstance(auth, dict) and auth.get("redirect_uri") and auth.get("cookie_secret"):
            providers = [auth, *(v for v in auth.values() if isinstance(v, dict))]
            if any(p.get("client_id") for p in providers):
                return path
    return None

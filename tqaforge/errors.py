"""The one exception hierarchy of tqaforge.

Every error a user can cause derives from :class:`TqaforgeError`; its message says what went
wrong, where (file, line, row, item id) and, where we know it, what to do. The CLI prints the
message and exits non-zero instead of showing a traceback.
"""

from __future__ import annotations

import errno
import os


class TqaforgeError(Exception):
    """Base class of every error tqaforge raises on purpose."""

    hint: str | None = None
    #: The hint in the app's words, where :attr:`hint` names the CLI's flags (``--annotator``):
    #: the app shows this one instead (None: the app shows :attr:`hint` when it names no flag).
    app_hint: str | None = None

    def __init__(self, message: str, *, hint: str | None = None, app_hint: str | None = None) -> None:
        super().__init__(message)
        if hint is not None:
            self.hint = hint
        if app_hint is not None:
            self.app_hint = app_hint

    def __str__(self) -> str:
        text = super().__str__()
        return f"{text}\n  hint: {self.hint}" if self.hint else text


class ConfigError(TqaforgeError):
    """The workspace configuration is missing, unreadable or inconsistent."""


class WorkspaceNotFound(ConfigError):
    """No tqaforge workspace in the given or current directory."""

    hint = "run `tqaforge init DIR` first, or pass --workspace DIR"
    app_hint = "run `tqaforge init DIR` first, then start the app in DIR (or with TQAFORGE_WORKSPACE=DIR)"


class StoreError(TqaforgeError):
    """The record store cannot be opened, migrated or written."""


class NotFound(TqaforgeError):
    """A record asked for by id does not exist."""


class TableError(TqaforgeError):
    """A table is malformed (ragged rows, empty, bad header...)."""


class TokenCountError(TqaforgeError):
    """Tokens cannot be counted or a table grown as asked (unknown encoding, a target that is not
    a whole number, a table already longer than the target...)."""


class ReaderError(TableError):
    """A file could not be read as a table; names the file and the line or row."""

    def __init__(
        self,
        path: str,
        problem: str,
        *,
        line: int | None = None,
        row: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.path = path
        self.line = line
        self.row = row
        self.problem = problem
        where = path
        if line is not None:
            where += f", line {line}"
        if row is not None:
            where += f", row {row}"
        super().__init__(f"{where}: {problem}", hint=hint)


class HeaderNameError(ReaderError):
    """A blank or repeated header name in a file read with strict headers: reading it with
    lenient headers (``--lenient-headers``, the app's checkbox) keeps the header as it is."""


class TaxonomyError(TqaforgeError):
    """A category or subtype is not part of the workspace's taxonomy."""


class LLMError(TqaforgeError):
    """The model endpoint is unusable (after retries) or the LLM settings are missing."""


class BudgetExceeded(LLMError):
    """A paid call was refused before sending: its worst-case cost would pass ``max_cost``."""

    hint = "raise --max-cost (or [llm] max_cost); finished calls are stored and a re-run resumes"


class InvalidReply(LLMError):
    """A JSON reply was still invalid after one repair retry; ``call_ids`` names the calls."""

    def __init__(self, message: str, *, call_ids: list[str], hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.call_ids = list(call_ids)


class AgreementError(TqaforgeError):
    """Agreement statistics cannot be computed from the ratings given (wrong shape, unequal raters...)."""


class AdjudicationError(AgreementError):
    """A final label cannot be recorded as given (unknown task, label of the wrong shape...)."""


class ServerBindError(TqaforgeError):
    """A local server (Label Studio, the app) cannot listen where it was asked to."""


class PortInUse(ServerBindError):
    """The port a server was asked to use is already taken; the message names it."""


class RemoteBindingRefused(ServerBindError):
    """A server was asked to listen beyond loopback without the explicit flag that allows it."""


class LoginRequired(RemoteBindingRefused):
    """The app was asked to require a login (beyond loopback, or ``--require-login``) and has no
    way to check one: no app user in the workspace and no Streamlit OIDC ``[auth]``."""


class LoginError(TqaforgeError):
    """The app's users file cannot be trusted or changed as asked (malformed, writable by others,
    an odd user name, an empty password)."""


class ImportFailed(TqaforgeError):
    """One path of an import could not be imported (unreadable directory, broken link, a file
    that broke the reader or the store); the other paths of the call still import."""

    def __init__(self, path: str, problem: str, *, hint: str | None = None) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}", hint=hint)


class EndpointAuthError(LLMError):
    """The model endpoint refused our credentials (HTTP 401/403) or no API key is set."""


class EndpointUnreachable(LLMError):
    """Nothing listens at the model endpoint's address (connection refused), or its host name
    does not exist: no retry can help, so the command stops at once; the message names the
    host and port, the hint what to do (start the server, or point the base URL at it)."""


class ImpossibleUsage(LLMError):
    """An endpoint reported token usage that its request cannot have produced (more completion
    tokens than ``max_tokens``, a prompt count far beyond the prompt's size, negative or
    non-numeric counts). Its cost figures cannot be trusted, so the run stops."""


class ReplyTooLarge(InvalidReply):
    """A model reply was larger than any honest reply to its request can be; it was cut off
    at the limit, recorded with a truncated body, and never sent back to the model."""


class SandboxError(TqaforgeError):
    """The sandbox cannot run code as asked: limits out of range, or no worker process could start.

    What a program does inside the sandbox (loop, crash, exceed a limit) is never this error: it is
    the ``outcome`` of the run."""

    hint = "check the sandbox limits you passed (see tqaforge.sandbox.Limits) or the worker log named in the message"


class ReleaseError(TqaforgeError):
    """A release cannot be built, verified or compared (the message says why and what to do)."""


class EvaluateError(TqaforgeError):
    """A release or predictions file cannot be scored (the message says where and what to do)."""


class ComparisonError(EvaluateError):
    """Scores cannot be compared as given (unequal lengths, missing or mismatched items, NaN or
    out-of-range scores, impossible settings): the message says which and what to do."""


class HealthError(TqaforgeError):
    """A benchmark's health cannot be reported (no or mismatched evaluations, a damaged file), or a
    release's health fails a threshold its build requires: the message names the check."""


class DiskError(TqaforgeError):
    """A file or the database could not be written: its file system is full, over quota or
    mounted read-only, or the path is not writable for this user. The message names the path
    and its file system; the hint says what to do. Made by :func:`disk_error`, the one place
    that turns such an ``OSError`` (or a database's own report of it) into words."""

    def __init__(self, message: str, *, path: str | None, reason: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.path = path
        self.reason = reason  # "full", "quota", "read-only" or "permission"


#: The errno values that mean "the disk refused the write", and what each is called.
DISK_ERRNOS: dict[int, str] = {
    errno.ENOSPC: "full",
    errno.EDQUOT: "quota",
    errno.EROFS: "read-only",
    errno.EACCES: "permission",
    errno.EPERM: "permission",
}


def disk_error(exc: OSError, path: str | os.PathLike[str] | None = None) -> DiskError | None:
    """``exc`` as a :class:`DiskError` naming ``path`` (else the file the exception names), or
    ``None`` when ``exc`` is not a full, over-quota, read-only or permission error.

    >>> str(disk_error(OSError(errno.EROFS, "Read-only file system", "/proc/x")))  # doctest: +ELLIPSIS
    '/proc/x is on a read-only file system (mounted at /proc)...'
    """
    reason = DISK_ERRNOS.get(exc.errno or 0)
    if reason is None:
        return None
    name = os.fspath(path) if path is not None else exc.filename
    target = os.fsdecode(name) if name is not None else None
    if reason == "permission" and target is None:
        return None  # EPERM/EACCES of no file (a signal, a namespace) is no disk's: left as it is
    mount, free = _file_system(target)
    where = f" (mounted at {mount})" if mount else ""
    if reason == "full":
        details = ([f"mounted at {mount}"] if mount else []) + ([f"{free:,} bytes free"] if free is not None else [])
        about = f" ({', '.join(details)})" if details else ""
        message = f"no space left on the file system of {target}{about}" if target else "no space left on the device being written"
        hint = (f"free space on {mount or 'that file system'} (`df -h` shows what is full) or write somewhere "
                "else, then run the command again")
    elif reason == "quota":
        message = f"disk quota exceeded writing {target or 'a file'}{where}"
        hint = "free space within your quota (`quota -s`) or ask for a larger one, then run the command again"
    elif reason == "read-only":
        message = f"{target or 'the file'} is on a read-only file system{where}"
        hint = (f"remount {mount or 'it'} read-write, or copy the workspace to a writable place and pass "
                "--workspace (or --out) to use it there")
    else:
        message = f"permission denied: {target or 'a file'} cannot be written (or read) by this user"
        owner = os.path.dirname(target) if target else None
        hint = (f"make it and its folder{f' {owner}' if owner else ''} writable for this user "
                "(`ls -ld`, `chmod u+w`, `chown`), or run the command as their owner")
    return DiskError(message, path=target, reason=reason, hint=hint)


def _file_system(path: str | None) -> tuple[str | None, int | None]:
    """The mount point holding ``path`` (or its nearest existing parent) and the bytes free
    there for this user; ``(None, None)`` when neither can be found."""
    if not path:
        return None, None
    probe = os.path.abspath(path)
    while not os.path.exists(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    try:
        st = os.statvfs(probe)
        free: int | None = st.f_bavail * st.f_frsize
    except OSError:
        free = None
    return _mount_point(os.path.realpath(probe)), free


def _mount_point(path: str) -> str:
    """The mount point holding ``path``: the longest one of the mount table above it (a bind
    mount of a folder shares its device with its parent, so ``os.path.ismount`` misses it)."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
            # Field 5 is the mount point, with space, tab, newline and backslash as octal escapes.
            points = [_unescape(line.split()[4]) for line in fh if len(line.split()) > 4]
    except OSError:
        points = []
    above = [p for p in points if path == p or path.startswith(p.rstrip("/") + "/")]
    if above:
        return max(above, key=len)
    mount = path
    while not os.path.ismount(mount) and os.path.dirname(mount) != mount:
        mount = os.path.dirname(mount)
    return mount


def _unescape(field: str) -> str:
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")

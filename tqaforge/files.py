"""Writing files so that nobody ever reads half of one: the one atomic-write helper.

Every file tqaforge writes for people to use (prompts JSONL, reports, the seed corpus, the
workspace config) is written to a private temporary file in the same folder, flushed to disk and
renamed over the target. A killed command leaves the old file or the new one, never a mix; two
commands writing the same file at once each write their own temporary file (a fixed name such as
``FILE.partial`` would be shared, and one would rename the other's half-written text into place).

A leaf module, like :mod:`tqaforge.errors`: it imports nothing of tqaforge, so every layer may use it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path
from typing import Iterable, Iterator, TextIO


@contextlib.contextmanager
def atomic_writer(path: Path, *, mode: int | None = None) -> Iterator[TextIO]:
    """A text stream whose content replaces ``path`` when the ``with`` block ends without error.

    On an exception the temporary file is removed and ``path`` is untouched. ``mode`` sets the
    file's permissions (default: what a plain ``open`` would give under the current umask).

    >>> with atomic_writer(Path("report.md")) as fh:  # doctest: +SKIP
    ...     fh.write("# Report\\n")
    """
    try:
        fh = tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", dir=path.parent, prefix=f".{path.name}.", suffix=".partial", delete=False
        )
    except OSError as exc:
        name_target(exc, path)
        raise
    tmp = Path(fh.name)
    try:
        with fh:
            yield fh  # type: ignore[misc]  # a text file object: TextIO in all but name
            fh.flush()
            os.fsync(fh.fileno())
        replace_durably(tmp, path, mode=mode)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        name_target(exc, path)
        raise


def name_target(exc: BaseException, path: Path) -> None:
    """Make a failed write name ``path``: an ``OSError`` of ``write``, ``flush`` or ``close``
    (a full disk, say) names no file, and the temporary file it does name is gone. The CLI's
    error handling (``tqaforge.errors.disk_error``) then says which file system is full."""
    if isinstance(exc, OSError) and (exc.filename is None or _is_temporary_of(exc.filename, path)):
        exc.filename = str(path)


def _is_temporary_of(name: object, path: Path) -> bool:
    """Whether ``name`` is one of our temporary files for ``path`` (``.NAME.xxxx.partial``)."""
    base = os.path.basename(os.fsdecode(name)) if isinstance(name, (str, bytes, os.PathLike)) else ""
    return base.startswith(f".{path.name}.") and base.endswith(".partial")


def atomic_write_text(path: Path, text: str, *, mode: int | None = None) -> None:
    """Replace ``path`` with ``text`` atomically (see :func:`atomic_writer`)."""
    with atomic_writer(path, mode=mode) as fh:
        fh.write(text)


def replace_durably(tmp: Path, path: Path, *, mode: int | None = None) -> None:
    """Rename ``tmp`` over ``path`` and make the rename itself survive a power cut."""
    if mode is None:
        # NamedTemporaryFile makes 0600 files; a user's file gets the usual umask permissions.
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    os.chmod(tmp, mode)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def remove_tree(path: str | os.PathLike[str]) -> None:
    """Remove the directory ``path`` and everything in it, whatever its depth; never recurses.

    ``shutil.rmtree`` recurses once per level (a tree 3,000 directories deep, which a hostile
    program makes in a second, ends in a RecursionError) and its path-based fallback passes
    PATH_MAX. This walks down with one directory descriptor at a time (``openat`` of the child,
    ``..`` to come back), so neither the stack nor the open files grow with the depth. Symlinks
    are removed, never followed. Directories without write or search permission are opened up
    first (a program may chmod its own directories to 000). A missing ``path`` is not an error;
    anything that still cannot be removed raises the ``OSError``.
    """
    top = os.fspath(path)
    try:
        fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    except NotADirectoryError:
        os.unlink(top)
        return
    except PermissionError:
        os.chmod(top, 0o700)
        fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    names: list[str] = []  # the path from ``top`` down to where ``fd`` is, one name per level
    try:
        while True:
            child = _empty_but_directories(fd)
            if child is not None:
                try:
                    sub = os.open(child, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                except PermissionError:
                    os.chmod(child, 0o700, dir_fd=fd, follow_symlinks=False)
                    sub = os.open(child, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                os.close(fd)
                fd = sub
                names.append(child)
                continue
            if not names:
                break
            parent = os.open("..", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = parent
            os.rmdir(names.pop(), dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(top)


def _empty_but_directories(fd: int) -> str | None:
    """Unlink every non-directory in the directory open as ``fd``; the name of one subdirectory
    left, or None when the directory is now empty."""
    try:
        entries = list(os.scandir(fd))
    except PermissionError:
        os.chmod(fd, 0o700)
        entries = list(os.scandir(fd))
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            return entry.name
        try:
            os.unlink(entry.name, dir_fd=fd)
        except PermissionError:
            os.chmod(fd, 0o700)
            os.unlink(entry.name, dir_fd=fd)
        except FileNotFoundError:
            pass
    return None


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, read in blocks (never the whole file in memory)."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def modules_source_hash(names: Iterable[str], *, salt: str = "") -> str:
    """A sha256 of ``salt`` and the source files of the modules ``names`` (imported if need be):
    what a cache of computed results keys on, so that a change of the code that computes them
    makes the cached results stale."""
    import importlib

    digest = hashlib.sha256(salt.encode())
    for name in names:
        origin = getattr(importlib.import_module(name), "__file__", None)
        digest.update(name.encode() + b"\0" + (Path(origin).read_bytes() if origin else b"") + b"\0")
    return digest.hexdigest()

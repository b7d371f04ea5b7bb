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
import os
import tempfile
from pathlib import Path
from typing import Iterator, TextIO


@contextlib.contextmanager
def atomic_writer(path: Path, *, mode: int | None = None) -> Iterator[TextIO]:
    """A text stream whose content replaces ``path`` when the ``with`` block ends without error.

    On an exception the temporary file is removed and ``path`` is untouched. ``mode`` sets the
    file's permissions (default: what a plain ``open`` would give under the current umask).

    >>> with atomic_writer(Path("report.md")) as fh:  # doctest: +SKIP
    ...     fh.write("# Report\\n")
    """
    fh = tempfile.NamedTemporaryFile(
        "w", encoding="utf-8", dir=path.parent, prefix=f".{path.name}.", suffix=".partial", delete=False
    )
    tmp = Path(fh.name)
    try:
        with fh:
            yield fh  # type: ignore[misc]  # a text file object: TextIO in all but name
            fh.flush()
            os.fsync(fh.fileno())
        replace_durably(tmp, path, mode=mode)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


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

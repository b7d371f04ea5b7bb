"""The temporary folder a release is built in, and what is left of one whose build was killed.

A build writes its files (and its external sort's runs, over a gigabyte at TableBench x10) into
``release/`` inside a hidden folder next to the release, ``.NAME-VERSION.XXXXXXXX``, and moves
that ``release/`` into place whole when it is done. A build killed by a signal it
cannot catch (SIGKILL, the machine's OOM killer, a power cut) leaves the folder behind. So each
build holds an advisory lock (``flock``) on a marker file in the folder (beside ``release/``,
never in it) for as long as it runs; the kernel drops the lock when the process dies, however it
dies. The next build of any release in the same place removes the folders whose lock it can
take, and only those: a build running at the same time, in this process or another, holds its
lock and keeps its folder; a folder without the marker is not a build folder of ours and is
never touched.

>>> folder = BuildFolder.claim(Path("releases"), "tb-1.0.0")     # doctest: +SKIP
>>> folder.root                                                  # doctest: +SKIP
PosixPath('releases/.tb-1.0.0.k3j9x0ab/release')
>>> folder.remove()                                              # doctest: +SKIP
"""

from __future__ import annotations

import fcntl
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tqaforge.files import remove_tree

#: The marker a live build holds its lock on, beside the release it writes.
MARKER = ".tqaforge-building"
# tempfile.mkdtemp's names: the prefix, then 8 of [a-z0-9_].
_BUILD_FOLDER = re.compile(r"\..+\.[a-z0-9_]{8}")


@dataclass
class Abandoned:
    """A build folder of a killed build that was removed: its name and the bytes it held."""

    name: str
    size: int


@dataclass
class BuildFolder:
    """A build's temporary folder with the lock that marks it as in use (module docs)."""

    path: Path
    _fd: int | None

    @classmethod
    def claim(cls, parent: Path, release_name: str) -> BuildFolder:
        """A new folder ``parent/.RELEASE_NAME.XXXXXXXX``, locked for this build, with an empty
        :attr:`root` to write the release in."""
        path = Path(tempfile.mkdtemp(prefix=f".{release_name}.", dir=parent))
        fd = os.open(path / MARKER, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)  # a new file: nobody else can hold it yet
        (path / "release").mkdir()
        return cls(path, fd)

    @property
    def root(self) -> Path:
        """Where the release is written (and from where it is moved into place)."""
        return self.path / "release"

    def remove(self) -> None:
        """Remove the folder (what is left in it) and drop the lock, in that order: no other
        build takes a folder that is still being removed."""
        try:
            remove_tree(self.path)
        except OSError:
            pass  # left with its lock dropped: the next build removes it
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def remove_abandoned(parent: Path) -> list[Abandoned]:
    """Remove the build folders in ``parent`` whose build is dead (module docs): those holding
    the marker with nobody holding its lock. Returns what was removed."""
    removed: list[Abandoned] = []
    try:
        entries = list(os.scandir(parent))
    except FileNotFoundError:
        return removed
    for entry in entries:
        if not (_BUILD_FOLDER.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False)):
            continue
        try:
            fd = os.open(Path(entry.path) / MARKER, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            continue  # no marker (not a build folder of ours, or one about to become a release)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live build holds it
            size = _size(Path(entry.path))
            try:
                remove_tree(entry.path)  # while locked: a new build never takes an existing name
            except OSError:
                continue  # left for a later build; this one goes on
            removed.append(Abandoned(entry.name, size))
        finally:
            os.close(fd)
    return removed


def _size(folder: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total

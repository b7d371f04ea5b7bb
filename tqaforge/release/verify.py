"""Checking a release against its manifest, and comparing two releases.

:func:`verify_release` recomputes the sha256 of every file and names each one changed, added or
removed since the build. The manifest lists every other file's hash; a file it does not list
is "added".
:func:`diff_releases` compares the items and variants of two releases by id.

A release is a directory someone may have downloaded, so its manifest is input like any other:
it is read through the one bounded JSON reader, and every file it names is opened through
:func:`release_file`, which refuses an entry that leaves the release (an absolute path, ``..``, a
symbolic link pointing out of it) and anything that is not a regular file, naming the entry.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from tqaforge.errors import ReaderError, ReleaseError
from tqaforge.ids import canonical_json
from tqaforge.printable import escape_controls
from tqaforge.tables.readers._common import open_regular
from tqaforge.tables.readers.jsonio import read_json_file, read_json_lines

MANIFEST = "manifest.json"
#: A manifest lists a dozen files; one of this size is not a manifest, whatever it holds.
MAX_MANIFEST_BYTES = 16 * 1024**2
# A subset name becomes a file name (data/SUBSET.jsonl): a plain name, no path.
_SUBSET_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")
_ALTERED_HINT = "a release lists only its own files, by paths such as data/base.jsonl: download it again or rebuild it"


def _shown(entry: object) -> str:
    """A manifest entry as a message shows it: quoted, control characters escaped."""
    return f"'{escape_controls(entry, lines=False)}'" if isinstance(entry, str) else repr(entry)


def release_file(root: Path, entry: str) -> Path:
    """The path of the manifest entry ``entry`` inside the release directory ``root``.

    Every file of a release is opened through this function. Raises :class:`ReleaseError` naming
    the entry when it is not a relative path below ``root`` (absolute, empty, with a ``..`` part
    or a NUL byte) or when it reaches outside ``root`` through a symbolic link. The file need not
    exist (a removed file is the caller's finding)."""
    root = Path(root)
    problem = None
    if not isinstance(entry, str) or not entry or "\x00" in entry:
        problem = "not a file name"
    else:
        parts = PurePosixPath(entry)
        if parts.is_absolute():
            problem = "an absolute path"
        elif ".." in parts.parts:
            problem = "a path that climbs out with '..'"
    if problem is None:
        real_root = root.resolve()
        try:
            inside = (root / entry).resolve().is_relative_to(real_root)
        except (OSError, RuntimeError):  # a symbolic link loop
            inside = False
        if not inside:
            problem = "a symbolic link (or a path through one) that leads out of the release"
    if problem is not None:
        raise ReleaseError(f"{root}: manifest entry {_shown(entry)} is {problem}, outside the release", hint=_ALTERED_HINT)
    return root / entry


def _regular(root: Path, entry: str, path: Path) -> int:
    """An open descriptor on the regular file ``path`` of ``entry``; ReleaseError naming it otherwise."""
    try:
        return open_regular(path)
    except ReaderError as exc:
        raise ReleaseError(f"{root}: manifest entry {_shown(entry)}: {exc.problem}", hint=_ALTERED_HINT) from None


def _sha256(root: Path, entry: str, path: Path) -> str:
    with os.fdopen(_regular(root, entry, path), "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def read_manifest(root: Path) -> dict[str, Any]:
    """The manifest of the release at ``root``, checked: a JSON object whose ``files`` maps each
    file's path (inside the release, see :func:`release_file`) to its sha256, and whose ``counts``
    (if any) are keyed by plain subset names. Raises :class:`ReleaseError` saying what is wrong."""
    root = Path(root)
    if not root.is_dir():
        raise ReleaseError(f"{root} is not a directory", hint="give the release directory (it holds manifest.json)")
    path = release_file(root, MANIFEST)
    if not os.path.lexists(path):
        raise ReleaseError(f"{root} has no manifest.json: not a tqaforge release", hint="give the release directory")
    try:
        manifest = read_json_file(path, max_bytes=MAX_MANIFEST_BYTES)
    except ReaderError as exc:
        raise ReleaseError(f"{exc.args[0]}: the manifest is damaged", hint=_ALTERED_HINT) from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise ReleaseError(f"{path} lists no files: not a tqaforge release manifest")
    for entry, digest in manifest["files"].items():
        release_file(root, entry)
        if not isinstance(digest, str):
            raise ReleaseError(f"{path}: the sha256 of {_shown(entry)} is not text", hint=_ALTERED_HINT)
    counts = manifest.get("counts")
    if counts is not None and not isinstance(counts, dict):
        raise ReleaseError(f"{path}: counts is not an object of subset: number", hint=_ALTERED_HINT)
    for name in counts or {}:
        if not _SUBSET_NAME.fullmatch(name):
            raise ReleaseError(f"{path}: subset {_shown(name)} of counts is not a subset name", hint=_ALTERED_HINT)
    return manifest


def subset_file(root: Path, manifest: dict[str, Any], subset: str, suffix: str) -> Path:
    """The file ``data/SUBSET.SUFFIX`` of a read manifest, which must list it (so that it was verified)."""
    entry = f"data/{subset}.{suffix}"
    if entry not in manifest["files"]:
        raise ReleaseError(f"{root}: the manifest counts subset {_shown(subset)} but lists no {entry}", hint=_ALTERED_HINT)
    return release_file(root, entry)


@dataclass
class VerifyReport:
    """What :func:`verify_release` found; ``ok`` when nothing differs."""

    path: str
    version: str = ""
    checked: int = 0
    changed: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.changed or self.added or self.removed)

    def lines(self) -> list[str]:
        if self.ok:
            return [f"release {self.version} at {self.path}: all {self.checked} files match the manifest"]
        lines = [f"release {self.version} at {self.path} does NOT match its manifest:"]
        lines += [f"  changed: {p}" for p in self.changed]
        lines += [f"  added:   {p}" for p in self.added]
        lines += [f"  removed: {p}" for p in self.removed]
        return lines

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def verify_release(root: Path) -> VerifyReport:
    """Check every file of a release against the sha256 its manifest records."""
    root = Path(root)
    manifest = read_manifest(root)
    report = VerifyReport(escape_controls(str(root), lines=False), escape_controls(str(manifest.get("version", "")), lines=False))
    listed: dict[str, str] = manifest["files"]
    # Names only (is_file follows a link, but nothing unlisted is read); a link that leaves
    # the release is "added" like any unlisted file.
    present = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()} - {MANIFEST}
    for rel, digest in sorted(listed.items()):
        path = release_file(root, rel)
        if not os.path.lexists(path):
            report.removed.append(escape_controls(rel, lines=False))
            continue
        report.checked += 1
        if _sha256(root, rel, path) != digest:
            report.changed.append(escape_controls(rel, lines=False))
    report.added = sorted(escape_controls(p, lines=False) for p in present - set(listed))
    return report


@dataclass
class ReleaseDiff:
    """Items and variants added, removed and changed between two releases, per subset."""

    a: str
    b: str
    subsets: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    def lines(self) -> list[str]:
        lines = [f"{self.a} -> {self.b}"]
        for sub, parts in self.subsets.items():
            counts = ", ".join(f"{len(parts[k])} {k}" for k in ("added", "removed", "changed"))
            lines.append(f"  {sub}: {counts}")
            for kind in ("added", "removed", "changed"):
                lines += [f"    {kind[0].upper()} {rid}" for rid in parts[kind][:10]]
        return lines

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _rows(root: Path, manifest: dict[str, Any], subset: str) -> dict[str, str]:
    """Each row of a subset's JSON Lines file by id, as canonical JSON (to compare)."""
    entry = f"data/{subset}.jsonl"
    path = release_file(root, entry)
    if not os.path.lexists(path):
        return {}
    rows: dict[str, str] = {}
    try:
        for number, row in read_json_lines(path):
            if not isinstance(row, dict) or not isinstance(row.get("id"), str):
                raise ReleaseError(f"{path}, line {number}: a release row is a JSON object with an id", hint=_ALTERED_HINT)
            rows[row["id"]] = canonical_json(row)
    except ReaderError as exc:
        raise ReleaseError(f"{root}: manifest entry {_shown(entry)}: {exc.args[0]}", hint=_ALTERED_HINT) from None
    return rows


def diff_releases(a: Path, b: Path) -> ReleaseDiff:
    """The rows added, removed and changed from release ``a`` to ``b``, per subset."""
    ma, mb = read_manifest(Path(a)), read_manifest(Path(b))
    a_name, b_name = (escape_controls(f"{m.get('name')} {m.get('version')}", lines=False) for m in (ma, mb))
    result = ReleaseDiff(a_name, b_name)
    subsets = sorted(set(ma.get("counts") or {}) | set(mb.get("counts") or {}))
    for sub in subsets:
        ra, rb = _rows(Path(a), ma, sub), _rows(Path(b), mb, sub)
        result.subsets[sub] = {
            "added": sorted(escape_controls(k, lines=False) for k in set(rb) - set(ra)),
            "removed": sorted(escape_controls(k, lines=False) for k in set(ra) - set(rb)),
            "changed": sorted(escape_controls(k, lines=False) for k in set(ra) & set(rb) if ra[k] != rb[k]),
        }
    return result


def release_archive(root: Path) -> bytes:
    """The release as one zip, for a download: its manifest and the files the manifest lists,
    under ``NAME-VERSION/`` (files no manifest lists are not part of the release and stay out)."""
    import io
    import zipfile

    root = Path(root)
    if not os.path.lexists(root / MANIFEST):
        raise ReleaseError(f"{root} is not a release (no manifest.json)", hint="give the directory `tqaforge release build` wrote")
    manifest = read_manifest(root)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for entry in sorted({MANIFEST, *manifest["files"]}):
            path = release_file(root, entry)
            if not os.path.lexists(path):
                raise ReleaseError(f"{root}: {_shown(entry)} is listed in the manifest but missing",
                                   hint="check it with `tqaforge release verify`; download the release again or rebuild it")
            with os.fdopen(_regular(root, entry, path), "rb") as handle:
                archive.writestr(str(Path(root.name) / entry), handle.read())
    return buffer.getvalue()

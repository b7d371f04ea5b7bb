"""Checking a release against its manifest, and comparing two releases.

:func:`verify_release` recomputes the sha256 of every file and names each one changed, added or
removed since the build. The manifest lists every other file's hash; a file it does not list
is "added".
:func:`diff_releases` compares the items and variants of two releases by id.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqaforge.errors import ReleaseError


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


def _manifest(root: Path) -> dict[str, Any]:
    path = root / "manifest.json"
    if not root.is_dir():
        raise ReleaseError(f"{root} is not a directory", hint="give the release directory (it holds manifest.json)")
    try:
        manifest = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise ReleaseError(f"{root} has no manifest.json: not a tqaforge release", hint="give the release directory") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ReleaseError(f"{path} is not valid JSON ({exc}): the manifest was damaged") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise ReleaseError(f"{path} lists no files: not a tqaforge release manifest")
    return manifest


def verify_release(root: Path) -> VerifyReport:
    """Check every file of a release against the sha256 its manifest records."""
    root = Path(root)
    manifest = _manifest(root)
    report = VerifyReport(str(root), str(manifest.get("version", "")))
    listed: dict[str, str] = manifest["files"]
    present = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()} - {"manifest.json"}
    for rel, digest in sorted(listed.items()):
        path = root / rel
        if not path.is_file():
            report.removed.append(rel)
            continue
        report.checked += 1
        if hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            report.changed.append(rel)
    report.added = sorted(present - set(listed))
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


def _rows(root: Path, subset: str) -> dict[str, str]:
    path = root / "data" / f"{subset}.jsonl"
    if not path.is_file():
        return {}
    return {json.loads(line)["id"]: line for line in path.read_text("utf-8").splitlines() if line.strip()}


def diff_releases(a: Path, b: Path) -> ReleaseDiff:
    """The rows added, removed and changed from release ``a`` to ``b``, per subset."""
    ma, mb = _manifest(Path(a)), _manifest(Path(b))
    result = ReleaseDiff(f"{ma.get('name')} {ma.get('version')}", f"{mb.get('name')} {mb.get('version')}")
    subsets = sorted(set(ma.get("counts") or {}) | set(mb.get("counts") or {}))
    for sub in subsets:
        ra, rb = _rows(Path(a), sub), _rows(Path(b), sub)
        result.subsets[sub] = {
            "added": sorted(set(rb) - set(ra)),
            "removed": sorted(set(ra) - set(rb)),
            "changed": sorted(k for k in set(ra) & set(rb) if ra[k] != rb[k]),
        }
    return result


def release_archive(root: Path) -> bytes:
    """The release directory as one zip (its files under ``NAME-VERSION/``), for a download."""
    import io
    import zipfile

    if not (root / "manifest.json").is_file():
        raise ReleaseError(f"{root} is not a release (no manifest.json)", hint="give the directory `tqaforge release build` wrote")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                archive.write(path, Path(root.name) / path.relative_to(root))
    return buffer.getvalue()

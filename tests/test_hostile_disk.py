"""A full or read-only disk (issue 23, item 16): every command says what is full or read-only
(the path, its file system, the fix) instead of an ``OSError [Errno 28]`` traceback or "move it
away and restore a backup", and leaves nothing half-written; a re-run after the fix finishes.

Real file systems: a small tmpfs, filled for real and remounted read-only (needs root, as in CI;
skipped with the reason elsewhere), and a read-only bind mount. The real CLI, in process."""

from __future__ import annotations

import errno
import gc
import os
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path
from typing import Iterator

import pytest
from click.testing import Result
from typer.testing import CliRunner

from tqaforge.cli import app
from tqaforge.errors import disk_error
from tqaforge.files import atomic_write_text

pytestmark = pytest.mark.hostile

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample" / "tablebench_sample.jsonl"
runner = CliRunner(env={"COLUMNS": "300"})


def _mount(*args: str, first: bool = False) -> None:
    """``mount ARGS``; the ``first`` mount of a test skips it where mounting is not allowed,
    any later one (a remount) must work."""
    gc.collect()  # the in-process commands' engines close their database files (a remount waits for them)
    done = subprocess.run(["mount", *args], capture_output=True, text=True)
    if done.returncode and first:
        pytest.skip(f"mount {' '.join(args)} is not allowed here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs of our own (a workspace with the sample fits, with room to fill)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs the hostile suite as root)")
    mnt = tmp_path / "fs"
    mnt.mkdir()
    _mount("-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt), first=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.fixture
def ws(small_fs: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A workspace on the small file system with TableBench's sample imported (36 accepted items)."""
    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    root = small_fs / "ws"
    assert runner.invoke(app, ["init", str(root)]).exit_code == 0
    imported = _run(root, "tables", "import", str(SAMPLE))
    assert imported.exit_code == 0, imported.output
    return root


def _run(ws: Path, *args: str) -> Result:
    return runner.invoke(app, ["-w", str(ws), *args])


def _fill(fs: Path, leave: int) -> Path:
    """Fill ``fs`` until ``leave`` bytes are free (a real file of zeros)."""
    st = os.statvfs(fs)
    filler = fs / "filler"
    with open(filler, "wb") as fh:
        fh.write(b"\0" * max(st.f_bavail * st.f_frsize - leave, 0))
    return filler


def _clean_failure(result: Result) -> str:
    """The output of a command that failed the way every command must: rc 1, a message, no traceback."""
    assert result.exit_code == 1, result.output
    assert not isinstance(result.exception, OSError) and type(result.exception) is SystemExit, repr(result.exception)
    assert "Traceback" not in result.output and "Errno" not in result.output, result.output
    assert "restore a backup" not in result.output and "damaged" not in result.output, result.output
    return " ".join(result.output.split())  # unwrapped


def _leftovers(fs: Path) -> list[str]:
    """Temporary files and folders of ours anywhere on ``fs`` (a half-written file or release)."""
    return sorted(str(p.relative_to(fs)) for p in fs.rglob("*") if p.name.endswith(".partial") or p.name.startswith(".ws-"))


def _count(ws: Path, table: str) -> int:
    with closing(sqlite3.connect(ws / "tqaforge.db")) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        return db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


# --- a full disk ------------------------------------------------------------------------------


def test_variants_build_on_a_full_disk_says_which_file_system_and_leaves_no_half_file(ws: Path, small_fs: Path) -> None:
    """Case: `variants build` ended in an OSError [Errno 28] traceback."""
    filler = _fill(small_fs, 200_000)
    text = _clean_failure(_run(ws, "variants", "build"))
    prompts = ws / "prompts" / "variants.jsonl"
    assert f"no space left on the file system of {prompts} (mounted at {small_fs}" in text, text
    assert "df -h" in text
    assert _leftovers(small_fs) == [] and not (ws / "prompts" / "variants.jsonl").exists()
    # The fix the message names works: the same command then finishes.
    filler.unlink()
    again = _run(ws, "variants", "build")
    assert again.exit_code == 0, again.output
    assert (ws / "prompts" / "variants.jsonl").stat().st_size > 0 and _count(ws, "variants") > 0


def test_the_database_filling_up_names_the_database_file(ws: Path, small_fs: Path) -> None:
    """SQLite's "database or disk is full" (variants stored, no prompts file)."""
    filler = _fill(small_fs, 200_000)
    text = _clean_failure(_run(ws, "variants", "build", "--no-prompts"))
    assert f"no space left on the file system of {ws / 'tqaforge.db'} (mounted at {small_fs}" in text, text
    stored = _count(ws, "variants")  # what committed is whole; the failed batch rolled back
    filler.unlink()
    again = _run(ws, "variants", "build", "--no-prompts")
    assert again.exit_code == 0, again.output
    assert _count(ws, "variants") > stored


def test_opening_a_workspace_on_a_full_disk_is_not_called_damaged(ws: Path, small_fs: Path) -> None:
    """A full disk at open was "disk I/O error ... move it away and restore a backup"."""
    for extra in ("tqaforge.db-wal", "tqaforge.db-shm"):
        (ws / extra).unlink(missing_ok=True)  # closed cleanly: SQLite must make them again
    _fill(small_fs, 0)
    text = _clean_failure(_run(ws, "tables", "list"))
    assert f"no space left on the file system of {ws / 'tqaforge.db'}" in text, text


def test_release_build_on_a_full_disk_names_the_release_and_leaves_nothing(ws: Path, small_fs: Path) -> None:
    """Case: `release build` ended in an OSError [Errno 28] traceback."""
    args = ("release", "build", "--version", "1.0.0", "--accept-low-agreement", "test")
    filler = _fill(small_fs, 64_000)
    text = _clean_failure(_run(ws, *args))
    assert f"no space left on the file system of {ws / 'releases' / 'ws-1.0.0'}" in text, text
    assert _leftovers(small_fs) == [] and not (ws / "releases" / "ws-1.0.0").exists()
    filler.unlink()
    built = _run(ws, *args)
    assert built.exit_code == 0, built.output
    checked = runner.invoke(app, ["release", "verify", str(ws / "releases" / "ws-1.0.0")])
    assert checked.exit_code == 0 and "match the manifest" in checked.output, checked.output


def test_an_import_on_a_full_disk_stops_and_names_the_database(ws: Path, small_fs: Path, tmp_path: Path) -> None:
    """A full disk is not one file's fault: the import stops with the reason, not a failure per file."""
    data = tmp_path / "data"
    data.mkdir()
    for k in range(40):
        (data / f"t{k:02}.csv").write_text("a,b\n" + "".join(f"{k}-{i},{'x' * 200}\n" for i in range(200)))
    before = _count(ws, "tables")
    filler = _fill(small_fs, 150_000)
    text = _clean_failure(_run(ws, "tables", "import", str(data)))
    assert f"no space left on the file system of {ws / 'tqaforge.db'}" in text and "failed paths" not in text, text
    filler.unlink()
    again = _run(ws, "tables", "import", str(data))
    assert again.exit_code == 0 and "failed paths: 0 of 40" in again.output, again.output
    assert _count(ws, "tables") == before + 40


def test_every_atomic_write_names_its_target_on_a_full_disk(small_fs: Path) -> None:
    """Same class (reports, the seed corpus, scores.json, the config): the write error names
    the file, not the temporary file it removed, and leaves the old file as it was."""
    target = small_fs / "report.md"
    target.write_text("old\n")
    _fill(small_fs, 0)
    with pytest.raises(OSError) as info:
        atomic_write_text(target, "x" * 100_000)
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(target)
    assert target.read_text() == "old\n" and _leftovers(small_fs) == []
    assert f"no space left on the file system of {target}" in str(disk_error(info.value))


# --- a read-only workspace ------------------------------------------------------------------


def test_a_read_only_workspace_is_called_read_only_not_damaged(ws: Path, small_fs: Path) -> None:
    """Case: a read-only workspace was diagnosed as a damaged database ("move it away and restore a backup")."""
    _mount("-o", "remount,ro", str(small_fs))
    for args in (("variants", "build"), ("variants", "build", "--no-prompts"), ("release", "build", "--version", "1.0.0")):
        text = _clean_failure(_run(ws, *args))
        assert f"is on a read-only file system (mounted at {small_fs})" in text, (args, text)
        assert f"remount {small_fs} read-write" in text
    _mount("-o", "remount,rw", str(small_fs))
    assert _run(ws, "variants", "build").exit_code == 0


def test_a_read_only_workspace_without_its_wal_files_is_read_only_too(ws: Path, small_fs: Path) -> None:
    """SQLite cannot even open a WAL database there ("unable to open database file")."""
    with closing(sqlite3.connect(ws / "tqaforge.db")) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for extra in ("tqaforge.db-wal", "tqaforge.db-shm"):
        (ws / extra).unlink(missing_ok=True)
    _mount("-o", "remount,ro", str(small_fs))
    text = _clean_failure(_run(ws, "tables", "list"))
    assert f"{ws / 'tqaforge.db'} is on a read-only file system" in text, text


def test_a_release_into_a_read_only_bind_mount_names_it(ws: Path, small_fs: Path, tmp_path: Path) -> None:
    """An output folder elsewhere (a read-only bind mount) while the workspace is writable."""
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    _mount("--bind", "-o", "ro", str(shelf), str(shelf), first=True)
    try:
        out = shelf / "r1"
        text = _clean_failure(_run(ws, "release", "build", "--version", "1.0.0", "--accept-low-agreement", "t", "--out", str(out)))
        assert f"{out} is on a read-only file system (mounted at {shelf})" in text, text
    finally:
        subprocess.run(["umount", "-l", str(shelf)], check=False)


def test_a_damaged_database_is_still_called_damaged(ws: Path) -> None:
    """Control: the diagnosis asks the file system; a database that is really damaged keeps
    its own message and the backup hint."""
    db = ws / "tqaforge.db"
    for extra in ("tqaforge.db-wal", "tqaforge.db-shm"):
        (ws / extra).unlink(missing_ok=True)
    db.write_bytes(db.read_bytes()[:100] + b"\xff" * 8000)
    result = _run(ws, "tables", "list")
    assert result.exit_code == 1 and "restore a backup" in " ".join(result.output.split()), result.output
    assert "read-only" not in result.output and "no space" not in result.output


def test_only_disk_errors_become_disk_errors() -> None:
    """Control for the one conversion: other OSErrors stay what they are (a traceback is a bug report)."""
    for number, words in ((errno.ENOSPC, "no space left"), (errno.EDQUOT, "quota"), (errno.EROFS, "read-only"),
                          (errno.EACCES, "permission denied")):
        problem = disk_error(OSError(number, os.strerror(number), "/somewhere/file"))
        assert problem is not None and words in str(problem) and "/somewhere/file" in str(problem) and problem.hint
    for number in (errno.ENOENT, errno.EIO, errno.EISDIR):
        assert disk_error(OSError(number, os.strerror(number), "/x")) is None
    # A permission error of no file (a signal to another user's process, a namespace) is not a disk's.
    assert disk_error(PermissionError(errno.EPERM, os.strerror(errno.EPERM))) is None


def test_the_app_shows_a_full_disk_as_a_message_not_a_traceback(small_fs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The app's pages run steps through the same conversion as the CLI (``attempt``)."""
    from streamlit.testing.v1 import AppTest

    def page() -> None:
        import os
        from pathlib import Path

        from tqaforge.app.common import attempt
        from tqaforge.files import atomic_write_text

        attempt(lambda: atomic_write_text(Path(os.environ["TQAFORGE_TEST_TARGET"]), "x" * 100_000))

    target = small_fs / "seeds.toml"
    monkeypatch.setenv("TQAFORGE_TEST_TARGET", str(target))
    _fill(small_fs, 0)
    at = AppTest.from_function(page).run(timeout=60)
    assert not at.exception, at.exception
    shown = " ".join(e.value for e in at.error).replace("\\", "")  # shown as text: Markdown escapes
    assert "no space left on the file system of" in shown and "seeds.toml" in shown, shown


def test_a_write_error_that_names_no_file_is_placed_on_the_full_workspace(small_fs: Path, tmp_path: Path) -> None:
    """A failed ``write``/``close`` names no file: it is put on the workspace's file system when
    that one is full, and on no file system (not a wrong one) when it is not."""
    from tqaforge.store import disk_failure

    _fill(small_fs, 0)
    with pytest.raises(OSError) as info:
        with open(small_fs / "upload.csv", "wb") as fh:
            fh.write(b"x" * 100_000)
    assert info.value.errno == errno.ENOSPC and info.value.filename is None
    on_full = disk_failure(info.value, small_fs)
    assert on_full is not None and str(on_full).startswith(f"no space left on the file system of {small_fs} ")
    elsewhere = disk_failure(info.value, tmp_path)  # roomy: not the one that is full
    assert elsewhere is not None and str(elsewhere).startswith("no space left on the device being written")
    assert disk_failure(ValueError("no disk here"), small_fs) is None

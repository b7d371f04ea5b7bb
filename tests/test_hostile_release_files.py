"""A release is a downloaded directory: its manifest and files are hostile input (issue 23, item 6
and the release/evaluate part of items 7 and 15).

Every case runs the real CLI (`release verify`, `release diff`, `evaluate`) and asserts a non-zero
exit, a message that names the entry, and no traceback; each has a control that shows the test
could see the failure (the intact release passes; the same bytes inside the release pass).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import freeze_sample_release
from typer.testing import CliRunner, Result

from tqaforge.cli import app
from tqaforge.errors import ReleaseError
from tqaforge.release.verify import release_archive, release_file, verify_release

pytestmark = pytest.mark.hostile

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample" / "tablebench_sample.jsonl"
runner = CliRunner()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """TableBench's sample frozen once per module (base subset); tests work on copies of it."""
    return freeze_sample_release(tmp_path_factory.mktemp("built"))


@pytest.fixture
def release(built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A writable copy of the built release (``evaluate`` writes its outputs under tmp_path)."""
    monkeypatch.chdir(tmp_path)
    copy = tmp_path / "rel" / "release"
    shutil.copytree(built, copy)
    for path in [copy, *copy.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return copy


def manifest(root: Path) -> dict[str, Any]:
    return json.loads((root / "manifest.json").read_text())


def write_manifest(root: Path, value: dict[str, Any]) -> None:
    (root / "manifest.json").write_text(json.dumps(value, indent=2))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def base_rows(root: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (root / "data" / "base.jsonl").read_text().splitlines()]


def predictions(path: Path, root: Path, text: str = "Final Answer: 1") -> Path:
    rows = [r for r in base_rows(root) if r["qtype"] != "Visualization"][:3]
    path.write_text("".join(json.dumps({"id": r["id"], "model": "m", "prediction": text}) + "\n" for r in rows))
    return path


def assert_refused(result: Result, *needles: str) -> None:
    """A non-zero exit whose message holds every needle, and no traceback."""
    text = " ".join(result.output.replace("\n", "").split())  # Rich wraps long lines, even mid-word
    assert result.exit_code not in (0, None), result.output
    assert "Traceback" not in result.output and not isinstance(result.exception, (RecursionError, AssertionError)), result.output
    if result.exception is not None:
        assert isinstance(result.exception, SystemExit), repr(result.exception)
    for needle in needles:
        assert needle in text, f"{needle!r} not in {result.output!r}"


def verify(root: Path) -> Result:
    return runner.invoke(app, ["release", "verify", str(root)])


def diff(a: Path, b: Path) -> Result:
    return runner.invoke(app, ["release", "diff", str(a), str(b)])


def evaluate(root: Path, preds: Path, *extra: str) -> Result:
    return runner.invoke(app, ["evaluate", "--release", str(root), "--predictions", str(preds), "--no-plots", *extra])


# --- 6. path traversal in the manifest ---------------------------------------------------------


def _outside_entries(root: Path) -> list[tuple[str, Path]]:
    """Manifest entries that name a file outside the release: relative with .., and absolute."""
    secret = root.parent.parent / "secret.txt"
    secret.write_text("not part of any release\n")
    entries = [(os.path.relpath(secret, root), secret), (str(secret), secret)]
    if Path("/etc/hostname").is_file():  # the issue's own entries
        hostname = Path("/etc/hostname")
        entries += [("../" * len(root.resolve().parts) + "etc/hostname", hostname), (str(hostname), hostname)]
    return entries


def test_the_intact_release_verifies_diffs_and_scores(release: Path, tmp_path: Path) -> None:
    """Control for every case below: the copy the cases alter passes each command."""
    ok = verify(release)
    assert ok.exit_code == 0 and "files match the manifest" in ok.output, ok.output
    assert diff(release, release).exit_code == 0
    scored = evaluate(release, predictions(tmp_path / "p.jsonl", release))
    assert scored.exit_code == 0, scored.output


@pytest.mark.parametrize("which", [0, 1, 2, 3])
def test_a_manifest_entry_outside_the_release_is_an_error_naming_it(release: Path, tmp_path: Path, which: int) -> None:
    """Case: `../../../../etc/hostname` and `/etc/hostname` with their real sha256 were read and
    reported as release files ("all 17 files match"), and `evaluate` scored the release."""
    entries = _outside_entries(release)
    if which >= len(entries):
        pytest.skip("/etc/hostname is absent here")
    entry, target = entries[which]
    value = manifest(release)
    value["files"][entry] = sha256(target)  # the real hash: only the location gives it away
    write_manifest(release, value)
    assert_refused(verify(release), entry, "outside the release")
    assert_refused(evaluate(release, predictions(tmp_path / "p.jsonl", release)), entry, "outside the release")
    assert_refused(diff(release, release), entry, "outside the release")


def test_control_the_same_bytes_inside_the_release_verify(release: Path) -> None:
    """Control: the outside file's bytes listed inside the release are simply a release file, so
    the refusal above is about where the entry points, not about what it holds."""
    entry, target = _outside_entries(release)[0]
    shutil.copy(target, release / "extra.txt")
    value = manifest(release)
    value["files"]["extra.txt"] = sha256(target)
    write_manifest(release, value)
    result = verify(release)
    assert result.exit_code == 0 and "all" in result.output, result.output


@pytest.mark.parametrize("kind", ["file", "directory", "manifest"])
def test_a_symlink_leaving_the_release_is_an_error_naming_the_entry(release: Path, tmp_path: Path, kind: str) -> None:
    """Case: a listed file (or the directory above it, or manifest.json itself) replaced by a
    symbolic link to an identical copy outside the release passed as intact."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    if kind == "file":
        entry = "data/base.jsonl"
        shutil.copy(release / entry, outside / "base.jsonl")
        (release / entry).unlink()
        (release / entry).symlink_to(outside / "base.jsonl")
    elif kind == "directory":
        entry = "data/"
        shutil.copytree(release / "data", outside / "data")
        shutil.rmtree(release / "data")
        (release / "data").symlink_to(outside / "data", target_is_directory=True)
    else:
        entry = "manifest.json"
        shutil.copy(release / entry, outside / entry)
        (release / entry).unlink()
        (release / entry).symlink_to(outside / entry)
    assert_refused(verify(release), entry.rstrip("/"), "symbolic link")
    assert_refused(evaluate(release, predictions(tmp_path / "p.jsonl", release)), entry.rstrip("/"), "symbolic link")
    assert_refused(diff(release, release), entry.rstrip("/"), "symbolic link")


def test_a_symlink_that_stays_inside_the_release_is_followed(release: Path) -> None:
    """Control: a link inside the release to a file of the release is not a way out."""
    os.replace(release / "data" / "base.jsonl", release / "data" / "real.jsonl")
    (release / "data" / "base.jsonl").symlink_to("real.jsonl")
    result = verify(release)
    assert "symbolic link" not in result.output and "added:   data/real.jsonl" in result.output, result.output
    assert release_file(release, "data/base.jsonl") == release / "data" / "base.jsonl"


@pytest.mark.parametrize("name", ["../../secret", "/tmp/x", "a/b", ""])
def test_a_subset_name_that_is_a_path_is_an_error(release: Path, tmp_path: Path, name: str) -> None:
    """Case (class of 6): `counts` names the subsets, and `evaluate` and `diff` read
    `data/SUBSET.parquet` / `.jsonl` from those names: a name with a path in it left the release."""
    value = manifest(release)
    value["counts"][name] = 1
    write_manifest(release, value)
    shown = repr(name)
    assert_refused(diff(release, release), shown, "not a subset name")
    assert_refused(evaluate(release, predictions(tmp_path / "p.jsonl", release)), shown, "not a subset name")
    assert_refused(verify(release), shown, "not a subset name")


def test_a_subset_whose_file_the_manifest_does_not_list_is_not_read(release: Path, tmp_path: Path) -> None:
    """Case (class of 6): a subset counted but its file unlisted would be read unverified."""
    value = manifest(release)
    value["counts"]["structure"] = 1  # no file: verify has nothing to compare, evaluate would open it
    write_manifest(release, value)
    assert_refused(evaluate(release, predictions(tmp_path / "p.jsonl", release)), "lists no data/structure.parquet")


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_a_special_file_in_the_release_is_refused_at_once(release: Path, tmp_path: Path, kind: str) -> None:
    """Case (class of 6 and 7): a FIFO at a listed path hung `release verify` (it read the FIFO
    to hash it); a link to /dev/zero read until memory ran out. Run in a subprocess with a
    timeout, so that a hang fails the test instead of stopping the suite."""
    preds = predictions(tmp_path / "p.jsonl", release)
    target = release / "data" / "base.jsonl"
    target.unlink()
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "device":
        os.symlink(os.path.relpath("/dev/zero", target.parent), target)  # resolves outside: never opened
    else:
        target.mkdir()
    expected = {"fifo": "is a FIFO", "device": "outside the release", "directory": "is a directory"}[kind]
    for args in (["release", "verify", str(release)], ["evaluate", "--release", str(release), "--predictions", str(preds), "--no-plots"]):
        done = subprocess.run([sys.executable, "-m", "tqaforge", *args], capture_output=True, text=True, timeout=120, cwd=tmp_path)
        message = " ".join(done.stderr.split())
        assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
        assert "data/base.jsonl" in message and expected in message, message


def test_the_archive_holds_the_release_and_nothing_a_link_points_at(release: Path, tmp_path: Path) -> None:
    """Case (class of 6): the download zip followed links: a stray link to a secret outside the
    release put the secret into the zip, and a listed file linked outside was zipped too."""
    import io
    import zipfile

    secret = tmp_path / "secret.txt"
    secret.write_text("private\n")
    (release / "stray.txt").symlink_to(secret)  # unlisted: not part of the release
    with zipfile.ZipFile(io.BytesIO(release_archive(release))) as archive:
        names = archive.namelist()
        assert "release/stray.txt" not in names and b"private" not in b"".join(archive.read(n) for n in names)
        assert "release/manifest.json" in names and "release/data/base.jsonl" in names  # control: the release is there
    (release / "README.md").unlink()
    (release / "README.md").symlink_to(secret)
    with pytest.raises(ReleaseError, match="'README.md' is a symbolic link"):
        release_archive(release)


def test_entries_with_control_characters_are_shown_escaped(release: Path) -> None:
    """Case (class of 15): a manifest entry is shown in the error; its escape sequences are not."""
    value = manifest(release)
    value["files"]["/etc/\x1b[2Jhostname\u202e"] = "0" * 64
    write_manifest(release, value)
    result = verify(release)
    assert_refused(result, "\\x1b[2Jhostname\\u202e")
    assert "\x1b" not in result.output and "\u202e" not in result.output


def test_verify_report_of_an_intact_copy_matches(release: Path) -> None:
    """The library call the app uses gives the same verdict as the CLI."""
    assert verify_release(release).ok
    os.chmod(release / "data" / "base.jsonl", stat.S_IRUSR | stat.S_IWUSR)
    (release / "data" / "base.jsonl").write_text("{}\n")
    assert verify_release(release).changed == ["data/base.jsonl"]


# --- a base subset read from its JSON Lines file, rewritten together with its manifest ----------


def _rewrite_base(root: Path, lines: list[bytes]) -> None:
    """base.jsonl replaced, its manifest hash updated: the release verifies, its content is hostile."""
    target = root / "data" / "base.jsonl"
    target.write_bytes(b"".join(line + b"\n" for line in lines))
    value = manifest(root)
    value["files"]["data/base.jsonl"] = sha256(target)
    write_manifest(root, value)


def _first_base_line(root: Path, change: Any) -> bytes:
    row = base_rows(root)[0]
    change(row)
    return json.dumps(row).encode()


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        (lambda root: b"[1, 2]", "line 1 is not a JSON object"),
        (lambda root: b"42", "line 1 is not a JSON object"),
        (lambda root: b'{"id": "x", "answer": ', "cannot read"),
        (lambda root: b"\xff\xfe{}", "cannot read"),
        (lambda root: b'{"id": "x", "q": ' + b"[" * 5000 + b"]" * 5000 + b"}", "nested too deeply"),
        (lambda root: _first_base_line(root, lambda r: r.update(answer=7)), "answer is not a list of strings"),
        (lambda root: _first_base_line(root, lambda r: r.update(answer=["a", None])), "answer is not a list of strings"),
        (lambda root: _first_base_line(root, lambda r: r.update(id={"nested": 1})), "id is not a string"),
        (lambda root: _first_base_line(root, lambda r: r.update(qsubtype=3.5)), "qsubtype is not a string"),
    ],
    ids=["list", "number", "truncated", "not-utf8", "deep", "answer-number", "answer-null-item", "id-object", "qsubtype-float"],
)
def test_a_hostile_base_json_lines_file_that_verifies_is_refused_with_a_reason(
    release: Path, tmp_path: Path, line: Any, needle: str
) -> None:
    """Case (class of 6): evaluate reads a small subset from its JSON Lines file; one rewritten with
    its manifest passes verification, so what each line holds is checked as the Parquet schema
    would have checked it: a clear refusal naming the file, never a traceback."""
    preds = predictions(tmp_path / "p.jsonl", release)
    rest = (release / "data" / "base.jsonl").read_bytes().splitlines()[1:]
    _rewrite_base(release, [line(release), *rest])
    assert_refused(evaluate(release, preds), "base.jsonl", needle)


def test_a_base_row_whose_table_is_missing_is_refused_when_its_chart_runs(release: Path, tmp_path: Path) -> None:
    """Case (class of 6): a chart's table is read from its row's line when its code runs; a row
    without a table (rewritten with its manifest) is refused by name, not a KeyError."""
    rows = base_rows(release)
    chart = next((i for i, r in enumerate(rows) if r.get("chart_type")), None)
    if chart is None:
        pytest.fail("the sample release has a chart item (Visualization): the test needs one")
    del rows[chart]["table"]
    _rewrite_base(release, [json.dumps(r).encode() for r in rows])
    code = "import matplotlib.pyplot as plt\nplt.bar(['a'], [1])\nplt.show()"
    preds = tmp_path / "chart.jsonl"
    preds.write_text(json.dumps({"id": rows[chart]["id"], "model": "m", "prediction": f"```python\n{code}\n```"}) + "\n")
    assert_refused(evaluate(release, preds), "base.jsonl", "holds no table")


@pytest.mark.parametrize(
    ("column", "values", "needle"),
    [
        ("answer", lambda rows: [7 for _ in rows], "column answer holds int64, not lists of text"),
        ("answer", lambda rows: [[1] for _ in rows], "column answer holds list<element: int64>, not lists of text"),
        ("qsubtype", lambda rows: [1.5 for _ in rows], "column qsubtype holds double, not text"),
        ("id", lambda rows: [[r["id"]] for r in rows], "column id holds list<element: string>, not text"),
    ],
    ids=["answer-int", "answer-list-of-int", "qsubtype-float", "id-list"],
)
def test_a_hostile_base_parquet_file_that_verifies_is_refused_with_a_reason(
    release: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, column: str, values: Any, needle: str
) -> None:
    """Case (class of 6): a subset read from Parquet (a large one; here every subset, the JSON Lines
    bound set to 0) whose scoring column was rewritten with another type, its manifest hash updated,
    is refused by its schema, not a TypeError deep in the scoring."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tqaforge.evaluate import predictions as predictions_module

    monkeypatch.setattr(predictions_module, "JSONL_READ_BYTES", 0)
    preds = predictions(tmp_path / "p.jsonl", release)
    target = release / "data" / "base.parquet"
    table = pq.read_table(target)
    rows = table.to_pylist()
    table = table.set_column(table.schema.get_field_index(column), column, pa.array(values(rows)))
    pq.write_table(table, target)
    value = manifest(release)
    value["files"]["data/base.parquet"] = sha256(target)
    write_manifest(release, value)
    assert_refused(evaluate(release, preds), "base.parquet", needle)


def _has_statistics(db: Path) -> bool:
    import sqlite3

    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'sqlite_stat1'").fetchone()[0] == 1


def test_a_read_only_database_gets_no_planner_statistics_and_no_error(sqlite_workspace: Any) -> None:
    """A release build first gives SQLite's planner statistics (store.refresh_planner_statistics);
    they only make queries faster, so a database SQLite cannot write is left as it was, without an
    error, and the same database writable gets them (the control)."""
    import sqlite3

    from tqaforge.store import Workspace, make_engine, refresh_planner_statistics

    db = sqlite_workspace.root / "tqaforge.db"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    read_only = Workspace(sqlite_workspace.root, sqlite_workspace.config, make_engine(f"sqlite:///file:{db}?mode=ro&uri=true"))
    try:
        assert refresh_planner_statistics(read_only) is False
    finally:
        read_only.engine.dispose()
    assert not _has_statistics(db)
    assert refresh_planner_statistics(sqlite_workspace) is True
    assert _has_statistics(db)


# A build that stops in the middle of its first subset, as a SIGKILL or the OOM killer stops one:
# argv[1] the workspace, argv[2] a file it creates when its temporary folder holds rows.
KILLED_BUILD = """
import signal, sys
from pathlib import Path
from tqaforge.release import stream
from tqaforge.release.build import ReleaseOptions, build_release
from tqaforge.store import open_workspace

def add(self, row):
    Path(sys.argv[2]).write_text("writing")
    signal.pause()  # until the test kills this process

stream.SubsetWriter.add = add
build_release(open_workspace(Path(sys.argv[1])), ReleaseOptions(version="1.0.0"))
"""


# Another build, running: it holds its folder's lock until the test kills it (argv[1] the
# releases folder); it prints the folder's path.
LIVE_BUILD = """
import signal, sys
from pathlib import Path
from tqaforge.release.workdir import BuildFolder
folder = BuildFolder.claim(Path(sys.argv[1]), "test-2.0.0")
(folder.root / "data").mkdir()
print(folder.path, flush=True)
signal.pause()
"""


def test_a_killed_build_leaves_a_folder_the_next_build_removes_and_a_live_one_is_kept(
    sqlite_workspace: Any, tmp_path: Path
) -> None:
    """A build killed with SIGKILL cannot clean up: its temporary folder stays. The next build
    removes it (its lock is free) and says so; a folder a live build holds (the control: same
    shape, lock held by another process) and a hidden folder that is not a build's (no marker)
    are kept; once that build is killed too, the next build removes its folder."""
    import signal

    from conftest import wait_for

    from tqaforge.ingest import import_paths
    from tqaforge.release.workdir import MARKER

    assert not import_paths(sqlite_workspace, [SAMPLE]).failed
    releases = sqlite_workspace.paths.releases
    ready = tmp_path / "ready"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "TQAFORGE_DATABASE_URL": ""}
    child = subprocess.Popen([sys.executable, "-c", KILLED_BUILD, str(sqlite_workspace.root), str(ready)], env=env)
    try:
        wait_for(lambda: ready.exists() or child.poll() is not None, 120, "the build to start writing")
        assert child.poll() is None, "the build ended before it was killed"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    left = [p for p in releases.iterdir() if p.name.startswith(".test-1.0.0.")]
    assert len(left) == 1 and (left[0] / MARKER).exists() and (left[0] / "release").exists()  # what a killed build leaves
    live = subprocess.Popen([sys.executable, "-c", LIVE_BUILD, str(releases)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert live.stdout is not None
        live_path = Path(live.stdout.readline().strip())  # blocks until the other build holds its lock
        assert live_path.name.startswith(".test-2.0.0.")
        not_ours = releases / ".notes.abcdefgh"  # the name's shape, but no marker
        not_ours.mkdir()
        result = runner.invoke(app, ["-w", str(sqlite_workspace.root), "release", "build", "--version", "1.0.0"])
        assert result.exit_code == 0, result.output
        assert not left[0].exists()
        assert "removed 1 folder(s) left by killed builds" in result.output and left[0].name in result.output
        assert (live_path / "release" / "data").exists() and not_ours.exists()
        built = releases / "test-1.0.0"
        assert (built / "manifest.json").exists() and not (built / MARKER).exists()
        assert [p.name for p in releases.iterdir() if p.name.startswith(".test-1.0.0.")] == []
    finally:
        live.kill()
        live.wait(30)
    # The other build killed: the next build (of the same version: identical, nothing written) removes its folder.
    result = runner.invoke(app, ["-w", str(sqlite_workspace.root), "release", "build", "--version", "1.0.0"])
    assert result.exit_code == 0, result.output
    assert "already built, identical" in result.output and live_path.name in result.output
    assert not live_path.exists() and not_ours.exists()
    assert sorted(p.name for p in releases.iterdir()) == [".notes.abcdefgh", "test-1.0.0"]


# Rows given to the writer as their lines (stream.EncodedRow, the configurations subset) must
# give the bytes rows given as dicts give: the same JSON Lines text from RowTemplate, the same
# Arrow schema from configuration_schema, the same Parquet file from Arrow's JSON reader.
HOSTILE_TEXTS = ["", "plain", 'quo"te', "back\\slash", "nul\x00byte", "\x000\x00", '"\\u0000', "line\nbreak\r\n",
                 "\u2028\u2029", "tab\tbell\x07", "\x7fdel", "é 中文 🙂", "{\"id\": 1}", "%s %(x)s {0}", "-0", "1e309"]


def _configuration_rows(seed: int, n: int) -> list[dict[str, Any]]:
    """Configuration rows (their columns in their order) with hostile text everywhere, and some
    with empty answers, empty headers, no rows or rows without cells."""
    import random

    from tqaforge.release.contents import CONFIGURATION_COLUMNS

    rng = random.Random(seed)

    def text() -> str:
        return "".join(rng.choice(HOSTILE_TEXTS) for _ in range(rng.randrange(0, 4)))

    rows = []
    for _ in range(n):
        width = rng.choice([0, 1, 3])
        table = {"header": [text() for _ in range(width)], "rows": [[text() for _ in range(width)] for _ in range(rng.choice([0, 1, 4]))]}
        values = {"id": f"{rng.getrandbits(64):016x}", "seed": rng.choice([-1, 0, 7]), "answer": [text() for _ in range(rng.choice([0, 1, 2]))],
                  "table": table, "qsubtype": rng.choice(["", "Counting"])}
        rows.append({name: values.get(name, text()) for name in CONFIGURATION_COLUMNS})
    return sorted(rows, key=lambda row: row["id"])


def test_a_row_template_gives_the_canonical_json_of_hostile_rows() -> None:
    from tqaforge.ids import canonical_json
    from tqaforge.release.stream import RowTemplate

    varying = ("id", "serialization", "config", "prompt")
    for row in _configuration_rows(1, 300):
        fixed = {k: v for k, v in row.items() if k not in varying}
        template = RowTemplate(fixed, varying)
        assert template(*(row.get(k, "") for k in varying)) == canonical_json({**fixed, **{k: row.get(k, "") for k in varying}})
    # A fixed value holding a placeholder's own encoding, a value that is no string, a name in
    # both: the template falls back to encoding the whole row, and the text is still canonical.
    fixed = {"question": "\x000\x00", "answer": []}
    assert RowTemplate(fixed, ("id",))("x") == canonical_json({**fixed, "id": "x"})
    assert RowTemplate({"a": 1}, ("b",))(2) == canonical_json({"a": 1, "b": 2})  # type: ignore[arg-type]
    assert RowTemplate({"a": 1}, ("a",))("y") == canonical_json({"a": "y"})


@pytest.mark.parametrize("n, group_bytes, empty", [(1, None, 0), (40, None, 0), (40, None, 40), (40, None, 39), (400, 3_000, 100), (400, 200, 100)])
@pytest.mark.parametrize("in_python", [False, True])
def test_rows_given_as_lines_write_the_bytes_of_rows_given_as_dicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n: int, group_bytes: int | None, empty: int, in_python: bool
) -> None:
    """One batch and many (spilled, schemas unified, batches cast), with ``empty`` rows whose
    lists are all empty (a whole batch of them has columns of Arrow's null type); batches parsed
    by Arrow's JSON reader, and (``in_python``) as a batch too large for it is."""
    from tqaforge.ids import canonical_json
    from tqaforge.release import stream

    if in_python:
        monkeypatch.setattr(stream, "READER_MAX_BYTES", 0)
    from tqaforge.release.contents import _configuration_shape, configuration_schema
    from tqaforge.release.stream import EncodedRow, SubsetWriter

    rows = _configuration_rows(n + (group_bytes or 0) + empty, n)
    for row in rows[:empty]:  # a run of rows empty in every list: batches of their own at small sizes
        row["answer"], row["table"] = [], {"header": [], "rows": []}
    hashes = []
    for mode in ("dicts", "lines"):
        root = tmp_path / mode
        with SubsetWriter(root, "configurations", root / ".spill", group_bytes, schema=configuration_schema) as writer:
            for row in rows:
                if mode == "dicts":
                    writer.add(row)
                else:
                    line = (canonical_json(row) + "\n").encode("utf-8")
                    writer.add_encoded(EncodedRow(line, row["qsubtype"], _configuration_shape(row["answer"], row["table"])))
        hashes.append((writer.hashes, writer.count, writer.by_subtype))
    assert hashes[0] == hashes[1]
    if group_bytes == 200:  # the control: these batches differ in their schemas, which the file unifies
        import pyarrow.parquet as pq

        assert pq.ParquetFile(tmp_path / "lines" / "data" / "configurations.parquet").metadata.num_row_groups > 10


def test_a_writer_takes_rows_one_way_only(tmp_path: Path) -> None:
    from tqaforge.release.stream import EncodedRow, SubsetWriter

    with pytest.raises(ValueError, match="takes rows as dicts"):
        SubsetWriter(tmp_path, "base", tmp_path / ".spill").add_encoded(EncodedRow(b"{}\n", ""))


# A build that stops just before it moves its release into place, until the test says go:
# argv[1] the workspace, argv[2] the file it creates when it waits, argv[3] the file it waits for.
RACING_BUILD = """
import os, sys, time
from pathlib import Path
real_replace = os.replace

def replace(source, target):
    if Path(target).name == "test-1.0.0":
        Path(sys.argv[2]).write_text("waiting")
        while not Path(sys.argv[3]).exists():
            time.sleep(0.02)
    return real_replace(source, target)

os.replace = replace
from tqaforge.release.build import ReleaseOptions, build_release
from tqaforge.store import open_workspace
print(build_release(open_workspace(Path(sys.argv[1])), ReleaseOptions(version="1.0.0")).identical_to_existing)
"""


def test_two_builds_of_one_version_at_once_end_with_one_release(sqlite_workspace: Any, tmp_path: Path) -> None:
    """Two commands build the same version at the same time: the one that moves its release into
    place second finds the other's there (the move fails: the folder is not empty) and compares,
    as it would have had it seen it first: identical, so it ends well and says so. Without that
    (the control, checked by hand), it ended with "[Errno 39] Directory not empty"."""
    from conftest import wait_for

    from tqaforge.ingest import import_paths

    assert not import_paths(sqlite_workspace, [SAMPLE]).failed
    waiting, go = tmp_path / "waiting", tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "TQAFORGE_DATABASE_URL": ""}
    child = subprocess.Popen([sys.executable, "-c", RACING_BUILD, str(sqlite_workspace.root), str(waiting), str(go)],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: waiting.exists() or child.poll() is not None, 120, "the first build to reach its move")
        assert child.poll() is None, child.communicate()[1]
        result = runner.invoke(app, ["-w", str(sqlite_workspace.root), "release", "build", "--version", "1.0.0"])
        assert result.exit_code == 0, result.output
        assert "built (read-only)" in result.output
    finally:
        go.write_text("go")
        out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err[-2000:]
    assert out.strip() == "True"  # it found the other's release, identical to its own
    releases = sqlite_workspace.paths.releases
    assert sorted(p.name for p in releases.iterdir()) == ["test-1.0.0"]
    assert runner.invoke(app, ["release", "verify", str(releases / "test-1.0.0")]).exit_code == 0

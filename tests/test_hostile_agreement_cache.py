"""Hostile cases for the agreement report kept on disk (:mod:`tqaforge.annotation.report_cache`,
issue 26 item 6): a damaged file, a file from another workspace or another version of the code,
writers racing each other and labels changing while the report is computed. In every case the
page gets the report of the labels as they are, and nothing in the file is run."""

from __future__ import annotations

import json
import shutil
import sys
import threading
from pathlib import Path

import pytest

from tqaforge.annotation import report_cache
from tqaforge.annotation.report import AgreementReport, Settings, agreement_report
from tqaforge.annotation.report_cache import cache_path, cached_agreement_report, read_cached_report, report_inputs
from tqaforge.labels import record_annotation
from tqaforge.store import Workspace, open_workspace

sys.path.insert(0, str(Path(__file__).parent))
from agreement_study import build_study  # noqa: E402

SETTINGS = Settings(n_boot=20, seed=1)


@pytest.fixture
def study(sqlite_workspace: Workspace) -> Workspace:
    build_study(sqlite_workspace, 30, seed=4)
    return sqlite_workspace


def _figures(report: AgreementReport) -> dict:
    """The report without the time it was made (two computations differ only there)."""
    return {k: v for k, v in json.loads(json.dumps(report.as_dict())).items() if k != "generated_at"}


class Counting:
    """A compute function that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, ws: Workspace, settings: Settings) -> AgreementReport:
        with self.lock:
            self.calls += 1
        return agreement_report(ws, settings=settings)


@pytest.mark.parametrize("damage", [
    b"", b"{", b"\xff\xfe\x00garbage", b"[1, 2, 3]", b"null", b"[" * 100_000 + b"]" * 100_000,
    "truncated", "wrong types", "missing field", "report is a list",
])
def test_a_damaged_cache_file_is_computed_again_and_replaced(study: Workspace, damage: bytes | str) -> None:
    good = cached_agreement_report(study, SETTINGS)
    path = cache_path(study, SETTINGS)
    stored = json.loads(path.read_text())
    if damage == "truncated":
        data = path.read_bytes()[: path.stat().st_size // 2]
    elif damage == "wrong types":
        stored["report"]["kinds"]["question_typing"]["n_items"] = "many"
        data = json.dumps(stored).encode()
    elif damage == "missing field":
        del stored["report"]["kinds"]["relevant_cells"]["overall"]["masi_alpha"]["ci"]
        data = json.dumps(stored).encode()
    elif damage == "report is a list":
        stored["report"] = []
        data = json.dumps(stored).encode()
    else:
        assert isinstance(damage, bytes)
        data = damage
    path.write_bytes(data)
    compute = Counting()
    got = cached_agreement_report(study, SETTINGS, compute=compute)
    assert compute.calls == 1 and _figures(got) == _figures(good)
    # The damaged file was replaced by a whole one: the next visit reads it.
    assert _figures(cached_agreement_report(study, SETTINGS, compute=Counting())) == _figures(good)
    assert read_cached_report(study, SETTINGS, report_inputs(study)) is not None


def test_a_directory_where_the_cache_file_goes_costs_time_not_the_report(study: Workspace) -> None:
    path = cache_path(study, SETTINGS)
    path.mkdir(parents=True)
    compute = Counting()
    assert _figures(cached_agreement_report(study, SETTINGS, compute=compute)) == _figures(agreement_report(study, settings=SETTINGS))
    assert compute.calls == 1 and path.is_dir()


def test_a_cache_file_from_another_workspace_is_not_read(study: Workspace, tmp_path: Path) -> None:
    """A copy of a workspace has the same inputs; a file copied from one to the other is still
    not read (it names the workspace it was computed in)."""
    study.engine.dispose()  # the database file whole on disk (SQLite's write-ahead log folded in)
    shutil.copytree(study.root, tmp_path / "other")
    other = open_workspace(tmp_path / "other")
    assert report_inputs(other) == report_inputs(study)
    cached_agreement_report(study, SETTINGS)
    target = cache_path(other, SETTINGS)
    target.parent.mkdir(parents=True)
    shutil.copy(cache_path(study, SETTINGS), target)
    compute = Counting()
    cached_agreement_report(other, SETTINGS, compute=compute)
    assert compute.calls == 1


def test_a_cache_file_of_another_version_or_format_is_not_read(study: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    cached_agreement_report(study, SETTINGS)
    path = cache_path(study, SETTINGS)
    stored = json.loads(path.read_text())
    for field, value in (("code", "0" * 64), ("format", report_cache.CACHE_FORMAT + 1)):
        path.write_text(json.dumps({**stored, "key": {**stored["key"], field: value}}))
        compute = Counting()
        cached_agreement_report(study, SETTINGS, compute=compute)
        assert compute.calls == 1, field
    # The code of the report changed (another version): the file of the former code is not read.
    monkeypatch.setattr(report_cache, "_code_hash", lambda: "another version")
    compute = Counting()
    cached_agreement_report(study, SETTINGS, compute=compute)
    assert compute.calls == 1


def test_a_file_claiming_other_inputs_is_not_read(study: Workspace) -> None:
    cached_agreement_report(study, SETTINGS)
    path = cache_path(study, SETTINGS)
    stored = json.loads(path.read_text())
    stored["inputs"]["labels"][0] -= 1
    path.write_text(json.dumps(stored))
    compute = Counting()
    cached_agreement_report(study, SETTINGS, compute=compute)
    assert compute.calls == 1


def test_writers_racing_each_other_leave_one_whole_file_and_readers_never_see_half(study: Workspace) -> None:
    expected = _figures(agreement_report(study, settings=SETTINGS))
    path = cache_path(study, SETTINGS)
    inputs = report_inputs(study)
    start = threading.Barrier(7)
    results: list[dict] = []
    seen: list[object] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def write() -> None:
        try:
            start.wait()
            for _ in range(3):
                path.unlink(missing_ok=True)  # each writer computes and writes again
                results.append(_figures(cached_agreement_report(study, SETTINGS)))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def read() -> None:
        try:
            start.wait()
            while not done.is_set():
                found = read_cached_report(study, SETTINGS, inputs)
                seen.append(found if found is None else _figures(found))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    writers = [threading.Thread(target=write) for _ in range(5)]
    readers = [threading.Thread(target=read) for _ in range(2)]
    for t in writers + readers:
        t.start()
    for t in writers:
        t.join()
    done.set()
    for t in readers:
        t.join()
    assert not errors, errors
    assert results and all(r == expected for r in results)
    assert all(found is None or found == expected for found in seen)  # absent or whole, never half
    assert _figures(cached_agreement_report(study, SETTINGS, compute=Counting())) == expected
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no temporary file left behind


def test_a_label_added_while_the_report_is_computed_is_not_hidden_by_the_stored_report(study: Workspace) -> None:
    def compute_then_label(ws: Workspace, settings: Settings) -> AgreementReport:
        report = agreement_report(ws, settings=settings)
        with ws.session() as s:  # someone labels while the report is being computed
            record_annotation(s, kind="question_typing", target_type="question", target_id="q000003",
                              annotator="late", label={"type": "reasoning"}, source="cli")
        return report

    first = cached_agreement_report(study, SETTINGS, compute=compute_then_label)
    assert not cache_path(study, SETTINGS).exists()  # not stored: it is the report of the labels before
    again = cached_agreement_report(study, SETTINGS)
    assert again.kinds["question_typing"].n_annotations == first.kinds["question_typing"].n_annotations + 1

"""One bounded JSON reader for every JSON tqaforge reads (issue 23, item 7, and model names of
item 15): deep nesting, special files, numbers that leave Decimal's range, control characters.

Each numbered case runs the real CLI and asserts a non-zero exit, a clear message (file, line)
and no traceback; the controls show that the inputs really break the unbounded parser and that
the same commands succeed on sound input.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import freeze_sample_release
from typer.testing import CliRunner, Result

from tqaforge.cli import app
from tqaforge.errors import ReaderError
from tqaforge.tables.readers.jsonio import (
    MAX_DEPTH,
    JSONNestingError,
    json_depth,
    loads,
    read_json_file,
    read_json_lines,
    read_json_lines_at,
)

pytestmark = pytest.mark.hostile

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample" / "tablebench_sample.jsonl"
DEEP_MANIFEST = 200_000
DEEP_LINE = 100_000
runner = CliRunner()


def deep(n: int) -> str:
    return "[" * n + "]" * n


# --- the reader itself -------------------------------------------------------------------------


def test_control_the_deep_inputs_break_the_unbounded_parser() -> None:
    """Control: what the cases below feed the toolkit is what raised RecursionError before."""
    for n in (DEEP_MANIFEST, DEEP_LINE):
        with pytest.raises(RecursionError):
            json.loads(deep(n))


@pytest.mark.parametrize("text", [
    deep(DEEP_MANIFEST),
    '{"a": ' * DEEP_LINE + "1" + "}" * DEEP_LINE,
    "[" * DEEP_MANIFEST,  # never closed
    '{"files": ' + deep(MAX_DEPTH) + "}",  # one level over the bound
])
def test_deep_json_is_a_value_error_never_a_recursion_error(text: str) -> None:
    with pytest.raises(JSONNestingError, match="nested too deeply"):
        loads(text)
    assert isinstance(JSONNestingError("x"), ValueError)  # callers that handle bad JSON handle this too


def test_the_bound_counts_structure_not_text() -> None:
    """Control: nesting up to the bound parses, and brackets inside strings (escaped quotes
    included) are text, not nesting."""
    assert loads(deep(MAX_DEPTH)) is not None
    text = '["' + "[" * 5000 + '\\"' + "{" * 5000 + '", {"k": "]]]"}]'
    assert loads(text) == json.loads(text) and json_depth(text) == 2
    with pytest.raises(ValueError):  # an integer Python will not convert: a ValueError, like bad JSON
        loads("1" * 5000)
    with pytest.raises(json.JSONDecodeError):
        loads('{"a": ')


def test_files_and_lines_name_the_file_and_the_line(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n\n' + deep(DEEP_LINE) + "\n")
    with pytest.raises(ReaderError, match="nested too deeply") as info:
        list(read_json_lines(path))
    assert (info.value.path, info.value.line) == (str(path), 3)
    whole = tmp_path / "x.json"
    whole.write_text('{\n"a": [1,\n}')
    with pytest.raises(ReaderError, match="not JSON") as info:
        read_json_file(whole)
    assert info.value.line == 3


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "directory"])
def test_special_files_are_refused_before_reading(tmp_path: Path, kind: str) -> None:
    """A FIFO with no writer would block `open`; /dev/zero never ends. Both are refused at once
    (a hang here would be the test's failure)."""
    path = tmp_path / "special"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path = Path(kind)
    for read in (read_json_file, lambda p: list(read_json_lines(p))):
        with pytest.raises(ReaderError, match="FIFO|character device|directory"):
            read(path)


# --- built release for the CLI cases ----------------------------------------------------------


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """TableBench's sample frozen once per module (base subset); tests work on copies of it."""
    return freeze_sample_release(tmp_path_factory.mktemp("built"))


@pytest.fixture
def release(built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    copy = tmp_path / "release"
    shutil.copytree(built, copy)
    for path in [copy, *copy.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return copy


def base_rows(root: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (root / "data" / "base.jsonl").read_text().splitlines()]


def row_of(root: Path, qsubtype: str, answer: str) -> dict[str, Any]:
    return next(r for r in base_rows(root) if r["qsubtype"] == qsubtype and ", ".join(r["answer"]) == answer)


def write_predictions(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def assert_refused(result: Result, *needles: str) -> None:
    text = " ".join(result.output.replace("\n", "").split())  # Rich wraps long lines, even mid-word
    assert result.exit_code not in (0, None), result.output
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    for needle in needles:
        assert needle in text, f"{needle!r} not in {result.output!r}"


def evaluate(root: Path, preds: Path, *extra: str) -> Result:
    return runner.invoke(app, ["evaluate", "--release", str(root), "--predictions", str(preds), "--no-plots", *extra])


def one_prediction(tmp_path: Path, root: Path) -> Path:
    row = row_of(root, "Counting", "4")
    return write_predictions(tmp_path / "p.jsonl", [{"id": row["id"], "prediction": "Final Answer: 4"}])


# --- 7. deep JSON through the CLI ---------------------------------------------------------------


def test_a_deep_manifest_is_an_error_in_verify_diff_and_evaluate(release: Path, tmp_path: Path) -> None:
    """Case: a manifest.json of 200,000 nested brackets gave a RecursionError traceback in
    `release verify`, `release diff` and `evaluate`."""
    preds = one_prediction(tmp_path, release)
    assert evaluate(release, preds).exit_code == 0  # control: the intact release scores
    (release / "manifest.json").write_text(deep(DEEP_MANIFEST))
    needles = ("manifest.json", "nested too deeply")
    assert_refused(runner.invoke(app, ["release", "verify", str(release)]), *needles)
    assert_refused(runner.invoke(app, ["release", "diff", str(release), str(release)]), *needles)
    assert_refused(evaluate(release, preds), *needles)


def test_a_deep_predictions_line_is_an_error_naming_file_and_line(release: Path, tmp_path: Path) -> None:
    """Case: a predictions line of 100,000 nested brackets gave a RecursionError traceback."""
    preds = one_prediction(tmp_path, release)
    with preds.open("a") as fh:
        fh.write('{"id": "x", "prediction": "y", "model": ' + deep(DEEP_LINE) + "}\n")
    assert_refused(evaluate(release, preds), f"{preds}:2", "nested too deeply")


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "directory", "socket"])
def test_a_special_file_as_predictions_is_refused_at_once(release: Path, tmp_path: Path, kind: str) -> None:
    """Case: a FIFO given as the predictions file hung `evaluate`; /dev/zero read until memory ran
    out. A subprocess with a timeout: a hang fails the test instead of stopping the suite."""
    import socket

    path = tmp_path / "preds.jsonl"
    server = None
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
    else:
        path = Path(kind)
    try:
        done = subprocess.run([sys.executable, "-m", "tqaforge", "evaluate", "--release", str(release), "--predictions", str(path),
                               "--no-plots"], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                              env={**os.environ, "COLUMNS": "500"})  # one line, however long the path (xdist's are longer)
    finally:
        if server is not None:
            server.close()
    message = " ".join(done.stderr.split())
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    expected = {"fifo": "is a FIFO", "/dev/zero": "is a character device", "directory": "is a directory", "socket": "is a socket"}[kind]
    assert str(path) in message and expected in message, message


def test_other_json_inputs_of_the_class(release: Path, tmp_path: Path) -> None:
    """Cases (class of 7): every other JSON the toolkit reads from a file: Label Studio's
    credentials (`labelstudio status`), a prompts file's sidecar, a saved scores.json (the app's
    Releases page), each deep, a FIFO or /dev/zero."""
    from tqaforge.annotation.labelstudio import manage
    from tqaforge.evaluate.harness import saved_evaluations
    from tqaforge.variants.grid import _META_FORMAT, meta_path, read_meta

    ws = tmp_path / "ws"
    assert runner.invoke(app, ["init", str(ws)]).exit_code == 0
    status = runner.invoke(app, ["labelstudio", "status", "-w", str(ws)])
    assert status.exit_code == 3 and "not running" in status.output  # control: no credentials yet, no error
    credentials = manage.credentials_path(ws)
    credentials.parent.mkdir(parents=True, exist_ok=True)
    credentials.write_text(deep(20_000))  # under its size bound, far over the depth bound
    assert_refused(runner.invoke(app, ["labelstudio", "status", "-w", str(ws)]), "credentials.json", "nested too deeply")
    credentials.unlink()
    os.mkfifo(credentials)
    assert_refused(runner.invoke(app, ["labelstudio", "status", "-w", str(ws)]), "credentials.json", "FIFO")

    prompts = tmp_path / "prompts.jsonl"
    meta_path(prompts).write_text(json.dumps({"format": _META_FORMAT, "options": {}}))
    assert read_meta(prompts) is not None  # control: a sound sidecar is read
    meta_path(prompts).write_text(deep(DEEP_MANIFEST))
    assert read_meta(prompts) is None
    meta_path(prompts).unlink()
    os.mkfifo(meta_path(prompts))
    assert read_meta(prompts) is None  # not waited on

    evaluations = tmp_path / "evaluations"
    assert evaluate(release, one_prediction(tmp_path, release), "--out", str(evaluations / "r" / "good")).exit_code == 0
    for name, make in (("deep", lambda p: p.write_text(deep(DEEP_MANIFEST))), ("fifo", os.mkfifo)):
        (evaluations / "r" / name).mkdir()
        make(evaluations / "r" / name / "scores.json")
    assert [s.predictions for s in saved_evaluations(evaluations)] == ["good"]  # the sound one stays


class _DeepReply(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        body = deep(DEEP_MANIFEST).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_a_deep_reply_from_label_studio_is_an_error_naming_the_request() -> None:
    """Case (class of 7): Label Studio stores whatever JSON an annotator's client sends; a reply
    holding it 200,000 deep broke the client's JSON decoding with a RecursionError."""
    from tqaforge.annotation.labelstudio.client import ClientSettings, LabelStudioClient
    from tqaforge.annotation.labelstudio.server import LabelStudioError

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _DeepReply)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        settings = ClientSettings(url=f"http://127.0.0.1:{server.server_address[1]}", token="t", attempts=1)
        with LabelStudioClient(settings) as client, pytest.raises(LabelStudioError, match="nested too deeply") as info:
            client.request("GET", "/api/tasks/", what="list tasks")
        assert "/api/tasks/" in str(info.value)
    finally:
        server.shutdown()
        server.server_close()


def test_a_huge_number_as_a_label_is_text_not_a_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Case (class of 7): `agreement resolve TASK 111...` (5,000 digits) raised the parser's
    ValueError, which is not a JSONDecodeError, as a traceback; the label is text like any non-JSON."""
    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    ws = tmp_path / "ws"
    assert runner.invoke(app, ["init", str(ws)]).exit_code == 0
    result = runner.invoke(app, ["-w", str(ws), "agreement", "resolve", "abc", "1" * 5000, "--by", "ana"])
    assert_refused(result, "abc")  # refused for the unknown task, not for the label
    assert "4300" not in result.output and "nested" not in result.output


def test_deep_status_written_by_a_sandboxed_program_is_no_status() -> None:
    """Case (class of 7): fd 3 of a sandboxed program is its status pipe; 200,000 brackets
    written there made the worker's JSON decoding raise RecursionError: outcome "crashed"."""
    from tqaforge.sandbox import Limits, Outcome, Sandbox

    code = "import os\nos.write(3, b'[' * 200000 + b']' * 200000)\nprint('Final Answer: 1')\n"
    with Sandbox(workers=1, limits=Limits(wall_seconds=10, cpu_seconds=10)) as box:
        result = box.run(code, "a\n1\n")
        assert result.outcome is Outcome.OK and "Recursion" not in (result.error or ""), result
        assert box.run("print('Final Answer: 2')", "a\n1\n").stdout.strip() == "Final Answer: 2"


# --- 7. numbers from model text that leave Decimal's range --------------------------------------

HOSTILE_NUMBERS = ["1e99999999999", "-1e99999999999", "1e-99999999", "inf", "-inf", "nan", "snan", "Infinity",
                   "9" * 5000, "1e999999999999999999999", "0e99999999999"]


def test_numbers_out_of_range_are_wrong_answers_not_a_crash(release: Path, tmp_path: Path) -> None:
    """Case: `Final Answer: 1e99999999999` on an EM-within-10% subtype stopped `evaluate` with a
    decimal.Overflow traceback and no scores. Other members: infinities, NaNs, tiny exponents,
    5,000-digit integers, on EM-within-10% (StatisticalAnalysis, TrendForecasting) and EM
    (Counting) subtypes alike. One system per hostile number; `right` is the control."""
    targets = [row_of(release, "StatisticalAnalysis", "155712"), row_of(release, "TrendForecasting", "1.60"),
               row_of(release, "Counting", "4")]
    right = {"StatisticalAnalysis": "155712", "TrendForecasting": "1.60", "Counting": "4"}
    preds = [{"id": r["id"], "model": f"n{i}", "prediction": f"Final Answer: {number}"}
             for i, number in enumerate(HOSTILE_NUMBERS) for r in targets]
    preds += [{"id": r["id"], "model": "right", "prediction": f"Final Answer: {right[r['qsubtype']]}"} for r in targets]
    path = write_predictions(tmp_path / "numbers.jsonl", preds)
    result = evaluate(release, path, "--out", str(tmp_path / "out"))
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    rows = json.loads((tmp_path / "out" / "scores.json").read_text())["rows"]
    score = {(r["system"], r["group"]): (r["tablebench"], r["normalised"]) for r in rows}
    for group in ("DataAnalysis_StatisticalAnalysis", "DataAnalysis_TrendForecasting", "NumericalReasoning_Counting"):
        assert score[("right/DP", group)] == (50.0, 50.0), group  # control: one of the two items right
        for i in range(len(HOSTILE_NUMBERS)):
            assert score[(f"n{i}/DP", group)] == (0.0, 0.0), (HOSTILE_NUMBERS[i][:20], group)


# --- 15. control characters of predictions ----------------------------------------------------

NASTY = "evil\x1b[2J\x1b]52;c;aGk=\x07\x9b31m\u202eledom\r"


def test_model_names_with_control_characters_reach_no_terminal_or_file_raw(release: Path, tmp_path: Path) -> None:
    """Case: control characters of a predictions file's model name (ESC[2J, an OSC 52 clipboard
    write, a C1 CSI, a right-to-left override, a carriage return) reached the terminal and
    scores.json raw. They are shown escaped in both, and the file is still JSON."""
    from tqaforge.evaluate.harness import EvaluateOptions
    from tqaforge.evaluate.harness import evaluate as run

    row = row_of(release, "Counting", "4")
    path = write_predictions(tmp_path / "p.jsonl", [
        {"id": row["id"], "model": NASTY, "prediction": "Final Answer: 4"},
        {"id": "no-such-row\x1b[2J", "model": "m", "prediction": "Final Answer: 1"},
    ])
    result = evaluate(release, path, "--out", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    raw = (tmp_path / "out" / "scores.json").read_bytes().decode("utf-8")
    for char in ("\x1b", "\x07", "\x9b", "\u202e", "\r"):
        assert char not in result.output and char not in raw, repr(char)
    escaped = "evil\\x1b[2J\\x1b]52;c;aGk=\\x07\\x9b31m\\u202eledom\\r"
    scores = json.loads(raw)
    assert {r["system"] for r in scores["rows"]} == {f"{escaped}/DP"}  # control: the name is there, inert
    assert scores["unmatched"] == ["no-such-row\\x1b[2J"]
    # The library's own lines (the app shows them too) are escaped, whatever console prints them.
    report = run(EvaluateOptions(release=release, predictions=path, out=tmp_path / "out2", plots=False))
    assert all("\x1b" not in line and "\u202e" not in line for line in report.lines())
    assert any(escaped in line for line in report.lines())


def test_each_json_lines_offset_reads_its_value_again(tmp_path: Path) -> None:
    """``read_json_lines_at`` (the bounded reader, with offsets): reading from a line's offset gives
    its value again, past a byte-order mark, blank lines, CRLF ends and multi-byte text; the values
    and line numbers are those of ``read_json_lines``."""
    path = tmp_path / "rows.jsonl"
    values = [{"a": "é\u2028x"}, [1, 2], "tail"]
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(values[0], ensure_ascii=False).encode() + b"\r\n\n  \n"
                     + json.dumps(values[1]).encode() + b"\n" + json.dumps(values[2]).encode())
    found = list(read_json_lines_at(path))
    assert [(n, v) for n, _, v in found] == list(read_json_lines(path)) == [(1, values[0]), (4, values[1]), (5, values[2])]
    data = path.read_bytes()
    for _, at, value in found:
        assert json.loads(data[at:].split(b"\n", 1)[0].decode("utf-8")) == value

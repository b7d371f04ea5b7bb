"""Terminal injection (issue 23, item 4): text from models and data reaches the terminal escaped.

A workspace is filled the ways such text gets in: a TableBench file whose header, cell, question
and gold answer carry a carriage return and a bidirectional override (what the importer keeps), a
file name with an escape sequence, a real ``generate answers`` run against the loopback model
whose replies, model name and PoT program output are hostile, a review edit, a seed, annotators
with hostile names, variants, a release and a predictions file. Then every command that prints
such text runs through Typer's runner (the real commands on the real SQLite file) and no escape,
carriage return, C1 control, bidirectional override or lone surrogate reaches its output; the
escaped form does. Rich markup in data (``[bold red]``, ``[link=...]``) prints as written, and our
own colours still reach a terminal.

Controls: the stored data still holds the raw characters, and the same text through a plain Rich
console does carry them, so the detector sees a leak when there is one.
"""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from openai_server import OpenAIServer
from rich.console import Console
from rich.text import Text
from sqlmodel import select
from typer.testing import CliRunner

from tqaforge import queries
from tqaforge.cli import app
from tqaforge.cli._common import DataConsole, err, progress_reporter, styled
from tqaforge.labels import record_annotation
from tqaforge.schemas.records import AnswerCandidate, LLMCall, Question, TableRecord
from tqaforge.store import open_workspace

pytestmark = pytest.mark.hostile

# Clears the screen, writes the clipboard (OSC 52), returns the carriage and moves the cursor up
# to forge our "outcome: ok" line, reverses what follows (RLO), an 8-bit CSI, and Rich markup.
MARKUP = "[bold red]F[/][link=http://evil.example/]G[/link]"
HOSTILE = f"A\x1b[2J\x1b]52;c;aGk=\x07B\rC\x1b[1Aoutcome: ok\u202eD\x9b31mE{MARKUP}"
# What must never reach a terminal (independent of tqaforge.printable, which it checks): C0 but
# TAB and LF, DEL, C1, bidirectional marks, embeddings, overrides and isolates, LS/PS, surrogates.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]")
ESCAPED = ("\\r", "\\u202e")  # what the importer keeps of HOSTILE, shown escaped
runner = CliRunner()


def invoke(root: Path | None, *args: str, env: dict[str, str] | None = None, ok: bool = True) -> str:
    argv = (["-w", str(root)] if root else []) + list(args)
    result = runner.invoke(app, argv, env={"COLUMNS": "220", **(env or {})})
    if ok:
        assert result.exit_code == 0, (args, result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.output


def assert_clean(output: str, *, shows: tuple[str, ...] = ESCAPED) -> None:
    leaked = sorted({repr(c) for c in RAW.findall(output)})
    assert not leaked, f"raw control characters reached the terminal: {leaked}\n{output!r}"
    for form in shows:
        assert form in output, f"{form} not shown:\n{output}"


def _model_reply(body: dict[str, Any]) -> str:
    prompt = body["messages"][0]["content"]
    if "who answers with a Python program" in prompt:
        # The program's own output and its exception message are hostile.
        return f"```python\nprint({HOSTILE!r})\nraise ValueError({HOSTILE!r})\n```"
    return f"I think {HOSTILE}\nFinal Answer: 42 \u202e\x9b{MARKUP}"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The workspace (module docs) and the ids the commands need."""
    base = tmp_path_factory.mktemp("terminal")
    root = base / "ws"
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith(("TQAFORGE_", "OPENAI_"))}
    try:
        invoke(None, "init", str(root))
        row = {"id": "h1", "qtype": "NumericalReasoning", "qsubtype": "Aggregation",
               "table": {"columns": ["year", f"score {HOSTILE}"], "data": [[str(2000 + i), str(i) if i else HOSTILE] for i in range(8)]},
               "question": f"What is the total score? {HOSTILE}", "answer": f"42 {HOSTILE}"}
        source = base / "evil\x1b[2J.jsonl"
        source.write_text(json.dumps(row) + "\n", encoding="utf-8")
        imported = invoke(root, "tables", "import", str(source))
        ws = open_workspace(root)
        with ws.session() as s:
            table = s.exec(select(TableRecord)).one()
            # What the importer cleans, a record from another writer (an older version, a shared
            # PostgreSQL) may still hold: a caption and an import location with escapes.
            table.caption, table.imported_from = f"caption {HOSTILE}", "dir/evil\x1b[2J\u202e.csv:1"
            s.add(table)
            gold = s.exec(select(Question)).one()
            proposed = Question(id=Question.make_id(table.id, f"proposed {HOSTILE}", "Aggregation"), table_id=table.id,
                                text=f"proposed {HOSTILE}", subtype="Aggregation", qtype="NumericalReasoning",
                                status="proposed", origin="llm")
            s.add(proposed)
            table_id, gold_id, proposed_id = table.id, gold.id, proposed.id
        queued = invoke(root, "questions", "queue")
        # A name with control characters is refused (escaped in the message); a plain one is registered.
        refused = invoke(root, "questions", "review", proposed_id[:10], "--accept", "--annotator", f"ann{HOSTILE}", "--new", ok=False)
        assert "control characters" in refused
        assert_clean(refused, shows=("\\x1b[2J",))
        reviewed = invoke(root, "questions", "review", proposed_id[:10], "--edit", f"edited {HOSTILE}", "--annotator", "ann", "--new")
        with OpenAIServer(_model_reply) as server:
            answered = invoke(root, "generate", "answers", "--model", f"m{HOSTILE}", "--questions", gold_id[:12],
                              env={"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "k"})
        invoke(root, "seeds", "add", "Aggregation", f"seed {HOSTILE}")
        with ws.session() as s:  # two annotators (as pulled from Label Studio) with hostile names disagree
            for who, label in ((f"ls:ana{HOSTILE}", {"type": "reasoning"}), (f"ls:ben{HOSTILE}", {"type": "extraction"})):
                record_annotation(s, kind="question_typing", target_type="question", target_id=gold_id, annotator=who, label=label)
        adjudicated = invoke(root, "agreement", "adjudicate")
        invoke(root, "variants", "build", "--perturbations", "none,shuffle_rows", "--serializations", "csv", "--no-prompts")
        built = invoke(root, "release", "build", "--version", "0.1.0", "--accept-low-agreement", f"because {HOSTILE}")
        release = root / "releases" / "ws-0.1.0"
        base_ids = [json.loads(line)["id"] for line in (release / "data" / "base.jsonl").read_text().splitlines()]
        predictions = base / "preds.jsonl"
        predictions.write_text("".join(json.dumps({"id": i, "prediction": f"Final Answer: 42 {HOSTILE}", "model": f"model{HOSTILE}"}) + "\n"
                                       for i in base_ids), encoding="utf-8")
        variant_id = queries.list_variants(ws, perturbation="shuffle_rows").items[0].id
        yield {"root": root, "ws": ws, "table": table_id, "gold": gold_id, "proposed": proposed_id, "variant": variant_id,
               "release": release, "predictions": predictions, "base": base,
               "outputs": {"tables import": imported, "questions queue": queued, "questions review": reviewed,
                           "generate answers": answered, "release build": built,
                           "agreement adjudicate": adjudicated}}
        ws.close()
    finally:
        os.environ.update(saved)


def test_the_stored_data_still_holds_the_raw_characters(hostile) -> None:
    """Control: the escaping at the terminal is what keeps them out, not a cleaner before the store."""
    ws = hostile["ws"]
    with ws.session() as s:
        table = s.get(TableRecord, hostile["table"])
        assert table is not None and "\r" in table.header[1] and "\u202e" in table.header[1]
        edited = s.get(Question, hostile["proposed"])
        assert edited is not None and "\x1b[2J" in edited.text
        assert any("\x1b" in (m or "") for m in s.exec(select(LLMCall.model)).all())
        pot = [c for c in s.exec(select(AnswerCandidate)).all() if c.method == "PoT"]
        assert pot and "\x1b[2J" in ((pot[0].details or {}).get("execution") or {}).get("stdout", "")


def test_the_detector_sees_raw_text_through_a_plain_rich_console(hostile) -> None:
    """Control: without DataConsole, the same stored question reaches the output raw."""
    with hostile["ws"].session() as s:
        text = s.get(Question, hostile["proposed"]).text  # type: ignore[union-attr]
    plain = io.StringIO()
    Console(file=plain, markup=False, highlight=False).print(text)
    assert RAW.search(plain.getvalue())
    safe = io.StringIO()
    DataConsole(file=safe, markup=False, highlight=False).print(text)
    assert not RAW.search(safe.getvalue()) and "\\x1b[2J" in safe.getvalue()


def test_commands_that_write_report_escaped(hostile) -> None:
    """tables import (the file name), questions queue, questions review, generate answers (the
    model name in the progress bar), release build (the reason): nothing raw."""
    outputs = hostile["outputs"]
    assert_clean(outputs["tables import"], shows=())
    assert_clean(outputs["questions queue"])
    assert_clean(outputs["questions review"], shows=())
    assert_clean(outputs["generate answers"], shows=())
    assert_clean(outputs["agreement adjudicate"], shows=())
    assert_clean(outputs["release build"], shows=("\\x1b[2J", "\\u202e"))


LISTINGS = {
    "tables list": lambda h: ["tables", "list"],
    "tables show": lambda h: ["tables", "show", h["table"][:12]],
    "questions list": lambda h: ["questions", "list"],
    "variants list": lambda h: ["variants", "list"],
    "variants show": lambda h: ["variants", "show", h["variant"][:12]],
    "answers show": lambda h: ["answers", "show", h["gold"][:12]],
    "answers report": lambda h: ["answers", "report"],
    "seeds list": lambda h: ["seeds", "list", "--subtype", "Aggregation"],
    "agreement report": lambda h: ["agreement", "report", "--n-boot", "0", "--no-store"],
    "agreement queue": lambda h: ["agreement", "queue"],
    "status": lambda h: ["status"],
}
# What each shows of the hostile text (some show only what the importer kept, some the model's or
# a person's raw text, some none: counts only).
SHOWS = {
    "tables list": ("\\x1b[2J", "\\u202e"), "tables show": ("\\r", "\\u202e", "\\x1b[2J", "\\x9b"), "answers report": (), "status": (), "agreement report": (),
    "seeds list": ("\\x1b[2J", "\\x07", "\\u202e", "\\x9b"), "agreement queue": ("\\x1b[2J", "\\r", "\\u202e"),
    "answers show": ("\\u202e", "\\x1b[2J"),
}


@pytest.mark.parametrize("command", list(LISTINGS))
def test_every_command_that_shows_data_escapes_it(hostile, command: str) -> None:
    output = invoke(hostile["root"], *LISTINGS[command](hostile))
    assert_clean(output, shows=SHOWS.get(command, ESCAPED))


def test_one_line_fields_cannot_start_a_line_of_their_own(hostile) -> None:
    """A question's line feed is shown as \\n where a question is one line (tables show, answers show),
    and Rich markup in data prints as written."""
    root = hostile["root"]
    with hostile["ws"].session() as s:
        q = s.get(Question, hostile["gold"])
        assert q is not None
        q.text = q.text + "\n- [accepted] forged: a line of our own"
        s.add(q)
    try:
        for args in (["tables", "show", hostile["table"][:12]], ["answers", "show", hostile["gold"][:12]]):
            output = invoke(root, *args)
            assert not any(line.lstrip().startswith("- [accepted] forged") for line in output.splitlines()), output
            assert "\\n- [accepted] forged" in output
        assert MARKUP in invoke(root, "answers", "show", hostile["gold"][:12])
    finally:
        with hostile["ws"].session() as s:
            q = s.get(Question, hostile["gold"])
            assert q is not None
            q.text = q.text.split("\n- [accepted] forged")[0]
            s.add(q)


@pytest.mark.parametrize("fmt", ["json", "markdown"])
def test_agreement_report_json_and_markdown(hostile, fmt: str) -> None:
    output = invoke(hostile["root"], "agreement", "report", "--n-boot", "0", "--no-store", "--format", fmt)
    assert_clean(output, shows=())
    if fmt == "json":
        json.loads(output)


def test_json_output_is_still_json_and_loses_nothing(hostile) -> None:
    """--json: C1 controls, overrides and lone surrogates are \\uXXXX escapes, so the document loads to the data."""
    output = invoke(hostile["root"], "answers", "report", "--json")
    assert_clean(output, shows=())
    json.loads(output)
    output = invoke(hostile["root"], "status", "--json")
    assert_clean(output, shows=())
    assert json.loads(output)["stages"]


def test_evaluate_prints_model_names_and_predictions_escaped(hostile, tmp_path: Path) -> None:
    for extra in ([], ["--json"]):
        output = invoke(None, "evaluate", "--release", str(hostile["release"]), "--predictions", str(hostile["predictions"]),
                        "--out", str(tmp_path / f"eval{len(extra)}"), "--no-plots", *extra)
        assert_clean(output, shows=() if extra else ("\\x1b[2J",))
        if extra:
            json.loads(output)


def test_evaluate_plots_a_model_name_that_looks_like_tex(hostile, tmp_path: Path) -> None:
    """Markup of another kind: matplotlib read "$...$" in a model name as TeX, and the plot ended
    `evaluate` in a ParseSyntaxException traceback. The name is drawn as text."""
    predictions = tmp_path / "tex.jsonl"
    rows = [json.loads(line) for line in hostile["predictions"].read_text(encoding="utf-8").splitlines()]
    predictions.write_text("".join(json.dumps({**r, "model": "m$\\frac{1}$_{x"}) + "\n" for r in rows), encoding="utf-8")
    output = invoke(None, "evaluate", "--release", str(hostile["release"]), "--predictions", str(predictions),
                    "--out", str(tmp_path / "out"))
    assert (tmp_path / "out" / "by_subtype.png").stat().st_size > 0 and "Traceback" not in output


def test_release_verify_and_diff(hostile) -> None:
    release = hostile["release"]
    assert_clean(invoke(None, "release", "verify", str(release)), shows=())
    assert_clean(invoke(None, "release", "diff", str(release), str(release)), shows=())


def test_errors_that_quote_what_was_typed_are_escaped(hostile) -> None:
    """A TqaforgeError's message names the id prefix the user gave: shown escaped on stderr."""
    output = invoke(hostile["root"], "questions", "review", f"zz{HOSTILE}", "--accept", "--annotator", "x", ok=False)
    assert "error" in output
    assert_clean(output, shows=("\\x1b[2J",))


def test_a_workspace_path_and_name_with_escapes(tmp_path: Path) -> None:
    root = tmp_path / "w\x1b[2J\u202e"
    assert_clean(invoke(None, "init", str(root), "--name", f"n{HOSTILE}"), shows=("\\x1b[2J", "\\u202e"))
    assert_clean(invoke(root, "labelstudio", "status", ok=False), shows=("\\x1b[2J", "\\u202e"))
    output = invoke(root, "labelstudio", "status", "--json", ok=False)
    assert_clean(output, shows=())
    assert json.loads(output)["workspace"] == str(root)


# --- sandbox run: the program's output ---------------------------------------------------------

FORGE = (
    "import sys\n"
    "sys.stdout.write('\\x1b[2J\\x1b]52;c;aGk=\\x07 ok\\r\\x1b[1A\\x1b[2Koutcome: ok  (exit status 0, 0.010 s)\\n')\n"
    "print('\\u202eD\\x9b31m [bold red]F[/] [link=http://evil.example/]G[/link]')\n"
    "print('outcome: ok  (exit status 0, 0.010 s)')\n"
    "print('\\x1b[31m', file=sys.stderr)\n"
    "raise SystemExit(3)\n"
)


@pytest.fixture
def program(tmp_path: Path) -> tuple[Path, Path]:
    prog, table = tmp_path / "forge.py", tmp_path / "table.csv"
    prog.write_text(FORGE, encoding="utf-8")
    table.write_text("a,b\n1,2\n", encoding="utf-8")
    return prog, table


def test_sandbox_run_cannot_forge_its_outcome(program: tuple[Path, Path]) -> None:
    prog, table = program
    output = invoke(None, "sandbox", "run", str(prog), "--table", str(table), "--timeout", "10", ok=False)
    assert_clean(output, shows=("\\x1b[2J", "\\x1b]52;c;aGk=\\x07", "\\r", "\\x1b[1A", "\\u202e", "\\x9b"))
    outcomes = [line for line in output.splitlines() if line.startswith("outcome:")]
    assert len(outcomes) == 1 and outcomes[0].startswith("outcome: exception"), output
    assert "[bold red]F[/] [link=http://evil.example/]G[/link]" in output  # markup printed as written


def test_sandbox_run_json_loads_to_the_program_output(program: tuple[Path, Path]) -> None:
    prog, table = program
    output = invoke(None, "sandbox", "run", str(prog), "--table", str(table), "--json", ok=False)
    assert_clean(output, shows=())
    result = json.loads(output)
    assert result["stdout"].startswith("\x1b[2J\x1b]52;c;aGk=\x07 ok\r") and "\u202eD\x9b31m" in result["stdout"]


def test_run_result_lines_escape_and_indent_on_their_own() -> None:
    """RunResult.lines() is safe for any caller, not only through the CLI's console."""
    from tqaforge.sandbox import Outcome, RunResult

    result = RunResult(Outcome.EXCEPTION, "x\r\x1b[1Aoutcome: ok\noutcome: ok\n", "\x1b]52;c;aGk=\x07", 1,
                       f"ValueError: {HOSTILE}", (), (), None, 0.1)
    lines = result.lines()
    assert not any(RAW.search(line) for line in lines)
    assert [line for line in lines if line.startswith("outcome:")] == [lines[0]]
    assert "  x\\r\\x1b[1Aoutcome: ok" in lines and "  outcome: ok" in lines


# --- the console itself: data escaped, our styling kept ---------------------------------------------


def test_our_colours_reach_a_terminal_and_data_is_escaped() -> None:
    buffer = io.StringIO()
    console = DataConsole(file=buffer, force_terminal=True, color_system="standard", markup=False, highlight=False, width=300)
    console.print(styled(("error: ", "bold red"), HOSTILE))
    console.print(Text(f"made elsewhere {HOSTILE}", style="green"))  # not through render_str: escaped on write
    written = buffer.getvalue()
    assert "\x1b[1;31merror: " in written and "\x1b[32m" in written  # our styles, as SGR codes
    without_ours = re.sub(r"\x1b\[[0-9;]*m", "", written)
    assert "\x1b" not in without_ours and "\\x1b[2J" in written and MARKUP in written
    assert not RAW.search(without_ours)


def test_progress_descriptions_are_escaped(monkeypatch: pytest.MonkeyPatch) -> None:
    """The progress bar (stderr) shows the model name (`asking MODEL`) and each note; on a terminal
    Rich draws it with cursor moves and colours of its own, which pass, while the names are escaped."""
    from tqaforge.cli import _common

    buffer = io.StringIO()
    assert type(err) is DataConsole
    terminal = DataConsole(file=buffer, stderr=True, force_terminal=True, markup=False, highlight=False, emoji=False)
    monkeypatch.setattr(_common, "err", terminal)  # the bar's console, as on a terminal
    with progress_reporter(f"asking {HOSTILE}", total=2, describe=lambda note: f"note {note}") as report:
        report(1, 2, HOSTILE)
    written = buffer.getvalue()
    assert "asking A\\x1b[2J" in written and "note A\\x1b[2J" in written
    ours = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")  # Rich's SGR colours, cursor moves, line erases, \r
    assert not RAW.search(ours.sub("", written)), repr(written)


@pytest.mark.parametrize("code", [0x1B, 0x0D, 0x07, 0x9B, 0x202E, 0x2066, 0x200F, 0x061C, 0x2028])
def test_each_unsafe_character_is_escaped_in_a_table_cell(code: int, tmp_path: Path) -> None:
    from tqaforge.cli._common import plain_table

    buffer = io.StringIO()
    table = plain_table(f"h{chr(code)}", title=f"t{chr(code)}")
    table.add_row(f"cell{chr(code)}")
    DataConsole(file=buffer, markup=False, highlight=False, width=80).print(table)
    assert chr(code) not in buffer.getvalue() and buffer.getvalue().count("\\") == 3


def test_a_lone_surrogate_in_data_does_not_break_the_output() -> None:
    buffer = io.BytesIO()
    stream = io.TextIOWrapper(buffer, encoding="utf-8")
    DataConsole(file=stream, markup=False).print("model \ud800 name")
    stream.flush()
    assert b"\\ud800" in buffer.getvalue()

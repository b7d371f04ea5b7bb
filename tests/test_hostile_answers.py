"""Hostile input to answer annotation: broken or lying model replies, hostile PoT and chart code,
bad options, two runs at once. Each ends in a stored, typed candidate or a clear error; the run
goes on and loses nothing."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest
from openai_server import OpenAIServer, Scripted
from sqlmodel import select
from test_answers import REPO, add_questions, llm_settings, method_of, pot, question_of, rows, say
from typer.testing import CliRunner

from tqaforge.answers.annotate import AnswerOptions, generate_answers
from tqaforge.answers.parse import parse_reply
from tqaforge.cli import app
from tqaforge.ingest import import_paths
from tqaforge.sandbox import Limits, Sandbox
from tqaforge.schemas.records import Answer, AnswerCandidate, Question, TableRecord

pytestmark = pytest.mark.hostile
runner = CliRunner(env={"COLUMNS": "200"})
TABLE = REPO / "data" / "tables" / "wtq_cricket_batting.tsv"

#: What the scripted TCoT agent says for each broken-reply question (SCoT and PoT answer 42).
BROKEN = {
    "nul": "The answer\x00 is here\x00\nFinal Answer: 4\x002",
    "surrogate": "Final Answer: \ud800",
    "empty": "Final Answer:   \n",
    "nofinal": "I believe the answer is 42, but I will not say it the usual way.",
    "onlycode": "```python\nprint('Final Answer: 42')\n```",
    "huge": "blah " * 40_000 + "\nno answer line",
    "binary": "".join(chr(c) for c in range(1, 32)) * 50,
    "prose": "Final Answer is 42 as we saw. final answer - 42",
}

#: PoT programs that attack the sandbox, by question tag.
HOSTILE_POT = {
    "forkbomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
    "memory": "x = []\nwhile True:\n    x.append(bytearray(50_000_000))",
    "output": "import sys\nchunk = 'y' * 1_000_000\nfor _ in range(1000):\n    sys.stdout.write(chunk)",
    "socket": "import socket\ns = socket.create_connection(('127.0.0.1', 9))\nprint('Final Answer: 42')",
    "twoblocks": None,  # two code blocks: unparsed
    "crash": "import faulthandler\nfaulthandler._sigsegv()",
}


def reply(body: dict) -> Scripted | str:
    prompt = body["messages"][0]["content"]
    method, question = method_of(prompt), question_of(prompt)
    tag = re.search(r"\((\w+)\)", question).group(1)
    if tag in BROKEN:
        return BROKEN[tag] if method == "TCoT" else say(method, "42")
    if method != "PoT":
        return say(method, "42")
    if tag == "twoblocks":
        return pot("print('Final Answer: 42')") + pot("print('Final Answer: 43')")
    return pot(HOSTILE_POT[tag])


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(workers=2, limits=Limits(wall_seconds=4, cpu_seconds=3, memory_mb=256, processes=8)) as pool:
        yield pool


def _setup(ws, kinds) -> dict[str, str]:
    assert not import_paths(ws, [TABLE]).failed
    ids = add_questions(ws, dict.fromkeys(kinds, 1))
    with ws.session() as s:
        return {re.search(r"\((\w+)\)", s.get(Question, qid).text).group(1): qid for qid in ids}


def _candidates(ws, method: str) -> dict[str, AnswerCandidate]:
    questions = {q.id: q for q in rows(ws, Question)}
    return {re.search(r"\((\w+)\)", questions[c.question_id].text).group(1): c
            for c in rows(ws, AnswerCandidate) if c.method == method}


def test_broken_model_replies_are_stored_unparsed_with_the_reason(sqlite_workspace, sandbox):
    ws = sqlite_workspace
    _setup(ws, BROKEN)
    with OpenAIServer(reply) as server:
        summary = generate_answers(ws, AnswerOptions(), llm_settings(server), sandbox=sandbox)
    assert summary.stopped is None and summary.questions_done == len(BROKEN)
    tcot = _candidates(ws, "TCoT")
    for tag in ("surrogate", "empty", "nofinal", "onlycode", "binary", "prose"):
        assert tcot[tag].status == "unparsed", tag
        assert tcot[tag].error and ("Final Answer" in tcot[tag].error or "empty" in tcot[tag].error), (tag, tcot[tag].error)
    # A reply over the size cap is cut off while read, and recorded as unparsed (the run goes on).
    assert tcot["huge"].status == "unparsed" and "too large" in tcot["huge"].error, tcot["huge"].error
    # NUL bytes are dropped from what is stored, the answer survives them.
    assert tcot["nul"].status == "ok" and tcot["nul"].values == ["42"]
    assert "\x00" not in (tcot["nul"].raw or "")
    votes = {a.question_id: a for a in rows(ws, Answer)}
    assert all(v.status == "inconsistent" for qid, v in votes.items() if qid != tcot["nul"].question_id)


def test_hostile_pot_code_ends_in_typed_outcomes_and_the_run_goes_on(sqlite_workspace, sandbox):
    ws = sqlite_workspace
    _setup(ws, HOSTILE_POT)
    with OpenAIServer(reply) as server:
        started = time.monotonic()
        summary = generate_answers(ws, AnswerOptions(), llm_settings(server), sandbox=sandbox)
        took = time.monotonic() - started
    assert summary.stopped is None and summary.questions_done == len(HOSTILE_POT)
    assert took < 60
    pot_ = _candidates(ws, "PoT")
    outcome = {tag: (c.details or {}).get("execution", {}).get("outcome") for tag, c in pot_.items()}
    assert outcome["memory"] == "memory"
    assert outcome["output"] == "output_limit"
    assert outcome["crash"] == "crashed"
    assert outcome["forkbomb"] in ("timeout", "killed")
    assert outcome["socket"] == "exception" and "Error" in pot_["socket"].error
    assert pot_["twoblocks"].status == "unparsed" and "2 python code blocks" in pot_["twoblocks"].error
    for tag in ("memory", "output", "crash", "forkbomb", "socket"):
        assert pot_[tag].status == "exec_error", tag
        # what is kept of the output is bounded, whatever the program printed
        assert len(pot_[tag].details["execution"]["stdout"]) <= 2000
    # every vote is stored and routed; the sandbox still works afterwards
    assert len([a for a in rows(ws, Answer) if a.method == "vote"]) == len(HOSTILE_POT)
    assert sandbox.run("print('Final Answer: 1')", "a\n1\n").outcome == "ok"


def test_chart_code_that_draws_nothing_or_the_wrong_thing(sqlite_workspace, sandbox):
    ws = sqlite_workspace
    assert not import_paths(ws, [TABLE]).failed
    with ws.session() as s:
        table_id = s.exec(select(TableRecord.id)).first()
        texts = {"nothing": "Draw a bar chart of the runs (nothing).", "notype": "Draw a chart of the runs (notype).",
                 "print": "Draw a pie chart of the runs (print)."}
        for text in texts.values():
            s.add(Question(id=Question.make_id(table_id, text, "ChartGeneration"), table_id=table_id, text=text,
                           subtype="ChartGeneration", status="accepted", origin="llm"))

    def chart_reply(body: dict) -> str:
        prompt = body["messages"][0]["content"]
        tag = re.search(r"\((\w+)\)", question_of(prompt)).group(1)
        if tag == "nothing":
            return pot("x = 1")
        if tag == "print":
            return pot("print('no chart here')")
        return pot("import matplotlib.pyplot as plt\nplt.bar([1, 2], [3, 4])\nplt.show()")

    with OpenAIServer(chart_reply) as server:
        summary = generate_answers(ws, AnswerOptions(), llm_settings(server), sandbox=sandbox)
    assert summary.stopped is None and summary.questions_done == 3
    questions = {q.id: q for q in rows(ws, Question)}
    for c in rows(ws, AnswerCandidate):
        tag = re.search(r"\((\w+)\)", questions[c.question_id].text).group(1)
        if tag == "notype":
            assert c.status == "unparsed" and "which chart" in c.error
        else:
            assert c.status == "exec_error" and "no chart data" in c.error, (tag, c.error)
    assert all(a.status == "inconsistent" for a in rows(ws, Answer))


def test_bad_options_are_refused_with_the_fix(sqlite_workspace):
    ws = sqlite_workspace
    for args, message in (
        (["--methods", "cot"], "unknown answering method 'cot'"),
        (["--vote", "plurality"], "unknown vote rule 'plurality'"),
        (["--questions", "accepted,abc"], "not a mix"),
        (["--questions", "ffffffffff"], "no Question with id"),
        (["--serialization", "yaml"], "unknown serialization"),
    ):
        result = runner.invoke(app, ["-w", str(ws.root), "generate", "answers", "--model", "m", *args])
        assert result.exit_code == 1, (args, result.output)
        assert message in result.output and "Traceback" not in result.output, (args, result.output)
    result = runner.invoke(app, ["-w", str(ws.root), "generate", "answers", "--model", "m"])
    assert result.exit_code == 1 and "no questions to answer" in result.output


def test_two_answer_runs_at_once_the_second_is_refused(sqlite_workspace):
    ws = sqlite_workspace
    _setup(ws, {"nofinal": 1})
    import os

    with OpenAIServer(lambda body: Scripted(text="Final Answer: 1", delay_s=20)) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "TQAFORGE_"))}
        env.update(OPENAI_BASE_URL=server.url, OPENAI_API_KEY="k", PYTHONPATH=str(REPO))
        cmd = [sys.executable, "-m", "tqaforge", "-w", str(ws.root), "generate", "answers", "--model", "m",
               "--methods", "dp"]
        first = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 30
            while not server.requests and time.monotonic() < deadline:
                time.sleep(0.05)
            assert server.requests, "the first run never asked the model"
            second = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
        finally:
            first.kill()
            first.wait(timeout=30)
    assert second.returncode == 1
    # SQLite has one writer: the library (not the CLI) holds the step's lock and says how to run several.
    assert "one process at a time runs answers" in " ".join(second.stderr.split()) and "Traceback" not in second.stderr
    assert "PostgreSQL" in second.stderr


def test_parse_reply_never_raises_on_what_a_model_may_send():
    for text in [*BROKEN.values(), "", "```", "```python", "Final Answer:" * 10_000, json.dumps({"a": 1})]:
        for method in ("DP", "TCoT", "SCoT", "PoT"):
            parsed = parse_reply(method, text)
            assert parsed.parsed or parsed.error

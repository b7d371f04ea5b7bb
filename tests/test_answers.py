"""Answer annotation end to end: agents, sandbox, vote, routing, report, resume.

The real ``openai`` client talks to the loopback server of ``tests/openai_server.py``. Its scripted
model answers by the method the prompt asks for (DP, TCoT, SCoT, PoT) and by a tag in the question:
``consistent`` (every method says 42, in different spellings), ``inconsistent`` (41 / 42 / 43),
``unparsed`` (TCoT gives no final line, PoT no code), ``hostile`` (PoT code that attacks the
sandbox). Imported TableBench questions are answered with their gold answer (charts: code that
draws the reference data), except by DP, which always says "7".
"""

from __future__ import annotations

import collections
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import wait_for
from openai_server import OpenAIServer
from sqlalchemy import func
from sqlmodel import select
from typer.testing import CliRunner

from tqaforge.answers.agents import AGENTS, chart_type_for
from tqaforge.answers.annotate import AnswerOptions, generate_answers, load_answer_options, routing_draw
from tqaforge.answers.methods import parse_methods
from tqaforge.answers.report import answers_report
from tqaforge.cli import app
from tqaforge.errors import ConfigError
from tqaforge.ingest import import_paths
from tqaforge.llm import LLMSettings
from tqaforge.sandbox import Limits, Sandbox
from tqaforge.sandbox.charts import parse_y_references
from tqaforge.schemas.enums import AnswerMethod
from tqaforge.schemas.records import Answer, AnswerCandidate, LLMCall, Question, TableRecord
from tqaforge.store import Workspace, init_workspace, open_workspace

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "sample" / "tablebench_sample.jsonl"
MODEL = "answer-model"
SECRET = "sk-test-secret-never-inside-0123456789"
runner = CliRunner(env={"COLUMNS": "200"})
GOLD = {json.loads(line)["question"]: json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()}

# --- the scripted model -----------------------------------------------------------------------


def method_of(prompt: str) -> str:
    if "who answers with a Python program" in prompt:
        return "PoT"
    if "who reasons with Python" in prompt:
        return "SCoT"
    if "Think it through in plain words" in prompt:
        return "TCoT"
    return "DP"


def question_of(prompt: str) -> str:
    return prompt.rsplit("Question: ", 1)[1].strip()


def pot(body: str) -> str:
    return "Here is the program.\n```python\nimport pandas as pd\ndf = pd.read_csv('table.csv')\n" + body + "\n```\n"


HOSTILE = {
    "loop": "while True:\n    pass",
    "secret": "import os\nprint('Final Answer: ' + os.environ.get('OPENAI_API_KEY', 'no key'))",
    "kill": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nprint('Final Answer: 42')",
    "exit": "import sys\nsys.exit(3)",
    "escape": "open('/tmp/tqaforge-escape-test.txt', 'w').write('x')\nprint('Final Answer: 42')",
}


def say(method: str, value: str) -> str:
    """One well-formed reply of ``method`` giving ``value``."""
    if method == "PoT":
        return pot(f"print('Final Answer: {value}')")
    if method == "SCoT":
        return f"Thought: count the rows.\nAction: len(df)\nResult: {value}\nFinal Answer: **{value}**"
    if method == "TCoT":
        return f"Reading the table row by row, the result is {value}.\nFinal Answer: {value}."
    return f"Final Answer: {value}"


def chart_code(reference: str, chart_type: str) -> str:
    series = parse_y_references(reference)
    lines = ["import matplotlib.pyplot as plt", "plt.figure()"]
    bottom = [0.0] * len(series[0])
    for values in series:
        lines.append(f"plt.bar(range({len(values)}), {values}, bottom={bottom})")
        bottom = [b + v for b, v in zip(bottom, values)]
    lines.append("plt.show()")
    return "```python\nimport pandas as pd\ndf = pd.read_csv('table.csv')\n" + "\n".join(lines) + "\n```\nFinal Answer: drawn"


def model_reply(body: dict) -> str:
    prompt = body["messages"][0]["content"]
    method, question = method_of(prompt), question_of(prompt)
    if question in GOLD:
        row = GOLD[question]
        if row["qsubtype"] == "ChartGeneration":
            return chart_code(row["answer"], row["chart_type"])
        return say(method, "7" if method == "DP" else row["answer"])
    tag = re.search(r"\b(consistent|inconsistent|unparsed|hostile-(\w+))\b", question)
    assert tag is not None, question
    kind = tag.group(1)
    if kind == "consistent":
        return {"PoT": pot("print(f'Final Answer: {len(df) * 0 + 42}')"), "SCoT": say("SCoT", "42.0"),
                "TCoT": say("TCoT", "42"), "DP": say("DP", "42")}[method]
    if kind == "inconsistent":
        return say(method, {"TCoT": "41", "SCoT": "42", "PoT": "43", "DP": "44"}[method])
    if kind == "unparsed":
        return {"TCoT": "I could not work this out.", "PoT": "No code today, sorry.", "SCoT": say("SCoT", "42"),
                "DP": "?"}[method]
    if method == "PoT":
        return pot(HOSTILE[tag.group(2)])
    return say(method, "42")


# --- helpers --------------------------------------------------------------------------------


def llm_settings(server: OpenAIServer, **kw: Any) -> LLMSettings:
    kw.setdefault("backoff_s", 0.01)
    kw.setdefault("backoff_max_s", 0.05)
    return LLMSettings(model=MODEL, base_url=server.url, api_key=SECRET, **kw)


def add_questions(ws: Workspace, kinds: dict[str, int], subtype: str = "Counting") -> list[str]:
    """Accepted, generated questions tagged with their kind, on the first table."""
    with ws.session() as s:
        table_id = s.exec(select(TableRecord.id).order_by(TableRecord.id)).first()
        ids = []
        for kind, n in kinds.items():
            for i in range(n):
                text = f"How many rows does question {i} ({kind}) count?"
                qid = Question.make_id(table_id, text, subtype)
                s.add(Question(id=qid, table_id=table_id, text=text, subtype=subtype, qtype="NumericalReasoning",
                               status="accepted", origin="llm"))
                ids.append(qid)
    return ids


def rows(ws: Workspace, model: type) -> list[Any]:
    with ws.session() as s:
        return list(s.exec(select(model).order_by(model.id)).all())


def votes_by_question(ws: Workspace) -> dict[str, Answer]:
    return {a.question_id: a for a in rows(ws, Answer) if a.method == "vote"}


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(workers=2, limits=Limits(wall_seconds=3, cpu_seconds=2)) as pool:
        yield pool


# --- the agents -----------------------------------------------------------------------------


def test_each_method_has_its_own_template_with_the_subtype_rules():
    from tqaforge.tables.table import Table

    table = Table.build(["a", "b"], [["1", "x"]])
    prompts = {m: AGENTS[m].prompt(table, "Is a related to b?", "CorrelationAnalysis", "markdown") for m in AnswerMethod}
    assert len(set(prompts.values())) == 4
    for text in prompts.values():
        assert "Final Answer: AnswerName1, AnswerName2..." in text
        assert "two decimals" in text  # the CorrelationAnalysis rule, from prompts/answer_formats.txt
        assert text.rstrip().endswith("Question: Is a related to b?")
    assert "Thought:" in prompts[AnswerMethod.SCOT] and "table.csv" in prompts[AnswerMethod.POT]
    counting = AGENTS[AnswerMethod.TCOT].prompt(table, "How many?", "Counting", "markdown")
    assert "two decimals" not in counting
    assert "plt.show()" in AGENTS[AnswerMethod.DP].prompt(table, "Draw a bar chart", "ChartGeneration", "markdown")


def test_methods_and_chart_types_are_read_from_what_people_write():
    assert parse_methods("tcot, SCOT,pot,tcot") == (AnswerMethod.TCOT, AnswerMethod.SCOT, AnswerMethod.POT)
    with pytest.raises(ConfigError, match="unknown answering method 'cot'"):
        parse_methods("cot")
    assert chart_type_for("Draw a horizontal bar chart of sales", None) == "hbar"
    assert chart_type_for("Please draw a pie chart", None) == "pie"
    assert chart_type_for("Draw a chart", {"chart_type": "line"}) == "line"
    assert chart_type_for("Draw something nice", None) is None


# --- generate answers, in process -----------------------------------------------------------


def test_generate_answers_votes_routes_and_a_second_run_sends_nothing(workspace, sandbox, tmp_path):
    ws = workspace
    assert not import_paths(ws, [SAMPLE]).failed
    kinds = {"consistent": 4, "inconsistent": 20, "unparsed": 3, "hostile-loop": 1, "hostile-secret": 1,
             "hostile-kill": 1, "hostile-exit": 1, "hostile-escape": 1}
    generated = add_questions(ws, kinds)
    with OpenAIServer(model_reply) as server:
        summary = generate_answers(ws, AnswerOptions(), llm_settings(server, concurrency=4), sandbox=sandbox)
        first_requests = len(server.requests)
    assert summary.stopped is None, summary.stopped
    n_gold = len(GOLD)
    assert summary.questions_done == n_gold + len(generated)
    assert first_requests == 3 * summary.questions_done  # TCoT, SCoT, PoT once each

    votes = votes_by_question(ws)
    questions = {q.id: q for q in rows(ws, Question)}
    by_kind: dict[str, list[Answer]] = collections.defaultdict(list)
    for qid, answer in votes.items():
        tag = re.search(r"\((\S+)\)", questions[qid].text)
        by_kind[tag.group(1) if tag and questions[qid].origin == "llm" else "gold"].append(answer)

    # Consistent: 42 / 42.0 / **42** agree; they go to people for verification.
    for answer in by_kind["consistent"]:
        assert (answer.status, answer.route, answer.values) == ("consistent", "verify", ["42"])
        assert len(answer.votes["candidates"]) == 3 and answer.votes["groups"] and len(answer.votes["groups"]) == 1
    # Inconsistent: every candidate kept; the seeded draw decides manual vs set aside.
    manual = [a for a in by_kind["inconsistent"] if a.route == "manual"]
    for answer in by_kind["inconsistent"]:
        assert answer.status == "inconsistent" and answer.values == []
        assert answer.votes["reason"] == "3 different answers among 3 candidates"
        expected = "manual" if routing_draw(0, answer.question_id) < 0.3 else "set_aside"
        assert answer.route == expected and answer.votes["draw"] == routing_draw(0, answer.question_id)
    assert 2 <= len(manual) <= 12  # 30% of 20, as a seeded draw gives it
    routes = collections.Counter(a.route for a in votes.values())
    assert (summary.routed_manual, summary.set_aside, summary.routed_verify) == (routes["manual"], routes["set_aside"], routes["verify"])
    # Unparsed replies are recorded with the reason, never a crash.
    for answer in by_kind["unparsed"]:
        assert answer.status == "inconsistent" and "no answer from TCoT, PoT" in answer.votes["reason"]
    cands = rows(ws, AnswerCandidate)
    unparsed = [c for c in cands if c.status == "unparsed"]
    assert {c.method for c in unparsed} == {"TCoT", "PoT"} and all(c.error for c in unparsed)
    # Hostile PoT code ends in a typed outcome; the run goes on and the secret never gets in.
    hostile = {re.search(r"hostile-(\w+)", questions[c.question_id].text).group(1): c
               for c in cands if c.method == "PoT" and "hostile" in questions[c.question_id].text}
    assert hostile["loop"].status == "exec_error" and hostile["loop"].details["execution"]["outcome"] == "timeout"
    assert hostile["exit"].status == "exec_error" and hostile["exit"].details["execution"]["exit_status"] == 3
    assert hostile["secret"].status == "ok" and hostile["secret"].values == ["no key"]
    assert hostile["kill"].status in ("ok", "exec_error")  # the kill was refused or the child alone died
    assert not Path("/tmp/tqaforge-escape-test.txt").exists()
    with ws.session() as s:
        stored = json.dumps([c.model_dump(mode="json") for c in s.exec(select(AnswerCandidate)).all()])
    assert SECRET not in stored
    # Gold answers stay; the vote is measured against them.
    assert all(a.route == "keep_gold" for a in by_kind["gold"]) and len(by_kind["gold"]) == n_gold
    charts = [a for a in by_kind["gold"] if questions[a.question_id].subtype == "ChartGeneration"]
    assert charts and all(a.status == "consistent" and a.value.startswith("y_references = [[") for a in charts)
    assert summary.candidates == 3 * summary.questions_done

    report = {(r["subtype"], r["method"]): r for r in answers_report(ws).as_dict()["rows"]}
    assert report[("ChartGeneration", "vote")]["gold_agreement"] == 1.0
    assert report[("Counting", "PoT")]["execution_rate"] < 1.0
    assert report[("(all)", "vote")]["voted"] == summary.questions_done
    assert 0 < report[("(all)", "vote")]["consistency_rate"] < 1
    assert report[("Aggregation", "TCoT")]["gold_agreement"] == 1.0
    assert report[("Counting", "TCoT")]["parse_rate"] < 1.0

    # A second run sends nothing: every selected question has its vote.
    with OpenAIServer(model_reply) as server:
        again = generate_answers(ws, AnswerOptions(), llm_settings(server), sandbox=sandbox)
        assert server.requests == []
    assert again.questions_done == 0 and again.questions_present == summary.questions_done


def test_majority_vote_and_dp_and_samples(workspace, sandbox):
    ws = workspace
    assert not import_paths(ws, [REPO / "data" / "tables" / "wtq_cricket_batting.tsv"]).failed
    add_questions(ws, {"unparsed": 1, "inconsistent": 1})
    with OpenAIServer(model_reply) as server:
        options = AnswerOptions(methods=parse_methods("dp,scot"), samples=2, vote="majority")
        summary = generate_answers(ws, options, llm_settings(server), sandbox=sandbox)
        assert len(server.requests) == 2 * 2 * 2
    assert summary.questions_done == 2 and summary.stopped is None
    votes = list(votes_by_question(ws).values())
    # unparsed: DP says "?" (no final line) twice, SCoT 42 twice -> 2 of 4 is no majority.
    assert all(v.status == "inconsistent" for v in votes)
    assert {v.votes["reason"] for v in votes} >= {"no majority: the largest group holds 2 of 4 candidates"}


def test_budget_stop_keeps_what_was_finished(workspace, sandbox):
    ws = workspace
    assert not import_paths(ws, [REPO / "data" / "tables" / "wtq_cricket_batting.tsv"]).failed
    add_questions(ws, {"consistent": 6})
    from tqaforge.llm import Price

    with OpenAIServer(model_reply) as server:
        llm = llm_settings(server, max_cost=0.02, prices={MODEL: Price(input=10.0, output=10.0)}, default_max_tokens=100)
        summary = generate_answers(ws, AnswerOptions(max_tokens=100), llm, sandbox=sandbox)
    assert summary.stop_reason is not None and summary.stop_reason.value == "budget"
    assert summary.failed and "larger budget" in summary.advice
    assert summary.questions_done < 6
    assert len(votes_by_question(ws)) == summary.questions_done


# --- the CLI, a killed run, and its resume --------------------------------------------------

CLI = [sys.executable, "-m", "tqaforge"]
RUN_ARGS = ["generate", "answers", "--model", MODEL, "--questions", "accepted"]


def _cli_env(server: OpenAIServer, database_url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "TQAFORGE_"))}
    env.update(OPENAI_BASE_URL=server.url, OPENAI_API_KEY=SECRET, PYTHONPATH=str(REPO))
    if database_url:
        env["TQAFORGE_DATABASE_URL"] = database_url
    return env


def _setup(root: Path, database_url: str | None) -> Workspace:
    env_url = os.environ.pop("TQAFORGE_DATABASE_URL", None)
    try:
        if database_url:
            os.environ["TQAFORGE_DATABASE_URL"] = database_url
        ws = init_workspace(root, name=root.name)
        assert not import_paths(ws, [REPO / "data" / "tables" / "wtq_cricket_batting.tsv"]).failed
        add_questions(ws, {"consistent": 4, "inconsistent": 6, "unparsed": 2})
        config = ws.root / "tqaforge.toml"
        config.write_text(config.read_text().replace("\n[llm]\n", "\n[llm]\nconcurrency = 2\n", 1)
                          + "\n[sandbox]\nworkers = 1\nwall_seconds = 5\n")
        return open_workspace(root)
    finally:
        os.environ.pop("TQAFORGE_DATABASE_URL", None)
        if env_url is not None:
            os.environ["TQAFORGE_DATABASE_URL"] = env_url


def _snapshot(ws: Workspace) -> dict[str, Any]:
    def take(model: type, keys: tuple[str, ...]) -> list[tuple]:
        return [tuple(json.dumps(getattr(r, k), sort_keys=True) for k in keys) for r in rows(ws, model)]

    return {
        "candidates": take(AnswerCandidate, ("id", "question_id", "method", "sample", "raw", "code", "values", "status",
                                             "error", "llm_call_id")),
        "answers": take(Answer, ("id", "question_id", "value", "values", "status", "route", "votes")),
        "calls": take(LLMCall, ("id", "messages", "text", "status", "purpose")),
    }


def _count_calls(ws: Workspace) -> int:
    with ws.session() as s:
        return s.exec(select(func.count()).select_from(LLMCall).where(LLMCall.status == "ok")).one()


def test_cli_run_killed_mid_way_resumes_without_paying_twice(tmp_path, database_url):
    crash_url = None if database_url.startswith("sqlite") else database_url
    crashed = _setup(tmp_path / "crashed", crash_url)
    reference = _setup(tmp_path / "reference", None)
    try:
        with OpenAIServer(model_reply) as server:
            done = subprocess.run([*CLI, "-w", str(reference.root), *RUN_ARGS, "--json"],
                                  env=_cli_env(server, None), capture_output=True, text=True, timeout=180)
            assert done.returncode == 0, done.stderr
            assert json.loads(done.stdout)["questions_done"] == 12
            expected_paid = collections.Counter(server.paid)
        assert sum(expected_paid.values()) == 36

        paid: collections.Counter[str] = collections.Counter()
        with OpenAIServer(model_reply) as server:
            server.stall_after(14)
            proc = subprocess.Popen([*CLI, "-w", str(crashed.root), *RUN_ARGS], env=_cli_env(server, crash_url),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            try:
                server.wait_paid(14, timeout=90)
                wait_for(lambda: _count_calls(crashed) == 14, 30, "the 14 paid calls to be committed")
                time.sleep(0.5)
                assert proc.poll() is None
            finally:
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=30)
            paid.update(server.paid)
        assert proc.returncode == -signal.SIGKILL
        partial = _snapshot(crashed)
        assert len(partial["answers"]) < 12 and len(partial["calls"]) == 14

        with OpenAIServer(model_reply) as server:
            again = subprocess.run([*CLI, "-w", str(crashed.root), *RUN_ARGS], env=_cli_env(server, crash_url),
                                   capture_output=True, text=True, timeout=180)
            assert again.returncode == 0, again.stderr
            paid.update(server.paid)
        assert max(paid.values()) == 1  # no request paid twice across both runs
        assert paid == expected_paid
        assert _snapshot(crashed) == _snapshot(reference)

        # The report and one question's candidates, through the CLI (the SQLite twin: same records).
        shown = runner.invoke(app, ["-w", str(reference.root), "answers", "report"])
        assert shown.exit_code == 0, shown.output
        assert re.search(r"\(all\)\s+vote\s+12\s", shown.output), shown.output
        qid = next(a.question_id for a in rows(reference, Answer) if a.status == "consistent")
        shown = runner.invoke(app, ["-w", str(reference.root), "answers", "show", qid[:10]])
        assert shown.exit_code == 0 and "route verify" in shown.output and "PoT  #0 ok [sandbox: ok]: 42" in shown.output
    finally:
        crashed.close()
        reference.close()


def test_answers_config_block_keys_are_the_options(sqlite_workspace):
    from dataclasses import fields

    from tqaforge.config import AnswersSection

    per_run = {"questions"}
    assert {f.name for f in fields(AnswersSection)} == {f.name for f in fields(AnswerOptions)} - per_run
    config = sqlite_workspace.root / "tqaforge.toml"
    config.write_text(config.read_text() + '\n[answers]\nmethods = "dp,pot"\nmanual_share = 0.5\n')
    ws = open_workspace(sqlite_workspace.root)
    try:
        options = load_answer_options(ws)
        assert options.methods == (AnswerMethod.DP, AnswerMethod.POT) and options.manual_share == 0.5
    finally:
        ws.close()


def test_readme_answers_and_sandbox_blocks_are_the_defaults(sqlite_workspace):
    """The [answers] and [sandbox] block of README.md loads, and equals the built-in defaults."""
    import textwrap

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = textwrap.dedent(re.search(r"```toml\n( *\[answers\]\n.*?) *```", readme, re.DOTALL).group(1))
    config = sqlite_workspace.root / "tqaforge.toml"
    config.write_text(config.read_text() + "\n" + block)
    ws = open_workspace(sqlite_workspace.root)
    try:
        assert load_answer_options(ws) == AnswerOptions()
        values = ws.config.sandbox.values()
        assert values.pop("workers") == 2
        assert Limits(**values) == Limits()
    finally:
        ws.close()


def test_sandbox_config_keys_are_the_limits():
    from dataclasses import fields

    from tqaforge.config import SandboxSection

    assert {f.name for f in fields(SandboxSection)} == {f.name for f in fields(Limits)} | {"workers"}


def test_the_vote_leaves_an_answer_people_settled_alone(workspace, monkeypatch):
    """Issue 24: people settle one question's voted answer (incorrect, corrected to 41). A run that
    did not see the earlier votes (simulated: it looks for another method name) votes again: that
    answer stays rejected, the correction stays the gold, and the summary counts it; the control
    (a vote nobody checked) is rewritten by the new run."""
    from tqaforge.annotation.adjudication import adjudicate
    from tqaforge.answers import annotate
    from tqaforge.labels import record_annotation

    ws = workspace
    assert not import_paths(ws, [REPO / "data" / "tables" / "wtq_cricket_batting.tsv"]).failed
    settled_q, control_q = add_questions(ws, {"consistent": 2})
    dp_tcot = AnswerOptions(methods=parse_methods("dp,tcot"))
    with OpenAIServer(model_reply) as server:
        generate_answers(ws, dp_tcot, llm_settings(server))
    votes = votes_by_question(ws)
    with ws.session() as s:
        for who in ("ana", "ben"):
            record_annotation(s, kind="answer_verification", target_type="answer", target_id=votes[settled_q].id,
                              annotator=who, label={"decision": "incorrect", "answer": "41"})
    adjudicate(ws, kinds=["answer_verification"])
    monkeypatch.setattr(annotate, "VOTE_METHOD", "vote-again")
    with OpenAIServer(model_reply) as server:
        again = generate_answers(ws, dp_tcot, llm_settings(server))
    assert again.questions_done == 2 and again.left_to_people == 1
    assert "1 questions whose answer people settled: left alone (their gold kept)" in again.lines()
    with ws.session() as s:
        settled = {a.id: a for a in s.exec(select(Answer).where(Answer.question_id == settled_q)).all()}
        control = s.get(Answer, votes[control_q].id)
    assert (settled[votes[settled_q].id].status, settled[votes[settled_q].id].method) == ("rejected", "vote")
    assert [a.values for a in settled.values() if a.status == "corrected"] == [["41"]]
    assert (control.status, control.method, control.route) == ("consistent", "vote-again", "verify")


def test_two_workers_store_the_records_of_one(tmp_path, monkeypatch):
    """Issue 25: answering with two workers (claims in the store) gives the same votes and
    candidates as one worker, and pays each request once (counted at the server)."""
    from tqaforge.llm.step import RunnerOptions

    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    results = []
    for workers in (1, 2):
        ws = init_workspace(tmp_path / f"w{workers}", name="t")
        assert not import_paths(ws, [REPO / "data" / "tables" / "wtq_cricket_batting.tsv"]).failed
        add_questions(ws, {"consistent": 6, "inconsistent": 6})
        with OpenAIServer(model_reply, latency_s=0.02) as server:
            summary = generate_answers(ws, AnswerOptions(methods=parse_methods("dp,tcot")), llm_settings(server),
                                       runner=RunnerOptions(workers=workers, window=2, chunk=2))
            assert server.total_paid == 24 and max(server.paid.values()) == 1
        assert summary.questions_done == 12 and summary.calls.workers == workers
        results.append(([(a.question_id, a.value, a.status, a.route) for a in rows(ws, Answer)],
                        [(c.id, c.value, c.status) for c in rows(ws, AnswerCandidate)]))
        ws.close()
    assert results[0] == results[1]

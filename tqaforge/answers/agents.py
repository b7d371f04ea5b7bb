"""The four answering agents (TableBench, "Reasoning Methods"): a prompt and a parser each.

- **DP** (direct prompting): the answer, nothing else.
- **TCoT** (textual chain of thought): reasoning in words, then the answer.
- **SCoT** (symbolic chain of thought): Thought / one-line Python Action / simulated Result, repeated;
  nothing is executed, the model simulates the results.
- **PoT** (program of thought): one Python program that reads ``table.csv`` and prints the answer;
  it really runs, in :mod:`tqaforge.sandbox`.

All four share TableBench's output contract: the last line is ``Final Answer: a, b, ...``. The
wording is ours, one template file per method (``prompts/answer_<method>.txt``), and the rules
for a subtype's answer format (the correlation relation and coefficient, trend and impact labels,
chart code that ends by drawing) come from ``prompts/answer_formats.txt``, not from code. A
ChartGeneration question is answered with code by every method: its reply's Python block is run
in the sandbox and the y data of the drawn chart are the answer, compared as TableBench compares
them (flattened, rounded to two decimals, sorted; pie charts as shares).

:func:`answer_once` makes one agent's candidate: one model call through the gateway (the
resumable, budgeted runner of :mod:`tqaforge.llm.runner` schedules them), the parse, and for code
the sandbox run. A reply that cannot be parsed or code that fails is a candidate with a status and
a reason, never an exception.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tqaforge.answers.parse import ParsedReply, answer_from_output, last_python_block, parse_reply
from tqaforge.errors import InvalidReply
from tqaforge.prompts import format_rules, render
from tqaforge.sandbox import Outcome, RunResult, Sandbox
from tqaforge.sandbox.charts import ChartReading, chart_type_of, comparable_values
from tqaforge.schemas.enums import AnswerMethod, CandidateStatus
from tqaforge.schemas.shapes import CandidateDetails, CandidateExecution
from tqaforge.tables.serialize import serialize
from tqaforge.tables.table import Table

if TYPE_CHECKING:  # the gateway imports openai (about 40 MB, 0.4 s): a release build renders prompts
    from tqaforge.llm import Gateway  # without it, and only answering passes one in

#: The subtype whose answers are charts drawn by code.
CHART_SUBTYPE = "ChartGeneration"
_HEAD = 2000  # characters of a program's stdout/stderr kept with its candidate

# Words of a question that name the chart it asks for, most specific first ("horizontal bar"
# before "bar"); used when the question carries no chart_type of its own (generated questions).
_CHART_WORDS: tuple[tuple[str, str], ...] = (
    ("horizontal bar", "hbar"), ("waterfall", "waterfall"), ("radar", "radar"), ("pie", "pie"),
    ("scatter", "scatter"), ("area", "area"), ("line", "line"), ("bar", "bar"),
)


@dataclass(frozen=True)
class Agent:
    """One reasoning method: the template it is prompted with and how its reply is read."""

    method: AnswerMethod

    @property
    def template(self) -> str:
        """The prompt file (``prompts/answer_<method>.txt``)."""
        return f"answer_{self.method.value.lower()}"

    def prompt(self, table: Table, question: str, subtype: str | None, serialization: str) -> str:
        """The prompt for one question about ``table``, with the subtype's format rules."""
        return render(
            self.template, serialization=serialization, table=serialize(table, serialization),
            question=question, format_rules=format_rules(subtype),
        )

    def parse(self, text: str) -> ParsedReply:
        """The reply read by this method's rules (final-answer line, SCoT steps, or the program)."""
        return parse_reply(self.method.value, text)


AGENTS: dict[AnswerMethod, Agent] = {method: Agent(method) for method in AnswerMethod}


def chart_type_for(question: str, meta: Mapping[str, Any] | None) -> str | None:
    """The chart a ChartGeneration question asks for: its own ``chart_type`` (TableBench's field),
    else the first chart word of its text; None when neither says."""
    given = (meta or {}).get("chart_type")
    if isinstance(given, str) and (kind := chart_type_of(given)) is not None:
        return kind
    words = " ".join(question.lower().split())
    for word, kind in _CHART_WORDS:
        if re.search(rf"\b{word}\b", words):
            return kind
    return None


@dataclass(frozen=True)
class AnswerItem:
    """What an agent needs about one question."""

    question_id: str
    question: str
    subtype: str | None
    table: Table
    chart_type: str | None = None  # set for ChartGeneration questions

    @property
    def is_chart(self) -> bool:
        return self.subtype == CHART_SUBTYPE


@dataclass
class Candidate:
    """One agent's reply, read: the answer items or why there are none."""

    method: AnswerMethod
    sample: int
    call_id: str
    raw: str
    status: CandidateStatus
    values: tuple[str, ...] = ()
    code: str | None = None
    error: str | None = None
    details: CandidateDetails = field(default_factory=lambda: CandidateDetails())
    chart_y: list[list[float]] | None = None  # the drawn data of a chart answer

    @property
    def ok(self) -> bool:
        return self.status == CandidateStatus.OK


async def answer_once(
    gateway: Gateway,
    sandbox: Sandbox | None,
    agent: Agent,
    item: AnswerItem,
    *,
    sample: int,
    serialization: str,
    temperature: float,
    max_tokens: int,
    seed: int,
    table_csv: str,
) -> Candidate:
    """One agent's candidate for one question (module docs). LLMError (budget, endpoint) propagates."""
    messages = [{"role": "user", "content": agent.prompt(item.table, item.question, item.subtype, serialization)}]
    try:
        done = await gateway.complete(
            messages, purpose=f"answer_{agent.method.value.lower()}", temperature=temperature,
            max_tokens=max_tokens, seed=seed, sample=sample,
        )
    except InvalidReply as exc:
        # A reply the gateway could not use (over the size cap, malformed after the retries) is
        # this agent's failure, not the run's: an unparsed candidate that names the call.
        call_id = exc.call_ids[-1] if exc.call_ids else ""
        return _unparsed(Candidate(agent.method, sample, call_id, "", CandidateStatus.UNPARSED), str(exc))
    parsed = agent.parse(done.text)
    candidate = Candidate(agent.method, sample, done.call_id, done.text, CandidateStatus.OK)
    if parsed.steps:
        candidate.details["steps"] = [{"thought": s.thought, "action": s.action, "result": s.result} for s in parsed.steps]
    if item.is_chart:
        code = parsed.code if agent.method == AnswerMethod.POT else last_python_block(done.text)
        if code is None:
            return _unparsed(candidate, parsed.error if agent.method == AnswerMethod.POT else "no python code block for the chart")
        return await _run_chart(candidate, code, item, sandbox, table_csv)
    if agent.method != AnswerMethod.POT:
        if not parsed.parsed:
            return _unparsed(candidate, parsed.error)
        candidate.values = parsed.values
        return candidate
    if parsed.code is None:
        return _unparsed(candidate, parsed.error)
    candidate.code = parsed.code
    assert sandbox is not None, "PoT needs a sandbox"
    result = await sandbox.arun(parsed.code, table_csv)
    candidate.details["execution"] = _execution(result)
    if result.outcome != Outcome.OK:
        candidate.status = CandidateStatus.EXEC_ERROR
        candidate.error = f"the program ended with {result.outcome.value}: {result.error or 'no detail'}"
        return candidate
    values = answer_from_output(result.stdout)
    if not values:
        return _unparsed(candidate, "the program printed no answer")
    candidate.values = values
    return candidate


async def _run_chart(candidate: Candidate, code: str, item: AnswerItem, sandbox: Sandbox | None, table_csv: str) -> Candidate:
    candidate.code = code
    if item.chart_type is None:
        return _unparsed(candidate, "the question does not say which chart to draw (no chart_type, no chart word)")
    assert sandbox is not None, "charts need a sandbox"
    candidate.details["chart_type"] = item.chart_type
    result = await sandbox.arun(code, table_csv, chart_type=item.chart_type)
    candidate.details["execution"] = _execution(result)
    reading: ChartReading | None = result.chart
    if result.outcome != Outcome.OK:
        candidate.status = CandidateStatus.EXEC_ERROR
        candidate.error = f"the chart code ended with {result.outcome.value}: {result.error or 'no detail'}"
        return candidate
    if reading is None or reading.y is None:
        candidate.status = CandidateStatus.EXEC_ERROR
        candidate.error = "no chart data could be read: " + (reading.error if reading is not None and reading.error else "nothing drawn")
        return candidate
    candidate.chart_y = reading.y
    candidate.values = tuple(f"{v:.2f}" for v in comparable_values(reading.y, item.chart_type))
    return candidate


def chart_answer_text(y: list[list[float]]) -> str:
    """A chart answer in TableBench's form: ``y_references = [[...], ...]``."""
    series = ", ".join("[" + ", ".join(_number_text(v) for v in values) + "]" for values in y)
    return f"y_references = [{series}]"


def _number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(round(float(value), 6))


def _unparsed(candidate: Candidate, reason: str | None) -> Candidate:
    candidate.status = CandidateStatus.UNPARSED
    candidate.error = reason or "unparsed"
    candidate.values = ()
    return candidate


def _execution(result: RunResult) -> CandidateExecution:
    return CandidateExecution(
        outcome=result.outcome.value, exit_status=result.exit_status, error=result.error,
        stdout=result.stdout[:_HEAD], stderr=result.stderr[-_HEAD:], isolation=list(result.isolation),
        missing=list(result.missing), seconds=round(result.seconds, 4),
        chart=result.chart.to_dict() if result.chart is not None else None,
    )

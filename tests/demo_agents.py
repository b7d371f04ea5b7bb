"""The rule that wrote ``data/batches/demo_questions_out.jsonl`` and ``demo_answers_out.jsonl``, the
agents' replies of the demo (tests/test_demo.py checks the shipped files against it): the output
files a local inference tool (``vllm run-batch``) would write for the demo's offline batches, made by
rule here, not by a model.

- The question writer (one request: subtype Aggregation on the tropical cyclones table) writes two
  questions, :data:`QUESTIONS`, whose answers this file computes from the table.
- The answering agents (TCoT and SCoT on those two questions) give those answers, but SCoT, on the
  second question, leaves out the last season it names (a slip a model makes): the agents agree on
  the first question (its vote goes to people for verification) and disagree on the second (it
  goes to people for manual annotation).

Run ``python tests/demo_agents.py WORKSPACE`` on the workspace a demo build left (it writes each
batch's requests before it reads the replies, and stops on replies that do not answer them) to
write the files again; after the questions file, build again, then write the answers file."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any, Callable

from sqlmodel import col, select

from tqaforge.demo import DEMO_AGENTS, DEMO_BATCHES, GENERATED_TABLE
from tqaforge.schemas.records import LLMBatch, TableRecord
from tqaforge.store import Workspace, open_workspace
from tqaforge.tables.table import Table

BATCHES = Path(__file__).resolve().parents[1] / "data" / "batches"
SUM_COLUMN = "severe tropical cyclones"
STORMS = ("marian", "oliver", "chloe")


def _question_texts() -> tuple[str, str]:
    return (
        f"Summing the {SUM_COLUMN} column, how many {SUM_COLUMN} were recorded over all seasons in the table?",
        f"How many tropical lows were there, in total, in the seasons whose strongest storm is {', '.join(STORMS[:-1])} "
        f"or {STORMS[-1]}?",
    )


QUESTIONS = _question_texts()


def _number(text: str) -> int:
    return int(text.replace(",", "").strip())


def answers(table: Table) -> dict[str, tuple[str, str]]:
    """{question: (the right answer, SCoT's answer)}, computed from the table."""
    header = list(table.header)
    total = sum(_number(row[header.index(SUM_COLUMN)]) for row in table.rows)
    lows = {row[header.index("strongest storm")]: _number(row[header.index("tropical lows")]) for row in table.rows}
    right = sum(lows[s] for s in STORMS)
    slip = sum(lows[s] for s in STORMS[:-1])
    return {QUESTIONS[0]: (str(total), str(total)), QUESTIONS[1]: (str(right), str(slip))}


def _table(ws: Workspace) -> Table:
    with ws.session() as s:
        for record in s.exec(select(TableRecord).order_by(col(TableRecord.id))).all():
            if record.imported_from and Path(record.imported_from).name == GENERATED_TABLE:
                return record.to_table()
    raise AssertionError(f"{GENERATED_TABLE} is not in the workspace")


def _writer(request: dict[str, Any], found: dict[str, tuple[str, str]]) -> str:
    return json.dumps(list(QUESTIONS))


def _agent(request: dict[str, Any], found: dict[str, tuple[str, str]]) -> str:
    asked = re.findall(r"^Question: (.*)$", request["messages"][-1]["content"], flags=re.M)[-1]
    right, scot = found[asked]
    if request["purpose"] == "answer_scot":
        return (f"Thought: the question needs the rows it names.\nAction: add their values.\nResult: {scot}\n"
                f"Final Answer: {scot}")
    return f"Adding the values the question needs gives {right}.\nFinal Answer: {right}"


#: Which file a batch's replies go to, and who writes them, by the purpose of its requests.
WRITERS: dict[str, tuple[str, Callable[[dict[str, Any], dict[str, tuple[str, str]]], str]]] = {
    "generate_questions": ("questions", _writer),
    "answer_tcot": ("answers", _agent),
    "answer_scot": ("answers", _agent),
}


def demo_replies(ws: Workspace) -> dict[str, list[dict[str, Any]]]:
    """{batch name (DEMO_BATCHES): its output lines} of the demo's offline batches in ``ws``."""
    found = answers(_table(ws))
    with ws.session() as s:
        batches = s.exec(select(LLMBatch).where(LLMBatch.kind == "offline").order_by(col(LLMBatch.created_at))).all()
    out: dict[str, list[dict[str, Any]]] = {}
    for batch in batches:  # the latest batch of each file counts (an earlier one had stale replies)
        assert batch.requests is not None
        lines: list[dict[str, Any]] = []
        for n, custom_id in enumerate(batch.custom_ids):
            request = batch.requests[custom_id]
            name, write = WRITERS[request["purpose"]]
            out[name] = lines
            body = {"id": f"demo-{name}-{n}", "object": "chat.completion", "created": 0, "model": DEMO_AGENTS,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": write(request, found)},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 300, "completion_tokens": 40, "total_tokens": 340}}
            lines.append({"id": f"demo-{name}-out-{n}", "custom_id": custom_id,
                          "response": {"status_code": 200, "body": body}, "error": None})
    return out


def render(lines: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)


if __name__ == "__main__":
    BATCHES.mkdir(parents=True, exist_ok=True)
    for batch_name, batch_lines in demo_replies(open_workspace(Path(sys.argv[1]))).items():
        (BATCHES / DEMO_BATCHES[batch_name]).write_text(render(batch_lines), encoding="utf-8")

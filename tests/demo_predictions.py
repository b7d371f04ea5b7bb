"""The rule that wrote ``data/predictions/probes_dp.jsonl`` (tests/test_demo.py checks the shipped file
against it): one DP reply per probe of the demo (seed 0, the ten tables of ``data/tables``), right
for every kind but ``range``, whose reply forgets the header row (one row short: ``A1:E10`` for
``A1:E11``), a mistake a model makes. So 50 of the 60 probes are right: 83.33 overall, 100 on
``Grounding`` (cell probes), 80 on ``StructureUnderstanding``.

Run ``python tests/demo_predictions.py WORKSPACE`` on a workspace holding the demo's probes to write
the file again."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from sqlmodel import col, select

from tqaforge.schemas.records import Answer, Question
from tqaforge.store import Workspace, open_workspace

PREDICTIONS = Path(__file__).resolve().parents[1] / "data" / "predictions" / "probes_dp.jsonl"
MODEL = "probe-rule"


def wrong_range(gold: str) -> str:
    """The range one row short (the header row forgotten)."""
    found = re.fullmatch(r"A1:([A-Z]+)(\d+)", gold)
    assert found, gold
    return f"A1:{found.group(1)}{int(found.group(2)) - 1}"


def probe_predictions(ws: Workspace) -> list[dict[str, str]]:
    """The lines of the file: every seed-0 probe of ``ws``, by question id."""
    with ws.session() as s:
        rows = s.exec(select(Question.id, Question.meta, Answer.value).join(Answer, col(Answer.question_id) == col(Question.id))
                      .where(Question.origin == "rule", Question.seed == 0, Answer.method == "probe")
                      .order_by(col(Question.id))).all()
    lines = []
    for qid, meta, gold in rows:
        kind = meta["probe"]["kind"]
        answer = wrong_range(gold) if kind == "range" else gold
        lines.append({"id": qid, "model_name": MODEL, "instruction_type": "DP", "prediction": f"Final Answer: {answer}"})
    return lines


def render(lines: list[dict[str, str]]) -> str:
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)


if __name__ == "__main__":
    PREDICTIONS.write_text(render(probe_predictions(open_workspace(Path(sys.argv[1])))), encoding="utf-8")

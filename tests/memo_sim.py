"""A release of made-up tables and a scripted model that has memorised some of them, for the
memorisation probe tests (tests/test_health_memorisation.py, tests/test_hostile_health_memorisation.py).

The model answers every probe of a memorised table from the table's real CSV text (the header
continued verbatim, the next row, the withheld cell) and every probe of another table with a
plausible but wrong text; it recognises the probe's kind from the prompt's shape only (the last
user message), so it answers tabmemcheck's own prompts (few-shot examples and all) the same way.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from tqaforge.health.memorisation import csv_lines
from tqaforge.tables.table import Table

SYLLABLES = ["ka", "lo", "mi", "ne", "su", "ta", "vo", "ri", "pe", "zu", "ba", "do"]


def made_up_table(k: int, rows: int = 12, cols: int = 4) -> Table:
    """A table of distinct made-up words (letters only: pandas reads them as they are)."""
    rng = random.Random(1000 + k)

    def word() -> str:
        return "".join(rng.choice(SYLLABLES) for _ in range(3)) + chr(ord("a") + k % 26)

    header = [f"col{k}{'abcdefgh'[c]}" for c in range(cols)]
    return Table.build(header, [[word() for _ in range(cols)] for _ in range(rows)])


def write_benchmark(path: Path, tables: list[Table]) -> Path:
    """One TableBench item per table (a lookup of its first cell)."""
    rows = []
    for k, t in enumerate(tables):
        answer = t.rows[0][0] if t.n_rows else "none"
        rows.append({"id": f"memo-{k:02d}", "qtype": "FactChecking", "qsubtype": "MatchBased",
                     "table": {"columns": list(t.header), "data": [list(r) for r in t.rows]},
                     "question": f"What is the first cell of table {k}?", "answer": answer})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def build(root: Path, tables: list[Table]) -> tuple[Path, Path, Path]:
    """The workspace ``root/ws``, release 1.0.0 at ``root/release`` (one item per table) and one
    evaluation of it (``root/eval``: a system that gives the gold)."""
    from tqaforge.evaluate.harness import EvaluateOptions, evaluate
    from tqaforge.evaluate.predictions import load_release
    from tqaforge.ingest import import_paths
    from tqaforge.release.build import ReleaseOptions, build_release
    from tqaforge.store import init_workspace

    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("TQAFORGE_DATABASE_URL", raising=False)
        ws = init_workspace(root / "ws", name="memo")
        try:
            summary = import_paths(ws, [write_benchmark(root / "memo.jsonl", tables)])
            assert not summary.failed, summary
            build_release(ws, ReleaseOptions(version="1.0.0", out=root / "release", subsets=("base",)))
        finally:
            ws.close()
    refs = load_release(root / "release").references
    preds = root / "preds.jsonl"
    preds.write_text("".join(json.dumps({"id": r.id, "model": "gold", "method": "DP", "prediction": f"Final Answer: {r.answer_text}"}) + "\n"
                             for r in refs), encoding="utf-8")
    evaluate(EvaluateOptions(release=root / "release", predictions=preds, out=root / "eval", plots=False))
    return root / "ws", root / "release", root / "eval"


class MemorisingModel:
    """The scripted model (module docs): ``memorised`` tables answered from their text."""

    def __init__(self, memorised: list[Table]) -> None:
        self.files = ["".join(line + "\n" for line in csv_lines(t)) for t in memorised]
        self.lines = [csv_lines(t) for t in memorised]
        self.tables = memorised

    def __call__(self, body: dict[str, Any]) -> str:
        return self.answer(body["messages"])

    def answer(self, messages: list[dict[str, Any]]) -> str:
        """The reply to the last user message (a worked example's answer gives a cell's column name)."""
        prompt = str(messages[-1]["content"])
        if " = " in prompt and "\n" not in prompt:  # a row with a cell withheld
            shown = [str(m["content"]) for m in messages if m["role"] == "assistant"]
            return self._cell(prompt, shown[-1].split(" = ", 1)[0] if shown else "value")
        for text in self.files:  # the start of a file, cut inside a row
            if text.startswith(prompt) and len(prompt) < len(text) and not text[len(prompt) - 1] == "\n":
                return text[len(prompt): len(prompt) + 500]
        shown = prompt.split("\n")  # consecutive rows
        for lines in self.lines:
            for i in range(len(lines) - len(shown)):
                if lines[i: i + len(shown)] == shown:
                    return lines[i + len(shown)]
        if prompt.endswith("\n") or "," in prompt.split("\n")[-1]:
            return "zzz,qqq,www,xxx" if "\n" in prompt else "qq,ww,ee\nrr,tt,yy\n"
        return "I do not know."

    def _cell(self, prompt: str, name: str) -> str:
        shown = dict(part.split(" = ", 1) for part in prompt.split(", ") if " = " in part)
        for t in self.tables:
            header = list(t.header)
            missing = [h for h in header if h not in shown]
            if len(missing) != 1:
                continue
            for row in t.rows:
                if all(shown.get(h) == v for h, v in zip(header, row) if h in shown):
                    return f"{missing[0]} = {row[header.index(missing[0])]}"
        return f"{name} = unknown"  # a table it has not seen: the column the examples name, a wrong value

"""A small made-up benchmark for question-only answering (tests/test_health_question_only.py and
its hostile cases): a yes/no subtype whose gold is mostly "Yes" (a model that says "Yes" without
looking at any table gets it right) and a counting subtype it cannot guess. Every table cell is a
canary: a string no question contains, so a prompt that holds one holds the table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import pytest

if TYPE_CHECKING:
    from tqaforge.llm import LLMSettings
    from tqaforge.store import Workspace

N_PER_SUBTYPE = 10
YES_NO_QUESTION = "Is the club of player {i} listed among the winners?"
COUNT_QUESTION = "How many players scored more than {n} goals in season {i}?"


def cells(i: int) -> list[list[str]]:
    """Item ``i``'s table rows: canary values (no question holds them)."""
    return [[f"zqplayer{i}r{r}", str(913_000 + 17 * i + r), f"club{i}x{r}qz"] for r in range(4)]


def write_benchmark(path: Path) -> Path:
    """The TableBench-format file: MatchBased (9 of 10 golds "Yes") and Counting (golds 2..11)."""
    rows: list[dict[str, Any]] = []
    for i in range(N_PER_SUBTYPE):
        table = {"columns": ["player", "goals", "club"], "data": cells(i)}
        rows.append({"id": f"yn{i:02d}", "qtype": "FactChecking", "qsubtype": "MatchBased", "table": table,
                     "question": YES_NO_QUESTION.format(i=i), "answer": "Yes" if i < N_PER_SUBTYPE - 1 else "No"})
        table = {"columns": ["player", "goals", "club"], "data": cells(100 + i)}
        rows.append({"id": f"ct{i:02d}", "qtype": "NumericalReasoning", "qsubtype": "Counting", "table": table,
                     "question": COUNT_QUESTION.format(n=10 + i, i=i), "answer": str(i + 2)})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def build_release(root: Path) -> Path:
    """The benchmark imported into a workspace of its own and frozen at ``root/release`` (base)."""
    from tqaforge.ingest import import_paths
    from tqaforge.release.build import ReleaseOptions, build_release
    from tqaforge.store import init_workspace

    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("TQAFORGE_DATABASE_URL", raising=False)
        ws = init_workspace(root / "build-ws", name="qonly")
        try:
            assert not import_paths(ws, [write_benchmark(root / "qonly.jsonl")]).failed
            build_release(ws, ReleaseOptions(version="1.0.0", out=root / "release", subsets=("base",)))
        finally:
            ws.close()
    return root / "release"


def says_yes(body: dict[str, Any]) -> str:
    """The scripted model: "Yes" to every yes/no question, 1 to every count (right only by luck)."""
    prompt = str(body["messages"][-1]["content"])
    return "I cannot see the table; most such claims hold.\nFinal Answer: Yes" if "among the winners" in prompt else "Final Answer: 1"


def table_cells(release: Path) -> set[str]:
    """Every cell and header of every table of ``release`` that no question contains."""
    from tqaforge.evaluate.predictions import load_release

    loaded = load_release(release)
    questions = " ".join(r.question for r in loaded.references)
    found: set[str] = set()
    for ref in loaded.references:
        table = loaded.table(ref)
        for value in [*table["header"], *(c for row in table["rows"] for c in row)]:
            if str(value) and str(value) not in questions:
                found.add(str(value))
    return found


@pytest.fixture(scope="module", name="release")
def bench_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The benchmark's release (shared by a module's tests)."""
    return build_release(tmp_path_factory.mktemp("qonly"))


@pytest.fixture(name="ws")
def fresh_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    """A fresh workspace (its own ledger: nothing answered from another test's calls)."""
    from tqaforge.store import init_workspace

    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    made = init_workspace(tmp_path / "ws", name="t")
    yield made
    made.close()


def llm_of(server: Any, model: str, **kw: Any) -> LLMSettings:
    """The scripted server's settings for ``model``: short backoffs, so retries take no time."""
    from tqaforge.llm import LLMSettings

    return LLMSettings(model=model, base_url=server.url, api_key="sk-test", backoff_s=0.01, backoff_max_s=0.02, **kw)

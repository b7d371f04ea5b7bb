"""Hostile cases of the step runner's options and of two commands at once (issue 25).

Bad values of --workers, --transport, --budget and --batch-file are refused with a clear error and
exit status != 0 before any request reaches the endpoint (counted at a loopback server).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from openai_server import OpenAIServer
from sqlmodel import select
from typer.testing import CliRunner

from tqaforge.cli import app
from tqaforge.ingest import import_paths
from tqaforge.schemas.records import Question, TableRecord
from tqaforge.store import Workspace

pytestmark = pytest.mark.hostile

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner(env={"COLUMNS": "200"})


def _ready(ws: Workspace) -> None:
    assert not import_paths(ws, [REPO / "data" / "tables" / "wtq_cricket_batting.tsv"]).failed
    with ws.session() as s:
        table_id = s.exec(select(TableRecord.id)).first()
        text = "How many rows are there?"
        s.add(Question(id=Question.make_id(table_id, text, "Counting"), table_id=table_id, text=text,
                       subtype="Counting", qtype="NumericalReasoning", status="accepted", origin="llm"))


@pytest.mark.parametrize("args, says", [
    (["--workers", "0"], "--workers"),
    (["--transport", "pigeon"], "--transport"),
    (["--transport", "offline"], "--batch-file"),
    (["--budget", "x" * 200], "budget"),
])
def test_bad_runner_options_are_refused_before_any_request(sqlite_workspace: Workspace, monkeypatch: pytest.MonkeyPatch,
                                                           args: list[str], says: str) -> None:
    _ready(sqlite_workspace)
    with OpenAIServer(lambda body: "Final Answer: 1") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        result = runner.invoke(app, ["-w", str(sqlite_workspace.root), "generate", "answers", "--model", "m",
                                     "--methods", "dp", *args])
        assert result.exit_code != 0, result.output
        assert says in " ".join(result.output.split()) and "Traceback" not in result.output
        assert not server.requests
    # Control: the same command with good options reaches the server.
    with OpenAIServer(lambda body: "Final Answer: 1") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        result = runner.invoke(app, ["-w", str(sqlite_workspace.root), "generate", "answers", "--model", "m",
                                     "--methods", "dp", "--workers", "2"])
        assert result.exit_code == 0, result.output
        assert server.total_paid == 1

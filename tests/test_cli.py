"""The command line: every command has --help; the foundation commands work end to end."""

from __future__ import annotations

import click
import pytest
import typer
from conftest import shared_data_path
from typer.testing import CliRunner

from tqaforge.cli import app
from tqaforge.queries import list_tables
from tqaforge.store import open_workspace

runner = CliRunner(env={"COLUMNS": "200"})


def _all_command_paths() -> list[list[str]]:
    root = typer.main.get_command(app)
    paths: list[list[str]] = []

    def walk(cmd: click.Command, prefix: list[str]) -> None:
        paths.append(prefix)
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                walk(sub, [*prefix, name])

    walk(root, [])
    return paths


@pytest.mark.parametrize("path", _all_command_paths(), ids=lambda p: " ".join(p) or "tqaforge")
def test_every_command_has_help(path):
    result = runner.invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output
    assert "--help" in result.output


def test_foundation_commands_end_to_end(tmp_path, monkeypatch):
    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    ws = tmp_path / "bench"
    assert runner.invoke(app, ["init", str(ws), "--name", "bench"]).exit_code == 0
    assert (ws / "tqaforge.toml").exists() and (ws / "tqaforge.db").exists()

    csv = tmp_path / "t.csv"
    csv.write_text("year,teams,goals,games,avg\n" + "".join(f"{2000 + i},{i},{i * 3},{i + 9},{i / 2}\n" for i in range(9)))
    result = runner.invoke(app, ["--workspace", str(ws), "tables", "import", str(csv)])
    assert result.exit_code == 0, result.output
    assert "imported 1 tables" in result.output

    result = runner.invoke(app, ["--workspace", str(ws), "tables", "import", str(csv)])
    assert "imported 0 tables" in result.output and "already present: 1 tables" in result.output

    monkeypatch.chdir(ws)  # the workspace around the cwd is found without --workspace
    listing = runner.invoke(app, ["tables", "list"])
    assert listing.exit_code == 0 and "t.csv" in listing.output
    tid = list_tables(open_workspace())[0].id
    assert tid[:12] in listing.output
    shown = runner.invoke(app, ["tables", "show", tid[:8]])
    assert shown.exit_code == 0 and "9 rows x 5 columns" in shown.output and "2008" in shown.output

    status = runner.invoke(app, ["status", "--json"])
    assert status.exit_code == 0 and '"tables"' in status.output


def test_import_reports_failures_and_exits_nonzero(tmp_path, monkeypatch):
    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    ws = tmp_path / "ws"
    runner.invoke(app, ["init", str(ws)])
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n3\n")
    good = tmp_path / "good.csv"
    good.write_text("a,b\n1,2\n")
    result = runner.invoke(app, ["-w", str(ws), "tables", "import", str(bad), str(good)])
    assert result.exit_code == 1
    assert "bad.csv" in result.output and "failed paths: 1 of 2" in result.output
    assert "imported 1 tables" in result.output
    assert "Traceback" not in result.output


def test_errors_are_messages_not_tracebacks(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["tables", "list"])
    assert result.exit_code == 1
    assert "tqaforge init" in result.output and "Traceback" not in result.output
    runner.invoke(app, ["init", str(tmp_path / "w")])
    result = runner.invoke(app, ["-w", str(tmp_path / "w"), "tables", "show", "nope"])
    assert result.exit_code == 1 and "no table with id 'nope'" in result.output


def test_questions_list_filters(tmp_path, monkeypatch):
    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    path = shared_data_path("tablebench", "TableBench.jsonl")
    ws = tmp_path / "ws"
    runner.invoke(app, ["init", str(ws)])
    assert runner.invoke(app, ["-w", str(ws), "tables", "import", str(path)]).exit_code == 0
    result = runner.invoke(app, ["-w", str(ws), "questions", "list", "--subtype", "ChartGeneration", "--limit", "100"])
    assert result.exit_code == 0
    assert result.output.count("ChartGeneration") == 50

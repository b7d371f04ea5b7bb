"""Hostile inputs at the command line: markup in data, option placement, startup, listing counts.

Each test names the case of the hardening issue it guards. The CLI is run through Typer's runner
(the real command functions, a real workspace on SQLite) or as a real process where start-up or
the terminal matters.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tqaforge.cli import app

pytestmark = pytest.mark.hostile

runner = CliRunner()


@pytest.fixture
def ws_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    monkeypatch.delenv("TQAFORGE_WORKSPACE", raising=False)
    ws = tmp_path / "ws"
    result = runner.invoke(app, ["init", str(ws)])
    assert result.exit_code == 0, result.output
    return ws


def _csv(path: Path, header: list[str], rows: int = 3) -> Path:
    lines = [",".join(header)] + [",".join(str(i * 10 + j) for j in range(len(header))) for i in range(rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_markup_closing_tag_in_a_header_is_printed_not_parsed(ws_dir: Path, tmp_path: Path) -> None:
    """Rich markup: a header `[/]` crashed `tables import` and `tables show` with MarkupError."""
    src = _csv(tmp_path / "closing.csv", ["name", "[/]", "value"])
    result = runner.invoke(app, ["-w", str(ws_dir), "tables", "import", str(src)])
    assert result.exit_code == 0, result.output
    assert "imported 1 tables" in result.output
    table_id = _first_table_id(ws_dir)
    shown = runner.invoke(app, ["-w", str(ws_dir), "tables", "show", table_id], terminal_width=200)
    assert shown.exit_code == 0, shown.output
    assert "[/]" in shown.output


def test_tablebench_bracket_headers_survive(ws_dir: Path, tmp_path: Path) -> None:
    """Rich markup: TableBench's headers lost `[km]`, `[m above MSL]`, `[citation needed]`."""
    src = _csv(tmp_path / "brackets.csv", ["river", "length [km]", "height [m above MSL]", "note [citation needed]"])
    assert runner.invoke(app, ["-w", str(ws_dir), "tables", "import", str(src)]).exit_code == 0
    shown = runner.invoke(app, ["-w", str(ws_dir), "tables", "show", _first_table_id(ws_dir)], terminal_width=300)
    assert shown.exit_code == 0, shown.output
    for header in ("[km]", "[m above MSL]", "[citation needed]"):
        assert header in shown.output


def test_hints_keep_their_brackets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rich markup: hints lost `[llm]` and `[[taxonomy.category]]` (printed as markup)."""
    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    result = runner.invoke(app, ["init", str(tmp_path / "ws"), "--taxonomy", "nonsense"])
    assert result.exit_code == 1
    assert "[[taxonomy.category]]" in result.output or "custom" in result.output
    ws = tmp_path / "ws2"
    assert runner.invoke(app, ["init", str(ws)]).exit_code == 0
    for var in ("TQAFORGE_LLM_MODEL", "OPENAI_MODEL"):
        monkeypatch.delenv(var, raising=False)
    typed = runner.invoke(app, ["-w", str(ws), "questions", "classify", "--method", "llm"])
    assert typed.exit_code == 1
    assert "[llm] model" in typed.output


def test_help_texts_keep_their_brackets() -> None:
    """Rich markup: help texts with brackets (`[row, col]`-style) were eaten by Typer's rich mode."""
    result = runner.invoke(app, ["agreement", "resolve", "--help"], terminal_width=200)
    assert result.exit_code == 0
    assert '{"cells": [[0, 1]]}' in result.output


def test_a_path_with_bold_markup_is_printed_as_written(ws_dir: Path, tmp_path: Path) -> None:
    """Rich markup: a path containing `[bold]` was printed wrongly."""
    folder = tmp_path / "runs[bold]x"
    folder.mkdir()
    src = _csv(folder / "t[red].csv", ["a", "b"])
    result = runner.invoke(app, ["-w", str(ws_dir), "tables", "import", str(src)])
    assert result.exit_code == 0, result.output
    listing = runner.invoke(app, ["-w", str(ws_dir), "tables", "list"], terminal_width=300)
    assert "t[red].csv" in listing.output


def test_workspace_option_after_the_subcommand(ws_dir: Path, tmp_path: Path) -> None:
    """New user: `tqaforge tables list --workspace DIR` was refused after the subcommand."""
    src = _csv(tmp_path / "t.csv", ["a", "b"])
    assert runner.invoke(app, ["tables", "import", str(src), "--workspace", str(ws_dir)]).exit_code == 0
    listing = runner.invoke(app, ["tables", "list", "--workspace", str(ws_dir)], terminal_width=200)
    assert listing.exit_code == 0, listing.output
    assert "t.csv" in listing.output
    status = runner.invoke(app, ["status", "-w", str(ws_dir), "--json"])
    assert status.exit_code == 0, status.output
    assert json.loads(status.output)["stages"]["tables"]["total"] == 1


def test_help_imports_no_heavy_library() -> None:
    """New user: `--help` took 2.6-4 s because the openai client, pandas and SQLAlchemy were imported.

    The time itself is measured by benchmarks/cli_startup.py; this checks the cause in a real process.
    """
    code = (
        "import sys; from tqaforge.cli import app\n"
        "heavy = [m for m in ('openai', 'pandas', 'sqlalchemy', 'sqlmodel', 'numpy', 'httpx') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


def test_lists_say_how_many_there_are(ws_dir: Path, tmp_path: Path) -> None:
    """Silent acceptance: lists stopped at 50 without saying "50 of 811"."""
    for i in range(4):
        _csv(tmp_path / f"t{i}.csv", ["a", f"b{i}"], rows=i + 1)
    assert runner.invoke(app, ["-w", str(ws_dir), "tables", "import", str(tmp_path)]).exit_code == 0
    listing = runner.invoke(app, ["-w", str(ws_dir), "tables", "list", "--limit", "3"], terminal_width=200)
    assert listing.exit_code == 0, listing.output
    assert "3 of 4 tables" in listing.output
    assert "--offset 3" in listing.output


def _first_table_id(ws_dir: Path) -> str:
    result = runner.invoke(app, ["-w", str(ws_dir), "status", "--json"])
    assert result.exit_code == 0
    from tqaforge import queries
    from tqaforge.store import open_workspace

    ws = open_workspace(ws_dir)
    try:
        return queries.list_tables(ws, limit=1).items[0].id
    finally:
        ws.close()


def test_cli_runs_as_a_process_without_a_terminal(ws_dir: Path) -> None:
    """New user: the installed command prints plain text when piped (no markup codes, no crash)."""
    env = {**os.environ, "TQAFORGE_WORKSPACE": str(ws_dir)}
    result = subprocess.run([sys.executable, "-m", "tqaforge", "tables", "list"], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert "no tables" in result.stdout


def test_two_generations_at_once_one_refuses_with_a_message(ws_dir: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Concurrency: two commands on one workspace either both succeed or one refuses with a message.

    A second `generate questions` while one runs would send the same requests and pay twice.
    """
    from tqaforge.store import open_workspace

    # A table to generate for: the plan is checked before the step runner takes its lock.
    imported = runner.invoke(app, ["-w", str(ws_dir), "tables", "import", str(_csv(tmp_path / "t.csv", ["a", "b"]))])
    assert imported.exit_code == 0, imported.output
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    ws = open_workspace(ws_dir)
    try:
        with ws.lock("step questions"):  # the step runner's lock of question rounds (SQLite: one process)
            result = runner.invoke(app, ["-w", str(ws_dir), "generate", "questions", "--model", "m", "--max-cost", "1"])
    finally:
        ws.close()
    assert result.exit_code == 1
    said = " ".join(result.output.split())  # as one line, however the console wrapped it
    assert "another tqaforge command" in said and "running step questions" in said
    assert "PostgreSQL" in said and "Traceback" not in said


def test_import_size_limit_and_encoding_are_flags(ws_dir: Path, tmp_path: Path) -> None:
    """Hangs and unbounded resources: the readers' size bound is the --max-file-size flag its
    messages name; a Latin-1 file decodes with --encoding; a bad value is a usage error."""
    big = _csv(tmp_path / "big.csv", ["a", "b"], rows=200)
    result = runner.invoke(app, ["-w", str(ws_dir), "tables", "import", str(big), "--max-file-size", "1KB"])
    assert result.exit_code == 1
    assert "big.csv" in result.output and "--max-file-size" in result.output
    bad = runner.invoke(app, ["-w", str(ws_dir), "tables", "import", str(big), "--max-file-size", "lots"])
    assert bad.exit_code == 2 and "not a size" in bad.output
    latin = tmp_path / "latin.csv"
    latin.write_bytes("name,value\ncaf\xe9,1\nna\xefve,2\n".encode("latin-1"))
    ok = runner.invoke(app, ["-w", str(ws_dir), "tables", "import", str(latin), "--encoding", "latin-1"])
    assert ok.exit_code == 0, ok.output
    unknown = runner.invoke(app, ["-w", str(ws_dir), "tables", "import", str(latin), "--encoding", "klingon"])
    assert unknown.exit_code == 2 and "unknown encoding" in unknown.output


def test_deeply_nested_label_is_a_usage_error(ws_dir: Path) -> None:
    """Deeply nested JSON, typed by a person: `agreement resolve TASK '[[[[...'` gave a traceback."""
    result = runner.invoke(app, ["-w", str(ws_dir), "agreement", "resolve", "abc", "[" * 100_000, "--by", "ana"])
    assert result.exit_code == 2
    assert "nested too deeply" in result.output


# What a `tqaforge` process's Arrow ends up with when the user's ARROW_DEFAULT_MEMORY_POOL is
# not a pool Arrow knows (tqaforge.arrow_memory): pyarrow loaded after the CLI's import.
_POOL_PROBE = "import tqaforge.cli, pyarrow; print(pyarrow.default_memory_pool().backend_name)"


def _pool_probe(value: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ARROW_DEFAULT_MEMORY_POOL": value, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.run([sys.executable, "-c", _POOL_PROBE], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("value", ["bogus", "System", " system"])
def test_an_arrow_pool_arrow_does_not_know_is_reported_and_replaced(value: str) -> None:
    done = _pool_probe(value)
    assert done.returncode == 0, done.stderr
    # Left alone, Arrow warns in its own words and allocates from mimalloc (the control below).
    assert done.stdout.strip() == "system"
    assert f"ARROW_DEFAULT_MEMORY_POOL={value!r} is not one of Arrow's memory pools" in done.stderr
    assert "Unsupported backend" not in done.stderr


def test_an_unknown_arrow_pool_is_what_arrow_would_fall_back_on() -> None:
    # The control: without tqaforge's import, the same value gives mimalloc and Arrow's warning.
    env = {**os.environ, "ARROW_DEFAULT_MEMORY_POOL": "bogus"}
    done = subprocess.run([sys.executable, "-c", "import pyarrow; print(pyarrow.default_memory_pool().backend_name)"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.stdout.strip() == "mimalloc"
    assert "Unsupported backend 'bogus'" in done.stderr


def test_an_empty_arrow_pool_is_the_system_one_without_a_warning() -> None:
    done = _pool_probe("")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "system"
    assert "ARROW_DEFAULT_MEMORY_POOL" not in done.stderr

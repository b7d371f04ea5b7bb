"""The sandbox runs programs as scripts and reports typed outcomes (real worker processes, no mocks)."""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path
from typing import Iterator

import pytest
from typer.testing import CliRunner

from tqaforge.cli import app
from tqaforge.errors import SandboxError
from tqaforge.sandbox import Limits, Outcome, Sandbox

TABLE = "team,points,year\nred,3,2020\nblue,5,2020\nred,4,2021\n"


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    with Sandbox(workers=2) as sandbox:
        yield sandbox


def test_pandas_program_prints_final_answer(box: Sandbox) -> None:
    r = box.run(textwrap.dedent("""
        import pandas as pd
        df = pd.read_csv('table.csv')
        totals = df.groupby('team')['points'].sum()
        print(f"Final Answer: {totals.idxmax()}, {totals.max()}")
    """), TABLE)
    assert r.outcome is Outcome.OK and r.exit_status == 0 and r.error is None
    assert r.stdout == "Final Answer: red, 7\n"
    assert r.to_dict()["outcome"] == "ok" and any(line.startswith("outcome: ok") for line in r.lines())


def test_functions_and_comprehensions_see_top_level_names(box: Sandbox) -> None:
    r = box.run(textwrap.dedent("""
        import pandas as pd
        df = pd.read_csv('table.csv')
        factor = 10
        def scaled(col):
            return [v * factor for v in df[col]]
        print(__name__, scaled('points'), [factor for _ in range(2)])
    """), TABLE)
    assert r.outcome is Outcome.OK, r
    assert r.stdout.strip() == "__main__ [30, 50, 40] [10, 10]"


def test_exception_outcome_names_the_type(box: Sandbox) -> None:
    r = box.run("import pandas as pd\ndf = pd.read_csv('table.csv')\nprint(df['missing'])", TABLE)
    assert r.outcome is Outcome.EXCEPTION and r.exit_status == 1
    assert r.error is not None and r.error.startswith("KeyError")
    assert "program.py" in r.stderr and "line 3" in r.stderr


def test_syntax_error_is_an_exception(box: Sandbox) -> None:
    r = box.run("print('unclosed'", TABLE)
    assert r.outcome is Outcome.EXCEPTION and (r.error or "").startswith("SyntaxError")


@pytest.mark.parametrize(("code", "outcome", "status"), [
    ("import sys\nsys.exit(0)", Outcome.OK, 0),
    ("import sys\nsys.exit()", Outcome.OK, 0),
    ("import sys\nsys.exit(3)", Outcome.EXCEPTION, 3),
    ("import sys\nsys.exit('bad input')", Outcome.EXCEPTION, 1),
])
def test_sys_exit(box: Sandbox, code: str, outcome: Outcome, status: int) -> None:
    r = box.run(code, TABLE)
    assert (r.outcome, r.exit_status) == (outcome, status), r


def test_table_and_scratch_directory(box: Sandbox) -> None:
    r = box.run("import os\nprint(sorted(os.listdir('.')))\nopen('out.txt', 'w').write('x')\nprint(os.path.getsize('out.txt'))", TABLE)
    assert r.outcome is Outcome.OK and r.stdout == "['table.csv']\n1\n"
    r = box.run("import os\nprint(sorted(os.listdir('.')))", TABLE)
    assert r.stdout == "['table.csv']\n"  # a fresh directory per run


def test_file_size_limit(box: Sandbox) -> None:
    r = box.run("open('big', 'wb').write(b'x' * (3 * 1024 * 1024))", TABLE, limits=Limits(file_mb=1))
    assert r.outcome is Outcome.EXCEPTION and "File too large" in (r.error or ""), r


def test_chart_is_read_back(box: Sandbox) -> None:
    r = box.run("import matplotlib.pyplot as plt\nplt.bar(['a', 'b'], [1, 2.5])", TABLE, chart_type="bar")
    assert r.outcome is Outcome.OK and r.chart is not None and r.chart.y == [[1.0, 2.5]]
    assert r.to_dict()["chart"] == {"chart_type": "bar", "y": [[1.0, 2.5]], "error": None}


def test_arun(box: Sandbox) -> None:
    async def both() -> list[str]:
        results = await asyncio.gather(box.arun("print(1)", TABLE), box.arun("print(2)", TABLE))
        return [r.stdout for r in results]

    assert asyncio.run(both()) == ["1\n", "2\n"]


@pytest.mark.parametrize("limits", [
    Limits(cpu_seconds=0), Limits(wall_seconds=-1), Limits(memory_mb=1), Limits(open_files=3),
    Limits(processes=0), Limits(output_bytes=0), Limits(wall_seconds=float("nan")), Limits(memory_mb=1.5),  # type: ignore[arg-type]
])
def test_limits_are_validated(box: Sandbox, limits: Limits) -> None:
    with pytest.raises(SandboxError) as info:
        box.run("print(1)", TABLE, limits=limits)
    assert "sandbox limits:" in str(info.value) and "hint: pass" in str(info.value)


def test_bad_pool_size() -> None:
    with pytest.raises(SandboxError):
        Sandbox(workers=0)


def test_cli_run(tmp_path: Path) -> None:
    program = tmp_path / "p.py"
    program.write_text("import pandas as pd\nprint('Final Answer:', pd.read_csv('table.csv')['points'].sum())\n")
    table = tmp_path / "t.csv"
    table.write_text(TABLE)
    runner = CliRunner()
    res = runner.invoke(app, ["sandbox", "run", str(program), "--table", str(table), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["outcome"] == "ok" and data["stdout"] == "Final Answer: 12\n" and "process" in data["isolation"]
    program.write_text("raise ValueError('nope')\n")
    res = runner.invoke(app, ["sandbox", "run", str(program), "--table", str(table)])
    assert res.exit_code == 1 and "outcome: exception" in res.output and "ValueError: nope" in res.output
    res = runner.invoke(app, ["sandbox", "run", str(program), "--table", str(tmp_path / "absent.csv")])
    assert res.exit_code == 1 and "cannot read the" in res.output and "no such file" in res.output


def _in_fresh_python(code: str) -> str:
    """What ``code`` prints, run by a fresh interpreter with this checkout on its path."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root,
                          env={"PYTHONPATH": str(root)}, timeout=120).stdout


def test_the_zygote_fills_the_holes_of_the_small_object_allocator() -> None:
    # In a fresh interpreter: 2,500 holes in the pools of 96-byte blocks (every other one of 5,000
    # bytes objects of 60 bytes freed); the zygote's filling takes them all, so that what is still free
    # of that size is at most the one pool the allocator starts afresh (16 KiB / 96 bytes).
    code = textwrap.dedent("""
        import json
        from tqaforge.sandbox.worker import _fill_free_blocks, _free_blocks
        objects = [bytes(60) for _ in range(5000)]
        del objects[::2]
        before = _free_blocks()
        kept = _fill_free_blocks()
        print(json.dumps([before, _free_blocks(), len(kept)]))
    """)
    out = _in_fresh_python(code)
    before, after, kept = json.loads(out)
    assert before["96"] >= 2500, before  # the control: the holes are seen
    assert after["96"] <= 16384 // 96, after
    assert kept >= 2500


def test_the_zygote_fills_the_holes_of_the_heap() -> None:
    # In a fresh interpreter: 1,000 holes of 200 bytes in glibc's heap (every other one of 2,000
    # allocations freed); the filling takes them: the free chunks the arena counts (beyond the few
    # of the per-thread cache) fall from over 1,000 to a handful.
    code = textwrap.dedent("""
        import json
        from tqaforge.sandbox.worker import _fill_heap_holes, glibc_malloc
        libc = glibc_malloc()
        if libc is None:
            print(json.dumps(None))
            raise SystemExit
        ptrs = [libc.malloc(200) for _ in range(2000)]
        libc.malloc(200)  # the last hole is not next to the top of the heap
        for p in ptrs[::2]:
            libc.free(p)
        before = libc.mallinfo2().ordblks
        kept = _fill_heap_holes()
        print(json.dumps([before, kept, libc.mallinfo2().ordblks]))
    """)
    out = _in_fresh_python(code)
    got = json.loads(out)
    if got is None:
        pytest.skip("not glibc >= 2.33")
    before, kept, after = got
    assert before >= 900, got  # the control: the holes are counted
    assert kept >= 900 and after <= 50, got

"""Programs run in batches (tqaforge.evaluate.batches) give what each gives run alone in the sandbox:
well-behaved programs, programs that leave state behind for the next one, and programs that end or
break the batch (exit, os._exit, loops past the limits, too much output, MemoryError, threads,
signal handlers). Each batched result is compared with the same program's own sandbox run."""

from __future__ import annotations

from typing import Iterator

import pytest

from tqaforge.evaluate.batches import Program, run_batched
from tqaforge.sandbox import Limits, Outcome, RunResult, Sandbox

pytestmark = pytest.mark.hostile

BAR = "import matplotlib.pyplot as plt\nplt.bar([0, 1, 2], [1.0, 2.0, 3.0])\n"
CHART = ("import matplotlib.pyplot as plt\nimport pandas as pd\ndf = pd.read_csv('table.csv')\nplt.figure()\n"
         "plt.plot(list(df['b']))\nplt.show()\n")
TABLE = "a,b\nx,1\ny,2\n"


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    with Sandbox(workers=1, limits=Limits(wall_seconds=3, cpu_seconds=2, output_bytes=20_000)) as sandbox:
        yield sandbox


def _seen(result: RunResult) -> tuple[object, ...]:
    """What scoring reads of a result: how it ended, what it printed, the chart it drew."""
    return result.outcome, result.stdout, None if result.chart is None else result.chart.to_dict()


def _check(programs: list[Program], box: Sandbox, monkeypatch: pytest.MonkeyPatch, runs: int | None = 1) -> list[tuple[RunResult, ...]]:
    """Batched and alone alike; ``runs``: the sandbox runs the batch took (one: every program reported by its driver)."""
    calls: list[str] = []
    run = box.run

    def counted(code: str, *args: object, **kwargs: object) -> RunResult:
        calls.append(code)
        return run(code, *args, **kwargs)  # type: ignore[arg-type]

    with monkeypatch.context() as patch:
        patch.setattr(box, "run", counted)
        batched = run_batched(programs, box, batch_size=len(programs))
    assert len(batched) == len(programs)
    if runs is not None:
        assert len(calls) == runs
    for program, results in zip(programs, batched):
        alone = program.alone(box)
        assert [_seen(r) for r in results] == [_seen(r) for r in alone], program.code
    return batched


def test_well_behaved_programs_and_charts_give_what_they_give_alone(box: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    programs = [
        Program(CHART, TABLE, "line"),
        Program("print('Final Answer: 3')\n", TABLE, None),
        Program("import pandas as pd\nprint(pd.read_csv('table.csv')['b'].sum())\n", "a,b\nx,5\ny,6\n", None),
        Program("raise ValueError('no')\n", TABLE, None),
        Program("import sys\nsys.exit(3)\n", TABLE, None),
        Program("import sys\nsys.exit('a message')\n", TABLE, None),
        Program("def broken(:\n", TABLE, None),
        Program(BAR + "print(1)\n", TABLE, "bar"),
    ]
    batched = _check(programs, box, monkeypatch)
    assert batched[0][0].outcome is Outcome.OK and batched[0][0].chart is not None and batched[0][0].chart.y == [[1.0, 2.0]]
    assert batched[2][0].stdout == "11\n"


def test_a_chart_twice_over_gives_the_code_alone_and_the_script_of_it_twice(box: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    programs = [
        Program(CHART, TABLE, "line", again=True),
        Program(BAR, TABLE, "bar", again=True),
        Program(BAR + "print('drawn')\n", TABLE, "bar", again=True),
        Program(BAR + "import sys\nsys.exit(0)\n", TABLE, "bar", again=True),
        Program(BAR + "x = undefined\n", TABLE, "bar", again=True),
        # The second half sees the first half's names, as in the script twice over.
        Program("try:\n    n += 1\nexcept NameError:\n    n = 0\n" + BAR.replace("[1.0, 2.0, 3.0]", "[n, n, n]"), TABLE, "bar", again=True),
        # Compiles alone, not twice over (a __future__ import after the first line): run alone both ways.
        Program("from __future__ import annotations\n" + BAR, TABLE, "bar", again=True),
    ]
    batched = _check(programs, box, monkeypatch, runs=3)  # the batch, then the last one alone, both ways
    assert len(batched[1]) == 2 and batched[1][1].chart is not None and batched[1][1].chart.y == [[1.0, 2.0, 3.0]] * 2
    assert batched[2][1].stdout == "drawn\ndrawn\n"
    assert batched[6][1].outcome is Outcome.EXCEPTION


def test_what_a_program_leaves_behind_is_not_seen_by_the_next(box: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    look = ("import os, sys, numpy as np, matplotlib\nprint(sorted(os.listdir('.')), os.getcwd() == os.path.dirname(__file__),"
            " open('table.csv').read(), os.environ.get('LEFT'), np.random.rand(), matplotlib.rcParams['lines.linewidth'],"
            " len(sys.argv), sys.path[0] == os.getcwd())\n")
    programs = [
        Program("import os, numpy as np, matplotlib\nopen('table.csv', 'w').write('gone')\nopen('left.txt', 'w').write('x')\n"
                "os.mkdir('d')\nos.environ['LEFT'] = '1'\nnp.random.seed(7)\nmatplotlib.rcParams['lines.linewidth'] = 9\n"
                "import sys\nsys.argv.append('x')\nsys.path.insert(0, '/')\nos.chdir('d')\n", TABLE, None),
        Program(look, "c\n5\n", None),
        Program(BAR + "plt.figure()\n", TABLE, None),
        Program("import matplotlib.pyplot as plt\nprint(plt.get_fignums())\n", TABLE, "bar"),
    ]
    _check(programs, box, monkeypatch)


@pytest.mark.parametrize("breaker", [
    "import os\nos._exit(0)\n",  # ends the batch: the rest still runs
    "while True:\n    pass\n",  # past the CPU limit: alone, a timeout
    "print('x' * 30_000)\n",  # past the output limit: alone, output_limit
    "raise MemoryError\n",  # alone, a memory outcome
    "import threading, time\nthreading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n",
    "import signal\nsignal.signal(signal.SIGALRM, lambda *a: print('late'))\nsignal.alarm(1)\n",
    "import builtins\nbuiltins.print = lambda *a, **k: None\n",
    # A tree deeper than the recursion limit, its last directory unreadable: the next program still finds only table.csv.
    "import os\nfor _ in range(1200):\n    os.mkdir('d')\n    os.chdir('d')\nos.chmod('.', 0)\nprint('deep')\n",
])
def test_a_program_that_breaks_the_batch_costs_the_others_nothing(box: Sandbox, breaker: str, monkeypatch: pytest.MonkeyPatch) -> None:
    programs = [
        Program("print('before')\n", TABLE, None),
        Program(breaker, TABLE, None),
        Program("print('after')\n", TABLE, None),
        Program(CHART, TABLE, "line", again=True),
    ]
    batched = _check(programs, box, monkeypatch, runs=None)
    assert batched[0][0].stdout == "before\n" and batched[2][0].stdout == "after\n"
    assert batched[3][1].outcome is Outcome.OK


def test_one_program_a_run_keeps_a_library_changed_in_place_from_the_next(box: Sandbox) -> None:
    """What the driver cannot reset (a library changed in place) is seen by the next program of a
    batch, as in TableBench's single process (the control); with one program a run
    (``--programs-per-run 1``) every program starts from a fresh sandbox child and sees none of it."""
    patch = Program("import pandas\npandas.read_csv = lambda *a, **k: 'patched'\n", TABLE, None)
    look = Program("import pandas\nprint(type(pandas.read_csv('table.csv')).__name__)\n", TABLE, None)
    together = run_batched([patch, look], box, batch_size=2)
    alone = run_batched([patch, look], box, batch_size=1)
    assert together[1][0].stdout.strip() == "str"  # the control: the patch is seen in one run
    assert alone[1][0].stdout.strip() == "DataFrame"

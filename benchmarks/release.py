"""A release of all of TableBench with ToRR's grid, and its evaluation, against TableBench's own script.

1. Import TableBench's 886 items (gold imported with the benchmark) and build ToRR's grid (none +
   shuffle rows, shuffle columns, transpose, insert empty rows; every item, seed 0), outside the
   timing; then **build the release** (timed): base, structure and the configurations subset (35
   prompts an item in ToRR's seven serializations: 31,010). Target: under 20 s.
2. Write a seeded predictions file over **every row** (base items, structure variants, the 31,010
   prompts): right, wrong or unparsable replies, and for chart questions Python code that draws the
   references (or a wrong chart); then **evaluate** it (timed, in-process, sandbox included). Target:
   the whole grid scored under 60 s.
3. The 886 base items in TableBench's inference format, scored **by our harness** (``tqaforge
   evaluate`` as a process) and **by TableBench's own scripts** (``parse_tablebench_instruction_
   response_script.py`` then ``eval_tablebench_script.py``, run unmodified from a copy of its public
   repository in their own virtualenv), both timed as processes from start to finish, in the same
   run; the scores of both are printed side by side. Target: ours 2x faster (issue 26;
   ``benchmarks/evaluate.py`` runs this part alone, repeated, with an earlier commit's code beside).
4. **Peak memory** of ``release build`` at 1x (the 886 items) and 10x (8,860 items: TableBench ten
   times, each copy's tables made distinct by a suffix on the first column's name, with the grid
   built for every item), each build a child process (its own peak RSS, ``VmHWM``), with
   today's code and with the code of ``--before`` (default: the commit before the streamed
   release, taken from git into a temporary folder), in the same run. Targets: 1x < 250 MB,
   10x < 300 MB (flat in the item count), and < 10 s and < 100 s. ``--scale 0`` skips it.

TableBench's scripts fetch their ROUGE metric over the network (``evaluate.load('rouge')``) and
import ``datasets.load_metric`` (gone from datasets 3): the run puts two small stand-in modules on
their path, ``evaluate`` (ROUGE-L from ``rouge_score`` with its bootstrap aggregator, which is what
the fetched metric computes) and ``datasets`` (the unused import). Nothing else of theirs changes.

Setup of their environment, once (git-ignored):

    python3 -m venv .venv-tablebench && .venv-tablebench/bin/pip install pandas matplotlib rouge_score wrapt_timeout_decorator

Run (TableBench's repository: a clone, or the mirror ``fetch`` leaves):

    .venv/bin/python benchmarks/release.py [--tablebench-repo PATH] [--keep DIR] [--scale 10] [--before REV]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tqaforge.evaluate.harness import EvaluateOptions, evaluate
from tqaforge.ingest import import_paths
from tqaforge.release.build import ReleaseOptions, build_release
from tqaforge.sandbox.charts import parse_y_references
from tqaforge.store import Workspace, init_workspace
from tqaforge.tables.perturb import TORR_PERTURBATIONS
from tqaforge.variants.grid import GridOptions, build_variant_grid

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "tablebench" / "TableBench.jsonl"
MIRROR = Path("/work/.mirror/TableBench+TableBench/repo")
TB_PYTHON = REPO / ".venv-tablebench" / "bin" / "python"
SETUP = "python3 -m venv .venv-tablebench && .venv-tablebench/bin/pip install pandas matplotlib rouge_score wrapt_timeout_decorator"
SEED = 0
#: The last commit before the streamed release (``--before``'s default).
BEFORE = "02ad2970537ecd1e99dfe86c8bdf5ac693547614"
#: One release build as a child process, as `tqaforge release build` runs it (the same Arrow allocator):
#: the code under argv[1], the workspace argv[2], out argv[3].
BUILD_CHILD = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
try:  # what `tqaforge` does before any command (tqaforge.arrow_memory); older code did not
    from tqaforge.arrow_memory import prefer_system_allocator
    prefer_system_allocator()
except ImportError:
    pass
from tqaforge.release.build import ReleaseOptions, build_release
from tqaforge.store import open_workspace
ws = open_workspace(Path(sys.argv[2]))
start = time.perf_counter()
summary = build_release(ws, ReleaseOptions(version="1.0.0", out=Path(sys.argv[3]), accept_low_agreement="benchmark"))
seconds = time.perf_counter() - start
# VmHWM: the peak RSS of this process's own memory since exec (module docs: why not ru_maxrss).
peak_kb = int(Path("/proc/self/status").read_text().split("VmHWM:")[1].split()[0])
print(json.dumps({"seconds": seconds, "rows": sum(summary.counts.values()), "peak_kb": peak_kb}))
"""
#: A workspace made by the code under argv[1] at argv[2], from the TableBench file argv[3], with
#: ToRR's grid (part 1's set-up): an older commit cannot open a workspace that newer code
#: migrated further (its migrations stop earlier), so each side builds from its own workspace.
SETUP_CHILD = """
import sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from tqaforge.ingest import import_paths
from tqaforge.store import init_workspace
from tqaforge.tables.perturb import TORR_PERTURBATIONS
from tqaforge.variants.grid import GridOptions, build_variant_grid
ws = init_workspace(Path(sys.argv[2]), name="tablebench")
import_paths(ws, [Path(sys.argv[3])])
build_variant_grid(ws, GridOptions(perturbations=("none", *TORR_PERTURBATIONS), serializations=("csv",),
                                   write_prompts=False, skip_structural=False, status=None))
ws.close()
"""

# Stand-ins for the two network-only imports of TableBench's scripts (module docs).
EVALUATE_SHIM = '''
from rouge_score import rouge_scorer, scoring

class _Rouge:
    def compute(self, predictions, references):
        scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL", "rougeLsum"], use_stemmer=False)
        aggregator = scoring.BootstrapAggregator()
        for reference, prediction in zip(references, predictions):
            aggregator.add_scores(scorer.score(reference, prediction))
        result = aggregator.aggregate()
        return {key: value.mid.fmeasure for key, value in result.items()}

def load(name, *args, **kwargs):
    assert name == "rouge", name
    return _Rouge()
'''
DATASETS_SHIM = "def load_metric(*a, **k):\n    raise RuntimeError('not used')\n\ndef list_metrics():\n    return []\n"


def _draw(chart_type: str, answer: str, right: bool) -> str:
    """Chart code that draws the references (``right``) or something else."""
    try:
        y = parse_y_references(answer)
    except ValueError:
        y = [[1.0]]
    if not right:
        y = [[v + 1 for v in series] for series in y]
    lines = ["import matplotlib.pyplot as plt", "import pandas as pd", "df = pd.read_csv('table.csv')", "plt.figure()"]
    for series in y:
        xs = list(range(len(series)))
        if chart_type == "pie":
            lines.append(f"plt.pie({series})")
        elif chart_type == "hbar":
            lines.append(f"plt.barh({xs}, {series})")
        elif chart_type in ("bar", "waterfall"):
            lines.append(f"plt.bar({xs}, {series})")
        elif chart_type == "scatter":
            lines.append(f"plt.scatter({xs}, {series})")
        else:
            lines.append(f"plt.plot({xs}, {series})")
    lines.append("plt.show()")
    return "\n".join(lines) + "\n"


def _reply(row: dict[str, Any], rng: random.Random) -> str:
    draw = rng.random()
    if row.get("qsubtype") == "ChartGeneration":
        code = _draw(row.get("chart_type") or "line", row.get("answer_text") or ", ".join(row["answer"]), draw < 0.6)
        return f"Here is the code.\n```python\n{code}```"
    answer = row.get("answer_text") or ", ".join(row["answer"])
    if draw < 0.6:
        return f"The table shows it.\nFinal Answer: {answer}"
    if draw < 0.85:
        return "The table shows it.\nFinal Answer: 42"
    return f"I think it is {answer}."  # no final-answer line: unparsed


def _rows(release: Path, subset: str) -> list[dict[str, Any]]:
    path = release / "data" / f"{subset}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def timed_process(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, from ``wait4``: the figure a loaded machine
    disturbs least) of one run of ``cmd``; exits with its output when it fails."""
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        start = time.perf_counter()
        child = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=stdout, stderr=stderr)
        _, status, usage = os.wait4(child.pid, 0)  # its CPU times (Popen.wait would reap it first)
        seconds = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            stdout.seek(0)
            stderr.seek(0)
            sys.exit(f"{' '.join(cmd[:3])} failed:\n{stdout.read()[-2000:]}\n{stderr.read()[-3000:]}")
    return seconds, usage.ru_utime + usage.ru_stime


def _tablebench_copy(repo: Path, into: Path) -> Path:
    """A fresh copy of TableBench's repository (a clone's work tree, or the mirror's HEAD)."""
    target = into / "TableBench"
    shutil.rmtree(target, ignore_errors=True)  # --keep DIR of an earlier run
    if (repo / "eval_tablebench_script.py").exists():
        shutil.copytree(repo, target, ignore=shutil.ignore_patterns(".git"))
    else:
        target.mkdir()
        archive = subprocess.run(["git", "--git-dir", str(repo), "archive", "HEAD"], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    for sub in ("inference_results", "parsed_results", "evaluation_results"):
        shutil.rmtree(target / "eval_examples" / sub, ignore_errors=True)
        (target / "eval_examples" / sub).mkdir(parents=True)
    return target


def _scaled(data: Path, scale: int, out: Path) -> Path:
    """TableBench ``scale`` times: copy k > 0 has new ids and a first column named ``NAME (k)``."""
    rows = [json.loads(line) for line in data.read_text(encoding="utf-8").splitlines() if line.strip()]
    with out.open("w", encoding="utf-8") as f:
        for k in range(scale):
            for row in rows:
                if k:
                    row = {**row, "id": f"{row['id']}-{k}",
                           "table": {**row["table"], "columns": [f"{row['table']['columns'][0]} ({k})", *row["table"]["columns"][1:]]}}
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return out


def _child_build(code: Path, ws: Path, out: Path) -> tuple[float, float, float, int]:
    """(seconds of the build, CPU seconds of the whole child, its peak RSS in MB, rows) of one
    build (CPU time is the figure a loaded machine disturbs least). The peak is the child's own
    ``VmHWM``: Linux carries the parent's RSS high-water mark over fork and exec into the child's
    ``ru_maxrss`` (``wait4``, ``RUSAGE_CHILDREN``), so a child of this large process would report
    at least this process's peak."""
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        child = subprocess.Popen([sys.executable, "-c", BUILD_CHILD, str(code), str(ws), str(out)],
                                 stdout=stdout, stderr=stderr, env={**os.environ, "TQAFORGE_DATABASE_URL": ""})
        _, status, usage = os.wait4(child.pid, 0)  # its CPU times (Popen.wait would reap it first)
        child.returncode = os.waitstatus_to_exitcode(status)
        stdout.seek(0)
        stderr.seek(0)
        if child.returncode != 0:
            sys.exit(f"release build in a child failed:\n{stderr.read()[-3000:]}")
        done = json.loads(stdout.read().strip().splitlines()[-1])
    return done["seconds"], usage.ru_utime + usage.ru_stime, done["peak_kb"] / 1024, done["rows"]


def _child_setup(code: Path, ws: Path, data: Path) -> None:
    """:data:`SETUP_CHILD` with the code under ``code`` (not timed); nothing when ``ws`` exists
    already (``--keep DIR`` of an earlier run)."""
    if (ws / "tqaforge.db").exists():
        return
    done = subprocess.run([sys.executable, "-c", SETUP_CHILD, str(code), str(ws), str(data)], capture_output=True,
                          text=True, env={**os.environ, "TQAFORGE_DATABASE_URL": ""})
    if done.returncode != 0:
        sys.exit(f"workspace set-up with the code under {code} failed:\n{done.stderr[-3000:]}")


def memory(tmp: Path, ws1: Path, scale: int, before: str) -> None:
    """Part 4 (module docs): peak RSS and time of 1x and ``scale``x builds, before and after,
    each side building from a workspace its own code made (the same data, so the same rows)."""
    old = tmp / "before"
    old.mkdir(exist_ok=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", before, "tqaforge"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
    start = time.perf_counter()
    scaled = tmp / f"TableBench-x{scale}.jsonl"
    if not scaled.exists():
        _scaled(DATA, scale, scaled)
    _child_setup(REPO, tmp / f"ws{scale}", scaled)
    _child_setup(old, tmp / "ws1-before", DATA)
    _child_setup(old, tmp / f"ws{scale}-before", scaled)
    print(f"\nsetup of 1x (before) and {scale}x (both; not timed): {time.perf_counter() - start:.1f} s")
    print(f"{'release build, child process':<28} {'before: s':>10} {'CPU s':>6} {'MB':>6}   {'after: s':>9} {'CPU s':>6} {'MB':>6}")
    for label, ws_after, ws_before in (("1x", ws1, tmp / "ws1-before"), (f"{scale}x", tmp / f"ws{scale}", tmp / f"ws{scale}-before")):
        figures = []
        for name, code, ws in (("before", old, ws_before), ("after", REPO, ws_after)):
            figures.append(_child_build(code, ws, tmp / f"mem-{name}-{label}"))
            shutil.rmtree(tmp / f"mem-{name}-{label}", ignore_errors=True)
        (b_s, b_cpu, b_mb, b_rows), (a_s, a_cpu, a_mb, rows) = figures
        same = "" if b_rows == rows else f"  (before: {b_rows:,} rows)"
        print(f"{label + f' ({rows:,} rows)':<28} {b_s:>10.2f} {b_cpu:>6.1f} {b_mb:>6.0f}   {a_s:>9.2f} {a_cpu:>6.1f} {a_mb:>6.0f}{same}")


def setup(tmp: Path) -> Workspace:
    """Part 1's set-up (not timed): TableBench imported into ``tmp/ws`` and ToRR's grid built."""
    ws: Workspace = init_workspace(tmp / "ws", name="tablebench")
    start = time.perf_counter()
    imported = import_paths(ws, [DATA])
    grid = build_variant_grid(ws, GridOptions(perturbations=("none", *TORR_PERTURBATIONS), serializations=("csv",),
                                              write_prompts=False, skip_structural=False, status=None))
    print(f"setup (not timed): {imported.total('questions_new')} questions imported, {grid.variants_new} variants built, {time.perf_counter() - start:.1f} s")
    return ws


def build(ws: Workspace, release: Path) -> None:
    """Part 1's timed release build into ``release``."""
    start = time.perf_counter()
    summary = build_release(ws, ReleaseOptions(version="1.0.0", out=release, accept_low_agreement="benchmark"))
    build_s = time.perf_counter() - start
    size = sum(p.stat().st_size for p in release.rglob("*") if p.is_file()) / 1e6
    print(f"release build: {build_s:.2f} s  ({', '.join(f'{k} {v}' for k, v in summary.counts.items() if v)}; {size:.0f} MB)  target < 20 s")


def tablebench_predictions(release: Path, tmp: Path) -> Path:
    """Part 3's predictions: the release's base items in TableBench's inference format, one seeded
    reply each (one file for both harnesses)."""
    rng = random.Random(SEED + 1)
    tb_rows = []
    for row in _rows(release, "base"):
        tb_rows.append({
            "id": row["source_id"], "qtype": row["qtype"], "qsubtype": row["qsubtype"], "instruction": "", "instruction_type": "DP",
            "table": {"columns": row["table"]["header"], "data": row["table"]["rows"]}, "question": row["question"],
            "answer": row["answer_text"], "chart_type": row["chart_type"], "model_name": "synthetic", "prediction": _reply(row, rng),
        })
    tb_file = tmp / "synthetic=TableBench_DP.jsonl"
    tb_file.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in tb_rows), encoding="utf-8")
    return tb_file


def run_ours(code: Path, release: Path, tb_file: Path, out: Path) -> tuple[float, float, dict[str, Any]]:
    """``tqaforge evaluate`` of ``tb_file`` as a process, with the code under ``code`` (this
    worktree, or an older commit's copy): wall and CPU seconds, and its ``scores.json``."""
    shutil.rmtree(out, ignore_errors=True)
    # As on a user's machine (and as TableBench's side runs): modules are imported from cached
    # bytecode. With PYTHONDONTWRITEBYTECODE set (some CI hosts), every run would compile tqaforge's
    # modules again, about 60 ms that no user pays; precompile() caches them before the timing.
    env = _writing_bytecode() | {"PYTHONPATH": str(code)}
    wall, cpu = timed_process([sys.executable, "-m", "tqaforge", "evaluate", "--release", str(release), "--predictions", str(tb_file),
                               "--no-plots", "--json", "--out", str(out)], out.parent, env)
    return wall, cpu, json.loads((out / "scores.json").read_text())


def precompile(python: Path | str, folder: Path) -> None:
    """Write the bytecode of every module under ``folder`` with ``python`` (outside the timing), so
    that no timed run compiles source (see :func:`run_ours`)."""
    subprocess.run([str(python), "-m", "compileall", "-q", str(folder)], check=True, capture_output=True,
                   env=_writing_bytecode())


def _writing_bytecode() -> dict[str, str]:
    """This environment without PYTHONDONTWRITEBYTECODE: Python caches bytecode, as on a user's machine."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def tablebench_ready(repo: Path) -> bool:
    """Whether TableBench's scripts can run: its virtualenv, and its repository (a clone or a mirror)."""
    if TB_PYTHON.exists() and ((repo / "eval_tablebench_script.py").exists() or (repo / "HEAD").exists()):
        return True
    print(f"TableBench's script not run: needs {TB_PYTHON} ({SETUP}) and its repository (--tablebench-repo)")
    return False


def prepare_theirs(source: Path, tmp: Path, tb_file: Path) -> Path:
    """A copy of TableBench's repository under ``tmp`` with ``tb_file`` as its inference results
    and the two stand-in modules (module docs) beside it."""
    repo = _tablebench_copy(source, tmp)
    shims = tmp / "shims"
    shims.mkdir(exist_ok=True)
    (shims / "evaluate.py").write_text(EVALUATE_SHIM)
    (shims / "datasets.py").write_text(DATASETS_SHIM)
    shutil.copy(tb_file, repo / "eval_examples" / "inference_results" / tb_file.name)
    return repo


def run_theirs(repo: Path) -> tuple[float, float]:
    """TableBench's parse then eval scripts, each a process: their wall and CPU seconds together."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(repo.parent / "shims"), "MPLBACKEND": "Agg", "HOME": str(repo.parent)}
    results = repo / "eval_examples" / "evaluation_results"
    shutil.rmtree(results, ignore_errors=True)
    results.mkdir()
    parse_s, parse_cpu = timed_process([str(TB_PYTHON), "parse_tablebench_instruction_response_script.py"], repo, env)
    eval_s, eval_cpu = timed_process([str(TB_PYTHON), "eval_tablebench_script.py"], repo, env)
    return parse_s + eval_s, parse_cpu + eval_cpu


def compare_scores(repo: Path, ours: dict[str, Any], *, show: bool = True) -> tuple[int, int]:
    """Our TableBench-compatible scores beside those TableBench's scripts wrote (printed when
    ``show``): the number of groups (subtypes, types, Overall) with equal scores, and of groups."""
    results = repo / "eval_examples" / "evaluation_results"
    theirs = json.loads((results / "llm_eval_subtype_results.json").read_text())["synthetic/DP"]
    their_types = json.loads((results / "llm_eval_type_results.json").read_text())["synthetic/DP"]
    mine = {r["group"]: r for r in ours["rows"] if r["subset"] == "base"}
    lines = [f"\n{'group':<48} {'ours':>8} {'TableBench':>10}"]
    subtypes = types = 0
    for group in sorted(theirs):
        value = theirs[group][mine[group]["metric"]] if mine[group]["metric"] in theirs[group] else None
        subtypes += value == mine[group]["tablebench"]
        lines.append(f"{group:<48} {mine[group]['tablebench']:>8.2f} {value!s:>10}")
    for qtype, scores in their_types.items():
        value = scores.get("Mix_Metric", scores.get("EM", scores.get("Pass@1")))
        types += value == mine[qtype]["tablebench"]
        lines.append(f"{qtype:<48} {mine[qtype]['tablebench']:>8.2f} {value!s:>10}")
    lines.append(f"equal scores: {subtypes} of {len(theirs)} subtypes, {types} of {len(their_types)} types and Overall")
    if show:
        print("\n".join(lines))
    return subtypes + types, len(theirs) + len(their_types)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tablebench-repo", type=Path, default=MIRROR, help="TableBench's repository (a clone, or a bare mirror)")
    parser.add_argument("--keep", type=Path, default=None, help="keep the workspace, release and predictions here")
    parser.add_argument("--scale", type=int, default=10, help="part 4's larger release: TableBench this many times (0: skip part 4)")
    parser.add_argument("--before", default=BEFORE, help="the commit whose release build part 4 compares with")
    parser.add_argument("--memory-only", action="store_true", help="run parts 1 and 4 only")
    args = parser.parse_args()
    if not DATA.exists():
        sys.exit(f"TableBench's data is not at {DATA}")
    tmp = Path(args.keep or tempfile.mkdtemp(prefix="tqaforge-bench-release-"))
    tmp.mkdir(parents=True, exist_ok=True)
    ws = setup(tmp)
    release = tmp / "release"
    build(ws, release)
    if args.memory_only:
        ws.close()
        if args.scale:
            memory(tmp, tmp / "ws", args.scale, args.before)
        return

    rng = random.Random(SEED)
    everything = [row for sub in ("base", "structure", "configurations") for row in _rows(release, sub)]
    predictions = tmp / "all.jsonl"
    with predictions.open("w", encoding="utf-8") as f:
        for row in everything:
            f.write(json.dumps({"id": row["id"], "model": "synthetic", "prediction": _reply(row, rng)}, ensure_ascii=False) + "\n")
    start = time.perf_counter()
    report = evaluate(EvaluateOptions(release=release, predictions=predictions, plots=False, out=tmp / "all.eval"))
    eval_s = time.perf_counter() - start
    torr = report.torr[0] if report.torr else None
    print(f"evaluate every row: {eval_s:.2f} s  ({report.matched} predictions, {report.programs_run} programs run; "
          f"ToRR P {torr.performance if torr else '-'} R {torr.robustness if torr else '-'})  target < 60 s")

    tb_file = tablebench_predictions(release, tmp)
    precompile(sys.executable, REPO / "tqaforge")
    ours_s, ours_cpu, ours = run_ours(REPO, release, tb_file, tmp / "tb.eval")
    print(f"886 base items, ours (tqaforge evaluate, a process): {ours_s:.2f} s ({ours_cpu:.2f} s CPU)")
    if tablebench_ready(args.tablebench_repo):
        repo = prepare_theirs(args.tablebench_repo, tmp, tb_file)
        for folder in (repo, repo.parent / "shims"):  # their repository and the two stand-ins
            precompile(TB_PYTHON, folder)
        theirs_s, theirs_cpu = run_theirs(repo)
        print(f"886 base items, TableBench's scripts (parse + eval, processes): {theirs_s:.2f} s ({theirs_cpu:.2f} s CPU)")
        print(f"ratio TableBench / ours: {theirs_s / ours_s:.1f}x wall, {theirs_cpu / ours_cpu:.1f}x CPU  target >= 2x "
              "(benchmarks/evaluate.py: this part alone, before and after)")
        compare_scores(repo, ours)
    if args.scale:
        ws.close()
        memory(tmp, tmp / "ws", args.scale, args.before)


if __name__ == "__main__":
    main()

"""``tqaforge evaluate`` on TableBench's 886 items against TableBench's own scripts: part 3 of
``benchmarks/release.py`` alone, with the code of ``--before`` beside today's, in the same run.

The release and the predictions are ``release.py``'s (TableBench imported, ToRR's grid built, the
release built; the 886 base items in TableBench's inference format with a seeded reply each, chart
replies as code that draws the references or a wrong chart): made once, outside the timing, and
kept with ``--keep DIR`` for the next run. Then, ``--repeat`` rounds, each running in turn (the
order rotating from round to round, so that a busy moment of the machine falls on each alike):

- ours: ``tqaforge evaluate --no-plots --json`` as a process, with today's code;
- before: the same with the code of ``--before`` (default ``main``), taken from git;
- theirs: TableBench's ``parse_tablebench_instruction_response_script.py`` then
  ``eval_tablebench_script.py``, each a process, unmodified, in their own virtualenv
  (``release.py``'s module docs: set-up and the two stand-in modules).

Each figure is the median over the rounds of wall and CPU seconds (user + system of the process,
from ``wait4``; the steadier figure on a shared machine). Every round's TableBench-compatible
scores, ours and before, must equal those of TableBench's scripts (18 subtypes, 4 types, Overall).
Target (issue 26): ours >= 2x faster than theirs, in CPU time (the steadier figure) and wall.

    .venv/bin/python benchmarks/evaluate.py [--keep DIR] [--repeat 5] [--before REV] [--tablebench-repo PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _rounds import round_by_round  # noqa: E402  (siblings, found through the path above)
from release import (  # noqa: E402  (a sibling script, found through the path above)
    DATA,
    MIRROR,
    REPO,
    TB_PYTHON,
    build,
    compare_scores,
    precompile,
    prepare_theirs,
    run_ours,
    run_theirs,
    setup,
    tablebench_predictions,
    tablebench_ready,
)

TARGET = 2.0


def code_of(rev: str, into: Path) -> Path:
    """The ``tqaforge`` package of commit ``rev``, from git, under ``into`` (made once per commit)."""
    sha = subprocess.run(["git", "-C", str(REPO), "rev-parse", rev], capture_output=True, text=True, check=True).stdout.strip()
    target = into / f"code-{sha[:12]}"
    if not (target / "tqaforge").exists():
        target.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(REPO), "archive", sha, "tqaforge"], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tablebench-repo", type=Path, default=MIRROR, help="TableBench's repository (a clone, or a bare mirror)")
    parser.add_argument("--keep", type=Path, default=None, help="keep the release and predictions here (and reuse them)")
    parser.add_argument("--repeat", type=int, default=5, help="rounds (the medians are reported)")
    parser.add_argument("--before", default="main", help="the commit whose `tqaforge evaluate` is measured beside today's")
    args = parser.parse_args()
    if not DATA.exists():
        sys.exit(f"TableBench's data is not at {DATA}")
    if not tablebench_ready(args.tablebench_repo):
        sys.exit(1)
    tmp = Path(args.keep or tempfile.mkdtemp(prefix="tqaforge-bench-evaluate-"))
    tmp.mkdir(parents=True, exist_ok=True)
    release = tmp / "release"
    if not (release / "manifest.json").exists():
        ws = setup(tmp)
        build(ws, release)
        ws.close()
    tb_file = tablebench_predictions(release, tmp)
    repo = prepare_theirs(args.tablebench_repo, tmp, tb_file)
    runs: dict[str, list[tuple[float, float]]] = {"ours": [], "before": [], "theirs": []}
    codes = {"ours": REPO, "before": code_of(args.before, tmp)}
    for code in codes.values():
        precompile(sys.executable, code / "tqaforge")
    for folder in (repo, repo.parent / "shims"):  # their repository and the two stand-ins
        precompile(TB_PYTHON, folder)
    order = list(runs)
    for round_ in range(args.repeat):
        for name in order[round_ % 3:] + order[:round_ % 3]:
            if name == "theirs":
                runs[name].append(run_theirs(repo))
                continue
            wall, cpu, _ = run_ours(codes[name], release, tb_file, tmp / f"tb-{name}.eval")
            runs[name].append((wall, cpu))
        # Their results of this round against each of ours (the scores are deterministic).
        for name in ("before", "ours"):
            scores = json.loads((tmp / f"tb-{name}.eval" / "scores.json").read_text())
            equal, compared = compare_scores(repo, scores, show=round_ == 0 and name == "ours")
            if equal != compared:  # a chart program past its time limit on a loaded machine, say: shown, not hidden
                print(f"round {round_ + 1}, {name}: TableBench-compatible scores differ from TableBench's scripts' ({equal} of {compared} equal)")
                compare_scores(repo, scores)
        print(f"round {round_ + 1}: " + ", ".join(f"{name} {r[-1][0]:.2f} s ({r[-1][1]:.2f} s CPU)" for name, r in runs.items()))
    median = {name: (statistics.median(w for w, _ in r), statistics.median(c for _, c in r)) for name, r in runs.items()}
    theirs_w, theirs_c = median["theirs"]
    print(f"\n886 TableBench items, medians of {args.repeat} rounds        wall s   CPU s   TableBench / this (wall, CPU)")
    labels = {"theirs": "TableBench's scripts (parse + eval)", "before": f"tqaforge evaluate, {args.before}", "ours": "tqaforge evaluate, today"}
    for name in ("theirs", "before", "ours"):
        w, c = median[name]
        ratio = "" if name == "theirs" else f"{theirs_w / w:>6.2f}x {theirs_c / c:>6.2f}x"
        print(f"  {labels[name]:<44} {w:>7.2f} {c:>7.2f}   {ratio}")
    # Within a round the three ran one after the other: a drift of the machine's speed between
    # rounds (seen here: the same run 2.6 s CPU in one round, 3.4 s in another) cancels out.
    for name in ("before", "ours"):
        for what, k in (("wall", 0), ("CPU", 1)):
            label = f"TableBench / {labels[name].removeprefix('tqaforge evaluate, ')} in {what}"
            print(round_by_round(label, (t[k] / o[k] for t, o in zip(runs["theirs"], runs[name], strict=True))))
    for what, theirs, ours in (("CPU", theirs_c, median["ours"][1]), ("wall", theirs_w, median["ours"][0])):
        print(f"target: TableBench / today >= {TARGET}x {what} ({'met' if theirs / ours >= TARGET else 'not met'})")


if __name__ == "__main__":
    main()

"""Agreement statistics at scale: tqaforge against statsmodels and the krippendorff package, same run.

Three measurements on seeded synthetic ratings (a true category per item out of 3, each of 5
raters keeping it with probability 0.8, else a uniform draw):

1. Fleiss' kappa of 100,000 items x 5 raters, from the raw ratings (count matrix included) and
   from a ready count matrix: ``tqaforge.annotation.agreement.fleiss_kappa`` against
   ``statsmodels.stats.inter_rater`` (``aggregate_raters`` + ``fleiss_kappa``).
2. Krippendorff's nominal alpha of the same 100,000 units x 5 raters, complete and with 10% of
   the ratings missing: ``krippendorff_alpha`` against ``krippendorff.alpha``.
3. A 1,000-sample bootstrap interval on 10,000 items: tqaforge's vectorised bootstrap (resampled
   sums of per-item statistics) against the naive bootstrap that resamples the items and calls
   statsmodels' ``fleiss_kappa`` / ``krippendorff.alpha`` once per resample.

Point values: best and median of ``--repeat`` runs (targets: under 1 s each). Bootstrap: one run
each (target: under 5 s); the naive krippendorff bootstrap takes a while, ``--naive-samples``
runs fewer resamples and scales the time up (printed as such).

4. ``--labels N`` instead: the whole report on a workspace. A generated study
   (``tests/agreement_study.py``: five kinds, one of each label shape, three of eight annotators
   per item; N / 15 questions) is built once (``--keep DIR`` keeps it for the next run), then
   ``agreement_report`` runs in a child process with the CLI's default 1,000 resamples, printing
   its wall and CPU time and the child's peak RSS (targets at 300,000 labels: under 10 s and
   300 MB). ``--page`` also times the app's Agreement page's first render (Streamlit's AppTest
   in a fresh process, nothing in memory; target under 1 s at 30,000 labels): after Streamlit's
   own start-up and its table machinery (pandas, pyarrow: what a server has loaded once any
   page showed a table), also with those imports still to do, and with no report kept on disk
   (the report computed). ``--baseline DIR`` measures another tree (``git archive`` of the
   baseline commit) in the same run, interleaved, on the same study.

    .venv/bin/python benchmarks/agreement.py [--repeat 5] [--naive-samples 1000]
    .venv/bin/python benchmarks/agreement.py --labels 300000 [--keep DIR] [--n-boot 1000] [--baseline DIR]
    .venv/bin/python benchmarks/agreement.py --labels 30000 --page [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np

SEED = 0
REPO = Path(__file__).resolve().parents[1]
N_BIG, N_BOOT_ITEMS, RATERS, K, N_BOOT = 100_000, 10_000, 5, 3, 1000


def ratings(n: int, *, missing: float = 0.0, seed: int = SEED) -> np.ndarray:
    """Items x raters labels 0..K-1 as floats, NaN for a missing rating."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, K, n)
    labels = np.where(rng.random((n, RATERS)) < 0.8, truth[:, None], rng.integers(0, K, (n, RATERS))).astype(float)
    if missing:
        labels[rng.random(labels.shape) < missing] = np.nan
    return labels


def timed(fn: Callable[[], float], repeat: int) -> tuple[float, float, float]:
    """(best, median, value) of ``repeat`` calls after one warm-up."""
    value = fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times), value


def row(label: str, ours: tuple[float, float, float], theirs: tuple[float, float, float], target: float) -> None:
    ratio = theirs[0] / ours[0]
    status = "met" if ours[0] < target else "MISSED"
    print(
        f"  {label:<34} tqaforge {ours[0]:7.3f} s (median {ours[1]:.3f})   reference {theirs[0]:7.3f} s "
        f"(median {theirs[1]:.3f})   reference/tqaforge {ratio:5.2f}x   target < {target:g} s: {status}"
    )
    assert abs(ours[2] - theirs[2]) < 1e-9, (label, ours[2], theirs[2])


def _report_child(root: str, n_boot: int) -> None:
    """In the child: time the report on the workspace at ``root``, print JSON (times, peak RSS)."""
    from tqaforge.annotation.report import Settings, agreement_report
    from tqaforge.store import open_workspace

    ws = open_workspace(Path(root))
    wall, times = time.perf_counter(), os.times()
    report = agreement_report(ws, settings=Settings(n_boot=n_boot))
    wall, end = time.perf_counter() - wall, os.times()
    user, system = end.user - times.user, end.system - times.system
    labels = sum(k.n_annotations for k in report.kinds.values())
    # VmHWM: this process's own peak RSS since exec (ru_maxrss may carry the parent's, which built the study).
    peak = int(Path("/proc/self/status").read_text().split("VmHWM:")[1].split()[0]) * 1024
    print(json.dumps({"wall": wall, "cpu": user + system, "user": user, "sys": system, "peak_rss": peak,
                      "labels": labels, "kinds": len(report.kinds)}))


#: What a Streamlit server has done before any page of the app runs: its own start-up (AppTest's
#: first run scans every installed package for components: seconds, once per process) and, for
#: ``tables``, loading its table machinery (pandas and pyarrow, which Streamlit imports for any
#: table or chart, as the app's default Overview page does); ``--page`` times both.
_WARM_UP = {
    "streamlit": "import streamlit as st\nst.write('warm')",
    "tables": "import streamlit as st\nst.dataframe({'a': [1]})",
}


def _page_child(root: str, warm: str) -> None:
    """In the child: the Agreement page's first render in this process (after ``warm``)."""
    from streamlit.testing.v1 import AppTest

    os.environ["TQAFORGE_WORKSPACE"] = root
    import tqaforge.annotation.report  # noqa: F401  (imports are not the page's render)

    start = time.perf_counter()
    AppTest.from_string(_WARM_UP[warm], default_timeout=600).run()
    warm_s = time.perf_counter() - start
    page = Path(tqaforge.__file__).parent / "app" / "pages" / "agreement.py"  # the tree measured (--baseline)
    wall, cpu = time.perf_counter(), time.process_time()
    at = AppTest.from_file(str(page), default_timeout=600).run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if at.exception:
        sys.exit(f"the page failed: {at.exception}")
    print(json.dumps({"wall": wall, "cpu": cpu, "warm": warm_s}))


def _child(*argv: str, code: Path = REPO) -> dict:
    env = {**os.environ, "PYTHONPATH": str(code)}
    done = subprocess.run([sys.executable, __file__, *argv], capture_output=True, text=True, env=env, check=False)
    if done.returncode:
        sys.exit(f"child {argv} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def workspace_mode(args: argparse.Namespace) -> int:
    """The whole report on a generated study (module docs, 4)."""
    sys.path.insert(0, str(REPO / "tests"))
    from agreement_study import LABELS_PER_QUESTION, build_study

    from tqaforge.store import init_workspace

    base = args.keep or Path(tempfile.mkdtemp(prefix="tqaforge-bench-agreement-"))
    root = base / f"study-{args.labels}"
    if not (root / "tqaforge.toml").exists():
        start = time.perf_counter()
        stored = build_study(init_workspace(root, name="study"), args.labels // LABELS_PER_QUESTION)
        print(f"built {root}: {stored:,} labels stored in {time.perf_counter() - start:.1f} s (not timed below)")
    trees = [("this tree", REPO)] + ([("baseline", args.baseline)] if args.baseline else [])
    for _ in range(args.repeat_report):
        for name, code in trees:  # interleaved: the same load on both
            got = _child("--child-report", str(root), "--n-boot", str(args.n_boot), code=code)
            rate = got["cpu"] / got["labels"] * 1e6
            ok = got["wall"] < 10 and got["peak_rss"] < 300e6
            print(
                f"{name:<10} agreement report, {got['labels']:,} labels in {got['kinds']} kinds, {args.n_boot} resamples: "
                f"{got['wall']:.2f} s wall, {got['cpu']:.2f} s CPU ({got['user']:.2f} user, {got['sys']:.2f} sys; "
                f"{rate:.1f} us a label), peak RSS {got['peak_rss'] / 1e6:.0f} MB   "
                f"target < 10 s and < 300 MB (at 300,000): {'met' if ok else 'MISSED'}"
            )
    if args.page:
        cache = root / ".cache"
        for name, code in trees:
            shutil.rmtree(cache, ignore_errors=True)  # nothing on disk: the report is computed (and stored)
            cold = _child("--child-page", str(root), "--warm", "tables", code=code)
            cached = [_child("--child-page", str(root), "--warm", "tables", code=code) for _ in range(args.repeat_page)]
            imports = [_child("--child-page", str(root), "--warm", "streamlit", code=code) for _ in range(args.repeat_page)]
            best, best_imports = (min(runs, key=lambda g: g["wall"]) for runs in (cached, imports))
            print(
                f"{name:<10} Agreement page, first render in a fresh process (best of {args.repeat_page}): "
                f"{best['wall']:.2f} s ({best['cpu']:.2f} s CPU); with Streamlit's pandas and pyarrow still to import "
                f"{best_imports['wall']:.2f} s ({best_imports['cpu']:.2f} s CPU); with no report on disk {cold['wall']:.2f} s "
                f"({cold['cpu']:.2f} s CPU)   target < 1 s (at 30,000): {'met' if best['wall'] < 1 else 'MISSED'}"
            )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--naive-samples", type=int, default=N_BOOT, help="resamples of the naive bootstraps (scaled to 1,000)")
    parser.add_argument("--labels", type=int, default=0, help="time the whole report on a generated study of this many labels")
    parser.add_argument("--keep", type=Path, default=None, help="where the study is built (and reused)")
    parser.add_argument("--n-boot", type=int, default=N_BOOT, help="resamples of the report's intervals")
    parser.add_argument("--repeat-report", type=int, default=1, help="report runs (each a fresh child)")
    parser.add_argument("--page", action="store_true", help="also time the Agreement page's first render")
    parser.add_argument("--repeat-page", type=int, default=3, help="first renders timed (each a fresh child)")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another tqaforge tree (e.g. `git archive` of the baseline commit) measured in the same run")
    parser.add_argument("--child-report", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-page", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--warm", default="tables", choices=sorted(_WARM_UP), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_report:
        _report_child(args.child_report, args.n_boot)
        return 0
    if args.child_page:
        _page_child(args.child_page, args.warm)
        return 0
    if args.labels:
        return workspace_mode(args)
    # Imported here: the report's child process must not pay for statsmodels in its peak RSS.
    import krippendorff
    from statsmodels.stats.inter_rater import aggregate_raters
    from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

    from tqaforge.annotation.agreement import category_counts, fleiss_kappa, krippendorff_alpha

    big = ratings(N_BIG)
    big_missing = ratings(N_BIG, missing=0.10)
    counts, _ = category_counts(big)
    print(f"{N_BIG:,} items x {RATERS} raters, {K} categories (seed {SEED}); best of {args.repeat}")

    row(
        "Fleiss' kappa, from ratings",
        timed(lambda: fleiss_kappa(category_counts(big)[0], n_boot=0).value, args.repeat),
        timed(lambda: sm_fleiss_kappa(aggregate_raters(big)[0]), args.repeat),
        1.0,
    )
    row(
        "Fleiss' kappa, from counts",
        timed(lambda: fleiss_kappa(counts, n_boot=0).value, args.repeat),
        timed(lambda: sm_fleiss_kappa(counts), args.repeat),
        1.0,
    )
    row(
        "nominal alpha, complete",
        timed(lambda: krippendorff_alpha(big.T, "nominal", n_boot=0).value, args.repeat),
        timed(lambda: float(krippendorff.alpha(reliability_data=big.T, level_of_measurement="nominal")), args.repeat),
        1.0,
    )
    row(
        "nominal alpha, 10% missing",
        timed(lambda: krippendorff_alpha(big_missing.T, "nominal", n_boot=0).value, args.repeat),
        timed(lambda: float(krippendorff.alpha(reliability_data=big_missing.T, level_of_measurement="nominal")), args.repeat),
        1.0,
    )

    small = big[:N_BOOT_ITEMS]
    small_counts = counts[:N_BOOT_ITEMS]
    print(f"\n{N_BOOT:,}-sample bootstrap on {N_BOOT_ITEMS:,} items x {RATERS} raters (one run each)")
    rng = np.random.default_rng(1)
    naive = args.naive_samples
    for label, ours_fn, naive_fn in (
        (
            "Fleiss' kappa",
            lambda: fleiss_kappa(small_counts, n_boot=N_BOOT, seed=1),
            lambda idx: sm_fleiss_kappa(small_counts[idx]),
        ),
        (
            "nominal alpha",
            lambda: krippendorff_alpha(small.T, "nominal", n_boot=N_BOOT, seed=1),
            lambda idx: krippendorff.alpha(reliability_data=small[idx].T, level_of_measurement="nominal"),
        ),
    ):
        start = time.perf_counter()
        result = ours_fn()
        ours_s = time.perf_counter() - start
        start = time.perf_counter()
        values = [naive_fn(rng.integers(0, N_BOOT_ITEMS, N_BOOT_ITEMS)) for _ in range(naive)]
        naive_s = (time.perf_counter() - start) * N_BOOT / naive
        low, high = np.quantile(values, [0.025, 0.975])
        scaled = "" if naive == N_BOOT else f" (scaled from {naive})"
        print(
            f"  {label:<34} tqaforge {ours_s:7.3f} s   naive loop {naive_s:7.3f} s{scaled}   ratio {naive_s / ours_s:6.1f}x   "
            f"target < 5 s: {'met' if ours_s < 5 else 'MISSED'}\n"
            f"  {'':<34} 95% CI tqaforge [{result.ci[0]:.4f}, {result.ci[1]:.4f}], naive [{low:.4f}, {high:.4f}]"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

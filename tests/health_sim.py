"""A simulated benchmark with planted defects for the health tests (tests/test_health.py).

A TableBench-format file of ``N_ITEMS`` made-up items (each its own two-row table; EM subtypes) is
imported into a fresh SQLite workspace and frozen as a candidate release; simulated systems answer
by rule: system s gets item i right with probability sigmoid(A * (ability_s - b_i)) (a 2PL model
with known abilities and difficulties; a seeded draw), except the planted items:

- ``WRONG_GOLD`` (ten): the release's gold is wrong: a system "passes" (gives the gold) with
  probability sigmoid(A * (-ability_s)): the strong ones fail together, the weak ones pass;
- ``SOLVED_BY_ALL`` / ``SOLVED_BY_NONE``: every system right / wrong;
- the twins ``twin-a`` and ``twin-b`` have abilities 0.50 and 0.52: a true difference far below
  what 150 items can detect;
- ``DUPLICATED_TABLES`` (five): an item's table is a near copy of another item's (one of its 14
  values changed: the same table entered twice, the second time with a typo);
- ``CONSTANT_SUBTYPE``: twenty yes/no items (``CONSTANT_ITEMS``), 17 of whose golds are "Yes".

Everything else is clean, as a real benchmark's items are: each item its own six-row table of
distinct made-up keys and numbers, the gold in a row drawn at random, a question of its own words.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import numpy as np
import pytest

N_ITEMS = 150
A = 2.0
WRONG_GOLD = tuple(range(10))
SOLVED_BY_ALL = (10, 11, 12, 13)
SOLVED_BY_NONE = (14, 15, 16, 17)
#: Item -> the item whose table it nearly copies (both are planted: a duplicate has two sides).
DUPLICATED_TABLES = {18: 23, 19: 24, 20: 25, 21: 26, 22: 27}
CONSTANT_SUBTYPE = "Multi-hop FactChecking"
CONSTANT_ITEMS = tuple(range(28, 48))
PLANTED = (set(WRONG_GOLD) | set(SOLVED_BY_ALL) | set(SOLVED_BY_NONE) | set(DUPLICATED_TABLES)
           | set(DUPLICATED_TABLES.values()) | set(CONSTANT_ITEMS))
ROWS = 6
ABILITIES = {**{f"sys{k:02d}": float(v) for k, v in enumerate(np.linspace(-2.0, 2.0, 12))}, "twin-a": 0.50, "twin-b": 0.52}
TWINS = ("twin-a/DP", "twin-b/DP")


def item_id(i: int) -> str:
    return hashlib.md5(f"health-sim-{i}".encode()).hexdigest()


def _words(rng: random.Random, n: int) -> list[str]:
    """``n`` distinct made-up words."""
    syllables = ["ka", "lo", "mi", "ren", "sut", "vo", "da", "pel", "qui", "zor", "bax", "nim", "tog", "ule", "fey"]
    return rng.sample(sorted({a + b + c for a in syllables for b in syllables for c in syllables}), n)


def items() -> list[dict[str, object]]:
    """The made-up TableBench rows (module docs): the clean ones half FactChecking_MatchBased, half
    NumericalReasoning_Counting."""
    rng = random.Random(2026)
    words = iter(_words(rng, 3 * N_ITEMS + ROWS * N_ITEMS))
    numbers = iter(rng.sample(range(10_000, 100_000), ROWS * N_ITEMS))
    tables = [[[next(words), str(next(numbers))] for _ in range(ROWS)] for _ in range(N_ITEMS)]
    for i, original in DUPLICATED_TABLES.items():
        copy = [list(row) for row in tables[original]]
        copy[rng.randrange(ROWS)][1] = str(int(copy[0][1]) + 1)  # one value mistyped
        tables[i] = copy
    rows = []
    for i in range(N_ITEMS):
        row = rng.randrange(ROWS)
        key, value = tables[i][row]
        a, b = next(words), next(words)
        if i in CONSTANT_ITEMS:
            qtype, sub = "FactChecking", CONSTANT_SUBTYPE
            question, answer = f"Is the {a} {b} of {key} above {rng.randrange(10_000, 100_000)}?", "Yes" if i < 45 else "No"
        else:
            qtype, sub = ("FactChecking", "MatchBased") if i % 2 else ("NumericalReasoning", "Counting")
            question, answer = f"What is the {a} {b} of {key}?", value
        rows.append({"id": item_id(i), "qtype": qtype, "qsubtype": sub, "table": {"columns": ["key", "value"], "data": tables[i]},
                     "question": question, "answer": answer})
    return rows


def write_benchmark(path: Path) -> Path:
    """The made-up TableBench file (:func:`items`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in items()), encoding="utf-8")
    return path


def outcomes(seed: int = 7) -> dict[str, list[bool]]:
    """Per system, right (True) or wrong on each item, by the rules of the module docs."""
    rng = np.random.default_rng(seed)
    b = rng.uniform(-1.2, 1.2, N_ITEMS)
    out = {}
    for name, theta in ABILITIES.items():
        draws = rng.uniform(size=N_ITEMS)
        right = []
        for i in range(N_ITEMS):
            if i in SOLVED_BY_ALL:
                right.append(True)
            elif i in SOLVED_BY_NONE:
                right.append(False)
            elif i in WRONG_GOLD:
                right.append(bool(draws[i] < 1 / (1 + np.exp(A * theta))))
            else:
                right.append(bool(draws[i] < 1 / (1 + np.exp(-A * (theta - b[i])))))
        out[name] = right
    return out


def write_predictions(release: Path, out: Path, systems: list[str], right: dict[str, list[bool]]) -> Path:
    """One predictions file for ``systems``: the release's gold when right, a wrong number else."""
    from tqaforge.evaluate.predictions import load_release

    refs = {r.id: r for r in load_release(release).references if r.subset == "base"}
    by_source = {r.source_id or r.id: r for r in refs.values()}
    lines = []
    for name in systems:
        for i in range(N_ITEMS):
            ref = by_source.get(item_id(i)) or refs[item_id(i)]
            text = ref.answer_text if right[name][i] else "-1"
            lines.append(json.dumps({"id": ref.id, "model": name, "method": "DP", "prediction": f"Final Answer: {text}"}))
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def build_simulation(root: Path) -> tuple[Path, list[Path]]:
    """The workspace (``root/ws``), a candidate release ``0.9.0`` at ``root/candidate`` and three
    evaluations of it (``root/evals/e0..e2``, the fourteen systems split among them)."""
    from tqaforge.evaluate.harness import EvaluateOptions, evaluate
    from tqaforge.ingest import import_paths
    from tqaforge.release.build import ReleaseOptions, build_release
    from tqaforge.store import init_workspace

    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("TQAFORGE_DATABASE_URL", raising=False)
        ws = init_workspace(root / "ws", name="sim")
        try:
            assert not import_paths(ws, [write_benchmark(root / "sim.jsonl")]).failed
            build_release(ws, ReleaseOptions(version="0.9.0", out=root / "candidate", subsets=("base",)))
        finally:
            ws.close()
    right = outcomes()
    names = sorted(ABILITIES)
    evaluations = []
    for k, chunk in enumerate((names[0::3], names[1::3], names[2::3])):
        preds = write_predictions(root / "candidate", root / f"p{k}.jsonl", chunk, right)
        out = root / "evals" / f"e{k}"
        evaluate(EvaluateOptions(release=root / "candidate", predictions=preds, out=out, plots=False))
        evaluations.append(out)
    return root / "ws", evaluations


def build_app_workspace(root: Path) -> tuple[Path, Path]:
    """:func:`build_simulation` laid out as the app finds it: the three evaluations moved to the
    workspace's ``evaluations/candidate/e0..e2`` (``tqaforge evaluate``'s default layout, run in
    the workspace). The workspace and the release directory."""
    import shutil

    ws, evaluations = build_simulation(root)
    (ws / "evaluations" / "candidate").mkdir(parents=True)
    for e in evaluations:
        shutil.move(str(e), str(ws / "evaluations" / "candidate" / e.name))
    return ws, root / "candidate"

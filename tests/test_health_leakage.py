"""Leakage section: planted duplicate tables and questions are found, clean items are not flagged,
and the similarity join and ROUGE-L agree with independent computations."""

from __future__ import annotations

import itertools
import json
import random
from functools import lru_cache
from pathlib import Path

import pytest
from conftest import SHARED_DATA, freeze_sample_release

from tqaforge.generation.dedup import rouge_l, tokens
from tqaforge.health.leakage import (
    RELEASE,
    Item,
    LeakageOptions,
    cell_values,
    find_leakage,
    ngram_overlap,
    reference_items,
    release_leakage,
    similar_pairs,
)
from tqaforge.tables.table import Table

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "sample" / "tablebench_sample.jsonl"
WORDS = [f"w{i}" for i in range(5000)]


def _table(rng: random.Random, rows: int = 10, cols: int = 5) -> Table:
    header = [f"h{rng.randrange(10**9)}" for _ in range(cols)]
    return Table.build(header, [[f"v{rng.randrange(10**12)}" for _ in range(cols)] for _ in range(rows)])


def _question(rng: random.Random) -> str:
    a, b, c, d = rng.sample(WORDS, 4)
    return rng.choice([f"Which {a} has the highest {b} in {c}?", f"What is the total {a} of {b} after {c} {d}?",
                       f"How many {a} {b} are there with {c} above {d}?", f"Is {a} larger than {b} for {c}?"])


def _changed(table: Table, rng: random.Random, cells: int) -> Table:
    rows = [list(r) for r in table.rows]
    for r, c in rng.sample([(r, c) for r in range(table.n_rows) for c in range(table.n_cols)], cells):
        rows[r][c] = f"changed{rng.randrange(10**9)}"
    return Table.build(table.header, rows)


def _planted() -> tuple[list[Item], list[Item], set[str], set[str]]:
    """A release of 120 clean items plus planted duplicates; a reference set; the planted item ids
    (table or question duplicated) and the clean ones."""
    rng = random.Random(7)
    release = [Item(f"clean{i}", RELEASE, _question(rng), _table(rng)) for i in range(120)]
    reference = [Item(f"ref.jsonl:{i}", "ref.jsonl", _question(rng), _table(rng)) for i in range(40)]
    planted: set[str] = set()
    # Five duplicated tables: two exact copies of reference tables (new questions), three near copies
    # (3 of 50 cells changed) of release tables.
    for k in range(2):
        release.append(Item(f"exact{k}", RELEASE, _question(rng), reference[k].table))
        planted.add(f"exact{k}")
    for k in range(3):
        base = release[10 + k]
        assert base.table is not None
        release.append(Item(f"near{k}", RELEASE, _question(rng), _changed(base.table, rng, 3)))
        planted |= {f"near{k}", base.id}
    # Near-duplicate questions: one word changed, on the same table (a duplicated item) in the
    # release and against the reference; and one exact repeat with different case and punctuation.
    for k in range(2):
        base = release[20 + k]
        words = base.question.split()
        words[1] = "zz" + words[1]
        release.append(Item(f"qnear{k}", RELEASE, " ".join(words), base.table))
        planted |= {f"qnear{k}", base.id}
    ref = reference[5]
    release.append(Item("qref", RELEASE, ref.question.upper().rstrip("?") + " ?!", ref.table))
    planted.add("qref")
    clean = {it.id for it in release} - planted
    return release, reference, planted, clean


def test_planted_duplicates_found_and_clean_items_not_flagged() -> None:
    release, reference, planted, clean = _planted()
    section = find_leakage(release, [reference])
    table_hits = {(d.items[0], d.kind) for d in section.tables}
    assert {("exact0", "exact"), ("exact1", "exact")} <= table_hits
    for k in range(3):
        near = [d for d in section.tables if d.items == (f"near{k}",)]
        assert [d.kind for d in near] == ["near"] and near[0].other_items == (f"clean{10 + k}",)
        assert near[0].jaccard == pytest.approx(52 / 58)  # 55 values, 3 replaced: |A & B| 52, |A | B| 58
    assert {"qnear0", "qnear1", "clean20", "clean21"} == set(section.internal_items)
    assert section.leaked_items == ["qref"]
    qref = [d for d in section.questions if d.item == "qref"]
    assert [(d.kind, d.other, d.table) for d in qref] == [("exact", "ref.jsonl:5", "exact")]
    qnear = next(d for d in section.questions if d.item == "qnear0")
    assert qnear.kind == "near" and qnear.table == "exact" and qnear.rouge_l >= 0.8
    flagged = {d.items[0] for d in section.tables} | {o for d in section.tables if d.other_source == RELEASE
                                                       for o in d.other_items} | {d.item for d in section.questions}
    assert planted <= flagged
    assert len(flagged & clean) <= 0.02 * len(clean)
    # 1 of 128 items leaked, 4 of 128 duplicated within: counted and shown, gated by the report alone.
    assert len(section.leaked_items) == 1 and len(section.internal_items) == 4
    assert section.as_dict()["leaked_share"] == pytest.approx(1 / 128) and section.as_dict()["internal_share"] == pytest.approx(4 / 128)
    text = "\n".join(section.lines())
    assert "tables: 3 with an exact and 6 with a near duplicate" in text and "1 in references (0.8%), 4 within the release (3.1%)" in text
    json.dumps(section.as_dict())


def test_similarity_join_equals_brute_force() -> None:
    rng = random.Random(3)
    universe = list(range(30))
    sets = [frozenset(rng.sample(universe, rng.randint(0, 12))) for _ in range(120)]
    sets += [frozenset(list(s)[:-1]) for s in sets[:20] if len(s) > 3]  # near copies
    probes = range(0, len(sets), 2)
    for threshold in (0.5, 0.8, 1.0):
        found = similar_pairs(sets, probes, threshold)
        expected = {}
        for i in probes:
            for j in range(len(sets)):
                if i == j or not sets[i] or not sets[j]:
                    continue
                jac = len(sets[i] & sets[j]) / len(sets[i] | sets[j])
                if jac >= threshold:
                    expected[(min(i, j), max(i, j)) if j % 2 == 0 else (i, j)] = jac
        assert found == pytest.approx(expected)


def _lcs_recursive(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    """LCS by the textbook recursion (memoised), independent of the project's row-by-row DP."""
    @lru_cache(maxsize=None)
    def f(i: int, j: int) -> int:
        if i == len(a) or j == len(b):
            return 0
        return f(i + 1, j + 1) + 1 if a[i] == b[j] else max(f(i + 1, j), f(i, j + 1))
    return f(0, 0)


def test_rouge_l_against_hand_computation_and_recursion() -> None:
    # By hand: "the cat sat on the mat" / "the cat lay on a mat": LCS "the cat on mat" = 4,
    # P = 4/6, R = 4/6, F = 2/3.
    assert rouge_l(tokens("The cat sat on the mat."), tokens("the cat lay on a mat")) == pytest.approx(2 / 3)
    rng = random.Random(1)
    for _ in range(200):
        a = tuple(rng.choice("abcde") for _ in range(rng.randint(1, 9)))
        b = tuple(rng.choice("abcde") for _ in range(rng.randint(1, 9)))
        lcs = _lcs_recursive(a, b)
        expected = 0.0 if lcs == 0 else 2 * (lcs / len(a)) * (lcs / len(b)) / (lcs / len(a) + lcs / len(b))
        assert rouge_l(a, b) == pytest.approx(expected)


def test_ngram_overlap_and_cell_values_by_hand() -> None:
    a, b = tokens("how many teams scored goals"), tokens("how many teams won goals")
    # 3-grams: {how many teams, many teams scored, teams scored goals} vs {how many teams, many teams won,
    # teams won goals}: 1 shared of 5.
    assert ngram_overlap(a, b, 3) == pytest.approx(1 / 5)
    assert ngram_overlap(("x",), ("x", "y"), 3) == pytest.approx(1 / 2)
    t = Table.build(["City", "Pop"], [["Oslo", "1"], ["oslo", ""], ["Café", "1"]])
    assert cell_values(t) == {"city", "pop", "oslo", "1", "cafe"}


def test_only_exhaustive_pairs_reported_once() -> None:
    rng = random.Random(5)
    t = _table(rng)
    items = [Item("a", RELEASE, "What is the total of x?", t), Item("b", RELEASE, "what is the TOTAL of x", t)]
    section = find_leakage(items)
    assert sorted((d.item, d.other, d.kind) for d in section.questions) == [("a", "b", "exact"), ("b", "a", "exact")]
    assert section.tables == [] and section.shared_tables == 1  # one table two items share: not a duplicate


def test_release_against_reference_files(tmp_path: Path) -> None:
    release = freeze_sample_release(tmp_path / "r")
    leaked = release_leakage(release, LeakageOptions(references=(SAMPLE,)))
    assert leaked.n_items == 36 and len(leaked.leaked_items) == 36  # the release is the sample itself
    other = REPO / "data" / "sample" / "tat_nonfactoid_dev_sample.jsonl"
    clean = release_leakage(release, LeakageOptions(references=(other,)))
    assert clean.leaked_items == [] and all(d.kind != "exact" for d in clean.tables)
    assert clean.references[0]["questions"] == len(reference_items(other))


def test_shipped_tablebench_against_default_references() -> None:
    path = SHARED_DATA / "tablebench" / "TableBench.jsonl"
    if not path.exists():
        pytest.skip(f"shared data not available: {path}")
    from tqaforge.health.leakage import default_references

    items = [Item(f"tb{k}", RELEASE, it.question, it.table) for k, it in enumerate(reference_items(path))]
    refs = [reference_items(p) for p in default_references()]
    section = find_leakage(items, refs)
    assert section.n_items == 886 and len(section.leaked_items) == 886  # TableBench is among the defaults
    # TableBench itself repeats a few items (same question, same table): found within.
    assert 0 < len(section.internal_items) < 20
    pairs = {(d.item, d.other) for d in section.questions if d.other_source == RELEASE}
    assert all((b, a) in pairs for a, b in pairs)
    assert section.seconds < 60
    assert list(itertools.islice(section.lines(), 1))

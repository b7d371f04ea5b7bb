"""Answer-bias section: a subtype answerable by a constant and a position-biased subtype are
flagged, clean subtypes are not; the constant's score and the position test agree with
independent computations."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest
from conftest import freeze_sample_release
from scipy import stats

from tqaforge.evaluate.predictions import Reference
from tqaforge.health.bias import BiasOptions, answer_bias, poisson_binomial_sf, release_bias
from tqaforge.tables.table import Table


def _ref(k: int, subtype: str, answer: str, qtype: str = "FactChecking") -> Reference:
    return Reference(f"{subtype}-{k}", "base", f"{subtype}-{k}", "base", qtype, subtype, (answer,), answer, k, f"q {k}?")


def _table(rng: random.Random, answer: str, row: int, rows: int = 10) -> Table:
    cells = [[f"name{rng.randrange(10**9)}", str(rng.randrange(10**6, 10**7))] for _ in range(rows)]
    cells[row][0] = answer
    return Table.build(["name", "value"], cells)


def _planted() -> tuple[list[Reference], list[Table | None], set[str]]:
    rng = random.Random(11)
    refs: list[Reference] = []
    tables: list[Table | None] = []
    # A subtype answerable by a constant: 16 of 20 golds are "Yes".
    for k in range(20):
        refs.append(_ref(k, "Yes/No", "Yes" if k < 16 else "No"))
        tables.append(None)
    # Numbers near 100 in a subtype scored within 10% (TableBench's tolerance): the mean wins.
    for k in range(20):
        refs.append(_ref(k, "StatisticalAnalysis", f"{100 + rng.uniform(-5, 5):.2f}", "DataAnalysis"))
        tables.append(None)
    # Position bias: every gold is the first row's name.
    for k in range(30):
        answer = f"first{k}"
        refs.append(_ref(k, "FirstRow", answer))
        tables.append(_table(rng, answer, 0))
    # Clean subtypes: distinct entity answers anywhere in the table; spread-out counts.
    for name in ("MatchBased", "Comparison", "Ranking", "Lookup"):
        for k in range(40):
            answer = f"{name.lower()}{k}"
            refs.append(_ref(k, name, answer))
            tables.append(_table(rng, answer, rng.randrange(10)))
    for k in range(40):
        refs.append(_ref(k, "Counting", str(rng.randrange(1, 200)), "NumericalReasoning"))
        tables.append(None)
    return refs, tables, {"Yes/No", "StatisticalAnalysis", "FirstRow"}


def test_planted_biases_found_and_clean_subtypes_not_flagged() -> None:
    refs, tables, planted = _planted()
    section = answer_bias(refs, tables)
    by = {s.subtype: s for s in section.subtypes}
    assert set(section.constant_flagged) == {"Yes/No", "StatisticalAnalysis"}
    assert section.position_flagged == ["FirstRow"]
    # The best constant of Yes/No is "yes", and it scores exactly its share of golds.
    assert by["Yes/No"].best_constant.casefold() == "yes" and by["Yes/No"].best_score == pytest.approx(16 / 20)
    assert by["Yes/No"].majority_share == pytest.approx(0.8)
    # Every StatisticalAnalysis gold is within 10% of the mean (95..105 vs ~100).
    assert by["StatisticalAnalysis"].best_score == pytest.approx(1.0)
    first = by["FirstRow"]
    assert (first.located, first.first_row) == (30, 30) and first.expected_first == pytest.approx(3.0)
    clean_items = [r for r in refs if r.qsubtype not in planted]
    flagged_clean = sum(s.n for s in section.subtypes if s.subtype not in planted and (s.constant_flag or s.position_flag))
    assert flagged_clean <= 0.02 * len(clean_items)
    assert by["Counting"].best_score < 0.1 and by["MatchBased"].best_score == pytest.approx(1 / 40)
    assert [passed for *_, passed in section.checks()] == [False, False, True]
    text = "\n".join(section.lines())
    assert "[CONSTANT]" in text and "[POSITION]" in text and "needs a model" in text
    json.dumps(section.as_dict())


def test_threshold_and_min_items_options() -> None:
    refs, tables, _ = _planted()
    strict = answer_bias(refs, tables, BiasOptions(constant_threshold=0.9, min_items=25))
    assert strict.constant_flagged == []  # 20 items a subtype < min_items 25
    loose = answer_bias(refs, tables, BiasOptions(constant_threshold=0.9))
    assert loose.constant_flagged == ["StatisticalAnalysis"]  # "yes" scores 0.8 <= 0.9; the mean 1.0
    assert strict.position_flagged == ["FirstRow"]  # 30 located items


def test_poisson_binomial_against_scipy_and_enumeration() -> None:
    for n, p in ((10, 0.3), (40, 0.05)):
        for k in (0, 1, 3, 7):
            assert poisson_binomial_sf(k, [p] * n) == pytest.approx(stats.binom.sf(k - 1, n, p), abs=1e-12)
    probs = [0.1, 0.5, 0.25, 0.9, 0.33]
    for k in range(len(probs) + 1):
        exact = 0.0
        for outcome in itertools.product((0, 1), repeat=len(probs)):
            if sum(outcome) >= k:
                w = 1.0
                for o, p in zip(outcome, probs):
                    w *= p if o else 1 - p
                exact += w
        assert poisson_binomial_sf(k, probs) == pytest.approx(exact, abs=1e-12)


def test_release_bias_on_the_sample_release(tmp_path: Path) -> None:
    release = freeze_sample_release(tmp_path / "r")
    section = release_bias(release)
    assert section.subtypes and sum(s.n for s in section.subtypes) + section.skipped == 36
    assert all(0.0 <= s.best_score <= 1.0 for s in section.subtypes)
    assert section.constant_flagged == []  # 2 items a subtype: never flagged (min_items 5)
    json.dumps(section.as_dict())

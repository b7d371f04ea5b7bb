"""Answer-bias section: a subtype answerable by a constant and a position-biased subtype are
flagged, clean subtypes are not; the constant's score and the position test agree with
independent computations."""

from __future__ import annotations

import itertools
import json
import math
import random
from pathlib import Path

import pytest
from conftest import freeze_sample_release
from scipy import stats

from tqaforge.evaluate.predictions import Reference
from tqaforge.health.bias import BiasOptions, answer_bias, listed_options, poisson_binomial_sf, release_bias
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
    assert (bool(section.constant_flagged), bool(section.position_flagged), bool(section.first_option_flagged)) == (True, True, False)
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


@pytest.mark.parametrize("question, gold, index, count", [
    ("Did Spain or France win more medals?", "Spain", 0, 2),
    ("Did Spain or France win more medals?", "france", 1, 2),
    ("Who won most, Spain, France or Italy?", "Spain", 0, 3),
    ("Who won most, Spain, France, or Italy?", "Italy", 2, 3),
    ("Which of Spain, France and Italy won most?", "France", 1, 3),
    ("Which team scored more between Real Madrid and Barcelona?", "Real Madrid", 0, 2),
    ("In 2010, did Spain or France win more?", "France", 1, 2),
    ("Which is larger: A, B, or C?", "C", 2, 3),
    ("Did Spain or France win more medals?", "Italy", None, 2),  # the gold is no option listed
])
def test_listed_options_on_handmade_questions(question: str, gold: str, index: int | None, count: int) -> None:
    listed = listed_options(question)
    assert listed is not None and listed.count == count and listed.index_of(gold) == index


@pytest.mark.parametrize("question", ["How many medals did Spain win?", "Is the total above 5?",
                                      "Did Spain or France or Italy win?", "Which of the rows has the highest value?"])
def test_questions_that_list_no_options(question: str) -> None:
    assert listed_options(question) is None


def test_first_listed_option_bias_flagged_against_chance() -> None:
    """Handmade: 20 two-option questions whose gold is the first option 17 times (flagged; the
    p-value is scipy's binomial test), 20 whose gold alternates (not flagged), and 12 with two or
    three options (chance differs per item: the Poisson-binomial tail, checked by enumeration)."""
    refs: list[Reference] = []
    for k in range(20):
        a, b = f"Alpha{k}", f"Beta{k}"
        gold = a if k < 17 else b
        refs.append(Reference(f"c{k}", "base", f"c{k}", "base", "FactChecking", "Choice", (gold,), gold, k,
                              f"Which scored more, {a} or {b}?"))
    for k in range(20):
        a, b = f"Gamma{k}", f"Delta{k}"
        gold = a if k % 2 else b
        refs.append(Reference(f"f{k}", "base", f"f{k}", "base", "FactChecking", "Fair", (gold,), gold, k,
                              f"Did {a} or {b} win the match?"))
    for k in range(12):
        options = [f"Eps{k}", f"Zeta{k}"] + ([f"Eta{k}"] if k % 2 else [])
        question = f"Which of {', '.join(options[:-1])} and {options[-1]} is oldest?"
        refs.append(Reference(f"m{k}", "base", f"m{k}", "base", "FactChecking", "Mixed", (options[0],), options[0], k, question))
    section = answer_bias(refs)
    by = {s.subtype: s for s in section.subtypes}
    choice, fair, mixed = by["Choice"], by["Fair"], by["Mixed"]
    assert (choice.listed, choice.first_option, choice.expected_first_option) == (20, 17, pytest.approx(10.0))
    assert choice.p_first_option == pytest.approx(stats.binomtest(17, 20, 0.5, alternative="greater").pvalue)
    assert (fair.listed, fair.first_option) == (20, 10) and not fair.first_option_flag
    assert section.first_option_flagged == ["Choice", "Mixed"]
    chances = [1 / 3 if k % 2 else 1 / 2 for k in range(12)]
    assert mixed.expected_first_option == pytest.approx(sum(chances))
    assert mixed.p_first_option == pytest.approx(math.prod(chances))  # all 12 first: the tail is P(all)
    # The existing position bias is untouched: no table, nothing located.
    assert all(s.located == 0 and not s.position_flag for s in section.subtypes)
    assert "[FIRST OPTION]" in "\n".join(section.lines()) and section.as_dict()["first_option_flagged"] == ["Choice", "Mixed"]

"""The one answer normaliser and comparator (tqaforge.tables.matching): number forms, lists in order
or as multisets per subtype, tolerance per subtype, and what must not match."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import shared_data_path
from tqaforge.tables.cells import clean_text, normalize_cell
from tqaforge.tables.matching import (
    ANSWER_RULES,
    AnswerRule,
    answer_number,
    answer_rule,
    clean_item,
    normalize_answer,
    same_answer,
    value_match,
)

EXACT = AnswerRule()
ORDERED = AnswerRule(ordered=True)
TOLERANT = AnswerRule(ordered=True, rel_tol=0.1)


@pytest.mark.parametrize(
    ("text", "canonical", "number"),
    [
        ("1,234.50", "1234.5", 1234.5),
        ("1234.5", "1234.5", 1234.5),
        ("1 234 567", "1234567", 1234567.0),
        ("12%", "12", 12.0),
        ("12.0 %", "12", 12.0),
        ("$1,305", "1305", 1305.0),
        ("1305 USD", "1305", 1305.0),
        ("\u20ac5", "5", 5.0),
        ("5\u20ac", "5", 5.0),
        ("+3", "3", 3.0),
        ("-3", "-3", -3.0),
        ("\u22123", "-3", -3.0),
        ("(5,906)", "-5906", -5906.0),
        ("1.5e3", "1500", 1500.0),
        ("2E-3", "0.002", 0.002),
        ("20.70", "20.7", 20.7),
        ("100.000", "100", 100.0),
        ("0.0", "0", 0.0),
        ("-0", "0", -0.0),
        ("~42", "42", 42.0),
        ("**42**.", "42", 42.0),
        ('"42"', "42", 42.0),
        ("\\boxed{42}", "42", 42.0),
        ("np.float64(3.25)", "3.25", 3.25),
        ("\uff11\uff12", "12", 12.0),  # full-width digits (NFKC)
        ("800 m", "800", 800.0),  # a scale word or unit letter is dropped, as in cell matching
        (" Oslo ", "oslo", None),
        ("Caf\u00e9 \u2013 Bar.", "cafe - bar", None),
        ("**Strong positive correlation**", "strong positive correlation", None),
        ("3 - 0", "3 - 0", None),
        ("12 apples", "12 apples", None),
        ("1e999", "1e999", None),  # out of range: text, not a number with a thousand digits
        ("", "", None),
    ],
)
def test_normalize_answer(text: str, canonical: str, number: float | None) -> None:
    assert normalize_answer(text) == canonical
    assert answer_number(text) == number


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("1,234", "1234"),
        ("1,234.50", "1234.5"),
        ("12.5", "12.50"),
        ("12%", "12"),  # models drop the sign; TableBench's own data: "69.75" for "69.75%"
        ("12.0%", "12%"),
        ("-3", "\u22123"),
        ("-5906", "(5,906)"),
        ("1500", "1.5e3"),
        ("+7", "7"),
        ("$1,305", "1305"),
        ("Oslo", " oslo "),
        ("Oslo.", "oslo"),
        ('"Oslo"', "`Oslo`"),
        ("Zag\u00f3rska", "Zagorska"),
        ("1994\u201395", "1994-95"),
        ("20.727", "20.73"),  # the finer number rounds to the coarser one
        ("1909.6667", "1909.67"),
        ("20", "20.0"),
    ],
)
def test_same_item(a: str, b: str) -> None:
    assert same_answer([a], [b]) and same_answer([b], [a])


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("12.5", "125"),
        ("-3", "3"),
        ("(3)", "3"),
        ("0.12", "12%"),  # no unit conversion: a fraction and a percentage are different numbers
        ("12", "12.4"),  # rounding needs the coarser number to have two decimals
        ("0.1", "0.12"),  # one decimal is too coarse to vouch for a two-decimal answer
        ("20.72", "20.73"),  # same precision: equal values only
        ("20.7", "20.76"),
        ("1,234", "1.234"),
        ("2009,2010", "20092010"),
        ("nicosia (cyp)", "nicosia"),  # the core tier (remarks dropped) is for table cells only
        ("Oslo", "Olso"),
        ("12", "twelve"),
        ("", ""),
        ("  ", "x"),
    ],
)
def test_different_items(a: str, b: str) -> None:
    assert not same_answer([a], [b]) and not same_answer([b], [a])


def test_lists() -> None:
    assert same_answer(["Oslo", "Bergen"], ["bergen", "oslo"])  # unordered: any order
    assert not same_answer(["Oslo", "Bergen"], ["bergen", "oslo"], ORDERED)
    assert same_answer(["Oslo", "Bergen"], ["oslo", "bergen"], ORDERED)
    assert same_answer(["a", "a", "b"], ["a", "b", "a"])
    assert not same_answer(["a", "a", "b"], ["a", "b", "b"])  # multisets, one to one
    assert not same_answer(["a"], ["a", "a"])  # different lengths
    assert not same_answer(["a", "b"], ["a"])
    assert not same_answer([], [])  # no answer equals nothing
    assert not same_answer([], ["a"])
    assert not same_answer(["", " "], ["", " "])
    assert same_answer(("1,000",), ["1000"])  # tuples and lists alike


def test_unordered_pairing_with_tolerance_is_one_to_one() -> None:
    # Greedy first-fit would pair 1.0 with 1.1 and fail on 1.15 vs 0.95; a full matching finds
    # 1.0 ~ 0.95 and 1.15 ~ 1.1.
    rule = AnswerRule(rel_tol=0.1)
    assert same_answer(["1.0", "1.15"], ["1.1", "0.95"], rule)
    assert not same_answer(["1.0", "1.15"], ["1.1", "0.5"], rule)


def test_tolerance() -> None:
    assert same_answer(["52.08"], ["51"], TOLERANT)  # 2% apart
    assert same_answer(["0.90"], ["0.96"], TOLERANT)  # 6.25% of the larger
    assert same_answer(["110"], ["100"], TOLERANT)  # exactly 10% of the larger (110)
    assert not same_answer(["112"], ["100"], TOLERANT)
    assert not same_answer(["-0.5"], ["0.5"], TOLERANT)
    assert not same_answer(["0.01"], ["0"], TOLERANT)  # relative: nothing is close to zero but zero
    assert not same_answer(["52.08"], ["51"], ORDERED)
    # Text items compare as text under any tolerance.
    assert same_answer(["Strong positive correlation", "0.90"], ["strong positive correlation", "0.96"], TOLERANT)
    assert not same_answer(["Weak positive correlation", "0.90"], ["Strong positive correlation", "0.90"], TOLERANT)
    assert not same_answer(["0.90", "Strong positive correlation"], ["Strong positive correlation", "0.90"], TOLERANT)


def test_answer_rules() -> None:
    assert answer_rule("Ranking") == AnswerRule(ordered=True)
    assert answer_rule("Comparison").ordered and answer_rule("Multi-hop FactChecking").ordered
    assert answer_rule("MatchBased") == AnswerRule() and answer_rule("ImpactAnalysis") == AnswerRule()
    for subtype in ("CorrelationAnalysis", "TrendForecasting", "StatisticalAnalysis"):
        assert answer_rule(subtype) == AnswerRule(ordered=True, rel_tol=0.1)
    assert answer_rule(None) == AnswerRule() and answer_rule("SomethingNew") == AnswerRule()
    assert answer_rule("ranking") == AnswerRule()  # names exactly as TableBench spells them


def test_rules_cover_tablebench_subtypes() -> None:
    path = shared_data_path("tablebench", "TableBench.jsonl")
    with path.open(encoding="utf-8") as fh:
        subtypes = {json.loads(line)["qsubtype"] for line in fh if line.strip()}
    assert subtypes == set(ANSWER_RULES)


def test_value_match_shares_the_item_comparison() -> None:
    assert value_match("1,694", "1694") == "numeric"
    assert value_match("Oslo ", "oslo") == "exact"
    assert value_match("Zag\u00f3rska", "Zagorska") == "loose"
    assert value_match("Javine H [1]", "Javine H") == "core"
    assert value_match("20.727", "20.73") == "numeric"  # the same rounding rule as same_answer
    assert value_match("-5%", "5%") is None
    assert value_match("(3)", "3") is None  # two numbers: no text tier may call them equal
    assert value_match("Oslo", "oslo", rules=()) is None
    assert value_match("", "") is None


def test_clean_item() -> None:
    assert clean_item(' "**12.5%**". ') == "12.5%"
    assert clean_item("'draw' (the entry number)") == "'draw' (the entry number)"
    assert clean_item("**") == "" and clean_item('""') == ""
    deep = clean_item("*" * 10_000)  # a bounded number of layers: hostile nesting stays cheap
    assert set(deep) == {"*"} and len(deep) < 10_000


items = st.one_of(
    st.sampled_from(["1,234", "1234", "12%", "12", "-3", "(3)", "Oslo", "oslo.", "0.12", "20.73", "20.727", "x"]),
    st.text(max_size=12),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(items, max_size=4), st.lists(items, max_size=4), st.sampled_from([EXACT, ORDERED, TOLERANT]))
def test_comparator_properties(a: list[str], b: list[str], rule: AnswerRule) -> None:
    assert same_answer(a, b, rule) == same_answer(b, a, rule)  # symmetric
    if any(normalize_cell(clean_text(x)) for x in a):
        assert same_answer(a, a, rule)  # reflexive for any real answer
    if a and len(a) == len(b) and [normalize_answer(x) for x in a] == [normalize_answer(x) for x in b]:
        if all(normalize_answer(x) for x in a) and all(normalize_cell(clean_text(x)) for x in a + b):
            assert same_answer(a, b, rule)  # equal canonical forms are the same answer

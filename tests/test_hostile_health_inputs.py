"""Hostile inputs of the health sections (leakage, answer bias): empty releases, huge cells and
questions, unicode, malformed or missing reference files, lying options."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cpu_clock import cpu_now

from tqaforge.errors import ConfigError, ReaderError, TqaforgeError
from tqaforge.evaluate.predictions import Reference
from tqaforge.health.bias import BiasOptions, answer_bias
from tqaforge.health.leakage import RELEASE, Item, LeakageOptions, find_leakage, reference_items, release_leakage


def test_empty_release_and_no_references() -> None:
    section = find_leakage([], [])
    assert (section.n_items, section.tables, section.questions) == (0, [], [])
    # No item: nothing leaked, shares of 0 (not a division by zero).
    assert section.as_dict()["leaked_share"] == 0.0 and section.as_dict()["internal_share"] == 0.0
    assert section.lines()[0].startswith("Leakage: 0 items") and json.dumps(section.as_dict())
    bias = answer_bias([])
    assert bias.subtypes == [] and not (bias.constant_flagged or bias.position_flagged or bias.first_option_flagged)
    assert bias.lines()
    json.dumps(bias.as_dict())


def test_items_without_question_or_table() -> None:
    items = [Item("a", RELEASE, "", None), Item("b", RELEASE, "   ?!", None)]
    section = find_leakage(items, [[Item("r:1", "r.jsonl", "", None)]])
    assert section.questions == [] and section.tables == [] and section.n_tables == 0


def test_huge_cells_and_questions_stay_fast() -> None:
    from tqaforge.tables.table import Table

    big = "x" * 1_000_000
    t1 = Table.build(["a", "b"], [[big, "1"], ["y", "2"]])
    t2 = Table.build(["a", "b"], [[big, "1"], ["y", "3"]])
    long_q = " ".join(f"w{i}" for i in range(20_000))
    near_q = long_q.replace("w5 ", "v5 ", 1)
    started = cpu_now()
    section = find_leakage([Item("a", RELEASE, long_q, t1), Item("b", RELEASE, near_q, t2)])
    assert cpu_now() - started < 10
    assert {d.kind for d in section.questions} == {"near"}  # compared on the first 1000 tokens
    assert section.tables == []  # cell sets {a, b, big, 1, y, 2|3}: Jaccard 5/7 < 0.8
    loose = find_leakage([Item("a", RELEASE, "", t1), Item("b", RELEASE, "", t2)], options=LeakageOptions(table_threshold=0.7))
    assert [d.jaccard for d in loose.tables] == [pytest.approx(5 / 7)] * 2
    refs = [Reference("r", "base", "r", "base", "NumericalReasoning", "Counting", ("9" * 50_000,), "9" * 50_000, 0)] * 6
    bias = answer_bias(refs)
    assert bias.subtypes[0].n == 6


def test_unicode_questions_and_cells() -> None:
    from tqaforge.tables.table import Table

    t = Table.build(["ｃｉｔｙ", "人口"], [["Zürich", "４２"], ["Ｏｓｌｏ", "7"]])
    u = Table.build(["city", "人口"], [["Zu\u0308rich", "42"], ["Oslo", "7"]])  # NFKC/NFD forms of the same cells
    items = [Item("a", RELEASE, "Ｗｈｉｃｈ city has 人口 above ４０?", t)]
    section = find_leakage(items, [[Item("r:1", "r.jsonl", "which CITY has 人口 above 40", u)]])
    # Full-width, NFD and case differences: the same question; the cells' loose forms are equal
    # (Jaccard 1) while the raw cells, hence the content hashes, differ: a near duplicate.
    assert [(d.kind, d.table) for d in section.questions] == [("exact", "near")]
    assert [(d.kind, d.jaccard) for d in section.tables] == [("near", 1.0)]
    assert section.leaked_items == ["a"]


def test_malformed_reference_file_names_it(tmp_path: Path) -> None:
    bad = tmp_path / "refs.jsonl"
    bad.write_text('{"id": 1, "qtype": "x", "qsubtype": "y", "table": {"columns": ["a"], "data": [["1"]]},'
                   ' "question": "q?", "answer": "1"}\n{"id": 2, not json\n', encoding="utf-8")
    with pytest.raises(ReaderError) as info:
        reference_items(bad)
    assert str(bad) in str(info.value) and "line 2" in str(info.value)
    missing = tmp_path / "absent.jsonl"
    with pytest.raises(TqaforgeError, match="absent.jsonl"):
        reference_items(missing)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(ReaderError, match="empty.jsonl"):
        reference_items(empty)


def test_not_a_release_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "refs.jsonl"
    bad.write_text("[1, 2]\n", encoding="utf-8")
    with pytest.raises(TqaforgeError, match="not a release"):
        release_leakage(tmp_path / "nowhere", LeakageOptions(references=(bad,)))


@pytest.mark.parametrize("kwargs", [{"table_threshold": 0.0}, {"question_threshold": 1.5}, {"ngram": 0},
                                    {"question_threshold": float("nan")}, {"max_question_tokens": 0}])
def test_lying_leakage_options(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        LeakageOptions(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("kwargs", [{"constant_threshold": 2.0}, {"alpha": 0.0}, {"min_items": 0}, {"top_k": 0}])
def test_lying_bias_options(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        BiasOptions(**kwargs)  # type: ignore[arg-type]


def test_bias_tables_that_do_not_line_up() -> None:
    refs = [Reference("r", "base", "r", "base", "FactChecking", "MatchBased", ("x",), "x", 0)]
    with pytest.raises(ConfigError, match="1 references but 2 tables"):
        answer_bias(refs, [None, None])


@pytest.mark.parametrize("question", ["", " or ", "or", ", , or ,", "Which of : and ?", "between and",
                                      "Did \x00 or \u200b win?", "A or B" + " or" * 5, "which of " + "x, " * 50_000 + "y and z?",
                                      ("Did " + "word " * 100_000 + "or that win?")])
def test_first_listed_option_reads_any_question_quickly(question: str) -> None:
    """Questions with no options, empty options, control characters or 100,000 words: the option
    reader returns options or None within a moment, and the bias section never fails on them."""
    from tqaforge.health.bias import listed_options

    started = cpu_now()
    listed = listed_options(question)
    assert cpu_now() - started < 2.0
    if listed is not None:
        assert listed.count >= 2 and listed.index_of("") is None
    refs = [Reference(f"q{k}", "base", f"q{k}", "base", "FactChecking", "Odd", ("B",), "B", k, question) for k in range(6)]
    section = answer_bias(refs)
    assert not section.subtypes[0].first_option_flag and json.dumps(section.as_dict())

"""Seed corpora: the shipped files, the TOML round trip, and errors on malformed input."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tqaforge.errors import ConfigError, TaxonomyError
from tqaforge.generation.seeds import (
    SeedCategory,
    SeedCorpus,
    dump_seed_corpus,
    load_seed_corpus,
    parse_seed_corpus,
    toml_string,
)
from tqaforge.schemas.taxonomy import CAPABILITY, FREB_TQA, TABLEBENCH, custom_taxonomy

SEEDS = Path(__file__).resolve().parents[1] / "tqaforge" / "generation" / "seed_corpora"


# --- the shipped corpora --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("filename", "taxonomy"),
    [("tablebench.toml", TABLEBENCH), ("freb-tqa.toml", FREB_TQA), ("capability.toml", CAPABILITY)],
)
def test_shipped_corpus_covers_its_taxonomy(filename, taxonomy):
    corpus = load_seed_corpus(SEEDS / filename)
    assert corpus.taxonomy == taxonomy.name
    assert set(corpus.subtypes) == set(taxonomy.subtypes)
    assert len(corpus.categories) == len(taxonomy.subtypes)
    assert corpus.missing(taxonomy) == []
    assert corpus.missing() == []  # default: the built-in taxonomy the file names
    for subtype in taxonomy.subtypes:
        cat = corpus.category(subtype)
        assert cat.type == taxonomy.type_of(subtype)
        assert cat.definition.strip()
        assert len(cat.seeds) >= 1
        assert all(seed.strip() for seed in cat.seeds)


def test_shipped_tablebench_corpus_shape():
    corpus = load_seed_corpus(SEEDS / "tablebench.toml")
    for cat in corpus.categories:
        sentences = [s for s in re.split(r"(?<=[.!?])\s+", cat.definition.strip()) if s]
        assert 2 <= len(sentences) <= 4, (cat.subtype, sentences)
        assert 2 <= len(cat.seeds) <= 3, cat.subtype
        assert all(s.endswith(("?", ".")) for s in cat.seeds), cat.subtype


@pytest.mark.parametrize("filename", ["tablebench.toml", "freb-tqa.toml", "capability.toml"])
def test_shipped_corpus_is_in_canonical_form(filename):
    """The files are exactly what dump_seed_corpus writes, so a later `seeds add` only adds lines."""
    path = SEEDS / filename
    assert dump_seed_corpus(load_seed_corpus(path)) == path.read_text(encoding="utf-8")


# --- accessors --------------------------------------------------------------------------------


def _small_corpus() -> SeedCorpus:
    return SeedCorpus(
        "tablebench",
        [
            SeedCategory(
                "NumericalReasoning", "Ranking", "Orders rows by a measure.", ["Which is top?"]
            )
        ],
    )


def test_category_and_missing():
    corpus = _small_corpus()
    assert isinstance(corpus.categories, tuple)
    assert corpus.category("Ranking").seeds == ("Which is top?",)
    with pytest.raises(TaxonomyError, match="no category 'Counting'"):
        corpus.category("Counting")
    missing = corpus.missing(TABLEBENCH)
    assert "Ranking" not in missing
    assert missing == [s for s in TABLEBENCH.subtypes if s != "Ranking"]


def test_missing_counts_blank_definitions_and_empty_seeds():
    corpus = SeedCorpus(
        "freb-tqa",
        (
            SeedCategory("QuestionType", "extraction", "  ", ("Which cell?",)),
            SeedCategory("QuestionType", "reasoning", "Needs several cells.", ()),
        ),
    )
    assert corpus.missing() == ["extraction", "reasoning"]


def test_missing_with_unknown_taxonomy_name_needs_a_taxonomy():
    corpus = SeedCorpus("mine", ())
    with pytest.raises(TaxonomyError, match="not a built-in taxonomy"):
        corpus.missing()
    mine = custom_taxonomy("mine", [{"type": "T", "subtype": "s"}])
    assert corpus.missing(mine) == ["s"]


# --- round trip -------------------------------------------------------------------------------

# Any text: quotes, backslashes, newlines, tabs, control characters, DEL, non-BMP unicode.
_text = st.text(
    alphabet=st.one_of(
        st.sampled_from(
            ['"', "\\", "\n", "\r", "\t", "\x00", "\x1f", "\x7f", "'", "é", "𝔘", "#", "]"]
        ),
        st.characters(codec="utf-8"),
    ),
    max_size=40,
)
_nonblank = _text.filter(lambda s: s.strip() != "")


@st.composite
def _corpora(draw, taxonomy=TABLEBENCH):
    cats = draw(
        st.lists(st.sampled_from(taxonomy.categories), min_size=1, unique_by=lambda c: c.subtype)
    )
    return SeedCorpus(
        taxonomy.name,
        tuple(
            SeedCategory(
                c.type,
                c.subtype,
                draw(_nonblank),
                tuple(draw(st.lists(_nonblank, min_size=1, max_size=4, unique=True))),
            )
            for c in cats
        ),
    )


@settings(max_examples=200, deadline=None)
@given(_corpora())
def test_dump_load_round_trip(corpus):
    text = dump_seed_corpus(corpus)
    assert parse_seed_corpus(text) == corpus
    assert dump_seed_corpus(parse_seed_corpus(text)) == text


@settings(max_examples=100, deadline=None)
@given(_corpora(), st.text(min_size=1, max_size=20).filter(str.strip))
def test_round_trip_through_a_file_and_custom_taxonomy(tmp_path_factory, corpus, name):
    tax = custom_taxonomy(
        name, [{"type": c.type, "subtype": c.subtype} for c in TABLEBENCH.categories]
    )
    corpus = SeedCorpus(name, corpus.categories)
    path = tmp_path_factory.mktemp("seeds") / "corpus.toml"
    path.write_text(dump_seed_corpus(corpus), encoding="utf-8")
    assert load_seed_corpus(path, tax) == corpus


@given(_text)
def test_toml_string_is_read_back_by_tomllib(value):
    assert tomllib.loads(f"k = {toml_string(value)}\n")["k"] == value


def test_toml_string_rejects_lone_surrogates():
    with pytest.raises(ConfigError, match="surrogate"):
        toml_string("a\ud800b")


# --- malformed input --------------------------------------------------------------------------

_GOOD_CATEGORY = """
[[category]]
type = "NumericalReasoning"
subtype = "Aggregation"
definition = "Sums and means."
seeds = ["What is the total?"]
"""


def _write(tmp_path: Path, text: str, name: str = "my-seeds.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


MALFORMED = {
    "missing definition": (
        'taxonomy = "tablebench"\n[[category]]\ntype = "NumericalReasoning"\n'
        'subtype = "Counting"\nseeds = ["How many?"]\n',
        ConfigError,
        ["category 1 ('Counting')", "missing key(s) 'definition'", "hint:"],
    ),
    "missing subtype": (
        'taxonomy = "tablebench"\n[[category]]\ntype = "NumericalReasoning"\n'
        'definition = "d"\nseeds = ["How many?"]\n',
        ConfigError,
        ["category 1", "'subtype'"],
    ),
    "empty seeds": (
        'taxonomy = "tablebench"\n'
        + _GOOD_CATEGORY
        + '[[category]]\ntype = "NumericalReasoning"\nsubtype = "Counting"\n'
        'definition = "Counts rows."\nseeds = []\n',
        ConfigError,
        ["category 2 ('Counting')", "'seeds' is empty", "hint:"],
    ),
    "seeds not a list": (
        'taxonomy = "tablebench"\n[[category]]\ntype = "NumericalReasoning"\n'
        'subtype = "Counting"\ndefinition = "d"\nseeds = "How many?"\n',
        ConfigError,
        ["category 1 ('Counting')", "'seeds' must be a list"],
    ),
    "blank seed": (
        'taxonomy = "tablebench"\n[[category]]\ntype = "NumericalReasoning"\n'
        'subtype = "Counting"\ndefinition = "d"\nseeds = ["How many?", "  "]\n',
        ConfigError,
        ["category 1 ('Counting')", "seed 2 must be a non-empty string"],
    ),
    "repeated seed": (
        'taxonomy = "tablebench"\n[[category]]\ntype = "NumericalReasoning"\n'
        'subtype = "Counting"\ndefinition = "d"\nseeds = ["How many?", "How many?"]\n',
        ConfigError,
        ["category 1 ('Counting')", "seed 2 repeats seed 1"],
    ),
    "empty definition": (
        'taxonomy = "tablebench"\n[[category]]\ntype = "NumericalReasoning"\n'
        'subtype = "Counting"\ndefinition = ""\nseeds = ["How many?"]\n',
        ConfigError,
        ["category 1 ('Counting')", "'definition' must be a non-empty string"],
    ),
    "unknown key in category": (
        'taxonomy = "tablebench"\n[[category]]\ntype = "NumericalReasoning"\n'
        'subtype = "Counting"\ndefinition = "d"\nseeds = ["How many?"]\nseed = ["x"]\n',
        ConfigError,
        ["category 1 ('Counting')", "unknown key(s) 'seed'"],
    ),
    "unknown subtype": (
        'taxonomy = "tablebench"\n'
        + _GOOD_CATEGORY
        + '[[category]]\ntype = "NumericalReasoning"\nsubtype = "Summation"\n'
        'definition = "d"\nseeds = ["What is the sum?"]\n',
        TaxonomyError,
        ["category 2 ('Summation')", "not in taxonomy 'tablebench'", "known subtypes:"],
    ),
    "subtype under the wrong type": (
        'taxonomy = "tablebench"\n[[category]]\ntype = "DataAnalysis"\nsubtype = "Ranking"\n'
        'definition = "d"\nseeds = ["Which is first?"]\n',
        TaxonomyError,
        ["category 1 ('Ranking')", "belongs to type 'NumericalReasoning'"],
    ),
    "duplicate subtype": (
        'taxonomy = "tablebench"\n' + _GOOD_CATEGORY + _GOOD_CATEGORY,
        ConfigError,
        ["category 2 ('Aggregation')", "already defined by category 1", "hint:"],
    ),
    "toml syntax error": (
        'taxonomy = "tablebench"\n[[category]]\ntype = "NumericalReasoning"\n'
        'subtype = "Aggregation\ndefinition = "d"\nseeds = ["x"]\n',
        ConfigError,
        ["line 4", "invalid TOML", "hint:"],
    ),
    "unclosed list": (
        'taxonomy = "tablebench"\n' + _GOOD_CATEGORY + 'seeds2 = [\n  "a",\n',
        ConfigError,
        ["invalid TOML"],
    ),
    "missing taxonomy": (
        _GOOD_CATEGORY,
        ConfigError,
        ["missing or empty 'taxonomy'", "hint:"],
    ),
    "unknown taxonomy": (
        'taxonomy = "tablebench-v2"\n' + _GOOD_CATEGORY,
        TaxonomyError,
        ["'tablebench-v2' is not a built-in taxonomy", "hint:"],
    ),
    "no categories": (
        'taxonomy = "tablebench"\n',
        ConfigError,
        ["no [[category]] tables", "hint:"],
    ),
    "misspelt category table": (
        'taxonomy = "tablebench"\n' + _GOOD_CATEGORY.replace("[[category]]", "[[categories]]"),
        ConfigError,
        ["unknown top-level key(s) 'categories'"],
    ),
    "category as a single table": (
        'taxonomy = "tablebench"\n' + _GOOD_CATEGORY.replace("[[category]]", "[category]"),
        ConfigError,
        ["'category' must be an array of tables"],
    ),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_input_raises_naming_the_file(tmp_path, case):
    text, error, fragments = MALFORMED[case]
    path = _write(tmp_path, text)
    with pytest.raises(error) as info:
        load_seed_corpus(path)
    message = str(info.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_missing_file(tmp_path):
    path = tmp_path / "nope.toml"
    with pytest.raises(ConfigError, match=re.escape(str(path))):
        load_seed_corpus(path)


def test_not_utf8(tmp_path):
    path = tmp_path / "latin1.toml"
    path.write_bytes('taxonomy = "tablebench"  # caf\xe9\n'.encode("latin-1"))
    with pytest.raises(ConfigError, match=re.escape(str(path))):
        load_seed_corpus(path)


def test_given_taxonomy_is_used_and_its_name_must_match(tmp_path):
    mine = custom_taxonomy("mine", [{"type": "Lookup", "subtype": "cell"}])
    good = 'taxonomy = "mine"\n[[category]]\ntype = "Lookup"\nsubtype = "cell"\ndefinition = "d"\nseeds = ["q?"]\n'
    corpus = load_seed_corpus(_write(tmp_path, good), mine)
    assert corpus.subtypes == ("cell",)
    assert corpus.missing(mine) == []

    path = _write(tmp_path, good.replace('"mine"', '"tablebench"', 1), "other.toml")
    with pytest.raises(ConfigError, match=r"other\.toml: the corpus is for taxonomy 'tablebench'"):
        load_seed_corpus(path, mine)

    # A subtype the given taxonomy lacks is an error, even if a built-in taxonomy has it.
    path = _write(tmp_path, good.replace('subtype = "cell"', 'subtype = "row"'), "row.toml")
    with pytest.raises(TaxonomyError, match=r"row\.toml: category 1 \('row'\)"):
        load_seed_corpus(path, mine)

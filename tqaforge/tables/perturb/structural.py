"""The structural-question filter (FREB-TQA appendix A.3): questions that name positions.

A question that says "first", "last", "top" or "row" may change its answer when rows or columns
move, so the variant grid skips cell-moving perturbations for it, and question typing reports
the words it found. Pure: words in, words out.
"""

from __future__ import annotations

import re
from typing import Iterable

#: FREB-TQA's list, verbatim: positional prepositions and ordinal numbers.
PAPER_STRUCTURAL_WORDS: tuple[str, ...] = (
    "first", "second", "third", "last", "top", "bottom", "before", "previous", "latter", "after",
    "next", "below", "above",
)
#: The default: the paper's list plus words that name a part of the table.
STRUCTURAL_WORDS: tuple[str, ...] = (*PAPER_STRUCTURAL_WORDS, "row", "rows", "column", "columns")
#: A wider list, for comparison: more ordinals and order words.
EXTENDED_STRUCTURAL_WORDS: tuple[str, ...] = (
    *STRUCTURAL_WORDS, "fourth", "fifth", "former", "preceding", "succeeding", "penultimate",
    "listed", "list", "order",
)

_WORD = re.compile(r"[^\W\d_]+")


def words_of(text: str) -> list[str]:
    """The lower-cased words of ``text`` (letters only)."""
    return _WORD.findall(text.lower())


def structural_words(question: str, words: Iterable[str] = STRUCTURAL_WORDS) -> tuple[str, ...]:
    """The structural words in a question, in order of appearance, each once.

    Whole words only, case-insensitive: "seconds" and "topped" are not "second" and "top".
    """
    wanted = {w.lower() for w in words}
    return tuple(dict.fromkeys(w for w in words_of(question) if w in wanted))


def is_structural(question: str, words: Iterable[str] = STRUCTURAL_WORDS) -> bool:
    """True when the answer may depend on table order or position (exclude it from structure
    perturbations)."""
    return bool(structural_words(question, words))

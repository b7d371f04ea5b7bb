"""Normalising generated questions and finding duplicates: exact and ROUGE-L.

Two questions are duplicates when their normalised token sequences are equal ("exact"), or
when the ROUGE-L F-measure of their token sequences reaches a threshold ("rouge"; Self-Instruct
and TableBench-style generation use 0.7). ROUGE-L is the longest common subsequence (LCS) of
the two token sequences: precision = LCS / len(candidate), recall = LCS / len(reference),
F = 2PR / (P + R). Tokens are the lower-cased word characters (``\\w+``), so case, spacing and
punctuation never make two questions different.

>>> round(rouge_l(tokens("How many teams scored more than 10 goals?"),
...               tokens("How many teams scored fewer than 10 goals?")), 3)
0.875
>>> clean_question("  2.  What is the   total? ")
'What is the total?'
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field

from rapidfuzz.distance import LCSseq

_TOKEN = re.compile(r"\w+")
# "1. ", "2) ", "(3) ", "- ", "* ", "Q1: ", "Question 2 -": list markers models put in front.
_MARKER = re.compile(
    r"^\s*(?:[-*\u2022]\s+|\(?\d{1,3}[.):]\s+|q(?:uestion)?\s*\d{0,3}\s*[:.)\-]\s*)", re.IGNORECASE
)
_QUOTES = "\"'\u201c\u201d\u2018\u2019`"


def clean_question(text: str) -> str:
    """The text to store: Unicode NFKC, list markers and wrapping quotes removed, single spaces."""
    text = unicodedata.normalize("NFKC", text).strip()
    for _ in range(2):  # "1. "What...?"" has a marker and quotes
        text = _MARKER.sub("", text, count=1).strip()
        if len(text) >= 2 and text[0] in _QUOTES and text[-1] in _QUOTES:
            text = text[1:-1].strip()
    return " ".join(text.split())


def tokens(text: str) -> tuple[str, ...]:
    """Lower-cased word tokens of ``text`` (after NFKC)."""
    return tuple(_TOKEN.findall(unicodedata.normalize("NFKC", text).casefold()))


def lcs_length(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    """Length of the longest common subsequence of two token sequences.

    rapidfuzz's bit-parallel LCS, in C++ (about 70 times the dynamic programme in Python on
    questions, a thousand times on sequences of a thousand tokens). It compares tokens by their
    hash (a one-character token by its code point): two distinct tokens of one comparison would
    have to share a 64-bit hash to be taken as equal."""
    return int(LCSseq.similarity(a, b))


def rouge_l(candidate: tuple[str, ...], reference: tuple[str, ...]) -> float:
    """ROUGE-L F-measure (beta = 1) of two token sequences; 0.0 when either is empty."""
    if not candidate or not reference:
        return 0.0
    lcs = lcs_length(candidate, reference)
    if lcs == 0:
        return 0.0
    precision = lcs / len(candidate)
    recall = lcs / len(reference)
    return 2 * precision * recall / (precision + recall)


@dataclass(frozen=True, slots=True)
class Duplicate:
    """Why a new question was dropped: ``kind`` "exact" or "rouge", and the question it repeats."""

    kind: str
    of: str  # id of the existing question
    of_text: str
    score: float

    def as_dict(self, text: str) -> dict[str, object]:
        return {"text": text, "kind": self.kind, "of": self.of, "of_text": self.of_text, "score": round(self.score, 4)}


@dataclass
class DedupIndex:
    """The questions new ones are compared with; add each accepted newcomer so later ones see it."""

    threshold: float = 0.7
    _exact: dict[tuple[str, ...], tuple[str, str]] = field(default_factory=dict)
    _entries: list[tuple[str, str, tuple[str, ...], Counter[str]]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, question_id: str, text: str) -> None:
        toks = tokens(text)
        self._exact.setdefault(toks, (question_id, text))
        self._entries.append((question_id, text, toks, Counter(toks)))

    def find(self, text: str) -> Duplicate | None:
        """The first existing question ``text`` duplicates (exact before ROUGE-L), or None."""
        toks = tokens(text)
        hit = self._exact.get(toks)
        if hit is not None:
            return Duplicate("exact", hit[0], hit[1], 1.0)
        counts = Counter(toks)
        best: Duplicate | None = None
        for qid, other, other_toks, other_counts in self._entries:
            # The LCS is at most the shared multiset of tokens: skip pairs that cannot reach
            # the threshold without running the quadratic LCS.
            shared = sum((counts & other_counts).values())
            if not shared or 2 * shared / (len(toks) + len(other_toks)) < self.threshold:
                continue
            score = rouge_l(toks, other_toks)
            if score >= self.threshold and (best is None or score > best.score):
                best = Duplicate("rouge", qid, other, score)
        return best

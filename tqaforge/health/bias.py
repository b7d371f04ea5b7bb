"""Answer bias without a model: what a constant guess scores, and where the gold answers sit.

Per subtype of a release's base items:

- **Best constant answer.** Candidates: the ``top_k`` most common gold answers (majority class;
  answers compared in the canonical form of :func:`~tqaforge.tables.matching.normalize_answer`),
  "yes" and "no", and for numeric golds their mean and median. Each candidate is scored on every
  item of the subtype as the reply ``Final Answer: <candidate>`` by the project's own scorer
  (:func:`tqaforge.evaluate.scoring.score_one`, the normalised score ``evaluate`` reports: numbers
  as numbers, TableBench's tolerance where it has one, ROUGE-L for prose). The subtype is flagged
  when the best constant scores above ``constant_threshold`` (0.5). Charts and items whose gold is
  a table are left out (their scores need code or a table).
- **Answer length.** The gold answers' length in words: mean, and the share of the most common
  length (a subtype whose golds are all one word long invites one-word guesses). Reported only.
- **Position.** Among items whose gold answer is found in the table
  (:func:`~tqaforge.tables.matching.target_rows`), the share whose answer is in the first data row,
  and in the last, against the share expected if the answer rows sat anywhere (per item: answer
  rows / rows). The subtype is flagged when the one-sided exact Poisson-binomial p-value of the
  first-row (or last-row) count is below ``alpha``.

- **First listed option.** A question that lists its options in its text ("Did Spain or France
  win more?", "Which of Spain, France and Italy ...?", "... between A and B?") invites the guess
  "the first one". Among the items whose gold is exactly one of the options listed
  (:func:`listed_options`), the share whose gold is the first, against chance (1 / number of
  options, per item). The subtype is flagged when the one-sided p-value is below ``alpha``:
  scipy's exact binomial test when every item lists as many options, else the exact
  Poisson-binomial tail (chance differs from item to item). Reading the options is a heuristic,
  stated in :func:`listed_options`; an item whose gold matches no option, or several, is not counted.

Items answerable from the question alone can only be found with a model (the table withheld):
:mod:`tqaforge.health.question_only`.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from tqaforge.answers.parse import split_answer
from tqaforge.errors import ConfigError
from tqaforge.evaluate.predictions import Prediction, Reference, Release, load_release
from tqaforge.evaluate.scoring import gold_table, is_chart, score_one
from tqaforge.generation.dedup import tokens
from tqaforge.health.leakage import table_of
from tqaforge.tables.matching import answer_number, normalize_answer, target_rows
from tqaforge.tables.table import Table


@dataclass(frozen=True)
class BiasOptions:
    """Thresholds of the answer-bias section."""

    constant_threshold: float = 0.5  # flag a subtype whose best constant scores above this
    min_items: int = 5  # subtypes with fewer scorable items are reported, never flagged
    top_k: int = 3  # most common gold answers tried as constants
    alpha: float = 0.01  # position bias: one-sided p-value below which a subtype is flagged

    def __post_init__(self) -> None:
        if not 0.0 <= self.constant_threshold <= 1.0 or not 0.0 < self.alpha < 1.0:
            raise ConfigError("bias options: constant_threshold must be in [0, 1] and alpha in (0, 1)",
                              hint=f"got constant_threshold={self.constant_threshold}, alpha={self.alpha}")
        if self.min_items < 1 or self.top_k < 1:
            raise ConfigError("bias options: min_items and top_k must be positive")


@dataclass
class SubtypeBias:
    """The bias figures of one subtype."""

    subtype: str
    n: int  # scorable items (charts and table golds left out)
    majority: str
    majority_share: float
    best_constant: str
    best_score: float
    constants: dict[str, float]
    mean_length: float
    modal_length: int
    modal_length_share: float
    located: int  # items whose gold is found in the table
    first_row: int
    last_row: int
    expected_first: float
    expected_last: float
    p_first: float
    p_last: float
    constant_flag: bool = False
    position_flag: bool = False
    listed: int = 0  # items whose gold is exactly one of the options their question lists
    first_option: int = 0  # of those, golds that are the first option listed
    expected_first_option: float = 0.0  # by chance: the sum of 1 / options
    p_first_option: float = 1.0
    first_option_flag: bool = False

    def as_dict(self) -> dict[str, Any]:
        r = round
        return {
            "subtype": self.subtype, "items": self.n, "majority": self.majority, "majority_share": r(self.majority_share, 4),
            "best_constant": self.best_constant, "best_score": r(self.best_score, 4),
            "constants": {k: r(v, 4) for k, v in self.constants.items()},
            "mean_length": r(self.mean_length, 3), "modal_length": self.modal_length,
            "modal_length_share": r(self.modal_length_share, 4),
            "position": {"located": self.located, "first_row": self.first_row, "last_row": self.last_row,
                         "expected_first": r(self.expected_first, 3), "expected_last": r(self.expected_last, 3),
                         "p_first": self.p_first, "p_last": self.p_last},
            "first_option": {"listed": self.listed, "first": self.first_option,
                             "expected": r(self.expected_first_option, 3), "p": self.p_first_option},
            "constant_flag": self.constant_flag, "position_flag": self.position_flag, "first_option_flag": self.first_option_flag,
        }


@dataclass
class BiasSection:
    """Answer bias per subtype (module docs)."""

    options: BiasOptions
    subtypes: list[SubtypeBias] = field(default_factory=list)
    skipped: int = 0  # charts and items whose gold is a table

    @property
    def constant_flagged(self) -> list[str]:
        return [s.subtype for s in self.subtypes if s.constant_flag]

    @property
    def position_flagged(self) -> list[str]:
        return [s.subtype for s in self.subtypes if s.position_flag]

    @property
    def first_option_flagged(self) -> list[str]:
        return [s.subtype for s in self.subtypes if s.first_option_flag]

    def lines(self) -> list[str]:
        o = self.options
        out = [f"Answer bias: {sum(s.n for s in self.subtypes)} items in {len(self.subtypes)} subtypes"
               f" ({self.skipped} charts or table answers left out); question-only answering needs a model (a section of its own when one is given)"]
        for s in self.subtypes:
            flags = ", ".join(f for f, on in (("CONSTANT", s.constant_flag), ("POSITION", s.position_flag),
                                              ("FIRST OPTION", s.first_option_flag)) if on)
            listed = (f"; first listed option {s.first_option}/{s.listed} (expected {s.expected_first_option:.1f})"
                      if s.listed else "")
            out.append(
                f"  {s.subtype} ({s.n}): best constant {_short(s.best_constant)!r} scores {s.best_score:.2f};"
                f" majority {s.majority_share:.0%}; length {s.mean_length:.1f} words ({s.modal_length_share:.0%} of"
                f" length {s.modal_length}); first row {s.first_row}/{s.located} (expected {s.expected_first:.1f}),"
                f" last row {s.last_row}/{s.located} (expected {s.expected_last:.1f}){listed}" + (f"  [{flags}]" if flags else "")
            )
        # Findings only: the health report's max_biased_subtypes is the one rule that gates them.
        out.append(f"  flagged subtypes: {len(self.constant_flagged)} by a constant answer (one scoring above"
                   f" {o.constant_threshold}), {len(self.position_flagged)} by the gold's table position,"
                   f" {len(self.first_option_flagged)} by the first listed option")
        return out

    def as_dict(self) -> dict[str, Any]:
        o = self.options
        return {
            "options": {"constant_threshold": o.constant_threshold, "min_items": o.min_items, "top_k": o.top_k, "alpha": o.alpha},
            "skipped": self.skipped, "subtypes": [s.as_dict() for s in self.subtypes],
            "constant_flagged": self.constant_flagged, "position_flagged": self.position_flagged,
            "first_option_flagged": self.first_option_flagged,
            "question_only": "its own section: needs a model",
        }


def _short(text: str, most: int = 60) -> str:
    return text if len(text) <= most else text[: most - 3] + "..."


def poisson_binomial_sf(k: int, probabilities: Sequence[float]) -> float:
    """P(X >= k) for X the number of successes of independent trials with ``probabilities``."""
    dist = np.zeros(len(probabilities) + 1)
    dist[0] = 1.0
    for i, p in enumerate(probabilities):
        dist[1: i + 2] = dist[1: i + 2] * (1 - p) + dist[: i + 1] * p
        dist[0] *= 1 - p
    return float(min(1.0, max(0.0, dist[k:].sum())))


def _number_text(value: float) -> str:
    return f"{value:.6g}"


def _gold_items(ref: Reference) -> tuple[str, ...]:
    return tuple(split_answer(ref.answer[0]) or ref.answer) if len(ref.answer) == 1 else ref.answer


def _subtype_bias(name: str, refs: Sequence[Reference], tables: Sequence[Table | None], o: BiasOptions) -> SubtypeBias:
    keys = [tuple(normalize_answer(a) for a in _gold_items(r)) for r in refs]
    counts = Counter(keys)
    first_text: dict[tuple[str, ...], str] = {}
    for key, r in zip(keys, refs):
        first_text.setdefault(key, r.answer_text)
    majority_key, majority_n = counts.most_common(1)[0]
    candidates = [first_text[k] for k, _ in counts.most_common(o.top_k)] + ["yes", "no"]
    numbers = [v for v in (answer_number(r.answer_text) for r in refs if len(_gold_items(r)) == 1) if v is not None]
    if numbers:
        candidates += [_number_text(statistics.fmean(numbers)), _number_text(statistics.median(numbers))]
    scores: dict[str, float] = {}
    for c in dict.fromkeys(candidates):
        reply = Prediction(0, "", "constant", "DP", f"Final Answer: {c}")
        scores[c] = sum(score_one(r, reply, {}).score for r in refs) / len(refs)
    best = max(scores, key=lambda c: (scores[c], -candidates.index(c)))
    lengths = [len(tokens(r.answer_text)) for r in refs]
    modal, modal_n = Counter(lengths).most_common(1)[0]
    first = last = 0
    p_first: list[float] = []
    p_last: list[float] = []
    for r, t in zip(refs, tables):
        if t is None or t.n_rows == 0:
            continue
        rows = target_rows(t, _gold_items(r))
        if not rows:
            continue
        share = min(1.0, len(rows) / t.n_rows)
        p_first.append(share)
        p_last.append(share)
        first += 0 in rows
        last += (t.n_rows - 1) in rows
    pf, pl = poisson_binomial_sf(first, p_first), poisson_binomial_sf(last, p_last)
    enough = len(refs) >= o.min_items
    chances: list[float] = []
    first_option = 0
    for r in refs:
        listed = listed_options(r.question)
        at = listed.index_of(r.answer_text) if listed is not None else None
        if listed is None or at is None:
            continue
        chances.append(1.0 / listed.count)
        first_option += at == 0
    return SubtypeBias(
        name, len(refs), first_text[majority_key], majority_n / len(refs), best, scores[best], scores,
        statistics.fmean(lengths), modal, modal_n / len(refs), len(p_first), first, last, sum(p_first), sum(p_last), pf, pl,
        constant_flag=enough and scores[best] > o.constant_threshold,
        position_flag=len(p_first) >= o.min_items and min(pf, pl) < o.alpha,
        listed=len(chances), first_option=first_option, expected_first_option=sum(chances),
        p_first_option=(pfo := first_option_p(first_option, chances)),
        first_option_flag=len(chances) >= o.min_items and pfo < o.alpha,
    )


def first_option_p(first: int, chances: Sequence[float]) -> float:
    """One-sided p-value of ``first`` golds being the first listed option, item i having chance
    ``chances[i]``: scipy's exact binomial test when every chance is the same, else the exact
    Poisson-binomial tail (the same test with chances that differ)."""
    if not chances:
        return 1.0
    if len(set(chances)) == 1:
        from scipy.stats import binomtest

        return float(binomtest(first, len(chances), chances[0], alternative="greater").pvalue)
    return poisson_binomial_sf(first, chances)


#: Words that open a question's lead-in rather than an option ("did Spain", "in 2010").
_LEAD = frozenset(
    "what which who whom whose how when where why did does do is are was were has have had can could will would "
    "should in on at for from of to by among between than compared".split())
#: Phrases after which a question lists its options: "which of", "which one among", "between", a colon.
_TRIGGER = re.compile(r"\b(?:which|who|what)(?:\s+one)?\s+(?:of|among)(?:\s+the\s+following)?\b:?|\bamong\b|\bbetween\b|:",
                      re.IGNORECASE)
_OR = re.compile(r"\bor\b", re.IGNORECASE)
_OR_AND = re.compile(r"\b(?:or|and)\b", re.IGNORECASE)
_MOST_OPTION_WORDS = 6


@dataclass(frozen=True)
class ListedOptions:
    """The options a question lists, as word tokens: the text that ends with the first option
    (``first``; the option itself when ``first_exact``), the options between (``middle``), and the
    text that starts with the last option (``last``)."""

    first: tuple[str, ...]
    first_exact: bool
    middle: tuple[tuple[str, ...], ...]
    last: tuple[str, ...]

    @property
    def count(self) -> int:
        return 2 + len(self.middle)

    def index_of(self, answer: str) -> int | None:
        """Which option ``answer`` is (0 = the first listed); None when it matches none or several."""
        g = tokens(answer)
        if not g:
            return None
        n = len(g)
        hits = [0] if (self.first == g if self.first_exact else self.first[-n:] == g) else []
        hits += [1 + i for i, m in enumerate(self.middle) if m == g]
        hits += [self.count - 1] if self.last[:n] == g else []
        return hits[0] if len(hits) == 1 else None


def listed_options(question: str) -> ListedOptions | None:
    """The options ``question`` lists, or None (a heuristic):

    - after a trigger ("which of", "which one among", "between", a colon) the options run to the
      last "or" / "and": comma-separated, each of at most six words ("Which of Spain, France and
      Italy won most?");
    - without one, the question has exactly one "or"; the comma-separated short parts before it
      (at most four words, not opening with a question word or a preposition) are options ("Who won
      most, Spain, France or Italy?"); with none, the option before "or" is the end of the text
      before it ("Did Spain or France win more?").

    The first and last options are matched by their ends (:meth:`ListedOptions.index_of`): the text
    around them is the question's, not the option's."""
    text = " ".join(question.split())
    trigger = _TRIGGER.search(text)
    if trigger is not None:
        conj = list(_OR_AND.finditer(text, trigger.end()))
        if not conj:
            return None
        found = conj[-1]
        parts = [p.strip() for p in text[trigger.end():found.start()].split(",")]
        parts = [p for p in parts if p]
        items = [tokens(p) for p in parts]
        if not items or any(not t or len(t) > _MOST_OPTION_WORDS for t in items):
            return None
        first, first_exact, middle = items[0], True, tuple(items[1:])
    else:
        ors = list(_OR.finditer(text))
        if len(ors) != 1:
            return None
        found = ors[0]
        parts = [p.strip() for p in text[:found.start()].split(",")]
        while parts and not parts[-1]:
            parts.pop()  # an Oxford comma: "A, B, or C"
        collected: list[tuple[str, ...]] = []
        for part in reversed(parts):
            t = tokens(part)
            if not t or len(t) > 4 or t[0] in _LEAD:
                break
            collected.append(t)
        if not parts:
            return None
        if collected:
            items = collected[::-1]
            first, first_exact, middle = items[0], True, tuple(items[1:])
        else:
            first, first_exact, middle = tokens(parts[-1]), False, ()
    last = tokens(text[found.end():])
    if not first or not last:
        return None
    return ListedOptions(first, first_exact, middle, last)


def subtype_of(ref: Reference) -> str:
    """The subtype a reference is grouped under by the bias and question-only sections: its
    ``qsubtype``, else its ``qtype``, else ``(none)``."""
    return ref.qsubtype or ref.qtype or "(none)"


def answer_bias(references: Sequence[Reference], tables: Sequence[Table | None] | None = None,
                options: BiasOptions = BiasOptions()) -> BiasSection:
    """The answer-bias section of ``references`` (their ``tables`` in the same order, for position
    bias; None: no position figures), grouped by subtype (``qsubtype``, else ``qtype``)."""
    if tables is not None and len(tables) != len(references):
        raise ConfigError(f"answer bias: {len(references)} references but {len(tables)} tables",
                          hint="give one table (or None) per reference")
    table_list: Sequence[Table | None] = tables if tables is not None else [None] * len(references)
    groups: dict[str, tuple[list[Reference], list[Table | None]]] = defaultdict(lambda: ([], []))
    skipped = 0
    for ref, table in zip(references, table_list):
        if is_chart(ref) or gold_table(ref) is not None or not ref.answer:
            skipped += 1
            continue
        group = groups[subtype_of(ref)]
        group[0].append(ref)
        group[1].append(table)
    section = BiasSection(options, skipped=skipped)
    for name in sorted(groups):
        refs, tabs = groups[name]
        section.subtypes.append(_subtype_bias(name, refs, tabs, options))
    return section


def release_bias(root: Path, options: BiasOptions = BiasOptions(), *, release: Release | None = None) -> BiasSection:
    """The answer-bias section of the base items of the release at ``root``."""
    loaded = release if release is not None else load_release(root)
    refs = loaded.base_references()
    return answer_bias(refs, [table_of(loaded.table(r)) for r in refs], options)

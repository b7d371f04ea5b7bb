"""Find the cells of a table that hold an item's answer (its *target* cells).

FREB-TQA shifts the *target rows* (columns) of extraction questions: the rows holding the cell
that "corresponds to the answer", found "by applying exact match between the answer and table
cell value". Exact string match misses answers that the benchmarks themselves wrote differently
from the table: on FREB-TQA's own extraction files it fails for TAT answers such as ``24,264``
against the cell ``$24,264`` or ``365,223`` against ``(365,223)``, and for SQA answers that
dropped accents or quotes (``Anna Zagorska`` / ``Anna Zagórska``, ``Eu so quero`` /
``"Eu só quero"``) or turned an en dash into a hyphen. A missed target means a skipped variant,
so we match in four tiers and, per answer, keep only the cells of the first tier that finds any
(a looser rule is never used when a stricter one already found the answer, which keeps loose
rules from adding spurious targets):

1. ``exact``: equal after :func:`~tqaforge.tables.cells.normalize_cell` (case, Unicode NFKC,
   whitespace). This is FREB-TQA's rule up to case and spacing.
2. ``numeric``: both read as numbers (:func:`~tqaforge.tables.cells.parse_number`) and the
   values are equal: ``"1,694" == "1694"``, ``"$1,305" == "1305"``, ``"65.7%" == "65.7"``,
   ``"(5,906)" == "-5906"``. Currency, separators, a percent sign or scale word do not count
   as a difference, because benchmark answers routinely drop them (TAT-QA keeps the unit in
   a separate ``scale`` field).
3. ``loose``: equal after also folding accents (``ó`` -> ``o``), unifying dashes, removing
   quotation marks and trailing ``.,;:``.
4. ``core``: equal (as text, or as numbers) after also removing footnote markers (``[1]``,
   ``*``, ``†``), parenthesised remarks (``Dzhebariki-Khaya (Джебарики-Хая)``) and, for a cell
   that is wholly parenthesised, the parentheses (the accounting negative ``(365,223)`` matches
   the answer ``365,223``). Both sides must keep some text, so a cell such as ``[3]`` or
   ``*`` matches no answer.

Only data cells are searched: an answer found only in the header has no target row.
Blank answers match nothing (they would otherwise match every empty cell).

>>> t = Table.build(["name", "pop"], [["Oslo", "709,000"], ["Bergen", "$ 285,900"]])
>>> find_target_cells(t, ["285900"])
((1, 1),)
>>> target_rows(t, ["oslo"]), target_columns(t, ["oslo"])
((0,), (0,))
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass
from typing import Callable, Iterable, Literal

from tqaforge.tables.cells import normalize_cell, parse_number
from tqaforge.tables.source import Cell
from tqaforge.tables.table import Table

Rule = Literal["exact", "numeric", "loose", "core"]

#: The tiers in the order they are tried.
RULES: tuple[Rule, ...] = ("exact", "numeric", "loose", "core")

_DASHES = dict.fromkeys(map(ord, "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d"), "-")
_QUOTES = dict.fromkeys(map(ord, "\"'`\u2018\u2019\u201a\u201b\u201c\u201d\u201e\u201f\u00ab\u00bb\u2039\u203a"), None)
_FOOTNOTE_BRACKETS = re.compile(r"\[[^\]]*\]")
_PARENTHESISED = re.compile(r"\([^()]*\)")
_FOOTNOTE_SIGNS = re.compile(r"[*\u2020\u2021\u00a7\u00b6#]+")
_TRAILING_PUNCT = ".,;:"


@dataclass(frozen=True, slots=True)
class Match:
    """One target cell, the answer it matched and the rule that matched it."""

    cell: Cell
    answer: str
    rule: Rule


def fold_text(text: str) -> str:
    """The ``loose`` form: normalised, accents folded, dashes unified, quotes removed."""
    text = normalize_cell(text)
    text = "".join(ch for ch in unicodedata.normalize("NFKD", text) if not unicodedata.combining(ch))
    text = text.translate(_DASHES).translate(_QUOTES)
    return " ".join(text.split()).rstrip(_TRAILING_PUNCT).strip()


def core_text(text: str) -> str:
    """The ``core`` form: :func:`fold_text` without footnote markers and parenthesised remarks.

    A wholly parenthesised text loses only its outer parentheses, so the accounting negative
    ``(365,223)`` keeps its number.
    """
    text = fold_text(text)
    if text.startswith("(") and text.endswith(")") and _PARENTHESISED.fullmatch(text):
        text = text[1:-1]
    text = _FOOTNOTE_BRACKETS.sub(" ", text)
    text = _PARENTHESISED.sub(" ", text)
    text = _FOOTNOTE_SIGNS.sub(" ", text)
    return " ".join(text.split()).rstrip(_TRAILING_PUNCT).strip()


def _same_number(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _core_equal(answer_core: str, cell_core: str) -> bool:
    if not answer_core or not cell_core:
        return False
    return answer_core == cell_core or _same_number(parse_number(answer_core), parse_number(cell_core))


def _tests(answer: str) -> list[tuple[Rule, Callable[[str], bool]]]:
    """One predicate per tier, each closing over the answer's own normalised forms."""
    norm = normalize_cell(answer)
    value = parse_number(answer)
    folded = fold_text(answer)
    core = core_text(answer)
    return [
        ("exact", lambda cell: normalize_cell(cell) == norm),
        ("numeric", lambda cell: value is not None and _same_number(parse_number(cell), value)),
        ("loose", lambda cell: bool(folded) and fold_text(cell) == folded),
        ("core", lambda cell: _core_equal(core, core_text(cell))),
    ]


def match_answer(table: Table, answer: str) -> tuple[Match, ...]:
    """The cells matching one answer under the strictest rule that matches any (row-major order)."""
    if not normalize_cell(answer):
        return ()
    cells = [((r, c), text) for r, row in enumerate(table.rows) for c, text in enumerate(row) if text.strip()]
    for rule, test in _tests(answer):
        hits = tuple(Match(cell, answer, rule) for cell, text in cells if test(text))
        if hits:
            return hits
    return ()


def value_match(answer: str, text: str, rules: Iterable[Rule] = RULES) -> Rule | None:
    """The first of ``rules`` (in tier order) under which ``answer`` and ``text`` are the same value.

    The tiers of :func:`match_answer` applied to one pair of strings, e.g. a person's answer
    against a gold answer (blind re-answering); None when no rule matches or either is blank.

    >>> value_match("1,694", "1694"), value_match("-5%", "5%"), value_match("Oslo ", "oslo")
    ('numeric', None, 'exact')
    """
    wanted = set(rules)
    if not normalize_cell(answer) or not normalize_cell(text):
        return None
    for rule, test in _tests(answer):
        if rule in wanted and test(text):
            return rule
    return None


def find_matches(table: Table, answers: Iterable[str]) -> tuple[Match, ...]:
    """:func:`match_answer` for each answer, concatenated (a cell may appear once per answer)."""
    return tuple(m for answer in answers for m in match_answer(table, answer))


def find_target_cells(table: Table, answers: Iterable[str]) -> tuple[Cell, ...]:
    """The (data row, column) cells holding any of the answers, sorted, each once.

    Empty when no answer is found (the target-row perturbations then skip the item).
    """
    return tuple(sorted({m.cell for m in find_matches(table, answers)}))


def target_rows(table: Table, answers: Iterable[str]) -> tuple[int, ...]:
    """Sorted data rows holding a target cell."""
    return tuple(sorted({r for r, _ in find_target_cells(table, answers)}))


def target_columns(table: Table, answers: Iterable[str]) -> tuple[int, ...]:
    """Sorted columns holding a target cell."""
    return tuple(sorted({c for _, c in find_target_cells(table, answers)}))

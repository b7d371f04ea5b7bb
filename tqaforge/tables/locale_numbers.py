"""Locale-aware numbers: which one way of writing numbers a column uses, and the cells' values.

Real tables write "3,5" (decimal comma), "1.234,5", "1 234,5" (space, no-break or narrow
no-break space between thousands), "1'234.5", "12 %", "€ 12,50", "12,50 EUR" and "(1 234)"
(accounting negatives). A column is read under ONE convention (:data:`CONVENTIONS`): the one
that parses the most of its non-empty cells, the plain "1,234.5" first on a tie; the column is
numeric when that convention parses at least :data:`NUMERIC_SHARE` of them. One convention per
column means that "1.234" is never a thousand in one row and a decimal in the next.

Ambiguous cells follow the rest of their column; a column of nothing but ambiguous cells
("1.234", "2.500", or "1,234") is read the plain way: "1.234" is one point two three four and
"1,234" is one thousand two hundred thirty-four, as :func:`tqaforge.tables.cells.parse_number`
has always read them.

>>> detect_convention(["1.234,5", "12,5", "7"])
'1.234,5'
>>> parse_with("(1 234,5)", "1 234,5")
Decimal('-1234.5')
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Iterable, Sequence

from tqaforge.tables.cells import parse_decimal

#: A column is numeric when its convention parses at least this share of its non-empty cells
#: ("nearly all": a footnote marker or a "n/a" does not make a column of numbers text).
NUMERIC_SHARE = 0.9

_SPACES = " \u00a0\u202f\u2009"  # space, no-break, narrow no-break, thin space
_CURRENCY = r"(?:[$€£¥]|EUR|USD|GBP|JPY|CHF)"


@dataclass(frozen=True, slots=True)
class Convention:
    """One way of writing numbers: the decimal mark and the thousands separators."""

    name: str  # how the convention writes one thousand two hundred thirty-four and a half
    decimal: str
    groups: str  # the characters allowed between groups of three digits

    def pattern(self) -> re.Pattern[str]:
        g = "[" + re.escape(self.groups) + "]"
        d = re.escape(self.decimal)
        number = rf"(?:\d{{1,3}}(?:{g}\d{{3}})+|\d+)(?:{d}\d+)?|{d}\d+"
        sign = r"[-+\u2212]"
        s = r"\s*"
        return re.compile(
            rf"^(?:(?P<open>\(){s})?"
            rf"(?:(?P<sign1>{sign}){s})?(?:{_CURRENCY}{s}(?:(?P<sign2>{sign}){s})?)?"
            rf"(?P<number>{number})"
            rf"(?:{s}(?:{_CURRENCY}|%))?{s}(?P<close>\))?$",
            re.IGNORECASE,
        )


#: The conventions tried on each column, in order of preference on a tie.
CONVENTIONS: tuple[Convention, ...] = (
    Convention("1,234.5", ".", ","),
    Convention("1.234,5", ",", "."),
    Convention("1 234,5", ",", _SPACES),
    Convention("1 234.5", ".", _SPACES),
    Convention("1'234.5", ".", "'\u2019"),
)
PLAIN = CONVENTIONS[0].name
_BY_NAME = {c.name: c for c in CONVENTIONS}
_DIGIT = re.compile(r"\d")
_NUMBER_START = re.compile(rf"\s*(?:[-+\u2212(0-9.,'$€£¥]|{_CURRENCY})", re.IGNORECASE)
_SIMPLE_DECIMAL = re.compile(r"-?([0-9]+)\.([0-9]+)")
_ALL = tuple(range(len(CONVENTIONS)))
_POINT = tuple(i for i, c in enumerate(CONVENTIONS) if c.decimal == ".")
_POINT_AND_DOT_GROUPS = tuple(i for i, c in enumerate(CONVENTIONS) if c.decimal == "." or "." in c.groups)
_PATTERNS = {c.name: c.pattern() for c in CONVENTIONS}


def parse_with(text: str, convention: str) -> Decimal | None:
    """The value of ``text`` under the named convention, or None if it is not a number so
    written. Parentheses make it negative; currency, percent sign and spaces are dropped
    (``"12 %"`` is 12). The plain convention also reads what
    :func:`~tqaforge.tables.cells.parse_decimal` reads ("3k", "5 million")."""
    conv = _BY_NAME[convention]
    t = text.strip()
    match = _PATTERNS[convention].match(t) if t else None
    if match is None or (match.group("open") is None) != (match.group("close") is None):
        return parse_decimal(text) if convention == PLAIN else None
    digits = match.group("number")
    for ch in conv.groups:
        digits = digits.replace(ch, "")
    digits = digits.replace(conv.decimal, ".")
    try:
        value = Decimal(digits)
    except InvalidOperation:  # pragma: no cover - the pattern admits only digits and one mark
        return None
    # "(1 234)" and "-1 234" are negative; "(-1 234)" is not a second negation but a writer's
    # belt and braces.
    negative = bool(match.group("open")) or any((match.group(g) or "+") in "-\u2212" for g in ("sign1", "sign2"))
    return -value if negative else value


def _matches(cell: str, among: Sequence[int] = _ALL) -> tuple[int, ...]:
    """The indexes of the conventions (of ``among``) that read ``cell`` (a non-blank cell)."""
    if cell.isascii() and cell.isdigit():
        return _ALL
    simple = _SIMPLE_DECIMAL.fullmatch(cell)
    if simple is not None:
        # "0.25" is a decimal point everywhere it is one; "1.234" is also a thousand in "1.234,5".
        return _POINT_AND_DOT_GROUPS if len(simple.group(1)) <= 3 and len(simple.group(2)) == 3 else _POINT
    if _DIGIT.search(cell) is None or _NUMBER_START.match(cell) is None:
        return ()  # "row12", "Q1": text with digits, which no convention reads
    return tuple(i for i in among if parse_with(cell, CONVENTIONS[i].name) is not None)


def _counts(cells: Iterable[str], counts: list[int]) -> int:
    """Add to ``counts`` (one per convention) the cells each convention reads; the number of
    non-empty cells. Digits alone, plain decimals and text without a digit (most cells) are
    told without trying every convention's pattern."""
    filled = 0
    for cell in cells:
        if not cell or (not cell[0].isalnum() and not cell.strip()):
            continue
        filled += 1
        for i in _matches(cell):
            counts[i] += 1
    return filled


def _choose(counts: Sequence[int], filled: int) -> str | None:
    if not filled:
        return None
    best = max(range(len(counts)), key=lambda i: (counts[i], -i))  # the earlier one on a tie
    return CONVENTIONS[best].name if counts[best] and counts[best] >= NUMERIC_SHARE * filled else None


def detect_convention(cells: Iterable[str]) -> str | None:
    """The convention of a column's cells, or None when it is not a column of numbers
    (empty cells are left out; see the module's rules)."""
    counts = [0] * len(CONVENTIONS)
    return _choose(counts, _counts(cells, counts))


def detect_columns(width: int, rows: Sequence[Sequence[str]]) -> tuple[str | None, ...]:
    """The convention of every column of ``rows`` (None for text columns), in one pass over
    the rows (packed rows are unpacked one at a time).

    A convention that has failed on more than a tenth of the rows can no longer read 90% of
    its column's cells, so it is not tried on that column again, and a column with no
    convention left is not looked at again: a text column costs a tenth of a pass."""
    n = len(CONVENTIONS)
    counts = [[0] * n for _ in range(width)]
    failures = [[0] * n for _ in range(width)]
    alive = [list(range(n)) for _ in range(width)]
    filled = [0] * width
    limit = (1 - NUMERIC_SHARE) * len(rows)
    for row in rows:
        for col, cell in enumerate(row):
            live = alive[col]
            if not live:
                continue
            if not cell or (not cell[0].isalnum() and not cell.strip()):
                continue
            filled[col] += 1
            matched = _matches(cell, live)
            column, failed = counts[col], failures[col]
            for i in live:
                if i in matched:
                    column[i] += 1
                else:
                    failed[i] += 1
            if any(failed[i] > limit for i in live):
                alive[col] = [i for i in live if failed[i] <= limit]
                for i in set(live) - set(alive[col]):
                    column[i] = 0  # out of the running
    return tuple(_choose(counts[col], filled[col]) if alive[col] else None for col in range(width))

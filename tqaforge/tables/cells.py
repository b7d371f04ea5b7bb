"""Cell normalisation and number parsing, shared by stats, matching and perturbations."""

from __future__ import annotations

import re
import unicodedata
from decimal import Decimal, InvalidOperation

# A number as tables write it: optional sign or accounting parentheses, currency, thousands
# separators, decimals, an optional percent or scale suffix. "$ 1,305", "(5,906)", "65.7%", "-0.3".
_NUMBER = re.compile(
    r"""^\(?\s*[-+\u2212]?\s*[$€£¥]?\s*[-+\u2212]?
        (?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?
        \s*(?:%|k|m|bn|million|billion)?\s*\)?$""",
    re.IGNORECASE | re.VERBOSE,
)
_HAS_DIGIT = re.compile(r"\d")


def normalize_cell(text: str) -> str:
    """Lower-case, NFKC, whitespace-collapsed form used to compare cells and answers."""
    text = unicodedata.normalize("NFKC", text).replace("\\n", " ")
    return " ".join(text.lower().split())


def is_numeric(text: str) -> bool:
    """True when the cell reads as one number (currency, separators, %, parentheses allowed)."""
    text = text.strip()
    if not text or not _HAS_DIGIT.search(text):
        return False
    return bool(_NUMBER.match(text))


def parse_decimal(text: str) -> Decimal | None:
    """The exact value of a numeric cell as written, or None; :func:`parse_number` is its float.

    ``"1,234.50"`` is ``Decimal("1234.50")`` (the written decimals kept, which answer matching uses
    as the precision of the number); ``(5,906)`` is -5906; a percent sign or scale word is dropped.
    """
    if not is_numeric(text):
        return None
    t = text.strip()
    negative = t.startswith("(") and t.endswith(")")
    t = re.sub(r"[()$€£¥,%\s]", "", t).replace("\u2212", "-")
    t = re.sub(r"(?i)(k|m|bn|million|billion)$", "", t)
    try:
        value = Decimal(t)
    except InvalidOperation:
        return None
    if not value.is_finite():
        return None
    return -value if negative else value


def parse_number(text: str) -> float | None:
    """The value of a numeric cell, or None. ``(5,906)`` is -5906; ``65.7%`` is 65.7."""
    value = parse_decimal(text)
    return None if value is None else float(value)


# The one rule for control characters in stored text (cells, headers, captions, questions,
# answers, model replies): NUL and the other C0/C1 control characters are removed where text
# enters tqaforge, except tab, newline and carriage return, which tables and questions use.
# Lone surrogates (from JSON such as "\ud800") go too: they are not characters, no UTF-8
# encoder (so no database driver) accepts them.
# PostgreSQL refuses NUL in text outright and SQLite would store it silently, so removing them at
# the door is the only rule that gives the same store on both; removal is counted, never silent.
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` without NUL, other control characters and lone surrogates (tab, newline, CR kept)."""
    return _CONTROL.sub("", text) if _CONTROL.search(text) else text


def count_control(text: str) -> int:
    """How many characters :func:`clean_text` would remove from ``text``."""
    return len(_CONTROL.findall(text))

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

The same tiers compare two *answers* (the second half of this module): :func:`same_answer` under
a subtype's :func:`answer_rule` is the one comparator that voting, agreement (blind re-answering,
through :func:`value_match`) and evaluation call, and :func:`normalize_answer` the one canonical
form of an answer item; there is no second copy elsewhere.

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
from decimal import Context, Decimal, InvalidOperation
from typing import Callable, Iterable, Literal, Sequence

from tqaforge.tables.cells import clean_text, normalize_cell, parse_decimal, parse_number
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

    One answer item against another, e.g. a person's answer against a gold answer (blind
    re-answering); None when no rule matches or either is blank. The tiers are those of
    :func:`match_answer` with the answer-item comparison of :func:`same_answer` (the one piece of
    logic both use): when both sides read as numbers, only ``exact`` and ``numeric`` apply, so
    ``"(3)"`` is not ``"3"`` and ``"12.5"`` is not ``"125"`` through a looser text rule.

    >>> value_match("1,694", "1694"), value_match("-5%", "5%"), value_match("Oslo ", "oslo")
    ('numeric', None, 'exact')
    """
    return _item_rule(_Item.of(answer), _Item.of(text), frozenset(rules), 0.0)


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


# --- answers: the one normaliser and comparator (voting, agreement, evaluation) -------------------
#
# Answers are tuples of items ("Final Answer: a, b" -> ("a", "b"), see tqaforge.answers.parse).
# One item compares with another by the tiers above (exact, numeric, loose), where the numeric
# tier reads answer numbers (:func:`answer_number`): thousands separators, currency, a percent
# sign, signs (+, -, unicode minus, accounting parentheses), scientific notation, trailing zeros.
# Two numbers are equal when their values are, or when the one written with more decimals rounds
# to the other (``20.727`` is ``20.73``, the other needing at least two decimals: ``12.4`` is not
# ``12`` and ``0.12`` is not ``0.1``), or, under a rule with a relative tolerance, when they differ by at most that share of
# the larger magnitude. Lists compare item by item in order, or as multisets (one to one, any
# order), as the subtype's :func:`answer_rule` says.

#: TableBench's "EM within 10%" tolerance for the forecasting and statistics subtypes.
TABLEBENCH_TOLERANCE = 0.1

#: The answer tiers: ``core`` (dropping parenthesised remarks and footnote marks) is for finding
#: table cells, too loose to call two answers the same ("nicosia (cyp)" is not "nicosia").
ANSWER_TIERS: tuple[Rule, ...] = ("exact", "numeric", "loose")


@dataclass(frozen=True, slots=True)
class AnswerRule:
    """How two answers of one subtype compare: in order or as multisets, and the numbers' tolerance."""

    ordered: bool = False
    rel_tol: float = 0.0


_ORDERED = AnswerRule(ordered=True)
_SET = AnswerRule()
_TOLERANT = AnswerRule(ordered=True, rel_tol=TABLEBENCH_TOLERANCE)

#: The rule per TableBench subtype (names exactly as its ``qsubtype``). Where a subtype's
#: multi-item answers are ordered parts of the question ("which X, and by how much", "winner and
#: runner-up", "mean and standard deviation"), order counts: a false "same" accepts a wrong gold
#: answer, a false "different" only sends the item to a person. Multisets only where the
#: subtype's lists are sets of like things. Tolerance where TableBench scores with EM within 10%.
ANSWER_RULES: dict[str, AnswerRule] = {
    "MatchBased": _SET,  # the rows matching a condition ("which nations won 1 gold"): a set
    "Multi-hop FactChecking": _ORDERED,  # two-part questions: winner, runner-up; year, venue
    "Aggregation": _ORDERED,  # "the total ..., and which driver ...": parts in question order
    "Multi-hop NumericalReasoing": _ORDERED,  # "total population ..., and average area": two numbers in order
    "Counting": _SET,  # one number
    "ArithmeticCalculation": _SET,  # one number
    "Time-basedCalculation": _SET,  # one number
    "Domain-Specific": _SET,  # the entities meeting a defined measure: a set
    "Ranking": _ORDERED,  # the order is the answer
    "Comparison": _ORDERED,  # "which ..., and how is the difference"; "highest, then lowest"
    "ImpactAnalysis": _SET,  # a set of factors, or one impact label
    "CorrelationAnalysis": _TOLERANT,  # relation, coefficient; EM within 10% in TableBench
    "TrendForecasting": _TOLERANT,  # one forecast per series in the asked order; EM within 10%
    "StatisticalAnalysis": _TOLERANT,  # the statistics in the asked order; EM within 10%
    "CausalAnalysis": _ORDERED,  # prose: its commas split sentence pieces, whose order is the text
    "DescriptiveAnalysis": _ORDERED,  # prose
    "AnomalyDetection": _ORDERED,  # prose
    "ChartGeneration": _SET,  # drawn values: TableBench compares them sorted
}


def answer_rule(subtype: str | None) -> AnswerRule:
    """The :class:`AnswerRule` of a subtype (:data:`ANSWER_RULES`); unordered and exact for any other.

    >>> answer_rule("Ranking"), answer_rule("StatisticalAnalysis").rel_tol, answer_rule(None)
    (AnswerRule(ordered=True, rel_tol=0.0), 0.1, AnswerRule(ordered=False, rel_tol=0.0))
    """
    return ANSWER_RULES.get(subtype or "", _SET)


# Wrappers a model puts around one answer item: emphasis, code, quotes, TeX math.
_WRAPPERS: tuple[tuple[str, str], ...] = (
    ("**", "**"), ("__", "__"), ("*", "*"), ("`", "`"), ('"', '"'), ("'", "'"), ("\u201c", "\u201d"),
    ("\u2018", "\u2019"), ("\u00ab", "\u00bb"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"),
)
_COMMAND = re.compile(r"^\\(?:boxed|text|textbf|mathrm|mathbf)\s*\{(.*)\}$", re.DOTALL)
_NUMPY_SCALAR = re.compile(r"^(?:np|numpy)\.[a-z]+\d*\((.*)\)$", re.DOTALL)


def clean_item(text: str) -> str:
    """One answer item without what a model wraps around it: emphasis (``**x**``), backticks,
    quotes, ``$x$``, ``\\boxed{x}`` / ``\\text{x}``, numpy's ``np.float64(x)``, trailing periods.

    >>> clean_item(' "**12.5%**". '), clean_item("\\\\boxed{42}"), clean_item("np.float64(3.5)")
    ('12.5%', '42', '3.5')
    """
    t = text.strip()
    for _ in range(16):  # each pass removes one layer; a bound keeps hostile nesting cheap
        before = t
        t = t.rstrip(".").strip()
        for left, right in _WRAPPERS:
            if len(t) >= len(left) + len(right) and t.startswith(left) and t.endswith(right):
                t = t[len(left): -len(right)].strip()
                break
        match = _COMMAND.match(t) or _NUMPY_SCALAR.match(t)
        if match:
            t = match.group(1).strip()
        if t == before:
            break
    return t


_APPROX = re.compile(r"^(?:~|\u2248)\s*")
_SCIENTIFIC = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)e[-+]?\d{1,2}$", re.IGNORECASE)
_SPACE_GROUPS = re.compile(r"^[-+]?\d{1,3}(?: \d{3})+(?:\.\d+)?$")
_TRAILING_CURRENCY = re.compile(r"(?<=\d)\s*(?:[$\u20ac\u00a3\u00a5]|usd|eur|gbp)$", re.IGNORECASE)
_WIDE = Context(prec=100)
_MAX_NUMBER_CHARS = 64


def _answer_decimal(item: str) -> Decimal | None:
    """The written value of one cleaned item (its decimals kept), or None when it is not a number."""
    t = unicodedata.normalize("NFKC", item).strip()
    if not t or len(t) > _MAX_NUMBER_CHARS:
        return None
    t = _APPROX.sub("", t.replace("\u2212", "-"))
    t = _TRAILING_CURRENCY.sub("", t)
    if _SPACE_GROUPS.match(t):
        t = t.replace(" ", "")
    if _SCIENTIFIC.match(t):
        try:
            return Decimal(t)
        except InvalidOperation:  # pragma: no cover - the pattern admits only valid literals
            return None
    return parse_decimal(t)


def _decimal_text(value: Decimal) -> str:
    if value.is_zero():
        return "0"
    return format(value.normalize(_WIDE), "f")


def answer_number(text: str) -> float | None:
    """The value of one answer item, or None when it is not a number.

    The cell rule (:func:`~tqaforge.tables.cells.parse_number`: separators, currency, %, scale
    words, accounting parentheses, unicode minus) on the cleaned item (:func:`clean_item`), plus
    scientific notation, ``~``/``≈``, a trailing currency sign or code and spaces between digit groups.

    >>> answer_number("**$1,234.50**"), answer_number("(5,906)"), answer_number("1.5e3"), answer_number("12 apples")
    (1234.5, -5906.0, 1500.0, None)
    """
    value = _answer_decimal(clean_item(clean_text(text)))
    return None if value is None else float(value)


def normalize_answer(text: str) -> str:
    """The canonical form of one answer item.

    A number is its value in plain decimal notation without separators, currency, percent sign,
    trailing zeros or ``+`` (``"1,234.50"`` -> ``"1234.5"``, ``"12%"`` -> ``"12"``, ``"(3)"`` ->
    ``"-3"``); the percent sign goes because the comparator treats ``"12%"`` and ``"12"`` as the
    same answer (models drop it), while ``"0.12"`` stays another number: no unit conversion.
    Other text is :func:`fold_text` of the cleaned item (lower case, NFKC, accents folded, dashes
    unified, quotes and trailing punctuation removed, whitespace collapsed).

    Equal canonical forms mean equal items; the converse is :func:`same_answer`'s business
    (rounding, tolerance).

    >>> normalize_answer("1,234.50"), normalize_answer("12%"), normalize_answer(" **Caf\\u00e9**. ")
    ('1234.5', '12', 'cafe')
    """
    item = clean_item(clean_text(text))
    value = _answer_decimal(item)
    return _decimal_text(value) if value is not None else fold_text(item)


@dataclass(frozen=True, slots=True)
class _Item:
    """One answer item's forms, computed once per comparison."""

    norm: str  # normalize_cell of the raw text (the exact tier)
    number: Decimal | None
    folded: str  # fold_text of the cleaned item (the loose tier)
    raw: str

    @classmethod
    def of(cls, text: str) -> _Item:
        text = clean_text(text)
        item = clean_item(text)
        return cls(normalize_cell(text), _answer_decimal(item), fold_text(item), item)


def _decimals(value: Decimal) -> int:
    exponent = value.as_tuple().exponent
    return -exponent if isinstance(exponent, int) else 0


def _numbers_equal(a: Decimal, b: Decimal, rel_tol: float) -> bool:
    if a == b:
        return True
    if rel_tol > 0 and math.isclose(float(a), float(b), rel_tol=rel_tol):
        return True
    da, db = _decimals(a), _decimals(b)
    coarse = min(da, db)
    # Two decimals at least: a one-decimal answer ("0.1") is too coarse to vouch for "0.14".
    if coarse < 2 or da == db:
        return False
    return abs(a - b) <= Decimal(5).scaleb(-coarse - 1)  # within half a unit of the coarser's last digit


def _item_rule(a: _Item, b: _Item, rules: frozenset[Rule], rel_tol: float) -> Rule | None:
    if not a.norm or not b.norm:
        return None
    if "exact" in rules and a.norm == b.norm:
        return "exact"
    if a.number is not None and b.number is not None:
        return "numeric" if "numeric" in rules and _numbers_equal(a.number, b.number, rel_tol) else None
    if "loose" in rules and a.folded and a.folded == b.folded:
        return "loose"
    if "core" in rules and _core_equal(core_text(a.raw), core_text(b.raw)):
        return "core"
    return None


_ANSWER_RULESET = frozenset(ANSWER_TIERS)
_FULL_MATCHING = 64  # items per side up to which unordered lists get an exact one-to-one matching


def same_answer(a: Sequence[str], b: Sequence[str], rule: AnswerRule = AnswerRule()) -> bool:
    """Whether two answers (tuples of items) are the same under ``rule``.

    Items compare by :func:`value_match`'s tiers ``exact``, ``numeric``, ``loose`` with the rule's
    tolerance; lists need equal lengths and, unordered, a one-to-one pairing in any order. An
    empty answer (or one of blank items only) equals nothing, not even another empty answer.

    >>> same_answer(["1,234.50"], ["1234.5"]), same_answer(["b", "a"], ["A", "B"]), same_answer(["0.12"], ["12%"])
    (True, True, False)
    >>> same_answer(["52.08"], ["51"], AnswerRule(rel_tol=0.1)), same_answer(["a", "b"], ["b", "a"], AnswerRule(ordered=True))
    (True, False)
    """
    left = [item for item in (_Item.of(x) for x in a if isinstance(x, str)) if item.norm]
    right = [item for item in (_Item.of(x) for x in b if isinstance(x, str)) if item.norm]
    if not left or len(left) != len(right):
        return False

    def same(x: _Item, y: _Item) -> bool:
        return _item_rule(x, y, _ANSWER_RULESET, rule.rel_tol) is not None

    if rule.ordered:
        return all(same(x, y) for x, y in zip(left, right))
    if len(left) > _FULL_MATCHING:
        return _greedy_pairing(left, right, same)
    edges = [[j for j, y in enumerate(right) if same(x, y)] for x in left]
    return _perfect_matching(edges, len(right))


def _key(item: _Item) -> tuple[str, str]:
    """Items with equal keys are the same item (equal values, or equal non-blank folded text, or equal text)."""
    if item.number is not None:
        return ("n", _decimal_text(item.number))
    return ("t", item.folded) if item.folded else ("x", item.norm)


def _greedy_pairing(left: list[_Item], right: list[_Item], same: Callable[[_Item, _Item], bool]) -> bool:
    """Pairing for long lists (an exact matching would be cubic): equal keys first, then first-fit
    over the rest; may miss a pairing that exists only through rounding or tolerance, never invents one."""
    pool: dict[tuple[str, str], list[_Item]] = {}
    for y in right:
        pool.setdefault(_key(y), []).append(y)
    rest: list[_Item] = []
    for x in left:
        bucket = pool.get(_key(x))
        if bucket:
            bucket.pop()
        else:
            rest.append(x)
    free = [y for bucket in pool.values() for y in bucket]
    for x in rest:
        hit = next((i for i, y in enumerate(free) if same(x, y)), None)
        if hit is None:
            return False
        free.pop(hit)
    return True


def _perfect_matching(edges: list[list[int]], n_right: int) -> bool:
    """Whether the bipartite graph ``edges`` (left -> right indices) pairs every left item (Kuhn)."""
    owner: list[int | None] = [None] * n_right

    def augment(i: int, seen: set[int]) -> bool:
        for j in edges[i]:
            if j in seen:
                continue
            seen.add(j)
            current = owner[j]
            if current is None or augment(current, seen):
                owner[j] = i
                return True
        return False

    return all(augment(i, set()) for i in range(len(edges)))

"""A safe evaluator for TAT-QA style ``derivation`` strings, to recompute a gold answer.

TAT-QA writes how each arithmetic answer was computed from the table's numbers:
``"(234 + 259 + 282) / 3"``, ``"(113,475-61,494)/61,494"``, ``"$3,313/$39,784"``,
``"(2.7%+2.0%+1.0%)/3"``, ``"[(4,411+4,044)/2] -[(4,044+3,316)/2]"``. The missing-value
perturbation blanks one of those numbers and, as in Wolff & Hulsebos' missing-value variant,
recomputes the gold with the missing value set to 0.

**Safety.** The text is never ``eval``-ed. Number literals (thousands separators, ``$``, ``%``)
are cut out and replaced by placeholder names; what remains may hold only placeholders,
whitespace, ``+ - * /`` and round or square brackets, and the parsed :mod:`ast` tree may hold
only those operators, unary plus/minus and the placeholders. Arithmetic is exact
(:class:`fractions.Fraction`), so rounding to the answer's decimals is exactly "half up".
Comparisons (``"3,574>3,497"``, answer "2019"), lists (``"2017##2018"``) and prose are not
arithmetic: those items keep a person in the loop.

**Reading the answer's unit.** TAT-QA's percentages are sometimes the expression's value
(``"51.9 - 45.8"`` -> ``6.1``) and sometimes a hundred times it (``"(0.4-0.5)/0.5"`` ->
``-20``), and the ``scale`` field does not tell which. So the expression is first evaluated on
the original numbers and the factor (1 or 100) that reproduces the gold, rounded to the gold's
decimals, is the one applied to the new value. If neither reproduces it, nothing is recomputed.

**Formatting.** The new answer keeps the gold's sign style, ``$``, ``%`` and thousands
separators. When the gold was visibly rounded (``258.33`` from 258.333...) the new value is
rounded to the same decimals; when the gold was exact (``160.5``, ``-7``) its decimals say
nothing about precision, so TAT-QA's two decimals are used. Trailing zeros are dropped unless
the gold kept them (TAT-QA writes ``1.9``, not ``1.90``).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Sequence

#: Longer derivations are refused (bounds the parser's work; TAT-QA's longest is ~200 chars).
MAX_LENGTH = 1000

_LITERAL = re.compile(r"\$?[ \t]*(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?[ \t]*%?")
_PLACEHOLDER = re.compile(r"_(\d+)")
_ALLOWED_REST = re.compile(r"^[\s()+\-*/_\d]*$")
_OPERATORS = {"\u2212": "-", "\u00d7": "*", "\u00f7": "/", "[": "(", "]": ")"}
_ANSWER = re.compile(
    r"^\s*(?P<neg>-)?\s*(?P<cur>\$)?\s*(?P<int>\d{1,3}(?:,\d{3})+|\d+)(?:\.(?P<dec>\d+))?\s*(?P<pct>%)?\s*$"
)
#: TAT-QA rounds non-integer answers to two decimals.
DEFAULT_DECIMALS = 2


@dataclass(frozen=True, slots=True)
class Derivation:
    """A parsed arithmetic derivation: its number literals (unsigned, in order) and the tree."""

    text: str
    literals: tuple[Fraction, ...]
    tree: ast.Expression

    def evaluate(self, values: Sequence[Fraction] | None = None) -> Fraction | None:
        """The value with the literals (or ``values`` in their place); None on division by zero."""
        env = self.literals if values is None else tuple(values)
        try:
            return _eval(self.tree.body, env)
        except ZeroDivisionError:
            return None


def _literal_value(text: str) -> Fraction:
    return Fraction(Decimal(re.sub(r"[$,%\s]", "", text)))


def parse_derivation(text: str) -> Derivation | None:
    """Parse an arithmetic derivation, or None when it is anything else.

    >>> parse_derivation("(3,574 - 3,497) / 3,497").evaluate() == Fraction(77, 3497)
    True
    >>> parse_derivation("3,574>3,497") is None
    True
    """
    if not text or len(text) > MAX_LENGTH:
        return None
    literals: list[Fraction] = []

    def substitute(match: re.Match[str]) -> str:
        literals.append(_literal_value(match.group()))
        return f" _{len(literals) - 1} "

    for old, new in _OPERATORS.items():
        text = text.replace(old, new)
    source = _LITERAL.sub(substitute, text)
    if not literals or not _ALLOWED_REST.match(source) or "**" in source or "//" in source:
        return None
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError:
        return None
    if not _allowed(tree.body, len(literals)):
        return None
    return Derivation(text=text, literals=tuple(literals), tree=tree)


def _allowed(node: ast.AST, n_literals: int) -> bool:
    if isinstance(node, ast.BinOp):
        return (
            isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div))
            and _allowed(node.left, n_literals)
            and _allowed(node.right, n_literals)
        )
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, (ast.UAdd, ast.USub)) and _allowed(node.operand, n_literals)
    if isinstance(node, ast.Name):
        match = _PLACEHOLDER.fullmatch(node.id)
        return match is not None and int(match.group(1)) < n_literals
    return False


def _eval(node: ast.AST, env: Sequence[Fraction]) -> Fraction:
    # Only the node kinds _allowed() admits can reach here.
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, env), _eval(node.right, env)
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.Mult):
            return left * right
        return left / right
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, env)
        return -value if isinstance(node.op, ast.USub) else value
    assert isinstance(node, ast.Name)
    return env[int(node.id[1:])]


@dataclass(frozen=True, slots=True)
class AnswerFormat:
    """How a numeric gold answer is written."""

    decimals: int
    keeps_trailing_zeros: bool
    separators: bool
    currency: bool
    percent: bool

    def format(self, value: Fraction, places: int) -> str:
        """``value`` rounded half up (away from zero) to ``places`` and written in this style."""
        scaled = abs(value) * 10**places
        units = int(scaled + Fraction(1, 2))  # floor(x + 1/2) for x >= 0: half up
        digits = str(units).rjust(places + 1, "0")
        whole, frac = (digits[:-places], digits[-places:]) if places else (digits, "")
        if not self.keeps_trailing_zeros:
            frac = frac.rstrip("0")
        if self.separators:
            whole = f"{int(whole):,}"
        text = whole + (f".{frac}" if frac else "")
        sign = "-" if value < 0 and units else ""
        return f"{sign}{'$' if self.currency else ''}{text}{'%' if self.percent else ''}"


def answer_format(answer: str) -> tuple[AnswerFormat, Fraction] | None:
    """The style and value of a numeric answer such as ``-6.75``, ``$1,305`` or ``28.46%``."""
    match = _ANSWER.match(answer)
    if not match:
        return None
    dec = match.group("dec") or ""
    fmt = AnswerFormat(
        decimals=len(dec),
        keeps_trailing_zeros=dec.endswith("0"),
        separators="," in match.group("int"),
        currency=bool(match.group("cur")),
        percent=bool(match.group("pct")),
    )
    value = Fraction(Decimal(match.group("int").replace(",", "") + (f".{dec}" if dec else "")))
    return fmt, (-value if match.group("neg") else value)


@dataclass(frozen=True, slots=True)
class Recomputed:
    """The recomputed gold (None when it cannot be recomputed) and why."""

    answer: str | None
    reason: str
    factor: int | None = None


def recompute_with_zero(
    derivation: str, answer: str, removed: float, others: Sequence[float] = ()
) -> Recomputed:
    """The gold after the table number ``removed`` is set to 0 in ``derivation``.

    Every literal of the derivation equal to ``|removed|`` becomes 0 (a cell used twice, as the
    base of a change ratio, is the same cell). ``others`` are the values of the other cells
    the derivation may come from; if one of them has the same magnitude, the literal cannot be
    told apart and nothing is recomputed.

    >>> recompute_with_zero("(234 + 259 + 282) / 3", "258.33", 259).answer
    '172'
    >>> recompute_with_zero("(0.4-0.5)/0.5", "-20", 0.4).answer
    '-100'
    """
    parsed = parse_derivation(derivation)
    if parsed is None:
        return Recomputed(None, "the derivation is not an arithmetic expression")
    read = answer_format(answer)
    if read is None:
        return Recomputed(None, "the gold answer is not a number")
    fmt, gold = read
    original = parsed.evaluate()
    if original is None:
        return Recomputed(None, "the derivation divides by zero")
    if original == 0:
        return Recomputed(None, "the derivation gives 0, so its unit (x1 or x100) cannot be told")
    tolerance = Fraction(1, 2 * 10**fmt.decimals)
    factor = next((f for f in (1, 100) if abs(original * f - gold) <= tolerance), None)
    if factor is None:
        return Recomputed(None, f"the derivation gives {float(original):g}, which does not round to the gold {answer}")
    target = abs(Fraction(Decimal(repr(float(removed)))))
    hits = [i for i, lit in enumerate(parsed.literals) if lit == target or _close(lit, target)]
    if not hits:
        return Recomputed(None, "the removed value does not appear in the derivation")
    if any(_close(abs(Fraction(Decimal(repr(float(o))))), target) for o in others):
        return Recomputed(None, "another candidate cell holds the same value; the literal is ambiguous")
    values = [Fraction(0) if i in hits else lit for i, lit in enumerate(parsed.literals)]
    new = parsed.evaluate(values)
    if new is None:
        return Recomputed(None, "with the removed value set to 0 the derivation divides by zero")
    exact = original * factor == gold
    places = max(fmt.decimals, DEFAULT_DECIMALS) if exact else fmt.decimals
    unit = " (x100: a percentage)" if factor == 100 else ""
    return Recomputed(fmt.format(new * factor, places), f"recomputed with the removed value set to 0{unit}", factor)


def _close(a: Fraction, b: Fraction) -> bool:
    return abs(a - b) <= Fraction(1, 10**9) * max(abs(a), abs(b), Fraction(1))

"""TableBench-compatible scoring: TableBench's own parsing, normalisation and metrics, so that our
scores compare with published TableBench numbers (facts in ``../shared/notes/tablebench-scoring.md``,
read from its public evaluation code and written here in our own words).

- parse (DP, TCoT, SCoT): the rest of the line after the first ``Final Answer: `` (case-sensitive,
  one space); no match: empty, which counts against Parse@1;
- normalise: lowercase, drop every ASCII punctuation character, drop the words a/an/the, collapse
  whitespace (so ``69.75%`` equals ``69.75`` and ``12.5`` becomes ``125``: TableBench's quirk, kept);
- EM: references and predictions split on commas, compared item by item in order, each item
  weighing 1/len(reference); a numeric reference compares as a number (to the references' least
  decimal precision; percentages as fractions), anything else as text; EM within 10%: numbers may
  differ by 10% of the reference;
- ROUGE-L: the F1 of the longest common subsequence of ``[a-z0-9]+`` tokens, no stemming. TableBench
  reports rouge_score's unseeded bootstrap median over items; we report the plain mean, its
  deterministic centre (on the 54 real outputs they agree to the hundredth);
- per subtype, the metric TableBench uses for it (:data:`METRIC_OF`); scores in percent, rounded to
  two decimals as TableBench rounds them.

Chart questions (Pass@1) need their code run and the drawn data read back: that is the sandbox's
(:mod:`tqaforge.sandbox.charts`), not this module's.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Iterable, Mapping, Sequence

from tqaforge.generation.dedup import rouge_l as dedup_rouge_l

_FINAL = re.compile(r"Final Answer: (.+)")
_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_NUMBER = re.compile(r"^-?\d+(\.\d+)?%?$")
_TOKEN = re.compile(r"[a-z0-9]+")
_PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)

#: The metric TableBench scores each subtype by (its evaluation script's table).
METRIC_OF: dict[str, str] = {
    "FactChecking": "EM", "NumericalReasoning": "EM", "DataAnalysis_ImpactAnalysis": "EM",
    "DataAnalysis_CorrelationAnalysis": "EM_with_error_10", "DataAnalysis_TrendForecasting": "EM_with_error_10",
    "DataAnalysis_StatisticalAnalysis": "EM_with_error_10", "DataAnalysis": "ROUGE-L", "Visualization": "Pass@1",
}


def metric_of(qtype: str, qsubtype: str) -> str:
    """The metric TableBench uses for a (type, subtype)."""
    return METRIC_OF.get(f"{qtype}_{qsubtype}") or METRIC_OF.get(qtype, "EM")


def parse_prediction(text: str) -> str:
    """TableBench's parse of a DP/TCoT/SCoT reply: the first ``Final Answer: ...`` line, else ''."""
    found = _FINAL.search(text or "")
    return found.group(1) if found else ""


def program_of(text: str) -> str:
    """TableBench's code extraction (PoT, charts): the last ```` ```python ```` block, else ''."""
    found = _PYTHON_BLOCK.findall(text or "")
    return found[-1] if found else ""


def parse_program_output(stdout: str) -> str:
    """TableBench's answer of a program: its first ``Final Answer: ...`` line, else all it printed, stripped."""
    return parse_prediction(stdout) or (stdout or "").strip()


def normalize(text: str) -> str:
    """TableBench's normalisation (module docs)."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _decimal(value: str) -> Decimal:
    if value.endswith("%"):
        return (Decimal(value.strip("%")) / Decimal("100")).quantize(Decimal("1.0000"), rounding=ROUND_HALF_UP)
    return Decimal(value)


def _precision(values: Iterable[str]) -> int:
    digits = [len(v.split(".")[-1]) if "." in v else 0 for v in values if not v.endswith("%")]
    return min(digits) if digits else 0


def _items(text: str) -> list[str]:
    return [x.strip() for x in text.split(",")]


def _em_one(reference: str, prediction: str, tolerance: float | None) -> float:
    refs, preds = _items(reference), _items(prediction)
    weight = 1.0 / len(refs)
    score = 0.0
    numeric_refs = [x for x in refs if _NUMBER.match(x.strip()) and not x.endswith("%")]
    for i, r in enumerate(refs):
        if i >= len(preds):
            continue
        p = preds[i]
        if not _NUMBER.match(r.strip()):
            score += weight if r == p else 0.0
            continue
        try:
            if tolerance is not None:
                vr, vp = _decimal(r), _decimal(p)
                same = vp == vr if vr == 0 else abs(vr - vp) / abs(vr) <= Decimal(str(tolerance))
            elif r.endswith("%"):
                same = _decimal(r) == _decimal(p)
            else:
                q = Decimal("1." + "0" * _precision(numeric_refs)) if _precision(numeric_refs) else Decimal("1")
                same = _decimal(r).quantize(q, rounding=ROUND_HALF_UP) == _decimal(p).quantize(q, rounding=ROUND_HALF_UP)
        except (ArithmeticError, ValueError):
            # A prediction that is not a number never equals a numeric reference; nor does one
            # whose arithmetic leaves Decimal's range ("1e99999999999": decimal.Overflow, an
            # ArithmeticError like InvalidOperation): TableBench's float reads it as inf, wrong.
            same = False
        score += weight if same else 0.0
    return score


def rouge_l(reference: str, prediction: str) -> float:
    """ROUGE-L F1 of two texts (``[a-z0-9]+`` tokens of the lowercased text, no stemming)."""
    # The F-measure is generation.dedup's; only the tokens are TableBench's (rouge_score's).
    return dedup_rouge_l(tuple(_TOKEN.findall(prediction.lower())), tuple(_TOKEN.findall(reference.lower())))


@dataclass(frozen=True)
class ItemScore:
    """TableBench's metrics of one prediction (fractions; ``parsed``: a non-empty parsed answer)."""

    em: float
    em_within_10: float
    rouge_l: float
    parsed: bool

    def metric(self, name: str) -> float:
        """The value of ``EM``, ``EM_with_error_10`` or ``ROUGE-L``."""
        return {"EM": self.em, "EM_with_error_10": self.em_within_10, "ROUGE-L": self.rouge_l}[name]


def score_item(reference: str, prediction: str) -> ItemScore:
    """Every text metric of TableBench for one parsed prediction (before normalising)."""
    r, p = normalize(reference), normalize(prediction)
    return ItemScore(_em_one(r, p, None), _em_one(r, p, 0.10), rouge_l(r, p), bool(prediction))


def percent(values: Sequence[float]) -> float:
    """A group's score as TableBench reports it: the mean in percent, rounded to 2 decimals."""
    return round(sum(values) / len(values) * 100, 2) if values else 0.0


@dataclass(frozen=True)
class GroupScore:
    """TableBench's metrics over one group of items, in percent (rounded to 2 decimals)."""

    total: int
    em: float
    em_within_10: float
    rouge_l: float
    parse: float

    def metric(self, name: str) -> float:
        return {"EM": self.em, "EM_with_error_10": self.em_within_10, "ROUGE-L": self.rouge_l, "Parse@1": self.parse}[name]


def score_group(references: Sequence[str], predictions: Sequence[str]) -> GroupScore:
    """Every text metric of TableBench over a group (predictions as parsed, before normalising)."""
    if len(references) != len(predictions) or not references:
        raise ValueError("one prediction per reference, at least one")
    items = [score_item(r, p) for r, p in zip(references, predictions)]
    return GroupScore(
        len(items), percent([x.em for x in items]), percent([x.em_within_10 for x in items]),
        percent([x.rouge_l for x in items]), percent([float(x.parsed) for x in items]),
    )


def score_predictions(rows: Iterable[Mapping[str, Any]]) -> dict[str, GroupScore]:
    """Per ``qtype_qsubtype``, TableBench's scores of rows in its inference format (``qtype``,
    ``qsubtype``, ``answer``, ``prediction``); chart rows are left to the chart scorer."""
    groups: dict[str, tuple[list[str], list[str]]] = {}
    for row in rows:
        if row.get("qtype") == "Visualization":
            continue
        key = f"{row['qtype']}_{row['qsubtype']}"
        refs, preds = groups.setdefault(key, ([], []))
        refs.append(str(row.get("answer", "")))
        preds.append(parse_prediction(str(row.get("prediction", ""))))
    return {key: score_group(refs, preds) for key, (refs, preds) in sorted(groups.items())}

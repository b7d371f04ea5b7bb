"""Format understanding (the capability-based TableBench): one system's scores on the same items
in each serialization, the best and the worst format, and how far apart they are.

It reads the **configurations** subset of a release (ToRR's grid: every item rendered in each
serialization, ``config`` = ``SERIALIZATION/PERTURBATION``) and keeps only the configurations
without a perturbation (``SERIALIZATION/none``): the table as it is, so that the format is the
one thing that varies. The perturbed configurations are left to ToRR's P and R
(:mod:`tqaforge.evaluate.robustness`), which vary format and structure together.

For each system (model and method) scored in two serializations or more, over the items scored
in every one of them (a row without a prediction counts as wrong, as everywhere):

- per format, the mean normalised score over the items (0-1; ROUGE-L where the subtype is prose)
  and their number;
- the best and the worst format (all of them on a tie), and the **spread**: best minus worst;
- the mean **per-item range** (an item's best minus worst score across formats; ToRR's
  1 - R restricted to formats) and how many items change with the format at all.

>>> fu = format_understanding(scored)[0]                       # doctest: +SKIP
>>> fu.best, fu.worst, fu.spread                               # doctest: +SKIP
(('json',), ('csv',), 1.0)
>>> print("\\n".join(fu.lines()))                               # doctest: +SKIP

:class:`FormatUnderstanding` renders itself (``lines()``, ``as_dict()``) for the CLI and the app;
:func:`read_format_understanding` reads it back from a saved ``scores.json``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping, Sequence

from tqaforge.evaluate.predictions import CONFIGURATIONS
from tqaforge.evaluate.scoring import Scored
from tqaforge.printable import escape_controls

__all__ = ["UNPERTURBED", "FormatScore", "FormatUnderstanding", "format_understanding", "read_count", "read_format_understanding", "read_fraction"]

#: The perturbation of the configurations this view reads: the item's table as it is.
UNPERTURBED = "none"


@dataclass(frozen=True)
class FormatScore:
    """One serialization's mean normalised score (0-1) over ``items`` items."""

    serialization: str
    items: int
    score: float


@dataclass(frozen=True)
class FormatUnderstanding:
    """One system's scores per serialization over the same items (module docs). ``formats`` run
    from the best score to the worst (ties by name); ``best`` and ``worst`` name every format
    that reaches the highest and the lowest score."""

    system: str
    items: int
    formats: tuple[FormatScore, ...]
    best: tuple[str, ...]
    worst: tuple[str, ...]
    spread: float  # best score - worst score
    item_range: float  # mean over the items of (max - min) of the item's scores across formats
    items_varying: int  # items whose score is not the same in every format
    perturbation: str = UNPERTURBED

    def lines(self) -> list[str]:
        """The system's formats as a small table, then its best, worst and spread."""
        out = [f"  {self.system}: {self.items} items in each of {len(self.formats)} formats",
               f"    {'format':<16} {'items':>6} {'score':>7}"]
        for f in self.formats:
            mark = "" if not self.spread else "  best" if f.serialization in self.best else \
                "  worst" if f.serialization in self.worst else ""
            out.append(f"    {f.serialization:<16} {f.items:>6} {f.score:>7.3f}{mark}")
        ranking = (f"best {', '.join(self.best)}, worst {', '.join(self.worst)}" if self.spread
                   else "every format scores the same")
        out.append(f"    {ranking}: spread {self.spread:.3f}; mean per-item range {self.item_range:.3f} "
                   f"({self.items_varying} of {self.items} items change with the format)")
        # Names come from the predictions file and the release: their control characters escaped.
        return [escape_controls(line, lines=False) for line in out]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FormatUnderstanding:
        """The summary :meth:`as_dict` gave (a saved ``scores.json``); ValueError when ``data``
        is not one (a damaged or foreign file)."""
        try:
            formats = tuple(FormatScore(str(f["serialization"]), read_count(f["items"]), read_fraction(f["score"]))
                            for f in data["formats"])
            return cls(
                str(data["system"]), read_count(data["items"]), formats, tuple(str(x) for x in data["best"]),
                tuple(str(x) for x in data["worst"]), read_fraction(data["spread"]), read_fraction(data["item_range"]),
                read_count(data["items_varying"]), str(data.get("perturbation", UNPERTURBED)),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a format-understanding summary: {exc!r}") from None


def read_count(value: Any) -> int:
    """A count read back from scores.json (ValueError unless a non-negative integer)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"not a count: {value!r}")
    return value


def read_fraction(value: Any) -> float:
    """A score or accuracy read back from scores.json (ValueError unless a number from 0 to 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"not a fraction from 0 to 1: {value!r}")
    return float(value)


def format_understanding(scored: Iterable[Scored]) -> list[FormatUnderstanding]:
    """Per system (sorted), its scores per serialization on the unperturbed configurations
    (module docs); systems scored in fewer than two formats, or with no item scored in every
    one of them, are left out."""
    grid: dict[str, dict[str, dict[str, float]]] = {}  # system -> item -> serialization -> score
    for s in scored:
        if s.ref.subset != CONFIGURATIONS:
            continue
        serialization, _, perturbation = s.ref.config.partition("/")
        if perturbation != UNPERTURBED:
            continue
        grid.setdefault(s.system, {}).setdefault(s.ref.item_id, {})[serialization] = s.score
    out = []
    for system, items in sorted(grid.items()):
        formats = sorted({f for per in items.values() for f in per})
        same = [per for _, per in sorted(items.items()) if len(per) == len(formats)]  # the same items in each
        if len(formats) < 2 or not same:
            continue
        out.append(_summary(system, formats, same))
    return out


def _summary(system: str, formats: Sequence[str], items: Sequence[Mapping[str, float]]) -> FormatUnderstanding:
    n = len(items)
    means = {f: round(sum(per[f] for per in items) / n, 4) for f in formats}  # ties as shown
    ranges = [max(per.values()) - min(per.values()) for per in items]
    high, low = max(means.values()), min(means.values())
    ordered = sorted(formats, key=lambda f: (-means[f], f))
    return FormatUnderstanding(
        system=system, items=n,
        formats=tuple(FormatScore(f, n, means[f]) for f in ordered),
        best=tuple(f for f in ordered if means[f] == high), worst=tuple(f for f in ordered if means[f] == low),
        spread=round(high - low, 4), item_range=round(sum(ranges) / n, 4), items_varying=sum(r > 0 for r in ranges),
    )


def read_format_understanding(scores: Mapping[str, Any]) -> list[FormatUnderstanding]:
    """The format-understanding summaries of a saved ``scores.json`` (its ``formats``); entries
    that are not one (a damaged or older file) are skipped."""
    found = scores.get("formats")
    out = []
    for entry in found if isinstance(found, list) else []:
        if isinstance(entry, Mapping):
            try:
                out.append(FormatUnderstanding.from_dict(entry))
            except ValueError:
                continue
    return out

"""Large-table understanding (the capability-based TableBench): one system's accuracy per token
bucket on the same kind of questions, so that the table's size is the one thing that varies.

It reads the **base** items of a release that are large-table probes (subtype
``LargeTableUnderstanding`` with a ``token_bucket``: :mod:`tqaforge.generation.large_tables` makes
them, and a release carries the bucket each was made for). Per system (model and method) and
bucket, in the buckets' order (``<4k, 4-8k, 8-16k, 16-32k, >32k``): the items, how many were
answered exactly (normalised exact match, as everywhere; a row without a prediction counts as
wrong) and the accuracy (0-1). Buckets without items are left out.

>>> lt = large_table_understanding(scored)[0]                  # doctest: +SKIP
>>> [(b.bucket, b.accuracy) for b in lt.buckets]               # doctest: +SKIP
[('<4k', 1.0), ('>32k', 0.5)]

:class:`LargeTableUnderstanding` renders itself (``lines()``, ``as_dict()``) for the CLI and the
app; :func:`read_large_table_understanding` reads it back from a saved ``scores.json``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping

from tqaforge.evaluate.formats import read_count, read_fraction
from tqaforge.evaluate.predictions import BASE_CONFIG
from tqaforge.evaluate.scoring import Scored
from tqaforge.printable import escape_controls
from tqaforge.tables.tokens import BUCKET_NAMES, LARGE_TABLE

__all__ = ["BucketScore", "LargeTableUnderstanding", "large_table_understanding", "read_large_table_understanding"]


@dataclass(frozen=True)
class BucketScore:
    """One token bucket: ``correct`` of ``items`` answered exactly; ``accuracy`` their share (0-1)."""

    bucket: str
    items: int
    correct: int
    accuracy: float


@dataclass(frozen=True)
class LargeTableUnderstanding:
    """One system's accuracy per token bucket (module docs)."""

    system: str
    items: int
    buckets: tuple[BucketScore, ...]

    def lines(self) -> list[str]:
        """The system's buckets as a small table."""
        out = [f"  {self.system}: {self.items} large-table items",
               f"    {'tokens':<8} {'items':>6} {'correct':>8} {'accuracy':>9}"]
        out += [f"    {b.bucket:<8} {b.items:>6} {b.correct:>8} {b.accuracy:>9.3f}" for b in self.buckets]
        # The system's name comes from the predictions file: its control characters escaped.
        return [escape_controls(line, lines=False) for line in out]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LargeTableUnderstanding:
        """The summary :meth:`as_dict` gave (a saved ``scores.json``); ValueError when ``data`` is
        not one (a damaged or foreign file)."""
        try:
            buckets = tuple(BucketScore(_bucket(b["bucket"]), read_count(b["items"]), read_count(b["correct"]), read_fraction(b["accuracy"]))
                            for b in data["buckets"])
            return cls(str(data["system"]), read_count(data["items"]), buckets)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a large-table summary: {exc!r}") from None


def _bucket(value: Any) -> str:
    if value not in BUCKET_NAMES:
        raise ValueError(f"not a token bucket: {value!r}")
    return str(value)


def large_table_understanding(scored: Iterable[Scored]) -> list[LargeTableUnderstanding]:
    """Per system (sorted), its accuracy per token bucket on the base large-table items (module docs)."""
    grid: dict[str, dict[str, list[bool]]] = {}  # system -> bucket -> correct flags
    for s in scored:
        ref = s.ref
        if ref.subset != "base" or ref.config != BASE_CONFIG or ref.qsubtype != LARGE_TABLE or ref.token_bucket not in BUCKET_NAMES:
            continue
        grid.setdefault(s.system, {}).setdefault(ref.token_bucket, []).append(s.correct)
    out = []
    for system, per in sorted(grid.items()):
        buckets = tuple(BucketScore(b, len(per[b]), sum(per[b]), round(sum(per[b]) / len(per[b]), 4))
                        for b in BUCKET_NAMES if b in per)
        out.append(LargeTableUnderstanding(system, sum(b.items for b in buckets), buckets))
    return out


def read_large_table_understanding(scores: Mapping[str, Any]) -> list[LargeTableUnderstanding]:
    """The large-table summaries of a saved ``scores.json`` (its ``large_tables``); entries that
    are not one (a damaged or older file) are skipped."""
    found = scores.get("large_tables")
    out = []
    for entry in found if isinstance(found, list) else []:
        if isinstance(entry, Mapping):
            try:
                out.append(LargeTableUnderstanding.from_dict(entry))
            except ValueError:
                continue
    return out

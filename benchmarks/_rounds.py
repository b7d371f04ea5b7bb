"""The ratio of two sides measured in the same rounds, each round's sides run back to back: a change
of the machine's speed between rounds (seen on some hosts: a third within minutes) cancels out."""

from __future__ import annotations

import statistics
from collections.abc import Iterable


def round_by_round(label: str, ratios: Iterable[float]) -> str:
    """``label``, round by round: the median of the per-round ratios and their range."""
    ordered = sorted(ratios)
    return (f"  {label}, round by round: median {statistics.median(ordered):.2f}x "
            f"(from {ordered[0]:.2f}x to {ordered[-1]:.2f}x over {len(ordered)} rounds)")

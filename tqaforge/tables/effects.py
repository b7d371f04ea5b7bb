"""What a perturbation does to the gold answer: a value of the pure table layer.

The records store it (``schemas.enums`` re-exports it), but the perturbations decide it, so it
is defined here, where ``tables`` needs nothing of the records.
"""

from __future__ import annotations

from enum import StrEnum


class AnswerEffect(StrEnum):
    """What a perturbation does to the gold answer."""

    UNCHANGED = "unchanged"
    RECOMPUTE = "recompute"
    NEEDS_PERSON = "needs_person"

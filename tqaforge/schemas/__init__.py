"""The records (SQLModel tables), their enums and the question taxonomies.

The names below are loaded when first used (PEP 562), not when the package is: importing
:mod:`tqaforge.schemas.taxonomy` (every workspace's config does) must not build every SQLModel
table class, which costs more than the rest of a command's start-up (``tqaforge status``).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tqaforge.schemas.enums import (
        AnswerEffect,
        AnswerMethod,
        AnswerStatus,
        CallStatus,
        CandidateStatus,
        Origin,
        QuestionStatus,
        QuestionType,
        TaskStatus,
        VariantStatus,
    )
    from tqaforge.schemas.records import (
        ALL_RECORDS,
        Annotation,
        AnnotationTask,
        Answer,
        AnswerCandidate,
        LLMCall,
        Question,
        Release,
        TableRecord,
        Variant,
    )
    from tqaforge.schemas.taxonomy import BUILTIN, CAPABILITY, FREB_TQA, TABLEBENCH, Category, Taxonomy

#: Where each re-exported name lives.
_HOMES = {
    **dict.fromkeys(
        ("AnswerEffect", "AnswerMethod", "AnswerStatus", "CallStatus", "CandidateStatus", "Origin", "QuestionStatus",
         "QuestionType", "TaskStatus", "VariantStatus"),
        "tqaforge.schemas.enums",
    ),
    **dict.fromkeys(
        ("ALL_RECORDS", "Annotation", "AnnotationTask", "Answer", "AnswerCandidate", "LLMCall", "Question", "Release",
         "TableRecord", "Variant"),
        "tqaforge.schemas.records",
    ),
    **dict.fromkeys(("BUILTIN", "CAPABILITY", "FREB_TQA", "TABLEBENCH", "Category", "Taxonomy"), "tqaforge.schemas.taxonomy"),
}

__all__ = [
    "ALL_RECORDS", "Annotation", "AnnotationTask", "Answer", "AnswerCandidate", "AnswerEffect",
    "AnswerMethod", "AnswerStatus", "BUILTIN", "CAPABILITY", "CallStatus", "CandidateStatus", "Category",
    "FREB_TQA", "LLMCall", "Origin", "Question", "QuestionStatus", "QuestionType", "Release",
    "TABLEBENCH", "TableRecord", "TaskStatus", "Taxonomy", "Variant", "VariantStatus",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(home), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])

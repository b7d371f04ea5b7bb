"""The records (SQLModel tables), their enums and the question taxonomies."""

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
from tqaforge.schemas.taxonomy import BUILTIN, FREB_TQA, TABLEBENCH, Category, Taxonomy

__all__ = [
    "ALL_RECORDS", "Annotation", "AnnotationTask", "Answer", "AnswerCandidate", "AnswerEffect",
    "AnswerMethod", "AnswerStatus", "BUILTIN", "CallStatus", "CandidateStatus", "Category",
    "FREB_TQA", "LLMCall", "Origin", "Question", "QuestionStatus", "QuestionType", "Release",
    "TABLEBENCH", "TableRecord", "TaskStatus", "Taxonomy", "Variant", "VariantStatus",
]

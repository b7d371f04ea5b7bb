"""Status and kind enums shared by the records. Stored as plain strings (portable, readable)."""

from __future__ import annotations

from enum import StrEnum

from tqaforge.tables.effects import AnswerEffect as AnswerEffect  # defined by the pure table layer


class Origin(StrEnum):
    """Who or what made a record."""

    IMPORT = "import"  # read from a dataset file
    LLM = "llm"  # proposed by a model
    HUMAN = "human"  # written or edited by a person
    RULE = "rule"  # derived by code (voting, perturbation, adjudication rule)


class QuestionStatus(StrEnum):
    PROPOSED = "proposed"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    SEED = "seed"  # promoted into the seed corpus


class QuestionType(StrEnum):
    """FREB-TQA's split of questions."""

    EXTRACTION = "extraction"
    REASONING = "reasoning"


class AnswerMethod(StrEnum):
    DP = "DP"
    TCOT = "TCoT"
    SCOT = "SCoT"
    POT = "PoT"


class CandidateStatus(StrEnum):
    OK = "ok"
    PARSE_ERROR = "parse_error"
    EXEC_ERROR = "exec_error"


class AnswerStatus(StrEnum):
    GOLD = "gold"  # imported from a curated benchmark
    CONSISTENT = "consistent"  # the agents agreed
    INCONSISTENT = "inconsistent"
    VERIFIED = "verified"  # confirmed by people
    CORRECTED = "corrected"  # fixed by people
    REJECTED = "rejected"


class VariantStatus(StrEnum):
    BUILT = "built"
    SKIPPED = "skipped"
    PENDING_REVIEW = "pending_review"
    VALIDATED = "validated"
    REJECTED = "rejected"


class TaskStatus(StrEnum):
    PENDING = "pending"  # made here, not yet in Label Studio
    SYNCED = "synced"  # exists in Label Studio
    ANNOTATED = "annotated"
    ADJUDICATED = "adjudicated"


class CallStatus(StrEnum):
    OK = "ok"
    ERROR = "error"


class AdjudicationStatus(StrEnum):
    OPEN = "open"  # the annotators disagree and no rule decides: waits for a person
    RESOLVED = "resolved"


class AdjudicationMethod(StrEnum):
    """How a final label was decided."""

    UNANIMOUS = "unanimous"
    RULE = "rule"  # e.g. a majority of at least M of N
    PERSON = "person"

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
    """How one agent's reply ended: an answer, no parseable answer, or code that did not run."""

    OK = "ok"
    UNPARSED = "unparsed"  # no final-answer line / no single code block; ``error`` says which
    EXEC_ERROR = "exec_error"  # PoT or chart code ran in the sandbox and failed (outcome in ``details``)


class AnswerStatus(StrEnum):
    GOLD = "gold"  # imported from a curated benchmark
    CONSISTENT = "consistent"  # the agents agreed
    INCONSISTENT = "inconsistent"
    VERIFIED = "verified"  # confirmed by people
    CORRECTED = "corrected"  # fixed by people
    REJECTED = "rejected"


class AnswerRoute(StrEnum):
    """Where a voted answer goes next (TableBench: consistent answers to people for verification,
    a random share of the inconsistent ones to manual annotation, the rest set aside)."""

    VERIFY = "verify"  # consistent: people verify it
    MANUAL = "manual"  # inconsistent, drawn for manual annotation
    SET_ASIDE = "set_aside"  # inconsistent, not drawn: kept with its candidates, no one's work
    KEEP_GOLD = "keep_gold"  # the question came with a gold answer, which stays the answer


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


class FlagStatus(StrEnum):
    """An adjudication flag (a finding such as suspect gold sent to a person)."""

    OPEN = "open"  # in the adjudication queue until a person decides the task
    SETTLED = "settled"  # a person decided the task (before the flag: evidence only; or after it)


class AdjudicationMethod(StrEnum):
    """How a final label was decided."""

    UNANIMOUS = "unanimous"
    RULE = "rule"  # e.g. a majority of at least M of N
    PERSON = "person"


class StepStatus(StrEnum):
    """How a generation step (one round, subtype and table) ended."""

    DONE = "done"
    INVALID_REPLY = "invalid_reply"  # every attempt got an invalid reply; --retry-failed retries it

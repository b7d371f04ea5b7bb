"""The records: one SQLModel table per pipeline artefact.

Ids are content hashes of what makes a record what it is (every key is in :mod:`tqaforge.ids`;
a record's ``make_id`` is its key there), so every step is idempotent: writing the same thing
twice finds the existing row. Every record says who or what made it (``origin``, ``created_by``),
from which inputs, and with which seed where chance was involved. JSON columns hold structured
values whose shape the stages own (:mod:`tqaforge.schemas.shapes` describes them).

Status and kind columns are typed with the enums of :mod:`tqaforge.schemas.enums`. They are
StrEnums stored as plain strings (:class:`StoredEnum`: the column type
of a ``str`` field, read back as the member), so ``q.status == "accepted"`` and
``q.status == QuestionStatus.ACCEPTED`` both hold.

Schema changes go through an Alembic migration in ``tqaforge/migrations/versions``; a test
checks that the migrations and these classes agree.
"""

from __future__ import annotations

from datetime import datetime, timezone
from enum import StrEnum
from typing import Any, Optional

from sqlalchemy import JSON, Column, Index, Text, UniqueConstraint
from sqlalchemy.engine import Dialect
from sqlmodel import AutoString, Field, SQLModel

from tqaforge import ids
from tqaforge.schemas.enums import (
    AdjudicationMethod,
    AdjudicationStatus,
    AnswerEffect,
    AnswerMethod,
    AnswerRoute,
    AnswerStatus,
    CallStatus,
    CandidateStatus,
    FlagStatus,
    Origin,
    QuestionStatus,
    QuestionType,
    StepStatus,
    TaskStatus,
    VariantStatus,
)
from tqaforge.tables.table import Table

#: Seeds are stored in INTEGER columns (32-bit signed on PostgreSQL): 0 .. 2**31 - 1.
MAX_SEED = 2**31 - 1


def utcnow() -> datetime:
    """Now, in UTC (the time every record is stamped with)."""
    return datetime.now(timezone.utc)


class StoredEnum(AutoString):
    """The column type of a record field typed with a StrEnum: stored as the plain string (the
    same column type as a ``str`` field, so no migration), read back as the enum member.

    A stored value that is not a member (written by a later version) is read back as the plain
    string rather than failing the whole query. (Here, not in :mod:`tqaforge.schemas.enums`, so
    that the enums import without SQLAlchemy: ``tqaforge evaluate`` reads them, and no database.)
    """

    cache_ok = True

    def __init__(self, enum: type[StrEnum]) -> None:
        super().__init__()
        self.enum = enum

    def process_result_value(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        try:
            return self.enum(value)
        except ValueError:
            return value


class TableRecord(SQLModel, table=True):
    """A stored table (the record behind :class:`tqaforge.tables.Table`)."""

    __tablename__ = "tables"

    id: str = Field(primary_key=True, max_length=64)
    header: list[str] = Field(sa_column=Column(JSON(none_as_null=True), nullable=False))
    rows: list[list[str]] = Field(sa_column=Column(JSON(none_as_null=True), nullable=False))
    caption: Optional[str] = Field(default=None, sa_column=Column(Text))
    source: Optional[str] = Field(default=None, sa_column=Column(Text))
    licence: Optional[str] = None
    n_rows: int
    n_cols: int
    numeric_share: float
    imported_from: Optional[str] = Field(default=None, sa_column=Column(Text))
    origin: Origin = Field(default=Origin.IMPORT, sa_type=StoredEnum(Origin))
    created_by: str = "tqaforge"
    created_at: datetime = Field(default_factory=utcnow)

    def to_table(self) -> Table:
        """The :class:`~tqaforge.tables.Table` value stored here, caption, source and licence
        included (the one conversion from record to table)."""
        return Table.build(self.header, self.rows, caption=self.caption, source=self.source, licence=self.licence)


class Question(SQLModel, table=True):
    """A question about one table, in a category of the workspace's taxonomy."""

    __tablename__ = "questions"
    __table_args__ = (
        Index("ix_questions_subtype_status", "subtype", "status"),
    )

    id: str = Field(primary_key=True, max_length=64)
    table_id: str = Field(foreign_key="tables.id", index=True, max_length=64)
    text: str = Field(sa_column=Column(Text, nullable=False))
    taxonomy: Optional[str] = None
    qtype: Optional[str] = None
    subtype: Optional[str] = None
    question_type: Optional[QuestionType] = Field(default=None, sa_type=StoredEnum(QuestionType))  # FREB-TQA
    status: QuestionStatus = Field(default=QuestionStatus.PROPOSED, index=True, sa_type=StoredEnum(QuestionStatus))
    origin: Origin = Field(default=Origin.IMPORT, sa_type=StoredEnum(Origin))
    created_by: str = "tqaforge"
    source: Optional[str] = Field(default=None, sa_column=Column(Text))  # file or dataset
    source_id: Optional[str] = None
    relevant_cells: Optional[list[list[int]]] = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    # shapes.QuestionLineage
    lineage: Optional[dict[str, Any]] = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    # shapes.QuestionMeta: "typing" (QuestionTyping), "verification" (QuestionVerification)
    meta: Optional[dict[str, Any]] = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    round: Optional[int] = None
    seed: Optional[int] = None
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)

    make_id = staticmethod(ids.question_id)


class AnswerCandidate(SQLModel, table=True):
    """One agent's answer to a question (DP, TCoT, SCoT or PoT), parsed from its reply.

    ``values`` are the answer items (for a chart: the drawn y values, rounded and sorted, as
    TableBench compares them); ``value`` their display form. ``details`` (shapes.CandidateDetails)
    holds SCoT's steps and, for code, the sandbox's outcome.
    """

    __tablename__ = "answer_candidates"

    id: str = Field(primary_key=True, max_length=64)
    question_id: str = Field(foreign_key="questions.id", index=True, max_length=64)
    method: AnswerMethod = Field(sa_type=StoredEnum(AnswerMethod))
    sample: int = 0
    raw: str = Field(default="", sa_column=Column(Text, nullable=False))
    code: Optional[str] = Field(default=None, sa_column=Column(Text))
    value: Optional[str] = Field(default=None, sa_column=Column(Text))
    values: Optional[list[str]] = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    status: CandidateStatus = Field(default=CandidateStatus.OK, sa_type=StoredEnum(CandidateStatus))
    error: Optional[str] = Field(default=None, sa_column=Column(Text))
    # shapes.CandidateDetails
    details: Optional[dict[str, Any]] = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    llm_call_id: Optional[str] = Field(default=None, foreign_key="llm_calls.id", max_length=64)
    model: Optional[str] = None
    created_at: datetime = Field(default_factory=utcnow)

    make_id = staticmethod(ids.candidate_id)


class Answer(SQLModel, table=True):
    """The gold (or candidate-gold) answer of a question and how it was decided."""

    __tablename__ = "answers"

    id: str = Field(primary_key=True, max_length=64)
    question_id: str = Field(foreign_key="questions.id", index=True, max_length=64)
    value: str = Field(sa_column=Column(Text, nullable=False))
    values: list[str] = Field(sa_column=Column(JSON(none_as_null=True), nullable=False))
    status: AnswerStatus = Field(default=AnswerStatus.GOLD, index=True, sa_type=StoredEnum(AnswerStatus))
    origin: Origin = Field(default=Origin.IMPORT, sa_type=StoredEnum(Origin))
    method: Optional[str] = None  # "import", "vote", "human", ...
    # shapes.AnswerVotes (a vote's candidates, groups, rule, routing draw)
    votes: Optional[dict[str, Any]] = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    route: Optional[AnswerRoute] = Field(default=None, index=True, sa_type=StoredEnum(AnswerRoute))
    created_by: str = "tqaforge"
    created_at: datetime = Field(default_factory=utcnow)

    make_id = staticmethod(ids.answer_id)


class Variant(SQLModel, table=True):
    """A question's table changed by a perturbation and rendered in a serialization."""

    __tablename__ = "variants"

    id: str = Field(primary_key=True, max_length=64)
    question_id: str = Field(foreign_key="questions.id", index=True, max_length=64)
    table_id: str = Field(foreign_key="tables.id", max_length=64)
    perturbation: str
    # shapes.VariantParams
    params: Optional[dict[str, Any]] = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    seed: Optional[int] = None
    serialization: Optional[str] = None
    table: Optional[dict[str, Any]] = Field(default=None, sa_column=Column(JSON(none_as_null=True)))  # Table.to_dict()
    # shapes.VariantChanges
    changes: Optional[dict[str, Any]] = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    answer_effect: Optional[AnswerEffect] = Field(default=None, sa_type=StoredEnum(AnswerEffect))
    answers: Optional[list[str]] = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    status: VariantStatus = Field(default=VariantStatus.BUILT, index=True, sa_type=StoredEnum(VariantStatus))
    skip_reason: Optional[str] = Field(default=None, sa_column=Column(Text))
    origin: Origin = Field(default=Origin.RULE, sa_type=StoredEnum(Origin))
    created_by: str = "tqaforge"
    created_at: datetime = Field(default_factory=utcnow)


class AnnotationTask(SQLModel, table=True):
    """A unit of work for people (one Label Studio task), about one target record."""

    __tablename__ = "annotation_tasks"
    __table_args__ = (UniqueConstraint("kind", "target_type", "target_id", name="uq_task_target"),)

    id: str = Field(primary_key=True, max_length=64)
    kind: str  # question_review, answer_verification, relevant_cells, value_modification, ...
    target_type: str  # question | answer | variant
    target_id: str = Field(max_length=64)
    payload: Optional[dict[str, Any]] = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    status: TaskStatus = Field(default=TaskStatus.PENDING, index=True, sa_type=StoredEnum(TaskStatus))
    ls_project_id: Optional[int] = None
    ls_task_id: Optional[int] = None
    created_at: datetime = Field(default_factory=utcnow)


class Annotation(SQLModel, table=True):
    """One person's (or one agent's) label on a task. Never deleted by any command."""

    __tablename__ = "annotations"
    __table_args__ = (UniqueConstraint("task_id", "annotator", "source_ref", name="uq_annotation"),)

    id: str = Field(primary_key=True, max_length=64)
    task_id: str = Field(foreign_key="annotation_tasks.id", index=True, max_length=64)
    annotator: str
    kind: str
    label: Optional[Any] = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    source: str = "labelstudio"  # labelstudio | app | cli | agent | simulation
    source_ref: str = ""  # e.g. the Label Studio annotation id
    lead_time: Optional[float] = None
    created_at: datetime = Field(default_factory=utcnow)
    # The person (an Annotator's id) behind ``annotator``, the author string kept as written for
    # audit; None for agents and imported labels. Agreement and adjudication count these.
    annotator_id: Optional[str] = Field(default=None, index=True, max_length=64)


class Annotator(SQLModel, table=True):
    """One person who labels, whatever the surface: the CLI's ``--annotator``, the app's name
    field and Label Studio accounts resolve here (:mod:`tqaforge.people`).

    ``aliases`` are every author string that means this person (their names, ``ls:<hash>`` of
    their Label Studio login); ``email`` is for contacting them and never leaves the store. A
    merged identity stays, pointing at the one it joined (``merged_into``), for audit.
    """

    __tablename__ = "annotators"

    id: str = Field(primary_key=True, max_length=64)
    name: str
    email: Optional[str] = None
    aliases: list[str] = Field(default_factory=list, sa_column=Column(JSON(none_as_null=True), nullable=False))
    merged_into: Optional[str] = Field(default=None, max_length=64)
    created_at: datetime = Field(default_factory=utcnow)


class LabelStudioTaskCopy(SQLModel, table=True):
    """One annotator's copy of an annotation task in Label Studio.

    Each annotator labels in a project of their own (one per kind and annotator), so nobody sees
    another's labels before submitting; this row says which Label Studio project and task hold
    the copy of ``task_id`` that ``annotator`` (their Label Studio login) labels.
    """

    __tablename__ = "labelstudio_task_copies"
    __table_args__ = (UniqueConstraint("task_id", "annotator", name="uq_labelstudio_copy"),)

    id: str = Field(primary_key=True, max_length=64)
    task_id: str = Field(foreign_key="annotation_tasks.id", index=True, max_length=64)
    kind: str = Field(index=True)
    annotator: str  # the Label Studio login (e-mail or username) the copy was pushed for
    ls_project_id: int = Field(index=True)
    ls_task_id: int
    seed: Optional[int] = None  # the seed of the draw that assigned the task to this annotator
    created_at: datetime = Field(default_factory=utcnow)

    make_id = staticmethod(ids.labelstudio_copy_id)


class LabelStudioPull(SQLModel, table=True):
    """How far the pulls of one Label Studio project have read: ``pulled_until`` is the server's
    time when the last complete pull of the project began, so the next one asks only for tasks
    updated since (Label Studio bumps a task's ``updated_at`` whenever one of its annotations is
    saved or deleted)."""

    __tablename__ = "labelstudio_pulls"

    ls_project_id: int = Field(primary_key=True)
    kind: str
    annotator: str
    pulled_until: datetime
    updated_at: datetime = Field(default_factory=utcnow)


class Adjudication(SQLModel, table=True):
    """The final label of one annotation task and how it was decided (never deletes annotations).

    ``status`` is ``open`` while the annotators disagree and no rule resolves it (the
    adjudication queue), ``resolved`` once decided. ``method`` says how: ``unanimous``,
    ``rule`` (``decided_by`` names the rule, e.g. "majority 2 of 3") or ``person``
    (``decided_by`` is the person). ``votes`` holds each value and who gave it; earlier
    decisions that were replaced stay in ``history``.
    """

    __tablename__ = "adjudications"
    __table_args__ = (UniqueConstraint("task_id", name="uq_adjudication_task"),)

    id: str = Field(primary_key=True, max_length=64)
    task_id: str = Field(foreign_key="annotation_tasks.id", max_length=64)
    kind: str = Field(index=True)
    status: AdjudicationStatus = Field(default=AdjudicationStatus.OPEN, index=True, sa_type=StoredEnum(AdjudicationStatus))
    label: Optional[Any] = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    method: Optional[AdjudicationMethod] = Field(default=None, sa_type=StoredEnum(AdjudicationMethod))
    decided_by: Optional[str] = None
    votes: Optional[list[dict[str, Any]]] = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    annotation_ids: Optional[list[str]] = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    note: Optional[str] = Field(default=None, sa_column=Column(Text))
    history: Optional[list[dict[str, Any]]] = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    created_at: datetime = Field(default_factory=utcnow)
    decided_at: Optional[datetime] = None


class AdjudicationFlag(SQLModel, table=True):
    """A finding that sends one annotation task back to a person, with its evidence (suspect gold
    from the health report: :mod:`tqaforge.annotation.reopen`).

    A flag only adds an entry to the adjudication queue; it never changes a label or a decision.
    ``status`` is ``open`` until a person decides the task (:func:`~tqaforge.annotation.adjudication.resolve`),
    then ``settled`` with ``settled_by`` and ``settled_at``; a flag raised on a task a person had
    already decided is stored ``settled`` at once (evidence only: a person's decision stays final).
    ``source`` names the finding (``item_analysis``, ``label_quality``); ``reference`` is the id the
    finding named (a release item, a task); one flag per task and source.
    """

    __tablename__ = "adjudication_flags"

    id: str = Field(primary_key=True, max_length=64)
    task_id: str = Field(foreign_key="annotation_tasks.id", index=True, max_length=64)
    source: str
    reference: str = Field(sa_column=Column(Text, nullable=False))
    release: Optional[str] = Field(default=None, sa_column=Column(Text))
    evidence: str = Field(sa_column=Column(Text, nullable=False))
    details: Optional[dict[str, Any]] = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    status: FlagStatus = Field(default=FlagStatus.OPEN, index=True, sa_type=StoredEnum(FlagStatus))
    settled_by: Optional[str] = None
    settled_at: Optional[datetime] = None
    created_at: datetime = Field(default_factory=utcnow)


class LLMCall(SQLModel, table=True):
    """One request to a model and its reply: cache, cost ledger and provenance in one."""

    __tablename__ = "llm_calls"

    id: str = Field(primary_key=True, max_length=64)  # hash of the request (+ sample index)
    model: str
    endpoint: Optional[str] = None
    messages: list[dict[str, Any]] = Field(sa_column=Column(JSON(none_as_null=True), nullable=False))
    params: Optional[dict[str, Any]] = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    seed: Optional[int] = None
    sample: int = 0
    response: Optional[dict[str, Any]] = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    text: Optional[str] = Field(default=None, sa_column=Column(Text))
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    latency_ms: Optional[float] = None
    status: CallStatus = Field(default=CallStatus.OK, sa_type=StoredEnum(CallStatus))
    error: Optional[str] = Field(default=None, sa_column=Column(Text))
    purpose: Optional[str] = None  # generate_questions, answer_tcot, verify, classify, ...
    created_at: datetime = Field(default_factory=utcnow)
    # What the call was charged at (USD per million tokens) and where that price came from
    # ("genai-prices 0.2.3", "[llm.prices]", "none"); batch calls carry the batch price.
    price_input: Optional[float] = None
    price_output: Optional[float] = None
    price_source: Optional[str] = None
    transport: str = "online"  # online, batch (a provider's Batch API), offline (a batch file)
    batch_id: Optional[str] = Field(default=None, max_length=64)  # LLMBatch.id for batch and offline calls


class LLMBudget(SQLModel, table=True):
    """A budget in USD shared by every worker, process and the app that name it: ``spent`` and
    ``reserved`` change only in one conditional UPDATE each (:mod:`tqaforge.llm.budget`)."""

    __tablename__ = "llm_budgets"

    id: str = Field(primary_key=True, max_length=128)  # the budget's name
    max_cost: Optional[float] = None  # None: counted, never refused
    spent: float = 0.0
    reserved: float = 0.0  # the sum of the live holds' amounts
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class BudgetHold(SQLModel, table=True):
    """What one request in flight (or one submitted batch) holds of a budget: its worst case.
    A hold whose owner stopped renewing it past ``expires_at`` is charged in full (the request
    may have been billed), never given back."""

    __tablename__ = "llm_budget_holds"

    id: str = Field(primary_key=True, max_length=64)
    budget_id: str = Field(index=True, max_length=128)
    amount: float
    owner: str = Field(index=True, max_length=128)
    expires_at: datetime


class WorkClaim(SQLModel, table=True):
    """One piece of a step's work taken by one worker until ``expires_at`` (its lease, renewed
    while the worker lives): the others skip it; a lapsed claim is taken again."""

    __tablename__ = "work_claims"

    step: str = Field(primary_key=True, max_length=128)
    piece: str = Field(primary_key=True, max_length=256)
    owner: str = Field(index=True, max_length=128)
    expires_at: datetime


class LLMBatch(SQLModel, table=True):
    """One batch of requests sent through a provider's Batch API (``kind`` openai) or written for
    local inference (``kind`` offline). ``state`` follows the provider's (validating,
    in_progress, finalizing, completed, expired, cancelling, cancelled, failed) after our own
    prepared / uploaded / submitted, and ends at collected. ``custom_ids`` are the LLMCall ids
    of its requests, so no request is put in two open batches."""

    __tablename__ = "llm_batches"

    id: str = Field(primary_key=True, max_length=64)
    kind: str = "openai"
    step: Optional[str] = None  # the purpose of its requests, for the listing
    model: str
    endpoint: Optional[str] = None
    state: str = "prepared"
    file_path: Optional[str] = Field(default=None, sa_column=Column(Text))
    file_sha256: Optional[str] = None
    file_id: Optional[str] = None  # the provider's input file
    provider_batch_id: Optional[str] = None
    output_file_id: Optional[str] = None
    error_file_id: Optional[str] = None
    request_count: int = 0
    custom_ids: list[str] = Field(default_factory=list, sa_column=Column(JSON(none_as_null=True), nullable=False))
    requests: Optional[dict[str, Any]] = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    budget_id: Optional[str] = Field(default=None, max_length=128)
    reserved: float = 0.0
    cost: float = 0.0
    counts: Optional[dict[str, Any]] = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    error: Optional[str] = Field(default=None, sa_column=Column(Text))
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    collected_at: Optional[datetime] = None


class Release(SQLModel, table=True):
    """A frozen benchmark release. Once frozen, never rewritten."""

    __tablename__ = "releases"
    __table_args__ = (UniqueConstraint("name", "version", name="uq_release_version"),)

    id: str = Field(primary_key=True, max_length=64)
    name: str
    version: str
    path: Optional[str] = Field(default=None, sa_column=Column(Text))
    checksum: Optional[str] = None
    manifest: Optional[dict[str, Any]] = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    frozen: bool = False
    created_by: str = "tqaforge"
    created_at: datetime = Field(default_factory=utcnow)


class GenerationRound(SQLModel, table=True):
    """Round ``round`` of question generation for one subtype, frozen when it starts.

    The seed pool and definition the round shows, and whether the subtype was already past its
    target (which routes new questions to people or the verification agent), are fixed here so
    that a run resumed after a crash builds exactly the same prompts and routes.
    """

    __tablename__ = "generation_rounds"
    __table_args__ = (UniqueConstraint("subtype", "round", name="uq_generation_round"),)

    id: str = Field(primary_key=True, max_length=64)
    subtype: str
    round: int
    definition: str = Field(sa_column=Column(Text, nullable=False))
    seed_pool: list[dict[str, Any]] = Field(sa_column=Column(JSON(none_as_null=True), nullable=False))
    target: int
    accepted_at_start: int
    past_target: bool
    created_at: datetime = Field(default_factory=utcnow)


class GenerationStep(SQLModel, table=True):
    """One (round, subtype, table) of question generation: done once, then skipped on re-runs.

    Written in the same transaction as the questions it produced, so "step exists" means
    "its questions are stored".
    """

    __tablename__ = "generation_steps"
    __table_args__ = (UniqueConstraint("subtype", "round", "table_id", name="uq_generation_step"),)

    id: str = Field(primary_key=True, max_length=64)
    round_id: str = Field(foreign_key="generation_rounds.id", index=True, max_length=64)
    table_id: str = Field(foreign_key="tables.id", max_length=64)
    subtype: str
    round: int
    status: StepStatus = Field(default=StepStatus.DONE, sa_type=StoredEnum(StepStatus))
    attempt: int = 0  # the request's sample index; --retry-failed moves to the next
    model: str
    params: Optional[dict[str, Any]] = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    seeds_shown: Optional[list[str]] = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    llm_call_ids: Optional[list[str]] = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    question_ids: Optional[list[str]] = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    duplicates: Optional[list[dict[str, Any]]] = Field(default=None, sa_column=Column(JSON(none_as_null=True)))
    error: Optional[str] = Field(default=None, sa_column=Column(Text))
    created_at: datetime = Field(default_factory=utcnow)


ALL_RECORDS = (
    TableRecord,
    Question,
    AnswerCandidate,
    Answer,
    Variant,
    AnnotationTask,
    Annotation,
    Annotator,
    LabelStudioTaskCopy,
    LabelStudioPull,
    Adjudication,
    LLMCall,
    Release,
    GenerationRound,
    GenerationStep,
)

"""Typed shapes of the JSON columns whose content a stage owns (documentation types).

The records keep ``dict[str, Any]`` columns, so that a stage may add a key without a migration
and rows written by older versions still load; these TypedDicts say what the writing stage puts
there, for readers of the records and for the stage's own code (``lineage: QuestionLineage =
{...}`` lets a type checker see a misspelt key). ``total=False``: a key may be absent.
"""

from __future__ import annotations

from typing import Any, TypedDict


class QuestionEdit(TypedDict):
    """One entry of ``QuestionLineage["edits"]``: a person rewrote the question (annotation.review)."""

    previous_text: str
    annotator: str
    source: str  # app | cli | labelstudio
    at: str  # ISO time, seconds


class QuestionLineage(TypedDict, total=False):
    """``Question.lineage``: how a generated question came about (generation.questions)."""

    round: int
    step: str  # GenerationStep.id
    seeds_shown: list[str]  # seed question texts (or ids) shown in the prompt
    model: str
    llm_call_ids: list[str]
    table_serialization: str
    prompt_template: str
    verification_call_ids: list[str]
    route: str  # "agent" | "human": who decides past the target
    route_reason: str
    edits: list[QuestionEdit]


class QuestionTyping(TypedDict):
    """``Question.meta["typing"]``: the extraction/reasoning type and its evidence (generation.classify)."""

    method: str  # lexical | llm | combined | human (a person's label is never overwritten)
    type: str | None  # QuestionType value; None: undecided
    decision: str  # the decision in words
    answers: list[str]
    lexical: dict[str, Any] | None  # LexicalVerdict.evidence(): type, rule, tagger, cells, missing, cues
    llm: dict[str, Any] | None  # LLMVerdict.evidence(): type, operations, cells, model, call_ids
    structural_words: list[str]


class QuestionVerification(TypedDict, total=False):
    """``Question.meta["verification"]``: the verification agent's verdict (generation.questions)."""

    answerable: bool
    matches_subtype: bool
    unambiguous: bool
    reasons: list[str]
    verdict: str  # "accepted" | "rejected"
    call_id: str
    call_ids: list[str]
    model: str
    error: str  # set instead of the verdict when the reply was invalid


class QuestionMeta(TypedDict, total=False):
    """``Question.meta``."""

    typing: QuestionTyping
    verification: QuestionVerification


class VariantParams(TypedDict, total=False):
    """``Variant.params``: what a perturbation chose (tables.perturb); keys depend on the perturbation."""

    k: int  # how many rows, columns or cells it moved or inserted
    part: str  # structure perturbations: which part of the order was shuffled
    bounds: list[int]
    targets: list[int]
    positions: list[int]
    rows: list[int]
    columns: list[int]
    keep_labels: bool
    mask: str  # the text that replaces removed cells
    cells: list[list[int]]  # [row, col] pairs
    cell: list[int]
    cells_from: Any
    removed: Any
    recomputed: bool
    reason: str


class VariantChanges(TypedDict):
    """``Variant.changes``: where the perturbed table's cells came from (``Change.to_dict()``)."""

    row_order: list[int] | None
    col_order: list[int] | None
    changed_cells: list[list[int]]
    transposed: bool
    duplicated_from: dict[str, int]  # new row -> original row (keys are strings in JSON)
    note: str


class CandidateExecution(TypedDict, total=False):
    """``CandidateDetails["execution"]``: how the sandbox ran a PoT or chart program (answers.agents)."""

    outcome: str  # tqaforge.sandbox.Outcome: ok, exception, timeout, memory, output_limit, killed, crashed
    exit_status: int | None
    error: str | None
    stdout: str  # the head of it
    stderr: str  # the head of it
    isolation: list[str]  # the layers in force
    missing: list[str]  # layers asked for but not available on that machine
    seconds: float
    chart: dict[str, Any] | None  # ChartReading.to_dict(): the drawn y data, or why none


class CandidateDetails(TypedDict, total=False):
    """``AnswerCandidate.details``: what an agent's reply held beyond its answer (answers.agents)."""

    steps: list[dict[str, str]]  # SCoT: {"thought", "action", "result"}
    execution: CandidateExecution  # PoT and chart code
    chart_type: str  # the chart type the code was read as


class AnswerVotes(TypedDict, total=False):
    """``Answer.votes`` of a voted answer (answers.annotate): who said what, and the routing draw."""

    rule: str  # "unanimous" | "majority"
    methods: list[str]
    samples: int
    candidates: list[dict[str, Any]]  # {"id", "method", "sample", "values", "status"}
    groups: list[list[str]]  # candidate ids of each group of equal answers, the largest first
    reason: str  # why it is inconsistent / why it went where it went
    draw: float  # the seeded number in [0, 1) that routed an inconsistent answer
    manual_share: float
    seed: int
    model: str
    corrects: str  # a corrected answer (people's, after verification): the id of the answer it replaces

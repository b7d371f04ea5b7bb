"""Question typing: extraction or reasoning (FREB-TQA, section 3.2 and appendices A.3-A.4).

An *extraction* question (EQ) is answered by reading one cell; a *reasoning* question (RQ) needs
an operation over several cells (counting, comparing, summing, ...). Three methods, as in the paper:

- **lexical** (:func:`lexical_type`): if an answer is not found in any cell, RQ. If it is found,
  comparative or superlative words in the question ("highest", "more", "least", ...) signal an
  aggregation over cells, so RQ; otherwise EQ. Cells are matched with the normalised tiers of
  :mod:`tqaforge.tables.matching` (the paper uses exact string match; ours also finds ``$24,264``
  for ``24,264``), and every answer of a multi-answer question must be found. Comparative words
  come from NLTK's POS tagger (tags JJR, JJS, RBR, RBS) when its model is installed, else from a
  word list that needs no download (:class:`WordListCues`); which one ran is part of the evidence.
- **llm** (:func:`llm_type`): the model sees the table and the question (not the answer) and
  lists the operations needed (the paper's prompt of appendix A.4, asking for JSON;
  ``prompts/classify_question.txt``). No operation means EQ.
- **combined** (:func:`combine`): the paper's final rule. The lexical rule alone decides RQ
  (its RQs were the most precise, 83% on WTQ); an EQ needs the lexical rule *and* the model to
  say EQ (93.8% precision, against 75% for either alone). When they disagree on a lexical EQ the
  question stays undecided (``question_type`` None) and goes to people; the paper drops these
  questions (about 20% of WTQ). The model is only asked about lexical EQs.

The **structural filter** (:func:`structural_words`) flags questions whose answer depends on
where things are in the table ("the name in the first row", "the team listed above X"); FREB-TQA
removes them before perturbing table structure. Its words are the paper's list (appendix A.3)
plus the names of table parts, ``row`` and ``column``.

:func:`classify_questions` (what to type: :class:`ClassifyOptions`) types stored questions and writes ``Question.question_type`` and the
evidence to ``Question.meta["typing"]``; a type people settled (their ``question_typing``
labels, adjudicated: :func:`tqaforge.labels.settled_by_people`) is never overwritten, and the
summary says how many were left alone. :func:`score_typing` measures a method against labels.

>>> from tqaforge.tables.table import Table
>>> t = Table.build(["city", "pop"], [["Oslo", "709,000"], ["Bergen", "285,900"]])
>>> lexical_type(t, "What is the population of Oslo?", ["709000"], cues=WordListCues()).question_type
<QuestionType.EXTRACTION: 'extraction'>
>>> lexical_type(t, "Which city has the largest population?", ["Oslo"], cues=WordListCues()).rule
'comparative_words'
>>> structural_words("Who is listed in the first row?")
('first', 'row')
"""

from __future__ import annotations

import asyncio
import collections
import re
from collections.abc import Awaitable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal, Protocol

from sqlalchemy import select as sa_select
from sqlmodel import col, select

from tqaforge.errors import ConfigError, InvalidReply
from tqaforge.labels import QUESTION_TYPING, TYPED_BY_PEOPLE, Authority, left_alone
from tqaforge.llm import Gateway, LLMSettings
from tqaforge.llm.budget import Budget
from tqaforge.llm.step import CallSummary, HasCalls, RunnerOptions, run_step
from tqaforge.progress import Progress
from tqaforge.prompts import render
from tqaforge.queries import tables_by_id, trusted_answers
from tqaforge.schemas.enums import QuestionStatus, QuestionType
from tqaforge.schemas.records import Question, utcnow
from tqaforge.store import Workspace
from tqaforge.tables.matching import Match, match_answer
from tqaforge.tables.perturb.structural import (  # the structural-question filter (FREB-TQA A.3); re-exported
    EXTENDED_STRUCTURAL_WORDS,
    PAPER_STRUCTURAL_WORDS,
    STRUCTURAL_WORDS,
    is_structural,
    structural_words,
)
from tqaforge.tables.perturb.structural import words_of as _words
from tqaforge.tables.serialize import serialize
from tqaforge.tables.table import Table

__all__ = [
    "EXTENDED_STRUCTURAL_WORDS",
    "METHODS",
    "PAPER_STRUCTURAL_WORDS",
    "STRUCTURAL_WORDS",
    "ClassifyOptions",
    "ClassifySummary",
    "Cue",
    "CueFinder",
    "LLMVerdict",
    "LexicalVerdict",
    "NltkCues",
    "TypingScores",
    "WordListCues",
    "classify_questions",
    "combine",
    "cue_finder",
    "is_structural",
    "lexical_type",
    "llm_type",
    "nltk_tagger_status",
    "score_typing",
    "structural_words",
    "typing_messages",
    "validate_typing_reply",
]

Method = Literal["lexical", "llm", "combined"]
METHODS: tuple[Method, ...] = ("lexical", "llm", "combined")
TaggerChoice = Literal["auto", "nltk", "wordlist"]
EQ, RQ = QuestionType.EXTRACTION, QuestionType.REASONING
PURPOSE = "classify_question"
HUMAN = TYPED_BY_PEOPLE  # meta["typing"]["method"] that people's settled type writes (for the record)

# ---------------------------------------------------------------------------------------------
# Comparative and superlative words


@dataclass(frozen=True, slots=True)
class Cue:
    """A comparative or superlative word: NLTK's tag (JJR, JJS, RBR, RBS), or ``comparative`` /
    ``superlative`` from the word list."""

    word: str
    tag: str


class CueFinder(Protocol):
    """Finds comparative and superlative words; ``name`` says which way (``nltk`` or ``wordlist``)."""

    name: str

    def __call__(self, question: str) -> tuple[Cue, ...]: ...


_IRREGULAR: dict[str, str] = {
    **dict.fromkeys(("more", "less", "fewer", "better", "worse", "further", "farther", "lesser", "elder"),
                    "comparative"),
    **dict.fromkeys(("most", "least", "fewest", "best", "worst", "furthest", "farthest", "eldest", "utmost"),
                    "superlative"),
}

# Adjectives and adverbs that compare with -er/-est, the kind table questions ask about. Their
# -er forms are the only -er words taken without "than" after them: most English words in -er
# are nouns (number, player, driver, power, member, October).
_GRADABLE = """
high low large small big long short tall old young new early late fast slow quick heavy light
wide narrow deep shallow close near rich poor strong weak hot cold warm cool great easy hard
cheap dense thick thin busy wealthy healthy happy fine bright dark dry wet tough safe rare huge
tiny fat lean steep fair full clean loud quiet brief broad costly deadly lucky mighty noisy
pretty sunny windy rainy snowy cloudy hungry angry lengthy wise pure rough smooth sharp simple
severe harsh mild calm vast slim grand proud humble noble nice soon hilly tidy dirty
sweet dull sad lofty rapid swift
"""

# Words in -est of six or more letters that are not superlatives.
_NOT_SUPERLATIVE = frozenset("""
contest interest forest honest modest request protest conquest harvest suggest arrest manifest
everest budapest bucharest tempest northwest southwest midwest inquest digest invest priest unrest
earnest bequest behest incest attest detest ingest infest divest molest celest pianist
""".split())

_NOT_COMPARATIVE_BEFORE_THAN = frozenset({"other", "rather", "another", "whether"})


def _degrees(stem: str) -> tuple[str, str]:
    """The -er and -est forms of a one-word adjective (large -> larger, big -> bigger, early -> earlier)."""
    if stem.endswith("e"):
        return stem + "r", stem + "st"
    if stem.endswith("y") and len(stem) > 2 and stem[-2] not in "aeiou":
        return stem[:-1] + "ier", stem[:-1] + "iest"
    if re.fullmatch(r"[^aeiou]*[aeiou][bdgmnpt]", stem):  # one short vowel before one consonant
        return stem + stem[-1] + "er", stem + stem[-1] + "est"
    return stem + "er", stem + "est"


def _degree_table() -> dict[str, str]:
    table: dict[str, str] = {}
    for stem in _GRADABLE.split():
        comparative, superlative = _degrees(stem)
        table[comparative] = "comparative"
        table[superlative] = "superlative"
    table.update(_IRREGULAR)
    return table


_DEGREES = _degree_table()


class WordListCues:
    """Comparatives and superlatives by word list; needs no download.

    A word counts when it is an irregular form (more, most, less, least, fewer, fewest, better,
    best, worse, worst, ...), an -er / -est form of a gradable adjective in our list (higher,
    largest, earlier, biggest), any word in -er right before "than" ("... scored sooner than"),
    any other word of six or more letters in -est or -iest that is not in a stop list of nouns
    and verbs (contest, interest, harvest, priest, ...), or a -most compound (northernmost).
    """

    name = "wordlist"

    def __call__(self, question: str) -> tuple[Cue, ...]:
        words = _words(question)
        cues: list[Cue] = []
        for i, word in enumerate(words):
            degree = _DEGREES.get(word)
            if degree is None:
                following = words[i + 1] if i + 1 < len(words) else ""
                if word.endswith("er") and following == "than" and word not in _NOT_COMPARATIVE_BEFORE_THAN:
                    degree = "comparative"
                elif len(word) >= 6 and word.endswith("est") and word not in _NOT_SUPERLATIVE:
                    degree = "superlative"
                elif len(word) > 5 and word.endswith("most") and word != "almost":
                    degree = "superlative"
            if degree is not None:
                cues.append(Cue(word, degree))
        return tuple(cues)


NLTK_TAGS = frozenset({"JJR", "JJS", "RBR", "RBS"})
# NLTK >= 3.9 ships the tagger as JSON under the _eng name; older versions as a pickle.
_NLTK_RESOURCES = ("taggers/averaged_perceptron_tagger_eng/", "taggers/averaged_perceptron_tagger/")
_NLTK_INSTALL = "python -m nltk.downloader averaged_perceptron_tagger_eng  (or the word list: --tagger wordlist)"


def nltk_tagger_status() -> tuple[bool, str]:
    """Whether NLTK's POS tagger model is installed: (True, where) or (False, why not).

    Only looks (``nltk.data.find``); never downloads.
    """
    try:
        import nltk.data
    except ImportError:  # pragma: no cover - nltk is a dependency
        return False, "nltk is not installed"
    for resource in _NLTK_RESOURCES:
        try:
            return True, str(nltk.data.find(resource))
        except LookupError:
            continue
    return False, "NLTK's averaged perceptron tagger model is not installed"


class NltkCues:
    """Comparatives and superlatives by NLTK's POS tagger: tokens tagged JJR, JJS, RBR or RBS.

    Tokenised with NLTK's Treebank tokenizer (which needs no model). Build it with
    :func:`cue_finder`, which checks that the model is there.
    """

    name = "nltk"

    def __init__(self) -> None:
        from nltk.tag.perceptron import PerceptronTagger
        from nltk.tokenize import TreebankWordTokenizer

        self._tagger = PerceptronTagger()
        self._tokenize = TreebankWordTokenizer().tokenize

    def __call__(self, question: str) -> tuple[Cue, ...]:
        tagged = self._tagger.tag(self._tokenize(question))
        return tuple(Cue(word.lower(), tag) for word, tag in tagged if tag in NLTK_TAGS)


@lru_cache(maxsize=4)
def _nltk_cues(where: str) -> NltkCues:
    # One tagger per model location: loading it takes about a second.
    return NltkCues()


def cue_finder(tagger: TaggerChoice = "auto") -> CueFinder:
    """The comparative-word finder: ``nltk`` (ConfigError when its model is missing),
    ``wordlist``, or ``auto``: NLTK when its model is installed, else the word list."""
    if tagger == "wordlist":
        return WordListCues()
    if tagger not in ("auto", "nltk"):
        raise ConfigError(f"unknown tagger {tagger!r}", hint="auto, nltk or wordlist")
    available, where = nltk_tagger_status()
    if available:
        try:
            return _nltk_cues(where)
        except (LookupError, OSError, ValueError) as exc:
            available, where = False, f"NLTK's tagger model at {where} could not be loaded: {exc}"
    if tagger == "nltk":
        raise ConfigError(where, hint=f"install it once with: {_NLTK_INSTALL}")
    return WordListCues()


# ---------------------------------------------------------------------------------------------
# The lexical rule


@dataclass(frozen=True)
class LexicalVerdict:
    """What the lexical rule decided and why.

    ``rule`` is ``answer_not_in_table`` (RQ), ``comparative_words`` (RQ), ``answer_in_cell``
    (EQ) or ``no_answer`` (undecided: the rule needs the answer).
    """

    question_type: QuestionType | None
    rule: str
    matches: tuple[Match, ...] = ()
    missing: tuple[str, ...] = ()  # answers found in no cell
    cues: tuple[Cue, ...] = ()
    tagger: str = ""

    def evidence(self) -> dict[str, Any]:
        return {
            "type": self.question_type.value if self.question_type else None,
            "rule": self.rule,
            "tagger": self.tagger,
            "cells": [[m.cell[0], m.cell[1], m.rule] for m in self.matches[:20]],
            "missing": list(self.missing),
            "cues": [[c.word, c.tag] for c in self.cues],
        }


def lexical_type(
    table: Table, question: str, answers: Sequence[str], *, cues: CueFinder | None = None
) -> LexicalVerdict:
    """FREB-TQA's lexical rule for one question (see the module docstring).

    ``answers`` are the gold answer values; all must be found in data cells for an EQ.
    ``cues`` defaults to :func:`cue_finder` ``("auto")``.
    """
    finder = cues if cues is not None else cue_finder()
    found = finder(question)
    answers = [a for a in answers if a is not None and str(a).strip()]
    if not answers:
        return LexicalVerdict(None, "no_answer", cues=found, tagger=finder.name)
    matches: list[Match] = []
    missing: list[str] = []
    for answer in answers:
        hits = match_answer(table, answer)
        matches.extend(hits)
        if not hits:
            missing.append(answer)
    if missing:
        kind, rule = RQ, "answer_not_in_table"
    elif found:
        kind, rule = RQ, "comparative_words"
    else:
        kind, rule = EQ, "answer_in_cell"
    return LexicalVerdict(kind, rule, tuple(matches), tuple(missing), found, finder.name)


# ---------------------------------------------------------------------------------------------
# The LLM classifier


@dataclass(frozen=True)
class LLMVerdict:
    """The model's typing: the operations it named (none: EQ) and the cells it would use."""

    question_type: QuestionType
    operations: tuple[str, ...]
    cells: tuple[str, ...]
    model: str = ""
    call_ids: tuple[str, ...] = ()

    def evidence(self) -> dict[str, Any]:
        return {
            "type": self.question_type.value,
            "operations": list(self.operations),
            "cells": list(self.cells[:20]),
            "model": self.model,
            "call_ids": list(self.call_ids),
        }


def typing_messages(table: Table, question: str, serialization: str = "markdown") -> list[dict[str, str]]:
    """The chat messages that ask the model to type one question (template ``classify_question``)."""
    prompt = render(
        "classify_question", serialization=serialization, table=serialize(table, serialization), question=question
    )
    return [{"role": "user", "content": prompt}]


def _strings(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ValueError(f'"{key}" must be a list of strings, not {type(value).__name__}')
    out = []
    for item in value:
        if isinstance(item, bool) or not isinstance(item, (str, int, float)):
            raise ValueError(f'"{key}" must be a list of strings; it holds {item!r}')
        if str(item).strip():
            out.append(str(item).strip())
    return tuple(out)


def validate_typing_reply(value: Any) -> tuple[QuestionType, tuple[str, ...], tuple[str, ...]]:
    """Check a parsed reply ``{"cells": [...], "operations": [...], "type": ...}``.

    Returns (type, operations, cells); raises ValueError naming the problem (the gateway sends
    it back to the model once). The type must agree with the operations: none for extraction.
    """
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got a {type(value).__name__}")
    if "operations" not in value or "type" not in value:
        raise ValueError('the object needs "operations" (a list) and "type" ("extraction" or "reasoning")')
    operations = tuple(op.lower() for op in _strings(value["operations"], "operations"))
    cells = _strings(value.get("cells", []), "cells")
    kind = value["type"]
    if not isinstance(kind, str) or kind.strip().lower() not in (EQ.value, RQ.value):
        raise ValueError(f'"type" must be "extraction" or "reasoning", not {kind!r}')
    question_type = QuestionType(kind.strip().lower())
    if (question_type is EQ) != (not operations):
        raise ValueError(
            f'"type" is {question_type.value!r} but "operations" is {list(operations)!r}: '
            "extraction has no operations and reasoning at least one"
        )
    return question_type, operations, cells


async def llm_type(
    gw: Gateway, table: Table, question: str, *, serialization: str = "markdown", seed: int = 0
) -> LLMVerdict:
    """Ask the model through the gateway (cached, budgeted; one repair on an invalid reply).

    Raises InvalidReply when the reply is still invalid after the repair.
    """
    (kind, operations, cells), calls = await gw.complete_json(
        typing_messages(table, question, serialization),
        validate=validate_typing_reply,
        purpose=PURPOSE,
        temperature=0.0,
        max_tokens=400,
        seed=seed,
    )
    return LLMVerdict(kind, operations, cells, gw.settings.model, tuple(c.call_id for c in calls))


# ---------------------------------------------------------------------------------------------
# The combination


def combine(lexical: LexicalVerdict, llm: LLMVerdict | None) -> tuple[QuestionType | None, str]:
    """FREB-TQA's combination: (type or None, the decision in words).

    Lexical RQ -> RQ; lexical EQ and model EQ -> EQ; lexical EQ and model RQ -> undecided;
    lexical undecided (no answer) -> undecided. ``llm`` is only needed for a lexical EQ.
    """
    if lexical.question_type is None:
        return None, f"undecided: lexical rule has {lexical.rule}"
    if lexical.question_type is RQ:
        return RQ, f"reasoning by the lexical rule ({lexical.rule})"
    if llm is None:
        raise ValueError("a lexical extraction needs the model's verdict to combine")
    if llm.question_type is EQ:
        return EQ, "extraction: lexical rule and model agree"
    return None, "undecided: lexical rule says extraction, model says reasoning"


# ---------------------------------------------------------------------------------------------
# Typing stored questions

_BATCH = 500  # questions loaded and written per transaction (lexical)
_LLM_CHUNK = 64  # questions typed by a model written per transaction: a kill loses at most these writes


@dataclass(frozen=True)
class ClassifyOptions:
    """What :func:`classify_questions` types and how.

    Questions of ``subtype`` (all when None) and ``status`` (every status but rejected when
    None), oldest first, at most ``limit``; typed by ``method`` (``lexical``, ``llm`` or
    ``combined``), with comparative words found by ``tagger`` (:func:`cue_finder`); ``structural``
    is the structural-word list, ``serialization`` how the model sees the table, ``seed`` the
    seed sent with its requests.
    """

    method: Method = "lexical"
    subtype: str | None = None
    status: str | None = None
    limit: int | None = None
    tagger: TaggerChoice = "auto"
    structural: Sequence[str] = STRUCTURAL_WORDS
    serialization: str = "markdown"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ConfigError(f"unknown typing method {self.method!r}", hint="lexical, llm or combined")


@dataclass
class ClassifySummary(HasCalls):
    """What :func:`classify_questions` did; :meth:`lines` is what the CLI prints."""

    method: str
    tagger: str | None = None
    model: str | None = None
    total: int = 0  # questions selected
    questions: int = 0  # questions typed (undecided included)
    types: collections.Counter[str] = field(default_factory=collections.Counter)  # extraction/reasoning/undecided
    rules: collections.Counter[str] = field(default_factory=collections.Counter)
    changed: int = 0  # rows whose type or evidence changed
    no_answer: int = 0
    invalid: int = 0  # model replies still invalid after the repair (left as they were)
    structural: int = 0
    human: int = 0  # typed by people (adjudicated labels): left alone
    already: int = 0  # typed by this method and model before this run: left as they are
    calls: CallSummary = field(default_factory=CallSummary)  # the model's calls (method llm or combined)






    @property
    def failed(self) -> bool:
        """True when the run stopped early, or the model was asked and every reply was invalid
        (nothing was typed): the CLI exits non-zero rather than reporting success."""
        return self.stopped is not None or (self.invalid > 0 and self.questions == 0)

    @property
    def advice(self) -> str | None:
        """What to do next, for a run that failed; None for one that did not."""
        if self.stop_reason is not None:
            return self.calls.advice("questions")
        if self.failed:
            return "every model reply was invalid; nothing was typed (try a larger model or check the endpoint)"
        return None

    def add(self, kind: QuestionType | None, rule: str, words: Sequence[str]) -> None:
        """Count one typed question."""
        self.questions += 1
        self.types[kind.value if kind else "undecided"] += 1
        self.rules[rule] += 1
        self.structural += bool(words)

    def lines(self) -> list[str]:
        """What the CLI prints on stdout: the types, each rule's count, what was left, and the
        model's calls when a model was asked. (A :attr:`failed` run is reported on stderr besides.)"""
        how = f"comparative words by {self.tagger}" if self.tagger else ""
        if self.model:
            how += (", " if how else "") + f"model {self.model}"
        lines = [
            f"{self.questions} questions typed ({how}): {self.types.get('extraction', 0)} extraction, "
            f"{self.types.get('reasoning', 0)} reasoning, {self.types.get('undecided', 0)} undecided; "
            f"{self.changed} changed; {self.structural} with structural words"
        ]
        lines += [f"  {n:6} x {rule}" for rule, n in self.rules.most_common()]
        if self.already:
            lines.append(f"{self.already} typed by {self.method} with {self.model} before: left as they are")
        if self.no_answer:
            lines.append(f"{self.no_answer} without an answer (the lexical rule needs one): left undecided")
        if self.invalid:
            lines.append(f"{self.invalid} with an invalid model reply after the repair: left as they were")
        if self.human:
            lines.append(f"{self.human} typed by people (their settled label): left alone")
        if self.model:
            lines += self.calls.lines()
        return lines

    def as_dict(self) -> dict[str, Any]:
        """The counts as JSON-able data (``rules`` most frequent first), ``failed`` and the calls."""
        return {
            "method": self.method, "tagger": self.tagger, "model": self.model, "total": self.total,
            "questions": self.questions, "types": dict(self.types), "rules": dict(self.rules.most_common()),
            "changed": self.changed, "no_answer": self.no_answer, "invalid": self.invalid,
            "structural": self.structural, "human": self.human, "already": self.already, "failed": self.failed,
            "calls": self.calls.as_dict(),
        }

    def progress_note(self) -> str:
        """The note passed to ``on_progress`` by the lexical method (the runner notes the model's cost)."""
        return ""


@dataclass
class _Work:
    question_id: str
    text: str
    table: Table
    answers: list[str]


def _load(ws: Workspace, subtype: str | None, status: str | None, limit: int | None) -> tuple[list[_Work], int]:
    """The questions to type, with tables and best answers; and how many were left to people."""
    with ws.session() as s:
        q = select(Question)
        if subtype:
            q = q.where(Question.subtype == subtype)
        if status:
            q = q.where(Question.status == status)
        else:
            q = q.where(Question.status != QuestionStatus.REJECTED.value)
        q = q.order_by(Question.created_at, Question.id)  # type: ignore[arg-type]
        human = 0
        questions = []
        candidates = s.exec(q).all()
        # People outrank rules and models (tqaforge.labels.Authority): what they typed stays.
        held = left_alone(s, QUESTION_TYPING, "question", [x.id for x in candidates], by=Authority.RULE)
        for question in candidates:
            if question.id in held:
                human += 1
                continue
            questions.append(question)
            if limit is not None and len(questions) >= limit:
                break
        # The lexical rule reads the question's trusted answer (queries.trusted_answers).
        gold = trusted_answers(s, [x.id for x in questions])
        tables = tables_by_id(s, [x.table_id for x in questions])
        work = [_Work(x.id, x.text, tables[x.table_id], list(gold[x.id].values) if x.id in gold else []) for x in questions]
    return work, human


def _typing_record(
    method: str,
    kind: QuestionType | None,
    decision: str,
    work: _Work,
    lexical: LexicalVerdict | None,
    llm: LLMVerdict | None,
    structural: Iterable[str],
    *,
    model: str | None = None,
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "method": method,
        "type": kind.value if kind else None,
        "decision": decision,
        "answers": work.answers,
        "lexical": lexical.evidence() if lexical else None,
        "llm": llm.evidence() if llm else None,
        "structural_words": list(structural),
    }
    if model is not None:  # a model's typing names it: the next run of this method and model skips it
        record["model"] = model
    return record


def _write(ws: Workspace, results: list[tuple[str, QuestionType | None, dict[str, Any]]]) -> int:
    """Store types and evidence; returns how many rows changed (unchanged rows are not touched).
    A type people settled while the model was asked is left alone (checked again here, in the
    writing transaction)."""
    changed = 0
    with ws.session() as s:
        held = left_alone(s, QUESTION_TYPING, "question", [r[0] for r in results], by=Authority.RULE)
        for question_id, kind, record in results:
            question = s.get(Question, question_id)
            if question is None or question_id in held:  # deleted, or settled by people meanwhile
                continue
            meta = dict(question.meta or {})
            if question.question_type == kind and meta.get("typing") == record:
                continue
            meta["typing"] = record
            question.meta = meta
            question.question_type = kind
            question.updated_at = utcnow()
            s.add(question)
            changed += 1
    return changed


def classify_questions(
    ws: Workspace,
    options: ClassifyOptions | None = None,
    llm: LLMSettings | None = None,
    *,
    on_progress: Progress | None = None,
    runner: RunnerOptions | None = None,
    budget: Budget | None = None,
) -> ClassifySummary:
    """Type stored questions as extraction or reasoning and store the result; the CLI's
    ``questions classify``::

        summary = classify_questions(ws, ClassifyOptions(method="combined", subtype="Counting"), llm)
        for line in summary.lines():
            print(line)

    Questions are selected by ``options`` (:class:`ClassifyOptions`; default: every question
    but the rejected, lexically); questions whose type people settled are skipped and counted. Each gets
    ``question_type`` (None when undecided) and ``meta["typing"]``: the method, the type, the
    decision in words, the answers used, the lexical and model evidence and the structural words
    found. ``llm`` and ``combined`` need ``llm`` settings and run as a step of the step runner
    (:mod:`tqaforge.llm.step`; ``runner``: workers, transport, a shared budget by name;
    ``budget``: one shared with the caller's other calls): their records name the model too, and
    a question this method and model typed already is left as it is (``already``), so a run
    stopped early, or run by several workers or processes, types each question once. Model
    replies are LLMCall records, so asking again pays nothing. An invalid reply (after one
    repair) leaves that question as it was and is counted; BudgetExceeded and other LLMErrors
    stop the run after the finished questions are stored, and the summary says so
    (``stopped``, ``stop_reason``, ``advice``). ``on_progress``
    (:class:`~tqaforge.progress.Progress`) is called as questions are stored, with the questions
    done, the questions to do and a note of the running cost.
    """
    options = options if options is not None else ClassifyOptions()
    method = options.method
    if method != "lexical" and llm is None:
        raise ConfigError(f"method {method!r} needs a model", hint="pass --model or set [llm] model in tqaforge.toml")
    finder = cue_finder(options.tagger) if method != "llm" else None
    summary = ClassifySummary(method=method, tagger=finder.name if finder else None,
                              model=llm.model if llm and method != "lexical" else None)
    work, summary.human = _load(ws, options.subtype, options.status, options.limit)
    summary.total = len(work)
    done = 0

    if method == "lexical":
        assert finder is not None
        for start in range(0, len(work), _BATCH):
            results = []
            for w in work[start : start + _BATCH]:
                verdict = lexical_type(w.table, w.text, w.answers, cues=finder)
                words = structural_words(w.text, options.structural)
                summary.no_answer += verdict.rule == "no_answer"
                summary.add(verdict.question_type, verdict.rule, words)
                decision = f"lexical rule: {verdict.rule}"
                results.append((w.question_id, verdict.question_type,
                                _typing_record(method, verdict.question_type, decision, w, verdict, None, words)))
            summary.changed += _write(ws, results)
            done += len(results)
            if on_progress:
                on_progress(done, summary.total, summary.progress_note())
        return summary

    assert llm is not None
    step = _Typing(ws, work, options, finder, llm.model, summary)
    summary.already = len(work) - len(step.pending())
    try:
        run_step(ws, step, llm, runner, budget=budget, on_progress=on_progress, summary=summary.calls)
    finally:
        step.flush()  # what the runner finished before it ended (or stopped, or was interrupted)
    return summary


class _Typing:
    """Question typing with a model as a step of the runner (:mod:`tqaforge.llm.step`).

    Its pieces are the selected questions not yet typed by this method and model (the typing
    record in the store names both, and still matches the question's type and answers): read
    from the store at each :meth:`pending`, so a stopped run, another worker or another process
    leaves only the rest. A question whose reply stayed invalid, or whose type people settled
    meanwhile, is not written and not asked again in this run (the next run asks the cache).

    Results are written in order, in transactions of ``_LLM_CHUNK`` (one transaction a question
    contended with the ledger's own writes on SQLite: see ``benchmarks/question_typing.py
    --store``): :meth:`commit` adds to the unwritten results and hands the runner a full chunk
    to write; :meth:`flush` writes the rest, at each :meth:`pending` (between a worker's claims)
    and when the run ends, stopped or not, so what the runner finished is stored. A kill loses
    at most a chunk of writes, whose replies are in the ledger; and between the runner letting go
    of a question and its chunk being written, a worker of another process may type it again,
    from the cache, to the same record (never paying twice).
    """

    def __init__(self, ws: Workspace, work: list[_Work], options: ClassifyOptions, finder: CueFinder | None,
                 model: str, summary: ClassifySummary) -> None:
        self.ws, self.work, self.options, self.finder, self.model, self.summary = ws, work, options, finder, model, summary
        self.name = f"classify:{options.method}:{model}"[:128]
        self._settled: set[str] = set()  # typed (in the store, or by us), given up or gone: never pending again
        self._unwritten: list[tuple[str, QuestionType | None, dict[str, Any]]] = []

    def pending(self) -> list[_Work]:
        self.flush()
        left = [w for w in self.work if w.question_id not in self._settled]
        state = _typing_state(self.ws, [w.question_id for w in left])
        out = []
        for w in left:
            st = state.get(w.question_id)
            if st is None or st.by(self.options.method, self.model, w.answers):
                self._settled.add(w.question_id)  # deleted, or typed by this method and model
                continue
            out.append(w)
        return out

    def key(self, piece: _Work) -> str:
        return piece.question_id

    async def call(self, gw: Gateway, piece: _Work) -> tuple[LexicalVerdict | None, LLMVerdict | InvalidReply | None]:
        lexical = lexical_type(piece.table, piece.text, piece.answers, cues=self.finder) if self.finder else None
        if lexical is not None and lexical.question_type is not EQ:
            return lexical, None  # combined: the lexical rule decides alone
        try:
            verdict = await llm_type(gw, piece.table, piece.text, serialization=self.options.serialization,
                                     seed=self.options.seed)
        except InvalidReply as exc:  # left as it was and counted; any other LLMError stops the run
            return lexical, exc
        return lexical, verdict

    def commit(self, piece: _Work, result: tuple[LexicalVerdict | None, LLMVerdict | InvalidReply | None]
               ) -> Awaitable[None] | None:
        lexical, llm = result
        method, summary = self.options.method, self.summary
        self._settled.add(piece.question_id)
        if isinstance(llm, InvalidReply):
            summary.invalid += 1
            return None
        words = structural_words(piece.text, self.options.structural)
        kind: QuestionType | None
        if method == "llm":
            assert llm is not None
            kind, decision, rule = llm.question_type, "model: " + (", ".join(llm.operations) or "no operation"), "model"
        else:
            assert lexical is not None
            kind, decision = combine(lexical, llm)
            rule = lexical.rule if llm is None else f"{lexical.rule}+model_{llm.question_type.value}"
            summary.no_answer += lexical.rule == "no_answer"
        summary.add(kind, rule, words)
        self._unwritten.append((piece.question_id, kind, _typing_record(method, kind, decision, piece, lexical, llm,
                                                                        words, model=self.model)))
        if len(self._unwritten) < _LLM_CHUNK:
            return None
        chunk, self._unwritten = self._unwritten, []
        return self._write_chunk(chunk)

    async def _write_chunk(self, chunk: list[tuple[str, QuestionType | None, dict[str, Any]]]) -> None:
        # In a thread: the event loop keeps the other questions' requests going meanwhile.
        changed = await asyncio.to_thread(_write, self.ws, chunk)
        self.summary.changed += changed  # added after the await: workers write concurrently

    def flush(self) -> None:
        """Write the results not written yet."""
        chunk, self._unwritten = self._unwritten, []
        if chunk:
            self.summary.changed += _write(self.ws, chunk)


@dataclass(frozen=True)
class _Typed:
    """What the store says of one question's typing: its type, and its typing record's."""

    question_type: str | None
    method: str | None
    model: str | None
    record_type: str | None
    answers: Any

    def by(self, method: str, model: str, answers: list[str]) -> bool:
        """True when this method and model typed the question and the record still holds (its
        type is the question's, its answers are the question's answers now)."""
        return (self.method, self.model) == (method, model) and self.record_type == self.question_type \
            and self.answers == answers


def _typing_state(ws: Workspace, ids: list[str]) -> dict[str, _Typed]:
    """Question id -> what its typing is now (only the few fields of the record that say whose
    it is, read in SQL); a question that is gone is not in it."""
    typing = col(Question.meta)["typing"]
    columns = (col(Question.id), col(Question.question_type), typing["method"].as_string(),
               typing["model"].as_string(), typing["llm"]["model"].as_string(), typing["type"].as_string(),
               typing["answers"])
    out: dict[str, _Typed] = {}
    with ws.engine.connect() as conn:
        for start in range(0, len(ids), _BATCH):
            q = sa_select(*columns).where(col(Question.id).in_(ids[start:start + _BATCH]))
            for qid, kind, method, model, llm_model, record_type, answers in conn.execute(q):
                # Records written before the model was named in them: the model verdict's own.
                out[qid] = _Typed(kind.value if isinstance(kind, QuestionType) else kind, method, model or llm_model,
                                  record_type, answers)
    return out


# ---------------------------------------------------------------------------------------------
# Measuring a method against labels


@dataclass(frozen=True)
class TypingScores:
    """Precision, recall and accuracy of a typing method against gold labels.

    ``confusion[(gold, predicted)]`` counts items; ``predicted`` may be ``undecided``. Precision
    of a class is over the items predicted as that class; recall over the items of that class
    (undecided items count as missed); accuracy over the decided items, with ``coverage`` the
    share decided. ``balanced_precision`` is the precision the same per-class rates would give
    with as many EQs as RQs (the paper's 100 + 100 sample), since the files' mix is not any
    benchmark's.
    """

    confusion: dict[tuple[str, str], int]

    @property
    def n(self) -> int:
        return sum(self.confusion.values())

    def _count(self, gold: str | None = None, predicted: str | None = None) -> int:
        return sum(v for (g, p), v in self.confusion.items()
                   if (gold is None or g == gold) and (predicted is None or p == predicted))

    def precision(self, kind: str) -> float:
        predicted = self._count(predicted=kind)
        return self._count(kind, kind) / predicted if predicted else float("nan")

    def recall(self, kind: str) -> float:
        gold = self._count(gold=kind)
        return self._count(kind, kind) / gold if gold else float("nan")

    @property
    def coverage(self) -> float:
        return 1 - self._count(predicted="undecided") / self.n if self.n else float("nan")

    @property
    def accuracy(self) -> float:
        decided = self.n - self._count(predicted="undecided")
        correct = sum(v for (g, p), v in self.confusion.items() if g == p)
        return correct / decided if decided else float("nan")

    def balanced_precision(self, kind: str) -> float:
        other = RQ.value if kind == EQ.value else EQ.value
        hit = self.recall(kind)
        gold_other = self._count(gold=other)
        false_rate = self._count(other, kind) / gold_other if gold_other else float("nan")
        return hit / (hit + false_rate) if hit + false_rate else float("nan")


def score_typing(gold: Sequence[str | QuestionType], predicted: Sequence[str | QuestionType | None]) -> TypingScores:
    """Compare predicted types (None: undecided) with gold types, item by item."""
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold labels but {len(predicted)} predictions")
    confusion: collections.Counter[tuple[str, str]] = collections.Counter()
    for g, p in zip(gold, predicted):
        confusion[(str(QuestionType(g).value), "undecided" if p is None else QuestionType(p).value)] += 1
    return TypingScores(dict(confusion))

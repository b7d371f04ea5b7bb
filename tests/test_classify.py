"""Question typing: the lexical rule, the structural filter, the LLM classifier and the combination.

The LLM classifier runs the real ``openai`` client against the loopback server of
``openai_server.py``, whose replies come from a rule written in this file (deterministic).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import nltk
import pytest
from conftest import shared_data_path
from openai_server import OpenAIServer, Scripted
from sqlmodel import select
from typer.testing import CliRunner

from tqaforge.cli import app
from tqaforge.errors import ConfigError
from tqaforge.generation.classify import (
    EXTENDED_STRUCTURAL_WORDS,
    PAPER_STRUCTURAL_WORDS,
    STRUCTURAL_WORDS,
    ClassifyOptions,
    LexicalVerdict,
    LLMVerdict,
    WordListCues,
    classify_questions,
    combine,
    cue_finder,
    lexical_type,
    nltk_tagger_status,
    score_typing,
    structural_words,
    typing_messages,
    validate_typing_reply,
)
from tqaforge.ingest import ImportOptions, import_paths
from tqaforge.llm import LLMSettings, Price
from tqaforge.llm.runner import StopReason
from tqaforge.schemas.enums import QuestionType
from tqaforge.schemas.records import LLMCall, Question
from tqaforge.store import Workspace
from tqaforge.tables.readers.datasets import read_freb_tqa
from tqaforge.tables.table import Table

EQ, RQ = QuestionType.EXTRACTION, QuestionType.REASONING
WORDS = WordListCues()
MEDALS = Table.build(
    ["nation", "gold", "silver", "prize"],
    [["Norway", "14", "14", "$1,305"], ["Germany", "12", "10", "$980"], ["Canada", "11", "8", "$1,002"]],
)


# --- the word list --------------------------------------------------------------------------


@pytest.mark.parametrize("question, words", [
    ("Which nation won the most gold medals?", ["most"]),
    ("Who scored fewer goals, Ann or Bob?", ["fewer"]),
    ("Which team had the least wins?", ["least"]),
    ("Was 2010 better or worse than 2009?", ["better", "worse"]),
    ("What is the highest mountain?", ["highest"]),
    ("Which city is larger, Oslo or Bergen?", ["larger"]),
    ("Which building is the biggest?", ["biggest"]),
    ("Which was released earlier?", ["earlier"]),
    ("Who is the heaviest wrestler?", ["heaviest"]),
    ("Which race was the greatest?", ["greatest"]),
    ("Who jumped farther than Jones?", ["farther"]),
    ("Which dish is saltier than the soup?", ["saltier"]),  # not in our list: -er before "than"
    ("Which is the northernmost town?", ["northernmost"]),
    ("Name the swankiest hotel.", ["swankiest"]),  # not in our adjective list: the -iest rule
    ("Which player scored more than 20 points?", ["more"]),
])
def test_word_list_finds_comparatives_and_superlatives(question, words):
    assert [c.word for c in WORDS(question)] == words


@pytest.mark.parametrize("question", [
    "What is the number of players?",  # -er nouns
    "Which driver won the contest in October?",
    "Who was the manager of the tower project?",
    "What interest did the forest earn?",  # -est nouns
    "Which priest served in Budapest?",
    "Other than Oslo, which city is listed?",  # "other than" is no comparative
    "What is almost always the answer?",
])
def test_word_list_ignores_look_alikes(question):
    assert WORDS(question) == ()


# --- the structural filter ------------------------------------------------------------------


def test_structural_words_follow_the_paper_plus_table_parts():
    assert set(PAPER_STRUCTURAL_WORDS) == {
        "first", "second", "third", "last", "top", "bottom", "before", "previous", "latter", "after",
        "next", "below", "above",
    }
    assert set(STRUCTURAL_WORDS) - set(PAPER_STRUCTURAL_WORDS) == {"row", "rows", "column", "columns"}
    assert structural_words("Who is listed below Romeo Bonzo?") == ("below",)
    assert structural_words("What is the name in the FIRST row of the table?") == ("first", "row")
    assert structural_words("Which column has the coordinates?") == ("column",)
    assert structural_words("How many seconds did it take?") == ()  # whole words only
    assert structural_words("Which team topped the table?") == ()
    assert structural_words("Who is listed before Wong?") == ("before",)
    assert structural_words("Who is listed before Wong?", EXTENDED_STRUCTURAL_WORDS) == ("listed", "before")


# --- the lexical rule -----------------------------------------------------------------------


def test_lexical_rule_follows_freb_tqa():
    v = lexical_type(MEDALS, "How many gold medals did Germany win?", ["12"], cues=WORDS)
    assert (v.question_type, v.rule) == (EQ, "answer_in_cell")
    assert [m.cell for m in v.matches] == [(1, 1)]
    # Normalised matching (tables.matching): "1305" is the cell "$1,305".
    v = lexical_type(MEDALS, "What prize did Norway get?", ["1305"], cues=WORDS)
    assert (v.question_type, v.matches[0].cell, v.matches[0].rule) == (EQ, (0, 3), "numeric")
    # Found in a cell, but a superlative signals aggregation.
    v = lexical_type(MEDALS, "Which nation won the most gold medals?", ["Norway"], cues=WORDS)
    assert (v.question_type, v.rule, [c.word for c in v.cues]) == (RQ, "comparative_words", ["most"])
    # Not in any cell: computed.
    v = lexical_type(MEDALS, "How many gold medals were won in all?", ["37"], cues=WORDS)
    assert (v.question_type, v.rule, v.missing) == (RQ, "answer_not_in_table", ("37",))
    # Every answer of a list must be a cell.
    assert lexical_type(MEDALS, "Name two nations.", ["Norway", "Spain"], cues=WORDS).question_type is RQ
    assert lexical_type(MEDALS, "Name two nations.", ["Norway", "Canada"], cues=WORDS).question_type is EQ
    # A header is not a cell; no answer, no verdict.
    assert lexical_type(MEDALS, "Which column holds gold?", ["gold"], cues=WORDS).rule == "answer_not_in_table"
    v = lexical_type(MEDALS, "Which nation won?", ["", "  "], cues=WORDS)
    assert (v.question_type, v.rule) == (None, "no_answer")
    assert v.evidence()["tagger"] == "wordlist"


# --- NLTK's tagger path ---------------------------------------------------------------------

# A few hand-tagged questions (Penn Treebank tags): enough for a real averaged-perceptron model
# to tag these words; NLTK's own model is not installed on this machine.
_TAGGED = [
    "Which/WDT nation/NN won/VBD the/DT most/JJS medals/NNS ?/.",
    "Who/WP is/VBZ taller/JJR ,/, Ann/NNP or/CC Bob/NNP ?/.",
    "What/WP is/VBZ the/DT name/NN of/IN the/DT player/NN ?/.",
    "Which/WDT city/NN has/VBZ the/DT largest/JJS population/NN ?/.",
    "How/WRB many/JJ goals/NNS did/VBD Norway/NNP score/VB ?/.",
    "Who/WP ran/VBD faster/RBR than/IN Bob/NNP ?/.",
    "What/WP is/VBZ the/DT number/NN of/IN the/DT driver/NN ?/.",
]


def _install_model(root: Path) -> None:
    """Train NLTK's PerceptronTagger on _TAGGED and store it where nltk.data.find looks."""
    from nltk.tag.perceptron import PerceptronTagger

    tagger = PerceptronTagger(load=False)
    tagger.train([[tuple(tok.rsplit("/", 1)) for tok in s.split()] for s in _TAGGED], nr_iter=10)
    where = root / "taggers" / "averaged_perceptron_tagger_eng"
    where.mkdir(parents=True)
    for obj, name in zip(tagger.encode_json_obj(), tagger.param_files("eng")):
        (where / name).write_text(json.dumps(obj), encoding="utf-8")


def test_nltk_tagger_is_used_when_its_model_is_installed(tmp_path, monkeypatch):
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path / "empty")])
    assert nltk_tagger_status()[0] is False
    assert cue_finder("auto").name == "wordlist"  # falls back, never downloads
    with pytest.raises(ConfigError, match="not installed"):
        cue_finder("nltk")

    _install_model(tmp_path / "nltk_data")
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path / "nltk_data")])
    available, where = nltk_tagger_status()
    assert available and "averaged_perceptron_tagger_eng" in where
    finder = cue_finder("auto")
    assert finder.name == "nltk"
    assert [(c.word, c.tag) for c in finder("Who is taller, Ann or Bob?")] == [("taller", "JJR")]
    assert [(c.word, c.tag) for c in finder("Who ran faster than Bob?")] == [("faster", "RBR")]
    v = lexical_type(MEDALS, "Which nation won the most medals?", ["Norway"], cues=finder)
    assert (v.question_type, v.tagger, v.evidence()["cues"]) == (RQ, "nltk", [["most", "JJS"]])
    v = lexical_type(MEDALS, "What is the name of the player?", ["Norway"], cues=finder)
    assert (v.question_type, v.tagger) == (EQ, "nltk")
    assert cue_finder("wordlist").name == "wordlist"


# --- the model's reply and the combination ---------------------------------------------------


def test_validate_typing_reply():
    assert validate_typing_reply({"cells": ["14"], "operations": [], "type": "extraction"}) == (EQ, (), ("14",))
    assert validate_typing_reply({"operations": ["Count"], "type": "Reasoning"}) == (RQ, ("count",), ())
    for bad, message in [
        ([1, 2], "JSON object"),
        ({"operations": []}, "needs"),
        ({"operations": "count", "type": "reasoning"}, "list of strings"),
        ({"operations": [], "type": "lookup"}, "must be"),
        ({"operations": ["sum"], "type": "extraction"}, "agree|extraction has no operations"),
        ({"operations": [], "type": "reasoning"}, "extraction has no operations"),
    ]:
        with pytest.raises(ValueError, match=message):
            validate_typing_reply(bad)


def test_combination_is_freb_tqas_rule():
    lex_eq = LexicalVerdict(EQ, "answer_in_cell")
    lex_rq = LexicalVerdict(RQ, "comparative_words")
    llm_eq = LLMVerdict(EQ, (), ())
    llm_rq = LLMVerdict(RQ, ("count",), ())
    assert combine(lex_eq, llm_eq)[0] is EQ
    assert combine(lex_eq, llm_rq) == (None, "undecided: lexical rule says extraction, model says reasoning")
    assert combine(lex_rq, None)[0] is RQ and combine(lex_rq, llm_eq)[0] is RQ
    assert combine(LexicalVerdict(None, "no_answer"), None)[0] is None
    with pytest.raises(ValueError):
        combine(lex_eq, None)


def test_score_typing():
    s = score_typing(
        ["extraction"] * 4 + ["reasoning"] * 6,
        [EQ, EQ, EQ, RQ, EQ, RQ, RQ, RQ, RQ, None],
    )
    assert s.n == 10 and s.coverage == 0.9
    assert s.precision("extraction") == 3 / 4 and s.recall("extraction") == 3 / 4
    assert s.precision("reasoning") == 4 / 5 and s.recall("reasoning") == 4 / 6
    assert s.accuracy == 7 / 9
    # 50/50 mix: EQ recall 0.75, RQs taken for EQ 1/6.
    assert math.isclose(s.balanced_precision("extraction"), 0.75 / (0.75 + 1 / 6))
    with pytest.raises(ValueError):
        score_typing(["extraction"], [])


# --- FREB-TQA's labelled folders -------------------------------------------------------------

_FREB_FILES = {
    "01_str/wtq_factoid_dev.jsonl": 205, "01_str/sqa_factoid_dev.jsonl": 157, "01_str/tat_factoid_dev.jsonl": 114,
    "02_rel/tat_nonfactoid_dev.jsonl": 539, "03_agg_com/wtq_nonfactoid_dev_no_shuffle_short_table.jsonl": 1470,
}


@pytest.mark.shared
def test_lexical_rule_precision_on_freb_tqa():
    """The lexical rule with the word list on FREB-TQA's labelled folders (2,485 questions).

    Measured (``benchmarks/question_typing.py``): EQ precision 0.868 (recall 0.912), RQ
    precision 0.979 (recall 0.967), accuracy 0.957; at a 50/50 mix, as in the paper's sample,
    EQ 0.965 and RQ 0.916. The paper's rule (exact match, NLTK tags) reached 0.752 (EQ) and
    0.834 (RQ) on 200 WTQ questions. The thresholds sit about one and a half points under the
    measured values: about 7 of the 500 predicted EQs or 30 of the 1,985 predicted RQs may move
    (a change to the matching tiers or the word list) before the test fails. SQA's "EQs" are
    first questions of dialogues, typed by position, not content, and 31 of them ask for a
    superlative ("the highest ratings"): most EQ misses are there.
    """
    finder = WordListCues()
    gold: list[str] = []
    predicted: list[Any] = []
    for name, n in _FREB_FILES.items():
        records = read_freb_tqa(shared_data_path("freb-tqa", *name.split("/"))).records
        assert len(records) == n
        for record in records:
            item = record.items[0]
            gold.append(item.subtype or "")
            predicted.append(lexical_type(record.table, item.question, item.answers, cues=finder).question_type)
    s = score_typing(gold, predicted)
    assert s.coverage == 1.0
    assert s.precision("extraction") >= 0.85
    assert s.precision("reasoning") >= 0.965
    assert s.balanced_precision("extraction") >= 0.95
    assert s.balanced_precision("reasoning") >= 0.90
    assert s.recall("extraction") >= 0.89 and s.recall("reasoning") >= 0.955
    assert s.accuracy >= 0.945


def _structural_labels() -> list[tuple[str, str, str]]:
    path = Path(__file__).parent / "data" / "freb_structural_labels.tsv"
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#") or line.startswith("sample\t"):
            continue
        sample, _, _, label, question = line.split("\t")
        rows.append((sample, label, question))
    return rows


def test_structural_filter_precision_on_hand_labels():
    """The structural filter against our hand labels of FREB-TQA questions.

    ``tests/data/freb_structural_labels.tsv`` labels every question of the FREB-TQA files that
    the widest list flags (296) and a random 200 of the 2,189 it does not. Measured: the
    default list flags 202 with precision 0.114 for *layout* questions (the answer changes
    when rows are shuffled or the table transposed: "listed below X", "top of the table", "the
    gold column") and 0.272 for layout or *sequence* questions ("who won next after X"); it
    flags all 23 layout questions labelled, and no layout question is in the unflagged sample.
    The paper's list alone flags 194 with precision 0.077 and misses the 8 that name a row or
    a column; the widest list adds "listed", "order", ... and flags 296 at precision 0.078.
    The filter is for recall: a flagged question only leaves the structure perturbations,
    while a missed one gives a wrong gold answer after a shuffle. Most flags are temporal
    ("before 1960") or rank ("first place") uses of the paper's words.
    """
    rows = _structural_labels()
    assert len(rows) == 496
    flagged_rows = [r for r in rows if r[0] == "flagged"]
    assert all(structural_words(q, EXTENDED_STRUCTURAL_WORDS) for _, _, q in flagged_rows)
    assert not any(structural_words(q, EXTENDED_STRUCTURAL_WORDS) for s, _, q in rows if s == "unflagged")

    def precision(words: tuple[str, ...], positive: set[str]) -> tuple[int, float]:
        flagged = [label for _, label, q in flagged_rows if structural_words(q, words)]
        return len(flagged), sum(label in positive for label in flagged) / len(flagged)

    layout = {"layout"}
    n_default, p_default = precision(STRUCTURAL_WORDS, layout)
    n_paper, p_paper = precision(PAPER_STRUCTURAL_WORDS, layout)
    assert (n_default, n_paper) == (202, 194)
    assert p_default >= 0.11 and p_default > p_paper
    assert precision(STRUCTURAL_WORDS, {"layout", "sequence"})[1] >= 0.27
    # Recall for layout questions: every labelled one is flagged by the default list.
    assert all(structural_words(q) for _, label, q in rows if label == "layout")
    assert sum(label == "layout" for _, label, _ in rows) == 23


# --- stored questions, the LLM classifier, the CLI ------------------------------------------

_ITEMS = [
    # question, answers: lexical EQ, lexical RQ (comparative), lexical RQ (not in table), no answer
    ("What prize did Norway get?", ["1305"]),
    ("How many silver medals did Canada win?", ["8"]),
    ("Which nation won the most gold medals?", ["Norway"]),
    ("How many gold medals were won in all?", ["37"]),
    ("How many nations won more than 10 gold medals?", ["3"]),
    ("Which nation is listed in the first row?", ["Norway"]),
]


def _import(ws: Workspace, tmp_path: Path, items: list[tuple[str, list[str]]] = _ITEMS) -> None:
    path = tmp_path / "mini_factoid_dev.jsonl"
    table = {"header": list(MEDALS.header), "rows": [list(r) for r in MEDALS.rows]}
    with path.open("w", encoding="utf-8") as fh:
        for i, (question, answers) in enumerate(items):
            fh.write(json.dumps({"id": f"q{i}", "question": question, "answers": answers, "table": table}) + "\n")
    summary = import_paths(ws, [path], ImportOptions(format="freb-tqa"))
    assert summary.total("questions_new") == len(items), summary


def _questions(ws: Workspace) -> dict[str, Question]:
    with ws.session() as s:
        return {q.text: q for q in s.exec(select(Question))}


def test_classify_stored_questions_lexically(workspace, tmp_path):
    _import(workspace, tmp_path)
    seen: list[int] = []
    summary = classify_questions(workspace, ClassifyOptions(method="lexical", tagger="wordlist"),
                                 on_progress=lambda n, total, note="": seen.append(n))
    assert (summary.questions, summary.total, summary.tagger, seen[-1]) == (6, 6, "wordlist", 6)
    assert summary.types == {"extraction": 3, "reasoning": 3}
    qs = _questions(workspace)
    norway = qs["What prize did Norway get?"]
    assert norway.question_type == "extraction"
    typing = norway.meta["typing"]
    assert typing["method"] == "lexical" and typing["answers"] == ["1305"]
    assert typing["lexical"]["cells"] == [[0, 3, "numeric"]] and typing["lexical"]["tagger"] == "wordlist"
    assert qs["Which nation won the most gold medals?"].question_type == "reasoning"
    assert qs["How many gold medals were won in all?"].meta["typing"]["lexical"]["rule"] == "answer_not_in_table"
    assert qs["Which nation is listed in the first row?"].meta["typing"]["structural_words"] == ["first", "row"]
    assert summary.structural == 1
    # Idempotent: a second run changes nothing.
    assert classify_questions(workspace, ClassifyOptions(method="lexical", tagger="wordlist")).changed == 0
    # People's settled type is never overwritten (issue 24): ana and ben type the Norway question
    # as reasoning and adjudication settles it; the lexical rule would say extraction.
    from tqaforge.annotation.adjudication import adjudicate
    from tqaforge.labels import record_annotation

    with workspace.session() as s:
        for who in ("ana", "ben"):
            record_annotation(s, kind="question_typing", target_type="question", target_id=norway.id, annotator=who,
                              label={"type": "reasoning"})
    adjudicate(workspace, kinds=["question_typing"])
    settled = _questions(workspace)["What prize did Norway get?"]
    assert settled.question_type == "reasoning" and settled.meta["typing"]["method"] == "human"
    summary = classify_questions(workspace, ClassifyOptions(method="lexical", tagger="wordlist"))
    assert (summary.human, summary.questions) == (1, 5)
    assert "1 typed by people (their settled label): left alone" in summary.lines()
    assert _questions(workspace)["What prize did Norway get?"].question_type == "reasoning"
    # Control: the same rule with no people's labels does change a type (the test could see it).
    with workspace.session() as s:
        q = s.get(Question, qs["Which nation won the most gold medals?"].id)
        q.question_type = "extraction"  # a wrong type, not settled by people
        s.add(q)
    assert classify_questions(workspace, ClassifyOptions(method="lexical", tagger="wordlist")).changed == 1
    assert _questions(workspace)["Which nation won the most gold medals?"].question_type == "reasoning"


def _question_of(body: dict) -> str:
    match = re.search(r"^Question: (.*)$", body["messages"][0]["content"], re.MULTILINE)
    assert match, body
    return match.group(1)


def scripted_typist(body: dict) -> Scripted | str:
    """The test's model: "how many ... in all", "most" and "more" questions need operations;
    the silver question is first answered with invalid JSON, and the prize question always with
    an inconsistent object, so one is repaired and one stays invalid."""
    question = _question_of(body)
    repair = len(body["messages"]) > 1
    if question.startswith("How many silver") and not repair:
        return "Sure! The type is extraction."
    if question.startswith("What prize"):
        return json.dumps({"cells": ["$1,305"], "operations": ["sum"], "type": "extraction"})
    if re.search(r"\b(most|more|in all)\b", question):
        return json.dumps({"cells": ["14", "12", "11"], "operations": ["compare"], "type": "reasoning"})
    if "first row" in question:
        return "```json\n" + json.dumps({"cells": ["Norway"], "operations": [], "type": "extraction"}) + "\n```"
    return json.dumps({"cells": ["8"], "operations": [], "type": "extraction"})


def _settings(server: OpenAIServer, **kw: Any) -> LLMSettings:
    return LLMSettings(model="typist", base_url=server.url, api_key="test-key", backoff_s=0.01, **kw)


def test_llm_classifier_end_to_end(workspace, tmp_path):
    _import(workspace, tmp_path)
    imported = {text: q.question_type for text, q in _questions(workspace).items()}  # FREB-TQA's own label
    with OpenAIServer(scripted_typist) as server:
        summary = classify_questions(workspace, ClassifyOptions(method="llm"), _settings(server))
        assert (summary.questions, summary.invalid, summary.model) == (5, 1, "typist")
        # 6 questions + 1 repair of the silver question + 1 repair of the prize question.
        assert len(server.requests) == 8
        assert summary.paid_calls == 8
        body = server.requests[0]
        assert body["model"] == "typist" and body["temperature"] == 0 and body["seed"] == 0
        assert "| nation | gold | silver | prize |" in body["messages"][0]["content"]
        assert "1305" not in body["messages"][0]["content"].split("Question:")[1]  # the answer is not shown
        qs = _questions(workspace)
        silver = qs["How many silver medals did Canada win?"]
        assert silver.question_type == "extraction"
        llm = silver.meta["typing"]["llm"]
        assert llm["model"] == "typist" and len(llm["call_ids"]) == 2  # the first reply was repaired
        with workspace.session() as s:
            stored = {c.id: c for c in s.exec(select(LLMCall))}
        assert stored[llm["call_ids"][0]].text == "Sure! The type is extraction."
        assert stored[llm["call_ids"][1]].purpose == "classify_question"
        assert qs["Which nation won the most gold medals?"].question_type == "reasoning"
        assert qs["Which nation won the most gold medals?"].meta["typing"]["llm"]["operations"] == ["compare"]
        assert qs["Which nation is listed in the first row?"].question_type == "extraction"  # fenced JSON
        assert qs["What prize did Norway get?"].question_type == imported["What prize did Norway get?"]  # invalid twice: left as it was
        assert "typing" not in (qs["What prize did Norway get?"].meta or {})

        # The same run again: every reply comes from the store, nothing is sent.
        again = classify_questions(workspace, ClassifyOptions(method="llm"), _settings(server))
        assert len(server.requests) == 8 and again.paid_calls == 0 and again.changed == 0
        # The prize question's two calls are stored as ok, so they are cached too: still invalid.
        assert again.invalid == 1

        # Combined: only lexical EQs go to the model; lexical RQs are decided without it.
        sent = len(server.requests)
        combined = classify_questions(workspace, ClassifyOptions(method="combined", tagger="wordlist"), _settings(server))
        assert len(server.requests) == sent  # the EQs' requests are the llm run's, cached
        assert (combined.cached_calls, combined.paid_calls, combined.invalid) == (5, 0, 1)  # silver 2, first row 1, prize 2
    qs = _questions(workspace)
    assert qs["How many silver medals did Canada win?"].question_type == "extraction"
    assert qs["How many silver medals did Canada win?"].meta["typing"]["decision"] == "extraction: lexical rule and model agree"
    assert qs["Which nation won the most gold medals?"].meta["typing"]["llm"] is None
    assert qs["Which nation won the most gold medals?"].question_type == "reasoning"
    assert qs["How many gold medals were won in all?"].question_type == "reasoning"


def test_combined_disagreement_is_undecided(workspace, tmp_path):
    # The lexical rule finds "8" in a cell and no comparative word; the model says "count".
    _import(workspace, tmp_path, [("How many silver medals did Canada win?", ["8"])])
    reply = json.dumps({"cells": ["8"], "operations": ["count"], "type": "reasoning"})
    with OpenAIServer(lambda body: reply) as server:
        summary = classify_questions(workspace, ClassifyOptions(method="combined", tagger="wordlist"), _settings(server))
    assert summary.types == {"undecided": 1}
    q = _questions(workspace)["How many silver medals did Canada win?"]
    assert q.question_type is None
    assert q.meta["typing"]["decision"] == "undecided: lexical rule says extraction, model says reasoning"
    assert q.meta["typing"]["lexical"]["type"] == "extraction" and q.meta["typing"]["llm"]["type"] == "reasoning"


def test_budget_stops_before_the_call(sqlite_workspace, tmp_path):
    _import(sqlite_workspace, tmp_path)
    imported = {text: q.question_type for text, q in _questions(sqlite_workspace).items()}
    with OpenAIServer(scripted_typist) as server:
        st = _settings(server, prices={"typist": Price(input=1000.0, output=1000.0)}, max_cost=0.01)
        summary = classify_questions(sqlite_workspace, ClassifyOptions(method="llm"), st)
        assert server.requests == []
    # The stop is the summary's (as for question rounds and answers), with the budget's advice.
    assert summary.stop_reason is StopReason.BUDGET and summary.failed and summary.questions == 0
    assert "larger budget" in (summary.advice or "") and "budget" in (summary.stopped or "").lower()
    assert {text: q.question_type for text, q in _questions(sqlite_workspace).items()} == imported  # nothing typed


def test_llm_methods_need_a_model(sqlite_workspace):
    with pytest.raises(ConfigError, match="needs a model"):
        classify_questions(sqlite_workspace, ClassifyOptions(method="llm"))
    with pytest.raises(ConfigError, match="unknown typing method"):
        classify_questions(sqlite_workspace, ClassifyOptions(method="vote"))  # type: ignore[arg-type]


def test_typing_prompt_is_the_template():
    messages = typing_messages(MEDALS, "Who won?")
    assert len(messages) == 1 and messages[0]["role"] == "user"
    text = messages[0]["content"]
    assert "Question: Who won?" in text and "(markdown)" in text
    assert '{"cells": [' in text  # doubled braces of the template are rendered as JSON


runner = CliRunner(env={"COLUMNS": "200"})


def test_cli_classify(tmp_path, monkeypatch):
    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "TQAFORGE_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)
    ws_dir = tmp_path / "ws"
    assert runner.invoke(app, ["init", str(ws_dir)]).exit_code == 0
    from tqaforge.store import open_workspace

    ws = open_workspace(ws_dir)
    _import(ws, tmp_path)
    ws.close()
    result = runner.invoke(app, ["-w", str(ws_dir), "questions", "classify", "--tagger", "wordlist"])
    assert result.exit_code == 0, result.output
    assert "6 questions typed (comparative words by wordlist): 3 extraction, 3 reasoning, 0 undecided" in result.output
    assert "answer_not_in_table" in result.output and "1 with structural words" in result.output

    result = runner.invoke(app, ["-w", str(ws_dir), "questions", "classify", "--method", "llm"])
    assert result.exit_code == 1 and "no model set" in result.output and "Traceback" not in result.output
    result = runner.invoke(app, ["-w", str(ws_dir), "questions", "classify", "--method", "guess"])
    assert result.exit_code != 0 and "--method must be one of" in result.output

    with OpenAIServer(scripted_typist) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        result = runner.invoke(app, ["-w", str(ws_dir), "questions", "classify", "--method", "combined",
                                     "--tagger", "wordlist", "--model", "typist"])
        assert result.exit_code == 0, result.output
        # The three lexical EQs go to the model: silver (repaired), first row, prize (invalid twice).
        assert len(server.requests) == 5
    assert "5 questions typed (comparative words by wordlist, model typist): 2 extraction, 3 reasoning" in result.output
    assert "1 with an invalid model reply" in result.output and "cost $0.0000: 5 paid calls" in result.output


# --- question typing as a step of the runner -------------------------------------------------


def _typings(ws: Workspace) -> dict[str, tuple[str | None, dict | None]]:
    return {text: (q.question_type, (q.meta or {}).get("typing")) for text, q in _questions(ws).items()}


def test_typing_with_two_workers_stores_what_one_worker_does(tmp_path):
    """The step runner's workers split the questions; the records are those of one worker, each
    question asked once, and a second run finds everything typed and asks nothing."""
    from tqaforge.llm.step import RunnerOptions
    from tqaforge.store import init_workspace

    stored = {}
    for workers in (1, 2):
        ws = init_workspace(tmp_path / f"ws{workers}", name=f"ws{workers}")
        (tmp_path / f"in{workers}").mkdir()
        _import(ws, tmp_path / f"in{workers}")
        with OpenAIServer(scripted_typist) as server:
            runner = RunnerOptions(workers=workers, window=2, chunk=2)
            summary = classify_questions(ws, ClassifyOptions(method="combined", tagger="wordlist"), _settings(server),
                                         runner=runner)
            assert summary.calls.workers == workers and summary.calls.paid == 5 == server.total_paid
            assert (summary.questions, summary.invalid, summary.already) == (5, 1, 0)
            assert max(server.paid.values()) == 1  # no request twice
            again = classify_questions(ws, ClassifyOptions(method="combined", tagger="wordlist"), _settings(server),
                                       runner=runner)
            # Only the question whose reply stayed invalid is left: asked again, from the cache.
            assert (again.already, again.questions, again.invalid, again.paid_calls, again.cached_calls) == (5, 0, 1, 0, 2)
            assert server.total_paid == 5
        stored[workers] = _typings(ws)
        ws.close()
    assert stored[1] == stored[2]
    assert stored[1]["How many silver medals did Canada win?"][1]["model"] == "typist"


def _answer_offline(requests: Path, output: Path, reply: Any) -> int:
    """What a local inference tool (``vllm run-batch``) writes for a batch file: one reply a line."""
    lines = []
    for n, raw in enumerate(requests.read_text().splitlines()):
        line = json.loads(raw)
        text = reply(line["body"])
        body = {"id": f"c{n}", "object": "chat.completion", "created": 0, "model": line["body"]["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}}
        lines.append(json.dumps({"id": f"o{n}", "custom_id": line["custom_id"],
                                 "response": {"status_code": 200, "body": body}, "error": None}))
    output.write_text("".join(line + "\n" for line in lines))
    return len(lines)


def test_typing_through_an_offline_batch_then_online_pays_nothing_twice(sqlite_workspace, tmp_path):
    """--transport offline: no request reaches the endpoint, every question's request goes into
    one batch file and nothing is typed; once its output is imported, the run online finds the
    replies in the store and only the repairs are sent."""
    from tqaforge.llm.batches import import_offline
    from tqaforge.llm.step import RunnerOptions

    _import(sqlite_workspace, tmp_path)
    before = _typings(sqlite_workspace)
    requests = tmp_path / "requests.jsonl"
    with OpenAIServer(scripted_typist) as server:
        first = classify_questions(sqlite_workspace, ClassifyOptions(method="llm"), _settings(server),
                                   runner=RunnerOptions(transport="offline", offline_file=requests))
        assert server.requests == []
        assert first.calls.deferred == 6 and first.calls.waiting == 6 and first.questions == 0 and not first.failed
        assert _typings(sqlite_workspace) == before  # nothing typed yet
        sent = [json.loads(line)["body"] for line in requests.read_text().splitlines()]
        assert sorted(_question_of(b) for b in sent) == sorted(text for text, _ in _ITEMS)
        assert {b["model"] for b in sent} == {"typist"} and any(str(requests) in line for line in first.lines())

        assert _answer_offline(requests, tmp_path / "out.jsonl", scripted_typist) == 6
        assert import_offline(sqlite_workspace, tmp_path / "out.jsonl").ok == 6
        second = classify_questions(sqlite_workspace, ClassifyOptions(method="llm"), _settings(server))
        # The six replies from the store; the two invalid ones get their repair online.
        assert (second.cached_calls, second.paid_calls, len(server.requests)) == (6, 2, 2)
        assert all(len(body["messages"]) > 1 for body in server.requests)  # only repairs were sent
        assert (second.questions, second.invalid, second.already) == (5, 1, 0)
    assert _typings(sqlite_workspace)["How many silver medals did Canada win?"][0] == "extraction"


def test_a_stopped_typing_run_resumes_where_it_stopped(sqlite_workspace, tmp_path):
    """The budget stops a run part-way: the questions typed before the stop are stored, and the
    next run (a larger budget) types only the rest, paying for no question twice."""
    _import(sqlite_workspace, tmp_path)
    from tqaforge.llm.step import RunnerOptions

    with OpenAIServer(scripted_typist) as server:
        # A request's worst case is $0.40 (max_tokens 400 at $1000 per million output tokens), a reply
        # costs about $0.02: the budget lets a few requests through, one at a time.
        st = _settings(server, prices={"typist": Price(input=0.0, output=1000.0)}, max_cost=0.45)
        first = classify_questions(sqlite_workspace, ClassifyOptions(method="llm"), st, runner=RunnerOptions(window=1))
        assert first.stop_reason is StopReason.BUDGET and 0 < first.questions < 5, first.lines()
        typed = {t for t, (_, rec) in _typings(sqlite_workspace).items() if rec and rec.get("model") == "typist"}
        assert len(typed) == first.questions  # what the runner finished before the stop is stored
        paid = server.total_paid
        rest = classify_questions(sqlite_workspace, ClassifyOptions(method="llm"), _settings(server))
        assert rest.stopped is None and rest.already == first.questions
        assert rest.questions + first.questions == 5 and rest.invalid == 1
    assert max(server.paid.values()) == 1 and server.total_paid == 8 > paid  # every request paid once

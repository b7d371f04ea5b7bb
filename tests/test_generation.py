"""Question generation: seed corpus, rounds, dedup, review, routing and verification, resume.

The real ``openai`` client talks to the loopback server of ``tests/openai_server.py``, whose
scripted replies are deterministic functions of the prompt (so two runs can be compared), and
which counts every request it receives and every reply it delivers ("paid").
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import wait_for
from openai_server import OpenAIServer, Scripted
from sqlalchemy import func
from sqlmodel import select
from typer.testing import CliRunner

from tqaforge.annotation.review import ReviewError, review_question, review_queue, review_task_id
from tqaforge.cli import app
from tqaforge.errors import ConfigError, TaxonomyError
from tqaforge.generation import corpus as seed_corpus
from tqaforge.generation.dedup import DedupIndex, clean_question, lcs_length, rouge_l, tokens
from tqaforge.generation.questions import (
    GenerationOptions,
    generate_questions,
    load_generation_options,
    parse_question_list,
    parse_verdict,
)
from tqaforge.ingest import import_paths
from tqaforge.llm import LLMSettings, Price
from tqaforge.people import AnnotatorError
from tqaforge.schemas.records import (
    Annotation,
    AnnotationTask,
    GenerationRound,
    GenerationStep,
    LLMCall,
    Question,
    TableRecord,
)
from tqaforge.store import Workspace, init_workspace, open_workspace

REPO = Path(__file__).resolve().parents[1]
TABLES = REPO / "data" / "tables"
MODEL = "gen-model"
runner = CliRunner(env={"COLUMNS": "200"})

# Made-up words: random questions built from them share almost no tokens, so the scripted
# model's questions are never ROUGE-L duplicates of each other unless a test makes them so.
_SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "xe", "zu", "bi", "do", "fe"]
WORDS = sorted({a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in _SYLLABLES})


# --- the scripted model -----------------------------------------------------------------------


def _rng(body: dict) -> random.Random:
    key = json.dumps([body["messages"], body.get("seed")], sort_keys=True)
    return random.Random(int(hashlib.sha256(key.encode()).hexdigest(), 16))


def prompt_of(body: dict) -> str:
    return body["messages"][0]["content"]


def is_verification(body: dict) -> bool:
    return prompt_of(body).startswith("You check questions")


def shown_seeds(prompt: str) -> list[str]:
    block = prompt.split("not the wording):\n", 1)[1].split("\n\n", 1)[0]
    return [line[2:] for line in block.splitlines()]


def asked_count(prompt: str) -> int:
    return int(re.search(r"Write (\d+) new", prompt).group(1))


def random_questions(body: dict) -> list[str]:
    rng = _rng(body)
    return [" ".join(rng.sample(WORDS, 8)).capitalize() + "?" for _ in range(asked_count(prompt_of(body)))]


def verdict(body: dict) -> dict[str, Any]:
    rng = _rng(body)
    return {
        "answerable": rng.random() > 0.15,
        "matches_subtype": rng.random() > 0.2,
        "unambiguous": rng.random() > 0.1,
        "reasons": "scripted judgement " + str(rng.randrange(1000)),
    }


def model_reply(body: dict) -> str:
    """A well-behaved model: a JSON list of distinct questions, a JSON verdict."""
    if is_verification(body):
        return json.dumps(verdict(body))
    return json.dumps(random_questions(body))


# --- helpers --------------------------------------------------------------------------------


def import_tables(ws: Workspace, n: int | None = None) -> list[str]:
    files = sorted(TABLES.iterdir())[: n or None]
    summary = import_paths(ws, files)
    assert not summary.failed
    with ws.session() as s:
        return sorted(s.exec(select(TableRecord.id)).all())


def llm_settings(server: OpenAIServer, **kw: Any) -> LLMSettings:
    kw.setdefault("backoff_s", 0.01)
    kw.setdefault("backoff_max_s", 0.05)
    return LLMSettings(model=MODEL, base_url=server.url, api_key="k", **kw)


def options(**kw: Any) -> GenerationOptions:
    kw.setdefault("subtypes", ("Counting",))
    kw.setdefault("per_round", 3)
    return GenerationOptions(**kw)


def all_rows(ws: Workspace, model: type) -> list[Any]:
    with ws.session() as s:
        return list(s.exec(select(model).order_by(model.id)).all())


def generated(ws: Workspace) -> list[Question]:
    with ws.session() as s:
        return list(s.exec(select(Question).where(Question.origin == "llm").order_by(Question.id)).all())


def assert_consistent(ws: Workspace) -> None:
    """Every step's questions are stored, every generated question belongs to a stored step,
    and every call id a step or question names is a stored call."""
    steps = {st.id: st for st in all_rows(ws, GenerationStep)}
    questions = {q.id: q for q in generated(ws)}
    calls = {c.id for c in all_rows(ws, LLMCall)}
    for st in steps.values():
        for qid in st.question_ids or []:
            assert qid in questions and questions[qid].lineage["step"] == st.id
        assert set(st.llm_call_ids or []) <= calls
    for q in questions.values():
        assert q.lineage["step"] in steps and q.id in steps[q.lineage["step"]].question_ids
        assert set(q.lineage["llm_call_ids"]) <= calls
        assert set(q.lineage.get("verification_call_ids", [])) <= calls


# --- dedup ----------------------------------------------------------------------------------


def test_rouge_l_is_the_lcs_f_measure():
    a = tokens("How many teams scored more than 10 goals?")
    b = tokens("How many teams scored fewer than 10 goals?")
    assert lcs_length(a, b) == 7
    assert rouge_l(a, b) == pytest.approx(2 * (7 / 8) * (7 / 8) / (7 / 8 + 7 / 8))
    # Unequal lengths: P = 3/3, R = 3/6.
    assert rouge_l(tokens("a b c"), tokens("a x b y c z")) == pytest.approx(2 * 1 * 0.5 / 1.5)
    assert rouge_l(tokens("a b c"), tokens("c b a")) == pytest.approx(1 / 3)
    assert rouge_l((), tokens("a")) == 0.0 and rouge_l(tokens("a"), tokens("b")) == 0.0
    assert rouge_l(a, a) == 1.0


def _lcs_reference(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    """The textbook dynamic programme, the reference for rapidfuzz's LCS."""
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a, 1):
        for j, y in enumerate(b, 1):
            table[i][j] = table[i - 1][j - 1] + 1 if x == y else max(table[i - 1][j], table[i][j - 1])
    return table[-1][-1]


def test_lcs_length_equals_the_dynamic_programme():
    """rapidfuzz's LCS (compared by token hash) against the plain dynamic programme: random token
    sequences with repeats, one-character tokens (compared by code point), long and empty ones."""
    rng = random.Random(26)
    vocab = ["a", "b", "7", "é", "ab", "ba", "the", "total", "2019", "x" * 40, "ß", "\u4e2d\u6587"]
    for _ in range(2000):
        a = tuple(rng.choice(vocab) for _ in range(rng.randint(0, 30)))
        b = tuple(rng.choice(vocab) for _ in range(rng.randint(0, 30)))
        assert lcs_length(a, b) == _lcs_reference(a, b), (a, b)
    long_a = tuple(rng.choice(vocab) for _ in range(300))
    long_b = tuple(rng.choice(vocab) for _ in range(200))
    assert lcs_length(long_a, long_b) == _lcs_reference(long_a, long_b)


def test_clean_question_and_tokens():
    assert clean_question('  1.  "What is the   total?"  ') == "What is the total?"
    assert clean_question("Q3: Which team won?") == "Which team won?"
    assert clean_question("- Which team won?") == "Which team won?"
    assert clean_question("2015 was the best year?") == "2015 was the best year?"  # a number, not a marker
    assert tokens("What's the TOTAL, in 2015?") == ("what", "s", "the", "total", "in", "2015")


def test_dedup_index_exact_then_rouge():
    index = DedupIndex(threshold=0.7)
    index.add("q1", "How many teams scored more than 10 goals?")
    index.add("q2", "Which player has the most assists in the league?")
    exact = index.find("how many TEAMS scored more than 10 goals")
    assert (exact.kind, exact.of, exact.score) == ("exact", "q1", 1.0)
    near = index.find("How many teams scored fewer than 10 goals?")
    assert near.kind == "rouge" and near.of == "q1" and near.score == pytest.approx(0.875)
    assert index.find("What is the average attendance of home games?") is None
    strict = DedupIndex(threshold=0.9)
    strict.add("q1", "How many teams scored more than 10 goals?")
    assert strict.find("How many teams scored fewer than 10 goals?") is None


def test_parse_question_list_and_verdict_shapes():
    assert parse_question_list(["1. A?", " B? ", "A?"], 5) == ["A?", "B?"]
    assert parse_question_list({"questions": [{"question": "C?"}]}, 5) == ["C?"]
    assert parse_question_list(["a?", "b?", "c?"], 2) == ["a?", "b?"]
    for bad, message in (({"q": []}, "without"), ("text", "got str"), ([1], "item 1"), ([" "], "no questions")):
        with pytest.raises(ValueError, match=message):
            parse_question_list(bad, 5)
    v = parse_verdict({"answerable": "yes", "matches_subtype": True, "unambiguous": False, "reasons": "r"})
    assert (v.answerable, v.accepted) == (True, False)
    with pytest.raises(ValueError, match="unambiguous"):
        parse_verdict({"answerable": True, "matches_subtype": True, "reasons": "r"})
    with pytest.raises(ValueError, match="true or false"):
        parse_verdict({"answerable": "maybe", "matches_subtype": True, "unambiguous": True, "reasons": "r"})


# --- seed corpus ----------------------------------------------------------------------------


def test_workspace_corpus_is_created_edited_and_merged(workspace, tmp_path):
    path = seed_corpus.corpus_path(workspace)
    assert not path.exists()
    entries = seed_corpus.seed_entries(workspace, "Counting")
    assert path.exists()  # first use copies the built-in corpus of the taxonomy
    assert path.read_text() == (REPO / "tqaforge" / "generation" / "seed_corpora" / "tablebench.toml").read_text()
    assert entries and all(e.source == "corpus" for e in entries)

    cat = seed_corpus.add_seed(workspace, "Counting", "How many rows list a value above 100?")
    assert cat.seeds[-1] == "How many rows list a value above 100?"
    again = seed_corpus.add_seed(workspace, "Counting", "How many rows list a value above 100?")
    assert again.seeds == cat.seeds  # adding a present seed changes nothing
    cat = seed_corpus.add_seed(workspace, "Counting", definition="Counting rows that satisfy a condition.")
    assert cat.definition == "Counting rows that satisfy a condition."
    with pytest.raises(TaxonomyError, match="Countin"):
        seed_corpus.add_seed(workspace, "Countin", "x?")

    other = tmp_path / "more.toml"
    other.write_text(
        'taxonomy = "tablebench"\n[[category]]\ntype = "NumericalReasoning"\nsubtype = "Counting"\n'
        'definition = "Another definition."\nseeds = ["How many rows list a value above 100?", "How many teams are there?"]\n'
    )
    result = seed_corpus.import_seeds(workspace, other)
    assert (result.seeds_added, result.seeds_present, result.definitions_kept) == (1, 1, ("Counting",))
    assert seed_corpus.load_corpus_file(workspace).category("Counting").definition == "Counting rows that satisfy a condition."
    result = seed_corpus.import_seeds(workspace, other, replace_definitions=True)
    assert (result.seeds_added, result.definitions_replaced) == (0, ("Counting",))
    corpus = seed_corpus.load_corpus_file(workspace)
    assert corpus.category("Counting").seeds[-2:] == ("How many rows list a value above 100?", "How many teams are there?")
    assert corpus.subtypes == workspace.config.taxonomy().subtypes  # every other category kept, in order


def test_custom_taxonomy_corpus_starts_empty(tmp_path, monkeypatch):
    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    root = tmp_path / "custom"
    root.mkdir()
    (root / "tqaforge.toml").write_text(
        '[workspace]\nname = "c"\ntaxonomy = "mine"\n[[taxonomy.category]]\ntype = "Lookup"\nsubtype = "SingleCell"\n'
    )
    ws = init_workspace(root)  # a hand-written config: only init creates the database
    try:
        assert seed_corpus.load_corpus_file(ws).categories == ()
        with pytest.raises(ConfigError, match="definition"):
            seed_corpus.add_seed(ws, "SingleCell", "What is in row 2?")
        seed_corpus.add_seed(ws, "SingleCell", "What is in row 2?", definition="One cell is looked up.")
        assert seed_corpus.load_corpus_file(ws).category("SingleCell").seeds == ("What is in row 2?",)
    finally:
        ws.close()


# --- review ---------------------------------------------------------------------------------


def _question(ws: Workspace, table_id: str, text: str, subtype: str = "Counting", status: str = "proposed") -> Question:
    q = Question(id=Question.make_id(table_id, text, subtype), table_id=table_id, text=text, subtype=subtype,
                 qtype="NumericalReasoning", taxonomy="tablebench", status=status, origin="human")
    with ws.session() as s:
        s.add(q)
    return q


def test_review_decisions_are_annotations_and_statuses(workspace):
    (tid,) = import_tables(workspace, 1)
    q1 = _question(workspace, tid, "How many rows are there?")
    q2 = _question(workspace, tid, "How many columns hold numbers?")
    q3 = _question(workspace, tid, "How many rows mention 2011?")

    with pytest.raises(AnnotatorError, match="unknown annotator 'ana'; known: none yet"):
        review_question(workspace, q1.id[:8], "accept", annotator="ana")
    r = review_question(workspace, q1.id[:8], "accept", annotator="ana", new=True)
    assert (r.previous_status, r.question.status, r.recorded) == ("proposed", "accepted", True)
    assert review_question(workspace, q1.id, "accept", annotator="ana").recorded is False  # repeat: no-op
    with pytest.raises(ReviewError, match="reason"):
        review_question(workspace, q1.id, "reject", annotator="ben", new=True)
    r = review_question(workspace, q1.id, "reject", annotator="ben", reason="the table has no such column", new=True)
    # Not the last command: the rule over both reviews (1 accept, 1 reject) puts it in the queue.
    assert (r.question.status, r.adjudication) == ("proposed", "open")
    r = review_question(workspace, q1.id, "accept", annotator="ben")  # ben changes his mind
    assert r.recorded and (r.question.status, r.adjudication) == ("accepted", "resolved")

    r = review_question(workspace, q2.id, "edit", annotator="ana", text="  How many columns hold only numbers? ")
    assert r.question.id == q2.id and r.question.text == "How many columns hold only numbers?"
    assert r.question.status == "accepted"
    assert r.question.lineage["edits"][0]["previous_text"] == "How many columns hold numbers?"
    with pytest.raises(ReviewError, match="repeats question"):
        review_question(workspace, q2.id, "edit", annotator="ana", text="how many rows mention 2011")
    with pytest.raises(ReviewError, match="same question"):
        review_question(workspace, q2.id, "edit", annotator="ana", text="How many columns hold only numbers")

    r = review_question(workspace, q3.id, "promote", annotator="ana")
    assert r.question.status == "seed"

    with workspace.session() as s:
        tasks = {t.target_id: t for t in s.exec(select(AnnotationTask)).all()}
        notes = s.exec(select(Annotation).order_by(Annotation.task_id, Annotation.annotator, Annotation.source_ref)).all()
    assert set(tasks) == {q1.id, q2.id, q3.id}
    assert all(t.kind == "question_review" and t.target_type == "question" for t in tasks.values())
    assert {t.target_id: t.status for t in tasks.values()} == {q1.id: "adjudicated", q2.id: "annotated", q3.id: "annotated"}
    assert tasks[q1.id].id == review_task_id(q1.id)
    by_q1 = [(n.annotator, n.source_ref, n.label["decision"]) for n in notes if n.task_id == tasks[q1.id].id]
    assert by_q1 == [("ana", "cli:1", "accept"), ("ben", "cli:1", "reject"), ("ben", "cli:2", "accept")]
    reject = next(n for n in notes if n.label["decision"] == "reject")
    assert reject.label["reason"] == "the table has no such column" and reject.source == "cli"
    edit = next(n for n in notes if n.label["decision"] == "edit")
    assert edit.label["previous_text"] == "How many columns hold numbers?"
    assert all(n.kind == "question_review" for n in notes)

    queue = review_queue(workspace)  # a Page: it iterates like a list
    assert list(queue) == [] and queue.total == 0
    # The promoted question is a seed of its subtype now.
    assert "How many rows mention 2011?" in seed_corpus.workspace_corpus(workspace).category("Counting").seeds
    assert [e.source for e in seed_corpus.seed_entries(workspace, "Counting")][-1] == "promoted"


# --- generation runs ------------------------------------------------------------------------


def test_generation_stores_proposed_questions_and_a_second_run_calls_nothing(workspace):
    table_ids = import_tables(workspace, 3)
    with OpenAIServer(model_reply) as server:
        opts = options(subtypes=("Counting", "Ranking"), seed=7)
        first = generate_questions(workspace, opts, llm_settings(server))
        assert first.stopped is None
        assert (first.steps_done, first.paid_calls, first.questions_new) == (6, 6, 18)
        assert len(server.requests) == 6

        second = generate_questions(workspace, opts, llm_settings(server))
        assert len(server.requests) == 6  # counted at the server: not one new call
        assert (second.steps_done, second.steps_present, second.paid_calls, second.questions_new) == (0, 6, 0, 0)
        assert all(n == 1 for n in server.paid.values())

    questions = generated(workspace)
    assert len(questions) == 18
    calls = {c.id: c for c in all_rows(workspace, LLMCall)}
    for q in questions:
        assert (q.status, q.origin, q.round, q.seed) == ("proposed", "llm", 1, 7)
        assert q.qtype == "NumericalReasoning" and q.taxonomy == "tablebench"
        lineage = q.lineage
        assert lineage["model"] == MODEL and lineage["round"] == 1 and lineage["table_serialization"] == "markdown"
        assert len(lineage["seeds_shown"]) == 3 and "route" not in lineage
        (call_id,) = lineage["llm_call_ids"]
        prompt = calls[call_id].messages[0]["content"]
        assert calls[call_id].purpose == "generate_questions"
        assert shown_seeds(prompt) == lineage["seeds_shown"]
        assert f"Category: {q.subtype} (type: NumericalReasoning)" in prompt
        assert q.text in calls[call_id].text
    # the table is shown as markdown, and the seeds come from the corpus of the subtype
    seeds = set(seed_corpus.workspace_corpus(workspace).category("Counting").seeds)
    assert all(set(q.lineage["seeds_shown"]) <= seeds for q in questions if q.subtype == "Counting")
    with workspace.session() as s:
        rec = s.get(TableRecord, table_ids[0])
    some = next(c for c in calls.values() if f"| {' | '.join(rec.header[:2])}" in c.messages[0]["content"])
    assert some is not None
    rounds = all_rows(workspace, GenerationRound)
    assert sorted((r.subtype, r.round, r.past_target) for r in rounds) == [("Counting", 1, False), ("Ranking", 1, False)]
    assert_consistent(workspace)

    # --rounds 2 adds exactly one round; its prompts list the table's round-1 questions as "do not repeat".
    with OpenAIServer(model_reply) as server:
        third = generate_questions(workspace, options(subtypes=("Counting", "Ranking"), seed=7, rounds=2), llm_settings(server))
        assert (third.steps_done, third.steps_present, third.rounds) == (6, 6, [2])
        for body in server.requests:
            avoid = prompt_of(body).split("(do not repeat them or ask the same thing in other words):\n", 1)[1]
            assert avoid.count("\n- ") + avoid.startswith("- ") >= 3


def test_dedup_against_existing_questions_exact_and_rouge(workspace):
    (tid,) = import_tables(workspace, 1)
    _question(workspace, tid, "How many teams scored more than 10 goals in the season?")
    _question(workspace, tid, "Which rows list a value above the median of the column?", status="rejected")

    def reply(body: dict) -> str:
        return json.dumps([
            "how many teams scored MORE than 10 goals in the season",  # exact after normalisation
            "Which rows list a value below the median of the column?",  # ROUGE-L vs a rejected question
            "Count the entries whose name starts with a vowel.",
            "Count the entries whose name starts with a consonant.",  # ROUGE-L vs the line above
            "1. Count the entries whose name starts with a vowel.",  # exact repeat within the reply
        ])

    with OpenAIServer(reply) as server:
        summary = generate_questions(workspace, options(per_round=5), llm_settings(server))
    assert (summary.questions_new, summary.duplicates_exact, summary.duplicates_rouge) == (1, 1, 2)
    (step,) = all_rows(workspace, GenerationStep)
    kinds = [(d["kind"], d["of_text"]) for d in step.duplicates]
    assert kinds == [
        ("exact", "How many teams scored more than 10 goals in the season?"),
        ("rouge", "Which rows list a value above the median of the column?"),
        ("rouge", "Count the entries whose name starts with a vowel."),
    ]
    assert all(d["score"] >= 0.7 for d in step.duplicates)
    assert [q.text for q in generated(workspace)] == ["Count the entries whose name starts with a vowel."]


def test_dedup_threshold_comes_from_the_config(workspace):
    (tid,) = import_tables(workspace, 1)
    config = workspace.root / "tqaforge.toml"
    config.write_text(config.read_text() + "\n[generation]\nrouge_threshold = 0.95\nper_round = 2\n")
    ws = open_workspace(workspace.root)
    try:
        opts = load_generation_options(ws, subtypes=("Counting",))
        assert (opts.rouge_threshold, opts.per_round, opts.human_share) == (0.95, 2, 0.3)

        def reply(body: dict) -> str:
            return json.dumps(["Count the entries whose name starts with a vowel.",
                               "Count the entries whose name starts with a consonant."])

        with OpenAIServer(reply) as server:
            summary = generate_questions(ws, opts, llm_settings(server))
        assert (summary.questions_new, summary.duplicates_rouge) == (2, 0)
        config.write_text(config.read_text() + "bogus = 1\n")
        with pytest.raises(ConfigError, match="bogus"):
            load_generation_options(open_workspace(workspace.root))
    finally:
        ws.close()


def test_promoted_seed_appears_in_the_next_rounds_prompts(workspace):
    import_tables(workspace, 4)
    with OpenAIServer(model_reply) as server:
        generate_questions(workspace, options(few_shot=3), llm_settings(server))
    chosen = generated(workspace)[0]
    review_question(workspace, chosen.id, "promote", annotator="ana", new=True)
    with OpenAIServer(model_reply) as server:
        summary = generate_questions(workspace, options(few_shot=3, rounds=2), llm_settings(server))
        assert summary.rounds == [2] and summary.steps_done == 4
        prompts = [prompt_of(b) for b in server.requests]
    shown = [shown_seeds(p) for p in prompts]
    assert any(chosen.text in seeds for seeds in shown)  # the promoted question steers round 2
    with workspace.session() as s:
        r2 = s.get(GenerationRound, generated_round_id("Counting", 2))
        r1 = s.get(GenerationRound, generated_round_id("Counting", 1))
    assert {"text": chosen.text, "source": f"promoted:{chosen.id}"} in r2.seed_pool
    assert chosen.text not in [e["text"] for e in r1.seed_pool]
    round2 = [q for q in generated(workspace) if q.round == 2]
    assert any(chosen.text in q.lineage["seeds_shown"] for q in round2)


def generated_round_id(subtype: str, round_no: int) -> str:
    from tqaforge.ids import round_id

    return round_id(subtype, round_no)


def test_routing_past_the_target_and_verification_verdicts(workspace):
    table_ids = import_tables(workspace)
    for i, tid in enumerate(table_ids[:2]):
        _question(workspace, tid, f"Seeded accepted question number {i}?", status="accepted")
    with OpenAIServer(model_reply) as server:
        summary = generate_questions(workspace, options(per_round=10, target=2, seed=3), llm_settings(server))
        verifications = [b for b in server.requests if is_verification(b)]
    new = generated(workspace)
    assert len(new) == summary.questions_new == 10 * len(table_ids)
    routes = collections.Counter(q.lineage["route"] for q in new)
    assert routes["human"] + routes["agent"] == len(new)
    assert summary.routed_human == routes["human"] and summary.routed_agent == routes["agent"]
    share = routes["human"] / len(new)
    assert 0.18 <= share <= 0.42, share  # 100 draws of p = 0.3: a 3-sigma band
    assert len(verifications) == routes["agent"]
    for q in new:
        assert 0.0 <= q.lineage["route_draw"] < 1.0
        assert (q.lineage["route"] == "human") == (q.lineage["route_draw"] < 0.3)

    calls = {c.id: c for c in all_rows(workspace, LLMCall)}
    with workspace.session() as s:
        notes = {n.task_id: n for n in s.exec(select(Annotation)).all()}
    for q in new:
        if q.lineage["route"] == "human":
            assert q.status == "proposed" and q.meta is None
            assert review_task_id(q.id) not in notes
            continue
        v = q.meta["verification"]
        call = calls[v["call_id"]]
        assert call.purpose == "verify_question" and q.text in call.messages[0]["content"]
        expected = json.loads(call.text)
        assert {k: v[k] for k in ("answerable", "matches_subtype", "unambiguous", "reasons")} == expected
        accepted = expected["answerable"] and expected["matches_subtype"] and expected["unambiguous"]
        assert q.status == ("accepted" if accepted else "rejected") and v["verdict"] == q.status
        note = notes[review_task_id(q.id)]
        assert (note.annotator, note.source, note.kind) == (f"agent:{MODEL}", "agent", "question_review")
        assert note.label["decision"] == ("accept" if accepted else "reject")
        assert note.label["call_id"] == v["call_id"]
    assert summary.verified_accepted == sum(q.status == "accepted" for q in new)
    assert 0 < summary.verified_rejected < routes["agent"]
    # the routing draw is a function of (seed, question): the same seed routes alike elsewhere
    with workspace.session() as s:
        (r,) = s.exec(select(GenerationRound)).all()
    assert (r.past_target, r.accepted_at_start, r.target) == (True, 2, 2)
    assert_consistent(workspace)


def test_broken_model_output_is_repaired_or_recorded(workspace):
    table_ids = import_tables(workspace, 3)
    broken_table = table_ids[1]
    with workspace.session() as s:
        header = s.get(TableRecord, broken_table).header

    def reply(body: dict) -> Scripted | str:
        prompt = prompt_of(body)
        repair = len(body["messages"]) > 1
        if f"| {' | '.join(header[:2])}" in prompt:
            # This table always gets a wrong shape, even after the repair request.
            return json.dumps({"answer": 42}) if not repair else "Sure! Here are questions: 1. What?"
        if not repair:
            return "Here you go:\n" + json.dumps(random_questions(body))  # not JSON: one repair call
        return "```json\n" + json.dumps(random_questions(body)) + "\n```"

    with OpenAIServer(reply) as server:
        summary = generate_questions(workspace, options(), llm_settings(server))
        assert len(server.requests) == 6  # each step: the call and one repair
        assert summary.stopped is None and (summary.steps_done, summary.steps_failed) == (3, 1)
        steps = {st.table_id: st for st in all_rows(workspace, GenerationStep)}
        bad = steps[broken_table]
        assert bad.status == "invalid_reply" and "invalid twice" in bad.error and len(bad.llm_call_ids) == 2
        assert bad.question_ids == []
        repair_prompt = [b for b in server.requests if len(b["messages"]) > 1 and f"| {' | '.join(header[:2])}" in prompt_of(b)][0]
        assert 'without "questions"' in repair_prompt["messages"][-1]["content"]
        good = [st for tid, st in steps.items() if tid != broken_table]
        assert all(st.status == "done" and len(st.question_ids) == 3 and len(st.llm_call_ids) == 2 for st in good)

        again = generate_questions(workspace, options(), llm_settings(server))
        assert len(server.requests) == 6 and again.steps_present == 3  # a failed step is not re-asked

        retry = generate_questions(workspace, options(retry_failed=True), llm_settings(server))
        assert retry.steps_done == 1 and len(server.requests) == 8  # a new sample: new requests
        assert server.requests[-2]["seed"] != server.requests[0]["seed"]
    assert_consistent(workspace)


def test_unusable_verification_reply_sends_the_question_to_people(workspace):
    import_tables(workspace, 1)

    def reply(body: dict) -> str:
        if is_verification(body):
            return "I think it is fine."
        return json.dumps(random_questions(body))

    with OpenAIServer(reply) as server:
        summary = generate_questions(workspace, options(target=0, human_share=0.0), llm_settings(server))
    assert summary.verification_failed == 3 and summary.verified_accepted == 0
    for q in generated(workspace):
        assert q.status == "proposed" and q.lineage["route"] == "human"
        assert q.lineage["route_reason"] == "verification reply invalid"
        assert "invalid twice" in q.meta["verification"]["error"]
    assert len(review_queue(workspace)) == 3


def test_budget_stops_the_run_before_the_cost_is_exceeded(workspace):
    import_tables(workspace)
    prices = {MODEL: Price(input=2000.0, output=4000.0)}  # USD per million tokens: dear on purpose
    with OpenAIServer(model_reply) as server:
        budget = 12.0
        summary = generate_questions(workspace, options(max_tokens=200), llm_settings(server, prices=prices, max_cost=budget,
                                                                                    concurrency=4))
        assert summary.stopped and "budget" in summary.stopped and "max_cost" in summary.stopped
        spent = sum(c.cost for c in all_rows(workspace, LLMCall))
        assert 0 < spent <= budget
        assert summary.cost == pytest.approx(spent)
        # Four calls at once: the budget can run out before any step has all its calls (a fast host saw
        # 0 steps done); every call it paid for is reused below, never paid again.
        assert summary.steps_done < summary.steps_total
        assert_consistent(workspace)
        paid_first = sum(server.paid.values())

        rest = generate_questions(workspace, options(max_tokens=200), llm_settings(server, prices=prices, max_cost=1000.0))
        assert rest.stopped is None
        assert rest.steps_present == summary.steps_done and rest.steps_done == summary.steps_total - summary.steps_done
        assert all(n == 1 for n in server.paid.values())  # nothing paid twice
        assert sum(server.paid.values()) == paid_first + rest.paid_calls
    assert len(all_rows(workspace, GenerationStep)) == rest.steps_present + rest.steps_done


# --- the command line ------------------------------------------------------------------------


def test_cli_seeds_generate_queue_review(sqlite_workspace, tmp_path, monkeypatch):
    ws = sqlite_workspace
    w = ["--workspace", str(ws.root)]
    import_tables(ws, 2)
    result = runner.invoke(app, [*w, "seeds", "list", "--subtype", "Counting"])
    assert result.exit_code == 0, result.output
    assert "seeds.toml" in result.output and "Counting" in result.output and "Ranking" not in result.output
    result = runner.invoke(app, [*w, "seeds", "add", "Counting", "How many rows have an empty cell?"])
    assert result.exit_code == 0 and "Counting: 4 seeds" in result.output
    result = runner.invoke(app, [*w, "seeds", "add", "Nope", "x?"])
    assert result.exit_code == 1 and "Nope" in result.output and "Traceback" not in result.output
    extra = tmp_path / "x.toml"
    extra.write_text('taxonomy = "tablebench"\n[[category]]\ntype = "NumericalReasoning"\nsubtype = "Ranking"\n'
                     'definition = "d"\nseeds = ["Which row ranks third?"]\n')
    result = runner.invoke(app, [*w, "seeds", "import", str(extra)])
    assert result.exit_code == 0 and "added 1 seeds" in result.output and "Ranking" in result.output

    with OpenAIServer(model_reply) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        args = [*w, "generate", "questions", "--subtypes", "Counting", "--per-round", "2", "--model", MODEL]
        first_table = sorted(t.id for t in all_rows(ws, TableRecord))[0]
        result = runner.invoke(app, [*args, "--tables", first_table[:8]])
        assert result.exit_code == 0, result.output
        assert "1 steps done" in result.output and "2 new questions" in result.output and "1 paid calls" in result.output
        result = runner.invoke(app, args)  # --tables all (the default)
        assert result.exit_code == 0, result.output
        assert "1 steps done, 1 already done" in result.output and "1 paid calls" in result.output
        result = runner.invoke(app, args)
        assert result.exit_code == 0 and "2 already done" in result.output and "0 paid calls" in result.output
        assert len(server.requests) == 2
        result = runner.invoke(app, [*args, "--tables", "zzzz"])
        assert result.exit_code == 1 and "no TableRecord with id 'zzzz'" in result.output

    result = runner.invoke(app, [*w, "questions", "queue", "--subtype", "Counting"])
    assert result.exit_code == 0
    q = generated(ws)[0]
    assert q.id[:10] in result.output
    result = runner.invoke(app, [*w, "questions", "review", q.id[:10], "--reject", "--reason", "vague", "--annotator", "ana"])
    assert result.exit_code == 1 and "unknown annotator 'ana'" in result.output and "--new" in result.output
    result = runner.invoke(app, [*w, "questions", "review", q.id[:10], "--reject", "--annotator", "ana", "--new"])
    assert result.exit_code == 1 and "reason" in result.output
    result = runner.invoke(app, [*w, "questions", "review", q.id[:10], "--reject", "--reason", "vague", "--annotator", "ana", "--new"])
    assert result.exit_code == 0 and "proposed -> rejected" in result.output
    result = runner.invoke(app, [*w, "questions", "review", q.id[:10], "--accept", "--promote", "--annotator", "ana"])
    assert result.exit_code != 0
    result = runner.invoke(app, [*w, "questions", "review", q.id[:10], "--promote"], env={"TQAFORGE_ANNOTATOR": "ana"})
    assert result.exit_code == 0 and "rejected -> seed" in result.output  # ana changed her mind
    result = runner.invoke(app, [*w, "seeds", "list", "--subtype", "Counting"])
    assert q.text in result.output and "promoted" in result.output


def test_cli_budget_message(sqlite_workspace, monkeypatch):
    ws = sqlite_workspace
    import_tables(ws, 3)
    config = ws.root / "tqaforge.toml"
    config.write_text(config.read_text() + f'\n[llm.prices."{MODEL}"]\ninput = 50.0\noutput = 50.0\n')
    with OpenAIServer(model_reply) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        result = runner.invoke(app, ["-w", str(ws.root), "generate", "questions", "--subtypes", "Counting",
                                     "--model", MODEL, "--max-cost", "0.1"])
    assert result.exit_code == 1
    assert "stopped:" in result.output and "max_cost $0.1000" in result.output and "resume" in result.output
    assert "Traceback" not in result.output
    assert sum(c.cost for c in all_rows(ws, LLMCall)) <= 0.1


# --- crash and resume -----------------------------------------------------------------------

CLI = [sys.executable, "-m", "tqaforge"]
RUN_ARGS = ["generate", "questions", "--subtypes", "Counting,Ranking", "--rounds", "2", "--per-round", "3",
            "--target", "0", "--model", MODEL, "--seed", "5"]


def _cli_env(server: OpenAIServer, database_url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "TQAFORGE_"))}
    env.update(OPENAI_BASE_URL=server.url, OPENAI_API_KEY="k", PYTHONPATH=str(REPO))
    if database_url:
        env["TQAFORGE_DATABASE_URL"] = database_url
    return env


def _snapshot(ws: Workspace) -> dict[str, Any]:
    """The records a run produces, without timestamps and latencies."""
    def rows(model: type, keys: tuple[str, ...]) -> list[tuple]:
        return [tuple(json.dumps(getattr(r, k), sort_keys=True) for k in keys) for r in all_rows(ws, model)]

    return {
        "questions": rows(Question, ("id", "table_id", "text", "subtype", "status", "origin", "round", "seed", "lineage", "meta")),
        "calls": rows(LLMCall, ("id", "model", "messages", "params", "seed", "sample", "text", "status", "purpose",
                                "prompt_tokens", "completion_tokens", "cost")),
        "steps": rows(GenerationStep, ("id", "status", "attempt", "seeds_shown", "llm_call_ids", "question_ids", "duplicates")),
        "rounds": rows(GenerationRound, ("id", "seed_pool", "definition", "past_target", "accepted_at_start")),
        "annotations": rows(Annotation, ("id", "task_id", "annotator", "label", "source", "source_ref")),
    }


def _count_calls(ws: Workspace) -> int:
    with ws.session() as s:
        return s.exec(select(func.count()).select_from(LLMCall).where(LLMCall.status == "ok")).one()


def _setup_workspace(root: Path, database_url: str | None) -> Workspace:
    env_url = os.environ.pop("TQAFORGE_DATABASE_URL", None)
    try:
        if database_url:
            os.environ["TQAFORGE_DATABASE_URL"] = database_url
        ws = init_workspace(root, name=root.name)
        import_tables(ws, 3)
        config = ws.root / "tqaforge.toml"
        text = config.read_text().replace("\n[llm]\n", "\n[llm]\nconcurrency = 3\n", 1)
        config.write_text(text + f'\n[llm.prices."{MODEL}"]\ninput = 1.0\noutput = 2.0\n')
        return open_workspace(root)
    finally:
        os.environ.pop("TQAFORGE_DATABASE_URL", None)
        if env_url is not None:
            os.environ["TQAFORGE_DATABASE_URL"] = env_url


def test_sigkill_mid_run_then_resume_equals_an_uninterrupted_run(tmp_path, database_url):
    sqlite_url = database_url if database_url.startswith("sqlite") else None
    crashed = _setup_workspace(tmp_path / "crashed", None if sqlite_url else database_url)
    reference = _setup_workspace(tmp_path / "reference", None)
    crash_url = None if sqlite_url else database_url
    try:
        # 1. Uninterrupted, in its own workspace.
        with OpenAIServer(model_reply) as server:
            done = subprocess.run([*CLI, "-w", str(reference.root), *RUN_ARGS], env=_cli_env(server, None),
                                  capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr
            expected_paid = collections.Counter(server.paid)
        total_calls = sum(expected_paid.values())
        assert total_calls > 20  # 12 generation steps + a verification per question

        # 2. Killed mid-way: the server pays 9 replies, then every request hangs unpaid.
        paid: collections.Counter[str] = collections.Counter()
        with OpenAIServer(model_reply) as server:
            server.stall_after(9)
            proc = subprocess.Popen([*CLI, "-w", str(crashed.root), *RUN_ARGS], env=_cli_env(server, crash_url),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            try:
                server.wait_paid(9, timeout=60)
                wait_for(lambda: _count_calls(crashed) == 9, 30, "the 9 paid calls to be committed")
                time.sleep(0.3)  # let the run commit what it can; the rest hangs at the server
                assert proc.poll() is None
            finally:
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=30)
            paid.update(server.paid)
        assert proc.returncode == -signal.SIGKILL
        assert _count_calls(crashed) == 9
        partial = _snapshot(crashed)
        assert len(partial["steps"]) < 12 and len(partial["calls"]) == 9
        assert_consistent(crashed)

        # 3. Started again: it finishes, paying only what was never paid.
        with OpenAIServer(model_reply) as server:
            again = subprocess.run([*CLI, "-w", str(crashed.root), *RUN_ARGS], env=_cli_env(server, crash_url),
                                   capture_output=True, text=True, timeout=120)
            assert again.returncode == 0, again.stderr
            paid.update(server.paid)

        assert max(paid.values()) == 1  # no request paid twice across both runs
        assert paid == expected_paid  # and the very same requests as the uninterrupted run
        assert_consistent(crashed)
        assert _snapshot(crashed) == _snapshot(reference)
    finally:
        crashed.close()
        reference.close()


def test_ctrl_c_stops_cleanly_and_leaves_a_consistent_store(sqlite_workspace):
    ws = sqlite_workspace
    import_tables(ws, 3)
    with OpenAIServer(model_reply) as server:
        server.stall_after(4)
        proc = subprocess.Popen([*CLI, "-w", str(ws.root), *RUN_ARGS], env=_cli_env(server, None),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            server.wait_paid(4, timeout=60)
            wait_for(lambda: _count_calls(ws) == 4, 30, "the paid calls to be committed")
            time.sleep(0.3)
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    assert_consistent(ws)
    assert len(all_rows(ws, GenerationStep)) < 12


def test_readme_generation_block_is_the_defaults(sqlite_workspace):
    """The [generation] block documented in README.md loads, and equals the built-in defaults."""
    readme = (REPO / "README.md").read_text()
    block = textwrap.dedent(re.search(r"```toml\n( *\[generation\]\n.*?) *```", readme, re.DOTALL).group(1))
    config = sqlite_workspace.root / "tqaforge.toml"
    config.write_text(config.read_text() + "\n" + block)
    ws = open_workspace(sqlite_workspace.root)
    try:
        assert load_generation_options(ws) == GenerationOptions()
    finally:
        ws.close()


def test_the_verification_agent_leaves_a_question_people_reviewed_alone(workspace, monkeypatch):
    """Issue 24: a question that another run stored meanwhile and a person reviewed keeps the
    person's decision (the agent's verdict is not recorded, and the summary counts it); the
    control, stored meanwhile with no review, takes the agent's verdict as a model's review."""
    from tqaforge.annotation.review import apply_decision
    from tqaforge.generation import questions as generation

    table_ids = import_tables(workspace, 1)
    for i in range(2):
        _question(workspace, table_ids[0], f"Seeded accepted question number {i}?", status="accepted")
    original = generation.QuestionStep._commit
    seen: dict[str, tuple[str, bool]] = {}

    def commit_after_a_concurrent_run(self, prepared, verdicts):
        if not seen:  # the first step: two of its questions land first, one reviewed by ana
            (person_qid, text1, _), (control_qid, text2, _) = prepared.new[:2]
            with self.ws.session() as s:
                for qid, text in ((person_qid, text1), (control_qid, text2)):
                    s.add(Question(id=qid, table_id=prepared.generated.pair.table_id, text=text, subtype="Counting",
                                   status="proposed", origin="llm"))
                s.flush()
                agent_accepts = verdicts[person_qid][0].accepted
                decision = "reject" if agent_accepts else "accept"  # the opposite of the agent's verdict
                apply_decision(s, s.get(Question, person_qid), decision, annotator="ana", reason="not answerable")
            seen["person"] = (person_qid, agent_accepts)
            seen["control"] = (control_qid, verdicts[control_qid][0].accepted)
        return original(self, prepared, verdicts)

    monkeypatch.setattr(generation.QuestionStep, "_commit", commit_after_a_concurrent_run)
    with OpenAIServer(model_reply) as server:
        summary = generate_questions(workspace, options(per_round=4, target=2, human_share=0.0, seed=3), llm_settings(server))
    person_qid, agent_accepts = seen["person"]
    control_qid, control_accepts = seen["control"]
    with workspace.session() as s:
        person_q, control_q = s.get(Question, person_qid), s.get(Question, control_qid)
        labels = {qid: [(n.annotator, n.label["decision"]) for n in s.exec(
            select(Annotation).where(Annotation.task_id == review_task_id(qid))).all()] for qid in (person_qid, control_qid)}
    assert person_q.status == ("rejected" if agent_accepts else "accepted")  # ana's decision stands
    assert labels[person_qid] == [("ana", "reject" if agent_accepts else "accept")]  # no agent label on it
    assert control_q.status == ("accepted" if control_accepts else "rejected")  # the control: the verdict applies
    assert labels[control_qid] == [(f"agent:{MODEL}", "accept" if control_accepts else "reject")]
    assert summary.left_to_people == 1
    assert "1 verdicts on questions people had reviewed: left alone" in summary.lines()


# --- the step runner: workers and the batch transport ------------------------------------------


def _headers(ws: Workspace) -> dict[str, str]:
    """Table id -> how its markdown header starts in a prompt."""
    with ws.session() as s:
        return {t.id: f"| {' | '.join(t.header[:2])}" for t in s.exec(select(TableRecord)).all()}


def _twins_reply(slow: set[str]) -> Any:
    """Every step proposes the same question and a near twin of it (so which table keeps it depends on
    the order of the commits), plus distinct ones; the generation requests of tables whose header
    is in ``slow`` take long, so a second worker's steps are answered before the first's."""
    def reply(body: dict) -> Scripted | str:
        if is_verification(body):
            return json.dumps(verdict(body))
        questions = random_questions(body)
        questions[0] = "Count the entries whose name starts with a vowel."
        questions[1] = "Count the entries whose name starts with a consonant."
        text = json.dumps(questions)
        return Scripted(text, delay_s=0.4) if any(h in prompt_of(body) for h in slow) else text
    return reply


def _records(ws: Workspace) -> dict[str, Any]:
    snap = _snapshot(ws)
    del snap["calls"]  # the same requests, but not always in the same order of arrival
    return snap


def test_two_workers_store_the_records_of_one(workspace, tmp_path, monkeypatch):
    """Two workers (two steps at a time each, the first worker's steps slow at the endpoint) store
    what one worker stores: a step is deduplicated against exactly the steps before it. The
    control, without the wait for earlier steps, stores other records (the second worker's twin
    questions win), so the comparison can see a wrong order; no run stores a duplicate."""
    from tqaforge.generation import questions as generation
    from tqaforge.llm.step import RunnerOptions

    reference = _setup_workspace(tmp_path / "reference", None)
    control = _setup_workspace(tmp_path / "control", None)
    table_ids = import_tables(workspace, 3)
    opts = options(per_round=4, target=0, seed=11)
    slow = {h for tid, h in _headers(workspace).items() if tid in table_ids[:2]}
    try:
        with OpenAIServer(_twins_reply(slow)) as server:
            one = generate_questions(reference, opts, llm_settings(server))
            two = generate_questions(workspace, opts, llm_settings(server),
                                     runner=RunnerOptions(workers=2, window=2, chunk=2))
            assert two.calls.workers == 2 and one.stopped is None and two.stopped is None
            assert (two.steps_done, two.questions_new, two.duplicates_exact, two.duplicates_rouge) == (
                one.steps_done, one.questions_new, one.duplicates_exact, one.duplicates_rouge) == (3, 7, 2, 3)
            assert _records(workspace) == _records(reference)
            assert_consistent(workspace)
            # The control: no wait for earlier steps, and the first worker's steps are asked only
            # once the last table's step is stored.
            async def no_wait(self: Any, pair: Any, gateway: Any) -> bool:
                return True

            original_call = generation.QuestionStep.call

            async def late_call(self: Any, gateway: Any, piece: Any) -> Any:
                deadline = time.monotonic() + 30
                while piece.table_id != table_ids[2] and not any(
                        st.table_id == table_ids[2] for st in all_rows(control, GenerationStep)):
                    assert time.monotonic() < deadline, "the last table's step was never stored"
                    await asyncio.sleep(0.02)
                return await original_call(self, gateway, piece)

            monkeypatch.setattr(generation.QuestionStep, "_wait_for_earlier", no_wait)
            monkeypatch.setattr(generation.QuestionStep, "call", late_call)
            generate_questions(control, opts, llm_settings(server), runner=RunnerOptions(workers=2, window=2, chunk=2))
            assert _records(control) != _records(reference)
        for ws in (workspace, reference, control):
            texts = [q.text for q in generated(ws)]
            assert len(texts) == len(set(texts)) == 7  # never a duplicate stored, whatever the order
        vowel = [next(q.table_id for q in generated(ws) if "vowel" in q.text) for ws in (workspace, control)]
        assert vowel[0] == table_ids[0] != vowel[1]
    finally:
        reference.close()
        control.close()


def _collect(ws: Workspace, server: OpenAIServer, requests: list[Any]) -> None:
    """What collecting a batch does: the reply of every request put aside, stored under its id
    (here asked online, through a gateway, from the same body)."""
    from tqaforge.llm import Gateway, run

    async def go() -> None:
        async with Gateway(ws, llm_settings(server)) as gw:
            for req in requests:
                done = await gw.complete(req.messages, purpose=req.purpose, temperature=req.body["temperature"],
                                         max_tokens=req.max_tokens, seed=req.seed, sample=req.sample)
                assert done.call_id == req.call_id
    run(go())


def test_batch_transport_generates_then_verifies_then_commits(workspace, tmp_path, monkeypatch):
    """With the batch transport the first pass puts every generation request aside; after they are
    collected, the second dedups, routes and puts the verification requests aside, committing
    nothing (a step whose verification waits is not stored half-done); the third commits, and the
    records are those of an online run. No request of a pass reaches the endpoint."""
    from tqaforge.llm import step as step_module
    from tqaforge.llm.step import RunnerOptions

    submitted: list[list[Any]] = []

    def submit(ws: Any, llm: Any, step: Any, options: Any, budget: Any, requests: list[Any], summary: Any) -> list[str]:
        assert options.transport == "batch" and step.name == f"questions:{MODEL}"
        submitted.append(list(requests))
        return []

    monkeypatch.setattr(step_module, "_submit", submit)
    reference = _setup_workspace(tmp_path / "reference", None)
    import_tables(workspace, 3)
    opts = options(per_round=3, target=0, human_share=0.0, seed=4)
    batch = RunnerOptions(transport="batch")
    try:
        with OpenAIServer(model_reply) as server:
            online = generate_questions(reference, opts, llm_settings(server))
            assert online.routed_agent == 9
            sent = len(server.requests)

            first = generate_questions(workspace, opts, llm_settings(server), runner=batch)
            assert len(server.requests) == sent  # nothing reached the endpoint
            assert first.calls.deferred == 3 and first.calls.waiting == 3 and not first.failed
            assert [r.purpose for r in submitted[0]] == ["generate_questions"] * 3
            assert first.steps_done == 0 and all_rows(workspace, GenerationStep) == []
            _collect(workspace, server, submitted[0])
            sent = len(server.requests)

            second = generate_questions(workspace, opts, llm_settings(server), runner=batch)
            assert len(server.requests) == sent
            assert second.calls.cached == 3 and second.calls.deferred == 9 and second.calls.waiting == 3
            assert [r.purpose for r in submitted[1]] == ["verify_question"] * 9
            assert second.steps_done == 0 and all_rows(workspace, GenerationStep) == [] and generated(workspace) == []
            _collect(workspace, server, submitted[1])
            sent = len(server.requests)

            third = generate_questions(workspace, opts, llm_settings(server), runner=batch)
            assert len(server.requests) == sent and len(submitted) == 2  # all from the store: nothing put aside
            assert (third.steps_done, third.questions_new, third.verified_accepted + third.verified_rejected) == (3, 9, 9)
            assert third.calls.paid == 0 and third.calls.deferred == 0
        assert _snapshot(workspace) == _snapshot(reference)
        assert_consistent(workspace)
    finally:
        reference.close()

"""The shared read-only queries on SQLite and PostgreSQL: which answer is a question's gold, and
the one conversion from a stored table to a Table."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from itertools import combinations

import pytest

from tqaforge.annotation.workflows import KINDS, RaterData, gold_answers
from tqaforge.queries import ANSWER_TRUST, CHECKED_BY_PEOPLE, tables_by_id, trusted_answers
from tqaforge.schemas.enums import AnswerStatus
from tqaforge.schemas.records import Answer, Question, TableRecord
from tqaforge.tables.table import Table
from tqaforge.variants.grid import load_items

TABLE = Table.build(["city", "pop"], [["Oslo", "709000"], ["Bergen", "285900"]],
                    caption="Norwegian cities", source="wiki", licence="CC0")
T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)


def _store_table(ws) -> None:
    with ws.session() as s:
        s.add(TableRecord(id=TABLE.id, header=list(TABLE.header), rows=[list(r) for r in TABLE.rows],
                          caption=TABLE.caption, source=TABLE.source, licence=TABLE.licence,
                          n_rows=TABLE.n_rows, n_cols=TABLE.n_cols, numeric_share=0.5))


def _question(ws, text: str, answers: list[tuple[str, str]]) -> str:
    """Store an accepted question with ``answers`` as (status, value), each a minute newer."""
    qid = Question.make_id(TABLE.id, text, "Counting")
    with ws.session() as s:
        s.add(Question(id=qid, table_id=TABLE.id, text=text, subtype="Counting", status="accepted"))
        s.flush()
        for i, (status, value) in enumerate(answers):
            s.add(Answer(id=Answer.make_id(qid, status, [value]), question_id=qid, value=value, values=[value],
                         status=status, created_at=T0 + timedelta(minutes=i)))
    return qid


def _gold(ws, qids: list[str], **kw) -> dict[str, list[str]]:
    with ws.session() as s:
        return {qid: list(a.values) for qid, a in trusted_answers(s, qids, **kw).items()}


def test_a_rejected_or_inconsistent_answer_is_never_the_gold(workspace):
    _store_table(workspace)
    # The untrusted answers come first and last: neither order nor recency makes them the gold.
    only_bad = _question(workspace, "Which city is largest?", [("rejected", "Bergen"), ("inconsistent", "Tromsø")])
    mixed = _question(workspace, "How many cities?", [("rejected", "3"), ("gold", "2"), ("inconsistent", "4")])
    assert _gold(workspace, [only_bad, mixed]) == {mixed: ["2"]}
    # The variant grid takes the same gold: none for the first, "2" for the second.
    items = {item.question_id: item for item in load_items(workspace)}
    assert items[only_bad].context.answers == ()
    assert items[mixed].context.answers == ("2",)


@pytest.mark.parametrize("better, worse", list(combinations(ANSWER_TRUST, 2)))
def test_the_trust_ranking_holds_whatever_the_order(workspace, better, worse):
    _store_table(workspace)
    older_better = _question(workspace, "Q1?", [(better.value, "good"), (worse.value, "bad")])
    newer_better = _question(workspace, "Q2?", [(worse.value, "bad"), (better.value, "good")])
    assert _gold(workspace, [older_better, newer_better]) == {older_better: ["good"], newer_better: ["good"]}


def test_the_ranking_puts_people_first_and_never_trusts_the_untrusted():
    assert ANSWER_TRUST == (AnswerStatus.CORRECTED, AnswerStatus.VERIFIED, AnswerStatus.GOLD, AnswerStatus.CONSISTENT)
    assert not {AnswerStatus.REJECTED, AnswerStatus.INCONSISTENT} & set(ANSWER_TRUST)


def test_the_newest_answer_of_the_same_status_wins(workspace):
    _store_table(workspace)
    qid = _question(workspace, "Q?", [("verified", "first"), ("verified", "second"), ("consistent", "agents")])
    assert _gold(workspace, [qid]) == {qid: ["second"]}


def test_at_least_people_leaves_out_the_agents_agreement(workspace):
    _store_table(workspace)
    agents = _question(workspace, "Q1?", [("consistent", "agents")])
    people = _question(workspace, "Q2?", [("consistent", "agents"), ("gold", "curated")])
    assert _gold(workspace, [agents, people]) == {agents: ["agents"], people: ["curated"]}
    assert _gold(workspace, [agents, people], at_least=CHECKED_BY_PEOPLE) == {people: ["curated"]}
    # Blind re-answering scores against the same people-checked gold.
    data = RaterData(kind=KINDS["blind_reanswer"], items=("i1", "i2"), target_types=("question", "question"),
                     targets=(agents, people), subtypes=("Counting", "Counting"), raters=(), labels=((), ()),
                     annotation_ids=((), ()))
    assert gold_answers(workspace, data) == {"i2": ["curated"]}


def test_an_untrusted_floor_is_refused(workspace):
    with workspace.session() as s, pytest.raises(ValueError, match="never trusted"):
        trusted_answers(s, ["q"], at_least=AnswerStatus.REJECTED)


def test_a_stored_table_comes_back_with_its_metadata(workspace):
    _store_table(workspace)
    with workspace.session() as s:
        record = s.get(TableRecord, TABLE.id)
        table = record.to_table()
        assert tables_by_id(s, [TABLE.id, "absent"]) == {TABLE.id: table}
    assert table == TABLE and table.id == TABLE.id
    assert (table.caption, table.source, table.licence) == ("Norwegian cities", "wiki", "CC0")
    _question(workspace, "Q?", [])
    assert load_items(workspace)[0].table.caption == "Norwegian cities"


def test_answered_questions_list_the_agents_answers_first_then_gold_only_a_page_at_a_time(workspace):
    """The Answers page's list: questions an agent answered come first (it has something to show
    side by side), then questions whose only answer is gold (a probe's, an import's); never a
    question without an answer; a page at a time, every one reachable (``total``)."""
    from tqaforge.queries import answered_questions
    from tqaforge.schemas.records import AnswerCandidate

    _store_table(workspace)
    gold_only = sorted(_question(workspace, f"gold {i}?", [("gold", str(i))]) for i in range(3))
    by_agent = _question(workspace, "zz agents?", [("consistent", "7")])
    unanswered = Question.make_id(TABLE.id, "nothing?", "Counting")
    with workspace.session() as s:
        s.add(Question(id=unanswered, table_id=TABLE.id, text="nothing?", subtype="Counting", status="accepted"))
        s.add(AnswerCandidate(id="c" * 64, question_id=by_agent, method="DP", raw="Final Answer: 7", value="7", values=["7"]))
    everything = answered_questions(workspace)
    assert everything.items == [by_agent, *gold_only] and everything.total == 4
    assert answered_questions(workspace, limit=2).items == [by_agent, gold_only[0]]
    # The pages join up: the second page starts where the first stopped, across the two kinds.
    assert answered_questions(workspace, limit=2, offset=2).items == gold_only[1:]
    assert answered_questions(workspace, limit=2, offset=1).items == gold_only[:2]
    assert answered_questions(workspace, limit=2, offset=4).items == [] and unanswered not in everything.items

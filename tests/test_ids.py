"""The idempotency keys keep their values: existing stores (and the README walkthrough) hold them."""

from __future__ import annotations

import pytest

from tqaforge import ids
from tqaforge.schemas.records import Answer, Question
from tqaforge.tables import content_hash
from tqaforge.tables.table import PackedRows, Table


def test_every_key_keeps_its_value():
    # Computed before the keys moved into tqaforge.ids; a change here orphans stored rows.
    assert content_hash({"k": [1, "é"]}) == "fb46581d40403be212f7624974746bd2"
    assert content_hash("x", 8) == "ba2df490"
    assert ids.question_id("t1", " Which  one? ", "Counting") == "432474812a879acf7d37fa2c2aaf7a93"
    assert ids.question_id("t1", "Which", None, "s1") == "cbe7c42abb47771a094f46bcb1707244"
    assert ids.answer_id("q1", "import", ["1", "2"]) == "dad122f16ed7ec143b4e23b1252ed3af"
    assert ids.candidate_id("q1", "PoT", 0, "m") == ids.content_hash({"question": "q1", "method": "PoT", "sample": 0, "model": "m"})
    assert ids.variant_id("q1", "shuffle_rows", 3) == "7508db2b1222538c258c6e23e7bb1a00"
    assert ids.round_id("Counting", 2) == "58506d745391a93d9a972aa02ed0cfee"
    assert ids.step_id("Counting", 2, "t1") == "6f4584f05725c4fd4a59345653fd980b"
    assert ids.annotation_task_id("question_review", "question", "q1") == "ccc1c916ecc145cd5ba15b528159d214"
    assert ids.annotation_id("task1", "ann", "cli:1") == "544eb7fa66a88ae84dea1ad39c65834e"
    assert ids.adjudication_id("task1") == "7c1b8f6fddc162487365e4de89215b89"
    # A probe's gold is a rule answer, kept apart from a vote (also a rule answer) with the same values.
    assert ids.probe_answer_id("q1", ["7"]) == "8274a8398eed3df72f84ebc9f534e8ab" != ids.answer_id("q1", "rule", ["7"])
    messages = [{"role": "user", "content": "hi"}]
    assert ids.request_id("m", messages, {"temperature": 0.0}, None, 1) == "346ccc9c2ae0bfbc924b85505f23129a"


def test_a_table_id_is_the_content_hash_of_header_and_rows():
    table = Table.build(["a", "é"], [["1", "xé"], ["2", ""]], caption="metadata is not content")
    assert table.id == "354cf61c4741971c53bce421faa74e03"
    assert table.id == content_hash({"header": ["a", "é"], "rows": [["1", "xé"], ["2", ""]]})
    assert Table(table.header, PackedRows(table.rows)).id == table.id  # streamed row by row, same bytes
    assert Table.build(["a"], []).id == content_hash({"header": ["a"], "rows": []})


def test_a_long_table_id_is_the_same_hash_across_its_encoding_batches():
    """Rows are encoded a batch at a time: the seams between batches (and a last short batch)
    give the bytes of the one-shot form."""
    for n in (ids._ROWS_PER_BATCH - 1, ids._ROWS_PER_BATCH, ids._ROWS_PER_BATCH + 1, 3 * ids._ROWS_PER_BATCH + 7):
        rows = [[str(i), "é\n\"" * (i % 3)] for i in range(n)]
        expected = content_hash({"header": ["a", "b"], "rows": rows})
        assert Table.build(["a", "b"], rows).id == expected
        assert Table(("a", "b"), PackedRows(rows)).id == expected


@pytest.mark.parametrize("odd", ["", "\\", "\\u001f", "\x1f", "\x1e", "\u2028", "%", '"'])
def test_a_table_id_hashed_in_one_piece_is_the_content_hash(odd: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables of moderate size are encoded as one JSON string (separators as escapes); cells with
    a backslash or a separator, and large tables, row by row: every way gives the content hash."""
    from tqaforge.tables import table as table_module

    rows = [["1", "x" + odd], [odd, ""], ["é", "a,b"]]
    expected = content_hash({"header": ["h" + odd, "k"], "rows": rows})
    assert Table.build(["h" + odd, "k"], rows).id == expected
    assert Table(("h" + odd, "k"), PackedRows(rows)).id == expected
    monkeypatch.setattr(table_module, "_ONE_PIECE_CELLS", 2)
    assert Table.build(["h" + odd, "k"], rows).id == expected


def test_the_records_make_ids_with_the_same_keys():
    assert Question.make_id("t1", "Which", None, "s1") == ids.question_id("t1", "Which", None, "s1")
    assert Answer.make_id("q1", "import", ["1", "2"]) == ids.answer_id("q1", "import", ["1", "2"])

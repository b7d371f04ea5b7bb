"""Hostile inputs to token counting, the buckets and the table grower: empty tables, one huge
cell, targets the table already meets, targets that are not whole numbers, unknown encodings
and serializations; each a clear error (what, where, what to do), and nothing stored by it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlmodel import func, select
from typer.testing import CliRunner

from tqaforge import queries
from tqaforge.cli import app
from tqaforge.errors import NotFound, TableError, TokenCountError
from tqaforge.ingest import grow_stored_table, import_paths
from tqaforge.queries import ListingError
from tqaforge.schemas.records import TableRecord
from tqaforge.tables.grow import MAX_TARGET_TOKENS, GrowOptions, grow_table
from tqaforge.tables.table import Table
from tqaforge.tables.tokens import (
    bucket_named,
    bucket_of,
    count_tokens,
    encode,
    pick_per_bucket,
    table_tokens,
)

pytestmark = pytest.mark.hostile
runner = CliRunner(env={"COLUMNS": "200"})

SMALL = Table.build(["a", "b"], [["1", "x"], ["2", "y"]])


def test_a_table_without_rows_is_counted_but_not_grown() -> None:
    empty = Table.build(["a", "b"], [])
    assert table_tokens(empty, "markdown") == len(encode("| a | b |\n| --- | --- |"))
    assert table_tokens(empty, "json") == len(encode("{}"))
    with pytest.raises(TableError, match="without rows") as info:
        grow_table(empty, GrowOptions(target_tokens=100, seed=0))
    assert info.value.hint and "at least one data row" in info.value.hint


def test_one_huge_cell_is_counted_past_the_tokenizers_limits() -> None:
    # Every added " hello world" is two more tokens (one token a word, a new token at each space):
    # the count of the huge cell follows from the count of a small one.
    def table(n: int) -> Table:
        return Table.build(["text"], [[" ".join(["hello world"] * n)]])

    n = 150_000  # 1.8 million characters in one cell, 300,000 tokens
    for fmt in ("markdown", "csv", "json", "html"):
        assert table_tokens(table(n), fmt) == table_tokens(table(1), fmt) + 2 * (n - 1), fmt


def test_one_huge_word_is_counted_without_an_error() -> None:
    # Two million characters with no place where the tokenizer always cuts: counted in pieces of
    # 50,000 characters; "x" * 50,000 is a whole number of tokens, so the pieces add up exactly.
    cell = "x" * 2_000_000
    assert count_tokens(cell) == 40 * len(encode("x" * 50_000))
    n = table_tokens(Table.build(["a"], [[cell]]))
    assert bucket_of(n).name == ">32k"
    with pytest.raises(TokenCountError, match="already has"):
        grow_table(Table.build(["a"], [[cell]]), GrowOptions(target_tokens=40_000, seed=0))


def test_special_token_spellings_are_plain_text() -> None:
    # "<|endoftext|>" in a cell is text like any other (tiktoken's encode() would refuse it).
    table = Table.build(["a"], [["<|endoftext|>"]])
    assert table_tokens(table) > 3
    assert 100257 not in encode("<|endoftext|>")


@pytest.mark.parametrize("target", [4.5, "40000", True, None, 40000.0])
def test_a_target_that_is_not_a_whole_number_is_refused(target: object) -> None:
    with pytest.raises(TokenCountError, match="whole number") as info:
        GrowOptions(target_tokens=target, seed=0)  # type: ignore[arg-type]
    assert info.value.hint


@pytest.mark.parametrize(("field", "value"), [("target_tokens", -1), ("seed", -3)])
def test_negative_targets_and_seeds_are_refused(field: str, value: int) -> None:
    kwargs = {"target_tokens": 100, "seed": 0, field: value}
    with pytest.raises(TokenCountError, match="negative"):
        GrowOptions(**kwargs)  # type: ignore[arg-type]


def test_a_target_past_the_limit_is_refused() -> None:
    with pytest.raises(TokenCountError, match="above the limit"):
        GrowOptions(target_tokens=MAX_TARGET_TOKENS + 1, seed=0)


def test_a_target_the_table_already_meets_is_refused() -> None:
    n = table_tokens(SMALL)
    for target in (0, n - 1, n):
        with pytest.raises(TokenCountError, match=f"already has {n} tokens") as info:
            grow_table(SMALL, GrowOptions(target_tokens=target, seed=0))
        assert info.value.hint and f"more than {n}" in info.value.hint
    assert table_tokens(grow_table(SMALL, GrowOptions(target_tokens=n + 1, seed=0)).table) > n


@pytest.mark.parametrize("name", ["gpt2", "p50k_base", "voyage3_base", "CL100K_BASE", "", "../cl100k_base"])
def test_unknown_encodings_are_refused_with_the_known_ones(name: str) -> None:
    with pytest.raises(TokenCountError, match="unknown token encoding") as info:
        count_tokens("x", name)
    assert info.value.hint and "cl100k_base" in info.value.hint and "o200k_base" in info.value.hint
    with pytest.raises(TokenCountError):
        GrowOptions(target_tokens=100, seed=0, encoding=name)


def test_unknown_serializations_and_buckets_are_refused() -> None:
    with pytest.raises(TokenCountError, match="unknown serialization") as info:
        table_tokens(SMALL, "yaml")
    assert info.value.hint and "markdown" in info.value.hint
    with pytest.raises(TokenCountError, match="unknown token bucket"):
        bucket_named("64k")
    with pytest.raises(TokenCountError, match="unknown token bucket"):
        pick_per_bucket({"a": 1}, 1, 0, buckets=["huge"])


@pytest.mark.parametrize("n", [-1, 2.5, "10", False])
def test_bucket_of_a_count_that_is_not_a_count(n: object) -> None:
    with pytest.raises(TokenCountError):
        bucket_of(n)  # type: ignore[arg-type]


def test_picks_refuse_bad_numbers() -> None:
    with pytest.raises(TokenCountError, match="negative"):
        pick_per_bucket({"a": 1}, -1, 0)
    with pytest.raises(TokenCountError, match="whole number"):
        pick_per_bucket({"a": 1}, 1, 1.5)  # type: ignore[arg-type]


def test_counting_something_that_is_not_text() -> None:
    with pytest.raises(TokenCountError, match="not of bytes"):
        count_tokens(b"hello")  # type: ignore[arg-type]


def test_a_blank_source_row_column_name_is_refused() -> None:
    with pytest.raises(TableError, match="needs a name"):
        GrowOptions(target_tokens=100, seed=0, id_column="  ")


# ---- the store and the commands -------------------------------------------------------------

def _tables(ws) -> int:
    with ws.session() as s:
        return s.exec(select(func.count()).select_from(TableRecord)).one()


@pytest.fixture
def small_workspace(sqlite_workspace, tmp_path: Path):
    path = tmp_path / "small.csv"
    path.write_text("a,b\n1,x\n2,y\n", encoding="utf-8")
    assert import_paths(sqlite_workspace, [path]).total("tables_new") == 1
    return sqlite_workspace


def test_growing_an_unknown_table_stores_nothing(small_workspace) -> None:
    with pytest.raises(NotFound, match="no TableRecord with id"):
        grow_stored_table(small_workspace, "ffffffff", GrowOptions(target_tokens=100, seed=0))
    with pytest.raises(TokenCountError, match="already has"):
        grow_stored_table(small_workspace, SMALL.id, GrowOptions(target_tokens=5, seed=0))
    assert _tables(small_workspace) == 1


def test_listing_refuses_impossible_token_windows(small_workspace) -> None:
    with pytest.raises(ListingError, match="above --tokens-max") as info:
        queries.list_tables(small_workspace, tokens_min=10, tokens_max=5)
    assert info.value.hint
    with pytest.raises(TokenCountError, match="--tokens-min must not be negative"):
        queries.list_tables(small_workspace, tokens_min=-1)
    with pytest.raises(TokenCountError, match="unknown token encoding"):
        queries.list_tables(small_workspace, encoding="gpt2")
    # Ids of tables not in this workspace are left out, even when this process counted them.
    other = Table.build(["z"], [["1"]])
    assert queries.table_token_counts(small_workspace, table_ids=[other.id, SMALL.id]) == {SMALL.id: table_tokens(SMALL)}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["tables", "grow", "TID", "--tokens", "-5", "--seed", "1"], "must not be negative"),
        (["tables", "grow", "TID", "--tokens", "5", "--seed", "1"], "already has"),
        (["tables", "grow", "TID", "--tokens", "500", "--seed", "1", "--encoding", "gpt2"], "unknown token encoding"),
        (["tables", "grow", "TID", "--tokens", "500", "--seed", "1", "-f", "yaml"], "unknown serialization"),
        (["tables", "grow", "nope", "--tokens", "500", "--seed", "1"], "no TableRecord"),
        (["tables", "list", "--tokens-min", "9", "--tokens-max", "3"], "above --tokens-max"),
        (["tables", "list", "--encoding", "r50k_base"], "unknown token encoding"),
        (["tables", "stats", "-f", "yaml"], "unknown serialization"),
    ],
)
def test_commands_say_what_is_wrong(small_workspace, args: list[str], message: str) -> None:
    args = [SMALL.id if a == "TID" else a for a in args]
    result = runner.invoke(app, [*args, "--workspace", str(small_workspace.root)])
    assert result.exit_code == 1, result.output
    assert message in result.output and "Traceback" not in result.output
    assert _tables(small_workspace) == 1


@pytest.mark.parametrize("tokens", ["4e4", "forty", "40k", ""])
def test_a_target_that_is_not_a_number_is_a_usage_error(small_workspace, tokens: str) -> None:
    result = runner.invoke(app, ["tables", "grow", SMALL.id, "--tokens", tokens, "--seed", "1", "-w", str(small_workspace.root)])
    assert result.exit_code == 2 and "--tokens" in result.output
    assert _tables(small_workspace) == 1


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{not json",
        "[1, 2]",
        '{"format": 1, "code": "CODE", "counts": [1]}',
        '{"format": 99, "code": "CODE", "counts": {"TID": 1}}',
        '{"format": 1, "code": "CODE", "counts": {"TID": -5}}',
        '{"format": 1, "code": "CODE", "counts": {"TID": "7"}}',
        '{"format": 1, "code": "CODE", "counts": {"TID": true}}',
        '{"format": 1, "code": "CODE", "counts": {"TID": 1.5}}',
    ],
)
def test_a_damaged_token_cache_file_is_counted_again_and_replaced(small_workspace, monkeypatch: pytest.MonkeyPatch,
                                                                  text: str) -> None:
    monkeypatch.setattr(queries, "_TOKEN_COUNTS", {})
    path = small_workspace.paths.cache / "tokens" / "cl100k_base-markdown.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.replace("CODE", queries._token_code_key()).replace("TID", SMALL.id), encoding="utf-8")
    assert queries.table_token_counts(small_workspace) == {SMALL.id: table_tokens(SMALL)}
    assert json.loads(path.read_text(encoding="utf-8"))["counts"] == {SMALL.id: table_tokens(SMALL)}


def test_a_workspace_whose_cache_cannot_be_written_still_counts(small_workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(queries, "_TOKEN_COUNTS", {})
    small_workspace.paths.cache.mkdir(exist_ok=True)
    (small_workspace.paths.cache / "tokens").write_text("a file where the folder should be", encoding="utf-8")
    assert queries.table_token_counts(small_workspace) == {SMALL.id: table_tokens(SMALL)}

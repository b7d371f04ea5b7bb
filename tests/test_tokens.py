"""Token length of tables (bpe-openai, offline): counts against tiktoken's published token ids,
exact counting of long texts in pieces, the capability-based TableBench's buckets and their
bounds, picks per bucket, the table grower, and the listing, stats and grow commands."""

from __future__ import annotations

import json
import os
import random
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlmodel import select
from typer.testing import CliRunner

from tqaforge import queries
from tqaforge.cli import app
from tqaforge.ingest import grow_stored_table, import_paths
from tqaforge.schemas.records import TableRecord
from tqaforge.tables import tokens
from tqaforge.tables.grow import GrowOptions, grow_table
from tqaforge.tables.serialize import SERIALIZATIONS, serialize
from tqaforge.tables.table import Table
from tqaforge.tables.tokens import (
    BUCKET_NAMES,
    BUCKETS,
    ENCODINGS,
    bucket_of,
    count_tokens,
    decode,
    encode,
    pick_per_bucket,
    table_tokens,
)

runner = CliRunner(env={"COLUMNS": "200"})
REPO = Path(__file__).resolve().parents[1]

# Token ids published in tiktoken's own tests (openai/tiktoken, tests/test_encoding.py:
# test_simple, test_simple_regex, test_basic_encode, test_encode_surrogate_pairs), for cl100k_base.
CL100K_REFERENCE = [
    ("hello world", [15339, 1917]),
    ("rer", [38149]),
    ("'rer", [2351, 81]),
    ("today\n ", [31213, 198, 220]),
    ("today\n \n", [31213, 27907]),
    ("today\n  \n", [31213, 14211]),
    (" \x850", [220, 126, 227, 15]),
    ("👍", [9468, 239, 235]),
    ("\ud83d\udc4d", [9468, 239, 235]),  # a surrogate pair is the code point it stands for
]
# The round-trip texts of tiktoken's test_basic_roundtrip, and a few table-like ones.
ROUND_TRIP = [
    "hello", "hello ", "hello  ", " hello", " hello ", " hello  ", "hello world", "请考试我的软件！12345",
    "| a | b |\n| --- | --- |\n| 1 | 2 |", "<table>\n<tr><td>x&amp;y</td></tr>\n</table>", "", "\n\n\n", "a,b\r\n1,2",
]


@pytest.mark.parametrize(("text", "ids"), CL100K_REFERENCE)
def test_cl100k_ids_are_tiktokens_published_ones(text: str, ids: list[int]) -> None:
    assert encode(text, "cl100k_base") == ids
    assert count_tokens(text, "cl100k_base") == len(ids)
    assert count_tokens(text) == len(ids)  # cl100k_base is the default


def test_a_lone_surrogate_counts_as_the_replacement_character() -> None:
    # tiktoken's test_encode_surrogate_pairs: a lone surrogate is replaced by U+FFFD.
    assert encode("\ud83d") == encode("\ufffd")


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize("text", ROUND_TRIP)
def test_decode_inverts_encode(name: str, text: str) -> None:
    assert decode(encode(text, name), name) == text
    assert count_tokens(text, name) == len(encode(text, name))


@pytest.mark.parametrize("module", ["tqaforge.tables.tokens", "tqaforge.tables.grow"])
def test_docstring_examples(module: str) -> None:
    import doctest
    import importlib

    failures, tried = doctest.testmod(importlib.import_module(module))
    assert failures == 0 and tried > 0


def test_the_encodings_differ() -> None:
    # o200k_base has a larger vocabulary: the same text gets other ids (a mix-up would pass unseen).
    assert encode("hello world", "o200k_base") != encode("hello world", "cl100k_base")


def test_a_long_text_is_counted_exactly_past_the_tokenizers_limits() -> None:
    # "hello", " hello" and " world" are one token each in cl100k_base, and a space before a word
    # always starts a new token: n words make n tokens, far past the 1,000,000 characters and
    # 200,000 tokens the tokenizer takes in one call.
    assert [len(encode(w)) for w in ("hello", " hello", " world")] == [1, 1, 1]
    n = 120_000
    text = " ".join(["hello world"] * n)
    assert len(text) > 1_000_000
    assert count_tokens(text) == 2 * n


# Texts made of what tables are made of: words, numbers, separators, line ends, slashes.
TABLE_TEXT = st.lists(
    st.sampled_from([" ", "  ", "\n", "\r\n", "/", "|", "a", "Bc", "1", "23", ",", "'s", "é", "世", "😀", "\t", "-", "<"]),
    max_size=60,
).map("".join)


@given(TABLE_TEXT, st.integers(0, 10_000), st.sampled_from(ENCODINGS))
def test_every_cut_point_splits_the_count_exactly(text: str, pick: int, name: str) -> None:
    """Where :func:`count_tokens` cuts a long text, the two parts count as much as the whole."""
    cuts = [m.end() for m in tokens._CUT.finditer(text)]
    if not cuts:
        return
    cut = cuts[pick % len(cuts)]
    assert len(encode(text[:cut], name)) + len(encode(text[cut:], name)) == len(encode(text, name))


@given(TABLE_TEXT, st.integers(2, 12), st.sampled_from(ENCODINGS))
def test_pieces_put_back_together_are_the_text(text: str, size: int, name: str) -> None:
    pieces = list(tokens._pieces(text, size))
    assert "".join(pieces) == text
    assert all(len(p) <= size for p in pieces)
    # Where every piece ends at a cut point, the count in pieces is the count of the whole.
    ends = {m.end() for m in tokens._CUT.finditer(text)}
    positions, at = [], 0
    for p in pieces[:-1]:
        at += len(p)
        positions.append(at)
    if all(p in ends for p in positions):
        assert count_tokens(text, name, _piece=size) == len(encode(text, name))


def test_serialized_tables_are_counted_exactly_in_small_pieces() -> None:
    """Every serialization of a table with words and numbers, counted in pieces of 60 characters,
    gives the count of the whole text (cut points are frequent in every format)."""
    rng = random.Random(3)
    words = ["Oslo", "New York", "1,234", "3.5", "n/a", "São Paulo", "x|y", "2019-01-02"]
    table = Table.build(["city", "pop", "note"], [[rng.choice(words) for _ in range(3)] for _ in range(40)])
    for fmt in SERIALIZATIONS:
        text = serialize(table, fmt)
        for name in ENCODINGS:
            assert count_tokens(text, name, _piece=60) == len(encode(text, name)), fmt


def test_table_tokens_counts_the_serialization() -> None:
    table = Table.build(["a", "b"], [["1", "2"]])
    # Markdown as serialize writes it, spelled out by hand.
    assert table_tokens(table, "markdown") == len(encode("| a | b |\n| --- | --- |\n| 1 | 2 |"))
    assert table_tokens(table) == table_tokens(table, "markdown")  # markdown is the default
    assert table_tokens(table, "csv", "o200k_base") == len(encode("a,b\r\n1,2", "o200k_base"))


# ---- buckets ---------------------------------------------------------------------------------

BOUNDARIES = [
    (0, "<4k"), (1, "<4k"), (4095, "<4k"), (4096, "4-8k"), (8191, "4-8k"), (8192, "8-16k"), (16383, "8-16k"),
    (16384, "16-32k"), (32767, "16-32k"), (32768, ">32k"), (10**9, ">32k"),
]


@pytest.mark.parametrize(("n", "name"), BOUNDARIES)
def test_bucket_bounds_are_powers_of_two_lower_bound_inclusive(n: int, name: str) -> None:
    assert bucket_of(n).name == name


def test_buckets_tile_the_counts() -> None:
    assert BUCKET_NAMES == ("<4k", "4-8k", "8-16k", "16-32k", ">32k")
    assert BUCKETS[0].low == 0 and BUCKETS[-1].high is None
    for before, after in zip(BUCKETS, BUCKETS[1:]):
        assert before.high == after.low


def test_picks_per_bucket_are_seeded_capped_and_order_free() -> None:
    rng = random.Random(0)
    counts = {f"t{i:03d}": rng.choice([100, 5000, 9000, 20000, 40000]) + i for i in range(200)}
    picked = pick_per_bucket(counts, 5, seed=11)
    assert list(picked) == list(BUCKET_NAMES)
    for name, ids in picked.items():
        in_bucket = sorted(i for i, n in counts.items() if bucket_of(n).name == name)
        assert len(ids) == min(5, len(in_bucket)) and set(ids) <= set(in_bucket) and ids == sorted(ids)
    shuffled = dict(sorted(counts.items(), key=lambda kv: rng.random()))
    assert pick_per_bucket(shuffled, 5, seed=11) == picked
    assert any(pick_per_bucket(counts, 5, seed=s) != picked for s in range(12, 20))
    # A bucket with fewer tables than asked gives all of them; buckets can be chosen.
    few = pick_per_bucket({"a": 10, "b": 40000}, 3, seed=0, buckets=[">32k", "<4k"])
    assert few == {"<4k": ["a"], ">32k": ["b"]}


# ---- growing ---------------------------------------------------------------------------------

SMALL = Table.build(
    ["city", "country", "population"],
    [["Oslo", "Norway", "709000"], ["Bergen", "Norway", "285900"], ["Lyon", "France", "522000"],
     ["Porto", "Portugal", "231800"]],
    source="a test",
)


def test_grown_table_passes_32k_and_traces_every_row() -> None:
    options = GrowOptions(target_tokens=33_000, seed=5)
    grown = grow_table(SMALL, options)
    assert grown.table.header == ("source_row", *SMALL.header)
    assert grown.tokens == table_tokens(grown.table) >= 33_000
    assert bucket_of(grown.tokens).name == ">32k"
    # Each row is the source row its first cell names, and the rows are the seed's draw.
    rng = random.Random(5)
    assert list(grown.source_rows) == [rng.randrange(SMALL.n_rows) for _ in range(grown.table.n_rows)]
    for row, source_row in zip(grown.table.rows, grown.source_rows):
        assert row[0] == str(source_row) and row[1:] == SMALL.rows[source_row]
    # The shortest such table: one row fewer is short of the target.
    shorter = Table(grown.table.header, grown.table.rows[:-1])
    assert table_tokens(shorter) < 33_000


def test_growing_is_deterministic_and_the_seed_matters() -> None:
    options = GrowOptions(target_tokens=5000, seed=9, serialization="json", encoding="o200k_base")
    first, again = grow_table(SMALL, options), grow_table(SMALL, options)
    assert first.table.id == again.table.id and first.source_rows == again.source_rows
    assert grow_table(SMALL, GrowOptions(target_tokens=5000, seed=10, serialization="json", encoding="o200k_base")).table.id != first.table.id
    assert table_tokens(first.table, "json", "o200k_base") >= 5000


def test_the_source_row_column_never_takes_a_header_name() -> None:
    table = Table.build(["source_row", "v"], [["a", "1"], ["b", "2"]])
    grown = grow_table(table, GrowOptions(target_tokens=300, seed=0))
    assert grown.table.header == ("source_row_1", "source_row", "v")
    bare = grow_table(table, GrowOptions(target_tokens=300, seed=0, id_column=None))
    assert bare.table.header == table.header
    assert all(row == table.rows[i] for row, i in zip(bare.table.rows, bare.source_rows))


# ---- the store and the commands -------------------------------------------------------------

def _write_csv(path: Path, n_rows: int, width: int = 1) -> Path:
    lines = ["name,value,note"] + [f"item {i},{i * 7},{'word ' * width}" for i in range(n_rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def token_workspace(workspace, tmp_path: Path):
    """Three tables of about 300, 5,000 and 9,000 markdown tokens."""
    paths = [_write_csv(tmp_path / f"t{n}.csv", n, w) for n, w in ((20, 1), (150, 20), (250, 30))]
    summary = import_paths(workspace, paths)
    assert summary.total("tables_new") == 3
    return workspace


def test_listing_filters_by_tokens_inclusive(token_workspace) -> None:
    ws = token_workspace
    counts = queries.table_token_counts(ws)
    with ws.session() as s:
        tables = {r.id: r.to_table() for r in s.exec(select(TableRecord)).all()}
    assert counts == {i: table_tokens(t) for i, t in tables.items()}
    assert sorted(bucket_of(n).name for n in counts.values()) == ["4-8k", "8-16k", "<4k"]
    middle = sorted(counts.values())[1]
    page = queries.list_tables(ws, tokens_min=middle, tokens_max=middle)
    assert [r.tokens for r in page.items] == [middle] and page.total == 1
    page = queries.list_tables(ws, tokens_min=middle, limit=1, offset=1)
    assert page.total == 2 and len(page.items) == 1 and page.items[0].tokens == max(counts.values())
    # Another serialization, another count; without a token option, no count at all.
    json_page = queries.list_tables(ws, serialization="json")
    assert {r.id: r.tokens for r in json_page.items} == {i: table_tokens(t, "json") for i, t in tables.items()}
    assert all(r.tokens is None for r in queries.list_tables(ws).items)


def test_stats_buckets_and_large_table_picks(token_workspace) -> None:
    ws = token_workspace
    summary = queries.token_buckets(ws, serializations=["markdown", "csv"])
    assert summary.tables == 3
    counts = queries.table_token_counts(ws, serialization="csv")
    for name in BUCKET_NAMES:
        assert summary.count("csv", name) == sum(bucket_of(n).name == name for n in counts.values())
    assert [summary.count("markdown", name) for name in BUCKET_NAMES] == [1, 1, 1, 0, 0]
    assert summary.as_dict()["counts"]["markdown"]["4-8k"]["tables"] == 1
    picks = queries.pick_large_tables(ws, per_bucket=1, seed=3)
    assert [p.bucket for p in picks] == ["<4k", "4-8k", "8-16k"]
    assert picks == queries.pick_large_tables(ws, per_bucket=1, seed=3)
    md = queries.table_token_counts(ws)
    assert all(md[p.table_id] == p.tokens and bucket_of(p.tokens).name == p.bucket for p in picks)


def test_grow_stores_a_new_table_once_that_names_its_origin(token_workspace) -> None:
    ws = token_workspace
    counts = queries.table_token_counts(ws)
    smallest = min(counts, key=counts.__getitem__)
    options = GrowOptions(target_tokens=33_000, seed=4)
    first = grow_stored_table(ws, smallest[:10], options)
    again = grow_stored_table(ws, smallest, options)
    assert first.new and not again.new and first.table_id == again.table_id
    with ws.session() as s:
        record = s.get(TableRecord, first.table_id)
        assert record is not None and record.origin == "rule"
        assert record.source is not None and smallest in record.source and "seed 4" in record.source
        assert record.n_rows == first.rows
        source = s.get(TableRecord, smallest).to_table()
        grown = record.to_table()
    assert all(row[1:] == source.rows[int(row[0])] for row in grown.rows)
    assert queries.table_token_counts(ws, table_ids=[first.table_id]) == {first.table_id: first.tokens}
    assert first.tokens >= 33_000
    picks = queries.pick_large_tables(ws, per_bucket=2, seed=0, buckets=[">32k"])
    assert [p.table_id for p in picks] == [first.table_id]


def test_commands(token_workspace) -> None:
    ws = token_workspace
    w = ["--workspace", str(ws.root)]
    counts = queries.table_token_counts(ws)
    smallest = min(counts, key=counts.__getitem__)
    listed = runner.invoke(app, ["tables", "list", *w, "--tokens-min", "4096"])
    assert listed.exit_code == 0, listed.output
    assert "tokens" in listed.output and "2 of 2 tables" in listed.output
    assert all(str(n) in listed.output for n in counts.values() if n >= 4096)
    stats = runner.invoke(app, ["tables", "stats", *w, "-f", "markdown", "-f", "csv"])
    assert stats.exit_code == 0, stats.output
    assert re.search(r"^4-8k\s+1 \(", stats.output, re.M) and "cl100k_base" in stats.output
    grown = runner.invoke(app, ["tables", "grow", smallest[:10], *w, "--tokens", "40000", "--seed", "1"])
    assert grown.exit_code == 0, grown.output
    assert "stored as table" in grown.output
    big = runner.invoke(app, ["tables", "list", *w, "--tokens-min", "32768"])
    assert "1 of 1 tables" in big.output and "grown from" in big.output


def test_the_readme_token_commands_run(sqlite_workspace) -> None:
    """Each command of the README's "Token length" subsection runs as written (in this process,
    on the shipped tables: the walkthrough's workspace after its import)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n### Token length", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "README: no ```bash block under ### Token length"
    import_paths(sqlite_workspace, [REPO / "data" / "tables", REPO / "data" / "sample"])
    outputs = []
    for line in block.group(1).splitlines():
        argv = shlex.split(line, comments=True)
        assert argv[0] == "tqaforge", line
        result = runner.invoke(app, [*argv[1:], "--workspace", str(sqlite_workspace.root)])
        assert result.exit_code == 0, f"{line}\n{result.output}"
        outputs.append(result.output)
    text = "\n".join(outputs)
    assert re.search(r"grew table 21b9e03ef6b5 \(\d+ tokens\) to \d+ rows, \d+ tokens", text)
    assert "1 of 1 tables" in text and '"encoding": "o200k_base"' in text
    assert re.search(r"16-32k +1 table \(\d+-\d+ tokens\), 3 new probes, 0 already stored; no other table was this large", text)
    assert re.search(r">32k +1 table \(\d+-\d+ tokens\), 3 new probes", text)  # the table grown above, not grown again


def test_counting_needs_no_network(tmp_path: Path) -> None:
    """A fresh process with sockets disabled and empty caches counts tokens: the encodings ship
    inside the package."""
    code = (
        "import socket\n"
        "def refuse(*a, **k): raise OSError('no network in this test')\n"
        "socket.socket = refuse; socket.create_connection = refuse; socket.getaddrinfo = refuse\n"
        "from tqaforge.tables.tokens import encode\n"
        "print(encode('hello world'), encode('hello world', 'o200k_base') != [15339, 1917])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path),
           "TIKTOKEN_CACHE_DIR": str(tmp_path / "none"), "DATA_GYM_CACHE_DIR": str(tmp_path / "none")}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[15339, 1917] True"


def test_counts_are_kept_in_the_workspace_for_the_next_process(token_workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = token_workspace
    monkeypatch.setattr(queries, "_TOKEN_COUNTS", {})  # tables of the same cells may be counted by an earlier test
    counts = queries.table_token_counts(ws, serialization="latex")
    path = ws.paths.cache / "tokens" / "cl100k_base-latex.json"
    assert json.loads(path.read_text(encoding="utf-8"))["counts"] == counts
    # A new process: nothing in memory; the file answers, nothing is counted again.
    monkeypatch.setattr(queries, "_TOKEN_COUNTS", {})

    def no_counting(*args: object) -> int:
        raise AssertionError("counted again")

    monkeypatch.setattr(queries, "table_tokens", no_counting)
    assert queries.table_token_counts(ws, serialization="latex") == counts
    # Code that counts differently (another tokenizer version, say) does not read the file.
    monkeypatch.setattr(queries, "_TOKEN_COUNTS", {})
    monkeypatch.setattr(queries, "_token_code_key", lambda: "other code")
    with pytest.raises(AssertionError, match="counted again"):
        queries.table_token_counts(ws, serialization="latex")

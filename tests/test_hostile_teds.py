"""Hostile input to commanding items and TEDS: garbage replies, huge tables, unbalanced HTML, JSON
that is no table, code in a DataFrame reply, bad lines of a commanding JSONL file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cpu_clock import cpu_now

from tqaforge.errors import ReaderError
from tqaforge.evaluate.predictions import Prediction, Reference
from tqaforge.evaluate.scoring import metric_name, score_one
from tqaforge.evaluate.tablebench import percent
from tqaforge.tables.commanding import canonical_table_text
from tqaforge.tables.parse_table import MAX_REPLY_CHARS, TableParseError, parse_table
from tqaforge.tables.readers import read_path
from tqaforge.tables.serialize import serialize
from tqaforge.tables.table import Table
from tqaforge.tables.teds import TedsTooLarge, teds

pytestmark = pytest.mark.hostile

TARGET = Table.build(["name", "age"], [["Ann", "26"], ["Bo", "34"]])


def _ref(target: Table = TARGET) -> Reference:
    return Reference(id="r1", subset="base", item_id="r1", config="base", qtype="", qsubtype="Commanding",
                     answer=(canonical_table_text(target),), answer_text=canonical_table_text(target), row=0)


def _score(reply: str, target: Table = TARGET) -> tuple[float, bool, float | None]:
    s = score_one(_ref(target), Prediction(id="r1", model="m", method="DP", text=reply, line=1), {})
    return s.score, s.tb_parsed, s.teds_structure


@pytest.mark.parametrize("reply", [
    "", "   \n\t", "I am sorry, I cannot do that.", "\x00\x01\x02" * 100, "```\n```", "| not | a table",
    "{}", "[]", "[1, 2, 3]", '{"name": "Ann", "age": 26}', '"just a string"', "null", "[[[[[[[[[[" * 50,
    "{" * 5000, "pd.DataFrame(", "pd.DataFrame(__import__('os').system('touch /tmp/pwned-teds'))",
    "\\begin{tabular}", "<Table>", "col : ", "\ud800 lone surrogate",
])
def test_garbage_replies_score_zero_and_say_so(reply: str) -> None:
    assert _score(reply) == (0.0, False, 0.0)
    with pytest.raises(TableParseError, match="no table|empty"):
        parse_table(reply)
    assert not Path("/tmp/pwned-teds").exists()


def test_code_in_a_dataframe_reply_is_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    reply = f'pd.DataFrame({{"a": [__import__("pathlib").Path({str(marker)!r}).touch()]}})'
    with pytest.raises(TableParseError):
        parse_table(reply)
    assert not marker.exists()


def test_unbalanced_html_is_read_as_browsers_read_it() -> None:
    reply = "Here: <table><tr><th>name<th>age<tr><td>Ann<td>26<tr><td>Bo<td>34"  # no end tags at all
    assert parse_table(reply).table() == TARGET
    assert _score(reply) == (1.0, True, 1.0)
    closing_only = "</td></tr></table></table>"
    with pytest.raises(TableParseError):
        parse_table(closing_only)
    nested = "<table><tr><td>a<table><tr><td>inner</td></tr></table></td></tr></table>"
    assert parse_table(nested).layout.head[0][0].text == "a"  # the outer table; the inner one's text apart


def test_spans_that_lie_are_clamped() -> None:
    layout = parse_table('<table><tr><td colspan="999999999">a</td><td rowspan="-5">b</td><td colspan="x">c</td></tr></table>').layout
    assert [(c.colspan, c.rowspan) for c in layout.head[0]] == [(1000, 1), (1, 1), (1, 1)]


@pytest.mark.parametrize("reply", [
    '{"header": "name", "rows": 3}', '{"header": ["a"], "rows": [[{"x": 1}]]}', '[{"a": [1, 2]}]', '[["a"], 3]',
    '{"columns": null, "data": []}', '{"a": 1}', "[true, false]",
])
def test_json_that_is_no_table_is_refused(reply: str) -> None:
    with pytest.raises(TableParseError, match="no table"):
        parse_table(reply, "json")


def test_a_ragged_reply_is_scored_not_refused() -> None:
    reply = "| name | age |\n| --- | --- |\n| Ann | 26 | extra |\n| Bo |"
    score, parsed, structure = _score(reply)
    assert parsed and 0 < score < 1 and structure is not None and 0 < structure < 1
    with pytest.raises(TableParseError, match="differ in length"):
        parse_table(reply).table()


def test_huge_tables_are_refused_by_teds_and_scored_zero_quickly() -> None:
    huge = Table.build(["a", "b", "c"], [[str(i), "x", "y"] for i in range(20_000)])
    reply = serialize(huge, "markdown")
    start = cpu_now()
    parsed = parse_table(reply)
    assert len(parsed.layout.body) == 20_000
    with pytest.raises(TedsTooLarge, match="too large for TEDS"):
        teds(parsed.layout, TARGET)
    assert _score(reply) == (0.0, True, 0.0)
    assert cpu_now() - start < 30


def test_a_reply_beyond_the_limit_is_not_searched() -> None:
    with pytest.raises(TableParseError, match="more than"):
        parse_table("x" * (MAX_REPLY_CHARS + 1))


@pytest.mark.parametrize("reply", [
    "[" * 100_000, "{" * 100_000, "```\n" * 100_000, "```x\n" * 100_000, "pd.DataFrame(" * 20_000, "col : " + " row 1 : " * 50_000,
    "| a |\n" * 100_000, "+--+\n" * 100_000, "<table>" * 50_000, "<Table><Row>" * 50_000, ",\n" * 50_000,
])
def test_hostile_replies_are_read_in_linear_time(reply: str) -> None:
    start = cpu_now()
    try:
        parse_table(reply)
    except TableParseError:
        pass
    assert cpu_now() - start < 10, reply[:20]


def test_the_metric_of_a_table_gold_is_teds() -> None:
    assert metric_name(_ref()) == "TEDS"
    assert percent([_score(serialize(TARGET, "latex"))[0]]) == 100.0


def _line(**fields: object) -> str:
    base: dict[str, object] = {"id": "e1", "instruction": "Remove the column 'age'.",
                               "source_table": {"header": ["name", "age"], "rows": [["Ann", "26"]]},
                               "target_table": {"header": ["name"], "rows": [["Ann"]]}}
    base.update(fields)
    return json.dumps({k: v for k, v in base.items() if v is not ...})


@pytest.mark.parametrize(("second", "message"), [
    ("{not json", "line 2"),
    ("[1, 2]", "a JSON list where a question object was expected"),
    (_line(id="e2", instruction=...), "missing key(s) 'instruction'"),
    (_line(id="e2", target_table=...), "missing key(s) 'target_table'"),
    (_line(id="e1"), "the id 'e1' is already the id of line 1"),
    (_line(id=["x"]), "'id' is a list"),
    (_line(id="e2", instruction=""), "'instruction' is empty"),
    (_line(id="e2", instruction=7), "'instruction' is a number"),
    (_line(id="e2", source_table=[["name"], ["Ann"]]), "'source_table' is a list, not a table object"),
    (_line(id="e2", target_table={"header": ["name"], "rows": [["Ann", "extra"]]}), "line 2"),
    (_line(id="e2", target_table={"header": ["name"], "rows": [[{"x": 1}]]}), "not a cell value"),
    (_line(id="e2", source_table={"header": [], "rows": []}), "line 2"),
])
def test_bad_lines_of_a_commanding_file_name_the_line(tmp_path: Path, second: str, message: str) -> None:
    path = tmp_path / "edits.jsonl"
    path.write_text(_line() + "\n" + second + "\n")
    with pytest.raises(ReaderError) as caught:
        read_path(path, "commanding")
    assert message in str(caught.value)
    assert caught.value.line == 2


def test_an_empty_commanding_file_and_an_unknown_jsonl_are_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(ReaderError, match="no commanding items"):
        read_path(empty, "commanding")
    other = tmp_path / "other.jsonl"
    other.write_text('{"instruction": "x"}\n')
    with pytest.raises(ReaderError, match="commanding"):
        read_path(other)

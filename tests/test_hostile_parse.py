"""Hostile replies to the answer parser: no final line, no code block, several code blocks, garbage,
binary, huge, NUL bytes, lone surrogates, only whitespace. Each is unparsed with a reason, never an
exception, and huge input stays linear."""

from __future__ import annotations

import pytest
from cpu_clock import cpu_now

from tqaforge.answers.parse import answer_from_output, final_answer_line, parse_reply, python_blocks, scot_steps, split_answer
from tqaforge.tables.matching import AnswerRule, normalize_answer, same_answer

pytestmark = pytest.mark.hostile

METHODS = ("DP", "TCoT", "SCoT", "PoT")
MB = 1_000_000


def _check(text: str, dp_error: str | None, pot_error: str | None) -> None:
    for method in METHODS:
        parsed = parse_reply(method, text)
        expected = pot_error if method == "PoT" else dp_error
        assert parsed.error == expected, (method, parsed.error)
        assert parsed.values == () or parsed.error is None


@pytest.mark.parametrize(
    ("text", "dp_error", "pot_error"),
    [
        ("", "reply is empty", "reply is empty"),
        (" \t\r\n\u00a0 \n", "reply is empty", "reply is empty"),
        ("\x00\x00\x00", "reply is empty", "reply is empty"),
        ("\ud800\udfff\ud800", "reply is empty", "reply is empty"),
        ("The answer is 42.", "no 'Final Answer:' line", "no python code block"),
        ("I cannot answer this question.", "no 'Final Answer:' line", "no python code block"),
        ("Final Answer:", "the 'Final Answer:' line is empty", "no python code block"),
        ("Final Answer: **", "the 'Final Answer:' line is empty", "no python code block"),
        ('Final Answer: "", ``', "the 'Final Answer:' line has no answer items", "no python code block"),
        ("```python\nprint(1)\n```\n```python\nprint(2)\n```\n```python\nprint(3)\n```",
         "no 'Final Answer:' line", "3 python code blocks; PoT asks for one"),
        ("```python\nimport pandas as pd\ndf = pd.read_csv(", "no 'Final Answer:' line",
         "the python code block is not closed (was the reply cut off?)"),
        ("```python\n```", "no 'Final Answer:' line", "the python code block is empty"),
        ("```bash\nrm -rf /\n```", "no 'Final Answer:' line", "no python code block"),
        ("``````````", "no 'Final Answer:' line", "no python code block"),
        ("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00", "no 'Final Answer:' line", "no python code block"),
    ],
)
def test_unparsed_with_reason(text: str, dp_error: str, pot_error: str) -> None:
    _check(text, dp_error, pot_error)


def test_nul_bytes_and_surrogates_inside_answers_are_removed() -> None:
    parsed = parse_reply("DP", "Final Answer: 4\x002, Os\ud800lo")
    assert parsed.values == ("42", "Oslo")
    assert parse_reply("PoT", "```python\nprint(\x00'x')\n```").code == "print('x')"
    assert answer_from_output("Final Answer: \ud800\x00") == ()


def test_binary_bytes_decoded_any_way() -> None:
    data = bytes(range(256)) * 64
    for text in (data.decode("latin-1"), data.decode("utf-8", errors="surrogateescape"), data.decode("utf-16", errors="replace")):
        for method in METHODS:
            parsed = parse_reply(method, text)
            assert parsed.parsed == (parsed.error is None)
        answer_from_output(text)
        scot_steps(text)
        split_answer(text)


def _timed(fn: object, *args: object) -> float:
    start = cpu_now()
    fn(*args)  # type: ignore[operator]
    return cpu_now() - start


@pytest.mark.parametrize(
    "text",
    [
        " " * (4 * MB),  # a megabyte-long line of spaces (regex backtracking)
        "\n" * (2 * MB),
        "a" * (4 * MB),
        "Final Answer: " + "x, " * MB,
        "Final Answer: " + "'a, " * (MB // 4),  # quotes that never close
        "Final Answer: " + "(" * MB,  # unbalanced brackets
        "Final Answer: " + "1," * MB + "000",
        "**" * MB,
        "```\n" * (MB // 8),
        "```python\n" + "x = 1\n" * (MB // 8) + "```",
        "```\n" + "(" * 200_000 + "\n```",  # an untagged fence too deep for the parser
        "Thought: " * (MB // 8),
        "Final Answer:\n" * (MB // 8),
        "> - # " * (MB // 6) + "Final Answer: 1",
    ],
    ids=["spaces", "newlines", "letters", "many-items", "open-quotes", "open-brackets", "digits", "emphasis",
         "fences", "big-program", "deep-untagged", "thoughts", "markers", "decorations"],
)
def test_huge_replies_are_linear(text: str) -> None:
    for method in METHODS:
        assert _timed(parse_reply, method, text) < 10
    assert _timed(answer_from_output, text) < 10
    assert _timed(python_blocks, text) < 10


def test_huge_answers_compare_quickly() -> None:
    many = [str(i) for i in range(5000)]
    start = cpu_now()
    assert same_answer(many, list(reversed(many)))  # long lists: greedy pairing
    assert not same_answer(many, many[:-1] + ["x"])
    assert same_answer(many, many, AnswerRule(ordered=True))
    assert cpu_now() - start < 20
    assert normalize_answer("9" * 10_000) == "9" * 10_000  # too long to be a number: its text
    assert normalize_answer("1e999") == "1e999" and normalize_answer("1e99") == "1" + "0" * 99  # exponents up to 99


@pytest.mark.parametrize("value", [None, 42, b"Final Answer: 1", ["Final Answer: 1"]])
def test_non_text_reply(value: object) -> None:
    parsed = parse_reply("DP", value)  # type: ignore[arg-type]
    assert parsed.error == "reply is not text" and parsed.values == ()
    assert answer_from_output(value) == ()  # type: ignore[arg-type]
    assert final_answer_line("") is None

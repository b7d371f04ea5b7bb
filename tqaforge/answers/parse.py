"""Reading the answering agents' replies: the final answer, SCoT steps and PoT code.

Every method shares TableBench's output contract: the reply's last line is
``Final Answer: a, b, ...``. SCoT replies are ``Thought:`` / ``Action:`` / ``Result:`` steps
before that line; a PoT reply is one fenced Python program that prints that line when run.
:func:`parse_reply` reads one reply by its method's rules and never raises on the reply's text:
a reply it cannot read is a :class:`ParsedReply` with an ``error`` that says why.

Decisions (real model output, compared with TableBench's own parser in ``tests/test_answer_parse.py``):

- **Which marker.** A line that *starts* with ``Final Answer`` and a colon, in any case, after
  optional Markdown decoration (``#`` headings, ``>`` quotes, ``-`` bullets, ``**`` / ``__`` /
  ``*`` emphasis around the words, the colon or both), with any spacing (``Final answer:42``).
  The **last** such line counts (models restate the format early and answer at the end; TableBench
  takes the first). A marker in the middle of a line is prose or code (``print("Final Answer:
  ...")``, "the final answer: ...") and is not an answer; TableBench's parser takes it.
- **Code is not an answer.** Lines inside fenced Python blocks are not searched (a PoT program's
  ``print`` or comment, a chart program).
- **The same line.** The rest of the marker line is the answer; following lines are ignored. The
  only cut inside the line is emphasis opened before the marker and closed after the answer
  (``**Final Answer: 42** (see above)`` is ``42``): other separators (parentheses, dashes,
  periods) belong to answers too often ("nicosia (cyp), 3 - 0", sentences of DataAnalysis answers).
- **An empty marker line** (``**Final Answer:**`` then the answer below it) takes the next
  non-blank line unless that is code or another marker; a marker with nothing after it at all is
  ``"the 'Final Answer:' line is empty"``.
- **Wrappers.** ``\\boxed{x}``, ``\\text{x}``, ``$x$``, emphasis and backticks around the whole
  answer or an item are removed; a reply with ``\\boxed{}`` but no marker is not parsed (the
  contract is the marker line).
- **Items** (:func:`split_answer`): split at commas, except a thousands separator (a comma between
  a digit and exactly three digits: ``1,234,567``; ``2009,2010`` is two items), commas inside
  brackets or parentheses, and commas inside an item that is wholly quoted (``"Smith, John"``).
  A whole answer in square brackets (a printed Python list) is unwrapped. Each item loses
  surrounding quotes, emphasis and trailing periods (:func:`~tqaforge.tables.matching.clean_item`).
  Prose answers (DescriptiveAnalysis and the like) are split at their commas too; their subtypes
  compare items in order (:func:`~tqaforge.tables.matching.answer_rule`), so that is the text.
- **Python blocks** (:func:`python_blocks`): fences tagged ``python``, ``py``, ``python3``,
  ``py3`` or ``ipython`` (any case). Only when a reply has none of those, an untagged fence whose
  content parses as Python counts (models that forget the tag); an untagged fence next to a tagged
  one is output or an example, not the program. Unclosed fences (a reply cut off) are no block.
- **PoT** needs exactly one Python block (TableBench takes the last of several; we leave a reply
  with several to be re-asked rather than guess which one the model meant).
- **Program output** (:func:`answer_from_output`): the last ``Final Answer:`` line of stdout, else
  the last non-empty line (TableBench takes the first marker line, else the whole stdout, which for
  a program that prints a table first is not an answer).
- **Hostile text.** NUL and other control characters and lone surrogates are removed first
  (:func:`~tqaforge.tables.cells.clean_text`); line endings are unified; every pattern is linear in
  the length of the reply.
"""

from __future__ import annotations

import ast
import re
import textwrap
import warnings
from dataclasses import dataclass

from tqaforge.tables.cells import clean_text
from tqaforge.tables.matching import clean_item

#: The answering methods parse_reply knows, as spelled by :class:`tqaforge.schemas.enums.AnswerMethod`.
METHODS: tuple[str, ...] = ("DP", "TCoT", "SCoT", "PoT")
_METHOD_KEYS = {m.lower(): m for m in METHODS}

#: Fence tags that mark Python.
PYTHON_TAGS = frozenset({"python", "py", "python3", "py3", "ipython"})
_MAX_UNTAGGED_PARSE = 100_000  # characters of an untagged fence we try to parse as Python
#: The longest final-answer text read (TableBench's longest reference is about 1,300 characters);
#: a longer one is garbage or a runaway reply, unparsed with a reason rather than split for seconds.
MAX_ANSWER_CHARS = 20_000


@dataclass(frozen=True)
class ScotStep:
    """One SCoT step: the thought, the one-line Python action and the result the model worked out."""

    thought: str
    action: str
    result: str


@dataclass(frozen=True)
class ParsedReply:
    """A reply read by its method's rules.

    ``values``: the answer items (empty when unparsed, and for PoT, whose values come from running
    ``code``); ``code``: PoT's program; ``steps``: SCoT's steps; ``error``: why the reply is
    unparsed (None when parsed); ``answer_text``: the final-answer text before it was split.
    """

    values: tuple[str, ...] = ()
    code: str | None = None
    steps: tuple[ScotStep, ...] = ()
    error: str | None = None
    answer_text: str | None = None

    @property
    def parsed(self) -> bool:
        """True when the reply gave what its method asks for (answer items, or PoT's program)."""
        return self.error is None


# --- lines and fences ---------------------------------------------------------------------------

def _lines(text: str) -> list[str]:
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


_FENCE_OPEN = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})(?P<rest>.*)$")


@dataclass(frozen=True)
class _Fence:
    info: str  # the first word after the opening fence, lower-cased ("" for a bare fence)
    body: str
    start: int  # line of the opening fence
    end: int  # line of the closing fence (len(lines) when unclosed)
    closed: bool


def _fences(lines: list[str]) -> list[_Fence]:
    """Every fenced block, in order; an opening fence without a closing one runs to the end."""
    out: list[_Fence] = []
    i = 0
    while i < len(lines):
        m = _FENCE_OPEN.match(lines[i])
        fence = m.group("fence") if m else ""
        if not m or (fence[0] == "`" and "`" in m.group("rest")):
            i += 1
            continue
        words = m.group("rest").split()
        info = words[0].lower().strip("{}.") if words else ""
        body: list[str] = []
        closed = False
        j = i + 1
        while j < len(lines):
            stripped = lines[j].strip()
            if stripped and stripped.startswith(fence) and not stripped.strip(fence[0]):
                closed = True
                break
            if fence[0] == "`" and stripped.endswith(fence) and stripped.strip("`"):
                body.append(lines[j].rstrip().rstrip("`"))  # code``` : the fence closes the line
                closed = True
                break
            body.append(lines[j])
            j += 1
        out.append(_Fence(info, textwrap.dedent("\n".join(body)).strip("\n"), i, j, closed))
        i = j + 1
    return out


def _parses_as_python(body: str) -> bool:
    if not body.strip() or len(body) > _MAX_UNTAGGED_PARSE:
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ast.parse(body)
        except Exception:  # SyntaxError, ValueError, RecursionError, MemoryError, UnicodeError: not Python
            return False
    return True


def _is_code(fence: _Fence) -> bool:
    return fence.info in PYTHON_TAGS or (fence.info == "" and _parses_as_python(fence.body))


def python_blocks(text: str) -> list[str]:
    """The bodies of the closed, non-blank Python blocks of ``text``, in order (module docs)."""
    fences = [f for f in _fences(_lines(clean_text(text))) if f.closed and f.body.strip()]
    tagged = [f.body for f in fences if f.info in PYTHON_TAGS]
    if tagged:
        return tagged
    return [f.body for f in fences if f.info == "" and _parses_as_python(f.body)]


def last_python_block(text: str) -> str | None:
    """The last of :func:`python_blocks`, or None."""
    blocks = python_blocks(text)
    return blocks[-1] if blocks else None


# --- the final-answer line ----------------------------------------------------------------------

# Bounded quantifiers keep the pattern linear on hostile lines (a megabyte of spaces).
_MARKER = re.compile(
    r"^[ \t]{0,12}(?:[>#+\-][ \t>#+\-]{0,12})?(?P<open>[*_]{0,3})[ \t]{0,4}final[ \t]{1,4}answer"
    r"[ \t]{0,4}(?P<close>[*_]{0,3})[ \t]{0,4}:(?P<rest>.*)$",
    re.IGNORECASE,
)
# Wrappers of a whole answer line (quotes are left to the items: '"a, b", "c"' is two quoted items).
_LINE_WRAPPERS: tuple[tuple[str, str], ...] = (("**", "**"), ("__", "__"), ("*", "*"), ("`", "`"), ("$", "$"))
_COMMAND = re.compile(r"^\\(?:boxed|text|textbf|mathrm|mathbf)\s*\{(.*)\}$", re.DOTALL)


def _unwrap_line(text: str) -> str:
    t = text.strip()
    for run in ("**", "__"):  # an emphasis run left unpaired by the marker ("42**")
        if t.count(run) % 2:
            t = t[: -len(run)] if t.endswith(run) else t[len(run):] if t.startswith(run) else t
    for _ in range(8):
        before = t
        for left, right in _LINE_WRAPPERS:
            if len(t) > len(left) + len(right) and t.startswith(left) and t.endswith(right):
                t = t[len(left): -len(right)].strip()
                break
        match = _COMMAND.match(t)
        if match:
            t = match.group(1).strip()
        if t == before:
            break
    return t.strip()


def _marker_text(m: re.Match[str]) -> str:
    rest = m.group("rest")
    opened = m.group("open")
    if opened and not m.group("close"):
        body = rest.lstrip()
        if body.startswith(opened):  # "*Final Answer:* 42"
            rest = body[len(opened):]
        elif opened in body:  # "**Final Answer: 42** (approximately)": the emphasis ends the answer
            rest = body[: body.index(opened)]
    return _unwrap_line(rest)


def _find_final(text: str, skip_code: bool = True) -> str | None:
    """The answer text of the last marker line: None without a marker, "" when it is empty."""
    lines = _lines(text)
    skip: set[int] = set()
    if skip_code and ("`" in text or "~~~" in text):
        for fence in _fences(lines):
            if _is_code(fence):
                skip.update(range(fence.start, min(fence.end, len(lines) - 1) + 1))
    for i in range(len(lines) - 1, -1, -1):
        if i in skip or "answer" not in lines[i][:80].lower():
            continue
        m = _MARKER.match(lines[i])
        if m is None:
            continue
        answer = _marker_text(m)
        if answer:
            return answer
        for j in range(i + 1, len(lines)):  # "**Final Answer:**" with the answer on the next line
            if not lines[j].strip():
                continue
            if j in skip or _MARKER.match(lines[j]) or _FENCE_OPEN.match(lines[j]):
                break
            return _unwrap_line(lines[j])
        return ""
    return None


def final_answer_line(text: str) -> str | None:
    """The answer text after the last well-formed ``Final Answer:`` marker (module docs); None when
    there is none or it is empty.

    >>> final_answer_line("Thought: ...\\n**Final Answer:** 1,234, Oslo.\\n")
    '1,234, Oslo.'
    """
    return _find_final(clean_text(text)) or None


# --- items --------------------------------------------------------------------------------------

_QUOTE_PAIRS = {'"': '"', "'": "'", "\u201c": "\u201d", "\u2018": "\u2019", "\u00ab": "\u00bb", "`": "`"}
_SEPARATORS = ",\uff0c"
_DIGITS = "0123456789"
_QUOTED_ITEM_MAX = 1000  # characters a quoted item may span (keeps hostile input linear)
_CLOSERS: dict[str, re.Pattern[str]] = {}


def _is_thousands(text: str, i: int) -> bool:
    """Whether the comma at ``i`` separates thousands: a digit before, exactly three digits after."""
    if i == 0 or text[i - 1] not in _DIGITS:
        return False
    group = text[i + 1: i + 4]
    return len(group) == 3 and all(c in _DIGITS for c in group) and (i + 4 >= len(text) or text[i + 4] not in _DIGITS)


def _closing_quote(text: str, start: int, close: str) -> int | None:
    """The index of ``close`` that ends a quoted item opened before ``start`` (a separator or the end follows)."""
    pattern = _CLOSERS.get(close)
    if pattern is None:
        pattern = _CLOSERS[close] = re.compile(re.escape(close) + r"[ \t]{0,64}(?:[,\uff0c]|$)")
    limit = min(len(text), start + _QUOTED_ITEM_MAX)
    m = pattern.search(text, start, limit)
    if m is None or (m.end() == limit and limit < len(text) and text[m.end() - 1] not in _SEPARATORS):
        return None  # "$" matched only at the window's edge, not at the end of the text
    return m.start()


def _split(text: str, brackets: bool) -> list[str] | None:
    """``text`` cut at its separating commas; None when ``brackets`` and they do not balance."""
    pieces: list[str] = []
    start = depth = i = 0
    at_start = True
    n = len(text)
    while i < n:
        ch = text[i]
        if at_start:
            if ch.isspace():
                i += 1
                continue
            at_start = False
            close = _QUOTE_PAIRS.get(ch)
            end = _closing_quote(text, i + 1, close) if close else None
            if end is not None:
                i = end + 1
                continue
        if brackets and ch in "([{":
            depth += 1
        elif brackets and ch in ")]}":
            depth -= 1
            if depth < 0:
                return None
        elif ch in _SEPARATORS and depth == 0 and not _is_thousands(text, i):
            pieces.append(text[start:i])
            start = i + 1
            at_start = True
        i += 1
    if depth:
        return None
    pieces.append(text[start:])
    return pieces


def _unwrap_list(text: str) -> str:
    """``[a, b]`` (a printed Python list) -> ``a, b`` when the outer brackets pair with each other."""
    if not (text.startswith("[") and text.endswith("]")):
        return text
    depth = 0
    for i, ch in enumerate(text):
        depth += (ch == "[") - (ch == "]")
        if depth == 0 and i < len(text) - 1:
            return text
    return text[1:-1] if depth == 0 else text


def split_answer(value: str) -> tuple[str, ...]:
    """The items of an answer text (module docs), each cleaned; blank items dropped.

    >>> split_answer('1,234, "Smith, John", **Oslo**.')
    ('1,234', 'Smith, John', 'Oslo')
    >>> split_answer("2009,2010"), split_answer("['a', 'b']"), split_answer("nicosia (cyp), 3 - 0")
    (('2009', '2010'), ('a', 'b'), ('nicosia (cyp)', '3 - 0'))
    """
    text = _unwrap_list(_unwrap_line(clean_text(value)))
    pieces = _split(text, brackets=True)
    if pieces is None:  # unbalanced brackets: split as if there were none
        pieces = _split(text, brackets=False) or [text]
    return tuple(item for item in (clean_item(p) for p in pieces) if item)


# --- SCoT ---------------------------------------------------------------------------------------

_LABEL = re.compile(
    r"^[ \t>#+\-*_]{0,12}(?P<label>thought|action|result|observation)(?:[ \t]{0,4}\d{1,4})?"
    r"[ \t]{0,4}[*_]{0,3}[ \t]{0,4}:[ \t]{0,4}[*_]{0,3}(?P<rest>.*)$",
    re.IGNORECASE,
)


def _clean_action(text: str) -> str:
    lines = [line for line in _lines(text) if not line.strip().startswith(("```", "~~~"))]
    action = "\n".join(lines).strip()
    while len(action) > 2 and action.startswith("`") and action.endswith("`"):
        action = action[1:-1].strip()
    return action


def scot_steps(text: str) -> tuple[ScotStep, ...]:
    """The ``Thought:`` / ``Action:`` / ``Result:`` steps of a SCoT reply, in order.

    A ``Thought`` starts a step; an ``Action`` or ``Result`` starts one when the current step
    already has that part (or, for an Action, a Result). A part runs over following lines until
    the next label, a fence belongs to the part it is in, and a ``Final Answer`` line ends the
    part. ``Observation:`` is read as ``Result:``. Missing parts are empty strings.

    >>> scot_steps("Thought: sum it\\nAction: df['a'].sum()\\nResult: 3\\nFinal Answer: 3")
    (ScotStep(thought='sum it', action="df['a'].sum()", result='3'),)
    """
    steps: list[dict[str, list[str]]] = []
    current: dict[str, list[str]] | None = None
    part: str | None = None
    in_fence = False
    for line in _lines(clean_text(text)):
        if line.strip().startswith(("```", "~~~")):
            in_fence = not in_fence
            if current is not None and part is not None:
                current[part].append(line)
            continue
        if in_fence:
            if current is not None and part is not None:
                current[part].append(line)
            continue
        if "answer" in line[:80].lower() and _MARKER.match(line):
            part = None
            continue
        m = _LABEL.match(line) if ":" in line else None
        if m is None:
            if current is not None and part is not None:
                current[part].append(line)
            continue
        label = m.group("label").lower()
        label = "result" if label == "observation" else label
        if (
            current is None
            or (label == "thought" and any(current.values()))
            or current[label]
            or (label == "action" and current["result"])
        ):
            current = {"thought": [], "action": [], "result": []}
            steps.append(current)
        current[label].append(m.group("rest"))
        part = label
    out = []
    for step in steps:
        thought = "\n".join(step["thought"]).strip()
        action = _clean_action("\n".join(step["action"]))
        result = "\n".join(step["result"]).strip()
        if thought or action or result:
            out.append(ScotStep(thought, action, result))
    return tuple(out)


# --- replies ------------------------------------------------------------------------------------

def _parse_pot(text: str) -> ParsedReply:
    blocks = python_blocks(text)
    if len(blocks) == 1:
        return ParsedReply(code=blocks[0])
    if len(blocks) > 1:
        return ParsedReply(error=f"{len(blocks)} python code blocks; PoT asks for one")
    fences = _fences(_lines(text))
    if any(not f.closed and (f.info in PYTHON_TAGS or (f.info == "" and f.body.strip())) for f in fences):
        return ParsedReply(error="the python code block is not closed (was the reply cut off?)")
    if any(f.closed and f.info in PYTHON_TAGS for f in fences):
        return ParsedReply(error="the python code block is empty")
    return ParsedReply(error="no python code block")


def parse_reply(method: str, text: str) -> ParsedReply:
    """One reply read by the rules of ``method`` (``DP``, ``TCoT``, ``SCoT`` or ``PoT``, any case).

    PoT: the program (exactly one Python block). The others: the final answer's items, and for
    SCoT its steps too (a SCoT reply without steps still gives its answer). Never raises on
    ``text``; an unknown ``method`` is a programming error (ValueError).

    >>> parse_reply("TCoT", "The sum is 3.\\nFinal Answer: 3").values
    ('3',)
    >>> parse_reply("PoT", "Final Answer: 3").error
    'no python code block'
    """
    key = _METHOD_KEYS.get(str(method).lower())
    if key is None:
        raise ValueError(f"unknown answering method {method!r}; one of {', '.join(METHODS)}")
    if not isinstance(text, str):
        return ParsedReply(error="reply is not text")
    text = clean_text(text)
    if not text.strip():
        return ParsedReply(error="reply is empty")
    if key == "PoT":
        return _parse_pot(text)
    steps = scot_steps(text) if key == "SCoT" else ()
    answer = _find_final(text)
    if answer is None:
        return ParsedReply(steps=steps, error="no 'Final Answer:' line")
    if not answer:
        return ParsedReply(steps=steps, error="the 'Final Answer:' line is empty")
    if len(answer) > MAX_ANSWER_CHARS:
        return ParsedReply(steps=steps, error=f"the 'Final Answer:' line is too long ({len(answer)} characters; at most {MAX_ANSWER_CHARS})")
    values = split_answer(answer)
    if not values:
        return ParsedReply(steps=steps, error="the 'Final Answer:' line has no answer items", answer_text=answer)
    return ParsedReply(values=values, steps=steps, answer_text=answer)


def answer_from_output(stdout: str) -> tuple[str, ...]:
    """The answer items a PoT program printed: its last ``Final Answer:`` line, else its last
    non-empty line; ``()`` when it printed nothing, an empty marker line or a line longer than
    :data:`MAX_ANSWER_CHARS`.

    >>> answer_from_output("rows: 12\\nFinal Answer: 1062\\n"), answer_from_output("debug\\n42\\n")
    (('1062',), ('42',))
    """
    if not isinstance(stdout, str):
        return ()
    text = clean_text(stdout)
    answer = _find_final(text, skip_code=False)
    if answer is None:
        lines = [line for line in _lines(text) if line.strip()]
        answer = lines[-1] if lines else ""
    return split_answer(answer) if answer and len(answer) <= MAX_ANSWER_CHARS else ()

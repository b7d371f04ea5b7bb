"""Text from models and data, made safe to show: the one escaper of control characters.

A model's output, a cell of an imported table or a model name in a predictions file can hold
terminal escape sequences (``ESC[2J`` clears the screen, OSC 52 writes the clipboard, cursor moves
forge lines such as ``outcome: ok``), bidirectional overrides that reorder what is shown, and lone
surrogates that break encoders. Everything such text passes through :func:`escape_controls`
before it reaches a terminal, a report or a JSON file a person reads::

    escape_controls("ok\\x1b[2J")          # 'ok\\\\x1b[2J'  (shown as the four characters \\x1b)
    escape_controls("a\\nb")               # 'a\\nb'         (line breaks and tabs kept by default)
    escape_controls("a\\nb", lines=False)  # 'a\\\\nb'
    escape_controls(json.dumps(data, ensure_ascii=False), json=True)  # still JSON: '\\u009b', '\\u202e'
    escape_controls("![x](http://a/x.png)", markdown=True)  # '\\!\\[x\\]\\(http\\:\\/\\/a\\/x\\.png\\)'

A leaf module, like :mod:`tqaforge.errors`: it imports nothing of tqaforge, so every layer may use it.
"""

from __future__ import annotations

import re

__all__ = ["escape_controls", "has_controls"]

# C0 controls but TAB and LF, DEL, C1 controls, the bidirectional marks (ALM, LRM, RLM) and
# embeddings/overrides/isolates, the line and paragraph separators, and lone surrogates.
_UNSAFE = r"\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_UNSAFE_KEEP_LINES = re.compile(f"[{_UNSAFE}]")
_UNSAFE_ONE_LINE = re.compile(f"[{_UNSAFE}\\t\\n]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
# What Markdown (CommonMark, GitHub's and Streamlit's extensions) may read as syntax. Text
# without any of it (words, numbers, "Fleiss' kappa", "[0.41, 0.70]", "question_typing") shows
# as written and stays readable in a Markdown file.
_MARKDOWN_ACTIVE = re.compile(
    r"[\\`*<>|&$~\n]"  # escapes, code, emphasis, HTML and <autolinks>, tables, entities, math, strikethrough
    r"|!\[|\]\(|\]\[|\]:"  # images, inline links, reference links and their definitions
    r"|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])"  # emphasis with _ (inside a word it is a letter)
    r"|://|www\.|@|(?:mailto|xmpp):"  # autolinks (GitHub's and Streamlit's Markdown make them)
    r"|:[A-Za-z][\w/-]*[\[:]"  # Streamlit's directives (:red[...]), icons (:material/x:), emoji
    r"|^[ \t]|^#|^(?:[-+](?:\s|$)|-[ \t]*-[ \t]*-|={2,}|\d{1,9}[.)](?:\s|$))"  # a first line that starts a block
)
# Every ASCII punctuation character may be backslash-escaped in CommonMark, and is then literal.
_MARKDOWN_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")
# Indentation would start a code block (where escapes show as backslashes): shown as no-break spaces.
_LEADING_SPACE = re.compile(r"^[ \t]+", re.MULTILINE)


def _escape_json(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group(0)):04x}"


def _escape(match: re.Match[str]) -> str:
    char = match.group(0)
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def escape_controls(text: str, *, lines: bool = True, json: bool = False, markdown: bool = False) -> str:
    """``text`` with every control character shown as an escape (``\\x1b``, ``\\r``, ``\\u202e``).

    With ``lines`` (the default) line feeds and tabs stay as they are, so multi-line output still
    reads as lines; with ``lines=False`` they are escaped too (a name, a one-line field). Carriage
    returns are always escaped: alone they overwrite the line they are on.

    With ``json``, ``text`` is a JSON document (``json.dumps(..., ensure_ascii=False)``, which
    leaves C1 controls, bidirectional overrides and lone surrogates raw) and every such character
    becomes a ``\\uXXXX`` escape, so the result is still JSON and loads to the same value. Line
    feeds and tabs outside strings are the document's own layout and stay.

    With ``markdown``, the result goes into Markdown (the app's pages, a dataset card, a report)
    and shows as written: when anything in it could be read as Markdown syntax (a link or image,
    HTML, a backtick, a table bar, a directive, a line that starts a list...), every ASCII
    punctuation character is backslash-escaped and line feeds become Markdown line breaks (with
    ``lines=False`` they are shown as ``\\n``); plain words and numbers are left as they are.
    """
    if json:
        return _UNSAFE_KEEP_LINES.sub(_escape_json, text)
    pattern = _UNSAFE_KEEP_LINES if lines else _UNSAFE_ONE_LINE
    text = pattern.sub(_escape, text)
    if not markdown or not _MARKDOWN_ACTIVE.search(text):
        return text
    text = _LEADING_SPACE.sub(lambda m: "\u00a0" * len(m.group(0).expandtabs(4)), text)
    return "  \n".join(_MARKDOWN_PUNCTUATION.sub(r"\\\1", line) for line in text.split("\n"))


def has_controls(text: str, *, lines: bool = True) -> bool:
    """Whether :func:`escape_controls` would change ``text``."""
    return (_UNSAFE_KEEP_LINES if lines else _UNSAFE_ONE_LINE).search(text) is not None

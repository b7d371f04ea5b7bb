"""The answering methods by name: ``--methods tcot,scot,pot`` and a prediction's ``method``.

Its own module, apart from :mod:`tqaforge.answers.agents` (which imports the LLM gateway, and with
it openai): ``tqaforge evaluate`` reads method names for every prediction and calls no model.
"""

from __future__ import annotations

from tqaforge.errors import ConfigError
from tqaforge.schemas.enums import AnswerMethod


def parse_methods(text: str | tuple[str, ...] | list[str]) -> tuple[AnswerMethod, ...]:
    """Methods from ``"tcot,scot,pot"`` (any case, any order, each once) or a sequence of names."""
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text) if n.strip()]
    by_name = {m.value.lower(): m for m in AnswerMethod}
    out: list[AnswerMethod] = []
    for name in names:
        method = by_name.get(name.lower())
        if method is None:
            raise ConfigError(f"unknown answering method {name!r}", hint="methods are " + ", ".join(m.value for m in AnswerMethod))
        if method not in out:
            out.append(method)
    if not out:
        raise ConfigError("no answering method given", hint="e.g. --methods tcot,scot,pot")
    return tuple(out)

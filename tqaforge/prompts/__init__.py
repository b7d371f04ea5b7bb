"""Prompt templates: text files in ``tqaforge/prompts/``, filled with str.format; shared by every stage.

Templates live as files so they can be read and edited without touching code; one template per
purpose, never copies per category.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from tqaforge.errors import ConfigError

PROMPTS_DIR = Path(__file__).parent


@cache
def template(name: str) -> str:
    """The text of template ``name`` (file ``prompts/NAME.txt``)."""
    path = PROMPTS_DIR / f"{name}.txt"
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        known = ", ".join(sorted(p.stem for p in PROMPTS_DIR.glob("*.txt")))
        raise ConfigError(f"no prompt template {name!r}", hint=f"known templates: {known}") from None


def render(name: str, **fields: str) -> str:
    """Template ``name`` with ``fields`` filled in."""
    return template(name).format(**fields)

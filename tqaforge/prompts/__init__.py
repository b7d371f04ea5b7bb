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


FORMATS_TEMPLATE = "answer_formats"


@cache
def _format_sections() -> dict[str, str]:
    """The sections of ``answer_formats.txt``: subtype (or ``*``) -> its rule text."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in template(FORMATS_TEMPLATE).splitlines():
        if line.startswith("## "):
            current = sections.setdefault(line[3:].strip(), [])
        elif current is not None:
            current.append(line)
        elif line.strip() and not line.startswith("#"):
            raise ConfigError(
                f"{PROMPTS_DIR / (FORMATS_TEMPLATE + '.txt')}: text before the first '## SUBTYPE' section: {line[:60]!r}",
                hint="start each block of rules with a line '## SUBTYPE' (or '## *' for every subtype)",
            )
    return {name: "\n".join(lines).strip() for name, lines in sections.items()}


def format_rules(subtype: str | None) -> str:
    """The answer-format rules for ``subtype`` (file ``prompts/answer_formats.txt``), framed by blank
    lines for the ``{format_rules}`` field of the answering templates; the ``*`` section for a subtype
    without its own, and one blank line when neither says anything."""
    sections = _format_sections()
    text = sections.get(subtype or "", "") or sections.get("*", "")
    return f"\n{text}\n" if text else "\n"

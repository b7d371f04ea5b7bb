"""Seed corpora: a definition and a few example questions per category of a taxonomy.

Question generation (TableBench's "self-inspiration" loop) starts from one seed corpus: for each
subtype, what the category asks and a few questions that show it. Accepted generated questions
can be added back as seeds later. A corpus is a plain TOML file, meant to be read and edited by
people::

    taxonomy = "tablebench"

    [[category]]
    type = "NumericalReasoning"
    subtype = "Aggregation"
    definition = "..."
    seeds = ["...", "..."]

>>> corpus = load_seed_corpus("tqaforge/generation/seed_corpora/tablebench.toml")  # doctest: +SKIP
>>> corpus.category("Aggregation").seeds[0]  # doctest: +SKIP
'What is the combined total of all values in the points column?'

:func:`dump_seed_corpus` writes the same format back, so ``load(dump(corpus)) == corpus``.
"""

from __future__ import annotations

from dataclasses import dataclass
from os import PathLike
from pathlib import Path

from tqaforge.config import parse_toml, read_text_file, toml_string  # toml_string: re-exported
from tqaforge.errors import ConfigError, TaxonomyError
from tqaforge.schemas.taxonomy import BUILTIN, Taxonomy

_TOP_KEYS = ("taxonomy", "category")
_CATEGORY_KEYS = ("type", "subtype", "definition", "seeds")
_TOML_HINT = (
    'check that every string has both double quotes ("..."), lists are written '
    '["...", "..."] and each category starts with [[category]]'
)
_CATEGORY_HINT = (
    'write each category as [[category]] with type = "...", subtype = "...", '
    'definition = "..." and seeds = ["...", ...]'
)


@dataclass(frozen=True, slots=True)
class SeedCategory:
    """One category of a seed corpus: its (type, subtype), a definition and seed questions."""

    type: str
    subtype: str
    definition: str
    seeds: tuple[str, ...]

    def __post_init__(self) -> None:
        # Accept any iterable of seeds (a list from TOML, a generator) but store a tuple.
        if not isinstance(self.seeds, tuple):
            object.__setattr__(self, "seeds", tuple(self.seeds))


@dataclass(frozen=True, slots=True)
class SeedCorpus:
    """A taxonomy name and one :class:`SeedCategory` per subtype (in file order)."""

    taxonomy: str
    categories: tuple[SeedCategory, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.categories, tuple):
            object.__setattr__(self, "categories", tuple(self.categories))

    @property
    def subtypes(self) -> tuple[str, ...]:
        """The subtypes the corpus has categories for, in file order."""
        return tuple(c.subtype for c in self.categories)

    def category(self, subtype: str) -> SeedCategory:
        """The category for ``subtype``; raises :class:`TaxonomyError` if the corpus lacks it.

        >>> corpus.category("Ranking").definition  # doctest: +SKIP
        """
        for c in self.categories:
            if c.subtype == subtype:
                return c
        raise TaxonomyError(
            f"seed corpus {self.taxonomy!r} has no category {subtype!r}",
            hint="categories in the corpus: " + (", ".join(self.subtypes) or "none"),
        )

    def missing(self, taxonomy: Taxonomy | None = None) -> list[str]:
        """Subtypes of ``taxonomy`` (default: the built-in one the corpus names) that have no
        category in the corpus, or whose category has a blank definition or no seeds.

        >>> corpus.missing(TABLEBENCH)  # doctest: +SKIP
        []
        """
        tax = taxonomy if taxonomy is not None else _builtin(self.taxonomy, where=None)
        present = {
            c.subtype
            for c in self.categories
            if c.definition.strip() and any(s.strip() for s in c.seeds)
        }
        return [s for s in tax.subtypes if s not in present]


def load_seed_corpus(path: str | PathLike[str], taxonomy: Taxonomy | None = None) -> SeedCorpus:
    """Read and validate a seed corpus TOML file.

    Every (type, subtype) is checked with :meth:`Taxonomy.validate` against ``taxonomy`` or,
    when none is given, the built-in taxonomy the file names (``tablebench``, ``freb-tqa``, ``capability``).

    Raises :class:`ConfigError` for an unreadable file, a TOML syntax error (with its line),
    missing or unknown keys, a wrong value type, an empty ``seeds`` list or a duplicate subtype,
    and :class:`TaxonomyError` for a (type, subtype) the taxonomy does not have. Messages name
    the file and the category (1-based index and subtype).

    >>> load_seed_corpus("tqaforge/generation/seed_corpora/freb-tqa.toml").subtypes  # doctest: +SKIP
    ('extraction', 'reasoning')
    """
    where = str(path)
    if not Path(path).exists():
        raise ConfigError(
            f"{where}: no such seed corpus file",
            hint="check the path; tqaforge ships tqaforge/generation/seed_corpora/tablebench.toml, "
            "freb-tqa.toml and capability.toml",
        )
    # The shared reader refuses special files, huge files and non-UTF-8 text with the offset.
    text = read_text_file(path, what="seed corpus file")
    return parse_seed_corpus(text, where=where, taxonomy=taxonomy)


def parse_seed_corpus(
    text: str, *, where: str = "<seed corpus>", taxonomy: Taxonomy | None = None
) -> SeedCorpus:
    """Like :func:`load_seed_corpus`, from TOML text; ``where`` names it in error messages."""
    data = parse_toml(text, where=where, hint=_TOML_HINT)

    unknown = sorted(set(data) - set(_TOP_KEYS))
    if unknown:
        raise ConfigError(
            f"{where}: unknown top-level key(s) {', '.join(map(repr, unknown))}",
            hint='the file holds taxonomy = "..." and [[category]] tables only',
        )
    name = data.get("taxonomy")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(
            f"{where}: missing or empty 'taxonomy' key",
            hint='start the file with taxonomy = "tablebench" (or the workspace taxonomy name)',
        )
    if taxonomy is None:
        tax = _builtin(name, where=where)
    else:
        if taxonomy.name != name:
            raise ConfigError(
                f"{where}: the corpus is for taxonomy {name!r}, not {taxonomy.name!r}",
                hint=f'set taxonomy = "{taxonomy.name}" if the categories are meant for it',
            )
        tax = taxonomy

    raw = data.get("category")
    if raw is None or raw == []:
        raise ConfigError(f"{where}: the corpus has no [[category]] tables", hint=_CATEGORY_HINT)
    if not isinstance(raw, list) or not all(isinstance(e, dict) for e in raw):
        raise ConfigError(f"{where}: 'category' must be an array of tables", hint=_CATEGORY_HINT)

    categories: list[SeedCategory] = []
    first_seen: dict[str, int] = {}
    for index, entry in enumerate(raw, start=1):
        cat = _category(entry, index, where)
        label = f"{where}: category {index} ({cat.subtype!r})"
        try:
            tax.validate(cat.type, cat.subtype)
        except TaxonomyError as exc:
            raise TaxonomyError(f"{label}: {exc.args[0]}", hint=exc.hint) from None
        if cat.subtype in first_seen:
            raise ConfigError(
                f"{label}: subtype already defined by category {first_seen[cat.subtype]}",
                hint="merge the two categories' seeds into one [[category]]",
            )
        first_seen[cat.subtype] = index
        categories.append(cat)
    return SeedCorpus(taxonomy=name, categories=tuple(categories))


def dump_seed_corpus(corpus: SeedCorpus) -> str:
    """The TOML text of ``corpus`` in the format :func:`load_seed_corpus` reads.

    Strings are written as TOML basic strings with backslashes, quotes and control characters
    escaped, so ``parse_seed_corpus(dump_seed_corpus(c)) == c`` for any strings.

    >>> print(dump_seed_corpus(SeedCorpus("freb-tqa", ())))
    # tqaforge seed corpus: one [[category]] per subtype (definition + seed questions).
    taxonomy = "freb-tqa"
    <BLANKLINE>
    """
    out = [
        "# tqaforge seed corpus: one [[category]] per subtype (definition + seed questions).",
        f"taxonomy = {toml_string(corpus.taxonomy)}",
        "",
    ]
    for cat in corpus.categories:
        out += [
            "[[category]]",
            f"type = {toml_string(cat.type)}",
            f"subtype = {toml_string(cat.subtype)}",
            f"definition = {toml_string(cat.definition)}",
            "seeds = [",
            *(f"  {toml_string(s)}," for s in cat.seeds),
            "]",
            "",
        ]
    return "\n".join(out)


def _builtin(name: str, *, where: str | None) -> Taxonomy:
    try:
        return BUILTIN[name]
    except KeyError:
        prefix = f"{where}: " if where else ""
        raise TaxonomyError(
            f"{prefix}{name!r} is not a built-in taxonomy",
            hint="use one of " + ", ".join(BUILTIN) + ", or pass the workspace taxonomy",
        ) from None


def _category(entry: dict[str, object], index: int, where: str) -> SeedCategory:
    subtype = entry.get("subtype")
    label = f"{where}: category {index}"
    if isinstance(subtype, str):
        label += f" ({subtype!r})"
    missing = [k for k in _CATEGORY_KEYS if k not in entry]
    if missing:
        raise ConfigError(
            f"{label}: missing key(s) {', '.join(map(repr, missing))}", hint=_CATEGORY_HINT
        )
    unknown = sorted(set(entry) - set(_CATEGORY_KEYS))
    if unknown:
        raise ConfigError(
            f"{label}: unknown key(s) {', '.join(map(repr, unknown))}", hint=_CATEGORY_HINT
        )
    for key in ("type", "subtype", "definition"):
        value = entry[key]
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{label}: {key!r} must be a non-empty string", hint=_CATEGORY_HINT)
    seeds = entry["seeds"]
    if not isinstance(seeds, list):
        raise ConfigError(f"{label}: 'seeds' must be a list of strings", hint=_CATEGORY_HINT)
    if not seeds:
        raise ConfigError(
            f"{label}: 'seeds' is empty",
            hint="give at least one example question for the category",
        )
    seen: dict[str, int] = {}
    for n, seed in enumerate(seeds, start=1):
        if not isinstance(seed, str) or not seed.strip():
            raise ConfigError(f"{label}: seed {n} must be a non-empty string", hint=_CATEGORY_HINT)
        if seed in seen:
            raise ConfigError(f"{label}: seed {n} repeats seed {seen[seed]}")
        seen[seed] = n
    return SeedCategory(
        type=str(entry["type"]),
        subtype=str(entry["subtype"]),
        definition=str(entry["definition"]),
        seeds=tuple(str(s) for s in seeds),
    )

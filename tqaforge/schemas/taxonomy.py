"""Question taxonomies: the built-in TableBench, FREB-TQA and capability ones, and workspace-defined ones.

A taxonomy is a set of (type, subtype) categories. Names are kept exactly as the benchmarks
spell them in their data, typos included (``Multi-hop NumericalReasoing``), so that imported
items and generated ones land in the same category.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from tqaforge.errors import TaxonomyError


@dataclass(frozen=True, slots=True)
class Category:
    type: str
    subtype: str


@dataclass(frozen=True, slots=True)
class Taxonomy:
    name: str
    categories: tuple[Category, ...]

    @property
    def types(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.type for c in self.categories))

    @property
    def subtypes(self) -> tuple[str, ...]:
        return tuple(c.subtype for c in self.categories)

    def type_of(self, subtype: str) -> str:
        """The type a subtype belongs to; raises :class:`TaxonomyError` for unknown names."""
        for c in self.categories:
            if c.subtype == subtype:
                return c.type
        raise TaxonomyError(
            f"subtype {subtype!r} is not in taxonomy {self.name!r}",
            hint="known subtypes: " + ", ".join(self.subtypes),
        )

    def validate(self, type_: str | None, subtype: str | None) -> None:
        """Raise unless (type, subtype) is a category of this taxonomy."""
        if subtype is None:
            return
        expected = self.type_of(subtype)
        if type_ is not None and type_ != expected:
            raise TaxonomyError(
                f"subtype {subtype!r} belongs to type {expected!r}, not {type_!r}"
            )


def _taxonomy(name: str, groups: Mapping[str, Iterable[str]]) -> Taxonomy:
    return Taxonomy(
        name=name,
        categories=tuple(Category(t, s) for t, subs in groups.items() for s in subs),
    )


TABLEBENCH = _taxonomy(
    "tablebench",
    {
        "FactChecking": ["MatchBased", "Multi-hop FactChecking"],
        "NumericalReasoning": [
            "ArithmeticCalculation",
            "Comparison",
            "Aggregation",
            "Ranking",
            "Counting",
            "Time-basedCalculation",
            "Multi-hop NumericalReasoing",
            "Domain-Specific",
        ],
        "DataAnalysis": [
            "DescriptiveAnalysis",
            "AnomalyDetection",
            "StatisticalAnalysis",
            "CorrelationAnalysis",
            "CausalAnalysis",
            "TrendForecasting",
            "ImpactAnalysis",
        ],
        "Visualization": ["ChartGeneration"],
    },
)

# FREB-TQA splits questions by what answering needs: a cell (extraction) or a computation
# over cells (reasoning). Both are subtypes of one type so a question carries one label.
FREB_TQA = _taxonomy("freb-tqa", {"QuestionType": ["extraction", "reasoning"]})

# The capability-based TableBench (paper 003) sorts what a model must be able to do into ten
# capabilities along the four stages of answering a table question: recognising the table
# (its structure, its serialization format, its size), locating the relevant cells and
# understanding what they mean, processing them (grouping and computing, editing the table on
# command, summarising, exploring), and producing the output (with code where needed). The
# stages are the types, the capabilities the subtypes.
CAPABILITY = _taxonomy(
    "capability",
    {
        "Recognition": ["StructureUnderstanding", "FormatUnderstanding", "LargeTableUnderstanding"],
        "Locating": ["Grounding", "Knowledge"],
        "Processing": ["Aggregation", "Commanding", "Summarization", "Exploration"],
        "Output": ["Coding"],
    },
)

BUILTIN: dict[str, Taxonomy] = {t.name: t for t in (TABLEBENCH, FREB_TQA, CAPABILITY)}


def custom_taxonomy(
    name: str, categories: Iterable[Mapping[str, str]], *, where: str | None = None
) -> Taxonomy:
    """A workspace-defined taxonomy from config entries ``{type = "...", subtype = "..."}``.

    ``where`` (the config file) prefixes error messages. Every entry must be a table whose
    ``type`` and ``subtype`` are non-empty strings; anything else is a :class:`TaxonomyError`
    naming the entry, never a TypeError.
    """
    prefix = f"{where}: " if where else ""
    hint = 'write each category as [[taxonomy.category]] with type = "..." and subtype = "..."'
    if isinstance(categories, (str, bytes, Mapping)) or not isinstance(categories, Iterable):
        raise TaxonomyError(
            f"{prefix}the categories of taxonomy {name!r} must be a list of tables, "
            f"got {type(categories).__name__}",
            hint=hint,
        )
    cats: list[Category] = []
    seen: set[str] = set()
    for i, entry in enumerate(categories, start=1):
        cat = _category_entry(entry, f"{prefix}category {i} of taxonomy {name!r}", hint)
        if cat.subtype in seen:
            raise TaxonomyError(f"{prefix}subtype {cat.subtype!r} appears twice in taxonomy {name!r}")
        seen.add(cat.subtype)
        cats.append(cat)
    if not cats:
        raise TaxonomyError(f"{prefix}taxonomy {name!r} defines no categories", hint=hint)
    return Taxonomy(name=name, categories=tuple(cats))


def _category_entry(entry: object, label: str, hint: str) -> Category:
    if not isinstance(entry, Mapping):
        raise TaxonomyError(f"{label}: expected a table, got {type(entry).__name__} {entry!r}", hint=hint)
    values: list[str] = []
    for key in ("type", "subtype"):
        if key not in entry:
            raise TaxonomyError(f"{label} lacks {key!r}", hint=hint)
        value = entry[key]
        if not isinstance(value, str) or not value.strip():
            raise TaxonomyError(
                f"{label}: {key} must be a non-empty string, got {type(value).__name__} {value!r}",
                hint=hint,
            )
        values.append(value)
    return Category(values[0], values[1])

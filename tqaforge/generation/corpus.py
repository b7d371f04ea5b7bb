"""The workspace's seed corpus: the editable TOML file plus the questions people promoted.

Where it lives: ``WORKSPACE/seeds.toml``. It does not exist after ``tqaforge init``; the first
command that needs the corpus (``seeds list``, ``seeds add``, ``generate questions``...) writes
it as a copy of the built-in corpus of the workspace taxonomy (``seed_corpora/tablebench.toml``,
``seed_corpora/freb-tqa.toml`` or ``seed_corpora/capability.toml``). From then on it is the workspace's own file: edit it by hand
or with ``tqaforge seeds add`` / ``seeds import``; tqaforge never overwrites it except to write
those edits. A workspace with a custom taxonomy starts with an empty corpus, and ``seeds add
SUBTYPE "question" --definition "..."`` creates each category.

Questions promoted in review (``Question.status == "seed"``) are seeds too: they stay in the
database (where the review decision is recorded) and :func:`workspace_corpus` appends them to
their subtype's seeds, after the file's, oldest promotion first. So the corpus a generation
round sees is "file + promoted", and promoting a question steers the next round without a
file edit.

>>> corpus = workspace_corpus(ws)  # doctest: +SKIP
>>> [s.text for s in seed_entries(ws, "Counting")]  # doctest: +SKIP
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from os import PathLike
from pathlib import Path
from typing import Any, Callable, TypeVar

from sqlmodel import col, select

from tqaforge.config import parse_toml, read_text_file
from tqaforge.errors import ConfigError, TaxonomyError
from tqaforge.files import atomic_write_text
from tqaforge.generation.seeds import (
    SeedCategory,
    SeedCorpus,
    dump_seed_corpus,
    load_seed_corpus,
    parse_seed_corpus,
)
from tqaforge.schemas.enums import QuestionStatus
from tqaforge.schemas.records import Question
from tqaforge.schemas.taxonomy import BUILTIN
from tqaforge.store import Workspace

F = TypeVar("F", bound=Callable[..., Any])


#: The corpora shipped with tqaforge, per built-in taxonomy (package data, so a wheel install has them too).
BUILTIN_SEEDS_DIR = Path(__file__).resolve().parent / "seed_corpora"


@dataclass(frozen=True, slots=True)
class SeedEntry:
    """One seed question and where it comes from: ``"corpus"`` (the file) or ``"promoted"``."""

    subtype: str
    text: str
    source: str
    question_id: str | None = None  # the promoted question


@dataclass(frozen=True, slots=True)
class ImportResult:
    """What :func:`import_seeds` changed."""

    categories_added: tuple[str, ...]
    seeds_added: int
    seeds_present: int
    definitions_replaced: tuple[str, ...]
    definitions_kept: tuple[str, ...]  # the file's definition differs and was not taken


def corpus_path(ws: Workspace) -> Path:
    """Where the workspace's editable corpus lives: ``WORKSPACE/seeds.toml``."""
    return ws.paths.seeds


def builtin_corpus_path(taxonomy_name: str) -> Path | None:
    """The shipped corpus for a built-in taxonomy, or None when tqaforge ships none for it."""
    path = BUILTIN_SEEDS_DIR / f"{taxonomy_name}.toml"
    return path if path.is_file() else None


def load_corpus_file(ws: Workspace) -> SeedCorpus:
    """The workspace's corpus file, written from the built-in corpus on first use.

    Validated against the workspace taxonomy; an empty corpus (custom taxonomy, nothing added
    yet) is returned without writing a file.
    """
    taxonomy = ws.config.taxonomy()
    path = corpus_path(ws)
    if path.exists() or path.is_symlink():
        # The shared reader: a FIFO, a directory or non-UTF-8 text is a ConfigError naming the file.
        text = read_text_file(path, what="seed corpus file")
        if not _has_categories(text, str(path)):
            return SeedCorpus(taxonomy.name, ())
        return parse_seed_corpus(text, where=str(path), taxonomy=taxonomy)
    shipped = builtin_corpus_path(taxonomy.name)
    if shipped is None:
        if taxonomy.name in BUILTIN:
            # A built-in taxonomy always has a shipped corpus: its absence is an install problem.
            raise ConfigError(
                f"the built-in seed corpus for {taxonomy.name!r} is missing ({BUILTIN_SEEDS_DIR})",
                hint=f"install tqaforge from its repository (pip install -e .), or copy a corpus to {path}",
            )
        return SeedCorpus(taxonomy.name, ())
    corpus = load_seed_corpus(shipped, taxonomy=taxonomy)
    _write(path, corpus)
    return corpus


def workspace_corpus(ws: Workspace) -> SeedCorpus:
    """The corpus generation uses: the file's categories with promoted questions appended."""
    corpus = load_corpus_file(ws)
    promoted = _promoted(ws)
    if not promoted:
        return corpus
    categories = []
    for cat in corpus.categories:
        extra = [e.text for e in promoted if e.subtype == cat.subtype and e.text not in cat.seeds]
        categories.append(replace(cat, seeds=cat.seeds + tuple(dict.fromkeys(extra))) if extra else cat)
    return SeedCorpus(corpus.taxonomy, tuple(categories))


def seed_entries(ws: Workspace, subtype: str | None = None) -> list[SeedEntry]:
    """Every seed (file first, then promoted), optionally of one subtype."""
    corpus = load_corpus_file(ws)
    if subtype is not None:
        ws.config.taxonomy().type_of(subtype)  # unknown names fail with the known ones listed
    entries = [
        SeedEntry(cat.subtype, text, "corpus")
        for cat in corpus.categories
        if subtype is None or cat.subtype == subtype
        for text in cat.seeds
    ]
    in_file = {(e.subtype, e.text) for e in entries}
    entries += [
        e for e in _promoted(ws, subtype) if (e.subtype, e.text) not in in_file
    ]
    return entries


def _one_writer(fn: F) -> F:
    """Run ``fn(ws, ...)`` under the workspace's "seeds" lock: it reads the corpus file, changes
    it and writes it back, and two such commands at once would otherwise lose one's change."""

    @functools.wraps(fn)
    def locked(ws: Workspace, *args: Any, **kwargs: Any) -> Any:
        with ws.lock("seeds"):
            return fn(ws, *args, **kwargs)

    return locked  # type: ignore[return-value]


@_one_writer
def add_seed(
    ws: Workspace, subtype: str, question: str | None = None, *, definition: str | None = None
) -> SeedCategory:
    """Add a seed question to ``subtype`` and/or set (replace) its definition; returns the category.

    A subtype the corpus has no category for yet needs a definition. Adding a seed already
    present changes nothing.
    """
    taxonomy = ws.config.taxonomy()
    qtype = taxonomy.type_of(subtype)
    question = _clean(question, "seed question") if question is not None else None
    definition = _clean(definition, "definition") if definition is not None else None
    if question is None and definition is None:
        raise ConfigError("nothing to add", hint='give a question, --definition "...", or both')
    corpus = load_corpus_file(ws)
    categories = list(corpus.categories)
    index = next((i for i, c in enumerate(categories) if c.subtype == subtype), None)
    if index is None:
        if definition is None:
            raise ConfigError(
                f"the corpus has no category {subtype!r} yet",
                hint=f'give its definition: tqaforge seeds add "{subtype}" "..." --definition "..."',
            )
        if question is None:
            raise ConfigError(f"a new category needs at least one seed question: {subtype!r}")
        cat = SeedCategory(qtype, subtype, definition, (question,))
        categories.append(cat)
    else:
        cat = categories[index]
        seeds = cat.seeds + ((question,) if question is not None and question not in cat.seeds else ())
        cat = replace(cat, definition=definition or cat.definition, seeds=seeds)
        categories[index] = cat
    _write(corpus_path(ws), SeedCorpus(taxonomy.name, tuple(categories)))
    return cat


@_one_writer
def import_seeds(
    ws: Workspace, path: str | PathLike[str], *, replace_definitions: bool = False
) -> ImportResult:
    """Merge a corpus file into the workspace corpus.

    New categories come in whole; for categories already present, seeds not yet there are
    appended (in the file's order) and the definition is kept unless ``replace_definitions``.
    The file must be for the workspace taxonomy.
    """
    taxonomy = ws.config.taxonomy()
    incoming = load_seed_corpus(path, taxonomy=taxonomy)
    corpus = load_corpus_file(ws)
    categories = {c.subtype: c for c in corpus.categories}
    added_cats: list[str] = []
    replaced: list[str] = []
    kept: list[str] = []
    added = present = 0
    for cat in incoming.categories:
        mine = categories.get(cat.subtype)
        if mine is None:
            categories[cat.subtype] = cat
            added_cats.append(cat.subtype)
            added += len(cat.seeds)
            continue
        new = tuple(s for s in cat.seeds if s not in mine.seeds)
        present += len(cat.seeds) - len(new)
        added += len(new)
        definition = mine.definition
        if cat.definition != mine.definition:
            if replace_definitions:
                definition = cat.definition
                replaced.append(cat.subtype)
            else:
                kept.append(cat.subtype)
        categories[cat.subtype] = replace(mine, definition=definition, seeds=mine.seeds + new)
    # Keep the taxonomy's order so the file reads like the taxonomy.
    order = {s: i for i, s in enumerate(taxonomy.subtypes)}
    merged = tuple(sorted(categories.values(), key=lambda c: order.get(c.subtype, len(order))))
    _write(corpus_path(ws), SeedCorpus(taxonomy.name, merged))
    return ImportResult(tuple(added_cats), added, present, tuple(replaced), tuple(kept))


def _promoted(ws: Workspace, subtype: str | None = None) -> list[SeedEntry]:
    with ws.session() as s:
        q = select(Question).where(Question.status == QuestionStatus.SEED.value)
        if subtype is not None:
            q = q.where(Question.subtype == subtype)
        rows = s.exec(q.order_by(col(Question.updated_at), col(Question.id))).all()
    out: list[SeedEntry] = []
    seen: set[tuple[str, str]] = set()
    for r in rows:
        if r.subtype is None or (r.subtype, r.text) in seen:
            continue
        seen.add((r.subtype, r.text))
        out.append(SeedEntry(r.subtype, r.text, "promoted", r.id))
    return out


def _clean(text: str, what: str) -> str:
    cleaned = " ".join(text.split())
    if not cleaned:
        raise ConfigError(f"the {what} is empty")
    return cleaned


def _has_categories(text: str, where: str) -> bool:
    try:
        return bool(parse_toml(text, where=where).get("category"))
    except ConfigError:
        return True  # let the corpus parser report the line with its own hint


def _write(path: Path, corpus: SeedCorpus) -> None:
    """Write atomically: a killed command never leaves half a corpus file."""
    if not corpus.categories:
        raise TaxonomyError("refusing to write an empty seed corpus")
    atomic_write_text(path, dump_seed_corpus(corpus))

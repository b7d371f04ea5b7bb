"""Memorisation and leakage without a model: duplicated tables and questions.

A release's base items are compared with each other and with **reference sets** (benchmark files
the user names: TableBench JSONL, FREB-TQA, WikiTableQuestions-style JSONL, any table file
:func:`~tqaforge.tables.readers.read_path` reads; by default the shipped samples under
``data/sample`` and, when present, TableBench and FREB-TQA under ``../shared/data``).

**Tables.** *Exact*: equal content hash of header and cells (:attr:`Table.id`). *Near*: the Jaccard
overlap of the two tables' sets of cell values (header included; each value in the ``loose`` form
of :func:`~tqaforge.tables.matching.fold_text`, blanks left out) reaches ``table_threshold``
(0.8: a copy with a few cells changed). Within the release, one table shared by several items is
one table (the importer merges equal tables); it is listed, not flagged.

**Questions.** *Exact*: equal normalised token sequences (:func:`tqaforge.generation.dedup.tokens`:
NFKC, case folded, punctuation dropped). *Near*: ROUGE-L F (:func:`tqaforge.generation.dedup.rouge_l`,
the one the question generator deduplicates with) reaches ``question_threshold``; the word
``ngram``-gram Jaccard overlap is reported beside it. A question longer than ``max_question_tokens``
(1000) is compared on its first so many tokens (the LCS is quadratic). Scripts written without
spaces (Chinese, Japanese) make one token of each run of word characters: their questions are
found as exact duplicates, rarely as near ones.

An **item is duplicated** when its question is an exact or near duplicate of another question
*and* the two tables are exact or near duplicates: the same question on the same table. Question
duplicates on unrelated tables are reported (templated questions are common) but not counted.

**Scaling.** Candidate pairs come from an inverted index with prefix filtering (Chaudhuri et al.
2006): under a global rare-first order of the elements, two sets whose Jaccard overlap is at least
``t`` share an element among the first ``|x| - ceil(t |x|) + 1`` of each. Every candidate pair is
then verified exactly (Jaccard; ROUGE-L). For questions the elements are the tokens numbered by
occurrence (a multiset as a set): ROUGE-L F >= t implies a Dice overlap >= t, i.e. a Jaccard
overlap >= t / (2 - t), so no pair reaching the ROUGE-L threshold is missed. Only pairs with at
least one release side are looked for.
"""

from __future__ import annotations

import math
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from tqaforge.errors import ConfigError, ReaderError
from tqaforge.evaluate.predictions import Release, load_release
from tqaforge.generation.dedup import rouge_l, tokens
from tqaforge.tables.matching import fold_text
from tqaforge.tables.readers import detect_format, read_path
from tqaforge.tables.table import Table

RELEASE = "release"
_REPO = Path(__file__).resolve().parents[2]


def default_references() -> list[Path]:
    """The shipped reference files that exist here: ``data/sample`` and ``../shared/data``'s TableBench
    and FREB-TQA (absent ones are skipped)."""
    sample = _REPO / "data" / "sample"
    shared = _REPO.parent / "shared" / "data"
    found = sorted(sample.glob("*.jsonl")) + sorted(sample.glob("*/*.jsonl"))
    found += [p for p in [shared / "tablebench" / "TableBench.jsonl"] if p.is_file()]
    found += sorted((shared / "freb-tqa").glob("*/*.jsonl")) if (shared / "freb-tqa").is_dir() else []
    return [p for p in found if p.is_file()]


@dataclass(frozen=True)
class LeakageOptions:
    """What the leakage section counts as a duplicate. It gates nothing itself: the health report's
    thresholds (``max_leaked``, ``max_duplicated``) are the one rule that passes or fails a release."""

    table_threshold: float = 0.8  # Jaccard overlap of cell-value sets for a near-duplicate table
    question_threshold: float = 0.8  # ROUGE-L F for a near-duplicate question
    ngram: int = 3  # word n-grams of the reported question overlap
    references: tuple[Path, ...] | None = None  # None: default_references()
    listed: int = 20  # at most so many duplicates listed in lines()
    max_question_tokens: int = 1000  # longer questions are compared on their first so many tokens

    def __post_init__(self) -> None:
        for name in ("table_threshold", "question_threshold"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise ConfigError(f"leakage option {name} is {value}", hint="give a number in (0, 1]")
        if self.ngram < 1:
            raise ConfigError(f"leakage option ngram is {self.ngram}", hint="give a positive n-gram length")
        if self.max_question_tokens < 1:
            raise ConfigError(f"leakage option max_question_tokens is {self.max_question_tokens}", hint="give a positive number")


@dataclass(frozen=True)
class Item:
    """One question with its table: from the release (``source`` "release") or a reference file."""

    id: str  # a release item id, or "path:line" of a reference
    source: str
    question: str
    table: Table | None


@dataclass
class TableDuplicate:
    """A release table and one table it duplicates (``kind`` "exact" or "near")."""

    table: str  # content hash of the release table
    items: tuple[str, ...]  # the release items on it
    kind: str
    other: str  # content hash of the other table
    other_source: str
    other_items: tuple[str, ...]
    jaccard: float

    def as_dict(self) -> dict[str, Any]:
        return {"table": self.table, "items": list(self.items), "kind": self.kind, "other": self.other,
                "other_source": self.other_source, "other_items": list(self.other_items[:5]),
                "jaccard": round(self.jaccard, 4)}


@dataclass
class QuestionDuplicate:
    """A release question and one question it duplicates; ``table``: how their tables relate
    ("exact", "near" or "" for unrelated)."""

    item: str
    kind: str
    other: str
    other_source: str
    rouge_l: float
    ngram_overlap: float
    table: str

    def as_dict(self) -> dict[str, Any]:
        return {"item": self.item, "kind": self.kind, "other": self.other, "other_source": self.other_source,
                "rouge_l": round(self.rouge_l, 4), "ngram_overlap": round(self.ngram_overlap, 4), "table": self.table}


@dataclass
class LeakageSection:
    """Duplicated tables and questions of a release, within it and against reference sets."""

    options: LeakageOptions
    n_items: int
    n_tables: int
    references: list[dict[str, Any]]  # {"path", "questions", "tables"} per reference file
    tables: list[TableDuplicate] = field(default_factory=list)
    questions: list[QuestionDuplicate] = field(default_factory=list)
    shared_tables: int = 0  # release tables several items share (listed, not flagged)
    seconds: float = 0.0  # how long it took (not in lines() or as_dict(): a report is the same bytes on every run)

    def _items_duplicated(self, within: bool) -> list[str]:
        hits = {d.item for d in self.questions if d.table and (d.other_source == RELEASE) == within}
        return sorted(hits)

    @property
    def leaked_items(self) -> list[str]:
        """Release items whose question and table both recur in a reference set."""
        return self._items_duplicated(within=False)

    @property
    def internal_items(self) -> list[str]:
        """Release items whose question and table both recur in another release item."""
        return self._items_duplicated(within=True)

    def _share(self, items: list[str]) -> float:
        return len(items) / self.n_items if self.n_items else 0.0


    def lines(self) -> list[str]:
        o = self.options
        refs = (f"{len(self.references)} reference files ({sum(r['questions'] for r in self.references)} questions,"
                f" {sum(r['tables'] for r in self.references)} tables)")
        out = [
            f"Leakage: {self.n_items} items on {self.n_tables} tables against {refs}",
            f"  tables: {len({d.table for d in self.tables if d.kind == 'exact'})} with an exact and"
            f" {len({d.table for d in self.tables if d.kind == 'near'})} with a near duplicate (cell-set Jaccard >="
            f" {o.table_threshold}); {self.shared_tables} tables shared by several items",
            f"  questions: {len({d.item for d in self.questions if d.kind == 'exact'})} with an exact and"
            f" {len({d.item for d in self.questions if d.kind == 'near'})} with a near duplicate (ROUGE-L >= {o.question_threshold})",
            f"  items duplicated (question and table): {len(self.leaked_items)} in references"
            f" ({self._share(self.leaked_items):.1%}), {len(self.internal_items)} within the release"
            f" ({self._share(self.internal_items):.1%})",
        ]
        for d in self.tables[: o.listed]:
            where = "release" if d.other_source == RELEASE else Path(d.other_source).name
            out.append(f"    table {d.table} ({', '.join(d.items[:3])}): {d.kind} {d.jaccard:.2f} of {d.other} in {where}"
                       f" ({', '.join(d.other_items[:2])})")
        for q in self.questions[: o.listed]:
            where = "release" if q.other_source == RELEASE else Path(q.other_source).name
            out.append(f"    question {q.item}: {q.kind} (ROUGE-L {q.rouge_l:.2f}, {o.ngram}-grams {q.ngram_overlap:.2f})"
                       f" of {q.other} in {where}; tables {q.table or 'unrelated'}")
        hidden = max(0, len(self.tables) - o.listed) + max(0, len(self.questions) - o.listed)
        if hidden:
            out.append(f"    ... and {hidden} more (health.json)")
        return out

    def as_dict(self) -> dict[str, Any]:
        o = self.options
        return {
            "options": {"table_threshold": o.table_threshold, "question_threshold": o.question_threshold, "ngram": o.ngram},
            "items": self.n_items, "tables": self.n_tables, "shared_tables": self.shared_tables,
            "references": self.references,
            "table_duplicates": [d.as_dict() for d in self.tables],
            "question_duplicates": [d.as_dict() for d in self.questions],
            "leaked_items": self.leaked_items, "internal_items": self.internal_items,
            "leaked_share": self._share(self.leaked_items), "internal_share": self._share(self.internal_items),
        }


# --- similarity join --------------------------------------------------------------------------


def similar_pairs(sets: Sequence[frozenset[Any]], probes: Iterable[int], threshold: float) -> dict[tuple[int, int], float]:
    """All pairs ``(i, j)``, ``i`` in ``probes``, ``i != j``, whose Jaccard overlap is at least
    ``threshold``, with it (each unordered pair once, as ``(min, max)`` when both are probes).
    Exact: prefix filtering finds the candidates (module docs), each verified."""
    order = Counter(e for s in sets for e in s)
    rank = {e: (n, repr(e)) for e, n in order.items()}
    prefixes: list[list[Any]] = []
    index: dict[Any, list[int]] = defaultdict(list)
    for k, s in enumerate(sets):
        ordered = sorted(s, key=rank.__getitem__)
        prefix = ordered[: len(s) - math.ceil(threshold * len(s) - 1e-9) + 1] if s else []
        prefixes.append(prefix)
        for e in prefix:
            index[e].append(k)
    probe_set = set(probes)
    found: dict[tuple[int, int], float] = {}
    for i in sorted(probe_set):
        a = sets[i]
        if not a:
            continue
        seen: set[int] = set()
        for e in prefixes[i]:
            for j in index[e]:
                if j == i or j in seen:
                    continue
                seen.add(j)
                key = (min(i, j), max(i, j)) if j in probe_set else (i, j)
                if key in found:
                    continue
                b = sets[j]
                if not (threshold * len(a) <= len(b) <= len(a) / threshold):
                    continue
                inter = len(a & b)
                jac = inter / (len(a) + len(b) - inter)
                if jac >= threshold - 1e-12:
                    found[key] = jac
    return found


def cell_values(table: Table) -> frozenset[str]:
    """The set of a table's cell values, header included, in the ``loose`` form, blanks left out."""
    values = {fold_text(c) for c in table.header}
    for row in table.rows:
        values.update(fold_text(c) for c in row)
    values.discard("")
    return frozenset(values)


def _numbered(toks: Sequence[str]) -> frozenset[tuple[str, int]]:
    seen: Counter[str] = Counter()
    out = []
    for t in toks:
        seen[t] += 1
        out.append((t, seen[t]))
    return frozenset(out)


def ngram_overlap(a: Sequence[str], b: Sequence[str], n: int = 3) -> float:
    """Jaccard overlap of the word ``n``-gram sets of two token sequences (the tokens themselves
    when one is shorter than ``n``)."""
    m = min(n, len(a), len(b))
    if m == 0:
        return 0.0
    ga = {tuple(a[i: i + m]) for i in range(len(a) - m + 1)}
    gb = {tuple(b[i: i + m]) for i in range(len(b) - m + 1)}
    return len(ga & gb) / len(ga | gb)


# --- reading ----------------------------------------------------------------------------------


def release_items(release: Release) -> list[Item]:
    """The base items of a loaded release with their tables."""
    out = []
    for ref in release.base_references():
        out.append(Item(ref.id, RELEASE, ref.question, table_of(release.table(ref))))
    return out


def table_of(value: Mapping[str, Any] | None) -> Table | None:
    """A release row's table (``{"header": [...], "rows": [[...]]}``) as a :class:`Table`; None without one."""
    header, rows = (value or {}).get("header") or [], (value or {}).get("rows") or []
    return Table.build(header, rows) if header else None


def check_reference(path: Path) -> Path:
    """``path`` when it names a file the leakage section can read as a reference set (it exists and
    its extension, or a ``.jsonl`` file's first line, says a format); else a
    :class:`~tqaforge.errors.ReaderError` naming it and what to give instead. Nothing is read past
    the first line, so a caller can check every reference before a long report starts."""
    if not path.is_file():
        raise ReaderError(str(path), "no such reference file", hint="name an existing TableBench, FREB-TQA or table file")
    try:
        detect_format(path)
    except ReaderError as exc:  # the reader's hint names the import's format option, which this has not got
        raise ReaderError(str(path), f"not a reference file: {exc.problem}",
                          hint="give a TableBench or FREB-TQA file (.jsonl) or a table file "
                               "(.csv .tsv .json .jsonl .html .md .xlsx)") from None
    return path


def reference_items(path: Path) -> list[Item]:
    """The questions (with tables) of one reference file, or its tables alone (a table file).
    A file that cannot be read raises :class:`~tqaforge.errors.ReaderError` naming it."""
    result = read_path(check_reference(path))
    out: list[Item] = []
    for record in result.records:
        if not record.items:
            out.append(Item(record.location, str(path), "", record.table))
        for item in record.items:
            out.append(Item(record.location, str(path), item.question, record.table))
    return out


# --- the section ------------------------------------------------------------------------------


def find_leakage(items: Sequence[Item], references: Sequence[Sequence[Item]] = (),
                 options: LeakageOptions = LeakageOptions()) -> LeakageSection:
    """Duplicated tables and questions of ``items`` (the release) within themselves and against
    ``references`` (one list of items per reference file)."""
    started = time.perf_counter()
    o = options
    everything = list(items) + [it for ref in references for it in ref]
    n_release = len(items)
    # Tables, one entry per (source, content hash).
    table_keys: list[tuple[str, str]] = []
    table_of: dict[tuple[str, str], int] = {}
    table_items: list[list[str]] = []
    table_cells: list[frozenset[str]] = []
    item_table: list[int | None] = []
    for it in everything:
        if it.table is None:
            item_table.append(None)
            continue
        key = (it.source, it.table.id)
        k = table_of.get(key)
        if k is None:
            k = table_of[key] = len(table_keys)
            table_keys.append(key)
            table_items.append([])
            table_cells.append(cell_values(it.table))
        table_items[k].append(it.id)
        item_table.append(k)
    release_tables = [k for k, (src, _) in enumerate(table_keys) if src == RELEASE]
    relation: dict[tuple[int, int], str] = {}
    table_dups: list[TableDuplicate] = []
    by_hash: dict[str, list[int]] = defaultdict(list)
    for k, (_, h) in enumerate(table_keys):
        by_hash[h].append(k)
    for i in release_tables:
        for j in by_hash[table_keys[i][1]]:
            if j != i:  # the same content in a reference file
                relation[(i, j)] = relation[(j, i)] = "exact"
                table_dups.append(TableDuplicate(table_keys[i][1], tuple(table_items[i]), "exact", table_keys[j][1],
                                                 table_keys[j][0], tuple(table_items[j]), 1.0))
    for (i, j), jac in sorted(similar_pairs(table_cells, release_tables, o.table_threshold).items()):
        if (i, j) in relation:
            continue
        kind = "exact" if table_keys[i][1] == table_keys[j][1] else "near"
        relation[(i, j)] = relation[(j, i)] = kind
        for a, b in ((i, j), (j, i)) if table_keys[j][0] == RELEASE else ((i, j),):  # within: listed under each
            table_dups.append(TableDuplicate(table_keys[a][1], tuple(table_items[a]), kind, table_keys[b][1],
                                             table_keys[b][0], tuple(table_items[b]), jac))
    # Questions.
    toks = [tokens(it.question)[: o.max_question_tokens] for it in everything]
    question_sets = [_numbered(t) for t in toks]
    jthreshold = o.question_threshold / (2 - o.question_threshold)
    question_dups: list[QuestionDuplicate] = []
    for (i, j), _ in sorted(similar_pairs(question_sets, range(n_release), jthreshold).items()):
        score = 1.0 if toks[i] == toks[j] else rouge_l(toks[i], toks[j])
        if score < o.question_threshold:
            continue
        ti, tj = item_table[i], item_table[j]
        same = ""
        if ti is not None and tj is not None:
            same = "exact" if table_keys[ti][1] == table_keys[tj][1] else relation.get((ti, tj), "")
        kind = "exact" if toks[i] == toks[j] else "near"
        overlap = ngram_overlap(toks[i], toks[j], o.ngram)
        first, second = everything[i], everything[j]
        question_dups.append(QuestionDuplicate(first.id, kind, second.id, second.source, score, overlap, same))
        if j < n_release:  # both in the release: listed under each
            question_dups.append(QuestionDuplicate(second.id, kind, first.id, first.source, score, overlap, same))
    question_dups.sort(key=lambda d: (d.item, d.other_source != RELEASE, d.other))
    refs_info = [{"path": ref[0].source if ref else "", "questions": sum(bool(it.question) for it in ref),
                  "tables": len({it.table.id for it in ref if it.table is not None})} for ref in references]
    return LeakageSection(
        o, n_release, len(release_tables), refs_info, table_dups, question_dups,
        shared_tables=sum(len(table_items[k]) > 1 for k in release_tables), seconds=time.perf_counter() - started,
    )


def release_leakage(root: Path, options: LeakageOptions = LeakageOptions(), *, release: Release | None = None) -> LeakageSection:
    """The leakage section of the release at ``root`` against ``options.references`` (None: the defaults)."""
    loaded = release if release is not None else load_release(root)
    paths = list(options.references) if options.references is not None else default_references()
    started = time.perf_counter()
    refs = [reference_items(p) for p in paths]
    section = find_leakage(release_items(loaded), [r for r in refs if r], options)
    section.seconds += time.perf_counter() - started
    return section

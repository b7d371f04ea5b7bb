"""What a reader hands to the importer: tables, and the questions that came with them."""

from __future__ import annotations

from dataclasses import dataclass, field

from tqaforge.tables.table import Table

Cell = tuple[int, int]  # (data row, column), 0-based, header excluded


@dataclass(frozen=True, slots=True)
class SourceItem:
    """A question shipped with a table by a dataset file (TableBench, FREB-TQA, ...)."""

    question: str
    answers: tuple[str, ...]
    taxonomy: str | None = None  # "tablebench", "freb-tqa" or None
    qtype: str | None = None
    subtype: str | None = None
    source_id: str | None = None
    relevant_cells: tuple[Cell, ...] | None = None
    meta: dict[str, object] = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class ReadRecord:
    """One table read from a file, with where it was found and its questions (if any)."""

    table: Table
    location: str  # "path:line" or "path#table-2": provenance and error messages
    items: tuple[SourceItem, ...] = ()
    #: What a reader did to the table as written, for the import summary ("dropped 2 empty
    #: columns (column 5, 6)", "merged the first 2 rows into one header: ...").
    notes: tuple[str, ...] = ()


@dataclass(slots=True)
class ReadResult:
    """Everything read from one file. A reader either returns all of it or raises."""

    path: str
    format: str
    records: list[ReadRecord] = field(default_factory=list)
    #: Control characters removed from cells, headers, captions and questions by the one rule
    #: of :func:`tqaforge.tables.cells.clean_text` (for the import summary to report).
    control_chars_removed: int = 0

    @property
    def n_items(self) -> int:
        return sum(len(r.items) for r in self.records)

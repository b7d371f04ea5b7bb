"""Tables: the canonical value object, readers, statistics and (later) serializers and perturbations."""

from tqaforge.ids import content_hash  # the ids module's; importable from here as before
from tqaforge.tables.source import ReadRecord, ReadResult, SourceItem
from tqaforge.tables.stats import TABLEBENCH_FILTER, SelectionFilter, TableStats, table_stats
from tqaforge.tables.table import Table

__all__ = [
    "ReadRecord",
    "ReadResult",
    "SelectionFilter",
    "SourceItem",
    "TABLEBENCH_FILTER",
    "Table",
    "TableStats",
    "content_hash",
    "table_stats",
]

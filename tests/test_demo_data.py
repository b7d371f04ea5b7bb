"""The demo data under data/: real tables that pass TableBench's selection filter, and sample
JSON Lines copied verbatim from the shared reference data."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tqaforge.schemas.taxonomy import TABLEBENCH

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
TABLES = DATA / "tables"
SAMPLE = DATA / "sample"
SHARED = ROOT.parent / "shared" / "data"

TABLE_FILES = sorted(p for p in TABLES.iterdir() if p.is_file())

needs_shared = pytest.mark.skipif(
    not SHARED.is_dir(), reason="../shared/data is absent (fresh clone)"
)

# Where each shipped table comes from: (file under ../shared/data, 1-based line, how to get the
# table from that line). data/README.md says the same in prose.
SOURCES: dict[str, tuple[str, int, str]] = {
    "tablebench_tropical_cyclones.csv": ("tablebench/TableBench.jsonl", 1, "tablebench"),
    "tablebench_disease_cases.tsv": ("tablebench/TableBench.jsonl", 135, "tablebench"),
    "tablebench_north_burnett_population.json": ("tablebench/TableBench.jsonl", 756, "tablebench"),
    "tablebench_tourism_2011.md": ("tablebench/TableBench.jsonl", 173, "tablebench"),
    "tablebench_nyagatare_sectors.html": ("tablebench/TableBench.jsonl", 651, "tablebench"),
    "wtq_football_league_table.csv": ("freb-tqa/01_str/wtq_factoid_dev.jsonl", 27, "freb"),
    "wtq_cricket_batting.tsv": ("freb-tqa/01_str/wtq_factoid_dev.jsonl", 98, "freb"),
    "wtq_golf_majors_by_country.md": ("freb-tqa/01_str/wtq_factoid_dev.jsonl", 57, "freb"),
    "wtq_arms_sales.html": ("freb-tqa/01_str/wtq_factoid_dev.jsonl", 59, "freb"),
    "wtq_ime_exchange.json": ("freb-tqa/01_str/wtq_factoid_dev.jsonl", 7, "freb"),
}


def _ids(paths):
    return [p.name for p in paths]


def _source_table(name: str) -> tuple[list[str], list[list[str]]]:
    rel, line, kind = SOURCES[name]
    record = json.loads((SHARED / rel).read_text(encoding="utf-8").splitlines()[line - 1])
    table = record["table"]
    if kind == "tablebench":
        return table["columns"], table["data"]
    return table["header"], table["rows"]


# --- what is shipped (no reader needed) --------------------------------------------------------


def test_tables_are_a_small_multi_format_sample():
    assert 6 <= len(TABLE_FILES) <= 10
    suffixes = {p.suffix for p in TABLE_FILES}
    assert {".csv", ".tsv", ".json", ".html", ".md"} <= suffixes
    assert set(_ids(TABLE_FILES)) == set(SOURCES), "update SOURCES and data/README.md"


def test_readme_lists_every_file_with_its_licence():
    readme = (DATA / "README.md").read_text(encoding="utf-8")
    shipped = [p for p in DATA.rglob("*") if p.is_file() and p.name != "README.md"]
    for path in shipped:
        assert path.name in readme, f"data/README.md does not mention {path.relative_to(DATA)}"
    for phrase in ("Apache-2.0", "CC-BY-SA-4.0", "ShareAlike", "FREB-TQA", "TableBench"):
        assert phrase in readme


def test_tablebench_sample_has_two_items_per_subtype():
    rows = [json.loads(line) for line in _lines(SAMPLE / "tablebench_sample.jsonl")]
    counts = Counter(r["qsubtype"] for r in rows)
    assert set(counts) == set(TABLEBENCH.subtypes)
    assert all(n == 2 for n in counts.values())
    for r in rows:
        TABLEBENCH.validate(r["qtype"], r["qsubtype"])
        assert {"id", "table", "question", "answer"} <= set(r)
    assert len({r["id"] for r in rows}) == len(rows)


def test_freb_rel_sample_carries_relevant_cells():
    rows = [json.loads(line) for line in _lines(SAMPLE / "tat_nonfactoid_dev_sample.jsonl")]
    assert 8 <= len(rows) <= 12
    for r in rows:
        header, *body = r["table"]
        assert r["rel_cell"]
        for row, col in r["rel_cell"]:
            # [row, col], 0-based, header row excluded
            assert 0 <= row < len(body) and 0 <= col < len(header)


# --- tables pass the import filter (needs the reader) -----------------------------------------


@pytest.mark.parametrize("path", TABLE_FILES, ids=_ids(TABLE_FILES))
def test_table_file_passes_tablebench_filter(path):
    read_path = _read_path()
    from tqaforge.tables.stats import TABLEBENCH_FILTER, table_stats

    result = read_path(path)
    assert len(result.records) == 1, f"{path.name}: expected one table"
    stats = table_stats(result.records[0].table)
    assert TABLEBENCH_FILTER.rejects(stats) is None, (path.name, stats)


@needs_shared
@pytest.mark.shared
@pytest.mark.parametrize("path", TABLE_FILES, ids=_ids(TABLE_FILES))
def test_table_file_cells_are_the_source_cells(path):
    read_path = _read_path()
    header, rows = _source_table(path.name)
    table = read_path(path).records[0].table
    assert list(table.header) == header
    assert [list(r) for r in table.rows] == rows


# --- samples are verbatim copies of the shared files -------------------------------------------


@needs_shared
@pytest.mark.shared
@pytest.mark.parametrize(
    ("sample", "source"),
    [
        ("tablebench_sample.jsonl", "tablebench/TableBench.jsonl"),
        ("tat_nonfactoid_dev_sample.jsonl", "freb-tqa/02_rel/tat_nonfactoid_dev.jsonl"),
        *[(f"freb_agg_com/tat_nonfactoid_dev_no_shuffle_{part}.jsonl", f"freb-tqa/03_agg_com/tat_nonfactoid_dev_no_shuffle_{part}.jsonl")
          for part in ("ori_table", "short_table", "ans_change", "ans_no_change")],
    ],
)
def test_sample_lines_are_verbatim(sample, source):
    source_lines = set((SHARED / source).read_bytes().split(b"\n"))
    sample_lines = (SAMPLE / sample).read_bytes().split(b"\n")
    assert sample_lines[-1] == b"", "sample must end with a newline"
    for n, line in enumerate(sample_lines[:-1], start=1):
        assert line in source_lines, f"{sample} line {n} is not a line of {source}"


def _read_path():
    """The importer's reader."""
    from tqaforge.tables.readers import read_path

    return read_path


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]

"""Golden digests of the variant grid's outputs: every perturbation result and every
serialization of it, for TableBench (../shared), its sample in data/ and generated hostile tables.

The digests were recorded with the grid as it was before issue 26's speed-ups (commit 0abec0e);
``tests/test_variants_golden.py`` recomputes them and compares. Only digests are shipped: one
sha256 per configuration over all tables of a set (which configuration changed) and a short one
per table over all its configurations (which table changed).

Regenerate (only when an output is meant to change; say why in the commit):

    PYTHONPATH=$PWD .venv/bin/python tests/variant_golden.py
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path
from typing import Any, Iterator

from tqaforge.tables.perturb import PERTURBATIONS, TORR_PERTURBATIONS, PerturbationSkipped
from tqaforge.tables.perturb.base import ItemContext
from tqaforge.tables.serialize import SERIALIZATIONS
from tqaforge.tables.table import PackedRows, Table

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
GOLDEN = TESTS / "golden" / "variant_grid_sha256.json"
TABLEBENCH = REPO.parent / "shared" / "data" / "tablebench" / "TableBench.jsonl"
SAMPLE = REPO / "data" / "sample" / "tablebench_sample.jsonl"

CONDITIONS = ("none", *TORR_PERTURBATIONS)
#: Seeds per condition: the seeded ones with two seeds (0 is the grid's default), the others with 0
#: only, as the grid builds them (``grid.SEED_FREE``).
SEEDS = {"none": (0,), "transpose": (0,), "shuffle_rows": (0, 1), "shuffle_columns": (0, 1), "insert_empty_rows": (0, 1)}
#: Every serialization, ToRR's seven and the three others (they share the escaping helpers).
FORMATS = tuple(SERIALIZATIONS)

Item = tuple[Table, ItemContext]


def tablebench_items(path: Path) -> list[Item]:
    """(table, context) per question, as ``benchmarks/variants.py`` reads them."""
    from tqaforge.tables.readers import read_tablebench

    return [(record.table, ItemContext(question=q.question, answers=q.answers))
            for record in read_tablebench(path).records for q in record.items]


# Characters every format escapes somewhere, separators the code itself uses inside strings
# (\x1f packs rows, \x1e joins html rows), XML-illegal ones, a BOM, quotes and braces.
_NASTY = list("\\|\n\r\t,;\"'&<>{}%$#_~^\x1f\x1e\x00\x0b\ufeff\ufffe -.") + ["\r\n", "row 2 :", "</td>", "é", "表"]
_WORDS = ["a", "b", "Name", "Age", "x", "", "total", "1", "2", "-3", "007", "-0", "2.5", "1e5", "nan", "inf",
          "3.0", "0", "10", "99999999999999999999", "1_000", " 4", "5 "]


def _cell(rng: random.Random, numeric: bool) -> str:
    if numeric:
        return rng.choice(["1", "2", "-3", "10", "0", "42", "2.5", "-0.5", "3.0", "1e5", "007", "-0", ""])
    if rng.random() < 0.5:
        return rng.choice(_WORDS)
    return "".join(rng.choice(_NASTY + _WORDS) for _ in range(rng.randint(0, 4)))


def hostile_items(n: int = 300) -> list[Item]:
    """Generated tables (fixed seed) with the cells that stress escaping and number detection:
    duplicate and blank header names, numeric columns, no rows, one column, equal rows or
    columns, packed rows and plain tuples."""
    rng = random.Random(20261125)
    items: list[Item] = []
    for i in range(n):
        n_cols = rng.choice([1, 1, 2, 2, 3, 4, 6])
        n_rows = rng.choice([0, 1, 2, 3, 5, 8, 13])
        header = [rng.choice(["a", "a", "b", "", "a_1", "Name"]) if rng.random() < 0.3 else _cell(rng, False) for _ in range(n_cols)]
        numeric = [rng.random() < 0.4 for _ in range(n_cols)]
        rows = [[_cell(rng, numeric[c]) for c in range(n_cols)] for _ in range(n_rows)]
        if i % 17 == 0 and rows:
            rows = [rows[0]] * len(rows)  # all rows equal: the shuffles skip
        if i % 19 == 0:
            rows = [[r[0]] * n_cols for r in rows]
            header = [header[0]] * n_cols  # all columns equal
        if i % 2:
            table = Table(tuple(header), PackedRows(rows))
        else:
            table = Table.build(header, rows, caption="cap" if i % 3 == 0 else None)
        items.append((table, ItemContext(question="q", answers=(rows[0][0],) if rows else ())))
    return items


def _outcome(perturbed: Any) -> bytes:
    """What the grid stores of one perturbation, as bytes."""
    record = {
        "table": perturbed.table.to_dict(),
        "change": perturbed.change.to_dict(),
        "effect": perturbed.answer_effect.value,
        "answers": list(perturbed.answers) if perturbed.answers is not None else None,
        "params": perturbed.params,
    }
    return json.dumps(record, ensure_ascii=False, sort_keys=True).encode("utf-8", "surrogatepass")


def configurations() -> Iterator[tuple[str, int]]:
    for name in CONDITIONS:
        for seed in SEEDS[name]:
            yield name, seed


def outputs(table: Table, ctx: ItemContext) -> Iterator[tuple[str, bytes]]:
    """(configuration key, output bytes) for every configuration of one item."""
    for name, seed in configurations():
        try:
            perturbed = PERTURBATIONS[name](table, ctx, seed)
        except PerturbationSkipped as skipped:
            yield f"{name}/{seed}/perturbed", b"skipped: " + skipped.reason.encode()
            for fmt in FORMATS:
                yield f"{name}/{seed}/{fmt}", b""
            continue
        yield f"{name}/{seed}/perturbed", _outcome(perturbed)
        for fmt in FORMATS:
            yield f"{name}/{seed}/{fmt}", SERIALIZATIONS[fmt](perturbed.table).encode("utf-8", "surrogatepass")


def digests(items: list[Item]) -> dict[str, Any]:
    """{"configurations": {key: sha256 over all items}, "items": [sha256[:16] per item]}."""
    per_config: dict[str, Any] = {}
    per_item: list[str] = []
    for table, ctx in items:
        item_hash = hashlib.sha256()
        for key, data in outputs(table, ctx):
            framed = len(data).to_bytes(8, "big") + data
            per_config.setdefault(key, hashlib.sha256()).update(framed)
            item_hash.update(framed)
        per_item.append(item_hash.hexdigest()[:16])
    return {"configurations": {k: h.hexdigest() for k, h in per_config.items()}, "items": per_item}


def prompts_digest(ws: Any, out: Path) -> str:
    """The sha256 of the prompts file ``tqaforge variants build`` writes for the data/ samples
    (TableBench's and FREB-TQA's) in the empty workspace ``ws``: the grid end to end (stored
    variants, prompt templates), ToRR's 35 configurations with two seeds."""
    from tqaforge.annotation.human_import import import_human_work
    from tqaforge.variants.grid import GridOptions, build_variant_grid

    import_human_work(ws, [SAMPLE, SAMPLE.parent / "freb_agg_com"])
    build_variant_grid(ws, GridOptions(seeds=(0, 1), skip_structural=False, status=None, out=out))
    return hashlib.sha256(out.read_bytes()).hexdigest()


def sets() -> dict[str, list[Item]]:
    """The golden sets; TableBench only when ../shared holds it."""
    out = {"sample": tablebench_items(SAMPLE), "hostile": hostile_items()}
    if TABLEBENCH.exists():
        out["tablebench"] = tablebench_items(TABLEBENCH)
    return out


def main() -> int:
    golden = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    for name, items in sets().items():
        golden[name] = digests(items)
        print(f"{name}: {len(items)} items, {len(golden[name]['configurations'])} configurations")
    import os
    import tempfile

    from tqaforge.store import init_workspace

    os.environ.pop("TQAFORGE_DATABASE_URL", None)
    with tempfile.TemporaryDirectory() as tmp:
        ws = init_workspace(Path(tmp) / "ws", name="test")
        try:
            golden["prompts_sample"] = prompts_digest(ws, Path(tmp) / "prompts.jsonl")
        finally:
            ws.close()
    GOLDEN.write_text(json.dumps(golden, indent=0, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

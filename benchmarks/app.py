"""Time to render each page of the app on a large workspace (Streamlit's AppTest, no browser).

The workspace (SQLite, built once outside the timing): the 50 demo tables, 10,000 questions (a
quarter proposed, the rest accepted with a gold answer, each with its generation lineage), 50,000
variants (five perturbations a question, each storing its table) and 30,000 annotations (three
people typing every question, with disagreement). Each page is run once to warm up (imports,
Streamlit's caches), then timed over ``--repeat`` runs; the median is reported against the target
(every page under 1 s). The baseline is an empty page script (``st.title`` only) run the same way
in the same run: what AppTest itself costs.

    .venv/bin/python benchmarks/app.py [--repeat 5] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from sqlmodel import select
from streamlit.testing.v1 import AppTest

from tqaforge.ids import annotation_id, annotation_task_id, content_hash
from tqaforge.ingest import import_paths
from tqaforge.schemas.records import Annotation, AnnotationTask, Answer, Question, TableRecord, Variant
from tqaforge.store import init_workspace, insert_new
from tqaforge.tables.perturb import TORR_PERTURBATIONS

REPO = Path(__file__).resolve().parents[1]
PAGES = REPO / "tqaforge" / "app" / "pages"
QUESTIONS, VARIANTS_PER_QUESTION, ANNOTATORS = 10_000, 5, 3
SEED = 0


def build(root: Path) -> None:
    """The large workspace (module docs)."""
    ws = init_workspace(root, name="large")
    assert not import_paths(ws, [REPO / "data" / "tables"]).failed
    rng = random.Random(SEED)
    with ws.session() as s:
        tables = {t.id: t for t in s.exec(select(TableRecord)).all()}
    subtypes = [c.subtype for c in ws.config.taxonomy().categories]
    questions, answers, variants, tasks, labels = [], [], [], [], []
    table_ids = sorted(tables)
    for i in range(QUESTIONS):
        table_id = table_ids[i % len(table_ids)]
        table = tables[table_id]
        subtype = subtypes[i % len(subtypes)]
        text = f"Question {i}: how many rows have a value above {i % 97} in {table.header[-1]!r}?"
        qid = Question.make_id(table_id, text, subtype)
        proposed = i % 4 == 0
        questions.append({"id": qid, "table_id": table_id, "text": text, "qtype": ws.config.taxonomy().type_of(subtype),
                          "subtype": subtype, "status": "proposed" if proposed else "accepted", "origin": "llm", "round": 1 + i % 3,
                          "lineage": {"round": 1, "seeds_shown": [f"seed {i % 7}", f"seed {i % 11}"]}})
        if not proposed:
            answers.append({"id": content_hash({"q": qid}), "question_id": qid, "value": str(i % 13), "values": [str(i % 13)],
                            "status": "gold", "origin": "import"})
        for name in ("none", *TORR_PERTURBATIONS)[:VARIANTS_PER_QUESTION]:
            rows = list(table.rows)
            if name == "shuffle_rows":
                rows = rows[::-1]
            variants.append({"id": content_hash({"q": qid, "p": name}), "question_id": qid, "table_id": table_id, "perturbation": name,
                             "seed": 0, "status": "built", "origin": "rule",
                             "table": {"header": list(table.header), "rows": [list(r) for r in rows]}, "answers": [str(i % 13)],
                             "changes": {}, "params": {}})
        task_id = annotation_task_id("question_typing", "question", qid)
        tasks.append({"id": task_id, "kind": "question_typing", "target_type": "question", "target_id": qid, "status": "annotated"})
        for a in range(ANNOTATORS):
            kind = "reasoning" if rng.random() < 0.8 else "extraction"
            labels.append({"id": annotation_id(task_id, f"ls:p{a}", f"bench:{i}"), "task_id": task_id, "annotator": f"ls:p{a}",
                           "kind": "question_typing", "label": {"type": kind}, "source": "simulation", "source_ref": f"bench:{i}"})
    for model, rows in ((Question, questions), (Answer, answers), (Variant, variants), (AnnotationTask, tasks), (Annotation, labels)):
        for start in range(0, len(rows), 2000):
            with ws.session() as s:
                insert_new(s, model, rows[start:start + 2000])
    print(f"workspace: {len(questions)} questions, {len(variants)} variants, {len(labels)} annotations")


def time_page(path: Path, repeat: int) -> tuple[float, float]:
    """(first run, median of ``repeat`` later runs) of one page, in seconds."""
    start = time.perf_counter()
    at = AppTest.from_file(str(path), default_timeout=120).run()
    first = time.perf_counter() - start
    if at.exception:
        sys.exit(f"{path.name} failed: {at.exception}")
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        AppTest.from_file(str(path), default_timeout=120).run()
        times.append(time.perf_counter() - start)
    return first, statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    root = (args.keep or Path(tempfile.mkdtemp(prefix="tqaforge-bench-app-"))) / "ws"
    if not (root / "tqaforge.toml").exists():
        start = time.perf_counter()
        build(root)
        print(f"built in {time.perf_counter() - start:.1f} s (not timed below)")
    os.environ["TQAFORGE_WORKSPACE"] = str(root)
    empty = Path(tempfile.mkdtemp()) / "empty.py"
    empty.write_text("import streamlit as st\nst.title('empty')\n")
    _, baseline = time_page(empty, args.repeat)
    print(f"\n{'page':<16} {'first run':>10} {'median':>10} {'vs empty page':>14}  target < 1 s")
    print(f"{'(empty page)':<16} {'':>10} {baseline:>9.3f}s {1.0:>13.1f}x")
    for page in ("overview", "tables", "taxonomy", "generate", "review", "answers", "variants", "annotation", "agreement", "releases"):
        first, median = time_page(PAGES / f"{page}.py", args.repeat)
        print(f"{page:<16} {first:>9.3f}s {median:>9.3f}s {median / baseline:>13.1f}x  {'ok' if median < 1.0 else 'OVER'}")


if __name__ == "__main__":
    main()

"""A generated labelling study for the agreement report at scale (tests and benchmarks).

:func:`build_study` fills a workspace with questions on a few tables, a gold answer and a
variant for each, and every annotation kind the report compares: each question is labelled by
three of ``people`` annotators (a rotating choice, so items miss raters) in five kinds, one of
each label shape: ``question_typing``, ``question_review`` and ``answer_verification``
(categories; the answer task is reached through the answer, the review through a variant, so
subtypes go through both), ``relevant_cells`` (sets of cells, MASI alpha) and
``blind_reanswer`` (answers scored against the gold). Each label agrees with a per-item truth
with probability 0.8. A few labels are changed later (the latest counts), a few are unreadable
(reported as problems), a few imported (excluded by default), some annotators are registered
people (shown by name). ``n_questions * 15`` labels in all (plus the few extra): 20,000
questions make 300,000 labels. Deterministic for a seed: fixed ids and timestamps.

    .venv/bin/python benchmarks/agreement.py --labels 300000    # builds one and times the report
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone
from typing import Any

from tqaforge.ids import annotation_id, annotation_task_id, content_hash
from tqaforge.schemas.records import Annotation, AnnotationTask, Annotator, Answer, Question, TableRecord, Variant
from tqaforge.store import Workspace, insert_new

#: Labels per question: three annotators in each of five kinds.
LABELS_PER_QUESTION = 15
KINDS = ("question_typing", "question_review", "answer_verification", "relevant_cells", "blind_reanswer")
SUBTYPES = ("Counting", "MatchBased", "Aggregation", "Comparison", "Ranking", "FactChecking")
_T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
_BATCH = 5000


def _tables(n_tables: int) -> list[dict[str, Any]]:
    rows, cols = 6, 4
    return [
        {"id": f"tab{t:03d}", "header": [f"c{c}" for c in range(cols)],
         "rows": [[str(t * 100 + r * cols + c) for c in range(cols)] for r in range(rows)],
         "n_rows": rows, "n_cols": cols, "numeric_share": 1.0}
        for t in range(n_tables)
    ]


def _label(kind: str, truth: int, rng: random.Random, agree: bool) -> Any:
    """One label of ``kind`` for an item whose true value is ``truth`` (a different one unless ``agree``)."""
    pick = truth if agree else truth + rng.randint(1, 5)
    if kind == "question_typing":
        return {"type": ("reasoning", "extraction", "unanswerable")[pick % 3]}
    if kind == "question_review":
        return {"decision": ("accept", "reject", "edit", "promote")[pick % 4]}
    if kind == "answer_verification":
        return {"decision": ("correct", "incorrect", "unanswerable")[pick % 3]}
    if kind == "relevant_cells":
        base = [[truth % 6, truth % 4], [(truth + 1) % 6, truth % 4]]
        if not agree:
            base = base[:1] if rng.random() < 0.5 else base + [[pick % 6, pick % 4]]
        return {"cells": base}
    # blind_reanswer: the gold is str(truth % 13); a wrong answer is another number
    return {"answer": str(truth % 13) if agree else str(truth % 13 + 20)}


def build_study(ws: Workspace, n_questions: int, *, seed: int = 0, people: int = 8, n_tables: int = 50) -> int:
    """Fill ``ws`` with the study (module docs); returns the number of labels stored."""
    rng = random.Random(seed)
    tables = _tables(n_tables)
    names = [f"p{a}" for a in range(people)]
    # Half the annotators are registered people (labels carry annotator_id, the report shows their name).
    annotators = [{"id": f"person-{a}", "name": f"Person {a}", "aliases": [names[a]]} for a in range(0, people, 2)]
    person_of = {names[a]: f"person-{a}" for a in range(0, people, 2)}
    questions, answers, variants, tasks, labels = [], [], [], [], []
    for i in range(n_questions):
        table = tables[i % n_tables]
        qid = f"q{i:06d}"
        truth = rng.randrange(60)
        questions.append({"id": qid, "table_id": table["id"], "text": f"question {i}", "qtype": "reasoning",
                          "subtype": SUBTYPES[i % len(SUBTYPES)], "status": "accepted", "origin": "llm", "round": 1})
        aid = content_hash({"answer": qid})
        answers.append({"id": aid, "question_id": qid, "value": str(truth % 13), "values": [str(truth % 13)],
                        "status": "gold", "origin": "import"})
        vid = content_hash({"variant": qid})
        variants.append({"id": vid, "question_id": qid, "table_id": table["id"], "perturbation": "shuffle_rows", "seed": 0,
                         "status": "built", "origin": "rule", "table": None, "answers": [str(truth % 13)],
                         "changes": {}, "params": {}})
        who = [names[(i + k * 3) % people] for k in range(3)]
        for kind in KINDS:
            target_type, target_id = {"answer_verification": ("answer", aid), "question_review": ("variant", vid)}.get(kind, ("question", qid))
            task_id = annotation_task_id(kind, target_type, target_id)
            tasks.append({"id": task_id, "kind": kind, "target_type": target_type, "target_id": target_id, "status": "annotated"})
            for k, name in enumerate(who):
                ref = f"study:{i}:{kind}:{k}"
                labels.append({
                    "id": annotation_id(task_id, name, ref), "task_id": task_id, "annotator": name, "kind": kind,
                    "label": _label(kind, truth, rng, rng.random() < 0.8), "source": "simulation", "source_ref": ref,
                    "created_at": _T0 + timedelta(seconds=i), "annotator_id": person_of.get(name),
                })
                roll = rng.random()
                if roll < 0.01:  # changed their mind: a later label by the same person counts
                    labels.append({**labels[-1], "id": annotation_id(task_id, name, ref + ":2"), "source_ref": ref + ":2",
                                   "label": _label(kind, truth, rng, True), "created_at": _T0 + timedelta(days=1, seconds=i)})
                elif roll < 0.012:  # an imported label: left out by default
                    labels.append({**labels[-1], "id": annotation_id(task_id, "import", ref), "annotator": "import",
                                   "source": "imported", "source_ref": ref, "annotator_id": None})
                elif roll < 0.013:  # unreadable: reported, not counted
                    labels.append({**labels[-1], "id": annotation_id(task_id, name + "-x", ref), "annotator": name + "-x",
                                   "label": {"nonsense": i}, "annotator_id": None})
    with ws.session() as s:
        insert_new(s, TableRecord, tables)
        insert_new(s, Annotator, annotators)
    for model, rows in ((Question, questions), (Answer, answers), (Variant, variants), (AnnotationTask, tasks), (Annotation, labels)):
        for start in range(0, len(rows), _BATCH):
            with ws.session() as s:
                insert_new(s, model, rows[start:start + _BATCH])
    return len(labels)

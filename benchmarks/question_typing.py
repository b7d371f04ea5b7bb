"""Question typing measured on FREB-TQA's labelled folders, and the structural filter on hand labels.

    .venv/bin/python benchmarks/question_typing.py [--tagger auto|nltk|wordlist]
    .venv/bin/python benchmarks/question_typing.py --llm 100 [--model M] [--max-cost USD]
    .venv/bin/python benchmarks/question_typing.py --store 2000   # classify_questions on a loopback model

FREB-TQA's folders are its labels: ``01_str`` holds extraction questions, ``02_rel`` and
``03_agg_com`` reasoning questions. We read one file per question set (``02_rel/tat`` and the
``03_agg_com`` TAT files hold the same questions; the three ``03_agg_com/wtq`` files too):
``01_str/{wtq,sqa,tat}`` (EQ), ``02_rel/tat`` (RQ, original tables) and
``03_agg_com/wtq_..._short_table`` (RQ; only a shortened table is published for these, so
"answer not in the table" comes easier than on the full table: for the 515 of them whose table
``01_str/wtq`` also holds in full, the script also scores the full tables).

The structural filter is scored on ``tests/data/freb_structural_labels.tsv``: every question
the widest word list flags, labelled by hand, and a random sample of the others for recall.
Without ``--llm`` no model is called. With ``--llm N`` (and an endpoint configured as for
``tqaforge``: ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``--model`` or ``TQAFORGE_LLM_MODEL``) the
script also types a seeded sample of N questions per file with the LLM classifier and scores
the lexical rule, the model and FREB-TQA's combination side by side on that sample. Model calls
are cached in ``--workspace`` (default ``.bench-typing``), so a rerun pays nothing.

``--store N`` measures the stage itself, :func:`classify_questions` with ``method="llm"``: N
FREB-TQA questions imported into a fresh workspace, typed by a loopback model that answers at
once (``tests/openai_server.py``), so the time is the stage's own: selection, requests, the
ledger and the typing writes. It types them twice: the first run pays every call, the second
finds everything done (or answered from the cache).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tqaforge.errors import InvalidReply  # noqa: E402
from tqaforge.generation.classify import (  # noqa: E402
    EXTENDED_STRUCTURAL_WORDS,
    PAPER_STRUCTURAL_WORDS,
    STRUCTURAL_WORDS,
    LLMVerdict,
    combine,
    cue_finder,
    lexical_type,
    llm_type,
    nltk_tagger_status,
    score_typing,
    structural_words,
)
from tqaforge.llm import Gateway, load_llm_settings  # noqa: E402
from tqaforge.schemas.enums import QuestionType  # noqa: E402
from tqaforge.store import init_workspace  # noqa: E402
from tqaforge.tables.readers.datasets import read_freb_tqa  # noqa: E402
from tqaforge.tables.table import Table  # noqa: E402

EQ = QuestionType.EXTRACTION

FREB = REPO.parent / "shared" / "data" / "freb-tqa"
LABELS = REPO / "tests" / "data" / "freb_structural_labels.tsv"
FILES = {
    "01_str/wtq": "01_str/wtq_factoid_dev.jsonl",
    "01_str/sqa": "01_str/sqa_factoid_dev.jsonl",
    "01_str/tat": "01_str/tat_factoid_dev.jsonl",
    "02_rel/tat": "02_rel/tat_nonfactoid_dev.jsonl",
    "03_agg_com/wtq": "03_agg_com/wtq_nonfactoid_dev_no_shuffle_short_table.jsonl",
}


def items(name: str) -> list[tuple[str, str, tuple[str, ...], Table, str]]:
    """(id, question, answers, table, gold type) of one FREB-TQA file."""
    out = []
    for record in read_freb_tqa(FREB / FILES[name]).records:
        item = record.items[0]
        out.append((item.source_id or "", item.question, item.answers, record.table, item.subtype or ""))
    return out


def full_wtq_tables() -> dict[str, Table]:
    """WTQ table name -> the full table, from 01_str/wtq (which publishes full tables)."""
    tables = {}
    for line in (FREB / FILES["01_str/wtq"]).read_text(encoding="utf-8").splitlines():
        obj = json.loads(line)
        t = obj["table"]
        tables[t["name"]] = Table.build(t["header"], t["rows"])
    return tables


def lexical_report(tagger: str) -> None:
    finder = cue_finder(tagger)  # type: ignore[arg-type]
    print(f"lexical rule, comparative words by: {finder.name}")
    gold: list[str] = []
    predicted: list[object] = []
    rules: collections.Counter[tuple[str, str]] = collections.Counter()
    for name in FILES:
        started = time.perf_counter()
        g, p = [], []
        for _, question, answers, table, label in items(name):
            verdict = lexical_type(table, question, answers, cues=finder)
            g.append(label)
            p.append(verdict.question_type)
            rules[(label, verdict.rule)] += 1
        s = score_typing(g, p)
        label = g[0]
        print(f"  {name:15} {len(g):5} {label:10}  correct {s.confusion.get((label, label), 0):5}  "
              f"accuracy {s.accuracy:.3f}  ({time.perf_counter() - started:.2f} s)")
        gold += g
        predicted += p
    s = score_typing(gold, predicted)
    for kind in ("extraction", "reasoning"):
        print(f"  {kind:10}  precision {s.precision(kind):.3f}  recall {s.recall(kind):.3f}  "
              f"precision at 50/50 {s.balanced_precision(kind):.3f}")
    print(f"  accuracy {s.accuracy:.3f} over {s.n}")
    print("  rules:", ", ".join(f"{g}->{r}: {n}" for (g, r), n in sorted(rules.items())))

    # The same RQs with their full tables where 01_str/wtq publishes them.
    full = full_wtq_tables()
    g, p_short, p_full = [], [], []
    for line in (FREB / FILES["03_agg_com/wtq"]).read_text(encoding="utf-8").splitlines():
        obj = json.loads(line)
        table = full.get(obj["table"].get("name"))
        if table is None:
            continue
        short = Table.build(obj["table"]["header"], obj["table"]["rows"])
        g.append("reasoning")
        p_short.append(lexical_type(short, obj["question"], obj["answers"], cues=finder).question_type)
        p_full.append(lexical_type(table, obj["question"], obj["answers"], cues=finder).question_type)
    print(f"  03_agg_com/wtq with the full table known: {len(g)}; RQ recall on the short table "
          f"{score_typing(g, p_short).recall('reasoning'):.3f}, on the full table {score_typing(g, p_full).recall('reasoning'):.3f}")

    # Extraction questions that survive the structural filter: the ones structure perturbations use.
    kept = [(gl, pr) for (gl, pr, (_, q, *_)) in zip(gold, predicted, [x for n in FILES for x in items(n)])
            if not structural_words(q)]
    s2 = score_typing([k[0] for k in kept], [k[1] for k in kept])
    print(f"  after the structural filter ({len(kept)} questions): extraction precision {s2.precision('extraction'):.3f}, "
          f"at 50/50 {s2.balanced_precision('extraction'):.3f}")


def structural_report() -> None:
    rows = []
    for line in LABELS.read_text(encoding="utf-8").splitlines():
        if line.startswith("#") or line.startswith("sample\t"):
            continue
        sample, _, _, label, question = line.split("\t")
        rows.append((sample, label, question))
    pool = 2189  # questions the widest list does not flag (the sample's population)
    unflagged = [r for r in rows if r[0] == "unflagged"]
    scale = pool / len(unflagged)
    print(f"structural filter: {sum(r[0] == 'flagged' for r in rows)} flagged questions labelled, "
          f"{len(unflagged)} of {pool} unflagged sampled")
    for list_name, words in (("paper", PAPER_STRUCTURAL_WORDS), ("default", STRUCTURAL_WORDS),
                             ("extended", EXTENDED_STRUCTURAL_WORDS)):
        for positives, what in (({"layout"}, "layout"), ({"layout", "sequence"}, "layout or sequence")):
            flagged = [r for r in rows if r[0] == "flagged" and structural_words(r[2], words)]
            tp = sum(r[1] in positives for r in flagged)
            # Positives the list misses: labelled flagged-by-extended ones it does not flag, plus
            # the unflagged sample's positives scaled to their population.
            missed = sum(r[1] in positives for r in rows if r[0] == "flagged" and not structural_words(r[2], words))
            missed_est = missed + scale * sum(r[1] in positives for r in unflagged)
            print(f"  {list_name:8} {what:20} flags {len(flagged):4}  precision {tp / len(flagged):.3f}  "
                  f"recall ~{tp / (tp + missed_est):.3f}")


def llm_report(per_file: int, workspace: Path, model: str | None, max_cost: float | None, seed: int) -> None:
    """Lexical rule, LLM classifier and their combination on the same seeded sample."""
    ws = init_workspace(workspace, name="bench-typing")
    settings = load_llm_settings(ws, model=model, max_cost=max_cost)
    rng = random.Random(seed)
    sample = []
    for name in FILES:
        pool = items(name)
        sample += rng.sample(pool, min(per_file, len(pool)))
    finder = cue_finder("auto")
    lexical = [lexical_type(table, q, answers, cues=finder) for _, q, answers, table, _ in sample]

    async def go() -> tuple[list[LLMVerdict | None], float, int, int]:
        async with Gateway(ws, settings) as gw:
            async def one(table: Table, question: str) -> LLMVerdict | None:
                try:
                    return await llm_type(gw, table, question)
                except InvalidReply:
                    return None  # still invalid after the repair: undecided
            verdicts = await asyncio.gather(*(one(t, q) for _, q, _, t, _ in sample))
            return list(verdicts), gw.spent, gw.paid_calls, gw.cached_calls

    started = time.perf_counter()
    verdicts, spent, paid, cached = asyncio.run(go())
    gold = [label for *_, label in sample]
    model_types = [v.question_type if v is not None else None for v in verdicts]
    # combine() needs the model's verdict only for a lexical extraction; without one it is undecided.
    combined = [None if v is None and lx.question_type is EQ else combine(lx, v)[0] for lx, v in zip(lexical, verdicts)]
    print(f"LLM classifier: model {settings.model}, {len(sample)} questions ({per_file} per file, seed {seed}); "
          f"{paid} paid calls, {cached} cached, ${spent:.4f}, {time.perf_counter() - started:.1f} s; "
          f"{sum(v is None for v in verdicts)} invalid replies")
    for method, predicted in (("lexical", [lx.question_type for lx in lexical]), ("llm", model_types),
                              ("combined", combined)):
        sc = score_typing(gold, predicted)
        print(f"  {method:9} coverage {sc.coverage:.3f}  accuracy {sc.accuracy:.3f}  " + "  ".join(
            f"{k} precision {sc.precision(k):.3f} (at 50/50 {sc.balanced_precision(k):.3f})"
            for k in ("extraction", "reasoning")))


def store_report(n: int, workers: int) -> None:
    """classify_questions(method="llm") over n imported questions, against a loopback model."""
    import tempfile

    sys.path.insert(0, str(REPO / "tests"))
    from openai_server import OpenAIServer  # noqa: E402

    from tqaforge.generation.classify import ClassifyOptions, classify_questions
    from tqaforge.ingest import ImportOptions, import_paths
    from tqaforge.llm import LLMSettings

    reply = json.dumps({"cells": ["1"], "operations": [], "type": "extraction"})
    with tempfile.TemporaryDirectory() as tmp:
        ws = init_workspace(Path(tmp) / "ws", name="bench-store")
        started = time.perf_counter()
        files = [FREB / f for f in ("03_agg_com/wtq_nonfactoid_dev_no_shuffle_short_table.jsonl", *FILES.values())]
        import_paths(ws, list(dict.fromkeys(files)), ImportOptions(format="freb-tqa"))
        print(f"typing through the stage: imported in {time.perf_counter() - started:.1f} s")
        with OpenAIServer(lambda body: reply) as server:
            settings = LLMSettings(model="bench", base_url=server.url, api_key="k", concurrency=64, timeout_s=30.0)
            for label in ("first run (paid)", "second run"):
                started = time.perf_counter()
                kwargs = {}
                if workers > 1:
                    from tqaforge.llm.step import RunnerOptions
                    kwargs["runner"] = RunnerOptions(workers=workers)
                summary = classify_questions(ws, ClassifyOptions(method="llm", limit=n), settings, **kwargs)
                took = time.perf_counter() - started
                print(f"  {label:18} {summary.questions:5} typed, {summary.changed:5} changed, "
                      f"{summary.paid_calls} paid, {summary.cached_calls} cached: {took:6.2f} s "
                      f"({1000 * took / n:.2f} ms a selected question)")
        ws.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tagger", default="auto", choices=("auto", "nltk", "wordlist"))
    parser.add_argument("--llm", type=int, default=0, metavar="N",
                        help="also type N questions per file with the LLM classifier (needs an endpoint)")
    parser.add_argument("--model", default=None, help="model name (default: TQAFORGE_LLM_MODEL)")
    parser.add_argument("--max-cost", type=float, default=None, help="stop before this many USD are spent")
    parser.add_argument("--workspace", type=Path, default=REPO / ".bench-typing",
                        help="where model calls are cached (default .bench-typing)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--store", type=int, default=0, metavar="N",
                        help="only time classify_questions (llm) on N imported questions against a loopback model")
    parser.add_argument("--workers", type=int, default=1, help="with --store: the step runner's workers")
    args = parser.parse_args()
    if args.store > 0:
        store_report(args.store, args.workers)
        return
    if not FREB.exists():
        sys.exit(f"FREB-TQA data not found at {FREB}")
    available, where = nltk_tagger_status()
    print(f"NLTK tagger model: {'installed at ' + where if available else where}")
    lexical_report(args.tagger)
    structural_report()
    if args.llm > 0:
        llm_report(args.llm, args.workspace, args.model, args.max_cost, args.seed)


if __name__ == "__main__":
    main()

"""The demo workspace of ``make run``, built without a model: every page of the app and every
Label Studio kind has something to show.

:func:`build_demo` runs, in one process (a few seconds), the model-free path of the README
walkthrough on the shipped ``data/``:

1. import ``data/tables`` and ``data/sample`` (TableBench's and FREB-TQA's items with their gold
   answers, FREB-TQA's published relevant cells and value modifications);
2. probes (:mod:`tqaforge.generation.probes`, seed 0) on the ten tables of ``data/tables``: questions
   whose gold answers come from the table by rule, waiting in the review queue;
3. two reviews of a few probes under the names ``demo-ana`` and ``demo-ben``, made by this build
   (not by people: the demo says so), which agree on six probes and disagree on one, so that the
   Agreement page has statistics and an item in the adjudication queue;
4. the lexical question typing of the accepted questions (so reasoning questions wait for
   relevant cells, and the probes still under review for question typing);
5. the agents on the offline batch path, as with a local model (README "Batches"): the question
   writer (subtype Aggregation, the tropical cyclones table) and then the answering agents (TCoT,
   SCoT) on its two questions; each step writes its requests to a batch file, imports the shipped
   output file ``data/batches/demo_*_out.jsonl`` (replies made by rule, ``tests/demo_agents.py``,
   not by a model: no model output lives in this code) and runs again on the replies in the store.
   The agents agree on one question (its answer waits for verification) and not on the other (it
   waits for manual annotation). Nothing is sent: replies that do not answer the requests (the
   prompts changed) stop the build;
6. a researcher (``demo-researcher``) adopting FREB-TQA's published relevant cells of two
   questions (decisions, :func:`tqaforge.annotation.adjudication.resolve`), which shortens their
   tables: one waits for a person's value modification in Label Studio;
7. an example value modification of the other shortened table under the name ``demo-ana``
   (source ``demo``, made by this build, not by a person), recorded as a Label Studio pull
   records a person's edit and turned into two variants that wait for blind re-answers;
8. the variant grid (CSV and Markdown, as it is, rows shuffled, transposed);
9. release ``0.1.0`` and the evaluation of two shipped predictions files on it:
   ``data/predictions/probes_dp.jsonl`` (by rule: every probe right but ``range``, which forgets the
   header row; 50 of 60, 83.33) and ``data/predictions/tablebench_sample_dp.jsonl``;
10. the health report of the release on those two evaluations (:mod:`tqaforge.health`, no IRT, no
    model), in ``health/demo-0.1.0`` where the app's Health page shows it without a click.

Idempotent: each step adds only what is missing, so ``make run`` twice builds nothing new the
second time. The release, the evaluations and the health report are made once (a workspace that changed since, in the
app, keeps its release as it was). A decision a person made later is never overridden.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from sqlmodel import col, select

from tqaforge.annotation.adjudication import resolve
from tqaforge.annotation.human_import import import_human_work
from tqaforge.annotation.kinds import check_against_target, kind_spec
from tqaforge.annotation.review import review_question
from tqaforge.annotation.robustness import settle_human_variants
from tqaforge.answers.annotate import AnswerOptions, generate_answers
from tqaforge.config import WorkspacePaths, load_config
from tqaforge.errors import TqaforgeError
from tqaforge.evaluate.harness import EvaluateOptions, EvaluationReport, evaluate
from tqaforge.generation.classify import ClassifyOptions, classify_questions
from tqaforge.generation.probes import PROBE_KINDS, ProbeOptions, generate_probes
from tqaforge.generation.questions import GenerationOptions, generate_questions
from tqaforge.labels import record_annotation
from tqaforge.llm.batches import import_offline
from tqaforge.llm.settings import LLMSettings
from tqaforge.llm.step import CallSummary, RunnerOptions
from tqaforge.release.build import ReleaseOptions, build_release
from tqaforge.schemas.enums import AnswerMethod
from tqaforge.schemas.records import Adjudication, Annotation, AnnotationTask, LLMBatch, Question, TableRecord
from tqaforge.store import Workspace, init_workspace
from tqaforge.tables.edits import CellEdit, EditRejected, check_value_edit
from tqaforge.tables.table import Table
from tqaforge.variants.grid import GridOptions, build_variant_grid
from tqaforge.variants.human import SHORTENED, shortened_variant

#: The demo's release version, and the predictions files scored on it (under ``data/predictions``).
DEMO_VERSION = "0.1.0"
DEMO_PREDICTIONS = ("probes_dp.jsonl", "tablebench_sample_dp.jsonl")
#: The names under which the build records its example reviews (not people's work).
DEMO_REVIEWERS = ("demo-ana", "demo-ben")
DEMO_RESEARCHER = "demo-researcher"
#: The tables whose probes the demo reviewers review (files of ``data/tables``).
REVIEWED_TABLES = ("tablebench_tropical_cyclones.csv", "wtq_football_league_table.csv")
#: Probe kinds both demo reviewers accept; the first table's ``has_header`` probe they disagree on.
ACCEPTED_KINDS = ("rows", "columns", "cell")
DISPUTED_KIND = "has_header"
#: The agents' replies of step 5 (under ``data/batches``), made by rule by tests/demo_agents.py, not by
#: a model: the question writer's on one table and subtype, then the answering agents' on its questions.
DEMO_AGENTS = "demo-rule-agents"
DEMO_BATCHES = {"questions": "demo_questions_out.jsonl", "answers": "demo_answers_out.jsonl"}
GENERATED_TABLE = REVIEWED_TABLES[0]
GENERATED_SUBTYPE = "Aggregation"
ANSWER_METHODS = (AnswerMethod.TCOT, AnswerMethod.SCOT)
#: How many questions get FREB-TQA's published relevant cells by the researcher's decision (step 6):
#: one for the example value modification, one left for a person's in Label Studio.
ADOPTED = 2
#: The demo's example value modification (step 7), as ``demo-ana`` would make it in Label Studio
#: on the table step 6 shortens (FREB-TQA's "What was the change in the amount for Appliances in
#: 2019 from 2018?", gold -94 = 680 - 774): per mode, the edited cells (row, column, old, new) and
#: the answer after the edit, worked out by hand (700 - 774 = -74; the unit's wording changes nothing).
EXAMPLE_QUESTION = "What was the change in the amount for Appliances in 2019 from 2018?"
EXAMPLE_EDITS: dict[str, tuple[tuple[tuple[int, int, str, str], ...], tuple[str, ...]]] = {
    "answer_changes": (((2, 1, "680", "700"),), ("-74",)),
    "answer_same": (((1, 2, "(in millions)", "(in USD millions)"),), ("-94",)),
}
EXAMPLE_AUTHOR = DEMO_REVIEWERS[0]


@dataclass
class DemoSummary:
    """What :func:`build_demo` did, step by step; ``lines()`` for the CLI."""

    root: Path
    steps: list[tuple[str, list[str]]] = field(default_factory=list)

    def add(self, step: str, lines: list[str]) -> None:
        self.steps.append((step, lines))

    def lines(self) -> list[str]:
        out = [f"demo workspace {self.root} (built without a model)"]
        for step, lines in self.steps:
            out.append(f"{step}:")
            out += [f"  {line}" for line in lines]
        return out


def _data_table_ids(ws: Workspace, data: Path) -> dict[str, str]:
    """{file name: table id} of the tables imported from ``data/tables``."""
    names = {p.name for p in (data / "tables").iterdir() if p.is_file()}
    with ws.session() as s:
        rows = s.exec(select(TableRecord.id, TableRecord.imported_from).order_by(col(TableRecord.id))).all()
    return {Path(source).name: tid for tid, source in rows if source and Path(source).name in names}


def _probes_of(ws: Workspace, table_id: str) -> dict[str, str]:
    """{probe kind: question id} of the probes (seed 0) of one table."""
    with ws.session() as s:
        rows = s.exec(select(Question.id, Question.meta, Question.seed).where(
            Question.table_id == table_id, Question.origin == "rule").order_by(col(Question.id))).all()
    found: dict[str, str] = {}
    for qid, meta, seed in rows:
        kind = ((meta or {}).get("probe") or {}).get("kind")
        if kind and seed == 0:
            found.setdefault(kind, qid)
    return found


def _reviews(ws: Workspace, tables: dict[str, str]) -> list[str]:
    """The demo reviewers' decisions (module docs, step 3); already recorded ones change nothing."""
    done = []
    for n, name in enumerate(REVIEWED_TABLES):
        probes = _probes_of(ws, tables[name])
        for kind in ACCEPTED_KINDS:
            if kind in probes:
                for reviewer in DEMO_REVIEWERS:
                    done.append(review_question(ws, probes[kind], "accept", annotator=reviewer, source="demo", new=True))
        if n == 0 and DISPUTED_KIND in probes:
            qid = probes[DISPUTED_KIND]
            done.append(review_question(ws, qid, "accept", annotator=DEMO_REVIEWERS[0], source="demo", new=True))
            done.append(review_question(ws, qid, "reject", annotator=DEMO_REVIEWERS[1], source="demo", new=True,
                                        reason="too easy to tell"))
    return [f"{len(done)} decisions by {', '.join(DEMO_REVIEWERS)} (made by this build, not by people)"]


def _adopt_published_cells(ws: Workspace) -> list[str]:
    """Step 6: the first :data:`ADOPTED` questions (by task id) whose FREB-TQA relevant cells have
    no shortened table and no decision yet get them as their final cells; nothing when that many
    are decided already."""
    with ws.session() as s:
        rows = s.exec(select(AnnotationTask.id, AnnotationTask.target_id, Annotation.label).join(
            Annotation, col(Annotation.task_id) == col(AnnotationTask.id)).where(
            AnnotationTask.kind == "relevant_cells", Annotation.source == "imported").order_by(col(AnnotationTask.id))).all()
        decided = set(s.exec(select(Adjudication.task_id).where(Adjudication.kind == "relevant_cells")).all())
        need = ADOPTED - len(decided & {task_id for task_id, _, _ in rows})
        if need <= 0:
            return [f"{ADOPTED} decisions on published relevant cells are already recorded"]
        chosen = [(task_id, label) for task_id, qid, label in rows
                  if task_id not in decided and shortened_variant(s, qid) is None][:need]
    if not chosen:
        return ["no published relevant cells without a shortened table"]
    done = []
    for task_id, published in chosen:
        final: dict[str, Any] = dict(published or {})
        resolve(ws, task_id, final, by=DEMO_RESEARCHER, note="demo: FREB-TQA's published relevant cells adopted")
        done.append(f"task {task_id[:12]}: FREB-TQA's published cells {json.dumps(final.get('cells'))} adopted; its table shortened")
    return done


def _example_value_modification(ws: Workspace) -> list[str]:
    """Step 7: ``demo-ana``'s example value modification (:data:`EXAMPLE_EDITS`) of the shortened
    table of :data:`EXAMPLE_QUESTION`, recorded as a Label Studio pull records a person's edit (the
    label checked against the table, source ``demo``), then turned into the two variants that wait
    for blind re-answers (:func:`tqaforge.annotation.robustness.settle_human_variants`)."""
    spec = kind_spec("value_modification")
    with ws.session() as s:
        qid = s.exec(select(Question.id).where(Question.text == EXAMPLE_QUESTION).order_by(col(Question.id))).first()
        shortened = shortened_variant(s, qid) if qid is not None else None
        if shortened is None or shortened.table is None:
            raise TqaforgeError(f"the demo's example value modification needs the shortened table of {EXAMPLE_QUESTION!r}, "
                                "which step 6 makes", hint="check data/sample (FREB-TQA's relevant cells)")
        table = Table.from_dict(shortened.table)
        label: dict[str, Any] = {}
        for mode, (cells, answers) in EXAMPLE_EDITS.items():
            edits = [CellEdit(row, column, old, new) for row, column, old, new in cells]
            try:
                gold = check_value_edit(table, edits, mode=mode,  # type: ignore[arg-type]
                                        old_answers=shortened.answers or (), new_answers=answers)
            except EditRejected as exc:
                raise TqaforgeError(f"the demo's example value modification does not fit the shortened table of "
                                    f"{EXAMPLE_QUESTION!r} any more: {exc}",
                                    hint="data/sample changed: make EXAMPLE_EDITS in tqaforge/demo.py fit it again") from None
            label[mode] = {"edits": [e.as_dict() for e in edits], "answers": list(gold)}
        check_against_target(s, spec, "variant", shortened.id, spec.read(label))
        recorded = record_annotation(s, kind="value_modification", target_type="variant", target_id=shortened.id,
                                     annotator=EXAMPLE_AUTHOR, label=label, source="demo",
                                     payload={"question_id": shortened.question_id, "perturbation": SHORTENED})
    settled = settle_human_variants(ws)
    made = "recorded" if recorded.recorded else "already recorded"
    return [f"{EXAMPLE_AUTHOR}'s example edit of the shortened table of {shortened.question_id[:12]} {made} "
            "(made by this build, not by a person)", *settled.lines()[:1]]


def _offline(ws: Workspace, data: Path, batch: str, step: Callable[[RunnerOptions], Any]) -> list[str]:
    """Run ``step`` on the offline transport: its requests go to a batch file, the shipped output
    file ``data/batches/DEMO_BATCHES[batch]`` is imported, and ``step`` runs again on the replies in
    the store. Nothing is sent: a request the file does not answer stops the build."""
    offline = RunnerOptions(transport="offline", offline_file=ws.root / "batches" / f"demo-{batch}-requests.jsonl")
    first = step(offline)
    calls: CallSummary = first.calls
    if not calls.deferred:
        return [f"{batch}: nothing left to ask"]
    replies = data / "batches" / DEMO_BATCHES[batch]
    if not replies.is_file():
        raise TqaforgeError(f"the demo's {batch} replies are not there: {replies}",
                            hint="run from the tqaforge checkout, or give --data PATH/TO/data")
    batch_id: str | None = None
    if calls.batches:
        batch_id = calls.batches[-1]  # the batch file just written
    else:  # written by an earlier build that stopped: the requests wait in that batch
        with ws.session() as s:
            batch_id = s.exec(select(LLMBatch.id).where(LLMBatch.kind == "offline", LLMBatch.state == "exported")
                              .order_by(col(LLMBatch.created_at).desc())).first()
    imported = import_offline(ws, replies, batch_id=batch_id)
    second = step(offline)
    if second.calls.deferred:
        raise TqaforgeError(f"{replies} does not answer {second.calls.deferred} of the demo's {batch} requests "
                            f"({'; '.join(imported.lines()[:2])})",
                            hint="the prompts changed: write the file again with `python tests/demo_agents.py WORKSPACE` "
                                 "on the workspace the build left (tests/test_demo.py checks it)")
    return [f"{batch}: {calls.deferred} requests written to {offline.offline_file}, {imported.ok} replies imported "
            f"from {replies.name} (made by rule, not by a model)", *second.lines()[:2]]


def _agents(ws: Workspace, data: Path, tables: dict[str, str]) -> list[str]:
    """Step 5 (module docs): the question writer, then the answering agents, on the offline batch path."""
    llm = LLMSettings(model=DEMO_AGENTS, base_url="http://127.0.0.1:9/v1")  # never called: see _offline
    generation = GenerationOptions(subtypes=(GENERATED_SUBTYPE,), tables=(tables[GENERATED_TABLE],), per_round=2)
    done = _offline(ws, data, "questions", lambda runner: generate_questions(ws, generation, llm, runner=runner))
    with ws.session() as s:
        generated = tuple(s.exec(select(Question.id).where(Question.origin == "llm").order_by(col(Question.id))).all())
    if not generated:
        raise TqaforgeError("the demo's question writer wrote no question", hint="see the lines above")
    answering = AnswerOptions(methods=ANSWER_METHODS, questions=generated, manual_share=1.0)
    return done + _offline(ws, data, "answers", lambda runner: generate_answers(ws, answering, llm, runner=runner))


def build_demo(root: Path, data: Path) -> DemoSummary:
    """Build (or complete) the demo workspace at ``root`` from the shipped ``data`` directory
    (module docs). Returns what each step did."""
    missing = [str(data / part) for part in ("tables", "sample") if not (data / part).is_dir()]
    missing += [str(data / "predictions" / name) for name in DEMO_PREDICTIONS if not (data / "predictions" / name).is_file()]
    missing += [str(data / "batches" / name) for name in DEMO_BATCHES.values() if not (data / "batches" / name).is_file()]
    if missing:
        raise TqaforgeError(f"the demo's data is not there: {', '.join(missing)}",
                            hint="run from the tqaforge checkout, or give --data PATH/TO/data")
    config = WorkspacePaths(root.resolve()).config
    if config.exists() and load_config(config).name != "demo":
        raise TqaforgeError(f"{root} holds the workspace {load_config(config).name!r}, not a demo workspace: the demo "
                            "would add probes and example reviews to it",
                            hint="give a new directory, e.g. `tqaforge demo demo-workspace`")
    ws = init_workspace(root, name="demo")
    summary = DemoSummary(root=ws.root)
    try:
        imported = import_human_work(ws, [data / "tables", data / "sample"])
        summary.add("import", imported.lines())
        tables = _data_table_ids(ws, data)
        probes = generate_probes(ws, ProbeOptions(kinds=PROBE_KINDS, tables=tuple(sorted(tables.values())), seed=0,
                                                  created_by="demo"))
        summary.add("probes (answers by rule)", probes.lines()[:1])
        summary.add("reviews", _reviews(ws, tables))
        # After the reviews, so that a second build types the same questions (nothing new).
        typed = classify_questions(ws, ClassifyOptions(method="lexical", status="accepted", tagger="wordlist"))
        summary.add("question typing (lexical, accepted questions)", typed.lines()[:1])
        summary.add("questions and answers (the agents' replies by rule, offline batches)", _agents(ws, data, tables))
        summary.add("relevant cells", _adopt_published_cells(ws))
        summary.add("value modification (example)", _example_value_modification(ws))
        grid = build_variant_grid(ws, GridOptions(serializations=("csv", "markdown"),
                                                  perturbations=("none", "shuffle_rows", "transpose"), write_prompts=False))
        summary.add("variants", grid.lines()[:1])
        release = ws.root / "releases" / f"demo-{DEMO_VERSION}"
        if not release.exists():
            built = build_release(ws, ReleaseOptions(
                version=DEMO_VERSION, out=release, serializations=("csv", "markdown"), n_boot=0,
                accept_low_agreement="demo: two example reviewers, a handful of labels"))
            summary.add("release", built.lines()[:1])
        else:
            summary.add("release", [f"{release} already built"])
        summary.add("evaluations", [_evaluate(ws, release, data / "predictions" / name) for name in DEMO_PREDICTIONS])
        summary.add("health", _health(ws, release))
    finally:
        ws.close()
    return summary


def _evaluate(ws: Workspace, release: Path, predictions: Path) -> str:
    """Score one shipped predictions file on the demo release, once (where the app looks for it)."""
    out = ws.root / "evaluations" / release.name / predictions.stem
    if (out / "scores.json").exists():
        return f"{predictions.name}: already scored ({out})"
    report: EvaluationReport = evaluate(EvaluateOptions(release=release, predictions=predictions, out=out))
    overall = [r for r in report.rows if r.group == "Overall" and r.subset == "base"]
    shown = ", ".join(f"{r.system} {r.tablebench:.2f}" for r in overall)
    return f"{predictions.name}: {shown} (TableBench overall; {out})"


def _health(ws: Workspace, release: Path) -> list[str]:
    """Step 10: the health report of the release on its two evaluations, written where the app's
    Health page finds it (``health/RELEASE``), once. No IRT fit (slow) and no model: the default
    thresholds, so its verdict says what two systems cannot tell (the item checks want five)."""
    from tqaforge.evaluate.harness import default_evaluation_dir
    from tqaforge.health import HEALTH_JSON, HealthOptions, run, write_report
    from tqaforge.health.report import default_health_dir

    out = default_health_dir(release, ws.root)
    if (out / HEALTH_JSON).exists():
        return [f"already written ({out})"]
    evaluations = tuple(default_evaluation_dir(release, Path(name), ws.root) for name in DEMO_PREDICTIONS)
    report = run(HealthOptions(release=release, evaluations=evaluations, workspace=ws.root))
    write_report(report, out)
    return [f"health of release {report.release}: {report.verdict()}", f"written to {out}"]

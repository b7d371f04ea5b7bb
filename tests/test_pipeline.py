"""The whole pipeline in one test, on the demo tables, against the loopback LLM server and the real
Label Studio fixture with scripted annotators (three people labelling through the API):

import -> generate questions -> review in Label Studio -> answers (TCoT, SCoT, PoT in the sandbox)
and vote -> verification in Label Studio -> relevant cells -> value modifications and blind
re-answers -> automatic variants -> agreement -> adjudication -> release build -> verify ->
evaluate (a predictions file and a model run through the gateway)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from labelstudio_helpers import annotate, choice, new_email, signup, text
from openai_server import OpenAIServer
from sqlmodel import select
from test_answers import method_of, say
from test_generation import model_reply
from test_labelstudio_robustness import _copies, _edited, _target, _task, _value_cells

from tqaforge.annotation.adjudication import adjudicate
from tqaforge.annotation.labelstudio.client import client_settings
from tqaforge.annotation.labelstudio.sync import PushOptions, pull, push
from tqaforge.annotation.robustness import settle_human_variants
from tqaforge.annotation.workflows import Settings, agreement_report
from tqaforge.answers.annotate import AnswerOptions, generate_answers
from tqaforge.evaluate.harness import EvaluateOptions, evaluate
from tqaforge.evaluate.model_run import ModelRunOptions, run_model
from tqaforge.generation.questions import GenerationOptions, generate_questions
from tqaforge.ingest import import_paths
from tqaforge.llm import LLMSettings
from tqaforge.queries import CHECKED_BY_PEOPLE, trusted_answers
from tqaforge.release.build import ReleaseOptions, build_release
from tqaforge.release.verify import verify_release
from tqaforge.schemas.enums import QuestionStatus, QuestionType, VariantStatus
from tqaforge.schemas.records import Question, TableRecord, Variant
from tqaforge.store import Workspace
from tqaforge.tables.table import Table
from tqaforge.variants.grid import GridOptions, build_variant_grid
from tqaforge.variants.human import VALUE_PERTURBATIONS

TABLES = Path(__file__).resolve().parents[1] / "data" / "tables"
ANSWER = "3"


def scripted(body: dict[str, Any]) -> str:
    """Generation and its verification as test_generation scripts them; every answering agent and
    the evaluated model say 3, each in its method's form (PoT as a program that prints it)."""
    prompt = body["messages"][0]["content"]
    if prompt.startswith("You are a careful table analyst"):
        return say(method_of(prompt), ANSWER)
    return model_reply(body)


def _label_all(ws: Workspace, url: str, admin: str, tokens: dict[str, str], kind: str, result: Any) -> int:
    """Every copy of ``kind`` labelled by its annotator: ``result(copy, task_data)`` -> LS result."""
    copies = _copies(ws, kind)
    for copy in copies:
        annotate(url, tokens[copy.annotator], copy.ls_task_id, result(copy, _task(url, admin, copy.ls_task_id)["data"]))
    return len(copies)


def test_the_whole_pipeline(label_studio, sqlite_workspace: Workspace, tmp_path: Path) -> None:
    ws = sqlite_workspace
    url, admin = label_studio.url, label_studio.token
    ls = client_settings(url, admin)
    people = [new_email(n) for n in ("pipe-ana", "pipe-ben", "pipe-cy")]
    tokens = {who: signup(url, admin, who)[1] for who in people}

    # Import the demo tables; generate questions on two of them.
    assert not import_paths(ws, [TABLES]).failed
    with OpenAIServer(scripted) as server:
        llm = LLMSettings(model="pipeline-model", base_url=server.url, api_key="sk-test", backoff_s=0.01, backoff_max_s=0.05)
        with ws.session() as s:
            table_ids = sorted(s.exec(select(TableRecord.id)).all())[:2]
        made = generate_questions(ws, GenerationOptions(subtypes=("Counting",), tables=tuple(table_ids), per_round=2), llm)
        assert not made.failed and made.questions_new >= 2
        with ws.session() as s:
            proposed = [q.id for q in s.exec(select(Question).where(Question.status == QuestionStatus.PROPOSED.value)).all()]
        assert len(proposed) == made.questions_new

        # Review in Label Studio: two people accept every question.
        review = push(ws, "question_review", ls, people[:2])
        assert review.pending == len(proposed)
        _label_all(ws, url, admin, tokens, "question_review",
                   lambda c, d: [choice("decision", "question", "accept"), choice("subtype_right", "category", "yes")])
        assert pull(ws, ls, kinds=["question_review"]).problems == []
        adjudicate(ws, kinds=["question_review"])
        with ws.session() as s:
            accepted = sorted(q.id for q in s.exec(select(Question).where(Question.id.in_(proposed))).all()  # type: ignore[attr-defined]
                              if q.status == QuestionStatus.ACCEPTED)
        assert accepted == sorted(proposed)

        # Answers by TCoT, SCoT and PoT (run in the sandbox), voted; consistent ones go to people.
        answered = generate_answers(ws, AnswerOptions(questions=tuple(accepted)), llm)
        assert answered.stopped is None
        verify = push(ws, "answer_verification", ls, people[:2])
        assert verify.pending == len(accepted)
        _label_all(ws, url, admin, tokens, "answer_verification", lambda c, d: [choice("picked", "answer", d["agent_answers"][0]["value"])])
        assert pull(ws, ls, kinds=["answer_verification"]).problems == []
        adjudicate(ws, kinds=["answer_verification"])
        with ws.session() as s:
            gold = trusted_answers(s, accepted, at_least=CHECKED_BY_PEOPLE)
        assert set(gold) == set(accepted) and all(a.values == [ANSWER] for a in gold.values())

        # People's robustness work: relevant cells (as typed reasoning questions), value modifications, blind re-answers.
        with ws.session() as s:
            for q in s.exec(select(Question).where(Question.id.in_(accepted))).all():  # type: ignore[attr-defined]
                q.question_type, q.relevant_cells = QuestionType.REASONING, None
                s.add(q)
        cells = push(ws, "relevant_cells", ls, people[:2], PushOptions(overlap=2))
        assert cells.pending == len(accepted)
        _label_all(ws, url, admin, tokens, "relevant_cells",
                   lambda c, d: [{"from_name": "cells", "to_name": "question", "type": "choices", "value": {"choices": ["r0c1", "r1c1"]}}])
        assert pull(ws, ls, kinds=["relevant_cells"]).problems == []
        adjudicate(ws, kinds=["relevant_cells"])

        def modification(copy: Any, data: dict[str, Any]) -> list[dict[str, Any]]:
            with ws.session() as s:
                variant = s.get(Variant, _target(ws, copy).target_id)
            assert variant is not None
            editable = _value_cells(Table.from_dict(variant.table))  # type: ignore[arg-type]
            return [text("changed_table", "question", _edited(data["grid_change"], editable[:1], "7")),
                    text("changed_answer", "question", "12345"),
                    text("same_table", "question", _edited(data["grid_same"], editable[1:2], "0"))]

        assert push(ws, "value_modification", ls, people, PushOptions(overlap=1)).pending == len(accepted)
        _label_all(ws, url, admin, tokens, "value_modification", modification)
        assert pull(ws, ls, kinds=["value_modification"]).problems == []
        assert settle_human_variants(ws).variants_new == 2 * len(accepted)
        push(ws, "blind_reanswer", ls, people, PushOptions(overlap=2))
        with ws.session() as s:
            modified = {v.id: v for v in s.exec(select(Variant).where(Variant.perturbation.in_(VALUE_PERTURBATIONS))).all()}  # type: ignore[attr-defined]
        _label_all(ws, url, admin, tokens, "blind_reanswer",
                   lambda c, d: [text("answer", "question", ", ".join(modified[_target(ws, c).target_id].answers or []))])
        assert pull(ws, ls, kinds=["blind_reanswer"]).problems == []
        settled = settle_human_variants(ws)
        assert settled.validated == 2 * len(accepted) and settled.to_adjudicate == 0

        # Automatic variants, agreement, adjudication of the rest.
        build_variant_grid(ws, GridOptions(perturbations=("none", "shuffle_rows", "transpose"), serializations=("csv",),
                                           write_prompts=False, skip_structural=False))
        report = agreement_report(ws, settings=Settings(n_boot=50))
        assert {"question_review", "answer_verification", "relevant_cells", "blind_reanswer"} <= set(report.kinds)
        adjudicate(ws)

        # The release: the verified items and their variants; verified; evaluated.
        release = ws.root / "releases" / "pipeline-1.0.0"
        built = build_release(ws, ReleaseOptions(version="1.0.0", out=release, n_boot=50, serializations=("csv", "markdown")))
        assert built.counts["base"] == len(accepted) and built.counts["values"] == 3 * len(accepted)
        assert built.counts["structure"] == 2 * len(accepted) and built.counts["configurations"] == len(accepted) * 2 * 3
        assert verify_release(release).ok
        with ws.session() as s:
            assert all(v.status == VariantStatus.VALIDATED for v in s.exec(select(Variant).where(Variant.perturbation.in_(VALUE_PERTURBATIONS))).all())  # type: ignore[attr-defined]

        # A model run through the gateway (the scripted model says 3 everywhere)...
        ran = run_model(ws, ModelRunOptions(release=release, model="pipeline-model", subsets=("base", "values", "configurations"),
                                            out=tmp_path / "run.jsonl"), llm=llm)
        assert ran.answered == ran.rows and ran.stopped is None
    scored = evaluate(EvaluateOptions(release=release, predictions=tmp_path / "run.jsonl", plots=False, out=tmp_path / "scores"))
    overall = {(r.subset, r.config): r for r in scored.rows if r.level == "overall"}
    assert overall[("base", "base")].normalised == 100.0
    # ...misses every changed answer (12345) and keeps the unchanged ones: FREB-TQA's VP and Emd.
    aspects = {b.perturbation: b for b in scored.robustness}
    assert (aspects["value_change_answer_changes"].vp, aspects["value_change_answer_changes"].emd) == (1.0, -1.0)
    assert (aspects["value_change_answer_same"].vp, aspects["value_change_answer_same"].emd) == (0.0, 0.0)
    assert scored.torr and scored.torr[0].performance == 1.0 and scored.torr[0].robustness == 1.0
    lines = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    assert {p["method"] for p in lines} == {"DP"} and len(lines) == ran.rows

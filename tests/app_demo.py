"""A workspace with data in every stage, for the app's tests (and its benchmark builds a larger one
the same way): imported tables and gold questions, proposed questions with their lineage, agent
answers and a vote, automatic and people's variants, annotations with an open disagreement, a
recorded LLM call, and a release."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from labelstudio_helpers import build_workspace
from sqlmodel import select

from tqaforge.annotation.adjudication import adjudicate
from tqaforge.annotation.human_import import import_human_work
from tqaforge.labels import record_annotation
from tqaforge.release.build import ReleaseOptions, build_release
from tqaforge.schemas.records import LLMCall, Question, utcnow
from tqaforge.store import Workspace
from tqaforge.variants.grid import GridOptions, build_variant_grid

DATA = Path(__file__).resolve().parents[1] / "data"


def stage_everything(ws: Workspace) -> dict[str, list[str]]:
    """Fill ``ws`` (module docs); the ids of the proposed questions and the voted answer."""
    ids = build_workspace(ws, proposed=3)
    import_human_work(ws, [DATA / "tables", DATA / "sample" / "freb_agg_com"])
    with ws.session() as s:
        for i, qid in enumerate(ids["questions"]):
            q = s.get(Question, qid)
            assert q is not None
            q.lineage = {"round": 1, "seeds_shown": ["How many rows are there?", f"Which row is largest? ({i % 2})"]}
            s.add(q)
        now = utcnow()
        for day in range(3):
            s.add(LLMCall(id=f"call-{day}", model="demo-model", messages=[{"role": "user", "content": "q"}], text="a",
                          cost=0.01 * (day + 1), purpose="generate_questions", created_at=now - timedelta(days=3 - day)))
        gold = [q.id for q in s.exec(select(Question).where(Question.status == "accepted").order_by(Question.id)).all()][:6]
    build_variant_grid(ws, GridOptions(perturbations=("none", "shuffle_rows", "transpose"), serializations=("csv",),
                                       write_prompts=False, skip_structural=False))
    with ws.session() as s:  # two people type six questions; they disagree on two
        for i, qid in enumerate(gold):
            record_annotation(s, kind="question_typing", target_type="question", target_id=qid, annotator="ls:ana",
                              label={"type": "reasoning"})
            record_annotation(s, kind="question_typing", target_type="question", target_id=qid, annotator="ls:ben",
                              label={"type": "extraction" if i < 2 else "reasoning"})
    adjudicate(ws, kinds=["question_typing"])
    build_release(ws, ReleaseOptions(version="0.1.0", accept_low_agreement="demo", serializations=("csv",)))
    return ids


def page_runner(workspace_root: Path, monkeypatch: Any) -> Any:
    """A function that renders one app page (AppTest) on ``workspace_root`` with no LLM endpoint set,
    and fails on any exception the page raised."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("TQAFORGE_WORKSPACE", str(workspace_root))
    for key in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "TQAFORGE_LLM_MODEL"):
        monkeypatch.delenv(key, raising=False)
    pages = Path(__file__).resolve().parents[1] / "tqaforge" / "app" / "pages"

    def run(name: str) -> AppTest:
        at = AppTest.from_file(str(pages / name), default_timeout=60).run()
        assert not at.exception, at.exception
        return at

    return run

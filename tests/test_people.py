"""One person, one annotator; nothing a person decided lost or overwritten (issue 24, items 2 and 3).

Real SQLite workspaces and the real CLI. Each guarantee has a control that shows the test could
see the failure: the same step on the same data without a person's decision does change it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from labelstudio_helpers import build_workspace
from sqlmodel import SQLModel, func, select
from typer.testing import CliRunner

from tqaforge.annotation.adjudication import adjudicate, adjudication_queue, resolve
from tqaforge.annotation.robustness import settle_human_variants
from tqaforge.annotation.workflows import Settings, agreement_report
from tqaforge.cli import app
from tqaforge.config import CONFIG_NAME
from tqaforge.ids import labelstudio_annotator
from tqaforge.ingest import import_paths
from tqaforge.labels import record_annotation
from tqaforge.people import resolve_account
from tqaforge.queries import labels_per_annotator
from tqaforge.schemas.enums import VariantStatus
from tqaforge.schemas.records import Annotation, Annotator, Question, Variant
from tqaforge.store import Workspace, current_revision, head_revision, make_engine, migrate, open_workspace
from tqaforge.tables.table import Table
from tqaforge.variants.human import store_shortened_table

runner = CliRunner(env={"COLUMNS": "200"})
SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"
ANA_LOGIN = "ana@lab.org"


def cli(ws: Workspace, *args: str, ok: bool = True) -> str:
    result = runner.invoke(app, ["--workspace", str(ws.root), *args])
    assert (result.exit_code == 0) == ok, result.output
    return result.output


def status(ws: Workspace, qid: str) -> str:
    with ws.session() as s:
        q = s.get(Question, qid)
        assert q is not None
        return str(q.status)


# --- CLI reviews are labels like any other --------------------------------------------------


def test_accept_by_ana_then_reject_by_ben_goes_to_adjudication_not_to_rejected(sqlite_workspace: Workspace) -> None:
    ws = sqlite_workspace
    q1, q2 = sorted(build_workspace(ws, proposed=2)["questions"])
    cli(ws, "annotators", "new", "ana")
    cli(ws, "annotators", "new", "ben")
    cli(ws, "questions", "review", q1[:10], "--accept", "--annotator", "ana")
    out = cli(ws, "questions", "review", q1[:10], "--reject", "--reason", "vague", "--annotator", "ben")
    assert "accepted -> proposed" in out and "adjudication queue" in out
    assert status(ws, q1) == "proposed"
    [item] = adjudication_queue(ws, kind="question_review")
    assert item.target_id == q1 and sorted(n for v in item.votes for n in v["annotators"]) == ["ana", "ben"]
    # Control: one reviewer's reject does reject (the last command alone would have done so above).
    cli(ws, "questions", "review", q2[:10], "--reject", "--reason", "vague", "--annotator", "ben")
    assert status(ws, q2) == "rejected"
    # A person settles the queue item; a later review by a third person does not undo it.
    cli(ws, "agreement", "resolve", item.task_id[:12], "reject", "--by", "chair")
    assert status(ws, q1) == "rejected"
    cli(ws, "annotators", "new", "cy")
    out = cli(ws, "questions", "review", q1[:10], "--accept", "--annotator", "cy")
    assert status(ws, q1) == "rejected" and "a person's final decision stands" in out


# --- an edit carries its text ----------------------------------------------------------------


def _ls_review(ws: Workspace, qid: str, login: str, label: dict) -> None:
    """A question review as the Label Studio pull records it (the account resolved to a person)."""
    with ws.session() as s:
        q = s.get(Question, qid)
        assert q is not None
        record_annotation(s, kind="question_review", target_type="question", target_id=qid,
                          annotator=labelstudio_annotator(login), label=label, source="labelstudio",
                          source_ref=f"ls:{login}:1", annotator_id=resolve_account(s, login).id,
                          payload={"text": q.text, "table_id": q.table_id, "subtype": q.subtype})


def test_edit_and_accept_is_not_a_keep_and_the_chosen_edit_becomes_the_question(sqlite_workspace: Workspace) -> None:
    ws = sqlite_workspace
    q1, q2, q3 = sorted(build_workspace(ws, proposed=3)["questions"])
    with ws.session() as s:
        original = {q: s.get(Question, q).text for q in (q1, q2, q3)}  # type: ignore[union-attr]
    edit = {"decision": "edit", "text": "How many rows does this table have?"}
    # q1: ben edits, ana accepts (the case); q2: two different edits; q3 (control): two
    # plain accepts are a unanimous keep of the old wording.
    _ls_review(ws, q1, "ben@lab.org", edit)
    _ls_review(ws, q1, ANA_LOGIN, {"decision": "accept"})
    _ls_review(ws, q2, "ben@lab.org", edit)
    _ls_review(ws, q2, ANA_LOGIN, {"decision": "edit", "text": "How many columns does this table have?"})
    _ls_review(ws, q3, "ben@lab.org", {"decision": "accept"})
    _ls_review(ws, q3, ANA_LOGIN, {"decision": "accept"})
    run = adjudicate(ws, kinds=["question_review"])["question_review"]
    assert (run.unanimous, run.open) == (1, 2)
    assert status(ws, q3) == "accepted" and status(ws, q1) == status(ws, q2) == "proposed"
    queue = {item.target_id: item for item in adjudication_queue(ws, kind="question_review")}
    assert [v["label"] for v in queue[q1].votes] == [{"decision": "accept"}, edit] or \
        [v["label"] for v in queue[q1].votes] == [edit, {"decision": "accept"}]
    assert {v["label"].get("text") for v in queue[q2].votes} == {
        "How many rows does this table have?", "How many columns does this table have?"}
    # A person picks one wording of q2: it becomes the question, its old wording in the lineage.
    cli(ws, "agreement", "resolve", queue[q2].task_id[:12], json.dumps({"decision": "edit", "text": "How many columns does this table have?"}),
        "--by", "chair")
    with ws.session() as s:
        q = s.get(Question, q2)
        assert q is not None and (q.status, q.text) == ("accepted", "How many columns does this table have?")
        assert q.lineage["edits"][-1]["previous_text"] == original[q2]  # type: ignore[index]
        assert s.get(Question, q3).text == original[q3]  # type: ignore[union-attr]
    # A third annotator agreeing with ben's edit on q1 makes the rule's majority: the edit wins.
    _ls_review(ws, q1, "cy@lab.org", edit)
    adjudicate(ws, kinds=["question_review"])
    with ws.session() as s:
        q = s.get(Question, q1)
        assert q is not None and (q.status, q.text) == ("accepted", edit["text"])


# --- one person, one annotator: merge ----------------------------------------------------------


ANA = ["accept", "accept", "reject", "accept", "reject", "accept"]
BEN = ["accept", "reject", "reject", "accept", "accept", "accept"]


def _two_surfaces(ws: Workspace) -> list[str]:
    """ana reviews q1-q3 in the CLI and q4-q6 in Label Studio; ben reviews all six in the CLI."""
    qids = sorted(build_workspace(ws, proposed=6)["questions"])
    cli(ws, "annotators", "new", "ana")
    for i, qid in enumerate(qids):
        if i < 3:
            cli(ws, "questions", "review", qid[:10], f"--{ANA[i]}", *(["--reason", "no"] if ANA[i] == "reject" else []),
                "--annotator", "ana")
        else:
            _ls_review(ws, qid, ANA_LOGIN, {"decision": ANA[i], **({"reason": "no"} if ANA[i] == "reject" else {})})
        cli(ws, "questions", "review", qid[:10], f"--{BEN[i]}", *(["--reason", "no"] if BEN[i] == "reject" else []),
            "--annotator", "ben", "--new")
    return qids


def _labels(ws: Workspace) -> list[tuple[str, str, str, str]]:
    with ws.session() as s:
        return sorted((a.id, a.annotator, a.source, json.dumps(a.label, sort_keys=True)) for a in s.exec(select(Annotation)).all())


def test_merge_joins_two_identities_agreement_counts_people_and_nothing_is_lost(sqlite_workspace: Workspace) -> None:
    ws = sqlite_workspace
    _two_surfaces(ws)
    before = _labels(ws)
    report = agreement_report(ws, kinds=["question_review"], settings=Settings(n_boot=0)).kinds["question_review"]
    pseudonym = labelstudio_annotator(ANA_LOGIN)
    assert report.n_raters == 3 and set(report.raters) == {"ana", "ben", pseudonym}  # the control: one person, two raters
    out = cli(ws, "agreement", "report", "--kind", "question_review", "--n-boot", "0", "--no-store")
    assert "3 annotators" in out

    out = cli(ws, "annotators", "merge", "ana", pseudonym)
    assert f"{pseudonym} merged into ana: 3 labels now count as theirs" in out
    report = agreement_report(ws, kinds=["question_review"], settings=Settings(n_boot=0)).kinds["question_review"]
    assert report.n_raters == 2 and report.raters == ("ana", "ben")
    assert "2 annotators" in cli(ws, "agreement", "report", "--kind", "question_review", "--n-boot", "0", "--no-store")
    # Cohen's kappa by hand: agree on 4 of 6; each says accept 4 times: pe = (16 + 4) / 36.
    po, pe = 4 / 6, 20 / 36
    kappa = report.pairwise["cohen_kappa"].get("ana", "ben").value
    assert kappa == pytest.approx((po - pe) / (1 - pe)) == pytest.approx(0.25)
    # Nothing lost: the same labels, each with its original author string and source.
    assert _labels(ws) == before
    assert {a for _, a, _, _ in before} == {"ana", "ben", pseudonym}
    # Workload and progress count people too; the e-mail never leaves the store.
    assert labels_per_annotator(ws)["question_review"] == {"ana": 6, "ben": 6}
    people = json.loads(cli(ws, "annotators", "people", "--json"))["annotators"]
    merged = next(p for p in people if p["id"] == pseudonym)
    assert merged["merged_into"] == "ana" and merged["email"] is True and ANA_LOGIN not in json.dumps(people)
    # A later pull of the same account resolves to ana directly.
    with ws.session() as s:
        assert resolve_account(s, ANA_LOGIN).id == "ana"


def test_an_email_registered_with_the_person_joins_their_label_studio_account(sqlite_workspace: Workspace) -> None:
    ws = sqlite_workspace
    qids = sorted(build_workspace(ws, proposed=2)["questions"])
    cli(ws, "annotators", "new", "ana", "--email", ANA_LOGIN.upper())
    cli(ws, "questions", "review", qids[0][:10], "--accept", "--annotator", "Ana ")  # case and spaces aside
    _ls_review(ws, qids[1], ANA_LOGIN, {"decision": "accept"})
    with ws.session() as s:
        assert {a.annotator_id for a in s.exec(select(Annotation)).all()} == {"ana"}
        assert s.exec(select(func.count()).select_from(Annotator)).one() == 1
    # ben reviews both in the CLI: the report counts two people, no merge needed.
    for qid in qids:
        cli(ws, "questions", "review", qid[:10], "--accept", "--annotator", "ben", "--new")
    assert "2 annotators" in cli(ws, "agreement", "report", "--kind", "question_review", "--n-boot", "0", "--no-store")


# --- the migration ---------------------------------------------------------------------------------


def test_migration_0008_backfills_people_and_keeps_every_label(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = make_engine(url)
    migrate(engine, "0007")
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO tables (id, header, rows, n_rows, n_cols, numeric_share, origin, created_by, created_at) "
                             "VALUES ('t1', '[\"a\"]', '[[\"1\"]]', 1, 1, 1.0, 'import', 'x', '2026-01-01 00:00:00')"))
        conn.execute(sa.text("INSERT INTO questions (id, table_id, text, status, origin, created_by, created_at, updated_at) "
                             "VALUES ('q1', 't1', 'How many?', 'proposed', 'llm', 'x', '2026-01-01', '2026-01-01')"))
        conn.execute(sa.text("INSERT INTO annotation_tasks (id, kind, target_type, target_id, status, created_at) "
                             "VALUES ('k1', 'question_review', 'question', 'q1', 'annotated', '2026-01-01')"))
        for i, (who, source) in enumerate((("ana", "cli"), ("ls:abc", "labelstudio"), ("agent:m", "agent"),
                                           ("freb", "imported"), ("ana", "app"))):
            conn.execute(sa.text("INSERT INTO annotations (id, task_id, annotator, kind, label, source, source_ref, created_at) "
                                 "VALUES (:id, 'k1', :who, 'question_review', '{\"decision\": \"accept\"}', :src, :ref, '2026-01-01')"),
                         {"id": f"a{i}", "who": who, "src": source, "ref": f"{source}:{i}"})
    engine.dispose()
    monkeypatch.setenv("TQAFORGE_DATABASE_URL", url)
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / CONFIG_NAME).write_text('[workspace]\nname = "old"\n')
    ws = open_workspace(tmp_path / "ws")
    try:
        assert current_revision(ws.engine) == head_revision()
        with ws.session() as s:
            people = {p.id: p for p in s.exec(select(Annotator)).all()}
            assert set(people) == {"ana", "ls:abc"} and people["ana"].aliases == ["ana"]
            rows = {a.id: (a.annotator, a.source, a.annotator_id) for a in s.exec(select(Annotation)).all()}
        assert rows == {"a0": ("ana", "cli", "ana"), "a1": ("ls:abc", "labelstudio", "ls:abc"), "a2": ("agent:m", "agent", None),
                        "a3": ("freb", "imported", None), "a4": ("ana", "app", "ana")}
        with ws.engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), SQLModel.metadata) == []
    finally:
        ws.close()


# --- automatic steps leave people's settled fields alone ---------------------------------------------


def _modifications(ws: Workspace) -> tuple[str, str]:
    """Two value-modified variants ("answer changes") by ana on two questions, each waiting for
    blind re-answers; (first, second) variant ids."""
    assert not import_paths(ws, [SAMPLE / "tat_nonfactoid_dev_sample.jsonl"]).failed
    with ws.session() as s:
        qids = [q.id for q in s.exec(select(Question).order_by(Question.id)).all()[:2]]
        for qid in qids:
            short = store_shortened_table(s, qid, [[1, 1], [2, 1]])
            table = Table.from_dict(short.table)  # type: ignore[arg-type]
            old, same = table.rows[1][1], table.rows[0][1]
            record_annotation(s, kind="value_modification", target_type="variant", target_id=short.id, annotator="ana", label={
                "answer_changes": {"edits": [{"row": 1, "col": 1, "old": old, "new": old + "9"}], "answers": ["77"]},
                "answer_same": {"edits": [{"row": 0, "col": 1, "old": same, "new": same + "x"}], "answers": None}})
    assert settle_human_variants(ws).variants_new == 4
    with ws.session() as s:
        made = s.exec(select(Variant).where(Variant.perturbation == "value_change_answer_changes").order_by(Variant.question_id)).all()
        return made[0].id, made[1].id


def _reanswer(ws: Workspace, variant_id: str, answers: dict[str, str]) -> None:
    with ws.session() as s:
        for who, answer in answers.items():
            record_annotation(s, kind="blind_reanswer", target_type="variant", target_id=variant_id, annotator=who,
                              label={"answers": [answer]})


def test_validate_leaves_a_variant_a_person_decided_alone(sqlite_workspace: Workspace) -> None:
    """Variant validation: re-answers that all agree validate a modification (the control); one a
    person rejected in the queue stays rejected when agreeing re-answers arrive later."""
    ws = sqlite_workspace
    decided, control = _modifications(ws)
    _reanswer(ws, decided, {"ben": "77", "cy": "78"})  # cy disagrees: a person decides
    assert settle_human_variants(ws).to_adjudicate == 1
    [item] = adjudication_queue(ws, kind="value_modification_review")
    resolve(ws, item.task_id, {"decision": "reject"}, by="lead")
    _reanswer(ws, decided, {"cy": "77"})  # cy changes his mind: the re-answers agree now
    _reanswer(ws, control, {"ben": "77", "cy": "77"})
    summary = settle_human_variants(ws)
    with ws.session() as s:
        assert s.get(Variant, decided).status == VariantStatus.REJECTED  # type: ignore[union-attr]
        assert s.get(Variant, control).status == VariantStatus.VALIDATED  # type: ignore[union-attr]
    assert summary.validated == 1 and summary.left_to_people == 1
    assert "1 variants a person decided: left alone" in summary.lines()


def test_one_precedence_rule_a_person_beats_a_model_beats_a_rule() -> None:
    from tqaforge.labels import Authority, may_change

    assert may_change(Authority.PERSON, Authority.MODEL) and may_change(Authority.MODEL, Authority.RULE)
    assert not may_change(Authority.RULE, Authority.MODEL) and not may_change(Authority.MODEL, Authority.PERSON)
    assert may_change(Authority.RULE, None) and may_change(Authority.PERSON, Authority.PERSON)

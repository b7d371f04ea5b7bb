"""The record store on SQLite and PostgreSQL: migrations, round trips, workspace config."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlmodel import SQLModel, select

from tqaforge.config import CONFIG_NAME
from tqaforge.errors import ConfigError, StoreError, TaxonomyError, WorkspaceNotFound
from tqaforge.schemas.records import Annotation, AnnotationTask, Answer, Question, TableRecord
from tqaforge.store import current_revision, head_revision, init_workspace, make_engine, migrate, open_workspace
from tqaforge.tables.stats import table_stats
from tqaforge.tables.table import Table


def test_fresh_workspace_is_at_head_and_matches_the_records(workspace):
    assert current_revision(workspace.engine) == head_revision()
    with workspace.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), SQLModel.metadata)
    assert diff == [], f"migrations and records disagree: {diff}"


def test_records_round_trip_json_and_unicode(workspace):
    t = Table.build(["naïve", "x|y"], [["<b>&", "1,305"], ["", "line\nbreak"]])
    stats = table_stats(t)
    with workspace.session() as s:
        s.add(TableRecord(id=t.id, header=list(t.header), rows=[list(r) for r in t.rows], n_rows=2, n_cols=2,
                          numeric_share=stats.numeric_share))
        s.flush()  # no ORM relationships: parents are flushed before children
        qid = Question.make_id(t.id, "Which?", "Counting")
        s.add(Question(id=qid, table_id=t.id, text="Which?", subtype="Counting", relevant_cells=[[0, 1]],
                       meta={"k": ["v", 1]}))
    with workspace.session() as s:
        rec = s.get(TableRecord, t.id)
        assert Table.build(rec.header, rec.rows) == t
        q = s.get(Question, qid)
        assert q.relevant_cells == [[0, 1]] and q.meta == {"k": ["v", 1]}
        assert q.created_at.tzinfo is not None


def test_foreign_keys_are_enforced(workspace):
    with pytest.raises(sa.exc.IntegrityError):
        with workspace.session() as s:
            s.add(Question(id="q1", table_id="missing", text="?"))


def test_failed_session_rolls_back(workspace):
    t = Table.build(["a"], [["1"]])
    with pytest.raises(RuntimeError):
        with workspace.session() as s:
            s.add(TableRecord(id=t.id, header=["a"], rows=[["1"]], n_rows=1, n_cols=1, numeric_share=1.0))
            s.flush()
            raise RuntimeError("boom")
    with workspace.session() as s:
        assert s.exec(select(TableRecord)).all() == []


def _insert_revision_0001_rows(engine) -> None:
    """Rows as the first schema revision stored them (no stats columns, no annotation tables)."""
    tables = [
        Table.build(["team", "pts", "gd"], [["A", "10", "+3"], ["B", "7", "-1"], ["C", "x", "0"]]),
        Table.build(["k", "v"], [["a", "1"]]),
    ]
    with engine.begin() as conn:
        for t in tables:
            conn.execute(
                sa.text("INSERT INTO tables (id, header, rows, origin, created_by, created_at) "
                        "VALUES (:id, :h, :r, 'import', 'old', :ts)"),
                {"id": t.id, "h": json.dumps(list(t.header)), "r": json.dumps([list(r) for r in t.rows]),
                 "ts": "2026-01-01 00:00:00+00:00"},
            )
        conn.execute(
            sa.text("INSERT INTO questions (id, table_id, text, status, origin, created_by, subtype, "
                    "relevant_cells, created_at, updated_at) VALUES ('q1', :tid, 'Who leads?', 'accepted', "
                    "'human', 'ann1', 'Ranking', :rc, :ts, :ts)"),
            {"tid": tables[0].id, "rc": json.dumps([[0, 1], [1, 1]]), "ts": "2026-01-01 00:00:00+00:00"},
        )
        conn.execute(
            sa.text("INSERT INTO answers (id, question_id, value, \"values\", status, origin, created_by, created_at) "
                    "VALUES ('a1', 'q1', 'A', :v, 'verified', 'human', 'ann1', :ts)"),
            {"v": json.dumps(["A"]), "ts": "2026-01-01 00:00:00+00:00"},
        )
    return tables


def test_workspace_at_an_earlier_revision_upgrades_with_rows_intact(tmp_path, database_url, monkeypatch):
    engine = make_engine(database_url)
    migrate(engine, "0001")
    assert current_revision(engine) == "0001"
    tables = _insert_revision_0001_rows(engine)
    engine.dispose()

    monkeypatch.setenv("TQAFORGE_DATABASE_URL", database_url)
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / CONFIG_NAME).write_text('[workspace]\nname = "old"\n')
    ws = open_workspace(tmp_path / "ws")
    try:
        assert current_revision(ws.engine) == head_revision()
        with ws.session() as s:
            stored = {r.id: r for r in s.exec(select(TableRecord)).all()}
            assert set(stored) == {t.id for t in tables}
            for t in tables:
                rec = stored[t.id]
                assert Table.build(rec.header, rec.rows) == t
                # the upgrade backfilled the new statistics columns from the stored cells
                expected = table_stats(t)
                assert (rec.n_rows, rec.n_cols, rec.numeric_share) == (expected.n_rows, expected.n_cols, expected.numeric_share)
            q = s.get(Question, "q1")
            assert (q.text, q.created_by, q.relevant_cells) == ("Who leads?", "ann1", [[0, 1], [1, 1]])
            a = s.get(Answer, "a1")
            assert (a.values, a.status) == (["A"], "verified")
            # the new tables of the later revision are usable
            s.add(AnnotationTask(id="t1", kind="question_review", target_type="question", target_id="q1"))
            s.flush()
            s.add(Annotation(id="n1", task_id="t1", annotator="ann2", kind="question_review", label={"ok": True}))
        with ws.engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), SQLModel.metadata)
        assert diff == []
    finally:
        ws.close()


def test_sqlite_workspace_uses_wal_and_busy_timeout(sqlite_workspace):
    assert (sqlite_workspace.root / "tqaforge.db").exists()
    with sqlite_workspace.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 5000
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


def test_init_is_idempotent_and_keeps_rows(sqlite_workspace):
    t = Table.build(["a"], [["1"]])
    with sqlite_workspace.session() as s:
        s.add(TableRecord(id=t.id, header=["a"], rows=[["1"]], n_rows=1, n_cols=1, numeric_share=1.0))
    config_before = (sqlite_workspace.root / CONFIG_NAME).read_text()
    again = init_workspace(sqlite_workspace.root)
    with again.session() as s:
        assert s.get(TableRecord, t.id) is not None
    assert (sqlite_workspace.root / CONFIG_NAME).read_text() == config_before
    again.close()


def test_workspace_found_from_a_subdirectory(sqlite_workspace, monkeypatch):
    sub = sqlite_workspace.root / "deep" / "er"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    ws = open_workspace()
    assert ws.root == sqlite_workspace.root
    ws.close()


def test_missing_workspace_has_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(WorkspaceNotFound, match="tqaforge.toml") as info:
        open_workspace()
    assert "tqaforge init" in str(info.value)
    with pytest.raises(WorkspaceNotFound):
        open_workspace(tmp_path)


def test_broken_config_and_taxonomy_errors(tmp_path, monkeypatch):
    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    (tmp_path / CONFIG_NAME).write_text("[workspace\nname=")
    with pytest.raises(ConfigError, match="line 1, column 11: invalid TOML"):
        open_workspace(tmp_path)
    (tmp_path / CONFIG_NAME).write_text('[workspace]\ntaxonomy = "mine"\n')
    with pytest.raises(TaxonomyError, match="lists no categories"):
        open_workspace(tmp_path)
    (tmp_path / CONFIG_NAME).write_text(
        '[workspace]\ntaxonomy = "mine"\n[[taxonomy.category]]\ntype = "Lookup"\nsubtype = "Cell"\n'
    )
    ws = init_workspace(tmp_path)  # a hand-written config: only init creates the database
    assert ws.config.taxonomy().subtypes == ("Cell",)
    ws.close()


def test_unreachable_database_is_a_store_error(tmp_path, monkeypatch):
    monkeypatch.setenv("TQAFORGE_DATABASE_URL", "postgresql+psycopg://nobody:secret@127.0.0.1:9/none")
    with pytest.raises(StoreError) as info:
        init_workspace(tmp_path / "ws")
    assert "secret" not in str(info.value)


def test_database_url_from_config(tmp_path, monkeypatch):
    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    other = tmp_path / "elsewhere.db"
    ws = init_workspace(tmp_path / "ws", database_url=f"sqlite:///{other}")
    assert other.exists() and not (tmp_path / "ws" / "tqaforge.db").exists()
    ws.close()

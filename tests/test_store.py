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


# --- migrations are self-contained --------------------------------------------------------------


def test_migrations_import_nothing_of_tqaforge():
    """A migration replays the same whatever the live code becomes: it imports only alembic,
    sqlalchemy and the standard library (0002 once imported tables.stats)."""
    import ast
    from pathlib import Path

    import tqaforge.migrations

    folder = Path(tqaforge.migrations.__file__).parent
    imported = {}
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            imported.update({name: path.name for name in names})
    assert "alembic" in imported and "sqlalchemy" in imported
    assert not [n for n in imported if n.split(".")[0] in ("tqaforge", "sqlmodel")], imported


# --- configuration: typed sections, one policy for unknown keys, the workspace's paths ---------


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ('[llm]\nmodle = "m"\n', "unknown key 'modle' in [llm]"),
        ("[generation]\nper_rounds = 2\n", "unknown key 'per_rounds' in [generation]"),
        ("[generaton]\nper_round = 2\n", "unknown section or key 'generaton'"),
        ("[sandbox]\nmemory = 1\n", "unknown key 'memory' in [sandbox]"),
        ('[labelstudio]\nvenv = ".venv-ls"\nprot = 1\n', "unknown key 'prot' in [labelstudio]"),
        ("[taxonomy]\nname = 1\n", "unknown key 'name' in [taxonomy]"),
    ],
)
def test_unknown_config_keys_are_refused_naming_the_file_and_key(tmp_path, monkeypatch, body, named):
    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    path = tmp_path / CONFIG_NAME
    path.write_text('[workspace]\nname = "w"\n' + body)
    with pytest.raises(ConfigError) as info:
        open_workspace(tmp_path)
    assert f"{path}: {named}" in str(info.value)


def test_config_sections_are_typed(tmp_path):
    from tqaforge.config import load_config

    path = tmp_path / CONFIG_NAME
    path.write_text('[llm]\nmodel = "m"\nrequests_per_minute = 100\n[generation]\nper_round = 2\n'
                    'human_share = 0\n[labelstudio]\nvenv = "ls"\n')
    config = load_config(path)
    assert config.llm.values() == {"model": "m", "requests_per_minute": 100.0}
    assert config.generation.values() == {"per_round": 2, "human_share": 0.0}
    assert isinstance(config.generation.human_share, float)
    assert config.labelstudio.venv_path(tmp_path) == tmp_path / "ls"
    path.write_text("[generation]\nper_round = \"2\"\n")
    with pytest.raises(ConfigError, match=r"\[generation\] per_round: expected an integer, got string '2'"):
        load_config(path)


def test_config_sections_name_the_settings_they_feed():
    """[llm] and [generation] know exactly the keys of the settings they are read into."""
    from dataclasses import fields

    from tqaforge.config import GenerationSection, LLMSection
    from tqaforge.generation.questions import GenerationOptions
    from tqaforge.llm.settings import LLMSettings

    assert {f.name for f in fields(LLMSection)} == {f.name for f in fields(LLMSettings)} | {"api_key_env"}
    per_run = {"subtypes", "tables", "retry_failed"}  # chosen per command, never in the file
    assert {f.name for f in fields(GenerationSection)} == {f.name for f in fields(GenerationOptions)} - per_run


def test_workspace_paths_are_decided_in_one_place(sqlite_workspace):
    from tqaforge.annotation.workflows import report_paths
    from tqaforge.generation.corpus import corpus_path
    from tqaforge.variants.grid import default_prompts_path

    ws = sqlite_workspace
    paths = ws.paths
    assert paths.config == ws.root / CONFIG_NAME and paths.seeds == ws.root / "seeds.toml"
    assert corpus_path(ws) == paths.seeds
    assert report_paths(ws)[0].parent == paths.reports == ws.root / "reports"
    assert default_prompts_path(ws).parent == paths.prompts == ws.root / "prompts"
    assert (paths.label_studio, paths.releases) == (ws.root / "label-studio", ws.root / "releases")
    with ws.lock("paths test") as lock_file:
        assert lock_file.parent == paths.locks == ws.root / ".locks"


def test_label_studio_venv_is_configuration(tmp_path, monkeypatch):
    """The environment, then [labelstudio] venv (relative to the workspace), then a checkout's
    .venv-ls; an installed package without one says how to install Label Studio."""
    from tqaforge.annotation.labelstudio import server
    from tqaforge.launch import _parse, label_studio_settings

    monkeypatch.delenv(server.VENV_ENV, raising=False)
    args = _parse(["--workspace", str(tmp_path)])
    assert label_studio_settings(args, tmp_path).venv == server.checkout_venv()  # no config yet
    (tmp_path / CONFIG_NAME).write_text('[labelstudio]\nvenv = "tools/ls"\n')
    settings = label_studio_settings(args, tmp_path)
    assert settings.venv == tmp_path / "tools" / "ls" and settings.data_dir == tmp_path / "label-studio"
    monkeypatch.setenv(server.VENV_ENV, str(tmp_path / "from-env"))
    assert label_studio_settings(args, tmp_path).venv == tmp_path / "from-env"

    monkeypatch.delenv(server.VENV_ENV)
    monkeypatch.setattr(server, "_CHECKOUT", tmp_path / "site-packages")  # as in a wheel install
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert server.resolve_venv() is None
    with pytest.raises(server.LabelStudioError) as info:
        server.executable()
    assert "Label Studio is not installed (looked for on PATH)" in str(info.value)
    assert server.VENV_ENV in (info.value.hint or "") and "pip install label-studio" in (info.value.hint or "")


def test_newest_migration_by_file_name_is_alembic_s_head() -> None:
    """Opening a workspace compares the database with the newest file's revision, without Alembic."""
    from tqaforge.store import newest_migration

    assert newest_migration() == head_revision()

"""Hostile cases of the memorisation probes (tqaforge.health.memorisation): a model whose replies
are empty, huge or not CSV at all; an endpoint that goes down mid-run; tables too small for some
probes (one row, no rows); bad options. Never a crash, never a table called clean that was not
probed, and nothing paid twice."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from memo_sim import MemorisingModel, build, made_up_table
from openai_server import OpenAIServer, Scripted

from tqaforge.errors import HealthError
from tqaforge.evaluate.predictions import load_release
from tqaforge.health import HealthOptions, Thresholds, run
from tqaforge.health.memorisation import CELLS, HEADER, NONE, NOT_TESTABLE, ROWS, MemorisationOptions, build_probes
from tqaforge.health.report import memorisation_section
from tqaforge.tables.table import Table

pytestmark = pytest.mark.hostile

TABLES = [made_up_table(k) for k in range(3)] + [made_up_table(7, rows=1)]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    return build(tmp_path_factory.mktemp("memo-hostile"), TABLES)


@pytest.fixture
def options(built: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> HealthOptions:
    """The report's options with the model, on a copy of the workspace (each test its own ledger)."""
    ws = Path(shutil.copytree(built[0], tmp_path / "ws"))
    config = ws / "tqaforge.toml"  # unusable replies are retried after a backoff: a short one here
    config.write_text(config.read_text().replace("\n[llm]\n", "\n[llm]\nbackoff_s = 0.01\n", 1))
    return HealthOptions(release=built[1], evaluations=(built[2],), workspace=ws, model="m1", plots=False,
                         thresholds=Thresholds(max_suspect_gold=None))


def _section(options: HealthOptions, reply: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, OpenAIServer]:
    with OpenAIServer(reply) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        report = run(options, builders=[memorisation_section])  # this section only: the others are tested elsewhere
    return next(s for s in report.sections if s.name == "memorisation"), server


@pytest.mark.parametrize("reply", [
    pytest.param(lambda body: "I am sorry, I cannot reproduce copyrighted data.", id="not-csv"),
    pytest.param(lambda body: "", id="empty"),
    pytest.param(lambda body: "x," * 60_000, id="huge"),  # past the byte limit of the reply: cut off, an unusable reply
    pytest.param(lambda body: "\x1b[2J\x00" + "a = b\n" * 5, id="control-characters"),
])
def test_replies_that_are_no_answer_match_nothing(options: HealthOptions, reply: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    section, server = _section(options, reply, monkeypatch)
    found = section.source
    assert len(found.probed) == len(TABLES) and not found.not_probed
    assert {t.verdict for t in found.probed} == {NONE}
    assert all(t.row_matches == t.cell_matches == 0 and not t.header_verbatim for t in found.probed)
    assert "\x1b" not in "\n".join(section.lines()) and "\x00" not in "\n".join(section.lines())
    assert not server.errors


def test_the_endpoint_down_mid_run_is_a_clear_error_and_what_was_probed_is_kept(
    options: HealthOptions, monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = MemorisingModel(TABLES)
    answered: list[int] = []

    def down_after_20(body: dict[str, Any]) -> Scripted | str:
        if len(answered) >= 20:
            return Scripted(status=503)
        answered.append(1)
        return model(body)

    monkeypatch.setenv("TQAFORGE_LLM_MODEL", "m1")
    ws_config = options.workspace / "tqaforge.toml"  # type: ignore[operator]
    ws_config.write_text(ws_config.read_text().replace("\n[llm]\n", "\n[llm]\nmax_retries = 1\nconcurrency = 1\n", 1))
    with pytest.raises(HealthError, match="memorisation probes with m1 stopped after") as caught:
        _section(options, down_after_20, monkeypatch)
    assert "503" in str(caught.value) and "ledger" in str(caught.value.hint)
    # The answers had are in the ledger: a run again on a healthy endpoint pays only for the rest.
    section, server = _section(options, model, monkeypatch)
    found = section.source
    assert found.calls.cached == 20 and len(server.requests) == found.calls.paid
    assert len(found.probed) == len(TABLES)


def test_tables_too_small_are_skipped_and_said_so(options: HealthOptions, monkeypatch: pytest.MonkeyPatch) -> None:
    section, _ = _section(options, MemorisingModel([]), monkeypatch)
    ids = {r.source_id or r.id: r.id for r in load_release(options.release).references}
    one_row = next(t for t in section.source.probed if t.item == ids["memo-03"])
    assert set(one_row.skipped) == {HEADER, ROWS} and one_row.count(CELLS) == 1
    text = "\n".join(section.lines())
    assert "header skipped; rows skipped" in text
    saved = next(t for t in section.data["tables"] if t["item"] == ids["memo-03"])
    assert saved["skipped"] == {"header": "needs 3 lines or more (header and 2 rows)", "rows": "needs 2 rows or more"}
    # No rows at all (the importer refuses such a table; the probes do not rely on it): nothing to
    # ask, every kind skipped, a verdict that says so, no call.
    empty = build_probes(Table.build(["a", "b"], []), "x", 1, MemorisationOptions(model="m"))
    assert empty.probes == [] and set(empty.skipped) == {HEADER, ROWS, CELLS} and empty.verdict == NOT_TESTABLE
    single_column = build_probes(Table.build(["a"], [["1"], ["2"], ["3"]]), "y", 1, MemorisationOptions(model="m"))
    assert "needs 1 row and 2 columns" in single_column.skipped[CELLS] and single_column.count(ROWS) == 1


@pytest.mark.parametrize("changes, message", [
    ({"memorisation_tables": 0}, "max_tables must be 1 or more"),
    ({"max_cost": -1.0}, "max.cost"),
    ({"max_cost": float("nan")}, "max.cost"),
])
def test_bad_options_are_refused_before_any_call(options: HealthOptions, changes: dict[str, Any], message: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    with OpenAIServer(lambda body: "x") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        with pytest.raises(HealthError, match=message):
            run(HealthOptions(**{**options.__dict__, **changes}), builders=[memorisation_section])
        assert server.requests == []


def test_the_first_tables_only_and_the_rest_not_called_clean(options: HealthOptions, monkeypatch: pytest.MonkeyPatch) -> None:
    section, server = _section(HealthOptions(**{**options.__dict__, "memorisation_tables": 2}), MemorisingModel(TABLES), monkeypatch)
    found = section.source
    assert (len(found.probed), found.selected, found.distinct) == (2, 2, len(TABLES))
    assert "the first 2 of 4 distinct tables" in section.body[0]
    assert len(server.requests) == found.calls.paid == sum(len(t.probes) for t in found.probed)

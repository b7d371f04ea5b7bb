"""Memorisation probes (tqaforge.health.memorisation): a scripted model that has memorised three
of six tables is found out for exactly those three; a second run makes no request; a budget stops
the run before it is passed and the tables left are named; tabmemcheck's own tests, answered by the
same model, give the same verdicts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from memo_sim import MemorisingModel, build, made_up_table
from openai_server import OpenAIServer, estimate_tokens
from typer.testing import CliRunner

from tqaforge.cli import app
from tqaforge.evaluate.predictions import load_release
from tqaforge.health import HealthOptions, Thresholds, run
from tqaforge.health.memorisation import (
    CELLS,
    HEADER,
    MEMORISED,
    NONE,
    ROWS,
    SOME_EVIDENCE,
    MemorisationOptions,
    build_probes,
    cell_value,
    csv_lines,
    header_match,
    row_match,
    verdict,
)
from tqaforge.health.report import memorisation_section, question_only_section
from tqaforge.llm.settings import Price
from tqaforge.store import open_workspace

TABLES = [made_up_table(k) for k in range(6)] + [made_up_table(6, rows=1)]
MEMORISED_TABLES = [0, 2, 4, 6]  # the one-row table (6) too: too small for two kinds of evidence
ITEM = {k: f"memo-{k:02d}" for k in range(len(TABLES))}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    return build(tmp_path_factory.mktemp("memo"), TABLES)


@pytest.fixture
def workspace(built: tuple[Path, Path, Path], tmp_path: Path) -> Path:
    """A copy of the built workspace: each test its own ledger."""
    return Path(shutil.copytree(built[0], tmp_path / "ws"))


def _ids(release: Path) -> dict[str, str]:
    """The release's row id of each made-up item (the release renames them)."""
    return {r.source_id or r.id: r.id for r in load_release(release).references}


def _model() -> MemorisingModel:
    return MemorisingModel([TABLES[k] for k in MEMORISED_TABLES])


def test_the_memorised_tables_are_flagged_and_a_second_run_costs_nothing(
    built: tuple[Path, Path, Path], workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, release, evaluation = built
    ids = _ids(release)
    runner = CliRunner()
    args = ["health", "--release", str(release), "--evaluations", str(evaluation), "--workspace", str(workspace),
            "--model", "m1", "--no-plots", "--json", "--thresholds", "max_suspect_gold=none,max_memorised=0.25"]
    with OpenAIServer(_model()) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        first = runner.invoke(app, [*args, "--out", str(tmp_path / "a")])
        sent = len(server.requests)
        second = runner.invoke(app, [*args, "--out", str(tmp_path / "b")])
        assert len(server.requests) == sent  # every probe answered from the ledger
        assert not server.errors
    assert first.exit_code == 1, first.output  # 3 of 7 tables memorised > 25%
    data = json.loads(first.stdout)
    section = next(s for s in data["sections"] if s["name"] == "memorisation")["data"]
    assert sorted(section["memorised"]) == sorted(ids[ITEM[k]] for k in (0, 2, 4))
    assert sorted(section["none"]) == sorted(ids[ITEM[k]] for k in (1, 3, 5))
    assert section["some_evidence"] == [ids[ITEM[6]]] and section["not_probed"] == []
    assert section["share_with_evidence"] == pytest.approx(4 / 7)
    # The report's item list names every item on a memorised table (and no other) for that reason.
    assert {item for item, why in data["flagged_items"].items() if "memorised" in why} == {ids[ITEM[k]] for k in (0, 2, 4)}
    one_row = next(t for t in section["tables"] if t["item"] == ids[ITEM[6]])
    assert set(one_row["skipped"]) == {HEADER, ROWS} and one_row["evidence"] == [CELLS]
    check = next(c for c in data["checks"] if c["name"] == "memorised")
    assert (check["passed"], check["detail"]) == (False, "3 of 7 tables memorised by the model")
    # 6 tables of 12 rows: 4 header cuts, 3 row probes (3 windows of 10 lines) and 5 cell probes
    # each; the one-row table: its single cell.
    probes = 6 * (4 + 3 + 5) + 1
    # The same --model also asks every base item's question without its table (one call each).
    asked = next(s for s in data["sections"] if s["name"] == "question_only")["data"]["asked"]
    assert asked == len(ITEM) and sent == probes + asked
    assert f"{probes} paid calls, 0 from the cache" in first.stderr
    assert f"0 paid calls, {probes} from the cache" in second.stderr
    # The report's bytes do not depend on the cache: paid or cached, the same files.
    for name in ("health.json", "health.md"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert "Memorisation probes (model)" in (tmp_path / "a" / "health.md").read_text()


def test_a_budget_stops_before_it_is_passed_and_names_the_tables_not_probed(
    built: tuple[Path, Path, Path], workspace: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, release, evaluation = built
    price = Price(input=1.0, output=1.0)  # USD per million tokens
    delivered: list[float] = []

    def reply(body: dict[str, Any]) -> str:
        text = _model()(body)
        prompt = sum(estimate_tokens(str(m["content"])) for m in body["messages"])
        delivered.append((prompt + estimate_tokens(text)) * 1e-6)
        return text

    options = HealthOptions(release=release, evaluations=(evaluation,), workspace=workspace, model="m1", max_cost=0.0012,
                            thresholds=Thresholds(max_suspect_gold=None, max_memorised=0.5), plots=False)
    with OpenAIServer(reply) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        ws = open_workspace(workspace)
        try:
            ws.paths.config.write_text(ws.paths.config.read_text() + f'\n[llm.prices."m1"]\ninput = {price.input}\noutput = {price.output}\n')
        finally:
            ws.close()
        report = run(options, builders=[memorisation_section])
        stopped_at = len(server.requests)
        section = next(s for s in report.sections if s.name == "memorisation")
        found = section.source
        assert 0 < len(found.probed) < len(TABLES) and found.not_probed
        assert sum(delivered) <= 0.0012  # nothing sent past the budget, as the server counted it
        assert found.calls.paid == stopped_at and found.calls.cost <= 0.0012
        text = "\n".join(report.lines())
        assert "NOT PROBED" in text and "not clean" in text and "budget" in text.lower()
        assert all(t.item in text for t in found.not_probed)
        check = next(c for c in report.checks if c.name == "memorised")
        assert not check.passed and not check.checked  # the gate does not pass blind
        # A larger budget resumes: the answers had are free, only the rest is asked.
        again = run(HealthOptions(**{**options.__dict__, "max_cost": 1.0}), builders=[memorisation_section])
        rest = next(s for s in again.sections if s.name == "memorisation").source
        assert len(rest.probed) == len(TABLES) and rest.calls.cached >= stopped_at
        assert len(server.requests) == stopped_at + rest.calls.paid


def test_one_budget_holds_for_question_only_answering_and_the_probes_together(
    built: tuple[Path, Path, Path], workspace: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tqaforge.health.memorisation as memorisation
    import tqaforge.health.question_only as question_only

    _, release, evaluation = built
    spent: list[float] = []
    budgets: dict[str, Any] = {}

    def reply(body: dict[str, Any]) -> str:
        text = _model()(body)
        spent.append((sum(estimate_tokens(str(m["content"])) for m in body["messages"]) + estimate_tokens(text)) * 1e-6)
        return text

    for name, module in (("question_only", question_only), ("memorisation", memorisation)):
        def recording(*args: Any, _name: str = name, _real: Any = module.run_step, **kwargs: Any) -> Any:
            budgets[_name] = kwargs.get("budget")
            return _real(*args, **kwargs)
        monkeypatch.setattr(module, "run_step", recording)
    ws = open_workspace(workspace)
    try:
        ws.paths.config.write_text(ws.paths.config.read_text() + '\n[llm.prices."m1"]\ninput = 1.0\noutput = 1.0\n')
    finally:
        ws.close()
    limit = 0.004
    with OpenAIServer(reply) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        report = run(HealthOptions(release=release, evaluations=(evaluation,), workspace=workspace, model="m1", max_cost=limit,
                                   thresholds=Thresholds(max_suspect_gold=None), plots=False),
                     builders=[question_only_section, memorisation_section])
    # Both checks spent from one budget object, of --max-cost (each its own would hold max_cost apiece).
    assert set(budgets) == {"question_only", "memorisation"}
    assert budgets["question_only"] is budgets["memorisation"] is not None
    assert sum(spent) <= limit  # the server's own count: nothing sent past the one budget
    sections = {s.name: s.source for s in report.sections}
    assert sections["question_only"].calls.paid > 0 and sections["memorisation"].not_probed  # both spent; the budget stopped the probes


def test_no_model_no_section_and_a_model_without_a_workspace_is_refused(built: tuple[Path, Path, Path]) -> None:
    from tqaforge.errors import HealthError

    _, release, evaluation = built
    report = run(HealthOptions(release=release, evaluations=(evaluation,), plots=False), builders=[memorisation_section])
    assert "memorisation" not in [s.name for s in report.sections]
    with pytest.raises(HealthError, match="need a workspace") as caught:
        run(HealthOptions(release=release, evaluations=(evaluation,), model="m1", plots=False), builders=[memorisation_section])
    assert "--workspace" in str(caught.value.hint)


def test_probes_are_seeded_and_scored_by_tabmemcheck_criteria() -> None:
    table = TABLES[0]
    a, b = (build_probes(table, "i", 1, MemorisationOptions(model="m", seed=s)) for s in (0, 0))
    assert a.probes == b.probes
    c = build_probes(table, "i", 1, MemorisationOptions(model="m", seed=1))
    assert [p.messages for p in c.probes] != [p.messages for p in a.probes]
    assert [p.kind for p in a.probes].count(HEADER) == 4 and a.column == "col0a"
    # No row probe shows its own target among its worked examples.
    for p in a.probes:
        if p.kind == ROWS:
            assert all(p.expected not in content for role, content in p.messages[1:-1])
    lines = csv_lines(table)
    assert header_match("abc,def\nxyz", "abc,dXf") == 5 and header_match("ab", "") == 0
    assert row_match(lines[3], f"  {lines[3]}\n") and not row_match(lines[3], lines[3][:-1])
    assert cell_value("col0a = kalo\nmore", "col0a") == "kalo" and cell_value("nothing", "col0a") is None
    # The verdict: two kinds of evidence, or half the rows verbatim, is memorised.
    a.header_verbatim, a.row_matches = True, 0
    assert verdict(a) == SOME_EVIDENCE
    a.row_matches = 1
    assert verdict(a) == MEMORISED
    a.header_verbatim, a.row_matches = False, 3
    assert verdict(a) == MEMORISED
    a.row_matches, a.cell_matches, a.baseline = 0, 1, 1
    assert verdict(a) == NONE  # a cell a guess gets right is no evidence


# ---------------------------------------------------------------------------------------------
# The reference: tabmemcheck's own tests, answered by the same scripted model


def test_tabmemcheck_answered_by_the_same_model_gives_the_same_verdicts(
    built: tuple[Path, Path, Path], workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import numpy as np
    import tabmemcheck  # a dev dependency (pyproject.toml): the reference runs, never skipped
    from tabmemcheck.llm import LLM_Interface

    model = _model()

    class Scripted(LLM_Interface):
        chat_mode = True

        def chat_completion(self, messages: list[dict[str, str]], temperature: float, max_tokens: int) -> str:
            assert temperature == 0
            return model.answer(messages)

    theirs: dict[int, str] = {}
    for k, table in enumerate(TABLES[:6]):
        path = tmp_path / f"table{k}.csv"
        path.write_text("".join(line + "\n" for line in csv_lines(table)), encoding="utf-8")
        rng = np.random.default_rng(0)
        _, header_completion, response = tabmemcheck.header_test(str(path), Scripted(), verbose=False, rng=rng)
        # few_shot=0: 3 windows of 10 of 13 lines overlap, and tabmemcheck refuses a worked example
        # that holds the target row (ours takes fewer then); the scripted model reads the last message only.
        suffixes, replies = tabmemcheck.row_completion_test(str(path), Scripted(), num_prefix_rows=10, num_queries=5,
                                                            few_shot=0, print_levenshtein=False, rng=rng)
        truth, given = tabmemcheck.feature_completion_test(str(path), Scripted(), num_queries=5, rng=rng)
        # Their scores, our verdict rule: the header reproduced over a whole row, exact rows, cells.
        verbatim = header_match(header_completion, response) >= min(len(header_completion), len(csv_lines(table)[1]) + 1)
        rows = sum(row_match(s, r) for s, r in zip(suffixes, replies))
        cells = sum(str(t) == str(g) for t, g in zip(truth, given))
        kinds = verbatim + (rows >= 1) + (cells >= 1)
        theirs[k] = MEMORISED if kinds >= 2 or 2 * rows >= len(suffixes) else SOME_EVIDENCE if kinds else NONE

    ids = {v: k for k, v in _ids(built[1]).items()}
    with OpenAIServer(model) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        report = run(HealthOptions(release=built[1], evaluations=(built[2],), workspace=workspace, model="m1", plots=False),
                     builders=[memorisation_section])
    found = next(s for s in report.sections if s.name == "memorisation").source
    ours = {int(ids[t.item].split("-")[1]): t.verdict for t in found.probed}
    assert {k: ours[k] for k in theirs} == theirs
    assert sorted(k for k, v in ours.items() if v == MEMORISED) == [0, 2, 4]
    # Control: the agreement is not vacuous: both tell the memorised tables from the others.
    assert sorted(k for k, v in theirs.items() if v == NONE) == [1, 3, 5]

"""Batches: the OpenAI Batch API through the real ``openai`` client against a loopback batch server
(tests/batch_server.py), offline batch files, and the ``tqaforge batches`` commands."""

from __future__ import annotations

import json

import pytest
from batch_helpers import KEY, PRICE, make_requests, messages, rows, settings_for, vllm_output
from batch_server import BatchServer, Outcome
from openai_server import Scripted, echo_reply
from typer.testing import CliRunner

from tqaforge.cli import app
from tqaforge.errors import BudgetExceeded, LLMError
from tqaforge.llm.batches import (
    OFFLINE_SOURCE,
    budget_reserver,
    cancel_batch,
    collect_batch,
    export_offline,
    find_batch,
    import_offline,
    list_batches,
    open_call_ids,
    refresh_batch,
    resume_batch,
    submit_batch,
    wait_batch,
)
from tqaforge.llm.budget import Budget
from tqaforge.llm.gateway import Gateway, run
from tqaforge.llm.replies import UsageBounds
from tqaforge.llm.settings import Price

runner = CliRunner(env={"COLUMNS": "200"})
HALF = Price(PRICE.input / 2, PRICE.output / 2)


@pytest.fixture
def server():
    with BatchServer() as srv:
        yield srv


def online_run(ws, settings, n, tag=""):
    """The same calls made online, as a later run of the step does: (paid, cached)."""

    async def main():
        async with Gateway(ws, settings) as gw:
            for i in range(n):
                await gw.complete(messages(i, tag), purpose="demo", max_tokens=64)
            return gw.paid_calls, gw.cached_calls

    return run(main())


def test_submit_follows_each_state_then_collect_fills_the_cache(workspace, server):
    settings = settings_for(server.url)
    reqs = make_requests(settings, 6)
    batch = submit_batch(workspace, settings, reqs, step="demo")
    assert batch.state == "submitted" and batch.provider_batch_id and batch.file_id
    # The request file: one line per request, our call id as custom_id, the online body as is.
    lines = [json.loads(x) for x in (workspace.paths.batches / f"{batch.id}.jsonl").read_text().splitlines()]
    assert [x["custom_id"] for x in lines] == [r.call_id for r in reqs]
    assert all(x["url"] == "/v1/chat/completions" and x["method"] == "POST" for x in lines)
    assert lines[0]["body"] == reqs[0].body and lines[0]["body"]["max_tokens"] == 64
    assert server.batches[batch.provider_batch_id]["metadata"] == {"tqaforge_batch": batch.id}
    assert set(batch.requests) == {r.call_id for r in reqs} and batch.state == "submitted"

    seen = [refresh_batch(workspace, settings, batch.id[:10]).state for _ in range(3)]
    assert seen == ["in_progress", "finalizing", "completed"]
    assert server.total_processed == 6 and find_batch(workspace, batch.id).counts["completed"] == 6

    summary = collect_batch(workspace, settings, batch.id)
    assert (summary.ok, summary.errors, summary.missing, summary.unknown, summary.malformed) == (6, 0, 0, 0, 0)
    stored = rows(workspace)
    assert set(stored) == {r.call_id for r in reqs}
    for r in reqs:
        row = stored[r.call_id]
        assert row.status == "ok" and row.text == r.messages[-1]["content"]
        assert (row.transport, row.batch_id, row.endpoint) == ("batch", batch.id, server.url)
        assert (row.price_input, row.price_output) == (HALF.input, HALF.output)
        assert row.price_source == "[llm.prices] x batch discount 0.5"
        assert row.cost == pytest.approx(HALF.cost(row.prompt_tokens, row.completion_tokens)) and row.cost > 0
        assert row.messages == r.messages and row.params == r.params and row.purpose == "demo"
    collected = find_batch(workspace, batch.id)
    assert collected.state == "collected" and collected.cost == pytest.approx(sum(x.cost for x in stored.values()))
    assert summary.cost == pytest.approx(collected.cost) and summary.charged == pytest.approx(collected.cost)
    assert open_call_ids(workspace) == set()

    # The next online run of the same step pays nothing, counted at the server; a new call is
    # paid (the control: the server does see online calls).
    assert online_run(workspace, settings, 6) == (0, 6)
    assert server.total_online == 0
    assert online_run(workspace, settings, 1, tag="new") == (1, 0)
    assert server.total_online == 1


def test_collect_twice_writes_the_same_rows_and_charges_nothing(workspace, server):
    settings = settings_for(server.url)
    batch = submit_batch(workspace, settings, make_requests(settings, 4), step="demo")
    wait_batch(workspace, settings, batch.id, poll_s=0.01, timeout_s=10)
    first = collect_batch(workspace, settings, batch.id)
    before = {k: (v.text, v.cost, v.status) for k, v in rows(workspace).items()}
    again = collect_batch(workspace, settings, batch.id)
    assert (again.ok, again.cost) == (first.ok, pytest.approx(first.cost))
    assert first.charged > 0 and again.charged == 0
    assert {k: (v.text, v.cost, v.status) for k, v in rows(workspace).items()} == before
    assert find_batch(workspace, batch.id).cost == pytest.approx(first.cost)
    assert server.total_processed == 4


def test_the_same_requests_find_their_open_batch_and_no_request_is_in_two(workspace, server):
    settings = settings_for(server.url)
    reqs = make_requests(settings, 8)
    first = submit_batch(workspace, settings, reqs[:5], step="demo")
    assert submit_batch(workspace, settings, list(reversed(reqs[:5])), step="demo").id == first.id
    assert (server.uploads, server.creates) == (1, 1)
    second = submit_batch(workspace, settings, reqs[3:], step="demo")  # 3 and 4 are in the first one
    assert second.id != first.id and sorted(second.custom_ids) == sorted(r.call_id for r in reqs[5:])
    assert open_call_ids(workspace) == {r.call_id for r in reqs}
    with pytest.raises(LLMError, match="already in open batches"):
        submit_batch(workspace, settings, reqs[:2], step="demo")
    with pytest.raises(LLMError, match="no requests"):
        submit_batch(workspace, settings, [], step="demo")
    assert (server.uploads, server.creates) == (2, 2)


def test_reserve_sees_the_worst_case_before_anything_is_sent_and_can_refuse(workspace, server):
    settings = settings_for(server.url)
    reqs = make_requests(settings, 3)
    worst = sum(HALF.cost(UsageBounds.of(r.messages, 64).worst_prompt, 64) for r in reqs)
    asked: list[tuple[float, int]] = []

    def refuse(batch_id: str, amount: float) -> None:
        asked.append((amount, server.uploads))
        raise BudgetExceeded("budget: no room")

    with pytest.raises(BudgetExceeded):
        submit_batch(workspace, settings, reqs, step="demo", reserve=refuse)
    assert asked == [(pytest.approx(worst), 0)] and server.uploads == 0 and server.creates == 0
    refused = list_batches(workspace)[0]
    assert refused.state == "failed" and "budget" in refused.error and open_call_ids(workspace) == set()

    batch = submit_batch(workspace, settings, reqs, step="demo", reserve=lambda _id, amount: asked.append((amount, server.uploads)))
    assert batch.id != refused.id and batch.state == "submitted" and batch.reserved == pytest.approx(worst)
    assert asked[-1] == (pytest.approx(worst), 0) and server.uploads == 1


def test_a_step_budget_holds_the_batch_worst_case(workspace, server):
    settings = settings_for(server.url)
    reqs = make_requests(settings, 3)
    worst = sum(HALF.cost(UsageBounds.of(r.messages, 64).worst_prompt, 64) for r in reqs)
    tight = Budget(worst * 0.9)
    with pytest.raises(BudgetExceeded):
        submit_batch(workspace, settings, reqs, step="demo", reserve=budget_reserver(tight))
    assert server.uploads == 0
    roomy = Budget(worst * 2)
    batch = submit_batch(workspace, settings, reqs, step="demo", reserve=budget_reserver(roomy))
    # This process's budget ends before the batch is collected: it spends the worst case at once.
    assert batch.state == "submitted" and roomy.spent == pytest.approx(worst) and batch.budget_id is None


def test_a_shared_budget_holds_a_batch_until_it_is_collected_then_spends_its_cost(workspace, server):
    from tqaforge.llm.budget import SharedBudget
    settings = settings_for(server.url)
    reqs = make_requests(settings, 3)
    worst = sum(HALF.cost(UsageBounds.of(r.messages, 64).worst_prompt, 64) for r in reqs)
    shared = SharedBudget(workspace, "team", worst * 1.5)
    try:
        batch = submit_batch(workspace, settings, reqs, step="demo", reserve=budget_reserver(shared))
        assert batch.budget_id == "team" and shared.state()[:2] == (0.0, pytest.approx(worst))
        # Held again after a kill (the same batch): no second hold.
        assert shared.hold_batch(batch.id, worst) == "team" and shared.state()[1] == pytest.approx(worst)
        # Another batch of the same worst case does not fit beside it: refused before sending.
        with pytest.raises(BudgetExceeded):
            shared.hold_batch("another-batch", worst)
        wait_batch(workspace, settings, batch.id, poll_s=0.01, timeout_s=30)
        done = collect_batch(workspace, settings, batch.id)
        spent, reserved, _ = shared.state()
        assert reserved == pytest.approx(0.0, abs=1e-12) and spent == pytest.approx(done.cost) and 0 < spent <= worst
        collect_batch(workspace, settings, batch.id)  # a second collect spends nothing more
        assert shared.state()[0] == pytest.approx(spent)
    finally:
        shared.close()


def test_expired_batch_collects_its_partial_output_and_the_rest_goes_in_the_next_batch(workspace, server):
    settings = settings_for(server.url)
    server.script(Outcome(kind="expire", partial=2))
    reqs = make_requests(settings, 5)
    batch = submit_batch(workspace, settings, reqs, step="demo")
    assert wait_batch(workspace, settings, batch.id, poll_s=0.01, timeout_s=10).state == "expired"
    summary = collect_batch(workspace, settings, batch.id)
    assert (summary.ok, summary.errors, summary.missing) == (2, 3, 0)
    stored = rows(workspace)
    assert [stored[r.call_id].status for r in reqs] == ["ok", "ok", "error", "error", "error"]
    assert "batch_expired" in stored[reqs[4].call_id].error and stored[reqs[4].call_id].cost == 0

    # What a later pass puts aside: the three not answered (the two ok ones are in the cache).
    retry = submit_batch(workspace, settings, reqs[2:], step="demo")
    wait_batch(workspace, settings, retry.id, poll_s=0.01, timeout_s=10)
    assert collect_batch(workspace, settings, retry.id).ok == 3
    assert all(r.status == "ok" for r in rows(workspace).values())
    assert server.processed == {r.call_id: 1 for r in reqs}


def test_cancelled_batch_collects_what_was_answered(workspace, server):
    settings = settings_for(server.url)
    server.script(Outcome(kind="stay", partial=1))
    reqs = make_requests(settings, 4)
    batch = submit_batch(workspace, settings, reqs, step="demo")
    assert refresh_batch(workspace, settings, batch.id).state == "in_progress"
    assert cancel_batch(workspace, settings, batch.id).state == "cancelling"
    summary = collect_batch(workspace, settings, batch.id)
    assert (summary.ok, summary.errors) == (1, 3)
    assert find_batch(workspace, batch.id).state == "collected" and open_call_ids(workspace) == set()
    with pytest.raises(LLMError, match="nothing to cancel"):
        cancel_batch(workspace, settings, batch.id)


def test_failed_validation_frees_the_requests_for_a_new_batch(workspace, server):
    settings = settings_for(server.url)
    server.script(Outcome(kind="fail"))
    reqs = make_requests(settings, 3)
    batch = submit_batch(workspace, settings, reqs, step="demo")
    failed = wait_batch(workspace, settings, batch.id, poll_s=0.01, timeout_s=10)
    assert failed.state == "failed" and "scripted validation failure" in failed.error
    with pytest.raises(LLMError, match="failed at the provider"):
        collect_batch(workspace, settings, batch.id)
    assert open_call_ids(workspace) == set() and server.total_processed == 0
    again = submit_batch(workspace, settings, reqs, step="demo")
    assert again.id != batch.id
    wait_batch(workspace, settings, again.id, poll_s=0.01, timeout_s=10)
    assert collect_batch(workspace, settings, again.id).ok == 3


def test_error_file_lines_become_error_rows_and_never_replace_an_ok_row(workspace, server):
    settings = settings_for(server.url)
    reqs = make_requests(settings, 4)
    assert online_run(workspace, settings, 1) == (1, 0)  # request 0 answered online first
    server.reply = lambda body: Scripted(status=400) if body["messages"][-1]["content"] in ("question 0", "question 2") \
        else echo_reply(body)
    batch = submit_batch(workspace, settings, reqs, step="demo")
    wait_batch(workspace, settings, batch.id, poll_s=0.01, timeout_s=10)
    summary = collect_batch(workspace, settings, batch.id)
    assert (summary.ok, summary.errors) == (2, 2)
    stored = rows(workspace)
    assert stored[reqs[0].call_id].status == "ok" and stored[reqs[0].call_id].transport == "online"
    assert stored[reqs[2].call_id].status == "error" and "HTTP 400" in stored[reqs[2].call_id].error
    assert stored[reqs[2].call_id].batch_id == batch.id
    # The error row is retried by the next run: online, it pays for exactly that one.
    server.reply = echo_reply
    assert online_run(workspace, settings, 4) == (1, 3)


def test_wait_gives_up_after_its_timeout(workspace, server):
    settings = settings_for(server.url)
    server.script(Outcome(kind="stay"))
    batch = submit_batch(workspace, settings, make_requests(settings, 2), step="demo")
    seen: list[str] = []
    with pytest.raises(LLMError, match="still in_progress"):
        wait_batch(workspace, settings, batch.id, poll_s=0.01, timeout_s=0.3, on_progress=lambda done, total, note: seen.append(note.split()[-1]))
    assert seen[0] == "in_progress" and len(seen) >= 2
    with pytest.raises(LLMError, match="in_progress, not finished"):
        collect_batch(workspace, settings, batch.id)
    assert rows(workspace) == {}


def test_a_server_whose_batches_move_with_time(workspace):
    with BatchServer(state_s=0.4) as srv:
        settings = settings_for(srv.url)
        batch = submit_batch(workspace, settings, make_requests(settings, 2), step="demo")
        seen: list[str] = []
        reports: list[tuple[int, int | None]] = []

        def progress(done: int, total: int | None, note: str = "") -> None:
            seen.append(note.split()[-1])
            reports.append((done, total))

        done = wait_batch(workspace, settings, batch.id, poll_s=0.01, timeout_s=10, on_progress=progress)
        assert done.state == "completed" and {"in_progress", "finalizing"} <= set(seen)
        assert reports[0] == (0, 2) and reports[-1] == (2, 2)
        # Time moves it, not the polls: some state is seen by more than one look. (One state's
        # looks can all fall in one slow poll on a loaded machine, three states' looks cannot.)
        assert len(seen) > len(set(seen)), seen
        assert collect_batch(workspace, settings, batch.id).ok == 2


def test_resume_of_a_submitted_batch_changes_nothing(workspace, server):
    settings = settings_for(server.url)
    batch = submit_batch(workspace, settings, make_requests(settings, 2), step="demo")
    assert resume_batch(workspace, settings, batch.id).provider_batch_id == batch.provider_batch_id
    assert (server.uploads, server.creates) == (1, 1)


def test_offline_export_and_import_round_trip(workspace, server, tmp_path):
    settings = settings_for(server.url)
    reqs = make_requests(settings, 5)
    exported = export_offline(workspace, reqs, tmp_path / "in.jsonl", step="demo")
    assert exported.kind == "offline" and exported.state == "exported"
    lines = [json.loads(x) for x in (tmp_path / "in.jsonl").read_text().splitlines()]
    assert [x["custom_id"] for x in lines] == [r.call_id for r in reqs] and lines[0]["body"] == reqs[0].body
    # The same requests are in an open (offline) batch: not in a provider's batch too.
    assert export_offline(workspace, reqs, tmp_path / "again.jsonl", step="demo").id == exported.id
    with pytest.raises(LLMError, match="already in open batches"):
        submit_batch(workspace, settings, reqs, step="demo")

    vllm_output(tmp_path / "in.jsonl", tmp_path / "out.jsonl")
    summary = import_offline(workspace, tmp_path / "out.jsonl")  # the batch found by its custom ids
    assert (summary.batch_id, summary.ok, summary.errors, summary.cost) == (exported.id, 5, 0, 0.0)
    stored = rows(workspace)
    for r in reqs:
        row = stored[r.call_id]
        assert (row.status, row.transport, row.batch_id, row.cost) == ("ok", "offline", exported.id, 0.0)
        assert (row.price_input, row.price_output) == (0.0, 0.0)
        assert row.price_source == OFFLINE_SOURCE and row.text == "echo: " + r.messages[-1]["content"]
        assert (row.prompt_tokens, row.completion_tokens) == (12, 4)
    assert find_batch(workspace, exported.id).state == "collected"
    again = import_offline(workspace, tmp_path / "out.jsonl", batch_id=exported.id[:8])
    assert (again.ok, again.charged) == (5, 0.0) and len(rows(workspace)) == 5
    assert online_run(workspace, settings, 5) == (0, 5) and server.total_online == 0


def test_cancelling_an_offline_batch_frees_its_requests(workspace, tmp_path):
    settings = settings_for("http://127.0.0.1:9/v1")
    reqs = make_requests(settings, 2)
    batch = export_offline(workspace, reqs, tmp_path / "in.jsonl", step="demo")
    assert cancel_batch(workspace, None, batch.id).state == "abandoned"
    assert open_call_ids(workspace) == set()
    assert export_offline(workspace, reqs, tmp_path / "in2.jsonl", step="demo").id != batch.id


def test_batches_commands(workspace, server, tmp_path, monkeypatch):
    settings = settings_for(server.url)
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    ws = ["--workspace", str(workspace.root)]
    batch = submit_batch(workspace, settings, make_requests(settings, 3), step="answers")

    result = runner.invoke(app, ["batches", "list", *ws])
    assert result.exit_code == 0, result.output
    assert batch.id[:12] in result.output and "answers" in result.output and "submitted" in result.output
    result = runner.invoke(app, ["batches", "status", batch.id[:8], *ws])
    assert result.exit_code == 0, result.output
    assert "state in_progress" in result.output and KEY not in result.output
    result = runner.invoke(app, ["batches", "collect", batch.id[:8], "--wait", "--poll", "0.01", "--json", *ws])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["ok"], data["state"], data["batch_id"]) == (3, "collected", batch.id)
    result = runner.invoke(app, ["batches", "list", "--json", *ws])
    assert json.loads(result.stdout)[0]["state"] == "collected"

    server.script(Outcome(kind="stay"))
    other = submit_batch(workspace, settings, make_requests(settings, 2, tag="b"), step="answers")
    result = runner.invoke(app, ["batches", "cancel", other.id[:8], *ws])
    assert result.exit_code == 0 and "state cancelling" in result.output
    result = runner.invoke(app, ["batches", "collect", other.id[:8], *ws])
    assert result.exit_code == 0, result.output
    assert "0 ok, 2 errors" in result.output
    result = runner.invoke(app, ["batches", "resume", other.id[:8], *ws])
    assert result.exit_code == 0 and "state collected" in result.output

    offline = export_offline(workspace, make_requests(settings, 2, tag="c"), tmp_path / "in.jsonl", step="answers")
    vllm_output(tmp_path / "in.jsonl", tmp_path / "out.jsonl")
    result = runner.invoke(app, ["batches", "import", str(tmp_path / "out.jsonl"), "--batch", offline.id[:8], *ws])
    assert result.exit_code == 0, result.output
    assert "2 ok, 0 errors" in result.output and OFFLINE_SOURCE in result.output

    result = runner.invoke(app, ["batches", "status", "zzzz", *ws])
    assert result.exit_code == 1 and "no batch with id 'zzzz'" in result.output
    result = runner.invoke(app, ["batches", "collect", offline.id[:8], *ws])
    assert result.exit_code == 1 and "offline batch file" in result.output


def test_answers_step_through_the_batch_api_then_online_pays_nothing(workspace):
    """The whole chain: `generate answers` with the batch transport puts its requests in one
    batch; once collected, the same step run online finds every reply in the cache."""
    from test_answers import MODEL, SAMPLE, add_questions, model_reply

    from tqaforge.answers.annotate import generate_answers, load_answer_options
    from tqaforge.ingest import import_paths
    from tqaforge.llm.step import RunnerOptions

    assert not import_paths(workspace, [SAMPLE]).failed
    ids = add_questions(workspace, {"consistent": 3, "inconsistent": 2})
    options = load_answer_options(workspace, methods=("tcot", "scot"), questions=tuple(ids))
    with BatchServer(model_reply) as srv:
        llm = settings_for(srv.url, model=MODEL, prices={MODEL: PRICE})
        first = generate_answers(workspace, options, llm, runner=RunnerOptions(transport="batch"))
        assert first.questions_done == 0 and len(first.calls.batches) == 1, first.lines()
        batch = find_batch(workspace, first.calls.batches[0])
        assert batch.request_count == 2 * len(ids) and batch.step and srv.total_online == 0
        wait_batch(workspace, llm, batch.id, poll_s=0.01, timeout_s=20)
        assert collect_batch(workspace, llm, batch.id).ok == 2 * len(ids)

        second = generate_answers(workspace, options, llm)
        assert second.questions_done == len(ids), second.lines()
        assert (second.paid_calls, second.cached_calls, srv.total_online) == (0, 2 * len(ids), 0)
        assert set(srv.processed.values()) == {1} and len(srv.processed) == 2 * len(ids)

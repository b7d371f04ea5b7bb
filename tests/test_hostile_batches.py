"""Hostile batches: SIGKILLs at exact points of a submit and a collect (the loopback batch server
kills the submitting process), malformed output files, unknown custom ids, impossible usage, a
server that lies about its batches, partial output files. Every request is processed exactly
once at the server and every row is stored once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from batch_helpers import KEY, PRICE, make_requests, rows, settings_for, vllm_output
from batch_server import BatchServer, Outcome
from openai_server import Scripted, echo_reply

from tqaforge.errors import LLMError
from tqaforge.llm import batches
from tqaforge.llm.batches import (
    collect_batch,
    export_offline,
    find_batch,
    import_offline,
    open_call_ids,
    refresh_batch,
    resume_batch,
    submit_batch,
    wait_batch,
)
from tqaforge.llm.replies import UsageBounds
from tqaforge.llm.settings import Price
from tqaforge.redact import MASK

pytestmark = pytest.mark.hostile

TESTS = Path(__file__).resolve().parent
HALF = Price(PRICE.input / 2, PRICE.output / 2)

SUBMIT = """
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from batch_helpers import make_requests, settings_for
from tqaforge.store import open_workspace
from tqaforge.llm.batches import submit_batch
ws = open_workspace(Path(sys.argv[1]))
settings = settings_for(sys.argv[2])
submit_batch(ws, settings, make_requests(settings, int(sys.argv[3])), step="demo")
print("submitted")
"""

COLLECT = """
import os, signal, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from batch_helpers import settings_for
from tqaforge.store import open_workspace
from tqaforge.llm import batchfiles
from tqaforge.llm.batches import collect_batch
if sys.argv[4] == "after-first-commit":  # an exact kill point inside the parse
    flush = batchfiles.LineReader.flush
    def flush_then_die(self):
        flush(self)
        if self.summary.ok:
            os.kill(os.getpid(), signal.SIGKILL)
    batchfiles.LineReader.flush = flush_then_die
ws = open_workspace(Path(sys.argv[1]))
collect_batch(ws, settings_for(sys.argv[2]), sys.argv[3])
print("collected")
"""


_SERVERS: dict[str, BatchServer] = {}


def server_of(settings) -> BatchServer:
    return _SERVERS[settings.base_url]


@pytest.fixture
def server():
    with BatchServer() as srv:
        _SERVERS[srv.url] = srv
        yield srv
        del _SERVERS[srv.url]


def killed_run(server: BatchServer, point: str | None, script: str, *args: str, when=None) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a subprocess that the server SIGKILLs at ``point``; its outcome."""
    holder: dict[str, int] = {}
    if point is not None:
        server.kill_at(point, lambda: holder.get("pid"), when=when)
    env = {**os.environ, "PYTHONPATH": str(TESTS.parent)}
    proc = subprocess.Popen([sys.executable, "-c", script.format(tests=str(TESTS)), *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    holder["pid"] = proc.pid
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def finish(ws, settings, batch_id):
    server_of(settings).run_all()  # every batch at the server runs to its end: an orphan would be processed too
    wait_batch(ws, settings, batch_id, poll_s=0.01, timeout_s=20)
    return collect_batch(ws, settings, batch_id)


def test_sigkill_after_the_upload_then_resume_uploads_nothing_twice(workspace, server):
    settings = settings_for(server.url)
    done = killed_run(server, "file_stored", SUBMIT, str(workspace.root), server.url, "6")
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert server.killed and server.uploads == 1 and server.creates == 0
    batch = batches.list_batches(workspace)[0]
    assert batch.state == "prepared" and batch.file_id is None  # killed before our commit
    with pytest.raises(LLMError, match="never submitted"):
        collect_batch(workspace, settings, batch.id)

    resumed = resume_batch(workspace, settings, batch.id)
    assert resumed.state == "submitted" and resumed.file_id == "file-000001"
    assert (server.uploads, server.creates) == (1, 1)
    assert finish(workspace, settings, batch.id).ok == 6
    reqs = make_requests(settings, 6)
    assert server.processed == {r.call_id: 1 for r in reqs}
    assert set(rows(workspace)) == {r.call_id for r in reqs}


def test_sigkill_after_the_create_then_submitting_again_creates_nothing_twice(workspace, server):
    settings = settings_for(server.url)
    server.page_size = 1  # our batch is found through the listing's pages, among others
    for tag in ("x", "y", "z"):
        submit_batch(workspace, settings, make_requests(settings, 1, tag=tag), step="other")
    done = killed_run(server, "batch_created", SUBMIT, str(workspace.root), server.url, "5")
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert (server.uploads, server.creates) == (4, 4)
    batch = batches.list_batches(workspace)[0]
    assert batch.state == "uploaded" and batch.provider_batch_id is None

    # The step run again puts the same requests aside: it finds the batch and carries it on.
    again = submit_batch(workspace, settings, make_requests(settings, 5), step="demo")
    assert again.id == batch.id and again.provider_batch_id == "batch-000008"
    assert (server.uploads, server.creates) == (4, 4)
    assert finish(workspace, settings, batch.id).ok == 5
    assert server.processed == {r.call_id: 1 for r in make_requests(settings, 5)} | {
        r.call_id: 1 for tag in "xyz" for r in make_requests(settings, 1, tag=tag)}


def test_control_a_resume_that_does_not_look_first_is_seen_creating_twice(workspace, server, monkeypatch):
    """The control of the test above: without the lookup, the server counts a second batch and
    every request processed twice, so those tests can see a double submission."""
    settings = settings_for(server.url)
    done = killed_run(server, "batch_created", SUBMIT, str(workspace.root), server.url, "3")
    assert done.returncode == -signal.SIGKILL
    monkeypatch.setattr(batches, "_find_created", lambda client, row: None)
    batch = resume_batch(workspace, settings, batches.list_batches(workspace)[0].id)
    finish(workspace, settings, batch.id)
    assert server.creates == 2 and server.processed == {r.call_id: 2 for r in make_requests(settings, 3)}


def test_replies_lost_after_the_server_stored_the_file_and_the_batch_are_not_sent_twice(workspace, server):
    """A 502 or 500 after the server did the work (a proxy that lost the reply): the retry looks
    for the file and the batch first and finds them."""
    settings = settings_for(server.url)
    server.lose_replies("file_stored", 502, 500)
    server.lose_replies("batch_created", 500)
    batch = submit_batch(workspace, settings, make_requests(settings, 4), step="demo")
    assert batch.state == "submitted" and (server.uploads, server.creates) == (1, 1)
    assert finish(workspace, settings, batch.id).ok == 4
    assert server.processed == {r.call_id: 1 for r in make_requests(settings, 4)}


def test_a_submit_that_gives_up_leaves_a_batch_to_resume(workspace, server):
    settings = settings_for(server.url, max_retries=0)
    server.lose_replies("file_stored", 503)
    with pytest.raises(LLMError, match="gave up after 1 attempt\\)") as raised:
        submit_batch(workspace, settings, make_requests(settings, 2), step="demo")
    assert "tqaforge batches resume" in str(raised.value)
    batch = batches.list_batches(workspace)[0]
    assert batch.state == "prepared" and server.uploads == 1  # stored once, the reply lost
    assert resume_batch(workspace, settings, batch.id).state == "submitted"
    assert (server.uploads, server.creates) == (1, 1)


def test_sigkill_mid_download_then_collect_stores_every_row_once(workspace, server):
    settings = settings_for(server.url)
    batch = submit_batch(workspace, settings, make_requests(settings, 40), step="demo")
    wait_batch(workspace, settings, batch.id, poll_s=0.01, timeout_s=20)
    out = workspace.paths.batches / f"{batch.id}.output.jsonl"
    part = out.with_name(out.name + ".part")
    done = killed_run(server, "output_midstream", COLLECT, str(workspace.root), server.url, batch.id, "-",
                      when=lambda: part.exists() and part.stat().st_size > 0)
    assert done.returncode == -signal.SIGKILL, done.stderr
    whole = len(server.file_bytes(find_batch(workspace, batch.id).output_file_id))
    assert not out.exists() and 0 < part.stat().st_size < whole  # half of it, never taken for whole
    assert rows(workspace) == {} and find_batch(workspace, batch.id).state == "completed"

    summary = collect_batch(workspace, settings, batch.id)
    assert (summary.ok, summary.malformed, summary.missing) == (40, 0, 0)
    stored = rows(workspace)
    assert len(stored) == 40 and summary.charged == pytest.approx(sum(r.cost for r in stored.values()))
    assert server.total_processed == 40 and set(server.processed.values()) == {1}


def test_sigkill_mid_parse_then_collect_charges_nothing_twice(workspace, server):
    settings = settings_for(server.url)
    batch = submit_batch(workspace, settings, make_requests(settings, 1200), step="demo")
    wait_batch(workspace, settings, batch.id, poll_s=0.01, timeout_s=20)
    done = killed_run(server, None, COLLECT, str(workspace.root), server.url, batch.id, "after-first-commit")
    assert done.returncode == -signal.SIGKILL, done.stderr
    partial = rows(workspace)
    assert len(partial) == 500 and find_batch(workspace, batch.id).state == "completed"
    paid_before = sum(r.cost for r in partial.values())

    summary = collect_batch(workspace, settings, batch.id)
    stored = rows(workspace)
    assert summary.ok == 1200 and len(stored) == 1200
    total = sum(r.cost for r in stored.values())
    assert summary.cost == pytest.approx(total) and summary.charged == pytest.approx(total - paid_before)
    assert {k: v.cost for k, v in partial.items()} == {k: stored[k].cost for k in partial}
    assert server.total_processed == 1200


def test_malformed_unknown_repeated_and_cut_off_output_lines(workspace, server):
    settings = settings_for(server.url, max_reply_bytes=1024)
    reqs = make_requests(settings, 3)
    forged = json.dumps({"custom_id": reqs[0].call_id, "response": {"status_code": 200, "body": {
        "choices": [{"message": {"content": "FORGED"}}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}}})
    stranger = json.dumps({"custom_id": "not-ours", "response": {"status_code": 200, "body": {
        "choices": [{"message": {"content": "x"}}]}}})
    server.script(Outcome(extra_lines=[
        b"not json at all", b'{"custom_id": 5}', b"[1, 2]", b"[" * 30_000 + b"]" * 30_000,
        stranger.encode(), forged.encode(), b'{"custom_id": "' + b"z" * 70_000 + b'"}',
        b'{"id": "batch_req_cut", "custom_id": "' + reqs[1].call_id.encode(),  # cut off mid-line
    ]))
    batch = submit_batch(workspace, settings, reqs, step="demo")
    summary = finish(workspace, settings, batch.id)
    assert (summary.ok, summary.errors, summary.missing) == (3, 0, 0)
    assert (summary.unknown, summary.duplicates, summary.malformed) == (1, 1, 6)
    assert any("longer than" in p for p in summary.problems) and any("nested too deeply" in p for p in summary.problems)
    stored = rows(workspace)
    assert set(stored) == {r.call_id for r in reqs} and "FORGED" not in {r.text for r in stored.values()}


def test_impossible_usage_or_no_content_is_an_error_row_never_ok(workspace, server):
    settings = settings_for(server.url)
    reqs = make_requests(settings, 6)
    scripts = {
        "question 1": Scripted(text="big", completion_tokens=10**6),
        "question 2": Scripted(text="odd", usage={"completion_tokens": "lots"}),
        "question 3": Scripted(text=None),
        "question 4": Scripted(text="no usage", usage={}),
        "question 5": Scripted(text="huge prompt", prompt_tokens=10**7),
    }
    server.reply = lambda body: scripts.get(body["messages"][-1]["content"]) or echo_reply(body)
    batch = submit_batch(workspace, settings, reqs, step="demo")
    summary = finish(workspace, settings, batch.id)
    stored = rows(workspace)
    worst = [HALF.cost(UsageBounds.of(r.messages, 64).worst_prompt, 64) for r in reqs]
    assert stored[reqs[0].call_id].status == "ok" and stored[reqs[0].call_id].cost < worst[0]  # the control
    for i in (1, 2, 5):
        row = stored[reqs[i].call_id]
        assert row.status == "error" and "impossible usage" in row.error and row.cost == pytest.approx(worst[i])
    assert stored[reqs[3].call_id].status == "error" and "no content" in stored[reqs[3].call_id].error
    assert stored[reqs[4].call_id].status == "ok" and stored[reqs[4].call_id].cost == pytest.approx(worst[4])
    assert (summary.ok, summary.errors) == (2, 4)


def test_our_key_echoed_in_replies_is_masked_in_every_row(workspace, server):
    settings = settings_for(server.url)
    reqs = make_requests(settings, 2)
    server.reply = lambda body: (f"your key is {KEY}" if body["messages"][-1]["content"] == "question 0"
                                 else Scripted(status=400, raw=json.dumps({"error": {"message": f"bad key {KEY}"}}).encode()))
    batch = submit_batch(workspace, settings, reqs, step="demo")
    finish(workspace, settings, batch.id)
    stored = rows(workspace)
    assert stored[reqs[0].call_id].text == f"your key is {MASK}"
    dumped = json.dumps([[r.text, r.error, r.response] for r in stored.values()])
    assert KEY not in dumped
    stored_batch = find_batch(workspace, batch.id)
    for suffix, file_id in (("output", stored_batch.output_file_id), ("errors", stored_batch.error_file_id)):
        assert KEY in server.file_bytes(file_id).decode()  # the server did send it back
        assert KEY not in (workspace.paths.batches / f"{batch.id}.{suffix}.jsonl").read_text()


def test_a_server_that_says_completed_before_answering_loses_no_request(workspace, server):
    settings = settings_for(server.url)
    server.script(Outcome(lie="completed_early"))
    reqs = make_requests(settings, 4)
    batch = submit_batch(workspace, settings, reqs, step="demo")
    assert refresh_batch(workspace, settings, batch.id).state == "completed"
    summary = collect_batch(workspace, settings, batch.id)
    assert (summary.ok, summary.errors, summary.missing) == (0, 0, 4)
    assert rows(workspace) == {} and open_call_ids(workspace) == set()  # free for the next run


def test_a_state_no_api_has_is_refused_and_the_row_kept(workspace, server):
    settings = settings_for(server.url)
    server.script(Outcome(lie="unknown_state"))
    batch = submit_batch(workspace, settings, make_requests(settings, 2), step="demo")
    with pytest.raises(LLMError, match="unknown state 'almost_done'"):
        refresh_batch(workspace, settings, batch.id)
    assert find_batch(workspace, batch.id).state == "submitted"


def test_an_output_file_that_is_not_there_leaves_the_batch_to_collect_again(workspace, server):
    settings = settings_for(server.url)
    server.script(Outcome(lie="missing_output"))
    batch = submit_batch(workspace, settings, make_requests(settings, 2), step="demo")
    wait_batch(workspace, settings, batch.id, poll_s=0.01, timeout_s=20)
    with pytest.raises(LLMError, match="HTTP 404"):
        collect_batch(workspace, settings, batch.id)
    assert find_batch(workspace, batch.id).state == "completed" and rows(workspace) == {}


def test_expired_batch_with_a_partial_output_file(workspace, server):
    settings = settings_for(server.url)
    server.script(Outcome(kind="expire", partial=3, extra_lines=[b'{"id": "batch_req_9", "custom_id": "ab']))
    reqs = make_requests(settings, 6)
    batch = submit_batch(workspace, settings, reqs, step="demo")
    summary = finish(workspace, settings, batch.id)
    assert (summary.ok, summary.errors, summary.malformed, summary.missing) == (3, 3, 1, 0)
    assert server.total_processed == 3


def test_offline_output_with_malformed_lines_is_never_fatal(workspace, tmp_path):
    settings = settings_for("http://127.0.0.1:9/v1")
    reqs = make_requests(settings, 4)
    batch = export_offline(workspace, reqs, tmp_path / "in.jsonl", step="demo")
    vllm_output(tmp_path / "in.jsonl", tmp_path / "out.jsonl",
                extra=["garbage", '{"custom_id": "stranger", "response": {"status_code": 200}}', "{"])
    summary = import_offline(workspace, tmp_path / "out.jsonl")
    assert (summary.batch_id, summary.ok, summary.unknown, summary.malformed) == (batch.id, 4, 1, 2)
    assert "line 5: not JSON" in " ".join(summary.problems)

    (tmp_path / "junk.jsonl").write_text("nothing\nto see\n")
    with pytest.raises(LLMError, match="no line with a custom_id"):
        import_offline(workspace, tmp_path / "junk.jsonl")
    (tmp_path / "other.jsonl").write_text(json.dumps({"custom_id": "nobody"}) + "\n")
    with pytest.raises(LLMError, match="no offline batch has the requests"):
        import_offline(workspace, tmp_path / "other.jsonl")

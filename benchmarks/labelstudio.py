"""Label Studio sync throughput: our push and pull against the naive one-request-per-task SDK loop.

A real Label Studio (from .venv-ls; temporary data directory, a free port, stopped at the end)
and a fresh SQLite workspace holding ``--tasks`` proposed questions. One annotator, a real user
signed up through the organisation's invite link, as in the tests. Measured in the same run:

- **push**: ``sync.push`` of the ``question_review`` tasks (overlap 1: one copy per question),
  against ``label_studio_sdk``'s ``tasks.create`` once per task into a project of its own (the
  same task data, built the same way);
- **pull**: ``sync.pull`` of ``question_typing`` annotations by the annotator (recorded as labels
  in the store), against ``annotations.list`` once per task (fetched only, nothing recorded).
  The annotations are made fast, as a migration would: the tasks are imported *with* their
  annotations (``completed_by`` the annotator) into the annotator's project, and a push then
  records them as copies the store did not know, the path an interrupted push takes (timed too).

A few untimed requests first warm the fresh server up for both sides. Target: ours under 15 s
for each at 5,000 tasks. Pull is bound by the server: Label Studio's task listing with
annotations costs it 5-9 ms per task on a 2-core machine, however the tasks are paged.

    .venv/bin/python benchmarks/labelstudio.py [--tasks 5000] [--naive-tasks N]
"""

from __future__ import annotations

import argparse
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from label_studio_sdk import LabelStudio
from sqlmodel import select

from tqaforge.annotation.labelstudio.client import LabelStudioClient, client_settings
from tqaforge.annotation.labelstudio.registry import LS_KINDS
from tqaforge.annotation.labelstudio.server import LabelStudioSettings, start_server
from tqaforge.annotation.labelstudio.sync import TASK_KEY, PushOptions, project_title, pull, push
from tqaforge.ids import annotation_task_id
from tqaforge.ingest import import_paths
from tqaforge.schemas.enums import Origin, QuestionStatus, QuestionType
from tqaforge.schemas.records import LabelStudioTaskCopy, Question, TableRecord
from tqaforge.store import Workspace, init_workspace

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "sample" / "tablebench_sample.jsonl"
TARGET = 15.0
#: Tasks per import request when making the annotated tasks (one request would do; chunks keep
#: each request well inside the client's timeout on a slow machine).
SETUP_CHUNK = 1000


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def build_workspace(ws: Workspace, n: int) -> list[str]:
    """The sample tables (their own questions typed, so only ours wait) and ``n`` proposed questions."""
    assert not import_paths(ws, [SAMPLE]).failed
    with ws.session() as s:
        for q in s.exec(select(Question)).all():
            q.question_type = QuestionType.REASONING
            s.add(q)
        tables = s.exec(select(TableRecord).order_by(TableRecord.id)).all()
        ids = []
        for i in range(n):
            table = tables[i % len(tables)]
            text = f"What is the total of column {table.header[-1]!r} over the first {i % 9 + 1} rows? (#{i})"
            q = Question(
                id=Question.make_id(table.id, text, "Aggregation"), table_id=table.id, text=text, qtype="NumericalReasoning",
                subtype="Aggregation", status=QuestionStatus.PROPOSED, origin=Origin.LLM,
            )
            s.add(q)
            ids.append(q.id)
    return ids


def timed(what: str, fn: Any) -> tuple[Any, float]:
    print(f"  {what} ...", file=sys.stderr, flush=True)
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def naive_push(sdk: LabelStudio, ws: Workspace, question_ids: list[str], config: str) -> int:
    spec = LS_KINDS["question_review"]
    assert spec.task_data is not None
    project = sdk.projects.create(title="naive · question_review", label_config=config)
    assert project.id is not None
    with ws.session() as s:
        for qid in question_ids:
            data = {**spec.task_data(s, qid), TASK_KEY: annotation_task_id("question_review", "question", qid)}
            sdk.tasks.create(project=project.id, data=data)
    return project.id


def warm_up(ls: LabelStudioClient, sdk: LabelStudio, ws: Workspace, question_ids: list[str], config: str) -> None:
    """The first requests after a start load much of Label Studio's code: made once, untimed, in a
    project of their own, so that neither side of a comparison pays for them."""
    spec = LS_KINDS["question_review"]
    assert spec.task_data is not None
    project = ls.request("POST", "/api/projects/", what="create the warm-up project", json={"title": "warm-up", "label_config": config})
    with ws.session() as s:
        items = [{"data": {**spec.task_data(s, qid), TASK_KEY: qid}} for qid in question_ids[:50]]
    ls.request("POST", f"/api/projects/{project['id']}/import", json=items, what="import warm-up tasks")
    tasks = list(ls.pages("/api/tasks/", what="list", params={"project": project["id"], "fields": "all"}, key="tasks"))
    sdk.tasks.create(project=project["id"], data=items[0]["data"])
    sdk.annotations.list(id=tasks[0]["id"])


def annotated_tasks(ls: LabelStudioClient, ws: Workspace, annotator: str, user_id: int, question_ids: list[str]) -> int:
    """The annotator's question_typing project, holding one task per question, each already
    annotated by them; the project id."""
    spec = LS_KINDS["question_typing"]
    assert spec.task_data is not None
    project = ls.request(
        "POST", "/api/projects/", what="create the typing project",
        json={"title": project_title("question_typing", annotator), "label_config": spec.config_text(), "maximum_annotations": 1},
    )
    with ws.session() as s:
        for start in range(0, len(question_ids), SETUP_CHUNK):
            items = [
                {
                    "data": {**spec.task_data(s, qid), TASK_KEY: annotation_task_id("question_typing", "question", qid)},
                    "annotations": [{
                        "result": [{"from_name": "type", "to_name": "question", "type": "choices",
                                    "value": {"choices": ["extraction" if i % 3 else "reasoning"]}}],
                        "completed_by": user_id, "lead_time": 4.5,
                    }],
                }
                for i, qid in enumerate(question_ids[start:start + SETUP_CHUNK], start)
            ]
            ls.request("POST", f"/api/projects/{project['id']}/import", json=items, what="import annotated tasks")
    return int(project["id"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=5000)
    parser.add_argument("--naive-tasks", type=int, default=None, help="tasks of the naive loops (default: same as --tasks)")
    args = parser.parse_args()
    n, naive_n = args.tasks, args.naive_tasks or args.tasks
    sys.path.insert(0, str(REPO / "tests"))
    from labelstudio_helpers import signup  # the tests' way of making a real user

    with tempfile.TemporaryDirectory(prefix="tqaforge-bench-ls-") as tmp:
        ws = init_workspace(Path(tmp) / "ws")
        question_ids = build_workspace(ws, n)
        (server, startup) = timed("starting Label Studio", lambda: start_server(
            LabelStudioSettings(data_dir=Path(tmp) / "ls", port=free_port())
        ))
        try:
            settings = client_settings(server.url, server.token, timeout=120.0)
            annotator = "annotator@bench.example.org"
            user_id, _ = signup(server.url, server.token, annotator)
            sdk = LabelStudio(base_url=server.url, api_key=server.token, timeout=120.0)
            config = LS_KINDS["question_review"].config_text()
            with LabelStudioClient(settings) as ls:
                warm_up(ls, sdk, ws, question_ids, config)

            # Push
            ours_push, push_s = timed("our push", lambda: push(ws, "question_review", settings, [annotator], PushOptions(overlap=1)))
            assert ours_push.copies_created == n, ours_push.lines()
            again, again_s = timed("our push again", lambda: push(ws, "question_review", settings, [annotator], PushOptions(overlap=1)))
            assert (again.copies_created, again.copies_present) == (0, n), again.lines()
            _, naive_push_s = timed("naive push", lambda: naive_push(sdk, ws, question_ids[:naive_n], config))

            # Pull
            with LabelStudioClient(settings) as ls:
                _, setup_s = timed("importing annotated tasks", lambda: annotated_tasks(ls, ws, annotator, user_id, question_ids))
            recovered, recover_s = timed(
                "our push recording them", lambda: push(ws, "question_typing", settings, [annotator], PushOptions(overlap=1))
            )
            assert (recovered.copies_recovered, recovered.copies_created) == (n, 0), recovered.lines()
            pulled, pull_s = timed("our pull", lambda: pull(ws, settings, kinds=["question_typing"]))
            assert (pulled.recorded, pulled.problems) == (n, []), pulled.lines()
            repeat, repeat_s = timed("our pull again, every task", lambda: pull(ws, settings, kinds=["question_typing"], full=True))
            assert (repeat.recorded, repeat.unchanged) == (0, n), repeat.lines()
            fresh, fresh_s = timed("our incremental pull", lambda: pull(ws, settings, kinds=["question_typing"]))
            assert (fresh.recorded, fresh.incremental) == (0, 1), fresh.lines()
            with ws.session() as s:
                ls_task_ids = list(s.exec(
                    select(LabelStudioTaskCopy.ls_task_id).where(LabelStudioTaskCopy.kind == "question_typing")
                    .order_by(LabelStudioTaskCopy.ls_task_id)
                ).all())

            def naive_pull() -> int:
                return sum(len(sdk.annotations.list(id=task_id)) for task_id in ls_task_ids[:naive_n])

            fetched, naive_pull_s = timed("naive pull", naive_pull)
            assert fetched == min(n, naive_n), fetched
        finally:
            server.stop()

    def rate(count: int, seconds: float) -> str:
        return f"{count / seconds:8.0f} tasks/s"

    # The naive loops may run on fewer tasks (--naive-tasks): compare rates, scaled to n.
    naive_push_n = naive_push_s * n / naive_n
    naive_pull_n = naive_pull_s * n / naive_n
    scaled = "" if naive_n == n else f" (measured on {naive_n}, scaled to {n})"
    print(f"Label Studio 1.23.2 at {server.url}; started in {startup:.0f} s; {n} tasks, one annotator")
    print(f"  push   ours (sync.push)                      {push_s:7.2f} s  {rate(n, push_s)}  (target < {TARGET:.0f} s)")
    print(f"         again (nothing to do)                 {again_s:7.2f} s")
    print(f"         naive (tasks.create per task)         {naive_push_n:7.2f} s  {rate(naive_n, naive_push_s)}{scaled}")
    print(f"         ratio naive / ours                    {naive_push_n / push_s:7.1f}x")
    print(f"  pull   ours (sync.pull, labels recorded)     {pull_s:7.2f} s  {rate(n, pull_s)}  (target < {TARGET:.0f} s)")
    print(f"         again, every task (--full)            {repeat_s:7.2f} s")
    print(f"         again, incremental (nothing new)      {fresh_s:7.2f} s  ({fresh.tasks} tasks listed)")
    print(f"         naive (annotations.list per task)     {naive_pull_n:7.2f} s  {rate(naive_n, naive_pull_s)}{scaled}")
    print(f"         ratio naive / ours                    {naive_pull_n / pull_s:7.1f}x")
    print(f"  setup  import {n} annotated tasks            {setup_s:7.2f} s;  push recording them as copies {recover_s:.2f} s")


if __name__ == "__main__":
    main()

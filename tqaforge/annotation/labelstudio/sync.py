"""Label Studio sync: push tasks of a kind out to annotators, pull their annotations back as labels.

>>> settings = client_settings("http://127.0.0.1:8080", token)  # doctest: +SKIP
>>> push(ws, "question_review", settings, ["ana@lab.org", "ben@lab.org"]).lines()  # doctest: +SKIP
>>> pull(ws, settings).lines()  # doctest: +SKIP

**Blind overlap.** Each task is labelled by ``overlap`` annotators (default 2, per kind in
:mod:`~tqaforge.annotation.labelstudio.registry`): the first ``overlap`` of the annotators in an
order drawn per task from ``seed`` (a hash of seed, task and annotator), so the load spreads
evenly and the same call assigns the same people. In Label Studio's open-source edition every
member of a project sees every annotation of its tasks, so each annotator gets their *own copy*
of a task, in their own project per kind, ``tqaforge · KIND · ANNOTATOR``; nobody's project holds
anyone else's labels. Which copy is whose is a
:class:`~tqaforge.schemas.records.LabelStudioTaskCopy` (unique per task and annotator).

**Push** (:func:`push`) checks the kind's label configuration with the server, finds each
annotator's project (by the id stored with earlier copies, else by title; never a second one) or
creates it, and imports the tasks that annotator has no copy of yet, ``batch_size`` per request.
Each batch is committed with its copies (and the :class:`AnnotationTask` rows, written by
:mod:`tqaforge.labels`) once Label Studio has it, so an interrupted push keeps what it did.
Before importing, the project's tasks are listed: a task Label Studio already holds (its data
carries our ``tqaforge_task_id``) but our store does not know -- a push interrupted between the
import and the commit -- is recorded, not imported again. Pushing again creates nothing.

**Pull** (:func:`pull`) reads every task of every project we pushed to, and records each
annotation through :func:`tqaforge.labels.record_annotation`: annotator ``ls:`` + a hash of the
Label Studio user's e-mail, source ``labelstudio``, ``source_ref`` ``ls:<annotation id>:<revision>``
(the revision is the annotation's ``updated_at`` as digits), ``created_at`` the time it was last
changed, and its ``lead_time``. A revision pulled before adds nothing; a changed annotation is a
new label (the earlier one stays). Results that cannot be read (an unknown choice, a missing
field) are skipped and listed in :attr:`PullSummary.problems`; the rest are pulled. Final labels
then come from :func:`tqaforge.annotation.adjudication.adjudicate`, as for every other label.

Every HTTP call is retried (:mod:`~tqaforge.annotation.labelstudio.client`), then raises
:class:`~tqaforge.annotation.labelstudio.server.LabelStudioError`; what was committed stays, and
the same command run again completes the rest.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable, Sequence

from sqlmodel import Session, select

from tqaforge.annotation.kinds import LabelError, check_against_target, kind_spec
from tqaforge.annotation.labelstudio.client import ClientSettings, LabelStudioClient, LabelStudioRequestError, client_settings
from tqaforge.annotation.labelstudio.registry import LS_KINDS, LabelStudioKind
from tqaforge.annotation.labelstudio.server import LabelStudioError
from tqaforge.ids import annotation_task_id, content_hash, labelstudio_annotator, labelstudio_copy_id
from tqaforge.labels import mark_task_synced, record_annotation, task_for
from tqaforge.schemas.records import Annotation, AnnotationTask, LabelStudioTaskCopy
from tqaforge.store import Workspace

__all__ = [
    "PullSummary", "PushOptions", "PushSummary", "LabelStudioConfigError", "assign", "check_config", "client_settings",
    "project_title", "pull", "push", "validate_configs",
]

#: Every project tqaforge makes is titled ``tqaforge · KIND · ANNOTATOR``.
TITLE_PREFIX = "tqaforge"
#: Label Studio's longest project title.
MAX_TITLE = 50
SOURCE = "labelstudio"
#: The key of our task id in a Label Studio task's data.
TASK_KEY = "tqaforge_task_id"


class LabelStudioConfigError(LabelStudioError):
    """A kind's label configuration template is malformed or refused by the server."""


def project_title(kind: str, annotator: str) -> str:
    """The title of ``annotator``'s project for ``kind``: ``tqaforge · KIND · ANNOTATOR``, or, past
    Label Studio's 50 characters, ``tq · KIND · `` and the annotator's login cut short with a hash
    of it (``ana.lopez-gar~3f9a1``), so it stays unique and the same for the same pair."""
    title = f"{TITLE_PREFIX} · {kind} · {annotator}"
    if len(title) <= MAX_TITLE:
        return title
    head = f"tq · {kind} · "
    tag = "~" + content_hash({"labelstudio_project": [kind, annotator]}, 5)
    return head + annotator[: max(MAX_TITLE - len(head) - len(tag), 1)] + tag


def assign(task_id: str, annotators: Sequence[str], overlap: int, seed: int = 0) -> list[str]:
    """The ``overlap`` annotators of a task: the first in an order drawn from ``seed`` and the task."""
    order = sorted(annotators, key=lambda who: (content_hash({"seed": seed, "task": task_id, "annotator": who}), who))
    return order[:overlap]


def _spec(kind: str) -> LabelStudioKind:
    kind_spec(kind)  # an unknown kind: the error lists the known ones
    spec = LS_KINDS[kind]
    if not spec.supported:
        ready = ", ".join(k for k, s in LS_KINDS.items() if s.supported)
        raise LabelStudioError(
            f"{kind} cannot be pushed to Label Studio yet: it has no label configuration in this version",
            hint=f"kinds that can: {ready}; label {kind} with the CLI or the app meanwhile",
        )
    return spec


# ---------------------------------------------------------------------------------------------
# Label configurations


def check_config(client: LabelStudioClient, spec: LabelStudioKind) -> str:
    """The kind's label configuration, parsed here and validated by the server; a
    :class:`LabelStudioConfigError` naming the template file otherwise."""
    path = spec.config_path()
    try:
        text = spec.config_text()
    except (OSError, LabelError) as exc:
        raise LabelStudioConfigError(f"cannot read the label configuration of {spec.kind} ({path}): {exc}") from None
    try:
        ET.fromstring(text)
    except ET.ParseError as exc:
        line, column = exc.position
        raise LabelStudioConfigError(
            f"{path}, line {line}, column {column}: the label configuration of {spec.kind} is not well-formed XML ({exc})",
            hint="fix the template; Label Studio's tag reference: https://labelstud.io/tags/",
        ) from None
    try:
        client.request(
            "POST", "/api/projects/validate/", json={"label_config": text}, safe=True,
            what=f"validate the label configuration of {spec.kind}",
        )
    except LabelStudioRequestError as exc:
        if exc.status != 400:
            raise
        detail = exc.detail
        raise LabelStudioConfigError(
            f"{path}: Label Studio refuses the label configuration of {spec.kind}: {detail}",
            hint="fix the template; Label Studio's tag reference: https://labelstud.io/tags/",
        ) from None
    return text


def validate_configs(settings: ClientSettings, kinds: Iterable[str] | None = None) -> dict[str, str]:
    """Validate the configuration of every kind that has one (or of ``kinds``) with the server;
    {kind: template path}. Raises :class:`LabelStudioConfigError` at the first bad one."""
    wanted = list(kinds) if kinds is not None else [k for k, s in LS_KINDS.items() if s.supported]
    with LabelStudioClient(settings) as client:
        done = {}
        for kind in wanted:
            spec = _spec(kind)
            check_config(client, spec)
            done[kind] = spec.config_path()
    return done


# ---------------------------------------------------------------------------------------------
# Push


@dataclass(frozen=True)
class PushOptions:
    """How to push: ``overlap`` annotators per task (None: the kind's default), the ``seed`` of
    their assignment, ``batch_size`` tasks per import request, at most ``limit`` new items."""

    overlap: int | None = None
    seed: int = 0
    batch_size: int = 100
    limit: int | None = None

    def __post_init__(self) -> None:
        if self.overlap is not None and self.overlap < 1:
            raise LabelStudioError(f"overlap must be 1 or more, got {self.overlap}")
        if self.batch_size < 1:
            raise LabelStudioError(f"batch_size must be 1 or more, got {self.batch_size}")
        if self.limit is not None and self.limit < 0:
            raise LabelStudioError(f"limit must be 0 or more, got {self.limit}")


@dataclass
class PushSummary:
    """What one push did; ``lines()`` for the CLI, ``as_dict()`` for --json."""

    kind: str
    annotators: list[str] = field(default_factory=list)
    overlap: int = 0
    pending: int = 0  # items waiting for this kind
    tasks_created: int = 0  # new AnnotationTask rows
    copies_created: int = 0  # task copies imported into Label Studio by this push
    copies_recovered: int = 0  # found in Label Studio, missing from the store (an interrupted push)
    copies_present: int = 0  # already there
    batches: int = 0
    projects: dict[str, int] = field(default_factory=dict)  # annotator -> Label Studio project id
    projects_created: list[str] = field(default_factory=list)
    projects_updated: list[str] = field(default_factory=list)  # label configuration replaced
    duplicates: list[str] = field(default_factory=list)  # Label Studio tasks holding an already held task id
    problems: list[str] = field(default_factory=list)  # items that could not become tasks

    def lines(self) -> list[str]:
        lines = [
            f"{self.kind}: {self.pending} items pending, {self.overlap} annotators each; "
            f"{self.copies_created} task copies imported in {self.batches} batches, {self.copies_present} already in "
            f"Label Studio, {self.copies_recovered} recovered from an interrupted push; {self.tasks_created} new tasks",
            f"projects: {len(self.projects)} ({len(self.projects_created)} created, {len(self.projects_updated)} with a new "
            "label configuration)",
        ]
        lines += [f"  {who}: project {pid}" for who, pid in sorted(self.projects.items())]
        if self.duplicates:
            lines.append(f"{len(self.duplicates)} duplicate tasks in Label Studio (the lowest id is used): " + "; ".join(self.duplicates[:5]))
        lines += [f"skipped: {p}" for p in self.problems[:10]]
        return lines

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _annotators(annotators: Sequence[str]) -> list[str]:
    if isinstance(annotators, str):
        annotators = [annotators]
    names = list(dict.fromkeys(a.strip() for a in annotators if a and a.strip()))
    if not names:
        raise LabelStudioError("no annotators given", hint="give the Label Studio e-mails of the annotators, e.g. --annotator ana@lab.org")
    return names


def _find_project(client: LabelStudioClient, s: Session, kind: str, annotator: str, title: str) -> dict[str, Any] | None:
    stored = s.exec(
        select(LabelStudioTaskCopy.ls_project_id).where(LabelStudioTaskCopy.kind == kind, LabelStudioTaskCopy.annotator == annotator)
    ).first()
    if stored is not None:
        project = client.request("GET", f"/api/projects/{stored}/", what=f"read project {stored}", ok_missing=True)
        if project is not None and project.get("title") == title:
            return project
    found = [
        p for p in client.pages("/api/projects/", what="list the projects", params={"title": title}, key="results")
        if p.get("title") == title
    ]
    return min(found, key=lambda p: p["id"]) if found else None


def _project(client: LabelStudioClient, s: Session, kind: str, annotator: str, config: str, summary: PushSummary) -> int:
    title = project_title(kind, annotator)
    project = _find_project(client, s, kind, annotator, title)
    if project is None:
        project = client.request(
            "POST", "/api/projects/", what=f"create the project {title!r}",
            json={
                "title": title, "label_config": config, "maximum_annotations": 1, "show_skip_button": True,
                "show_annotation_history": False, "show_collab_predictions": False,
                "description": f"tqaforge: {kind} tasks for {annotator}. Only {annotator} labels in this project.",
            },
        )
        summary.projects_created.append(annotator)
    elif project.get("label_config") is not None and project["label_config"].strip() != config.strip():
        client.request("PATCH", f"/api/projects/{project['id']}/", json={"label_config": config}, what=f"update the label configuration of {title!r}")
        summary.projects_updated.append(annotator)
    return int(project["id"])


def _ls_tasks(client: LabelStudioClient, project_id: int, summary: PushSummary | None = None) -> dict[str, int]:
    """{our task id: Label Studio task id} of a project's tasks (the lowest id when a task is there twice)."""
    held: dict[str, int] = {}
    for task in client.pages("/api/tasks/", what=f"list the tasks of project {project_id}", params={"project": project_id}, key="tasks"):
        ours = (task.get("data") or {}).get(TASK_KEY)
        if not isinstance(ours, str):
            continue
        if ours in held and summary is not None:
            summary.duplicates.append(f"project {project_id}: tasks {held[ours]} and {task['id']} both hold {ours[:10]}")
        held[ours] = min(held.get(ours, task["id"]), task["id"])
    return held


def _record_copies(
    s: Session, spec: LabelStudioKind, annotator: str, project_id: int, found: dict[str, int], targets: dict[str, str],
    summary: PushSummary, seed: int,
) -> None:
    """Write the copies (and their tasks, through labels.py) of ``found`` {our task id: LS task id}."""
    for task_id, ls_task_id in found.items():
        target_id = targets[task_id]
        existing = s.get(AnnotationTask, task_id)
        payload = spec.payload(s, target_id) if spec.payload is not None else None
        task = existing or task_for(s, spec.kind, spec.target_type, target_id, payload)
        summary.tasks_created += existing is None
        s.add(LabelStudioTaskCopy(
            id=labelstudio_copy_id(task_id, annotator), task_id=task_id, kind=spec.kind, annotator=annotator,
            ls_project_id=project_id, ls_task_id=ls_task_id, seed=seed,
        ))
        mark_task_synced(s, task, ls_project_id=project_id, ls_task_id=ls_task_id)


def push(
    ws: Workspace,
    kind: str,
    settings: ClientSettings,
    annotators: Sequence[str],
    options: PushOptions = PushOptions(),
    *,
    client: LabelStudioClient | None = None,
) -> PushSummary:
    """Push the pending items of ``kind`` to each assigned annotator's project (module docs).

    Idempotent and resumable: a second push creates nothing, and a push interrupted at any point
    and run again completes without a duplicate task in Label Studio or in the store.
    """
    spec = _spec(kind)
    names = _annotators(annotators)
    overlap = options.overlap or spec.overlap
    if overlap > len(names):
        raise LabelStudioError(
            f"{kind} needs {overlap} annotators per task, but {len(names)} were given ({', '.join(names)})",
            hint="give more annotators, or a smaller overlap",
        )
    summary = PushSummary(kind=kind, annotators=names, overlap=overlap)
    own_client = client is None
    ls = client or LabelStudioClient(settings)
    try:
        config = check_config(ls, spec)
        assert spec.pending is not None and spec.task_data is not None
        with ws.session() as s:
            targets = {annotation_task_id(kind, spec.target_type, t): t for t in spec.pending(s)}
            held: dict[str, set[str]] = defaultdict(set)
            for task_id, who in s.exec(select(LabelStudioTaskCopy.task_id, LabelStudioTaskCopy.annotator).where(LabelStudioTaskCopy.kind == kind)):
                held[who].add(task_id)
        summary.pending = len(targets)
        wanted: dict[str, list[str]] = defaultdict(list)  # annotator -> task ids they should have
        new_items = 0
        for task_id in targets:
            # Whoever holds a copy keeps it (the annotators given may have changed since); the
            # task goes to more people only while it has fewer than ``overlap``.
            holders = sorted(who for who, tasks in held.items() if task_id in tasks)
            if not holders:
                if options.limit is not None and new_items >= options.limit:
                    continue
                new_items += 1
            extra = [who for who in assign(task_id, names, len(names), options.seed) if who not in holders]
            for who in [h for h in holders if h in names] + extra[: max(overlap - len(holders), 0)]:
                wanted[who].append(task_id)
        for who in names:
            with ws.session() as s:
                project_id = _project(ls, s, kind, who, config, summary)
            summary.projects[who] = project_id
            todo = [t for t in wanted[who] if t not in held[who]]
            summary.copies_present += len(wanted[who]) - len(todo)
            if not todo:
                continue
            in_ls = _ls_tasks(ls, project_id, summary)
            recovered = {t: in_ls[t] for t in todo if t in in_ls}
            if recovered:
                with ws.session() as s:
                    _record_copies(s, spec, who, project_id, recovered, targets, summary, options.seed)
                summary.copies_recovered += len(recovered)
            todo = [t for t in todo if t not in in_ls]
            for start in range(0, len(todo), options.batch_size):
                batch = todo[start:start + options.batch_size]
                items = []
                with ws.session() as s:
                    for task_id in batch:
                        try:
                            items.append({"data": {**spec.task_data(s, targets[task_id]), TASK_KEY: task_id}})
                        except LabelError as exc:
                            summary.problems.append(f"{task_id[:10]}: {exc}")
                if not items:
                    continue
                ls.request("POST", f"/api/projects/{project_id}/import", json=items, what=f"import {len(items)} tasks into project {project_id}")
                summary.batches += 1
                in_ls = _ls_tasks(ls, project_id)
                sent = {item["data"][TASK_KEY] for item in items}
                found = {t: in_ls[t] for t in sent if t in in_ls}
                missing = sent - set(found)
                if missing:
                    raise LabelStudioError(
                        f"Label Studio accepted {len(items)} tasks into project {project_id} but lists only {len(found)} of them",
                        hint="run the push again: it records what Label Studio holds and imports the rest",
                    )
                with ws.session() as s:
                    _record_copies(s, spec, who, project_id, found, targets, summary, options.seed)
                summary.copies_created += len(found)
    finally:
        if own_client:
            ls.close()
    return summary


# ---------------------------------------------------------------------------------------------
# Pull


@dataclass
class PullSummary:
    """What one pull did; ``lines()`` for the CLI, ``as_dict()`` for --json."""

    projects: int = 0
    tasks: int = 0
    annotations: int = 0  # seen in Label Studio (cancelled ones included)
    recorded: int = 0  # new labels
    changed: int = 0  # of which replace an earlier label of the same annotator
    unchanged: int = 0  # already pulled
    cancelled: int = 0  # skipped tasks in Label Studio ("was_cancelled"): no label
    by_kind: dict[str, int] = field(default_factory=dict)  # new labels per kind
    problems: list[str] = field(default_factory=list)  # annotations that could not be read, skipped

    def lines(self) -> list[str]:
        lines = [
            f"{self.annotations} annotations in {self.tasks} tasks of {self.projects} projects: {self.recorded} new labels "
            f"({self.changed} changed), {self.unchanged} already pulled, {self.cancelled} skipped by the annotator, "
            f"{len(self.problems)} unreadable",
        ]
        lines += [f"  {kind}: {n} new" for kind, n in sorted(self.by_kind.items())]
        lines += [f"skipped: {p}" for p in self.problems[:20]]
        if len(self.problems) > 20:
            lines.append(f"... and {len(self.problems) - 20} more")
        return lines

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _when(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _users(client: LabelStudioClient) -> dict[int, str]:
    """{Label Studio user id: e-mail (or username)}."""
    users = {}
    for user in client.pages("/api/users/", what="list the users", params={}, key="results"):
        login = user.get("email") or user.get("username")
        if isinstance(user.get("id"), int) and login:
            users[user["id"]] = str(login)
    return users


def _pull_annotation(
    s: Session, spec: LabelStudioKind, task: AnnotationTask, ann: dict[str, Any], users: dict[int, str], owner: str,
    summary: PullSummary,
) -> None:
    where = f"{spec.kind}, Label Studio task {ann.get('task')}, annotation {ann.get('id')}"
    if ann.get("was_cancelled"):
        summary.cancelled += 1
        return
    who = ann.get("completed_by")
    who = who.get("id") if isinstance(who, dict) else who
    login = users.get(who) if isinstance(who, int) else None
    if login is None:
        summary.problems.append(f"{where}: by an unknown user {who!r}")
        return
    if login.strip().lower() != owner.strip().lower():
        # Community Label Studio lets every member open every project: a label made in someone
        # else's project was made seeing theirs, so it is not a blind label and is not counted.
        summary.problems.append(f"{where}: by {login} in {owner}'s project (not blind: left out; label in your own project)")
        return
    assert spec.to_label is not None
    try:
        label = spec.to_label(ann.get("result") or [])
        value = kind_spec(spec.kind).read(label)
        check_against_target(s, kind_spec(spec.kind), task.target_type, task.target_id, value)
    except LabelError as exc:
        summary.problems.append(f"{where} by {login}: {exc}")
        return
    updated = ann.get("updated_at") or ann.get("created_at")
    revision = re.sub(r"\D", "", updated) if isinstance(updated, str) and updated else "0"
    lead_time = ann.get("lead_time")
    annotator = labelstudio_annotator(login)
    earlier = s.exec(select(Annotation.id).where(Annotation.task_id == task.id, Annotation.annotator == annotator)).first()
    done = record_annotation(
        s, kind=spec.kind, target_type=task.target_type, target_id=task.target_id, annotator=annotator, label=label,
        source=SOURCE, source_ref=f"ls:{ann.get('id')}:{revision}", created_at=_when(updated),
        lead_time=float(lead_time) if isinstance(lead_time, (int, float)) and not isinstance(lead_time, bool) else None,
    )
    if done.recorded:
        summary.recorded += 1
        summary.changed += earlier is not None
        summary.by_kind[spec.kind] = summary.by_kind.get(spec.kind, 0) + 1
    else:
        summary.unchanged += 1


def pull(
    ws: Workspace,
    settings: ClientSettings,
    *,
    kinds: Sequence[str] | None = None,
    client: LabelStudioClient | None = None,
) -> PullSummary:
    """Record every new or changed annotation of the projects we pushed to (module docs).

    Safe to repeat: a revision already pulled adds nothing. Each project is one transaction, so
    an interrupted pull keeps the projects it finished and the next one does the rest.
    """
    wanted = set(kinds) if kinds is not None else None
    for kind in wanted or ():
        kind_spec(kind)
    with ws.session() as s:
        rows = s.exec(select(LabelStudioTaskCopy.kind, LabelStudioTaskCopy.ls_project_id, LabelStudioTaskCopy.annotator).distinct()).all()
    projects = sorted({(kind, pid, who) for kind, pid, who in rows if wanted is None or kind in wanted})
    summary = PullSummary(projects=len(projects))
    if not projects:
        return summary
    own_client = client is None
    ls = client or LabelStudioClient(settings)
    try:
        users = _users(ls)
        for kind, project_id, owner in projects:
            spec = LS_KINDS[kind]
            tasks = list(ls.pages(
                "/api/tasks/", what=f"read the annotations of project {project_id}", params={"project": project_id, "fields": "all"},
                key="tasks",
            ))
            with ws.session() as s:
                for ls_task in tasks:
                    summary.tasks += 1
                    ours = (ls_task.get("data") or {}).get(TASK_KEY)
                    annotations = [a for a in ls_task.get("annotations") or [] if isinstance(a, dict)]
                    summary.annotations += len(annotations)
                    if not annotations:
                        continue
                    task = s.get(AnnotationTask, ours) if isinstance(ours, str) else None
                    if task is None or task.kind != kind:
                        summary.problems.append(
                            f"{kind}, Label Studio task {ls_task.get('id')} in project {project_id}: not a task of ours "
                            f"({str(ours)[:10]}); run `push` again to record an interrupted push's tasks"
                        )
                        continue
                    for ann in sorted(annotations, key=lambda a: (a.get("updated_at") or "", a.get("id") or 0)):
                        _pull_annotation(s, spec, task, ann, users, owner, summary)
    finally:
        if own_client:
            ls.close()
    return summary

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
Each import asks Label Studio for the ids of the tasks it created (``return_task_ids``), so the
project is listed once per push, not after every batch; while one batch is being imported the
next is built and the last recorded (one import in flight at a time, none after a failure).

**Pull** (:func:`pull`) reads every task of every project we pushed to, and records each
annotation through :func:`tqaforge.labels.record_annotation`: annotator ``ls:`` + a hash of the
Label Studio user's e-mail, source ``labelstudio``, ``source_ref`` ``ls:<annotation id>:<revision>``
(the revision is the annotation's ``updated_at`` as digits), ``created_at`` the time it was last
changed, and its ``lead_time``. A revision pulled before adds nothing; a changed annotation is a
new label (the earlier one stays). A label the pull refuses -- one that cannot be read (an
unknown choice, a missing field), one the kind's checks refuse (a bad value modification), one
made in someone else's project or changed by someone else -- is never dropped in silence: it is
listed in :attr:`PullSummary.problems` and **sent back** to the queue it came from
(:class:`SendBack`): the task's data get the reason (``feedback``, shown at the top of every
kind's screen) and the refused result (``tqaforge_refused``, so the work is kept), then the
annotation is deleted so the task waits for a label again; the author of a label made in someone
else's project is told on their own copy of the item. The rest are pulled. Final labels
then come from :func:`tqaforge.annotation.adjudication.adjudicate`, as for every other label.
Label Studio reads the next page of tasks while the last is recorded; each page is one transaction.
Pulls are incremental: a project pulled to the end remembers the server's time when that pull
began (:class:`~tqaforge.schemas.records.LabelStudioPull`), and the next pull lists only its tasks
updated since (Label Studio bumps a task's ``updated_at`` when an annotation of it is saved or
deleted); ``full=True`` reads everything again. A project with annotations left out (unreadable,
not blind) keeps its old watermark, so they are reported by every pull until they are fixed. Listing tasks with their annotations costs Label
Studio 5-7 ms per task, so a first pull of thousands takes tens of seconds and later ones a second.

**A project deleted by hand** in Label Studio's UI or API takes its tasks and annotations with
it, while the store still holds the copies. Push asks for every project its copies are in: for
an annotator given, the project is made again and each task still waiting for their label is sent
again (its copy row moved, never doubled); a task they labelled before keeps its pulled label and
is not asked for twice, and a settled item needs nobody. An annotator not given is named in the
summary, their copies left as they are. Pull reads the project's listing as 404 (never as an empty
project) and reports the project: with tasks still waiting, the pull is incomplete
(:attr:`PullSummary.incomplete`, exit status 1 in the CLI). ``annotators list`` marks the same.

**One task Label Studio cannot send** (an annotation holding a lone surrogate, which Label Studio
1.23 stores escaped and then fails to encode: HTTP 500 for every page, export and read of its
project) does not block the project: the failing page is narrowed down by bisection to the task,
which is fetched alone by id before it is named (:class:`_TaskReader`); every other task is
recorded, the task and its last editor are listed in :attr:`PullSummary.unreadable`, the
project's watermark stays where it was (so the next pull reports it again) and the pull is
incomplete. A push listing such a project reports the task and imports the rest.

Every HTTP call is retried (:mod:`~tqaforge.annotation.labelstudio.client`), then raises
:class:`~tqaforge.annotation.labelstudio.server.LabelStudioError`; what was committed stays, and
the same command run again completes the rest.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import xml.etree.ElementTree as ET
from collections import defaultdict, deque
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence, TypeVar, Union

from sqlalchemy import event
from sqlmodel import Session, col, select

from tqaforge.annotation.kinds import LabelError, check_against_target, kind_spec
from tqaforge.annotation.labelstudio.client import (
    ClientSettings,
    LabelStudioClient,
    LabelStudioRequestError,
    LabelStudioServerError,
    client_settings,
)
from tqaforge.annotation.labelstudio.registry import LabelStudioKind, ls_kind, ls_kinds
from tqaforge.annotation.labelstudio.server import LabelStudioError
from tqaforge.errors import ReaderError
from tqaforge.files import atomic_write_text
from tqaforge.ids import annotation_task_id, content_hash, labelstudio_annotator, labelstudio_copy_id
from tqaforge.labels import mark_task_synced, record_annotation, task_for
from tqaforge.people import resolve_account
from tqaforge.printable import escape_controls
from tqaforge.schemas.records import Annotation, AnnotationTask, Answer, LabelStudioPull, LabelStudioTaskCopy, Question, Variant
from tqaforge.store import Workspace
from tqaforge.tables.readers.jsonio import read_json_file

__all__ = [
    "PullSummary", "PushOptions", "PushSummary", "LabelStudioConfigError", "Route", "Unreadable", "assign", "check_config",
    "client_settings", "missing_projects", "project_title", "pull", "push", "readable_title", "validate_configs",
]

#: Every project tqaforge makes is titled ``tqaforge · KIND · ANNOTATOR``.
TITLE_PREFIX = "tqaforge"
#: Label Studio's longest project title.
MAX_TITLE = 50
SOURCE = "labelstudio"
#: The key of our task id in a Label Studio task's data.
TASK_KEY = "tqaforge_task_id"
#: The key, in a task's data, of the message a refused label is sent back with (every kind's
#: label configuration shows it at the top; empty until then).
FEEDBACK_KEY = "feedback"
#: Tasks per page of a pull. With their annotations (``fields=all``) Label Studio takes 5-7 ms
#: per task whatever the page size, so a page is a few seconds: well inside the client's timeout,
#: and small enough that recording the last one (not overlapped with a read) is short. (Its
#: export, at 2-3 ms per task, is not used: every export call leaves a copy of the data in the
#: server's data directory.) A power of two, so that a page the server fails on splits into
#: blocks that are pages themselves (:class:`_TaskReader`).
PULL_PAGE = 512
#: Tasks per page when a push lists a project's tasks (without annotations: cheap per task).
LIST_PAGE = 1024
#: Rows per ``IN (...)`` of a prefetch: far below SQLite's and PostgreSQL's limits.
IN_CHUNK = 500
#: The record each target type names, so that a batch's targets load in one query and the
#: payloads and checks find them in the session instead of asking one by one.
_TARGET_MODELS: dict[str, type[Question] | type[Answer] | type[Variant]] = {
    "question": Question, "answer": Answer, "variant": Variant,
}

T = TypeVar("T")


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


def readable_title(kind: str) -> str:
    """The title of a kind's project on an annotator's own server, where it is the only project of
    its kind and the annotator's name says nothing: ``Question review``."""
    return kind.replace("_", " ").capitalize()


# ---------------------------------------------------------------------------------------------
# Which server holds whose tasks

#: A copy handed to an annotator's own server by the move from the one-server layout
#: (:func:`~.annotator_servers.migrate`): in no project there yet. Label Studio's ids start at 1.
MOVED = 0


@dataclass(frozen=True)
class Route:
    """Where one annotator's tasks are: their own server (``marks``: the file keeping its pull
    watermarks, since project ids repeat from server to server), or a server shared by everyone
    (``marks`` None: the store's :class:`LabelStudioPull` table, as before servers were per annotator)."""

    annotator: str
    settings: ClientSettings
    marks: Path | None = None

    @property
    def own(self) -> bool:
        return self.marks is not None

    @property
    def server(self) -> str:
        """How messages name the server."""
        if self.own:
            return f"{self.annotator}'s Label Studio ({self.settings.display_url})"
        return f"Label Studio at {self.settings.display_url}"

    def title(self, kind: str) -> str:
        return readable_title(kind) if self.own else project_title(kind, self.annotator)


#: Where push and pull go: one server for every annotator (a :class:`ClientSettings`: the
#: one-server layout, or ``--url``), or each annotator's own (``{login: Route}``).
Servers = Union[ClientSettings, Mapping[str, Route]]


class _Down(LabelStudioError):
    """An annotator's own server is down or refuses tqaforge's token: that annotator is reported
    by name and skipped, the others still sync."""


class _Clients:
    """The connections of one push or pull: one client per server, opened when first needed.

    An annotator's own server is probed once (``whoami``, one try) before its first use, so a
    server that is down costs one refused connection, not the client's retries, and is then
    skipped for the rest of the command."""

    def __init__(self, servers: Servers, client: LabelStudioClient | None) -> None:
        self.servers, self.given = servers, client
        self.open: dict[ClientSettings, LabelStudioClient] = {}
        self.down: dict[str, str] = {}  # annotator -> why their server is skipped

    def route(self, who: str) -> Route:
        if isinstance(self.servers, ClientSettings):
            return Route(who, self.servers)
        for name, route in self.servers.items():
            if name.lower() == who.strip().lower():
                return route
        raise _Down(f"{who} has no Label Studio server of their own (its directory under label-studio/annotators/ was "
                    "removed by hand?); their labels pulled before stay in the store",
                    hint=f"give them one again: `tqaforge annotators add {who}`, `tqaforge labelstudio start`, then push: "
                    "what waits for their label is sent to the new server")

    def get(self, who: str) -> LabelStudioClient:
        """The client of ``who``'s server; :class:`_Down` when it is down (said once per command)."""
        if who in self.down:
            raise _Down(self.down[who])
        route = self.route(who)
        if self.given is not None:
            return self.given
        client = self.open.get(route.settings)
        if client is None:
            client = self.open[route.settings] = LabelStudioClient(route.settings)
            if route.own:
                try:
                    client.request("GET", "/api/current-user/whoami", what="reach it", attempts=1)
                except LabelStudioRequestError as exc:
                    if exc.status not in (401, 403):
                        raise
                    self.down[who] = (
                        f"{who}: {route.server} refuses the API token tqaforge keeps for {who} (HTTP {exc.status}: reset in "
                        "Account & Settings?); nothing synced with it. Fix: log in there as them, copy the token from "
                        "Account & Settings into \"token\" of their credentials.json under label-studio/annotators/")
                    raise _Down(self.down[who]) from None
                except LabelStudioError as exc:
                    self.down[who] = f"{who}: {route.server} does not answer: {exc.args[0]}. {_restart(who)}"
                    raise _Down(self.down[who]) from None
        return client

    def fail(self, who: str, exc: LabelStudioError) -> str:
        """Record that ``who``'s own server failed and return the line naming it; a shared
        server's failure is raised again (everyone's sync stops, as it always did)."""
        if not isinstance(exc, _Down):
            route = self.route(who)
            if not route.own:
                raise exc
            self.down.setdefault(who, f"{who}: {route.server} failed: {exc.args[0]}. {_restart(who)}")
        else:
            self.down.setdefault(who, str(exc) if str(exc).startswith(f"{who}: ") else f"{who}: {exc}")
        return self.down[who]

    def close(self) -> None:
        for client in self.open.values():
            client.close()


def _restart(who: str) -> str:
    return (f"What it holds waits there: start it again (`tqaforge labelstudio start -a {who}`; its log is named by "
            f"`tqaforge labelstudio status -a {who}`), then run the same command: nothing is done twice")


def _down_line(line: str) -> str:
    """A line of :attr:`PushSummary.down` / :attr:`PullSummary.down` as the summary prints it."""
    return escape_controls(f"down: {line}")


# --- pull watermarks, per server ---


def _load_marks(ws: Workspace, route: Route) -> dict[int, datetime]:
    if route.marks is None:
        return _watermarks(ws)
    try:
        raw = read_json_file(route.marks, max_bytes=1024 * 1024)
    except ReaderError:  # none yet, or damaged: read everything (a full pull loses nothing)
        return {}
    marks = {}
    for key, value in (raw.items() if isinstance(raw, dict) else ()):
        moment = _when(value) if str(key).isdigit() else None
        if moment is not None:
            marks[int(key)] = moment
    return marks


def _save_mark(ws: Workspace, route: Route, kind: str, project_id: int, until: datetime) -> None:
    if route.marks is None:
        _save_watermark(ws, kind, project_id, route.annotator, until)
        return
    marks = _load_marks(ws, route)
    marks[project_id] = until
    _write_marks(route.marks, marks)


def _write_marks(path: Path, marks: dict[int, datetime]) -> None:
    atomic_write_text(path, json.dumps({str(k): v.isoformat() for k, v in sorted(marks.items())}, indent=2) + "\n", mode=0o600)


def _forget_mark(s: Session, ws: Workspace, route: Route, project_id: int) -> None:
    """Drop a project's watermark: its next pull reads all of it."""
    if route.marks is None:
        if (mark := s.get(LabelStudioPull, project_id)) is not None:
            s.delete(mark)
        return
    marks = _load_marks(ws, route)
    if marks.pop(project_id, None) is not None:
        _write_marks(route.marks, marks)


def assign(task_id: str, annotators: Sequence[str], overlap: int, seed: int = 0) -> list[str]:
    """The ``overlap`` annotators of a task: the first in an order drawn from ``seed`` and the task."""
    order = sorted(annotators, key=lambda who: (content_hash({"seed": seed, "task": task_id, "annotator": who}), who))
    return order[:overlap]


def _entry(kind: str) -> LabelStudioKind:
    """The Label Studio entry of a kind that has projects (so has an entry)."""
    entry = ls_kind(kind)
    if entry is None:  # pragma: no cover - a project is only made for a kind with an entry
        raise KeyError(kind)
    return entry


def _spec(kind: str) -> LabelStudioKind:
    kind_spec(kind)  # an unknown kind: the error lists the known ones
    spec = ls_kind(kind)
    if spec is None or not spec.supported:
        ready = ", ".join(k for k, s in ls_kinds().items() if s.supported)
        raise LabelStudioError(
            f"{kind} cannot be pushed to Label Studio yet: it has no label configuration in this version",
            hint=f"kinds that can: {ready}; label {kind} with the CLI or the app meanwhile",
        )
    return spec


def _chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


@contextmanager
def _keeping_loaded(s: Session) -> Iterator[None]:
    """Keep every row ``s`` loads alive inside the block. The session forgets rows nobody holds,
    so a batch's tasks would read their few shared tables once per task instead of once."""
    kept: list[Any] = []

    def keep(_session: Session, row: Any) -> None:
        kept.append(row)

    event.listen(s, "loaded_as_persistent", keep)
    try:
        yield
    finally:
        event.remove(s, "loaded_as_persistent", keep)
        kept.clear()


def _preload(s: Session, target_type: str, target_ids: Iterable[str]) -> None:
    """Load the targets into ``s`` in a few queries (inside :func:`_keeping_loaded`, so that the
    payloads, task data and checks then find them in the session instead of asking one by one)."""
    model = _TARGET_MODELS.get(target_type)
    if model is None:
        return
    for chunk in _chunks(sorted(set(target_ids)), IN_CHUNK):
        s.exec(select(model).where(col(model.id).in_(chunk))).all()


_END: Any = object()


def _ahead(items: Iterator[T]) -> Iterator[T]:
    """``items``, the next one already being made in a thread while the caller works on the last
    (``items`` may only talk to Label Studio, not to the store: sessions stay in the caller's thread)."""
    with ThreadPoolExecutor(1, thread_name_prefix="labelstudio") as pool:
        coming = pool.submit(next, items, _END)
        while (item := coming.result()) is not _END:
            coming = pool.submit(next, items, _END)
            yield item


def _read_ahead(calls: Iterable[Callable[[], T]]) -> Iterator[T]:
    """The results of ``calls`` in order, the next one already under way in a thread while the
    caller works on the last: Label Studio serialises on its core while we record on ours.
    One call runs at a time, and none starts once one has failed."""
    with ThreadPoolExecutor(1, thread_name_prefix="labelstudio") as pool:
        running: Future[T] | None = None
        for call in calls:
            if running is None:
                running = pool.submit(call)
                continue
            done = running.result()
            running = pool.submit(call)
            yield done
        if running is not None:
            yield running.result()


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
    wanted = list(kinds) if kinds is not None else [k for k, s in ls_kinds().items() if s.supported]
    with LabelStudioClient(settings) as client:
        done = {}
        for kind in wanted:
            spec = _spec(kind)
            check_config(client, spec)
            done[kind] = spec.config_path()
    return done


# ---------------------------------------------------------------------------------------------
# Reading a project's tasks past a task Label Studio cannot send

#: A project's listing is narrowed down to at most this many tasks Label Studio cannot send; past
#: that the server fails on the project, not on a task, and bisecting on would take minutes to
#: say so. What was read is recorded; the rest of the project is reported as not read.
MAX_UNREADABLE = 20


@dataclass(frozen=True)
class Unreadable:
    """A task of a project that Label Studio fails to send even on its own (HTTP 5xx), or (no
    ``ls_task_id``) the place in the listing where reading the project stopped."""

    project_id: int
    position: int  # in the project's listing (0-based), as the server orders it
    ls_task_id: int | None  # None when even its id could not be listed
    changed_by: int | None  # the Label Studio user who last changed it (its ``updated_by``)
    problem: str


def _aligned(start: int, end: int, largest: int) -> Iterator[tuple[int, int]]:
    """``[start, end)`` as blocks ``(position, size)``: each size a power of two of at most
    ``largest`` dividing its position, so that each block is exactly page ``position // size + 1``
    of ``size`` items, one request."""
    pos = start
    while pos < end:
        size = 1
        while size * 2 <= largest and pos % (size * 2) == 0 and pos + size * 2 <= end:
            size *= 2
        yield pos, size
        pos += size


def _listed(reply: Any) -> list[dict[str, Any]]:
    """The tasks of a listing's reply (under ``tasks``, or a bare list)."""
    items = reply if isinstance(reply, list) else reply.get("tasks") if isinstance(reply, dict) else None
    return [t for t in items or [] if isinstance(t, dict)]


def _pow2_floor(n: int) -> int:
    return 1 << (max(n, 1).bit_length() - 1)


class _TaskReader:
    """The tasks of one project's listing (``/api/tasks/`` with ``params``), page by page.

    Label Studio renders a page in one piece: one task it cannot encode (an annotation holding a
    lone surrogate: Django stores it escaped, then fails with HTTP 500 writing the page as UTF-8)
    fails the whole page, on every try. Such a page is *narrowed*: read again as aligned blocks of
    a power of two tasks (a block is one page of that size), a failing block split in halves
    (tried once each: the page already failed on every try), down to single places in the
    listing. The id of a failing place is listed without annotations and that task is fetched
    alone, with the client's full retries: only a task that fails on its own too is
    :class:`Unreadable`; everything else on the page is read. Positions follow the server's
    order; a task saved while a project is read may shift them, which the pull's watermark covers
    as it does for the plain paging. A server that caps page sizes shorter than asked is followed
    (a block that comes back short of what ``total`` promises). ``pages()`` raises
    :class:`LabelStudioRequestError` (404) when the project does not exist.
    """

    def __init__(self, client: LabelStudioClient, project_id: int, params: dict[str, Any], what: str, page_size: int) -> None:
        self.client, self.project_id, self.params, self.what = client, project_id, params, what
        self.page_size = page_size
        self.cap: int | None = None  # the server's page size limit, once one is seen
        self.unreadable: list[Unreadable] = []
        self.given_up = False

    def _get(self, page: int, size: int, *, attempts: int | None = None, params: dict[str, Any] | None = None) -> Any:
        return self.client.request(
            "GET", "/api/tasks/", what=self.what, params={**(params or self.params), "page": page, "page_size": size},
            ok_missing=page > 1, attempts=attempts,
        )

    def pages(self) -> Iterator[list[dict[str, Any]]]:
        """Each page's tasks (narrowed pages included), in the listing's order."""
        pos = 0  # the place in the listing where the next page starts
        while True:
            size = self.cap or self.page_size
            if pos % size:
                # A cap found while narrowing, that the pages so far are not multiples of: pages
                # of a size ``pos`` is a boundary of (slower, never misplaced).
                size = pos & -pos
            try:
                reply = self._get(pos // size + 1, size)
            except LabelStudioServerError:
                tasks, total = self._narrow(pos, pos + size)
                if tasks:
                    yield tasks
                pos += size
                if self.given_up or (total is not None and pos >= total):
                    return
                continue
            if reply is None:  # past the end
                return
            items = _listed(reply)
            total = reply.get("total") if isinstance(reply, dict) else None
            if items:
                yield items
            if isinstance(reply, list) or not items:
                return
            if isinstance(total, int) and not isinstance(total, bool):
                if pos + len(items) >= total:
                    return
                if len(items) < size:  # a capped server (TASK_API_PAGE_SIZE_MAX): its pages are this long
                    self.cap = len(items)
            elif len(items) < size:
                return
            pos += len(items)

    def _narrow(self, start: int, end: int) -> tuple[list[dict[str, Any]], int | None]:
        """The tasks at places ``[start, end)`` of the listing, around those the server fails on."""
        tasks: list[dict[str, Any]] = []
        total: int | None = None
        blocks = deque(_aligned(start, end, _pow2_floor(self.cap or end - start)))
        while blocks:
            pos, size = blocks.popleft()
            if total is not None and pos >= total:
                continue
            try:
                reply = self._get(pos // size + 1, size, attempts=1)
            except LabelStudioServerError as exc:
                if size > 1:
                    blocks.extendleft([(pos + size // 2, size // 2), (pos, size // 2)])
                elif len(self.unreadable) >= MAX_UNREADABLE:
                    self.given_up = True
                    self.unreadable.append(Unreadable(self.project_id, pos, None, None, (
                        f"Label Studio failed on {MAX_UNREADABLE} tasks of this project; the tasks from place {pos + 1} "
                        f"of its listing on were not read ({exc.detail})"
                    )))
                    return tasks, total
                else:
                    tasks += self._alone(pos)
                continue
            if reply is None:  # past the end
                total = pos if total is None else min(total, pos)
                continue
            items = _listed(reply)
            told = reply.get("total") if isinstance(reply, dict) else None
            if isinstance(told, int) and not isinstance(told, bool):
                total = told
            expected = size if total is None else max(min(size, total - pos), 0)
            if 0 < len(items) < expected and size > 1:
                # A capped server sent a shorter page, so not the block asked for: read the
                # block again in blocks it does not cut.
                self.cap = _pow2_floor(len(items))
                blocks.extendleft(reversed(list(_aligned(pos, pos + size, self.cap))))
                continue
            tasks += items
        return tasks, total

    def _alone(self, pos: int) -> list[dict[str, Any]]:
        """The task at place ``pos``, which failed as a one-task page: its id and last editor from
        the listing without annotations, then the task by id with every retry. ``[task]`` if it
        comes, else ``[]`` and an :class:`Unreadable`."""
        light = {k: v for k, v in self.params.items() if k != "fields"}
        task_id: int | None = None
        changed_by: int | None = None
        try:
            reply = self._get(pos + 1, 1, attempts=1, params=light)
        except LabelStudioServerError as exc:  # the task's own data cannot be encoded either
            problem = exc.detail
        else:
            listed = _listed(reply) if reply is not None else []
            first = listed[0] if listed else {}
            task_id = first.get("id") if isinstance(first.get("id"), int) else None
            editors = [e.get("user_id") for e in first.get("updated_by") or [] if isinstance(e, dict)]
            changed_by = next((e for e in reversed(editors) if isinstance(e, int)), None)
            problem = "HTTP 5xx"
        if task_id is not None:
            try:
                task = self.client.request("GET", f"/api/tasks/{task_id}/", what=f"read task {task_id}", ok_missing=True)
            except LabelStudioServerError as exc:
                problem = f"GET /api/tasks/{task_id}/ failed too: {exc.detail}"
            else:
                return [task] if isinstance(task, dict) else []  # None: deleted meanwhile
        self.unreadable.append(Unreadable(self.project_id, pos, task_id, changed_by, problem))
        return []


# ---------------------------------------------------------------------------------------------
# Push


@dataclass(frozen=True)
class PushOptions:
    """How to push: ``overlap`` annotators per task (None: the kind's default), the ``seed`` of
    their assignment, ``batch_size`` tasks per import request, at most ``limit`` new items."""

    overlap: int | None = None
    seed: int = 0
    batch_size: int = 500
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
    copies_resent: int = 0  # copies whose project was deleted in Label Studio, sent again (imported or recovered)
    resent: list[str] = field(default_factory=list)  # per annotator given: which project was gone, what was sent again
    missing: list[str] = field(default_factory=list)  # deleted projects of annotators not given: nothing sent
    down: list[str] = field(default_factory=list)  # annotators whose own server is down or refuses: nothing sent to them

    def lines(self) -> list[str]:
        lines = [
            f"{self.kind}: {self.pending} items pending, {self.overlap} annotators each; "
            f"{self.copies_created} task copies imported in {self.batches} batches, {self.copies_present} already in "
            f"Label Studio, {self.copies_recovered} recovered from an interrupted push; {self.tasks_created} new tasks",
            f"projects: {len(self.projects)} ({len(self.projects_created)} created, {len(self.projects_updated)} with a new "
            "label configuration)",
        ]
        lines += [f"  {who}: project {pid}" for who, pid in sorted(self.projects.items())]
        lines += [f"recreated: {line}" for line in self.resent]
        lines += [f"missing: {line}" for line in self.missing]
        lines += [_down_line(line) for line in self.down]
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


def _find_project(client: LabelStudioClient, alive: list[dict[str, Any]], title: str) -> dict[str, Any] | None:
    """The annotator's project for a kind: one of ``alive`` (the projects their copies are in that
    still exist) with this title, else the oldest project titled so; never a second one."""
    for project in sorted(alive, key=lambda p: p["id"]):
        if project.get("title") == title:
            return project
    found = [
        p for p in client.pages("/api/projects/", what="list the projects", params={"title": title}, key="results")
        if p.get("title") == title
    ]
    return min(found, key=lambda p: p["id"]) if found else None


def _project(
    client: LabelStudioClient, kind: str, route: Route, config: str, summary: PushSummary, alive: list[dict[str, Any]],
    *, create: bool = True,
) -> int | None:
    """The annotator's project for ``kind`` (its label configuration brought up to date), made
    when missing only if ``create``: a kind with nothing to send makes no empty project."""
    annotator = route.annotator
    title = route.title(kind)
    project = _find_project(client, alive, title)
    if project is None:
        if not create:
            return None
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


@dataclass
class _Holdings:
    """Where one annotator's copies of a kind are: the projects that exist (as Label Studio
    describes them) and, per project that is gone from Label Studio, the tasks it held."""

    alive: list[dict[str, Any]] = field(default_factory=list)
    gone: dict[int, list[str]] = field(default_factory=dict)

    def lost(self) -> set[str]:
        return {t for tasks in self.gone.values() for t in tasks}


def _holding(client: LabelStudioClient, projects: dict[int, list[str]], title: str | None = None) -> _Holdings:
    """One annotator's projects, alive or gone, from ``projects`` {project id: task ids}: one
    request per project. A project deleted in Label Studio's UI or API is gone with every task
    and annotation in it; the store still holds the copies, and only asking finds out. A copy
    handed over from the one-server layout (:data:`MOVED`) is in no project yet. With ``title``
    (an annotator's own server, where ids start again from 1 when the server is made anew), a
    project of another title is not this one, whatever its id."""
    held = _Holdings()
    for project_id, tasks in sorted(projects.items()):
        project = None if project_id == MOVED else client.request(
            "GET", f"/api/projects/{project_id}/", what=f"read project {project_id}", ok_missing=True)
        if project is None or (title is not None and project.get("title") != title):
            held.gone[project_id] = tasks
        else:
            held.alive.append(project)
    return held


@dataclass
class _Lost:
    """An annotator's copies in deleted projects: the tasks still waiting for their label
    (``owed``), and how many of the rest they labelled before or are settled."""

    owed: list[str]
    labelled: int
    settled: int


def missing_projects(ws: Workspace, settings: Servers, *, client: LabelStudioClient | None = None) -> dict[tuple[str, str], list[int]]:
    """{(annotator, kind): ids of their projects that are gone from Label Studio with tasks in them
    still waiting for their label}, asked of each annotator's server once per project the store
    has copies in: what ``annotators list`` marks, so that work in a deleted project does not pass
    for work waiting in Label Studio. A deleted project whose every copy is labelled or settled is
    not named: nothing is lost with it. An annotator whose own server is down is left out."""
    with ws.session() as s:
        rows = s.exec(select(LabelStudioTaskCopy.annotator, LabelStudioTaskCopy.kind, LabelStudioTaskCopy.ls_project_id).distinct()).all()
    clients = _Clients(settings, client)
    gone = []
    try:
        for who, kind, pid in sorted(rows):
            try:
                ls = clients.get(who)
                if pid == MOVED or not _exists(ls, pid):
                    gone.append((who, kind, pid))
            except LabelStudioError as exc:
                clients.fail(who, exc)
    finally:
        clients.close()
    found: dict[tuple[str, str], list[int]] = {}
    pending: dict[str, set[str]] = {}
    with ws.session() as s:
        for who, kind, project_id in gone:
            spec = ls_kind(kind)
            if spec is None or spec.pending is None:
                continue
            if kind not in pending:
                pending[kind] = {annotation_task_id(kind, spec.target_type, t) for t in spec.pending(s)}
            copies = set(s.exec(select(LabelStudioTaskCopy.task_id).where(
                LabelStudioTaskCopy.ls_project_id == project_id, LabelStudioTaskCopy.annotator == who)).all())
            if _lost(s, spec, who, copies, pending[kind]).owed:
                found.setdefault((who, kind), []).append(project_id)
    return found


def _lost(s: Session, spec: LabelStudioKind, annotator: str, task_ids: set[str], pending: set[str]) -> _Lost:
    """Sort an annotator's copies in deleted projects (``task_ids``) against the store: a task
    they labelled in Label Studio before (the label was pulled) is done, whatever happened to
    the project; one of an item no longer ``pending`` needs nobody; the rest is owed."""
    who = labelstudio_annotator(annotator)
    done: set[str] = set()
    for chunk in _chunks(sorted(task_ids), IN_CHUNK):
        done.update(s.exec(select(Annotation.task_id).where(
            Annotation.annotator == who, Annotation.source == SOURCE, col(Annotation.task_id).in_(chunk),
        )).all())
    owed = sorted(t for t in task_ids if t in pending and t not in done)
    return _Lost(owed=owed, labelled=len(done), settled=len(task_ids) - len(owed) - len(done))


def _ls_tasks(client: LabelStudioClient, project_id: int, summary: PushSummary | None = None) -> dict[str, int]:
    """{our task id: Label Studio task id} of a project's tasks (the lowest id when a task is there twice).
    A task Label Studio cannot list (its data is text it cannot encode) is passed over and, with
    ``summary``, reported: the rest of the project is still found."""
    held: dict[str, int] = {}
    reader = _TaskReader(client, project_id, {"project": project_id}, f"list the tasks of project {project_id}", LIST_PAGE)
    for page in reader.pages():
        for task in page:
            ours = (task.get("data") or {}).get(TASK_KEY)
            if not isinstance(ours, str) or not isinstance(task.get("id"), int):
                continue
            if ours in held and summary is not None:
                summary.duplicates.append(f"project {project_id}: tasks {held[ours]} and {task['id']} both hold {ours[:10]}")
            held[ours] = min(held.get(ours, task["id"]), task["id"])
    if summary is not None:
        summary.problems += [
            f"project {project_id}: Label Studio cannot list its task {u.ls_task_id if u.ls_task_id is not None else f'at place {u.position + 1}'} "
            f"({u.problem}); if it is one of ours, fix it in Label Studio and push again" for u in reader.unreadable
        ]
    return held


def _record_copies(
    s: Session, spec: LabelStudioKind, annotator: str, project_id: int, found: dict[str, int], targets: dict[str, str],
    summary: PushSummary, seed: int,
) -> None:
    """Write the copies (and their tasks, through labels.py) of ``found`` {our task id: LS task id}."""
    # The batch's tasks and targets in a few queries, not a few per copy.
    with _keeping_loaded(s), s.no_autoflush:
        existing = {
            task.id: task
            for chunk in _chunks(list(found), IN_CHUNK)
            for task in s.exec(select(AnnotationTask).where(col(AnnotationTask.id).in_(chunk))).all()
        }
        if spec.payload is not None:
            _preload(s, spec.target_type, (targets[t] for t in found if t not in existing))
        for task_id in found:
            if task_id not in existing:
                target_id = targets[task_id]
                payload = spec.payload(s, target_id) if spec.payload is not None else None
                existing[task_id] = task_for(s, spec.kind, spec.target_type, target_id, payload)
                summary.tasks_created += 1
        # A copy sent again (its project was deleted in Label Studio) is the same copy, moved:
        # one row per task and annotator, whatever happens to their projects.
        moved = {
            copy.id: copy
            for chunk in _chunks([labelstudio_copy_id(t, annotator) for t in found], IN_CHUNK)
            for copy in s.exec(select(LabelStudioTaskCopy).where(col(LabelStudioTaskCopy.id).in_(chunk))).all()
        }
        # Then the copies and the tasks' state, written together at the commit (task_for has
        # flushed each new task on its own).
        for task_id, ls_task_id in found.items():
            task = existing[task_id]
            copy = moved.get(labelstudio_copy_id(task_id, annotator))
            if copy is None:
                s.add(LabelStudioTaskCopy(
                    id=labelstudio_copy_id(task_id, annotator), task_id=task_id, kind=spec.kind, annotator=annotator,
                    ls_project_id=project_id, ls_task_id=ls_task_id, seed=seed,
                ))
            else:
                if task.ls_project_id == copy.ls_project_id:  # the task named this copy as its first
                    task.ls_project_id, task.ls_task_id = project_id, ls_task_id
                copy.ls_project_id, copy.ls_task_id = project_id, ls_task_id
                s.add(copy)
            mark_task_synced(s, task, ls_project_id=project_id, ls_task_id=ls_task_id)


def _import(client: LabelStudioClient, project_id: int, items: list[dict[str, Any]]) -> dict[str, int]:
    """Import ``items`` into the project; {our task id: Label Studio task id} of each of them.

    Label Studio names the tasks it created, in the order sent, when asked (``return_task_ids``);
    a server that does not is asked for the project's tasks instead. Either way, every task sent
    must be there, or the push stops (and the next one records what arrived)."""
    reply = client.request(
        "POST", f"/api/projects/{project_id}/import", params={"return_task_ids": "true"}, json=items,
        what=f"import {len(items)} tasks into project {project_id}",
    )
    sent = [item["data"][TASK_KEY] for item in items]
    ids = reply.get("task_ids") if isinstance(reply, dict) else None
    if isinstance(ids, list) and len(ids) == len(sent) and all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        return dict(zip(sent, ids))
    in_ls = _ls_tasks(client, project_id)
    found = {t: in_ls[t] for t in sent if t in in_ls}
    if len(found) < len(sent):
        raise LabelStudioError(
            f"Label Studio accepted {len(items)} tasks into project {project_id} but lists only {len(found)} of them",
            hint="run the push again: it records what Label Studio holds and imports the rest",
        )
    return found


def push(
    ws: Workspace,
    kind: str,
    settings: Servers,
    annotators: Sequence[str] | None,
    options: PushOptions = PushOptions(),
    *,
    client: LabelStudioClient | None = None,
) -> PushSummary:
    """Push the pending items of ``kind`` to each assigned annotator's project (module docs).

    ``settings``: one server for everyone, or each annotator's own (:class:`Route`); an
    annotator's own server that is down or refuses the token is named in
    :attr:`PushSummary.down` and the others still get their tasks. ``annotators`` None: every
    annotator (the accounts of a shared server, or everyone with a server). Overlap:
    ``options.overlap``, else the workspace's ``[labelstudio] overlap`` for the kind, else the
    kind's default. Idempotent and resumable: a second push creates nothing, and a push
    interrupted at any point and run again completes without a duplicate task in Label Studio or
    in the store. A kind with nothing to send to an annotator makes no project for them.
    """
    from tqaforge.annotation.labelstudio.annotators import list_accounts
    from tqaforge.annotation.labelstudio.manage import configured_overlap

    spec = _spec(kind)
    if annotators is not None:
        names = _annotators(annotators)
    elif isinstance(settings, ClientSettings):
        names = _annotators([a.email for a in list_accounts(settings, client=client)])
    else:
        # Everyone with a server, and whoever holds copies of the kind without one any more (their
        # server's directory removed by hand): named as down, never silently left out.
        with ws.session() as s:
            with_copies = set(s.exec(select(LabelStudioTaskCopy.annotator).where(LabelStudioTaskCopy.kind == kind)).all())
        known = {name.lower() for name in settings}
        names = _annotators([*settings, *sorted(who for who in with_copies if who.lower() not in known)])
    overlap = options.overlap or configured_overlap(ws.root, kind) or spec.overlap
    if overlap > len(names):
        raise LabelStudioError(
            f"{kind} needs {overlap} annotators per task, but {len(names)} were given ({', '.join(names)})",
            hint="give more annotators, or a smaller overlap",
        )
    summary = PushSummary(kind=kind, annotators=names, overlap=overlap)
    clients = _Clients(settings, client)
    checked: dict[int, str] = {}  # id(client) -> the kind's configuration, validated by that server

    def config_of(ls: LabelStudioClient) -> str:
        if id(ls) not in checked:
            checked[id(ls)] = check_config(ls, spec)
        return checked[id(ls)]

    try:
        if isinstance(settings, ClientSettings):  # one server: a bad configuration stops before anything
            config_of(clients.get(names[0]))
        assert spec.pending is not None and spec.task_data is not None
        task_data = spec.task_data
        with ws.session() as s:
            targets = {annotation_task_id(kind, spec.target_type, t): t for t in spec.pending(s)}
            # Whoever must not label an item (the author of a modification re-answering it).
            barred = {task_id: spec.excluded(s, t) for task_id, t in targets.items()} if spec.excluded is not None else {}
            held: dict[str, set[str]] = defaultdict(set)
            where: dict[str, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))  # annotator -> project -> tasks
            for task_id, who, project_id in s.exec(
                select(LabelStudioTaskCopy.task_id, LabelStudioTaskCopy.annotator, LabelStudioTaskCopy.ls_project_id)
                .where(LabelStudioTaskCopy.kind == kind)
            ):
                held[who].add(task_id)
                where[who][project_id].append(task_id)
        summary.pending = len(targets)
        # Projects deleted by hand in Label Studio, of every annotator who holds copies: those
        # given get theirs back below, the others are named (their tasks stay theirs).
        holdings: dict[str, _Holdings] = {}
        for who in sorted(where):
            try:
                route = clients.route(who)
                holdings[who] = _holding(clients.get(who), where[who], route.title(kind) if route.own else None)
            except LabelStudioError as exc:
                line = clients.fail(who, exc)
                if who in names:
                    summary.down.append(line)
        with ws.session() as s:
            for who, holding in sorted(holdings.items()):
                for project_id in holding.gone:
                    # Its pull watermark belongs to tasks that no longer exist.
                    _forget_mark(s, ws, clients.route(who), project_id)
                if holding.gone and who not in names:
                    lost = _lost(s, spec, who, holding.lost(), set(targets))
                    summary.missing.append(
                        f"{who}: project {', '.join(map(str, sorted(holding.gone)))} is gone from Label Studio; "
                        f"{len(lost.owed)} of their tasks wait for their label in no project (push with --annotator {who} "
                        f"to send them again; {lost.labelled} labelled before stay in the store)"
                    )
            s.commit()
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
            extra = [
                who for who in assign(task_id, names, len(names), options.seed)
                if who not in holders and labelstudio_annotator(who) not in barred.get(task_id, ())
            ]
            for who in [h for h in holders if h in names] + extra[: max(overlap - len(holders), 0)]:
                wanted[who].append(task_id)
        for who in names:
            if who in clients.down:
                if not any(line == clients.down[who] for line in summary.down):
                    summary.down.append(clients.down[who])
                continue
            try:
                _push_to(ws, spec, clients, who, config_of, holdings.get(who, _Holdings()), wanted[who], held[who],
                         targets, task_data, options, summary)
            except LabelStudioError as exc:
                summary.down.append(clients.fail(who, exc))
    finally:
        clients.close()
    return summary


def push_pending(
    ws: Workspace,
    settings: Servers,
    annotators: Sequence[str] | None = None,
    options: PushOptions = PushOptions(),
    *,
    client: LabelStudioClient | None = None,
) -> list[PushSummary]:
    """:func:`push` of every kind that goes to Label Studio (the registry's entries with a label
    configuration), in the registry's order; a kind with nothing pending makes no project. What
    ``make run`` does for its demo workspace (``tqaforge serve --push-pending``)."""
    return [push(ws, kind, settings, annotators, options, client=client)
            for kind, entry in ls_kinds().items() if entry.supported]


def _push_to(
    ws: Workspace, spec: LabelStudioKind, clients: _Clients, who: str, config_of: Callable[[LabelStudioClient], str],
    holding: _Holdings, wanted: list[str], held: set[str], targets: dict[str, str],
    task_data: Callable[[Session, str], dict[str, Any]], options: PushOptions, summary: PushSummary,
) -> None:
    """Send ``who`` the tasks of ``wanted`` they have no copy of yet (or whose project is gone)."""
    route = clients.route(who)
    ls = clients.get(who)
    resend: set[str] = set()
    lost = _Lost([], 0, 0)
    if holding.gone:
        # Their copies in a deleted project: each item still waiting for their label goes
        # to the (re)made project; a copy whose label is already in the store, or whose
        # item is settled, needs nothing and stays the record of what was assigned.
        with ws.session() as s:
            lost = _lost(s, spec, who, holding.lost(), set(targets))
        resend = set(lost.owed)
    todo = [t for t in wanted if t not in held or t in resend]
    project_id = _project(ls, spec.kind, route, config_of(ls), summary, holding.alive, create=bool(todo))
    if project_id is None:  # nothing to send and no project yet: none is made
        return
    summary.projects[who] = project_id
    summary.copies_resent += len(resend)
    if resend:
        summary.resent.append(
            f"{who}: project {', '.join(map(str, sorted(holding.gone)))} is gone from Label Studio (deleted by "
            f"hand, or moved from the one-server layout); {len(resend)} tasks sent again to project {project_id}; "
            f"{lost.labelled} they labelled before keep their labels in the store and are not sent again; "
            f"{lost.settled} settled items need nothing"
        )
    summary.copies_present += len(wanted) - len(todo)
    if not todo:
        return
    in_ls = _ls_tasks(ls, project_id, summary)
    recovered = {t: in_ls[t] for t in todo if t in in_ls}
    if recovered:
        with ws.session() as s:
            _record_copies(s, spec, who, project_id, recovered, targets, summary, options.seed)
            # A recovered copy may hold annotations older than the project's pull
            # watermark: the next pull of the project reads all of it again.
            _forget_mark(s, ws, route, project_id)
            s.commit()
        summary.copies_recovered += len(recovered)
    todo = [t for t in todo if t not in in_ls]

    def imports() -> Iterator[Callable[[], dict[str, int]]]:
        for batch in _chunks(todo, options.batch_size):
            items = []
            with ws.session() as s, _keeping_loaded(s):
                _preload(s, spec.target_type, (targets[t] for t in batch))
                for task_id in batch:
                    try:
                        items.append({"data": {FEEDBACK_KEY: "", **task_data(s, targets[task_id]), TASK_KEY: task_id}})
                    except LabelError as exc:
                        summary.problems.append(f"{task_id[:10]}: {exc}")
            if items:
                yield partial(_import, ls, project_id, items)

    # Each batch is committed once Label Studio has it, while the next one is imported.
    for found in _read_ahead(imports()):
        summary.batches += 1
        with ws.session() as s:
            _record_copies(s, spec, who, project_id, found, targets, summary, options.seed)
        summary.copies_created += len(found)


# ---------------------------------------------------------------------------------------------
# Pull


#: The key, in a task's data, of the labels refused on it: each one's author, time, reason and
#: Label Studio result, kept there when the annotation is deleted, so no person's work is lost.
REFUSED_KEY = "tqaforge_refused"


@dataclass(frozen=True)
class SendBack:
    """A refused label going back to a queue, or a message for an annotator.

    ``annotation_id`` set: the annotation is deleted from the Label Studio task ``ls_task_id``
    (back in its project's queue), after the task's data got ``message`` (its ``feedback``,
    shown at the top of every kind's screen), the annotator's ``attempt`` to start from (data
    keys, the kind's ``resend``), and ``refused`` added to its :data:`REFUSED_KEY` list.
    ``annotation_id`` None: the task only gets ``message`` (the annotator's own copy of an item
    whose label they made in someone else's project). ``data`` is the task's data as listed
    (None: read it first)."""

    ls_task_id: int
    data: dict[str, Any] | None
    message: str
    annotation_id: int | None = None
    attempt: dict[str, Any] = field(default_factory=dict)
    refused: dict[str, Any] | None = None


@dataclass
class PullSummary:
    """What one pull did; ``lines()`` for the CLI, ``as_dict()`` for --json."""

    projects: int = 0
    incremental: int = 0  # projects read only for tasks updated since their last pull
    tasks: int = 0
    annotations: int = 0  # seen in Label Studio (cancelled ones included)
    recorded: int = 0  # new labels
    changed: int = 0  # of which replace an earlier label of the same annotator
    unchanged: int = 0  # already pulled
    cancelled: int = 0  # skipped tasks in Label Studio ("was_cancelled"): no label
    by_kind: dict[str, int] = field(default_factory=dict)  # new labels per kind
    problems: list[str] = field(default_factory=list)  # annotations that could not be read, skipped
    sent_back: int = 0  # refused annotations deleted in Label Studio, their task carrying the message
    #: Projects deleted in Label Studio that hold tasks still waiting for a label (push sends them again).
    missing_projects: list[str] = field(default_factory=list)
    #: Deleted projects with nothing left to label in them.
    gone_done: list[str] = field(default_factory=list)
    #: Tasks Label Studio fails to send (HTTP 5xx even alone), their annotations not pulled.
    unreadable: list[str] = field(default_factory=list)
    #: Annotators whose own server is down or refuses tqaforge's token: nothing pulled from it.
    down: list[str] = field(default_factory=list)
    #: Refused labels to send back, and annotators to tell, once the batch is recorded.
    resend: list[SendBack] = field(default_factory=list, repr=False)

    def lines(self) -> list[str]:
        lines = [
            f"{self.annotations} annotations in {self.tasks} tasks of {self.projects} projects: {self.recorded} new labels "
            f"({self.changed} changed), {self.unchanged} already pulled, {self.cancelled} skipped by the annotator, "
            f"{len(self.problems)} unreadable",
        ]
        if self.incremental:
            lines.append(f"{self.incremental} of {self.projects} projects read incrementally (tasks updated since their last pull; --full reads all)")
        lines += [f"  {kind}: {n} new" for kind, n in sorted(self.by_kind.items())]
        if self.sent_back:
            lines.append(f"{self.sent_back} refused labels sent back to their annotator's queue (the task shows why)")
        lines += [f"skipped: {p}" for p in self.problems[:20]]
        if len(self.problems) > 20:
            lines.append(f"... and {len(self.problems) - 20} more")
        lines += [f"missing: {p}" for p in self.missing_projects]
        lines += [f"gone: {p}" for p in self.gone_done]
        lines += [f"not read: {p}" for p in self.unreadable]
        lines += [_down_line(p) for p in self.down]
        return lines

    @property
    def incomplete(self) -> str | None:
        """Why this pull could not read everything it should have (None when it did): a project
        deleted in Label Studio with tasks still to label, or tasks the server fails to send.
        Unlike an unreadable annotation (the annotator's to correct, sent back and reported), no
        later pull fixes these by itself: a person must push again or repair the server's data."""
        parts = []
        if self.missing_projects:
            parts.append(f"{len(self.missing_projects)} project(s) gone from Label Studio with tasks still to label")
        if self.unreadable:
            parts.append(f"{len(self.unreadable)} task(s) Label Studio fails to send")
        if self.down:
            parts.append(f"{len(self.down)} annotator server(s) not reached: {', '.join(line.split(': ', 1)[0] for line in self.down)}")
        return "; ".join(parts) or None

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("resend", None)
        data["incomplete"] = self.incomplete
        return data


def _when(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


#: In the users map of a pull, the key under which the id of the sync's own account (the admin
#: whose token it uses) is kept; Label Studio's user ids start at 1.
_SELF = 0


def _users(client: LabelStudioClient) -> dict[int, str]:
    """{Label Studio user id: e-mail (or username)}, and under ``_SELF`` the id of the token's own
    account (as text): annotations it saved (an import) are not someone else's edit."""
    me = client.request("GET", "/api/current-user/whoami", what="read the account of the API token") or {}
    users = {_SELF: str(me.get("id"))}
    for user in client.pages("/api/users/", what="list the users", params={}, key="results"):
        login = user.get("email") or user.get("username")
        if isinstance(user.get("id"), int) and login:
            users[user["id"]] = str(login)
    return users


@dataclass
class _Known:
    """What the store holds of a batch's tasks: (task, annotator) pairs with a label, and the
    (task, annotator, source_ref) of every label, so that a revision pulled before is known
    without asking, and record_annotation is called only for what may be new."""

    labelled: set[tuple[str, str]] = field(default_factory=set)
    refs: set[tuple[str, str, str]] = field(default_factory=set)


def _known(s: Session, task_ids: Iterable[str]) -> _Known:
    known = _Known()
    for chunk in _chunks(sorted(set(task_ids)), IN_CHUNK):
        rows = s.exec(
            select(Annotation.task_id, Annotation.annotator, Annotation.source_ref).where(col(Annotation.task_id).in_(chunk))
        ).all()
        for task_id, annotator, ref in rows:
            known.labelled.add((task_id, annotator))
            if ref is not None:
                known.refs.add((task_id, annotator, ref))
    return known


def _user_id(value: Any) -> int | None:
    """A Label Studio user id as an annotation names one (``completed_by``, ``updated_by``): a
    number, or an object with an ``id``."""
    value = value.get("id") if isinstance(value, dict) else value
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _refuse(
    s: Session, summary: PullSummary, spec: LabelStudioKind, task: AnnotationTask, ls_task: dict[str, Any],
    ann: dict[str, Any], *, owner: str, author: str, reason: str, where: str, feedback: str | None = None,
) -> None:
    """A label the pull does not record, whatever the reason (unreadable, refused by the kind's
    checks, made in someone else's project, changed by someone else): listed in the summary and
    sent back to the queue of the project it is in (:class:`SendBack`): the task shows
    ``feedback`` (by default the reason and what to do), its result is kept in the task's data.
    When its ``author`` is not the project's ``owner``, the author's own copy of the item, if
    they have one, is told why too. Never dropped in silence."""
    if not isinstance(ann.get("id"), int) or not isinstance(ls_task.get("id"), int):
        summary.problems.append(f"{where} by {author}: {reason} (not sent back: Label Studio gave no id)")
        return
    summary.problems.append(f"{where} by {author}: {reason} (sent back to {owner}'s queue)")
    result = ann.get("result") or []
    attempt = spec.resend(result) if spec.resend is not None and isinstance(result, list) else {}
    if feedback is None:
        again = "Your last attempt is below: correct it and submit again" if attempt else "Correct it and submit again"
        feedback = f"Sent back: {reason}. {again}."
    refused = {
        "annotation": ann["id"], "by": author, "at": ann.get("updated_at") or ann.get("created_at"), "reason": reason,
        "result": result,
    }
    summary.resend.append(SendBack(ls_task["id"], ls_task.get("data") or {}, feedback, ann["id"], attempt, refused))
    if author.strip().lower() != owner.strip().lower():
        mine = s.get(LabelStudioTaskCopy, labelstudio_copy_id(task.id, author))
        if mine is not None:
            summary.resend.append(SendBack(mine.ls_task_id, None, (
                f"Note: your label of this item was made in {owner}'s project, where it does not count: label it here."
            )))
        else:
            summary.problems.append(
                f"{where}: {author} has no task of their own for this item; push {spec.kind} with --annotator {author} "
                "to give them one"
            )


def _pull_annotation(
    s: Session, spec: LabelStudioKind, task: AnnotationTask, ann: dict[str, Any], users: dict[int, str], owner: str,
    summary: PullSummary, known: _Known, ls_task: dict[str, Any],
) -> None:
    where = f"{spec.kind}, Label Studio task {ann.get('task')}, annotation {ann.get('id')}"
    if ann.get("was_cancelled"):
        summary.cancelled += 1
        return
    who = _user_id(ann.get("completed_by"))
    login = users.get(who) if who is not None else None
    if login is None:
        summary.problems.append(f"{where}: by an unknown user {who!r}")
        return
    result = ann.get("result") or []
    if login.strip().lower() != owner.strip().lower():
        # Community Label Studio lets every member open every project: a label made in someone
        # else's project was made seeing theirs, so it is not a blind label and is not counted.
        # It goes out of the owner's project (one label closes a task there, so the owner's
        # queue gets it back) and its author is told, on their own copy of the item if any.
        owner_labelled = any(
            users.get(_user_id(a.get("completed_by")) or -1, "").strip().lower() == owner.strip().lower()
            for a in ls_task.get("annotations") or [] if isinstance(a, dict)
        )
        _refuse(
            s, summary, spec, task, ls_task, ann, owner=owner, author=login, where=where,
            reason=f"made in {owner}'s project (not blind: left out; label in your own project)",
            feedback=f"Note: a label {login} made on this task was taken out: only {owner}'s labels count here."
            + ("" if owner_labelled else f" {owner}, label it yourself."),
        )
        return
    editor = _user_id(ann.get("updated_by"))
    if editor is not None and editor != who and str(editor) != users.get(_SELF):
        # Another member changed the owner's annotation ("Update" on a task they could open):
        # the result is no longer the owner's own label; the owner labels the task again.
        changed_by = users.get(editor, f"user {editor}")
        _refuse(
            s, summary, spec, task, ls_task, ann, owner=owner, author=login, where=where,
            reason=f"{owner}'s label was changed by {changed_by} (not theirs: left out)",
            feedback=f"Sent back: your label was changed by {changed_by}, so it is no longer yours. Label the task again.",
        )
        return
    try:
        if spec.to_label_for is not None:
            label = spec.to_label_for(s, task.target_id, result)
        else:
            assert spec.to_label is not None
            label = spec.to_label(result)
        value = kind_spec(spec.kind).read(label)
        check_against_target(s, kind_spec(spec.kind), task.target_type, task.target_id, value)
    except LabelError as exc:
        _refuse(s, summary, spec, task, ls_task, ann, owner=owner, author=login, reason=str(exc), where=where)
        return
    updated = ann.get("updated_at") or ann.get("created_at")
    revision = re.sub(r"\D", "", updated) if isinstance(updated, str) and updated else "0"
    lead_time = ann.get("lead_time")
    annotator = labelstudio_annotator(login)
    source_ref = f"ls:{ann.get('id')}:{revision}"
    if (task.id, annotator, source_ref) in known.refs:
        # Pulled before: record_annotation would write nothing (and would mark an adjudicated
        # task annotated again, though nothing changed).
        summary.unchanged += 1
        return
    if (task.id, annotator) in known.labelled:
        # record_annotation compares with this annotator's labels on the task, which must then
        # include those recorded earlier in this batch and not yet written.
        s.flush()
    done = record_annotation(
        s, kind=spec.kind, target_type=task.target_type, target_id=task.target_id, annotator=annotator, label=label,
        source=SOURCE, source_ref=source_ref, created_at=_when(updated),
        lead_time=float(lead_time) if isinstance(lead_time, (int, float)) and not isinstance(lead_time, bool) else None,
        annotator_id=resolve_account(s, login).id,  # the person behind the account (tqaforge.people)
    )
    if done.recorded:
        summary.recorded += 1
        summary.changed += (task.id, annotator) in known.labelled
        summary.by_kind[spec.kind] = summary.by_kind.get(spec.kind, 0) + 1
        known.labelled.add((task.id, annotator))
        known.refs.add((task.id, annotator, source_ref))
    else:
        summary.unchanged += 1


def _pull_tasks(
    ws: Workspace, spec: LabelStudioKind, project_id: int, owner: str, ls_tasks: list[dict[str, Any]], users: dict[int, str],
    summary: PullSummary,
) -> None:
    """Record the annotations of a batch of Label Studio tasks, in one transaction."""
    kind = spec.kind
    annotated = [
        (ls_task, (ls_task.get("data") or {}).get(TASK_KEY), [a for a in ls_task.get("annotations") or [] if isinstance(a, dict)])
        for ls_task in ls_tasks
    ]
    annotated = [(ls_task, ours, anns) for ls_task, ours, anns in annotated if anns]
    if not annotated:
        return
    with ws.session() as s, _keeping_loaded(s), s.no_autoflush:
        # The batch's tasks, targets and earlier labels in a few queries, not a few per annotation;
        # new labels are written together at the end (see _pull_annotation for the one flush).
        ids = sorted({ours for _, ours, _ in annotated if isinstance(ours, str)})
        tasks = {
            task.id: task
            for chunk in _chunks(ids, IN_CHUNK)
            for task in s.exec(select(AnnotationTask).where(col(AnnotationTask.id).in_(chunk))).all()
        }
        _preload(s, spec.target_type, (task.target_id for task in tasks.values()))
        known = _known(s, tasks)
        for ls_task, ours, annotations in annotated:
            summary.annotations += len(annotations)
            task = tasks.get(ours) if isinstance(ours, str) else None
            if task is None or task.kind != kind:
                summary.problems.append(
                    f"{kind}, Label Studio task {ls_task.get('id')} in project {project_id}: not a task of ours "
                    f"({str(ours)[:10]}); run `push` again to record an interrupted push's tasks"
                )
                continue
            for ann in sorted(annotations, key=lambda a: (a.get("updated_at") or "", a.get("id") or 0)):
                _pull_annotation(s, spec, task, ann, users, owner, summary, known, ls_task)


#: Label Studio's data-manager filters take times in this form (UTC).
_LS_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"


def _since_query(since: datetime) -> str:
    """A data-manager ``query``: only tasks updated after ``since`` (a ``Date`` header: whole
    seconds, rounded down, so never later than the moment it stands for)."""
    moment = since.astimezone(timezone.utc)
    return json.dumps({"filters": {"conjunction": "and", "items": [{
        "filter": "filter:tasks:updated_at", "operator": "greater", "type": "Datetime", "value": moment.strftime(_LS_TIME),
    }]}})


def _watermarks(ws: Workspace) -> dict[int, datetime]:
    with ws.session() as s:
        return {
            row.ls_project_id: row.pulled_until if row.pulled_until.tzinfo else row.pulled_until.replace(tzinfo=timezone.utc)
            for row in s.exec(select(LabelStudioPull)).all()
        }


def _save_watermark(ws: Workspace, kind: str, project_id: int, owner: str, until: datetime) -> None:
    with ws.session() as s:
        row = s.get(LabelStudioPull, project_id) or LabelStudioPull(ls_project_id=project_id, kind=kind, annotator=owner, pulled_until=until)
        row.kind, row.annotator, row.pulled_until, row.updated_at = kind, owner, until, datetime.now(timezone.utc)
        s.add(row)
        s.commit()


def _send_back(ls: LabelStudioClient, summary: PullSummary) -> None:
    """Send each refused label back (:class:`SendBack`): the task's data get the message, the
    attempt to start from and the refused result, then the annotation is deleted, so the task is
    in its annotator's queue again with the message at the top. In that order, so an interruption
    between the two only repeats the first next time (the refused result is kept once)."""
    for back in summary.resend:
        data = back.data
        if data is None:
            task = ls.request("GET", f"/api/tasks/{back.ls_task_id}/", what=f"read task {back.ls_task_id}", ok_missing=True)
            if not isinstance(task, dict):
                continue  # deleted meanwhile: nobody to tell there
            data = task.get("data") or {}
        data = {**data, **back.attempt, FEEDBACK_KEY: back.message}
        if back.refused is not None:
            kept = [r for r in data.get(REFUSED_KEY) or [] if isinstance(r, dict)]
            if back.refused["annotation"] not in [r.get("annotation") for r in kept]:
                kept.append(back.refused)
            data[REFUSED_KEY] = kept
        ls.request("PATCH", f"/api/tasks/{back.ls_task_id}/", json={"data": data}, what=f"send task {back.ls_task_id} back")
        if back.annotation_id is not None:
            ls.request(
                "DELETE", f"/api/annotations/{back.annotation_id}/", what=f"delete refused annotation {back.annotation_id}",
                ok_missing=True,
            )
            summary.sent_back += 1
    summary.resend.clear()


def _exists(client: LabelStudioClient, project_id: int) -> bool:
    return client.request("GET", f"/api/projects/{project_id}/", what=f"read project {project_id}", ok_missing=True) is not None


def _report_gone(ws: Workspace, spec: LabelStudioKind, project_id: int, owner: str, summary: PullSummary) -> None:
    """Say what a project deleted in Label Studio held: the tasks still owed (the next push sends
    them again) make the pull incomplete; labels pulled from it before stay in the store."""
    assert spec.pending is not None
    with ws.session() as s:
        copies = set(s.exec(select(LabelStudioTaskCopy.task_id).where(
            LabelStudioTaskCopy.ls_project_id == project_id, LabelStudioTaskCopy.annotator == owner)).all())
        pending = {annotation_task_id(spec.kind, spec.target_type, t) for t in spec.pending(s)}
        lost = _lost(s, spec, owner, copies, pending)
    if project_id == MOVED:
        where, why = f"{spec.kind}: {owner}'s tasks moved from the one-server layout are not on their own server yet", ""
    else:
        where, why = f"{spec.kind}: project {project_id} of {owner} is gone from Label Studio", " (deleted by hand?)"
    if lost.owed:
        summary.missing_projects.append(
            f"{where}{why}: {len(lost.owed)} of its tasks wait for {owner}'s label in no project; "
            f"{lost.labelled} labelled before stay in the store. Run `tqaforge labelstudio push {spec.kind} --annotator {owner}` "
            "to make the project again and send them"
        )
    else:
        summary.gone_done.append(f"{where}; nothing in it waits for a label ({lost.labelled} labelled, {lost.settled} settled)")


def _unreadable_line(kind: str, owner: str, bad: Unreadable, users: dict[int, str]) -> str:
    """One line naming a task Label Studio fails to send: which, whose, why and what to do."""
    if bad.ls_task_id is None and bad.changed_by is None and "were not read" in bad.problem:
        return f"{kind}, project {bad.project_id} of {owner}: {bad.problem}"
    editor = users.get(bad.changed_by, f"user {bad.changed_by}") if bad.changed_by is not None else None
    changed = f" (last changed by {editor})" if editor else ""
    if bad.ls_task_id is None:
        return (
            f"{kind}, the task at place {bad.position + 1} of project {bad.project_id}'s listing ({owner}'s project){changed}: "
            f"Label Studio fails to send it even without its annotations ({bad.problem}): its data holds text the server "
            "cannot encode (a lone surrogate, for one; the server's log has the traceback). Fix or delete that task in "
            "Label Studio, then pull again"
        )
    return (
        f"{kind}, Label Studio task {bad.ls_task_id} in project {bad.project_id} of {owner}{changed}: Label Studio fails "
        f"to send it ({bad.problem}), so its annotations are not pulled: it holds text the server cannot encode (a lone "
        "surrogate, for one; the server's log has the traceback). Fix or delete that annotation in Label Studio, then pull again"
    )


@contextmanager
def _pull_lock(ws: Workspace) -> Iterator[None]:
    """One pull of a workspace at a time: a second one waits for the first, then finds what it
    recorded (nothing is read twice into the store, and no label is written twice)."""
    directory = ws.root / "label-studio"
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(directory / ".pull.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def pull(
    ws: Workspace,
    settings: Servers,
    *,
    kinds: Sequence[str] | None = None,
    full: bool = False,
    client: LabelStudioClient | None = None,
) -> PullSummary:
    """Record every new or changed annotation of the projects we pushed to (module docs).

    ``settings``: one server for everyone, or each annotator's own (:class:`Route`); an
    annotator's own server that is down, dies during the pull or refuses the token is named in
    :attr:`PullSummary.down` (the pull is then incomplete) and the others are still pulled.
    Safe to repeat: a revision already pulled adds nothing. Each batch of tasks is one
    transaction, so an interrupted pull keeps the batches it finished and the next one does the
    rest; two pulls of one workspace run one after the other. A project pulled before is read
    only for tasks updated since (``full`` reads every task).
    """
    wanted = set(kinds) if kinds is not None else None
    for kind in wanted or ():
        kind_spec(kind)
    with _pull_lock(ws):
        return _pull(ws, settings, wanted, full, client)


def _pull(ws: Workspace, settings: Servers, wanted: set[str] | None, full: bool, client: LabelStudioClient | None) -> PullSummary:
    with ws.session() as s:
        rows = s.exec(select(LabelStudioTaskCopy.kind, LabelStudioTaskCopy.ls_project_id, LabelStudioTaskCopy.annotator).distinct()).all()
    projects = sorted({(kind, pid, who) for kind, pid, who in rows if wanted is None or kind in wanted})
    summary = PullSummary(projects=len(projects))
    if not projects:
        return summary
    clients = _Clients(settings, client)
    # Per server: its users, and its time before any task is listed (whatever is saved from
    # then on has a later updated_at, so the next pull, reading from there, misses nothing).
    servers: dict[int, tuple[dict[int, str], datetime | None]] = {}
    marks: dict[str, dict[int, datetime]] = {}
    try:
        for kind, project_id, owner in projects:
            if project_id == MOVED:
                _report_gone(ws, _entry(kind), project_id, owner, summary)
                continue
            if owner in clients.down:
                continue
            try:
                route = clients.route(owner)
                ls = clients.get(owner)
                if id(ls) not in servers:
                    users = _users(ls)
                    servers[id(ls)] = (users, ls.server_time)
                users, began = servers[id(ls)]
                if owner not in marks:
                    marks[owner] = {} if full else _load_marks(ws, route)
                _pull_project(ws, ls, route, kind, project_id, marks[owner], users, began, summary)
            except LabelStudioError as exc:
                summary.down.append(clients.fail(owner, exc))
    finally:
        clients.close()
    return summary


def _pull_project(
    ws: Workspace, ls: LabelStudioClient, route: Route, kind: str, project_id: int, marks: dict[int, datetime],
    users: dict[int, str], began: datetime | None, summary: PullSummary,
) -> None:
    owner = route.annotator
    params: dict[str, Any] = {"project": project_id, "fields": "all", "resolve_uri": "false"}
    if project_id in marks:
        params["query"] = _since_query(marks[project_id])
    reader = _TaskReader(ls, project_id, params, f"read the annotations of project {project_id}", PULL_PAGE)
    problems = len(summary.problems)
    try:
        # Label Studio reads the next page while we record this one.
        for ls_tasks in _ahead(reader.pages()):
            summary.tasks += len(ls_tasks)
            _pull_tasks(ws, _entry(kind), project_id, owner, ls_tasks, users, summary)
    except LabelStudioRequestError as exc:
        # The listing of a project deleted in Label Studio is a 404, not an empty page.
        if exc.status != 404 or _exists(ls, project_id):
            raise
        _report_gone(ws, _entry(kind), project_id, owner, summary)
        return
    summary.incremental += project_id in marks
    if route.own:
        # A note for the author's own copy names a task of the author's project; on servers of
        # one annotator each that task lives on another server, where this client must not write.
        for note in [b for b in summary.resend if b.annotation_id is None]:
            summary.resend.remove(note)
            summary.problems.append(f"{kind}: a label by someone other than {owner} on {route.server} (task {note.ls_task_id} "
                                    "of their own project was not told)")
    _send_back(ls, summary)
    for bad in reader.unreadable:
        summary.unreadable.append(_unreadable_line(kind, owner, bad, users))
    # A project with annotations left out, or tasks Label Studio could not send, keeps its
    # old watermark: they are read and reported again until they are fixed, never
    # forgotten after one summary.
    if began is not None and len(summary.problems) == problems and not reader.unreadable:
        _save_mark(ws, route, kind, project_id, began)

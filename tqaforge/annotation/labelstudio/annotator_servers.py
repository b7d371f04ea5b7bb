"""One Label Studio server per annotator: annotators blind to each other by isolation.

Label Studio's open-source edition gives every authenticated user every permission, and its
organisations leak (``/api/annotations/<id>``, ``/api/tasks/?project=``, ``PATCH
active_organization``): two people on one server can read and change each other's labels. So each
annotator gets a server of their own, with its own data directory and database in
``WORKSPACE/label-studio/annotators/SLUG/`` (laid out like the one-server ``label-studio/``:
``credentials.json``, pid file, log, database). The annotator is its only user; tqaforge keeps
that user's password (to pass on) and API token (to push and pull) in its ``credentials.json``.

Each server listens on loopback under its own host address, 127.0.0.2, 127.0.0.3, ... (browsers
keep cookies per host, not per port, so ana's session never reaches ben's server), on port
``[labelstudio] port`` + 1, + 2, ...; the address is drawn once, when the annotator is added, and
kept. :func:`start_servers` starts them in parallel, :func:`stop_servers` and
:func:`server_states` act on all of them or on those named. :func:`routes` tells the sync which
server holds whose tasks.

A workspace that labelled on its one server before (the earlier layout) moves with
:func:`migrate`: everything is pulled from the one server first, and only when every annotation
was read are the copies still waiting for a label handed to the annotators' own servers (the
next push sends them there). Until then push and pull to the annotators' servers refuse, so no
label is ever looked for on the wrong server.

>>> add_annotator_server(ws, "ana@lab.org", name="Ana").lines()  # doctest: +SKIP
>>> [r.line() for r in start_servers(ws)]  # doctest: +SKIP
"""

from __future__ import annotations

import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from sqlmodel import select

from tqaforge.annotation.labelstudio.annotators import AnnotatorAccount, check_email
from tqaforge.annotation.labelstudio.client import ClientSettings
from tqaforge.annotation.labelstudio.manage import (
    ANNOTATORS_DIR,
    AnnotatorServer,
    Credentials,
    StartResult,
    StopResult,
    configured_port,
    credentials_path,
    read_credentials,
    start,
    status,
    stop,
    write_credentials,
)
from tqaforge.annotation.labelstudio.server import LabelStudioError, http_url, new_password, new_token
from tqaforge.config import WorkspacePaths
from tqaforge.files import atomic_write_text
from tqaforge.ids import content_hash, labelstudio_annotator
from tqaforge.schemas.records import Annotation, AnnotationTask, LabelStudioPull, LabelStudioTaskCopy
from tqaforge.store import Workspace

if TYPE_CHECKING:
    from tqaforge.annotation.labelstudio.sync import Route

__all__ = [
    "Migration", "NewAnnotatorServer", "Started", "add_annotator_server", "annotator_servers", "migrate", "own_accounts",
    "login_lines", "routes", "select_servers", "start_servers", "stop_servers",
]

#: The first annotator listens on 127.0.0.2 (127.0.0.1 stays the workspace's own tools'), the
#: last possible one on 127.0.0.254.
FIRST_HOST = 2
LAST_HOST = 254
#: Written once the sync goes to the annotators' servers: at the first ``annotators add`` of a
#: workspace with nothing pushed yet, or by :func:`migrate`.
LAYOUT_NAME = "layout.json"
_MIGRATE = "tqaforge labelstudio migrate"


def _annotators_dir(ws: Workspace | Path) -> Path:
    root = ws if isinstance(ws, Path) else ws.root
    return WorkspacePaths(root.resolve()).label_studio / ANNOTATORS_DIR


def _slug(email: str) -> str:
    """A directory name for ``email``: readable, and unique by a short hash of the whole address."""
    readable = re.sub(r"[^a-z0-9]+", "-", email.lower()).strip("-")[:40]
    return f"{readable}-{content_hash({'annotator_server': email.lower()}, 6)}"


def _host_index(credentials: Credentials) -> int:
    """The last number of the server's host address (2 for 127.0.0.2)."""
    match = re.match(r"http://127\.0\.0\.(\d+):", credentials.url)
    return int(match.group(1)) if match else 0


def annotator_servers(ws: Workspace | Path) -> list[AnnotatorServer]:
    """The annotators' servers of the workspace, in the order they were added (by host address)."""
    directory = _annotators_dir(ws)
    if not directory.is_dir():
        return []
    found = []
    for entry in sorted(directory.iterdir()):
        if entry.is_dir() and not entry.is_symlink() and (entry / "credentials.json").is_file():
            server = AnnotatorServer(entry.parent.parent.parent, entry.name)
            credentials = read_credentials(server)
            if credentials is not None:
                found.append((_host_index(credentials), credentials.username.lower(), server))
    return [server for _, _, server in sorted(found, key=lambda item: (item[0], item[1]))]


def _login(server: AnnotatorServer) -> Credentials:
    credentials = read_credentials(server)
    if credentials is None:
        raise LabelStudioError(f"{credentials_path(server)} is missing", hint="add the annotator again: `tqaforge annotators add EMAIL`")
    return credentials


def select_servers(ws: Workspace | Path, annotators: Sequence[str] | None = None) -> list[AnnotatorServer]:
    """The servers of ``annotators`` (logins, any case; None: all of them). An unknown name is
    refused with the list of those known; a workspace with none says how to add one."""
    servers = annotator_servers(ws)
    if not servers:
        raise LabelStudioError("this workspace has no annotators with a Label Studio server of their own yet",
                               hint="add each: `tqaforge annotators add ana@lab.org --name Ana`")
    if not annotators:
        return servers
    by_login = {_login(server).username.lower(): server for server in servers}
    chosen, unknown = [], []
    for name in dict.fromkeys(a.strip() for a in annotators):
        server = by_login.get(name.lower())
        if server is None:
            unknown.append(name)
        elif server not in chosen:
            chosen.append(server)
    if unknown:
        raise LabelStudioError(f"no Label Studio server for {', '.join(map(repr, unknown))}",
                               hint=f"annotators with a server: {', '.join(sorted(by_login))}; add one with "
                               "`tqaforge annotators add EMAIL`")
    return chosen


# --- adding an annotator ---


@dataclass(frozen=True)
class NewAnnotatorServer:
    """An annotator just given a server: where it will listen and their login (with the password)."""

    server: AnnotatorServer
    credentials: Credentials = field(repr=False)

    def lines(self) -> list[str]:
        named = f" ({self.credentials.name})" if self.credentials.name else ""
        return [f"{self.credentials.username}{named} gets a Label Studio server of their own: {self.credentials.url}",
                f"log in with {self.credentials.username} and the password {self.credentials.password}",
                "(pass it on privately; `tqaforge labelstudio start` starts every annotator's server)"]


def _has_copies(ws: Workspace) -> bool:
    with ws.session() as s:
        return s.exec(select(LabelStudioTaskCopy.id).limit(1)).first() is not None


def layout_path(ws: Workspace | Path) -> Path:
    """``label-studio/annotators/layout.json``: present once sync goes to the annotators' servers."""
    return _annotators_dir(ws) / LAYOUT_NAME


def add_annotator_server(ws: Workspace, email: str, *, name: str | None = None, password: str | None = None) -> NewAnnotatorServer:
    """Give ``email`` a Label Studio server of their own: the next free loopback address, a port,
    a random password and API token, written to its ``credentials.json`` (the server's database
    is made at its first start, with this login as its only user). An e-mail that has a server
    already is refused."""
    email = check_email(email)
    servers = annotator_servers(ws)
    taken = {_host_index(_login(server)) for server in servers}
    if any(_login(server).username.lower() == email.lower() for server in servers):
        raise LabelStudioError(f"{email} already has a Label Studio server", hint="`tqaforge labelstudio status` shows it")
    index = next((i for i in range(FIRST_HOST, LAST_HOST + 1) if i not in taken), None)
    if index is None:
        raise LabelStudioError(f"no loopback address left for {email}: {LAST_HOST - FIRST_HOST + 1} annotators have one")
    port = configured_port(ws) + index - FIRST_HOST + 1
    server = AnnotatorServer(ws.root.resolve(), _slug(email))
    for directory in (_annotators_dir(ws).parent, _annotators_dir(ws)):  # nobody else lists who labels here
        directory.mkdir(exist_ok=True, mode=0o700)
        directory.chmod(0o700)
    credentials = Credentials(url=http_url(f"127.0.0.{index}", port), username=email, password=password or new_password(),
                              token=new_token(), name=(name or "").strip())
    write_credentials(server, credentials)
    if not layout_path(ws).exists() and not _has_copies(ws):
        _write_layout(ws, {"moved": False, "copies": 0})  # nothing was ever pushed: nothing to move
    return NewAnnotatorServer(server, credentials)


def _write_layout(ws: Workspace | Path, facts: dict[str, Any]) -> None:
    atomic_write_text(layout_path(ws), json.dumps({"layout": "one server per annotator",
                                                   "since": datetime.now(timezone.utc).isoformat(), **facts},
                                                  indent=2) + "\n", mode=0o600)


def moved(ws: Workspace | Path) -> bool:
    """True when the sync goes to the annotators' servers (nothing left on a one-server layout)."""
    return layout_path(ws).is_file()


# --- start, stop, status ---


@dataclass(frozen=True)
class Started:
    """One server's start: what :func:`~.manage.start` said, or why it failed; seconds it took,
    and the memory of its process tree once it answers."""

    annotator: str
    url: str
    seconds: float
    result: StartResult | None = None
    error: str | None = None
    rss_mb: float | None = None
    name: str = ""
    server: AnnotatorServer | None = None

    def line(self) -> str:
        if self.error is not None:
            return f"{self.annotator}: NOT started: {self.error}"
        assert self.result is not None
        if self.result.already_running:
            return f"{self.annotator}: already running at {self.url} (pid {self.result.pid})"
        memory = f", {self.rss_mb:.0f} MB" if self.rss_mb is not None else ""
        return f"{self.annotator}: {self.url} (pid {self.result.pid}; started in {self.seconds:.0f} s{memory})"


def start_servers(ws: Workspace | Path, annotators: Sequence[str] | None = None, *, wait_s: float = 300.0,
                  on_note: Callable[[str], None] | None = None,
                  on_ready: Callable[[Started], None] | None = None) -> list[Started]:
    """Start the servers of ``annotators`` (None: all) in parallel and wait for each; a server that
    fails to start is reported in its :class:`Started`, the others still start. ``on_ready`` hears
    of each as it is done."""
    servers = select_servers(ws, annotators)

    def one(server: AnnotatorServer) -> Started:
        credentials = _login(server)
        began = time.monotonic()
        try:
            result = start(server, wait_s=wait_s, on_note=on_note)
        except LabelStudioError as exc:
            done = Started(credentials.username, credentials.url, time.monotonic() - began, error=str(exc),
                           name=credentials.name, server=server)
        else:
            done = Started(credentials.username, credentials.url, time.monotonic() - began, result=result,
                           rss_mb=status(server).rss_mb, name=credentials.name, server=server)
        if on_ready is not None:
            on_ready(done)
        return done

    with ThreadPoolExecutor(max(len(servers), 1), thread_name_prefix="labelstudio-start") as pool:
        return list(pool.map(one, servers))


def login_lines(results: list[Started]) -> list[str]:
    """Each annotator's URL and login, for the person who runs the project to pass on (the
    password itself only with `status --show-secrets`)."""
    lines = ["each annotator logs in to their own server (nobody else's account exists there):"]
    for done in results:
        if done.error is None:
            named = f" ({done.name})" if done.name else ""
            lines.append(f"  {done.annotator}{named}:  {done.url}/user/login/   login {done.annotator}")
    lines.append("  passwords: `tqaforge labelstudio status --show-secrets`; stop them with `tqaforge labelstudio stop`")
    return lines


def stop_servers(ws: Workspace | Path, annotators: Sequence[str] | None = None, *, timeout: float = 20.0) -> list[StopResult]:
    """Stop the servers of ``annotators`` (None: all), in parallel."""
    servers = select_servers(ws, annotators)
    with ThreadPoolExecutor(max(len(servers), 1), thread_name_prefix="labelstudio-stop") as pool:
        return list(pool.map(lambda server: stop(server, timeout=timeout), servers))


def own_accounts(ws: Workspace | Path) -> list[AnnotatorAccount]:
    """Every annotator with a server of their own, as ``annotators list`` shows accounts."""
    accounts = []
    for server in annotator_servers(ws):
        credentials = _login(server)
        accounts.append(AnnotatorAccount(email=credentials.username, user_id=0, name=credentials.name,
                                         annotator_id=labelstudio_annotator(credentials.username), url=credentials.url))
    return accounts


# --- where the sync goes ---


def routes(ws: Workspace, **options: Any) -> dict[str, Route]:
    """{annotator login: :class:`~.sync.Route`} to every annotator's own server (running or not:
    a server that is down is reported by name when the sync gets to it). Refused while the
    workspace still has labels on its one-server layout (:func:`migrate` first)."""
    from tqaforge.annotation.labelstudio.sync import Route

    servers = select_servers(ws)
    if not moved(ws):
        raise LabelStudioError(
            "this workspace's tasks are still on its one Label Studio server, not on the annotators' own servers",
            hint=f"`{_MIGRATE}` pulls every label from the one server, then hands what is left to the annotators' "
            "servers (with the one server running; or --url for a shared one)")
    found = {}
    for server in servers:
        credentials = _login(server)
        found[credentials.username] = Route(
            annotator=credentials.username, settings=ClientSettings(url=credentials.url, token=credentials.token, **options),
            marks=server.directory / "pulls.json")
    return found


@dataclass
class Migration:
    """What :func:`migrate` did: labels pulled from the one server, copies handed over per annotator."""

    pulled: int = 0
    already: bool = False
    copies: dict[str, int] = field(default_factory=dict)  # annotator -> copies moved
    waiting: dict[str, int] = field(default_factory=dict)  # annotator -> of which still waiting for their label
    pull_lines: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        if self.already:
            return ["this workspace already syncs with the annotators' own servers: nothing to move"]
        lines = [f"pulled from the one server first: {line}" for line in self.pull_lines]
        lines.append(f"moved {sum(self.copies.values())} task copies to the annotators' own servers "
                     f"({self.pulled} new labels pulled before moving; every label stays in the store)")
        lines += [f"  {who}: {n} copies, {self.waiting.get(who, 0)} waiting for their label" for who, n in sorted(self.copies.items())]
        lines.append("next: `tqaforge labelstudio start`, then `tqaforge labelstudio push KIND` sends the waiting "
                     "tasks to each annotator's server; the one server's data stays where it was (stop it when done)")
        return lines


def migrate(ws: Workspace, old: ClientSettings) -> Migration:
    """Move a workspace from its one Label Studio server (``old``) to the annotators' own servers.

    First every annotation is pulled from ``old`` (all of it, not only what changed); only when
    that pull read everything (no task the server fails to send, no project gone with tasks
    waiting) are the copies handed over: each copy is marked :data:`MOVED` (in no project yet),
    so the next push sends every task still waiting for its annotator's label to their own
    server and nothing already labelled again. Every annotator with copies must have a server
    first. Idempotent: once moved, it does nothing."""
    from tqaforge.annotation.labelstudio.sync import MOVED, SOURCE, pull

    if moved(ws):
        return Migration(already=True)
    with ws.session() as s:
        holders = sorted(set(s.exec(select(LabelStudioTaskCopy.annotator)).all()))
    have = {_login(server).username.lower() for server in annotator_servers(ws)}
    missing = [who for who in holders if who.lower() not in have]
    if missing:
        raise LabelStudioError(f"{', '.join(missing)} labelled on the one server but have no server of their own; nothing moved",
                               hint="give each one: `tqaforge annotators add EMAIL`, then run the migration again")
    summary = pull(ws, old, full=True)
    if summary.incomplete or summary.down:
        raise LabelStudioError(f"the pull before moving did not read everything ({summary.incomplete or summary.down}); nothing moved",
                               hint="fix what the pull reports (`tqaforge labelstudio pull --full`), then migrate again")
    result = Migration(pulled=summary.recorded, pull_lines=summary.lines())
    with ws.session() as s:
        labelled = set(s.exec(select(Annotation.task_id, Annotation.annotator).where(Annotation.source == SOURCE)).all())
        for copy in s.exec(select(LabelStudioTaskCopy)).all():
            result.copies[copy.annotator] = result.copies.get(copy.annotator, 0) + 1
            if (copy.task_id, labelstudio_annotator(copy.annotator)) not in labelled:
                result.waiting[copy.annotator] = result.waiting.get(copy.annotator, 0) + 1
            copy.ls_project_id, copy.ls_task_id = MOVED, MOVED
            s.add(copy)
        for task in s.exec(select(AnnotationTask).where(AnnotationTask.ls_project_id.is_not(None))).all():  # type: ignore[union-attr]
            task.ls_project_id, task.ls_task_id = None, None
            s.add(task)
        for mark in s.exec(select(LabelStudioPull)).all():  # the one server's watermarks mean nothing on the others
            s.delete(mark)
        s.commit()
    _write_layout(ws, {"moved": True, "copies": sum(result.copies.values()), "labels_pulled_before": summary.recorded,
                       "from": old.display_url})
    return result

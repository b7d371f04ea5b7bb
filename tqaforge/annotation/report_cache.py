"""The agreement report kept on disk between processes, for the app's Agreement page.

Computing the report reads every label (a second or more at tens of thousands); the page shows
it on every first visit, after every restart of the app. :func:`cached_agreement_report` keeps
the last report computed for each choice of settings in ``WORKSPACE/.cache/agreement/`` and
gives it back while nothing it was computed from has changed; otherwise it computes the report
again and replaces the file.

**What "changed" means** (:func:`report_inputs`): a few aggregates, each one indexed or one
scan, over every table the report reads: the labels (how many, the newest time and id, how
many carry a person), the tasks, the people (every row: their names and merges), the
questions (subtypes: how many and the last update), answers (which holds which status: gold
for blind re-answering), variants, and the adjudications (how many, of each status, the last
decision). A label added, a person's decision, a merge of two people, a question re-typed
each change them, so a page never shows figures from before them. The file also names what
it was computed with: the workspace (its folder and database), the settings, the format of
the file and the code of the report (a hash of its modules' source), so a file copied from
another workspace, left by another version of tqaforge or damaged is not read: it is
computed again and replaced. Nothing in the file is executed (JSON, never pickle).

Writers replace the file atomically (:func:`tqaforge.files.atomic_write_text`): two processes
computing the same report at once each write a whole file, and a reader sees one or the other.
A report is stored only when the inputs did not change while it was computed.
"""

from __future__ import annotations

import hashlib
import json
import logging
from functools import cache
from pathlib import Path
from typing import Any, Callable

from sqlalchemy import func, select

from tqaforge import __version__
from tqaforge.annotation.report import AgreementReport, Settings, agreement_report
from tqaforge.files import atomic_write_text, modules_source_hash
from tqaforge.schemas.records import Adjudication, Annotation, AnnotationTask, Annotator, Answer, Question, Variant
from tqaforge.store import Workspace

#: The layout of a cache file; a file of another format is not read.
CACHE_FORMAT = 1

#: The modules whose code makes the report (their source is hashed into the key).
_REPORT_MODULES = (
    "tqaforge.annotation.agreement", "tqaforge.annotation.bootstrap", "tqaforge.annotation.kinds",
    "tqaforge.annotation.rater_data", "tqaforge.annotation.report", "tqaforge.annotation.report_cache",
    "tqaforge.annotation.shapes", "tqaforge.labels", "tqaforge.people", "tqaforge.queries", "tqaforge.tables.matching",
)

_log = logging.getLogger(__name__)


@cache
def _code_hash() -> str:
    """A hash of the source of the modules that compute the report (once per process)."""
    return modules_source_hash(_REPORT_MODULES, salt=__version__)


def report_inputs(ws: Workspace) -> dict[str, Any]:
    """A fingerprint of everything the agreement report reads, cheap to take (module docs):
    equal fingerprints, equal reports (for the same settings and code)."""
    def stamp(value: Any) -> Any:
        # As JSON keeps it (the inputs are compared with the ones stored): counts, times as text.
        return value if value is None or isinstance(value, int) else str(value)

    # Core columns of the tables (not the records): no ORM statement to set up on a page's first run.
    ann, task, question, variant, answer, adj, person = (
        m.__table__.c for m in (Annotation, AnnotationTask, Question, Variant, Answer, Adjudication, Annotator)  # type: ignore[attr-defined,union-attr]
    )
    with ws.session() as s:
        conn = s.connection()

        def one(*columns: Any) -> list[Any]:
            return [stamp(v) for v in conn.execute(select(*columns)).one()]  # one scan of each table

        def by_status(status: Any) -> list[list[Any]]:
            return sorted([str(st), int(n)] for st, n in conn.execute(select(status, func.count()).group_by(status)))

        labels = one(func.count(ann.id), func.max(ann.created_at), func.max(ann.id), func.count(ann.annotator_id))
        tasks = one(func.count(task.id))
        questions = one(func.count(question.id), func.max(question.updated_at))
        variants = one(func.count(variant.id), func.max(variant.created_at))
        # Which answer holds which status, not only how many: a person's verification may move two
        # answers' statuses at once and leave every count as it was.
        statuses = hashlib.sha256()
        for row in conn.execute(select(answer.id, answer.status).order_by(answer.id)):
            statuses.update(f"{row[0]}\0{row[1]}\n".encode())
        answers = [by_status(answer.status), *one(func.max(answer.created_at)), statuses.hexdigest()]
        adjudications = [by_status(adj.status), *one(func.max(adj.decided_at), func.max(adj.created_at))]
        people = hashlib.sha256(json.dumps(sorted(
            [str(i), str(n), str(m), str(a)] for i, n, m, a in conn.execute(select(person.id, person.name, person.merged_into, person.aliases))
        )).encode()).hexdigest()
    return {
        "labels": labels, "tasks": tasks, "questions": questions, "answers": answers, "variants": variants,
        "adjudications": adjudications, "people": people,
    }


def _key(ws: Workspace, settings: Settings) -> dict[str, Any]:
    """What a cached report must have been computed with, besides its inputs."""
    return {
        "format": CACHE_FORMAT,
        "code": _code_hash(),
        "workspace": str(ws.root.resolve()),
        "database": ws.database_url,  # masked: the file holds no password
        "settings": {
            **settings.boot(), "exclude_sources": list(settings.exclude_sources), "match_rules": list(settings.match_rules),
        },
    }


def cache_path(ws: Workspace, settings: Settings) -> Path:
    """The file of the cached report for these settings (one per settings: replaced, never piled up)."""
    name = hashlib.sha256(json.dumps(_key(ws, settings), sort_keys=True).encode()).hexdigest()[:24]
    return ws.paths.cache / "agreement" / f"report-{name}.json"


def read_cached_report(ws: Workspace, settings: Settings, inputs: dict[str, Any]) -> AgreementReport | None:
    """The stored report for these settings if it was computed from ``inputs``; None when there is
    none, or it is damaged, or from another workspace, format, version or inputs."""
    path = cache_path(ws, settings)
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(stored, dict) or stored.get("key") != _key(ws, settings) or stored.get("inputs") != inputs:
            return None
        return AgreementReport.from_dict(stored["report"])
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        _log.warning("agreement report cache %s not read (%s: %s): computing the report again", path, type(exc).__name__, exc)
        return None


def cached_agreement_report(
    ws: Workspace,
    settings: Settings = Settings(),
    *,
    inputs: dict[str, Any] | None = None,
    compute: Callable[[Workspace, Settings], AgreementReport] = lambda ws, settings: agreement_report(ws, settings=settings),
) -> AgreementReport:
    """The agreement report of every kind, read from the cache when its inputs are unchanged
    (``inputs``: :func:`report_inputs`, taken now when not given), else computed and stored."""
    if inputs is None:
        inputs = report_inputs(ws)
    found = read_cached_report(ws, settings, inputs)
    if found is not None:
        return found
    report = compute(ws, settings)
    if report_inputs(ws) == inputs:  # nothing changed while it was computed: the report is of these inputs
        path = cache_path(ws, settings)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            text = json.dumps({"key": _key(ws, settings), "inputs": inputs, "report": report.as_dict()}, ensure_ascii=False)
            atomic_write_text(path, text + "\n")
        except OSError as exc:  # a cache that cannot be written costs time, not the page
            _log.warning("agreement report cache %s not written: %s", path, exc)
    return report

"""Findings that send items back to a person: suspect gold to the adjudication queue, with its evidence.

The health report (issue 28) finds items whose gold looks wrong: a significantly negative
discrimination (the strong systems fail the item together while weak ones pass; item analysis)
or a Dawid-Skene estimate that disagrees with the adjudicated label (label quality). This module
files such findings; the health layer turns its report into plain :class:`SuspectRequest` values
(annotation may not import evaluate or health), so anything else can file findings the same way:

>>> sent = send_to_adjudication(ws, [SuspectRequest("q-id", "wrong: sysA/DP (0.91), ...")])  # doctest: +SKIP
>>> print("\\n".join(sent.lines()))                                                         # doctest: +SKIP

What a request names:

- ``target="item"``: a release's base item, whose id is the workspace's question id. The gold is
  the question's trusted answer (:func:`~tqaforge.queries.trusted_answers`, what a release
  takes), and the task is that answer's ``answer_verification`` task, created (with no label)
  when the gold was never verified;
- ``target="task"``: an annotation task (the label-quality finding names the task whose
  adjudicated label the estimate disputes).

Each becomes one :class:`~tqaforge.schemas.records.AdjudicationFlag` per task and source, and
**a flag only adds a queue entry, it never changes a label**:

- nobody decided the task, or a rule did (unanimous, majority): the flag is ``open`` and the task
  shows in :func:`~tqaforge.annotation.adjudication.adjudication_queue` with the evidence, beside
  the items whose annotators disagree. The rule's label stays as it is (the release keeps its
  gold) until a person decides with :func:`~tqaforge.annotation.adjudication.resolve`, which
  settles the flag;
- a person already decided the task: the flag is stored ``settled`` at once ("flagged, settled by
  NAME on DATE") and shown as evidence only. A person's decision is final here as everywhere
  (DESIGN.md, "People outrank machines"); who wants to look again reads the flag
  (:func:`adjudication_flags`) and overrides with ``agreement resolve`` themselves;
- the workspace does not know the item (another workspace's release, a question without gold
  any more) or the task: reported as ``unknown``, never an error for the whole run.

Idempotent: sending the same findings again adds nothing (the flag's id is a hash of the task and
the source; the first evidence is kept). Two runs at once both succeed: tasks and flags are
inserted with ``ON CONFLICT DO NOTHING`` (:func:`tqaforge.store.insert_new`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Mapping, Sequence

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from tqaforge.annotation.kinds import KINDS
from tqaforge.annotation.verification import CORRECTED_METHOD, VERIFICATION_KIND
from tqaforge.errors import AdjudicationError
from tqaforge.ids import adjudication_flag_id, annotation_task_id
from tqaforge.printable import escape_controls, has_controls
from tqaforge.queries import CHECKED_BY_PEOPLE, Page, check_window, trusted_answers
from tqaforge.schemas.enums import AdjudicationMethod, AdjudicationStatus, FlagStatus
from tqaforge.schemas.records import Adjudication, AdjudicationFlag, AnnotationTask, Answer, Question, utcnow
from tqaforge.store import Workspace, insert_new

__all__ = [
    "ITEM_ANALYSIS", "LABEL_QUALITY", "MAX_EVIDENCE_CHARS", "FlagView", "SentFlag", "SentSuspects", "SuspectRequest",
    "adjudication_flags", "clean_evidence", "flag_view", "send_to_adjudication", "settle_flags", "task_flags",
]

#: ``AdjudicationFlag.source`` of a negative discrimination (:mod:`tqaforge.evaluate.items`).
ITEM_ANALYSIS = "item_analysis"
#: ``AdjudicationFlag.source`` of a Dawid-Skene disagreement (:mod:`tqaforge.annotation.label_quality`).
LABEL_QUALITY = "label_quality"
#: Evidence longer than this is cut (a person reads a paragraph, not a file); the cut is said.
MAX_EVIDENCE_CHARS = 4000
_MAX_ID = 64  # ids of questions and tasks are at most this long: a longer reference names nothing here

QUEUED, ALREADY_QUEUED, SETTLED, ALREADY_SETTLED, UNKNOWN = "queued", "already queued", "settled by a person", "already settled", "unknown"
OUTCOMES = (QUEUED, ALREADY_QUEUED, SETTLED, ALREADY_SETTLED, UNKNOWN)


@dataclass(frozen=True)
class SuspectRequest:
    """One finding to send to a person: ``reference`` (a release item id, or a task id with
    ``target="task"``), the ``evidence`` a person reads first, the ``source`` of the finding,
    the ``release`` it was found in, and JSON ``details`` (r, p, systems right and wrong, a posterior)."""

    reference: str
    evidence: str
    source: str = ITEM_ANALYSIS
    target: Literal["item", "task"] = "item"
    release: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SentFlag:
    """What became of one request: ``outcome`` is one of ``OUTCOMES``; ``detail`` says why or by whom."""

    reference: str
    source: str
    outcome: str
    task_id: str | None = None
    detail: str = ""

    def line(self) -> str:
        task = f" (task {self.task_id[:12]})" if self.task_id else ""
        return escape_controls(f"{self.outcome}: {self.reference[:64]}{task}{': ' + self.detail if self.detail else ''}", lines=False)


@dataclass(frozen=True)
class SentSuspects:
    """What :func:`send_to_adjudication` did, request by request; ``lines()`` and ``as_dict()`` for the CLI."""

    flags: tuple[SentFlag, ...]

    def of(self, outcome: str) -> list[SentFlag]:
        return [f for f in self.flags if f.outcome == outcome]

    def counts(self) -> dict[str, int]:
        return {o: len(self.of(o)) for o in OUTCOMES}

    def lines(self) -> list[str]:
        if not self.flags:
            return ["no suspect gold to send to adjudication"]
        c = self.counts()
        head = (f"suspect gold sent to adjudication: {c[QUEUED]} queued, {c[ALREADY_QUEUED]} already queued, "
                f"{c[SETTLED] + c[ALREADY_SETTLED]} settled by a person (evidence only), {c[UNKNOWN]} unknown to the workspace")
        return [head, *("  " + f.line() for f in self.flags)]

    def as_dict(self) -> dict[str, Any]:
        return {"counts": self.counts(), "flags": [f.__dict__ for f in self.flags]}


def clean_evidence(text: object) -> str:
    """Evidence as stored: text (anything else is shown as text), control characters escaped (a NUL
    cannot go into PostgreSQL text; an escape sequence must not reach a terminal), at most
    :data:`MAX_EVIDENCE_CHARS` characters with the cut said."""
    text = escape_controls(text if isinstance(text, str) else repr(text))
    if len(text) > MAX_EVIDENCE_CHARS:
        text = text[:MAX_EVIDENCE_CHARS] + f" ... ({len(text) - MAX_EVIDENCE_CHARS} more characters cut)"
    return text


def _plain(value: Any, depth: int = 0) -> Any:
    """``details`` as JSON both databases take: non-finite numbers as None, keys as text, nothing deeper than 8."""
    if depth > 8:
        return None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (bool, int)) or value is None:
        return value
    if isinstance(value, str):
        return clean_evidence(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in value[:100]]
    return repr(value)[:200]


def _person(s: Session, task_ids: Sequence[str]) -> Adjudication | None:
    """A person's decision on any of ``task_ids`` (the latest), or None."""
    rows = s.exec(select(Adjudication).where(
        col(Adjudication.task_id).in_(list(task_ids)), Adjudication.method == AdjudicationMethod.PERSON.value,
        Adjudication.status == AdjudicationStatus.RESOLVED.value)).all()
    return max(rows, key=lambda r: (r.decided_at or r.created_at, r.id), default=None)


def _item_task(s: Session, reference: str) -> tuple[str | None, str, Adjudication | None]:
    """The task a release item's gold is checked on, why not (when None), and a person's decision on the gold."""
    question = s.get(Question, reference)
    if question is None:
        return None, "no question with this id in the workspace (a release of another workspace?)", None
    gold = trusted_answers(s, [question.id], at_least=CHECKED_BY_PEOPLE).get(question.id)
    if gold is None:
        return None, "the question has no gold answer in the workspace any more (rejected since the release?)", None
    task_id = annotation_task_id(VERIFICATION_KIND, "answer", gold.id)
    settling = [task_id]
    if gold.method == CORRECTED_METHOD:
        # A people's correction: the decision that made it is on the verification task of the
        # answer it replaced (one of the question's other answers).
        others = s.exec(select(Answer.id).where(Answer.question_id == question.id, Answer.id != gold.id)).all()
        settling += [annotation_task_id(VERIFICATION_KIND, "answer", a) for a in others]
    _ensure_task(s, task_id, gold.id)
    return task_id, "", _person(s, settling)


def _ensure_task(s: Session, task_id: str, answer_id: str) -> None:
    """The gold's verification task, created without any label when it was never verified. In a
    savepoint: a run at the same moment may create it first (then it is simply there)."""
    if s.get(AnnotationTask, task_id) is not None:
        return
    try:
        with s.begin_nested():
            s.add(AnnotationTask(id=task_id, kind=VERIFICATION_KIND, target_type="answer", target_id=answer_id))
    except IntegrityError:
        if s.get(AnnotationTask, task_id) is None:
            raise


def _task(s: Session, reference: str) -> tuple[str | None, str, Adjudication | None]:
    task = s.get(AnnotationTask, reference)
    if task is None:
        return None, "no annotation task with this id in the workspace", None
    spec = KINDS.get(task.kind)
    if spec is None or not spec.adjudicated:
        return None, f"task of kind {task.kind}, which is not adjudicated", None
    return task.id, "", _person(s, [task.id])


def _when(moment: datetime | None) -> str:
    return moment.date().isoformat() if moment is not None else "an unknown date"


def _send_one(s: Session, r: SuspectRequest) -> SentFlag:
    reference = r.reference if isinstance(r.reference, str) else repr(r.reference)
    source = escape_controls(str(r.source), lines=False)[:64] or ITEM_ANALYSIS
    if not reference or len(reference) > _MAX_ID or has_controls(reference, lines=False):
        # Ids are short printable hashes; a NUL would not even reach PostgreSQL as a parameter.
        return SentFlag(reference, source, UNKNOWN, detail="not an id of this workspace")
    if r.target == "item":
        task_id, why, person = _item_task(s, reference)
    elif r.target == "task":
        task_id, why, person = _task(s, reference)
    else:
        return SentFlag(reference, source, UNKNOWN, detail=f"unknown target {r.target!r} (item or task)")
    if task_id is None:
        return SentFlag(reference, source, UNKNOWN, detail=why)
    flag_id = adjudication_flag_id(task_id, source)
    held = s.get(AdjudicationFlag, flag_id)
    if held is None:
        status = FlagStatus.SETTLED if person is not None else FlagStatus.OPEN
        inserted = insert_new(s, AdjudicationFlag, [{
            "id": flag_id, "task_id": task_id, "source": source, "reference": reference,
            "release": None if r.release is None else escape_controls(str(r.release), lines=False)[:200],
            "evidence": clean_evidence(r.evidence), "details": _plain(dict(r.details)), "status": status.value,
            "settled_by": person.decided_by if person is not None else None,
            "settled_at": (person.decided_at or person.created_at) if person is not None else None, "created_at": utcnow(),
        }])
        if inserted:
            if person is not None:
                return SentFlag(reference, source, SETTLED, task_id,
                                f"flagged, settled by {person.decided_by} on {_when(person.decided_at)}: evidence only, their label stands")
            return SentFlag(reference, source, QUEUED, task_id)
        held = s.get(AdjudicationFlag, flag_id)  # another run filed it a moment ago
        assert held is not None
    if held.status == FlagStatus.SETTLED.value:
        return SentFlag(reference, source, ALREADY_SETTLED, task_id, f"settled by {held.settled_by} on {_when(held.settled_at)}")
    return SentFlag(reference, source, ALREADY_QUEUED, task_id, f"queued on {_when(held.created_at)}")


def send_to_adjudication(ws: Workspace, requests: Sequence[SuspectRequest]) -> SentSuspects:
    """File each request as an adjudication flag (module docs): queued for a person, recorded as
    settled when a person already decided, or reported unknown. Changes no label; idempotent."""
    if isinstance(requests, (str, bytes)) or not all(isinstance(r, SuspectRequest) for r in requests):
        raise AdjudicationError("send_to_adjudication takes a list of SuspectRequest", hint="build them from the health report")
    with ws.session() as s:
        return SentSuspects(tuple(_send_one(s, r) for r in requests))


@dataclass(frozen=True)
class FlagView:
    """One flag as the queue and the app show it."""

    task_id: str
    source: str
    reference: str
    release: str | None
    evidence: str
    status: str
    settled_by: str | None
    settled_at: datetime | None
    created_at: datetime

    def line(self) -> str:
        """"suspect gold (item_analysis, release X): EVIDENCE", with who settled it when they did."""
        where = f", release {self.release}" if self.release else ""
        settled = f" [flagged, settled by {self.settled_by} on {_when(self.settled_at)}]" if self.status == FlagStatus.SETTLED.value else ""
        return escape_controls(f"suspect gold ({self.source}{where}){settled}: {self.evidence}", lines=False)


def flag_view(row: AdjudicationFlag) -> FlagView:
    return FlagView(row.task_id, row.source, row.reference, row.release, row.evidence, str(row.status), row.settled_by,
                    row.settled_at, row.created_at)


def task_flags(s: Session, task_ids: Sequence[str]) -> dict[str, list[FlagView]]:
    """The flags of ``task_ids`` by task, oldest first (open and settled: the queue shows both as evidence)."""
    out: dict[str, list[FlagView]] = {}
    ids = list(dict.fromkeys(task_ids))
    for start in range(0, len(ids), 500):
        rows = s.exec(select(AdjudicationFlag).where(col(AdjudicationFlag.task_id).in_(ids[start:start + 500]))
                      .order_by(col(AdjudicationFlag.created_at), col(AdjudicationFlag.id))).all()
        for row in rows:
            out.setdefault(row.task_id, []).append(flag_view(row))
    return out


def settle_flags(s: Session, task_id: str, *, by: str) -> int:
    """A person decided ``task_id``: its open flags are settled (called by ``resolve``); how many."""
    rows = s.exec(select(AdjudicationFlag).where(AdjudicationFlag.task_id == task_id,
                                                 AdjudicationFlag.status == FlagStatus.OPEN.value)).all()
    now = utcnow()
    for row in rows:
        row.status, row.settled_by, row.settled_at = FlagStatus.SETTLED, by, now
        s.add(row)
    return len(rows)


def adjudication_flags(ws: Workspace, *, status: str | None = None, limit: int = 50, offset: int = 0) -> Page[FlagView]:
    """Every flag (or those of ``status``: open, settled), newest first: what was sent and what
    became of it, the evidence of settled ones included."""
    if status is not None and status not in {s.value for s in FlagStatus}:
        raise AdjudicationError(f"unknown flag status {status!r}", hint=f"choose from {', '.join(s.value for s in FlagStatus)}")
    check_window(limit, offset)
    from sqlalchemy import func

    with ws.session() as s:
        where = [] if status is None else [AdjudicationFlag.status == status]
        total = s.exec(select(func.count()).select_from(AdjudicationFlag).where(*where)).one()
        rows = s.exec(select(AdjudicationFlag).where(*where)
                      .order_by(col(AdjudicationFlag.created_at).desc(), col(AdjudicationFlag.id)).offset(offset).limit(limit)).all()
        return Page([flag_view(r) for r in rows], int(total), offset, limit)

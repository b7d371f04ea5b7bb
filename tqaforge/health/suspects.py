"""Suspect gold from a health report, sent back to the workspace's adjudication queue (issue 28).

The report finds suspect gold twice: the item analysis (a significantly negative discrimination:
``items`` section, its ``adjudication_requests``) and label quality (a Dawid-Skene estimate that
disagrees with an adjudicated label: ``labels`` section). :func:`suspect_requests` turns both into
plain :class:`~tqaforge.annotation.reopen.SuspectRequest` values with their evidence, and
:func:`send_suspects` files them (:func:`~tqaforge.annotation.reopen.send_to_adjudication`: a
flag only adds a queue entry; a person's decision stays final and the finding is then kept as
evidence only; an item the workspace does not know is reported).

>>> sent = send_suspects(report, Path("my-bench"))    # doctest: +SKIP
>>> print("\\n".join(sent.lines()))                    # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from tqaforge.annotation.reopen import ITEM_ANALYSIS, LABEL_QUALITY, SentSuspects, SuspectRequest, send_to_adjudication
from tqaforge.errors import HealthError, TqaforgeError
from tqaforge.health.report import HealthReport

__all__ = ["send_suspects", "suspect_requests"]


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _item_request(release: str, raw: Mapping[str, Any]) -> SuspectRequest:
    r, p = _number(raw.get("discrimination")), _number(raw.get("p_negative"))
    evidence = f"negative discrimination (item analysis of release {release}): {raw.get('evidence', '')}"
    details = {"subtype": raw.get("subtype"), "discrimination": r, "p_negative": p,
               "right": list(raw.get("right") or ()), "wrong": list(raw.get("wrong") or ())}
    return SuspectRequest(str(raw.get("item_id", "")), evidence, ITEM_ANALYSIS, "item", release, details)


def _label_request(release: str, kind: str, raw: Mapping[str, Any]) -> SuspectRequest:
    given = raw.get("votes")
    votes: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    gp, ep = _number(raw.get("gold_posterior")), _number(raw.get("posterior"))
    how = f"{raw.get('method')} by {raw.get('decided_by')}" if raw.get("decided_by") else str(raw.get("method") or "?")
    evidence = (f"Dawid-Skene ({kind}): estimate {raw.get('estimate')} (posterior {ep if ep is None else round(ep, 3)}) "
                f"against the gold {raw.get('gold')} ({how}; posterior {gp if gp is None else round(gp, 3)}); votes "
                + ", ".join(f"{who}={v}" for who, v in sorted(votes.items())))
    details = {"kind": kind, "gold": raw.get("gold"), "gold_posterior": gp, "estimate": raw.get("estimate"), "posterior": ep,
               "votes": dict(votes)}
    return SuspectRequest(str(raw.get("task_id", "")), evidence, LABEL_QUALITY, "task", release, details)


def suspect_requests(report: HealthReport) -> list[SuspectRequest]:
    """The suspect gold of ``report`` (items, then labels) as requests with their evidence."""
    out: list[SuspectRequest] = []
    for section in report.sections:
        if section.name == "items":
            out += [_item_request(report.release, raw) for raw in section.data.get("adjudication_requests", ())
                    if isinstance(raw, Mapping)]
        elif section.name == "labels":
            for kind, kq in sorted((section.data.get("kinds") or {}).items()):
                out += [_label_request(report.release, kind, raw) for raw in (kq or {}).get("suspect_gold", ())
                        if isinstance(raw, Mapping)]
    return out


def send_suspects(report: HealthReport, workspace: Path) -> SentSuspects:
    """File the suspect gold of ``report`` in ``workspace``'s adjudication queue (module docs)."""
    from tqaforge.store import open_workspace

    requests = suspect_requests(report)
    try:
        ws = open_workspace(workspace)
    except TqaforgeError as exc:
        raise HealthError(f"cannot send suspect gold to {workspace}: {exc.args[0]}", hint=exc.hint) from None
    try:
        return send_to_adjudication(ws, requests)
    finally:
        ws.close()

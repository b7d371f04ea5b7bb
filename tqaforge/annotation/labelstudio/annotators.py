"""The people who label in Label Studio: ``tqaforge annotators add|list``.

An annotator is a Label Studio account in the admin's organisation. :func:`add_annotator` makes
one the way a person would: through the organisation's invitation link (the server accepts no
other sign-up), with a password drawn here, then names it. Accounts made with ``POST /api/users``
cannot log in on Label Studio 1.23, so the sign-up form is the only way that gives a working login.

The store never holds the e-mail on a label: an annotator is ``ls:`` and a hash of it
(:func:`tqaforge.ids.labelstudio_annotator`), the id every pulled
:class:`~tqaforge.schemas.records.Annotation` carries and a release shows.
:func:`annotator_progress` joins the server's accounts (e-mails) with the store's copies and labels
per kind, so ``annotators list`` shows who has done what.

>>> new = add_annotator(settings, "ana@lab.org", name="Ana")  # doctest: +SKIP
>>> new.lines()  # doctest: +SKIP
['Label Studio account for ana@lab.org (Ana): ls:3f9a...', 'log in at http://127.0.0.1:8080 ...']
"""

from __future__ import annotations

import re
import secrets
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx
from sqlmodel import func, select

from tqaforge.annotation.labelstudio.client import ClientSettings, LabelStudioClient
from tqaforge.annotation.labelstudio.server import LabelStudioError
from tqaforge.ids import labelstudio_annotator
from tqaforge.schemas.records import Annotation, AnnotationTask, LabelStudioTaskCopy
from tqaforge.store import Workspace

__all__ = ["AnnotatorAccount", "AnnotatorProgress", "add_annotator", "annotator_progress", "list_accounts"]

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
SOURCE = "labelstudio"


@dataclass(frozen=True)
class AnnotatorAccount:
    """A Label Studio account: its e-mail, name, server user id and our pseudonymous id."""

    email: str
    user_id: int
    annotator_id: str
    name: str = ""
    password: str | None = field(default=None, repr=False)  # only right after add_annotator
    url: str = ""  # Label Studio's, without its password (ClientSettings.display_url)

    def lines(self) -> list[str]:
        """How to log in, for the person who made the account to pass on."""
        named = f" ({self.name})" if self.name else ""
        lines = [f"Label Studio account for {self.email}{named}: annotator id {self.annotator_id} (the only id the store keeps)"]
        if self.password is not None:
            lines += [f"log in at {self.url}/user/login/ with {self.email} and the password {self.password}",
                      "(pass it on privately; they can change it under Account & Settings)"]
        return lines


def check_email(email: str) -> str:
    """``email`` stripped; a clear error when it is no e-mail address (Label Studio logs in by e-mail)."""
    email = email.strip()
    if not _EMAIL.match(email):
        raise LabelStudioError(f"{email!r} is not an e-mail address", hint="Label Studio logins are e-mails, e.g. ana@lab.org")
    return email


def list_accounts(settings: ClientSettings, *, client: LabelStudioClient | None = None) -> list[AnnotatorAccount]:
    """Every account of the server's organisation but the admin whose token this is, by e-mail."""
    own = client is None
    ls = client or LabelStudioClient(settings)
    try:
        me = ls.request("GET", "/api/current-user/whoami", what="read the admin account")
        accounts = []
        for user in ls.pages("/api/users/", what="list the users", params={}, key="results"):
            email = user.get("email") or user.get("username")
            if not isinstance(user.get("id"), int) or not email or user["id"] == (me or {}).get("id"):
                continue
            name = " ".join(part for part in (user.get("first_name"), user.get("last_name")) if part)
            accounts.append(AnnotatorAccount(email=str(email), user_id=user["id"], annotator_id=labelstudio_annotator(str(email)),
                                             name=name, url=settings.display_url))
    finally:
        if own:
            ls.close()
    return sorted(accounts, key=lambda a: a.email.lower())


def _sign_up(settings: ClientSettings, invite: str, email: str, password: str) -> None:
    """Fill in the invitation sign-up form as a browser would (CSRF cookie and field included)."""
    where = f"{settings.display_url}/user/signup/"  # shown; the requests go to base_url
    try:
        with httpx.Client(base_url=settings.base_url, follow_redirects=False, timeout=settings.timeout) as browser:
            page = browser.get("/user/signup/", params={"token": invite})
            found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
            csrf = found.group(1) if found else browser.cookies.get("csrftoken") or ""
            reply = browser.post("/user/signup/", params={"token": invite},
                                 data={"email": email, "password": password, "csrfmiddlewaretoken": csrf},
                                 headers={"Referer": f"{settings.base_url}/user/signup/"})
    except httpx.TransportError as exc:
        raise LabelStudioError(f"could not sign {email} up at {where}: {settings.redact(f'{exc.__class__.__name__}: {exc}')}",
                               hint="is Label Studio running? `tqaforge labelstudio status`") from None
    if reply.status_code != 302:
        # The form comes back with the reason in it (a weak password, a taken e-mail, ...).
        reasons = re.findall(r'class="[^"]*(?:error|field_errors)[^"]*"[^>]*>\s*([^<]{3,200})', reply.text)
        reason = "; ".join(r.strip() for r in reasons) or f"HTTP {reply.status_code}"
        raise LabelStudioError(f"Label Studio did not sign {email} up: {reason}",
                               hint="an account may already have this e-mail (`tqaforge annotators list`)")


def add_annotator(settings: ClientSettings, email: str, *, name: str | None = None, password: str | None = None,
                  client: LabelStudioClient | None = None) -> AnnotatorAccount:
    """Make a Label Studio account for ``email`` in the admin's organisation (invitation sign-up),
    with ``password`` or a random one, named ``name``; the account with the password set.

    An e-mail that already has an account is refused (its labels and password stay as they are)."""
    email = check_email(email)
    own = client is None
    ls = client or LabelStudioClient(settings)
    try:
        if any(a.email.lower() == email.lower() for a in list_accounts(settings, client=ls)):
            raise LabelStudioError(f"{email} already has a Label Studio account",
                                   hint="`tqaforge annotators list` shows the accounts and their progress")
        invite = (ls.request("GET", "/api/invite", what="read the organisation's invitation link") or {}).get("token")
        if not isinstance(invite, str) or not invite:
            raise LabelStudioError("Label Studio gave no invitation token", hint="is this Label Studio 1.20 or later?")
        chosen = password or secrets.token_urlsafe(12)
        _sign_up(settings, invite, email, chosen)
        account = next((a for a in list_accounts(settings, client=ls) if a.email.lower() == email.lower()), None)
        if account is None:
            raise LabelStudioError(f"Label Studio accepted the sign-up of {email} but does not list the account",
                                   hint="look under Organization in Label Studio; run the command again")
        if name:
            first, _, last = name.strip().partition(" ")
            ls.request("PATCH", f"/api/users/{account.user_id}/", json={"first_name": first, "last_name": last},
                       what=f"name the account of {email}")
    finally:
        if own:
            ls.close()
    return AnnotatorAccount(email=account.email, user_id=account.user_id, annotator_id=account.annotator_id,
                            name=(name or "").strip(), password=chosen, url=settings.display_url)


@dataclass
class AnnotatorProgress:
    """Per annotator and kind: task copies pushed to them, and tasks they have labelled (pulled)."""

    #: email, name, annotator_id, kind, assigned, labelled, and gone: their projects of the kind
    #: that were deleted in Label Studio with tasks still waiting for their label in them.
    rows: list[dict[str, Any]] = field(default_factory=list)
    accounts: int = 0

    def lines(self) -> list[str]:
        if not self.rows:
            return [f"{self.accounts} annotators; nothing pushed to them yet (`tqaforge labelstudio push KIND`)"
                    if self.accounts else "no annotators yet: `tqaforge annotators add EMAIL`"]
        width = max(len(r["email"]) for r in self.rows)
        lines = [f"{'annotator':<{width}}  {'id':<19}  {'kind':<22}  labelled / assigned"]
        for r in self.rows:
            share = f"{100 * r['labelled'] / r['assigned']:.0f}%" if r["assigned"] else "-"
            gone = (f"  project {', '.join(map(str, r['gone']))} deleted in Label Studio with tasks waiting: "
                    f"`tqaforge labelstudio push {r['kind']} -a {r['email']}` sends them again") if r.get("gone") else ""
            lines.append(f"{r['email']:<{width}}  {r['annotator_id']:<19}  {r['kind'] or '-':<22}  "
                         f"{r['labelled']:>5} / {r['assigned']:<5} {share}{gone}")
        return lines

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def annotator_progress(
    ws: Workspace, accounts: list[AnnotatorAccount], gone: dict[tuple[str, str], list[int]] | None = None,
) -> AnnotatorProgress:
    """Join ``accounts`` (from :func:`list_accounts`) with the store: per annotator and kind, the
    copies pushed to them and the tasks with at least one label of theirs pulled from Label Studio.
    An account with nothing pushed gets one row with kind None. ``gone`` {(annotator, kind):
    project ids} (:func:`~tqaforge.annotation.labelstudio.sync.missing_projects`) marks the rows
    whose projects were deleted in Label Studio."""
    gone_by = {(who.lower(), kind): pids for (who, kind), pids in (gone or {}).items()}
    with ws.session() as s:
        assigned = Counter({(who.lower(), kind): n for who, kind, n in s.exec(
            select(LabelStudioTaskCopy.annotator, LabelStudioTaskCopy.kind, func.count()).group_by(
                LabelStudioTaskCopy.annotator, LabelStudioTaskCopy.kind))})
        labelled = Counter({(who, kind): n for who, kind, n in s.exec(
            select(Annotation.annotator, AnnotationTask.kind, func.count(func.distinct(Annotation.task_id)))
            .join(AnnotationTask, AnnotationTask.id == Annotation.task_id)  # type: ignore[arg-type]
            .where(Annotation.source == SOURCE).group_by(Annotation.annotator, AnnotationTask.kind))})
    progress = AnnotatorProgress(accounts=len(accounts))
    for account in accounts:
        kinds: list[str | None] = [*sorted({kind for who, kind in assigned if who == account.email.lower()}
                                           | {kind for who, kind in labelled if who == account.annotator_id})]
        for kind in kinds or [None]:
            progress.rows.append({
                "email": account.email, "name": account.name, "annotator_id": account.annotator_id, "kind": kind,
                "assigned": assigned.get((account.email.lower(), kind), 0) if kind else 0,
                "labelled": labelled.get((account.annotator_id, kind), 0) if kind else 0,
                "gone": gone_by.get((account.email.lower(), kind), []) if kind else [],
            })
    return progress

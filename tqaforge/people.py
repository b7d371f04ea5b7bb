"""The annotator registry: one person is one annotator, whatever the surface.

Every label keeps the author string it came with (``Annotation.annotator``: ``ana`` from the CLI,
``ls:<hash>`` of a Label Studio login), for audit; ``Annotation.annotator_id`` names the
:class:`~tqaforge.schemas.records.Annotator` behind it, and agreement, adjudication, workload
and progress count those (:func:`tqaforge.labels.rater`).

- :func:`resolve_annotator`: what the CLI's ``--annotator`` and the app's name field call. A known
  name or alias (case and surrounding spaces aside) gives its person; an unknown one is refused
  with the list of known people, unless ``new`` (``--new``) registers it.
- :func:`resolve_account`: what the Label Studio pull calls for each account (by e-mail): the
  person registered with that e-mail or whose alias is its ``ls:`` pseudonym, else a new one
  named by the pseudonym (the e-mail never leaves the store).
- :func:`person_for_author`: the ledger's look-up for any other author string (a study
  simulated in code, an old workspace), registering an unknown one as its own person.
- :func:`merge_annotators`: ``tqaforge annotators merge A B``: B's labels count as A's from now
  on; B's names become A's aliases; B stays, pointing at A. No label is changed but for its
  ``annotator_id``.

>>> person = resolve_annotator(s, "ana", new=True)  # doctest: +SKIP
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Iterable

from sqlalchemy import func, update
from sqlmodel import Session, col, select

from tqaforge.errors import NotFound, TqaforgeError
from tqaforge.ids import content_hash, labelstudio_annotator
from tqaforge.printable import escape_controls, has_controls
from tqaforge.schemas.records import Annotation, Annotator
from tqaforge.store import Workspace

#: Label sources that are not a person's (an agent's verdict, published labels imported).
MACHINE_SOURCES: tuple[str, ...] = ("agent", "imported")
#: Longest display name accepted.
MAX_NAME = 100
_CACHE = "tqaforge.people"  # Session.info key: {folded alias: active annotator id}
_ACCOUNTS = "tqaforge.people.accounts"  # Session.info key: {Label Studio login: annotator id}


class AnnotatorError(TqaforgeError):
    """An annotator name or merge that cannot be used as given."""


def fold(name: str) -> str:
    """The form names are compared in: Unicode-normalised (NFKC), stripped, case-folded."""
    return unicodedata.normalize("NFKC", name).strip().casefold()


def check_name(name: str, *, what: str = "annotator name") -> str:
    """``name`` stripped; :class:`AnnotatorError` when it is empty, too long or holds control characters."""
    if not isinstance(name, str) or not name.strip():
        raise AnnotatorError(f"give the {what}", hint="--annotator NAME (or TQAFORGE_ANNOTATOR)",
                             app_hint="type your name in the name field")
    name = name.strip()
    if has_controls(name, lines=False):
        raise AnnotatorError(
            f"the {what} {escape_controls(name, lines=False)!r} holds control characters",
            hint="type the name in plain characters",
        )
    if len(name) > MAX_NAME:
        raise AnnotatorError(f"the {what} is {len(name)} characters long; at most {MAX_NAME}", hint="give a shorter name")
    return name


def _aliases(s: Session) -> dict[str, str]:
    """{folded alias or name: the id of the active person it means}, cached in the session."""
    cached = s.info.get(_CACHE)
    if cached is not None:
        return dict(cached)
    rows = s.exec(select(Annotator)).all()
    by_id = {row.id: row for row in rows}

    def active(row: Annotator) -> str:
        seen = {row.id}
        while row.merged_into is not None and row.merged_into in by_id and row.merged_into not in seen:
            row = by_id[row.merged_into]
            seen.add(row.id)
        return row.id

    out: dict[str, str] = {}
    # Active people's own names first win over a merged identity's old names.
    for row in sorted(rows, key=lambda r: (r.merged_into is not None, r.id)):
        for alias in (row.id, row.name, *(row.aliases or [])):
            out.setdefault(fold(alias), active(row))
    s.info[_CACHE] = out
    return dict(out)


def _forget(s: Session) -> None:
    s.info.pop(_CACHE, None)
    s.info.pop(_ACCOUNTS, None)


def known_names(s: Session) -> list[str]:
    """The display names of the active people, sorted."""
    return sorted(row.name for row in s.exec(select(Annotator).where(col(Annotator.merged_into).is_(None))).all())


def find_annotator(s: Session, name: str) -> Annotator | None:
    """The active person a name, alias or id means (merges followed), or None."""
    found = _aliases(s).get(fold(name))
    return s.get(Annotator, found) if found is not None else None


def _new_id(s: Session, name: str, *, as_is: bool = False) -> str:
    """A stable id from ``name``: its folded form with spaces as ``-`` (a hash when long), made
    unique; with ``as_is`` the name itself when it fits (an author string already on labels, as
    migration 0008 does), so reports keep showing what the labels say."""
    base = name if as_is and len(name) <= 60 else re.sub(r"\s+", "-", fold(name))
    if len(base) > 48:
        base = "p:" + content_hash({"annotator": base}, 16)
    candidate, n = base, 1
    while s.get(Annotator, candidate) is not None:
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def register_annotator(
    s: Session, name: str, *, email: str | None = None, aliases: Iterable[str] = ()
) -> Annotator:
    """A new person named ``name`` (an :class:`AnnotatorError` when a person already has that
    name or one of the aliases). The caller commits."""
    name = check_name(name)
    extra = [check_name(a, what="alias") for a in aliases]
    taken = _aliases(s)
    for alias in (name, *extra):
        if fold(alias) in taken:
            held = s.get(Annotator, taken[fold(alias)])
            raise AnnotatorError(
                f"{escape_controls(alias, lines=False)!r} already names annotator {held.name if held else taken[fold(alias)]!r}",
                hint="use that annotator, or `tqaforge annotators merge` to join two identities",
            )
    return _create(s, name, email=email.strip() if email else None, aliases=[name, *extra])


def _create(s: Session, name: str, *, email: str | None, aliases: Iterable[str], as_is: bool = False) -> Annotator:
    person = Annotator(id=_new_id(s, name, as_is=as_is), name=name, email=email, aliases=list(dict.fromkeys(aliases)))
    s.add(person)
    s.flush()
    _forget(s)
    return person


def resolve_annotator(s: Session, name: str, *, new: bool = False) -> Annotator:
    """The person ``name`` means (a name, alias or id); with ``new``, registered when unknown.

    Unknown without ``new``: an :class:`AnnotatorError` listing the known people."""
    name = check_name(name)
    person = find_annotator(s, name)
    if person is not None:
        return person
    if new:
        return register_annotator(s, name)
    known = known_names(s)
    listed = ", ".join(escape_controls(k, lines=False) for k in known[:30]) + (" ..." if len(known) > 30 else "")
    raise AnnotatorError(
        f"unknown annotator {escape_controls(name, lines=False)!r}; known: {listed or 'none yet'}",
        hint="give one of the known names, or register this one as a new person (--new; in the app, tick \"new annotator\")",
        app_hint="type one of the known names, or tick \"this is a new annotator\" to register this one",
    )


def resolve_account(s: Session, login: str) -> Annotator:
    """The person behind a Label Studio account (its e-mail or login); registered when new.

    Matched by the e-mail a person was registered with, else by the account's ``ls:`` pseudonym
    among aliases; a new person gets the pseudonym as id and name (the e-mail stays in ``email``
    only) so that ``annotators merge`` or a registration with ``--email`` can join them."""
    accounts: dict[str, str] = s.info.setdefault(_ACCOUNTS, {})
    if login in accounts and (known := s.get(Annotator, accounts[login])) is not None and known.merged_into is None:
        return known
    person = _resolve_account(s, login)
    s.info.setdefault(_ACCOUNTS, {})[login] = person.id
    return person


def _resolve_account(s: Session, login: str) -> Annotator:
    pseudonym = labelstudio_annotator(login)
    wanted = fold(login)
    for row in s.exec(select(Annotator).where(col(Annotator.email).is_not(None))).all():
        if row.email is not None and fold(row.email) == wanted:
            person = find_annotator(s, row.id) or row
            if fold(pseudonym) not in {fold(a) for a in person.aliases or []}:
                person.aliases = [*(person.aliases or []), pseudonym]
                s.add(person)
                _forget(s)
            return person
    known = find_annotator(s, pseudonym)
    if known is not None:
        if known.email is None:
            known.email = login.strip()
            s.add(known)
        return known
    return _create(s, pseudonym, email=login.strip(), aliases=[pseudonym], as_is=True)


def person_for_author(s: Session, author: str, source: str) -> str | None:
    """The id of the person behind a label's author string, or None for an agent's or imported
    label; an unknown person's author string becomes a new person (the ledger records what it
    is given: refusing unknown names is the surfaces' part, :func:`resolve_annotator`)."""
    if source in MACHINE_SOURCES:
        return None
    found = _aliases(s).get(fold(author))
    if found is not None:
        return found
    # Recorded as given, whatever it holds (shown escaped wherever it is printed).
    return _create(s, author.strip() or author, email=None, aliases=[author], as_is=True).id


@dataclass(frozen=True, slots=True)
class MergeResult:
    """What :func:`merge_annotators` did: who joined whom and how many labels moved."""

    kept: str
    merged: str
    labels_moved: int
    aliases: tuple[str, ...]

    def lines(self) -> list[str]:
        """What the CLI prints."""
        return [f"{escape_controls(self.merged, lines=False)} merged into {escape_controls(self.kept, lines=False)}: "
                f"{self.labels_moved} labels now count as theirs (each keeps its original author); "
                f"aliases: {', '.join(escape_controls(a, lines=False) for a in self.aliases)}"]

    def as_dict(self) -> dict[str, object]:
        return {"kept": self.kept, "merged": self.merged, "labels_moved": self.labels_moved, "aliases": list(self.aliases)}


def merge_annotators(s: Session, keep: str, merge: str) -> MergeResult:
    """Join the identity ``merge`` into ``keep`` (names, aliases or ids of people in the store).

    Safe against a second merge at the same time: the merged row is claimed by a conditional
    update before anything is read, so of two merges of one identity exactly one succeeds and
    the other is refused (it names the person it was already merged into)."""
    keep_name, merge_name = check_name(keep), check_name(merge)
    # Take the write lock before reading (SQLite: an UPDATE, even of no row, starts the writing
    # transaction), so two merges run one after the other and the second sees the first.
    s.exec(update(Annotator).where(col(Annotator.id) == "").values(name=""))  # type: ignore[call-overload]
    _forget(s)
    direct = _identity(s, merge_name)
    if direct is not None and direct.merged_into is not None:
        raise AnnotatorError(
            f"{escape_controls(merge_name, lines=False)!r} was merged into {escape_controls(direct.merged_into, lines=False)!r} already",
            hint="nothing to merge; `tqaforge annotators people` shows every identity",
        )
    a, b = find_annotator(s, keep_name), find_annotator(s, merge_name)
    for given, person in ((keep_name, a), (merge_name, b)):
        if person is None:
            raise NotFound(
                f"no annotator {escape_controls(given, lines=False)!r} in the store; known: {', '.join(known_names(s)) or 'none'}",
                hint="`tqaforge annotators people` shows the people and their aliases",
            )
    assert a is not None and b is not None
    if a.id == b.id:
        raise AnnotatorError(
            f"{escape_controls(keep_name, lines=False)!r} and {escape_controls(merge_name, lines=False)!r} are one annotator already ({a.name!r})",
            hint="nothing to merge",
        )
    claimed = s.exec(  # type: ignore[call-overload]
        update(Annotator).where(col(Annotator.id) == b.id, col(Annotator.merged_into).is_(None)).values(merged_into=a.id)
    )
    if claimed.rowcount != 1:
        raise AnnotatorError(f"annotator {b.name!r} was merged meanwhile", hint="run `tqaforge annotators people` and try again")
    s.expire_all()
    kept = s.get(Annotator, a.id)
    if kept is None or kept.merged_into is not None:
        raise AnnotatorError(f"annotator {a.name!r} was merged into another meanwhile", hint="merge into that one")
    merged = s.get(Annotator, b.id)
    assert merged is not None
    kept.aliases = list(dict.fromkeys([*(kept.aliases or []), merged.name, *(merged.aliases or [])]))
    if kept.email is None:
        kept.email = merged.email
    s.add(kept)
    moved = s.exec(  # type: ignore[call-overload]
        update(Annotation).where(col(Annotation.annotator_id).in_(_merged_ids(s, merged.id))).values(annotator_id=kept.id)
    ).rowcount
    # Identities merged into B earlier now point at A directly.
    s.exec(update(Annotator).where(col(Annotator.merged_into) == merged.id).values(merged_into=kept.id))  # type: ignore[call-overload]
    s.flush()
    _forget(s)
    return MergeResult(kept.name, merged.name, int(moved or 0), tuple(kept.aliases))


def _identity(s: Session, name: str) -> Annotator | None:
    """The identity a name, alias or id names itself, merges not followed: the one whose id, else
    name, else alias it is (a merged identity's name is also its new person's alias)."""
    wanted = fold(name)
    rows = sorted(s.exec(select(Annotator)).all(), key=lambda r: (r.merged_into is not None, r.id))
    for names_of in (lambda r: [r.id], lambda r: [r.name], lambda r: list(r.aliases or [])):
        found = next((r for r in rows if wanted in {fold(x) for x in names_of(r)}), None)
        if found is not None:
            return found
    return None


def _merged_ids(s: Session, person_id: str) -> list[str]:
    """``person_id`` and every identity merged into it (labels may still name any of them)."""
    ids = [person_id]
    ids += [row.id for row in s.exec(select(Annotator).where(Annotator.merged_into == person_id)).all()]
    return ids


def people_names(s: Session) -> dict[str, str]:
    """{annotator id: display name} of every person, merged ones included (for reports)."""
    return {row.id: row.name for row in s.exec(select(Annotator)).all()}


# ---------------------------------------------------------------------------------------------
# The workspace-level calls of the CLI and the app


@dataclass(frozen=True)
class PeopleList:
    """Every annotator: id, name, aliases, labels counted as theirs, whom they were merged into."""

    rows: tuple[dict[str, Any], ...]

    def lines(self) -> list[str]:
        """What ``tqaforge annotators people`` prints (names escaped: they come from people)."""
        if not self.rows:
            return ["no annotators yet: `tqaforge questions review ... --annotator NAME --new` registers one"]
        out = []
        for r in self.rows:
            merged = f" (merged into {escape_controls(str(r['merged_into']), lines=False)})" if r["merged_into"] else ""
            aliases = ", ".join(escape_controls(str(a), lines=False) for a in r["aliases"])
            out.append(f"{escape_controls(str(r['id']), lines=False)}: {escape_controls(str(r['name']), lines=False)}{merged}; "
                       f"{r['labels']} labels; aliases: {aliases}{'; e-mail on file' if r['email'] else ''}")
        return out

    def as_dict(self) -> dict[str, object]:
        # The e-mail never leaves the store: the JSON says only whether there is one.
        return {"annotators": [{**r, "email": bool(r["email"])} for r in self.rows]}


def list_people(ws: Workspace) -> PeopleList:
    """Every annotator in the store, merged identities included, with their label counts."""
    with ws.session() as s:
        counts = dict(s.exec(  # type: ignore[call-overload]
            select(Annotation.annotator_id, func.count()).where(col(Annotation.annotator_id).is_not(None))
            .group_by(Annotation.annotator_id)).all())
        rows = tuple(
            {"id": row.id, "name": row.name, "aliases": list(row.aliases or []), "merged_into": row.merged_into,
             "labels": int(counts.get(row.id, 0)), "email": row.email}
            for row in s.exec(select(Annotator).order_by(col(Annotator.name), col(Annotator.id))).all()
        )
    return PeopleList(rows)


def merge(ws: Workspace, keep: str, other: str) -> MergeResult:
    """:func:`merge_annotators` in its own transaction: ``tqaforge annotators merge KEEP OTHER``."""
    with ws.session() as s:
        return merge_annotators(s, keep, other)


def register(ws: Workspace, name: str, *, email: str | None = None, aliases: Iterable[str] = ()) -> Annotator:
    """:func:`register_annotator` in its own transaction: ``tqaforge annotators new NAME``."""
    with ws.session() as s:
        return register_annotator(s, name, email=email, aliases=aliases)

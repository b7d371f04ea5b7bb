"""Helpers shared by the app's pages: the workspace, errors shown as messages, progress bars,
summaries rendered the way the CLI renders them (their ``lines()``), and :func:`md`.

**Data is shown as text.** Streamlit reads Markdown (and its own directives, ``$math$`` and
``:color[...]``) in ``st.markdown``, ``st.caption``, ``st.write``, alerts, expander labels, image
captions and progress texts. A question holding ``![x](http://attacker/x.png)`` made the browser
fetch that image; a backtick in an answer broke out of its code span. So every piece of data
(question text, answers, cells, annotator and model names, paths, error messages, which quote
data) goes into such a string only through :func:`md`; whole blocks of data go to ``st.text``,
``st.code`` or ``st.dataframe`` (their control characters escaped by
:func:`tqaforge.printable.escape_controls`).

**One gate.** When the launcher runs the app for others (beyond loopback, or ``--require-login``)
it sets ``TQAFORGE_APP_LOGIN=1`` in the server's environment, which no browser can touch; then
:func:`require_login`, the first call of ``Home.py`` and of every page, shows only the sign-in
form until someone signs in (:mod:`tqaforge.logins`)."""

from __future__ import annotations

import os
import re
import secrets
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence, TypeVar

import streamlit as st

from tqaforge.errors import TqaforgeError
from tqaforge.logins import LOGIN_ENV, Throttle, login_required_by, oidc_provider, oidc_secrets_file, read_users, verify
from tqaforge.printable import escape_controls
from tqaforge.progress import Progress
from tqaforge.store import Workspace, open_workspace

T = TypeVar("T")

_BACKTICKS = re.compile(r"`+")
#: A command-line flag (``--model``, ``-a``-style short ones are not matched): the app has no flags.
CLI_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def md(value: object, *, code: bool = False) -> str:
    """``value`` (data) as Markdown that shows it literally, to mix with our own Markdown::

        st.markdown(f"**{md(q.subtype)}** · {md(q.text)} → {md(answer, code=True)}")

    :func:`~tqaforge.printable.escape_controls` with ``markdown``: control characters escaped,
    and when anything could be read as Markdown (a link, an image, HTML, a backtick, Streamlit's
    ``:red[...]`` or ``$math$``, a line starting a list...) every ASCII punctuation character is
    backslash-escaped and line breaks become Markdown line breaks. With ``code``, an inline code
    span whose backtick fence is longer than any run of backticks in the value, so the value
    cannot close it.
    """
    if code:
        text = escape_controls(str(value))
        longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
        fence = "`" * (longest + 1)
        return f"{fence} {' '.join(text.split())} {fence}"
    return escape_controls(str(value), markdown=True)


# Session-state keys no widget has, so no browser message can set them.
_SIGNED_IN = "_tqaforge_signed_in_as"
_SESSION = "_tqaforge_login_session"


def login_required() -> bool:
    """Whether the launcher asked for a login (``TQAFORGE_APP_LOGIN=1`` in the server's environment;
    any value but empty or ``0`` counts, :func:`tqaforge.logins.login_required_by`)."""
    return login_required_by(os.environ.get(LOGIN_ENV))


@st.cache_resource
def _throttle() -> Throttle:
    """One throttle for every session of this server: failures per session and per user name."""
    return Throttle()


def _oidc() -> bool:
    """Whether Streamlit's own OIDC login is configured (``[auth]`` in ``.streamlit/secrets.toml``)."""
    return oidc_secrets_file(Path.cwd()) is not None


def _workspace_root() -> Path:
    from tqaforge.config import find_workspace_root

    root = os.environ.get("TQAFORGE_WORKSPACE")
    return find_workspace_root(Path(root) if root else None)


def signed_in_as() -> str | None:
    """Who signed in to this session (their app user name, or the OIDC e-mail or name); None
    when nobody did. Without a required login: None too (nobody needs to)."""
    if not login_required():
        return None
    name = st.session_state.get(_SIGNED_IN)
    if isinstance(name, str):
        return name
    try:
        if _oidc() and st.user.is_logged_in:
            return str(st.user.get("email") or st.user.get("name") or "signed in")
    except TqaforgeError:
        return None
    return None


def require_login() -> None:
    """The first call of every page (``Home.py`` runs one of them): when a login is required
    (:func:`login_required`) and this session has not signed in, show only the sign-in form and
    stop the page, so nothing of it (not even its title) is sent to the browser.

    Signed in: who, and a **Sign out** button, in the sidebar (here and not in ``Home.py``: a deep
    link opened first runs the page file alone). A signed-in user who has since been removed
    (``tqaforge app users remove``) is signed out. A users file that cannot be trusted stops every
    page with its message (fail closed)."""
    if not login_required():
        return
    try:
        users = read_users(_workspace_root())
        oidc = _oidc()
    except TqaforgeError as exc:
        st.error(md(exc))
        st.stop()
        raise  # unreachable: st.stop() raises
    name = st.session_state.get(_SIGNED_IN)
    if not (isinstance(name, str) and name in users):
        st.session_state.pop(_SIGNED_IN, None)
        if not (oidc and st.user.is_logged_in):
            _sign_in_form(users, oidc)
            st.stop()
    _sign_out_in_sidebar()


def _sign_in_form(users: dict[str, Any], oidc: bool) -> None:
    st.title("tqaforge: sign in")
    if not users and not oidc:
        st.error("This app requires a login and has no users yet: on the server, run `tqaforge app users add NAME`.")
        return
    if oidc and st.button("Sign in with your identity provider"):
        secrets_file = oidc_secrets_file(Path.cwd())
        provider = oidc_provider(secrets_file) if secrets_file else None
        if provider:
            st.login(provider)
        else:
            st.login()
    if not users:
        return
    session = st.session_state.setdefault(_SESSION, secrets.token_hex(16))
    with st.form("tqaforge-sign-in"):
        name = st.text_input("User name", max_chars=64)
        password = st.text_input("Password", type="password", max_chars=1024)
        submitted = st.form_submit_button("Sign in")
    if not submitted:
        return
    keys = (f"session:{session}", f"user:{name[:64]}")
    throttle = _throttle()
    wait = throttle.wait_seconds(*keys)
    if wait > 0:
        st.error(f"Too many failed sign-ins: wait {int(wait) + 1} s and try again.")
        return
    if verify(users, name, password):
        throttle.succeeded(*keys)
        st.session_state[_SIGNED_IN] = name
        st.rerun()
    throttle.failed(*keys)
    st.error("Wrong user name or password.")


def _sign_out_in_sidebar() -> None:
    who = signed_in_as()
    if who is None:
        return
    st.sidebar.caption(f"signed in as {md(who)}")
    if st.sidebar.button("Sign out", key="_tqaforge_sign_out"):
        if st.session_state.pop(_SIGNED_IN, None) is None:
            st.logout()  # an OIDC session: Streamlit's own sign-out
        st.rerun()


@st.cache_resource
def _open(root: str | None) -> Workspace:
    return open_workspace(Path(root) if root else None)


def workspace_or_stop() -> Workspace:
    """The workspace named by TQAFORGE_WORKSPACE (or around the cwd); stops the page with the
    error message when there is none."""
    try:
        return _open(os.environ.get("TQAFORGE_WORKSPACE"))
    except TqaforgeError as exc:
        st.error(md(app_text(exc)))
        st.stop()
        raise  # unreachable: st.stop() raises


def attempt(step: Callable[[], T]) -> T | None:
    """Run a library step; a TqaforgeError becomes a red message on the page (the CLI prints the
    same message), and None is returned. So does a full or read-only disk (the CLI's conversion,
    :func:`tqaforge.store.disk_failure`): the path and the fix, not a traceback."""
    try:
        return step()
    except TqaforgeError as exc:
        st.error(md(app_text(exc)))
        return None
    except Exception as exc:
        from tqaforge.store import disk_failure

        problem = disk_failure(exc)
        if problem is None:
            raise
        st.error(md(problem))
        return None


def column_labels(header: Sequence[str]) -> list[str]:
    """Column labels a dataframe accepts for ``header``: a blank name shown as its position,
    a repeated one with its position added (pandas and Streamlit refuse repeated labels, and a
    table imported with lenient headers may have them).

    >>> column_labels(["a", "", "a"])
    ['a', '(1)', 'a (2)']
    """
    labels: list[str] = []
    for i, name in enumerate(header):
        label = name or f"({i})"
        labels.append(f"{label} ({i})" if label in labels else label)
    return labels


def show_summary(summary: Any) -> None:
    """A library summary as the CLI prints it (its ``lines()``), in a code block."""
    st.code(escape_controls("\n".join(summary.lines())), language=None)


@contextmanager
def progress(label: str) -> Iterator[Progress]:
    """A Streamlit progress bar driven through :class:`tqaforge.progress.Progress`."""
    bar = st.progress(0.0, text=label)

    def report(done: int, total: int | None, note: str = "") -> None:
        share = min(done / total, 1.0) if total else 0.0
        bar.progress(share, text=md(f"{label}: {done}/{total or '?'} {note}".strip()))

    try:
        yield report
    finally:
        bar.empty()


def run_step(label: str, step: Callable[[Progress], T]) -> T | None:
    """A long library step with a progress bar; its summary shown as the CLI prints it, or its
    error as a red message (None returned)."""
    with progress(label) as on_progress:
        done = attempt(lambda: step(on_progress))
    if done is not None:
        show_summary(done)
    return done


def show_annotation_progress(ws: Workspace) -> None:
    """Tasks by status and labels recorded, per annotation kind (Overview and Annotation pages)."""
    import pandas as pd

    from tqaforge.queries import annotation_progress

    table = annotation_progress(ws)
    if table:
        st.dataframe(pd.DataFrame(table).T.fillna(0).astype(int), width="stretch")
    else:
        st.caption("no annotation tasks yet: push a kind to Label Studio (Annotation page) or review here (Review page)")


def window_text(listing: Any, noun: str) -> str:
    """What a page of a listing shows, in the app's words: "showing 51-54 of 54 tables" (the
    CLI's :meth:`~tqaforge.queries.Page.describe` names its ``--offset`` flag; here the pager
    beside it is the way on)."""
    if listing.total == 0:
        return f"no {noun}"
    if not listing.items:
        return f"none of the {listing.total:,} {noun} on this page"
    first, last = listing.offset + 1, listing.offset + len(listing.items)
    return f"showing {first:,}-{last:,} of {listing.total:,} {noun}"


def paged(key: str, fetch: Callable[[int, int], Any], noun: str, *, page_size: int = 50) -> Any:
    """One page of a listing with a pager under it: ``fetch(limit, offset)`` returns a
    :class:`~tqaforge.queries.Page`; the page number lives in ``st.session_state[key]`` (a
    number input, with previous and next buttons), so every record of a long listing can be
    reached. A page number past the end (the filters narrowed the listing) shows the last page.
    """
    number = max(1, int(st.session_state.get(key, 1) or 1))
    listing = fetch(page_size, (number - 1) * page_size)
    pages = max(1, -(-listing.total // page_size))
    if number > pages:  # filters narrowed the listing since: its last page, not an empty one
        number = pages
        listing = fetch(page_size, (number - 1) * page_size)
    st.session_state[key] = number  # before the widget exists in this run: allowed, and keeps it in range
    st.caption(window_text(listing, noun))
    if pages > 1:

        def step(by: int) -> None:
            st.session_state[key] = min(pages, max(1, int(st.session_state.get(key, 1)) + by))

        back, where, forward = st.columns([1, 2, 1], vertical_alignment="bottom")
        back.button("previous page", key=f"{key}-previous", on_click=step, args=(-1,), disabled=number <= 1)
        where.number_input(f"page (of {pages})", min_value=1, max_value=pages, step=1, key=key)
        forward.button("next page", key=f"{key}-next", on_click=step, args=(1,), disabled=number >= pages)
    return listing


def app_text(exc: TqaforgeError) -> str:
    """An error as the app shows it: the message, and the hint in the app's words
    (:attr:`~tqaforge.errors.TqaforgeError.app_hint`); a CLI hint that names a flag the app does
    not have (``--annotator NAME``) is left out rather than shown as advice no control follows."""
    message = Exception.__str__(exc)
    hint = exc.app_hint or (exc.hint if exc.hint and not CLI_FLAG.search(exc.hint) else None)
    return f"{message}\n  hint: {hint}" if hint else message


def usd(amount: float) -> str:
    """A cost with sensible precision: "0" for nothing, cents from a cent up ("1,234.50",
    "0.06"), two significant digits below ("0.0012"), never "0.000000"."""
    if amount == 0:
        return "0"
    if abs(amount) >= 0.01:
        return f"{amount:,.2f}"
    return f"{amount:.2g}" if abs(amount) >= 1e-4 else f"{amount:.1e}"

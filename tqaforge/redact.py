"""Redaction of our own secrets in text we print or store.

Text that came back from a server (an error message, a reply body) or that holds a URL
(``OPENAI_BASE_URL``, a database URL) may contain a credential of ours: an endpoint that echoes
the ``Authorization`` header, a URL with ``user:password@``. Everything such text passes through
one of these functions before it is stored, logged, raised or printed::

    redact_url("postgresql://ana:p@ss@db:5432/x")      # 'postgresql://ana:***@db:5432/x'
    redact_secrets("bad key sk-123456 (Bearer sk-123456)", ["sk-123456"])
    # 'bad key *** (Bearer ***)'

Both only ever hide more, never less: when a URL is ambiguous (an unescaped ``@`` in the
password), the password is taken to run up to the last ``@`` before the host.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["MASK", "MIN_SECRET_LENGTH", "redact_host", "redact_secrets", "redact_url", "url_has_secret", "url_password"]

MASK = "***"
# A shorter "secret" (a test key "k", an empty password) protects nothing and replacing it
# everywhere would garble the text around it.
MIN_SECRET_LENGTH = 6

# Query parameters whose values are credentials (e.g. ?password=..., ?api_key=..., libpq's
# sslpassword, a presigned URL's token).
_SECRET_PARAM = re.compile(
    r"(?i)([?&;](?:[a-z0-9_.-]*(?:password|passwd|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|auth)"
    r"[a-z0-9_.-]*|key)=)([^&;#\s]*)"
)
# The scheme and the text up to the last '@' of a URL's authority, found inside free text.
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^\s/?#@]*(?:@[^\s/?#@]*)*)@(?=[^\s@]*)")
# Credentials in echoed headers, whatever the secret was.
_BEARER = re.compile(r"(?i)\b(bearer|basic|token)(\s+)[A-Za-z0-9._~+/=-]{8,}")
_API_KEY_SHAPE = re.compile(r"\bsk-[A-Za-z0-9_-]{16,}")


def redact_url(url: str) -> str:
    """``url`` with its password (and credential query parameters) replaced by ``***``.

    ``scheme://user:password@host/...`` becomes ``scheme://user:***@host/...``; a user with no
    password is kept (``postgresql://postgres@127.0.0.1/x`` names no secret). An unescaped ``@``
    in the password is handled by splitting the user information at the LAST ``@`` before the
    query (or, when there is none before it, the last ``@`` of all), so a password that contains
    ``@``, ``/`` or ``?`` is masked whole. A string with no ``://`` (a mistyped URL that an error
    message quotes) has what stands between its first ``//`` (else its start) and its last ``@``
    taken as the user information.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:  # not a URL as written (``postgresql//ana:pw@db``): still no password shown
        return _SECRET_PARAM.sub(lambda m: m.group(1) + MASK, _mask_bare_userinfo(url))
    head = rest.split("?", 1)[0]
    at = head.rfind("@") if "@" in head else rest.rfind("@")
    if at < 0:
        return scheme + sep + _SECRET_PARAM.sub(lambda m: m.group(1) + MASK, rest)
    userinfo, hostpart = rest[:at], rest[at + 1 :]
    user, colon, password = userinfo.partition(":")
    masked = f"{user}:{MASK}" if colon and password else userinfo
    return f"{scheme}{sep}{masked}@{_SECRET_PARAM.sub(lambda m: m.group(1) + MASK, hostpart)}"


def _mask_bare_userinfo(text: str) -> str:
    """``user:password@`` masked in a string that is not a well-formed URL (see :func:`redact_url`)."""
    end = text.find("?") if "?" in text else len(text)
    at = text.rfind("@", 0, end)
    if at < 0:
        return text
    start = text.find("//", 0, at) + 2 if "//" in text[:at] else 0
    user, colon, password = text[start:at].partition(":")
    return f"{text[:start]}{user}:{MASK}{text[at:]}" if colon and password else text


def url_password(url: str | None) -> str | None:
    """The password of a URL's user information (split like :func:`redact_url`), else None: the
    secret to mask wherever the URL's server or a library may echo it."""
    if not url or "://" not in url:
        return None
    rest = url.split("://", 1)[1]
    head = rest.split("?", 1)[0]
    at = head.rfind("@") if "@" in head else rest.rfind("@")
    if at < 0:
        return None
    _, colon, password = rest[:at].partition(":")
    return password if colon and password else None


def url_has_secret(url: str) -> bool:
    """True when ``url`` holds a password or a credential query parameter (what
    :func:`redact_url` masks): such a URL must not be written to a file or a record."""
    return redact_url(url) != url


def redact_host(host: str) -> str:
    """A host or ``host:port`` as given on a command line, with any ``user:password@`` in front
    of it masked (``admin:pw@127.0.0.1`` -> ``***@127.0.0.1``): an address is not a URL, but
    people paste one."""
    return f"{MASK}@{host.rsplit('@', 1)[1]}" if "@" in host else host


def redact_secrets(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every given secret, every URL password and every bearer token masked.

    ``secrets`` are our own credentials (API keys, passwords); ``None`` and strings shorter than
    :data:`MIN_SECRET_LENGTH` are ignored. Independently of them, ``Bearer <token>``-style
    header values, OpenAI-shaped keys (``sk-...``) and the password of any URL in the text are
    masked, so an echoed header of someone else's making is hidden too.
    """
    if not text:
        return text
    # Longest first: a secret that contains another is masked whole.
    for secret in sorted({s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    text = _BEARER.sub(lambda m: m.group(1) + m.group(2) + MASK, text)
    text = _API_KEY_SHAPE.sub(MASK, text)
    return _URL_USERINFO.sub(_mask_userinfo, text)


def _mask_userinfo(match: re.Match[str]) -> str:
    user, colon, password = match.group(2).partition(":")
    return f"{match.group(1)}{user}:{MASK}@" if colon and password else match.group(0)

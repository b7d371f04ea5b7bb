"""Hostile input for the app's login (issue 29, item 4): empty and short passwords, odd user names,
a users file that is malformed, readable or writable by others or a link, guessing (the lockout per
session and per user name), timing (an unknown name costs the same scrypt and compare), a stray
value of the switch, two commands adding users at once, and no password in any file or output.

Every refusal is a clear message naming the file or the name and what to do, with nothing written:
the users file keeps its bytes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tqaforge import logins
from tqaforge.errors import LoginError
from tqaforge.logins import LOGIN_ENV, add_user, read_users, users_file, verify
from tqaforge.store import Workspace, init_workspace

pytestmark = pytest.mark.hostile

APP = Path(__file__).resolve().parents[1] / "tqaforge" / "app"
PASSWORD = "correct horse battery"
CANARY = "canaryws4c2"


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return init_workspace(tmp_path / "ws", name=CANARY)


def tq(ws: Workspace, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**{k: v for k, v in os.environ.items() if k != LOGIN_ENV}, "COLUMNS": "1000"}  # one line per message
    return subprocess.run([sys.executable, "-m", "tqaforge", "-w", str(ws.root), *args], input=stdin,
                          capture_output=True, text=True, timeout=60, env=env, cwd=ws.root)


@pytest.mark.parametrize("password", ["", "   ", "\t", "short"])
def test_an_empty_blank_or_short_password_is_refused(ws: Workspace, password: str) -> None:
    add_user(ws.root, "ada", PASSWORD)
    before = users_file(ws.root).read_bytes()
    done = tq(ws, "app", "users", "add", "bob", "--password-stdin", stdin=password + "\n")
    assert done.returncode == 1 and ("empty" in done.stderr or "shorter than 8" in done.stderr), done.stderr
    assert "Traceback" not in done.stderr and users_file(ws.root).read_bytes() == before
    with pytest.raises(LoginError):
        add_user(ws.root, "bob", password)


def test_no_password_on_stdin_or_two_different_ones_at_the_prompt_store_nothing(ws: Workspace) -> None:
    nothing = tq(ws, "app", "users", "add", "bob", "--password-stdin", stdin="")
    assert nothing.returncode == 1 and "empty" in nothing.stderr
    mismatch = tq(ws, "app", "users", "add", "bob", stdin="first-password\nsecond-password\n")
    assert mismatch.returncode != 0 and "do not match" in mismatch.stdout + mismatch.stderr
    assert not users_file(ws.root).exists()


ODD_NAMES = ["", "a b", "../ada", "ada/x", "-ada", ".ada", "ad\x1b[2Ja", "ad\u202ea", "аda", "x" * 65, "ada\n",
             "ada;rm", "ada\x00"]


@pytest.mark.parametrize("name", ODD_NAMES)
def test_an_odd_user_name_is_refused_before_any_password(ws: Workspace, name: str) -> None:
    with pytest.raises(LoginError, match="is not a user name"):
        add_user(ws.root, name, PASSWORD)
    if "\x00" not in name:  # a NUL cannot be a command-line argument at all
        done = tq(ws, "app", "users", "add", name, "--password-stdin", stdin=PASSWORD + "\n")
        assert done.returncode != 0 and "Traceback" not in done.stderr
        assert "is not a user name" in done.stderr or name == "-ada", done.stderr  # -ada: an unknown option to click
        assert "\x1b" not in done.stderr and "\u202e" not in done.stderr  # shown escaped, never raw
    assert not users_file(ws.root).exists()


def test_an_odd_name_at_the_sign_in_form_is_a_wrong_login(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    add_user(ws.root, "ada", PASSWORD)
    monkeypatch.setenv("TQAFORGE_WORKSPACE", str(ws.root))
    monkeypatch.setenv(LOGIN_ENV, "1")
    at = AppTest.from_file(str(APP / "pages" / "overview.py"), default_timeout=60).run()
    for name in ("ada\x00", "../ada", "ADA", " ada"):
        at.text_input[0].input(name)
        at.text_input[1].input(PASSWORD)
        at.button[0].click()
        at.run()
        assert not at.exception and [e.value for e in at.error] == ["Wrong user name or password."], name


MALFORMED = {
    "not JSON": "{not json",
    "a list": "[]",
    "another version": json.dumps({"version": 2, "users": {}}),
    "users not a map": json.dumps({"version": 1, "users": []}),
    "a plain password": json.dumps({"version": 1, "users": {"ada": {"scheme": "plain", "password": "x"}}}),
    "hash too short": json.dumps({"version": 1, "users": {"ada": {"scheme": "scrypt", "n": 16384, "r": 8, "p": 1,
                                                                  "salt": "00" * 16, "hash": "00" * 4}}}),
    "n not a power of two": json.dumps({"version": 1, "users": {"ada": {"scheme": "scrypt", "n": 1000, "r": 8, "p": 1,
                                                                        "salt": "00" * 16, "hash": "00" * 32}}}),
    "n huge": json.dumps({"version": 1, "users": {"ada": {"scheme": "scrypt", "n": 2**30, "r": 8, "p": 1,
                                                          "salt": "00" * 16, "hash": "00" * 32}}}),
    "salt not hex": json.dumps({"version": 1, "users": {"ada": {"scheme": "scrypt", "n": 16384, "r": 8, "p": 1,
                                                                "salt": "zz" * 16, "hash": "00" * 32}}}),
    "an odd name": json.dumps({"version": 1, "users": {"a b": {"scheme": "scrypt", "n": 16384, "r": 8, "p": 1,
                                                              "salt": "00" * 16, "hash": "00" * 32}}}),
    "a missing field": json.dumps({"version": 1, "users": {"ada": {"scheme": "scrypt", "n": 16384}}}),
    "bool parameters": json.dumps({"version": 1, "users": {"ada": {"scheme": "scrypt", "n": 16384, "r": True, "p": 1,
                                                                   "salt": "00" * 16, "hash": "00" * 32}}}),
    "not UTF-8": b"\xff\xfe{}".decode("latin-1"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_users_file_is_refused_everywhere(ws: Workspace, case: str) -> None:
    path = users_file(ws.root)
    path.write_text(MALFORMED[case], encoding="latin-1" if case == "not UTF-8" else "utf-8")
    path.chmod(0o600)
    before = path.read_bytes()
    with pytest.raises(LoginError, match="is not a users file tqaforge wrote"):
        read_users(ws.root)
    listed = tq(ws, "app", "users", "list")
    assert listed.returncode == 1 and str(path) in listed.stderr and "Traceback" not in listed.stderr
    added = tq(ws, "app", "users", "add", "bob", "--password-stdin", stdin=PASSWORD + "\n")
    assert added.returncode == 1 and path.read_bytes() == before  # nothing of it is lost
    launched = tq(ws, "app", "--require-login", "--port", "1")
    assert launched.returncode == 2 and str(path) in launched.stderr and "Traceback" not in launched.stderr


def _gated_page(ws: Workspace, monkeypatch: pytest.MonkeyPatch, *, signed_in_as: str | None = None) -> AppTest:
    monkeypatch.setenv("TQAFORGE_WORKSPACE", str(ws.root))
    monkeypatch.setenv(LOGIN_ENV, "1")
    at = AppTest.from_file(str(APP / "pages" / "overview.py"), default_timeout=60)
    if signed_in_as:
        at.session_state["_tqaforge_signed_in_as"] = signed_in_as
    at.run()
    assert not at.exception, at.exception
    return at


def test_the_app_fails_closed_on_a_broken_users_file(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """Even a session that signed in before sees only the file's problem, not the page."""
    add_user(ws.root, "ada", PASSWORD)
    assert any(CANARY in c.value for c in _gated_page(ws, monkeypatch, signed_in_as="ada").caption)  # control
    users_file(ws.root).write_text("{broken", encoding="utf-8")
    at = _gated_page(ws, monkeypatch, signed_in_as="ada")
    assert len(at.error) == 1 and "is not a users file" in at.error[0].value
    assert not at.caption and not at.metric and not at.text_input


@pytest.mark.parametrize("mode", [0o666, 0o644, 0o640, 0o620, 0o602])
def test_a_users_file_others_may_read_or_write_is_refused(ws: Workspace, monkeypatch: pytest.MonkeyPatch, mode: int) -> None:
    add_user(ws.root, "ada", PASSWORD)
    path = users_file(ws.root)
    path.chmod(mode)
    with pytest.raises(LoginError, match=f"mode {mode:o}") as refused:
        read_users(ws.root)
    assert "chmod 600" in str(refused.value)
    launched = tq(ws, "app", "--require-login", "--port", "1")
    assert launched.returncode == 2 and "read or written by others" in launched.stderr
    at = _gated_page(ws, monkeypatch, signed_in_as="ada")
    assert "read or written by others" in at.error[0].value and not at.metric
    path.chmod(0o600)  # control: the owner's own file is read
    assert sorted(read_users(ws.root)) == ["ada"]


def test_a_users_file_that_is_a_link_is_refused(ws: Workspace, tmp_path: Path) -> None:
    elsewhere = init_workspace(tmp_path / "other", name="o")
    add_user(elsewhere.root, "mallory", PASSWORD)
    users_file(ws.root).symlink_to(users_file(elsewhere.root))
    with pytest.raises(LoginError, match="not a regular file"):
        read_users(ws.root)


def test_an_unknown_name_costs_the_same_scrypt_and_compare(monkeypatch: pytest.MonkeyPatch, ws: Workspace) -> None:
    """No early return for an unknown name: scrypt runs and hmac.compare_digest compares, as for a
    wrong password of a known name (the count of each is the same)."""
    add_user(ws.root, "ada", PASSWORD)
    users = read_users(ws.root)
    calls: list[str] = []
    real_scrypt, real_compare = logins._scrypt, logins.hmac.compare_digest
    monkeypatch.setattr(logins, "_scrypt", lambda *a, **k: (calls.append("scrypt"), real_scrypt(*a, **k))[1])
    monkeypatch.setattr(logins.hmac, "compare_digest", lambda a, b: (calls.append("compare"), real_compare(a, b))[1])
    assert not verify(users, "nobody", PASSWORD)
    unknown = list(calls)
    calls.clear()
    assert not verify(users, "ada", "wrong password")
    assert calls == unknown == ["scrypt", "compare"]
    calls.clear()
    assert verify(users, "ada", PASSWORD) and calls == ["scrypt", "compare"]  # control: the spies see the real check


def test_guessing_locks_out_the_session_and_the_user_name(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """Five wrong passwords lock the session and the name out: then even the right password is
    refused, in that session and in a new one for the same name; another name in a new session
    still signs in. (The name is unique to this test: the throttle is the server's, shared.)"""
    add_user(ws.root, "eve1", PASSWORD)
    add_user(ws.root, "zoe1", PASSWORD)
    at = _gated_page(ws, monkeypatch)

    def attempt(page: AppTest, name: str, password: str) -> str:
        page.text_input[0].input(name)
        page.text_input[1].input(password)
        page.button[0].click()
        page.run()
        assert not page.exception, page.exception
        return page.error[0].value if page.error else ""

    for _ in range(logins.Throttle.max_failures):
        assert attempt(at, "eve1", "wrong password") == "Wrong user name or password."
    assert attempt(at, "eve1", PASSWORD).startswith("Too many failed sign-ins: wait")
    assert not at.metric  # still the form only
    other_session = _gated_page(ws, monkeypatch)
    assert attempt(other_session, "eve1", PASSWORD).startswith("Too many failed sign-ins")
    assert attempt(at, "zoe1", PASSWORD).startswith("Too many failed sign-ins")  # the session itself is locked
    fresh = _gated_page(ws, monkeypatch)
    assert attempt(fresh, "zoe1", PASSWORD) == "" and fresh.metric  # control: a fresh session and name sign in


@pytest.mark.parametrize("value", ["1", "true", "yes", " 1 "])
def test_any_value_of_the_switch_but_0_turns_the_login_on(ws: Workspace, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    add_user(ws.root, "ada", PASSWORD)
    monkeypatch.setenv("TQAFORGE_WORKSPACE", str(ws.root))
    monkeypatch.setenv(LOGIN_ENV, value)
    at = AppTest.from_file(str(APP / "pages" / "overview.py"), default_timeout=60).run()
    assert [t.value for t in at.title] == ["tqaforge: sign in"] and not at.metric


def test_two_commands_adding_users_at_once_keep_both(ws: Workspace) -> None:
    env = {k: v for k, v in os.environ.items() if k != LOGIN_ENV}
    procs = [subprocess.Popen([sys.executable, "-m", "tqaforge", "-w", str(ws.root), "app", "users", "add", f"u{i}",
                               "--password-stdin"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for i in range(4)]
    for proc in procs:
        assert proc.communicate(PASSWORD + "\n", timeout=60)[0] and proc.returncode == 0
    assert sorted(read_users(ws.root)) == ["u0", "u1", "u2", "u3"]


def test_the_password_is_in_no_file_and_no_output(ws: Workspace, tmp_path: Path) -> None:
    secret = "unguessable-Pa55word-7d1"
    added = tq(ws, "app", "users", "add", "ada", "--password-stdin", stdin=secret + "\n")
    listed = tq(ws, "app", "users", "list", "--json")
    refused = tq(ws, "app", "--host", "0.0.0.0", "--port", "1")
    for done in (added, listed, refused):
        assert secret not in done.stdout + done.stderr
    for path in ws.root.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_a_password_that_is_not_utf8_on_stdin_is_stored_and_checked_the_same_way(ws: Workspace) -> None:
    """Bytes of another encoding (Latin-1 'é') on stdin: no traceback; the same bytes sign in again."""
    env = {**{k: v for k, v in os.environ.items() if k != LOGIN_ENV}, "PYTHONIOENCODING": "utf-8:surrogateescape"}
    done = subprocess.run([sys.executable, "-m", "tqaforge", "-w", str(ws.root), "app", "users", "add", "ada",
                           "--password-stdin"], input=b"caf\xe9-password\n", capture_output=True, env=env, timeout=60)
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr
    assert verify(read_users(ws.root), "ada", b"caf\xe9-password".decode("utf-8", "surrogateescape"))
    assert not verify(read_users(ws.root), "ada", "café-password")

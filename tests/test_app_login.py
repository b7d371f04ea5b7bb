"""The app's login when it leaves loopback (issue 29, item 4): users stored hashed in the workspace
(`tqaforge app users add|list|remove`), one gate every page calls first, the sign-in flow with its
lockout, and the launcher that refuses to start remote (or with --require-login) without a user.

The pages are rendered by Streamlit's AppTest on a workspace staged in every stage whose name is a
canary: signed out, each page shows the sign-in form and nothing else (no title of its own, no
data, no canary); signed in, the same page shows its own title (the control that shows the test
sees a page's content)."""

from __future__ import annotations

import ast
import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from app_demo import stage_everything
from streamlit.testing.v1 import AppTest

from tqaforge.logins import LOGIN_ENV, Throttle, add_user, read_users, remove_user, users_file, verify
from tqaforge.store import Workspace, init_workspace

APP = Path(__file__).resolve().parents[1] / "tqaforge" / "app"
PAGES = sorted(p.name for p in (APP / "pages").glob("*.py"))
CANARY = "canaryws7f3"
PASSWORD = "correct horse battery"
SIGNED_IN = "_tqaforge_signed_in_as"


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    ws = init_workspace(tmp_path_factory.mktemp("login") / "ws", name=CANARY)
    stage_everything(ws)
    add_user(ws.root, "ada", PASSWORD)
    return ws


@pytest.fixture
def login_env(staged: Workspace, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    monkeypatch.setenv("TQAFORGE_WORKSPACE", str(staged.root))
    monkeypatch.setenv(LOGIN_ENV, "1")
    for key in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "TQAFORGE_LLM_MODEL"):
        monkeypatch.delenv(key, raising=False)
    return staged


def rendered(at: AppTest) -> str:
    """Every element the script sent, as text (its protobuf: labels, values, data)."""
    parts: list[str] = []

    def walk(node: Any) -> None:
        proto = getattr(node, "proto", None)
        if proto is not None:
            parts.append(str(proto))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return "\n".join(parts)


def element_types(at: AppTest) -> list[str]:
    found: list[str] = []

    def walk(node: Any) -> None:
        if not getattr(node, "children", None) and getattr(node, "type", None):
            found.append(node.type)
        for child in getattr(node, "children", {}).values():
            walk(child)

    for block in (at.main, at.sidebar):
        for child in block.children.values():
            walk(child)
    return found


def run_page(name: str, *, signed_in_as: str | None = None) -> AppTest:
    at = AppTest.from_file(str(APP / "pages" / name), default_timeout=60)
    if signed_in_as is not None:
        at.session_state[SIGNED_IN] = signed_in_as
    at.run()
    assert not at.exception, at.exception
    return at


def sign_in(at: AppTest, name: str, password: str) -> AppTest:
    inputs = {t.label: t for t in at.text_input}
    inputs["User name"].input(name)
    inputs["Password"].input(password)
    next(b for b in at.button if b.label == "Sign in").click()
    at.run()
    assert not at.exception, at.exception
    return at


def test_every_page_calls_the_gate_first() -> None:
    """Statically: in every page the first statement after the docstring and imports is
    `require_login()`, so no later line (a title, a query) runs before it."""
    assert len(PAGES) >= 11
    for name in PAGES:
        tree = ast.parse((APP / "pages" / name).read_text(encoding="utf-8"))
        body = [n for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom))
                and not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
        first = body[0]
        assert isinstance(first, ast.Expr) and isinstance(first.value, ast.Call), name
        assert getattr(first.value.func, "id", None) == "require_login", f"{name}: first call is not require_login()"


@pytest.mark.parametrize("page", PAGES)
def test_each_page_shows_only_the_sign_in_form_until_someone_signs_in(login_env: Workspace, page: str) -> None:
    at = run_page(page)
    assert [t.value for t in at.title] == ["tqaforge: sign in"], page
    assert [t.label for t in at.text_input] == ["User name", "Password"]
    assert sorted(element_types(at)) == ["button", "text_input", "text_input", "title"], element_types(at)
    assert CANARY not in rendered(at) and str(login_env.root) not in rendered(at)
    # Control: signed in, the same page renders its own content (its title, the workspace's data).
    shown = run_page(page, signed_in_as="ada")
    assert shown.title and shown.title[0].value != "tqaforge: sign in", page
    assert not [t for t in shown.text_input if t.label == "Password"]
    assert len(element_types(shown)) > 4, page


def test_the_overview_shows_the_canary_once_signed_in(login_env: Workspace) -> None:
    """The canary check above can fail: the signed-in overview shows the workspace's name."""
    assert CANARY in rendered(run_page("overview.py", signed_in_as="ada"))


def test_sign_in_wrong_then_right(login_env: Workspace) -> None:
    at = AppTest.from_file(str(APP / "main" / "Home.py"), default_timeout=60).run()
    assert [t.value for t in at.title] == ["tqaforge: sign in"]
    assert not [b for b in at.button if b.label == "Sign out"]
    sign_in(at, "ada", "not the password")
    assert [e.value for e in at.error] == ["Wrong user name or password."]
    assert SIGNED_IN not in at.session_state and CANARY not in rendered(at)
    sign_in(at, "ada", PASSWORD)
    assert at.session_state[SIGNED_IN] == "ada"
    assert CANARY in rendered(at) and "Pipeline funnel" in [s.value for s in at.subheader]
    # The sidebar of a signed-in session: who, and Sign out. (AppTest drops the sidebar of a script
    # whose first run hid the page list, and re-applies session state it was given before each run,
    # so the click on Sign out is made in Chromium: tests/test_app_login_browser.py.)
    at = AppTest.from_file(str(APP / "main" / "Home.py"), default_timeout=60)
    at.session_state[SIGNED_IN] = "ada"
    at.run()
    sidebar = list(at.sidebar.children.values())
    assert any(getattr(e, "value", None) == "signed in as ada" for e in sidebar)
    assert any(getattr(e, "label", None) == "Sign out" for e in sidebar)


def test_a_removed_user_is_signed_out_at_the_next_run(login_env: Workspace) -> None:
    add_user(login_env.root, "temp", PASSWORD)
    at = sign_in(AppTest.from_file(str(APP / "pages" / "tables.py"), default_timeout=60).run(), "temp", PASSWORD)
    assert [t.value for t in at.title] == ["Tables"]
    remove_user(login_env.root, "temp")
    at.run()
    assert [t.value for t in at.title] == ["tqaforge: sign in"] and SIGNED_IN not in at.session_state


def test_without_the_switch_the_app_needs_no_login(staged: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """On loopback without --require-login nothing changes (the launcher sets the switch, not the page)."""
    monkeypatch.setenv("TQAFORGE_WORKSPACE", str(staged.root))
    monkeypatch.delenv(LOGIN_ENV, raising=False)
    assert CANARY in rendered(run_page("overview.py"))
    monkeypatch.setenv(LOGIN_ENV, "0")
    assert CANARY in rendered(run_page("overview.py"))


def test_users_add_list_remove_from_the_cli(tmp_path: Path) -> None:
    ws = init_workspace(tmp_path / "ws", name="t")
    tq = [sys.executable, "-m", "tqaforge", "-w", str(ws.root), "app", "users"]
    added = subprocess.run([*tq, "add", "ada", "--password-stdin"], input=PASSWORD + "\n", capture_output=True, text=True)
    assert added.returncode == 0, added.stderr
    path = users_file(ws.root)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text(encoding="utf-8")
    assert PASSWORD not in text and "correct" not in text and PASSWORD not in added.stdout + added.stderr
    entry = json.loads(text)["users"]["ada"]
    assert entry["scheme"] == "scrypt" and len(bytes.fromhex(entry["salt"])) == 16
    # The prompt path: the password twice, through a real terminal-less stdin (click reads it).
    prompted = subprocess.run([*tq, "add", "bob"], input="another-pass\nanother-pass\n", capture_output=True, text=True)
    assert prompted.returncode == 0, prompted.stderr
    users = read_users(ws.root)
    assert verify(users, "ada", PASSWORD) and verify(users, "bob", "another-pass") and not verify(users, "bob", PASSWORD)
    assert users["ada"].salt != users["bob"].salt  # a salt per user
    listed = subprocess.run([*tq, "list", "--json"], capture_output=True, text=True)
    assert json.loads(listed.stdout)["users"] == ["ada", "bob"]
    again = subprocess.run([*tq, "add", "ada", "--password-stdin"], input="new-password\n", capture_output=True, text=True)
    assert again.returncode == 1 and "exists already" in again.stderr and "--replace" in again.stderr
    assert verify(read_users(ws.root), "ada", PASSWORD)
    replaced = subprocess.run([*tq, "add", "ada", "--password-stdin", "--replace"], input="new-password\n",
                              capture_output=True, text=True)
    assert replaced.returncode == 0 and verify(read_users(ws.root), "ada", "new-password")
    removed = subprocess.run([*tq, "remove", "bob"], capture_output=True, text=True)
    assert removed.returncode == 0 and sorted(read_users(ws.root)) == ["ada"]
    missing = subprocess.run([*tq, "remove", "bob"], capture_output=True, text=True)
    assert missing.returncode == 1 and "no app user 'bob'" in missing.stderr


def test_the_throttle_locks_a_key_out_after_failures_then_lets_it_in_again() -> None:
    now = [0.0]
    throttle = Throttle(max_failures=3, lockout=30, clock=lambda: now[0])
    for _ in range(2):
        throttle.failed("user:ada")
    assert throttle.wait_seconds("user:ada") == 0
    throttle.failed("user:ada")
    assert throttle.wait_seconds("user:ada") == 30 and throttle.wait_seconds("user:bob") == 0
    assert throttle.wait_seconds("session:x", "user:ada") == 30  # the longest of the keys
    now[0] = 29.5
    assert throttle.wait_seconds("user:ada") == pytest.approx(0.5)
    now[0] = 30.0
    assert throttle.wait_seconds("user:ada") == 0
    throttle.failed("user:ada")
    throttle.succeeded("user:ada")  # a success starts the count again
    throttle.failed("user:ada")
    throttle.failed("user:ada")
    assert throttle.wait_seconds("user:ada") == 0


def test_a_flood_of_made_up_names_does_not_grow_the_throttle_or_free_a_locked_name() -> None:
    throttle = Throttle(max_failures=2, lockout=60, clock=lambda: 0.0, max_keys=100)
    throttle.failed("user:ada")
    throttle.failed("user:ada")
    for i in range(1000):
        throttle.failed(f"user:made-up-{i}")
    assert len(throttle._failures) <= 101 and throttle.wait_seconds("user:ada") == 60


def test_the_launcher_passes_the_switch_to_the_app_only_when_a_login_is_needed(tmp_path: Path) -> None:
    from tqaforge.launch import _parse, app_environment, login_needed

    def env(*argv: str) -> dict[str, str]:
        return app_environment(_parse(["--workspace", str(tmp_path), *argv]), tmp_path)

    assert not login_needed(_parse(["--workspace", str(tmp_path)]))
    assert env().get(LOGIN_ENV) == os.environ.get(LOGIN_ENV)
    assert env("--require-login")[LOGIN_ENV] == "1"
    assert env("--host", "0.0.0.0", "--allow-remote")[LOGIN_ENV] == "1"
    assert env("--host", "localhost").get(LOGIN_ENV) == os.environ.get(LOGIN_ENV)


def _held_port() -> socket.socket:
    """A loopback port held (listening) by the test: binding it again fails."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def test_the_launcher_refuses_remote_without_a_user_before_binding(tmp_path: Path) -> None:
    """`tqaforge app --host 0.0.0.0 --allow-remote` with no app user exits 2 with what to run. The
    port given is held by the test, so a launcher that tried to bind first would report the port
    instead: the control (the same command once a user exists) does exactly that."""
    ws = init_workspace(tmp_path / "ws", name="t")
    held = _held_port()
    try:
        port = str(held.getsockname()[1])
        argv = [sys.executable, "-m", "tqaforge", "app", "-w", str(ws.root), "--host", "0.0.0.0", "--allow-remote", "--port", port]
        refused = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert refused.returncode == 2, refused.stderr
        assert "without a login" in refused.stderr and "app users add NAME" in refused.stderr, refused.stderr
        assert str(users_file(ws.root)) in refused.stderr and "port" not in refused.stderr.split("hint")[0].lower()
        assert not users_file(ws.root).exists()
        # Loopback with --require-login: the same refusal.
        loop = subprocess.run([sys.executable, "-m", "tqaforge", "app", "-w", str(ws.root), "--require-login", "--port", port],
                              capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert loop.returncode == 2 and "--require-login without a login" in loop.stderr, loop.stderr
        served = subprocess.run([sys.executable, "-m", "tqaforge", "serve", "-w", str(ws.root), "--require-login",
                                 "--no-label-studio", "--app-port", port], capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert served.returncode == 2 and "without a login" in served.stderr, served.stderr  # `serve` (make run) too
        # Control: with a user the launcher goes on to the port check (and finds the held port).
        add_user(ws.root, "ada", PASSWORD)
        control = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert control.returncode == 2 and port in control.stderr and "without a login" not in control.stderr, control.stderr
    finally:
        held.close()


def test_label_studio_stays_on_loopback_without_the_switch(tmp_path: Path) -> None:
    """`tqaforge serve --host 0.0.0.0` without --allow-remote is refused for both servers, users or not."""
    ws = init_workspace(tmp_path / "ws", name="t")
    add_user(ws.root, "ada", PASSWORD)
    refused = subprocess.run([sys.executable, "-m", "tqaforge", "serve", "-w", str(ws.root), "--host", "0.0.0.0"],
                             capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert refused.returncode == 2 and "the app and Label Studio" in refused.stderr and "--allow-remote" in refused.stderr


def test_streamlit_oidc_in_secrets_counts_as_a_login(tmp_path: Path) -> None:
    """An `[auth]` section with redirect_uri, cookie_secret and a provider's client_id in
    `.streamlit/secrets.toml` of the directory the launcher starts from lets it start remote with
    no app user; an incomplete one does not, and a file that is not TOML is refused."""
    from tqaforge.errors import LoginError
    from tqaforge.logins import oidc_provider, oidc_secrets_file

    ws = init_workspace(tmp_path / "ws", name="t")
    here = tmp_path / "start"
    secrets = here / ".streamlit" / "secrets.toml"
    secrets.parent.mkdir(parents=True)
    secrets.write_text('[auth]\nredirect_uri = "http://x/oauth2callback"\ncookie_secret = "s"\n', encoding="utf-8")
    assert oidc_secrets_file(here) is None  # no provider: not a login
    secrets.write_text(secrets.read_text() + '[auth.google]\nclient_id = "id"\nclient_secret = "c"\n'
                       'server_metadata_url = "https://accounts.google.com/.well-known/openid-configuration"\n',
                       encoding="utf-8")
    assert oidc_secrets_file(here) == secrets and oidc_provider(secrets) == "google"
    held = _held_port()
    try:
        port = str(held.getsockname()[1])
        ran = subprocess.run([sys.executable, "-m", "tqaforge", "app", "-w", str(ws.root), "--require-login", "--port", port],
                             capture_output=True, text=True, timeout=60, cwd=here)
        assert ran.returncode == 2 and port in ran.stderr and "without a login" not in ran.stderr, ran.stderr  # got to the port
    finally:
        held.close()
    secrets.write_text("[auth\n", encoding="utf-8")
    with pytest.raises(LoginError, match="not readable TOML"):
        oidc_secrets_file(here)

"""Hostile-input suite: a URL's password is never printed nor stored (issue 23, item 14).

`labelstudio pull --url 'http://admin:PASSWORD@127.0.0.1:15998'` printed the URL, password and
all, in its error. Every command that takes a URL (Label Studio's ``--url``, ``OPENAI_BASE_URL``,
the database URL, the app's and Label Studio's host) is run for real, as a subprocess, with a
password in it; its stdout and stderr, every file of the workspace and the SQLite database's
bytes must not hold the password. Label Studio need not run: a refused port gives the error
paths. The control of each case: the URL's user name does show (``admin:***@``), so the output
checked is the one that names the URL.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import httpx
import pytest
from openai_server import OpenAIServer, Scripted
from streamlit.testing.v1 import AppTest

from tqaforge.annotation.labelstudio.client import ClientSettings, LabelStudioClient
from tqaforge.annotation.labelstudio.server import LabelStudioError
from tqaforge.ingest import import_paths
from tqaforge.redact import url_has_secret, url_password
from tqaforge.store import init_workspace

pytestmark = pytest.mark.hostile

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "sample" / "tablebench_sample.jsonl"
SECRET = "Pw-9f3kQ-zz"
# The shapes people write: a plain password, one with an unescaped '@' and '/', and a credential
# in the query instead of the user information.
PASSWORDS = [SECRET, f"{SECRET}@x/y"]


def leaked(text: str) -> bool:
    """The secret in ``text``, also when a terminal-width wrap split it across lines or Markdown
    escaping put backslashes into it."""
    return SECRET in text or SECRET in re.sub(r"[\s\\]+", "", text)


def one_line(text: str) -> str:
    return " ".join(text.split())


@dataclass
class Ran:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def run_all(commands: list[tuple[list[str], dict[str, str]]], cwd: Path) -> list[Ran]:
    """Run the CLI commands at once (each waits out its retries against a refused port)."""
    procs = []
    for args, env in commands:
        full_env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "TQAFORGE_"))}
        full_env.update(env, COLUMNS="400")  # no wrapping (leaked() copes with it anyway)
        procs.append((args, subprocess.Popen([sys.executable, "-m", "tqaforge", *args], cwd=cwd, env=full_env,
                                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    done = []
    for args, proc in procs:
        stdout, stderr = proc.communicate(timeout=180)
        done.append(Ran(args, proc.returncode, stdout, stderr))
    return done


def stored_anywhere(root: Path) -> list[str]:
    """Every file under ``root`` (the workspace: config, locks, Label Studio's directory, the
    SQLite database and its WAL) whose bytes hold the secret."""
    return [str(p) for p in root.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]


@pytest.fixture
def refused_port() -> Iterator[Callable[[], int]]:
    """Ports that refuse connections for the whole test: bound, never listening, so no server
    started meanwhile (the loopback endpoint) can be given the same port."""
    held: list[socket.socket] = []

    def port() -> int:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        held.append(sock)
        return int(sock.getsockname()[1])

    yield port
    for sock in held:
        sock.close()


@pytest.fixture
def ws_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("TQAFORGE_DATABASE_URL", raising=False)
    ws = init_workspace(tmp_path / "ws", name="urls")
    assert not import_paths(ws, [SAMPLE]).failed
    ws.close()
    return tmp_path / "ws"


# --- Label Studio's --url -------------------------------------------------------------------


@pytest.mark.parametrize("password", PASSWORDS, ids=["plain", "with-at-and-slash"])
def test_label_studio_url_password_is_never_printed_nor_stored(ws_dir: Path, password: str, refused_port: Callable[[], int]) -> None:
    """push, pull, annotators add and annotators list with --url (and its environment variable
    TQAFORGE_LABEL_STUDIO_URL) on a refused port, with and without the API token: errors name
    the URL without its password."""
    port = refused_port()
    url = f"http://admin:{password}@127.0.0.1:{port}"
    token = {"TQAFORGE_LABEL_STUDIO_TOKEN": "0123456789abcdef0123456789abcdef01234567"}
    w = ["-w", str(ws_dir)]
    commands = [
        ([*w, "labelstudio", "pull", "--url", url], token),
        ([*w, "labelstudio", "pull", f"--url={url}"], {}),  # no token: the first error names the URL
        ([*w, "labelstudio", "push", "question_review", "--url", url], token),
        ([*w, "labelstudio", "push", "question_review"], {**token, "TQAFORGE_LABEL_STUDIO_URL": url}),
        ([*w, "annotators", "add", "ana@lab.org", "--url", url], token),
        ([*w, "annotators", "list", "--url", url], token),
        ([*w, "annotators", "list", "--url", url.replace("http://", "ftp://")], token),  # not http: refused
    ]
    results = run_all(commands, ws_dir.parent)
    for ran in results:
        assert not leaked(ran.output), (ran.args, ran.output)
        assert "Traceback" not in ran.output, (ran.args, ran.output)
    named = [r for r in results if "admin:***@127.0.0.1" in r.output]
    # The control: every command that failed named the URL (the user, not the password).
    assert {tuple(r.args) for r in results if r.returncode != 0} <= {tuple(r.args) for r in named}
    assert len(named) >= 5, [(r.args, r.output) for r in results]
    assert stored_anywhere(ws_dir) == []


def test_label_studio_client_masks_its_url_token_and_echoes(refused_port: Callable[[], int]) -> None:
    """The client itself: its repr, a refused connection's error, and a server reply that
    echoes the token or the URL back."""
    port = refused_port()
    token = "0123456789abcdef0123456789abcdef01234567"
    settings = ClientSettings(url=f"http://admin:{SECRET}@127.0.0.1:{port}", token=token, attempts=1, backoff=0.0)
    assert not leaked(repr(settings)) and "admin:***@" in repr(settings) and token not in repr(settings)
    with LabelStudioClient(settings) as client, pytest.raises(LabelStudioError) as info:
        client.request("GET", "/api/projects/", what="list the projects")
    assert not leaked(str(info.value)) and "admin:***@127.0.0.1" in str(info.value)
    # A server (or a proxy) that says back what it got: its text reaches our error messages.
    echo = f"bad request from http://admin:{SECRET}@127.0.0.1 with Authorization: Token {token}"
    for status in (400, 500):
        transport = httpx.MockTransport(lambda request, status=status: httpx.Response(status, text=echo))
        with LabelStudioClient(settings, transport=transport, sleep=lambda s: None) as client, \
                pytest.raises(LabelStudioError) as info:
            client.request("POST", "/api/projects/", what="make a project", json={"title": "x"})
        message = str(info.value)
        assert not leaked(message) and token not in message, message
        assert f"HTTP {status}" in message and "bad request from" in message  # the control: the reply is shown


# --- the database URL -------------------------------------------------------------------------


def test_database_url_password_is_never_printed_nor_written(tmp_path: Path, refused_port: Callable[[], int]) -> None:
    """`init --database-url` with a password (in the user information or the query) is refused
    before anything is written: tqaforge.toml is no place for it; TQAFORGE_DATABASE_URL with a
    password to a refused server names the URL without it."""
    port = refused_port()
    with_password = f"postgresql+psycopg://ana:{SECRET}@127.0.0.1:{port}/bench"
    in_query = f"postgresql+psycopg://ana@127.0.0.1:{port}/bench?password={SECRET}"
    assert url_has_secret(with_password) and url_has_secret(in_query) and url_password(with_password) == SECRET
    commands = [
        (["init", "a", "--database-url", with_password], {}),
        (["init", "b", "--database-url", in_query], {}),
        (["init", "c"], {"TQAFORGE_DATABASE_URL": with_password, "TQAFORGE_DB_CONNECT_TIMEOUT": "3"}),
    ]
    results = run_all(commands, tmp_path)
    for ran in results:
        assert ran.returncode == 1 and not leaked(ran.output) and "Traceback" not in ran.output, (ran.args, ran.output)
        assert "ana" in ran.output and "127.0.0.1" in ran.output, ran.output  # the control: the URL is named
    assert "holds a password" in one_line(results[0].output) and "PGPASSWORD" in results[0].output
    assert stored_anywhere(tmp_path) == []
    assert not (tmp_path / "a" / "tqaforge.toml").exists()
    # The control of the refusal: the same URL without its password is written as given.
    ok = run_all([(["init", "d", "--database-url", f"sqlite:///{tmp_path / 'd.db'}"], {})], tmp_path)[0]
    assert ok.returncode == 0, ok.output
    assert "d.db" in (tmp_path / "d" / "tqaforge.toml").read_text()


# --- OPENAI_BASE_URL ------------------------------------------------------------------------


def test_llm_base_url_password_is_never_printed_nor_stored(ws_dir: Path, tmp_path: Path, refused_port: Callable[[], int]) -> None:
    """`generate questions`, `questions type --method llm` and `evaluate --model` with an
    OPENAI_BASE_URL holding a password: against a refused port (the error names the endpoint)
    and against a live endpoint (the ledger stores the endpoint): never the password."""
    dead = {"OPENAI_BASE_URL": f"http://ana:{SECRET}@127.0.0.1:{refused_port()}/v1", "OPENAI_API_KEY": "sk-test",
            "TQAFORGE_LLM_MODEL": "m"}
    w = ["-w", str(ws_dir)]
    release = tmp_path / "release"
    made = run_all([([*w, "release", "build", "--version", "1.0.0", "--out", str(release)], {})], tmp_path)[0]
    assert made.returncode == 0, made.output
    failing = [
        ([*w, "generate", "questions", "--subtypes", "Counting", "--per-round", "1"], dead),
        ([*w, "questions", "classify", "--method", "llm"], dead),
        ([*w, "evaluate", "--release", str(release), "--model", "m", "--limit", "1", "--no-plots"], dead),
    ]
    with OpenAIServer(lambda body: Scripted(text="Final Answer: 1")) as server:
        live = {**dead, "OPENAI_BASE_URL": server.url.replace("http://", f"http://ana:{SECRET}@")}
        answered = ([*w, "evaluate", "--release", str(release), "--model", "m", "--limit", "2", "--no-plots",
                     "--out", str(tmp_path / "scores")], live)
        # The live run after the failing ones: on SQLite one evaluate at a time runs its model
        # (the step runner's lock), and its stored replies would answer the dead run's request.
        results = run_all(failing, tmp_path) + run_all([answered], tmp_path)
        assert len(server.requests) == 2  # the live endpoint was reached
    for ran in results:
        assert not leaked(ran.output) and "Traceback" not in ran.output, (ran.args, ran.output)
    for ran in results[:3]:
        assert ran.returncode == 1 and "ana:***@127.0.0.1" in ran.output, (ran.args, ran.output)  # the control
    assert results[3].returncode == 0, results[3].output
    assert stored_anywhere(ws_dir) == [] and stored_anywhere(tmp_path / "scores") == []
    ws = init_workspace(ws_dir)
    try:
        from sqlmodel import select

        from tqaforge.schemas.records import LLMCall

        with ws.session() as s:
            endpoints = {c.endpoint for c in s.exec(select(LLMCall))}
    finally:
        ws.close()
    assert endpoints and all(e and "ana:***@127.0.0.1" in e for e in endpoints)  # stored, without the password


def test_the_generate_page_shows_the_endpoint_without_its_password(ws_dir: Path, monkeypatch: pytest.MonkeyPatch, refused_port: Callable[[], int]) -> None:
    monkeypatch.setenv("TQAFORGE_WORKSPACE", str(ws_dir))
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://ana:{SECRET}@127.0.0.1:{refused_port()}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("TQAFORGE_LLM_MODEL", "m")
    at = AppTest.from_file(str(REPO / "tqaforge" / "app" / "pages" / "generate.py"), default_timeout=60).run()
    assert not at.exception, at.exception
    shown = "\n".join([c.value for c in at.caption] + [m.value for m in at.markdown] + [str(x.value) for x in at.warning])
    assert not leaked(shown)
    assert "ana:***@127.0.0.1" in shown.replace("\\", "")  # the control: the endpoint is shown


# --- the app's and Label Studio's address ------------------------------------------------------


def test_a_host_with_a_login_is_refused_without_echoing_it(ws_dir: Path, refused_port: Callable[[], int]) -> None:
    """`serve --host` and `app --host` take an address; a pasted URL's login is refused as no
    address, and never echoed (it was printed in "cannot listen on admin:PASSWORD@...")."""
    host = f"admin:{SECRET}@127.0.0.1"
    w = ["-w", str(ws_dir)]
    results = run_all([
        ([*w, "serve", "--host", host, "--no-label-studio", "--app-port", str(refused_port())], {}),
        ([*w, "app", "--host", host, "--allow-remote", "--port", str(refused_port())], {}),
    ], ws_dir.parent)
    for ran in results:
        assert ran.returncode != 0 and not leaked(ran.output) and "Traceback" not in ran.output, ran.output
        assert "***@127.0.0.1" in ran.output and "not an address" in ran.output, ran.output  # the control
    assert stored_anywhere(ws_dir) == []


# --- malformed URLs: the same class, through the parsers' errors ---------------------------------


def test_malformed_urls_are_refused_without_a_traceback_or_their_password(ws_dir: Path,
                                                                          refused_port: Callable[[], int]) -> None:
    """A URL with a password that its parser refuses (a port that is no number, a broken [IPv6]
    address, a missing ':' after the scheme) gave tracebacks from httpx and SQLAlchemy, or the
    URL as typed. Each is an error naming the URL without its password, for Label Studio's
    --url, OPENAI_BASE_URL and the database URL."""
    port = refused_port()
    broken = [f"http://admin:{SECRET}@127.0.0.1:notaport", f"http://admin:{SECRET}@[::1",
              f"http//admin:{SECRET}@127.0.0.1:{port}"]
    token = {"TQAFORGE_LABEL_STUDIO_TOKEN": "0123456789abcdef0123456789abcdef01234567"}
    w = ["-w", str(ws_dir)]
    commands: list[tuple[list[str], dict[str, str]]] = []
    for url in broken:
        commands.append(([*w, "annotators", "list", "--url", url], token))
        commands.append(([*w, "generate", "questions", "--subtypes", "Counting", "--per-round", "1"],
                         {"OPENAI_BASE_URL": url + "/v1", "OPENAI_API_KEY": "sk-test", "TQAFORGE_LLM_MODEL": "m"}))
        db = url.replace("http", "postgresql", 1) + "/bench"
        commands.append(([*w, "status"], {"TQAFORGE_DATABASE_URL": db}))
    results = run_all(commands, ws_dir.parent)
    for ran in results:
        assert ran.returncode == 1, (ran.args, ran.output)
        assert not leaked(ran.output) and "Traceback" not in ran.output, (ran.args, ran.output)
        assert "admin:***@" in ran.output, (ran.args, ran.output)  # the control: the URL is named
    assert stored_anywhere(ws_dir) == []

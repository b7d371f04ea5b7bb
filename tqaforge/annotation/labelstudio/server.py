"""A local Label Studio server: started, waited for, and stopped from Python.

Label Studio pins old versions of libraries tqaforge also uses (``openai<2`` among them), so it
lives in its own virtualenv (``.venv-ls``, made by ``make labelstudio``) and runs as a separate
process; tqaforge only talks to it over HTTP with ``label-studio-sdk``. The same function starts
the demo server for ``make run`` and the server the tests use.

>>> server = start_server(LabelStudioSettings(data_dir=Path("ls-data")))  # doctest: +SKIP
>>> server.url, server.token  # doctest: +SKIP
('http://127.0.0.1:8080', '...')
>>> server.stop()  # doctest: +SKIP

The account and its API token are preset on the command line (``--username``, ``--password``,
``--user-token``) so no one has to sign up; preset tokens are "legacy" tokens, which Label
Studio accepts only with ``LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN=true``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tqaforge.errors import TqaforgeError

#: The virtualenv ``make labelstudio`` creates, relative to the repository.
DEFAULT_VENV = Path(__file__).resolve().parents[3] / ".venv-ls"
DEMO_USERNAME = "admin@tqaforge.local"
DEMO_PASSWORD = "tqaforge-demo"
# Label Studio wants a token of 40 hex-like characters; this one is public and only for the demo.
DEMO_TOKEN = "7a3f0c5e9b1d4a6f8e2c0b7d5a3f1e9c4b6d8a20"


class LabelStudioError(TqaforgeError):
    """Label Studio is not installed, did not start, or cannot be reached."""


@dataclass(frozen=True)
class LabelStudioSettings:
    """Where and as whom to run a local server."""

    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 8080
    username: str = DEMO_USERNAME
    password: str = DEMO_PASSWORD
    token: str = DEMO_TOKEN
    venv: Path = DEFAULT_VENV
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


@dataclass
class RunningServer:
    """A started server; :meth:`stop` ends it (and everything it spawned)."""

    settings: LabelStudioSettings
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def url(self) -> str:
        return self.settings.url

    @property
    def token(self) -> str:
        return self.settings.token

    def stop(self, timeout: float = 20.0) -> None:
        """Stop the server: SIGTERM to its process group, SIGKILL if it lingers."""
        if self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        except ProcessLookupError:
            pass


def executable(venv: Path = DEFAULT_VENV) -> Path:
    """The ``label-studio`` command of ``venv``, or on PATH; a clear error when neither exists."""
    candidate = venv / "bin" / "label-studio"
    if candidate.exists():
        return candidate
    found = shutil.which("label-studio")
    if found:
        return Path(found)
    raise LabelStudioError(
        f"Label Studio is not installed (looked for {candidate} and on PATH)",
        hint="run `make labelstudio` (it makes .venv-ls with `pip install label-studio`)",
    )


def is_healthy(url: str, timeout: float = 2.0) -> bool:
    """True when ``url/health`` answers 200."""
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout) as response:  # noqa: S310 (loopback URL we built)
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def start_server(settings: LabelStudioSettings, *, wait_s: float = 180.0) -> RunningServer:
    """Start Label Studio with its own SQLite database under ``settings.data_dir`` and wait until
    it answers; the preset account and token work as soon as this returns."""
    command = executable(settings.venv)
    if is_healthy(settings.url):
        raise LabelStudioError(
            f"something already answers at {settings.url}",
            hint="stop it, or choose another port (LABEL_STUDIO_PORT=...)",
        )
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN": "true",
        "LABEL_STUDIO_BASE_DATA_DIR": str(settings.data_dir),
        "DJANGO_DB": "sqlite",
        # No telemetry and no update checks: the machine may have no internet.
        "COLLECT_ANALYTICS": "false",
        "LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK": "true",
        **settings.extra_env,
    }
    log_path = settings.data_dir / "label-studio.log"
    log = log_path.open("ab")
    process = subprocess.Popen(
        [
            str(command), "start", "--no-browser",
            "--internal-host", settings.host, "--port", str(settings.port),
            "--data-dir", str(settings.data_dir),
            "--username", settings.username, "--password", settings.password,
            "--user-token", settings.token,
        ],
        env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True,  # its own process group, so stop() reaches every child
    )
    log.close()
    server = RunningServer(settings, process, log_path)
    deadline = time.monotonic() + wait_s
    try:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                tail = log_path.read_text(errors="replace")[-1500:]
                raise LabelStudioError(f"Label Studio exited with code {process.returncode}:\n{tail}",
                                       hint=f"see {log_path}")
            if is_healthy(settings.url):
                return server
            time.sleep(1.0)
    except BaseException:
        server.stop()  # Ctrl-C or SIGTERM while waiting: leave no server behind
        raise
    server.stop()
    raise LabelStudioError(f"Label Studio did not answer at {settings.url} within {wait_s:.0f} s",
                           hint=f"see {log_path}")

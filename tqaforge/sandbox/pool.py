"""The host side: :class:`Sandbox`, a thread-safe pool of warm worker processes.

    with Sandbox(workers=2) as box:
        result = box.run(code, table_csv)          # RunResult; never raises for what the code does
        if result.outcome is Outcome.OK: ...

Each worker (:mod:`tqaforge.sandbox.worker`) is ``python -I`` running ``tqaforge.sandbox.worker.main()``, started with
an empty environment in its own session; it forks one isolated child per program (itself, or through
its zygote for programs that do not draw). A worker that dies
(or stops answering) is replaced, and the call that was running gets ``crashed`` or ``killed``.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import queue
import select
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from concurrent.futures import Future
from dataclasses import asdict
from typing import Any, Callable

from tqaforge.errors import SandboxError
from tqaforge.files import remove_tree
from tqaforge.sandbox import isolation
from tqaforge.sandbox.charts import ChartReading
from tqaforge.sandbox.results import Limits, Outcome, RunResult, check_limits
from tqaforge.sandbox.worker import read_frame, write_frame

__all__ = ["Sandbox"]

log = logging.getLogger("tqaforge.sandbox")

_STARTUP_SECONDS = 120.0  # a worker imports pandas, numpy and matplotlib before it says hello
_GRACE_SECONDS = 10.0  # beyond the wall-clock limit, how long the host waits for a worker's answer
_PREFIX = "tqaforge-sandbox-"
_LOCK = ".lock"
_STALE_SECONDS = 600.0
_UID_BASE = 2_000_000_000  # sandbox uids (root only): high, not in /etc/passwd, one per worker
_warned = False
_warn_lock = threading.Lock()
_uid_counter = 0


def _warn_once(missing: dict[str, str]) -> None:
    global _warned
    with _warn_lock:
        if _warned or not missing:
            return
        _warned = True
    reasons = "; ".join(f"{layer}: {why}" for layer, why in missing.items())
    log.warning("sandbox isolation is weaker than asked on this machine (missing %s). Runs record this in "
                "RunResult.missing. Reasons: %s", ", ".join(missing), reasons)


def _next_uid() -> int:
    global _uid_counter
    with _warn_lock:
        _uid_counter += 1
        return _UID_BASE + (os.getpid() % 1_000_000) * 64 + _uid_counter % 64


class _WorkerDied(Exception):
    pass


class _Worker:
    """One worker process and its pipes. Used by one thread at a time (the pool hands it out)."""

    def __init__(self, base_dir: str, index: int, skip_layers: tuple[str, ...]) -> None:
        self.dir = tempfile.mkdtemp(prefix=f"w{index}-", dir=base_dir)
        os.chmod(self.dir, 0o711)  # the sandbox uid must reach its scratch directory inside
        mpl = self.mpl = os.path.join(self.dir, "mpl")
        os.mkdir(mpl, 0o700)
        self.skip_layers = skip_layers
        _font_cache_in(mpl, skip_layers)
        self.uid = _next_uid() if os.geteuid() == 0 else None
        self.log_path = os.path.join(self.dir, "worker.log")
        import tqaforge

        source_root = os.path.dirname(os.path.dirname(os.path.abspath(tqaforge.__file__)))
        # -I: no environment variables, no user site, no current directory on sys.path. The directory
        # holding tqaforge goes at the *end* of sys.path, for source checkouts that are not installed.
        boot = (f"import sys; sys.path.append({source_root!r}); "
                "from tqaforge.sandbox.worker import main; main()")
        with open(self.log_path, "wb") as log_file:
            os.fchmod(log_file.fileno(), 0o600)  # the worker's directory is the programs' too
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-X", "utf8", "-c", boot], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=log_file, env={}, cwd=self.dir, close_fds=True, start_new_session=True,
            )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.wfd = self.proc.stdin.fileno()
        self.rfd = self.proc.stdout.fileno()
        config = {"base_dir": self.dir, "mplconfigdir": mpl, "uid": self.uid, "gid": self.uid, "skip_layers": list(skip_layers)}
        self.isolation: tuple[str, ...] = ()
        self.missing: dict[str, str] = {}
        self.cgroup: str | None = None
        try:
            write_frame(self.wfd, config)
        except OSError:
            pass

    def handshake(self) -> None:
        hello = self._read(_STARTUP_SECONDS)
        if not isinstance(hello, dict) or not hello.get("hello"):
            self.kill()
            raise SandboxError(
                f"sandbox: the worker process did not start (see {self.log_path}): {self._log_tail()}",
                hint="check that pandas, numpy and matplotlib import in this Python; the log shows the worker's error",
            )
        self.isolation = tuple(hello["isolation"])
        self.missing = dict(hello["missing"])
        self.cgroup = hello.get("cgroup") if isinstance(hello.get("cgroup"), str) else None
        _font_cache_out(self.mpl, self.skip_layers)  # now: no program has run in this worker yet

    def _log_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as fh:
                text = fh.read()[-2000:].decode("utf-8", "replace").strip()
        except OSError:
            return "(no log)"
        return text.splitlines()[-1] if text else "(empty log)"

    def _read(self, timeout: float) -> Any:
        ready, _, _ = select.select([self.rfd], [], [], timeout)
        if not ready:
            raise _WorkerDied("no answer in time")
        try:
            return read_frame(self.rfd)
        except (OSError, ValueError) as exc:
            raise _WorkerDied(str(exc)) from None

    def call(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        try:
            write_frame(self.wfd, request)
        except OSError as exc:
            raise _WorkerDied(f"cannot send: {exc}") from None
        reply = self._read(timeout)
        if not isinstance(reply, dict):
            raise _WorkerDied("the worker closed its pipe")
        return reply

    def kill(self) -> int | None:
        """Kill the worker and everything its programs left; its exit status (-signal when signalled)."""
        for fn in (os.killpg, os.kill):
            try:
                fn(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
        status = self.proc.wait()
        if self.uid is not None:
            # Programs of this worker run as its own uid: one kill(-1) as that uid ends them all.
            # (The shell's kill, not Python: the interpreter may sit under a directory that uid cannot enter.)
            try:
                subprocess.run(["/bin/sh", "-c", "kill -9 -1"], user=self.uid, group=self.uid, extra_groups=[], env={},
                               cwd="/", check=False, capture_output=True, timeout=10)
            except (OSError, subprocess.SubprocessError) as exc:
                log.warning("sandbox: could not sweep the processes of uid %s after its worker died: %s", self.uid, exc)
        self._remove_cgroup()
        return status

    def _remove_cgroup(self) -> None:
        # The kernel empties a dead worker's pid namespace asynchronously: an rmdir may find it busy a moment.
        if self.cgroup is None:
            return
        deadline = time.monotonic() + 5
        while True:
            try:
                os.rmdir(self.cgroup)
                break
            except FileNotFoundError:
                break
            except OSError as exc:
                if time.monotonic() > deadline:
                    log.warning("sandbox: could not remove the cgroup %s: %s", self.cgroup, exc.strerror)
                    break
                time.sleep(0.01)
        self.cgroup = None

    def close(self) -> None:
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()
        if self.proc.stdout:
            self.proc.stdout.close()
        self._remove_cgroup()
        _remove_quietly(self.dir)


_FONT_CACHE_BYTES = 8 * 1024 * 1024


def _font_cache_dir(skip_layers: tuple[str, ...]) -> str | None:
    """Where workers keep matplotlib's font list between sandboxes, created if need be (None: no
    cache): a directory of this user's alone, one per interpreter and set of skipped layers (what a
    worker can see of the fonts)."""
    key = hashlib.sha256(f"{sys.prefix}\0{sys.version}\0{sorted(skip_layers)}".encode()).hexdigest()[:16]
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(root, "tqaforge", f"sandbox-mpl-{key}")
    try:
        os.makedirs(path, 0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError:
        return None
    # Trusted only when nobody else could have written it.
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        return None
    return path


def _font_files(directory: str) -> list[str]:
    try:
        return [n for n in os.listdir(directory) if n.startswith("fontlist-") and n.endswith(".json")]
    except OSError:
        return []


def _font_cache_in(mpl: str, skip_layers: tuple[str, ...]) -> None:
    """Give a new worker the font list an earlier worker built: matplotlib scans its fonts once
    for a fresh configuration directory (about a quarter of a second of a worker's start)."""
    cache = _font_cache_dir(skip_layers)
    if cache is None:
        return
    for name in _font_files(cache):
        try:
            fd = os.open(os.path.join(cache, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as fh:
                if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                    continue
                data = fh.read(_FONT_CACHE_BYTES + 1)
            if len(data) <= _FONT_CACHE_BYTES:
                with open(os.path.join(mpl, name), "wb") as out:
                    out.write(data)
        except OSError:
            continue


def _font_cache_out(mpl: str, skip_layers: tuple[str, ...]) -> None:
    """Keep the font list a worker built at its start, before it ran any program (so that nothing a
    program did can be in it), for the next worker's :func:`_font_cache_in`."""
    names = _font_files(mpl)
    cache = _font_cache_dir(skip_layers) if names else None
    if cache is None or set(names) <= set(_font_files(cache)):
        return
    for name in names:
        try:
            with open(os.path.join(mpl, name), "rb") as fh:
                data = fh.read(_FONT_CACHE_BYTES + 1)
            if len(data) > _FONT_CACHE_BYTES:
                continue
            tmp = os.path.join(cache, f".{name}.{os.getpid()}.{threading.get_ident()}")
            with open(tmp, "wb") as out:
                out.write(data)
            os.replace(tmp, os.path.join(cache, name))  # atomic: a concurrent reader sees the old list or the new
        except OSError:
            continue


class _Spawner:
    """The one thread that starts a sandbox's workers, from its start to its close.

    A worker dies with the *thread* that started it (its parent-death signal, ``PR_SET_PDEATHSIG``,
    follows the thread that forked it, not the process): a worker started from whatever thread
    called :meth:`Sandbox.run` (a replacement for one that died) would die when that thread ends,
    and the next program would be reported killed. So every worker is started here, and this
    thread ends only after the sandbox's workers are stopped. It holds no reference to the sandbox.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], _Worker], Future[_Worker]] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._stopped = False
        self._thread = threading.Thread(target=_spawn_loop, args=(self._jobs,), name="tqaforge-sandbox-start", daemon=True)
        self._thread.start()

    def call(self, start: Callable[[], _Worker]) -> _Worker:
        """``start()`` run on this thread (SandboxError once stopped)."""
        if threading.current_thread() is self._thread:
            return start()
        future: Future[_Worker] = Future()
        with self._lock:
            if self._stopped:
                raise SandboxError("sandbox: closed", hint="create a new Sandbox")
            self._jobs.put((start, future))
        return future.result()

    def stop(self) -> None:
        """End the thread once the jobs already asked are done (idempotent)."""
        with self._lock:
            if not self._stopped:
                self._stopped = True
                self._jobs.put(None)


def _spawn_loop(jobs: queue.SimpleQueue[tuple[Callable[[], _Worker], Future[_Worker]] | None]) -> None:
    while (job := jobs.get()) is not None:
        start, future = job
        if future.set_running_or_notify_cancel():
            try:
                future.set_result(start())
            except BaseException as exc:  # handed to the caller, who raises it
                future.set_exception(exc)


class Sandbox:
    """A pool of ``workers`` warm sandbox workers (default: one per usable core); thread-safe; a context manager.

    :meth:`run` blocks until a worker is free. Limits are checked here (SandboxError when out of
    range); starting fails with SandboxError when no worker can start at all.
    """

    def __init__(self, workers: int | None = None, limits: Limits = Limits(), *, skip_layers: tuple[str, ...] = ()) -> None:
        if workers is None:  # one per core this process may run on: programs are CPU-bound
            workers = min(64, len(os.sched_getaffinity(0)))
        if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 64:
            raise SandboxError(f"sandbox: workers must be an integer from 1 to 64, got {workers!r}",
                               hint="one worker per CPU core is plenty")
        self.limits = check_limits(limits)
        self._skip = tuple(skip_layers)  # for tests of the weaker layers only: Sandbox(skip_layers=("landlock-fs",))
        sweep_stale()
        self._base = tempfile.mkdtemp(prefix=_PREFIX)
        os.chmod(self._base, 0o711)
        # Held for this sandbox's life: a directory whose lock is free belongs to a host that died.
        self._lock_fd = os.open(os.path.join(self._base, _LOCK), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        self._idle: queue.Queue[_Worker | None] = queue.Queue()
        self._all: list[_Worker] = []
        self._lock = threading.Lock()
        self._index = 0
        self._closed = False
        self._spawner = _Spawner()
        self._finalizer = weakref.finalize(self, _cleanup, self._all, self._base, self._lock_fd, self._spawner)
        try:
            started = [self._spawn() for _ in range(workers)]
            for worker in started:
                worker.handshake()
        except BaseException:
            self.close()
            raise
        for worker in started:
            self._idle.put(worker)
        self.isolation = started[0].isolation
        self.missing = tuple(started[0].missing)
        _warn_once(started[0].missing)

    def _spawn(self) -> _Worker:
        with self._lock:
            self._index += 1
            index = self._index
        worker = self._spawner.call(lambda: _Worker(self._base, index, self._skip))
        with self._lock:
            self._all.append(worker)
        return worker

    def _replace(self, dead: _Worker) -> _Worker | None:
        with self._lock:
            if dead in self._all:
                self._all.remove(dead)
        _remove_quietly(dead.dir)
        if self._closed:
            return None
        try:
            worker = self._spawn()
        except SandboxError:  # closed meanwhile
            return None
        try:
            worker.handshake()
        except SandboxError:
            with self._lock:
                self._all.remove(worker)
            return None
        return worker

    def run(self, code: str, table_csv: str, *, chart_type: str | None = None, limits: Limits | None = None) -> RunResult:
        """Run ``code`` as a script in a fresh scratch directory holding ``table_csv`` as ``table.csv``."""
        limits = check_limits(limits if limits is not None else self.limits)
        if not isinstance(code, str) or not isinstance(table_csv, str):
            raise SandboxError("sandbox: code and table_csv must be strings")
        if chart_type is not None and not isinstance(chart_type, str):
            raise SandboxError(f"sandbox: chart_type must be a string or None, got {type(chart_type).__name__}")
        if self._closed:
            raise SandboxError("sandbox: run() after close()", hint="create a new Sandbox")
        worker = self._idle.get()
        if worker is None:  # a slot whose worker could not be restarted: try once more
            worker = self._spawn()
            try:
                worker.handshake()
            except SandboxError:
                with self._lock:
                    self._all.remove(worker)
                self._idle.put(None)
                raise
        start = time.perf_counter()
        request = {"code": code, "table_csv": table_csv, "chart_type": chart_type, "limits": asdict(limits)}
        try:
            reply = worker.call(request, limits.wall_seconds + _GRACE_SECONDS)
        except _WorkerDied as exc:
            status = worker.kill()
            seconds = time.perf_counter() - start
            killed = status is not None and status < 0 and status != -signal.SIGSEGV and status != -signal.SIGABRT
            result = RunResult(
                outcome=Outcome.KILLED if killed else Outcome.CRASHED, stdout="", stderr="", exit_status=None,
                error=f"the sandbox worker died or stopped answering ({exc}); it was replaced",
                isolation=worker.isolation, missing=tuple(worker.missing), chart=None, seconds=seconds,
            )
            self._idle.put(self._replace(worker))
            return result
        except BaseException:
            # Interrupted while the worker runs a program: its answer can no longer be matched to a call.
            worker.kill()
            self._idle.put(self._replace(worker))
            raise
        self._idle.put(worker)
        return _result(reply, worker, time.perf_counter() - start)

    async def arun(self, code: str, table_csv: str, *, chart_type: str | None = None, limits: Limits | None = None) -> RunResult:
        """:meth:`run` in a thread, for asyncio callers."""
        import asyncio  # here: asyncio costs 10 ms to import, and only its callers have it already

        return await asyncio.to_thread(self.run, code, table_csv, chart_type=chart_type, limits=limits)

    def close(self) -> None:
        """Stop every worker and remove their directories. Idempotent."""
        self._closed = True
        self._finalizer()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _cleanup(workers: list[_Worker], base: str, lock_fd: int, spawner: _Spawner) -> None:
    for worker in list(workers):
        worker.close()
    workers.clear()
    spawner.stop()  # after the workers it started have stopped: no parent-death signal before that
    _remove_quietly(base)
    try:
        os.close(lock_fd)
    except OSError:
        pass


def _remove_quietly(path: str) -> None:
    try:
        remove_tree(path)
    except OSError as exc:
        log.warning("sandbox: could not remove %s: %s", path, exc)


def sweep_stale(tmp: str | None = None) -> list[str]:
    """Remove what sandboxes of dead hosts left (their directories, their workers' memory cgroups).

    A host killed by SIGKILL (or SIGTERM, SIGHUP: Python runs no finalizer then) cannot clean up;
    its programs die with it (each worker is the init of a pid namespace), but its directory under
    the temporary directory stays. Each live sandbox holds a lock on ``.lock`` in its directory; a
    directory whose lock can be taken belongs to nobody. Returns the directories removed."""
    tmp = tmp or tempfile.gettempdir()
    removed: list[str] = []
    try:
        names = [n for n in os.listdir(tmp) if n.startswith(_PREFIX)]
    except OSError:
        return removed
    for name in names:
        path = os.path.join(tmp, name)
        try:
            fd = os.open(os.path.join(path, _LOCK), os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
        except FileNotFoundError:
            # Older sandboxes had no lock, and a new one has none for a moment after mkdtemp: only
            # a directory untouched for a while is taken for dead.
            try:
                if time.time() - os.lstat(path).st_mtime < _STALE_SECONDS:
                    continue
            except OSError:
                continue
            fd = None
        except OSError:
            continue
        try:
            if fd is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # alive
            _remove_quietly(path)
            if not os.path.lexists(path):
                removed.append(path)
        finally:
            if fd is not None:
                os.close(fd)
    live = set(names) - {os.path.basename(p) for p in removed}
    dead = {os.path.basename(p) for p in removed}
    for parent in isolation.cgroup_parents():
        try:
            groups = [n for n in os.listdir(parent) if n.startswith(_PREFIX)]
        except OSError:
            continue
        for group in groups:
            if any(group.startswith(base + "-") for base in live):
                continue
            if not any(group.startswith(base + "-") for base in dead):
                # Not of a sandbox this sweep found dead: of another temporary directory's sandbox
                # (TMPDIR), or made since the listing above; a new worker's cgroup is empty until the
                # worker moves in, and removing it then would break that live sandbox. Only an old one.
                try:
                    if time.time() - os.lstat(os.path.join(parent, group)).st_mtime < _STALE_SECONDS:
                        continue
                except OSError:
                    continue
            try:
                os.rmdir(os.path.join(parent, group))
            except OSError:
                pass  # still holds processes: not ours to take
    return removed


def _result(reply: dict[str, Any], worker: _Worker, seconds: float) -> RunResult:
    chart: ChartReading | None = None
    error = reply.get("error")
    if reply.get("chart") is not None:
        try:
            chart = ChartReading.from_dict(reply["chart"])
        except ValueError as exc:
            error = f"{error}; " if error else ""
            error += f"unreadable chart reading: {exc}"
    try:
        outcome = Outcome(str(reply.get("outcome")))
    except ValueError:
        outcome = Outcome.CRASHED
    return RunResult(
        outcome=outcome, stdout=str(reply.get("stdout", "")), stderr=str(reply.get("stderr", "")),
        exit_status=reply.get("exit_status"), error=error, isolation=worker.isolation, missing=tuple(worker.missing),
        chart=chart, seconds=seconds,
    )

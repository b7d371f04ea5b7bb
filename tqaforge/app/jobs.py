"""Library steps that take longer than a page should wait (starting Label Studio servers: 40-90 s
each) run in a background thread of the app's process, one per key: the page returns at once,
shows the step's own status while it runs, and its result (or error) once it is done. A rerun,
another browser tab or a second click finds the same job instead of starting a second one."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Job", "find_job", "start_job"]

_LOCK = threading.Lock()
_JOBS: dict[str, "Job"] = {}
# A few at a time: a job is a handful of library calls that mostly wait (on a server, a network).
_POOL = ThreadPoolExecutor(4, thread_name_prefix="tqaforge-app-job")


@dataclass(frozen=True)
class Job:
    """A step running (or done) in the background: what it is, when it began, its future, and
    what it acts on (``targets``; empty: everything of its kind)."""

    label: str
    began: float
    future: Future[Any]
    targets: tuple[str, ...] = ()

    @property
    def running(self) -> bool:
        return not self.future.done()

    @property
    def seconds(self) -> float:
        return time.monotonic() - self.began


def start_job(key: str, label: str, step: Callable[[], Any], *, targets: tuple[str, ...] = ()) -> Job:
    """Run ``step`` in the background under ``key``; while a job of that key still runs, that
    job is returned and nothing new starts."""
    with _LOCK:
        job = _JOBS.get(key)
        if job is not None and job.running:
            return job
        job = Job(label, time.monotonic(), _POOL.submit(step), targets)
        _JOBS[key] = job
        return job


def find_job(key: str) -> Job | None:
    """The job last started under ``key`` (running or done), or None."""
    with _LOCK:
        return _JOBS.get(key)

"""What a sandbox run is given (:class:`Limits`) and what it gives back (:class:`RunResult`, :class:`Outcome`).

Stdlib only: the host, the worker and the CLI all import this module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any

from tqaforge.errors import SandboxError
from tqaforge.printable import escape_controls
from tqaforge.sandbox.charts import ChartReading

__all__ = ["Outcome", "Limits", "RunResult", "check_limits"]


class Outcome(StrEnum):
    """How a program ended. Hostile or broken behaviour is an outcome, never an exception."""

    OK = "ok"  # exited with status 0 (also sys.exit(0) / sys.exit(None))
    EXCEPTION = "exception"  # an uncaught exception, a syntax error, or a non-zero exit status
    TIMEOUT = "timeout"  # wall-clock or CPU-time limit reached; the program was killed
    MEMORY = "memory"  # MemoryError: the address-space limit was reached
    OUTPUT_LIMIT = "output_limit"  # stdout + stderr passed Limits.output_bytes; the program was killed
    KILLED = "killed"  # ended by a signal we did not send (SIGKILL from itself, the OOM killer...)
    CRASHED = "crashed"  # a C-level crash (SIGSEGV, SIGABRT, SIGBUS...) or the worker process died


@dataclass(frozen=True)
class Limits:
    """Resource limits of one run. Every limit holds for the program and all processes it starts."""

    cpu_seconds: float = 10  # CPU time (RLIMIT_CPU; rounded up to whole seconds)
    wall_seconds: float = 15  # wall-clock time, enforced by the worker
    memory_mb: int = 1024  # address space the program may add to the warm interpreter's (RLIMIT_AS)
    file_mb: int = 16  # largest file the program may write (RLIMIT_FSIZE)
    open_files: int = 64  # open file descriptors (RLIMIT_NOFILE)
    processes: int = 16  # processes and threads of the sandbox user (RLIMIT_NPROC; see README for non-root)
    output_bytes: int = 1_000_000  # stdout + stderr together; more kills the program (output_limit)


# (smallest, largest) accepted value of each limit: below the minimum the interpreter cannot even run
# a program, above the maximum a limit no longer limits anything.
_BOUNDS: dict[str, tuple[float, float]] = {
    "cpu_seconds": (0.1, 3600),
    "wall_seconds": (0.1, 3600),
    "memory_mb": (64, 1_048_576),
    "file_mb": (1, 1_048_576),
    "open_files": (16, 65_536),
    "processes": (1, 4096),
    "output_bytes": (1, 1_000_000_000),
}


def check_limits(limits: Limits) -> Limits:
    """``limits`` itself, or SandboxError naming the first limit out of range and the accepted range."""
    if not isinstance(limits, Limits):
        raise SandboxError(f"sandbox limits: expected a tqaforge.sandbox.Limits, got {type(limits).__name__}")
    for f in fields(limits):
        value = getattr(limits, f.name)
        low, high = _BOUNDS[f.name]
        integral = f.name not in ("cpu_seconds", "wall_seconds")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (integral and not isinstance(value, int)):
            kind = "an integer" if integral else "a number"
            raise SandboxError(
                f"sandbox limits: {f.name} must be {kind}, got {value!r}", hint=f"pass {f.name} between {low:g} and {high:g}"
            )
        if not math.isfinite(value) or not low <= value <= high:
            raise SandboxError(
                f"sandbox limits: {f.name}={value!r} is out of range", hint=f"pass {f.name} between {low:g} and {high:g}"
            )
    return limits


@dataclass(frozen=True)
class RunResult:
    """The result of one sandbox run.

    ``exit_status`` is the exit code, or ``-signal`` when the program was ended by a signal, or None
    when the worker died and no status is known. ``error`` says why the outcome is not ``ok``.
    ``isolation`` names the layers that were in force, ``missing`` the ones this machine could not give.
    """

    outcome: Outcome
    stdout: str
    stderr: str
    exit_status: int | None
    error: str | None
    isolation: tuple[str, ...]
    missing: tuple[str, ...]
    chart: ChartReading | None
    seconds: float

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (the CLI's --json)."""
        return {
            "outcome": str(self.outcome),
            "stdout": self.stdout,
            "stderr": self.stderr,
            "exit_status": self.exit_status,
            "error": self.error,
            "isolation": list(self.isolation),
            "missing": list(self.missing),
            "chart": None if self.chart is None else self.chart.to_dict(),
            "seconds": round(self.seconds, 6),
        }

    def lines(self) -> list[str]:
        """A human summary for the CLI: outcome line, error, output, isolation.

        What the program wrote is hostile: its control characters are shown escaped (no screen
        clearing, clipboard write or cursor move reaches the terminal) and each of its lines is
        indented under its heading, so no line of it can pass for our ``outcome:`` line.
        """
        status = "-" if self.exit_status is None else str(self.exit_status)
        out = [f"outcome: {self.outcome}  (exit status {status}, {self.seconds:.3f} s)"]
        if self.error:
            out.append("error: " + escape_controls(self.error, lines=False))
        if self.chart is not None:
            said = str(self.chart.y) if self.chart.ok else f"error: {self.chart.error}"
            out.append(escape_controls(f"chart ({self.chart.chart_type}): {said}", lines=False))
        for name, text in (("stdout", self.stdout), ("stderr", self.stderr)):
            if text:
                out.append(f"--- {name} ---")
                out += ["  " + line for line in escape_controls(text.rstrip("\n")).split("\n")]
        out.append("isolation: " + (", ".join(self.isolation) or "none"))
        if self.missing:
            out.append("missing: " + ", ".join(self.missing))
        return out

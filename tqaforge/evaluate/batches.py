"""Several programs in one sandbox run: what a sandbox run costs is mostly its start (a fork of a
warm worker, its namespaces and Landlock ruleset, the first figure of the child), about three times
what a second chart program costs in the same child. So :func:`run_batched` sends the programs of an
evaluation in batches, each batch one sandbox run of a small driver (:func:`child_main`) that runs
the programs one after another, each as its own script, and reports each one's result as it ends.

Every program still runs only in the sandbox, with the sandbox's limits over the whole batch. Each
one starts as it would alone: a fresh ``__main__`` (``program.py``, ``sys.argv``, ``sys.path``), a
scratch directory holding only a fresh ``table.csv``, the working directory, environment, numpy's
random state and matplotlib's rcParams as the batch found them, ``random`` seeded afresh, no figure open;
its stdout and stderr are the file descriptors 1 and 2 (what it and anything it starts write there,
as alone), and what it prints, its exit status (Python's rule for ``SystemExit``) and its chart are
its result. The driver stops the batch after a program that leaves something behind that the next
one could see and that it cannot reset: a thread or a process still running, a signal handler, an
alarm or interval timer, a change to ``builtins``.

A program whose result could differ from its own run's is run again alone (:meth:`Sandbox.run`),
and that result counts: the first program a batch did not report (it timed out, passed the output
or memory limit, crashed or killed the batch: the limits hold for the batch, not for each program),
a MemoryError, more output than ``Limits.output_bytes``; the programs after it form the next batch.
What the driver cannot see is a program changing a library in place (monkeypatching pandas, say):
such a program changes what later programs of its batch do, as in TableBench's own run, where every
program runs in one process.

A chart program is run twice over for TableBench's score (its run draws the code twice into one
figure) and once for ours: a :class:`Program` with ``again`` runs the code, reads the chart (the
result of the code alone), runs the same code again in the same namespace and reads the chart once
more (the result of the code twice over, as one script: the same statements in the same order), so
the code is run twice, not three times. The second result's stdout holds the same bytes as the
script's, in the order they were flushed (a chart's stdout only counts as empty or not). Code
that compiles alone but not twice over (``from __future__`` after the first line), or the other
way round, runs alone, both ways.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any, Sequence

from tqaforge.sandbox import Outcome, RunResult, Sandbox
from tqaforge.sandbox.charts import ChartReading

#: Programs in one sandbox run at most (a batch that fails late loses less).
BATCH_SIZE = 25
_TAG = "tqaforge-batch "


@dataclass(frozen=True)
class Program:
    """One program to run: its code, the table it reads as ``table.csv``, the chart it draws (or
    None); ``again``: then once more in the same namespace (module docs), two results."""

    code: str
    table_csv: str
    chart_type: str | None
    again: bool = False

    def alone(self, sandbox: Sandbox) -> tuple[RunResult, ...]:
        """Its results, each from a sandbox run of its own."""
        first = sandbox.run(self.code, self.table_csv, chart_type=self.chart_type)
        if not self.again:
            return (first,)
        return first, sandbox.run(f"{self.code}\n{self.code}", self.table_csv, chart_type=self.chart_type)


def run_batched(programs: Sequence[Program], sandbox: Sandbox, *, batch_size: int = BATCH_SIZE) -> list[tuple[RunResult, ...]]:
    """Each program's results (two with ``again``, else one), in order, run in batches of
    ``batch_size`` in ``sandbox`` (module docs)."""
    results: list[tuple[RunResult, ...] | None] = [None] * len(programs)
    todo = list(range(len(programs)))
    silent = 0  # batches in a row that reported nothing: two, and the driver itself does not run here
    while todo:
        batch, todo = todo[:batch_size], todo[batch_size:]
        if len(batch) == 1 or silent >= 2:
            results[batch[0]] = programs[batch[0]].alone(sandbox)
            todo = batch[1:] + todo
            continue
        reported = _run_batch([programs[i] for i in batch], sandbox)
        silent = silent + 1 if reported[0] is None else 0
        for k, result in enumerate(reported):
            if result is None:  # not reported, or not as it would be alone: this one alone, the rest again
                results[batch[k]] = programs[batch[k]].alone(sandbox)
                todo = batch[k + 1:] + todo
                break
            results[batch[k]] = result
    return [r for r in results if r is not None]


def _run_batch(programs: Sequence[Program], sandbox: Sandbox) -> list[tuple[RunResult, ...] | None]:
    """One sandbox run of ``programs``: the results of each program reported as its own runs', in
    order, up to the first that was not (None from there)."""
    nonce = secrets.token_hex(8)
    spec = {"nonce": nonce, "output_bytes": sandbox.limits.output_bytes,
            "programs": [{"code": p.code, "table_csv": p.table_csv, "chart_type": p.chart_type, "again": p.again} for p in programs]}
    driver = f"from tqaforge.evaluate.batches import child_main\nchild_main({json.dumps(spec)!r})\n"
    run = sandbox.run(driver, "", chart_type=None)
    out: list[tuple[RunResult, ...] | None] = [None] * len(programs)
    prefix = f"{_TAG}{nonce} "
    for line in run.stdout.splitlines():
        if not line.startswith(prefix):
            continue
        try:
            record = json.loads(line[len(prefix):])
            index = int(record["index"])
            if not 0 <= index < len(programs) or out[index] is not None or record.get("alone"):
                continue
            phases = record["phases"]
            if not isinstance(phases, list) or len(phases) != (2 if programs[index].again else 1):
                continue
            out[index] = tuple(_result(phase, run) for phase in phases)
        except (ValueError, KeyError, TypeError):
            continue  # not a record of the driver's: that program runs alone
    first_missing = next((i for i, r in enumerate(out) if r is None), len(out))
    return out[:first_missing] + [None] * (len(out) - first_missing)


def _result(phase: dict[str, Any], run: RunResult) -> RunResult:
    """One result of a program from its record (ValueError, TypeError, KeyError: not one)."""
    exit_status = phase["exit"]
    if not isinstance(exit_status, int) or isinstance(exit_status, bool):
        raise ValueError("no exit status")
    chart = ChartReading.from_dict(phase["chart"]) if isinstance(phase.get("chart"), dict) else None
    error = phase.get("error") if isinstance(phase.get("error"), str) else None
    if error is None and exit_status:
        error = f"exit status {exit_status}"
    if isinstance(phase.get("chart_error"), str):
        error = (f"{error}; " if error else "") + f"chart not read: {phase['chart_error']}"
    return RunResult(
        outcome=Outcome.OK if exit_status == 0 else Outcome.EXCEPTION, stdout=str(phase["stdout"]), stderr=str(phase["stderr"]),
        exit_status=exit_status, error=error, isolation=run.isolation, missing=run.missing,
        chart=chart, seconds=float(phase.get("seconds", 0.0)),
    )


# --- in the sandbox -----------------------------------------------------------------------------


def child_main(spec_json: str) -> None:
    """The driver of one batch, run as a sandbox program: each program in turn (module docs), its
    record printed to the batch's stdout as one tagged JSON line when it ends."""
    import builtins
    import io
    import linecache
    import os
    import random
    import signal
    import sys
    import time
    import types

    import matplotlib
    import matplotlib.pyplot as plt
    import numpy as np

    from tqaforge.sandbox.worker import note_chart, note_exception, note_exit

    spec = json.loads(spec_json)
    prefix = f"{_TAG}{spec['nonce']} ".encode()
    cap = int(spec["output_bytes"])
    scratch = os.getcwd()
    out_fd, err_fd = os.dup(1), os.dup(2)  # the batch's own stdout and stderr
    os.set_inheritable(out_fd, False)
    os.set_inheritable(err_fd, False)
    environ, path = dict(os.environ), list(sys.path)
    builtins_before = dict(vars(builtins))
    handlers = {s: signal.getsignal(s) for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP)}
    np_state = np.random.get_state()  # alone, each program starts from the worker's
    rc = dict(matplotlib.rcParams)
    threads = _threads()
    filename = os.path.join(scratch, "program.py")

    def compiled(code: str) -> Any:
        try:
            return compile(code, filename, "exec")
        except BaseException as exc:  # raised where the program would have raised it
            return exc

    def execute(code: Any, main: types.ModuleType, phase: dict[str, Any]) -> bool:
        """Run compiled ``code`` in ``main``; whether it ran to its end."""
        exit_code = 0
        try:
            if isinstance(code, BaseException):
                raise code
            exec(code, main.__dict__)
        except SystemExit as exc:
            phase["exit"] = note_exit(phase, exc)
            return False
        except BaseException as exc:
            if isinstance(exc, MemoryError):
                phase["alone"] = True  # memory left by earlier programs may be the cause
            note_exception(phase, exc)
            phase["exit"] = 1
            return False
        phase["exit"] = exit_code
        return True

    def finish(phase: dict[str, Any], chart_type: str | None, captured: list[int]) -> None:
        note_chart(phase, chart_type)
        texts = []
        for fd in captured:
            data, offset = b"", 0
            while len(data) <= cap and (chunk := os.pread(fd, 1 << 16, offset)):
                data += chunk
                offset += len(chunk)
            texts.append(data)
        if len(texts[0]) + len(texts[1]) > cap:
            phase["alone"] = True  # alone, it passes the output limit
        phase["stdout"], phase["stderr"] = (t[:cap].decode("utf-8", "replace") for t in texts)

    for index, program in enumerate(spec["programs"]):
        try:  # only a fresh table.csv, as alone; a scratch directory that cannot be emptied ends the batch
            os.chdir(scratch)
            for name in os.listdir(scratch):
                _remove(os.path.join(scratch, name))
            if os.listdir(scratch):
                break
        except BaseException:
            break
        with open("table.csv", "w", encoding="utf-8", newline="") as fh:
            fh.write(program["table_csv"])
        os.environ.clear()
        os.environ.update(environ)
        sys.path[:] = path
        random.seed()  # alone, a forked child's random module is seeded afresh
        np.random.set_state(np_state)
        plt.close("all")
        if dict(matplotlib.rcParams) != rc:  # (validating every parameter again costs more than comparing)
            matplotlib.rcParams.update(rc)
        code = program["code"]
        record: dict[str, Any] = {"index": index}
        first = compiled(code)
        if program["again"] and isinstance(first, BaseException) != isinstance(compiled(f"{code}\n{code}"), BaseException):
            record["alone"] = True  # it compiles alone and not twice over, or the other way round
        else:
            captured = [os.memfd_create("stdout"), os.memfd_create("stderr")]  # in no directory: the program sees neither
            os.dup2(captured[0], 1)
            os.dup2(captured[1], 2)
            sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace")
            sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
                                          write_through=True)
            sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
            sys.argv = ["program.py"]
            linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
            main = types.ModuleType("__main__")
            main.__dict__.update(__file__=filename, __builtins__=builtins)
            sys.modules["__main__"] = main
            start = time.monotonic()
            phases: list[dict[str, Any]] = [{}]
            ran = execute(first, main, phases[0])
            finish(phases[0], program["chart_type"], captured)
            if program["again"]:
                if ran:  # the script twice over goes on with its second half
                    phases.append({})
                    execute(first, main, phases[1])
                    finish(phases[1], program["chart_type"], captured)
                else:  # it ends where its first half ended
                    phases.append(dict(phases[0]))
            phases[-1]["seconds"] = time.monotonic() - start
            os.dup2(out_fd, 1)
            os.dup2(err_fd, 2)
            for fd in captured:
                os.close(fd)
            record["phases"] = phases
            record["alone"] = any(phase.pop("alone", False) for phase in phases)
        left = signal.alarm(0) or any(signal.setitimer(t, 0)[0] for t in (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF))
        stop = bool(left or _threads() != threads or _has_children()
                    or any(signal.getsignal(s) is not h for s, h in handlers.items())
                    or vars(builtins).keys() != builtins_before.keys()
                    or any(vars(builtins)[k] is not v for k, v in builtins_before.items()))
        line = prefix + json.dumps(record).encode() + b"\n"
        while line:
            line = line[os.write(out_fd, line):]
        if stop:
            break
    os._exit(0)


def _remove(path: str) -> None:
    """Remove what a program left (a file, a link, a tree of any depth, directories it made unreadable)."""
    import os

    from tqaforge.files import remove_tree

    if os.path.isdir(path) and not os.path.islink(path):
        remove_tree(path)
    else:
        os.unlink(path)


def _threads() -> int:
    """Python threads running, the main one included (``/proc`` is out of the sandbox's view)."""
    import _thread
    import threading

    return _thread._count() + threading.active_count()


def _has_children() -> bool:
    """Whether a process the program started is still running (one that ended is reaped here)."""
    import os

    try:
        while True:
            pid, _ = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                return True
    except ChildProcessError:
        return False

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
    """One program to run: its code, the table it reads as ``table.csv``, the chart it draws (or None)."""

    code: str
    table_csv: str
    chart_type: str | None


def run_batched(programs: Sequence[Program], sandbox: Sandbox, *, batch_size: int = BATCH_SIZE) -> list[RunResult]:
    """Each program's result, in order, run in batches of ``batch_size`` in ``sandbox`` (module docs)."""
    results: list[RunResult | None] = [None] * len(programs)
    todo = list(range(len(programs)))
    silent = 0  # batches in a row that reported nothing: two, and the driver itself does not run here
    while todo:
        batch, todo = todo[:batch_size], todo[batch_size:]
        if len(batch) == 1 or silent >= 2:
            program = programs[batch[0]]
            results[batch[0]] = sandbox.run(program.code, program.table_csv, chart_type=program.chart_type)
            todo = batch[1:] + todo
            continue
        reported = _run_batch([programs[i] for i in batch], sandbox)
        silent = silent + 1 if reported[0] is None else 0
        for k, result in enumerate(reported):
            if result is None:  # not reported, or not as it would be alone: this one alone, the rest again
                program = programs[batch[k]]
                results[batch[k]] = sandbox.run(program.code, program.table_csv, chart_type=program.chart_type)
                todo = batch[k + 1:] + todo
                break
            results[batch[k]] = result
    assert all(r is not None for r in results)
    return [r for r in results if r is not None]


def _run_batch(programs: Sequence[Program], sandbox: Sandbox) -> list[RunResult | None]:
    """One sandbox run of ``programs``: the result of each program reported as its own run's, in
    order, up to the first that was not (None from there)."""
    nonce = secrets.token_hex(8)
    spec = {"nonce": nonce, "output_bytes": sandbox.limits.output_bytes,
            "programs": [{"code": p.code, "table_csv": p.table_csv, "chart_type": p.chart_type} for p in programs]}
    driver = f"from tqaforge.evaluate.batches import child_main\nchild_main({json.dumps(spec)!r})\n"
    run = sandbox.run(driver, "", chart_type=None)
    out: list[RunResult | None] = [None] * len(programs)
    prefix = f"{_TAG}{nonce} "
    for line in run.stdout.splitlines():
        if not line.startswith(prefix):
            continue
        try:
            record = json.loads(line[len(prefix):])
            index = int(record["index"])
            result = _result(record, run) if 0 <= index < len(programs) and out[index] is None else None
        except (ValueError, KeyError, TypeError):
            continue
        if result is not None:
            out[index] = result
    first_missing = next((i for i, r in enumerate(out) if r is None), len(out))
    return out[:first_missing] + [None] * (len(out) - first_missing)


def _result(record: dict[str, Any], run: RunResult) -> RunResult | None:
    """A program's result from its record; None when it must run alone (module docs)."""
    if record.get("alone"):
        return None
    exit_status = record["exit"]
    if not isinstance(exit_status, int) or isinstance(exit_status, bool):
        return None
    chart = None
    if isinstance(record.get("chart"), dict):
        chart = ChartReading.from_dict(record["chart"])  # ValueError: an unreadable reading, caught by the caller
    error = record.get("error") if isinstance(record.get("error"), str) else None
    if error is None and exit_status:
        error = f"exit status {exit_status}"
    if record.get("chart_error") and isinstance(record["chart_error"], str):
        error = (f"{error}; " if error else "") + f"chart not read: {record['chart_error']}"
    return RunResult(
        outcome=Outcome.OK if exit_status == 0 else Outcome.EXCEPTION, stdout=str(record["stdout"]), stderr=str(record["stderr"]),
        exit_status=exit_status, error=error, isolation=run.isolation, missing=run.missing,
        chart=chart, seconds=float(record.get("seconds", 0.0)),
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

    from tqaforge.sandbox.charts import read_chart

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
    for index, program in enumerate(spec["programs"]):
        for name in os.listdir(scratch):  # only a fresh table.csv, as alone
            _remove(os.path.join(scratch, name))
        os.chdir(scratch)
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
        captured = [os.memfd_create("stdout"), os.memfd_create("stderr")]  # in no directory: the program sees neither
        os.dup2(captured[0], 1)
        os.dup2(captured[1], 2)
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace")
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
                                      write_through=True)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
        sys.argv = ["program.py"]
        filename = os.path.join(scratch, "program.py")
        code = program["code"]
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        main = types.ModuleType("__main__")
        main.__dict__.update(__file__=filename, __builtins__=builtins)
        sys.modules["__main__"] = main
        record: dict[str, Any] = {"index": index}
        start = time.monotonic()
        exit_code = 0
        try:
            exec(compile(code, filename, "exec"), main.__dict__)
        except SystemExit as exc:
            exit_code, message = _exit_code(exc.code)
            if message is not None:
                print(message, file=sys.stderr)
            if exit_code:
                record["error"] = f"SystemExit: {exc.code}"
        except BaseException as exc:
            exit_code = 1
            record["error"] = f"{type(exc).__name__}: {exc}"[:4000]
            if isinstance(exc, MemoryError):
                record["alone"] = True  # memory left by earlier programs may be the cause
            try:
                import traceback

                traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next if exc.__traceback__ else None)
            except BaseException:
                pass
        if program["chart_type"] is not None:
            try:
                record["chart"] = read_chart(program["chart_type"]).to_dict()
            except BaseException as exc:
                record["chart_error"] = f"{type(exc).__name__}: {exc}"[:2000]
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        record["seconds"] = time.monotonic() - start
        record["exit"] = exit_code
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        texts = []
        for fd in captured:
            os.lseek(fd, 0, os.SEEK_SET)
            data = b""
            while len(data) <= cap and (chunk := os.read(fd, 1 << 16)):
                data += chunk
            os.close(fd)
            texts.append(data)
        if len(texts[0]) + len(texts[1]) > cap:
            record["alone"] = True  # alone, it passes the output limit
        record["stdout"], record["stderr"] = (t[:cap].decode("utf-8", "replace") for t in texts)
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
    import os
    import shutil

    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except OSError:
        pass


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


def _exit_code(code: Any) -> tuple[int, str | None]:
    """Python's own rule for SystemExit: None -> 0, an int -> itself, anything else printed -> 1."""
    if code is None:
        return 0, None
    if isinstance(code, int):
        return code & 0xFF, None
    return 1, str(code)


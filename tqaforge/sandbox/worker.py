"""A warm sandbox worker: ``python -I -c "...; tqaforge.sandbox.worker.main()"``, started by :class:`tqaforge.sandbox.Sandbox`.

Once, at start (empty environment, single-threaded): enter a new network namespace, become a child
subreaper, import pandas and numpy, fork the :class:`Zygote` (a lean twin that forks the programs
that do not draw), then import matplotlib (Agg) and draw one figure so fonts are loaded. Then, per
program, a child forked for it alone (by the zygote, or by the worker for a program that draws)
isolates itself (:meth:`Worker.child_main`) and runs the program; the worker reads its output with
a cap, enforces the wall-clock limit, kills every descendant, removes the scratch directory and
answers the host.

Protocol on the worker's original stdin/stdout: frames of an 8-byte big-endian length and JSON.
First the host sends the configuration, the worker answers ``hello``; then one request, one reply.
"""

from __future__ import annotations

import gc
import io
import json
import os
import select
import signal
import socket
import struct
import sys
import time
from typing import Any

from tqaforge.files import remove_tree
from tqaforge.sandbox import isolation

_MAX_STATUS = 16 * 1024 * 1024  # bytes of status (exception, chart reading) accepted from a child
_CRASH_SIGNALS = {signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGSYS, signal.SIGTRAP}


def read_frame(fd: int) -> Any:
    head = _read_exact(fd, 8)
    if head is None:
        return None
    (n,) = struct.unpack(">Q", head)
    body = _read_exact(fd, n)
    if body is None:
        return None
    return json.loads(body)


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = os.read(fd, min(n - len(chunks), 1 << 20))
        if not chunk:
            return None
        chunks += chunk
    return bytes(chunks)


def write_all(fd: int, data: bytes) -> None:
    """All of ``data`` to ``fd`` (os.write may take part of it: a pipe, a socket), through os calls."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def write_frame(fd: int, obj: Any) -> None:
    body = json.dumps(obj).encode()
    write_all(fd, struct.pack(">Q", len(body)) + body)


class Worker:
    def __init__(self, config: dict[str, Any]) -> None:
        self.base = config["base_dir"]
        self.uid: int | None = config.get("uid")
        self.gid: int | None = config.get("gid")
        skip = set(config.get("skip_layers", ()))
        self.missing: dict[str, str] = {}
        self.isolation = ["process", "empty-env", "scratch-dir", "rlimits"]
        isolation.die_with_parent()  # first of all: a worker never outlives its host
        why = "skipped on request" if "netns" in skip else isolation.enter_network_namespace()
        self._record("netns", why)
        mounts_why = "skipped on request" if "fs-view" in skip else isolation.unshare_mounts()
        # From here on this may be a forked child: pid 1 of its own namespace (the parent only waits).
        why = "skipped on request" if "pidns" in skip else isolation.become_pid_namespace_init()
        self._record("pidns", why)
        why = "skipped on request" if "subreaper" in skip else isolation.become_subreaper()
        self._record("subreaper", why)
        isolation.die_with_parent()
        self.read_dirs = isolation.read_only_dirs()
        # The memory cgroup before the new root hides /sys; its files stay open.
        self.cgroup: isolation.MemoryCgroup | None = None
        made: isolation.MemoryCgroup | str = "skipped on request"
        if "cgroup" not in skip:
            made = isolation.MemoryCgroup.create(f"{os.path.basename(os.path.dirname(self.base))}-{os.path.basename(self.base)}")
        if isinstance(made, isolation.MemoryCgroup):
            self.cgroup = made
            self._record("cgroup", None)
        else:
            self._record("cgroup", made)
            self.isolation.append("no-fork")  # without a cgroup, one process is the only way to cap the program's memory
        if mounts_why is None and "pidns" in self.missing:
            mounts_why = "needs the pid namespace (its /proc would be the host's)"
        if mounts_why is None:
            mounts_why = isolation.enter_fs_view(self.read_dirs, [self.base], self.base)
        self._record("fs-view", mounts_why)
        if self.uid is None or self.gid is None or "uid" in skip:
            self.uid = self.gid = None
            self._record("uid", "skipped on request" if "uid" in skip else "not running as root: the program keeps your uid")
        else:
            why = isolation.make_reachable(self.read_dirs + [self.base + "/."], self.uid, self.gid)
            if why is not None:
                self.uid = self.gid = None
                why = f"the interpreter is not reachable by an unprivileged uid ({why})"
            self._record("uid", why)
        self.landlock_abi = 0 if skip & {"landlock-fs", "landlock-net", "landlock-scope"} else isolation.landlock_abi()
        for layer, why in isolation.landlock_layers(self.landlock_abi).items():
            self._record(layer, "skipped on request (Landlock is applied whole or not at all)" if self.landlock_abi == 0 and skip & {
                "landlock-fs", "landlock-net", "landlock-scope"} else why)
        if not self.landlock_abi:
            self.landlock_abi = 0
        # Landlock's read-only rules once (descriptors of the directories, opened in the program's
        # root); each child adds its scratch directory to a ruleset of its own.
        self.landlock: isolation.LandlockRules | None = None
        if self.landlock_abi:
            self.landlock = isolation.LandlockRules(self.landlock_abi, self.read_dirs)
        self.audit = bool(self.missing.keys() & {"landlock-fs", "landlock-net", "landlock-scope"})
        if self.audit:
            self.isolation.append("audit-hook")
        self.counter = 0
        self.zygote: Zygote | None = None
        self.host_fds: tuple[int, ...] = ()

    def _record(self, layer: str, why: str | None) -> None:
        if why is None:
            self.isolation.append(layer)
        else:
            self.missing[layer] = why

    def warm_up(self, mplconfigdir: str) -> None:
        """Import and exercise what programs use: pandas and numpy, then (after the lean zygote is
        forked from this state) matplotlib and the chart reader."""
        # One thread per library: a forked child has one thread anyway, and the threads of the
        # sandbox uid count against RLIMIT_NPROC.
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
            os.environ[var] = "1"
        os.environ["MPLBACKEND"] = "Agg"
        os.environ["MPLCONFIGDIR"] = mplconfigdir
        import numpy as np
        import pandas as pd

        frame = pd.read_csv(io.StringIO("a,b\nx,1\ny,2\nx,3\n"))
        frame.groupby("a")["b"].sum().sort_values()
        frame[frame["b"] > 1].describe()
        np.mean(frame["b"].to_numpy())
        # Run what table programs typically do a few times, so that the interpreter has specialised
        # that code (and filled its caches) here once, not again in every child.
        text = "name,year,score,share\n" + "".join(f"n{i % 5},{2000 + i % 7},{i * 3 % 11},{i / 7:.2f}\n" for i in range(40))
        # As a program does: read table.csv from its working directory, print to a text stream.
        warm = os.path.join(self.base, "warm")
        os.mkdir(warm, 0o700)
        with open(os.path.join(warm, "table.csv"), "w", encoding="utf-8") as fh:
            fh.write(text)
        cwd = os.getcwd()
        os.chdir(warm)
        out = io.TextIOWrapper(io.FileIO(os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC), "w"), encoding="utf-8",
                               errors="backslashreplace")
        for _ in range(12):
            df = pd.read_csv("table.csv")
            df = df[df["score"] > 2]
            totals = df.groupby("name")["score"].sum().sort_values(ascending=False)
            df.groupby("year").agg({"share": "mean", "score": "count"})
            df["name"].str.contains("n1").sum()
            df["name"].value_counts()
            df["name"].iloc[int(df["share"].to_numpy().argmax())]
            df.iloc[0]
            print(f"Final Answer: {totals.idxmax()}, {totals.max()}, {df['share'].mean():.2f}", file=out)
            out.flush()
        out.close()
        os.chdir(cwd)
        remove_tree(warm)
        gc.collect()
        gc.freeze()  # keep the warm heap's pages shared with the children (no refcount copy-on-write by gc)
        self.zygote = Zygote.start(self)
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig = plt.figure()
        frame.plot(kind="bar", x="a", y="b", ax=fig.gca(), title="warm")
        plt.pie([1, 2])
        fig.canvas.draw()
        plt.close("all")
        try:
            import tqaforge.sandbox.charts  # noqa: F401  (the child reads charts with it)
        except ImportError:
            pass
        gc.collect()
        _FILLED.extend(_fill_free_blocks())  # as in the zygote, for the programs forked from here
        gc.freeze()

    # --- one program ------------------------------------------------------------------------------

    def run(self, req: dict[str, Any]) -> dict[str, Any]:
        self.counter += 1
        scratch = os.path.join(self.base, f"run-{self.counter}")
        os.mkdir(scratch, 0o700)
        table = os.path.join(scratch, "table.csv")
        fd = os.open(table, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)  # as open(): 0o666 less the umask
        try:
            write_all(fd, req["table_csv"].encode("utf-8"))
        finally:
            os.close(fd)
        if self.uid is not None and self.gid is not None:
            os.chown(table, self.uid, self.gid)
            os.chown(scratch, self.uid, self.gid)
        try:
            return self._run_in_child(req, scratch)
        finally:
            try:
                remove_tree(scratch)  # never recurses: a 3,000-deep tree costs no RecursionError and no result
            except OSError as exc:  # the result stands; what is left goes with the worker's directory
                print(f"sandbox: could not remove {scratch}: {exc}", file=sys.stderr)

    def _run_in_child(self, req: dict[str, Any], scratch: str) -> dict[str, Any]:
        limits = req["limits"]
        oom_before = 0
        if self.cgroup is not None:
            self.cgroup.allow(int(limits["memory_mb"]))
            oom_before = self.cgroup.oom_kills()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        st_r, st_w = os.pipe()
        zygote = self.zygote if self.zygote is not None and self.zygote.serves(req) else None
        try:
            if zygote is not None:
                try:
                    pid, pidfd = zygote.spawn(req, scratch, (out_w, err_w, st_w))
                except ZygoteGone as exc:
                    print(f"sandbox: {exc}; programs are forked from the worker from now on", file=sys.stderr)
                    self._drop_zygote()
                    if exc.may_have_forked:
                        # A child it may have forked is ours now (the subreaper's): it goes before
                        # anything else runs, and this program's pipes are not reused.
                        self._kill_descendants()
                        raise
                    zygote = None
            if zygote is None:
                pid = os.fork()
                if pid == 0:  # the child: never returns
                    os.close(out_r)
                    os.close(err_r)
                    os.close(st_r)
                    self.child_main(req, scratch, out_w, err_w, st_w)
                pidfd = os.pidfd_open(pid)
        except BaseException:
            for fd in (out_r, err_r, st_r):
                os.close(fd)
            raise
        finally:
            for fd in (out_w, err_w, st_w):
                os.close(fd)
        start = time.monotonic()
        deadline = start + float(limits["wall_seconds"])
        cap = int(limits["output_bytes"])
        bufs = {out_r: bytearray(), err_r: bytearray(), st_r: bytearray()}
        poller = select.poll()
        for fd in (out_r, err_r, st_r, pidfd):
            poller.register(fd, select.POLLIN)
        open_fds = {out_r, err_r, st_r}
        reason: str | None = None  # why we killed it: "timeout" / "output_limit"
        exited = False
        try:
            while open_fds or not exited:
                left = deadline - time.monotonic()
                if left <= 0:
                    reason = "timeout"
                    break
                for fd, _ in poller.poll(left * 1000):
                    if fd == pidfd:
                        exited = True
                        poller.unregister(pidfd)
                        continue
                    chunk = os.read(fd, 1 << 16)
                    if not chunk:
                        poller.unregister(fd)
                        open_fds.discard(fd)
                        continue
                    bufs[fd] += chunk
                    if fd == st_r:
                        if len(bufs[st_r]) > _MAX_STATUS:
                            reason = "output_limit"
                    elif len(bufs[out_r]) + len(bufs[err_r]) > cap:
                        reason = "output_limit"
                if reason:
                    break
                if exited and open_fds:
                    # The program is gone but something it started holds the pipes: that is killed
                    # now, and its output up to here is kept.
                    break
            if reason:
                _kill_group(pid, pidfd)
            if zygote is not None:
                try:
                    status, cpu = zygote.reap(pid)
                except ZygoteGone:
                    # The program (and all it started) is re-parented to this subreaper when the
                    # zygote dies: killed and reaped here, before any other program runs.
                    _kill_group(pid, pidfd)
                    self._drop_zygote()
                    self._kill_descendants()
                    raise
            else:
                _, status, usage = os.wait4(pid, 0)
                cpu = usage.ru_utime + usage.ru_stime
            elapsed = time.monotonic() - start
            self._kill_descendants()
            for fd in list(open_fds):
                _drain(fd, bufs[fd], cap + 1)
        finally:
            for fd in (out_r, err_r, st_r, pidfd):
                os.close(fd)
        out, err = bytes(bufs[out_r]), bytes(bufs[err_r])
        if len(out) + len(err) > cap:
            reason = reason or "output_limit"
            out = out[:cap]
            err = err[: max(0, cap - len(out))]
        child_status: dict[str, Any] = {}
        if bufs[st_r] and reason is None:
            try:
                child_status = json.loads(bytes(bufs[st_r]).decode("utf-8"))
                if not isinstance(child_status, dict):
                    child_status = {}
            except (ValueError, RecursionError):
                # fd 3 is open to the program: "[[[[..." 200,000 deep written there is no status.
                # (The bounded reader of tqaforge.tables.readers.jsonio would import every table
                # reader into the worker; a status is one flat object, so its parse error is enough.)
                child_status = {}
        oom = self.cgroup is not None and self.cgroup.oom_kills() > oom_before
        outcome, exit_status, error = _classify(status, cpu, reason, child_status, limits, oom)
        chart = child_status.get("chart") if outcome in ("ok", "exception") else None
        if chart is None and isinstance(child_status.get("chart_error"), str) and req.get("chart_type") is not None:
            error = f"{error}; " if error else ""
            error += f"chart not read: {child_status['chart_error']}"
        return {
            "outcome": outcome,
            "stdout": out.decode("utf-8", "replace"),
            "stderr": err.decode("utf-8", "replace"),
            "exit_status": exit_status,
            "error": error,
            "chart": chart,
            "child_seconds": elapsed,
        }

    def _kill_descendants(self) -> None:
        """Kill every remaining descendant (orphans are re-parented to this subreaper) until none is left."""
        used_uid = False
        for round_ in range(10_000):
            children = self._children()
            if not children:
                try:
                    while True:  # reap zombies; ECHILD: nobody left
                        pid, _ = os.waitpid(-1, os.WNOHANG)
                        if pid == 0:
                            break
                        self._reaped(pid)
                except ChildProcessError:
                    return
                children = self._children()
                if not children:
                    if self.zygote is not None:
                        # The zygote is a child that stays: "nobody left" is then "nobody but it"
                        # (a child stays listed in /proc until it is reaped, so none is missed).
                        return
                    time.sleep(0.0005)
                    continue
            for child in children:
                try:
                    os.kill(child, signal.SIGKILL)
                except OSError:
                    pass
            if self.uid is not None and self.gid is not None and not used_uid and round_ > 0:
                isolation.kill_all_of_uid(self.uid, self.gid)
                used_uid = True
            try:
                while pid := os.waitpid(-1, os.WNOHANG)[0]:
                    self._reaped(pid)
            except ChildProcessError:
                return

    def _drop_zygote(self) -> None:
        if self.zygote is None:
            return
        zygote, self.zygote = self.zygote, None
        zygote.gone()
        try:
            os.kill(zygote.pid, signal.SIGKILL)
            os.waitpid(zygote.pid, 0)
        except OSError:
            pass  # already reaped

    def _children(self) -> list[int]:
        zygote = self.zygote.pid if self.zygote is not None else None
        return [pid for pid in _children() if pid != zygote]

    def _reaped(self, pid: int) -> None:
        if self.zygote is not None and pid == self.zygote.pid:
            self.zygote.gone()  # it died (it never should): programs are forked from the worker from now on
            self.zygote = None

    # --- in the child -----------------------------------------------------------------------------

    def child_main(self, req: dict[str, Any], scratch: str, out_w: int, err_w: int, st_w: int) -> None:
        """The forked child: isolate, run the program, exit; never returns."""
        try:
            self._child(req, scratch, out_w, err_w, st_w)
        except BaseException as exc:  # the isolation could not be set up: never run the program then
            try:
                os.write(2, f"sandbox setup failed: {type(exc).__name__}: {exc}\n".encode())
            finally:
                os._exit(70)
        finally:
            os._exit(70)

    def _child(self, req: dict[str, Any], scratch: str, out_w: int, err_w: int, st_w: int) -> None:
        limits = req["limits"]
        os.setsid()
        isolation.die_with_parent()
        if self.cgroup is not None:
            isolation.oom_kill_first()
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.dup2(st_w, 3)
        # The Landlock ruleset is built from the worker's descriptors before they are closed (with
        # every other one above 3); it is applied below, once the privileges are dropped.
        ruleset = self.landlock.ruleset(scratch) if self.landlock is not None else -1
        if ruleset > 4:
            os.closerange(4, ruleset)
        os.closerange(max(4, ruleset + 1), 1 << 20)
        os.chdir(scratch)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # too large a file: OSError(EFBIG), not a silent death
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        # Without a memory cgroup the address-space limit is per process: then the program gets no
        # second process or thread at all, so that limit is the program's.
        processes = limits["processes"] if self.cgroup is not None else 1
        isolation.set_rlimits(limits["cpu_seconds"], limits["memory_mb"], limits["file_mb"], limits["open_files"], processes)
        if self.uid is not None and self.gid is not None:
            isolation.drop_privileges(self.uid, self.gid)
            isolation.die_with_parent()  # a change of uid clears the parent-death signal: set it again
        isolation.drop_capabilities()
        isolation.no_new_privs()
        if ruleset >= 0:
            isolation.LandlockRules.restrict(ruleset)
        if self.audit:
            isolation.install_audit_hook(scratch, self.read_dirs, "landlock-fs" in self.missing,
                                         "landlock-net" in self.missing, "landlock-scope" in self.missing)
        _run_program(req["code"], scratch, req.get("chart_type"))


_PID = struct.Struct(">q")  # zygote -> worker: the program's pid (-1: not forked, a frame {"error"} follows)
_REAPED = struct.Struct(">qd")  # zygote -> worker: the program's wait status and CPU seconds


# Words in a program that (may) draw: such a program starts from the worker itself, where matplotlib
# is warm; any other from the zygote. Only a matter of speed: both are fresh forks, isolated alike.
_DRAWS = ("matplotlib", "pylab", "plot", "hist", "seaborn", "plt")


class Zygote:
    """A lean twin of the worker that forks the programs that do not draw.

    Forked from the worker once, at start, when pandas and numpy are warm and before matplotlib is
    imported: a program forked from it inherits about two thirds of the worker's memory, so the
    kernel copies fewer page tables at its fork, tears down fewer at its exit, and the worker never
    copies a page on write for it. It runs no program itself and nothing a program does reaches it:
    it forks the program (as the worker would: same :meth:`Worker.child_main`, so every per-program
    layer is applied the same way in the child), hands the worker a pidfd of it, and reaps it. It
    holds no other state between programs; it is in the worker's pid, network and mount namespaces
    and in its memory cgroup, runs as the worker's uid (root), and dies with the worker.

    Protocol on a socket pair: the worker sends one byte with the three pipe ends of the program's
    stdout, stderr and status (SCM_RIGHTS), then a frame ``{"req", "scratch"}``; the zygote answers
    the program's pid (8 bytes, :data:`_PID`) with its pidfd, then, once it has reaped it, its wait
    status and CPU seconds (:data:`_REAPED`); when it could not fork, the pid -1 and a frame ``{"error"}``.
    """

    def __init__(self, pid: int, sock: socket.socket) -> None:
        self.pid = pid
        self.sock = sock

    @classmethod
    def start(cls, worker: Worker) -> Zygote | None:
        """Fork the zygote from ``worker`` (in its current, warm state); None when that fails."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            pid = os.fork()
        except OSError as exc:
            print(f"sandbox: no zygote ({exc}); programs are forked from the worker", file=sys.stderr)
            ours.close()
            theirs.close()
            return None
        if pid == 0:
            code = 0
            try:
                ours.close()
                _zygote_main(worker, theirs)
            except BaseException as exc:  # the worker sees EOF and forks the programs itself
                try:
                    os.write(2, f"sandbox zygote stopped: {type(exc).__name__}: {exc}\n".encode())
                except OSError:
                    pass
                code = 70
            os._exit(code)
        theirs.close()
        return cls(pid, ours)

    def serves(self, req: dict[str, Any]) -> bool:
        """True when the program may start from the zygote: it is no chart and names nothing that draws."""
        code = req.get("code")
        return req.get("chart_type") is None and isinstance(code, str) and not any(word in code for word in _DRAWS)

    def spawn(self, req: dict[str, Any], scratch: str, pipes: tuple[int, int, int]) -> tuple[int, int]:
        """Have the zygote fork the program; its pid and a pidfd of it."""
        try:
            socket.send_fds(self.sock, [b"r"], list(pipes))
        except OSError as exc:  # nothing reached it: nothing was forked
            raise ZygoteGone(f"the zygote is gone: {exc}", may_have_forked=False) from None
        try:
            program = {key: value for key, value in req.items() if key != "table_csv"}  # the table is in scratch already
            write_frame(self.sock.fileno(), {"req": program, "scratch": scratch})
            ready, _, _ = select.select([self.sock], [], [], 60)
            data, fds, _, _ = socket.recv_fds(self.sock, _PID.size, 1) if ready else (b"", [], 0, None)
            if data and len(data) < _PID.size:
                data += _read_exact(self.sock.fileno(), _PID.size - len(data)) or b""
            pid = _PID.unpack(data)[0] if len(data) == _PID.size else None
            answer = read_frame(self.sock.fileno()) if pid == -1 else {"pid": pid}
        except (OSError, ValueError, struct.error) as exc:
            raise ZygoteGone(f"the zygote is gone: {exc}", may_have_forked=True) from None
        if pid is None or pid <= 0 or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise ZygoteGone(f"the zygote could not fork the program: {answer!r}", may_have_forked=bool(fds))
        return pid, fds[0]

    def reap(self, pid: int) -> tuple[int, float]:
        """The program's wait status and CPU seconds, once the zygote has reaped it."""
        ready, _, _ = select.select([self.sock], [], [], 60)
        try:
            data = _read_exact(self.sock.fileno(), _REAPED.size) if ready else None
        except OSError:
            data = None
        if data is None:
            raise ZygoteGone(f"the zygote did not report program {pid}")
        status, cpu = _REAPED.unpack(data)
        return status, cpu

    def gone(self) -> None:
        self.sock.close()


class ZygoteGone(Exception):
    """The zygote died or broke its protocol: the worker forks the programs itself from then on."""

    def __init__(self, message: str, *, may_have_forked: bool = True) -> None:
        super().__init__(message)
        self.may_have_forked = may_have_forked


def _zygote_main(worker: Worker, sock: socket.socket) -> None:
    isolation.die_with_parent()
    for fd in worker.host_fds:  # the host's pipes are the worker's alone
        os.close(fd)
    if worker.cgroup is not None:
        worker.cgroup.enter()  # every program is born inside the memory cgroup, as from the worker
    _FILLED.extend(_fill_free_blocks())  # kept for the zygote's life
    _fill_heap_holes()
    gc.freeze()
    fd = sock.fileno()
    while True:
        data, fds, _, _ = socket.recv_fds(sock, 1, 3)
        if not data:
            return  # the worker is gone
        try:
            request = read_frame(fd)
            if not isinstance(request, dict) or len(fds) != 3:
                raise ValueError("bad request")
            pid = os.fork()
        except (OSError, ValueError) as exc:
            for got in fds:
                os.close(got)
            socket.send_fds(sock, [_PID.pack(-1)], [])
            write_frame(fd, {"error": str(exc)})
            continue
        if pid == 0:
            sock.close()
            worker.child_main(request["req"], request["scratch"], *fds)
        # From the fork to the reap every page this process writes is copied (the program shares
        # them): fixed-size binary answers, no JSON.
        for got in fds:
            os.close(got)
        pidfd = os.pidfd_open(pid)  # before the reap below: it can never name another process
        try:
            socket.send_fds(sock, [_PID.pack(pid)], [pidfd])
        finally:
            os.close(pidfd)
        _, status, usage = os.wait4(pid, 0)
        write_all(fd, _REAPED.pack(status, usage.ru_utime + usage.ru_stime))


_FILLED: list[bytes] = []  # in the zygote: the objects of _fill_free_blocks()


def _fill_free_blocks() -> list[bytes]:
    """Objects that take every free block of the small-object allocator's pools (CPython's pymalloc),
    so that a program's new small objects go to fresh pools rather than into the holes the warm-up
    left in pools all over the zygote's heap: each such hole a program fills costs it the copy of a
    page it shares with the zygote (about 100 copies a program, 5% of its page faults)."""
    overhead = sys.getsizeof(b"")  # a bytes object of n bytes takes a block of overhead + n bytes (rounded up)
    return [bytes(size - overhead) for size, count in _free_blocks().items() if size - overhead > 1 for _ in range(count)]


_HEAP_FILLED: list[int] = []  # in the zygote: the addresses of _fill_heap_holes()' allocations, never freed


def glibc_malloc() -> Any:
    """The C library with ``mallinfo2`` (returning glibc's ``struct mallinfo2``), ``malloc`` and
    ``free`` typed, or None where it is no glibc >= 2.33 (only that has ``mallinfo2``)."""
    import ctypes

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                         "fsmblks", "uordblks", "fordblks", "keepcost")]

    libc = ctypes.CDLL(None)
    if not hasattr(libc, "mallinfo2"):
        return None
    libc.mallinfo2.restype, libc.mallinfo2.argtypes = MallInfo2, []
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.restype, libc.free.argtypes = None, [ctypes.c_void_p]
    return libc


def _fill_heap_holes(limit: int = 100_000) -> int:
    """The same for glibc's heap (the objects of pymalloc's pools are small; the rest come from
    ``malloc``): allocate from the free chunks of the main arena until an allocation would come
    from its top (the end of the heap), largest first, and keep them. Where this is no glibc, does
    nothing. At most the free bytes the arena reports, and at most ``limit`` allocations. Returns
    how many were kept."""
    import ctypes

    libc = glibc_malloc()
    if libc is None:
        return 0
    mallinfo2, malloc, free, sbrk = libc.mallinfo2, libc.malloc, libc.free, libc.sbrk
    sbrk.restype, sbrk.argtypes = ctypes.c_void_p, [ctypes.c_long]
    info = mallinfo2()
    budget = int(info.fordblks) - int(info.keepcost)  # free bytes outside the top chunk
    kept = 0
    size = 1 << 16  # below the mmap threshold: every one comes from the arena
    while size >= 16 and budget > 0 and kept < limit:
        top = (sbrk(0) or 0) - int(mallinfo2().keepcost)  # where the top chunk starts now
        ptr = malloc(size)
        if not ptr or ptr >= top - 32:  # (less a chunk header) from the top: no hole of this size is left
            free(ptr)
            size //= 2
            continue
        _HEAP_FILLED.append(ptr)
        budget -= size
        kept += 1
    return kept


def _free_blocks() -> dict[int, int]:
    """Free blocks in the pools in use, by block size, from ``sys._debugmallocstats`` (empty where it
    says nothing readable: another allocator or another layout)."""
    stats = getattr(sys, "_debugmallocstats", None)
    if stats is None:
        return {}
    try:
        mem = os.memfd_create("mallocstats", os.MFD_CLOEXEC)
    except OSError:
        return {}
    try:
        saved = os.dup(2)
        try:
            os.dup2(mem, 2)
            stats()  # writes to the C stderr (fd 2)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        text = os.pread(mem, 1 << 20, 0).decode("ascii", "replace")
    finally:
        os.close(mem)
    free: dict[int, int] = {}
    for line in text.splitlines():
        fields = line.split()  # class, size, pools, blocks in use, free blocks
        if len(fields) == 5 and all(f.isdigit() for f in fields):
            free[int(fields[1])] = int(fields[4])
    return free


def _run_program(code: str, scratch: str, chart_type: str | None) -> None:
    """Run ``code`` as the script ``program.py`` (its top-level names are module globals), then read
    the chart, write the status to fd 3 and exit."""
    import builtins
    import linecache
    import types

    os.environ.clear()
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace")
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
                                  write_through=True)
    sys.argv = ["program.py"]
    sys.path.insert(0, scratch)
    filename = os.path.join(scratch, "program.py")
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=filename, __builtins__=builtins)
    sys.modules["__main__"] = main
    status: dict[str, Any] = {}
    exit_code = 0
    try:
        exec(compile(code, filename, "exec"), main.__dict__)
    except SystemExit as exc:
        exit_code = note_exit(status, exc)
    except BaseException as exc:
        exit_code = 1
        note_exception(status, exc)
    note_chart(status, chart_type)
    try:
        write_all(3, json.dumps(status).encode())
    except BaseException:
        pass
    os._exit(exit_code)


def note_exit(status: dict[str, Any], exc: SystemExit) -> int:
    """A program's ``SystemExit`` as Python's own exit would take it: the exit code, its message
    written to stderr, an error noted in ``status`` when the code is not 0 (in the program's process)."""
    exit_code, message = _exit_code(exc.code)
    if message is not None:
        print(message, file=sys.stderr)
    if exit_code:
        status["error"] = f"SystemExit: {exc.code}"
    return exit_code


def note_exception(status: dict[str, Any], exc: BaseException) -> None:
    """What a program raised: its text and classes in ``status``, its traceback (without our own
    frame) on stderr, as Python prints an uncaught exception (in the program's process)."""
    status["error"] = f"{type(exc).__name__}: {exc}"[:4000]
    status["types"] = [t.__name__ for t in type(exc).__mro__]
    try:
        import traceback

        traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next if exc.__traceback__ else None)
    except BaseException:
        pass


def note_chart(status: dict[str, Any], chart_type: str | None) -> None:
    """After a program: the chart it drew (when one is asked for) in ``status``, and its standard
    streams flushed (in the program's process)."""
    if chart_type is not None:
        try:
            from tqaforge.sandbox.charts import read_chart

            status["chart"] = read_chart(chart_type).to_dict()
        except BaseException as exc:
            status["chart_error"] = f"{type(exc).__name__}: {exc}"[:2000]
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass


def _exit_code(code: Any) -> tuple[int, str | None]:
    """Python's own rule for SystemExit: None -> 0, an int -> itself, anything else printed -> 1."""
    if code is None:
        return 0, None
    if isinstance(code, int):
        return code & 0xFF, None
    return 1, str(code)


def _classify(status: int, cpu: float, reason: str | None, child: dict[str, Any], limits: dict[str, Any],
              oom: bool = False) -> tuple[str, int, str | None]:
    if os.WIFSIGNALED(status):
        exit_status = -os.WTERMSIG(status)
    else:
        exit_status = os.waitstatus_to_exitcode(status)
    if reason == "timeout":
        return "timeout", exit_status, f"wall-clock limit of {limits['wall_seconds']} s reached; the program was killed"
    if reason == "output_limit":
        return "output_limit", exit_status, f"output passed the limit of {limits['output_bytes']} bytes; the program was killed"
    if oom:
        # One of its processes was ended by the kernel: whatever the program printed after is not its own result.
        return "memory", exit_status, (f"the program's processes together passed the memory limit of {limits['memory_mb']} MB; "
                                       "the kernel killed one")
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name if sig in signal.Signals.__members__.values() else str(sig)
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= max(1.0, float(limits["cpu_seconds"])) - 0.05):
            return "timeout", exit_status, f"CPU-time limit of {limits['cpu_seconds']} s reached ({name})"
        if sig in _CRASH_SIGNALS:
            return "crashed", exit_status, f"the program crashed ({name})"
        return "killed", exit_status, f"the program was killed by {name}"
    if exit_status == 0:
        return "ok", 0, None
    types_ = child.get("types")
    error = child.get("error") if isinstance(child.get("error"), str) else None
    if isinstance(types_, list) and "MemoryError" in types_:
        return "memory", exit_status, f"{error or 'MemoryError'} (memory limit {limits['memory_mb']} MB)"
    return "exception", exit_status, error or f"exit status {exit_status}"


def _children() -> list[int]:
    pids: list[int] = []
    me = os.getpid()
    try:
        tasks = os.listdir(f"/proc/{me}/task")
    except OSError:
        tasks = [str(me)]
    for tid in tasks:
        try:
            text = isolation.read_proc(f"/proc/{me}/task/{tid}/children")
        except OSError:
            continue
        pids += [int(p) for p in text.split()]
    return pids


def _kill_group(pid: int, pidfd: int) -> None:
    # The program's own session and group (it called setsid), then the program through its pidfd
    # (which never names another process, even once the zygote has reaped it).
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except OSError:
        pass


def _drain(fd: int, buf: bytearray, cap: int) -> None:
    os.set_blocking(fd, False)
    while len(buf) <= cap:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        if not chunk:
            return
        buf += chunk


def main() -> None:
    request_fd, reply_fd = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.set_inheritable(request_fd, False)
    os.set_inheritable(reply_fd, False)
    config = read_frame(request_fd)
    if not isinstance(config, dict):
        return
    worker = Worker(config)
    worker.host_fds = (request_fd, reply_fd)
    worker.warm_up(config["mplconfigdir"])
    if worker.cgroup is not None:
        worker.cgroup.enter()  # warm: its pages stay charged where they are; every program is born inside
    write_frame(reply_fd, {"hello": True, "pid": os.getpid(), "isolation": worker.isolation, "missing": worker.missing,
                           "cgroup": worker.cgroup.path if worker.cgroup is not None else None})
    while True:
        req = read_frame(request_fd)
        if req is None:
            return
        try:
            reply = worker.run(req)
        except Exception as exc:  # a bug of ours, not the program's: the host reports it as crashed
            reply = {"outcome": "crashed", "stdout": "", "stderr": "", "exit_status": None,
                     "error": f"sandbox worker error: {type(exc).__name__}: {exc}", "chart": None}
        write_frame(reply_fd, reply)


if __name__ == "__main__":
    main()

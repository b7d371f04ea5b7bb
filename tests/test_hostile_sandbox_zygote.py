"""The zygote layout from the attacker's side: programs that do not draw are forked from a lean twin of
the worker (the zygote), which lives for the worker's life. Nothing a program does may reach the next
program through it, and every per-program layer must hold for a program forked from it exactly as for
one forked from the worker itself."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import sysconfig
import textwrap
import threading
from pathlib import Path
from typing import Iterator

import pytest
from conftest import wait_for

from tqaforge.sandbox import Limits, Outcome, RunResult, Sandbox

pytestmark = pytest.mark.hostile

TABLE = "name,score\nada,3\nbob,5\n"

# What a program plants for the next one: a file beside the scratch directory and in it, an
# environment variable, a signal handler, a module attribute, a builtin, a monkey-patched pandas
# function, a file descriptor (a socket pair), a process that outlives it, and a change of umask,
# working directory and resource limit.
PLANT = """
import builtins, os, signal, socket, sys, time, resource
import pandas as pd
for path in ('../planted.txt', 'planted.txt', '/planted.txt', '/tmp/planted.txt'):
    try:
        with open(path, 'w') as fh:
            fh.write('x')
    except OSError:
        pass
os.environ['PLANTED'] = '1'
signal.signal(signal.SIGUSR1, lambda *a: None)
sys.modules['os'].PLANTED = 1
builtins.PLANTED = 1
pd.read_csv = lambda *a, **k: 'planted'
keep = socket.socketpair()
os.dup2(keep[0].fileno(), 50) if resource.getrlimit(resource.RLIMIT_NOFILE)[0] > 50 else None
os.umask(0o000)
resource.setrlimit(resource.RLIMIT_NOFILE, (8, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(30)
    os._exit(0)
"""

PROBE = """
import builtins, glob, os, signal, sys, resource
import pandas as pd
found = []
for path in ('../planted.txt', 'planted.txt', '/planted.txt', '/tmp/planted.txt'):
    if os.path.exists(path):
        found.append('file ' + path)
found += ['file ' + p for p in glob.glob('../*/planted.txt')]
if 'PLANTED' in os.environ:
    found.append('env')
if signal.getsignal(signal.SIGUSR1) is not signal.SIG_DFL:
    found.append('signal handler')
if hasattr(os, 'PLANTED'):
    found.append('module attribute')
if hasattr(builtins, 'PLANTED'):
    found.append('builtin')
if not hasattr(pd.read_csv('table.csv'), 'columns'):
    found.append('patched pandas')
for fd in range(4, 64):
    try:
        os.fstat(fd)
        found.append('file descriptor %d' % fd)
    except OSError:
        pass
mask = os.umask(0o022)
if mask != 0o022:
    found.append('umask %o' % mask)
if resource.getrlimit(resource.RLIMIT_NOFILE)[0] == 8:
    found.append('rlimit')
# /proc is closed to programs: a process exists when a signal 0 to it is refused (EPERM) rather
# than sent to nobody (ESRCH). The worker (1) and this program's parent are expected.
others = []
for pid in range(2, os.getpid() + 64):
    try:
        os.kill(pid, 0)
        others.append(pid)
    except ProcessLookupError:
        pass
    except PermissionError:
        others.append(pid)
print('OTHERS', [pid for pid in others if pid not in (os.getpid(), os.getppid())])
print('LEAKS', found)
print('PARENT', os.getppid())
"""


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    # One worker: the next program surely starts from the same zygote as the one before.
    with Sandbox(workers=1, limits=Limits(wall_seconds=10, cpu_seconds=5)) as sandbox:
        sandbox.expected = baseline(sandbox)  # type: ignore[attr-defined]
        yield sandbox


def run(box: Sandbox, code: str, *, chart_type: str | None = None) -> RunResult:
    return box.run(textwrap.dedent(code), TABLE, chart_type=chart_type)


def leaks(result: RunResult, expected: frozenset[int] = frozenset()) -> list[str]:
    """What the probe found of an earlier program; processes count too, but those ``expected`` (pids in
    the worker's namespace: its own threads, and the zygote, a sibling of programs forked from the
    worker), which a first probe of a fresh pool finds."""
    assert result.outcome is Outcome.OK, result
    lines = result.stdout.splitlines()
    found = list(ast.literal_eval(next(line for line in lines if line.startswith("LEAKS ")).removeprefix("LEAKS ")))
    others = ast.literal_eval(next(line for line in lines if line.startswith("OTHERS ")).removeprefix("OTHERS "))
    return found + [f"process {pid}" for pid in others if pid not in expected]


def baseline(box: Sandbox) -> frozenset[int]:
    """The processes a probe finds in a pool where no program ran but probes (from the zygote, then from the worker)."""
    found: set[int] = set()
    for code in (PROBE, PROBE + "\nimport matplotlib\n"):
        r = box.run(code, TABLE)
        found |= {int(p) for p in ast.literal_eval(next(x for x in r.stdout.splitlines() if x.startswith("OTHERS "))[7:])}
        found.add(parent(r))
    return frozenset(found - {1})


def parent(result: RunResult) -> int:
    return int(next(line for line in result.stdout.splitlines() if line.startswith("PARENT ")).split()[1])


def dead(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def zygote_pids(box: Sandbox) -> list[int]:
    """From the host: the children of each worker (the init of its pid namespace) between runs: its zygote."""
    found = []
    for worker in box._all:
        outer = worker.proc.pid
        with open(f"/proc/{outer}/task/{outer}/children") as fh:
            for init in fh.read().split():
                with open(f"/proc/{init}/task/{init}/children") as kids:
                    found += [int(p) for p in kids.read().split()]
    return found


def test_programs_that_do_not_draw_start_from_the_zygote(box: Sandbox) -> None:
    if "pidns" not in box.isolation:
        pytest.skip("without a pid namespace the worker is not pid 1")
    assert len(zygote_pids(box)) == 1
    lean = run(box, PROBE)
    drawing = run(box, PROBE + "\nimport matplotlib\n")
    chart = run(box, PROBE, chart_type="bar")
    assert parent(lean) != 1, lean  # the zygote
    assert parent(drawing) == 1 and parent(chart) == 1, (drawing, chart)  # the worker (pid 1 of its namespace)


def test_nothing_planted_reaches_the_next_program(box: Sandbox) -> None:
    zygotes = zygote_pids(box)
    planted = run(box, PLANT + PROBE)
    # Control: the probe sees what was planted, in the program that planted it.
    seen = leaks(planted)
    for leak in ("file planted.txt", "env", "signal handler", "module attribute", "builtin", "patched pandas", "umask 0",
                 "rlimit"):
        assert any(s.startswith(leak) for s in seen), (leak, seen)
    assert any(s.startswith("process") for s in seen) and any(s.startswith("file descriptor") for s in seen), seen
    for code, chart_type in ((PROBE, None), (PROBE, None), (PROBE + "\nimport matplotlib\n", None)):
        after = run(box, code, chart_type=chart_type)
        assert leaks(after, box.expected) == [], after  # type: ignore[attr-defined]
        assert parent(after) == parent(planted) or parent(after) == 1
    assert zygote_pids(box) == zygotes  # the zygote is still the one it was, and nothing else is left


def test_a_program_cannot_harm_or_enter_the_zygote(box: Sandbox) -> None:
    zygotes = zygote_pids(box)
    r = run(box, """
        import ctypes, os, signal
        libc = ctypes.CDLL(None, use_errno=True)
        zygote = os.getppid()
        print('ptrace', libc.ptrace(16, zygote, None, None))
        for sig in (signal.SIGKILL, signal.SIGSTOP, signal.SIGTERM, signal.SIGUSR1):
            try:
                os.kill(zygote, sig)
                print('SIGNALLED', sig)
            except OSError as exc:
                print('denied', sig, type(exc).__name__)
        for what in ('mem', 'environ', 'fd', 'cwd', 'root', 'maps'):
            try:
                path = f'/proc/{zygote}/{what}'
                print('READ', what, os.listdir(path) if what in ('fd', 'cwd', 'root') else open(path, 'rb').read(16))
            except OSError as exc:
                print('denied', what, type(exc).__name__)
        try:
            os.setresuid(0, 0, 0)
            print('ROOT')
        except OSError as exc:
            print('denied setuid', type(exc).__name__)
    """)
    assert r.outcome is Outcome.OK, r
    assert "SIGNALLED" not in r.stdout and "READ" not in r.stdout and "ROOT" not in r.stdout, r.stdout
    assert "ptrace -1" in r.stdout, r.stdout
    assert zygote_pids(box) == zygotes
    assert leaks(run(box, PROBE), box.expected) == []  # type: ignore[attr-defined]


def test_every_layer_holds_from_the_zygote_as_from_the_worker(box: Sandbox, tmp_path: Path) -> None:
    fingerprint = """
        import ctypes, os, resource, signal, socket
        libc = ctypes.CDLL(None, use_errno=True)
        header = (ctypes.c_uint32 * 2)(0x20080522, 0)
        caps = (ctypes.c_uint32 * 6)()
        libc.capget(header, caps)
        checks = {
            'ids': (os.getuid(), os.getgid(), os.getgroups(), os.getuid() == 0), 'caps': list(caps),
            'no_new_privs': libc.prctl(39, 0, 0, 0, 0), 'session_leader': os.getsid(0) == os.getpid(),
            'env': dict(os.environ), 'cwd_entries': sorted(os.listdir('.')), 'umask': os.umask(0o022),
            'signals': [str(signal.getsignal(s)) for s in (signal.SIGXFSZ, signal.SIGPIPE, signal.SIGINT, signal.SIGTERM)],
            # (all but the address space: the program may add memory_mb to what it starts with, which differs)
            'limits': [resource.getrlimit(getattr(resource, name)) for name in sorted(dir(resource))
                       if name.startswith('RLIMIT_') and name != 'RLIMIT_AS'],
        }
        for path in ('/etc/passwd', '../', '/proc/self/status', '/', '/tmp/x'):
            try:
                open(path, 'w' if path == '/tmp/x' else 'r').read() if not path.endswith('/') else os.listdir(path)
                checks[path] = 'OPENED'
            except OSError as exc:
                checks[path] = type(exc).__name__
        for family, address in ((socket.AF_INET, ('127.0.0.1', 22)), (socket.AF_UNIX, '\\0abstract')):
            try:
                with socket.socket(family, socket.SOCK_STREAM) as sock:
                    sock.settimeout(1)
                    sock.connect(address)
                checks[str(family)] = 'CONNECTED'
            except OSError as exc:
                checks[str(family)] = type(exc).__name__
        print('FP', sorted(checks.items()))
    """
    lean = run(box, fingerprint)
    full = run(box, textwrap.dedent(fingerprint) + "\n# plot\n")

    def fp(r: RunResult) -> str:
        assert r.outcome is Outcome.OK, r
        return next(line for line in r.stdout.splitlines() if line.startswith("FP "))

    assert fp(lean) == fp(full)
    assert "'OPENED'" not in fp(lean) and "CONNECTED" not in fp(lean), fp(lean)
    # Control: the fingerprint tells an unisolated process apart (here: a plain python of the host).
    (tmp_path / "table.csv").write_text(TABLE)
    host = subprocess.run([sys.executable, "-c", textwrap.dedent(fingerprint)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert host.stdout.startswith("FP ") and host.stdout.strip() != fp(lean), host


def test_a_dead_zygote_leaves_programs_to_the_worker() -> None:
    with Sandbox(workers=1) as one:
        expected = baseline(one)
        (zygote,) = zygote_pids(one)
        os.kill(zygote, signal.SIGKILL)
        wait_for(lambda: dead(zygote), 30, "the zygote's death")
        for _ in range(3):
            r = one.run(PROBE, TABLE)
            assert leaks(r, expected) == [] and parent(r) == 1, r
        assert zygote_pids(one) == []


def test_a_zygote_killed_during_a_program_leaves_nothing_of_it() -> None:
    with Sandbox(workers=1, limits=Limits(wall_seconds=20)) as one:
        expected = baseline(one)
        (zygote,) = zygote_pids(one)
        results: list[RunResult] = []
        # The program leaves a detached grandchild behind, then waits to be interrupted.
        worker = threading.Thread(target=lambda: results.append(one.run(textwrap.dedent("""
            import os, time
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    time.sleep(60)
                os._exit(0)
            time.sleep(60)
        """), TABLE)))
        worker.start()

        def program_and_grandchild() -> bool:
            with open(f"/proc/{zygote}/task/{zygote}/children") as fh:
                kids = fh.read().split()
            if not kids:
                return False
            with open(f"/proc/{kids[0]}/task/{kids[0]}/children") as fh:
                return bool(fh.read().split())

        wait_for(program_and_grandchild, 30, "the program and its child")
        os.kill(zygote, signal.SIGKILL)
        worker.join(60)
        assert results and results[0].outcome in (Outcome.CRASHED, Outcome.KILLED), results
        after = one.run(PROBE, TABLE)
        assert leaks(after, expected) == [] and parent(after) == 1, after


# A program's Landlock ruleset is built from descriptors (O_PATH) of the readable directories that the
# worker opens once and its zygote inherits; the program's process closes them (and the ruleset) before
# the program runs. The program looks for any descriptor above its own 0-3, then opens one of its own
# the same way (the control: the probe sees such a descriptor).
HELD = """
import os, stat, sysconfig

def held():
    found = []
    for fd in range(4, 4096):
        try:
            st = os.fstat(fd)
        except OSError:
            continue
        found.append((fd, 'directory' if stat.S_ISDIR(st.st_mode) else oct(stat.S_IFMT(st.st_mode))))
    return found

print('HELD', held())
mine = os.open(sysconfig.get_paths()['stdlib'], os.O_PATH)
print('CONTROL', [kind for fd, kind in held() if fd == mine])
"""


def test_the_workers_landlock_descriptors_are_not_a_programs(box: Sandbox) -> None:
    if "landlock-fs" not in box.isolation or "pidns" not in box.isolation:
        pytest.skip("needs Landlock and the zygote layout (pid namespace)")
    # From the host: the zygote holds a descriptor of the interpreter's standard library (so that a
    # program which inherited its descriptors would find one).
    (zygote,) = zygote_pids(box)
    stdlib = os.stat(sysconfig.get_paths()["stdlib"])
    held_by_zygote = []
    for name in os.listdir(f"/proc/{zygote}/fd"):
        try:
            st = os.stat(f"/proc/{zygote}/fd/{name}")
        except OSError:
            continue
        held_by_zygote.append((st.st_dev, st.st_ino))
    assert (stdlib.st_dev, stdlib.st_ino) in held_by_zygote, held_by_zygote
    for code in (HELD, HELD + "\n# plot\n"):  # from the zygote, then from the worker
        r = run(box, code)
        assert r.outcome is Outcome.OK, r
        lines = r.stdout.splitlines()
        assert next(line for line in lines if line.startswith("HELD ")) == "HELD []", r.stdout
        assert next(line for line in lines if line.startswith("CONTROL ")) == "CONTROL ['directory']", r.stdout

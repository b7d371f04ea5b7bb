"""The sandbox escape suite: a program tries, as an attacker would, to reach the host.

Run as the CI user. Every attempt must fail, the host must be unharmed and the next program must
run. Each test has a control that shows it could see the leak: the same attempt from an ordinary
process (or from the sandbox with the layer under test switched off) succeeds.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Iterator

import pytest

from tqaforge.sandbox import Limits, Outcome, RunResult, Sandbox
from tqaforge.sandbox.pool import sweep_stale

pytestmark = pytest.mark.hostile

TABLE = "name,score\nada,3\nbob,5\n"


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    with Sandbox(workers=1, limits=Limits(wall_seconds=20, cpu_seconds=20)) as sandbox:
        yield sandbox


def run(box: Sandbox, code: str, limits: Limits | None = None) -> RunResult:
    return box.run(textwrap.dedent(code), TABLE, limits=limits)


def still_works(box: Sandbox) -> None:
    r = run(box, "import pandas as pd\nprint('Final Answer:', pd.read_csv('table.csv')['score'].sum())")
    assert r.outcome is Outcome.OK and r.stdout == "Final Answer: 8\n", r


def plain(code: str) -> str:
    """The same attempt from an ordinary process of the host (the control)."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60)
    return done.stdout + done.stderr


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def wait_for(check, seconds: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {seconds} s for {what}")
        time.sleep(0.02)


# --- sockets ------------------------------------------------------------------------------------------

CONNECT_ALL = """
    import json, socket
    reached = []
    for path in json.loads({paths!r}):
        for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_SEQPACKET):
            try:
                s = socket.socket(socket.AF_UNIX, kind)
            except OSError as exc:
                print('no socket', type(exc).__name__, exc)
                break
            try:
                s.connect(path)
                reached.append(path)
                break
            except OSError:
                pass
            finally:
                s.close()
    print('REACHED', json.dumps(reached))
"""


def reached(output: str) -> list[str]:
    line = next((x for x in output.splitlines() if x.startswith("REACHED ")), None)
    assert line is not None, output
    return list(json.loads(line.removeprefix("REACHED ")))


@pytest.fixture()
def host_sockets(tmp_path: Path) -> Iterator[list[str]]:
    """Every pathname socket under /run and /var/run, plus one of ours that listens (world-connectable)."""
    ours = Path("/run") if os.access("/run", os.W_OK) else tmp_path
    path = str(ours / f"tqaforge-escape-{os.getpid()}.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    os.chmod(path, 0o777)
    server.listen(16)
    found = {path}
    for top in ("/run", "/var/run"):
        for root, _dirs, files in os.walk(os.path.realpath(top)):
            for name in files:
                full = os.path.join(root, name)
                try:
                    if stat.S_ISSOCK(os.lstat(full).st_mode):
                        found.add(full)
                except OSError:
                    continue
    try:
        yield sorted(found)
    finally:
        server.close()
        os.unlink(path)


def test_no_socket_under_run_is_reachable(box: Sandbox, host_sockets: list[str]) -> None:
    code = CONNECT_ALL.format(paths=json.dumps(host_sockets))
    r = run(box, code)
    assert r.outcome is Outcome.OK, r
    assert reached(r.stdout) == [], f"the program reached host sockets: {reached(r.stdout)}"
    # Control 1: an ordinary process reaches our own listening socket (the test can see a connect succeed).
    ours = next(p for p in host_sockets if f"tqaforge-escape-{os.getpid()}.sock" in p)
    assert ours in reached(plain(code))
    # Control 2: without its own file-system view, the sandboxed program did reach them (the hole of issue 23):
    # Landlock does not cover connect() to a pathname socket.
    with Sandbox(workers=1, skip_layers=("fs-view",)) as weaker:
        leak = weaker.run(textwrap.dedent(code), TABLE)
    assert reached(leak.stdout), leak
    still_works(box)


def test_postgresql_socket_cannot_authenticate(box: Sandbox) -> None:
    sockets = [str(p) for p in Path("/run/postgresql").glob(".s.PGSQL.*")] if Path("/run/postgresql").is_dir() else []
    if not sockets:
        pytest.skip("no local PostgreSQL socket on this machine")
    # A startup message for user postgres, database test: trust auth answers 'R' with code 0 (AuthenticationOk).
    code = f"""
        import socket, struct
        body = struct.pack('!I', 196608) + b'user\\0postgres\\0database\\0test\\0\\0'
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect({sockets[0]!r})
            s.sendall(struct.pack('!I', len(body) + 4) + body)
            reply = s.recv(9)
            print('pgauth', reply[:1], struct.unpack('!I', reply[5:9])[0])
        except OSError as exc:
            print('refused', type(exc).__name__)
    """
    r = run(box, code)
    assert r.outcome is Outcome.OK and "pgauth" not in r.stdout, r
    assert "pgauth b'R' 0" in plain(code)  # control: the host's own process is let in


def test_abstract_socket_is_unreachable(box: Sandbox) -> None:
    name = f"\0tqaforge-escape-{os.getpid()}"
    server = socket.socket(socket.AF_UNIX)
    server.bind(name)
    server.listen(4)
    code = f"""
        import socket
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect({name!r})
            print('CONNECTED')
        except OSError as exc:
            print('refused', type(exc).__name__)
    """
    try:
        r = run(box, code)
        assert r.outcome is Outcome.OK and "CONNECTED" not in r.stdout, r
        assert "CONNECTED" in plain(code)  # control
    finally:
        server.close()
    still_works(box)


# --- files, devices, processes of the host -------------------------------------------------------------


def test_proc_environ_of_other_processes(box: Sandbox) -> None:
    secret = "tq-ESCAPE-SECRET-41"
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                              env={**os.environ, "TQAFORGE_VICTIM": secret})
    try:
        code = f"""
            import os
            for pid in ['1', 'self', str(os.getppid()), '{victim.pid}', '{os.getpid()}']:
                try:
                    print(pid, open('/proc/%s/environ' % pid, 'rb').read())
                except OSError as exc:
                    print(pid, 'denied', type(exc).__name__)
            try:
                print('listing', sorted(os.listdir('/proc')))
            except OSError as exc:
                print('listing denied', type(exc).__name__)
        """
        r = run(box, code)
        assert r.outcome is Outcome.OK, r
        assert secret not in r.stdout + r.stderr
        assert str(victim.pid) not in r.stdout.split("listing", 1)[-1]
        assert secret in plain(code)  # control: an ordinary process reads the victim's environment
    finally:
        victim.kill()
        victim.wait()


def test_workspace_database_by_absolute_path(box: Sandbox, tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    db = tmp_path / "workspace" / "tqaforge.db"
    db.parent.mkdir()
    db.parent.chmod(0o755)
    with sqlite3.connect(db) as con:
        con.execute("create table question (text)")
        con.execute("insert into question values ('SECRET-QUESTION-886')")
    db.chmod(0o666)  # even a world-writable database file
    code = f"""
        import sqlite3
        try:
            print(open({str(db)!r}, 'rb').read()[-4096:])
        except OSError as exc:
            print('open denied', type(exc).__name__)
        try:
            con = sqlite3.connect({str(db)!r})
            print(con.execute('select * from question').fetchall())
            con.execute('create table owned (x)')
            con.commit()
            print('WROTE')
        except Exception as exc:
            print('sqlite denied', type(exc).__name__)
    """
    r = run(box, code)
    assert r.outcome is Outcome.OK, r
    assert "SECRET-QUESTION-886" not in r.stdout and "WROTE" not in r.stdout
    with sqlite3.connect(db) as con:
        assert [t for (t,) in con.execute("select name from sqlite_master")] == ["question"]
    assert "SECRET-QUESTION-886" in plain(code.replace("con.execute('create table owned (x)')", "pass"))  # control


def test_devices_and_host_directories(box: Sandbox) -> None:
    code = """
        import os
        for path in ['/dev/mem', '/dev/kmsg', '/dev/vda', '/dev/sda', '/dev/tty', '/dev/shm', '/run', '/var/run',
                     '/tmp', '/home', '/etc/passwd', '/etc/hostname', '/sys/kernel', '/proc/1/root']:
            try:
                if os.path.isdir(path):
                    print('LISTED', path, os.listdir(path)[:3])
                else:
                    open(path, 'rb').close()
                    print('OPENED', path)
            except OSError as exc:
                print('denied', path, type(exc).__name__)
        with open('/dev/null', 'w') as fh:
            fh.write('fine')
        print('devnull ok', len(open('/dev/urandom', 'rb').read(8)), len(open('/dev/zero', 'rb').read(8)))
    """
    r = run(box, code)
    assert r.outcome is Outcome.OK, r
    assert "OPENED" not in r.stdout and "LISTED" not in r.stdout, r.stdout
    assert "devnull ok 8 8" in r.stdout  # what a program may use still works
    assert "OPENED /etc/hostname" in plain(code)  # control


def test_ptrace_and_signals_to_the_worker(box: Sandbox) -> None:
    code = """
        import ctypes, os, signal
        libc = ctypes.CDLL(None, use_errno=True)
        for pid in (os.getppid(), 1):
            print('ptrace', pid, libc.ptrace(16, pid, None, None))  # PTRACE_ATTACH
        for pid in (os.getppid(), 1):
            for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGSTOP):
                try:
                    os.kill(pid, sig)
                    print('SIGNALLED', pid, sig)
                except OSError as exc:
                    print('denied', pid, sig, type(exc).__name__)
    """
    worker = box._all[0].proc.pid
    r = run(box, code)
    assert r.outcome is Outcome.OK, r
    assert "SIGNALLED" not in r.stdout and all(line.endswith(" -1") for line in r.stdout.splitlines()
                                               if line.startswith("ptrace")), r.stdout
    assert box._all[0].proc.pid == worker and box._all[0].proc.poll() is None
    still_works(box)
    # Control: an ordinary process may attach to a process of its own.
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        control = plain(f"""
            import ctypes
            print('ptrace', ctypes.CDLL(None, use_errno=True).ptrace(16, {target.pid}, None, None))
        """)
        assert "ptrace 0" in control, control
    finally:
        target.kill()
        target.wait()


# --- memory of the program as a whole ----------------------------------------------------------------

FORK_AND_TOUCH = """
    import os
    # Each child keeps its memory until every child is forked (it waits for the pipe to close):
    # the children hold their blocks at the same time however the machine schedules them, so the
    # count below does not depend on load (a child that exited early would free its block).
    hold, release = os.pipe()
    kids = []
    for i in range({children}):
        try:
            pid = os.fork()
        except OSError as exc:
            print('fork refused', type(exc).__name__)
            break
        if pid == 0:
            os.close(release)
            block = bytearray({mb} * 1024 * 1024)
            for j in range(0, len(block), 4096):
                block[j] = 1
            print('touched', i, flush=True)
            os.read(hold, 1)  # until the parent has forked them all
            os._exit(0)
        kids.append(pid)
    os.close(release)
    for pid in kids:
        os.waitpid(pid, 0)
    print('parent done')
"""


def test_fork_bomb_with_memory_is_capped_as_a_whole(box: Sandbox) -> None:
    if "cgroup" not in box.isolation:
        pytest.skip(f"no memory cgroup here ({box.missing}); test_without_a_cgroup_the_program_cannot_fork covers it")
    limits = Limits(memory_mb=256, processes=32, wall_seconds=30, cpu_seconds=30)
    r = run(box, FORK_AND_TOUCH.format(children=12, mb=200), limits)
    touched = r.stdout.count("touched")
    # 12 x 200 MB held at once under a 256 MB limit for the program: at most one child gets its block.
    assert touched <= 1, r
    assert r.outcome is Outcome.MEMORY and "256 MB" in (r.error or ""), r
    # Control: with room for all of them, every child touches its 200 MB (the test can see them).
    ok = run(box, FORK_AND_TOUCH.format(children=3, mb=200), Limits(memory_mb=2048, processes=32, wall_seconds=30,
                                                                   cpu_seconds=30))
    assert ok.outcome is Outcome.OK and ok.stdout.count("touched") == 3, ok
    still_works(box)


def test_without_a_cgroup_the_program_cannot_fork() -> None:
    with Sandbox(workers=1, skip_layers=("cgroup",)) as nofork:
        assert "no-fork" in nofork.isolation and "cgroup" in nofork.missing
        r = nofork.run(textwrap.dedent(FORK_AND_TOUCH.format(children=12, mb=200)), TABLE,
                       limits=Limits(memory_mb=256, processes=32))
        assert "fork refused" in r.stdout and r.stdout.count("touched") == 0, r
        ok = nofork.run("import pandas as pd\nprint(pd.read_csv('table.csv')['score'].sum())", TABLE)
        assert ok.outcome is Outcome.OK and ok.stdout == "8\n", ok


# --- the program dies with its host ------------------------------------------------------------------

HOST = """
import sys
from tqaforge.sandbox import Limits, Sandbox
box = Sandbox(workers=1, limits=Limits(wall_seconds=600, cpu_seconds=600), skip_layers=tuple(sys.argv[1:]))
print(box._base, flush=True)
box.run('''
import os, time
if os.fork() == 0:   # a detached child, as a hostile program would leave behind
    os.setsid()
    while True:
        time.sleep(0.05)
open('alive', 'w').write('yes')
while True:
    pass
''', 'a\\n1\\n')
"""


def _program_pids(base: str) -> list[int]:
    """Host pids of processes whose working directory is inside the sandbox directory ``base``."""
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.readlink(f"/proc/{name}/cwd").startswith(base + "/") and alive(int(name)):
                    pids.append(int(name))
            except OSError:
                continue
    return pids


@pytest.fixture
def own_tmp() -> Iterator[Path]:
    """A temporary directory of the test's own for a host's sandbox (its TMPDIR), so that no other
    process's sandbox start (another xdist worker's) sweeps the dead host's leftovers first."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="tqaforge-test-tmp-"))
    path.chmod(0o711)  # as the system's /tmp lets the sandbox uid reach its directory
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGHUP])
def test_program_dies_with_its_host_and_leftovers_are_swept(sig: signal.Signals, own_tmp: Path) -> None:
    host = subprocess.Popen([sys.executable, "-c", HOST], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(own_tmp)})
    try:
        assert host.stdout is not None
        base = host.stdout.readline().strip()
        assert base, "the host printed no sandbox directory"
        wait_for(lambda: any(Path(base).glob("w*/run-*/alive")), 60, "the program to start")
        wait_for(lambda: len(_program_pids(base)) >= 2, 10, "the program and its detached child")
        pids = _program_pids(base)  # control: the test sees the program and its child alive
        host.send_signal(sig)
        host.wait(timeout=30)
        wait_for(lambda: not any(alive(p) for p in pids), 15, f"the program to die after {sig.name} of its host")
        assert Path(base).exists()  # a killed host cannot clean up ...
        assert Path(base).parent == own_tmp
        removed = sweep_stale(str(own_tmp))  # ... the next start does
        assert base in removed and not Path(base).exists()
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
    with Sandbox(workers=1) as again:
        assert again.run("print('Final Answer: 1')", TABLE).outcome is Outcome.OK


def test_control_without_a_pid_namespace_the_program_outlives_its_host() -> None:
    """The hole of issue 23, reproduced: the test above would see a survivor."""
    host = subprocess.Popen([sys.executable, "-c", HOST, "pidns"], stdout=subprocess.PIPE, text=True)
    pids: list[int] = []
    try:
        assert host.stdout is not None
        base = host.stdout.readline().strip()
        wait_for(lambda: any(Path(base).glob("w*/run-*/alive")), 60, "the program to start")
        wait_for(lambda: len(_program_pids(base)) >= 2, 10, "the program and its detached child")
        pids = _program_pids(base)
        host.send_signal(signal.SIGKILL)
        host.wait(timeout=30)
        with pytest.raises(AssertionError):
            wait_for(lambda: not any(alive(p) for p in pids), 1.5, "the program to die")
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if host.poll() is None:
            host.kill()
            host.wait()
        sweep_stale()


def test_a_live_sandbox_is_never_swept(box: Sandbox) -> None:
    assert box._base not in sweep_stale()
    assert Path(box._base).is_dir()
    still_works(box)


# --- cleanup that never recurses ------------------------------------------------------------------------


def test_three_thousand_nested_directories(box: Sandbox) -> None:
    r = run(box, """
        import os
        for _ in range(3000):
            os.mkdir('d')
            os.chdir('d')
            open('f', 'w').write('x')
        os.chmod('.', 0)
        print('Final Answer: deep')
    """)
    assert r.outcome is Outcome.OK and r.stdout == "Final Answer: deep\n", r
    assert not any(Path(box._all[0].dir).glob("run-*")), "the scratch directory was left behind"
    still_works(box)

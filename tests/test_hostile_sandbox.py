"""Hostile programs in the sandbox: each ends in a typed outcome, the host is unharmed, later runs work."""

from __future__ import annotations

import os
import socket
import textwrap
import time
from pathlib import Path
from typing import Iterator

import pytest

from tqaforge.sandbox import Limits, Outcome, RunResult, Sandbox

pytestmark = pytest.mark.hostile

TABLE = "name,score\nada,3\nbob,5\n"
EXPECTED_HERE = {"process", "empty-env", "scratch-dir", "rlimits", "subreaper", "netns", "pidns", "fs-view", "cgroup",
                 "landlock-fs", "landlock-net",
                 "landlock-scope"}
SHORT = Limits(wall_seconds=3, cpu_seconds=3)


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    with Sandbox(workers=2, limits=Limits(wall_seconds=5, cpu_seconds=5)) as sandbox:
        yield sandbox


def run(box: Sandbox, code: str, limits: Limits | None = None) -> RunResult:
    return box.run(textwrap.dedent(code), TABLE, limits=limits)


def still_works(box: Sandbox) -> None:
    for _ in range(2):  # both workers (or their replacements) answer
        r = run(box, "import pandas as pd\nprint('Final Answer:', pd.read_csv('table.csv')['score'].sum())")
        assert r.outcome is Outcome.OK, r
        assert r.stdout.strip() == "Final Answer: 8"


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def namespace_members(box: Sandbox) -> dict[int, list[int]]:
    """From the host: for each worker's pid namespace, the host pids of the processes in it but its init."""
    found: dict[int, list[int]] = {}
    for worker in box._all:
        outer = worker.proc.pid
        with open(f"/proc/{outer}/task/{outer}/children") as fh:
            inits = [int(p) for p in fh.read().split()]
        for init in inits:
            ns = os.readlink(f"/proc/{init}/ns/pid")
            members = []
            for name in os.listdir("/proc"):
                if name.isdigit() and int(name) != init:
                    try:
                        if os.readlink(f"/proc/{name}/ns/pid") == ns and alive(int(name)):
                            members.append(int(name))
                    except OSError:
                        continue
            found[init] = members
    return found


def test_isolation_layers_on_this_machine(box: Sandbox) -> None:
    r = run(box, "print('hi')")
    assert r.outcome is Outcome.OK
    assert EXPECTED_HERE <= set(r.isolation), r.missing
    if os.geteuid() == 0:
        assert "uid" in r.isolation


def test_infinite_loop(box: Sandbox) -> None:
    start = time.monotonic()
    r = run(box, "while True:\n    pass", Limits(wall_seconds=1.5, cpu_seconds=10))
    assert r.outcome is Outcome.TIMEOUT and time.monotonic() - start < 5
    still_works(box)


def test_cpu_limit(box: Sandbox) -> None:
    r = run(box, "while True:\n    pass", Limits(wall_seconds=10, cpu_seconds=1))
    assert r.outcome is Outcome.TIMEOUT and "CPU" in (r.error or "")


def test_fork_bomb(box: Sandbox) -> None:
    r = run(box, """
        import os
        while True:
            try:
                os.fork()
            except OSError:
                pass
    """, SHORT)
    assert r.outcome in (Outcome.TIMEOUT, Outcome.EXCEPTION), r
    still_works(box)


def test_memory_bomb(box: Sandbox) -> None:
    r = run(box, "x = []\nwhile True:\n    x.append(bytearray(50_000_000))", Limits(memory_mb=256))
    assert r.outcome is Outcome.MEMORY, r
    still_works(box)


def test_gigabyte_of_output(box: Sandbox) -> None:
    r = run(box, "import sys\nline = 'x' * 1_000_000\nfor _ in range(1000):\n    sys.stdout.write(line)")
    assert r.outcome is Outcome.OUTPUT_LIMIT
    assert len(r.stdout) + len(r.stderr) <= Limits().output_bytes
    still_works(box)


def test_write_outside_scratch(box: Sandbox, tmp_path: Path) -> None:
    tmp_path.chmod(0o777)
    target = tmp_path / "escaped.txt"
    r = run(box, f"""
        for path in [{str(target)!r}, '/tmp/tqaforge-escaped.txt', '../escaped.txt']:
            try:
                open(path, 'w').write('x')
                print('WROTE', path)
            except OSError as exc:
                print('denied', path, type(exc).__name__)
    """)
    assert r.outcome is Outcome.OK and "WROTE" not in r.stdout, r.stdout
    assert not target.exists() and not Path("/tmp/tqaforge-escaped.txt").exists()


def test_read_ssh_and_files_outside_scratch(box: Sandbox, tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    secret.chmod(0o644)
    r = run(box, f"""
        import os
        for path in [{str(secret)!r}, os.path.expanduser('~/.ssh/id_rsa'), '/root/.ssh/id_rsa', '/etc/shadow', '/etc/passwd']:
            try:
                print(open(path).read()[:40])
            except OSError as exc:
                print('denied', path, type(exc).__name__)
    """)
    assert r.outcome is Outcome.OK
    if "landlock-fs" not in r.isolation:
        pytest.skip(f"landlock-fs missing here ({r.missing}); a world-readable file outside scratch is readable")
    assert "TOP-SECRET" not in r.stdout and "root:" not in r.stdout


def test_secrets_in_environment_are_not_visible(box: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-SECRET-from-host")
    monkeypatch.setenv("TQAFORGE_X", "tq-SECRET")
    # A fresh pool, started while the secrets are in the host's environment.
    with Sandbox(workers=1) as fresh:
        r = fresh.run(textwrap.dedent(f"""
            import os
            print('env', dict(os.environ))
            for pid in ['self', str(os.getppid()), '{os.getpid()}']:
                try:
                    print(pid, open('/proc/%s/environ' % pid, 'rb').read())
                except OSError as exc:
                    print(pid, 'denied', type(exc).__name__)
        """), TABLE)
    assert r.outcome is Outcome.OK, r
    assert "SECRET" not in r.stdout and "SECRET" not in r.stderr
    assert "env {}" in r.stdout


def test_socket(box: Sandbox) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.5)
    port = server.getsockname()[1]
    r = run(box, f"""
        import socket
        for host in ['127.0.0.1', '1.1.1.1']:
            try:
                socket.create_connection((host, {port}), timeout=1)
                print('CONNECTED', host)
            except OSError as exc:
                print('refused', host, type(exc).__name__)
    """)
    assert r.outcome is Outcome.OK and "CONNECTED" not in r.stdout, r
    with pytest.raises(socket.timeout):
        server.accept()
    server.close()


def test_socket_through_ctypes(box: Sandbox) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.5)
    port = server.getsockname()[1]
    r = run(box, f"""
        import ctypes, socket, struct
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.socket(2, 1, 0)
        addr = struct.pack('!HH4s8x', 2, {port}, socket.inet_aton('127.0.0.1'))
        addr = struct.pack('H', 2) + addr[2:]
        rc = libc.connect(fd, ctypes.c_char_p(addr), 16)
        print('rc', rc, 'errno', ctypes.get_errno())
    """)
    assert r.outcome is Outcome.OK, r
    assert "rc -1" in r.stdout
    with pytest.raises(socket.timeout):
        server.accept()
    server.close()


def test_kill_parent_worker_and_host(box: Sandbox) -> None:
    r = run(box, f"""
        import os, signal
        for pid in [os.getppid(), {os.getpid()}, -1]:
            try:
                os.kill(pid, signal.SIGKILL)
                print('KILLED' if pid > 0 else 'sent', pid)  # kill(-1) reaches only the program's own processes
            except OSError as exc:
                print('denied', pid, type(exc).__name__)
    """)
    assert "KILLED" not in r.stdout, r
    assert r.outcome in (Outcome.OK, Outcome.KILLED)  # kill(-1) may end the program itself
    assert os.getpid() and still_works(box) is None


def test_delete_files_outside_scratch(box: Sandbox, tmp_path: Path) -> None:
    tmp_path.chmod(0o777)
    victim = tmp_path / "keep.txt"
    victim.write_text("keep")
    victim.chmod(0o666)
    r = run(box, f"""
        import os, shutil
        for fn, path in [(os.remove, {str(victim)!r}), (shutil.rmtree, {str(tmp_path)!r}), (os.rmdir, '..')]:
            try:
                fn(path)
                print('DELETED', path)
            except OSError as exc:
                print('denied', path, type(exc).__name__)
    """)
    assert r.outcome is Outcome.OK and "DELETED" not in r.stdout, r.stdout
    assert victim.read_text() == "keep"


def test_sys_exit(box: Sandbox) -> None:
    assert run(box, "import sys\nsys.exit(0)").outcome is Outcome.OK
    r = run(box, "import sys\nprint('bye')\nsys.exit(7)")
    assert r.outcome is Outcome.EXCEPTION and r.exit_status == 7 and r.stdout == "bye\n"
    r = run(box, "import os\nos._exit(5)")
    assert r.exit_status == 5 and r.outcome is Outcome.EXCEPTION


@pytest.mark.parametrize("code", ["import faulthandler\nfaulthandler._sigsegv()", "import os\nos.abort()"])
def test_c_level_crash(box: Sandbox, code: str) -> None:
    r = run(box, code)
    assert r.outcome is Outcome.CRASHED, r
    assert r.exit_status is not None and r.exit_status < 0
    still_works(box)


def test_detached_processes_are_killed(box: Sandbox) -> None:
    # Between runs a worker's pid namespace holds the worker and its zygote (which forks the programs
    # that do not draw, and lives as long as the worker): nothing else.
    zygotes = namespace_members(box)
    assert zygotes and all(len(members) <= 1 for members in zygotes.values()), zygotes
    r = run(box, """
        import os, sys, time
        # a setsid'd child and a double-forked grandchild, both sleeping, both printing their pid
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                print('pid', os.getpid(), flush=True)
                time.sleep(60)
                os._exit(0)
            print('pid', os.getpid(), flush=True)
            time.sleep(60)
            os._exit(0)
        time.sleep(0.3)
        print('parent done', flush=True)
    """)
    pids = [int(line.split()[1]) for line in r.stdout.splitlines() if line.startswith("pid ")]
    assert r.outcome is Outcome.OK and len(pids) == 2, r
    # The pids printed are those of the worker's own pid namespace: look at that namespace from the host.
    assert namespace_members(box) == zygotes, "a process survived its run"
    still_works(box)


def test_worker_death_is_reported_and_the_pool_recovers() -> None:
    import signal
    import threading

    with Sandbox(workers=1) as one:
        worker_pid = one._all[0].proc.pid
        threading.Timer(0.5, os.kill, (worker_pid, signal.SIGKILL)).start()
        r = one.run("import time\nprint('started', flush=True)\ntime.sleep(30)", TABLE)
        assert r.outcome is Outcome.KILLED and "worker" in (r.error or ""), r
        again = one.run("print('Final Answer: 1')", TABLE)
        assert again.outcome is Outcome.OK and again.stdout == "Final Answer: 1\n"
        assert one._all[0].proc.pid != worker_pid


def test_a_worker_replaced_from_a_short_lived_thread_outlives_that_thread() -> None:
    """A worker dies with the *thread* that started it (PR_SET_PDEATHSIG follows the thread): the
    replacement of a dead worker, started while some short-lived thread was in run(), must not die
    when that thread ends, and the next program (from another thread) runs as usual."""
    import signal
    import threading

    from conftest import wait_for

    with Sandbox(workers=1) as one:
        os.kill(one._all[0].proc.pid, signal.SIGKILL)
        seen: dict[str, object] = {}

        def short_lived() -> None:
            seen["tid"] = threading.get_native_id()
            seen["result"] = one.run("print('Final Answer: 0')", TABLE)  # finds the worker dead: replaced here

        thread = threading.Thread(target=short_lived)
        thread.start()
        thread.join()
        first = seen["result"]
        assert isinstance(first, RunResult) and first.outcome in (Outcome.KILLED, Outcome.CRASHED), first
        replacement = one._all[0].proc.pid
        # The thread is gone from the kernel too (its parent-death signal, if any, is sent by now).
        wait_for(lambda: not Path(f"/proc/self/task/{seen['tid']}").exists(), 10, "the thread's exit")
        again = one.run("print('Final Answer: 1')", TABLE)
        assert again.outcome is Outcome.OK and again.stdout == "Final Answer: 1\n", again
        assert one._all[0].proc.pid == replacement and alive(replacement)


def test_audit_hook_is_the_last_layer_where_landlock_is_missing() -> None:
    with Sandbox(workers=1, skip_layers=("landlock-fs", "landlock-net", "landlock-scope")) as weak:
        r = weak.run(textwrap.dedent(f"""
            import os
            for action in [lambda: os.kill(os.getppid(), 9), lambda: os.kill({os.getpid()}, 9),
                           lambda: open('/etc/passwd').read(), lambda: __import__('socket').socket(),
                           lambda: __import__('ctypes').CDLL(None).getpid()]:
                try:
                    action()
                    print('ALLOWED')
                except PermissionError as exc:
                    print('denied', exc)
        """), TABLE)
    assert "audit-hook" in r.isolation and {"landlock-fs", "landlock-net", "landlock-scope"} <= set(r.missing)
    assert r.outcome is Outcome.OK and "ALLOWED" not in r.stdout and r.stdout.count("denied") == 5, r


def test_font_cache_is_kept_from_a_fresh_worker_and_refused_when_others_could_write_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker's font list (built at its start, before any program) is kept for the next worker;
    a cache directory others may write, or a font list that is a symbolic link, is not used."""
    from tqaforge.sandbox.pool import _font_cache_dir, _font_cache_in

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with Sandbox(workers=1) as first:
        cache = _font_cache_dir(())
        assert cache is not None
        kept = sorted(Path(cache).glob("fontlist-*.json"))
        assert kept, "the first worker's font list was not kept"
        # A program cannot reach the cache: it is outside the program's view.
        r = first.run(f"import os\nprint(os.path.exists({cache!r}))", TABLE)
        assert r.outcome is Outcome.OK and r.stdout.strip() == "False", r
    with Sandbox(workers=1) as second:  # starts from the kept list
        assert (Path(second._all[0].mpl) / kept[0].name).read_bytes() == kept[0].read_bytes()
        assert run(second, "import matplotlib.pyplot as plt\nplt.bar([0, 1], [2, 3])\nprint('ok')").stdout == "ok\n"
    # Anyone's writable directory: not trusted, nothing read from it.
    marker = b'{"written": "by someone else"}'
    kept[0].write_bytes(marker)
    into = tmp_path / "mpl"
    into.mkdir()
    os.chmod(cache, 0o777)
    assert _font_cache_dir(()) is None
    _font_cache_in(str(into), ())
    assert not list(into.iterdir())
    os.chmod(cache, 0o700)
    _font_cache_in(str(into), ())
    assert (into / kept[0].name).read_bytes() == marker  # (the same directory, trusted again)
    # A font list that is a symbolic link is not followed.
    (into / kept[0].name).unlink()
    secret = tmp_path / "secret.json"
    secret.write_text('{"not": "fonts"}')
    kept[0].unlink()
    kept[0].symlink_to(secret)
    _font_cache_in(str(into), ())
    assert not list(into.iterdir())

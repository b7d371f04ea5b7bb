"""The kernel's isolation layers, through ctypes (no dependency): network namespace, subreaper,
rlimits, an unprivileged uid, Landlock, and an audit hook as the last resort.

Layer names (``RunResult.isolation`` / ``RunResult.missing``):

==============  ==============================================================================================
process         the program runs in a forked child of a worker process, never in the caller's process
empty-env       the worker starts with an empty environment; the child clears ``os.environ`` too
scratch-dir     the program's working directory is a fresh directory holding only ``table.csv``
rlimits         CPU, address space, file size, open files, processes, no core dumps
subreaper       the worker is a child subreaper: every descendant stays findable and is killed after the run
netns           the worker lives in its own network namespace (no interface up, loopback down)
uid             (root only) the child runs as a dedicated unprivileged uid/gid per worker
landlock-fs     Landlock: read-only on the interpreter's and libraries' directories, read-write in scratch
landlock-net    Landlock (ABI >= 4): no TCP connect or bind
landlock-scope  Landlock (ABI >= 6): no signals to processes outside the sandbox, no abstract unix sockets
audit-hook      a ``sys.addaudithook`` guard, installed only where one of the Landlock layers is missing;
                it can be bypassed by a determined program and is the weakest layer
==============  ==============================================================================================
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import sys
import sysconfig
from typing import Any

WANTED: tuple[str, ...] = ("subreaper", "netns", "uid", "landlock-fs", "landlock-net", "landlock-scope")

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_PR_SET_PDEATHSIG = 1
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_CHILD_SUBREAPER = 36

_SYS_landlock_create_ruleset = 444  # the same number on every architecture (new syscall table)
_SYS_landlock_add_rule = 445
_SYS_landlock_restrict_self = 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1

# Landlock filesystem access rights, by the ABI that introduced them.
_FS_EXECUTE = 1 << 0
_FS_WRITE_FILE = 1 << 1
_FS_READ_FILE = 1 << 2
_FS_READ_DIR = 1 << 3
_FS_ABI1 = (1 << 13) - 1  # EXECUTE .. MAKE_SYM
_FS_REFER = 1 << 13  # ABI 2
_FS_TRUNCATE = 1 << 14  # ABI 3
_FS_IOCTL_DEV = 1 << 15  # ABI 5
_NET_BIND_TCP = 1 << 0  # ABI 4
_NET_CONNECT_TCP = 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
_SCOPE_SIGNAL = 1 << 1

_libc: Any = None


def libc() -> Any:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _check(ret: int, what: str) -> int:
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return ret


def prctl(option: int, arg: int) -> None:
    _check(libc().prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)), "prctl")


# --- worker-wide layers (once, at worker start, while it is still single-threaded) -------------------


def enter_network_namespace() -> str | None:
    """Move this process into a new network namespace; None on success, else why not.

    Root gets a plain new netns. Others get a new user namespace mapping only their own uid/gid
    (so files keep their owners) and a netns inside it. Either way no interface is up: no IP at all.
    """
    if os.geteuid() == 0:
        if libc().unshare(ctypes.c_int(_CLONE_NEWNET)) == 0:
            return None
        return f"unshare(CLONE_NEWNET) failed: {os.strerror(ctypes.get_errno())}"
    uid, gid = os.geteuid(), os.getegid()
    if libc().unshare(ctypes.c_int(_CLONE_NEWUSER | _CLONE_NEWNET)) != 0:
        return f"unshare(CLONE_NEWUSER|CLONE_NEWNET) failed: {os.strerror(ctypes.get_errno())} (user namespaces disabled?)"
    try:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as fh:
                fh.write(text)
    except OSError:
        pass  # the namespace stands; ids show as the overflow id inside, which changes nothing we rely on
    return None


def become_subreaper() -> str | None:
    try:
        prctl(_PR_SET_CHILD_SUBREAPER, 1)
    except OSError as exc:
        return f"PR_SET_CHILD_SUBREAPER failed: {exc.strerror}"
    return None


def die_with_parent() -> None:
    """SIGKILL this process when its parent dies (the worker when the host dies, the child when the worker dies)."""
    try:
        prctl(_PR_SET_PDEATHSIG, 9)
    except OSError:
        pass


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is absent or disabled."""
    ret = libc().syscall(ctypes.c_long(_SYS_landlock_create_ruleset), None, ctypes.c_size_t(0),
                         ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))
    return max(int(ret), 0)


def landlock_layers(abi: int) -> dict[str, str | None]:
    """For each Landlock layer: None when this ABI gives it, else why not."""
    if abi <= 0:
        why = "the kernel has no Landlock (needs Linux >= 5.13 with landlock in the lsm= list)"
        return {"landlock-fs": why, "landlock-net": why, "landlock-scope": why}
    return {
        "landlock-fs": None,
        "landlock-net": None if abi >= 4 else f"Landlock ABI {abi} < 4 cannot restrict TCP",
        "landlock-scope": None if abi >= 6 else f"Landlock ABI {abi} < 6 cannot scope signals",
    }


def read_only_dirs() -> list[str]:
    """Directories the program may read (never write): the interpreter, its libraries, shared libraries,
    time zones, and this package (for the chart reader)."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths = {os.path.join(p, "lib") for p in paths}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        paths.add(sysconfig.get_paths()[key])
    paths.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the tqaforge package
    paths.update(("/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/local/lib", "/usr/share/zoneinfo",
                  "/usr/share/fonts", "/etc/localtime", "/dev/null", "/dev/zero", "/dev/urandom"))
    # sys.path entries under a lib directory (site-packages of a venv, zip files) are covered above;
    # a project root put on sys.path by an editable install is deliberately not readable.
    return sorted(p for p in {os.path.realpath(p) for p in paths} if os.path.exists(p))


# --- per-program layers (in the forked child, in this order) ------------------------------------------


def set_rlimits(cpu_seconds: float, memory_mb: int, file_mb: int, open_files: int, processes: int) -> None:
    """CPU, address space (this process's current size + memory_mb), file size, files, processes, no cores."""
    cpu = max(1, int(-(-cpu_seconds // 1)))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU at the soft limit, SIGKILL a second later
    with open("/proc/self/statm") as fh:
        current = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    address_space = current + memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_mb * 1024 * 1024,) * 2)
    resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))


def drop_privileges(uid: int, gid: int) -> None:
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


def no_new_privs() -> None:
    prctl(_PR_SET_NO_NEW_PRIVS, 1)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _fs_rights(abi: int) -> int:
    rights = _FS_ABI1
    if abi >= 2:
        rights |= _FS_REFER
    if abi >= 3:
        rights |= _FS_TRUNCATE
    if abi >= 5:
        rights |= _FS_IOCTL_DEV
    return rights


def apply_landlock(abi: int, read_dirs: list[str], write_dir: str) -> None:
    """Restrict this process (and all it starts) for good: read ``read_dirs``, read-write ``write_dir``,
    nothing else on the filesystem; no TCP (ABI >= 4); no signals or abstract unix sockets out (ABI >= 6).
    Needs no_new_privs (or CAP_SYS_ADMIN)."""
    handled = _fs_rights(abi)
    attr = _RulesetAttr(handled, (_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0,
                        (_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL) if abi >= 6 else 0)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    sc = libc().syscall
    ruleset = _check(sc(ctypes.c_long(_SYS_landlock_create_ruleset), ctypes.byref(attr), ctypes.c_size_t(size),
                        ctypes.c_uint32(0)), "landlock_create_ruleset")
    try:
        file_only = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | (_FS_TRUNCATE if abi >= 3 else 0)
        for path, access in [(p, _FS_READ_FILE | _FS_READ_DIR) for p in read_dirs] + [(write_dir, handled)]:
            if path == "/dev/null":
                access = _FS_READ_FILE | _FS_WRITE_FILE | (_FS_TRUNCATE if abi >= 3 else 0)
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                if not os.path.isdir(path):
                    access &= file_only
                rule = _PathBeneathAttr(access & handled, fd)
                _check(sc(ctypes.c_long(_SYS_landlock_add_rule), ctypes.c_int(ruleset), ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH),
                          ctypes.byref(rule), ctypes.c_uint32(0)), f"landlock_add_rule({path})")
            finally:
                os.close(fd)
        _check(sc(ctypes.c_long(_SYS_landlock_restrict_self), ctypes.c_int(ruleset), ctypes.c_uint32(0)), "landlock_restrict_self")
    finally:
        os.close(ruleset)


def install_audit_hook(scratch: str, read_dirs: list[str], guard_fs: bool, guard_net: bool, guard_signals: bool) -> None:
    """The last layer, where Landlock is missing: refuse (PermissionError) file access outside
    ``read_dirs``/scratch, sockets, signals to other processes, ctypes and starting other programs.

    Audit hooks see only what goes through the interpreter's audited calls, and cannot be removed."""
    scratch = os.path.realpath(scratch)
    readable = tuple(os.path.realpath(p) for p in read_dirs) + (scratch,)
    realpath, fspath, getpid = os.path.realpath, os.fspath, os.getpid
    always = ("ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle", "ctypes.call_function", "ctypes.cdata",
              "os.system", "os.exec", "os.posix_spawn", "os.spawn", "subprocess.Popen", "pty.spawn")
    net = ("socket.__new__", "socket.bind", "socket.connect", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo")
    write_events = ("os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.symlink", "os.link",
                    "os.truncate", "os.utime", "shutil.rmtree", "os.mkfifo", "os.mknod")

    def under(path: str, roots: tuple[str, ...]) -> bool:
        return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event in always:
            raise PermissionError(f"sandbox: {event} is not allowed")
        if guard_net and event in net:
            raise PermissionError(f"sandbox: {event} is not allowed (no network)")
        if guard_signals and event in ("os.kill", "os.killpg", "signal.pthread_kill"):
            if event == "os.kill" and args and args[0] in (0, getpid()):
                return
            raise PermissionError(f"sandbox: {event} outside the program is not allowed")
        if not guard_fs:
            return
        if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
            path = realpath(fspath(args[0]) if not isinstance(args[0], bytes) else os.fsdecode(args[0]))
            mode = args[1] if len(args) > 1 and isinstance(args[1], str) else "r"
            flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
            writing = any(c in mode for c in "wax+") or bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC))
            if path == "/dev/null" or under(path, (scratch,)) or (not writing and under(path, readable)):
                return
            raise PermissionError(f"sandbox: no access to {path}")
        if event in write_events and args and isinstance(args[0], (str, bytes, os.PathLike)):
            first = args[0]
            path = realpath(os.fsdecode(first) if isinstance(first, bytes) else fspath(first))
            if not under(path, (scratch,)):
                raise PermissionError(f"sandbox: no write access to {path}")

    sys.addaudithook(hook)


def kill_all_of_uid(uid: int, gid: int) -> None:
    """From a forked helper running as ``uid``: kill(-1, SIGKILL), which ends every process of that uid."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            os.kill(-1, 9)
        except BaseException:
            pass
        os._exit(0)
    while True:
        try:
            os.waitpid(pid, 0)
            return
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def is_gone_error(exc: OSError) -> bool:
    return exc.errno in (errno.ESRCH, errno.ECHILD)


# --- making the interpreter reachable for the sandbox uid (root only) ------------------------------

_CLONE_NEWNS = 0x00020000
_MS_NOSUID, _MS_NODEV, _MS_BIND, _MS_REC, _MS_PRIVATE = 2, 4, 4096, 16384, 1 << 18


def unreachable(paths: list[str], uid: int, gid: int) -> list[str]:
    """The paths a process running as ``uid``/``gid`` cannot open (probed in a forked child)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            bad = []
            for p in paths:
                try:
                    if p.endswith("/."):  # only needs to be passed through (a directory of mode 0711)
                        os.stat(p)
                    elif os.path.isdir(p):
                        os.listdir(p)
                    else:
                        os.close(os.open(p, os.O_RDONLY))
                except OSError:
                    bad.append(p)
            os.write(w, "\n".join(bad).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return [p for p in data.decode().split("\n") if p]


def _searchable(path: str, uid: int, gid: int) -> bool:
    st = os.stat(path)
    if st.st_uid == uid:
        return bool(st.st_mode & 0o100)
    if st.st_gid == gid:
        return bool(st.st_mode & 0o010)
    return bool(st.st_mode & 0o001)


def make_reachable(paths: list[str], uid: int, gid: int) -> str | None:
    """Make ``paths`` reachable for ``uid`` (an interpreter under ``/root``, mode 0700, is not); None on success.

    In a private mount namespace of this worker only: each blocking directory (say ``/root``) is
    covered by a tmpfs of mode 0711 holding bind mounts of just the needed entries (``/root/.pyenv``).
    The rest of that directory (``~/.ssh``...) is then not even visible to the worker's programs."""
    bad = [p.removesuffix("/.") for p in unreachable(paths, uid, gid)]
    if not bad:
        return None
    blockers: dict[str, set[str]] = {}
    for p in bad:
        parts = p.strip("/").split("/")
        for i in range(1, len(parts)):
            ancestor = "/" + "/".join(parts[:i])
            if not _searchable(ancestor, uid, gid):
                blockers.setdefault(ancestor, set()).add(parts[i])
                break
    if not blockers or any(b.startswith(a + "/") for a in blockers for b in blockers):
        return f"{', '.join(bad[:3])} cannot be reached by an unprivileged uid"
    lc = libc()
    if lc.unshare(ctypes.c_int(_CLONE_NEWNS)) != 0:
        return f"unshare(CLONE_NEWNS) failed: {os.strerror(ctypes.get_errno())}"
    # From here on every mount is in our own namespace only (and never propagates back).
    if lc.mount(b"none", b"/", None, ctypes.c_ulong(_MS_REC | _MS_PRIVATE), None) != 0:
        return f"making mounts private failed: {os.strerror(ctypes.get_errno())}"
    for blocker, entries in sorted(blockers.items()):
        keep = os.open(blocker, os.O_PATH | os.O_DIRECTORY)
        try:
            if lc.mount(b"tmpfs", blocker.encode(), b"tmpfs", ctypes.c_ulong(_MS_NOSUID | _MS_NODEV), b"mode=0711,size=64k") != 0:
                return f"mounting a tmpfs on {blocker} failed: {os.strerror(ctypes.get_errno())}"
            for entry in sorted(entries):
                source = f"/proc/self/fd/{keep}/{entry}"
                target = os.path.join(blocker, entry)
                if os.path.isdir(source):
                    os.mkdir(target, 0o755)
                else:
                    os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
                if lc.mount(source.encode(), target.encode(), None, ctypes.c_ulong(_MS_BIND | _MS_REC), None) != 0:
                    return f"bind-mounting {target} failed: {os.strerror(ctypes.get_errno())}"
        finally:
            os.close(keep)
    still = unreachable(paths, uid, gid)
    return f"{', '.join(still[:3])} cannot be reached by an unprivileged uid" if still else None

"""The kernel's isolation layers, through ctypes (no dependency): network, mount and pid namespaces,
a memory cgroup, subreaper, rlimits, an unprivileged uid, Landlock, and an audit hook as the last resort.

Layer names (``RunResult.isolation`` / ``RunResult.missing``):

==============  ==============================================================================================
process         the program runs in a child forked for it alone, never in the caller's process: from the
                worker process, or (programs that do not draw) from the worker's zygote, a lean twin
                forked from the worker at start that runs no program; every layer below applies to
                the child alike from either parent (worker-wide layers: the zygote is inside them too)
empty-env       the worker starts with an empty environment; the child clears ``os.environ`` too
scratch-dir     the program's working directory is a fresh directory holding only ``table.csv``
rlimits         CPU, address space, file size, open files, processes, no core dumps
subreaper       the worker is a child subreaper: every descendant stays findable and is killed after the run
netns           the worker lives in its own network namespace (no interface up, loopback down); abstract
                unix sockets are per network namespace, so none of the host's is reachable either
pidns           the worker is the init of its own pid namespace: when it dies (and it dies with its host)
                the kernel kills every program it started; no process of the host is visible
fs-view         the worker's own mount namespace and root: a read-only tmpfs holding only read-only binds of
                the interpreter and libraries, the worker's scratch directories, /dev/null, /dev/zero,
                /dev/urandom and a /proc of its own pid namespace; no /run, /var/run, /tmp, /home or /etc of
                the host, so no pathname socket, device or file of the host can even be named
cgroup          a memory cgroup per worker holds every process of a program: the memory limit is for the
                program as a whole, however many processes it forks
no-fork         (where no memory cgroup can be made) the program may start no process or thread at all
                (RLIMIT_NPROC), so the per-process memory limit is the program's
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
import stat
import sys
import sysconfig
from typing import Any

WANTED: tuple[str, ...] = ("subreaper", "netns", "pidns", "fs-view", "cgroup", "uid", "landlock-fs", "landlock-net",
                           "landlock-scope")

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

# The only device files a program sees (in its own root, and through Landlock).
DEVICES: tuple[str, ...] = ("/dev/null", "/dev/zero", "/dev/urandom")


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
                  "/usr/share/fonts", "/etc/localtime", "/etc/ld.so.cache", *DEVICES))
    # sys.path entries under a lib directory (site-packages of a venv, zip files) are covered above;
    # a project root put on sys.path by an editable install is deliberately not readable.
    return sorted(p for p in {os.path.realpath(p) for p in paths} if os.path.exists(p))


# --- per-program layers (in the forked child, in this order) ------------------------------------------


def read_proc(path: str) -> bytes:
    """The whole of a (small) file such as ``/proc/self/statm``, through os calls: no ``io`` objects,
    whose pages a forked child would otherwise write and copy. OSError as os raises it."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        text = b""
        while chunk := os.read(fd, 1 << 16):
            text += chunk
        return text
    finally:
        os.close(fd)


def set_rlimits(cpu_seconds: float, memory_mb: int, file_mb: int, open_files: int, processes: int) -> None:
    """CPU, address space (this process's current size + memory_mb), file size, files, processes, no cores."""
    cpu = max(1, int(-(-cpu_seconds // 1)))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))  # SIGXCPU at the soft limit, SIGKILL a second later
    current = int(read_proc("/proc/self/statm").split()[0]) * os.sysconf("SC_PAGE_SIZE")
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


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


_LINUX_CAPABILITY_VERSION_3 = 0x20080522  # two 32-bit words of each set
_CAP_HEADER = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)  # pid 0: this process
_CAP_DATA = (_CapData * 2)()  # all zero: no capability (made once: a forked child only passes them)


def drop_capabilities() -> None:
    """Give up every capability. Without root the worker lives in a user namespace of its own, where
    it holds all of them (so that it can mount the program's root); a program keeping them could
    remount that root's read-only binds read-write."""
    _CAP_HEADER.version, _CAP_HEADER.pid = _LINUX_CAPABILITY_VERSION_3, 0  # the kernel may have written them
    ctypes.memset(_CAP_DATA, 0, ctypes.sizeof(_CAP_DATA))
    _check(libc().capset(ctypes.byref(_CAP_HEADER), ctypes.byref(_CAP_DATA)), "capset")


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


class LandlockRules:
    """The read-only part of a program's Landlock ruleset, prepared once per worker (after its root is
    built): an ``O_PATH`` descriptor and the access of each of ``read_dirs``, so that a forked child
    builds its ruleset (:meth:`ruleset`) without a path lookup or a ``stat`` per directory. The
    descriptors are the worker's (and its zygote's): a child closes them, with every descriptor
    above 3, before the program runs."""

    def __init__(self, abi: int, read_dirs: list[str]) -> None:
        self.abi = abi
        self.handled = _fs_rights(abi)
        self.attr = _RulesetAttr(self.handled, (_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0,
                                 (_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL) if abi >= 6 else 0)
        self.size = 8 if abi < 4 else 16 if abi < 6 else 24
        self.fds: list[int] = []
        self.rules: list[tuple[str, _PathBeneathAttr]] = []
        try:
            for path in read_dirs:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                self.fds.append(fd)
                self.rules.append((path, _PathBeneathAttr(self._access(path, _FS_READ_FILE | _FS_READ_DIR, fd), fd)))
        except BaseException:
            self.close()
            raise

    def _access(self, path: str, access: int, fd: int) -> int:
        abi = self.abi
        if path == "/dev/null":
            access = _FS_READ_FILE | _FS_WRITE_FILE | (_FS_TRUNCATE if abi >= 3 else 0)
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            access &= _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | (_FS_TRUNCATE if abi >= 3 else 0)
        return access & self.handled

    def ruleset(self, write_dir: str) -> int:
        """A new ruleset (its descriptor): read the prepared directories, read-write ``write_dir``."""
        sc = libc().syscall
        ruleset = _check(sc(ctypes.c_long(_SYS_landlock_create_ruleset), ctypes.byref(self.attr), ctypes.c_size_t(self.size),
                            ctypes.c_uint32(0)), "landlock_create_ruleset")
        try:
            for path, rule in self.rules:
                _check(sc(ctypes.c_long(_SYS_landlock_add_rule), ctypes.c_int(ruleset), ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH),
                          ctypes.byref(rule), ctypes.c_uint32(0)), f"landlock_add_rule({path})")
            fd = os.open(write_dir, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = _PathBeneathAttr(self._access(write_dir, self.handled, fd), fd)
                _check(sc(ctypes.c_long(_SYS_landlock_add_rule), ctypes.c_int(ruleset), ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH),
                          ctypes.byref(rule), ctypes.c_uint32(0)), f"landlock_add_rule({write_dir})")
            finally:
                os.close(fd)
        except BaseException:
            os.close(ruleset)
            raise
        return ruleset

    @staticmethod
    def restrict(ruleset: int) -> None:
        """Restrict this process (and all it starts) to ``ruleset`` for good, and close it. Needs
        no_new_privs (or CAP_SYS_ADMIN)."""
        try:
            _check(libc().syscall(ctypes.c_long(_SYS_landlock_restrict_self), ctypes.c_int(ruleset), ctypes.c_uint32(0)),
                   "landlock_restrict_self")
        finally:
            os.close(ruleset)

    def close(self) -> None:
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds, self.rules = [], []


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


# --- the pid namespace and the program's own view of the file system (once, at worker start) ---------

_CLONE_NEWPID = 0x20000000
_MS_RDONLY, _MS_NOEXEC, _MS_REMOUNT = 1, 8, 32
_MNT_DETACH = 2
_ST_NOSUID, _ST_NODEV, _ST_NOEXEC = 2, 4, 8
# glibc has no pivot_root(); its system call number by machine (the generic table's 41 elsewhere).
_SYS_PIVOT_ROOT = {"x86_64": 155, "i386": 217, "i686": 217, "aarch64": 41, "riscv64": 41, "loongarch64": 41,
                   "ppc64le": 203, "ppc64": 203, "s390x": 217, "armv7l": 218}


def unshare_mounts() -> str | None:
    """A private mount namespace for this process (its mounts never reach the host); None on success."""
    lc = libc()
    if lc.unshare(ctypes.c_int(_CLONE_NEWNS)) != 0:
        return f"unshare(CLONE_NEWNS) failed: {os.strerror(ctypes.get_errno())}"
    if lc.mount(b"none", b"/", None, ctypes.c_ulong(_MS_REC | _MS_PRIVATE), None) != 0:
        return f"making mounts private failed: {os.strerror(ctypes.get_errno())}"
    return None


def become_pid_namespace_init() -> str | None:
    """Continue as pid 1 of a new pid namespace; None on success, else why not (nothing changed then).

    ``unshare(CLONE_NEWPID)`` puts only the next child into the namespace, so this forks: the child
    returns (it is the namespace's init and goes on as the worker) and the parent never returns: it
    waits for the child and exits with its status. Both die with their parent (``PR_SET_PDEATHSIG``),
    and when the init dies the kernel kills every process of the namespace: no program outlives a
    killed host, whatever it did (``setsid``, double forks, a new uid).
    """
    if libc().unshare(ctypes.c_int(_CLONE_NEWPID)) != 0:
        return f"unshare(CLONE_NEWPID) failed: {os.strerror(ctypes.get_errno())}"
    try:
        pid = os.fork()
    except OSError as exc:
        return f"fork into the new pid namespace failed: {exc.strerror}"
    if pid == 0:
        die_with_parent()
        return None
    status = 0
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
        except ChildProcessError:
            break
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF if not os.WIFSIGNALED(status) else 128 + os.WTERMSIG(status))


def _mount(source: bytes | None, target: str, fstype: bytes | None, flags: int, data: bytes | None) -> None:
    if libc().mount(source, target.encode(), fstype, ctypes.c_ulong(flags), data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def _kept_flags(path: str) -> int:
    """The nosuid/nodev/noexec flags of the mount holding ``path``: a remount may add flags but, in a
    user namespace, never drop one the host set (the kernel refuses)."""
    f = os.statvfs(path).f_flag
    return (_MS_NOSUID if f & _ST_NOSUID else 0) | (_MS_NODEV if f & _ST_NODEV else 0) | (_MS_NOEXEC if f & _ST_NOEXEC else 0)


def _mountpoint(root: str, path: str, directory: bool) -> str:
    target = root + path
    parent = os.path.dirname(target)
    os.makedirs(parent, 0o755, exist_ok=True)
    if directory:
        os.makedirs(target, 0o755, exist_ok=True)
    elif not os.path.exists(target):
        os.close(os.open(target, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))
    return target


def _bind(source: str, target: str, extra: int) -> None:
    try:
        _mount(source.encode(), target, None, _MS_BIND, None)
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
        # In a user namespace a bind that would uncover what the host's submounts hide is refused.
        _mount(source.encode(), target, None, _MS_BIND | _MS_REC, None)
    _mount(None, target, None, _MS_REMOUNT | _MS_BIND | _kept_flags(source) | extra, None)


def _outermost(paths: list[str]) -> list[str]:
    """``paths`` without those inside another one (a bind of the parent already shows them)."""
    kept: list[str] = []
    for p in sorted(set(paths)):
        if not any(p.startswith(k.rstrip("/") + "/") for k in kept if os.path.isdir(k)):
            kept.append(p)
    return kept


def enter_fs_view(read_only: list[str], writable: list[str], workdir: str) -> str | None:
    """Make this process's root a minimal one; None on success, else why not.

    Needs :func:`unshare_mounts` and :func:`become_pid_namespace_init` first (the /proc mounted here
    is the new pid namespace's). The new root is a tmpfs (mounted on ``workdir/.root``, made
    read-only at the end) holding read-only binds of ``read_only``, read-write binds of
    ``writable`` (nosuid, nodev, noexec), the device files of :data:`DEVICES`, the host's
    ``/lib``-style symlinks, and ``/proc`` with ``subset=pid,hidepid=invisible`` (processes only,
    each user sees their own). After ``pivot_root`` the host's tree is detached: nothing else of the
    host, no ``/run``, ``/var/run``, ``/tmp``, ``/home``, ``/etc`` or ``/sys``, can be named.
    """
    number = _SYS_PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        return f"no pivot_root system call number known for {os.uname().machine}"
    root = os.path.join(workdir, ".root")
    try:
        os.mkdir(root, 0o700)
        _mount(b"tmpfs", root, b"tmpfs", _MS_NOSUID | _MS_NODEV, b"mode=0755,size=1m,nr_inodes=4096")
        for path in _outermost(read_only):
            is_dir = os.path.isdir(path)
            if path in DEVICES:
                continue
            _bind(path, _mountpoint(root, path, is_dir), _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
        for path in DEVICES:
            if os.path.exists(path):
                # A device bind keeps working only without nodev; writing /dev/null must work.
                _mount(path.encode(), _mountpoint(root, path, False), None, _MS_BIND, None)
        for path in writable:
            _bind(path, _mountpoint(root, path, True), _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
        for link in ("/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin"):
            if os.path.islink(link) and not os.path.lexists(root + link):
                os.symlink(os.readlink(link), root + link)
        # /proc before the pivot: in a user namespace the kernel mounts a new procfs only while a
        # full one is still in view. It is the new pid namespace's (this process is its init).
        os.mkdir(os.path.join(root, "proc"), 0o555)
        proc_flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
        for options in (b"subset=pid,hidepid=invisible", b"hidepid=2", None):
            try:
                _mount(b"proc", os.path.join(root, "proc"), b"proc", proc_flags, options)
                break
            except OSError:
                if options is None:
                    raise
        os.mkdir(os.path.join(root, ".old"), 0o700)
        os.chdir(root)
        if libc().syscall(ctypes.c_long(number), b".", b".old") != 0:
            return f"pivot_root failed: {os.strerror(ctypes.get_errno())}"
    except OSError as exc:
        return f"building the program's root failed: {exc.strerror or exc}"
    # Past the pivot there is no way back to the host's root: a failure now stops the worker (the
    # host reports that it could not start) rather than run programs in a half-built view.
    os.chdir("/")
    _check(libc().umount2(b"/.old", ctypes.c_int(_MNT_DETACH)), "detaching the host's root")
    os.rmdir("/.old")
    _mount(None, "/", None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV, None)
    return None


# --- the memory cgroup (once per worker; every program's processes join it) -----------------------------


class MemoryCgroup:
    """A memory cgroup (v2 when this process's cgroup can hold one, else v1's memory controller).

    The worker makes one at start, while ``/sys`` is still in view, keeps descriptors on its files,
    and moves itself in once it is warm (:meth:`enter`): its warm pages stay charged where they
    were, every program it forks is born inside (moving each program in costs a cgroup migration,
    about 1 ms of CPU, a tenth of a program), and before each program the limit is set to what the
    cgroup holds plus the program's allowance, so the limit counts every process the program starts,
    together. The OOM killer picks a program's process, never the worker, first: each program sets its
    own ``oom_score_adj`` to 1000 (raising it needs no privilege; lowering the worker's would need
    CAP_SYS_RESOURCE, which root does not always have). The host removes the directory (:attr:`path`) when the worker is
    gone; a stale one is swept at the next start.
    """

    def __init__(self, path: str, version: int) -> None:
        self.path = path
        self.version = version
        self.limit: int | None = None
        flags = os.O_WRONLY | os.O_CLOEXEC
        self.procs_fd = os.open(os.path.join(path, "cgroup.procs"), flags)
        if version == 2:
            self._limits = [os.open(os.path.join(path, "memory.max"), flags)]
            self._swap = _open_optional(os.path.join(path, "memory.swap.max"), flags)
            self._events = os.open(os.path.join(path, "memory.events"), os.O_RDONLY | os.O_CLOEXEC)
            self._usage = os.open(os.path.join(path, "memory.current"), os.O_RDONLY | os.O_CLOEXEC)
        else:
            self._limits = [os.open(os.path.join(path, "memory.limit_in_bytes"), flags)]
            memsw = _open_optional(os.path.join(path, "memory.memsw.limit_in_bytes"), flags)
            if memsw is not None:
                self._limits.append(memsw)
            self._swap = None
            self._events = os.open(os.path.join(path, "memory.oom_control"), os.O_RDONLY | os.O_CLOEXEC)
            self._usage = os.open(os.path.join(path, "memory.usage_in_bytes"), os.O_RDONLY | os.O_CLOEXEC)
        if self._swap is not None:
            os.write(self._swap, b"0")

    @classmethod
    def create(cls, name: str) -> MemoryCgroup | str:
        """A new cgroup named ``name`` beside nothing else of ours; or why none can be made here."""
        reasons = []
        for version, find in ((2, _cgroup2_parent), (1, _cgroup1_parent)):
            parent = find()
            if isinstance(parent, str) and not os.path.isdir(parent):
                reasons.append(parent)
                continue
            assert isinstance(parent, str)
            path = os.path.join(parent, name)
            try:
                os.mkdir(path, 0o700)
            except OSError as exc:
                reasons.append(f"cgroup v{version}: cannot make {path}: {exc.strerror}")
                continue
            try:
                return cls(path, version)
            except OSError as exc:
                try:
                    os.rmdir(path)
                except OSError:
                    pass
                reasons.append(f"cgroup v{version}: {path}: {exc.strerror}")
        return "no memory cgroup can be made here (" + "; ".join(reasons) + ")"

    def enter(self) -> None:
        """Move this process (the warm worker) into the cgroup."""
        os.write(self.procs_fd, b"0")

    def usage(self) -> int:
        """Bytes the cgroup is charged for now."""
        return int(os.pread(self._usage, 64, 0))

    def allow(self, memory_mb: int) -> None:
        """Let the next program use ``memory_mb`` MB beyond what the cgroup holds now (before its fork)."""
        self.set_limit(self.usage() + memory_mb * 1024 * 1024)

    def set_limit(self, limit: int) -> None:
        """The memory every process in the cgroup may use together, in bytes."""
        if limit == self.limit:
            return
        value = str(limit).encode()
        # v1's memsw limit may never be below the memory limit: raise it first, lower it last.
        order = self._limits if self.limit is None or limit < self.limit else self._limits[::-1]
        for fd in order:
            try:
                os.write(fd, value)
            except OSError:
                for again in self._limits:
                    os.write(again, value)
        self.limit = limit

    def oom_kills(self) -> int:
        """How many processes of the cgroup the kernel's OOM killer has ended so far."""
        text = os.pread(self._events, 4096, 0).decode()
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def close(self) -> None:
        for fd in [self.procs_fd, self._events, self._usage, *self._limits] + ([self._swap] if self._swap is not None else []):
            try:
                os.close(fd)
            except OSError:
                pass


def _open_optional(path: str, flags: int) -> int | None:
    try:
        return os.open(path, flags)
    except FileNotFoundError:
        return None


def _mounts(fstype: str) -> list[tuple[str, str]]:
    """(mount point, super options) of every mount of ``fstype``, from /proc/self/mountinfo."""
    found = []
    try:
        with open("/proc/self/mountinfo") as fh:
            for line in fh:
                left, _, right = line.partition(" - ")
                fields, rest = left.split(), right.split()
                if len(fields) >= 5 and len(rest) >= 3 and rest[0] == fstype:
                    found.append((fields[4].replace("\\040", " "), rest[2]))
    except OSError:
        pass
    return found


def _own_cgroup(controller: str | None) -> str | None:
    try:
        with open("/proc/self/cgroup") as fh:
            for line in fh:
                _, names, path = line.rstrip("\n").split(":", 2)
                if (controller is None and names == "") or (controller is not None and controller in names.split(",")):
                    return path
    except (OSError, ValueError):
        pass
    return None


def _cgroup2_parent() -> str:
    """This process's v2 cgroup when it can be a parent of a memory cgroup (or why not)."""
    own = _own_cgroup(None)
    mounts = _mounts("cgroup2")
    if own is None or not mounts:
        return "cgroup v2: not mounted"
    parent = mounts[0][0] + own.rstrip("/")
    try:
        with open(os.path.join(parent, "cgroup.subtree_control")) as fh:
            enabled = fh.read().split()
        if "memory" not in enabled:
            # Enabling it would change the host's own cgroup (and is refused where it holds processes).
            return f"cgroup v2: the memory controller is not enabled for children of {parent}"
    except OSError as exc:
        return f"cgroup v2: memory controller not available to children of {parent}: {exc.strerror}"
    return parent


def _cgroup1_parent() -> str:
    own = _own_cgroup("memory")
    mounts = [point for point, options in _mounts("cgroup") if "memory" in options.split(",")]
    if own is None or not mounts:
        return "cgroup v1: no memory controller mounted"
    return mounts[0] + own.rstrip("/")


def cgroup_parents() -> list[str]:
    """Directories under which a worker's memory cgroup may sit (for the host's sweep)."""
    return [p for p in (_cgroup2_parent(), _cgroup1_parent()) if os.path.isdir(p)]


def oom_kill_first() -> None:
    """Make this process (a program's child) the OOM killer's first choice in the worker's cgroup,
    before the worker itself (before the privilege drop: the file is root's afterwards)."""
    fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY | os.O_CLOEXEC)  # not open(): no io objects in the child
    try:
        os.write(fd, b"1000")
    finally:
        os.close(fd)

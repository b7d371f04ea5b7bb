"""Which allocator Arrow uses in tqaforge's own processes (the CLI and the app).

Arrow allocates from mimalloc by default. A release build (:mod:`tqaforge.release.stream`)
writes its Parquet files batch by batch; with mimalloc the process kept about 30 MB of freed
batches and encoder buffers mapped after each subset, whatever it was asked to release (passing
the C library's pool to each call did not help: the Parquet writer allocates from Arrow's default
too), so TableBench's release peaked at 256 MB where the C library's allocator gives 231 MB
(``benchmarks/release.py``; issue 26's bound is 250 MB). Arrow reads its choice once, when it is
loaded, from ``ARROW_DEFAULT_MEMORY_POOL``: :func:`prefer_system_allocator` sets it before
anything imports pyarrow, and leaves a value the user set alone. Only our entry points call it:
importing ``tqaforge.cli`` (the command's module) sets the variable in that process, importing
the rest of tqaforge as a library changes nothing.
"""

from __future__ import annotations

import os

#: Arrow's documented variable for its default memory pool.
ARROW_POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"
#: The pools Arrow knows by that variable (it compares the text exactly: no spaces, lower case).
ARROW_POOLS = ("system", "mimalloc", "jemalloc")


def prefer_system_allocator(env: dict[str, str] | None = None) -> str | None:
    """Ask for Arrow's "system" pool in ``env`` (default: this process's environment) unless a
    pool is chosen there already. Takes effect in a process that has not imported pyarrow yet
    (Arrow reads the variable once), or in a child given ``env``.

    A value Arrow does not know ("System", "bogus") would make Arrow print a warning of its own
    when it loads and fall back to mimalloc, and an empty one fall back silently: either is
    replaced by "system", and for the first the message to show the user is returned (None
    otherwise)."""
    target: dict[str, str] | os._Environ[str] = os.environ if env is None else env
    chosen = target.get(ARROW_POOL_ENV, "")
    if chosen in ARROW_POOLS:
        return None
    target[ARROW_POOL_ENV] = "system"
    if not chosen.strip():
        return None
    return (f"warning: {ARROW_POOL_ENV}={chosen!r} is not one of Arrow's memory pools ({', '.join(ARROW_POOLS)}); "
            f"using 'system'")

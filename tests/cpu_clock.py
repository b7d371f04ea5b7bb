"""The clock of the suite's complexity guards (a hostile input must be handled in about linear time).

They read this process's CPU time, not the wall clock. On the 2-core CI machine, loaded by the other
worker, Label Studio and Chromium, a read that takes 1.2 s alone took 6.1 s of wall time, and its
guard (5 s, set with a wide margin over the quiet time) failed (2026-11-27, the slowest host seen).
A process's CPU time moves little with the load, while the regressions the guards catch (quadratic
scans, backtracking) cost tens of seconds to minutes of it. Guards on a wait (a timeout, a retry's
back-off, a silent server) stay on the wall clock: there the waiting is what is measured.
"""

from __future__ import annotations

import time


def cpu_now() -> float:
    """Seconds of CPU this process has used (every thread, user and system): take the difference
    of two readings around the work under test, which runs in this process."""
    return time.process_time()

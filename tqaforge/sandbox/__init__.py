"""Run model-written code (PoT answers, chart code) isolated, and read charts back.

    from tqaforge.sandbox import Limits, Outcome, Sandbox

    with Sandbox(workers=2) as box:
        result = box.run(code, table_csv, limits=Limits(wall_seconds=5))
        print(result.outcome, result.stdout)

The program runs as a script (``__name__ == "__main__"``) in a fresh scratch directory holding the
table as ``table.csv``, in a forked child of a warm worker process, with resource limits, an empty
environment, no network, no writes outside its directory; every process it starts is gone when
:meth:`Sandbox.run` returns. What the program does is an :class:`Outcome`, never an exception.
Layers and what degrades where: :mod:`tqaforge.sandbox.isolation`.
"""

from __future__ import annotations

from tqaforge.errors import SandboxError
from tqaforge.sandbox.charts import ChartReading
from tqaforge.sandbox.pool import Sandbox
from tqaforge.sandbox.results import Limits, Outcome, RunResult

__all__ = ["ChartReading", "Limits", "Outcome", "RunResult", "Sandbox", "SandboxError"]

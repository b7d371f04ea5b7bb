"""tqaforge's side of ``benchmarks/variants.py``, as a child process serving timed passes for
the code in a given folder: today's tree, or an older commit extracted with ``git archive``
(``--before``), so that before and after run alike and alternate with unitxt's passes.

    python benchmarks/_tqaforge_grid.py CODE_DIR TableBench.jsonl

It reads one command a line on stdin (``grid``: one timed pass over the whole grid;
``breakdown``: each perturbation and serialization timed on its own; ``floor``: what a seeded
perturbation cannot do without; ``describe``) and answers
each with a line ``RESULT <json>``.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from pathlib import Path


def main() -> int:
    code = Path(sys.argv[1]).resolve()
    sys.path.insert(0, str(code))  # before anything imports tqaforge: the code under test
    sys.path.insert(1, str(Path(__file__).resolve().parent))
    tqaforge = importlib.import_module("tqaforge")
    variants = importlib.import_module("variants")  # the timing functions; tqaforge comes from `code`
    assert Path(tqaforge.__file__).resolve().is_relative_to(code), tqaforge.__file__
    items = variants.load_items(Path(sys.argv[2]))
    variants.run_ours(items[: variants.WARMUP_ITEMS])
    for line in sys.stdin:
        command = line.strip()
        if command == "grid":
            cpu = time.process_time()
            seconds, strings, chars, skipped = variants.run_ours(items)
            answer: object = {"seconds": seconds, "cpu": time.process_time() - cpu, "strings": strings,
                              "chars": chars, "skipped": skipped}
        elif command == "breakdown":
            answer = variants.breakdown_ours(items)
        elif command == "floor":
            answer = variants.floor_ours(items)
        elif command == "describe":
            answer = {"code": str(code), "items": len(items)}
        else:
            answer = {"error": f"unknown command {command!r}"}
        print("RESULT " + json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

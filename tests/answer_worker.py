"""One answering worker process for the multi-worker tests and benchmark.

    python tests/answer_worker.py WORKSPACE --budget NAME --max-cost X --lease 3 --timeout 5 [--workers N]

The workspace's store comes from TQAFORGE_DATABASE_URL (PostgreSQL in the tests); the endpoint
from OPENAI_BASE_URL. Answers every accepted question with DP (one call a question) and prints
the summary as JSON on its last line.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tqaforge.answers.annotate import AnswerOptions, generate_answers
from tqaforge.llm import LLMSettings, Price
from tqaforge.llm.step import RunnerOptions
from tqaforge.schemas.enums import AnswerMethod
from tqaforge.store import open_workspace


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("workspace", type=Path)
    parser.add_argument("--url", required=True)
    parser.add_argument("--budget")
    parser.add_argument("--max-cost", type=float)
    parser.add_argument("--lease", type=float, default=60.0)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--chunk", type=int, default=32)
    args = parser.parse_args()
    ws = open_workspace(args.workspace)
    llm = LLMSettings(model="worker-model", base_url=args.url, api_key="k", concurrency=args.concurrency,
                      timeout_s=args.timeout, max_cost=args.max_cost, backoff_s=0.05, backoff_max_s=0.2,
                      prices={"worker-model": Price(10.0, 10.0)})
    options = AnswerOptions(methods=(AnswerMethod.DP,), max_tokens=64)
    runner = RunnerOptions(workers=args.workers, window=args.concurrency, budget=args.budget, lease_s=args.lease,
                           chunk=args.chunk)
    summary = generate_answers(ws, options, llm, runner=runner)
    print(json.dumps(summary.as_dict(), default=str))


if __name__ == "__main__":
    main()

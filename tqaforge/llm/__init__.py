"""The one gateway to any OpenAI-compatible endpoint. Every stage that calls a model goes through it.

- :mod:`~tqaforge.llm.settings`: :class:`LLMSettings`, :class:`Price`, :func:`load_llm_settings`
- :mod:`~tqaforge.llm.calls`: a call's identity (:func:`request_id`, :func:`request_params`) and
  its answer (:class:`Completion`)
- :mod:`~tqaforge.llm.limits`: token buckets (requests and tokens per minute), retry waits
- :mod:`~tqaforge.llm.budget`: the hard budget (spent, reserved, refusal before sending)
- :mod:`~tqaforge.llm.ledger`: the LLMCall rows: cache, cost ledger and provenance
- :mod:`~tqaforge.llm.replies`: reply size caps, usage checks, JSON replies and their repair
- :mod:`~tqaforge.llm.gateway`: :class:`Gateway`, which ties them together, and :func:`run`
- :mod:`~tqaforge.llm.runner`: :func:`run_ordered`, the ordered, resumable, budgeted runner of
  many jobs, with its :class:`StopReason` and :class:`RunProgress`
- :mod:`~tqaforge.llm.batches`: requests put aside, sent through a provider's Batch API or written
  for local inference, and collected into the ledger (:mod:`~tqaforge.llm.batchfiles`: their JSONL)
"""

from tqaforge.llm.calls import Completion, request_id, request_params
from tqaforge.llm.gateway import Gateway, run
from tqaforge.llm.replies import parse_json_reply
from tqaforge.llm.runner import Job, RunOutcome, RunProgress, StopReason, run_ordered
from tqaforge.llm.settings import LLMSettings, Price, load_llm_settings

__all__ = [
    "Completion",
    "Gateway",
    "Job",
    "LLMSettings",
    "Price",
    "RunOutcome",
    "RunProgress",
    "StopReason",
    "load_llm_settings",
    "parse_json_reply",
    "request_id",
    "request_params",
    "run",
    "run_ordered",
]

"""The one gateway to any OpenAI-compatible endpoint: settings, limits, ledger/cache, reply
validation and repair (``tqaforge.llm.gateway``). Every stage that calls a model goes through it."""

from tqaforge.llm.gateway import (
    Completion,
    Gateway,
    LLMSettings,
    Price,
    load_llm_settings,
    parse_json_reply,
    request_id,
    request_params,
    run,
)

__all__ = [
    "Completion",
    "Gateway",
    "LLMSettings",
    "Price",
    "load_llm_settings",
    "parse_json_reply",
    "request_id",
    "request_params",
    "run",
]

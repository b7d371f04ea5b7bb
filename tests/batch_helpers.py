"""What the batch tests share: settings for a loopback server, requests, and the rows they made."""

from __future__ import annotations

import json
from pathlib import Path

from sqlmodel import select

from tqaforge.llm.batches import batch_request
from tqaforge.llm.calls import BatchRequest
from tqaforge.llm.settings import LLMSettings, Price
from tqaforge.schemas.records import LLMCall
from tqaforge.store import Workspace

KEY = "sk-batchtest-0123456789abcdef"
PRICE = Price(input=2.0, output=8.0)  # USD per million tokens: large enough for visible costs


def settings_for(url: str, **kw: object) -> LLMSettings:
    values: dict = dict(model="m", base_url=url, api_key=KEY, prices={"m": PRICE}, max_retries=2, backoff_s=0.01,
                        backoff_max_s=0.05, timeout_s=10.0)
    values.update(kw)
    return LLMSettings(**values)


def messages(i: int, tag: str = "") -> list[dict[str, str]]:
    return [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": f"question {tag}{i}"}]


def make_requests(settings: LLMSettings, n: int, tag: str = "", **kw: object) -> list[BatchRequest]:
    return [batch_request(settings, messages(i, tag), purpose="demo", max_tokens=64, **kw) for i in range(n)]  # type: ignore[arg-type]


def rows(ws: Workspace) -> dict[str, LLMCall]:
    with ws.session() as s:
        return {r.id: r for r in s.exec(select(LLMCall)).all()}


def vllm_output(input_path: Path, output_path: Path, *, extra: list[str] = ()) -> None:  # type: ignore[assignment]
    """What ``vllm run-batch -i INPUT -o OUTPUT`` writes for an echo model: one line per request."""
    with input_path.open() as src, output_path.open("w") as dst:
        for n, raw in enumerate(src):
            line = json.loads(raw)
            body = line["body"]
            text = "echo: " + body["messages"][-1]["content"]
            reply = {"id": f"cmpl-{n}", "object": "chat.completion", "created": 0, "model": body["model"],
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                     "usage": {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16}}
            dst.write(json.dumps({"id": f"vllm-{n}", "custom_id": line["custom_id"],
                                  "response": {"status_code": 200, "request_id": f"vllm-batch-{n}", "body": reply},
                                  "error": None}) + "\n")
        for text in extra:
            dst.write(text + "\n")

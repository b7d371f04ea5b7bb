"""Prices: genai-prices' bundled data checked against the providers' published prices,
``[llm.prices]`` as the override, the batch discount, a local model with no price, the refusal
of a budget for it, no network at any point, and the price stored on every call record.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import genai_prices
import pytest
from openai_server import OpenAIServer, Scripted
from sqlmodel import select

from tqaforge.errors import ConfigError, LLMError
from tqaforge.llm import Gateway, LLMSettings, Price, load_llm_settings, run
from tqaforge.llm.budget import Budget
from tqaforge.llm.prices import OFFLINE_SOURCE, PriceQuote, _library_quote, quote, require_price
from tqaforge.schemas.records import LLMCall
from tqaforge.store import Workspace, open_workspace

REPO = Path(__file__).resolve().parents[1]
LIB = f"genai-prices {genai_prices.__version__}"
LOCAL = "http://127.0.0.1:8000/v1"  # a vLLM server: no provider of genai-prices lives here

# OpenAI's published prices (openai.com/api/pricing), USD per million tokens: (input, output),
# and the Batch API's, half of them.
PUBLISHED = {
    "gpt-4o-mini": ((0.15, 0.60), (0.075, 0.30)),
    "gpt-4o": ((2.50, 10.00), (1.25, 5.00)),
    "gpt-4.1": ((2.00, 8.00), (1.00, 4.00)),
}


def approx(price: Price | None) -> tuple[float, float]:
    assert price is not None
    return pytest.approx(price.input), pytest.approx(price.output)  # type: ignore[return-value]


@pytest.mark.parametrize("model", list(PUBLISHED))
@pytest.mark.parametrize("base_url", [None, "https://api.openai.com/v1"], ids=["unset", "openai-url"])
def test_openai_models_are_quoted_their_published_prices(model: str, base_url: str | None) -> None:
    online, batch = PUBLISHED[model]
    st = LLMSettings(model=model, base_url=base_url)
    q = quote(st)
    assert (q.price.input, q.price.output) == pytest.approx(online)  # type: ignore[union-attr]
    assert q.source == f"{LIB}: openai {model}"
    b = quote(st, transport="batch")
    assert (b.price.input, b.price.output) == pytest.approx(batch)  # type: ignore[union-attr]
    assert b.source == f"{LIB}: openai {model} (batch)"
    assert (st.price, st.price_source) == (q.price, q.source)  # what the gateway charges


def test_a_provider_known_by_its_url_is_quoted_its_price() -> None:
    # Anthropic's published price of Claude 3.5 Sonnet: $3 in, $15 out per million tokens.
    q = quote(LLMSettings(model="claude-3-5-sonnet-latest", base_url="https://api.anthropic.com/v1"))
    assert q.price == Price(3.0, 15.0) and q.source == f"{LIB}: anthropic claude-3-5-sonnet"


def test_a_batch_price_the_library_does_not_list_is_said_to_be_the_standard_one() -> None:
    st = LLMSettings(model="claude-3-5-sonnet-latest", base_url="https://api.anthropic.com/v1")
    b = quote(st, transport="batch")
    direct = genai_prices.calc_price(genai_prices.Usage(input_tokens=10**6, output_tokens=10**6), "claude-3-5-sonnet-latest",
                                     provider_api_url="https://api.anthropic.com/v1", price_context={"processing": "batch"})
    assert b.price == Price(float(direct.input_price), float(direct.output_price))  # what the library says
    listed = any(v.when.get("processing") == "batch" for v in direct.model.price_variants or ())
    assert b.source.endswith("(batch)" if listed else "(batch: no batch rate listed, the standard price)")


def test_a_local_model_has_no_price() -> None:
    for base_url in (LOCAL, None):
        q = quote(LLMSettings(model="Qwen/Qwen2.5-7B", base_url=base_url))
        assert q == PriceQuote(None, "unknown")
    assert quote(LLMSettings(model="some-local-model", base_url=LOCAL), transport="batch") == PriceQuote(None, "unknown")
    assert LLMSettings(model="some-local-model", base_url=LOCAL).price is None


def test_a_known_name_on_a_local_server_is_matched_by_name() -> None:
    """A vLLM URL is no provider the library knows: the model's name picks the provider."""
    q = quote(LLMSettings(model="gpt-4o-mini", base_url=LOCAL))
    assert approx(q.price) == (0.15, 0.60) and q.source == f"{LIB}: openai gpt-4o-mini"


def test_the_endpoint_from_the_environment_is_the_one_quoted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without base_url the openai client calls OPENAI_BASE_URL: Anthropic's URL there makes a
    Claude model Anthropic's (OpenAI lists no Claude), as the gateway's endpoint would be."""
    st = LLMSettings(model="claude-3-5-sonnet-latest")
    monkeypatch.setenv("OPENAI_BASE_URL", "https://api.anthropic.com/v1")
    assert quote(st).source == f"{LIB}: anthropic claude-3-5-sonnet"
    monkeypatch.delenv("OPENAI_BASE_URL")
    assert quote(st) == PriceQuote(None, "unknown")  # OpenAI's price list has no Claude


def test_the_override_wins_and_batch_applies_the_discount() -> None:
    prices = {"gpt-4o-mini": Price(1.0, 2.0), "m": Price(4.0, 8.0, batch_input=1.0, batch_output=3.0),
              "half": Price(4.0, 8.0, batch_input=1.0)}
    st = LLMSettings(model="gpt-4o-mini", prices=prices)
    assert quote(st) == PriceQuote(Price(1.0, 2.0), "[llm.prices]")
    assert quote(st, transport="batch") == PriceQuote(Price(0.5, 1.0), "[llm.prices] x batch discount 0.5")
    st = LLMSettings(model="gpt-4o-mini", prices=prices, batch_discount=0.25)
    assert quote(st, transport="batch") == PriceQuote(Price(0.25, 0.5), "[llm.prices] x batch discount 0.25")
    assert quote(LLMSettings(model="m", prices=prices), transport="batch") == PriceQuote(
        Price(1.0, 3.0), "[llm.prices] batch_input, batch_output")
    q = quote(LLMSettings(model="half", prices=prices), transport="batch")
    assert q.price == Price(1.0, 4.0) and q.source.startswith("[llm.prices] x batch discount 0.5")
    # The online price is the online one, whatever batch rates the entry gives.
    assert quote(LLMSettings(model="m", prices=prices)).price == Price(4.0, 8.0)


def test_offline_batch_files_cost_nothing() -> None:
    for model in ("gpt-4o-mini", "Qwen/Qwen2.5-7B"):
        assert quote(LLMSettings(model=model), transport="offline") == PriceQuote(Price(0.0, 0.0), OFFLINE_SOURCE)
    with pytest.raises(ValueError, match="transport"):
        quote(LLMSettings(model="m"), transport="carrier-pigeon")


def test_quotes_are_cached_and_never_stale() -> None:
    _library_quote.cache_clear()
    st = LLMSettings(model="gpt-4.1")
    first = quote(st)
    for _ in range(3):
        assert quote(st) == first and st.price == first.price
    assert _library_quote.cache_info().misses == 1 and _library_quote.cache_info().hits >= 5
    # The key holds all the answer depends on: another transport, URL or an override is not the cached quote.
    assert quote(st, transport="batch").price != first.price
    assert quote(LLMSettings(model="gpt-4.1", base_url=LOCAL + "x")).price == first.price
    assert quote(LLMSettings(model="gpt-4.1", prices={"gpt-4.1": Price(9.0, 9.0)})).price == Price(9.0, 9.0)


def test_batch_discount_and_batch_rates_are_settings(sqlite_workspace: Workspace) -> None:
    for bad in (0.0, -0.5, 1.5, float("nan"), float("inf")):
        with pytest.raises(ConfigError, match="batch_discount"):
            LLMSettings(model="m", batch_discount=bad)
    assert LLMSettings(model="m", batch_discount=1.0).batch_discount == 1.0
    with pytest.raises(ConfigError, match="batch_output"):
        Price(1.0, 1.0, batch_output=float("nan"))
    assert Price(1.0, 2.0) == Price(input=1.0, output=2.0, batch_input=None, batch_output=None)
    path = sqlite_workspace.paths.config
    path.write_text(path.read_text().replace("[llm]\n", '[llm]\nmodel = "cfg"\nbatch_discount = 0.4\n'
                                             '[llm.prices.cfg]\ninput = 1\noutput = 2\nbatch_output = 0.5\n', 1))
    ws = open_workspace(sqlite_workspace.root, upgrade=False)
    try:
        st = load_llm_settings(ws)
    finally:
        ws.close()
    assert st.batch_discount == 0.4 and st.prices["cfg"] == Price(1.0, 2.0, batch_output=0.5)
    batch = quote(st, transport="batch").price
    assert batch is not None and (batch.input, batch.output) == (pytest.approx(0.4), 0.5)


# -- the refusal --------------------------------------------------------------------------------

def test_require_price_refuses_a_budget_for_an_unpriced_model() -> None:
    unpriced = LLMSettings(model="some-local-model", base_url=LOCAL, max_cost=1.0)
    with pytest.raises(ConfigError) as raised:
        require_price(unpriced)
    assert "'some-local-model' has no known price" in str(raised.value) and "refused before any call" in str(raised.value)
    assert '[llm.prices."some-local-model"]' in raised.value.hint and "--max-cost" in raised.value.hint
    # No budget: nothing to refuse. A price from the override (0 for a free local model) or the library: none either.
    require_price(LLMSettings(model="some-local-model", base_url=LOCAL))
    require_price(LLMSettings(model="some-local-model", base_url=LOCAL, max_cost=1.0,
                              prices={"some-local-model": Price(0.0, 0.0)}))
    require_price(LLMSettings(model="gpt-4o-mini", max_cost=1.0))
    require_price(unpriced, transport="offline")  # an offline batch file is priced 0
    # A shared budget wins over the settings' max_cost, both ways.
    with pytest.raises(ConfigError, match="no known price"):
        require_price(LLMSettings(model="some-local-model", base_url=LOCAL), budget=Budget(2.0))
    require_price(unpriced, budget=Budget(None))


# -- no network ---------------------------------------------------------------------------------

NO_NETWORK = textwrap.dedent("""
    import socket, threading
    attempts = []
    def refuse(self, address):
        attempts.append(address)
        raise OSError("network disabled by the test")
    socket.socket.connect = refuse
    socket.socket.connect_ex = refuse
    # The control: the guard sees a connection attempt.
    try:
        socket.create_connection(("127.0.0.1", 9), timeout=1)
    except OSError:
        pass
    assert len(attempts) == 1, attempts
    from genai_prices import data_snapshot
    from tqaforge.llm import LLMSettings
    from tqaforge.llm.prices import quote
    q = quote(LLMSettings(model="gpt-4o-mini"))
    b = quote(LLMSettings(model="gpt-4o-mini"), transport="batch")
    u = quote(LLMSettings(model="Qwen/Qwen2.5-7B", base_url="http://127.0.0.1:8000/v1"))
    snapshot = data_snapshot.get_snapshot()
    assert snapshot is data_snapshot._bundled_snapshot() and not snapshot.from_auto_update
    print(q.price.input, q.price.output, b.price.input, u.price, len(attempts), threading.active_count())
""")


def test_a_quote_makes_no_network_request() -> None:
    """In a fresh interpreter whose sockets cannot connect (the guard is installed before
    genai-prices is imported), quotes come from the bundled data; nothing tried to connect
    (the only attempt is the control's) and no updater thread was started."""
    done = subprocess.run([sys.executable, "-c", NO_NETWORK], capture_output=True, text=True, cwd=REPO,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0.15", "0.6", "0.075", "None", "1", "1"]


# -- the price on every call record -------------------------------------------------------------

def _rows(ws: Workspace) -> list[LLMCall]:
    with ws.session() as s:
        return list(s.exec(select(LLMCall)))


def _complete(ws: Workspace, st: LLMSettings, text: str) -> Any:
    async def go() -> Any:
        async with Gateway(ws, st) as gw:
            try:
                return await gw.complete([{"role": "user", "content": text}], purpose="t", max_tokens=10)
            except LLMError as exc:
                return exc

    return run(go())


def test_each_call_record_carries_its_price_and_source(workspace: Workspace) -> None:
    replies = {"ok": Scripted(text="yes", completion_tokens=10), "bad": Scripted(status=400)}
    with OpenAIServer(lambda body: replies[body["messages"][0]["content"]]) as server:
        common = dict(base_url=server.url, api_key="k", backoff_s=0.01)
        done = _complete(workspace, LLMSettings(model="gpt-4o-mini", **common), "ok")  # type: ignore[arg-type]
        failed = _complete(workspace, LLMSettings(model="gpt-4o-mini", **common), "bad")  # type: ignore[arg-type]
        over = LLMSettings(model="priced-here", prices={"priced-here": Price(2.0, 4.0)}, **common)  # type: ignore[arg-type]
        _complete(workspace, over, "ok")
        _complete(workspace, LLMSettings(model="free-local", **common), "ok")  # type: ignore[arg-type]
    assert isinstance(failed, LLMError)
    assert done.cost == pytest.approx(Price(0.15, 0.60).cost(done.prompt_tokens, 10)) and done.cost > 0
    rows = {(r.model, r.status.value): r for r in _rows(workspace)}
    seen = {key: (r.price_input, r.price_output, r.price_source, r.transport) for key, r in rows.items()}
    assert seen == {
        ("gpt-4o-mini", "ok"): (0.15, 0.60, f"{LIB}: openai gpt-4o-mini", "online"),
        ("gpt-4o-mini", "error"): (0.15, 0.60, f"{LIB}: openai gpt-4o-mini", "online"),
        ("priced-here", "ok"): (2.0, 4.0, "[llm.prices]", "online"),
        ("free-local", "ok"): (None, None, "unknown", "online"),
    }
    row = rows[("priced-here", "ok")]
    assert row.cost == pytest.approx(Price(2.0, 4.0).cost(row.prompt_tokens, 10))

"""What a model's tokens cost: :func:`quote` and the refusal of a budget nobody can keep,
:func:`require_price`.

Prices come from ``[llm.prices]`` in ``tqaforge.toml`` when it names the model, else from the
`genai-prices <https://github.com/pydantic/genai-prices>`_ library (kept by Pydantic, updated
with each release). Only the price data bundled with the installed library is read: its
``UpdatePrices`` (which downloads newer data) is never started, so a quote makes no network
request and the same install always quotes the same prices.

A budget (``--max-cost``) with a model that has no known price could never stop: every call
would count 0. :func:`require_price` refuses such a gateway before any call is made.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from tqaforge.errors import ConfigError
from tqaforge.llm.settings import BASE_URL_ENV, LLMSettings, Price

if TYPE_CHECKING:
    from tqaforge.llm.budget import Budget

__all__ = ["OFFLINE_SOURCE", "TRANSPORTS", "PriceQuote", "quote", "require_price"]

TRANSPORTS = ("online", "batch", "offline")
OVERRIDE_SOURCE = "[llm.prices]"
OFFLINE_SOURCE = "offline batch file (local inference, 0)"
UNKNOWN_SOURCE = "unknown"
OPENAI_HOSTS = ("api.openai.com",)
_MILLION = 1_000_000


@dataclass(frozen=True)
class PriceQuote:
    """A model's price for one transport and where it came from."""

    price: Price | None  # USD per million tokens (input, output) for this transport; None: unknown
    source: str  # "[llm.prices]", "[llm.prices] x batch discount 0.5", "genai-prices 0.2.3: openai gpt-4o-mini", ...


def quote(settings: LLMSettings, *, transport: str = "online") -> PriceQuote:
    """The price of ``settings.model`` at ``settings.base_url`` for ``transport``.

    - ``"online"``: the ``[llm.prices]`` entry for the model, else genai-prices' price;
    - ``"batch"`` (a provider's Batch API): the entry's ``batch_input`` / ``batch_output``, else
      its online rates x ``[llm] batch_discount``; else genai-prices' batch price (the standard
      one for a provider that lists no batch rate);
    - ``"offline"`` (a batch file run by local inference): 0, nothing is billed.

    The provider is OpenAI when the endpoint (``base_url``, else ``OPENAI_BASE_URL``) is unset or
    OpenAI's; for another URL, the provider genai-prices knows by that URL, else the one whose
    models match the name. A name it does not know (a local ``Qwen/Qwen2.5-7B``) has no price:
    ``price`` is None, ``source`` ``"unknown"``.
    """
    if transport not in TRANSPORTS:
        raise ValueError(f"unknown transport {transport!r}; one of {', '.join(TRANSPORTS)}")
    if transport == "offline":
        return PriceQuote(Price(0.0, 0.0), OFFLINE_SOURCE)
    override = settings.prices.get(settings.model)
    if override is not None:
        return _override_quote(override, transport, settings.batch_discount)
    # The URL the openai client will call: without base_url it reads OPENAI_BASE_URL itself.
    # With several endpoints ([llm] base_urls), the first names the provider.
    url = settings.endpoint_urls[0]
    return _library_quote(settings.model, url or os.environ.get(BASE_URL_ENV) or None, transport)


def require_price(settings: LLMSettings, *, transport: str = "online", budget: Budget | None = None) -> None:
    """ConfigError when a budget is set and the model has no price, so the budget could never
    stop it. The budget is ``budget``'s when given (a shared one wins over the settings'), else
    ``settings.max_cost``."""
    max_cost = budget.max_cost if budget is not None else settings.max_cost
    if max_cost is None or quote(settings, transport=transport).price is not None:
        return
    model = settings.model
    raise ConfigError(
        f"model {model!r} has no known price, so the budget of ${max_cost:g} could not stop it; "
        f"refused before any call",
        hint=(f'add [llm.prices."{model}"] with input = ... and output = ... (USD per million tokens; '
              f"0 and 0 for a free local model) to tqaforge.toml, or leave out --max-cost (and [llm] max_cost)"),
        app_hint=(f'add [llm.prices."{model}"] with input = ... and output = ... (USD per million tokens; 0 and 0 for '
                  f"a free local model) to tqaforge.toml and reload, or set the budget to 0 (none)"),
    )


def _override_quote(price: Price, transport: str, discount: float) -> PriceQuote:
    if transport == "online":
        return PriceQuote(Price(price.input, price.output), OVERRIDE_SOURCE)
    if price.batch_input is not None and price.batch_output is not None:
        return PriceQuote(Price(price.batch_input, price.batch_output), f"{OVERRIDE_SOURCE} batch_input, batch_output")
    batch = Price(
        price.batch_input if price.batch_input is not None else price.input * discount,
        price.batch_output if price.batch_output is not None else price.output * discount,
    )
    given = " (and its own batch rate)" if (price.batch_input, price.batch_output) != (None, None) else ""
    return PriceQuote(batch, f"{OVERRIDE_SOURCE} x batch discount {discount:g}{given}")


@functools.lru_cache(maxsize=256)
def _library_quote(model: str, base_url: str | None, transport: str) -> PriceQuote:
    """genai-prices' price, cached: every gateway asks, and the bundled data never changes in a
    process. The key holds everything the answer depends on, so a cached quote is never stale."""
    # Imported here: the library loads 1.5 MB of price data, which commands without a model skip.
    import genai_prices

    context = {"processing": "batch"} if transport == "batch" else None
    usage = genai_prices.Usage(input_tokens=_MILLION, output_tokens=_MILLION)
    host = urlsplit(base_url).hostname if base_url else None
    try:
        if base_url is None or host in OPENAI_HOSTS:
            calc = genai_prices.calc_price(usage, model, provider_id="openai", price_context=context)
        else:
            try:
                calc = genai_prices.calc_price(usage, model, provider_api_url=base_url, price_context=context)
            except LookupError:  # no provider at this URL (vLLM, Ollama, a proxy): match on the name
                calc = genai_prices.calc_price(usage, model, price_context=context)
    except LookupError:
        return PriceQuote(None, UNKNOWN_SOURCE)
    prices = calc.model_price
    if getattr(prices, "input_mtok", None) is None and getattr(prices, "output_mtok", None) is None:
        return PriceQuote(None, UNKNOWN_SOURCE)  # priced per image or second, not per token
    # A million input tokens: a tiered model (dearer past 200k tokens) is quoted its dearer
    # rate, so the budget's worst case holds for long prompts too.
    price = Price(float(calc.input_price), float(calc.output_price))
    source = f"genai-prices {genai_prices.__version__}: {calc.provider.id} {calc.model.id}"
    if transport == "batch":
        listed = any(v.when.get("processing") == "batch" for v in calc.model.price_variants or ())
        source += " (batch)" if listed else " (batch: no batch rate listed, the standard price)"
    return PriceQuote(price, source)

"""Where and how to call the model: :class:`LLMSettings`, :class:`Price` and
:func:`load_llm_settings` (``[llm]`` of ``tqaforge.toml``, then the environment, then CLI options).

Every limit a setting sets is validated here, once: a NaN or infinite number would switch it off
without a word, so only positive finite numbers pass.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any
from urllib.parse import urlsplit

from tqaforge.errors import ConfigError
from tqaforge.redact import redact_secrets, redact_url, url_password
from tqaforge.store import Workspace

__all__ = ["API_KEY_ENV", "BASE_URL_ENV", "MODEL_ENV", "LLMSettings", "Price", "configured_endpoint", "load_llm_settings"]

log = logging.getLogger("tqaforge.llm")

MODEL_ENV = "TQAFORGE_LLM_MODEL"
BASE_URL_ENV = "OPENAI_BASE_URL"
API_KEY_ENV = "OPENAI_API_KEY"


@dataclass(frozen=True)
class Price:
    """USD per million tokens; ``batch_input`` / ``batch_output``: the provider's Batch API rates
    when an ``[llm.prices]`` entry gives them (None: ``[llm] batch_discount`` x the online rate)."""

    input: float
    output: float
    batch_input: float | None = None
    batch_output: float | None = None

    def __post_init__(self) -> None:
        # A NaN or infinite price makes every budget comparison false: the budget would be off.
        for name in ("input", "output", "batch_input", "batch_output"):
            value = getattr(self, name)
            if value is None and name.startswith("batch_"):
                continue
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
                raise ConfigError(
                    f"[llm.prices] {name} = {value!r} is not a price",
                    hint="USD per million tokens, a finite number >= 0, e.g. input = 0.15, output = 0.60",
                )

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """USD for this many prompt and completion tokens."""
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1_000_000


@dataclass(frozen=True, repr=False)
class LLMSettings:
    """Where and how to call the model; see :func:`load_llm_settings`.

    Its repr masks the API key and the base URL's password, so printing settings leaks nothing.
    """

    model: str
    base_url: str | None = None  # OPENAI_BASE_URL or [llm] base_url; None: OpenAI
    api_key: str | None = None  # OPENAI_API_KEY or the variable named by [llm] api_key_env
    # Several endpoints ([llm] base_urls; when set, they replace base_url): see tqaforge.llm.transport.
    base_urls: tuple[str, ...] = ()
    endpoint_concurrency: int | None = None  # requests in flight per endpoint; None: concurrency
    endpoint_failures: int = 3  # failures in a row (connection, timeout, 5xx) that mark an endpoint down
    endpoint_cooldown_s: float = 30.0  # how long a down endpoint is left alone before one request probes it
    concurrency: int = 8
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    max_retries: int = 5
    timeout_s: float = 60.0
    prices: Mapping[str, Price] = field(default_factory=dict)  # model -> price
    max_cost: float | None = None  # USD for this run; None: no limit
    backoff_s: float = 1.0  # first retry waits about this long, doubling each time
    backoff_max_s: float = 60.0
    malformed_retries: int = 2  # retries of replies with no usable content (within max_retries)
    default_max_tokens: int = 4096  # max_tokens sent when a call sets none (so the budget has a worst case)
    max_reply_bytes: int = 4 * 1024 * 1024  # hard cap on a reply body, whatever max_tokens says
    batch_discount: float = 0.5  # an [llm.prices] rate x this for Batch API calls (OpenAI bills half)

    def __post_init__(self) -> None:
        if not self.model:
            raise ModelNotSet("no model set for the LLM", hint=_MODEL_HINT, app_hint=_MODEL_APP_HINT)
        if self.concurrency < 1:
            raise ConfigError(f"[llm] concurrency must be at least 1, not {self.concurrency}")
        # NaN compares false with everything and inf passes every check: either would switch
        # the limit it sets off without a word, so only positive finite numbers pass.
        for name in ("requests_per_minute", "tokens_per_minute", "max_cost", "timeout_s", "backoff_s", "backoff_max_s",
                     "endpoint_cooldown_s"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ConfigError(f"{_SETTING_NAMES.get(name, f'[llm] {name}')} must be a positive finite number, "
                                  f"not {value!r}", hint=_SETTING_HINTS.get(name))
        if self.max_retries < 0 or self.malformed_retries < 0:
            raise ConfigError("[llm] max_retries and malformed_retries cannot be negative")
        if self.default_max_tokens < 1:
            raise ConfigError(f"[llm] default_max_tokens must be at least 1, not {self.default_max_tokens}")
        if not (isinstance(self.batch_discount, (int, float)) and 0 < self.batch_discount <= 1):
            raise ConfigError(f"[llm] batch_discount must be a number above 0 and at most 1, not {self.batch_discount!r}",
                              hint="the Batch API price as a share of the online price, e.g. batch_discount = 0.5")
        if self.max_reply_bytes < 1024:
            raise ConfigError(f"[llm] max_reply_bytes must be at least 1024, not {self.max_reply_bytes}")
        if self.base_url is not None:
            _check_base_url(self.base_url)
        if self.endpoint_concurrency is not None and self.endpoint_concurrency < 1:
            raise ConfigError(f"[llm] endpoint_concurrency must be at least 1, not {self.endpoint_concurrency}")
        if self.endpoint_failures < 1:
            raise ConfigError(f"[llm] endpoint_failures must be at least 1, not {self.endpoint_failures}")
        if isinstance(self.base_urls, str):
            raise ConfigError("[llm] base_urls must be a list of URLs", hint='e.g. base_urls = ["http://a:8000/v1", "http://b:8000/v1"]')
        object.__setattr__(self, "base_urls", tuple(self.base_urls))  # a list given in Python: kept as given
        for url in self.base_urls:
            _check_base_url(url, where="[llm] base_urls")
        if len(set(self.base_urls)) < len(self.base_urls):
            twice = next(u for u in self.base_urls if self.base_urls.count(u) > 1)
            raise ConfigError(f"[llm] base_urls names {redact_url(twice)} twice",
                              hint="list each endpoint once; endpoint_concurrency sets how much each one takes")

    def __repr__(self) -> str:
        shown = {f.name: getattr(self, f.name) for f in fields(self)}
        shown["api_key"] = None if self.api_key is None else "***"
        shown["base_url"] = None if self.base_url is None else redact_url(self.base_url)
        shown["base_urls"] = tuple(redact_url(u) for u in self.base_urls)
        return "LLMSettings(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"

    @property
    def endpoint_urls(self) -> tuple[str | None, ...]:
        """The endpoints requests go to: ``base_urls`` when set, else ``base_url`` (None: the
        ``openai`` client's own default, ``OPENAI_BASE_URL`` or OpenAI)."""
        return self.base_urls or (self.base_url,)

    @property
    def price(self) -> Price | None:
        """The online price of this settings' model: ``[llm.prices]``, else genai-prices; None
        when neither knows it (see :func:`tqaforge.llm.prices.quote`)."""
        from tqaforge.llm.prices import quote  # prices builds on this module

        return quote(self).price

    @property
    def price_source(self) -> str:
        """Where :attr:`price` comes from, e.g. ``"[llm.prices]"`` or ``"genai-prices 0.2.3: openai gpt-4o-mini"``."""
        from tqaforge.llm.prices import quote

        return quote(self).source


def _check_base_url(url: str, where: str = f"{BASE_URL_ENV} or [llm] base_url") -> None:
    """ConfigError, naming the URL without its password, for a base URL no request can go to
    (another scheme, a port that is no number, a broken [IPv6] address): said once, here, not
    as a traceback from the HTTP client or six failed attempts."""
    problem: str | None
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - parsing the port is the check
    except ValueError as exc:
        problem = redact_secrets(str(exc), [url_password(url)])
    else:
        problem = None if parts.scheme in ("http", "https") and parts.hostname else "not an http:// or https:// URL"
    if problem is not None:
        raise ConfigError(f"the LLM endpoint {redact_url(url)} ({where}) is not usable: {problem}",
                          hint="e.g. http://127.0.0.1:8000/v1 for a local server; leave it unset for OpenAI")


_MODEL_HINT = f'set [llm] model = "..." in tqaforge.toml, {MODEL_ENV}, or pass --model'
_MODEL_APP_HINT = f'type its name in the model field (or set [llm] model = "..." in tqaforge.toml, or {MODEL_ENV})'


class ModelNotSet(ConfigError):
    """No model is named: neither ``[llm] model``, the environment nor the caller."""

_SETTING_NAMES = {"max_cost": "the budget (--max-cost or [llm] max_cost)"}
_SETTING_HINTS = {
    "max_cost": "give --max-cost a positive amount in USD, e.g. --max-cost 2.50 (leave it out for no budget)",
    "timeout_s": "[llm] timeout_s is the seconds a whole request may take, e.g. 60",
}
_INT_KEYS = {"concurrency", "max_retries", "malformed_retries", "default_max_tokens", "max_reply_bytes"}
_FLOAT_KEYS = {"requests_per_minute", "tokens_per_minute", "timeout_s", "max_cost", "backoff_s", "backoff_max_s",
               "batch_discount"}
_STR_KEYS = {"model", "base_url", "api_key"}

# The per-endpoint settings of [llm] base_urls (see tqaforge.llm.transport).
_INT_KEYS |= {"endpoint_concurrency", "endpoint_failures"}
_FLOAT_KEYS |= {"endpoint_cooldown_s"}


def _parse_prices(raw: Any, where: str) -> dict[str, Price]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: [llm.prices] must be a table of models")
    prices: dict[str, Price] = {}
    for model, entry in raw.items():
        if isinstance(entry, Price):
            prices[model] = entry
            continue
        try:
            batch = {k: float(entry[k]) for k in ("batch_input", "batch_output") if entry.get(k) is not None}
            prices[model] = Price(input=float(entry["input"]), output=float(entry["output"]), **batch)
        except (TypeError, KeyError, ValueError, AttributeError):
            raise ConfigError(
                f"{where}: [llm.prices.{json.dumps(model)}] needs numbers input = ... and output = ...",
                hint="USD per million tokens, e.g. input = 0.15, output = 0.60 (optionally batch_input, batch_output)",
            ) from None
    return prices


def _coerce(key: str, value: Any, where: str) -> Any:
    try:
        if key in _INT_KEYS:
            if isinstance(value, bool) or float(value) != int(value):
                raise ValueError
            return int(value)
        if key in _FLOAT_KEYS:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        if key in _STR_KEYS:
            return str(value)
        if key == "base_urls":
            if isinstance(value, str) or not all(isinstance(u, str) for u in value):
                raise TypeError
            return tuple(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: [llm] {key} = {value!r} is not a valid value") from None
    return value


def load_llm_settings(ws: Workspace, **overrides: Any) -> LLMSettings:
    """The LLM settings of a workspace.

    The ``[llm]`` section of ``tqaforge.toml`` first, then the environment (``OPENAI_BASE_URL``,
    ``OPENAI_API_KEY`` or the variable named by ``[llm] api_key_env``, ``TQAFORGE_LLM_MODEL``),
    then ``overrides`` (CLI options; ``None`` values are ignored). ConfigError when no model is
    set or a value has the wrong type.
    """
    where = str(ws.paths.config)
    section = ws.config.llm.values()  # the keys the file sets; names and types checked by load_config
    known = {f.name for f in fields(LLMSettings)}
    values: dict[str, Any] = {}
    for key, value in section.items():
        if key == "prices":
            values["prices"] = _parse_prices(value, where)
        elif key == "api_key_env":
            continue
        elif key == "api_key":
            raise ConfigError(
                f"{where}: [llm] api_key: keys do not belong in the config file",
                hint='put the key in an environment variable and name it: api_key_env = "MY_KEY"',
            )
        else:
            values[key] = _coerce(key, value, where)
    if values.get("base_url") == "":
        values.pop("base_url")
    if os.environ.get(BASE_URL_ENV):
        # The environment overrides the file: one endpoint, whatever base_urls lists.
        values["base_url"] = os.environ[BASE_URL_ENV]
        if values.pop("base_urls", None):
            log.warning("%s is set, so requests go to %s only, not to the [llm] base_urls of %s",
                        BASE_URL_ENV, redact_url(values["base_url"]), where)
    key_env = str(section.get("api_key_env") or API_KEY_ENV)
    api_key = os.environ.get(key_env) or os.environ.get(API_KEY_ENV)
    if api_key:
        values["api_key"] = api_key
    if os.environ.get(MODEL_ENV):
        values["model"] = os.environ[MODEL_ENV]
    for key_name, value in overrides.items():
        if value is None:
            continue
        if key_name not in known:
            raise TypeError(f"load_llm_settings() got an unknown setting {key_name!r}")
        values[key_name] = _parse_prices(value, "overrides") if key_name == "prices" else _coerce(key_name, value, "overrides")
        if key_name == "base_url":
            values.pop("base_urls", None)  # an endpoint given on the command line is the one meant
    if not values.get("model"):
        raise ModelNotSet("no model set for the LLM", hint=_MODEL_HINT, app_hint=_MODEL_APP_HINT)
    return LLMSettings(**values)


@dataclass(frozen=True)
class LLMReadiness:
    """Whether an LLM run can start, and if not what is missing (the app's Generate page says
    exactly that in its own words instead of one "not configured" for every case)."""

    settings: LLMSettings | None  # None: something is missing or wrong
    missing: tuple[str, ...] = ()  # "endpoint" (no base URL and no key), "model"
    endpoint: str = ""  # where requests would go, its password redacted ("api.openai.com": the client's default)
    problem: ConfigError | None = None  # a setting that is wrong (not merely missing)


def llm_readiness(ws: Workspace, **overrides: Any) -> LLMReadiness:
    """:func:`load_llm_settings` for a surface that must say what is missing: the settings when a
    run can start; else which of the endpoint (neither a base URL nor an API key) and the model
    is missing, and where requests would go, or the configuration error."""
    missing: list[str] = []
    try:
        settings: LLMSettings | None = load_llm_settings(ws, **overrides)
        found = settings
    except ModelNotSet:
        missing.append("model")
        settings = None
        try:  # the rest of the settings, with a stand-in for the model, to say whether only the model is missing
            found = load_llm_settings(ws, **{**overrides, "model": "(none)"})
        except ConfigError as exc:
            return LLMReadiness(None, tuple(missing), problem=exc)
    except ConfigError as exc:
        return LLMReadiness(None, problem=exc)
    assert found is not None
    urls = [u for u in found.endpoint_urls if u]
    if not (urls or found.api_key):
        missing.insert(0, "endpoint")
        settings = None
    return LLMReadiness(settings, tuple(missing), ", ".join(map(redact_url, urls)) or "api.openai.com")


def configured_endpoint(ws: Workspace) -> str | None:
    """Where ``ws``'s model calls would go, any password redacted (its ``[llm]`` base_url or
    base_urls, else ``OPENAI_BASE_URL``; ``api.openai.com`` when only a key is set), or None when
    neither an endpoint nor a key is configured. Unlike :func:`load_llm_settings` no model is
    needed: a form that offers to ask a model shows this before one is chosen. A malformed
    ``[llm]`` section is a :class:`~tqaforge.errors.ConfigError`."""
    ready = llm_readiness(ws, model="(chosen later)")  # only the endpoint and the key are read
    if ready.problem is not None:
        raise ready.problem
    return None if "endpoint" in ready.missing else ready.endpoint

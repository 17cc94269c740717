"""Tokens and money: usage normalised across vendors, a price table, cost per episode.

Every API policy records, on the first step of each model turn, the turn's usage in
``PolicyStep.extra["usage"]``; the rollout keeps it in ``Step.usage`` after
:func:`normalize_usage` has put it in one shape:

- ``input_tokens``: input billed at the full price (cache reads and writes excluded);
- ``cache_read_input_tokens``, ``cache_creation_input_tokens``: cached input;
- ``output_tokens``: output, reasoning included (billed as output by every vendor);
- ``image_tokens``: our estimate of the input spent on screenshots, by the vendor's
  published formula (already part of the input counts above; reported, not billed twice);
- ``requests``: API calls (retries not counted).

Vendors count differently: Anthropic's ``input_tokens`` excludes cache reads and writes,
OpenAI's (Responses and chat) includes its ``cached_tokens``, Gemini's
``promptTokenCount`` includes ``cachedContentTokenCount`` and reports thinking apart.
Prices are USD per million tokens (:data:`DEFAULT_PRICES`, list prices of November 2025;
override with a JSON or YAML file, ``--prices``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

USAGE_KEYS = (
    "input_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "output_tokens",
    "image_tokens",
    "requests",
)


@dataclass(frozen=True)
class ModelPrice:
    """USD per million tokens. Cache prices default to the input price when unknown."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

    def cost_usd(self, usage: Mapping[str, int]) -> float:
        """What ``usage`` (normalised, see the module docstring) costs."""
        cache_read = self.input if self.cache_read is None else self.cache_read
        cache_write = self.input if self.cache_write is None else self.cache_write
        return (
            usage.get("input_tokens", 0) * self.input
            + usage.get("cache_read_input_tokens", 0) * cache_read
            + usage.get("cache_creation_input_tokens", 0) * cache_write
            + usage.get("output_tokens", 0) * self.output
        ) / 1e6


# Model name (or name prefix: the longest matching one wins) -> price.
DEFAULT_PRICES: dict[str, ModelPrice] = {
    "claude-opus-4-5": ModelPrice(5.0, 25.0, 0.50, 6.25),
    "claude-opus-4": ModelPrice(15.0, 75.0, 1.50, 18.75),
    "claude-sonnet-4": ModelPrice(3.0, 15.0, 0.30, 3.75),
    "claude-3-7-sonnet": ModelPrice(3.0, 15.0, 0.30, 3.75),
    "claude-3-5-sonnet": ModelPrice(3.0, 15.0, 0.30, 3.75),
    "claude-haiku-4-5": ModelPrice(1.0, 5.0, 0.10, 1.25),
    "computer-use-preview": ModelPrice(3.0, 12.0),
    "gemini-2.5-computer-use-preview": ModelPrice(1.25, 10.0, 0.125),
}


def normalize_usage(raw: Mapping[str, Any] | None) -> dict[str, int] | None:
    """One vendor's usage object -> the shape of :data:`USAGE_KEYS` (None stays None).

    Accepts Anthropic Messages (``input_tokens``, ``cache_read_input_tokens``, ...),
    OpenAI Responses (``input_tokens`` with ``input_tokens_details.cached_tokens``),
    OpenAI chat completions (``prompt_tokens``, ``completion_tokens``) and Gemini
    (``promptTokenCount``, ``candidatesTokenCount``, ``thoughtsTokenCount``), and a
    usage already normalised (it has ``requests``).
    """
    if raw is None:
        return None
    if "requests" in raw:
        return {k: int(raw.get(k, 0) or 0) for k in USAGE_KEYS}
    out = dict.fromkeys(USAGE_KEYS, 0)
    out["requests"] = 1
    if "promptTokenCount" in raw:  # Gemini
        cached = int(raw.get("cachedContentTokenCount", 0) or 0)
        out["input_tokens"] = int(raw["promptTokenCount"] or 0) - cached
        out["cache_read_input_tokens"] = cached
        out["output_tokens"] = int(raw.get("candidatesTokenCount", 0) or 0) + int(
            raw.get("thoughtsTokenCount", 0) or 0
        )
    elif "prompt_tokens" in raw:  # chat completions
        cached = int(((raw.get("prompt_tokens_details") or {}).get("cached_tokens")) or 0)
        out["input_tokens"] = int(raw["prompt_tokens"] or 0) - cached
        out["cache_read_input_tokens"] = cached
        out["output_tokens"] = int(raw.get("completion_tokens", 0) or 0)
    elif "input_tokens_details" in raw:  # OpenAI Responses: input includes the cached
        cached = int((raw["input_tokens_details"] or {}).get("cached_tokens", 0) or 0)
        out["input_tokens"] = int(raw.get("input_tokens", 0) or 0) - cached
        out["cache_read_input_tokens"] = cached
        out["output_tokens"] = int(raw.get("output_tokens", 0) or 0)
    else:  # Anthropic Messages: input excludes the cache
        for key in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
            out[key] = int(raw.get(key, 0) or 0)
        out["output_tokens"] = int(raw.get("output_tokens", 0) or 0)
    out["image_tokens"] = int(raw.get("image_tokens", 0) or 0)
    return out


def add_usage(usages: Iterable[Mapping[str, int] | None]) -> dict[str, int] | None:
    """The sum of normalised usages (None when none of them is a usage)."""
    total: dict[str, int] | None = None
    for usage in usages:
        if usage is None:
            continue
        total = total or dict.fromkeys(USAGE_KEYS, 0)
        for key in USAGE_KEYS:
            total[key] += int(usage.get(key, 0))
    return total


def find_price(model: str, prices: Mapping[str, ModelPrice]) -> ModelPrice | None:
    """The price of ``model``: an exact entry, else the longest entry it starts with."""
    if model in prices:
        return prices[model]
    matches = [name for name in prices if model.startswith(name)]
    return prices[max(matches, key=len)] if matches else None


def load_prices(path: str | Path) -> dict[str, ModelPrice]:
    """:data:`DEFAULT_PRICES` updated from a JSON or YAML file.

    The file maps model names (or prefixes) to ``{"input": USD, "output": USD,
    "cache_read": USD, "cache_write": USD}`` per million tokens (the cache ones optional).

    Raises:
        ValueError: the file is not such a mapping.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if path.suffix in (".yaml", ".yml"):
        import yaml

        data = yaml.safe_load(text)
    else:
        data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(
            f"{path}: expected a mapping of model name -> {{input, output}} USD per million "
            f"tokens, got {type(data).__name__}"
        )
    prices = dict(DEFAULT_PRICES)
    for model, entry in data.items():
        try:
            prices[str(model)] = ModelPrice(**entry)
        except TypeError as exc:
            raise ValueError(
                f"{path}: {model!r}: expected {{input: USD, output: USD[, cache_read: USD]"
                f"[, cache_write: USD]}} per million tokens, got {entry!r} ({exc})"
            ) from None
    return prices

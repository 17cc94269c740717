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
OpenAI's (Responses and chat) includes its ``cached_tokens`` and ``cache_write_tokens``,
Gemini's ``promptTokenCount`` includes ``cachedContentTokenCount`` and reports thinking
apart. Prices are USD per million tokens (:data:`DEFAULT_PRICES`: one row per model,
each with its source and date; override or add with a JSON or YAML file, ``--prices``).
A model is priced by its exact name or, for a dated snapshot
(``claude-sonnet-4-5-20250929``), by the name it extends; never by a shorter family
name, which priced Claude Opus 4.6 at Opus 4's $15/$75 instead of $5/$25.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
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
    """USD per million tokens. Cache prices default to the input price when unknown.

    Attributes:
        source: where the price was read, and when (not compared).
    """

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None
    source: str = field(default="", compare=False)

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


_ANTHROPIC = "platform.claude.com/docs/en/about-claude/pricing, read 2026-11-27"
_ANTHROPIC_MODEL = "Anthropic's model page (platform.claude.com/docs/models/{}), read 2026-11-27"
_OPENAI = "developers.openai.com/api/docs/pricing, as listed 2026-11-05"
_GEMINI = "ai.google.dev/gemini-api/docs/pricing"
# Model name -> price (a dated snapshot of a model is priced as the model; see the
# module docstring). Anthropic's cache write is the 5-minute one; Haiku 5.5 is its
# price for prompts up to 100,000 tokens (5x above: not modelled); OpenAI's and
# Gemini's long-context tiers (above 272K / 200K input tokens) are not modelled either.
DEFAULT_PRICES: dict[str, ModelPrice] = {
    # Released 2026-11-09; Anthropic's list price as resellers quoted it on 2026-11-10
    # (Mythos shares Fable's prices).
    "claude-fable-5-2": ModelPrice(8.0, 40.0, 0.20, 10.0, "Anthropic's list price, 2026-11-10"),
    "claude-mythos-5-2": ModelPrice(8.0, 40.0, 0.20, 10.0, "Anthropic's list price, 2026-11-10"),
    "claude-fable-5-1": ModelPrice(10.0, 50.0, 0.25, 12.50, _ANTHROPIC),
    "claude-mythos-5-1": ModelPrice(10.0, 50.0, 0.25, 12.50, _ANTHROPIC),
    "claude-fable-5": ModelPrice(10.0, 50.0, 1.0, 12.50, _ANTHROPIC),
    "claude-mythos-5": ModelPrice(10.0, 50.0, 1.0, 12.50, _ANTHROPIC),
    "claude-opus-5-5": ModelPrice(
        4.0, 20.0, 0.20, 5.0, _ANTHROPIC_MODEL.format("opus-5-5") + "; cache prices of 2026-09-22"
    ),
    "claude-opus-5": ModelPrice(5.0, 25.0, 0.50, 6.25, _ANTHROPIC),
    "claude-opus-4-8": ModelPrice(5.0, 25.0, 0.50, 6.25, _ANTHROPIC),
    "claude-opus-4-7": ModelPrice(5.0, 25.0, 0.50, 6.25, _ANTHROPIC),
    "claude-opus-4-6": ModelPrice(5.0, 25.0, 0.50, 6.25, _ANTHROPIC),
    "claude-opus-4-5": ModelPrice(5.0, 25.0, 0.50, 6.25, _ANTHROPIC),
    "claude-opus-4-1": ModelPrice(15.0, 75.0, 1.50, 18.75, _ANTHROPIC),
    "claude-opus-4": ModelPrice(15.0, 75.0, 1.50, 18.75, _ANTHROPIC),
    "claude-sonnet-5-5": ModelPrice(
        2.0,
        10.0,
        0.10,
        2.50,
        _ANTHROPIC_MODEL.format("sonnet-5-5") + "; cache reads cut to $0.10 on 2026-10-07",
    ),  # fmt: skip
    "claude-sonnet-5": ModelPrice(2.0, 10.0, 0.20, 2.50, _ANTHROPIC_MODEL.format("sonnet-5")),
    "claude-sonnet-4-6": ModelPrice(3.0, 15.0, 0.30, 3.75, _ANTHROPIC),
    "claude-sonnet-4-5": ModelPrice(3.0, 15.0, 0.30, 3.75, _ANTHROPIC),
    "claude-sonnet-4": ModelPrice(3.0, 15.0, 0.30, 3.75, _ANTHROPIC),
    "claude-3-7-sonnet": ModelPrice(3.0, 15.0, 0.30, 3.75, "Anthropic's list price, 2025-11"),
    "claude-haiku-5-5": ModelPrice(
        0.10, 0.50, 0.01, 0.125, _ANTHROPIC_MODEL.format("haiku-5-5") + ", prompts <= 100K"
    ),
    "claude-haiku-4-5": ModelPrice(1.0, 5.0, 0.10, 1.25, _ANTHROPIC),
    "gpt-6-astra": ModelPrice(10.0, 50.0, 1.0, 12.50, _OPENAI),
    "gpt-6.1-sol": ModelPrice(2.0, 10.0, 0.10, None, _OPENAI),
    "gpt-6-sol": ModelPrice(2.0, 10.0, 0.20, 2.50, _OPENAI + " (prices of 2026-09-22)"),
    "gpt-6-luna": ModelPrice(0.10, 0.50, 0.01, 0.125, _OPENAI + " (prices of 2026-09-22)"),
    "gpt-5.5": ModelPrice(5.0, 30.0, 0.50, None, _OPENAI),
    "gpt-5.4": ModelPrice(2.50, 15.0, 0.25, None, _OPENAI),
    "gpt-5.4-mini": ModelPrice(0.75, 4.50, 0.075, None, _OPENAI),
    "computer-use-preview": ModelPrice(3.0, 12.0, None, None, "OpenAI's list price, 2025-11"),
    "gemini-3.5-flash": ModelPrice(1.50, 9.0, 0.15, None, _GEMINI + ", launch 2026-05-19"),
    "gemini-3.1-pro-preview": ModelPrice(2.0, 12.0, None, None, _GEMINI + ", read 2026-07"),
    "gemini-3-flash-preview": ModelPrice(0.50, 3.0, 0.05, None, _GEMINI + ", read 2026-07-04"),
    "gemini-2.5-computer-use-preview-10-2025": ModelPrice(
        1.25, 10.0, 0.125, None, _GEMINI + ", read 2025-11"
    ),
}
# What a dated snapshot adds to its model's name: -20250929, -2025-03-11.
_SNAPSHOT_SUFFIX = re.compile(r"-\d{8}|-\d{4}-\d{2}-\d{2}")


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
        details = raw.get("prompt_tokens_details") or {}
        cached = int(details.get("cached_tokens") or 0)
        written = int(details.get("cache_write_tokens") or 0)
        out["input_tokens"] = int(raw["prompt_tokens"] or 0) - cached - written
        out["cache_read_input_tokens"] = cached
        out["cache_creation_input_tokens"] = written
        out["output_tokens"] = int(raw.get("completion_tokens", 0) or 0)
    elif "input_tokens_details" in raw:  # OpenAI Responses: input includes the cache
        details = raw["input_tokens_details"] or {}
        cached = int(details.get("cached_tokens", 0) or 0)
        written = int(details.get("cache_write_tokens", 0) or 0)
        out["input_tokens"] = int(raw.get("input_tokens", 0) or 0) - cached - written
        out["cache_read_input_tokens"] = cached
        out["cache_creation_input_tokens"] = written
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
    """The price of ``model``: its entry, else (a dated snapshot) the entry of the model
    it is a snapshot of; None when neither is in ``prices``."""
    if model in prices:
        return prices[model]
    undated = _SNAPSHOT_SUFFIX.sub("", model)
    return prices.get(undated) if undated != model else None


def load_prices(path: str | Path) -> dict[str, ModelPrice]:
    """:data:`DEFAULT_PRICES` updated from a JSON or YAML file.

    The file maps model names to ``{"input": USD, "output": USD,
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
            prices[str(model)] = ModelPrice(**entry, source=str(path))
        except TypeError as exc:
            raise ValueError(
                f"{path}: {model!r}: expected {{input: USD, output: USD[, cache_read: USD]"
                f"[, cache_write: USD]}} per million tokens, got {entry!r} ({exc})"
            ) from None
    return prices

"""What tokens cost: a price table, cost per episode.

The tokens are the normalised usage of :mod:`uirl_agents.policies.usage` (one shape
across vendors). Prices are USD per million tokens (:data:`DEFAULT_PRICES`: one row per
model, each with its source and date; override or add with a JSON or YAML file,
``--prices``). A model is priced by its exact name or, for a dated snapshot
(``claude-sonnet-4-5-20250929``), by the name it extends; never by a shorter family
name, which priced Claude Opus 4.6 at Opus 4's $15/$75 instead of $5/$25.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

logger = logging.getLogger(__name__)


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
        """What ``usage`` (normalised: :mod:`uirl_agents.policies.usage`) costs."""
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

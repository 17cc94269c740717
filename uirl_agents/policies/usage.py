"""Tokens an API policy used, in one shape across vendors.

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
apart. What the tokens cost: :mod:`uirl_agents.evaluation.cost`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

USAGE_KEYS = (
    "input_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
    "output_tokens",
    "image_tokens",
    "requests",
)


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

"""The vLLM rollout backend: the policy that samples from the server, and handing it a
new LoRA adapter (``vllm serve ... --enable-lora``).

:func:`vllm_policy` samples from an adapter the server serves, every sampling field sent
explicitly (:func:`vllm_sampling_fields`), and refuses a response without token ids.

vLLM loads adapters at run time when started with
``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``: ``POST /v1/load_lora_adapter`` with
``{"lora_name", "lora_path"}`` makes ``lora_name`` a servable model name, and
``POST /v1/unload_lora_adapter`` with ``{"lora_name"}`` drops it. The path is read by
the server, so it must be a folder the server can see (a shared volume).
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

import requests

from uirl_agents.formats import FormatConfig
from uirl_agents.policies.base import Policy
from uirl_agents.policies.hf import BLOCKED_LOGIT_BIAS
from uirl_agents.trainers.config import TrainConfig

logger = logging.getLogger(__name__)


class AdapterLoadError(RuntimeError):
    """The server refused or failed to load (or unload) an adapter.

    Attributes:
        url: the endpoint.
        status_code: the HTTP status (None: no response).
        body: the start of the response body or the connection error.
    """

    def __init__(self, url: str, status_code: int | None, body: str) -> None:
        self.url, self.status_code, self.body = url, status_code, body
        super().__init__(
            f"POST {url} failed: {status_code or 'no response'}: {body[:300]}. Start vLLM with "
            "--enable-lora, --max-lora-rank >= the adapter's rank and "
            "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True, and put the adapter where the server can read it"
        )


def _root(base_url: str) -> str:
    """``http://host:8000/v1`` -> ``http://host:8000`` (the adapter routes live under /v1)."""
    return base_url.rstrip("/").removesuffix("/v1")


def _post(url: str, body: dict[str, str], timeout_s: float) -> None:
    try:
        response = requests.post(url, json=body, timeout=timeout_s)
    except requests.RequestException as exc:
        raise AdapterLoadError(url, None, str(exc)) from exc
    if response.status_code != 200:
        raise AdapterLoadError(url, response.status_code, response.text)


def load_lora_adapter(
    base_url: str, lora_name: str, lora_path: str, *, timeout_s: float = 120.0
) -> None:
    """Load the adapter at ``lora_path`` (as the server sees it) under ``lora_name``.

    Raises:
        AdapterLoadError: no response, or a status other than 200.
    """
    _post(
        f"{_root(base_url)}/v1/load_lora_adapter",
        {"lora_name": lora_name, "lora_path": lora_path},
        timeout_s,
    )
    logger.info("vLLM at %s serves adapter %s from %s", base_url, lora_name, lora_path)


def unload_lora_adapter(base_url: str, lora_name: str, *, timeout_s: float = 60.0) -> None:
    """Drop ``lora_name`` from the server (frees its LoRA slot).

    Raises:
        AdapterLoadError: no response, or a status other than 200.
    """
    _post(f"{_root(base_url)}/v1/unload_lora_adapter", {"lora_name": lora_name}, timeout_s)


def vllm_policy(
    config: TrainConfig,
    model_name: str,
    format_config: FormatConfig,
    blocked_ids: Collection[int] = (),
) -> Policy:
    """The rollout policy on the vLLM server: ``model_name`` (an adapter it serves),
    sampled with every field of ``rollout`` sent explicitly and ``blocked_ids`` (the
    vision special tokens) biased away; a response without token ids raises
    :class:`~uirl_agents.policies.openai_compat.TokenIdsMissingError`."""
    from uirl_agents.policies.openai_compat import OpenAIPolicy, OpenAIPolicyConfig

    r = config.rollout
    return OpenAIPolicy(
        OpenAIPolicyConfig(
            base_url=r.vllm_base_url,
            model=model_name,
            format=config.model.format,
            format_config=format_config,
            max_images=r.max_images,
            max_history=r.max_history,
            temperature=r.temperature,
            top_p=r.top_p,
            max_tokens=r.max_new_tokens,
            max_concurrency=config.env.num_envs,
            extra_body=vllm_sampling_fields(r.extra_body, blocked_ids),
            # The updates train on the sampled ids: a step without them is no sample
            # (GRPO would train on nothing, PPO only its value head).
            require_token_ids=True,
        )
    )


def vllm_sampling_fields(
    extra_body: dict[str, Any], blocked_ids: Collection[int] = ()
) -> dict[str, Any]:
    """Every sampling field vLLM would otherwise take from the checkpoint's
    generation_config.json (Qwen2.5-VL ships top_k 1 and repetition_penalty 1.05: near
    greedy, so a GRPO group's episodes come out the same), ``logit_bias`` -100 on
    ``blocked_ids`` (a generated vision token is an image slot without an image), then
    the user's own (a ``logit_bias`` of theirs is merged in, theirs winning)."""
    fields: dict[str, Any] = {
        "top_k": -1,
        "min_p": 0.0,
        "repetition_penalty": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "n": 1,
    }
    bias = {str(i): BLOCKED_LOGIT_BIAS for i in sorted(blocked_ids)}
    bias |= {str(k): v for k, v in (extra_body.get("logit_bias") or {}).items()}
    if bias:
        fields["logit_bias"] = bias
    return fields | {k: v for k, v in extra_body.items() if k != "logit_bias"}

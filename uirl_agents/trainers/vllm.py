"""Hand a new LoRA adapter to a running vLLM server (``vllm serve ... --enable-lora``).

vLLM loads adapters at run time when started with
``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``: ``POST /v1/load_lora_adapter`` with
``{"lora_name", "lora_path"}`` makes ``lora_name`` a servable model name, and
``POST /v1/unload_lora_adapter`` with ``{"lora_name"}`` drops it. The path is read by
the server, so it must be a folder the server can see (a shared volume).
"""

from __future__ import annotations

import logging

import requests

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

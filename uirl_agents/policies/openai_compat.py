"""OpenAIPolicy: any ``/v1/chat/completions`` server (vLLM, hosted APIs) as a batched policy.

Per step and sub-env the policy builds the prompt with a format (like
:class:`~uirl_agents.policies.hf.HFPolicy`), sends the screenshots as base64 PNG data
URLs, and parses the reply. The sub-envs of one ``act`` call are requested
concurrently (a thread pool); connection errors, timeouts, 429 and 5xx are retried
with exponential backoff (and ``Retry-After`` when the server sends one).

Images: the format resizes each screenshot to the model's smart-resize size before
encoding, so a Qwen2-VL-style server does not resize it again (its ``max_pixels``
must be at least the format's) and the reply's coordinates are pixels of
``PolicyStep.images``.

Logprobs and token ids are recorded when the server returns them:
``choices[0].logprobs.content[*].logprob`` (OpenAI / vLLM with ``logprobs: true``)
and ``choices[0].token_ids`` / ``prompt_token_ids`` (vLLM with
``return_token_ids: true``). They are the server's numbers: vLLM's default is the
raw model distribution (before temperature); see docs/agents.md. A trainer's rollouts
set ``require_token_ids``: a response without the ids then fails at once, where the
steps would otherwise leave the update with nothing to train on.
"""

from __future__ import annotations

import base64
import io
import logging
import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import requests
from PIL import Image

from uirl_agents.formats import FormatConfig, get_format
from uirl_agents.formats.base import Message
from uirl_agents.policies.base import PolicyStep
from uirl_agents.policies.context import EpisodeContexts, Prompt

logger = logging.getLogger(__name__)

RETRY_STATUS_CODES = frozenset({429, 500, 502, 503, 504})
# Fast PNG encoding: the payload goes to a server on the same network, CPU is scarcer.
PNG_COMPRESS_LEVEL = 1


class TokenIdsMissingError(RuntimeError):
    """A response without the prompt's and the completion's token ids, where the policy
    was told to require them (a trainer's rollouts: it trains on the sampled ids).

    Attributes:
        url: the endpoint.
        model: the model (or LoRA adapter) asked.
    """

    def __init__(self, url: str, model: str) -> None:
        self.url, self.model = url, model
        super().__init__(
            f"POST {url} (model {model!r}) returned no `token_ids` / `prompt_token_ids`: the "
            "trainer needs the exact ids it sampled, and without them its steps would train "
            "on nothing. The request asks for them with vLLM's `return_token_ids: true`, a "
            "field vLLM honours since its pull request 22587 (August 2025): upgrade vLLM, and "
            "check that nothing between the trainer and the server drops the field"
        )


class ChatCompletionFailedError(RuntimeError):
    """A chat completion request that failed for good (a 4xx, or retries used up).

    Attributes:
        url: the endpoint.
        status_code: the last HTTP status, None when no response came back.
        body: the start of the last response body (or the connection error).
    """

    def __init__(self, url: str, status_code: int | None, body: str, attempts: int) -> None:
        self.url, self.status_code, self.body = url, status_code, body
        status = f"HTTP {status_code}" if status_code is not None else "no response"
        super().__init__(
            f"POST {url} failed after {attempts} attempt(s): {status}: {body[:500]}. "
            "Check that the server is up, that `model` names a served model (or LoRA), and "
            "that the prompt fits its --max-model-len"
        )


@dataclass
class OpenAIPolicyConfig:
    """Where :class:`OpenAIPolicy` sends requests and how."""

    # Server
    base_url: str = "http://127.0.0.1:8000/v1"
    """The API root; requests go to ``{base_url}/chat/completions``."""
    model: str = "ui-tars"
    """The served model name (vLLM ``--served-model-name``, or a LoRA module name)."""
    api_key: str | None = None
    """Sent as ``Authorization: Bearer``; None sends no header (local vLLM)."""

    # Prompt
    format: str = "ui-tars"
    """The model format: "ui-tars" or "qwen2.5-vl"."""
    format_config: FormatConfig = field(default_factory=FormatConfig)
    """Image sizing; keep max_pixels within the server processor's."""
    max_images: int = 1
    """Screenshots in the prompt: the latest ones, the current one included."""
    max_history: int | None = None
    """Earlier outputs kept as assistant turns (the latest ones); None keeps all."""

    # Sampling
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 256
    """Longest completion."""
    logprobs: bool = True
    """Ask for per-token logprobs (``logprobs: true``)."""
    return_token_ids: bool = True
    """Ask vLLM for prompt and completion token ids (``return_token_ids: true``);
    turn off for servers that reject unknown fields."""
    require_token_ids: bool = False
    """Raise :class:`TokenIdsMissingError` at the first response without them (a
    trainer's rollouts); off: record None."""
    extra_body: dict[str, Any] = field(default_factory=dict)
    """Merged into every request body (e.g. ``{"top_k": 20}`` for vLLM)."""

    # Transport
    max_concurrency: int = 8
    """Requests in flight at once."""
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 300.0
    max_retries: int = 5
    """Retries after the first attempt, on connection errors, timeouts, 429 and 5xx."""
    backoff_initial_s: float = 1.0
    """First retry delay; doubles each retry (with jitter), capped at backoff_max_s."""
    backoff_max_s: float = 30.0

    def __post_init__(self) -> None:
        if self.max_concurrency < 1:
            raise ValueError(f"max_concurrency: expected >= 1, got {self.max_concurrency}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries: expected >= 0, got {self.max_retries}")
        if self.require_token_ids and not self.return_token_ids:
            raise ValueError(
                "require_token_ids needs return_token_ids: true (the request must ask for them)"
            )
        if self.backoff_initial_s < 0 or self.backoff_max_s < self.backoff_initial_s:
            raise ValueError(
                f"backoff: expected 0 <= backoff_initial_s <= backoff_max_s, got "
                f"{self.backoff_initial_s}, {self.backoff_max_s}"
            )


def image_data_url(image: np.ndarray) -> str:
    """A uint8 ``(H, W, 3)`` image as a ``data:image/png;base64,...`` URL."""
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(image, dtype=np.uint8)).save(
        buffer, format="PNG", compress_level=PNG_COMPRESS_LEVEL
    )
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def to_openai_messages(messages: list[Message], images: Sequence[np.ndarray]) -> list[Message]:
    """Replace the ``{"type": "image"}`` placeholders with ``image_url`` data-URL parts.

    Raises:
        ValueError: the number of placeholders and images differ.
    """
    placeholders = sum(
        part.get("type") == "image"
        for message in messages
        if isinstance(message["content"], list)
        for part in message["content"]
    )
    if placeholders != len(images):
        raise ValueError(
            f"Expected one image per placeholder, got {len(images)} images for "
            f"{placeholders} placeholders"
        )
    urls = iter([image_data_url(image) for image in images])
    out: list[Message] = []
    for message in messages:
        content = message["content"]
        if isinstance(content, list):
            content = [
                {"type": "image_url", "image_url": {"url": next(urls)}}
                if part.get("type") == "image"
                else part
                for part in content
            ]
        out.append({"role": message["role"], "content": content})
    return out


class OpenAIPolicy:
    """A model behind an OpenAI-compatible chat completions endpoint.

    Attributes:
        name: "openai".
        config: :class:`OpenAIPolicyConfig`.
        format: prompt building and parsing.

    Methods:
        begin_episode: forget sub-env ``i``'s history.
        act: concurrent requests -> one :class:`PolicyStep` per sub-env.
        close: stop the thread pool (also on ``with`` exit).
    """

    name = "openai"

    def __init__(self, config: OpenAIPolicyConfig | None = None) -> None:
        self.config = config or OpenAIPolicyConfig()
        self.format = get_format(self.config.format, self.config.format_config)
        self._contexts = EpisodeContexts(
            self.format, self.config.max_images, self.config.max_history
        )
        self._url = self.config.base_url.rstrip("/") + "/chat/completions"
        self._pool = ThreadPoolExecutor(
            max_workers=self.config.max_concurrency, thread_name_prefix="openai-policy"
        )
        # requests.Session is not thread-safe: one per worker thread (keep-alive each).
        self._local = threading.local()

    def __enter__(self) -> OpenAIPolicy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def begin_episode(self, env_index: int) -> None:
        self._contexts.begin_episode(env_index)

    def final_prompt(
        self, env_index: int, observation: dict[str, Any]
    ) -> tuple[list[Message], list[np.ndarray]]:
        """The prompt of an episode's last observation (see ``FinalPromptPolicy``)."""
        prompt = self._contexts.observe(env_index, observation)
        return prompt.messages, prompt.images

    def act(
        self, observations: Sequence[dict[str, Any]], env_indices: Sequence[int]
    ) -> list[PolicyStep]:
        """One step for each sub-env in ``env_indices`` (requests run concurrently).

        Raises:
            ValueError: observations and env_indices differ in length.
            ChatCompletionFailedError: a request failed for good.
            TokenIdsMissingError: with ``require_token_ids``, a response without them.
        """
        if len(observations) != len(env_indices):
            raise ValueError(
                f"Expected one observation per env index, got {len(observations)} "
                f"observations and {len(env_indices)} indices"
            )
        start = time.perf_counter()
        prompts = [
            self._contexts.observe(env_index, obs)
            for obs, env_index in zip(observations, env_indices, strict=True)
        ]
        responses = list(self._pool.map(self._complete, prompts))
        elapsed = (time.perf_counter() - start) / max(len(observations), 1)
        steps = []
        for env_index, prompt, response in zip(env_indices, prompts, responses, strict=True):
            step = self._to_step(prompt, response)
            step.policy_time_s = elapsed
            self._contexts.record(env_index, step.text)
            steps.append(step)
        return steps

    def request_body(self, prompt: Prompt) -> dict[str, Any]:
        """The JSON body for one prompt."""
        c = self.config
        body: dict[str, Any] = {
            "model": c.model,
            "messages": to_openai_messages(prompt.messages, prompt.images),
            "temperature": c.temperature,
            "top_p": c.top_p,
            "max_tokens": c.max_tokens,
        }
        if c.logprobs:
            body["logprobs"] = True
        if c.return_token_ids:
            body["return_token_ids"] = True
        return body | c.extra_body

    def _complete(self, prompt: Prompt) -> dict[str, Any]:
        return self._post(self.request_body(prompt))

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
            if self.config.api_key:
                session.headers["Authorization"] = f"Bearer {self.config.api_key}"
        return session

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        c = self.config
        status: int | None = None
        detail = ""
        for attempt in range(c.max_retries + 1):
            retry_after = None
            try:
                response = self._session().post(
                    self._url, json=body, timeout=(c.connect_timeout_s, c.read_timeout_s)
                )
            except (requests.ConnectionError, requests.Timeout) as exc:
                status, detail = None, f"{type(exc).__name__}: {exc}"
            else:
                if response.status_code == 200:
                    return response.json()
                status, detail = response.status_code, response.text
                if status not in RETRY_STATUS_CODES:
                    raise ChatCompletionFailedError(self._url, status, detail, attempt + 1)
                retry_after = _retry_after_s(response)
            if attempt == c.max_retries:
                break
            delay = min(c.backoff_max_s, c.backoff_initial_s * 2**attempt)
            delay *= 0.5 + random.random() / 2  # jitter: sub-envs don't retry in lockstep
            if retry_after is not None:
                delay = min(max(delay, retry_after), c.backoff_max_s)
            logger.warning(
                "POST %s: %s (attempt %d/%d); retrying in %.2f s",
                self._url,
                f"HTTP {status}" if status is not None else detail,
                attempt + 1,
                c.max_retries + 1,
                delay,
            )
            time.sleep(delay)
        raise ChatCompletionFailedError(self._url, status, detail, c.max_retries + 1)

    def _to_step(self, prompt: Prompt, response: dict[str, Any]) -> PolicyStep:
        choice = (response.get("choices") or [{}])[0]
        text = (choice.get("message") or {}).get("content") or ""
        parsed = self.format.parse(text, prompt.geometry)
        content = (choice.get("logprobs") or {}).get("content") or []
        logprobs = [float(c["logprob"]) for c in content] or None
        extra: dict[str, Any] = {
            "thought": parsed.thought,
            "parse_notes": list(parsed.notes),
            "finish_reason": choice.get("finish_reason"),
            "usage": response.get("usage"),
        }
        if content:
            extra["tokens"] = [c.get("token") for c in content]
        prompt_ids = response.get("prompt_token_ids") or None
        completion_ids = choice.get("token_ids") or None
        if self.config.require_token_ids and (prompt_ids is None or completion_ids is None):
            raise TokenIdsMissingError(self._url, self.config.model)
        return PolicyStep(
            action=parsed.action,
            error=parsed.error,
            text=text,
            messages=prompt.messages,
            images=prompt.images,
            prompt_ids=prompt_ids,
            completion_ids=completion_ids,
            logprobs=logprobs,
            extra=extra,
        )


def _retry_after_s(response: requests.Response) -> float | None:
    value = response.headers.get("Retry-After")
    try:
        return float(value) if value is not None else None
    except ValueError:  # an HTTP date: fall back to our own backoff
        return None

"""OpenAIPolicy against a local stand-in chat-completions server (real HTTP, no torch)."""

from __future__ import annotations

import base64
import io
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from http_standin import QuietHandler, serving, url_of
from PIL import Image

from uirl_agents.formats import FormatConfig
from uirl_agents.policies.openai_compat import (
    ChatCompletionFailedError,
    OpenAIPolicy,
    OpenAIPolicyConfig,
    TokenIdsMissingError,
)

pytest_plugins = ["model_fixtures"]

CLICK_REPLY = "Thought: The First name field is empty.\nAction: click(start_box='(644,406)')"
BAD_REPLY = "I think I should click somewhere."


@dataclass
class StandInServer:
    """A chat-completions endpoint answering in UI-TARS format.

    ``script`` holds (status, headers) failures to send before answering normally;
    ``reply`` picks the answer text from the request body; ``token_ids`` False answers as
    a server that does not know ``return_token_ids`` (no prompt or completion ids).
    """

    reply: Callable[[dict], str] = lambda body: CLICK_REPLY
    script: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    delay_s: float = 0.0
    token_ids: bool = True
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    attempts: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""

    def answer(self, body: dict) -> dict[str, Any]:
        text = self.reply(body)
        tokens = text.split(" ")
        response = {
            "id": "cmpl-1",
            "object": "chat.completion",
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                    "logprobs": {
                        "content": [
                            {"token": t, "logprob": -0.5, "top_logprobs": []} for t in tokens
                        ]
                    },
                    "token_ids": list(range(len(tokens))),
                }
            ],
            "prompt_token_ids": [1, 2, 3],
            "usage": {"prompt_tokens": 3, "completion_tokens": len(tokens)},
        }
        if not self.token_ids:
            del response["prompt_token_ids"], response["choices"][0]["token_ids"]
        return response


def _handler(server: StandInServer) -> type[BaseHTTPRequestHandler]:
    class Handler(QuietHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with server.lock:
                server.attempts += 1
                server.in_flight += 1
                server.max_in_flight = max(server.max_in_flight, server.in_flight)
                failure = server.script.pop(0) if server.script else None
            try:
                time.sleep(server.delay_s)  # simulated inference time
                if self.path != "/v1/chat/completions":
                    self.send_json(404, {"error": f"no route {self.path}"})
                elif failure is not None:
                    self.send_json(failure[0], {"error": "unavailable"}, failure[1])
                else:
                    with server.lock:
                        server.requests.append(body)
                        server.headers.append(dict(self.headers))
                    self.send_json(200, server.answer(body))
            finally:
                with server.lock:
                    server.in_flight -= 1

    return Handler


@pytest.fixture
def server() -> Iterator[StandInServer]:
    state = StandInServer()
    with serving(_handler(state)) as httpd:
        state.url = f"{url_of(httpd)}/v1"
        yield state


def _observations(n: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    # Flat colours with a few noisy blocks: realistic for a UI, and quick to PNG-encode.
    out = []
    for i in range(n):
        screenshot = np.full((800, 1280, 3), 235, dtype=np.uint8)
        screenshot[100:200, 100:400] = rng.integers(0, 256, (100, 300, 3), dtype=np.uint8)
        out.append({"screenshot": screenshot, "instruction": f"Copy row {i + 1} into the form."})
    return out


def _policy(server: StandInServer, **overrides: Any) -> OpenAIPolicy:
    config = OpenAIPolicyConfig(
        base_url=server.url,
        model="ui-tars-test",
        backoff_initial_s=0.01,
        backoff_max_s=0.05,
        **overrides,
    )
    return OpenAIPolicy(config)


def _decode_data_url(url: str) -> np.ndarray:
    prefix = "data:image/png;base64,"
    assert url.startswith(prefix)
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(url[len(prefix) :]))))


def test_images_arrive_as_data_urls_and_replies_parse(server: StandInServer) -> None:
    server.reply = lambda body: CLICK_REPLY if "row 1" in json.dumps(body) else BAD_REPLY
    with _policy(server, max_images=2, api_key="sk-test") as policy:
        first = policy.act(_observations(2), [0, 1])
        second = policy.act(_observations(2, seed=1), [0, 1])

    good, bad = first
    assert (good.action.type.value, good.action.x, good.action.y) == ("left_click", 640, 400)
    assert good.error is None and good.extra["thought"] == "The First name field is empty."
    assert good.logprobs == [-0.5] * len(CLICK_REPLY.split(" "))
    assert good.completion_ids == list(range(len(CLICK_REPLY.split(" "))))
    assert good.prompt_ids == [1, 2, 3]
    assert bad.action is None and bad.error.startswith("ParseError: no action")
    assert bad.text == BAD_REPLY

    assert len(server.requests) == 4
    body = next(b for b in server.requests[2:] if "row 1" in json.dumps(b))
    assert body["model"] == "ui-tars-test" and body["logprobs"] is True
    assert body["return_token_ids"] is True
    image_parts = [
        p
        for m in body["messages"]
        if isinstance(m["content"], list)
        for p in m["content"]
        if p["type"] == "image_url"
    ]
    # Second step, max_images=2: both screenshots, the exact (resized) images recorded.
    step = second[0]
    assert len(image_parts) == len(step.images) == 2
    for part, image in zip(image_parts, step.images, strict=True):
        decoded = _decode_data_url(part["image_url"]["url"])
        assert decoded.shape == (812, 1288, 3)
        np.testing.assert_array_equal(decoded, image)
    # The first reply comes back as history; placeholders stay in the recorded messages.
    assert {"role": "assistant", "content": CLICK_REPLY} in body["messages"]
    assert all(
        p["type"] in ("text", "image")
        for m in step.messages
        if isinstance(m["content"], list)
        for p in m["content"]
    )
    assert server.headers[0]["Authorization"] == "Bearer sk-test"


def test_retries_on_503_and_429(server: StandInServer) -> None:
    server.script = [(503, {}), (429, {"Retry-After": "0"}), (502, {})]
    with _policy(server) as policy:
        (step,) = policy.act(_observations(1), [0])
    assert step.action is not None
    assert server.attempts == 4


def test_gives_up_after_max_retries(server: StandInServer) -> None:
    server.script = [(500, {})] * 10
    with _policy(server, max_retries=2) as policy:
        with pytest.raises(ChatCompletionFailedError, match="after 3 attempt") as info:
            policy.act(_observations(1), [0])
    assert info.value.status_code == 500
    assert server.attempts == 3


def test_client_errors_are_not_retried(server: StandInServer) -> None:
    server.script = [(400, {})]
    with _policy(server) as policy:
        with pytest.raises(ChatCompletionFailedError, match="HTTP 400"):
            policy.act(_observations(1), [0])
    assert server.attempts == 1


def test_connection_errors_are_retried() -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = OpenAIPolicyConfig(
        base_url=f"http://127.0.0.1:{port}/v1",
        max_retries=2,
        backoff_initial_s=0.01,
        backoff_max_s=0.02,
    )
    with OpenAIPolicy(config) as policy:
        with pytest.raises(ChatCompletionFailedError, match="no response: ConnectionError") as info:
            policy.act(_observations(1), [0])
    assert info.value.status_code is None


def test_requests_run_concurrently(server: StandInServer) -> None:
    server.delay_s = 0.3
    with _policy(
        server, max_concurrency=4, format_config=FormatConfig(max_pixels=28 * 28 * 64)
    ) as policy:
        start = time.perf_counter()
        steps = policy.act(_observations(4), [0, 1, 2, 3])
        elapsed = time.perf_counter() - start
    assert len(steps) == 4 and server.max_in_flight >= 2
    assert elapsed < 4 * 0.3


def test_trainer_rollouts_send_the_whole_sampling_configuration(server: StandInServer) -> None:
    # vLLM fills any field left out from the checkpoint's generation_config.json
    # (Qwen2.5-VL: top_k 1, repetition_penalty 1.05): the trainer sends every one.
    pytest.importorskip("torch")
    from uirl_agents.trainers.cli import load_config
    from uirl_agents.trainers.config import GRPOConfig
    from uirl_agents.trainers.vllm import vllm_policy

    overrides = {
        "model.format": "ui-tars",
        "rollout.vllm_base_url": server.url,
        "rollout.temperature": "0.7",
        "rollout.top_p": "0.95",
        "rollout.max_new_tokens": "64",
        "rollout.extra_body": "{min_p: 0.05, seed: 3}",
    }
    config = load_config(GRPOConfig, None, overrides)
    policy = vllm_policy(config, "run-iter3", FormatConfig())
    policy.begin_episode(0)
    policy.act(_observations(1), [0])
    (body,) = server.requests
    sampling = {k: body[k] for k in body if k not in ("messages", "logprobs", "return_token_ids")}
    assert sampling == {
        "model": "run-iter3",
        "temperature": 0.7,
        "top_p": 0.95,
        "max_tokens": 64,
        "top_k": -1,
        "min_p": 0.05,  # the user's extra_body wins
        "repetition_penalty": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "n": 1,
        "seed": 3,
    }


def test_trainer_rollouts_bias_vision_tokens_away(
    server: StandInServer, tiny_qwen25vl_dir: Path
) -> None:
    # The ids the run's model and tokenizer name vision tokens (the trainer's HF
    # generate suppresses the same ones) go out as logit_bias -100 in every request;
    # a logit_bias of the user's own is merged in.
    pytest.importorskip("torch")
    from uirl_agents.loading.pretrained import load_model_and_processor
    from uirl_agents.policies.hf import vision_token_ids
    from uirl_agents.trainers.cli import load_config
    from uirl_agents.trainers.config import GRPOConfig
    from uirl_agents.trainers.vllm import vllm_policy

    model, processor = load_model_and_processor(tiny_qwen25vl_dir)
    blocked = vision_token_ids(model.config, processor.tokenizer)
    assert processor.tokenizer.convert_tokens_to_ids("<|image_pad|>") in blocked
    overrides = {
        "model.format": "ui-tars",
        "rollout.vllm_base_url": server.url,
        "rollout.extra_body": "{logit_bias: {'7': 2.0}}",
    }
    policy = vllm_policy(load_config(GRPOConfig, None, overrides), "r", FormatConfig(), blocked)
    policy.begin_episode(0)
    policy.act(_observations(1), [0])
    (body,) = server.requests
    assert body["logit_bias"] == {**{str(i): -100.0 for i in blocked}, "7": 2.0}


def test_trainer_rollouts_fail_at_the_first_response_without_token_ids(
    server: StandInServer,
) -> None:
    """A vLLM that ignores return_token_ids: the trainer's rollout policy fails at the
    first response, naming the field (its steps would otherwise train on nothing);
    a policy that does not need the ids records None."""
    pytest.importorskip("torch")
    from uirl_agents.trainers.cli import load_config
    from uirl_agents.trainers.config import GRPOConfig
    from uirl_agents.trainers.vllm import vllm_policy

    server.token_ids = False
    overrides = {"model.format": "ui-tars", "rollout.vllm_base_url": server.url}
    policy = vllm_policy(load_config(GRPOConfig, None, overrides), "run-iter0", FormatConfig())
    policy.begin_episode(0)
    with pytest.raises(TokenIdsMissingError, match=re.escape("`return_token_ids: true`")):
        policy.act(_observations(1), [0])
    assert server.attempts == 1  # the first response, not retried

    with _policy(server) as plain:
        plain.begin_episode(0)
        (step,) = plain.act(_observations(1), [0])
    assert step.completion_ids is None and step.prompt_ids is None and step.action is not None
    with pytest.raises(ValueError, match="require_token_ids needs return_token_ids"):
        OpenAIPolicyConfig(require_token_ids=True, return_token_ids=False)

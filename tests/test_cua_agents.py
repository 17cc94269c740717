"""The vendor computer-use agents end to end, against local stand-ins of their APIs,
judged by the vendors' own SDKs.

Each stand-in (an HTTP server thread on 127.0.0.1) scripts its replies from the task's
oracle: every turn is the scripted expert's next macro written as the vendor's tool
calls (a multi-action turn), so the replies solve a real SimpleDataEntry episode on a
real session. Every reply is built as the SDK's response model and every request the
agent sends is checked against the SDK's request type (:mod:`sdk_shapes`), so a shape
mistake on either side fails. The scripts add a tool the env cannot play (a tool
error), a 429 with ``retry-after``, a 5xx and, for OpenAI, a pending safety check. The
agents run through ``evaluate.run_agent``, so the files it writes are checked for the
API key.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cua_standin import (
    StandIn,
    anthropic_block,
    expert_macro,
    gemini_calls,
    openai_action,
    serving,
)
from PIL import Image
from sdk_shapes import (
    anthropic_message,
    anthropic_request_type,
    check_body,
    check_gemini_body,
    gemini_response,
    openai_request_type,
    openai_response,
)

from uirl_agents.episodes.rollout import EpisodeSpec
from uirl_agents.episodes.trajectories import load_episodes
from uirl_agents.evaluation.agents import AgentSpecError, parse_agent
from uirl_agents.evaluation.benchmark import run_agent, write_reports
from uirl_agents.evaluation.cost import DEFAULT_PRICES, ModelPrice
from uirl_agents.policies.cua import ScreenScaler, TransportConfig, VendorApiError
from uirl_agents.policies.usage import normalize_usage
from uirl_gym.actions import Action, ActionType
from uirl_gym.runtimes.local import LocalRuntime
from uirl_gym.vector import SessionVectorEnv

SECRET = "sk-test-9f8e7d6c5b4a-never-written"
EPISODE = EpisodeSpec(seed=3, options={"task": "simple_data_entry", "num_rows": 1})
TOOLSET = {"type": "computer_toolset_20260801", "configs": {
    m: {"enabled": False}
    for m in ("hold_key", "left_mouse_down", "left_mouse_up", "middle_click", "zoom")}}  # fmt: skip


@pytest.fixture
def serve() -> Iterator[Callable[[StandIn], str]]:
    """Starts stand-ins on 127.0.0.1; returns each one's root URL; stops them after."""
    with contextlib.ExitStack() as stack:
        yield lambda stand_in: stack.enter_context(serving(stand_in))[0]


@pytest.fixture(scope="module")
def envs(runtime: LocalRuntime) -> Iterator[SessionVectorEnv]:
    """One sub-env on the shared runtime (real sessions, real Chromium)."""
    vector = SessionVectorEnv(1, runtime=runtime)
    try:
        yield vector
    finally:
        vector.close()


def decode_png(data: str) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(data))))


# Anthropic


ANTHROPIC_USAGE = {"input_tokens": 1500, "output_tokens": 60, "cache_read_input_tokens": 500,
                   "cache_creation_input_tokens": 0}  # fmt: skip


def anthropic_reply(content: list[dict[str, Any]], model: str = "m", n: int = 0) -> dict[str, Any]:
    """A Messages reply holding ``content``, built as the SDK's ``Message``."""
    stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
    return anthropic_message({"id": f"msg_{n}", "type": "message", "role": "assistant",
                              "content": content, "model": model, "stop_reason": stop,
                              "stop_sequence": None, "usage": ANTHROPIC_USAGE})  # fmt: skip


def anthropic_script(envs: SessionVectorEnv) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Turn 1: a middle click (switched off in the toolset: a tool error); then the
    expert's macros as toolset calls."""
    turns = iter(range(1000))

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        n = next(turns)
        if n == 0:
            content = [{"type": "text", "text": "Let me try the wheel."},
                       {"type": "tool_use", "id": "toolu_0_0", "name": "middle_click",
                        "input": {"coordinate": [10, 10]}, "toolset_name": "computer",
                        "caller": {"type": "direct"}}]  # fmt: skip
        else:
            macro = [a for a in expert_macro(envs) if a.type is not ActionType.FINISH]
            content = [anthropic_block(a, f"toolu_{n}_{k}") for k, a in enumerate(macro)]
            content = content or [{"type": "text", "text": "The row is submitted."}]
        return anthropic_reply(content, body["model"], n)

    return reply


def run_vendor_agent(
    agent: str, envs: SessionVectorEnv, out: Path
) -> tuple[dict[str, Any], list[Any]]:
    spec = parse_agent(agent)
    result = run_agent(spec, envs, [EPISODE], out, max_steps=30, seed=0, settings={"rows": "1"})
    write_reports(out, [result], {"rows": "1"})
    return json.loads(json.dumps(result.__dict__)), load_episodes(out / agent.replace(":", "_"))


def assert_key_never_written(root: Path, log_text: str) -> None:
    files = [p for p in root.rglob("*") if p.is_file()]
    assert files
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in log_text


def test_anthropic_agent_solves_an_episode_against_the_stand_in(
    envs: SessionVectorEnv,
    serve: Callable[[StandIn], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    stand_in = StandIn("/v1/messages", anthropic_script(envs))
    stand_in.failures = {1: [(429, {"retry-after": "0.3"})], 2: [(529, {"retry-after": "0.05"})]}
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", serve(stand_in))

    result, (episode,) = run_vendor_agent("anthropic:claude-sonnet-5-5", envs, tmp_path)

    assert episode.success, [(s.action, s.error) for s in episode.steps]
    assert episode.steps[0].action is None and "middle_click" in episode.steps[0].error
    bodies, headers = stand_in.bodies, stand_in.headers
    for body in bodies:  # the toolset is generally available: no beta header, GA types
        check_body(body, anthropic_request_type(beta=False))
    assert {h["x-api-key"] for h in headers} == {SECRET}
    assert {h["anthropic-version"] for h in headers} == {"2023-06-01"}
    assert not any("anthropic-beta" in h for h in headers)
    assert all(b["tools"] == [TOOLSET] and b["model"] == "claude-sonnet-5-5" for b in bodies)
    first = bodies[0]["messages"]
    assert [m["role"] for m in first] == ["user"]
    assert first[0]["content"][0] == {"type": "text", "text": episode.instruction}
    image = first[0]["content"][1]
    assert image["type"] == "image" and image["source"]["media_type"] == "image/png"
    assert decode_png(image["source"]["data"]).shape == (640, 1024, 3)
    # Every later request answers each tool_use of the last reply, in order; the
    # turn's screenshot rides on the last result; the middle click came back as an error.
    for k, body in enumerate(bodies[1:], 1):
        assistant, results = body["messages"][-2], body["messages"][-1]
        uses = [b for b in assistant["content"] if b["type"] == "tool_use"]
        assert assistant["role"] == "assistant" and results["role"] == "user"
        assert [r["tool_use_id"] for r in results["content"]] == [u["id"] for u in uses]
        assert {r["toolset_name"] for r in results["content"]} == {"computer"}
        last = results["content"][-1]["content"]
        assert last[-1]["type"] == "image"
        assert decode_png(last[-1]["source"]["data"]).shape == (640, 1024, 3)
        images = json.dumps(body).count('"type": "image"')
        assert images <= 3, (k, images)
    error = bodies[1]["messages"][-1]["content"][0]
    assert error["is_error"] is True and "middle_click" in error["content"][0]["text"]
    assert len(bodies) >= 3 and any(
        len([b for b in m["content"] if b["type"] == "tool_use"]) >= 2
        for m in bodies[-1]["messages"]
        if m["role"] == "assistant"
    ), "no multi-action turn"
    # The 429 was retried after its retry-after (and the 529 after its own).
    times = stand_in.attempts
    assert len(times) == len(bodies) + 2
    assert times[2] - times[1] >= 0.3
    # Usage per turn -> tokens and cost in the summary.
    turns = len(bodies)
    assert result["tokens"]["input_tokens"] == 1500 * turns
    assert result["tokens"]["cache_read_input_tokens"] == 500 * turns
    assert result["tokens"]["requests"] == turns
    assert result["tokens"]["image_tokens"] > 0
    price = DEFAULT_PRICES["claude-sonnet-5-5"]
    expected = turns * (1500 * price.input + 500 * price.cache_read + 60 * price.output) / 1e6
    assert result["cost_usd"] == pytest.approx(expected)
    assert result["cost_per_success_usd"] == pytest.approx(expected)
    table = (tmp_path / "results.md").read_text()
    assert f"${expected:.4f}" in table
    replay = (tmp_path / "anthropic_claude-sonnet-5-5" / "index.html").read_text()
    assert replay.count("tokens in 2,000 / out 60") == turns  # on each turn's first step
    assert_key_never_written(tmp_path, caplog.text)


# OpenAI


SAFETY_CHECK = {"id": "cu_sc_1", "code": "malicious_instructions",
                "message": "The page may hold instructions."}  # fmt: skip
OPENAI_USAGE = {"input_tokens": 1200,
                "input_tokens_details": {"cached_tokens": 200, "cache_write_tokens": 100},
                "output_tokens": 40, "output_tokens_details": {"reasoning_tokens": 16},
                "total_tokens": 1240}  # fmt: skip


def openai_call(call_id: str, actions: list[dict[str, Any]], checks: list | None = None) -> dict:
    """A GA ``computer_call`` item: a batch of actions."""
    return {"type": "computer_call", "id": f"cu_{call_id}", "call_id": call_id,
            "actions": actions, "pending_safety_checks": checks or [], "status": "completed"}  # fmt: skip


def openai_reply(output: list[dict[str, Any]], n: int = 0, model: str = "m") -> dict[str, Any]:
    """A Responses reply, built as the SDK's ``Response``."""
    return openai_response({"id": f"resp_{n}", "model": model, "output": output,
                            "usage": OPENAI_USAGE})  # fmt: skip


def openai_script(envs: SessionVectorEnv) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Every turn the expert's macro as one batched computer_call, which carries a
    safety check on turn 0; turn 1 starts with a call of a wheel click (no env action)."""
    turns = iter(range(1000))

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        n = next(turns)
        actions = [openai_action(a) for a in expert_macro(envs) if a.type is not ActionType.FINISH]
        output: list[dict[str, Any]] = [
            {"type": "reasoning", "id": f"rs_{n}", "summary": [
                {"type": "summary_text", "text": f"Turn {n}: fill the form."}]}
        ]  # fmt: skip
        if n == 1:
            output.append(openai_call("call_wheel", [{"type": "click", "button": "wheel",
                                                      "x": 5, "y": 5}]))  # fmt: skip
        if actions:
            output.append(openai_call(f"call_{n}", actions, [SAFETY_CHECK] if n == 0 else []))
        else:
            output.append({"type": "message", "id": f"msg_{n}", "role": "assistant",
                           "status": "completed", "content": [
                               {"type": "output_text", "text": "Done.", "annotations": []}]})  # fmt: skip
        return openai_reply(output, n, body["model"])

    return reply


def test_openai_cua_agent_solves_an_episode_against_the_stand_in(
    envs: SessionVectorEnv,
    serve: Callable[[StandIn], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    stand_in = StandIn("/v1/responses", openai_script(envs))
    stand_in.failures = {1: [(500, {"retry-after": "0.05"}), (429, {"retry-after": "0.3"})]}
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_BASE_URL", serve(stand_in) + "/v1")

    result, (episode,) = run_vendor_agent("openai-cua:gpt-5.4", envs, tmp_path)

    assert episode.success, [(s.action, s.error) for s in episode.steps]
    bodies = stand_in.bodies
    for body in bodies:
        check_body(body, openai_request_type())
    assert {h["authorization"] for h in stand_in.headers} == {f"Bearer {SECRET}"}
    assert all(b["tools"] == [{"type": "computer"}] and b["truncation"] == "auto" for b in bodies)
    (message,) = bodies[0]["input"]
    assert "previous_response_id" not in bodies[0] and message["role"] == "user"
    text, image = message["content"]
    assert text == {"type": "input_text", "text": episode.instruction}
    assert image["type"] == "input_image" and image["detail"] == "high"
    prefix = "data:image/png;base64,"
    assert decode_png(image["image_url"].removeprefix(prefix)).shape == (640, 1024, 3)
    replies = [
        [i["call_id"] for i in r["output"] if i["type"] == "computer_call"]
        for r in stand_in.replies
    ]
    assert max(len(c["actions"]) for r in stand_in.replies for c in r["output"]
               if c["type"] == "computer_call") >= 2, "no batch of actions"  # fmt: skip
    for k, body in enumerate(bodies[1:], 1):
        assert body["previous_response_id"] == f"resp_{k - 1}"
        outputs = [i for i in body["input"] if i.get("type") == "computer_call_output"]
        assert [o["call_id"] for o in outputs] == replies[k - 1]
        for o in outputs:
            assert o["output"]["type"] == "computer_screenshot"
            assert o["output"]["image_url"].startswith(prefix)
            assert decode_png(o["output"]["image_url"].removeprefix(prefix)).shape == (640, 1024, 3)
    # The safety check was acknowledged (the default policy), on its call.
    first_outputs = [i for i in bodies[1]["input"] if i.get("type") == "computer_call_output"]
    assert first_outputs[0]["acknowledged_safety_checks"] == [SAFETY_CHECK]
    assert episode.steps[0].text and "safety" not in (episode.steps[0].error or "")
    # The wheel click: an invalid step, and a user message saying why.
    wheel = [s for s in episode.steps if s.action is None]
    assert len(wheel) == 1 and "wheel" in wheel[0].error
    notes = [i for i in bodies[2]["input"] if i.get("role") == "user"]
    assert notes and "wheel" in notes[0]["content"][0]["text"]
    # The 500 and the 429 were retried; the 429 after its retry-after.
    times = stand_in.attempts
    assert len(times) == len(bodies) + 2 and times[3] - times[2] >= 0.3
    turns = len(bodies)
    assert result["tokens"]["input_tokens"] == 900 * turns  # cache reads and writes apart
    assert result["tokens"]["cache_read_input_tokens"] == 200 * turns
    assert result["tokens"]["cache_creation_input_tokens"] == 100 * turns
    assert result["tokens"]["output_tokens"] == 40 * turns
    price = DEFAULT_PRICES["gpt-5.4"]
    assert result["cost_usd"] == pytest.approx(
        turns * (1000 * price.input + 200 * price.cache_read + 40 * price.output) / 1e6
    )
    assert_key_never_written(tmp_path, caplog.text)


# Gemini


GEMINI_MODEL = "gemini-3.5-flash"
GEMINI_USAGE = {"promptTokenCount": 2000, "cachedContentTokenCount": 0,
                "candidatesTokenCount": 30, "thoughtsTokenCount": 20}  # fmt: skip
CONFIRM = {"decision": "require_confirmation", "explanation": "Submitting a form."}


def gemini_script(envs: SessionVectorEnv) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Turn 0: ``navigate`` (leaves the app: invalid); then the expert's macros, the
    first call of turn 1 asking for confirmation."""
    turns = iter(range(1000))

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        n = next(turns)
        if n == 0:
            calls = [{"name": "navigate", "args": {"url": "https://example.com"}}]
        else:
            calls = gemini_calls(expert_macro(envs))
            if n == 1 and calls:
                calls[0]["args"]["safety_decision"] = CONFIRM
        parts = [{"functionCall": c} for c in calls] or [{"text": "Done."}]
        return gemini_response({"candidates": [{"content": {"role": "model", "parts": parts},
                                "finishReason": "STOP"}], "usageMetadata": GEMINI_USAGE})  # fmt: skip

    return reply


def test_gemini_agent_solves_an_episode_against_the_stand_in(
    envs: SessionVectorEnv,
    serve: Callable[[StandIn], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    stand_in = StandIn(f"/v1beta/models/{GEMINI_MODEL}:generateContent", gemini_script(envs))
    stand_in.failures = {1: [(503, {"retry-after": "0.2"})]}
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", SECRET)
    monkeypatch.setenv("GEMINI_BASE_URL", serve(stand_in))

    result, (episode,) = run_vendor_agent(f"gemini-cua:{GEMINI_MODEL}", envs, tmp_path)

    assert episode.success, [(s.action, s.error) for s in episode.steps]
    assert episode.steps[0].action is None and "navigate" in episode.steps[0].error
    bodies = stand_in.bodies
    for body in bodies:
        check_gemini_body(body)
    assert {h["x-goog-api-key"] for h in stand_in.headers} == {SECRET}
    tool = {"computerUse": {"environment": "ENVIRONMENT_BROWSER", "excludedPredefinedFunctions": [
        "navigate", "go_back", "go_forward", "middle_click", "mouse_down", "mouse_up",
        "key_down", "key_up"]}}  # fmt: skip
    assert all(b["tools"] == [tool] for b in bodies)
    text, image = bodies[0]["contents"][0]["parts"]
    assert text == {"text": episode.instruction}
    assert decode_png(image["inlineData"]["data"]).shape == (800, 1280, 3)  # the grid is 0-999
    for k, body in enumerate(bodies[1:], 1):
        model, user = body["contents"][-2], body["contents"][-1]
        assert model == stand_in.replies[k - 1]["candidates"][0]["content"]
        calls = [p["functionCall"]["name"] for p in model["parts"]]
        responses = [p["functionResponse"] for p in user["parts"]]
        assert [r["name"] for r in responses] == calls
        last = responses[-1]["parts"][-1]["inlineData"]
        assert decode_png(last["data"]).shape == (800, 1280, 3)
        assert json.dumps(body).count('"inlineData"') <= 3
    first = [p["functionResponse"] for p in bodies[1]["contents"][-1]["parts"]]
    assert "navigate" in first[0]["response"]["error"]
    confirmed = [p["functionResponse"] for p in bodies[2]["contents"][-1]["parts"]]
    assert confirmed[0]["response"]["safety_acknowledgement"] == "true"
    assert stand_in.attempts[2] - stand_in.attempts[1] >= 0.2  # the 503's retry-after
    turns = len(bodies)
    assert result["tokens"]["output_tokens"] == 50 * turns  # thoughts are billed as output
    price = DEFAULT_PRICES[GEMINI_MODEL]
    assert result["cost_usd"] == pytest.approx(
        turns * (2000 * price.input + 50 * price.output) / 1e6
    )
    assert_key_never_written(tmp_path, caplog.text)


# The parts, without sessions


@pytest.mark.parametrize("display", [(1024, 640), (1280, 800), (1000, 625), (800, 500)])
def test_screen_scaling_is_an_exact_inverse(display: tuple[int, int]) -> None:
    scaler = ScreenScaler(*display)
    xs = np.arange(scaler.width)
    ys = np.arange(scaler.height)
    assert all(scaler.to_model(*scaler.to_screen(x, 0))[0] == x for x in xs)
    assert all(scaler.to_model(*scaler.to_screen(0, y))[1] == y for y in ys)
    assert scaler.to_screen(scaler.width - 1, scaler.height - 1) <= (1279, 799)
    for bad in ((scaler.width, 0), (-1, 5), ("a", 3), (True, 2)):
        with pytest.raises(ValueError, match="coordinate"):
            scaler.to_screen(*bad)
    assert ScreenScaler.fit(1024, 768) == ScreenScaler(1024, 640)
    assert ScreenScaler.fit(1366, 768) == ScreenScaler(1229, 768)


def test_keys_are_translated() -> None:
    from uirl_agents.policies.anthropic import xdotool_combos
    from uirl_agents.policies.openai_cua import keypress_combo

    assert xdotool_combos("ctrl+a BackSpace") == ["ctrl+a", "Backspace"]
    assert xdotool_combos("Return") == ["Enter"] and xdotool_combos("KP_0") == ["Numpad0"]
    assert xdotool_combos("ctrl+shift+Page_Down") == ["ctrl+shift+PageDown"]
    assert xdotool_combos("ctrl+minus") == ["ctrl+-"]
    assert keypress_combo(["CTRL", "A"]) == "ctrl+a"
    assert keypress_combo(["ARROWDOWN"]) == "ArrowDown" and keypress_combo(["ESC"]) == "Escape"
    with pytest.raises(ValueError, match="not a key|unknown"):
        xdotool_combos("ctrl+Hyper_Q")
    with pytest.raises(ValueError, match="keypress"):
        keypress_combo([])


def test_usage_is_normalised_and_priced(tmp_path: Path) -> None:
    from uirl_agents.evaluation.cost import find_price, load_prices
    from uirl_agents.policies.usage import add_usage

    anthropic = normalize_usage(ANTHROPIC_USAGE)
    openai = normalize_usage(OPENAI_USAGE)
    chat = normalize_usage({"prompt_tokens": 10, "completion_tokens": 3})
    gemini = normalize_usage(
        {"promptTokenCount": 50, "candidatesTokenCount": 5, "thoughtsTokenCount": 2}
    )
    assert (anthropic["input_tokens"], anthropic["cache_read_input_tokens"]) == (1500, 500)
    assert (openai["input_tokens"], openai["cache_read_input_tokens"]) == (900, 200)
    assert openai["cache_creation_input_tokens"] == 100  # cache writes, counted apart
    assert (chat["input_tokens"], chat["output_tokens"], gemini["output_tokens"]) == (10, 3, 7)
    total = add_usage([anthropic, None, openai])
    assert total["requests"] == 2 and total["output_tokens"] == 100
    assert add_usage([None]) is None
    # A dated snapshot is priced as its model; a family name prices nothing it does
    # not name (Opus 4.6 is $5/$25, not Opus 4's $15/$75).
    assert find_price("claude-sonnet-4-5-20250929", DEFAULT_PRICES) == ModelPrice(3, 15, 0.3, 3.75)
    assert find_price("claude-opus-4-6", DEFAULT_PRICES) == ModelPrice(5, 25, 0.5, 6.25)
    assert find_price("claude-opus-4-20250514", DEFAULT_PRICES) == ModelPrice(15, 75, 1.5, 18.75)
    assert find_price("gpt-5.4-2026-03-05", DEFAULT_PRICES) == DEFAULT_PRICES["gpt-5.4"]
    assert find_price("gpt-5.4-nano", DEFAULT_PRICES) is None
    assert find_price("claude-opus-4-9", DEFAULT_PRICES) is None
    assert find_price("my-model", DEFAULT_PRICES) is None
    assert all(price.source for price in DEFAULT_PRICES.values())
    chat_written = normalize_usage({"prompt_tokens": 10, "completion_tokens": 1,
                                    "prompt_tokens_details": {"cache_write_tokens": 4}})  # fmt: skip
    assert (chat_written["input_tokens"], chat_written["cache_creation_input_tokens"]) == (6, 4)
    written = {"input_tokens": 0, "cache_creation_input_tokens": 1_000_000}
    assert DEFAULT_PRICES["gpt-6-sol"].cost_usd(written) == pytest.approx(2.50)
    assert ModelPrice(2.0, 10.0).cost_usd(
        {"input_tokens": 1_000_000, "output_tokens": 100_000, "cache_read_input_tokens": 0}
    ) == pytest.approx(3.0)
    path = tmp_path / "prices.yaml"
    path.write_text("my-model: {input: 1.0, output: 2.0}\n")
    assert load_prices(path)["my-model"] == ModelPrice(1.0, 2.0)
    path.write_text("my-model: {input: 1.0, outptu: 2.0}\n")
    with pytest.raises(ValueError, match="my-model"):
        load_prices(path)


def test_agent_specs() -> None:
    spec = parse_agent("anthropic:claude-sonnet-5-5,display=1280x800,max_tokens=512")
    assert (spec.kind, spec.target, spec.max_tokens) == ("anthropic", "claude-sonnet-5-5", 512)
    assert (
        dict(spec.options) == {"display": "1280x800"}
        and spec.label == spec.kind + ":" + spec.target
    )
    assert dict(parse_agent("anthropic:m,prompt_caching=1").options) == {"prompt_caching": "1"}
    spec = parse_agent("anthropic:claude-opus-4-7,tool=computer_20250124")
    assert dict(spec.options) == {"tool": "computer_20250124"}
    spec = parse_agent("openai-cua:gpt-5.4,safety_checks=refuse,tool=computer_use_preview")
    assert dict(spec.options) == {"safety_checks": "refuse", "tool": "computer_use_preview"}
    spec = parse_agent("gemini-cua:gemini-3.5-flash")
    assert spec.label == "gemini-cua:gemini-3.5-flash"
    for bad in ("anthropic:m,display=big", "openai-cua:m,safety_checks=maybe",
                "anthropic:m,format=ui-tars", "openai-cua:m,max_tokens=5",
                "gemini-cua:m,display=1024x640", "anthropic:m,tool=computer",
                "openai-cua:m,tool=computer_20251124", "gemini-cua:m,tool=computer"):  # fmt: skip
        with pytest.raises(AgentSpecError, match="agent"):
            parse_agent(bad)


def _observation() -> dict[str, Any]:
    return {"screenshot": np.full((800, 1280, 3), 200, np.uint8), "instruction": "Copy row 1."}


def _openai_policy(safety_checks: str = "acknowledge") -> Any:
    from uirl_agents.policies.openai_cua import OpenAICUAPolicy, OpenAICUAPolicyConfig

    transport = TransportConfig(max_retries=2, backoff_initial_s=0.01, backoff_max_s=0.02)
    return OpenAICUAPolicy(OpenAICUAPolicyConfig(safety_checks=safety_checks, transport=transport))


def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from uirl_agents.policies.anthropic import AnthropicPolicy

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ValueError, match="ANTHROPIC_API_KEY is not set"):
        AnthropicPolicy()


def test_api_errors_end_the_episode_or_the_run_without_the_key(
    serve: Callable[[StandIn], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stand_in = StandIn("/v1/responses", lambda body: {})
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_BASE_URL", serve(stand_in) + "/v1")
    # A 400 (a conversation the API refuses): this episode ends, the run goes on.
    stand_in.failures = {0: [(400, {})]}
    with _openai_policy() as policy:
        (step,) = policy.act([_observation()], [0])
    assert step.action.type is ActionType.FINISH and "HTTP 400" in step.error
    # A reply off the documented shape: the same.
    stand_in.reply = lambda body: {"id": "r", "output": "not a list of items"}
    with _openai_policy() as policy:
        (step,) = policy.act([_observation()], [0])
    assert step.action.type is ActionType.FINISH and step.error.startswith("MalformedResponse")
    # Backoff without retry-after, then a 401: fatal, and the key is not in the message.
    stand_in.failures = {len(stand_in.bodies): [(503, {}), (401, {})]}
    with _openai_policy() as policy, pytest.raises(VendorApiError, match="HTTP 401") as caught:
        policy.act([_observation()], [0])
    assert SECRET not in str(caught.value) and caught.value.status_code == 401
    assert len(stand_in.attempts) == 4


def test_prompt_caching_marks_the_latest_turn_and_drops_screenshots_in_chunks(
    serve: Callable[[StandIn], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from uirl_agents.policies.anthropic import AnthropicPolicy, AnthropicPolicyConfig

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        use = {"type": "tool_use", "id": f"t{len(body['messages'])}", "name": "screenshot",
               "input": {}, "toolset_name": "computer", "caller": {"type": "direct"}}  # fmt: skip
        return anthropic_reply([use], body["model"])

    stand_in = StandIn("/v1/messages", reply)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", serve(stand_in))
    config = AnthropicPolicyConfig(prompt_caching=True, max_images=2)
    with AnthropicPolicy(config) as policy:
        for _ in range(6):
            policy.act([_observation()], [0])
    images = [json.dumps(b).count('"type": "image"') for b in stand_in.bodies]
    assert images == [1, 2, 3, 2, 3, 2]  # dropped to 2 when 4 would go
    for body in stand_in.bodies:
        marked = [(m, b) for m in body["messages"] for b in m["content"] if "cache_control" in b]
        assert len(marked) == 1 and marked[0][0] is body["messages"][-1]
        assert marked[0][1] is body["messages"][-1]["content"][-1]


def test_refused_safety_check_ends_the_episode(
    serve: Callable[[StandIn], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    check = openai_call("c1", [{"type": "click", "button": "left", "x": 10, "y": 10}],
                        [SAFETY_CHECK])  # fmt: skip
    stand_in = StandIn("/v1/responses", lambda body: openai_reply([check], 1, body["model"]))
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_BASE_URL", serve(stand_in) + "/v1")
    with _openai_policy("refuse") as policy:
        (step,) = policy.act([_observation()], [0])
    assert step.action.type is ActionType.FINISH
    assert step.extra["stop"] == "SafetyCheckRefused: malicious_instructions"


# Vendor tools, actions and models


def _drain(policy: Any, steps: int) -> list[Any]:
    """``steps`` single-env steps (the first asks for a turn; the rest play its calls)."""
    return [policy.act([_observation()], [0])[0] for _ in range(steps)]


@pytest.mark.parametrize(
    ("agent", "tool", "beta"),
    [
        ("anthropic:claude-sonnet-5-5", "computer_toolset_20260801", None),
        ("anthropic:claude-opus-4-7", "computer_20251124", "computer-use-2025-11-24"),
        ("anthropic:claude-sonnet-4-6", "computer_20251124", "computer-use-2025-11-24"),
        ("anthropic:claude-haiku-4-5", "computer_20250124", "computer-use-2025-01-24"),
        (
            "anthropic:claude-opus-4-7,tool=computer_20250124",
            "computer_20250124",
            "computer-use-2025-01-24",
        ),
    ],
)
def test_anthropic_tool_and_beta_header_follow_the_model(
    agent: str, tool: str, beta: str | None, serve: Callable[[StandIn], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    from uirl_agents.evaluation.agents import build_policy

    toolset = tool.startswith("computer_toolset")
    click = anthropic_block(Action(ActionType.LEFT_CLICK, 640, 400), "t1", toolset=toolset)
    click["input"]["text"] = "shift"  # held while it clicks
    stand_in = StandIn("/v1/messages", lambda body: anthropic_reply([click], body["model"]))
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", serve(stand_in))
    policy, _ = build_policy(parse_agent(agent), lambda i: {}, Path("."), seed=0)
    with policy:
        (step,) = policy.act([_observation()], [0])
    (body,), (headers,) = stand_in.bodies, stand_in.headers
    check_body(body, anthropic_request_type(beta=beta is not None))
    assert headers.get("anthropic-beta") == beta
    assert body["tools"][0]["type"] == tool
    assert step.action == Action(ActionType.LEFT_CLICK, 640, 400, keys="shift")


def test_anthropic_actions_hold_keys_repeat_and_wait(
    serve: Callable[[StandIn], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from uirl_agents.policies.anthropic import AnthropicPolicy

    def member(name: str, **tool_input: Any) -> dict[str, Any]:
        return {"type": "tool_use", "id": f"t{name}", "name": name, "input": tool_input,
                "toolset_name": "computer", "caller": {"type": "direct"}}  # fmt: skip

    turn = [
        member("double_click", coordinate=[100, 100], text="ctrl"),
        member("left_click_drag", start_coordinate=[10, 10], coordinate=[20, 20], text="shift"),
        member("scroll", coordinate=[50, 50], scroll_direction="down", scroll_amount=2,
               text="ctrl+shift"),
        member("key", text="Down", repeat=3),
        member("wait", duration=1),
        member("left_click", coordinate=[100, 100], text="a"),  # "a" is no modifier
        member("zoom", region=[0, 0, 10, 10]),  # switched off: the env has no zoom
    ]  # fmt: skip
    stand_in = StandIn("/v1/messages", lambda body: anthropic_reply(turn, body["model"]))
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", serve(stand_in))
    with AnthropicPolicy() as policy:
        steps = _drain(policy, 6)
        started = time.monotonic()
        (wait,) = policy.act([_observation()], [0])
        waited = time.monotonic() - started
        bad_key, zoom, _ = _drain(policy, 3)  # the third sends the results
    screen = ScreenScaler(1024, 640).to_screen
    assert [s.action for s in steps] == [
        Action(ActionType.DOUBLE_CLICK, *screen(100, 100), keys="ctrl"),
        Action(ActionType.DRAG, *screen(10, 10), end_x=screen(20, 20)[0],
               end_y=screen(20, 20)[1], keys="shift"),
        Action(ActionType.SCROLL, *screen(50, 50), direction="down", amount=2, keys="ctrl+shift"),
        *[Action(ActionType.KEYS, keys="Down")] * 3,
    ]  # fmt: skip
    assert wait.action == Action(ActionType.SCREENSHOT) and wait.extra["wait_s"] == 1.0
    assert waited >= 1.0
    assert bad_key.action is None and "modifier keys only" in bad_key.error
    assert zoom.action is None and "zoom" in zoom.error
    for body in stand_in.bodies:
        check_body(body, anthropic_request_type(beta=False))
    results = stand_in.bodies[1]["messages"][-1]["content"]
    assert [r.get("is_error", False) for r in results] == [False] * 5 + [True, True]


def test_openai_batches_are_played_in_order_whole_or_not_at_all(
    serve: Callable[[StandIn], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    first = openai_call("c1", [
        {"type": "click", "button": "left", "x": 100, "y": 100, "keys": ["SHIFT"]},
        {"type": "move", "x": 200, "y": 100, "keys": ["CTRL"]},
        {"type": "scroll", "x": 50, "y": 50, "scroll_x": 0, "scroll_y": 160, "keys": ["ALT"]},
        {"type": "drag", "path": [{"x": 1, "y": 1}, {"x": 9, "y": 9}], "keys": ["META"]},
        {"type": "keypress", "keys": ["CTRL", "A"]},
        {"type": "wait"},
    ])  # fmt: skip
    second = openai_call("c2", [
        {"type": "click", "button": "left", "x": 5, "y": 5},
        {"type": "click", "button": "back", "x": 5, "y": 5},  # leaves the app: the batch fails
    ])  # fmt: skip
    stand_in = StandIn("/v1/responses", lambda body: openai_reply([first, second], model="gpt-5.4"))
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_BASE_URL", serve(stand_in) + "/v1")
    with _openai_policy() as policy:
        steps = _drain(policy, 8)  # the eighth sends the results and plays the next turn
    screen = ScreenScaler(1024, 640).to_screen
    assert [s.action for s in steps[:6]] == [
        Action(ActionType.LEFT_CLICK, *screen(100, 100), keys="shift"),
        Action(ActionType.MOUSE_MOVE, *screen(200, 100), keys="ctrl"),
        Action(ActionType.SCROLL, *screen(50, 50), direction="down", amount=2, keys="alt"),
        Action(ActionType.DRAG, *screen(1, 1), end_x=screen(9, 9)[0], end_y=screen(9, 9)[1],
               keys="meta"),
        Action(ActionType.KEYS, keys="ctrl+a"),
        Action(ActionType.SCREENSHOT),
    ]  # fmt: skip
    assert steps[5].extra["wait_s"] == 1.0
    assert steps[6].action is None and "actions[1]" in steps[6].error and "back" in steps[6].error
    assert steps[7].action == steps[0].action  # the next turn (the same reply) begins
    for body in stand_in.bodies:
        check_body(body, openai_request_type())
    outputs = [i["call_id"] for i in stand_in.bodies[1]["input"] if "call_id" in i]
    note = stand_in.bodies[1]["input"][-1]
    assert outputs == ["c1", "c2"] and "actions[1]" in note["content"][0]["text"]


def test_gemini_vocabularies_follow_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    from uirl_agents.policies.gemini_cua import GeminiCUAPolicy, GeminiCUAPolicyConfig

    monkeypatch.setenv("GEMINI_API_KEY", SECRET)
    legacy = GeminiCUAPolicy(GeminiCUAPolicyConfig(model="gemini-3-flash-preview"))
    current = GeminiCUAPolicy()
    at = {"x": 500, "y": 500}
    call = legacy._map_call({"name": "type_text_at", "args": {**at, "text": "hi"}}, 0)
    assert [a.type for a in call.actions] == [  # no Enter: press_enter defaults to false
        ActionType.LEFT_CLICK, ActionType.KEYS, ActionType.KEYS, ActionType.TYPE]  # fmt: skip
    assert legacy._map_call({"name": "wait_5_seconds", "args": {}}, 0).waits == {0: 5.0}
    assert "not supported" in legacy._map_call({"name": "click", "args": at}, 0).error
    call = current._map_call({"name": "type", "args": {"text": "hi", "press_enter": True}}, 0)
    assert call.actions == [
        Action(ActionType.TYPE, text="hi"),
        Action(ActionType.KEYS, keys="Enter"),
    ]
    hotkey = current._map_call({"name": "hotkey", "args": {"keys": ["Control", "A"]}}, 0)
    assert hotkey.actions == [Action(ActionType.KEYS, keys="Control+a")]
    assert current._map_call({"name": "wait", "args": {"seconds": 2}}, 0).waits == {0: 2.0}
    assert "at most 30" in current._map_call({"name": "wait", "args": {"seconds": 99}}, 0).error
    click = current._map_call({"name": "triple_click", "args": at}, 0)
    assert click.actions == [Action(ActionType.TRIPLE_CLICK, 640, 400)]
    for name in ("middle_click", "key_down", "navigate", "click_at"):
        assert "not supported" in current._map_call({"name": name, "args": at}, 0).error
    excluded = current.tool()["computerUse"]["excludedPredefinedFunctions"]
    assert {"middle_click", "mouse_down", "key_up", "navigate"} <= set(excluded)
    assert "search" in legacy.tool()["computerUse"]["excludedPredefinedFunctions"]


def test_deprecated_models_and_unknown_prices_warn(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from uirl_agents.evaluation.benchmark import price_of
    from uirl_agents.policies.anthropic import AnthropicPolicy, AnthropicPolicyConfig
    from uirl_agents.policies.gemini_cua import GeminiCUAPolicy
    from uirl_agents.policies.openai_cua import OpenAICUAPolicy, OpenAICUAPolicyConfig

    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(name, SECRET)
    caplog.set_level(logging.WARNING)
    defaults = [AnthropicPolicy(), OpenAICUAPolicy(), GeminiCUAPolicy()]
    assert not caplog.records, caplog.text  # the defaults are current, and priced
    for policy in defaults:
        kind, model = policy.name.split(":")
        assert price_of(parse_agent(f"{kind}:{model}")) is not None, model
        policy.close()
    AnthropicPolicy(AnthropicPolicyConfig(model="claude-sonnet-4-5")).close()
    OpenAICUAPolicy(OpenAICUAPolicyConfig(model="computer-use-preview")).close()
    AnthropicPolicy(AnthropicPolicyConfig(model="claude-next")).close()
    assert price_of(parse_agent("anthropic:claude-opus-4-9")) is None
    warnings = [r.getMessage() for r in caplog.records]
    assert "claude-sonnet-4-5 is deprecated" in warnings[0] and "2026-11-30" in warnings[0]
    assert "computer-use-preview is deprecated" in warnings[1] and "2026-07-23" in warnings[1]
    assert "claude-next" in warnings[2] and "tool=" in warnings[2]
    assert "no price for claude-opus-4-9" in warnings[3] and "--prices" in warnings[3]


def test_the_tables_follow_the_sdks() -> None:
    """Every Claude model the anthropic SDK names has a computer tool, a price and, when
    the SDK deprecates it, a retirement date here; docs/agents.md's action table names
    every action the three vendors define."""
    import typing

    from anthropic._data import DEPRECATED_MODELS as sdk_deprecations
    from anthropic.types import ModelParam
    from anthropic.types.computer_member_name import COMPUTER_MEMBER_NAME_VALUES
    from openai.types.responses.computer_action import ComputerAction

    from uirl_agents.evaluation.cost import find_price
    from uirl_agents.policies import anthropic, gemini_cua

    assert set(sdk_deprecations) <= set(anthropic.DEPRECATED_MODELS)
    (literal, _) = typing.get_args(ModelParam)
    for model in typing.get_args(literal):
        assert any(model.startswith(p) for p in anthropic.MODEL_TOOLS), model
        if model not in sdk_deprecations:
            assert find_price(model, DEFAULT_PRICES) is not None, model
    table = (Path(__file__).resolve().parents[1] / "docs" / "agents.md").read_text()
    openai_actions = [
        typing.get_args(member.model_fields["type"].annotation)[0]
        for member in typing.get_args(typing.get_args(ComputerAction)[0])
    ]
    gemini = ("click_at", "hover_at", "type_text_at", "key_combination", "scroll_document",
              "scroll_at", "wait_5_seconds", "open_web_browser", "click", "double_click",
              "triple_click", "right_click", "move", "type", "press_key", "hotkey", "scroll",
              "wait", "take_screenshot", *gemini_cua.EXCLUDED_FUNCTIONS,
              *gemini_cua.EXCLUDED_FUNCTIONS_V2)  # fmt: skip
    for vendor, names in (("Anthropic", COMPUTER_MEMBER_NAME_VALUES),
                          ("OpenAI", openai_actions), ("Gemini", gemini)):  # fmt: skip
        missing = [n for n in names if f"| {vendor} | `{n}`" not in table]
        assert not missing, (vendor, missing)


# evaluate.py and the leaderboard


def anthropic_click_then_stop(body: dict[str, Any]) -> dict[str, Any]:
    """Every episode: one click, then the model stops (the task is not done)."""
    first = len(body["messages"]) == 1
    content = (
        [anthropic_block(Action(ActionType.LEFT_CLICK, 640, 400), "toolu_1")]
        if first
        else [{"type": "text", "text": "I give up."}]
    )
    return anthropic_reply(content, body["model"])


def openai_click_then_stop(body: dict[str, Any]) -> dict[str, Any]:
    first = "previous_response_id" not in body
    output = (
        [openai_call("call_1", [{"type": "click", "button": "left", "x": 512, "y": 320}])]
        if first
        else [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": "Stopped.", "annotations": []}]}]
    )  # fmt: skip
    return openai_reply(output, 1 if first else 2, body["model"])


@pytest.mark.slow
def test_evaluate_runs_vendor_agents_and_the_leaderboard_renders(
    serve: Callable[[StandIn], str], tmp_path: Path
) -> None:
    import os
    import subprocess
    import sys

    from playwright.sync_api import sync_playwright

    from uirl_agents.episodes.trajectories import Episode, Step
    from uirl_gym.session.browser.chromium import find_browser

    root = Path(__file__).resolve().parents[1]
    anthropic = StandIn("/v1/messages", anthropic_click_then_stop)
    openai = StandIn("/v1/responses", openai_click_then_stop)
    env = os.environ | {
        "ANTHROPIC_API_KEY": SECRET,
        "ANTHROPIC_BASE_URL": serve(anthropic),
        "OPENAI_API_KEY": SECRET,
        "OPENAI_BASE_URL": serve(openai) + "/v1",
    }
    out = tmp_path / "runs" / "vendors"
    cmd = [sys.executable, str(root / "scripts" / "evaluate.py"),
           "--agent", "anthropic:claude-sonnet-5-5", "--agent", "openai-cua:gpt-5.4",
           "--agent", "expert", "--task", "all", "--rows", "1",
           "--episodes", "1", "--max-steps", "30", "--out", str(out), "--leaderboard"]  # fmt: skip
    done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert SECRET not in done.stdout + done.stderr
    results = {a["agent"]: a for a in json.loads((out / "results.json").read_text())["agents"]}
    assert results["anthropic:claude-sonnet-5-5"]["tokens"]["requests"] == 14  # 2 an episode
    assert results["openai-cua:gpt-5.4"]["cost_usd"] > 0
    assert results["expert"]["cost_usd"] is None and results["expert"]["success_rate"] == 1.0
    table = (out / "results.md").read_text()
    assert "cost/episode" in table and "| expert | - | 7 |" in table
    assert (out / "leaderboard.html").exists() and "leaderboard:" in done.stdout

    # A second result folder (another agent, and the expert again): merged, pooled.
    other = tmp_path / "runs" / "older"
    episodes = [
        Episode(f"ep-{k}", "expert", k, {}, "copy", [1], success=k < 2,
                steps=[Step(None, Action(ActionType.FINISH))], task="simple_data_entry")
        for k in range(3)
    ]  # fmt: skip
    from uirl_agents.evaluation.benchmark import summarise

    write_reports(other, [summarise("expert", episodes), summarise("hf:other", episodes[2:])], {})
    merged = subprocess.run(
        [*cmd[:2], "--leaderboard", str(tmp_path / "runs")],
        cwd=root, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert merged.returncode == 0, merged.stderr[-3000:]
    board = json.loads((tmp_path / "runs" / "leaderboard.json").read_text())["agents"]
    assert [a["agent"] for a in board][0] == "expert" and len(board) == 4
    expert = board[0]
    assert (expert["episodes"], expert["successes"]) == (10, 9)  # 7 + 3 pooled
    assert expert["tasks"]["simple_data_entry"]["episodes"] == 4
    others = {a["agent"]: a["episodes"] for a in board[1:]}
    assert others == {"anthropic:claude-sonnet-5-5": 7, "openai-cua:gpt-5.4": 7,
                      "hf:other": 1}  # fmt: skip

    page = tmp_path / "runs" / "leaderboard.html"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=find_browser())
        tab = browser.new_page(viewport={"width": 1280, "height": 800})
        tab.goto(page.as_uri())
        rows = tab.locator("tr.entry")
        assert rows.count() == 4
        assert rows.first.locator("td.agent").inner_text() == "expert"
        assert "90% (" in rows.first.inner_text()  # 9/10 with its interval
        # Every replay link opens a page that exists; the anthropic one shows its episodes.
        hrefs = tab.eval_on_selector_all("a.replay", "as => as.map(a => a.href)")
        assert hrefs and all(Path(h.split("#")[0].removeprefix("file://")).is_file() for h in hrefs)
        tab.locator("tr.entry", has_text="anthropic").locator("a.replay").first.click()
        tab.wait_for_load_state()
        assert tab.locator("details").count() == 7 and "anthropic" in tab.title()
        assert tab.locator("h2").count() == 7  # one section per task
        tab.go_back()
        box = tab.locator("#leaderboard").bounding_box()
        assert box is not None and box["width"] > 600 and box["height"] > 100
        browser.close()
    assert_key_never_written(tmp_path, "")

"""The vendor computer-use agents end to end, against local stand-ins of their APIs.

Each stand-in (an HTTP server thread on 127.0.0.1) speaks its vendor's documented
shapes and scripts its replies from the task's oracle: every turn is the scripted
expert's next macro written as the vendor's tool calls (a multi-action turn), so the
replies solve a real SimpleDataEntry episode on a real session. The scripts add a
tool the env cannot play (a tool error), a 429 with ``retry-after``, a 5xx and, for
OpenAI, a pending safety check. The agents run through ``evaluate.run_agent``, so the
files it writes are checked for the API key.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cua_standin import (
    StandIn,
    anthropic_input,
    expert_macro,
    gemini_calls,
    openai_action,
    serving,
)
from PIL import Image

from uirl_agents.cost import DEFAULT_PRICES, ModelPrice, normalize_usage
from uirl_agents.evaluate import AgentSpecError, parse_agent, run_agent, write_reports
from uirl_agents.policies.cua import ScreenScaler, TransportConfig, VendorApiError
from uirl_agents.rollout import EpisodeSpec
from uirl_agents.trajectories import load_episodes
from uirl_gym.actions import Action, ActionType
from uirl_gym.runtimes.local import LocalRuntime
from uirl_gym.vector import SessionVectorEnv

SECRET = "sk-test-9f8e7d6c5b4a-never-written"
EPISODE = EpisodeSpec(seed=3, options={"task": "simple_data_entry", "num_rows": 1})


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


def anthropic_script(envs: SessionVectorEnv) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Turn 1: a middle click (no env action: a tool error); then the expert's macros."""
    turns = iter(range(1000))

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        n = next(turns)
        if n == 0:
            content = [{"type": "text", "text": "Let me try the wheel."},
                       {"type": "tool_use", "id": "toolu_0_0", "name": "computer",
                        "input": {"action": "middle_click", "coordinate": [10, 10]}}]  # fmt: skip
        else:
            macro = expert_macro(envs)
            content = [
                {"type": "tool_use", "id": f"toolu_{n}_{k}", "name": "computer",
                 "input": anthropic_input(a)}
                for k, a in enumerate(macro) if a.type is not ActionType.FINISH
            ]  # fmt: skip
            if not content:
                content = [{"type": "text", "text": "The row is submitted."}]
        stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
        return {"id": f"msg_{n}", "type": "message", "role": "assistant", "content": content,
                "model": body["model"], "stop_reason": stop, "usage": ANTHROPIC_USAGE}  # fmt: skip

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

    result, (episode,) = run_vendor_agent("anthropic:claude-sonnet-4-5", envs, tmp_path)

    assert episode.success, [(s.action, s.error) for s in episode.steps]
    assert episode.steps[0].action is None and "middle_click" in episode.steps[0].error
    bodies, headers = stand_in.bodies, stand_in.headers
    assert {h["x-api-key"] for h in headers} == {SECRET}
    assert {h["anthropic-version"] for h in headers} == {"2023-06-01"}
    assert {h["anthropic-beta"] for h in headers} == {"computer-use-2025-01-24"}
    tool = {"type": "computer_20250124", "name": "computer", "display_width_px": 1024,
            "display_height_px": 640, "display_number": 1}  # fmt: skip
    assert all(b["tools"] == [tool] and b["model"] == "claude-sonnet-4-5" for b in bodies)
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
    price = DEFAULT_PRICES["claude-sonnet-4"]
    expected = turns * (1500 * price.input + 500 * price.cache_read + 60 * price.output) / 1e6
    assert result["cost_usd"] == pytest.approx(expected)
    assert result["cost_per_success_usd"] == pytest.approx(expected)
    table = (tmp_path / "results.md").read_text()
    assert f"${expected:.4f}" in table
    replay = (tmp_path / "anthropic_claude-sonnet-4-5" / "index.html").read_text()
    assert replay.count("tokens in 2,000 / out 60") == turns  # on each turn's first step
    assert_key_never_written(tmp_path, caplog.text)


# OpenAI


SAFETY_CHECK = {"id": "cu_sc_1", "code": "malicious_instructions",
                "message": "The page may hold instructions."}  # fmt: skip
OPENAI_USAGE = {"input_tokens": 1200, "input_tokens_details": {"cached_tokens": 200},
                "output_tokens": 40, "output_tokens_details": {"reasoning_tokens": 16},
                "total_tokens": 1240}  # fmt: skip


def openai_script(envs: SessionVectorEnv) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Every turn the expert's macro as computer_calls; the first call carries a safety
    check; turn 2 starts with a wheel click (no env action)."""
    turns = iter(range(1000))

    def call(n: int, k: int, action: dict[str, Any], checks: list) -> dict[str, Any]:
        return {"type": "computer_call", "id": f"cu_{n}_{k}", "call_id": f"call_{n}_{k}",
                "action": action, "pending_safety_checks": checks, "status": "completed"}  # fmt: skip

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        n = next(turns)
        actions = [openai_action(a) for a in expert_macro(envs) if a.type is not ActionType.FINISH]
        if n == 1:
            actions.insert(0, {"type": "click", "button": "wheel", "x": 5, "y": 5})
        output: list[dict[str, Any]] = [
            {"type": "reasoning", "id": f"rs_{n}", "summary": [
                {"type": "summary_text", "text": f"Turn {n}: fill the form."}]}
        ]  # fmt: skip
        output += [
            call(n, k, a, [SAFETY_CHECK] if (n, k) == (0, 0) else []) for k, a in enumerate(actions)
        ]
        if not actions:
            output.append({"type": "message", "id": f"msg_{n}", "role": "assistant",
                           "content": [{"type": "output_text", "text": "Done."}]})  # fmt: skip
        return {"id": f"resp_{n}", "object": "response", "status": "completed",
                "model": body["model"], "output": output, "usage": OPENAI_USAGE}  # fmt: skip

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

    result, (episode,) = run_vendor_agent("openai-cua:computer-use-preview", envs, tmp_path)

    assert episode.success, [(s.action, s.error) for s in episode.steps]
    bodies = stand_in.bodies
    assert {h["authorization"] for h in stand_in.headers} == {f"Bearer {SECRET}"}
    tool = {"type": "computer_use_preview", "display_width": 1024, "display_height": 640,
            "environment": "browser"}  # fmt: skip
    assert all(b["tools"] == [tool] and b["truncation"] == "auto" for b in bodies)
    (message,) = bodies[0]["input"]
    assert "previous_response_id" not in bodies[0] and message["role"] == "user"
    text, image = message["content"]
    assert text == {"type": "input_text", "text": episode.instruction}
    assert image["type"] == "input_image"
    prefix = "data:image/png;base64,"
    assert decode_png(image["image_url"].removeprefix(prefix)).shape == (640, 1024, 3)
    replies = [
        [i["call_id"] for i in r["output"] if i["type"] == "computer_call"]
        for r in stand_in.replies
    ]
    for k, body in enumerate(bodies[1:], 1):
        assert body["previous_response_id"] == f"resp_{k - 1}"
        outputs = [i for i in body["input"] if i.get("type") == "computer_call_output"]
        assert [o["call_id"] for o in outputs] == replies[k - 1]
        for o in outputs:
            assert o["output"]["type"] == "computer_screenshot"
            assert o["output"]["image_url"].startswith(prefix)
            assert decode_png(o["output"]["image_url"].removeprefix(prefix)).shape == (640, 1024, 3)
    # The safety check was acknowledged (the default policy), on its call only.
    first_outputs = [i for i in bodies[1]["input"] if i.get("type") == "computer_call_output"]
    assert first_outputs[0]["acknowledged_safety_checks"] == [SAFETY_CHECK]
    assert all("acknowledged_safety_checks" not in o for o in first_outputs[1:])
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
    assert result["tokens"]["input_tokens"] == 1000 * turns  # cached ones apart
    assert result["tokens"]["cache_read_input_tokens"] == 200 * turns
    assert result["tokens"]["output_tokens"] == 40 * turns
    price = DEFAULT_PRICES["computer-use-preview"]
    assert result["cost_usd"] == pytest.approx(
        turns * (1200 * price.input + 40 * price.output) / 1e6
    )
    assert_key_never_written(tmp_path, caplog.text)


# Gemini


GEMINI_MODEL = "gemini-2.5-computer-use-preview-10-2025"
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
        return {"candidates": [{"content": {"role": "model", "parts": parts},
                                "finishReason": "STOP"}], "usageMetadata": GEMINI_USAGE}  # fmt: skip

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
    assert {h["x-goog-api-key"] for h in stand_in.headers} == {SECRET}
    tool = {"computerUse": {"environment": "ENVIRONMENT_BROWSER",
            "excludedPredefinedFunctions": ["navigate", "search", "go_back", "go_forward"]}}  # fmt: skip
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
    from uirl_agents.cost import add_usage, find_price, load_prices

    anthropic = normalize_usage(ANTHROPIC_USAGE)
    openai = normalize_usage(OPENAI_USAGE)
    chat = normalize_usage({"prompt_tokens": 10, "completion_tokens": 3})
    gemini = normalize_usage(
        {"promptTokenCount": 50, "candidatesTokenCount": 5, "thoughtsTokenCount": 2}
    )
    assert (anthropic["input_tokens"], anthropic["cache_read_input_tokens"]) == (1500, 500)
    assert (openai["input_tokens"], openai["cache_read_input_tokens"]) == (1000, 200)
    assert (chat["input_tokens"], chat["output_tokens"], gemini["output_tokens"]) == (10, 3, 7)
    total = add_usage([anthropic, None, openai])
    assert total["requests"] == 2 and total["output_tokens"] == 100
    assert add_usage([None]) is None
    assert (
        find_price("claude-sonnet-4-5-20250929", DEFAULT_PRICES)
        == DEFAULT_PRICES["claude-sonnet-4"]
    )
    assert find_price("my-model", DEFAULT_PRICES) is None
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
    spec = parse_agent("anthropic:claude-sonnet-4-5,display=1280x800,max_tokens=512")
    assert (spec.kind, spec.target, spec.max_tokens) == ("anthropic", "claude-sonnet-4-5", 512)
    assert (
        dict(spec.options) == {"display": "1280x800"}
        and spec.label == spec.kind + ":" + spec.target
    )
    assert dict(parse_agent("anthropic:m,prompt_caching=1").options) == {"prompt_caching": "1"}
    spec = parse_agent("openai-cua:computer-use-preview,safety_checks=refuse")
    assert dict(spec.options) == {"safety_checks": "refuse"}
    spec = parse_agent("gemini-cua:gemini-2.5-computer-use-preview-10-2025")
    assert spec.label == "gemini-cua:gemini-2.5-computer-use-preview-10-2025"
    for bad in ("anthropic:m,display=big", "openai-cua:m,safety_checks=maybe",
                "anthropic:m,format=ui-tars", "openai-cua:m,max_tokens=5",
                "gemini-cua:m,display=1024x640"):  # fmt: skip
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
        use = {"type": "tool_use", "id": f"t{len(body['messages'])}", "name": "computer",
               "input": {"action": "screenshot"}}  # fmt: skip
        return {"content": [use], "stop_reason": "tool_use", "usage": ANTHROPIC_USAGE}

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
    check = {"type": "computer_call", "call_id": "c1", "pending_safety_checks": [SAFETY_CHECK],
             "action": {"type": "click", "button": "left", "x": 10, "y": 10}}  # fmt: skip
    stand_in = StandIn("/v1/responses", lambda body: {"id": "r1", "output": [check]})
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("OPENAI_BASE_URL", serve(stand_in) + "/v1")
    with _openai_policy("refuse") as policy:
        (step,) = policy.act([_observation()], [0])
    assert step.action.type is ActionType.FINISH
    assert step.extra["stop"] == "SafetyCheckRefused: malicious_instructions"


# evaluate.py and the leaderboard


def anthropic_click_then_stop(body: dict[str, Any]) -> dict[str, Any]:
    """Every episode: one click, then the model stops (the task is not done)."""
    first = len(body["messages"]) == 1
    content = (
        [{"type": "tool_use", "id": "toolu_1", "name": "computer",
          "input": {"action": "left_click", "coordinate": [512, 320]}}]
        if first
        else [{"type": "text", "text": "I give up."}]
    )  # fmt: skip
    return {"id": "msg", "type": "message", "role": "assistant", "content": content,
            "stop_reason": "tool_use" if first else "end_turn", "usage": ANTHROPIC_USAGE}  # fmt: skip


def openai_click_then_stop(body: dict[str, Any]) -> dict[str, Any]:
    first = "previous_response_id" not in body
    output = (
        [{"type": "computer_call", "call_id": "call_1", "pending_safety_checks": [],
          "action": {"type": "click", "button": "left", "x": 512, "y": 320}}]
        if first
        else [{"type": "message", "content": [{"type": "output_text", "text": "Stopped."}]}]
    )  # fmt: skip
    return {"id": "resp_1" if first else "resp_2", "output": output, "usage": OPENAI_USAGE}


@pytest.mark.slow
def test_evaluate_runs_vendor_agents_and_the_leaderboard_renders(
    serve: Callable[[StandIn], str], tmp_path: Path
) -> None:
    import os
    import subprocess
    import sys

    from playwright.sync_api import sync_playwright

    from uirl_agents.trajectories import Episode, Step
    from uirl_gym.server.browser import find_browser

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
           "--agent", "anthropic:claude-sonnet-4-5", "--agent", "openai-cua:computer-use-preview",
           "--agent", "expert", "--task", "all", "--rows", "1",
           "--episodes", "1", "--max-steps", "30", "--out", str(out), "--leaderboard"]  # fmt: skip
    done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert SECRET not in done.stdout + done.stderr
    results = {a["agent"]: a for a in json.loads((out / "results.json").read_text())["agents"]}
    assert results["anthropic:claude-sonnet-4-5"]["tokens"]["requests"] == 14  # 2 an episode
    assert results["openai-cua:computer-use-preview"]["cost_usd"] > 0
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
    from uirl_agents.evaluate import summarise

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
    assert others == {"anthropic:claude-sonnet-4-5": 7, "openai-cua:computer-use-preview": 7,
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

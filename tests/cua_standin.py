"""Local stand-ins of the vendors' computer-use APIs, and a cost estimate made with them.

A :class:`StandIn` is an HTTP endpoint on 127.0.0.1 (a server thread) whose replies a
function scripts from the request; every reply is built as the vendor SDK's own
response model (:mod:`sdk_shapes`). :func:`expert_anthropic` and :func:`expert_openai`
script a task's expert: each turn is the expert's next macro (planned from the env's
oracle) written as the vendor's tool calls, and the usage is estimated from the
request by the vendors' published rules (:func:`anthropic_usage`, :func:`openai_usage`).

``python tests/cua_standin.py`` runs the vendor agents on every task through the
stand-ins and prints tokens and cost per episode: what docs/evaluate.md quotes. An
expert-paced agent makes the fewest requests a task allows, so real models cost more.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import http_standin
from http_standin import QuietHandler, url_of
from sdk_shapes import anthropic_message, gemini_response, openai_response

from uirl_agents.policies.cua import ScreenScaler
from uirl_gym.actions import Action, ActionType
from uirl_gym.tasks import task_spec
from uirl_gym.vector import SessionVectorEnv

DISPLAY = (1024, 640)  # 1280x800 fitted into XGA / OpenAI's 1024x768
SCALER = ScreenScaler(*DISPLAY)
# Anthropic's computer-use docs: the computer tool definition costs 735 input tokens
# and the computer-use system prompt 466-499; an image ~ width * height / 750.
ANTHROPIC_TOOL_TOKENS = 735 + 499
# OpenAI's high-detail image rule for a 1024x640 image: 85 + 170 per 512-px tile (4).
OPENAI_IMAGE_TOKENS = 85 + 170 * 4
CHARS_PER_TOKEN = 4


@dataclass
class StandIn:
    """A vendor endpoint: ``reply(body)`` answers. ``failures[n]`` are sent, one per
    attempt, before the ``n``-th answered request (0-based), as ``(status, headers)``;
    every attempt's time is recorded."""

    path: str
    reply: Callable[[dict[str, Any]], dict[str, Any]]
    failures: dict[int, list[tuple[int, dict[str, str]]]] = field(default_factory=dict)
    bodies: list[dict[str, Any]] = field(default_factory=list)  # answered requests
    replies: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    attempts: list[float] = field(default_factory=list)  # monotonic times
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""


def _handler(stand_in: StandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(QuietHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with stand_in.lock:
                stand_in.attempts.append(time.monotonic())
                pending = stand_in.failures.get(len(stand_in.bodies)) or []
                failure = pending.pop(0) if pending else None
            if self.path != stand_in.path:
                self.send_json(404, {"error": {"message": f"no route {self.path}"}})
            elif failure is not None:
                self.send_json(failure[0], {"error": {"type": "rate_limit_error"}}, failure[1])
            else:
                answer = stand_in.reply(body)
                with stand_in.lock:
                    stand_in.bodies.append(body)
                    stand_in.replies.append(answer)
                    stand_in.headers.append({k.lower(): v for k, v in self.headers.items()})
                self.send_json(200, answer)

    return Handler


@contextlib.contextmanager
def serving(*stand_ins: StandIn) -> Iterator[list[str]]:
    """Serve the stand-ins on 127.0.0.1; yields their root URLs (also in ``.url``)."""
    with contextlib.ExitStack() as stack:
        for stand_in in stand_ins:
            stand_in.url = url_of(stack.enter_context(http_standin.serving(_handler(stand_in))))
        yield [s.url for s in stand_ins]


def expert_macro(envs: SessionVectorEnv, env_index: int = 0) -> list[Action]:
    """The task's scripted expert's next macro for the sub-env's current page."""
    env = envs.envs[env_index]
    return task_spec(env.episode_task or "simple_data_entry").expert()._plan(env.oracle())


def _model_point(action: Action) -> list[int] | None:
    return list(SCALER.to_model(action.x, action.y)) if action.x is not None else None


def anthropic_input(action: Action) -> dict[str, Any]:
    """An env action written as the computer tool's input, in display pixels."""
    point = _model_point(action)
    simple = {
        ActionType.LEFT_CLICK: "left_click",
        ActionType.RIGHT_CLICK: "right_click",
        ActionType.DOUBLE_CLICK: "double_click",
        ActionType.TRIPLE_CLICK: "triple_click",
        ActionType.MOUSE_MOVE: "mouse_move",
    }
    if action.type in simple:
        return {"action": simple[action.type], "coordinate": point}
    if action.type is ActionType.TYPE:
        return {"action": "type", "text": action.text}
    if action.type is ActionType.KEYS:
        return {"action": "key", "text": action.keys}
    if action.type is ActionType.SCROLL:
        return {"action": "scroll", "coordinate": point, "scroll_direction": action.direction,
                "scroll_amount": action.scroll_amount}  # fmt: skip
    if action.type is ActionType.DRAG:
        end = list(SCALER.to_model(action.end_x, action.end_y))
        return {"action": "left_click_drag", "start_coordinate": point, "coordinate": end}
    raise ValueError(f"no computer tool input for {action}")


def anthropic_block(action: Action, call_id: str, toolset: bool = True) -> dict[str, Any]:
    """An env action as a ``tool_use`` block: a toolset member call (the action is the
    tool's name), or a call of the ``computer`` tool."""
    tool_input = anthropic_input(action)
    if not toolset:
        return {"type": "tool_use", "id": call_id, "name": "computer", "input": tool_input}
    name = tool_input.pop("action")
    return {"type": "tool_use", "id": call_id, "name": name, "input": tool_input,
            "toolset_name": "computer", "caller": {"type": "direct"}}  # fmt: skip


def openai_action(action: Action) -> dict[str, Any]:
    """An env action written as a computer_call action, in display pixels."""
    x, y = _model_point(action) or (None, None)
    if action.type in (ActionType.LEFT_CLICK, ActionType.RIGHT_CLICK):
        button = "left" if action.type is ActionType.LEFT_CLICK else "right"
        return {"type": "click", "button": button, "x": x, "y": y}
    if action.type is ActionType.DOUBLE_CLICK:
        return {"type": "double_click", "x": x, "y": y}
    if action.type is ActionType.MOUSE_MOVE:
        return {"type": "move", "x": x, "y": y}
    if action.type is ActionType.TYPE:
        return {"type": "type", "text": action.text}
    if action.type is ActionType.KEYS:
        return {"type": "keypress", "keys": [k.upper() for k in action.keys.split("+")]}
    if action.type is ActionType.SCROLL:
        pixels = round(action.scroll_amount * 100 * DISPLAY[1] / 800)  # display pixels
        dx = {"left": -pixels, "right": pixels}.get(action.direction, 0)
        dy = {"up": -pixels, "down": pixels}.get(action.direction, 0)
        return {"type": "scroll", "x": x, "y": y, "scroll_x": dx, "scroll_y": dy}
    if action.type is ActionType.DRAG:
        end_x, end_y = SCALER.to_model(action.end_x, action.end_y)
        return {"type": "drag", "path": [{"x": x, "y": y}, {"x": end_x, "y": end_y}]}
    raise ValueError(f"no computer_call action for {action}")


GRID = ScreenScaler(1000, 1000)  # Gemini's normalised coordinates


def gemini_calls(macro: list[Action], legacy: bool = False) -> list[dict[str, Any]]:
    """A macro as Gemini function calls on the 1000x1000 grid: gemini-3.5-flash's
    vocabulary, or (``legacy``) the 2.5 preview's, where a click followed by a ``type``
    is one ``type_text_at``, as the model would write it."""
    calls: list[dict[str, Any]] = []
    for action in macro:
        point = list(GRID.to_model(action.x, action.y)) if action.x is not None else None
        if action.type is ActionType.TYPE and legacy:
            # Gemini 2.5 types at a point: the macro's last click, whose field it clears
            # first (what a select-all between them did).
            clicks = [k for k, c in enumerate(calls) if c["name"] == "click_at"]
            if not clicks:
                raise ValueError(f"no type_text_at for {action}: no click before it")
            args = calls[clicks[-1]]["args"]
            del calls[clicks[-1] :]
            calls.append({"name": "type_text_at", "args": {**args, "text": action.text,
                          "press_enter": False, "clear_before_typing": True}})  # fmt: skip
        elif action.type is ActionType.TYPE:
            calls.append({"name": "type", "args": {"text": action.text}})
        elif action.type is ActionType.LEFT_CLICK:
            name = "click_at" if legacy else "click"
            calls.append({"name": name, "args": {"x": point[0], "y": point[1]}})
        elif action.type is ActionType.KEYS:
            names = {"ctrl": "Control", "shift": "Shift", "alt": "Alt"}
            keys = [names.get(k, k.upper()) for k in action.keys.split("+")]
            if legacy:
                calls.append({"name": "key_combination", "args": {"keys": "+".join(keys)}})
            else:
                calls.append({"name": "hotkey", "args": {"keys": keys}})
        elif action.type is ActionType.SCROLL:
            magnitude = round(action.scroll_amount * 100 / 800 * 1000)
            calls.append({"name": "scroll_at" if legacy else "scroll",
                          "args": {"x": point[0], "y": point[1],
                                   "direction": action.direction, "magnitude": magnitude}})  # fmt: skip
        elif action.type is ActionType.DRAG:
            end = GRID.to_model(action.end_x, action.end_y)
            calls.append({"name": "drag_and_drop", "args": {"x": point[0], "y": point[1],
                          "destination_x": end[0], "destination_y": end[1]}})  # fmt: skip
        elif action.type in (ActionType.DOUBLE_CLICK, ActionType.RIGHT_CLICK) and not legacy:
            name = "double_click" if action.type is ActionType.DOUBLE_CLICK else "right_click"
            calls.append({"name": name, "args": {"x": point[0], "y": point[1]}})
        elif action.type is not ActionType.FINISH:
            raise ValueError(f"no Gemini function for {action}")
    return calls


def gemini_usage(body: dict[str, Any], parts: list[dict[str, Any]]) -> dict[str, int]:
    """What generateContent would bill: the whole history each turn (258 tokens per
    768-px tile of an image: 4 tiles for 1280x800)."""
    images = json.dumps(body["contents"]).count('"inlineData"')
    prompt = _text_tokens([body["systemInstruction"], body["contents"]]) + images * 258 * 4
    return {"promptTokenCount": prompt, "candidatesTokenCount": _text_tokens(parts),
            "totalTokenCount": prompt + _text_tokens(parts)}  # fmt: skip


def expert_gemini(
    envs: SessionVectorEnv, legacy: bool = False
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """generateContent replies: the expert's macros as ``functionCall`` parts."""

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        try:
            calls = gemini_calls(expert_macro(envs), legacy)
        except ValueError:  # an action Gemini has no function for: give up
            calls = []
        parts: list[dict[str, Any]] = [{"functionCall": c} for c in calls]
        parts = parts or [{"text": "The task is done."}]
        return gemini_response({"candidates": [{"content": {"role": "model", "parts": parts},
                                                "finishReason": "STOP"}],
                                "usageMetadata": gemini_usage(body, parts)})  # fmt: skip

    return reply


def _text_tokens(value: Any) -> int:
    """Text tokens of a JSON value, images left out (chars / 4)."""

    def strip(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if k not in ("data", "image_url")}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v

    return math.ceil(len(json.dumps(strip(value))) / CHARS_PER_TOKEN)


def anthropic_usage(body: dict[str, Any], content: list[dict[str, Any]]) -> dict[str, int]:
    """What the Messages API would bill for ``body`` and the reply ``content``."""
    images = json.dumps(body["messages"]).count('"type": "image"')
    per_image = math.ceil(DISPLAY[0] * DISPLAY[1] / 750)  # the screenshots' size
    prompt = _text_tokens([body["system"], body["messages"]])
    return {
        "input_tokens": ANTHROPIC_TOOL_TOKENS + prompt + images * per_image,
        "output_tokens": _text_tokens(content),
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }


def expert_anthropic(envs: SessionVectorEnv) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Messages API replies: the expert's macros as toolset ``tool_use`` blocks, then a
    text."""
    ids = iter(range(10**9))

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        macro = [a for a in expert_macro(envs) if a.type is not ActionType.FINISH]
        content: list[dict[str, Any]] = [
            anthropic_block(a, f"toolu_{next(ids)}") for a in macro
        ] or [{"type": "text", "text": "The task is done."}]
        return anthropic_message({"id": f"msg_{next(ids)}", "type": "message",
                                  "role": "assistant", "content": content,
                                  "model": body["model"], "stop_reason":
                                  "tool_use" if macro else "end_turn", "stop_sequence": None,
                                  "usage": anthropic_usage(body, content)})  # fmt: skip

    return reply


def expert_openai(envs: SessionVectorEnv) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Responses API replies: the expert's macros as ``computer_call`` items. Usage
    grows with the chain: every response bills the whole context it continues."""
    ids = iter(range(10**9))
    context: dict[str, int] = {}  # response id -> tokens of its context and output

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        macro = [a for a in expert_macro(envs) if a.type is not ActionType.FINISH]
        n = next(ids)
        output: list[dict[str, Any]] = (
            [{"type": "computer_call", "id": f"cu_{n}", "call_id": f"call_{n}",
              "actions": [openai_action(a) for a in macro], "pending_safety_checks": [],
              "status": "completed"}]
            if macro
            else [{"type": "message", "id": f"msg_{n}", "role": "assistant",
                   "status": "completed", "content": [
                       {"type": "output_text", "text": "The task is done.",
                        "annotations": []}]}]
        )  # fmt: skip
        text = json.dumps(body["input"])
        images = text.count('"input_image"') + text.count('"computer_screenshot"')
        fresh = _text_tokens([body["instructions"], body["input"]]) + images * OPENAI_IMAGE_TOKENS
        input_tokens = context.get(body.get("previous_response_id", ""), 0) + fresh
        output_tokens = _text_tokens(output)
        response_id = f"resp_{next(ids)}"
        context[response_id] = input_tokens + output_tokens
        usage = {"input_tokens": input_tokens,
                 "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                 "output_tokens": output_tokens,
                 "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": input_tokens + output_tokens}  # fmt: skip
        return openai_response({"id": response_id, "model": body["model"], "output": output,
                                "usage": usage})  # fmt: skip

    return reply


def main() -> int:
    """The vendor agents, one episode per task, expert-paced: tokens and cost."""
    import os
    import tempfile
    from pathlib import Path

    from uirl_agents.episodes.rollout import EpisodeSpec
    from uirl_agents.evaluation.agents import parse_agent
    from uirl_agents.evaluation.benchmark import run_agent
    from uirl_gym.tasks import expand_tasks

    tasks = sorted(expand_tasks("all"))  # the 7 web apps, as evaluate.py's --task all
    specs = [EpisodeSpec(seed=0, options={"task": t, "split": "test"}) for t in tasks]
    envs = SessionVectorEnv(1)
    anthropic = StandIn("/v1/messages", expert_anthropic(envs))
    openai = StandIn("/v1/responses", expert_openai(envs))
    gemini_model = "gemini-3.5-flash"
    gemini = StandIn(f"/v1beta/models/{gemini_model}:generateContent", expert_gemini(envs))
    rows = []
    try:
        with serving(anthropic, openai, gemini), tempfile.TemporaryDirectory() as out:
            os.environ |= {
                "ANTHROPIC_API_KEY": "stand-in",
                "ANTHROPIC_BASE_URL": anthropic.url,
                "OPENAI_API_KEY": "stand-in",
                "OPENAI_BASE_URL": openai.url + "/v1",
                "GEMINI_API_KEY": "stand-in",
                "GEMINI_BASE_URL": gemini.url,
            }
            agents = ("anthropic:claude-sonnet-5-5", "openai-cua:gpt-5.4",
                      f"gemini-cua:{gemini_model}")  # fmt: skip
            for agent in agents:
                result = run_agent(
                    parse_agent(agent), envs, specs, Path(out), max_steps=60, seed=0,
                    settings={},
                )  # fmt: skip
                rows.append(result)
    finally:
        envs.close()
    print("| agent | episodes | success | requests/episode | input tokens/episode "
          "| output tokens/episode | cost/episode | cost of 20 episodes x 7 tasks |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        t, n = r.tokens, r.episodes
        print(f"| {r.agent} | {n} | {r.success_rate:.0%} | {t['requests'] / n:.1f} "
              f"| {(t['input_tokens'] + t['cache_read_input_tokens']) / n:,.0f} "
              f"| {t['output_tokens'] / n:,.0f} | ${r.cost_per_episode_usd:.3f} "
              f"| ${r.cost_per_episode_usd * 140:.2f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

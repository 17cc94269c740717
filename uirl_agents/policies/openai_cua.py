"""OpenAICUAPolicy: OpenAI's computer-use models through the Responses API.

Wire shapes (https://developers.openai.com/api/docs/guides/tools-computer-use; the
``openai`` SDK's ``openai.types.responses`` types, which the tests check every request
and reply against):

- ``POST {OPENAI_BASE_URL}/responses`` with ``Authorization: Bearer``, body ``{"model",
  "tools": [TOOL], "input": [...], "instructions", "truncation": "auto", "reasoning":
  {"summary": "concise"}}``. ``TOOL`` is the generally available ``{"type":
  "computer"}`` (gpt-5.4 and later models: no display size, the model answers in the
  screenshot's pixels) or, for ``computer-use-preview``, ``{"type":
  "computer_use_preview", "display_width": W, "display_height": H, "environment":
  "browser"}``; ``tool`` chooses, by default from the model.
- The first ``input`` is a user message: ``input_text`` (the instruction) and
  ``input_image`` (``image_url``: a PNG data URL of the screen, ``detail``).
- The reply's ``output`` holds ``reasoning``, ``message`` and ``computer_call`` items:
  ``{"call_id", "actions": [{"type": "click", "button": "left", "x", "y", "keys"},
  ...], "pending_safety_checks": [{"id", "code", "message"}]}`` (the GA tool batches
  several actions in one call, played in order) or, from the preview tool, one
  ``"action"``.
- Later requests chain with ``previous_response_id`` (the server keeps the context)
  and send one ``computer_call_output`` per call: ``{"call_id", "output": {"type":
  "computer_screenshot", "image_url": ...}, "acknowledged_safety_checks": [...]}``,
  the screenshot after that call's last action. A call the env cannot play (none of
  its actions is played) is followed by a user message saying why (the Responses API
  has no tool-error flag for computer calls).
- A reply without ``computer_call`` ends the episode (``finish``).
- ``usage``: ``input_tokens`` (``input_tokens_details.cached_tokens`` of them read from
  the cache, ``cache_write_tokens`` written to it), ``output_tokens`` (reasoning
  included).

Actions: ``click`` (left, right; ``wheel``, ``back``, ``forward`` are invalid),
``double_click``, ``scroll`` (``scroll_x``/``scroll_y`` pixels -> wheel notches of
100 px on the dominant axis), ``type``, ``keypress`` (key names combined with ``+``),
``drag`` (first point to last), ``move``, ``screenshot`` (a ``screenshot`` step) and
``wait`` (a ``screenshot`` step after WAIT_S seconds, as OpenAI's sample app waits).
``keys`` on ``click``, ``double_click``, ``drag``, ``move`` and ``scroll`` are
modifiers held while the pointer acts (``["SHIFT"]``: a shift+click).

Safety checks (``safety_checks``): ``"acknowledge"`` (the default: the env is a
sandbox of test data; each check is logged and kept in the step's ``extra``) sends
them back as acknowledged; ``"refuse"`` ends the episode at the first one, unplayed.

Screen scaling: the 1280x800 screen is shown at 1024x640 by default
(:meth:`ScreenScaler.fit` into OpenAI's 1024x768 example display): the size the
preview tool declares and the size of every screenshot (``display=1280x800``: the
screen as it is).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from uirl_agents.policies.anthropic import text_chunks
from uirl_agents.policies.cua import (
    ComputerUsePolicy,
    Conversation,
    JsonPoster,
    ScreenScaler,
    ToolCall,
    TransportConfig,
    Turn,
    png_base64,
    vendor_credentials,
    warn_if_retiring,
)
from uirl_agents.policies.usage import normalize_usage
from uirl_gym.actions import (
    MAX_SCROLL_AMOUNT,
    SCROLL_NOTCH_PX,
    Action,
    ActionType,
    held_modifiers,
    parse_keys,
)

logger = logging.getLogger(__name__)

API_KEY_ENV = "OPENAI_API_KEY"
BASE_URL_ENV = "OPENAI_BASE_URL"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
DISPLAY = (1024, 768)
SAFETY_POLICIES = ("acknowledge", "refuse")
# The generally available tool, and the preview one (the computer-use-preview model).
TOOLS = ("computer", "computer_use_preview")
IMAGE_DETAILS = ("high", "low", "auto", "original")
WAIT_S = 1.0
# Shutdown dates announced for the models that use computer tools (the openai SDK
# 3.57's ``responses.create`` docs, "Deprecated values").
DEPRECATED_MODELS = {
    "computer-use-preview": "2026-07-23",
    "computer-use-preview-2025-03-11": "2026-07-23",
    "gpt-5": "2026-12-11",
    "gpt-5-2025-08-07": "2026-12-11",
    "gpt-5-mini": "2026-12-11",
    "gpt-5-mini-2025-08-07": "2026-12-11",
    "gpt-5-nano": "2026-12-11",
    "gpt-5-nano-2025-08-07": "2026-12-11",
    "gpt-5.1": "2027-04-01",
    "gpt-5.1-2025-11-13": "2027-04-01",
    "gpt-5.4-nano": "2027-04-01",
    "gpt-5.4-nano-2026-03-17": "2027-04-01",
}

INSTRUCTIONS = (
    "You control a browser showing one web application (no address bar), {w}x{h} pixels. "
    "Do the user's task without asking for confirmation: it is a test environment with "
    "made-up data. When the task is done, say so in a short message."
)
# Key names the model uses that the env spells otherwise (lower-cased).
CUA_KEYS = {"arrowup": "ArrowUp", "arrowdown": "ArrowDown", "arrowleft": "ArrowLeft",
            "arrowright": "ArrowRight", "esc": "Escape", "cmd": "Meta", "super": "Meta",
            "option": "Alt", "/": "/", "\\": "\\"}  # fmt: skip


@dataclass
class OpenAICUAPolicyConfig:
    """How :class:`OpenAICUAPolicy` talks to the Responses API.

    The API key comes from ``OPENAI_API_KEY`` only (never a config field); the base URL
    from ``OPENAI_BASE_URL``.
    """

    model: str = "gpt-5.4"
    tool: str | None = None
    """``computer`` (generally available) or ``computer_use_preview``; None: the
    preview tool for ``computer-use-preview`` models, else ``computer``."""
    display: tuple[int, int] | None = None
    """The display the model sees; None: the screen fitted into 1024x768 (1024x640)."""
    image_detail: str = "high"
    """The first screenshot's ``detail`` (``high``, ``low``, ``auto``, ``original``)."""
    environment: str = "browser"
    safety_checks: str = "acknowledge"
    """``acknowledge`` or ``refuse`` pending safety checks (see the module docstring)."""
    max_output_tokens: int | None = None
    instructions: str = INSTRUCTIONS
    reasoning_summary: str | None = "concise"
    extra_body: dict[str, Any] = field(default_factory=dict)
    transport: TransportConfig = field(default_factory=TransportConfig)

    def __post_init__(self) -> None:
        if self.tool is None:
            preview = self.model.startswith("computer-use-preview")
            self.tool = "computer_use_preview" if preview else "computer"
        if self.tool not in TOOLS:
            raise ValueError(f"tool: expected one of {TOOLS}, got {self.tool!r}")
        if self.image_detail not in IMAGE_DETAILS:
            raise ValueError(
                f"image_detail: expected one of {IMAGE_DETAILS}, got {self.image_detail!r}"
            )
        if self.safety_checks not in SAFETY_POLICIES:
            raise ValueError(
                f"safety_checks: expected one of {SAFETY_POLICIES}, got {self.safety_checks!r}"
            )


class OpenAICUAPolicy(ComputerUsePolicy):
    """OpenAI's computer-use model (see the module docstring for the protocol).

    Attributes:
        name: ``openai-cua:MODEL``.
        config: :class:`OpenAICUAPolicyConfig`.
        url: the responses endpoint.
        scaler: screen <-> the tool's display.

    Raises:
        ValueError: ``OPENAI_API_KEY`` is not set.
    """

    def __init__(self, config: OpenAICUAPolicyConfig | None = None) -> None:
        self.config = c = config or OpenAICUAPolicyConfig()
        key, base = vendor_credentials((API_KEY_ENV,), BASE_URL_ENV, DEFAULT_BASE_URL, "OpenAI")
        self.url = base + "/responses"
        self.name = f"openai-cua:{c.model}"
        warn_if_retiring("OpenAI", c.model, DEPRECATED_MODELS)
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        scaler = ScreenScaler(*c.display) if c.display else ScreenScaler.fit(*DISPLAY)
        super().__init__(scaler, JsonPoster(headers, c.transport), c.transport)

    def tool(self) -> dict[str, Any]:
        if self.config.tool == "computer":
            return {"type": "computer"}
        return {
            "type": "computer_use_preview",
            "display_width": self.scaler.width,
            "display_height": self.scaler.height,
            "environment": self.config.environment,
        }

    def _request(self, conv: Conversation, screenshot: np.ndarray) -> dict[str, Any]:
        c = self.config
        previous = conv.state.get("response_id")
        items: list[dict[str, Any]] = []
        if previous is None:
            items.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": conv.instruction},
                        {
                            "type": "input_image",
                            "image_url": _data_url(screenshot),
                            "detail": c.image_detail,
                        },
                    ],
                }
            )
        else:
            assert conv.turn is not None
            errors = []
            for k, call in enumerate(conv.turn.calls):
                last = k == len(conv.turn.calls) - 1
                if last or call.screenshot is None:
                    image = screenshot
                else:
                    image = self.scaler.image(call.screenshot)
                item: dict[str, Any] = {
                    "type": "computer_call_output",
                    "call_id": call.call_id,
                    "output": {"type": "computer_screenshot", "image_url": _data_url(image)},
                }
                checks = call.extra.get("safety_checks")
                if checks:
                    item["acknowledged_safety_checks"] = checks
                items.append(item)
                if call.error:
                    errors.append(f"The action {call.raw} failed: {call.error}")
            if errors:
                items.append(
                    {"role": "user", "content": [{"type": "input_text", "text": " ".join(errors)}]}
                )
        body: dict[str, Any] = {
            "model": c.model,
            "tools": [self.tool()],
            "input": items,
            "instructions": c.instructions.format(w=self.scaler.width, h=self.scaler.height),
            "truncation": "auto",
        }
        if previous is not None:
            body["previous_response_id"] = previous
        if c.reasoning_summary:
            body["reasoning"] = {"summary": c.reasoning_summary}
        if c.max_output_tokens:
            body["max_output_tokens"] = c.max_output_tokens
        conv.state["images_sent"] = sum(
            "image_url" in (i.get("output") or {}) for i in items
        ) + sum(p.get("type") == "input_image" for i in items for p in (i.get("content") or []))
        return body | c.extra_body

    def _parse(self, conv: Conversation, response: dict[str, Any]) -> Turn:
        conv.state["response_id"] = response.get("id")
        texts, calls = [], []
        for item in response.get("output") or []:
            kind = item.get("type")
            if kind == "reasoning":
                texts += [s.get("text", "") for s in item.get("summary") or []]
            elif kind == "message":
                texts += [p.get("text", "") for p in item.get("content") or [] if "text" in p]
            elif kind == "computer_call":
                calls.append(self._map_call(item))
        usage = normalize_usage(response.get("usage") or {})
        if usage is not None:
            usage["image_tokens"] = _image_tokens(self.scaler) * conv.state.get("images_sent", 0)
        turn = Turn(calls, text="\n".join(t for t in texts if t), usage=usage)
        checks = [check for call in calls for check in call.extra.get("safety_checks", [])]
        if checks:
            codes = ", ".join(str(check.get("code")) for check in checks)
            if self.config.safety_checks == "refuse":
                logger.warning("%s: safety checks %s refused; the episode ends", self.name, codes)
                return Turn([], text=turn.text, usage=usage, stop=f"SafetyCheckRefused: {codes}")
            logger.warning("%s: safety checks %s acknowledged (sandbox)", self.name, codes)
        return turn

    def _map_call(self, item: dict[str, Any]) -> ToolCall:
        batch = item.get("actions")
        if batch is None:  # the preview tool: one action a call
            raw: dict[str, Any] = dict(item.get("action") or {})
            batch = [raw]
        else:
            raw = {"actions": batch}
        call = ToolCall(call_id=str(item.get("call_id", "")), raw=raw)
        if item.get("pending_safety_checks"):
            call.extra["safety_checks"] = list(item["pending_safety_checks"])
        try:
            if not isinstance(batch, list) or not batch:
                raise ValueError(f"actions: expected a non-empty list, got {batch!r}")
            for k, action in enumerate(batch):
                where = f"actions[{k}]: " if len(batch) > 1 else ""
                try:
                    if action.get("type") == "wait":
                        call.waits[len(call.actions)] = WAIT_S
                    call.actions += self._actions(action)
                except (ValueError, TypeError, AttributeError) as exc:
                    raise type(exc)(f"{where}{exc}") from None
        except (ValueError, TypeError, AttributeError) as exc:
            # The batch is played whole or not at all: the model gets the screen as it
            # was and the reason.
            call.error = f"{type(exc).__name__}: {exc}"
            call.actions = []
            call.waits.clear()
        return call

    def _actions(self, raw: dict[str, Any]) -> list[Action]:
        """One computer action -> env actions (raises ValueError when it has none)."""
        kind = raw.get("type")
        if kind in ("click", "double_click", "move"):
            types = {"left": ActionType.LEFT_CLICK, "right": ActionType.RIGHT_CLICK}
            if kind == "click":
                button = raw.get("button", "left")
                if button not in types:
                    raise ValueError(f"click: button {button!r} is not supported; left or right")
                action_type = types[button]
            else:
                action_type = {
                    "double_click": ActionType.DOUBLE_CLICK,
                    "move": ActionType.MOUSE_MOVE,
                }[kind]
            x, y = self.point([raw.get("x"), raw.get("y")])
            return [Action(action_type, x, y, keys=held_keys(raw.get("keys"), kind))]
        if kind == "type":
            text = raw.get("text")
            if not isinstance(text, str):
                raise ValueError(f"type: expected a text string, got {text!r}")
            return [Action(ActionType.TYPE, text=chunk) for chunk in text_chunks(text)]
        if kind == "keypress":
            return [Action(ActionType.KEYS, keys=keypress_combo(raw.get("keys")))]
        if kind == "scroll":
            return [self._scroll(raw)]
        if kind == "drag":
            path = raw.get("path") or []
            if len(path) < 2:
                raise ValueError(f"drag: expected a path of at least 2 points, got {path!r}")
            x, y = self.point([path[0].get("x"), path[0].get("y")], "path[0]")
            end_x, end_y = self.point([path[-1].get("x"), path[-1].get("y")], "path[-1]")
            keys = held_keys(raw.get("keys"), kind)
            return [Action(ActionType.DRAG, x, y, end_x=end_x, end_y=end_y, keys=keys)]
        if kind in ("wait", "screenshot"):
            return [Action(ActionType.SCREENSHOT)]
        raise ValueError(
            f"action {kind!r} is not supported here; supported: click, double_click, scroll, "
            "type, keypress, drag, move, wait, screenshot"
        )

    def _scroll(self, raw: dict[str, Any]) -> Action:
        dx, dy = raw.get("scroll_x") or 0, raw.get("scroll_y") or 0
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (dx, dy)):
            raise ValueError(f"scroll: expected numbers scroll_x, scroll_y, got {dx!r}, {dy!r}")
        if dx == 0 and dy == 0:
            raise ValueError("scroll: scroll_x and scroll_y are both 0; nothing to scroll")
        x, y = self.point([raw.get("x"), raw.get("y")])
        if abs(dy) >= abs(dx):
            direction, pixels = ("down" if dy > 0 else "up"), abs(dy)
        else:
            direction, pixels = ("right" if dx > 0 else "left"), abs(dx)
        # The model's pixels are display pixels; a notch scrolls 100 screen pixels.
        screen_px = pixels * self.scaler.screen_height / self.scaler.height
        notches = max(1, min(MAX_SCROLL_AMOUNT, round(screen_px / SCROLL_NOTCH_PX)))
        keys = held_keys(raw.get("keys"), "scroll")
        return Action(ActionType.SCROLL, x, y, direction=direction, amount=notches, keys=keys)


def held_keys(keys: Any, action: str) -> str | None:
    """A pointer action's ``keys`` (``["SHIFT"]``) -> the modifiers it holds in the env's
    syntax (``shift``), None when none.

    Raises:
        ValueError: not a list of modifier keys.
    """
    if not keys:
        return None
    try:
        combo = keypress_combo(keys)
        held_modifiers(combo)
    except ValueError as exc:
        raise ValueError(f"{action}: held {exc}") from None
    return combo


def keypress_combo(keys: Any) -> str:
    """OpenAI's ``keys`` list (``["CTRL", "A"]``) -> an env combination (``ctrl+a``).

    Letters are lower-cased: a keypress names keys, not characters.

    Raises:
        ValueError: not a non-empty list of key names the env knows.
    """
    if isinstance(keys, str):
        keys = [keys]
    if not isinstance(keys, list) or not keys or not all(isinstance(k, str) for k in keys):
        raise ValueError(
            f"keypress: expected a list of key names such as ['CTRL', 'A'], got {keys!r}"
        )
    parts = [CUA_KEYS.get(k.lower(), k.lower() if len(k) > 1 or k.isalpha() else k) for k in keys]
    combo = "+".join(parts)
    parse_keys(combo)
    return combo


def _data_url(image: np.ndarray) -> str:
    return "data:image/png;base64," + png_base64(image)


def _image_tokens(scaler: ScreenScaler) -> int:
    """OpenAI's high-detail image estimate: 85 + 170 per 512-px tile after fitting the
    image into 2048x2048 and its short side into 768."""
    w, h = float(scaler.width), float(scaler.height)
    scale = min(1.0, 2048 / max(w, h))
    w, h = w * scale, h * scale
    scale = min(1.0, 768 / min(w, h))
    w, h = w * scale, h * scale
    return 85 + 170 * (-(-int(w) // 512)) * (-(-int(h) // 512))

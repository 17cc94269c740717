"""OpenAICUAPolicy: OpenAI's computer-use model through the Responses API.

Wire shapes (https://platform.openai.com/docs/guides/tools-computer-use):

- ``POST {OPENAI_BASE_URL}/responses`` with ``Authorization: Bearer``, body ``{"model",
  "tools": [{"type": "computer_use_preview", "display_width": W, "display_height": H,
  "environment": "browser"}], "input": [...], "instructions", "truncation": "auto",
  "reasoning": {"summary": "concise"}}``.
- The first ``input`` is a user message: ``input_text`` (the instruction) and
  ``input_image`` (``image_url``: a PNG data URL of the screen).
- The reply's ``output`` holds ``reasoning``, ``message`` and ``computer_call`` items
  (``{"call_id", "action": {"type": "click", "button": "left", "x", "y"}, ...,
  "pending_safety_checks": [{"id", "code", "message"}]}``).
- Later requests chain with ``previous_response_id`` (the server keeps the context)
  and send one ``computer_call_output`` per call: ``{"call_id", "output": {"type":
  "computer_screenshot", "image_url": ...}, "acknowledged_safety_checks": [...]}``,
  the screenshot after that call. A call the env cannot play is followed by a user
  message saying why (the Responses API has no tool-error flag for computer calls).
- A reply without ``computer_call`` ends the episode (``finish``).
- ``usage``: ``input_tokens`` (``input_tokens_details.cached_tokens`` of them cached),
  ``output_tokens`` (reasoning included).

Actions: ``click`` (left, right; ``wheel``, ``back``, ``forward`` are invalid),
``double_click``, ``scroll`` (``scroll_x``/``scroll_y`` pixels -> wheel notches of
100 px on the dominant axis), ``type``, ``keypress`` (key names combined with ``+``),
``drag`` (first point to last), ``move``, ``wait`` and ``screenshot`` (a
``screenshot`` step).

Safety checks (``safety_checks``): ``"acknowledge"`` (the default: the env is a
sandbox of test data; each check is logged and kept in the step's ``extra``) sends
them back as acknowledged; ``"refuse"`` ends the episode at the first one, unplayed.

Screen scaling: OpenAI's examples use a 1024x768 display; the 1280x800 screen is shown
at 1024x640 by default (:meth:`ScreenScaler.fit`), the size the tool declares.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from uirl_agents.cost import normalize_usage
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
)
from uirl_gym.actions import MAX_SCROLL_AMOUNT, SCROLL_NOTCH_PX, Action, ActionType, parse_keys

logger = logging.getLogger(__name__)

API_KEY_ENV = "OPENAI_API_KEY"
BASE_URL_ENV = "OPENAI_BASE_URL"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
DISPLAY = (1024, 768)
SAFETY_POLICIES = ("acknowledge", "refuse")

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

    model: str = "computer-use-preview"
    display: tuple[int, int] | None = None
    """The display the model sees; None: the screen fitted into 1024x768 (1024x640)."""
    environment: str = "browser"
    safety_checks: str = "acknowledge"
    """``acknowledge`` or ``refuse`` pending safety checks (see the module docstring)."""
    max_output_tokens: int | None = None
    instructions: str = INSTRUCTIONS
    reasoning_summary: str | None = "concise"
    extra_body: dict[str, Any] = field(default_factory=dict)
    transport: TransportConfig = field(default_factory=TransportConfig)

    def __post_init__(self) -> None:
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
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        scaler = ScreenScaler(*c.display) if c.display else ScreenScaler.fit(*DISPLAY)
        super().__init__(scaler, JsonPoster(headers, c.transport), c.transport)

    def tool(self) -> dict[str, Any]:
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
                        {"type": "input_image", "image_url": _data_url(screenshot)},
                    ],
                }
            )
        else:
            assert conv.turn is not None
            errors = []
            for k, call in enumerate(conv.turn.calls):
                last = k == len(conv.turn.calls) - 1
                shot = screenshot if last or call.screenshot is None else None
                image = shot if shot is not None else self.scaler.image(call.screenshot)
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
        pointer = conv.pointer
        for item in response.get("output") or []:
            kind = item.get("type")
            if kind == "reasoning":
                texts += [s.get("text", "") for s in item.get("summary") or []]
            elif kind == "message":
                texts += [p.get("text", "") for p in item.get("content") or [] if "text" in p]
            elif kind == "computer_call":
                call = self._map_call(item, pointer)
                calls.append(call)
                for action in call.actions:
                    if action.x is not None and action.y is not None:
                        pointer = (action.x, action.y)
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

    def _map_call(self, item: dict[str, Any], pointer: tuple[int, int] | None) -> ToolCall:
        raw = dict(item.get("action") or {})
        call = ToolCall(call_id=str(item.get("call_id", "")), raw=raw)
        if item.get("pending_safety_checks"):
            call.extra["safety_checks"] = list(item["pending_safety_checks"])
        try:
            call.actions = self._actions(raw, pointer)
        except (ValueError, TypeError) as exc:
            call.error = f"{type(exc).__name__}: {exc}"
            call.actions = []
        return call

    def _actions(self, raw: dict[str, Any], pointer: tuple[int, int] | None) -> list[Action]:
        """One computer_call action -> env actions (raises ValueError when it has none)."""
        kind = raw.get("type")
        if kind == "click":
            button = raw.get("button", "left")
            types = {"left": ActionType.LEFT_CLICK, "right": ActionType.RIGHT_CLICK}
            if button not in types:
                raise ValueError(f"click: button {button!r} is not supported; left or right")
            return [Action(types[button], *self.point([raw.get("x"), raw.get("y")]))]
        if kind == "double_click":
            return [Action(ActionType.DOUBLE_CLICK, *self.point([raw.get("x"), raw.get("y")]))]
        if kind == "move":
            return [Action(ActionType.MOUSE_MOVE, *self.point([raw.get("x"), raw.get("y")]))]
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
            return [Action(ActionType.DRAG, x, y, end_x=end_x, end_y=end_y)]
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
        return Action(ActionType.SCROLL, x, y, direction=direction, amount=notches)


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
    w, h = scaler.width, scaler.height
    scale = min(1.0, 2048 / max(w, h))
    w, h = w * scale, h * scale
    scale = min(1.0, 768 / min(w, h))
    w, h = w * scale, h * scale
    return 85 + 170 * (-(-int(w) // 512)) * (-(-int(h) // 512))

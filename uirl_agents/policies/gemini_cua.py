"""GeminiCUAPolicy: Gemini's computer-use model through ``generateContent``.

Wire shapes (https://ai.google.dev/gemini-api/docs/computer-use):

- ``POST {GEMINI_BASE_URL}/v1beta/models/{model}:generateContent`` with header
  ``x-goog-api-key``, body ``{"contents": [...], "tools": [{"computerUse":
  {"environment": "ENVIRONMENT_BROWSER", "excludedPredefinedFunctions": [...]}}],
  "systemInstruction": {"parts": [{"text": ...}]}}``.
- The first content is the user's: the instruction (``text``) and the screen
  (``inlineData``: ``{"mimeType": "image/png", "data": base64}``), at the screen's
  own 1280x800.
- The reply's ``candidates[0].content`` (role ``model``) holds ``text`` and
  ``functionCall`` parts (``{"name": "click_at", "args": {"x": 500, "y": 300}}``); it
  goes back unchanged. The next content (role ``user``) holds one ``functionResponse``
  per call, in order: ``{"name", "response": {"url": ...}, "parts": [{"inlineData":
  ...}]}``, the screenshot after that call (``{"error": ...}`` in ``response`` for a
  call the env cannot play). Screenshots older than the latest ``max_images`` are
  dropped from the history, as in Google's reference agent.
- A reply without ``functionCall`` ends the episode (``finish``).
- ``usageMetadata``: ``promptTokenCount`` (``cachedContentTokenCount`` of them
  cached), ``candidatesTokenCount``, ``thoughtsTokenCount`` (billed as output).

Coordinates are on a 1000x1000 grid whatever the screen: grid ``x`` is screen pixel
``floor((x + 0.5) * 1280 / 1000)`` (the same pixel-centre rule as the other vendors).

Functions: two vocabularies, chosen from the model (Google's reference agent,
github.com/google-gemini/computer-use-preview, 2026-06-24). The models of
:data:`LEGACY_MODELS` (gemini-2.5-computer-use-preview-10-2025, gemini-3-flash-preview,
gemini-3.1-pro-preview) call ``click_at``, ``hover_at``, ``type_text_at`` (click, then
select all and delete when ``clear_before_typing`` (default true), type, Enter when
``press_enter`` (default false, as the reference agent)), ``key_combination``
(``"Control+A"``), ``scroll_document`` (5 notches at the screen's centre),
``scroll_at`` (``magnitude`` in grid units, default 800), ``drag_and_drop``,
``wait_5_seconds`` (a ``screenshot`` step after 5 s) and ``open_web_browser`` (a
``screenshot`` step). gemini-3.5-flash and later call ``click``, ``double_click``,
``triple_click``, ``right_click``, ``move``, ``type`` (at the focus; Enter when
``press_enter``), ``press_key``, ``hotkey``, ``scroll`` (as ``scroll_at``),
``drag_and_drop``, ``wait`` (``seconds``, default 1), ``take_screenshot``.
``navigate``, ``search``, ``go_back`` and ``go_forward`` leave the task's app, and
``middle_click``, ``mouse_down``/``mouse_up``, ``key_down``/``key_up`` have no env
action: they are excluded from the tool, and invalid if called anyway.

Safety: a call whose ``args.safety_decision.decision`` is ``require_confirmation`` is
acknowledged (``"safety_acknowledgement": "true"`` in its response; the default) or
ends the episode (``safety_checks="refuse"``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
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
    wait_seconds,
)
from uirl_agents.policies.usage import normalize_usage
from uirl_gym.actions import (
    MAX_SCROLL_AMOUNT,
    SCREEN_HEIGHT,
    SCREEN_WIDTH,
    SCROLL_NOTCH_PX,
    Action,
    ActionType,
    parse_keys,
)

logger = logging.getLogger(__name__)

API_KEY_ENVS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
BASE_URL_ENV = "GEMINI_BASE_URL"
DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
GRID = 1000
# Models that call the first function vocabulary (the reference agent's list).
LEGACY_MODELS = (
    "gemini-2.5-computer-use-preview-10-2025",
    "gemini-3-flash-preview",
    "gemini-3.1-pro-preview",
)
# Predefined functions excluded from the tool: the browser-level ones would leave the
# task's app; the others have no env action.
EXCLUDED_FUNCTIONS = ("navigate", "search", "go_back", "go_forward")
EXCLUDED_FUNCTIONS_V2 = (
    "navigate", "go_back", "go_forward", "middle_click", "mouse_down", "mouse_up",
    "key_down", "key_up",
)  # fmt: skip
CLICKS = {
    "click": ActionType.LEFT_CLICK,
    "double_click": ActionType.DOUBLE_CLICK,
    "triple_click": ActionType.TRIPLE_CLICK,
    "right_click": ActionType.RIGHT_CLICK,
}
LEGACY_WAIT_S = 5.0
PAGE_URL = "http://uirl.local/"  # what the model is told the page's URL is
SYSTEM_INSTRUCTION = (
    "You control a browser that shows one web application; do not navigate away. Do the "
    "user's task without asking for confirmation: it is a test environment with made-up "
    "data. When it is done, say so in a short message without calling a function."
)
DOCUMENT_SCROLL_NOTCHES = 5


@dataclass
class GeminiCUAPolicyConfig:
    """How :class:`GeminiCUAPolicy` talks to the Gemini API.

    The API key comes from ``GEMINI_API_KEY`` (else ``GOOGLE_API_KEY``) only; the base
    URL from ``GEMINI_BASE_URL``.
    """

    model: str = "gemini-3.5-flash"
    max_images: int = 3
    """Screenshots kept in the history (the latest ones)."""
    safety_checks: str = "acknowledge"
    """``acknowledge`` or ``refuse`` calls that require confirmation."""
    system_instruction: str = SYSTEM_INSTRUCTION
    extra_body: dict[str, Any] = field(default_factory=dict)
    transport: TransportConfig = field(default_factory=TransportConfig)

    def __post_init__(self) -> None:
        if self.safety_checks not in ("acknowledge", "refuse"):
            raise ValueError(
                f"safety_checks: expected 'acknowledge' or 'refuse', got {self.safety_checks!r}"
            )
        if self.max_images < 1:
            raise ValueError(f"max_images: expected >= 1, got {self.max_images}")


class GeminiCUAPolicy(ComputerUsePolicy):
    """Gemini's computer-use model (see the module docstring for the protocol).

    Attributes:
        name: ``gemini-cua:MODEL``.
        config: :class:`GeminiCUAPolicyConfig`.
        url: the generateContent endpoint.
        scaler: the 1000x1000 grid <-> the screen.

    Raises:
        ValueError: neither ``GEMINI_API_KEY`` nor ``GOOGLE_API_KEY`` is set.
    """

    def __init__(self, config: GeminiCUAPolicyConfig | None = None) -> None:
        self.config = c = config or GeminiCUAPolicyConfig()
        key, base = vendor_credentials(API_KEY_ENVS, BASE_URL_ENV, DEFAULT_BASE_URL, "Gemini")
        self.url = f"{base}/v1beta/models/{c.model}:generateContent"
        self.name = f"gemini-cua:{c.model}"
        headers = {"x-goog-api-key": key, "Content-Type": "application/json"}
        super().__init__(ScreenScaler(GRID, GRID), JsonPoster(headers, c.transport), c.transport)

    def model_image(self, screenshot: np.ndarray) -> np.ndarray:
        return screenshot  # the grid is normalised: the model sees the screen as it is

    @property
    def legacy(self) -> bool:
        """Whether the model calls the first vocabulary (``click_at``, ...)."""
        return self.config.model.startswith(LEGACY_MODELS)

    def tool(self) -> dict[str, Any]:
        excluded = EXCLUDED_FUNCTIONS if self.legacy else EXCLUDED_FUNCTIONS_V2
        return {
            "computerUse": {
                "environment": "ENVIRONMENT_BROWSER",
                "excludedPredefinedFunctions": list(excluded),
            }
        }

    def _request(self, conv: Conversation, screenshot: np.ndarray) -> dict[str, Any]:
        c = self.config
        contents: list[dict[str, Any]] = conv.state.setdefault("contents", [])
        if not contents:
            contents.append(
                {"role": "user", "parts": [{"text": conv.instruction}, _inline(screenshot)]}
            )
        else:
            assert conv.turn is not None
            parts = []
            for k, call in enumerate(conv.turn.calls):
                last = k == len(conv.turn.calls) - 1
                shot = screenshot if last or call.screenshot is None else call.screenshot
                response: dict[str, Any] = {"url": PAGE_URL}
                if call.error:
                    response["error"] = call.error
                if call.extra.get("safety_decision"):
                    response["safety_acknowledgement"] = "true"
                function_response = {
                    "name": call.raw.get("name", ""),
                    "response": response,
                    "parts": [_inline(shot)],
                }
                if "id" in call.extra:  # the API pairs calls and responses by id when given
                    function_response["id"] = call.extra["id"]
                parts.append({"functionResponse": function_response})
            contents.append({"role": "user", "parts": parts})
        _prune_images(contents, c.max_images)
        conv.state["images_sent"] = sum(1 for _ in _images(contents))
        body = {
            "contents": contents,
            "tools": [self.tool()],
            "systemInstruction": {"parts": [{"text": c.system_instruction}]},
        }
        return body | c.extra_body

    def _parse(self, conv: Conversation, response: dict[str, Any]) -> Turn:
        candidate = (response.get("candidates") or [{}])[0]
        content = candidate.get("content") or {"role": "model", "parts": []}
        conv.state["contents"].append(content)
        texts, calls = [], []
        for n, part in enumerate(content.get("parts") or []):
            if "text" in part:
                texts.append(part["text"])
            elif "functionCall" in part:
                calls.append(self._map_call(part["functionCall"], n))
        usage = normalize_usage(response.get("usageMetadata") or {"promptTokenCount": 0})
        if usage is not None:
            # Gemini 2.x: 258 tokens per 768x768 tile of an image larger than 384 px.
            tiles = math.ceil(SCREEN_WIDTH / 768) * math.ceil(SCREEN_HEIGHT / 768)
            usage["image_tokens"] = 258 * tiles * conv.state.get("images_sent", 0)
        turn = Turn(calls, text="\n".join(texts), usage=usage, stop=candidate.get("finishReason"))
        if any(call.extra.get("safety_decision") for call in calls):
            if self.config.safety_checks == "refuse":
                logger.warning("%s: a call requires confirmation: refused, episode ends", self.name)
                return Turn([], text=turn.text, usage=usage, stop="SafetyCheckRefused")
            logger.warning("%s: a call requires confirmation: acknowledged (sandbox)", self.name)
        return turn

    def _map_call(self, function_call: dict[str, Any], n: int) -> ToolCall:
        name = function_call.get("name")
        args = dict(function_call.get("args") or {})
        call = ToolCall(call_id=str(function_call.get("id", n)), raw={"name": name, **args})
        if "id" in function_call:
            call.extra["id"] = function_call["id"]
        decision = args.get("safety_decision") or {}
        if decision.get("decision") == "require_confirmation":
            call.extra["safety_decision"] = decision
        try:
            call.actions = (self._legacy_actions if self.legacy else self._actions)(name, args)
            if name in ("wait", "wait_5_seconds"):
                seconds = LEGACY_WAIT_S if name == "wait_5_seconds" else args.get("seconds", 1)
                call.waits[0] = wait_seconds(seconds, "wait: seconds")
        except (ValueError, TypeError) as exc:
            call.error = f"{type(exc).__name__}: {exc}"
            call.actions = []
        return call

    def _at(self, args: dict[str, Any], x: str = "x", y: str = "y") -> tuple[int, int]:
        return self.point([args.get(x), args.get(y)], f"{x}, {y}")

    def _legacy_actions(self, name: Any, args: dict[str, Any]) -> list[Action]:
        """One function call of :data:`LEGACY_MODELS` -> env actions (raises ValueError
        when it has none)."""
        if name == "click_at":
            return [Action(ActionType.LEFT_CLICK, *self._at(args))]
        if name == "hover_at":
            return [Action(ActionType.MOUSE_MOVE, *self._at(args))]
        if name == "type_text_at":
            return self._type_at(args)
        if name == "key_combination":
            return [Action(ActionType.KEYS, keys=key_combo(args.get("keys"), name))]
        if name in ("scroll_document", "scroll_at"):
            return [self._scroll(name, args)]
        if name == "drag_and_drop":
            return [self._drag(args)]
        if name in ("wait_5_seconds", "open_web_browser"):
            return [Action(ActionType.SCREENSHOT)]
        raise ValueError(
            f"function {name!r} is not supported here (the task's app is the whole screen); "
            "supported: click_at, hover_at, type_text_at, key_combination, scroll_document, "
            "scroll_at, drag_and_drop, wait_5_seconds"
        )

    def _actions(self, name: Any, args: dict[str, Any]) -> list[Action]:
        """One function call of gemini-3.5-flash and later -> env actions (raises
        ValueError when it has none)."""
        if name in CLICKS:
            return [Action(CLICKS[name], *self._at(args))]
        if name == "move":
            return [Action(ActionType.MOUSE_MOVE, *self._at(args))]
        if name == "type":
            return self._type(args)
        if name == "press_key":
            return [Action(ActionType.KEYS, keys=key_combo(args.get("key"), name))]
        if name == "hotkey":
            return [Action(ActionType.KEYS, keys=key_combo(args.get("keys"), name))]
        if name == "scroll":
            return [self._scroll("scroll_at", args)]
        if name == "drag_and_drop":
            return [self._drag(args)]
        if name in ("wait", "take_screenshot", "open_web_browser"):
            return [Action(ActionType.SCREENSHOT)]
        raise ValueError(
            f"function {name!r} is not supported here (the task's app is the whole screen); "
            "supported: click, double_click, triple_click, right_click, move, type, "
            "press_key, hotkey, scroll, drag_and_drop, wait, take_screenshot"
        )

    def _drag(self, args: dict[str, Any]) -> Action:
        x, y = self._at(args)
        end_x, end_y = self._at(args, "destination_x", "destination_y")
        return Action(ActionType.DRAG, x, y, end_x=end_x, end_y=end_y)

    def _type(self, args: dict[str, Any]) -> list[Action]:
        """Type at the focus; Enter after it when ``press_enter`` (default false)."""
        text = args.get("text")
        if not isinstance(text, str):
            raise ValueError(f"type: expected a text string, got {text!r}")
        actions = [Action(ActionType.TYPE, text=chunk) for chunk in text_chunks(text)]
        if args.get("press_enter", False):
            actions.append(Action(ActionType.KEYS, keys="Enter"))
        return actions

    def _type_at(self, args: dict[str, Any]) -> list[Action]:
        actions = [Action(ActionType.LEFT_CLICK, *self._at(args))]
        if args.get("clear_before_typing", True):
            actions += [
                Action(ActionType.KEYS, keys="ctrl+a"),
                Action(ActionType.KEYS, keys="Delete"),
            ]
        return actions + self._type(args)

    def _scroll(self, name: str, args: dict[str, Any]) -> Action:
        direction = args.get("direction")
        if name == "scroll_document":
            x, y = SCREEN_WIDTH // 2, SCREEN_HEIGHT // 2
            return Action(
                ActionType.SCROLL, x, y, direction=direction, amount=DOCUMENT_SCROLL_NOTCHES
            )
        x, y = self._at(args)
        magnitude = args.get("magnitude", 800)
        if isinstance(magnitude, bool) or not isinstance(magnitude, int | float) or magnitude <= 0:
            raise ValueError(f"scroll_at: magnitude must be a positive number, got {magnitude!r}")
        extent = SCREEN_HEIGHT if direction in ("up", "down") else SCREEN_WIDTH
        notches = round(magnitude / GRID * extent / SCROLL_NOTCH_PX)
        return Action(
            ActionType.SCROLL,
            x,
            y,
            direction=direction,
            amount=max(1, min(MAX_SCROLL_AMOUNT, notches)),
        )


def key_combo(keys: Any, function: str) -> str:
    """Gemini's keys (``"Control+A"``, ``["Control", "A"]``, ``"Enter"``) -> an env
    combination (letters lower-cased: keys, not characters).

    Raises:
        ValueError: not keys the env knows.
    """
    if isinstance(keys, list) and keys and all(isinstance(k, str) for k in keys):
        keys = "+".join(keys)
    if not isinstance(keys, str) or not keys:
        raise ValueError(f"{function}: expected keys such as 'Control+A', got {keys!r}")
    combo = "+".join(p.lower() if len(p) == 1 else p for p in keys.split("+"))
    parse_keys(combo)
    return combo


def _inline(image: np.ndarray) -> dict[str, Any]:
    return {"inlineData": {"mimeType": "image/png", "data": png_base64(image)}}


def _images(contents: list[dict[str, Any]]) -> Iterator[tuple[list[dict[str, Any]], int, bool]]:
    """``(parts, index, nested)`` of every image, oldest first; ``nested``: inside a
    function response (whose parts may only be data, not text)."""
    for content in contents:
        parts = content.get("parts") or []
        for k, part in enumerate(parts):
            if "inlineData" in part:
                yield parts, k, False
            nested = (part.get("functionResponse") or {}).get("parts")
            if isinstance(nested, list):
                for j, sub in enumerate(nested):
                    if "inlineData" in sub:
                        yield nested, j, True


def _prune_images(contents: list[dict[str, Any]], keep: int) -> None:
    """Drop all but the latest ``keep`` screenshots, in place (a text says so where
    the part may be text)."""
    found = list(_images(contents))
    # Backwards, so that deleting from a list leaves the earlier indices valid.
    for parts, k, nested in reversed(found[: max(0, len(found) - keep)]):
        if nested:
            del parts[k]
        else:
            parts[k] = {"text": "[an earlier screenshot, removed to keep the context short]"}

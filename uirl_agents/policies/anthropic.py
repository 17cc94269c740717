"""AnthropicPolicy: Claude through the Messages API and its ``computer`` tool.

Wire shapes (https://platform.claude.com/docs/en/agents-and-tools/tool-use/computer-use-tool;
the anthropic SDK's types, which the tests check every request and reply against):

- ``POST {ANTHROPIC_BASE_URL}/v1/messages`` with headers ``x-api-key`` and
  ``anthropic-version: 2023-06-01``, body ``{"model", "max_tokens", "system", "tools":
  [TOOL], "messages": [...]}``. ``TOOL`` follows the model (:data:`MODEL_TOOLS`;
  ``tool_version`` overrides): the generally available toolset ``{"type":
  "computer_toolset_20260801", "configs": {MEMBER: {"enabled": false}, ...}}`` (no
  beta header, no display size: the model answers in the screenshot's pixels), or an
  earlier ``{"type": "computer_20251124", "name": "computer", "display_width_px": W,
  "display_height_px": H}`` with its ``anthropic-beta`` header (:data:`TOOL_BETAS`).
- The first user message is the instruction and the screenshot (an ``image`` block,
  ``{"type": "base64", "media_type": "image/png", "data": ...}``).
- The reply's ``content`` holds ``text`` and ``tool_use`` blocks: the toolset's name
  the action (``{"id", "name": "left_click", "toolset_name": "computer", "input":
  {"coordinate": [x, y], "text": "shift"}}``), the earlier tools' carry it in
  ``input.action`` (``"name": "computer"``); the reply goes back as the assistant turn,
  unchanged. The next user message holds one ``tool_result`` per ``tool_use``
  (``tool_use_id``, ``content``, ``is_error``, ``toolset_name``): the screenshot after
  the turn's last call rides on the last result (every result with
  ``screenshot_every_call``). Screenshots older than the latest ``max_images`` are
  replaced by a text placeholder (the context stays bounded, as in Anthropic's demo).
- A reply without ``tool_use`` ends the episode (``finish``).
- ``usage``: ``input_tokens``, ``output_tokens``, ``cache_read_input_tokens``,
  ``cache_creation_input_tokens``.

Actions: ``left_click``, ``right_click``, ``double_click``, ``triple_click``,
``mouse_move``, ``left_click_drag`` (``start_coordinate`` -> ``coordinate``, or from
the pointer), ``scroll`` (``scroll_direction``, ``scroll_amount`` in wheel notches),
each holding the modifiers in ``text``; ``type`` (split in chunks the env takes),
``key`` (xdotool syntax, translated; ``"ctrl+a Delete"`` is two env steps; ``repeat``
times), ``screenshot``, ``wait`` (``duration`` seconds, then a ``screenshot`` step)
and ``cursor_position`` (a ``screenshot`` step answering ``X=.., Y=..``).
``middle_click``, ``left_mouse_down``/``up``, ``hold_key`` and ``zoom`` have no env
action: switched off in the toolset, tool errors if called (:data:`TOOLSET_DISABLED`).

Screen scaling: Anthropic recommends XGA (1024x768) or less; the 1280x800 screen is
shown at 1024x640 (:meth:`ScreenScaler.fit`), the display size the tool declares.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

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
    warn_if_retiring,
)
from uirl_agents.policies.usage import normalize_usage
from uirl_gym.actions import (
    MAX_SCROLL_AMOUNT,
    MAX_TEXT_LENGTH,
    Action,
    ActionType,
    held_modifiers,
    parse_keys,
)

logger = logging.getLogger(__name__)

API_KEY_ENV = "ANTHROPIC_API_KEY"
BASE_URL_ENV = "ANTHROPIC_BASE_URL"
DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
TOOLSET = "computer_toolset_20260801"
# Tool version -> the beta header that enables it (None: generally available).
TOOL_BETAS: dict[str, str | None] = {
    "computer_20241022": "computer-use-2024-10-22",
    "computer_20250124": "computer-use-2025-01-24",
    "computer_20251124": "computer-use-2025-11-24",
    TOOLSET: None,
}
# Model name prefix (the longest one a model starts with) -> the computer tool it takes:
# Anthropic's computer-use tool page ("API support", "Earlier tool versions") as stored
# on 2026-11-27. Claude 5.5 models refuse the older versions (HTTP 400).
MODEL_TOOLS = {
    "claude-fable-": TOOLSET,
    "claude-mythos-5": TOOLSET,
    "claude-opus-5": TOOLSET,
    "claude-sonnet-5": TOOLSET,
    "claude-haiku-5": TOOLSET,
    "claude-opus-4-8": TOOLSET,
    "claude-mythos-preview": "computer_20251124",
    "claude-opus-4-7": "computer_20251124",
    "claude-opus-4-6": "computer_20251124",
    "claude-opus-4-5": "computer_20251124",
    "claude-sonnet-4-6": "computer_20251124",
    "claude-sonnet-4-5": "computer_20250124",
    "claude-haiku-4-5": "computer_20250124",
    "claude-sonnet-4": "computer_20250124",
    "claude-opus-4": "computer_20250124",
    "claude-3-7-sonnet": "computer_20250124",
}
# The anthropic SDK's deprecation table (anthropic 2.14, ``anthropic/_data``): model ->
# end of life. A newer installed SDK adds its own entries (:func:`retirements`).
DEPRECATED_MODELS = {
    "claude-mythos-preview": "2026-06-30",
    "claude-sonnet-4-5": "2026-11-30",
    "claude-sonnet-4-5-20250929": "2026-11-30",
    "claude-opus-4-5": "2027-01-22",
    "claude-opus-4-5-20251101": "2027-01-22",
}
# Toolset members the env cannot perform: switched off in the tool (``configs``), and
# a tool error if called anyway. The env has no middle button, no separate press and
# release, no key held over time; zoom returns no new screenshot.
TOOLSET_DISABLED = ("hold_key", "left_mouse_down", "left_mouse_up", "middle_click", "zoom")
MAX_KEY_REPEAT = 50
XGA = (1024, 768)
CLICKS = {
    "left_click": ActionType.LEFT_CLICK,
    "right_click": ActionType.RIGHT_CLICK,
    "double_click": ActionType.DOUBLE_CLICK,
    "triple_click": ActionType.TRIPLE_CLICK,
}
IMAGE_PLACEHOLDER = "[an earlier screenshot, removed to keep the context short]"

SYSTEM_PROMPT = (
    "You control a computer whose screen shows one web application in a browser without "
    "an address bar; the screen is {w}x{h} pixels. Use the computer tool to do the task. "
    "Act directly: the screenshot after your actions comes back with the tool results. "
    "When the task is done, reply with a short message and no tool call."
)

# xdotool key names (as in Anthropic's demo) -> the env's names (uirl_gym.actions).
XDOTOOL_KEYS = {
    "return": "Enter", "kp_enter": "NumpadEnter", "backspace": "Backspace",
    "page_up": "PageUp", "page_down": "PageDown", "prior": "PageUp", "next": "PageDown",
    "super_l": "MetaLeft", "super_r": "MetaRight", "control_l": "ControlLeft",
    "control_r": "ControlRight", "shift_l": "ShiftLeft", "shift_r": "ShiftRight",
    "alt_l": "AltLeft", "alt_r": "AltRight", "meta_l": "MetaLeft", "meta_r": "MetaRight",
    "menu": "ContextMenu", "kp_add": "NumpadAdd", "kp_subtract": "NumpadSubtract",
    "kp_multiply": "NumpadMultiply", "kp_divide": "NumpadDivide",
    "kp_decimal": "NumpadDecimal", **{f"kp_{i}": f"Numpad{i}" for i in range(10)},
    "minus": "-", "equal": "=", "comma": ",", "period": ".", "slash": "/",
    "backslash": "\\", "semicolon": ";", "apostrophe": "'", "grave": "`",
    "bracketleft": "[", "bracketright": "]", "plus": "+", "asterisk": "*",
    "underscore": "_", "question": "?", "exclam": "!", "at": "@",
}  # fmt: skip


def xdotool_combos(text: str) -> list[str]:
    """xdotool ``key`` syntax -> env key combinations, one per space-separated group.

    Raises:
        ValueError: empty, or a key the env has no name for.
    """
    groups = text.split()
    if not groups:
        raise ValueError("key: expected xdotool keys such as 'ctrl+a' or 'Return', got ''")
    combos = []
    for group in groups:
        parts = group.split("+") if group != "+" else ["+"]
        combo = "+".join(XDOTOOL_KEYS.get(p.lower(), p) for p in parts)
        parse_keys(combo)  # fails here with the env's own message
        combos.append(combo)
    return combos


def text_chunks(text: str) -> list[str]:
    """``text`` in pieces the env's ``type`` takes (at most MAX_TEXT_LENGTH each)."""
    if not text:
        return [""]
    return [text[i : i + MAX_TEXT_LENGTH] for i in range(0, len(text), MAX_TEXT_LENGTH)]


@dataclass
class AnthropicPolicyConfig:
    """How :class:`AnthropicPolicy` talks to the Messages API.

    The API key comes from ``ANTHROPIC_API_KEY`` only (it is never a config field, so
    it is never written with the config); the base URL from ``ANTHROPIC_BASE_URL``.
    """

    model: str = "claude-sonnet-5-5"
    max_tokens: int = 1024
    """Longest reply (text and tool calls) per turn."""
    tool_version: str | None = None
    """The computer tool's type (:data:`TOOL_BETAS`; its beta header follows); None:
    the one the model takes (:func:`tool_version_for`)."""
    display: tuple[int, int] | None = None
    """The display the model sees; None: the screen fitted into XGA (1024x640)."""
    max_images: int = 3
    """Screenshots kept in the conversation (the latest ones)."""
    prompt_caching: bool = False
    """Mark the latest user turn ``cache_control: ephemeral``, so each request reads the
    conversation so far from Anthropic's prompt cache (0.1x the input price) and writes
    the new turn (1.25x). Screenshots are then dropped in chunks of ``max_images``
    (keeping ``max_images`` to ``2 * max_images - 1``): the cached prefix changes only
    when a chunk goes, not every turn."""
    screenshot_every_call: bool = False
    """Attach the screenshot after each call to its result, not only the turn's last."""
    system_prompt: str = SYSTEM_PROMPT
    extra_body: dict[str, Any] = field(default_factory=dict)
    """Merged into every request body (e.g. ``{"thinking": {...}}``)."""
    transport: TransportConfig = field(default_factory=TransportConfig)

    def __post_init__(self) -> None:
        if self.tool_version is None:
            self.tool_version = tool_version_for(self.model)
        if self.tool_version not in TOOL_BETAS:
            raise ValueError(
                f"tool_version: expected one of {sorted(TOOL_BETAS)}, got {self.tool_version!r}"
            )
        if self.max_images < 1:
            raise ValueError(f"max_images: expected >= 1, got {self.max_images}")


class AnthropicPolicy(ComputerUsePolicy):
    """Claude with the ``computer`` tool (see the module docstring for the protocol).

    Attributes:
        name: ``anthropic:MODEL``.
        config: :class:`AnthropicPolicyConfig`.
        url: the messages endpoint.
        scaler: screen <-> the tool's display.

    Raises:
        ValueError: ``ANTHROPIC_API_KEY`` is not set.
    """

    def __init__(self, config: AnthropicPolicyConfig | None = None) -> None:
        self.config = c = config or AnthropicPolicyConfig()
        key, base = vendor_credentials((API_KEY_ENV,), BASE_URL_ENV, DEFAULT_BASE_URL, "Anthropic")
        self.url = base + "/v1/messages"
        self.name = f"anthropic:{c.model}"
        warn_if_retiring("Anthropic", c.model, retirements())
        headers = {
            "x-api-key": key,
            "anthropic-version": API_VERSION,
            "content-type": "application/json",
        }
        assert c.tool_version is not None  # __post_init__ chose it
        beta = TOOL_BETAS[c.tool_version]
        if beta:
            headers["anthropic-beta"] = beta
        scaler = ScreenScaler(*c.display) if c.display else ScreenScaler.fit(*XGA)
        super().__init__(scaler, JsonPoster(headers, c.transport), c.transport)

    @property
    def toolset(self) -> bool:
        """Whether the tool is the toolset (each action a tool of its own name)."""
        return self.config.tool_version == TOOLSET

    def tool(self) -> dict[str, Any]:
        if self.toolset:
            # No display size: the model answers in the screenshot's pixels.
            configs = {member: {"enabled": False} for member in TOOLSET_DISABLED}
            return {"type": TOOLSET, "configs": configs}
        return {
            "type": self.config.tool_version,
            "name": "computer",
            "display_width_px": self.scaler.width,
            "display_height_px": self.scaler.height,
            "display_number": 1,
        }

    def _request(self, conv: Conversation, screenshot: np.ndarray) -> dict[str, Any]:
        c = self.config
        messages: list[dict[str, Any]] = conv.state.setdefault("messages", [])
        if not messages:
            first = [{"type": "text", "text": conv.instruction}, _image_block(screenshot)]
            messages.append({"role": "user", "content": first})
        else:
            assert conv.turn is not None
            results = []
            calls = conv.turn.calls
            for k, call in enumerate(calls):
                last = k == len(calls) - 1
                content: list[dict[str, Any]] = []
                if call.error:
                    content.append({"type": "text", "text": call.error})
                elif call.output_text:
                    content.append({"type": "text", "text": call.output_text})
                if last:
                    content.append(_image_block(screenshot))
                elif c.screenshot_every_call and call.screenshot is not None:
                    content.append(_image_block(self.scaler.image(call.screenshot)))
                result: dict[str, Any] = {"type": "tool_result", "tool_use_id": call.call_id}
                result["content"] = content or [{"type": "text", "text": "done"}]
                if call.error:
                    result["is_error"] = True
                if self.toolset:
                    result["toolset_name"] = "computer"
                results.append(result)
            messages.append({"role": "user", "content": results})
        if c.prompt_caching:
            if _count_images(messages) >= 2 * c.max_images:
                _prune_images(messages, c.max_images)
            _mark_cache_breakpoint(messages)
        else:
            _prune_images(messages, c.max_images)
        body = {
            "model": c.model,
            "max_tokens": c.max_tokens,
            "system": c.system_prompt.format(w=self.scaler.width, h=self.scaler.height),
            "tools": [self.tool()],
            "messages": messages,
        }
        conv.state["images_sent"] = _count_images(messages)
        return body | c.extra_body

    def _parse(self, conv: Conversation, response: dict[str, Any]) -> Turn:
        content = response.get("content") or []
        conv.state["messages"].append({"role": "assistant", "content": content})
        texts, calls = [], []
        pointer = conv.pointer
        for block in content:
            if block.get("type") == "text":
                texts.append(block.get("text", ""))
            elif block.get("type") == "tool_use":
                call = self._map_call(block, pointer)
                calls.append(call)
                for action in call.actions:
                    pointer = action.pointer_after or pointer
        usage = normalize_usage(response.get("usage") or {})
        if usage is not None:
            # Anthropic's estimate: an image costs about width * height / 750 tokens.
            per_image = self.scaler.width * self.scaler.height // 750
            usage["image_tokens"] = per_image * conv.state.get("images_sent", 0)
        return Turn(calls, text="\n".join(texts), usage=usage, stop=response.get("stop_reason"))

    def _map_call(self, block: dict[str, Any], pointer: tuple[int, int] | None) -> ToolCall:
        name = block.get("name")
        raw = dict(block.get("input") or {})
        if block.get("toolset_name") == "computer" or (self.toolset and name != "computer"):
            raw = {"action": name, **raw}  # the toolset: the action is the tool's name
        call = ToolCall(call_id=str(block.get("id", "")), raw=raw)
        if name != "computer" and block.get("toolset_name") != "computer":
            tools = "the computer toolset's members" if self.toolset else "'computer'"
            call.error = f"UnknownTool: {name!r}; the tools are {tools}"
            return call
        try:
            call.actions = self._actions(raw, pointer, call)
        except (ValueError, TypeError) as exc:
            call.error = f"{type(exc).__name__}: {exc}"
            call.actions = []
        return call

    def _actions(
        self, raw: dict[str, Any], pointer: tuple[int, int] | None, call: ToolCall
    ) -> list[Action]:
        """One vendor action -> env actions (raises ValueError when it has none)."""
        action = raw.get("action")
        if action in CLICKS or action in ("mouse_move", "left_click_drag"):
            return [self._pointer_action(raw, pointer)]
        if action == "type":
            text = raw.get("text")
            if not isinstance(text, str):
                raise ValueError(f"type: expected a text string, got {text!r}")
            return [Action(ActionType.TYPE, text=chunk) for chunk in text_chunks(text)]
        if action == "key":
            repeat = raw.get("repeat", 1)
            if repeat is None:
                repeat = 1
            if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
                raise ValueError(f"key: repeat must be a positive integer, got {repeat!r}")
            if repeat > MAX_KEY_REPEAT:
                raise ValueError(f"key: repeat at most {MAX_KEY_REPEAT}, got {repeat}")
            combos = xdotool_combos(raw.get("text") or "")
            return [Action(ActionType.KEYS, keys=k) for _ in range(repeat) for k in combos]
        if action == "scroll":
            return [self._scroll(raw)]
        if action == "screenshot":
            return [Action(ActionType.SCREENSHOT)]
        if action == "wait":
            call.waits[0] = wait_seconds(raw.get("duration", 1), "wait: duration")
            return [Action(ActionType.SCREENSHOT)]
        if action == "cursor_position":
            if pointer is None:
                call.output_text = "The cursor position is not known yet."
            else:
                mx, my = self.scaler.to_model(*pointer)
                call.output_text = f"X={mx},Y={my}"
            return [Action(ActionType.SCREENSHOT)]
        raise ValueError(
            f"action {action!r} is not supported here; supported: left_click, right_click, "
            "double_click, triple_click, mouse_move, left_click_drag, type, key, scroll, "
            "screenshot, wait, cursor_position"
        )

    def _pointer_action(self, raw: dict[str, Any], pointer: tuple[int, int] | None) -> Action:
        action = raw["action"]
        where = raw.get("coordinate")
        keys = held_keys(raw.get("text"), action)
        if action == "mouse_move":
            return Action(ActionType.MOUSE_MOVE, *self.point(where), keys=keys)
        if action == "left_click_drag":
            start = raw.get("start_coordinate")
            x, y = (
                self.point(start, "start_coordinate")
                if start is not None
                else _known(pointer, action)
            )
            end_x, end_y = self.point(where)
            return Action(ActionType.DRAG, x, y, end_x=end_x, end_y=end_y, keys=keys)
        x, y = self.point(where) if where is not None else _known(pointer, action)
        return Action(CLICKS[action], x, y, keys=keys)

    def _scroll(self, raw: dict[str, Any]) -> Action:
        amount = raw.get("scroll_amount", 3)
        if isinstance(amount, bool) or not isinstance(amount, int) or amount < 1:
            raise ValueError(f"scroll_amount: expected a positive integer, got {amount!r}")
        where = raw.get("coordinate")
        x, y = self.point(where) if where is not None else (None, None)
        return Action(
            ActionType.SCROLL,
            x,
            y,
            direction=raw.get("scroll_direction"),
            amount=min(amount, MAX_SCROLL_AMOUNT),
            keys=held_keys(raw.get("text"), "scroll"),
        )


def tool_version_for(model: str) -> str:
    """The computer tool ``model`` takes (:data:`MODEL_TOOLS`); a model the table does
    not know gets the newest, with a warning saying how to choose another."""
    matches = [prefix for prefix in MODEL_TOOLS if model.startswith(prefix)]
    if matches:
        return MODEL_TOOLS[max(matches, key=len)]
    logger.warning(
        "anthropic:%s: not a model whose computer tool is known here; sending %s (the "
        "newest). Choose another with tool=VERSION in --agent (one of %s)",
        model,
        TOOLSET,
        ", ".join(TOOL_BETAS),
    )
    return TOOLSET


def retirements() -> dict[str, str]:
    """Model -> end of life: :data:`DEPRECATED_MODELS`, updated from the installed
    anthropic SDK's table (``pip install -U anthropic`` brings newer dates)."""
    table = dict(DEPRECATED_MODELS)
    try:
        from anthropic._data import DEPRECATED_MODELS as sdk_table  # private, may move
    except ImportError:
        return table
    return dict(sdk_table) | table


def held_keys(text: Any, action: Any) -> str | None:
    """The modifiers a pointer action holds (xdotool ``text``: ``shift``, ``ctrl+shift``)
    in the env's syntax, None when none.

    Raises:
        ValueError: not a string of modifier keys.
    """
    if text is None or text == "":
        return None
    if not isinstance(text, str):
        raise ValueError(f"{action}: text (held keys) must be a string, got {text!r}")
    combo = "+".join(XDOTOOL_KEYS.get(p.lower(), p) for p in text.split("+"))
    try:
        held_modifiers(combo)
    except ValueError as exc:
        raise ValueError(f"{action}: {exc}") from None
    return combo


def _known(pointer: tuple[int, int] | None, action: Any) -> tuple[int, int]:
    if pointer is None:
        raise ValueError(f"{action}: no coordinate and the pointer is not known yet")
    return pointer


def _image_block(image: np.ndarray) -> dict[str, Any]:
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": png_base64(image)},
    }


def _blocks(messages: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """Every content list that may hold images, oldest first (tool results nest them)."""
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        yield content
        for block in content:
            if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                yield block["content"]


def _count_images(messages: list[dict[str, Any]]) -> int:
    return sum(b.get("type") == "image" for content in _blocks(messages) for b in content)


def _mark_cache_breakpoint(messages: list[dict[str, Any]]) -> None:
    """``cache_control`` on the last block of the latest user turn only (the API takes
    at most 4 breakpoints; one that moves forward reads everything before it)."""
    for message in messages:
        if message["role"] == "user" and isinstance(message["content"], list):
            for block in message["content"]:
                block.pop("cache_control", None)
    messages[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}


def _prune_images(messages: list[dict[str, Any]], keep: int) -> None:
    """Replace all but the latest ``keep`` images with a text placeholder, in place."""
    excess = _count_images(messages) - keep
    for content in _blocks(messages):
        for k, block in enumerate(content):
            if excess <= 0:
                return
            if block.get("type") == "image":
                content[k] = {"type": "text", "text": IMAGE_PLACEHOLDER}
                excess -= 1

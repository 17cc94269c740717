"""The Qwen2.5-VL format: one ``computer_use`` tool call per reply.

Output syntax (Qwen2.5-VL's function-calling convention)::

    The Email field is empty; I click it.
    <tool_call>
    {"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [652, 301]}}
    </tool_call>

Text before ``<tool_call>`` is the thought. ``arguments.action`` and the env actions:

=================================================  ==============================================
``key`` + ``keys: ["ctrl", "c"]``                    keys ``ctrl+c`` (a string is taken as is)
``type`` + ``text``                                  type
``mouse_move`` / ``left_click`` / ``right_click`` /  the same action at ``coordinate: [x, y]``;
``double_click`` / ``triple_click``                   a click without ``coordinate`` clicks where
                                                     the pointer is (see below)
``scroll`` + ``pixels`` and/or ``direction``         scroll; ``pixels > 0`` up, ``< 0`` down;
                                                     ``direction`` wins when given; amount =
                                                     ``round(|pixels| / 100)`` notches (1..50),
                                                     default 3; ``coordinate`` optional
``wait``                                             screenshot (look again)
``terminate`` + ``status``                           finish (``text`` = the status)
``left_click_drag`` + ``coordinate``                 drag to ``coordinate``, from
                                                     ``start_coordinate`` when given (as in
                                                     Anthropic's computer-use tool), else from
                                                     the pointer (Qwen's cookbook)
=================================================  ==============================================

Coordinates are absolute pixels of the image the model saw (the smart-resized
screenshot; the tool description states its size, as Qwen's computer-use cookbook
does), mapped to screen pixels and clamped to the screen. ``middle_click`` is invalid:
the env has none. Demonstrations render a drag with its ``start_coordinate``, so that
the step says where it starts without an earlier ``mouse_move``.

Clicks without ``coordinate``: the schema of Qwen's computer-use cookbook requires
``coordinate`` only for ``mouse_move`` (and drags), so ``mouse_move`` then a bare
``left_click`` is a valid way to click. The env speaks screen pixels only, so the
format resolves such a click to :attr:`ScreenGeometry.pointer` (the last point a parsed
action of this episode went to, kept by the policy's episode context) and the env gets
an ordinary click there. With no pointer known yet (no mouse action this episode; the
screenshots show no cursor) it is a parse error.
"""

from __future__ import annotations

import json
import re
from typing import Any

from uirl_gym.actions import DEFAULT_SCROLL_AMOUNT, MAX_SCROLL_AMOUNT, Action, ActionType

from .base import FormatParseError, ModelFormat, ScreenGeometry

TOOL_NAME = "computer_use"
# Env pixels per wheel notch (uirl_gym.actions: 100 px each).
PIXELS_PER_NOTCH = 100

_POINT_ACTIONS = {
    "mouse_move": ActionType.MOUSE_MOVE,
    "left_click": ActionType.LEFT_CLICK,
    "right_click": ActionType.RIGHT_CLICK,
    "double_click": ActionType.DOUBLE_CLICK,
    "triple_click": ActionType.TRIPLE_CLICK,
}
_ACTIONS = ("key", "type", *_POINT_ACTIONS, "left_click_drag", "scroll", "wait", "terminate")
_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)

_SYSTEM = """\
You are a helpful assistant.

# Tools

You can call functions to act for the user.

The function signatures are inside <tools></tools> XML tags:
<tools>
{tool}
</tools>

For each function call, reply with a JSON object holding the function name and its \
arguments inside <tool_call></tool_call> XML tags:
<tool_call>
{{"name": <function-name>, "arguments": <args-json-object>}}
</tool_call>"""

_TASK = """\
{instruction}

Look at the screenshot, think briefly about the next step, then make exactly one \
computer_use call."""


def tool_schema(geometry: ScreenGeometry) -> dict[str, Any]:
    """The ``computer_use`` function's JSON schema, stating the model's screen size."""
    w, h = geometry.image_width, geometry.image_height
    actions = (
        '* `key`: press the keys in `keys` together, e.g. ["ctrl", "c"] or ["enter"].\n'
        "* `type`: type the string `text` at the keyboard focus.\n"
        "* `mouse_move`: move the pointer to `coordinate`.\n"
        "* `left_click`, `right_click`, `double_click`, `triple_click`: click at `coordinate`, "
        "or where the pointer is when `coordinate` is left out.\n"
        "* `left_click_drag`: press the left button at `start_coordinate` (or where the pointer "
        "is), move to `coordinate`, release.\n"
        "* `scroll`: turn the mouse wheel at `coordinate` (or where the pointer is) by `pixels`.\n"
        "* `wait`: pause, then look at a new screenshot.\n"
        "* `terminate`: end the task and report `status`."
    )
    return {
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": (
                "Operate a computer with the mouse and keyboard; each call is followed by a "
                f"new screenshot.\n* The screen is {w}x{h} pixels; coordinates are pixels "
                "from its top-left corner.\n* Click the centre of the element you target."
            ),
            "parameters": {
                "type": "object",
                "required": ["action"],
                "properties": {
                    "action": {"type": "string", "enum": list(_ACTIONS), "description": actions},
                    "keys": {"type": "array", "description": "Required by `key`."},
                    "text": {"type": "string", "description": "Required by `type`."},
                    "coordinate": {
                        "type": "array",
                        "description": "(x, y): pixels from the left and top edges. "
                        "Required by `mouse_move` and `left_click_drag` (where it ends); "
                        "optional for clicks and `scroll`.",
                    },
                    "start_coordinate": {
                        "type": "array",
                        "description": "(x, y) where `left_click_drag` presses; default: "
                        "where the pointer is.",
                    },
                    "pixels": {
                        "type": "number",
                        "description": "Scroll amount for `scroll`: positive up, negative down.",
                    },
                    "direction": {
                        "type": "string",
                        "enum": ["up", "down", "left", "right"],
                        "description": "Optional for `scroll`: scroll this way by |pixels|.",
                    },
                    "status": {
                        "type": "string",
                        "enum": ["success", "failure"],
                        "description": "Required by `terminate`.",
                    },
                },
            },
        },
    }


class Qwen25VLFormat(ModelFormat):
    """Qwen2.5-VL: ``<tool_call>`` JSON replies, absolute resized-image coordinates."""

    name = "qwen2.5-vl"

    def system_prompt(self, geometry: ScreenGeometry) -> str:
        return _SYSTEM.format(tool=json.dumps(tool_schema(geometry)))

    def task_prompt(self, instruction: str, geometry: ScreenGeometry) -> str:
        return _TASK.format(instruction=instruction)

    def split_thought(self, text: str) -> tuple[str, str]:
        start = text.find("<tool_call>")
        if start < 0:
            return text.strip(), ""
        return text[:start].strip(), text[start:].strip()

    def parse_action(
        self, action_text: str, geometry: ScreenGeometry
    ) -> tuple[Action, tuple[str, ...]]:
        calls = _TOOL_CALL.findall(action_text)
        if not calls:
            raise FormatParseError(
                'no tool call: expected <tool_call>{"name": "computer_use", "arguments": '
                '{"action": ...}}</tool_call>'
            )
        if len(calls) > 1:
            raise FormatParseError(f"expected one tool call per reply, got {len(calls)}")
        try:
            call = json.loads(calls[0])
        except json.JSONDecodeError as exc:
            raise FormatParseError(f"tool call is not valid JSON ({exc}): {calls[0]!r}") from None
        if not isinstance(call, dict) or call.get("name") != TOOL_NAME:
            name = call.get("name") if isinstance(call, dict) else None
            raise FormatParseError(f"expected the function {TOOL_NAME!r}, got {name!r}")
        args = call.get("arguments")
        if isinstance(args, str):  # some servers double-encode the arguments
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                raise FormatParseError(f"arguments are not a JSON object: {args!r}") from None
        if not isinstance(args, dict):
            raise FormatParseError(f"arguments: expected a JSON object, got {args!r}")
        action = args.get("action")
        if action in _POINT_ACTIONS and action != "mouse_move" and "coordinate" not in args:
            return self._click_at_pointer(action, geometry)
        return self._to_action(args, geometry), ()

    def _click_at_pointer(
        self, action: str, geometry: ScreenGeometry
    ) -> tuple[Action, tuple[str, ...]]:
        """A click without ``coordinate``: at the pointer, already in screen pixels."""
        if geometry.pointer is None:
            raise FormatParseError(
                f"{action}: no coordinate, and the pointer's position is not known (no mouse "
                "action yet this episode); give coordinate: [x, y]"
            )
        x, y = geometry.pointer
        note = f"{action} without coordinate: clicked at the pointer, screen ({x}, {y})"
        return Action(_POINT_ACTIONS[action], x=x, y=y), (note,)

    def _point(self, args: dict[str, Any], geometry: ScreenGeometry) -> tuple[int, int]:
        coordinate = args.get("coordinate")
        if (
            not isinstance(coordinate, list | tuple)
            or len(coordinate) not in (2, 4)
            or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in coordinate)
        ):
            raise FormatParseError(
                f"{args.get('action')}: coordinate must be [x, y] numbers, got {coordinate!r}"
            )
        if len(coordinate) == 4:  # a box: its centre
            coordinate = [(coordinate[0] + coordinate[2]) / 2, (coordinate[1] + coordinate[3]) / 2]
        return geometry.to_screen(coordinate[0], coordinate[1])

    def _to_action(self, args: dict[str, Any], geometry: ScreenGeometry) -> Action:
        action = args.get("action")
        if action in _POINT_ACTIONS:
            x, y = self._point(args, geometry)
            return Action(_POINT_ACTIONS[action], x=x, y=y)
        if action == "key":
            keys = args.get("keys", args.get("key"))
            if isinstance(keys, list) and keys and all(isinstance(k, str) for k in keys):
                keys = "+".join(k.strip() for k in keys)
            if not isinstance(keys, str) or not keys:
                raise FormatParseError(f'key: keys must be a list like ["ctrl", "c"], got {keys!r}')
            return Action(ActionType.KEYS, keys=keys)
        if action == "type":
            text = args.get("text")
            if not isinstance(text, str):
                raise FormatParseError(f"type: text must be a string, got {text!r}")
            return Action(ActionType.TYPE, text=text)
        if action == "scroll":
            return self._scroll(args, geometry)
        if action == "wait":
            return Action(ActionType.SCREENSHOT)
        if action == "terminate":
            status = args.get("status")
            return Action(ActionType.FINISH, text=str(status) if status is not None else None)
        if action == "left_click_drag":
            return self._drag(args, geometry)
        if action == "middle_click":
            raise FormatParseError(
                f"{action}: not supported by the env; allowed: {', '.join(_ACTIONS)}"
            )
        raise FormatParseError(f"unknown action {action!r}; allowed: {', '.join(_ACTIONS)}")

    def _drag(self, args: dict[str, Any], geometry: ScreenGeometry) -> Action:
        end_x, end_y = self._point(args, geometry)
        if args.get("start_coordinate") is not None:
            x, y = self._point({**args, "coordinate": args["start_coordinate"]}, geometry)
        elif geometry.pointer is not None:
            x, y = geometry.pointer
        else:
            raise FormatParseError(
                "left_click_drag: no start_coordinate, and the pointer's position is not known "
                "(no mouse action yet this episode); give start_coordinate: [x, y]"
            )
        return Action(ActionType.DRAG, x=x, y=y, end_x=end_x, end_y=end_y)

    def _scroll(self, args: dict[str, Any], geometry: ScreenGeometry) -> Action:
        pixels = args.get("pixels")
        if pixels is not None and (isinstance(pixels, bool) or not isinstance(pixels, int | float)):
            raise FormatParseError(f"scroll: pixels must be a number, got {pixels!r}")
        direction = args.get("direction")
        if direction is None:
            if not pixels:
                raise FormatParseError(
                    "scroll: give a non-zero pixels (positive up, negative down)"
                )
            direction = "up" if pixels > 0 else "down"
        if direction not in ("up", "down", "left", "right"):
            raise FormatParseError(
                f"scroll: direction must be up, down, left or right, got {direction!r}"
            )
        amount = DEFAULT_SCROLL_AMOUNT
        if pixels:
            amount = min(max(round(abs(pixels) / PIXELS_PER_NOTCH), 1), MAX_SCROLL_AMOUNT)
        x = y = None
        if args.get("coordinate") is not None:
            x, y = self._point(args, geometry)
        return Action(ActionType.SCROLL, x=x, y=y, direction=direction, amount=amount)

    def render(self, action: Action, geometry: ScreenGeometry, thought: str = "") -> str:
        args = self._render_args(action, geometry)
        call = json.dumps({"name": TOOL_NAME, "arguments": args})
        prefix = f"{thought}\n" if thought else ""
        return f"{prefix}<tool_call>\n{call}\n</tool_call>"

    def _render_args(self, action: Action, geometry: ScreenGeometry) -> dict[str, Any]:
        t = action.type
        names = {v: k for k, v in _POINT_ACTIONS.items()}
        if t in names:
            return {"action": names[t], "coordinate": list(geometry.to_image(action.x, action.y))}
        if t is ActionType.DRAG:
            return {
                "action": "left_click_drag",
                "start_coordinate": list(geometry.to_image(action.x, action.y)),
                "coordinate": list(geometry.to_image(action.end_x, action.end_y)),
            }
        if t is ActionType.KEYS:
            keys = action.keys or ""
            parts = [*keys.split("+")[:-2], "+"] if keys.endswith("++") else keys.split("+")
            return {"action": "key", "keys": parts}
        if t is ActionType.TYPE:
            return {"action": "type", "text": action.text or ""}
        if t is ActionType.SCROLL:
            direction = action.scroll_direction.value
            pixels = action.scroll_amount * PIXELS_PER_NOTCH
            args: dict[str, Any] = {"action": "scroll"}
            if action.x is not None:
                args["coordinate"] = list(geometry.to_image(action.x, action.y))
            if direction in ("up", "down"):
                args["pixels"] = pixels if direction == "up" else -pixels
            else:
                args |= {"direction": direction, "pixels": pixels}
            return args
        if t is ActionType.SCREENSHOT:
            return {"action": "wait"}
        if t is ActionType.FINISH:
            return {"action": "terminate", "status": action.text or "success"}
        raise ValueError(f"qwen2.5-vl: cannot express action type {t.value!r}")

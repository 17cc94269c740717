"""Formats for models with no GUI action syntax of their own: ``text``, ``json``,
``coordinates``.

Each reply is a thought, then one action; the prompt teaches the syntax and the image
size. Coordinates are pixels of the image the model saw (as for UI-TARS and Qwen2.5-VL)
and are mapped to the screen once, by :class:`~uirl_agents.formats.base.ScreenGeometry`.

``text``: Python-like calls on an ``Action:`` line::

    Thought: The Email field is empty.
    Action: click(652, 301)

    click(x, y)  double_click(x, y)  right_click(x, y)  triple_click(x, y)  move(x, y)
    type("text")  key("ctrl+c")  scroll(down, 3)  scroll(down, 3, x, y)
    drag(x1, y1, x2, y2)  wait()  finish()  finish("summary")

``json``: the env's own action schema (``uirl_gym.Action.to_dict``) as the last JSON
object of the reply: ``{"type": "click", "x": 100, "y": 200}``, ``{"type": "type",
"text": "hi"}``, ``{"type": "drag", "x": 1, "y": 2, "end_x": 30, "end_y": 40}``;
``click`` is accepted for ``left_click``.

``coordinates``: the last line of the reply, numbers first::

    100 200 click        (also double_click, right_click, triple_click, move)
    100 200 scroll down 3
    10 20 300 400 drag
    type hello world     key ctrl+c     wait     finish
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any, ClassVar

from uirl_gym.actions import DEFAULT_SCROLL_AMOUNT, Action, ActionType

from .base import FormatParseError, ModelFormat, ScreenGeometry, split_at_action_line

# Call / word -> the env action it names, for the point actions.
_POINT_NAMES = {
    "click": ActionType.LEFT_CLICK,
    "left_click": ActionType.LEFT_CLICK,
    "double_click": ActionType.DOUBLE_CLICK,
    "right_click": ActionType.RIGHT_CLICK,
    "triple_click": ActionType.TRIPLE_CLICK,
    "move": ActionType.MOUSE_MOVE,
    "mouse_move": ActionType.MOUSE_MOVE,
}
_RENDER_POINT = {
    ActionType.LEFT_CLICK: "click",
    ActionType.DOUBLE_CLICK: "double_click",
    ActionType.RIGHT_CLICK: "right_click",
    ActionType.TRIPLE_CLICK: "triple_click",
    ActionType.MOUSE_MOVE: "move",
}
_DIRECTIONS = ("up", "down", "left", "right")

_PROMPT = """\
You operate a computer by looking at its screen. You get a task, the screenshots \
seen so far and your earlier replies. Decide the single next action.

## Reply format
{reply}

## Actions
{actions}

## Notes
- Coordinates are pixels of the screenshot as you see it ({width}x{height}), origin at the top left.
- One action per reply; you see a new screenshot after it.

## Task
{instruction}
"""


class _GenericFormat(ModelFormat):
    """The shared prompt; subclasses give the syntax."""

    reply: ClassVar[str]
    actions: ClassVar[str]

    def system_prompt(self, geometry: ScreenGeometry) -> str:
        return "You are a helpful assistant."

    def task_prompt(self, instruction: str, geometry: ScreenGeometry) -> str:
        return _PROMPT.format(
            reply=self.reply,
            actions=self.actions,
            width=geometry.image_width,
            height=geometry.image_height,
            instruction=instruction,
        )

    @staticmethod
    def _point(geometry: ScreenGeometry, x: Any, y: Any, what: str) -> tuple[int, int]:
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (x, y)):
            raise FormatParseError(f"{what}: coordinates must be numbers, got {x!r}, {y!r}")
        return geometry.to_screen(x, y)

    def _image_point(self, geometry: ScreenGeometry, x: int | None, y: int | None) -> str:
        ix, iy = geometry.to_image(x, y)
        return f"{ix}, {iy}"


class TextFormat(_GenericFormat):
    """``Action: click(100, 200)``: Python-like calls (see the module docstring)."""

    name = "text"
    reply = "Thought: a short plan for the next action\nAction: one call from the list below"
    actions = """\
click(x, y)
double_click(x, y)
right_click(x, y)
move(x, y) # move the pointer without clicking
type("text") # a string with Python escapes; \\n presses Enter
key("ctrl+c") # keys joined with +, e.g. "enter", "tab", "ctrl+a"
scroll(down, 3) # up, down, left or right, by 3 wheel notches; scroll(down, 3, x, y) scrolls there
drag(x1, y1, x2, y2) # press at (x1, y1), move to (x2, y2), release
wait() # look again
finish() # the task is done"""

    def split_thought(self, text: str) -> tuple[str, str]:
        thought, action = split_at_action_line(text)
        if action is not None:
            return thought, action
        lines = text.strip().splitlines()  # no "Action:" line: the last line is the action
        return "\n".join(lines[:-1]).strip(), lines[-1].strip() if lines else ""

    def parse_action(
        self, action_text: str, geometry: ScreenGeometry
    ) -> tuple[Action, tuple[str, ...]]:
        if not action_text:
            raise FormatParseError("no action: expected a line 'Action: click(x, y)'")
        first = action_text.strip().splitlines()[0]
        try:
            node = ast.parse(first, mode="eval").body
        except SyntaxError:
            raise FormatParseError(f"expected a call like click(100, 200), got {first!r}") from None
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.keywords:
            raise FormatParseError(f"expected a call like click(100, 200), got {first!r}")
        args = [_literal(arg, first) for arg in node.args]
        return self._to_action(node.func.id, args, geometry), ()

    def _to_action(self, name: str, args: list[Any], geometry: ScreenGeometry) -> Action:
        if name in _POINT_NAMES:
            _arity(name, args, 2)
            return Action(_POINT_NAMES[name], *self._point(geometry, args[0], args[1], name))
        if name == "type":
            _arity(name, args, 1)
            if not isinstance(args[0], str):
                raise FormatParseError(
                    f'type: expected a string, e.g. type("hello"), got {args[0]!r}'
                )
            return Action(ActionType.TYPE, text=args[0])
        if name in ("key", "keys", "hotkey"):
            _arity(name, args, 1)
            return Action(ActionType.KEYS, keys=str(args[0]))
        if name == "scroll":
            if len(args) not in (1, 2, 4):
                raise FormatParseError(
                    "scroll: expected scroll(direction), scroll(direction, amount) or "
                    f"scroll(direction, amount, x, y), got {len(args)} arguments"
                )
            direction = str(args[0]).lower()
            if direction not in _DIRECTIONS:
                raise FormatParseError(
                    f"scroll: direction must be up, down, left or right, got {args[0]!r}"
                )
            amount = args[1] if len(args) > 1 else DEFAULT_SCROLL_AMOUNT
            if isinstance(amount, bool) or not isinstance(amount, int):
                raise FormatParseError(f"scroll: the amount must be a whole number, got {amount!r}")
            x = y = None
            if len(args) == 4:
                x, y = self._point(geometry, args[2], args[3], name)
            return Action(ActionType.SCROLL, x=x, y=y, direction=direction, amount=amount)
        if name == "drag":
            _arity(name, args, 4)
            x, y = self._point(geometry, args[0], args[1], name)
            end_x, end_y = self._point(geometry, args[2], args[3], name)
            return Action(ActionType.DRAG, x=x, y=y, end_x=end_x, end_y=end_y)
        if name == "wait":
            return Action(ActionType.SCREENSHOT)
        if name == "finish":
            return Action(ActionType.FINISH, text=str(args[0]) if args else None)
        raise FormatParseError(
            f"unknown action {name!r}; allowed: click, double_click, right_click, triple_click, "
            "move, type, key, scroll, drag, wait, finish"
        )

    def render(self, action: Action, geometry: ScreenGeometry, thought: str = "") -> str:
        return f"Thought: {thought}\nAction: {self._render_call(action, geometry)}"

    def _render_call(self, action: Action, geometry: ScreenGeometry) -> str:
        t = action.type
        if t in _RENDER_POINT:
            return f"{_RENDER_POINT[t]}({self._image_point(geometry, action.x, action.y)})"
        if t is ActionType.TYPE:
            return f"type({json.dumps(action.text or '')})"
        if t is ActionType.KEYS:
            return f"key({json.dumps(action.keys or '')})"
        if t is ActionType.SCROLL:
            direction = action.scroll_direction.value
            where = ""
            if action.x is not None:
                where = f", {self._image_point(geometry, action.x, action.y)}"
            return f"scroll({direction}, {action.scroll_amount}{where})"
        if t is ActionType.DRAG:
            start = self._image_point(geometry, action.x, action.y)
            return f"drag({start}, {self._image_point(geometry, action.end_x, action.end_y)})"
        if t is ActionType.SCREENSHOT:
            return "wait()"
        if t is ActionType.FINISH:
            return f"finish({json.dumps(action.text)})" if action.text else "finish()"
        raise ValueError(f"text: cannot express action type {t.value!r}")


class JsonFormat(_GenericFormat):
    """The env's action schema as a JSON object (see the module docstring)."""

    name = "json"
    reply = "A short plan for the next action, then the action as one JSON object on its own line."
    actions = """\
{"type": "click", "x": 100, "y": 200}   (also "double_click", "right_click", "triple_click", "mouse_move")
{"type": "type", "text": "hello"}   (\\n in the text presses Enter)
{"type": "keys", "keys": "ctrl+c"}
{"type": "scroll", "direction": "down", "amount": 3}   ("x" and "y" optional: where to scroll)
{"type": "drag", "x": 10, "y": 20, "end_x": 300, "end_y": 400}
{"type": "screenshot"}   (look again)
{"type": "finish"}   (the task is done)"""

    def split_thought(self, text: str) -> tuple[str, str]:
        start = _last_json_object_start(text)
        if start is None:
            return text.strip(), ""
        return text[:start].strip(), text[start:].strip()

    def parse_action(
        self, action_text: str, geometry: ScreenGeometry
    ) -> tuple[Action, tuple[str, ...]]:
        if not action_text:
            raise FormatParseError(
                'no action: expected a JSON object like {"type": "click", "x": 1, "y": 2}'
            )
        try:
            obj, _ = json.JSONDecoder().raw_decode(action_text)
        except json.JSONDecodeError as exc:
            raise FormatParseError(f"the action is not valid JSON ({exc})") from None
        if not isinstance(obj, dict):
            raise FormatParseError(f"expected a JSON object, got {obj!r}")
        fields = dict(obj)
        kind = fields.pop("type", fields.pop("action_type", None))
        if kind == "click":
            kind = ActionType.LEFT_CLICK.value
        if kind is None:
            raise FormatParseError('missing "type", e.g. {"type": "click", "x": 1, "y": 2}')
        unknown = set(fields) - set(Action.__dataclass_fields__) - {"type"}
        if unknown:
            raise FormatParseError(
                f"unknown field(s) {sorted(unknown)}; allowed: {list(Action.__dataclass_fields__)}"
            )
        for x_name, y_name in (("x", "y"), ("end_x", "end_y")):
            if x_name in fields or y_name in fields:
                fields[x_name], fields[y_name] = self._point(
                    geometry, fields.get(x_name), fields.get(y_name), str(kind)
                )
        return Action(kind, **fields), ()

    def render(self, action: Action, geometry: ScreenGeometry, thought: str = "") -> str:
        fields = action.to_dict()
        for x_name, y_name in (("x", "y"), ("end_x", "end_y")):
            if x_name in fields:
                fields[x_name], fields[y_name] = geometry.to_image(fields[x_name], fields[y_name])
        prefix = f"{thought}\n" if thought else ""
        return prefix + json.dumps(fields)


class CoordinatesFormat(_GenericFormat):
    """``100 200 click``: numbers first, on the reply's last line."""

    name = "coordinates"
    reply = "A short plan for the next action, then the action alone on the last line."
    actions = """\
X Y click   (also double_click, right_click, triple_click, move)
X Y scroll down 3   (up, down, left or right; wheel notches)
X1 Y1 X2 Y2 drag
type TEXT   (the rest of the line)
key ctrl+c
wait   (look again)
finish   (the task is done)"""

    def split_thought(self, text: str) -> tuple[str, str]:
        lines = text.strip().splitlines()
        if not lines:
            return "", ""
        return "\n".join(lines[:-1]).strip(), lines[-1].strip()

    def parse_action(
        self, action_text: str, geometry: ScreenGeometry
    ) -> tuple[Action, tuple[str, ...]]:
        words = action_text.split()
        if not words:
            raise FormatParseError("no action: expected a last line like '100 200 click'")
        head = words[0].lower()
        if head == "type":
            text = action_text.strip()[len(words[0]) :].strip()
            return Action(ActionType.TYPE, text=text.replace("\\n", "\n")), ()
        if head in ("key", "keys"):
            if len(words) != 2:
                raise FormatParseError(f"key: expected 'key ctrl+c', got {action_text!r}")
            return Action(ActionType.KEYS, keys=words[1]), ()
        if head == "wait":
            return Action(ActionType.SCREENSHOT), ()
        if head == "finish":
            return Action(ActionType.FINISH), ()
        numbers = []
        for word in words:
            try:
                numbers.append(float(word))
            except ValueError:
                break
        rest = [w.lower() for w in words[len(numbers) :]]
        if not rest:
            raise FormatParseError(f"expected an action after the numbers, got {action_text!r}")
        name = rest[0]
        if name in _POINT_NAMES and len(numbers) == 2 and len(rest) == 1:
            return Action(_POINT_NAMES[name], *geometry.to_screen(*numbers)), ()
        if name == "drag" and len(numbers) == 4 and len(rest) == 1:
            x, y = geometry.to_screen(numbers[0], numbers[1])
            end_x, end_y = geometry.to_screen(numbers[2], numbers[3])
            return Action(ActionType.DRAG, x=x, y=y, end_x=end_x, end_y=end_y), ()
        if name == "scroll" and len(numbers) == 2 and len(rest) in (2, 3):
            if rest[1] not in _DIRECTIONS:
                raise FormatParseError(
                    f"scroll: direction must be up, down, left or right, got {rest[1]!r}"
                )
            if len(rest) == 3 and not rest[2].isdigit():
                raise FormatParseError(
                    f"scroll: the amount must be a whole number, got {rest[2]!r}"
                )
            amount = int(rest[2]) if len(rest) == 3 else DEFAULT_SCROLL_AMOUNT
            x, y = geometry.to_screen(*numbers)
            return Action(ActionType.SCROLL, x=x, y=y, direction=rest[1], amount=amount), ()
        raise FormatParseError(
            f"expected 'X Y click', 'X Y scroll down 3', 'X1 Y1 X2 Y2 drag', 'type TEXT', "
            f"'key KEYS', 'wait' or 'finish', got {action_text!r}"
        )

    def render(self, action: Action, geometry: ScreenGeometry, thought: str = "") -> str:
        prefix = f"{thought}\n" if thought else ""
        return prefix + self._render_line(action, geometry)

    def _render_line(self, action: Action, geometry: ScreenGeometry) -> str:
        t = action.type
        if t in _RENDER_POINT:
            x, y = geometry.to_image(action.x, action.y)
            return f"{x} {y} {_RENDER_POINT[t]}"
        if t is ActionType.SCROLL:
            # The line needs a point: the pointer's unknown place is the screen centre.
            sx = action.x if action.x is not None else geometry.screen_width // 2
            sy = action.y if action.y is not None else geometry.screen_height // 2
            x, y = geometry.to_image(sx, sy)
            direction = action.scroll_direction.value
            return f"{x} {y} scroll {direction} {action.scroll_amount}"
        if t is ActionType.DRAG:
            x, y = geometry.to_image(action.x, action.y)
            end_x, end_y = geometry.to_image(action.end_x, action.end_y)
            return f"{x} {y} {end_x} {end_y} drag"
        if t is ActionType.TYPE:
            return "type " + (action.text or "").replace("\n", "\\n")
        if t is ActionType.KEYS:
            return f"key {action.keys}"
        if t is ActionType.SCREENSHOT:
            return "wait"
        if t is ActionType.FINISH:
            return "finish"
        raise ValueError(f"coordinates: cannot express action type {t.value!r}")


def _literal(node: ast.expr, call: str) -> Any:
    """A call argument: a literal, or a bare word (``down``) taken as its name."""
    if isinstance(node, ast.Name):
        return node.id
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise FormatParseError(
            f"arguments must be numbers, quoted strings or words, got {ast.unparse(node)!r} in {call!r}"
        ) from None


def _arity(name: str, args: list[Any], expected: int) -> None:
    if len(args) != expected:
        raise FormatParseError(f"{name}: expected {expected} argument(s), got {len(args)}")


def _last_json_object_start(text: str) -> int | None:
    """Where the last complete JSON object of ``text`` starts (None: there is none)."""
    decoder = json.JSONDecoder()
    found = None
    for match in re.finditer(r"\{", text):
        try:
            obj, end = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and (found is None or match.start() >= found[1]):
            found = (match.start(), end)
    return found[0] if found else None

"""The UI-TARS-1.5 format: ``Thought: ...`` then ``Action: call(...)``.

Output syntax (the model's official computer-use action space)::

    Thought: The Email field is empty, so I click it first.
    Action: click(start_box='(652,301)')

Calls and the env actions they become:

====================================================  ==========================================
``click(start_box='(x,y)')``                           left_click
``left_double(start_box='(x,y)')``                     double_click
``right_single(start_box='(x,y)')``                    right_click
``hotkey(key='ctrl c')``                               keys ``ctrl+c`` (space-separated -> ``+``)
``type(content='text')``                               type; a trailing ``\\n`` stays in the text
``type(content='')``                                   screenshot: a no-op, as in the official
                                                       parser (it types nothing)
``scroll(start_box='(x,y)', direction='down')``        scroll, default amount (3 notches)
``wait()``                                             screenshot (look again)
``finished(content='...')``                            finish (``text`` = the content)
``call_user()``                                        finish, noted: the model asks for the
                                                       user; the official agents end the run
``drag(start_box='(x1,y1)', end_box='(x2,y2)')``       drag: press at the start, release at the end
====================================================  ==========================================

Several calls in one reply: the official parser
(``ui_tars.action_parser.parse_action_to_structure_output``) splits the Action part
on ``)`` followed by a blank line and returns every call, and its executor runs them
in turn. The env takes one action per step, so the first call is executed and the
others are dropped, each named in ``ParsedOutput.notes``; the next screenshot lets the
model decide again. Calls on consecutive lines (one newline, where the official parser
fails) are split the same way.

Extensions, accepted but not advertised in the prompt: ``left_single`` (= click),
``hover`` (mouse_move), ``left_triple`` (triple_click), ``press`` (= hotkey).

Points: ``(x,y)``, ``<|box_start|>(x,y)<|box_end|>``, ``<point>x y</point>``; boxes
``[x1,y1,x2,y2]`` / ``(x1,y1,x2,y2)`` mean their centre. Coordinates are absolute
pixels of the image the model saw (the smart-resized screenshot, UI-TARS-1.5's
convention; UI-TARS 1.0's 0-1000 relative coordinates are not supported) and are
mapped to screen pixels and clamped to the screen.

``type`` content uses Python string escapes (``\\'``, ``\\"``, ``\\n``, ``\\\\``).
UI-TARS ends the content with ``\\n`` to submit. The newline stays in
``Action.text``: the server's ``type`` presses Enter for it (as pyautogui's
``typewrite`` does), so typing and submitting remain one step, as the model intends.
"""

from __future__ import annotations

import re

from uirl_gym.actions import Action, ActionType

from .base import FormatParseError, ModelFormat, ScreenGeometry, split_at_action_line

_POINT_CALLS = {
    "click": ActionType.LEFT_CLICK,
    "left_single": ActionType.LEFT_CLICK,
    "left_double": ActionType.DOUBLE_CLICK,
    "right_single": ActionType.RIGHT_CLICK,
    "left_triple": ActionType.TRIPLE_CLICK,
    "hover": ActionType.MOUSE_MOVE,
}
_RENDER_POINT_CALLS = {
    ActionType.LEFT_CLICK: "click",
    ActionType.DOUBLE_CLICK: "left_double",
    ActionType.RIGHT_CLICK: "right_single",
    ActionType.TRIPLE_CLICK: "left_triple",
    ActionType.MOUSE_MOVE: "hover",
}
_KNOWN_CALLS = (
    "click, left_double, right_single, drag, hotkey, type, scroll, wait, finished, call_user "
    "(also left_single, left_triple, hover, press)"
)
_POINT_ARGS = ("start_box", "point", "start_point")

_CALL = re.compile(r"([A-Za-z_]\w*)\s*\((.*)\)", re.DOTALL)
# Where one call ends and the next begins: a ")" closing a line, then the next call's
# name on a later line (the official separator is ")\n\n"; one newline is accepted too).
_CALL_SPLIT = re.compile(r"(?<=\))[ \t]*\n\s*(?=[A-Za-z_]\w*\s*\()")
_KWARG_NAME = re.compile(r"\s*([A-Za-z_]\w*)\s*=\s*")
# A closing quote is one followed by the end of the arguments or by ", name=", so that
# an unescaped quote inside content (type(content='it's')) is read as text.
_VALUE_END = re.compile(r"\s*(?:,\s*[A-Za-z_]\w*\s*=|,?\s*$)", re.DOTALL)
_SEPARATOR = re.compile(r"\s*,?\s*")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "'": "'", '"': '"', "\\": "\\"}

_PROMPT = """\
You operate a computer by looking at its screen. You get a task, the screenshots \
seen so far and your earlier replies. Decide the single next action.

## Reply format
Thought: a short plan, ending with the next action and its target in one sentence
Action: one call from the list below

## Actions
click(start_box='(x1,y1)')
left_double(start_box='(x1,y1)')
right_single(start_box='(x1,y1)')
hotkey(key='ctrl c') # lowercase key names separated by spaces, at most 3 keys
type(content='') # escape \\', \\" and \\n as in a Python string; end content with \\n to press Enter after typing
scroll(start_box='(x1,y1)', direction='down or up or right or left') # reveals more content on that side
drag(start_box='(x1,y1)', end_box='(x3,y3)') # press at the start, move, release at the end
wait() # pause, then look at a new screenshot
finished(content='xxx') # the task is complete; content summarises the result

## Notes
- Coordinates are pixels of the screenshot as you see it ({width}x{height}), origin at the top left.
- Write the Thought in English.

## Task
{instruction}
"""


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), value, flags=re.DOTALL)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")


def parse_kwargs(args: str) -> dict[str, str]:
    """Parse ``name='value', name2="value2"`` into a dict, unescaping Python escapes.

    Raises:
        FormatParseError: positional or unquoted arguments, or an unterminated string.
    """
    out: dict[str, str] = {}
    pos, args = 0, args.strip()
    while pos < len(args):
        match = _KWARG_NAME.match(args, pos)
        if match is None:
            raise FormatParseError(f"expected keyword arguments name='value', got {args[pos:]!r}")
        name, pos = match.group(1), match.end()
        if pos >= len(args) or args[pos] not in "'\"":
            raise FormatParseError(f"argument {name}: expected a quoted string, got {args[pos:]!r}")
        quote, end = args[pos], pos + 1
        while end < len(args):
            if args[end] == "\\":
                end += 2
                continue
            if args[end] == quote and _VALUE_END.match(args, end + 1):
                break
            end += 1
        else:
            raise FormatParseError(f"argument {name}: unterminated string {args[pos:]!r}")
        out[name] = _unescape(args[pos + 1 : end])
        separator = _SEPARATOR.match(args, end + 1)
        assert separator is not None  # it matches the empty string too
        pos = separator.end()
    return out


def parse_point(value: str) -> tuple[float, float]:
    """A point or a box (any of the UI-TARS spellings) -> ``(x, y)``; a box gives its centre.

    Raises:
        FormatParseError: not 2 or 4 numbers.
    """
    numbers = [float(n) for n in _NUMBER.findall(value)]
    if len(numbers) == 2:
        return numbers[0], numbers[1]
    if len(numbers) == 4:
        return (numbers[0] + numbers[2]) / 2, (numbers[1] + numbers[3]) / 2
    raise FormatParseError(
        f"expected a point '(x,y)' or a box '[x1,y1,x2,y2]', got {value!r} ({len(numbers)} numbers)"
    )


class UITarsFormat(ModelFormat):
    """UI-TARS-1.5: ``Thought:``/``Action:`` replies, absolute resized-image coordinates."""

    name = "ui-tars"

    def system_prompt(self, geometry: ScreenGeometry) -> str:
        # UI-TARS keeps the stock system prompt and puts its instructions in the user turn.
        return "You are a helpful assistant."

    def task_prompt(self, instruction: str, geometry: ScreenGeometry) -> str:
        return _PROMPT.format(
            width=geometry.image_width, height=geometry.image_height, instruction=instruction
        )

    def split_thought(self, text: str) -> tuple[str, str]:
        thought, action = split_at_action_line(text)
        return thought, action or ""

    def parse_action(
        self, action_text: str, geometry: ScreenGeometry
    ) -> tuple[Action, tuple[str, ...]]:
        if not action_text:
            raise FormatParseError(
                "no action: expected a line 'Action: <call>', e.g. \"Action: click(start_box='(100,200)')\""
            )
        first, *rest = _CALL_SPLIT.split(action_text.strip())
        notes: list[str] = []
        if rest:
            notes.append(
                f"{len(rest) + 1} actions in one reply: executed the first, dropped "
                f"{', '.join(call.strip() for call in rest)} (the env takes one action per step)"
            )
        match = _CALL.fullmatch(first.strip())
        if match is None:
            raise FormatParseError(f"expected a call like click(start_box='(x,y)'), got {first!r}")
        name, kwargs = match.group(1), parse_kwargs(match.group(2))
        if name == "call_user":
            notes.append("call_user: the model asked for the user's help; the episode ends")
        elif name == "type" and kwargs.get("content") == "":
            notes.append("type with empty content: a no-op, nothing is typed")
        return self._to_action(name, kwargs, geometry), tuple(notes)

    def _point(
        self, kwargs: dict[str, str], geometry: ScreenGeometry, call: str
    ) -> tuple[int, int]:
        for arg in _POINT_ARGS:
            if arg in kwargs:
                return geometry.to_screen(*parse_point(kwargs[arg]))
        raise FormatParseError(f"{call}: missing start_box='(x,y)'")

    def _to_action(self, name: str, kwargs: dict[str, str], geometry: ScreenGeometry) -> Action:
        if name in _POINT_CALLS:
            x, y = self._point(kwargs, geometry, name)
            return Action(_POINT_CALLS[name], x=x, y=y)
        if name in ("hotkey", "press"):
            keys = kwargs.get("key", kwargs.get("hotkey", "")).strip()
            if not keys:
                raise FormatParseError(f"{name}: missing key='...', e.g. hotkey(key='ctrl c')")
            return Action(ActionType.KEYS, keys=keys if "+" in keys else "+".join(keys.split()))
        if name == "type":
            if "content" not in kwargs:
                raise FormatParseError("type: missing content='...'")
            if not kwargs["content"]:
                # The official executor types nothing for empty content: look again.
                return Action(ActionType.SCREENSHOT)
            return Action(ActionType.TYPE, text=kwargs["content"])
        if name == "scroll":
            direction = kwargs.get("direction", "").strip().lower()
            if direction not in ("up", "down", "left", "right"):
                raise FormatParseError(
                    f"scroll: direction must be up, down, left or right, got {direction!r}"
                )
            if any(arg in kwargs for arg in _POINT_ARGS):
                x, y = self._point(kwargs, geometry, name)
                return Action(ActionType.SCROLL, x=x, y=y, direction=direction)
            return Action(ActionType.SCROLL, direction=direction)
        if name == "wait":
            return Action(ActionType.SCREENSHOT)
        if name == "finished":
            return Action(ActionType.FINISH, text=kwargs.get("content") or None)
        if name == "call_user":
            # The official agents stop when the model calls the user (the task is
            # unsolvable or needs help); no user answers here, so the episode ends.
            return Action(ActionType.FINISH, text=kwargs.get("content") or None)
        if name in ("drag", "select"):  # UI-TARS 1.0 called a text-selecting drag select
            x, y = self._point(kwargs, geometry, name)
            if "end_box" not in kwargs:
                raise FormatParseError(f"{name}: missing end_box='(x,y)'")
            end_x, end_y = geometry.to_screen(*parse_point(kwargs["end_box"]))
            return Action(ActionType.DRAG, x=x, y=y, end_x=end_x, end_y=end_y)
        raise FormatParseError(f"unknown action {name!r}; allowed: {_KNOWN_CALLS}")

    def render(self, action: Action, geometry: ScreenGeometry, thought: str = "") -> str:
        call = self._render_call(action, geometry)
        return f"Thought: {thought}\nAction: {call}"

    def _render_call(self, action: Action, geometry: ScreenGeometry) -> str:
        t = action.type
        if t in _RENDER_POINT_CALLS:
            x, y = geometry.to_image(action.x, action.y)
            return f"{_RENDER_POINT_CALLS[t]}(start_box='({x},{y})')"
        if t is ActionType.DRAG:
            x, y = geometry.to_image(action.x, action.y)
            end_x, end_y = geometry.to_image(action.end_x, action.end_y)
            return f"drag(start_box='({x},{y})', end_box='({end_x},{end_y})')"
        if t is ActionType.KEYS:
            keys = action.keys or ""
            parts = [*keys.split("+")[:-2], "+"] if keys.endswith("++") else keys.split("+")
            return (
                f"hotkey(key='{_escape(' '.join(p.lower() if len(p) > 1 else p for p in parts))}')"
            )
        if t is ActionType.TYPE:
            return f"type(content='{_escape(action.text or '')}')"
        if t is ActionType.SCROLL:
            direction = action.scroll_direction.value
            if action.x is None:
                return f"scroll(direction='{direction}')"
            x, y = geometry.to_image(action.x, action.y)
            return f"scroll(start_box='({x},{y})', direction='{direction}')"
        if t is ActionType.SCREENSHOT:
            return "wait()"
        if t is ActionType.FINISH:
            return f"finished(content='{_escape(action.text or '')}')"
        raise ValueError(f"ui-tars: cannot express action type {t.value!r}")

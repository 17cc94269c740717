"""BrowserGym's action strings (``click('12')``, ``fill('5', "hi")``) as uirl actions.

A text agent answers with one call of BrowserGym's high-level action set; this module
reads it without running it (``ast``, literals only: BrowserGym ``exec``s it) and turns
it into an :class:`~uirl_gym.actions.Action`::

    >>> parse_action("click('15')").to_dict()
    {'type': 'left_click', 'bid': '15'}
    >>> parse_action("press('7', 'ControlOrMeta+a')").keys
    'Control+a'

The grammar is BrowserGym's (``highlevel_action_parser``): ``name(arg, ..., kw=arg,
...)`` with string, number, list, tuple, dict, ``True``/``False``/``None`` arguments,
trailing commas and ``#`` comments allowed. :func:`parse_action` is strict, as issue 41
asks: exactly one call of a known action and nothing else; anything else is a
``ValueError`` that names what was wrong and what is allowed. :func:`parse_calls` also
has BrowserGym's looser modes (``strict=False``: every call found in free text;
``multiaction=True``: several calls), for :mod:`uirl_gym.browsergym`.

What each call becomes (coordinates are screenshot pixels, which are uirl's screen
pixels; a fractional one is the pixel it falls in, ``math.floor``):

- ``click``/``dblclick``/``hover``/``drag_and_drop``/``press``/``fill``/``clear``/
  ``select_option``/``focus``: the action of that kind on the element ``bid``
  (``modifiers`` are the keys ``click`` holds; ``clear`` fills in ``""``);
- ``mouse_click``/``mouse_dblclick``/``mouse_move``/``mouse_drag_and_drop``: the same
  at a point; ``keyboard_press``: ``keys``; ``keyboard_type``/``keyboard_insert_text``:
  ``type`` (uirl types with key events either way);
- ``scroll(delta_x, delta_y)`` (at the pointer) and ``scroll_at(x, y, dx, dy)``: a
  ``scroll`` of whole 100 px notches along the one axis that moves, rounded half up,
  at least one notch (``scroll(0, 130)``: 1 notch down, ``scroll(0, 150)``: 2,
  ``scroll(0, 20)``: 1); both axes at once is refused (one uirl scroll is one axis);
- ``send_msg_to_user(text)``: ``send_msg_to_user`` (the env's, never sent to the page);
  ``report_infeasible(reason)``: ``finish`` (the episode ends, as BrowserGym's
  ``terminate_on_infeasible`` does; :class:`~uirl_gym.browsergym.BrowserGymEnv` also
  posts the reason as an ``infeasible`` chat message); ``noop(wait_ms)``: a
  ``screenshot`` (a new observation, the page untouched; BrowserGymEnv waits
  ``wait_ms`` first).

Refused with the reason (:data:`REFUSED_ACTIONS`): the middle button, a right double
click, files (``upload_file``), a button or key held across actions (``mouse_down``,
``keyboard_up``, ...), navigation and tabs (a uirl task is one page).

Keys are Playwright's, as BrowserGym writes them (``Control+a``, ``ControlOrMeta+c``,
``Shift+Tab``, ``KeyA``, ``Digit1``); ``ControlOrMeta`` is ``Control`` (Linux), code
names are their characters.
"""

from __future__ import annotations

import ast
import inspect
import math
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from uirl_gym.actions import (
    MAX_SCREEN,
    MAX_SCROLL_AMOUNT,
    SCROLL_NOTCH_PX,
    Action,
    ActionType,
    ScrollDirection,
)

__all__ = [
    "ACTION_SIGNATURES",
    "ACTION_SUBSETS",
    "BROWSERGYM_ACTIONS",
    "DEFAULT_SUBSETS",
    "REFUSED_ACTIONS",
    "ActionCall",
    "describe_actions",
    "parse_action",
    "parse_calls",
    "playwright_keys",
    "subset_actions",
]

# Longer answers are refused before parsing (a call takes a few hundred characters).
MAX_ACTION_STRING_LENGTH = 20_000

# BrowserGym's subsets (``ACTION_SUBSETS`` of browsergym.core.action.highlevel), by name;
# ``noop`` is in every action set.
ACTION_SUBSETS: dict[str, tuple[str, ...]] = {
    "chat": ("send_msg_to_user",),
    "infeas": ("report_infeasible",),
    "bid": (
        "scroll", "fill", "select_option", "click", "dblclick", "hover", "press", "focus",
        "clear", "drag_and_drop", "upload_file",
    ),
    "coord": (
        "scroll_at", "mouse_move", "mouse_up", "mouse_down", "mouse_click", "mouse_dblclick",
        "mouse_drag_and_drop", "mouse_upload_file", "keyboard_down", "keyboard_up",
        "keyboard_press", "keyboard_type", "keyboard_insert_text",
    ),
    "nav": ("go_back", "go_forward", "goto"),
    "tab": ("tab_close", "tab_focus", "new_tab"),
}  # fmt: skip
# What a text agent is offered when nothing else is said: answer, and act on elements.
DEFAULT_SUBSETS = ("chat", "bid")

_HELD = "uirl holds no button or key down across actions"
# BrowserGym's actions uirl does not take, and why (the ValueError's message).
REFUSED_ACTIONS: dict[str, str] = {
    "upload_file": "uirl's sessions have no files to upload",
    "mouse_upload_file": "uirl's sessions have no files to upload",
    "mouse_down": f"{_HELD}: use mouse_drag_and_drop(from_x, from_y, to_x, to_y) "
    "or mouse_click(x, y)",
    "mouse_up": f"{_HELD}: use mouse_drag_and_drop(from_x, from_y, to_x, to_y) "
    "or mouse_click(x, y)",
    "keyboard_down": f"{_HELD}: press a combination with "
    "keyboard_press('Shift+a'), hold modifiers on a click with click(bid, modifiers=[...])",
    "keyboard_up": f"{_HELD}: press a combination with "
    "keyboard_press('Shift+a'), hold modifiers on a click with click(bid, modifiers=[...])",
    "goto": "a uirl task is one page: navigation is not an action",
    "go_back": "a uirl task is one page: navigation is not an action",
    "go_forward": "a uirl task is one page: navigation is not an action",
    "new_tab": "a uirl task is one page: tabs are not actions",
    "tab_close": "a uirl task is one page: tabs are not actions",
    "tab_focus": "a uirl task is one page: tabs are not actions",
}

_REQUIRED = inspect.Parameter.empty


@dataclass(frozen=True)
class _Type:
    """A parameter's type: as a signature writes it, and its check."""

    annotation: str
    check: Callable[[Any], bool]
    expected: str


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _choice(*choices: str, why: str = "") -> _Type:
    listed = ", ".join(map(repr, choices))
    return _Type(f"Literal[{listed}]", lambda v: v in choices, f"one of {listed}{why}")


_STR = _Type("str", lambda v: isinstance(v, str), "a string")
_FLOAT = _Type("float", _is_number, "a number")
_INT = _Type("int", _is_number, "a number")
_BOOL = _Type("bool", lambda v: isinstance(v, bool), "True or False")
_OPTIONS = _Type(
    "str | list[str]",
    lambda v: isinstance(v, str) or (isinstance(v, list) and all(isinstance(o, str) for o in v)),
    "an option's value or label, or a list of one",
)
_MODIFIER_NAMES = ("Alt", "Control", "ControlOrMeta", "Meta", "Shift")
_MODIFIERS = _Type(
    f"list[Literal[{', '.join(map(repr, _MODIFIER_NAMES))}]]",
    lambda v: isinstance(v, list | tuple) and all(m in _MODIFIER_NAMES for m in v),
    f"a list of {', '.join(map(repr, _MODIFIER_NAMES))}",
)


@dataclass(frozen=True)
class _Param:
    name: str
    type: _Type
    default: Any = _REQUIRED

    def __str__(self) -> str:
        default = "" if self.default is _REQUIRED else f" = {self.default!r}"
        return f"{self.name}: {self.type.annotation}{default}"


@dataclass(frozen=True)
class _Spec:
    """One action uirl takes: its parameters, what it becomes, how a prompt shows it."""

    name: str
    params: tuple[_Param, ...]
    make: Callable[[Mapping[str, Any]], Action]
    description: str
    examples: tuple[str, ...]

    @property
    def signature(self) -> str:
        return f"{self.name}({', '.join(map(str, self.params))})"

    def bind(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments by name, defaults filled in, each of its type (ValueError)."""
        signature = inspect.Signature(
            [
                inspect.Parameter(
                    p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=p.default
                )
                for p in self.params
            ]
        )
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise ValueError(f"{self.name}: {exc}; expected {self.signature}") from None
        bound.apply_defaults()
        for param in self.params:
            value = bound.arguments[param.name]
            if not param.type.check(value):
                raise ValueError(
                    f"{self.name}: {param.name} must be {param.type.expected}, got {value!r}; "
                    f"expected {self.signature}"
                )
        return dict(bound.arguments)


# -- what each action becomes ----------------------------------------------------------


def _pixel(value: float) -> int:
    """The screen pixel a (fractional) screenshot coordinate falls in."""
    return math.floor(value)


def _held(modifiers: Any) -> str | None:
    names = ["Control" if m == "ControlOrMeta" else m for m in modifiers]
    return "+".join(dict.fromkeys(names)) or None


_CLICKS = {"left": ActionType.LEFT_CLICK, "right": ActionType.RIGHT_CLICK}


def _click(a: Mapping[str, Any]) -> Action:
    return Action(_CLICKS[a["button"]], bid=a["bid"], keys=_held(a["modifiers"]))


def _dblclick(a: Mapping[str, Any]) -> Action:
    return Action(ActionType.DOUBLE_CLICK, bid=a["bid"], keys=_held(a["modifiers"]))


def _mouse_click(a: Mapping[str, Any]) -> Action:
    return Action(_CLICKS[a["button"]], x=_pixel(a["x"]), y=_pixel(a["y"]))


def _mouse_dblclick(a: Mapping[str, Any]) -> Action:
    return Action(ActionType.DOUBLE_CLICK, x=_pixel(a["x"]), y=_pixel(a["y"]))


def _select_option(a: Mapping[str, Any]) -> Action:
    options = a["options"]
    if isinstance(options, list):
        if len(options) != 1:
            raise ValueError(
                f"select_option: uirl chooses one option per action, got {len(options)} "
                f"({options!r}); give one, e.g. select_option({a['bid']!r}, 'blue')"
            )
        options = options[0]
    return Action(ActionType.SELECT_OPTION, bid=a["bid"], text=options)


def _notches(delta: float) -> int:
    """Whole 100 px notches for a wheel delta: rounded half up, at least 1 if not 0."""
    if delta == 0:
        return 0
    return max(1, math.floor(abs(delta) / SCROLL_NOTCH_PX + 0.5))


def _scroll(dx: float, dy: float, point: tuple[int, int] | None, call: str) -> Action:
    """A scroll of ``dx, dy`` pixels (positive: right, down) at ``point``, or at the
    pointer; one axis (ValueError: both, or over MAX_SCROLL_AMOUNT notches)."""
    x_notches, y_notches = _notches(dx), _notches(dy)
    if x_notches and y_notches:
        raise ValueError(
            f"{call}: a uirl scroll moves along one axis; scroll along x and y in two "
            "actions (one with delta_x 0, one with delta_y 0)"
        )
    notches = x_notches or y_notches
    if notches > MAX_SCROLL_AMOUNT:
        raise ValueError(
            f"{call}: at most {MAX_SCROLL_AMOUNT * SCROLL_NOTCH_PX} px per scroll "
            f"({MAX_SCROLL_AMOUNT} notches of {SCROLL_NOTCH_PX} px), got {max(abs(dx), abs(dy))}"
        )
    if not notches:
        return Action(ActionType.SCREENSHOT)  # scroll(0, 0) moves nothing
    if x_notches:
        direction = ScrollDirection.RIGHT if dx > 0 else ScrollDirection.LEFT
    else:
        direction = ScrollDirection.DOWN if dy > 0 else ScrollDirection.UP
    x, y = point if point is not None else (None, None)
    return Action(ActionType.SCROLL, x=x, y=y, direction=direction, amount=notches)


_BUTTON = _Param("button", _choice("left", "right", why=" (uirl has no middle button)"), "left")
_LEFT_BUTTON = _Param(
    "button", _choice("left", why=" (uirl double clicks with the left button)"), "left"
)
_BID = _Param("bid", _STR)
_X, _Y = _Param("x", _FLOAT), _Param("y", _FLOAT)


def _drag(a: Mapping[str, Any]) -> Action:
    x, y, end_x, end_y = (_pixel(a[k]) for k in ("from_x", "from_y", "to_x", "to_y"))
    return Action(ActionType.DRAG, x=x, y=y, end_x=end_x, end_y=end_y)


_SCROLLS = "along one axis; amounts in pixels (whole 100 px notches), positive right or down"
# fmt: off
_SPECS: tuple[_Spec, ...] = (
    _Spec("noop", (_Param("wait_ms", _FLOAT, 1000),), lambda a: Action(ActionType.SCREENSHOT),
          "Do nothing, and optionally wait for the given time (in milliseconds).",
          ("noop()", "noop(500)")),
    _Spec("send_msg_to_user", (_Param("text", _STR),),
          lambda a: Action(ActionType.SEND_MSG_TO_USER, text=a["text"]),
          "Send a message to the user (the answer, when the task asks a question).",
          ("send_msg_to_user('Based on my search, the city was built in 1751.')",)),
    _Spec("report_infeasible", (_Param("reason", _STR),), lambda a: Action(ActionType.FINISH),
          "Tell the user that their instructions are infeasible; ends the episode.",
          ("report_infeasible('There is no email field in this form.')",)),
    _Spec("scroll", (_Param("delta_x", _FLOAT), _Param("delta_y", _FLOAT)),
          lambda a: _scroll(a["delta_x"], a["delta_y"], None, "scroll"),
          f"Scroll at the pointer, {_SCROLLS}.", ("scroll(0, 200)", "scroll(-300, 0)")),
    _Spec("fill", (_BID, _Param("value", _STR), _Param("enable_autocomplete_menu", _BOOL, False)),
          lambda a: Action(ActionType.FILL, bid=a["bid"], text=a["value"]),
          "Fill out a form field: focus it and replace its value by typing the text.",
          ("fill('237', 'example value')", "fill('45', 'multi-line\\nexample')")),
    _Spec("select_option", (_BID, _Param("options", _OPTIONS)), _select_option,
          "Select an option of a <select> element, by its value or label.",
          ("select_option('a48', 'blue')",)),
    _Spec("click", (_BID, _BUTTON, _Param("modifiers", _MODIFIERS, [])), _click,
          "Click an element.",
          ("click('a51')", "click('b22', button='right')", "click('48', modifiers=['Shift'])")),
    _Spec("dblclick", (_BID, _LEFT_BUTTON, _Param("modifiers", _MODIFIERS, [])), _dblclick,
          "Double click an element.", ("dblclick('12')",)),
    _Spec("hover", (_BID,), lambda a: Action(ActionType.MOUSE_MOVE, bid=a["bid"]),
          "Hover over an element.", ("hover('b8')",)),
    _Spec("press", (_BID, _Param("key_comb", _STR)),
          lambda a: Action(ActionType.KEYS, bid=a["bid"], keys=playwright_keys(a["key_comb"])),
          "Focus the element and press a combination of keys (Playwright's names: Backspace, "
          "Enter, Tab, ArrowDown, F1, KeyA, or a character such as 'a'; modifiers Shift, "
          "Control, Alt, Meta, ControlOrMeta).",
          ("press('88', 'Backspace')", "press('a26', 'ControlOrMeta+a')")),
    _Spec("focus", (_BID,), lambda a: Action(ActionType.FOCUS, bid=a["bid"]),
          "Focus the element.", ("focus('b455')",)),
    _Spec("clear", (_BID,), lambda a: Action(ActionType.FILL, bid=a["bid"], text=""),
          "Clear the input field.", ("clear('996')",)),
    _Spec("drag_and_drop", (_Param("from_bid", _STR), _Param("to_bid", _STR)),
          lambda a: Action(ActionType.DRAG, bid=a["from_bid"], end_bid=a["to_bid"]),
          "Press the left button on one element, move to the other, release.",
          ("drag_and_drop('56', '498')",)),
    _Spec("scroll_at", tuple(_Param(name, _INT) for name in ("x", "y", "dx", "dy")),
          lambda a: _scroll(a["dx"], a["dy"], (_pixel(a["x"]), _pixel(a["y"])), "scroll_at"),
          f"Scroll at a location (screenshot pixels), {_SCROLLS}.",
          ("scroll_at(50, 100, 0, -200)",)),
    _Spec("mouse_move", (_X, _Y),
          lambda a: Action(ActionType.MOUSE_MOVE, x=_pixel(a["x"]), y=_pixel(a["y"])),
          "Move the mouse to a location (screenshot pixels).", ("mouse_move(65.2, 158.5)",)),
    _Spec("mouse_click", (_X, _Y, _BUTTON), _mouse_click,
          "Click at a location (screenshot pixels).",
          ("mouse_click(887.2, 68)", "mouse_click(56, 712.56, 'right')")),
    _Spec("mouse_dblclick", (_X, _Y, _LEFT_BUTTON), _mouse_dblclick,
          "Double click at a location (screenshot pixels).", ("mouse_dblclick(5, 236)",)),
    _Spec("mouse_drag_and_drop",
          tuple(_Param(name, _FLOAT) for name in ("from_x", "from_y", "to_x", "to_y")),
          _drag, "Press the left button at one location, move to the other, release.",
          ("mouse_drag_and_drop(10.7, 325, 235.6, 24.54)",)),
    _Spec("keyboard_press", (_Param("key", _STR),),
          lambda a: Action(ActionType.KEYS, keys=playwright_keys(a["key"])),
          "Press a combination of keys (as press) in the focused element.",
          ("keyboard_press('Backspace')", "keyboard_press('ControlOrMeta+a')")),
    _Spec("keyboard_type", (_Param("text", _STR),),
          lambda a: Action(ActionType.TYPE, text=a["text"]),
          "Type text through the keyboard, in the focused element.",
          ("keyboard_type('Hello world!')",)),
    _Spec("keyboard_insert_text", (_Param("text", _STR),),
          lambda a: Action(ActionType.TYPE, text=a["text"]),
          "Insert text in the focused element (typed, as keyboard_type).",
          ("keyboard_insert_text('Hello world!')",)),
)
# fmt: on
_BY_NAME = {spec.name: spec for spec in _SPECS}
# Every action uirl takes, and how it is called (in BrowserGym's order).
ACTION_SIGNATURES: dict[str, str] = {spec.name: spec.signature for spec in _SPECS}
# Every name BrowserGym knows (taken or refused).
BROWSERGYM_ACTIONS = frozenset(_BY_NAME) | frozenset(REFUSED_ACTIONS)


# -- keys --------------------------------------------------------------------------------

_CODE_KEYS = {
    **{f"Key{c}": c.lower() for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"},
    **{f"Digit{d}": str(d) for d in range(10)},
    "Backquote": "`", "Minus": "-", "Equal": "=", "Backslash": "\\", "BracketLeft": "[",
    "BracketRight": "]", "Semicolon": ";", "Quote": "'", "Comma": ",", "Period": ".",
    "Slash": "/", "ControlOrMeta": "Control",
}  # fmt: skip


def playwright_keys(key_comb: str) -> str:
    """A Playwright key combination (BrowserGym's ``press``/``keyboard_press``) in the
    form of an action's ``keys``: split on ``+`` as Playwright does (``Shift++`` is Shift
    and ``+``), ``ControlOrMeta`` is ``Control``, a code name (``KeyA``, ``Digit1``,
    ``Minus``) its character; other names go as they are (``Action.validate`` checks
    them)."""
    parts: list[str] = []
    building = ""
    for char in key_comb:
        if char == "+" and building:
            parts.append(building)
            building = ""
        else:
            building += char
    parts.append(building)
    return "+".join(_CODE_KEYS.get(part, part) for part in parts)


# -- parsing ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ActionCall:
    """One call read from an action string, as written.

    Attributes:
        name: the function's name (a BrowserGym action: :data:`BROWSERGYM_ACTIONS`).
        args: the positional arguments, as Python values.
        kwargs: the keyword arguments.
    """

    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    def arguments(self) -> dict[str, Any]:
        """The arguments by parameter name, defaults filled in.

        Raises:
            ValueError: a refused action, a missing, extra or mistyped argument.
        """
        if self.name in REFUSED_ACTIONS:
            raise ValueError(f"{self.name}: {REFUSED_ACTIONS[self.name]}")
        if self.name not in _BY_NAME:
            raise ValueError(f"{self.name}: unknown action; known: {', '.join(_BY_NAME)}")
        return _BY_NAME[self.name].bind(self.args, self.kwargs)

    def to_action(self, screen: tuple[int, int] = MAX_SCREEN) -> Action:
        """The uirl action this call is, validated for ``screen`` (width, height).

        Raises:
            ValueError: as :meth:`arguments`, or an action uirl refuses (off the
                screen, an unknown key, ...: :meth:`Action.validate`'s message).
        """
        arguments = self.arguments()
        action = _BY_NAME[self.name].make(arguments)
        try:
            return action.validate(screen=screen)
        except ValueError as exc:
            raise ValueError(f"{self.name}: {exc}") from None

    def __str__(self) -> str:
        args = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{self.name}({', '.join(args)})"


_CALL_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)[ \t\r\n]*\(")
# A call's name in free text starts a word (``page.click(`` is ``click(``).
_WORD_CALL_RE = re.compile(r"(?<![A-Za-z0-9_])" + _CALL_RE.pattern)
_BLANK_RE = re.compile(r"(?:[ \t\r\n\f\v]+|#[^\n]*)+")
# One Python string literal without a prefix (BrowserGym's ``python_quoted_string``).
_STRING_RE = re.compile(
    "|".join(
        (
            r"(?s)'''(?:[^\\]|\\.)*?'''",
            r'"""(?:[^\\]|\\.)*?"""',
            r"'(?:[^'\\\n]|\\.)*'",
            r'"(?:[^"\\\n]|\\.)*"',
        )
    )
)
_LITERALS = "strings, numbers, lists, tuples, dicts of strings, True, False and None"


def _closing(text: str, start: int) -> int | None:
    """The index just past the ``)`` that closes the ``(`` at ``start`` (strings and
    ``#`` comments skipped); None when it is not closed."""
    depth = 0
    i = start
    while i < len(text):
        char = text[i]
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            if depth == 0:
                return i + 1
        elif char == "#":
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif char in "'\"":
            match = _STRING_RE.match(text, i)
            if match is None:
                return None
            i = match.end()
            continue
        i += 1
    return None


def _literal(node: ast.expr, source: str) -> Any:
    """The value of an argument that is a literal (ValueError otherwise)."""
    segment = ast.get_source_segment(source, node) or ""
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, str) and _STRING_RE.fullmatch(segment):
            return value
        if (
            value is None
            or isinstance(value, bool)
            or (isinstance(value, int | float) and "_" not in segment)
        ):
            return value
    elif (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub | ast.UAdd)
        and isinstance(node.operand, ast.Constant)
        and _is_number(node.operand.value)
    ):
        number = _literal(node.operand, source)
        return -number if isinstance(node.op, ast.USub) else number
    elif isinstance(node, ast.List | ast.Tuple):
        items = [_literal(item, source) for item in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    elif isinstance(node, ast.Dict) and None not in node.keys:
        keys = [_literal(k, source) for k in node.keys if k is not None]
        if all(isinstance(k, str) for k in keys):
            return dict(zip(keys, (_literal(v, source) for v in node.values), strict=True))
    raise ValueError(f"{segment!r} is not a literal; arguments are {_LITERALS}")


def _read_call(text: str, match: re.Match[str]) -> tuple[ActionCall, int]:
    """The call whose name and ``(`` ``match`` found, and the index past it.

    Raises:
        ValueError: not closed, not Python, or an argument that is not a literal.
    """
    name = match.group(1)
    end = _closing(text, match.end() - 1)
    if end is None:
        raise ValueError(f"{name}(...: its parenthesis is never closed")
    source = text[match.start() : end]
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"{source!r} is not a call: {exc.msg}") from None
    call = tree.body
    assert isinstance(call, ast.Call)  # name( ... ) that parses is a call
    if any(isinstance(arg, ast.Starred) for arg in call.args) or any(
        kw.arg is None for kw in call.keywords
    ):
        raise ValueError(f"{name}: *args and **kwargs are not allowed; arguments are {_LITERALS}")
    try:
        args = tuple(_literal(arg, source) for arg in call.args)
        kwargs = {kw.arg: _literal(kw.value, source) for kw in call.keywords if kw.arg}
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
    return ActionCall(name, args, kwargs), end


def _skip_blank(text: str, pos: int) -> int:
    """The index past the whitespace and ``#`` comments at ``pos``."""
    blank = _BLANK_RE.match(text, pos)
    return pos if blank is None else blank.end()


def _strict_calls(text: str) -> list[ActionCall]:
    """Calls separated by whitespace and comments, and nothing else (ValueError)."""
    calls: list[ActionCall] = []
    pos = _skip_blank(text, 0)
    while pos < len(text):
        match = _CALL_RE.match(text, pos)
        if match is None:
            found = text[pos : pos + 40]
            raise ValueError(
                f"expected a call such as click('12') at character {pos}, found {found!r}"
            )
        call, pos = _read_call(text, match)
        calls.append(call)
        pos = _skip_blank(text, pos)
    return calls


def _found_calls(text: str) -> list[ActionCall]:
    """Every call in free text (BrowserGym's ``search_string``): what is not a call of
    literals is skipped, and so is a ``#`` comment's line."""
    calls: list[ActionCall] = []
    pos = 0
    while True:
        match = _WORD_CALL_RE.search(text, pos)
        if match is None:
            return calls
        comment = text.find("#", pos, match.start())
        if comment >= 0:
            line_end = text.find("\n", comment)
            if line_end < 0:
                return calls
            pos = line_end
            continue
        try:
            call, pos = _read_call(text, match)
        except ValueError:
            pos = match.end()
            continue
        calls.append(call)


def parse_calls(
    text: str,
    *,
    strict: bool = True,
    multiaction: bool = False,
    allowed: Collection[str] | None = None,
) -> list[ActionCall]:
    """The calls an action string holds, read as literals (nothing is run).

    Args:
        text: the agent's answer.
        strict: only calls, separated by whitespace, newlines or ``#`` comments
            (BrowserGym's ``strict=True``); False: every call found in free text,
            markdown fences and prose skipped (BrowserGym's default).
        multiaction: several calls allowed (BrowserGym's default is True).
        allowed: the action names of the action set (None: every BrowserGym action;
            ``noop`` is always allowed).

    Raises:
        ValueError: no call, several calls without ``multiaction``, a name that is not
            a BrowserGym action or not in ``allowed``, an argument that is not a
            literal, or (``strict``) anything besides calls.
    """
    if not isinstance(text, str):
        raise ValueError(f"an action is a string such as \"click('12')\", got {text!r}")
    if len(text) > MAX_ACTION_STRING_LENGTH:
        raise ValueError(
            f"at most {MAX_ACTION_STRING_LENGTH} characters, got {len(text)}; answer one "
            "call such as click('12')"
        )
    calls = _strict_calls(text) if strict else _found_calls(text)
    if not calls:
        raise ValueError("empty action: expected one call such as click('12') or noop()")
    if len(calls) > 1 and not multiaction:
        raise ValueError(
            f"{len(calls)} actions ({', '.join(c.name for c in calls)}): give exactly one "
            "action per step"
        )
    names = (set(allowed) | {"noop"}) if allowed is not None else set(BROWSERGYM_ACTIONS)
    for call in calls:
        if call.name not in names:
            known = [n for n in ACTION_SIGNATURES if n in names]
            what = "not in this action set" if call.name in BROWSERGYM_ACTIONS else "unknown action"
            raise ValueError(
                f"{call.name}: {what}; allowed: {', '.join(known)}"
                + (" (names are case-sensitive)" if call.name.lower() in names else "")
            )
    return calls


def parse_action(
    text: str, *, allowed: Collection[str] | None = None, screen: tuple[int, int] = MAX_SCREEN
) -> Action:
    """The uirl action of an action string holding exactly one call (strict).

    Args:
        text: e.g. ``"click('12')"``, ``"fill('5', 'Bob')"``, ``"send_msg_to_user('42')"``.
        allowed: the action names an agent was offered (None: all).
        screen: the env's screen (width, height): coordinates are checked against it.

    Raises:
        ValueError: as :func:`parse_calls` (strict, one call) and
            :meth:`ActionCall.to_action`.
    """
    (call,) = parse_calls(text, allowed=allowed)
    return call.to_action(screen)


def subset_actions(subsets: Collection[str]) -> list[str]:
    """The action names uirl takes in BrowserGym's ``subsets``, ``noop`` first.

    Raises:
        ValueError: an unknown subset name.
    """
    unknown = [s for s in subsets if s not in ACTION_SUBSETS]
    if unknown:
        raise ValueError(f"unknown action subsets {unknown}; known: {', '.join(ACTION_SUBSETS)}")
    names = ["noop", *(n for s in subsets for n in ACTION_SUBSETS[s])]
    return [n for n in dict.fromkeys(names) if n in _BY_NAME]


# The action shown as the example of a prompt, the first of these offered.
_EXAMPLE_ACTIONS = ("click", "fill", "mouse_click", "keyboard_type", "send_msg_to_user")


def describe_actions(
    subsets: Collection[str] = DEFAULT_SUBSETS,
    *,
    with_examples: bool = True,
    multiaction: bool = False,
) -> str:
    """The actions of ``subsets`` for a prompt: each signature, what it does and (with
    ``with_examples``) how it is written, as BrowserGym's ``HighLevelActionSet.describe``
    does, without the actions uirl refuses.

    Raises:
        ValueError: an unknown subset name.
    """
    subset_names = subset_actions(subsets)
    specs = [_BY_NAME[n] for n in subset_names]
    lines = [f"{len(specs)} different types of actions are available.", ""]
    for spec in specs:
        lines += [spec.signature, f"    Description: {spec.description}"]
        if with_examples:
            lines += ["    Examples:", *(f"        {e}" for e in spec.examples)]
        lines.append("")
    if multiaction:
        lines.append("Several actions can be given, one per line; they run in order.")
    else:
        example = next(
            (_BY_NAME[n].examples[0] for n in _EXAMPLE_ACTIONS if n in subset_names), "noop()"
        )
        lines += ["Only a single action can be provided at once, e.g.:", example]
    return "\n".join(lines) + "\n"

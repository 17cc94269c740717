"""Actions: the one vocabulary shared by the env, the session server, the agents.

An :class:`Action` is what an agent does to the screen, in screen pixels. It converts
to the query parameters of ``GET /act`` and back in :mod:`uirl_gym.protocol`
(``act_query``, ``parse_act_query``), and to and from the Gymnasium
:func:`action_space` sample layout (:meth:`Action.to_space_sample`, :func:`to_action`).

Validation lives here, once: the server calls :meth:`Action.validate` on every
request and turns its ``ValueError`` into a 4xx; the env calls it before sending so
that a malformed action costs no round trip.
"""

from __future__ import annotations

import enum
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

SCREEN_WIDTH = 1280
SCREEN_HEIGHT = 800
# The default screen (width, height); a session's screen may be another (reset's
# ``screen``: MiniWoB++'s 160x210 task area, for one), within these bounds.
DEFAULT_SCREEN = (SCREEN_WIDTH, SCREEN_HEIGHT)
MIN_SCREEN_SIDE = 16
MAX_SCREEN = (3840, 2160)
MAX_TEXT_LENGTH = 512
MAX_KEYS_LENGTH = 64
MAX_SCROLL_AMOUNT = 50
DEFAULT_SCROLL_AMOUNT = 3
# One scroll notch moves the page this far, like a mouse wheel click in Chromium.
SCROLL_NOTCH_PX = 100
# Pointer moves between a drag's press and release (pages following mousemove see them).
DRAG_MOVE_STEPS = 8
# How long a session may take to perform an action and capture its screenshot (``GET
# /act``'s ``timeout``, the env's ``step_timeout_s``): the stall hunt's slowest action
# took 2.5 s on a 2-core machine at a load of 18-28 (docs/benchmarks.md), so an action
# past this is a page that hangs, which then costs this long and one episode.
DEFAULT_ACTION_TIMEOUT_S = 10.0
MIN_ACTION_TIMEOUT_S = 0.5
MAX_ACTION_TIMEOUT_S = 120.0


class ActionType(enum.StrEnum):
    """What an action does. The first nine are the ui-verifiers protocol's."""

    SCREENSHOT = "screenshot"
    MOUSE_MOVE = "mouse_move"
    LEFT_CLICK = "left_click"
    RIGHT_CLICK = "right_click"
    DOUBLE_CLICK = "double_click"
    TRIPLE_CLICK = "triple_click"
    TYPE = "type"
    KEYS = "keys"
    SCROLL = "scroll"
    # The agent declares the task done; handled by the env, never sent to a session.
    FINISH = "finish"
    # Press the left button at (x, y), move to (end_x, end_y), release. Appended, so
    # that the action space's indices of the others stay what they were.
    DRAG = "drag"
    # Actions on an element (its ``bid``, from a text observation): type ``text`` into a
    # field in place of its value, choose an option of a <select>, give it the focus.
    FILL = "fill"
    SELECT_OPTION = "select_option"
    FOCUS = "focus"
    # The agent's message to the user (BrowserGym's chat): handled by the env, like
    # ``finish``, never sent to a session.
    SEND_MSG_TO_USER = "send_msg_to_user"


class ScrollDirection(enum.StrEnum):
    UP = "up"
    DOWN = "down"
    LEFT = "left"
    RIGHT = "right"


POINTER_ACTIONS = frozenset(
    {
        ActionType.MOUSE_MOVE,
        ActionType.LEFT_CLICK,
        ActionType.RIGHT_CLICK,
        ActionType.DOUBLE_CLICK,
        ActionType.TRIPLE_CLICK,
        ActionType.SCROLL,
    }
)
# Actions that may hold modifier keys while they act (their ``keys``: a shift+click).
HOLDING_ACTIONS = POINTER_ACTIONS | {ActionType.DRAG}
# Actions that need an element (a ``bid``); and those that take one in place of a point
# (or, ``keys``, to press with the element focused).
ELEMENT_ACTIONS = frozenset({ActionType.FILL, ActionType.SELECT_OPTION, ActionType.FOCUS})
BID_ACTIONS = (
    (POINTER_ACTIONS - {ActionType.SCROLL}) | {ActionType.DRAG, ActionType.KEYS} | ELEMENT_ACTIONS
)
# Actions the env answers itself (never sent to a session).
ENV_ACTIONS = frozenset({ActionType.FINISH, ActionType.SEND_MSG_TO_USER})
ACTION_TYPES: tuple[ActionType, ...] = tuple(ActionType)
# The optional fields of an action, in ``GET /act`` order.
ACTION_FIELDS = (
    "x", "y", "text", "keys", "direction", "amount", "end_x", "end_y", "bid", "end_bid"
)  # fmt: skip
# An element id as the text observations write it (BrowserGym's form: digits, after the
# letters of the frame it is in: "12", "a3", "aB7").
BID_RE = re.compile(r"[A-Za-z0-9]{1,32}")
MAX_BID_LENGTH = 32
SCROLL_DIRECTIONS: tuple[ScrollDirection, ...] = tuple(ScrollDirection)

# Modifier spellings accepted in ``keys`` (pyautogui / xdotool / UI-TARS style) and
# the Playwright names they map to.
MODIFIER_KEYS = {
    "ctrl": "Control",
    "control": "Control",
    "shift": "Shift",
    "alt": "Alt",
    "option": "Alt",
    "meta": "Meta",
    "cmd": "Meta",
    "command": "Meta",
    "super": "Meta",
    "win": "Meta",
}
# Playwright's own key names (its US keyboard layout): accepted in any letter case.
PLAYWRIGHT_KEYS = (
    "Enter", "Tab", "Escape", "Backspace", "Delete", "Insert", "Home", "End", "PageUp",
    "PageDown", "ArrowUp", "ArrowDown", "ArrowLeft", "ArrowRight", "Space", "CapsLock",
    "NumLock", "ScrollLock", "Pause", "PrintScreen", "ContextMenu", "Control", "Shift",
    "Alt", "Meta", "ControlLeft", "ControlRight", "ShiftLeft", "ShiftRight", "AltLeft",
    "AltRight", "AltGraph", "MetaLeft", "MetaRight", "AudioVolumeMute", "AudioVolumeDown",
    "AudioVolumeUp", "MediaTrackNext", "MediaTrackPrevious", "MediaPlayPause",
    "NumpadDivide", "NumpadMultiply", "NumpadSubtract", "NumpadAdd", "NumpadDecimal",
    "NumpadEnter", *(f"Numpad{i}" for i in range(10)), *(f"F{i}" for i in range(1, 13)),
)  # fmt: skip
# Keys that pyautogui knows but Playwright's keyboard does not: sent through CDP
# (``Input.dispatchKeyEvent``) as DOM key values, with their Windows virtual key codes.
CDP_KEYS: dict[str, int] = {
    "Accept": 0x1E, "BrowserBack": 0xA6, "BrowserFavorites": 0xAB, "BrowserForward": 0xA7,
    "BrowserHome": 0xAC, "BrowserRefresh": 0xA8, "BrowserSearch": 0xAA, "BrowserStop": 0xA9,
    "Clear": 0x0C, "Convert": 0x1C, "Execute": 0x2B, "FinalMode": 0x18, "Fn": 0,
    "HangulMode": 0x15, "HanjaMode": 0x19, "JunjaMode": 0x17, "KanaMode": 0x15,
    "KanjiMode": 0x19, "Help": 0x2F, "LaunchApplication1": 0xB6,
    "LaunchApplication2": 0xB7, "LaunchMail": 0xB4, "LaunchMediaPlayer": 0xB5,
    "ModeChange": 0x1F, "NonConvert": 0x1D, "MediaStop": 0xB2, "Print": 0x2A,
    "Select": 0x29, "Separator": 0x6C, "Standby": 0x5F, "IntlYen": 0,
    **{f"F{i}": 0x70 + i - 1 for i in range(13, 25)},
}  # fmt: skip
# pyautogui's KEYBOARD_KEYS (0.9.54) that are names, not characters, mapped to the
# Playwright (or CDP) key they press. Upstream's server passes ``keys`` to
# ``pyautogui.hotkey``, so every name it knows must work here too.
PYAUTOGUI_KEYS = {
    "accept": "Accept", "add": "NumpadAdd", "alt": "Alt", "altleft": "AltLeft",
    "altright": "AltRight", "apps": "ContextMenu", "backspace": "Backspace",
    "browserback": "BrowserBack", "browserfavorites": "BrowserFavorites",
    "browserforward": "BrowserForward", "browserhome": "BrowserHome",
    "browserrefresh": "BrowserRefresh", "browsersearch": "BrowserSearch",
    "browserstop": "BrowserStop", "capslock": "CapsLock", "clear": "Clear",
    "convert": "Convert", "ctrl": "Control", "ctrlleft": "ControlLeft",
    "ctrlright": "ControlRight", "decimal": "NumpadDecimal", "del": "Delete",
    "delete": "Delete", "divide": "NumpadDivide", "down": "ArrowDown", "end": "End",
    "enter": "Enter", "esc": "Escape", "escape": "Escape", "execute": "Execute",
    **{f"f{i}": f"F{i}" for i in range(1, 25)},
    "final": "FinalMode", "fn": "Fn", "hanguel": "HangulMode", "hangul": "HangulMode",
    "hanja": "HanjaMode", "help": "Help", "home": "Home", "insert": "Insert",
    "junja": "JunjaMode", "kana": "KanaMode", "kanji": "KanjiMode",
    "launchapp1": "LaunchApplication1", "launchapp2": "LaunchApplication2",
    "launchmail": "LaunchMail", "launchmediaselect": "LaunchMediaPlayer",
    "left": "ArrowLeft", "modechange": "ModeChange", "multiply": "NumpadMultiply",
    "nexttrack": "MediaTrackNext", "nonconvert": "NonConvert",
    **{f"num{i}": f"Numpad{i}" for i in range(10)},
    "numlock": "NumLock", "pagedown": "PageDown", "pageup": "PageUp", "pause": "Pause",
    "pgdn": "PageDown", "pgup": "PageUp", "playpause": "MediaPlayPause",
    "prevtrack": "MediaTrackPrevious", "print": "Print", "printscreen": "PrintScreen",
    "prntscrn": "PrintScreen", "prtsc": "PrintScreen", "prtscr": "PrintScreen",
    "return": "Enter", "right": "ArrowRight", "scrolllock": "ScrollLock",
    "select": "Select", "separator": "Separator", "shift": "Shift",
    "shiftleft": "ShiftLeft", "shiftright": "ShiftRight", "sleep": "Standby",
    "space": "Space", "stop": "MediaStop", "subtract": "NumpadSubtract", "tab": "Tab",
    "up": "ArrowUp", "volumedown": "AudioVolumeDown", "volumemute": "AudioVolumeMute",
    "volumeup": "AudioVolumeUp", "win": "Meta", "winleft": "MetaLeft",
    "winright": "MetaRight", "yen": "IntlYen", "command": "Meta", "option": "Alt",
    "optionleft": "AltLeft", "optionright": "AltRight",
}  # fmt: skip
# pyautogui's whitespace "characters": keys, not text.
WHITESPACE_KEYS = {"\t": "Tab", "\n": "Enter", "\r": "Enter", " ": "Space"}
# What a key combination may be padded with: ASCII only, so that a non-breaking space
# (which str.strip() removes too) is named as the key it is, not taken for nothing.
ASCII_SPACE = " \t\n\r\x0b\x0c"
# What ``type`` presses as a key instead of typing it, as pyautogui does.
TYPED_KEYS = {"\t": "Tab", "\n": "Enter", "\r": "Enter", "\r\n": "Enter"}
_TYPED_KEYS_RE = re.compile(r"(\r\n|\r|\n|\t)")


def typed_chunks(text: str) -> list[str]:
    """``text`` split into runs of plain text and single :data:`TYPED_KEYS` (no empty runs)."""
    return [chunk for chunk in _TYPED_KEYS_RE.split(text) if chunk]


# Every accepted key name, lower-cased, and what it presses.
NAMED_KEYS = (
    {name.lower(): name for name in PLAYWRIGHT_KEYS}
    | {name.lower(): name for name in CDP_KEYS}
    | PYAUTOGUI_KEYS
    | MODIFIER_KEYS
    | {"pgup": "PageUp", "pgdn": "PageDown", "super": "Meta", "meta": "Meta"}
)


def key_sequence(keys: str) -> list[str]:
    """The keys of a combination such as ``ctrl+c``, as Playwright (or CDP) names them.

    Like ``pyautogui.hotkey``, the keys are pressed in order and released in reverse, so
    any key may come before the last one (``ctrl+shift``, ``shift+tab``).

    Raises:
        ValueError: empty, too long, or a part that is not a known key name.
    """
    if not keys or (not keys.strip(ASCII_SPACE) and keys not in WHITESPACE_KEYS):
        raise ValueError("keys: must not be empty, e.g. 'ctrl+c', 'Enter', 'shift+Tab'")
    if len(keys) > MAX_KEYS_LENGTH:
        raise ValueError(f"keys: at most {MAX_KEYS_LENGTH} characters, got {len(keys)}")
    if keys in WHITESPACE_KEYS:
        return [WHITESPACE_KEYS[keys]]
    # "ctrl++" means Control and the plus key.
    stripped = keys.strip(ASCII_SPACE)
    parts = stripped.split("+")
    if stripped.endswith("++") or stripped == "+":
        parts = [*parts[:-2], "+"]
    parts = [p.strip(ASCII_SPACE) for p in parts]
    return [_key_name(part, keys, last=i == len(parts) - 1) for i, part in enumerate(parts)]


def _key_name(part: str, keys: str, *, last: bool) -> str:
    if part.lower() in NAMED_KEYS:
        return NAMED_KEYS[part.lower()]
    if len(part) == 1 and part.isascii() and part.isprintable():
        return part
    if len(part) == 1 or (part and not part.isascii()):
        where = "" if part == keys else f" in {keys!r}"
        # An invisible character is named too (U+00A0 NO-BREAK SPACE): its repr alone
        # looks like nothing in most consoles.
        named = f" ({_unicode_names(part)})" if not part.isprintable() or part.isspace() else ""
        raise ValueError(
            f"keys: {part!r}{named}{where} is not a key on the keyboard (only ASCII "
            "characters and key names are); to enter it, use action_type=type with "
            f"text={part!r}"
        )
    if not last:
        raise ValueError(
            f"keys: unknown modifier {part!r} in {keys!r}; allowed: "
            f"{', '.join(sorted(MODIFIER_KEYS))} or any key name"
        )
    raise ValueError(
        f"keys: unknown key {part!r} in {keys!r}; use a single ASCII character or a key "
        "name: pyautogui's (enter, tab, esc, pgdn, f1, num0, volumeup, ...) or "
        f"Playwright's ({', '.join(PLAYWRIGHT_KEYS[:14])}, ...); docs/protocol.md lists all"
    )


def _check_unicode(name: str, text: str) -> None:
    """Refuse a lone surrogate (``"\\ud800"``, as a model's JSON can carry): it is no
    character, cannot be sent (UTF-8 has no encoding for it) nor typed.

    Raises:
        ValueError: naming the field, the code point and where it is.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{name}: U+{ord(text[exc.start]):04X} at index {exc.start} is a lone surrogate, "
            "not a character (half of a UTF-16 pair, e.g. a JSON '\\ud83d' escape without "
            "its other half); send whole characters"
        ) from None


def _unicode_names(text: str) -> str:
    return ", ".join(f"U+{ord(c):04X} {unicodedata.name(c, 'unnamed')}" for c in text[:4])


HELD_MODIFIERS = ("Control", "Shift", "Alt", "Meta")


def held_modifiers(keys: str) -> list[str]:
    """The modifier keys a pointer action holds down while it acts (its ``keys``:
    ``shift`` for a shift+click, ``ctrl+shift``), as Playwright names them.

    Raises:
        ValueError: a key that is not a modifier (ctrl, shift, alt, meta and their
            spellings in :data:`MODIFIER_KEYS`).
    """
    names = key_sequence(keys)
    others = [name for name in names if name not in HELD_MODIFIERS]
    if others:
        raise ValueError(
            f"keys: a pointer action holds modifier keys only (ctrl, shift, alt, meta), "
            f"got {keys!r}; press other keys with action_type=keys"
        )
    return names


def parse_keys(keys: str) -> str:
    """Turn a key combination such as ``ctrl+c`` or ``shift+Tab`` into Playwright's form.

    Args:
        keys: keys joined by ``+`` (case-insensitive names; a single printable ASCII
            character is taken as is): pyautogui's names, Playwright's, and the usual
            modifier spellings (``ctrl``, ``cmd``, ``super``, ...).

    Returns:
        The combination as Playwright's ``keyboard.press`` expects it, e.g. ``Control+c``.

    Raises:
        ValueError: empty, too long, or a part that is not a known key name.
    """
    return "+".join(key_sequence(keys))


@dataclass(frozen=True)
class Action:
    """One agent action in screen pixels.

    Attributes:
        type: what to do.
        x, y: the pointer position; required for clicks, mouse_move; optional for scroll
            (the pointer's current place when left out).
        text: what ``type`` types.
        keys: the combination ``keys`` presses, e.g. ``ctrl+c``; on a pointer action
            (clicks, ``mouse_move``, ``scroll``, ``drag``), the modifier keys held down
            while it acts, e.g. ``shift`` for a shift+click (:func:`held_modifiers`).
        direction: where ``scroll`` scrolls.
        amount: how many wheel notches ``scroll`` turns (100 px each).
        end_x, end_y: where ``drag`` releases the button (it presses at ``x, y``).
        bid: the element a click, ``mouse_move``, ``drag``, ``keys``, ``fill``,
            ``select_option`` or ``focus`` acts on, in place of ``x, y`` (its id in the
            last text observation); the session scrolls it into view and acts at the
            centre of its visible part, with the same input events as at a point.
        end_bid: the element ``drag`` releases on, in place of ``end_x, end_y``.

    ``fill`` replaces the element's value by ``text`` (typed as keys; empty clears it);
    ``select_option`` chooses the option whose value or label is ``text``.
    """

    type: ActionType
    x: int | None = None
    y: int | None = None
    text: str | None = None
    keys: str | None = None
    direction: ScrollDirection | str | None = None
    amount: int | None = None
    end_x: int | None = None
    end_y: int | None = None
    bid: str | None = None
    end_bid: str | None = None

    def __post_init__(self) -> None:
        # Normalise enum-valued fields so that Action("left_click", ...) works.
        try:
            object.__setattr__(self, "type", ActionType(self.type))
        except ValueError:
            raise ValueError(
                f"action_type: unknown {self.type!r}; allowed: "
                f"{', '.join(t.value for t in ActionType)}"
            ) from None
        if self.direction is not None:
            # Upstream compares ``direction.lower()``: "Down" and "UP" are fine.
            direction = self.direction
            if isinstance(direction, str) and not isinstance(direction, ScrollDirection):
                direction = direction.strip().lower()
            try:
                object.__setattr__(self, "direction", ScrollDirection(direction))
            except ValueError:
                raise ValueError(
                    f"direction: unknown {self.direction!r}; allowed: "
                    f"{', '.join(d.value for d in ScrollDirection)}"
                ) from None

    def validate(
        self, *, max_text_length: int = MAX_TEXT_LENGTH, screen: tuple[int, int] = DEFAULT_SCREEN
    ) -> Action:
        """Check that the fields fit the type and the screen; return self.

        Args:
            max_text_length: the longest ``type`` text (the session server, serving
                upstream clients too, allows more than the action space's 512).
            screen: the session's screen (width, height) the coordinates must be on.

        Raises:
            ValueError: naming the field and what is allowed.
        """
        t = self.type
        self._validate_element()
        needs_point = t in POINTER_ACTIONS and t is not ActionType.SCROLL
        if needs_point and self.bid is None and (self.x is None or self.y is None):
            raise ValueError(f"x, y: {t.value} needs both coordinates (or an element's bid)")
        if (self.x is None) != (self.y is None):
            raise ValueError("x, y: give both coordinates or neither")
        if t is ActionType.DRAG and (
            (self.bid is None and None in (self.x, self.y))
            or (self.end_bid is None and None in (self.end_x, self.end_y))
        ):
            raise ValueError(
                "x, y, end_x, end_y: drag needs the point (or bid) to press at and the one "
                "(end_x, end_y or end_bid) to release at"
            )
        width, height = screen
        points = [("x", self.x, width), ("y", self.y, height)] if self.x is not None else []
        if t is ActionType.DRAG and self.end_x is not None:
            points += [("end_x", self.end_x, width), ("end_y", self.end_y, height)]
        for name, value, limit in points:
            if isinstance(value, bool) or not isinstance(value, int | np.integer):
                raise ValueError(f"{name}: must be an integer, got {value!r}")
            if not 0 <= value < limit:
                raise ValueError(
                    f"{name}: {value} is off the {width}x{height} screen; allowed 0..{limit - 1}"
                )
        self._validate_fields(max_text_length)
        return self

    def _validate_element(self) -> None:
        """The element fields: a bid where the type takes one, in BrowserGym's form."""
        t = self.type
        for name in ("bid", "end_bid"):
            value = getattr(self, name)
            if value is None:
                continue
            if not isinstance(value, str) or not BID_RE.fullmatch(value):
                raise ValueError(
                    f"{name}: an element id is 1-{MAX_BID_LENGTH} letters and digits as the "
                    f"text observation writes it (e.g. '12', 'a3'), got {value!r}"
                )
        if self.bid is not None and t not in BID_ACTIONS:
            raise ValueError(
                f"bid: {t.value} acts on no element; these do: "
                f"{', '.join(sorted(a.value for a in BID_ACTIONS))}"
            )
        if self.end_bid is not None and t is not ActionType.DRAG:
            raise ValueError(f"end_bid: only drag releases on an element, not {t.value}")
        if self.bid is not None and self.x is not None:
            raise ValueError(f"x, y, bid: {t.value} acts at a point or on an element, not both")
        if self.end_bid is not None and self.end_x is not None:
            raise ValueError("end_x, end_y, end_bid: drag releases at a point or on an element")
        if t in ELEMENT_ACTIONS and self.bid is None:
            raise ValueError(f"bid: {t.value} needs the element's id (bid)")
        if t in (ActionType.FILL, ActionType.SELECT_OPTION, ActionType.SEND_MSG_TO_USER):
            if not isinstance(self.text, str):
                what = "the value to fill in" if t is ActionType.FILL else "the option or text"
                raise ValueError(f"text: {t.value} needs {what} as a string, got {self.text!r}")
            if t is ActionType.SELECT_OPTION and not self.text:
                raise ValueError("text: select_option needs an option's value or label")

    def _validate_fields(self, max_text_length: int) -> None:
        # Their types are checked too: a recorder request's JSON can hold a list or an
        # object where a string belongs, which used to surface as an internal error.
        t = self.type
        if t in (ActionType.FILL, ActionType.SELECT_OPTION, ActionType.SEND_MSG_TO_USER):
            assert isinstance(self.text, str)  # _validate_element
            _check_unicode("text", self.text)
            if len(self.text) > max_text_length:
                raise ValueError(
                    f"text: at most {max_text_length} characters, got {len(self.text)}"
                )
        if t is ActionType.TYPE:
            # Empty text types nothing, as pyautogui.typewrite("") does (a no-op).
            if self.text is None:
                raise ValueError("text: type needs a text, e.g. text=hello")
            if not isinstance(self.text, str):
                raise ValueError(f"text: must be a string, got {type(self.text).__name__}")
            _check_unicode("text", self.text)
            if len(self.text) > max_text_length:
                raise ValueError(
                    f"text: at most {max_text_length} characters, got {len(self.text)}"
                )
        if self.keys and t in HOLDING_ACTIONS:
            if not isinstance(self.keys, str):
                raise ValueError(
                    f"keys: must be a string such as 'shift', got {type(self.keys).__name__}"
                )
            held_modifiers(self.keys)
        if t is ActionType.KEYS:
            if self.keys is not None and not isinstance(self.keys, str):
                raise ValueError(
                    f"keys: must be a string such as 'ctrl+c', got {type(self.keys).__name__}"
                )
            _check_unicode("keys", self.keys or "")
            parse_keys(self.keys or "")
        if t is ActionType.SCROLL:
            if self.direction is None:
                raise ValueError(
                    "direction: scroll needs one of " + ", ".join(d.value for d in ScrollDirection)
                )
            if self.amount is not None and (
                isinstance(self.amount, bool) or not isinstance(self.amount, int | np.integer)
            ):
                raise ValueError(f"amount: must be an integer, got {self.amount!r}")
            amount = self.scroll_amount
            if not 1 <= amount <= MAX_SCROLL_AMOUNT:
                raise ValueError(f"amount: must be 1..{MAX_SCROLL_AMOUNT}, got {amount}")

    @property
    def scroll_amount(self) -> int:
        return DEFAULT_SCROLL_AMOUNT if self.amount is None else int(self.amount)

    @property
    def point(self) -> tuple[int, int]:
        """``(x, y)``: where a click, a move or a drag's press acts; ValueError when a
        coordinate is missing (:meth:`validate` refuses such an action)."""
        return self._both(self.x, self.y, "x, y")

    @property
    def end_point(self) -> tuple[int, int]:
        """``(end_x, end_y)``: where a drag releases the button; ValueError as ``point``."""
        return self._both(self.end_x, self.end_y, "end_x, end_y")

    def _both(self, x: int | None, y: int | None, names: str) -> tuple[int, int]:
        if x is None or y is None:
            raise ValueError(f"{names}: {self.type.value} needs both coordinates")
        return x, y

    @property
    def pointer_after(self) -> tuple[int, int] | None:
        """Where the pointer is once the action is done: a drag's release point, else its
        point; None for an action without one (keys, typing, a scroll at the pointer)."""
        if self.end_x is not None and self.end_y is not None:
            return self.end_x, self.end_y
        if self.x is not None and self.y is not None:
            return self.x, self.y
        return None

    @property
    def scroll_direction(self) -> ScrollDirection:
        """Where a scroll goes (down when not given); ``direction`` given as text is a
        :class:`ScrollDirection` once the action is made."""
        return ScrollDirection(self.direction or ScrollDirection.DOWN)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (enum values as strings, ``None`` fields left out)."""
        return {
            k: (v.value if isinstance(v, enum.Enum) else v)
            for k, v in asdict(self).items()
            if v is not None
        }

    def to_space_sample(self) -> dict[str, Any]:
        """This action in the layout of :func:`action_space` (unused fields zeroed)."""
        return {
            "action_type": ACTION_TYPES.index(self.type),
            "x": self.x or 0,
            "y": self.y or 0,
            "text": self.text or "",
            "keys": self.keys or "",
            "direction": SCROLL_DIRECTIONS.index(self.direction) if self.direction else 0,
            "amount": self.scroll_amount,
            "end_x": self.end_x or 0,
            "end_y": self.end_y or 0,
            "bid": self.bid or "",
            "end_bid": self.end_bid or "",
        }


_TEXT_CHARSET = "".join(chr(c) for c in range(32, 127))


class BidText(spaces.Text):
    """An element id (``""``: none, act at the point). Its samples are ``""``: a random
    id is almost never on the page, so a random agent acts at random points instead of
    sending ids that are all refused; ``contains`` takes any id in BrowserGym's form."""

    def __init__(self, seed: Any = None) -> None:
        alnum = "".join(chr(c) for c in (*range(48, 58), *range(65, 91), *range(97, 123)))
        super().__init__(MAX_BID_LENGTH, min_length=0, charset=alnum, seed=seed)

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        if mask is not None or probability is not None:
            return super().sample(mask=mask, probability=probability)
        return ""

    def __repr__(self) -> str:
        return f"BidText(0, {MAX_BID_LENGTH})"


def check_screen(value: Any) -> tuple[int, int]:
    """A screen size ``[width, height]`` (any 2-sequence of integers), checked.

    Raises:
        ValueError: not two integers within ``MIN_SCREEN_SIDE`` .. ``MAX_SCREEN``.
    """
    ok = (
        isinstance(value, list | tuple)
        and len(value) == 2
        and all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in value)
    )
    if ok:
        width, height = int(value[0]), int(value[1])
        if MIN_SCREEN_SIDE <= width <= MAX_SCREEN[0] and MIN_SCREEN_SIDE <= height <= MAX_SCREEN[1]:
            return width, height
    raise ValueError(
        f"screen: expected [width, height] in {MIN_SCREEN_SIDE}..{MAX_SCREEN[0]} x "
        f"{MIN_SCREEN_SIDE}..{MAX_SCREEN[1]}, got {value!r}"
    )


def action_space(seed: int | None = None, screen: tuple[int, int] = DEFAULT_SCREEN) -> spaces.Dict:
    """The Gymnasium action space: a ``Dict`` of every field an action can carry.

    ``action_type`` indexes :data:`ACTION_TYPES`; ``x`` and ``y`` are screen pixels
    (``Discrete``: pixels are integers, and a pixel Box would be a badly scaled one);
    ``direction`` indexes :data:`SCROLL_DIRECTIONS`; ``end_x``/``end_y`` are where a
    ``drag`` releases; ``bid``/``end_bid`` name an element in place of a point (``""``:
    none; see :class:`BidText`); fields the type does not use are ignored; ``screen`` is
    the session's (width, height). :func:`to_action` turns a sample into an
    :class:`Action`.
    """
    return spaces.Dict(
        {
            "action_type": spaces.Discrete(len(ACTION_TYPES)),
            "x": spaces.Discrete(screen[0]),
            "y": spaces.Discrete(screen[1]),
            "text": spaces.Text(max_length=MAX_TEXT_LENGTH, min_length=1, charset=_TEXT_CHARSET),
            "keys": spaces.Text(max_length=MAX_KEYS_LENGTH, min_length=0, charset=_TEXT_CHARSET),
            "direction": spaces.Discrete(len(SCROLL_DIRECTIONS)),
            "amount": spaces.Discrete(MAX_SCROLL_AMOUNT, start=1),
            "end_x": spaces.Discrete(screen[0]),
            "end_y": spaces.Discrete(screen[1]),
            "bid": BidText(),
            "end_bid": BidText(),
        },
        seed=seed,
    )


def _space_index(sample: Mapping[str, Any], name: str, choices: tuple[Any, ...]) -> Any:
    """``choices[sample[name]]``, refusing what Python indexing would wrap (-1) or raise on."""
    if name not in sample:
        raise ValueError(f"{name}: missing from the action-space sample")
    index = int(sample[name])
    if not 0 <= index < len(choices):
        raise ValueError(
            f"{name}: index {index} is out of range; expected 0..{len(choices) - 1} "
            f"({', '.join(c.value for c in choices)}), as the action space's Discrete allows"
        )
    return choices[index]


def _from_space_sample(sample: Mapping[str, Any]) -> Action:
    """An :func:`action_space` sample -> an unvalidated :class:`Action`.

    Raises:
        ValueError: an index outside its ``Discrete`` or a needed field missing, so that
            the env counts the sample as an invalid action instead of crashing.
    """
    action_type = _space_index(sample, "action_type", ACTION_TYPES)
    fields: dict[str, Any] = {"type": action_type}
    # An element when the sample names one (a sample of an older space has no bid).
    bid = str(sample.get("bid") or "") if action_type in BID_ACTIONS else ""
    end_bid = str(sample.get("end_bid") or "") if action_type is ActionType.DRAG else ""
    try:
        if bid:
            fields["bid"] = bid
        elif action_type in POINTER_ACTIONS or action_type is ActionType.DRAG:
            fields |= {"x": int(sample["x"]), "y": int(sample["y"])}
        if end_bid:
            fields["end_bid"] = end_bid
        elif action_type is ActionType.DRAG:
            fields |= {"end_x": int(sample["end_x"]), "end_y": int(sample["end_y"])}
        if action_type in (
            ActionType.TYPE, ActionType.FILL, ActionType.SELECT_OPTION, ActionType.SEND_MSG_TO_USER
        ):  # fmt: skip
            fields["text"] = str(sample["text"])
        if action_type is ActionType.KEYS:
            fields["keys"] = str(sample["keys"])
        if action_type is ActionType.SCROLL:
            fields["direction"] = _space_index(sample, "direction", SCROLL_DIRECTIONS)
            fields["amount"] = int(sample["amount"])
    except KeyError as exc:
        raise ValueError(
            f"{exc.args[0]}: missing from the action-space sample ({action_type.value} needs it)"
        ) from None
    return Action(**fields)


def to_action(value: Action | Mapping[str, Any] | None) -> Action:
    """Accept an :class:`Action`, an action-space sample or a plain dict.

    A plain dict uses the field names of :class:`Action` (``type`` or ``action_type``).
    The result is not validated: call :meth:`Action.validate`.

    Raises:
        ValueError: not one of the accepted forms, or unknown field names.
    """
    if isinstance(value, Action):
        return value
    if value is None:
        raise ValueError("no action: the policy's output could not be parsed into one")
    if not isinstance(value, Mapping):
        raise ValueError(
            f"Expected an Action, an action-space sample or a dict, got {type(value).__name__}"
        )
    if isinstance(value.get("action_type"), int | np.integer):
        return _from_space_sample(value)
    fields = dict(value)
    if "action_type" in fields:
        fields["type"] = fields.pop("action_type")
    unknown = set(fields) - set(Action.__dataclass_fields__)
    if unknown:
        raise ValueError(
            f"Unknown action fields {sorted(unknown)}; allowed: {list(Action.__dataclass_fields__)}"
        )
    if "type" not in fields:
        raise ValueError("action_type: missing")
    return Action(**fields)

"""Actions: conversions and validation (no browser)."""

from __future__ import annotations

import re

import pytest
from key_names import PLAYWRIGHT_LAYOUT, PYAUTOGUI_KEYBOARD_KEYS

from uirl_gym.actions import (
    CDP_KEYS,
    Action,
    ActionType,
    ScrollDirection,
    action_space,
    key_sequence,
    parse_keys,
    to_action,
)
from uirl_gym.protocol import act_query, parse_act_query


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        ("ctrl+c", "Control+c"),
        ("Enter", "Enter"),
        ("shift+Tab", "Shift+Tab"),
        ("CTRL+SHIFT+a", "Control+Shift+a"),
        ("cmd+v", "Meta+v"),
        ("esc", "Escape"),
        ("ctrl++", "Control++"),
        ("pagedown", "PageDown"),
        ("ctrl+shift", "Control+Shift"),  # pyautogui.hotkey presses any keys in order
        ("\t", "Tab"),
        ("num5", "Numpad5"),
        ("browserback", "BrowserBack"),
    ],
)
def test_parse_keys(keys: str, expected: str) -> None:
    assert parse_keys(keys) == expected


def test_round_trips() -> None:
    action = Action(ActionType.SCROLL, 10, 20, direction="down", amount=5)
    assert parse_act_query(act_query(action)).action == action
    assert to_action(action.to_space_sample()) == action
    assert to_action({"type": "keys", "keys": "ctrl+v"}) == Action(ActionType.KEYS, keys="ctrl+v")
    assert to_action({"action_type": "left_click", "x": 1, "y": 2}) == Action("left_click", 1, 2)
    space = action_space(seed=0)
    for _ in range(50):
        sample = space.sample()
        converted = to_action(sample)
        assert converted.type.value == list(ActionType)[int(sample["action_type"])].value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"type": "jump"}, "action_type: unknown 'jump'"),
        ({"type": "left_click", "x": 1}, "x, y"),
        ({"type": "double_click", "x": 1.5, "y": 2}, "x: must be an integer"),
        ({"type": "mouse_move", "x": -1, "y": 2}, "x: -1 is off the 1280x800 screen"),
        ({"type": "type"}, "text: type needs a text"),
        ({"type": "scroll", "direction": "down", "amount": 51}, "amount: must be 1..50"),
        ({"type": "keys", "keys": "ctrl+banana"}, "keys: unknown key 'banana'"),
        ({"type": "keys", "keys": "é"}, "is not a key on the keyboard"),
        ({"type": "keys", "keys": "ctrl+你"}, "use action_type=type with text='你'"),
        ({"kind": "left_click"}, "Unknown action fields ['kind']"),
        # A model's JSON can carry half a UTF-16 pair ("\ud800"): no character, no UTF-8.
        ({"type": "type", "text": "a\ud800b"}, "text: U+D800 at index 1 is a lone surrogate"),
        ({"type": "keys", "keys": "\udc00"}, "keys: U+DC00 at index 0 is a lone surrogate"),
        # Strings and booleans are no integers, whatever Python or Pydantic would coerce.
        ({"type": "left_click", "x": "10", "y": 5}, "x: must be an integer, got '10'"),
        ({"type": "left_click", "x": True, "y": 5}, "x: must be an integer, got True"),
        (None, "no action"),
        ("left_click", "Expected an Action"),
    ],
)
def test_invalid_actions_say_what_is_wrong(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        to_action(value).validate()  # type: ignore[arg-type]


def test_every_pyautogui_key_name_maps_to_a_key_the_browser_knows() -> None:
    for name in PYAUTOGUI_KEYBOARD_KEYS:
        for spelling in {name, name.upper()} if len(name) > 1 else {name}:
            (key,) = key_sequence(spelling)
            single_char = len(key) == 1 and key.isascii() and key.isprintable()
            assert key in PLAYWRIGHT_LAYOUT or key in CDP_KEYS or single_char, (name, key)


def test_empty_text_is_a_valid_no_op_and_directions_ignore_case() -> None:
    assert Action(ActionType.TYPE, text="").validate().text == ""
    assert Action(ActionType.SCROLL, direction="DOWN").direction is ScrollDirection.DOWN
    assert parse_act_query({"action_type": "scroll", "direction": "Up"}).action.direction == "up"


def test_point_and_end_point_are_whole_or_refused() -> None:
    drag = Action(ActionType.DRAG, x=1, y=2, end_x=3, end_y=4)
    assert (drag.point, drag.end_point) == ((1, 2), (3, 4))
    with pytest.raises(ValueError, match="x, y: left_click needs both coordinates"):
        _ = Action(ActionType.LEFT_CLICK).point
    with pytest.raises(ValueError, match="end_x, end_y: drag needs both coordinates"):
        _ = Action(ActionType.DRAG, x=1, y=2).end_point

"""Actions: conversions and validation (no browser)."""

from __future__ import annotations

import re

import pytest

from uirl_gym.actions import Action, ActionType, action_space, parse_keys, to_action


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
    ],
)
def test_parse_keys(keys: str, expected: str) -> None:
    assert parse_keys(keys) == expected


def test_round_trips() -> None:
    action = Action(ActionType.SCROLL, 10, 20, direction="down", amount=5)
    assert Action.from_query(action.to_query()) == action
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
        ({"type": "type", "text": ""}, "text: type needs a non-empty text"),
        ({"type": "scroll", "direction": "down", "amount": 51}, "amount: must be 1..50"),
        ({"type": "keys", "keys": "ctrl+shift"}, "keys: unknown key 'shift'"),
        ({"kind": "left_click"}, "Unknown action fields ['kind']"),
        (None, "no action"),
        ("left_click", "Expected an Action"),
    ],
)
def test_invalid_actions_say_what_is_wrong(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        to_action(value).validate()  # type: ignore[arg-type]

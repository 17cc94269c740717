"""The generic formats (text, json, coordinates): parse, errors, render, the prompt."""

from __future__ import annotations

from dataclasses import replace

import pytest

from uirl_agents.formats import get_format
from uirl_gym.actions import Action, ActionType

GENERIC = ("text", "json", "coordinates")


def _same(name: str):
    """A format whose image is the screen (1:1), so points read as written."""
    fmt = get_format(name)
    return fmt, replace(fmt.geometry(), image_width=1280, image_height=800)


EXAMPLES = {
    "text": [
        ("Thought: open it\nAction: click(100, 200)", Action(ActionType.LEFT_CLICK, 100, 200)),
        ("Action: double_click(5, 6)", Action(ActionType.DOUBLE_CLICK, 5, 6)),
        ("Action: right_click(5, 6)", Action(ActionType.RIGHT_CLICK, 5, 6)),
        ("Action: move(5, 6)", Action(ActionType.MOUSE_MOVE, 5, 6)),
        ('Action: type("it\'s \\"x\\"\\n")', Action(ActionType.TYPE, text='it\'s "x"\n')),
        ('Action: key("ctrl+c")', Action(ActionType.KEYS, keys="ctrl+c")),
        ("Action: scroll(down, 3)", Action(ActionType.SCROLL, direction="down", amount=3)),
        (
            "Action: scroll(up, 2, 640, 400)",
            Action(ActionType.SCROLL, 640, 400, direction="up", amount=2),
        ),
        ("Action: drag(10, 20, 300, 400)", Action(ActionType.DRAG, 10, 20, end_x=300, end_y=400)),
        ("Action: wait()", Action(ActionType.SCREENSHOT)),
        ("Action: finish()", Action(ActionType.FINISH)),
        ("I am done.\nfinish()", Action(ActionType.FINISH)),  # no Action: line
    ],
    "json": [
        (
            'click it\n{"type": "click", "x": 100, "y": 200}',
            Action(ActionType.LEFT_CLICK, 100, 200),
        ),
        ('{"type": "type", "text": "hi\\n"}', Action(ActionType.TYPE, text="hi\n")),
        ('{"type": "keys", "keys": "Enter"}', Action(ActionType.KEYS, keys="Enter")),
        (
            'a {"note": 1} then {"type": "drag", "x": 1, "y": 2, "end_x": 30, "end_y": 40}',
            Action(ActionType.DRAG, 1, 2, end_x=30, end_y=40),
        ),
        ('{"type": "scroll", "direction": "down"}', Action(ActionType.SCROLL, direction="down")),
        ('{"type": "finish"}', Action(ActionType.FINISH)),
    ],
    "coordinates": [
        ("the button\n100 200 click", Action(ActionType.LEFT_CLICK, 100, 200)),
        ("5 6 double_click", Action(ActionType.DOUBLE_CLICK, 5, 6)),
        ("640 400 scroll down 3", Action(ActionType.SCROLL, 640, 400, direction="down", amount=3)),
        ("10 20 300 400 drag", Action(ActionType.DRAG, 10, 20, end_x=300, end_y=400)),
        ("type hello world", Action(ActionType.TYPE, text="hello world")),
        ("key ctrl+c", Action(ActionType.KEYS, keys="ctrl+c")),
        ("wait", Action(ActionType.SCREENSHOT)),
        ("finish", Action(ActionType.FINISH)),
    ],
}


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [(name, text, action) for name, cases in EXAMPLES.items() for text, action in cases],
    ids=lambda v: str(v)[:30],
)
def test_generic_formats_parse(name: str, text: str, expected: Action) -> None:
    fmt, geometry = _same(name)
    parsed = fmt.parse(text, geometry)
    assert parsed.error is None, parsed.error
    assert parsed.action == expected


MALFORMED = [
    ("text", "Action: click(100)", "click: expected 2 argument(s), got 1"),
    ("text", "Action: click(x=1, y=2)", "expected a call like click(100, 200)"),
    ("text", "Action: fly(1, 2)", "unknown action 'fly'"),
    ("text", "Action: scroll(sideways, 3)", "direction must be up, down, left or right"),
    ("text", "Action: type(42)", "type: expected a string"),
    ("text", "Action: click(1, 2", "expected a call"),
    ("json", "no json here", "no action"),
    ("json", '{"type": "click", "x": 1}', "coordinates must be numbers"),
    ("json", '{"type": "click", "x": 1, "y": 2, "z": 3}', "unknown field(s) ['z']"),
    ("json", '{"type": "teleport"}', "action_type: unknown 'teleport'"),
    ("json", '{"x": 1, "y": 2}', 'missing "type"'),
    ("coordinates", "100 click", "expected 'X Y click'"),
    ("coordinates", "100 200", "expected an action after the numbers"),
    ("coordinates", "1 2 scroll sideways", "direction must be up, down"),
    ("coordinates", "key", "key: expected 'key ctrl+c'"),
]


@pytest.mark.parametrize(("name", "text", "message"), MALFORMED, ids=lambda v: str(v)[:30])
def test_generic_formats_say_what_is_wrong(name: str, text: str, message: str) -> None:
    fmt, geometry = _same(name)
    parsed = fmt.parse(text, geometry)
    assert parsed.action is None
    assert message in parsed.error


ROUND_TRIP = [
    Action(ActionType.LEFT_CLICK, 640, 400),
    Action(ActionType.DOUBLE_CLICK, 0, 799),
    Action(ActionType.RIGHT_CLICK, 1279, 0),
    Action(ActionType.TRIPLE_CLICK, 3, 4),
    Action(ActionType.MOUSE_MOVE, 10, 10),
    Action(ActionType.TYPE, text='O\'Brien "q" back\\slash\n'),
    Action(ActionType.KEYS, keys="ctrl+shift+Tab"),
    Action(ActionType.SCROLL, 300, 500, direction="left", amount=7),
    Action(ActionType.DRAG, 100, 200, end_x=900, end_y=650),
    Action(ActionType.SCREENSHOT),
    Action(ActionType.FINISH),
]


@pytest.mark.parametrize("name", GENERIC)
def test_generic_formats_render_what_they_parse(name: str) -> None:
    """Demonstrations (the expert's actions rendered) read back as the same actions,
    through the model's own resized image (coordinates within a pixel of rounding)."""
    fmt = get_format(name)
    geometry = fmt.geometry()  # 1288x812: not the screen
    for action in ROUND_TRIP:
        parsed = fmt.parse(fmt.render(action, geometry, thought="next"), geometry)
        assert parsed.error is None, (action, parsed.error)
        assert parsed.thought == "next"
        got, want = parsed.action.to_dict(), action.to_dict()
        for key in ("x", "y", "end_x", "end_y"):
            if key in want:
                assert abs(got.pop(key) - want.pop(key)) <= 1, (action, parsed.action)
        if name == "coordinates" and action.type is ActionType.TYPE:
            pass  # the rest of the line, with \n written as \\n
        assert got == want


@pytest.mark.parametrize("name", GENERIC)
def test_generic_prompts_teach_the_syntax_and_the_image_size(name: str) -> None:
    fmt = get_format(name)
    geometry = fmt.geometry()
    messages = fmt.build_messages("Copy row 3.", [], num_images=1, geometry=geometry)
    prompt = messages[1]["content"][0]["text"]
    assert "Copy row 3." in prompt and f"{geometry.image_width}x{geometry.image_height}" in prompt
    assert "drag" in prompt

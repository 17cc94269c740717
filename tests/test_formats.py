"""Model formats: parsing realistic and malformed outputs, coordinates, prompts (no torch)."""

from __future__ import annotations

import itertools
import math
import random
import re
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from uirl_agents.formats import (
    FormatConfig,
    ScreenGeometry,
    get_format,
    smart_resize,
)
from uirl_agents.policies.context import EpisodeContexts
from uirl_gym.actions import Action, ActionType

UI_TARS = get_format("ui-tars")
QWEN = get_format("qwen2.5-vl")
FORMATS = [UI_TARS, QWEN]
# Identity geometry: model pixels == screen pixels, so expected values read directly.
SAME = ScreenGeometry(1280, 800, 1280, 800)


# ---- smart_resize ----------------------------------------------------------------------


def test_smart_resize_matches_transformers() -> None:
    pil = pytest.importorskip("transformers.models.qwen2_vl.image_processing_pil_qwen2_vl")
    sizes = [(800, 1280), (1080, 1920), (600, 800), (812, 375), (28, 28), (57, 3000), (2160, 3840)]
    limits = [(3136, 12845056), (3136, 1003520), (3136, 12544), (200704, 1003520)]
    for (h, w), (lo, hi) in itertools.product(sizes, limits):
        ours = smart_resize(h, w, min_pixels=lo, max_pixels=hi)
        assert ours == pil.smart_resize(h, w, factor=28, min_pixels=lo, max_pixels=hi), (
            h,
            w,
            lo,
            hi,
        )


@pytest.mark.parametrize("max_pixels", [12544, 1003520, 16384 * 28 * 28])
def test_smart_resize_is_a_fixed_point(max_pixels: int) -> None:
    # The policies pre-resize; the processor's own resize must then change nothing.
    for h, w in [(800, 1280), (1080, 1920), (600, 800), (812, 375)]:
        once = smart_resize(h, w, max_pixels=max_pixels)
        assert smart_resize(*once, max_pixels=max_pixels) == once
        assert once[0] % 28 == once[1] % 28 == 0
        assert once[0] * once[1] <= max_pixels


def test_smart_resize_errors() -> None:
    with pytest.raises(ValueError, match="aspect ratio must be at most 200"):
        smart_resize(10, 3000)
    with pytest.raises(ValueError, match="must be positive"):
        smart_resize(0, 10)
    with pytest.raises(ValueError, match=re.escape("min_pixels <= max_pixels")):
        FormatConfig(min_pixels=10_000, max_pixels=5_000)


# ---- UI-TARS ---------------------------------------------------------------------------

UI_TARS_CASES = [
    (
        "Thought: The First name field is empty. I click it.\nAction: click(start_box='(640,400)')",
        {"type": "left_click", "x": 640, "y": 400},
    ),
    (
        "Action: click(start_box='<|box_start|>(10,20)<|box_end|>')",
        {"type": "left_click", "x": 10, "y": 20},
    ),
    ("Action: click(start_box='[100,200,300,400]')", {"type": "left_click", "x": 200, "y": 300}),
    ("Action: click(start_box='(100,200,300,400)')", {"type": "left_click", "x": 200, "y": 300}),
    ("Action: click(point='<point>33 44</point>')", {"type": "left_click", "x": 33, "y": 44}),
    ("Action: left_double(start_box='(5,6)')", {"type": "double_click", "x": 5, "y": 6}),
    ('Action: right_single(start_box="(7,8)")', {"type": "right_click", "x": 7, "y": 8}),
    ("Action: hotkey(key='ctrl c')", {"type": "keys", "keys": "ctrl+c"}),
    ("Action: hotkey(key='enter')", {"type": "keys", "keys": "enter"}),
    ("Action: hotkey(key='ctrl+shift+tab')", {"type": "keys", "keys": "ctrl+shift+tab"}),
    ("Action: press(key='tab')", {"type": "keys", "keys": "tab"}),
    ("Action: type(content='Alice')", {"type": "type", "text": "Alice"}),
    (
        r"Action: type(content='alice@example.com\n')",
        {"type": "type", "text": "alice@example.com\n"},
    ),
    (
        r"Action: type(content='O\'Brien said \"hi\"')",
        {"type": "type", "text": 'O\'Brien said "hi"'},
    ),
    ("Action: type(content='it's fine')", {"type": "type", "text": "it's fine"}),
    ("Action: type(content='line one\nline two')", {"type": "type", "text": "line one\nline two"}),
    (r"Action: type(content='back\\slash')", {"type": "type", "text": "back\\slash"}),
    (
        "Action: scroll(start_box='(300,500)', direction='down')",
        {"type": "scroll", "x": 300, "y": 500, "direction": "down"},
    ),
    ("Action: scroll(direction='up')", {"type": "scroll", "direction": "up"}),
    ("Thought: Loading.\nAction: wait()", {"type": "screenshot"}),
    (
        "Action: finished(content='All rows submitted.')",
        {"type": "finish", "text": "All rows submitted."},
    ),
    ("Action: finished()", {"type": "finish"}),
    ("Action: call_user()", {"type": "finish"}),  # the model gives up and asks for help
    ("Action: type(content='')", {"type": "screenshot"}),  # a no-op, as upstream
    (
        "  Thought: a\n  Action:   click(start_box='(1,2)')  \n",
        {"type": "left_click", "x": 1, "y": 2},
    ),
    ("Action: click(start_box='(-5,9999)')", {"type": "left_click", "x": 0, "y": 799}),  # clamped
]


@pytest.mark.parametrize(("text", "expected"), UI_TARS_CASES, ids=lambda v: str(v)[:40])
def test_ui_tars_parses(text: str, expected: dict) -> None:
    action, error, *_ = UI_TARS.parse(text, SAME)
    assert error is None
    assert action.to_dict() == expected


def test_ui_tars_thought() -> None:
    text = "Thought: Row 3 is next.\nI need the Email field.\nAction: click(start_box='(1,2)')"
    assert UI_TARS.parse(text, SAME).thought == "Row 3 is next.\nI need the Email field."


def test_ui_tars_maps_resized_coordinates_to_the_screen() -> None:
    geometry = UI_TARS.geometry()  # 1280x800 seen as 1288x812
    assert (geometry.image_width, geometry.image_height) == (1288, 812)
    action = UI_TARS.parse("Action: click(start_box='(1288,812)')", geometry).action
    assert (action.x, action.y) == (1279, 799)
    action = UI_TARS.parse("Action: click(start_box='(644,406)')", geometry).action
    assert (action.x, action.y) == (640, 400)


UI_TARS_MALFORMED = [
    ("I will click the button.", "no action"),
    ("Thought: hmm\nAction:", "no action"),
    ("Action: drag(start_box='(1,1)')", "drag: missing end_box"),
    ("Action: drag(end_box='(5,5)')", "drag: missing start_box"),
    ("Action: click(1, 2)", "expected keyword arguments"),
    ("Action: click(start_box=(1,2))", "expected a quoted string"),
    ("Action: click(start_box='(1,2)", "unterminated string"),  # cut off mid-call
    ("Action: click start_box='(1,2)'", "expected a call"),
    ("Action: click(start_box='(1)')", "expected a point"),
    ("Action: click()", "missing start_box"),
    ("Action: open_app(app_name='x')", "unknown action 'open_app'"),
    ("Action: hotkey(key='ctrl banana')", "unknown key 'banana'"),
    ("Action: scroll(start_box='(1,2)', direction='sideways')", "direction must be up, down"),
    ("Action: hotkey()", "missing key"),
]


@pytest.mark.parametrize(("text", "message"), UI_TARS_MALFORMED, ids=lambda v: str(v)[:40])
def test_ui_tars_malformed(text: str, message: str) -> None:
    action, error, *_ = UI_TARS.parse(text, SAME)
    assert action is None
    assert error.startswith("ParseError: ")
    assert message in error


def test_ui_tars_notes_what_the_text_does_not_show() -> None:
    parsed = UI_TARS.parse("Thought: I am stuck.\nAction: call_user()", SAME)
    assert parsed.action.type is ActionType.FINISH and parsed.thought == "I am stuck."
    assert parsed.notes == ("call_user: the model asked for the user's help; the episode ends",)
    assert UI_TARS.parse("Action: type(content='')", SAME).notes == (
        "type with empty content: a no-op, nothing is typed",
    )
    assert UI_TARS.parse("Action: finished(content='done')", SAME).notes == ()


@pytest.mark.parametrize(
    "separator", ["\n\n", "\n", "  \n \n  "], ids=["blank", "newline", "spaces"]
)
def test_ui_tars_several_actions_execute_the_first(separator: str) -> None:
    """The official parser splits on ')' + blank line and runs every call; one step, one action."""
    text = (
        "Thought: select all, then type.\nAction: hotkey(key='ctrl a')"
        + separator
        + r"type(content='Ada\n')"
        + separator
        + "click(start_box='(3,4)')"
    )
    parsed = UI_TARS.parse(text, SAME)
    assert parsed.error is None
    assert parsed.action.to_dict() == {"type": "keys", "keys": "ctrl+a"}
    assert parsed.notes == (
        r"3 actions in one reply: executed the first, dropped type(content='Ada\n'), "
        "click(start_box='(3,4)') (the env takes one action per step)",
    )
    # A blank line inside typed content is text, not a separator.
    parsed = UI_TARS.parse("Action: type(content='a\n\nb')", SAME)
    assert parsed.action.text == "a\n\nb" and parsed.notes == ()
    # The first call decides: a malformed first call is an error, as upstream.
    assert (
        "expected a point" in UI_TARS.parse("Action: click(start_box='(1)')\n\nwait()", SAME).error
    )


# ---- Qwen2.5-VL ------------------------------------------------------------------------


def _call(args: dict) -> str:
    import json

    return f"<tool_call>\n{json.dumps({'name': 'computer_use', 'arguments': args})}\n</tool_call>"


QWEN_CASES = [
    (
        "The Email field is empty; I click it.\n"
        + _call({"action": "left_click", "coordinate": [652, 301]}),
        {"type": "left_click", "x": 652, "y": 301},
    ),
    (
        _call({"action": "right_click", "coordinate": [1, 2]}),
        {"type": "right_click", "x": 1, "y": 2},
    ),
    (
        _call({"action": "double_click", "coordinate": [3, 4]}),
        {"type": "double_click", "x": 3, "y": 4},
    ),
    (
        _call({"action": "triple_click", "coordinate": [3, 4]}),
        {"type": "triple_click", "x": 3, "y": 4},
    ),
    (
        _call({"action": "mouse_move", "coordinate": [5.4, 6.6]}),
        {"type": "mouse_move", "x": 5, "y": 7},
    ),
    (
        _call({"action": "left_click", "coordinate": [0, 0, 10, 20]}),
        {"type": "left_click", "x": 5, "y": 10},
    ),
    (_call({"action": "key", "keys": ["ctrl", "v"]}), {"type": "keys", "keys": "ctrl+v"}),
    (_call({"action": "key", "keys": ["Return"]}), {"type": "keys", "keys": "Return"}),
    (_call({"action": "type", "text": "Bob\n"}), {"type": "type", "text": "Bob\n"}),
    (
        _call({"action": "scroll", "pixels": -500}),
        {"type": "scroll", "direction": "down", "amount": 5},
    ),
    (
        _call({"action": "scroll", "pixels": 120, "coordinate": [10, 20]}),
        {"type": "scroll", "x": 10, "y": 20, "direction": "up", "amount": 1},
    ),
    (
        _call({"action": "scroll", "direction": "left"}),
        {"type": "scroll", "direction": "left", "amount": 3},
    ),
    (
        _call({"action": "scroll", "pixels": -99999}),
        {"type": "scroll", "direction": "down", "amount": 50},
    ),
    (_call({"action": "wait", "time": 2}), {"type": "screenshot"}),
    (_call({"action": "terminate", "status": "success"}), {"type": "finish", "text": "success"}),
    # A missing closing tag (generation stopped at <|im_end|>) is tolerated.
    (
        '<tool_call>{"name": "computer_use", "arguments": {"action": "wait"}}',
        {"type": "screenshot"},
    ),
    # Double-encoded arguments, as some servers send them.
    (
        '<tool_call>{"name": "computer_use", "arguments": "{\\"action\\": \\"wait\\"}"}</tool_call>',
        {"type": "screenshot"},
    ),
]


@pytest.mark.parametrize(("text", "expected"), QWEN_CASES, ids=lambda v: str(v)[:40])
def test_qwen_parses(text: str, expected: dict) -> None:
    action, error, *_ = QWEN.parse(text, SAME)
    assert error is None
    assert action.to_dict() == expected


def test_qwen_thought_and_prompt() -> None:
    text = "I click it.\n" + _call({"action": "wait"})
    assert QWEN.parse(text, SAME).thought == "I click it."
    geometry = QWEN.geometry()
    # The model is told the size of the image it sees, as in Qwen's computer-use cookbook.
    assert "The screen is 1288x812 pixels" in QWEN.system_prompt(geometry)
    assert '"name": "computer_use"' in QWEN.system_prompt(geometry)


QWEN_MALFORMED = [
    ("I would click the button.", "no tool call"),
    ("<tool_call>{not json}</tool_call>", "not valid JSON"),
    (
        '<tool_call>{"name": "browser", "arguments": {}}</tool_call>',
        "expected the function 'computer_use'",
    ),
    (
        _call({"action": "wait"}) + _call({"action": "wait"}),
        "expected one tool call per reply, got 2",
    ),
    (_call({"action": "left_click"}), "the pointer's position is not known"),
    (_call({"action": "mouse_move"}), "coordinate must be [x, y]"),
    (_call({"action": "left_click", "coordinate": ["a", "b"]}), "coordinate must be [x, y]"),
    (_call({"action": "left_click_drag", "coordinate": [1, 2]}), "pointer's position is not known"),
    (_call({"action": "left_click_drag"}), "coordinate must be [x, y]"),
    (_call({"action": "middle_click", "coordinate": [1, 2]}), "not supported"),
    (_call({"action": "fly"}), "unknown action 'fly'"),
    (_call({"action": "key", "keys": []}), "keys must be a list"),
    (_call({"action": "type"}), "text must be a string"),
    (_call({"action": "scroll"}), "non-zero pixels"),
    (_call({"action": "scroll", "pixels": "lots"}), "pixels must be a number"),
    (_call({"action": "key", "keys": ["hyper", "x"]}), "unknown modifier 'hyper'"),
    ('<tool_call>{"name": "computer_use", "arguments": [1]}</tool_call>', "expected a JSON object"),
]


def test_drag_in_both_formats() -> None:
    """UI-TARS's drag(start_box, end_box); Qwen's left_click_drag from start_coordinate,
    or from the pointer (Qwen's cookbook gives only where it ends)."""
    same = UI_TARS.geometry(1280, 800)
    geometry = replace(same, image_width=1280, image_height=800)
    action = UI_TARS.parse(
        "Action: drag(start_box='(10,20)', end_box='(300,400)')", geometry
    ).action
    assert action == Action(ActionType.DRAG, x=10, y=20, end_x=300, end_y=400)
    qwen = replace(QWEN.geometry(), image_width=1280, image_height=800, pointer=(5, 6))
    call = {"action": "left_click_drag", "coordinate": [300, 400]}
    assert QWEN.parse(_call(call), qwen).action == Action(
        ActionType.DRAG, x=5, y=6, end_x=300, end_y=400
    )
    call["start_coordinate"] = [10, 20]
    assert QWEN.parse(_call(call), qwen).action == Action(
        ActionType.DRAG, x=10, y=20, end_x=300, end_y=400
    )
    assert "drag(start_box='(x1,y1)', end_box='(x3,y3)')" in UI_TARS.task_prompt("x", geometry)
    assert "left_click_drag" in QWEN.system_prompt(qwen)


def test_qwen_click_without_coordinate_clicks_at_the_pointer() -> None:
    """The cookbook schema makes coordinate optional for clicks: they click where the pointer is."""
    geometry = replace(QWEN.geometry(), pointer=(640, 400))  # 1288x812 image, screen pointer
    for name, action_type in [
        ("left_click", ActionType.LEFT_CLICK),
        ("right_click", ActionType.RIGHT_CLICK),
        ("double_click", ActionType.DOUBLE_CLICK),
        ("triple_click", ActionType.TRIPLE_CLICK),
    ]:
        parsed = QWEN.parse(_call({"action": name}), geometry)
        # Screen pixels as they are: the pointer is not mapped through the image again.
        assert parsed.action == Action(action_type, x=640, y=400), parsed
        assert parsed.notes == (
            f"{name} without coordinate: clicked at the pointer, screen (640, 400)",
        )
    # An explicit coordinate still wins.
    parsed = QWEN.parse(_call({"action": "left_click", "coordinate": [644, 406]}), geometry)
    assert (parsed.action.x, parsed.action.y) == (640, 400) and parsed.notes == ()
    assert "give coordinate" in QWEN.parse(_call({"action": "left_click"}), QWEN.geometry()).error


def test_episode_context_tracks_the_pointer() -> None:
    contexts = EpisodeContexts(QWEN, max_images=2)
    screen = np.zeros((800, 1280, 3), dtype=np.uint8)
    obs = {"screenshot": screen, "instruction": "Copy row 3."}
    prompt = contexts.observe(0, obs)
    assert prompt.geometry.pointer is None and contexts.pointer(0) is None
    move = _call({"action": "mouse_move", "coordinate": [644, 406]})  # image pixels
    assert QWEN.parse(move, prompt.geometry).action == Action(ActionType.MOUSE_MOVE, 640, 400)
    contexts.record(0, move)
    assert contexts.pointer(0) == (640, 400)  # screen pixels
    prompt = contexts.observe(0, obs)
    click = _call({"action": "left_click"})
    assert QWEN.parse(click, prompt.geometry).action == Action(ActionType.LEFT_CLICK, 640, 400)
    contexts.record(0, click)
    for text in ["no tool call", _call({"action": "type", "text": "Ada"})]:  # no point: stays
        contexts.observe(0, obs)
        contexts.record(0, text)
        assert contexts.pointer(0) == (640, 400)
    contexts.observe(0, obs)
    contexts.record(0, _call({"action": "scroll", "pixels": -300, "coordinate": [14, 28]}))
    assert contexts.pointer(0) == (14, 28)
    assert contexts.pointer(1) is None  # per sub-env
    contexts.begin_episode(0)  # a new episode: a fresh page, position unknown
    assert contexts.observe(0, obs).geometry.pointer is None


@pytest.mark.parametrize(("text", "message"), QWEN_MALFORMED, ids=lambda v: str(v)[:40])
def test_qwen_malformed(text: str, message: str) -> None:
    action, error, *_ = QWEN.parse(text, SAME)
    assert action is None
    assert error.startswith("ParseError: ")
    assert message in error


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_parse_never_raises(fmt) -> None:
    rng = random.Random(0)
    valid = fmt.render(Action(ActionType.TYPE, text="a'b\"c\\d\n"), SAME, thought="t")
    alphabet = "()[]{}<>'\",:=\\ \nabcxyz0123456789_|-" + "".join(set(valid))
    texts = [valid[:i] for i in range(len(valid) + 1)]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80))) for _ in range(500)]
    texts += ["Action: " + t for t in texts[-100:]] + ["<tool_call>" + t for t in texts[-100:]]
    for text in texts:
        action, error, thought, _ = fmt.parse(text, SAME)
        assert (action is None) != (error is None)
        assert isinstance(thought, str)


# ---- coordinates and round trips ------------------------------------------------------

SCREENS = [(1280, 800), (1920, 1080), (800, 600), (375, 812)]
CONFIGS = [
    FormatConfig(),
    FormatConfig(max_pixels=1280 * 28 * 28),
    FormatConfig(max_pixels=28 * 28 * 16),
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"max{c.max_pixels}")
@pytest.mark.parametrize("screen", SCREENS, ids=lambda s: f"{s[0]}x{s[1]}")
def test_coordinate_round_trip(screen: tuple[int, int], config: FormatConfig) -> None:
    geometry = get_format("ui-tars", config).geometry(*screen)
    # A round trip is exact to one model pixel (half of one inside, a whole one at the
    # right/bottom edge, where the point is clamped into the image).
    tol_x = math.ceil(geometry.screen_width / geometry.image_width)
    tol_y = math.ceil(geometry.screen_height / geometry.image_height)
    w, h = screen
    for x, y in [(0, 0), (w - 1, h - 1), (w // 2, h // 3), (17, h - 5), (w - 3, 11)]:
        sx, sy = geometry.to_screen(*geometry.to_image(x, y))
        assert abs(sx - x) <= tol_x and abs(sy - y) <= tol_y, (x, y, sx, sy, geometry)
    # Model pixels -> screen -> model is exact when the model image is not larger.
    if geometry.image_width <= w and geometry.image_height <= h:
        for ix, iy in [(0, 0), (geometry.image_width - 1, geometry.image_height - 1), (13, 7)]:
            assert geometry.to_image(*geometry.to_screen(ix, iy)) == (ix, iy)


ROUND_TRIP_ACTIONS = [
    Action(ActionType.LEFT_CLICK, x=640, y=400),
    Action(ActionType.DOUBLE_CLICK, x=0, y=799),
    Action(ActionType.RIGHT_CLICK, x=1279, y=0),
    Action(ActionType.TRIPLE_CLICK, x=333, y=222),
    Action(ActionType.MOUSE_MOVE, x=10, y=10),
    Action(ActionType.TYPE, text='O\'Brien "quoted" back\\slash\n'),
    Action(ActionType.KEYS, keys="ctrl+c"),
    Action(ActionType.KEYS, keys="Enter"),
    Action(ActionType.SCROLL, x=300, y=500, direction="down"),
    Action(ActionType.SCROLL, direction="up"),
    Action(ActionType.SCREENSHOT),
    Action(ActionType.FINISH, text="done"),
    Action(ActionType.DRAG, x=100, y=200, end_x=900, end_y=650),
]


@pytest.mark.parametrize("config", CONFIGS[::2], ids=lambda c: f"max{c.max_pixels}")
@pytest.mark.parametrize("name", ["ui-tars", "qwen2.5-vl"])
def test_render_parse_round_trip(name: str, config: FormatConfig) -> None:
    fmt = get_format(name, config)
    geometry = fmt.geometry()
    tol = math.ceil(
        max(
            geometry.screen_width / geometry.image_width,
            geometry.screen_height / geometry.image_height,
        )
    )
    for action in ROUND_TRIP_ACTIONS:
        parsed, error, thought, _ = fmt.parse(
            fmt.render(action, geometry, thought="next"), geometry
        )
        assert error is None, (action, error)
        assert thought == "next"
        want, got = action.to_dict(), parsed.to_dict()
        for name_x, name_y in (("x", "y"), ("end_x", "end_y")):
            if name_x in want:
                assert abs(got.pop(name_x) - want.pop(name_x)) <= tol
                assert abs(got.pop(name_y) - want.pop(name_y)) <= tol
        if name == "qwen2.5-vl" and action.type is ActionType.SCROLL:
            want["amount"] = action.scroll_amount  # Qwen states the amount in pixels
        if name == "ui-tars" and action.type is ActionType.KEYS:
            want["keys"] = want["keys"].lower()  # UI-TARS writes key names in lowercase
        assert got == want


# ---- prompts and images ----------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_build_messages_layout(fmt) -> None:
    geometry = fmt.geometry()
    history = ["out 0", "out 1", "out 2"]
    messages = fmt.build_messages("Copy row 3.", history, num_images=2, geometry=geometry)
    roles = [m["role"] for m in messages]
    assert roles == ["system", "user", "assistant", "assistant", "user", "assistant", "user"]
    assert [m["content"] for m in messages if m["role"] == "assistant"] == history
    assert "Copy row 3." in messages[1]["content"][0]["text"]
    placeholders = [
        p for m in messages[1:] if m["role"] == "user" for p in m["content"] if p["type"] == "image"
    ]
    assert len(placeholders) == 2
    assert messages[-1]["content"] == [{"type": "image"}]
    # First step: the screenshot joins the task message.
    first = fmt.build_messages("Copy row 3.", [], num_images=1, geometry=geometry)
    assert [m["role"] for m in first] == ["system", "user"]
    assert [p["type"] for p in first[1]["content"]] == ["text", "image"]
    with pytest.raises(ValueError, match=re.escape("num_images: expected 1..4")):
        fmt.build_messages("x", history, num_images=5, geometry=geometry)


def test_prepare_image_resizes_to_the_geometry() -> None:
    fmt = get_format("qwen2.5-vl", FormatConfig(max_pixels=28 * 28 * 16))
    screenshot = np.random.default_rng(0).integers(0, 256, (800, 1280, 3), dtype=np.uint8)
    image = fmt.prepare_image(screenshot)
    assert image.shape == (84, 140, 3) and image.dtype == np.uint8
    assert fmt.prepare_image(image) is image  # already the model's size
    assert UI_TARS.prepare_image(screenshot).shape == (812, 1288, 3)


def test_get_format_unknown_suggests() -> None:
    with pytest.raises(ValueError, match="Did you mean 'ui-tars'"):
        get_format("ui_tars")


def test_formats_and_remote_policies_do_not_import_torch() -> None:
    code = (
        "import sys, uirl_agents.formats, uirl_agents.policies.openai_compat, "
        "uirl_agents.policies.random; assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

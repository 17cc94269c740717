"""BrowserGym's action strings read as uirl actions (no browser; parity checks use the
real browsergym-core, installed by scripts/install.sh)."""

from __future__ import annotations

import ast
import inspect
import re
from typing import Any

import pytest

from uirl_gym.action_strings import (
    ACTION_SIGNATURES,
    ACTION_SUBSETS,
    BROWSERGYM_ACTIONS,
    REFUSED_ACTIONS,
    describe_actions,
    parse_action,
    parse_calls,
    playwright_keys,
    subset_actions,
)
from uirl_gym.actions import Action, ActionType


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("click('15')", Action(ActionType.LEFT_CLICK, bid="15")),
        (
            "click('a3', button='right', modifiers=['Shift', 'ControlOrMeta'])",
            Action(ActionType.RIGHT_CLICK, bid="a3", keys="Shift+Control"),
        ),
        ("dblclick('12')", Action(ActionType.DOUBLE_CLICK, bid="12")),
        ("hover('b8')", Action(ActionType.MOUSE_MOVE, bid="b8")),
        ("fill('5', \"multi-line\\nexample\")", Action(ActionType.FILL, bid="5", text="multi-line\nexample")),
        ("fill('5', 'x', True)", Action(ActionType.FILL, bid="5", text="x")),
        ("clear('996')", Action(ActionType.FILL, bid="996", text="")),
        ("select_option('a48', 'blue')", Action(ActionType.SELECT_OPTION, bid="a48", text="blue")),
        ("select_option('a48', ['blue'])", Action(ActionType.SELECT_OPTION, bid="a48", text="blue")),
        ("press('a26', 'ControlOrMeta+a')", Action(ActionType.KEYS, bid="a26", keys="Control+a")),
        ("focus('b455')", Action(ActionType.FOCUS, bid="b455")),
        ("drag_and_drop('56', '498')", Action(ActionType.DRAG, bid="56", end_bid="498")),
        ("scroll(0, 200)", Action(ActionType.SCROLL, direction="down", amount=2)),
        ("scroll(0, -149.9)", Action(ActionType.SCROLL, direction="up", amount=1)),
        ("scroll(150, 0)", Action(ActionType.SCROLL, direction="right", amount=2)),
        ("scroll(-20, 0)", Action(ActionType.SCROLL, direction="left", amount=1)),
        ("scroll(0, 0)", Action(ActionType.SCREENSHOT)),
        ("scroll_at(50.9, 100, 0, -200)", Action(ActionType.SCROLL, 50, 100, direction="up", amount=2)),
        ("mouse_move(65.2, 158.5)", Action(ActionType.MOUSE_MOVE, 65, 158)),
        ("mouse_click(887.2, 68)", Action(ActionType.LEFT_CLICK, 887, 68)),
        ("mouse_click(56, 712.56, 'right')", Action(ActionType.RIGHT_CLICK, 56, 712)),
        ("mouse_dblclick(5, 236)", Action(ActionType.DOUBLE_CLICK, 5, 236)),
        (
            "mouse_drag_and_drop(10.7, 325, 235.6, 24.54)",
            Action(ActionType.DRAG, 10, 325, end_x=235, end_y=24),
        ),
        ("keyboard_press('Enter')", Action(ActionType.KEYS, keys="Enter")),
        ("keyboard_press('Shift++')", Action(ActionType.KEYS, keys="Shift++")),
        ("keyboard_type('Hello world!')", Action(ActionType.TYPE, text="Hello world!")),
        ("keyboard_insert_text('Hé')", Action(ActionType.TYPE, text="Hé")),
        ("send_msg_to_user('42')", Action(ActionType.SEND_MSG_TO_USER, text="42")),
        ("report_infeasible('no field')", Action(ActionType.FINISH)),
        ("noop()", Action(ActionType.SCREENSHOT)),
        ("noop(wait_ms=500)", Action(ActionType.SCREENSHOT)),
        # BrowserGym's grammar: spaces, trailing commas, comments, triple quotes.
        ("  click ( '15' , ) # the OK button\n", Action(ActionType.LEFT_CLICK, bid="15")),
        ("fill('5', '''a\nb''')", Action(ActionType.FILL, bid="5", text="a\nb")),
        ("fill('5', 'a)b # c')", Action(ActionType.FILL, bid="5", text="a)b # c")),
    ],
)  # fmt: skip
def test_an_action_string_becomes_a_uirl_action(text: str, expected: Action) -> None:
    assert parse_action(text) == expected


@pytest.mark.parametrize(
    ("key_comb", "keys"),
    [
        ("Control+a", "Control+a"),
        ("ControlOrMeta+c", "Control+c"),
        ("Meta+Shift+t", "Meta+Shift+t"),
        ("Enter", "Enter"),
        ("KeyA", "a"),
        ("Shift+Digit1", "Shift+1"),
        ("Control+Minus", "Control+-"),
        ("+", "+"),
        ("Control++", "Control++"),
    ],
)
def test_playwright_keys_become_uirl_keys(key_comb: str, keys: str) -> None:
    assert playwright_keys(key_comb) == keys
    # ... which uirl presses as Playwright would.
    parse_action(f"keyboard_press({key_comb!r})")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty action: expected one call such as click('12')"),
        ("  # nothing\n", "empty action"),
        ("click('1') fill('2', 'x')", "2 actions (click, fill): give exactly one action"),
        ("click('1')\nclick('2')", "2 actions (click, click)"),
        ("Click('1')", "Click: unknown action; allowed: noop, send_msg_to_user"),
        ("Click('1')", "(names are case-sensitive)"),
        ("rm_rf('/')", "rm_rf: unknown action; allowed:"),
        ("click(__import__('os'))", "click: \"__import__('os')\" is not a literal; arguments are"),
        ("click(x)", "click: 'x' is not a literal"),
        ("click(*bids)", "click: *args and **kwargs are not allowed"),
        ("click(f'{x}')", "is not a literal"),
        ("click(b'1')", "is not a literal"),
        ("click('1' '2')", "is not a literal"),
        ("click(1_0)", "is not a literal"),
        ("click('1'", "click(...: its parenthesis is never closed"),
        ("click(button='left', '3')", "is not a call: positional argument follows keyword"),
        ("x = click('1')", "expected a call such as click('12') at character 0, found"),
        ("click('1'); fill('2', 'x')", "at character 10, found \"; fill('2', 'x')\""),
        ("```click('1')```", "expected a call such as click('12') at character 0"),
        ("click(12)", "click: bid must be a string, got 12; expected click(bid: str"),
        ("click()", "click: missing a required argument: 'bid'"),
        ("click('1', '2', '3', '4')", "click: too many positional arguments"),
        ("click('1', bogus=2)", "click: got an unexpected keyword argument 'bogus'"),
        ("click('1', 'middle')", "button must be one of 'left', 'right' (uirl has no middle button)"),
        ("dblclick('1', button='right')", "button must be one of 'left' (uirl double clicks"),
        ("click('1', modifiers=['Hyper'])", "modifiers must be a list of 'Alt', 'Control'"),
        ("click('a-3')", "click: bid: an element id is 1-32 letters and digits"),
        ("fill('1', 2)", "fill: value must be a string, got 2"),
        ("mouse_click(True, 3)", "mouse_click: x must be a number, got True"),
        ("mouse_click(-1, 3)", "mouse_click: x: -1 is off the 3840x2160 screen"),
        ("scroll(-50.2, -100.5)", "scroll: a uirl scroll moves along one axis"),
        ("scroll(0, 5100)", "scroll: at most 5000 px per scroll (50 notches of 100 px)"),
        ("select_option('1', ['a', 'b'])", "select_option: uirl chooses one option per action"),
        ("keyboard_press('Control+Foo')", "keyboard_press: keys: unknown key 'Foo'"),
        ("upload_file('1', 'a.pdf')", "upload_file: uirl's sessions have no files to upload"),
        ("mouse_down(1, 2)", "mouse_down: uirl holds no button or key down across actions: use"),
        ("keyboard_up('Shift')", "keyboard_up: uirl holds no button or key down across actions"),
        ("goto('http://example.com')", "goto: a uirl task is one page"),
        ("tab_focus(2)", "tab_focus: a uirl task is one page: tabs are not actions"),
        (["click('1')"], "an action is a string such as \"click('12')\", got"),
        ("noop()" + " " * 20_000, "at most 20000 characters"),
    ],
)  # fmt: skip
def test_a_refused_string_says_what_was_wrong(text: Any, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_action(text)


def test_the_screen_bounds_the_coordinates() -> None:
    assert parse_action("mouse_click(159.9, 0)", screen=(160, 210)) == Action(
        ActionType.LEFT_CLICK, 159, 0
    )
    with pytest.raises(ValueError, match=re.escape("x: 160 is off the 160x210 screen")):
        parse_action("mouse_click(160, 0)", screen=(160, 210))


def test_the_action_set_limits_the_names() -> None:
    allowed = subset_actions(["chat", "bid"])
    assert allowed[0] == "noop" and "click" in allowed and "mouse_click" not in allowed
    assert "upload_file" not in allowed  # refused actions are never offered
    assert parse_action("noop()", allowed=["click"]) == Action(ActionType.SCREENSHOT)
    with pytest.raises(ValueError, match=r"mouse_click: not in this action set; allowed: noop, "):
        parse_action("mouse_click(1, 2)", allowed=allowed)
    with pytest.raises(ValueError, match=re.escape("unknown action subsets ['mouse']")):
        subset_actions(["mouse"])


def test_loose_mode_finds_the_calls_in_free_text() -> None:
    """BrowserGym's strict=False: calls anywhere, prose and fences skipped; a # comment
    hides the rest of its line; several calls with multiaction."""
    text = "I will click.\n```\nclick('12')\n``` # not: hover('9')\npage.fill('3', 'x')"
    calls = parse_calls(text, strict=False, multiaction=True)
    assert [(c.name, c.args, c.kwargs) for c in calls] == [
        ("click", ("12",), {}),
        ("fill", ("3", "x"), {}),
    ]
    assert [c.name for c in parse_calls("click(fill('1', 'x'))", strict=False)] == ["fill"]
    with pytest.raises(ValueError, match="empty action"):
        parse_calls("Step #1: click('3')", strict=False)


def test_call_arguments_bind_by_name_with_defaults() -> None:
    (call,) = parse_calls("noop()")
    assert call.arguments() == {"wait_ms": 1000}
    (call,) = parse_calls("report_infeasible(reason='no form')")
    assert call.arguments() == {"reason": "no form"} and str(call) == (
        "report_infeasible(reason='no form')"
    )


def test_the_description_offers_what_parses() -> None:
    text = describe_actions(["chat", "infeas", "bid", "coord"])
    assert text.startswith("21 different types of actions are available.\n")
    assert "upload_file" not in text and "mouse_down" not in text
    assert text.rstrip().endswith(
        "Only a single action can be provided at once, e.g.:\nclick('a51')"
    )
    for line in text.splitlines():
        if line.startswith("        "):  # an example
            parse_action(line.strip())
    short = describe_actions(["chat"], with_examples=False, multiaction=True)
    assert "Examples" not in short and "send_msg_to_user(text: str)" in short
    assert "one per line" in short


# -- parity with browsergym-core ---------------------------------------------------------------

# The strings of docs/design/browsergym-contract.md, section 5, and the grammar's corners.
PARITY_STRINGS = [
    "click('12')",
    "click('a51')\n",
    "click('b22', button=\"right\")",
    'click(\'48\', button="middle", modifiers=["Shift"])',
    "click(button='left','3')",
    "click('3',)",
    "click ('3', button='left',)",
    "fill('45', \"multi-line\\nexample\")",
    'fill(\'a12\', "example with \\"quotes\\"")',
    "fill('b534', \"Montre\", True) # This will trigger the autocomplete menu if available",
    "fill('1', '''triple\nquoted''')",
    'select_option(\'c48\', ["red", "green", "blue"])',
    "scroll(-50.2, -100.5)",
    "noop(1e2)",
    "noop(1_000)",
    "noop(-5)",
    "mouse_click(+5, 3.25)",
    "send_msg_to_user({'a': [1, (2, 'b')], 'c': None})",
    "report_infeasible(True)",
    "# a comment\nclick('1')",
    "click('1')\nfill('2', 'x')",
    "click('1') fill('2', 'x')",
    "click('1')fill('2', 'x')",
    "```click('12')```",
    "page.click('12')",
    "x = click('1')",
    "click('1'); fill('2','x')",
    "Click('1')",
    "click(fill('1', 'x'))",
    "click(x)",
    "click(r'x')",
    "Step #1: click('3')",
    "",
]


def _browsergym_calls(parsed: list[Any]) -> list[tuple[str, list[Any], dict[str, Any]]]:
    from browsergym.core.action.parsers import NamedArgument

    return [
        (
            name,
            [a for a in args if not isinstance(a, NamedArgument)],
            {a.name: a.value for a in args if isinstance(a, NamedArgument)},
        )
        for name, args in parsed
    ]


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "loose"])
def test_calls_read_as_browsergyms_parser_reads_them(strict: bool) -> None:
    pytest.importorskip("browsergym.core")
    import pyparsing
    from browsergym.core.action.parsers import highlevel_action_parser as parser

    for text in PARITY_STRINGS:
        try:
            if strict:
                theirs = _browsergym_calls(parser.parse_string(text, parse_all=True).as_list())
            else:
                theirs = _browsergym_calls(sum(parser.search_string(text).as_list(), []))
        except pyparsing.ParseException:
            theirs = []
        try:
            ours = parse_calls(text, strict=strict, multiaction=True, allowed=None)
        except ValueError as exc:
            # Ours refuses unknown names too (BrowserGym: NameError at to_python_code).
            assert not theirs or "unknown action" in str(exc), (text, theirs, exc)
            continue
        assert [(c.name, list(c.args), c.kwargs) for c in ours] == theirs, text


def test_the_signatures_are_browsergyms() -> None:
    """Every action uirl takes has BrowserGym's parameters (names, order, defaults), and
    every name BrowserGym knows is taken or refused with a reason."""
    pytest.importorskip("browsergym.core")
    from browsergym.core.action import functions
    from browsergym.core.action.highlevel import ACTION_SUBSETS as BROWSERGYM_SUBSETS

    for subset, names in ACTION_SUBSETS.items():
        assert names == tuple(f.__name__ for f in BROWSERGYM_SUBSETS[subset]), subset
    assert BROWSERGYM_ACTIONS == {"noop"} | {n for names in ACTION_SUBSETS.values() for n in names}
    for name, signature in ACTION_SIGNATURES.items():
        theirs = inspect.signature(getattr(functions, name)).parameters.values()
        (ours,) = ast.parse(f"def {signature}: pass").body
        assert isinstance(ours, ast.FunctionDef) and ours.name == name
        defaults = [None] * (len(ours.args.args) - len(ours.args.defaults)) + [
            ast.literal_eval(d) for d in ours.args.defaults
        ]
        assert [(a.arg, d) for a, d in zip(ours.args.args, defaults, strict=True)] == [
            (p.name, None if p.default is inspect.Parameter.empty else p.default) for p in theirs
        ], name
    assert set(REFUSED_ACTIONS).isdisjoint(ACTION_SIGNATURES)


# BrowserGym's examples of actions uirl takes that it refuses all the same: scrolls along
# both axes, several options, the middle button, right double clicks.
REFUSED_EXAMPLES = {
    "scroll(-50.2, -100.5)": "scroll: a uirl scroll moves along one axis",
    "scroll_at(50, 100, -50, -100)": "scroll_at: a uirl scroll moves along one axis",
    "select_option('c48', ['red', 'green', 'blue'])": "uirl chooses one option per action",
    "click('48', button='middle', modifiers=['Shift'])": "uirl has no middle button",
    "dblclick('ca42', button='right')": "uirl double clicks with the left button",
    "dblclick('178', button='middle', modifiers=['Shift'])": "uirl double clicks with the left",
    "mouse_dblclick(87.5, 354, 'right')": "uirl double clicks with the left button",
}


def test_browsergyms_own_examples_parse_or_are_refused_with_the_reason() -> None:
    pytest.importorskip("browsergym.core")
    from browsergym.core.action.highlevel import HighLevelActionSet

    action_set = HighLevelActionSet(subsets=list(ACTION_SUBSETS))
    for name, action in action_set.action_set.items():
        for example in action.examples:
            reason = REFUSED_ACTIONS.get(name) or REFUSED_EXAMPLES.get(example)
            if reason is None:
                assert isinstance(parse_action(example), Action), example
            else:
                with pytest.raises(ValueError, match=re.escape(reason)):
                    parse_action(example)

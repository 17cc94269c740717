"""A scripted MiniWoB++ expert for a set of tasks: reads element boxes from ``/oracle``
(privileged), acts only through pixel actions.

It plans one action (or a short macro) from what the page shows, plays it and plans
again (:class:`~uirl_gym.tasks.expert.MacroExpert`), so a macro that did not land (a
menu still closing, a slider off by one) is corrected from the next state. Tasks it
knows: :data:`SOLVED_TASKS` (27: clicks, checkboxes and radios, typing and forms, a
native select, drags, a slider, scrolling); others raise ``ValueError`` at construction.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from uirl_gym.actions import Action, ActionType, ScrollDirection
from uirl_gym.tasks.expert import MacroExpert, box_centre, click

Oracle = Mapping[str, Any]
Element = Mapping[str, Any]


def _quoted(utterance: str) -> list[str]:
    return re.findall(r'"([^"]*)"', utterance)


def _find(o: Oracle, pred: Callable[[Element], bool]) -> list[Element]:
    return [e for e in o["elements"] if pred(e)]


def _by_id(o: Oracle, element_id: str) -> Element | None:
    found = _find(o, lambda e: e["id"] == element_id)
    return found[0] if found else None


def _type_into(box: list[int], text: str) -> list[Action]:
    return [
        click(box),
        Action(ActionType.KEYS, keys="ctrl+a"),
        Action(ActionType.TYPE, text=text),
    ]


def _submit(o: Oracle) -> Action:
    button = _by_id(o, "subbtn")
    if button is None:
        raise ValueError("no Submit button (#subbtn) on the page")
    return click(button["box"])


def _button(o: Oracle, text: str, within: Iterable[Element] | None = None) -> Element:
    pool = list(within) if within is not None else o["elements"]
    found = [e for e in pool if e["tag"] == "button" and e["text"] == text]
    if not found:
        raise ValueError(f"no button {text!r} on the page")
    return found[0]


def _inside(box: list[int], outer: list[int]) -> bool:
    x, y, w, h = box
    ox, oy, ow, oh = outer
    return ox <= x and oy <= y and x + w <= ox + ow and y + h <= oy + oh


# -- one planner per task: the oracle -> the next actions ------------------------------


def _click_test(o: Oracle) -> list[Action]:
    return [_submit(o)]


def _click_named_button(o: Oracle) -> list[Action]:
    # click-test-2 ("Click button ONE."), click-button ('Click on the "Next" button.')
    quoted = _quoted(o["utterance"])
    text = quoted[0] if quoted else o["utterance"].removeprefix("Click button ").rstrip(".")
    return [click(_button(o, text)["box"])]


def _click_button_sequence(o: Oracle) -> list[Action]:
    return [click(_button(o, "ONE")["box"]), click(_button(o, "TWO")["box"])]


def _click_link(o: Oracle) -> list[Action]:
    (text,) = _quoted(o["utterance"])
    links = _find(o, lambda e: "alink" in e["classes"].split() and e["own_text"] == text)
    return [click(links[0]["box"])]


def _click_dialog(o: Oracle) -> list[Action]:
    close = _find(o, lambda e: "ui-dialog-titlebar-close" in e["classes"])
    return [click(close[0]["box"])]


def _click_dialog_2(o: Oracle) -> list[Action]:
    (text,) = _quoted(o["utterance"])
    if text == "x":  # the title bar's close button
        return _click_dialog(o)
    dialog = _find(o, lambda e: "ui-dialog" in e["classes"].split())[0]
    inside = [e for e in o["elements"] if _inside(e["box"], dialog["box"])]
    return [click(_button(o, text, inside)["box"])]


def _click_tab(o: Oracle) -> list[Action]:
    number = re.search(r"Tab #(\d+)", o["utterance"])
    assert number is not None, o["utterance"]
    tab = _find(o, lambda e: e["tag"] == "a" and e["text"] == f"Tab #{number[1]}")
    return [click(tab[0]["box"])]


def _click_tab_2(o: Oracle) -> list[Action]:
    (text,) = _quoted(o["utterance"])
    links = _find(o, lambda e: e["tag"] == "span" and e["own_text"] == text)
    if links:
        return [click(links[0]["box"])]
    tabs = _find(o, lambda e: e["tag"] == "a" and e["text"].startswith("Tab #"))
    active = _find(o, lambda e: e["tag"] == "li" and "ui-tabs-active" in e["classes"])
    current = active[0]["text"] if active else ""
    later = [t for t in tabs if t["text"] > current] or tabs
    return [click(later[0]["box"])]


def _labelled_inputs(o: Oracle, kind: str) -> dict[str, Element]:
    """Checkbox or radio inputs by their label's text (the input sits in its label)."""
    labels = _find(o, lambda e: e["tag"] == "label")
    inputs = _find(o, lambda e: e["tag"] == "input" and e.get("type") == kind)
    out = {}
    for label in labels:
        x, y, w, h = label["box"]
        for field in inputs:
            cx, cy = box_centre(field["box"])
            if x <= cx < x + w and y <= cy < y + h:
                out[label["text"]] = field
    return out


def _click_checkboxes(o: Oracle) -> list[Action]:
    wanted = re.fullmatch(r"Select (.*) and click Submit\.", o["utterance"])
    assert wanted is not None, o["utterance"]
    names = {n.strip() for n in wanted[1].split(",") if n.strip()}
    boxes = _labelled_inputs(o, "checkbox")
    todo = [b for name, b in boxes.items() if b["checked"] != (name in names)]
    return [click(b["box"]) for b in todo] + [_submit(o)]


def _click_option(o: Oracle) -> list[Action]:
    wanted = re.fullmatch(r"Select (.*) and click Submit\.", o["utterance"])
    assert wanted is not None, o["utterance"]
    return [click(_labelled_inputs(o, "radio")[wanted[1]]["box"]), _submit(o)]


def _enter_text(o: Oracle) -> list[Action]:
    (text,) = _quoted(o["utterance"])
    field = _by_id(o, "tt")
    assert field is not None
    return [*_type_into(field["box"], text), _submit(o)]


def _enter_text_2(o: Oracle) -> list[Action]:
    (text,) = _quoted(o["utterance"])
    text = text.lower() if "lower case" in o["utterance"] else text.upper()
    field = _by_id(o, "tt")
    assert field is not None
    return [*_type_into(field["box"], text), _submit(o)]


def _focus_text(o: Oracle) -> list[Action]:
    field = _by_id(o, "tt")
    assert field is not None
    return [click(field["box"])]


def _enter_password(o: Oracle) -> list[Action]:
    (password,) = _quoted(o["utterance"])
    actions = []
    for element_id in ("password", "verify"):
        field = _by_id(o, element_id)
        assert field is not None
        actions += _type_into(field["box"], password)
    return [*actions, _submit(o)]


def _login_user(o: Oracle) -> list[Action]:
    user, password = _quoted(o["utterance"])
    actions = []
    for element_id, text in (("username", user), ("password", password)):
        field = _by_id(o, element_id)
        assert field is not None
        actions += _type_into(field["box"], text)
    return [*actions, _submit(o)]


def _focus_text_2(o: Oracle) -> list[Action]:
    nth = re.search(r"(\d)(st|nd|rd|th) input", o["utterance"])
    assert nth is not None, o["utterance"]
    inputs = _find(o, lambda e: e["tag"] == "input")
    return [click(inputs[int(nth[1]) - 1]["box"])]


def _click_collapsible(o: Oracle) -> list[Action]:
    header = _find(o, lambda e: e["tag"] == "h3" and "ui-accordion-header" in e["classes"])
    if header and "ui-accordion-header-active" not in header[0]["classes"].split():
        return [click(header[0]["box"])]
    return [_submit(o)]


def _choose_list(o: Oracle) -> list[Action]:
    wanted = re.fullmatch(r"Select (.*) from the list and click Submit\.", o["utterance"])
    assert wanted is not None, o["utterance"]
    select = _by_id(o, "options")
    assert select is not None
    if select["value"] == wanted[1]:
        return [click(_button(o, "Submit")["box"])]
    # A focused closed select picks the option its typed text starts (type-ahead).
    return [click(select["box"]), Action(ActionType.TYPE, text=wanted[1])]


def _drag_box(o: Oracle) -> list[Action]:
    small, large = _by_id(o, "draggableSmall"), _by_id(o, "draggableLarge")
    assert small is not None and large is not None
    if _inside(small["box"], large["box"]):
        return [_submit(o)]
    (x0, y0), (x1, y1) = box_centre(small["box"]), box_centre(large["box"])
    return [Action(ActionType.DRAG, x0, y0, end_x=x1, end_y=y1)]


def _scroll_text_2(o: Oracle) -> list[Action]:
    area = _by_id(o, "text-area")
    assert area is not None and "scroll" in area, "the text area does not scroll"
    s = area["scroll"]
    down = "bottom" in o["utterance"]
    at_end = s["top"] + s["client"] >= s["height"] - 1 if down else s["top"] == 0
    if at_end:
        return [_submit(o)]
    x, y = box_centre(area["box"])
    direction = ScrollDirection.DOWN if down else ScrollDirection.UP
    return [Action(ActionType.SCROLL, x, y, direction=direction, amount=10)]


class _Slider:
    """use-slider: calibrate the track (click both ends, read the value there), click
    the target value's place, and fix what rounding left with the arrow keys."""

    def __init__(self) -> None:
        self.ends: dict[str, int] = {}
        self.pending: str | None = None
        self.aimed = False

    def __call__(self, o: Oracle) -> list[Action]:
        wanted = re.search(r"Select (-?\d+) with the slider", o["utterance"])
        assert wanted is not None, o["utterance"]
        target = int(wanted[1])
        shown = _by_id(o, "val")
        assert shown is not None
        value = int(shown["text"])
        if self.pending is not None:
            self.ends[self.pending], self.pending = value, None
        if value == target:
            return [_submit(o)]
        track = _find(o, lambda e: "ui-slider" in e["classes"].split())[0]
        x, y, w, h = track["box"]
        cy = y + h // 2
        for end, at in (("low", x), ("high", x + w - 1)):
            if end not in self.ends:
                self.pending = end
                return [Action(ActionType.LEFT_CLICK, at, cy)]
        low, high = self.ends["low"], self.ends["high"]
        if not self.aimed and low < high and low <= target <= high:
            self.aimed = True
            return [
                Action(
                    ActionType.LEFT_CLICK, x + round((target - low) / (high - low) * (w - 1)), cy
                )
            ]
        handle = _find(o, lambda e: "ui-slider-handle" in e["classes"].split())[0]
        key = "right" if value < target else "left"
        return [click(handle["box"]), Action(ActionType.KEYS, keys=key)]


PLANNERS: dict[str, Callable[[], Callable[[Oracle], list[Action]]]] = {
    "click-test": lambda: _click_test,
    "click-test-2": lambda: _click_named_button,
    "click-button": lambda: _click_named_button,
    "click-button-sequence": lambda: _click_button_sequence,
    "click-link": lambda: _click_link,
    "click-dialog": lambda: _click_dialog,
    "click-dialog-2": lambda: _click_dialog_2,
    "click-tab": lambda: _click_tab,
    "click-tab-2": lambda: _click_tab_2,
    "click-checkboxes": lambda: _click_checkboxes,
    "click-option": lambda: _click_option,
    "click-collapsible-nodelay": lambda: _click_collapsible,
    "click-test-transfer": lambda: _click_named_button,
    "click-checkboxes-large": lambda: _click_checkboxes,
    "click-checkboxes-transfer": lambda: _click_checkboxes,
    "unicode-test": lambda: _click_named_button,
    "enter-text": lambda: _enter_text,
    "enter-text-2": lambda: _enter_text_2,
    "enter-text-dynamic": lambda: _enter_text,
    "focus-text": lambda: _focus_text,
    "enter-password": lambda: _enter_password,
    "login-user": lambda: _login_user,
    "focus-text-2": lambda: _focus_text_2,
    "choose-list": lambda: _choose_list,
    "drag-box": lambda: _drag_box,
    "use-slider": _Slider,
    "scroll-text-2": lambda: _scroll_text_2,
}
SOLVED_TASKS = frozenset(PLANNERS)


class MiniWobExpert(MacroExpert):
    """Solves the MiniWoB++ tasks of :data:`SOLVED_TASKS` from the oracle.

    Raises:
        ValueError: a task it has no planner for.
    """

    def __init__(self, subdomain: str, **options: Any) -> None:
        super().__init__()
        if subdomain not in PLANNERS:
            raise ValueError(
                f"no scripted expert for MiniWoB++ task {subdomain!r}; experts exist for: "
                f"{sorted(PLANNERS)}"
            )
        self.subdomain = subdomain
        self._new = PLANNERS[subdomain]
        self._planner = self._new()

    def reset(self) -> None:
        super().reset()
        self._planner = self._new()

    def _plan(self, oracle: Oracle) -> list[Action]:
        if oracle["done"]:
            return [Action(ActionType.FINISH)]
        return self._planner(oracle)

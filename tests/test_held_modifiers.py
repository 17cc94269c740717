"""Pointer actions on a real page, with frames on demand and at 60 Hz: those that hold
modifier keys (``Action.keys`` on a click: a shift+click) give the page the modifier's
keydown, every mouse event with its flag, then its keyup; a drag that starts on a
``draggable`` element is an HTML5 drag and drop (dragstart, drop with its data, dragend),
as a person's drag is."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from static_pages import serving_pages

from uirl_gym.actions import Action, ActionType
from uirl_gym.protocol import act_query, parse_act_query
from uirl_gym.session.browser.chromium import find_browser, is_headless_shell
from uirl_gym.session.browser.session import FRAME_CONTROL_ENV_VAR, CdpBrowserSession

# Records each event with the modifiers it carried; a tall scroller for the wheel; an
# HTML5 drag source and drop target.
PAGE = b"""<!doctype html><html><body style="margin:0">
<div id="box" style="width:400px;height:300px;overflow:auto;background:#eef">
<div style="height:3000px;width:3000px">box</div></div>
<div id="src" draggable="true" style="position:absolute;left:0;top:320px;width:100px;height:40px">
drag me</div>
<div id="dst" style="position:absolute;left:300px;top:320px;width:150px;height:80px">here</div>
<script>
const log = [];
const flags = (e) => ["ctrl", "shift", "alt", "meta"].filter((m) => e[m + "Key"]).join("+");
for (const type of ["click", "dblclick", "contextmenu", "mousedown", "mouseup", "wheel"])
  document.addEventListener(type, (e) => log.push([type, flags(e)]), true);
document.addEventListener("mousemove", (e) => {
  if (log.length === 0 || log[log.length - 1][0] !== "mousemove")
    log.push(["mousemove", flags(e)]);
}, true);
for (const type of ["keydown", "keyup"])
  document.addEventListener(type, (e) => log.push([type, e.key]), true);
src.addEventListener("dragstart", (e) => {
  e.dataTransfer.setData("text/plain", "hello");
  log.push(["dragstart", e.target.id]);
});
// dropEffect "none": the drag was cancelled, nothing dropped.
src.addEventListener("dragend", (e) => log.push(["dragend", e.dataTransfer.dropEffect !== "none"]));
dst.addEventListener("dragover", (e) => e.preventDefault());
dst.addEventListener("drop", (e) => {
  e.preventDefault();
  log.push(["drop", e.target.id + ":" + e.dataTransfer.getData("text/plain")]);
});
window.uirlEpisode = 0;
window.uirlLoad = () => { window.uirlEpisode += 1; };
window.uirlInspect = () => log.splice(0);
</script></body></html>"""


@pytest.fixture(scope="module")
def page_url() -> Iterator[str]:
    with serving_pages({}, PAGE) as url:
        yield url


SCRIPT = [
    Action(ActionType.LEFT_CLICK, 100, 100, keys="shift"),
    Action(ActionType.DOUBLE_CLICK, 100, 100, keys="ctrl"),
    Action(ActionType.RIGHT_CLICK, 100, 100, keys="alt"),
    Action(ActionType.MOUSE_MOVE, 200, 150, keys="shift"),
    Action(ActionType.SCROLL, 100, 100, direction="down", amount=1, keys="shift"),
    Action(ActionType.DRAG, 50, 50, end_x=150, end_y=150, keys="ctrl+shift"),
    Action(ActionType.DRAG, 50, 340, end_x=375, end_y=360),  # #src onto #dst
    Action(ActionType.LEFT_CLICK, 100, 100),  # nothing held any more
]


def _events(log: list[list[str]], type_: str) -> list[str]:
    return [flags for kind, flags in log if kind == type_]


async def _play(browser: Any) -> list[list[list[str]]]:
    await browser.start()
    try:
        await browser.new_episode({})
        await browser.inspect()  # whatever loading the page logged
        logs = []
        for action in SCRIPT:
            await asyncio.wait_for(browser.act(action.validate()), 20)
            logs.append(await browser.inspect())
        return logs
    finally:
        await browser.stop()


def _check(logs: list[list[list[str]]]) -> None:
    click, dbl, right, move, wheel, drag, html5_drag, plain = logs
    kinds = [kind for kind, _ in click]
    assert [e for e in click if e[0].startswith("key")] == [
        ["keydown", "Shift"],
        ["keyup", "Shift"],
    ]
    assert kinds.index("keydown") < kinds.index("mousedown") < kinds.index("keyup"), click
    assert set(_events(click, "mousedown") + _events(click, "click")) == {"shift"}, click
    assert set(_events(dbl, "dblclick") + _events(dbl, "mousedown")) == {"ctrl"}, dbl
    assert _events(right, "contextmenu") == ["alt"], right
    assert _events(move, "mousemove") == ["shift"], move
    assert _events(wheel, "wheel") == ["shift"], wheel
    assert set(_events(drag, "mousedown") + _events(drag, "mouseup")) == {"ctrl+shift"}, drag
    assert [e for e in drag if e[0] in ("keydown", "keyup")] == [
        ["keydown", "Control"], ["keydown", "Shift"], ["keyup", "Shift"], ["keyup", "Control"]
    ]  # fmt: skip
    dnd = [e for e in html5_drag if e[0].startswith(("drag", "drop"))]
    assert dnd == [["dragstart", "src"], ["drop", "dst:hello"], ["dragend", True]], html5_drag
    assert set(_events(plain, "click")) == {""} and not _events(plain, "keydown"), plain


@pytest.mark.parametrize("frames_on_demand", [True, False])
def test_cdp_backend_holds_modifiers_during_pointer_actions(
    page_url: str, frames_on_demand: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    executable = find_browser()
    if frames_on_demand and not is_headless_shell(executable):
        pytest.skip(f"frames on demand need the headless shell; found {executable}")
    if not frames_on_demand:
        monkeypatch.setenv(FRAME_CONTROL_ENV_VAR, "0")
    _check(asyncio.run(_play(CdpBrowserSession(page_url, executable))))


def test_held_keys_are_modifiers_and_travel_in_the_act_query() -> None:
    action = Action(ActionType.LEFT_CLICK, 5, 5, keys="ctrl+shift")
    assert parse_act_query(act_query(action)).action == action
    for bad in ("a", "shift+Enter", "ctrl+a"):
        with pytest.raises(ValueError, match="modifier keys only"):
            Action(ActionType.LEFT_CLICK, 5, 5, keys=bad).validate()
    with pytest.raises(ValueError, match="keys"):
        Action(ActionType.DRAG, 1, 1, end_x=2, end_y=2, keys="Hyper").validate()

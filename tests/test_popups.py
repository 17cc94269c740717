"""Native popups (a drop-down ``<select>``'s list, date and colour pickers) never open, so
an action on them returns at once: under frames on demand, an open popup made the next
capture wait forever (``/act`` answered after its 30 s timeout, and the session stayed
stuck). The keyboard picks instead, as before on MiniWoB++ pages, now on every page and
in its frames, on both backends' default: the CDP backend."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from static_pages import serving_pages

from uirl_gym.actions import Action, ActionType
from uirl_gym.session.browser.chromium import find_browser
from uirl_gym.session.browser.session import CdpBrowserSession

FRAME = b"""<!doctype html><html><body style="margin:0">
<select id="inner" style="width:150px;height:30px"><option>x</option><option>y</option></select>
</body></html>"""
PAGE = b"""<!doctype html><html><body style="margin:0; font: 14px sans-serif">
<select id="pick" style="position:absolute;left:10px;top:10px;width:200px;height:30px">
  <option>apple</option><option>banana</option><option>cherry</option></select>
<input id="day" type="date" style="position:absolute;left:10px;top:60px;width:200px;height:30px">
<input id="colour" type="color" style="position:absolute;left:10px;top:110px;width:60px;height:30px">
<input id="clock" type="time" style="position:absolute;left:220px;top:60px;width:120px;height:30px">
<iframe src="/frame" style="position:absolute;left:10px;top:160px;width:200px;height:60px;border:0">
</iframe>
<script>
window.uirlEpisode = 0;
window.uirlLoad = () => { window.uirlEpisode += 1; };
window.uirlInspect = () => ({pick: pick.value, day: day.value, clock: clock.value,
  focused: document.activeElement.id,
  inner: document.querySelector("iframe").contentDocument.getElementById("inner").value});
</script></body></html>"""
# Links, forms and scripts that would open a tab or window.
TABS = b"""<!doctype html><html><body style="margin:0; font: 14px sans-serif">
<a id="hash" href="#next" style="position:absolute;left:10px;top:10px">hash link</a>
<a id="blank" href="/other" target="_blank" style="position:absolute;left:10px;top:40px">new</a>
<button id="opener" onclick="window.open('/other')"
  style="position:absolute;left:10px;top:70px;width:100px;height:24px">open</button>
<form id="form" action="/other" target="_blank" method="get">
  <button id="go" style="position:absolute;left:10px;top:100px;width:100px;height:24px">go
  </button></form>
<button id="scripted" onclick="document.getElementById('form').submit()"
  style="position:absolute;left:10px;top:130px;width:100px;height:24px">script</button>
<script>
window.uirlEpisode = 0;
window.uirlLoad = () => { window.uirlEpisode += 1; };
window.uirlInspect = () => ({url: location.href, focused: document.activeElement.id,
  clicks: window.clicks || 0});
document.getElementById("hash").addEventListener("click", () => {
  window.clicks = (window.clicks || 0) + 1; });
</script></body></html>"""
# Each action returns well within this; an open popup made the capture never return.
PROMPT_S = 5.0


@pytest.fixture(scope="module")
def page_url() -> Iterator[str]:
    with serving_pages({"/frame": FRAME, "/tabs": TABS}, PAGE) as url:
        yield url


def click(x: int, y: int) -> Action:
    return Action(ActionType.LEFT_CLICK, x, y)


def keys(k: str) -> Action:
    return Action(ActionType.KEYS, keys=k)


# (what, action, the page's state afterwards): clicks on each popup field and every key
# that opens one (Chromium 156 opens a focused select's list on space, Enter, F4 and
# Alt+Down, a date or time field's picker on space with any modifier, F4 and Alt+Down),
# then the keyboard picks.
SCRIPT = [
    ("click the select", click(100, 25), {"focused": "pick", "pick": "apple"}),
    ("space", keys("space"), {"pick": "apple"}),
    ("enter", keys("enter"), {"pick": "apple"}),
    ("f4", keys("f4"), {"pick": "apple"}),
    ("alt+down", keys("alt+down"), {"pick": "apple"}),
    ("down picks", keys("down"), {"pick": "banana"}),
    ("click the date's picker button", click(200, 75), {"focused": "day"}),
    ("alt+down on the date", keys("alt+down"), {"focused": "day"}),
    ("space on the date", keys("space"), {"focused": "day"}),
    ("type the date", Action(ActionType.TYPE, text="03142025"), {"day": "2025-03-14"}),
    ("click the time", click(240, 75), {"focused": "clock"}),
    ("shift+space on the time", keys("shift+space"), {"focused": "clock"}),
    ("type the time", Action(ActionType.TYPE, text="0930 am"), {"clock": "09:30"}),
    ("click the colour", click(40, 125), {"focused": "colour"}),
    ("space on the colour", keys("space"), {"focused": "colour"}),
    ("enter on the colour", keys("enter"), {"focused": "colour"}),
    ("click the frame's select", click(80, 175), {"inner": "x"}),
    ("enter in the frame", keys("enter"), {"inner": "x"}),
    ("down in the frame", keys("down"), {"inner": "y"}),
]


async def _play(url: str) -> list[tuple[str, float, dict[str, Any]]]:
    browser = CdpBrowserSession(url, find_browser(None, headless=True))
    await browser.start()
    played = []
    try:
        await browser.new_episode({})
        for what, action, _ in SCRIPT:
            t0 = time.perf_counter()
            try:
                await asyncio.wait_for(browser.act(action), PROMPT_S)
                await asyncio.wait_for(browser.capture(), PROMPT_S)
            except TimeoutError:
                pytest.fail(f"{what}: no answer within {PROMPT_S:.0f}s (a popup opened?)")
            played.append((what, time.perf_counter() - t0, await browser.inspect()))
    finally:
        await browser.stop()
    return played


def test_popup_fields_answer_at_once_and_the_keyboard_picks(page_url: str) -> None:
    played = asyncio.run(_play(page_url))
    for (what, seconds, state), (_, _, expected) in zip(played, SCRIPT, strict=True):
        assert seconds < PROMPT_S, what
        assert {k: state[k] for k in expected} == expected, what


# (what, action): every way a page or an agent opens a tab or window. Before, each
# Shift/Ctrl+Enter on a focused link opened a background tab (Chromium runs with
# --disable-popup-blocking): 12 presses, 12 renderers.
TAB_SCRIPT = [
    ("click the hash link", click(30, 15)),
    ("enter on the focused link", keys("enter")),
    ("shift+enter on the focused link", keys("shift+enter")),
    ("ctrl+enter on the focused link", keys("ctrl+enter")),
    ("meta+enter on the focused link", keys("meta+enter")),
    ("click a target=_blank link", click(20, 45)),
    ("window.open", click(50, 80)),
    ("a form with target=_blank", click(50, 110)),
]


async def _open_tabs(url: str) -> tuple[list[tuple[str, int]], dict[str, Any], int, int]:
    browser = CdpBrowserSession(url, find_browser(None, headless=True))
    await browser.start()
    try:
        await browser.new_episode({})
        await browser.capture()  # the next episode's page is prepared after it
        deadline = time.monotonic() + PROMPT_S
        while browser.open_pages < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        before, pages = browser.open_pages, []
        for what, action in TAB_SCRIPT:
            await asyncio.wait_for(browser.act(action), PROMPT_S)
            await asyncio.wait_for(browser.capture(), PROMPT_S)
            pages.append((what, browser.open_pages - before))
        state = await browser.inspect()
        # What the page's guard cannot see (a script's form.submit()) the backstop
        # closes: the tab opens, and is closed at once.
        await browser.act(click(50, 140))
        deadline = time.monotonic() + PROMPT_S
        while browser.open_pages > before and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        return pages, state, browser.open_pages - before, browser.popups_closed
    finally:
        await browser.stop()


def test_no_action_opens_a_tab_or_window(page_url: str) -> None:
    pages, state, after_script, closed = asyncio.run(_open_tabs(page_url.replace("/app", "/tabs")))
    assert pages == [(what, 0) for what, _ in TAB_SCRIPT]
    # The page's own handlers still ran; only the new tabs were cancelled.
    assert state["url"].endswith("/tabs#next") and state["clicks"] >= 4
    assert after_script == 0 and closed == 1

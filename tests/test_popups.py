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
from uirl_gym.server.cdp_browser import CdpBrowserSession
from uirl_gym.server.chromium import find_browser

FRAME = b"""<!doctype html><html><body style="margin:0">
<select id="inner" style="width:150px;height:30px"><option>x</option><option>y</option></select>
</body></html>"""
PAGE = b"""<!doctype html><html><body style="margin:0; font: 14px sans-serif">
<select id="pick" style="position:absolute;left:10px;top:10px;width:200px;height:30px">
  <option>apple</option><option>banana</option><option>cherry</option></select>
<input id="day" type="date" style="position:absolute;left:10px;top:60px;width:200px;height:30px">
<input id="colour" type="color" style="position:absolute;left:10px;top:110px;width:60px;height:30px">
<iframe src="/frame" style="position:absolute;left:10px;top:160px;width:200px;height:60px;border:0">
</iframe>
<script>
window.uirlEpisode = 0;
window.uirlLoad = () => { window.uirlEpisode += 1; };
window.uirlInspect = () => ({pick: pick.value, day: day.value, focused: document.activeElement.id,
  inner: document.querySelector("iframe").contentDocument.getElementById("inner").value});
</script></body></html>"""
# Each action returns well within this; an open popup made the capture never return.
PROMPT_S = 5.0


@pytest.fixture(scope="module")
def page_url() -> Iterator[str]:
    with serving_pages({"/frame": FRAME}, PAGE) as url:
        yield url


def click(x: int, y: int) -> Action:
    return Action(ActionType.LEFT_CLICK, x, y)


def keys(k: str) -> Action:
    return Action(ActionType.KEYS, keys=k)


# (what, action, the page's state afterwards): clicks on each popup field and every key
# that opens one (Chromium 156 opens a focused select's list on space, Enter, F4 and
# Alt+Down), then the keyboard picks.
SCRIPT = [
    ("click the select", click(100, 25), {"focused": "pick", "pick": "apple"}),
    ("space", keys("space"), {"pick": "apple"}),
    ("enter", keys("enter"), {"pick": "apple"}),
    ("f4", keys("f4"), {"pick": "apple"}),
    ("alt+down", keys("alt+down"), {"pick": "apple"}),
    ("down picks", keys("down"), {"pick": "banana"}),
    ("click the date's picker button", click(200, 75), {"focused": "day"}),
    ("alt+down on the date", keys("alt+down"), {"focused": "day"}),
    ("type the date", Action(ActionType.TYPE, text="03142025"), {"day": "2025-03-14"}),
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

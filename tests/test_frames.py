"""Frames on demand (the CDP backend on the headless shell): Chromium draws a frame only
when the server captures, and a scroll lands where Chromium's own wheel puts it."""

from __future__ import annotations

import asyncio
import base64
import io
from collections.abc import Iterator

import numpy as np
import pytest
from PIL import Image
from static_pages import serving_pages

from uirl_gym.actions import Action, ActionType
from uirl_gym.session.browser.chromium import find_browser, is_headless_shell
from uirl_gym.session.browser.session import FRAME_CONTROL_ENV_VAR, CdpBrowserSession

# Nested scrollers, a scroller whose table header is sticky (Chromium's wheel never
# finishes a frame over it under frame control), one whose wheel listener cancels the
# scroll, and a page taller than the screen.
PAGE = b"""<!doctype html><html><head><style>
body { margin: 0; font: 14px sans-serif; }
.tall { height: 1000px; }
#outer { height: 300px; width: 400px; overflow: auto; }
#inner { height: 150px; overflow: auto; background: #eef; }
#sheet { height: 200px; width: 400px; overflow-y: scroll; }
#sheet th { position: sticky; top: 0; background: #ddd; }
#sheet td { height: 24px; }
#blocker { height: 100px; width: 400px; overflow: auto; background: #fee; }
</style></head><body>
<div id="outer"><div id="inner"><div class="tall">inner</div></div><div class="tall">outer</div></div>
<div id="sheet"><table><thead><tr><th>header</th></tr></thead><tbody id="rows"></tbody></table></div>
<div id="blocker"><div class="tall">cancels its wheel</div></div>
<div style="height: 2000px">page</div>
<script>
for (let i = 0; i < 60; i++) rows.insertRow().insertCell().textContent = "row " + i;
blocker.addEventListener("wheel", (e) => e.preventDefault(), {passive: false});
window.uirlEpisode = 0;
window.uirlLoad = () => { window.uirlEpisode += 1; };
window.uirlInspect = () => ({inner: inner.scrollTop, outer: outer.scrollTop,
  sheet: sheet.scrollTop, blocker: blocker.scrollTop, page: Math.round(scrollY)});
</script></body></html>"""


@pytest.fixture(scope="module")
def page_url() -> Iterator[str]:
    with serving_pages({}, PAGE) as url:
        yield url


def scroll(x: int, y: int, amount: int = 1, direction: str = "down") -> Action:
    return Action(ActionType.SCROLL, x, y, direction=direction, amount=amount)


# (action, where every scroller is after it): down the inner scroller to its end (850),
# on to the outer one (a new wheel is latched to the first scroller with room left),
# the sticky-header sheet, the cancelling scroller, then the page; and back up.
SCRIPT = [
    (scroll(100, 50, 3), {"inner": 300, "outer": 0}),
    (scroll(100, 50, 6), {"inner": 850, "outer": 0}),
    (scroll(100, 50, 2), {"inner": 850, "outer": 200}),
    (scroll(100, 400, 2), {"sheet": 200}),
    (scroll(100, 560, 2), {"blocker": 0, "page": 0}),
    (scroll(700, 400, 3), {"page": 300}),
    (scroll(700, 400, 1, "up"), {"page": 200}),
]


async def _play(url: str, executable: str) -> tuple[bool, list[dict[str, int]], bytes]:
    browser = CdpBrowserSession(url, executable)
    await browser.start()
    try:
        await browser.new_episode({})
        states = []
        for action, _ in SCRIPT:
            await asyncio.wait_for(browser.act(action), 20)
            states.append(await browser.inspect())
        return browser.frames_on_demand, states, await browser.capture()
    finally:
        await browser.stop()


def test_a_scroll_under_frames_on_demand_lands_where_chromiums_wheel_does(
    page_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    executable = find_browser()
    if not is_headless_shell(executable):
        pytest.skip(f"frames on demand need the headless shell; found {executable}")
    on_demand, states, png = asyncio.run(_play(page_url, executable))
    assert on_demand
    assert png.startswith(b"\x89PNG")
    for (action, expected), state in zip(SCRIPT, states, strict=True):
        assert {k: state[k] for k in expected} == expected, (action, state)
    # Chromium's own wheel (frames at 60 Hz) ends every step in the same place.
    monkeypatch.setenv(FRAME_CONTROL_ENV_VAR, "0")
    on_demand, native, _ = asyncio.run(_play(page_url, executable))
    assert not on_demand
    assert native == states


def _spinner_gif() -> bytes:
    """A 12-frame GIF, 20 ms a frame: a loading spinner's animation, in colours."""
    frames = [Image.new("RGB", (32, 32), (i * 20, 80, 160)) for i in range(12)]
    out = io.BytesIO()
    frames[0].save(out, "GIF", save_all=True, append_images=frames[1:], duration=20, loop=0)
    return out.getvalue()


# An animated image on a page that changes every few milliseconds, which the agent
# clicks and types on (MiniWoB's flight.AA: its airport field's loading spinner).
SPINNER_PAGE = """<!doctype html><html><body style="margin: 0">
<img src="data:image/gif;base64,GIF" width="64" height="64">
<div id="clock">0</div>
<div style="width: 3000px; height: 3000px; background: linear-gradient(90deg, #fff, #ccd)"></div>
<script>
let ticks = 0;
setInterval(() => { clock.textContent = ++ticks; }, 4);
window.uirlEpisode = 0;
window.uirlLoad = () => { window.uirlEpisode += 1; };
window.uirlInspect = () => ({});
</script></body></html>""".replace("GIF", base64.b64encode(_spinner_gif()).decode()).encode()


async def _click_and_type_beside_a_spinner(url: str, executable: str) -> list[bytes]:
    """A screenshot after each action: 30 clicks, each followed by typed text."""
    browser = CdpBrowserSession(url, executable)
    await browser.start()
    try:
        await browser.new_episode({})
        screens = []
        for _ in range(30):
            for action in (
                Action(ActionType.LEFT_CLICK, 100, 80),
                Action(ActionType.TYPE, text="ab"),
            ):
                await asyncio.wait_for(browser.act(action), 10)
                screens.append(await asyncio.wait_for(browser.capture(), 10))
        return screens
    finally:
        await browser.stop()


def test_an_animated_image_never_stalls_a_frame_and_shows_its_first_frame() -> None:
    """Under frames on demand an animated image's next frame, due in a frame that also
    commits the page's changes, left ``beginFrame`` unanswered for good (before the fix:
    a timeout within the first second, 5 runs of 5); now every action and capture
    answers, and the image stays on its first frame in every screenshot."""
    executable = find_browser()
    if not is_headless_shell(executable):
        pytest.skip(f"frames on demand need the headless shell; found {executable}")
    with serving_pages({}, SPINNER_PAGE) as url:
        screens = asyncio.run(_click_and_type_beside_a_spinner(url, executable))
    spinner = {
        tuple(np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))[32, 32]) for png in screens
    }
    assert spinner == {(0, 80, 160)}

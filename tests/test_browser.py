"""The browser session: Chromium driven over its DevTools pipe (the one backend since
issue 34), its key table, its health, fresh episodes, and no browser outliving its
server."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from processes import running
from static_pages import serving_pages
from test_server import FIELDS, centre

from uirl_gym.actions import Action, ActionType
from uirl_gym.client import SessionClient
from uirl_gym.runtimes.local import LocalRuntime, descendant_pids
from uirl_gym.session.browser.chromium import find_browser, is_headless_shell
from uirl_gym.session.browser.keys import describe
from uirl_gym.session.browser.session import CdpBrowserSession


def test_key_descriptions_follow_playwright() -> None:
    """Shift picks the shifted key; any other modifier means the key inserts no text."""
    assert describe("KeyA", set()).text == "a"
    assert describe("KeyA", {"Shift"}).text == "A"
    assert describe("c", {"Control"}).text == ""
    assert describe("Enter", set()).text == "\r"
    assert describe("\n", set()).code == "Enter"
    assert describe("Numpad5", {"Shift"}).key == "5"
    with pytest.raises(ValueError, match='Unknown key: "Hyper"'):
        describe("Hyper", set())


def test_the_server_never_loads_playwright() -> None:
    """No Node driver, and not even Playwright's Python package (a test tool only, not a
    dependency of the install), in a session server."""
    code = (
        "import sys; from uirl_gym.session.app import SessionState, SessionServerConfig; "
        "SessionState(SessionServerConfig()); "
        "sys.exit(any(m.startswith('playwright') for m in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    assert subprocess.run([sys.executable, "-c", code], env=env, timeout=120).returncode == 0


def test_health_names_the_backend_and_the_browser(client: SessionClient) -> None:
    health = client.health()
    assert health["browser_backend"] == "cdp"
    assert os.access(health["browser_executable"], os.X_OK)
    # Frames are drawn on demand exactly when the browser is the headless shell.
    on_demand = is_headless_shell(health["browser_executable"])
    assert health["frames_on_demand"] is on_demand


def test_a_reset_right_after_a_reset_is_a_fresh_episode(client: SessionClient) -> None:
    """Every reset, right after another one or not, gives the episode its seed's exact
    first screen (a context once reused in place drew some edges differently)."""
    client.reset(seed=11, options={"rows": [1]})
    dirty = client.oracle()
    client.act(Action(ActionType.LEFT_CLICK, *centre(dirty["inputs"]["email"]["box"])))
    client.act(Action(ActionType.TYPE, text="left over"))
    client.reset(seed=12, options={"rows": [3]})  # from a used context: a new one
    fresh = client.screenshot()
    client.reset(seed=13, options={"rows": [5]})  # nothing happened: the same context
    client.reset(seed=12, options={"rows": [3]})
    again = client.oracle()
    assert again["target_rows"] == [3]
    assert all(again["inputs"][f]["value"] == "" for f in FIELDS)
    assert again["focused"] is None and again["scroll_top"] == 0
    assert np.array_equal(client.screenshot(), fresh)


def test_chromium_exits_with_its_server_even_on_sigkill(runtime: LocalRuntime) -> None:
    """The DevTools pipe closes when the server dies, and Chromium exits with it."""
    info = runtime.acquire()
    server = runtime.pid(info)
    browsers = descendant_pids(server)
    assert browsers
    os.kill(server, signal.SIGKILL)
    deadline = time.monotonic() + 20
    alive = browsers
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if running(p)]
        time.sleep(0.1)
    runtime.release(info, healthy=False)
    assert alive == []


# Three-character fields that pass the focus on when full (a code entry), and a log of
# every key event the page gets.
CODE_PAGE = b"""<!doctype html><html><body>
<input id="a" maxlength="3"><input id="b" maxlength="3"><textarea id="c"></textarea>
<script>
const log = [];
for (const el of [a, b, c]) {
  for (const kind of ["keydown", "keypress", "input", "keyup"]) {
    el.addEventListener(kind, (e) => log.push(`${kind}:${e.key ?? e.data}@${el.id}`));
  }
}
a.addEventListener("input", () => { if (a.value.length === 3) b.focus(); });
b.addEventListener("input", () => { if (b.value.length === 3) c.focus(); });
window.uirlEpisode = 0;
window.uirlLoad = () => { window.uirlEpisode += 1; };
window.uirlInspect = () => {
  const box = a.getBoundingClientRect();
  return {a: a.value, b: b.value, c: c.value, log, at: [box.x + 10, box.y + box.height / 2]};
};
</script></body></html>"""


async def _type_into_code_fields(url: str, text: str) -> dict[str, Any]:
    browser = CdpBrowserSession(url, find_browser())
    await browser.start()
    try:
        await browser.new_episode({})
        x, y = (await browser.inspect())["at"]  # in field a
        await browser.act(Action(ActionType.LEFT_CLICK, round(x), round(y)))
        await browser.act(Action(ActionType.TYPE, text=text))
        return await browser.inspect()
    finally:
        await browser.stop()


def test_typed_keys_reach_the_page_in_order_where_the_focus_is() -> None:
    """A text's key events are sent without waiting for each answer (a 512-character
    text took ~1.8 s one event at a time); the page still gets each key's keydown,
    keypress, input and keyup in order, in the element focused when it is handled (a
    field that passes the focus on), and text outside the layout between them."""
    text = "abcdefé" + "x" * 500 + "Z!"
    with serving_pages({}, CODE_PAGE) as url:
        page = asyncio.run(_type_into_code_fields(url, text))
    assert (page["a"], page["b"], page["c"]) == ("abc", "def", "é" + "x" * 500 + "Z!")
    # The keyup of a field's third key goes to the next field: its input event moved
    # the focus, as one event at a time did.
    expected = []
    for i, char in enumerate("abcdef"):
        field, after = "abc"[i // 3], "abc"[(i + 1) // 3]
        expected += [f"{kind}:{char}@{field}" for kind in ("keydown", "keypress", "input")]
        expected.append(f"keyup:{char}@{after}")
    expected.append("input:é@c")  # inserted text: an input event, no key events
    for char in "x" * 500 + "Z!":
        expected += [f"{kind}:{char}@c" for kind in ("keydown", "keypress", "input", "keyup")]
    assert page["log"] == expected


# A field whose page loops for ever on the key "g".
HANGING_FIELD_PAGE = b"""<!doctype html><html><body><textarea id="t"></textarea><script>
t.addEventListener("keydown", (e) => { if (e.key === "g") while (true) {} });
window.uirlEpisode = 0;
window.uirlLoad = () => { window.uirlEpisode += 1; };
window.uirlInspect = () => {
  const box = t.getBoundingClientRect();
  return {at: [box.x + 10, box.y + box.height / 2]};
};
</script></body></html>"""


async def _type_into_a_hung_page(url: str) -> str:
    browser = CdpBrowserSession(url, find_browser())
    await browser.start()
    try:
        await browser.new_episode({})
        x, y = (await browser.inspect())["at"]
        await browser.act(Action(ActionType.LEFT_CLICK, round(x), round(y)))
        typing = asyncio.ensure_future(browser.act(Action(ActionType.TYPE, text="g" + "x" * 300)))
        await asyncio.wait({typing}, timeout=1.0)
        waiting_on = browser.waiting_on()  # what a 504 says, read before cancelling
        typing.cancel()
        return waiting_on
    finally:
        await browser.stop()


def test_a_hung_page_names_its_unanswered_keys_once() -> None:
    """A typed text's key events are all in flight at once: on a page that stops
    answering, what the deadline waited on names the method once, with its count and
    longest wait (not 602 entries in a 504)."""
    with serving_pages({}, HANGING_FIELD_PAGE) as url:
        waiting_on = asyncio.run(_type_into_a_hung_page(url))
    assert waiting_on.startswith("Input.dispatchKeyEvent x602 ("), waiting_on
    assert "," not in waiting_on

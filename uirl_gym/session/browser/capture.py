"""Frames, settling and screenshots of a tab.

Frames on demand (the headless shell): Chromium draws a frame only when the server
asks for one (``HeadlessExperimental.beginFrame``), and a screenshot is taken from the
frame drawn for it. A capture then costs one frame's work and no wait for the next
vsync tick (~3 ticks, ~50 ms, per capture otherwise), and a session draws nothing
between steps: no CPU for a blinking caret or a CSS animation while the agent thinks.
The full Chromium has no such mode; it draws at 60 Hz and is captured with
``Page.captureScreenshot``. (The switches: ``chromium.FRAME_CONTROL_ARGS``; input that
needs a frame to reach the page: :mod:`uirl_gym.session.browser.input`.)
"""

from __future__ import annotations

import base64
import io
import logging
from typing import Any

from uirl_gym.protocol import ImageFormat
from uirl_gym.session.browser.cdp import CdpError
from uirl_gym.session.browser.tabs import Tab

logger = logging.getLogger(__name__)

_SETTLE_JS = """(async () => {
  const t0 = performance.now();
  while (window.uirlPending && window.uirlPending() > 0 && performance.now() - t0 < 5000) {
    await new Promise((r) => setTimeout(r, 2));
  }
  return document.readyState === "complete" && window.uirlEpisode !== undefined;
})()"""
_TWO_FRAMES_JS = "new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))"
_NAVIGATION_ERRORS = ("context was destroyed", "Cannot find context", "navigated or closed")


async def begin_frame(tab: Tab, screenshot: dict[str, Any] | None = None) -> dict[str, Any]:
    """Draw a frame (frames on demand), with a screenshot of it if ``screenshot`` gives
    its format."""
    params: dict[str, Any] = {} if screenshot is None else {"screenshot": screenshot}
    return await tab.cdp.send("HeadlessExperimental.beginFrame", params, session_id=tab.session_id)


async def settle_frame(tab: Tab) -> None:
    """Wait until a frame has been produced after this call (two animation frames)."""
    if tab.frames_on_demand:
        for _ in range(2):
            await begin_frame(tab)
        return
    await tab.eval(_TWO_FRAMES_JS)


async def settle(tab: Tab) -> bool:
    """Wait until the page has settled: the task work the app reports as pending (an
    in-flight submission) is done, and a navigation in progress has reached ``load``.

    Returns:
        Whether the task app is still the page on the screen (False: the agent navigated
        away from it).
    """
    try:
        settled = await tab.eval(_SETTLE_JS)
    except CdpError as exc:
        if not any(s in str(exc) for s in _NAVIGATION_ERRORS):
            raise
        settled = False
    if not (tab.idle.is_set() and tab.loaded.is_set()):
        await tab.wait_loaded()
        settled = await tab.eval(_SETTLE_JS)
    return bool(settled)


async def screenshot(tab: Tab, fmt: ImageFormat, jpeg_quality: int) -> str:
    """The screen now, base64-encoded as Chromium sends it (PNG for ``RAW``): see
    :func:`decode`."""
    params: dict[str, Any] = {"format": "png", "optimizeForSpeed": True}
    if fmt is ImageFormat.JPEG:
        params = {"format": "jpeg", "quality": jpeg_quality, "optimizeForSpeed": True}
    if not tab.frames_on_demand:
        result = await tab.cdp.send("Page.captureScreenshot", params, session_id=tab.session_id)
        return str(result["data"])
    # A frame begun while the compositor is not ready (seen rarely right after a
    # MiniWoB++ page's pinch zoom was set) comes without a screenshot: the next
    # one has it.
    for _ in range(3):
        encoded = (await begin_frame(tab, params)).get("screenshotData")
        if encoded is not None:
            return str(encoded)
        logger.debug("a frame came without a screenshot; drawing another")
    raise CdpError("the frame came without a screenshot", method="beginFrame")


def decode(encoded: str, fmt: ImageFormat) -> bytes:
    """A screenshot's bytes: PNG, JPEG or raw RGB (height x width x 3, row-major)."""
    data = base64.b64decode(encoded)
    if fmt is ImageFormat.RAW:
        return _png_to_rgb(data)
    return data


def _png_to_rgb(png: bytes) -> bytes:
    from PIL import Image

    with Image.open(io.BytesIO(png)) as img:
        return img.convert("RGB").tobytes()

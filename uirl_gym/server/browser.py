"""The Playwright backend: one Chromium per session, driven through Playwright's driver.

The default backend is ``cdp_browser`` (no Node driver); this one is kept as an option
(``--backend playwright``) and as the reference the CDP backend is tested against.

Why the shape:
- One browser per session: the native clipboard is shared by every context of a
  browser and isolated between browsers, so two sessions must never share one.
- Every episode gets a fresh browser context (no cookies, storage, focus or form state
  carries over). The next episode's context is prepared in the background while the
  current one runs (a new context + page + app load costs ~200 ms), so ``reset`` only
  renders the episode's data into an already-loaded page.
- Capture uses CDP ``Page.captureScreenshot`` with ``optimizeForSpeed`` (about half the
  cost of ``page.screenshot``). The caret is hidden by the task's CSS, so frames are
  deterministic.
"""

from __future__ import annotations

import asyncio
import base64
import io
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from playwright.async_api import (
    Browser,
    BrowserContext,
    CDPSession,
    Page,
    Playwright,
    async_playwright,
)
from playwright.async_api import Error as PlaywrightError

from uirl_gym.actions import (
    CDP_KEYS,
    DEFAULT_SCREEN,
    DRAG_MOVE_STEPS,
    HOLDING_ACTIONS,
    SCROLL_NOTCH_PX,
    TYPED_KEYS,
    Action,
    ActionType,
    held_modifiers,
    key_sequence,
    typed_chunks,
)
from uirl_gym.server.chromium import (  # noqa: F401 (re-exported: the old place)
    BROWSER_ENV_VAR,
    POPUP_GUARD_JS,
    BrowserNotFoundError,
    ImageFormat,
    find_browser,
)

logger = logging.getLogger(__name__)

CHROMIUM_ARGS = (
    "--disable-dev-shm-usage",
    "--disable-gpu",
    "--disable-extensions",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--font-render-hinting=none",
    "--disable-smooth-scrolling",
)


# The name under which the task app records events (a submission): a Playwright binding,
# callable only by pages of this browser, never an HTTP route that anyone could POST to.
RECORD_BINDING = "uirlRecord"
# pyautogui.typewrite presses Tab and Enter for these characters; so does ``type`` here.
# CDP ``Input.dispatchKeyEvent`` modifier bits of the keys Playwright holds down.
_MODIFIER_BITS = {"Alt": 1, "Control": 2, "Meta": 4, "Shift": 8}

EventRecorder = Callable[[Mapping[str, Any]], dict[str, Any]]


@dataclass
class _Tab:
    """One episode's context, page and CDP session."""

    context: BrowserContext
    page: Page
    cdp: CDPSession


class BrowserSession:
    """A Chromium process and the page the agent acts on.

    Attributes:
        app_url: the task app's URL (served by the session server).
        alive: False once Chromium has disconnected.

    Methods:
        start / stop: launch and close Chromium.
        new_episode: switch to a fresh context and render the episode's app state.
        act: perform an action, wait for the page to settle, return nothing.
        capture: the current screen as PNG / JPEG / raw RGB bytes.
        inspect: the task app's privileged page state (element boxes, values).
    """

    def __init__(
        self,
        app_url: str,
        executable_path: str,
        headless: bool = True,
        record_event: EventRecorder | None = None,
    ) -> None:
        self.app_url = app_url
        self.record_event = record_event
        self.executable_path = executable_path
        self.headless = headless
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._tab: _Tab | None = None
        self._spare: asyncio.Task[_Tab] | None = None
        self._closing: set[asyncio.Task[Any]] = set()
        self._app_state: dict[str, Any] | None = None
        # The episode's pinch zoom: screen pixels are page pixels times this.
        self._page_scale = 1.0
        # The viewport of the next context prepared (the last episode's screen).
        self._screen = DEFAULT_SCREEN
        self.alive = False
        self.launches = 0

    async def start(self) -> None:
        if self._playwright is None:
            self._playwright = await async_playwright().start()
        t0 = time.perf_counter()
        self._browser = await self._playwright.chromium.launch(
            executable_path=self.executable_path,
            headless=self.headless,
            args=list(CHROMIUM_ARGS),
            # Headless hides scrollbars by default; the agent needs to see that the
            # sheet scrolls.
            ignore_default_args=["--hide-scrollbars"],
        )
        self._browser.on("disconnected", self._on_disconnected)
        self.alive = True
        self.launches += 1
        logger.info("Chromium up in %.2fs (%s)", time.perf_counter() - t0, self.executable_path)

    def _on_disconnected(self, _browser: Browser) -> None:
        logger.warning("Chromium disconnected")
        self.alive = False

    async def restart(self) -> None:
        """Replace a dead (or live) Chromium with a new one."""
        await self._close_browser()
        await self.start()

    async def stop(self) -> None:
        await self._close_browser()
        if self._playwright is not None:
            await self._playwright.stop()
            self._playwright = None

    async def _close_browser(self) -> None:
        if self._spare is not None:
            self._spare.cancel()
            self._spare = None
        self._tab = None
        if self._browser is not None:
            try:
                await self._browser.close()
            except Exception as exc:
                logger.warning("closing Chromium failed: %s", exc)
            self._browser = None
        self.alive = False

    async def _new_tab(self) -> _Tab:
        assert self._browser is not None
        context = await self._browser.new_context(
            viewport={"width": self._screen[0], "height": self._screen[1]},
            device_scale_factor=1,
            locale="en-US",
            timezone_id="UTC",
            color_scheme="light",
            reduced_motion="reduce",
        )
        await context.grant_permissions(["clipboard-read", "clipboard-write"])
        await context.expose_binding(RECORD_BINDING, self._on_record)
        await context.add_init_script(POPUP_GUARD_JS)  # as the CDP backend (chromium.py)
        page = await context.new_page()
        await page.goto(self.app_url, wait_until="load")
        cdp = await context.new_cdp_session(page)
        return _Tab(context=context, page=page, cdp=cdp)

    async def new_episode(
        self,
        app_state: dict[str, Any],
        page_scale: float = 1.0,
        screen: tuple[int, int] = DEFAULT_SCREEN,
        in_page: bool = False,
    ) -> Any:
        """Move to a fresh context and render ``app_state`` in it; clear the clipboard.
        Returns what the page's ``uirlLoad`` returned; ``page_scale``, ``screen``: see
        the CDP backend's ``new_episode``. ``in_page`` is not taken up here (this
        backend, kept for comparison, always starts a fresh context)."""
        del in_page
        if not self.alive:
            raise RuntimeError("Chromium is not running")
        self._screen = screen
        spare, self._spare = self._spare, None
        tab = None
        if spare is not None:
            try:
                tab = await spare
            except PlaywrightError as exc:
                logger.warning("the prepared context failed (%s); making a new one", exc)
        if tab is None:
            tab = await self._new_tab()
        elif tab.page.url != self.app_url:  # prepared with another task's app
            await tab.page.goto(self.app_url, wait_until="load")
        if tab.page.viewport_size != {"width": screen[0], "height": screen[1]}:
            await tab.page.set_viewport_size({"width": screen[0], "height": screen[1]})
        old, self._tab = self._tab, tab
        if old is not None:
            self._close_in_background(old.context.close())
        self._page_scale = page_scale
        await self._apply_page_scale()
        loaded = await tab.page.evaluate(
            "async (state) => { window.focus(); const loaded = await window.uirlLoad(state);"
            " await navigator.clipboard.writeText(''); return loaded ?? null; }",
            app_state,
        )
        self._app_state = app_state
        self._spare = asyncio.create_task(self._new_tab())
        return loaded

    async def _apply_page_scale(self) -> None:
        if self._page_scale != 1.0 and self._tab is not None:
            await self._tab.cdp.send(
                "Emulation.setPageScaleFactor", {"pageScaleFactor": self._page_scale}
            )

    def _xy(self, x: int | None, y: int | None) -> tuple[float, float]:
        """Screen pixels -> page pixels (Chromium's pointer input ignores pinch zoom)."""
        assert x is not None and y is not None
        return x / self._page_scale, y / self._page_scale

    def _on_record(self, source: Mapping[str, Any], event: Any) -> dict[str, Any]:
        """The task app's ``window.uirlRecord(event)``: hand the event to the task.

        Only the app's own page may record: a frame elsewhere (the agent cannot open
        one, but a task app might link out) is refused.
        """
        frame_url = source["frame"].url
        if not frame_url.startswith(self.app_url):
            raise ValueError(f"events are recorded only from the task app, not {frame_url}")
        if self.record_event is None:
            return {"recorded": False, "reason": "no recorder"}
        if not isinstance(event, Mapping):
            raise ValueError(f"an event must be an object, got {type(event).__name__}")
        return self.record_event(event)

    async def responsive(self, timeout_s: float = 2.0) -> bool:
        """Whether Chromium is there and the page answers (checked, not assumed)."""
        if not self.alive or self._tab is None:
            return self.alive
        try:
            await asyncio.wait_for(self._tab.page.evaluate("1"), timeout_s)
        except (PlaywrightError, TimeoutError) as exc:
            logger.warning("the page does not answer: %s", exc)
            return False
        return True

    def _close_in_background(self, coro: Awaitable[Any]) -> None:
        async def close() -> None:
            try:
                await coro
            except Exception as exc:
                logger.debug("closing an old context failed: %s", exc)

        task = asyncio.create_task(close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    @property
    def page(self) -> Page:
        if self._tab is None:
            raise RuntimeError("no episode: POST /reset first")
        return self._tab.page

    async def act(self, action: Action) -> None:
        """Perform a validated action, then wait until the page has settled.

        Settle rule: Playwright's input calls return once the browser has dispatched
        the event to the page; then any task work the app reports as pending (an
        in-flight submission) is awaited, and a navigation in progress must reach
        ``load``. The capture that follows composites a fresh frame.
        """
        page = self.page
        mouse = page.mouse
        t = action.type
        xy = self._xy(action.x, action.y) if action.x is not None else (0.0, 0.0)
        handlers: dict[ActionType, Callable[[], Awaitable[None]]] = {
            ActionType.SCREENSHOT: _noop,
            ActionType.FINISH: _noop,
            ActionType.MOUSE_MOVE: lambda: mouse.move(*xy),
            ActionType.LEFT_CLICK: lambda: mouse.click(*xy),
            ActionType.RIGHT_CLICK: lambda: mouse.click(*xy, button="right"),
            ActionType.DOUBLE_CLICK: lambda: mouse.dblclick(*xy),
            ActionType.TRIPLE_CLICK: lambda: mouse.click(*xy, click_count=3),
            ActionType.TYPE: lambda: self._type(action.text or ""),
            ActionType.KEYS: lambda: self._press(key_sequence(action.keys or "")),
            ActionType.SCROLL: lambda: self._scroll(action),
            ActionType.DRAG: lambda: self._drag(action),
        }
        # Modifiers a pointer action holds: Playwright's mouse events carry the keys
        # its keyboard holds down.
        held = held_modifiers(action.keys) if action.keys and t in HOLDING_ACTIONS else []
        try:
            for key in held:
                await page.keyboard.down(key)
            await handlers[t]()
        finally:
            for key in reversed(held):
                await page.keyboard.up(key)
        if t not in (ActionType.SCREENSHOT, ActionType.FINISH):
            await self._settle()

    async def _type(self, text: str) -> None:
        """Type ``text``; tabs and line breaks press Tab and Enter, as pyautogui does."""
        keyboard = self.page.keyboard
        for chunk in typed_chunks(text):
            if chunk in TYPED_KEYS:
                await keyboard.press(TYPED_KEYS[chunk])
            elif chunk:
                await keyboard.type(chunk)

    async def _press(self, keys: list[str]) -> None:
        """Press keys in order and release them in reverse (``pyautogui.hotkey``).

        Keys Playwright's keyboard lacks (``BrowserBack``, ``F13``...) go through CDP,
        with the modifiers held at that moment.
        """
        keyboard, held = self.page.keyboard, []
        try:
            for key in keys:
                if key in CDP_KEYS:
                    await self._cdp_key("rawKeyDown", key, held)
                else:
                    await keyboard.down(key)
                held.append(key)
        finally:
            for key in reversed(held):
                if key in CDP_KEYS:
                    await self._cdp_key("keyUp", key, held)
                else:
                    await keyboard.up(key)

    async def _cdp_key(self, kind: str, key: str, held: list[str]) -> None:
        assert self._tab is not None
        modifiers = sum(_MODIFIER_BITS.get(k.removesuffix("Left").removesuffix("Right"), 0)
                        for k in set(held))  # fmt: skip
        vk = CDP_KEYS[key]
        await self._tab.cdp.send(
            "Input.dispatchKeyEvent",
            {"type": kind, "key": key, "code": key, "modifiers": modifiers,
             "windowsVirtualKeyCode": vk, "nativeVirtualKeyCode": vk},
        )  # fmt: skip

    async def _drag(self, action: Action) -> None:
        """Press at (x, y), move to (end_x, end_y) in steps, release: what a person's
        drag sends. Intermediate moves let pages that track ``mousemove`` (sliders,
        selections) follow, and Playwright turns them into an HTML5 drag and drop when
        the pressed element is draggable."""
        mouse = self.page.mouse
        await mouse.move(*self._xy(action.x, action.y))
        await mouse.down()
        await mouse.move(*self._xy(action.end_x, action.end_y), steps=DRAG_MOVE_STEPS)
        await mouse.up()

    async def _scroll(self, action: Action) -> None:
        page = self.page
        if action.x is not None:
            await page.mouse.move(*self._xy(action.x, action.y))
        px = action.scroll_amount * SCROLL_NOTCH_PX
        dx, dy = {
            "up": (0, -px),
            "down": (0, px),
            "left": (-px, 0),
            "right": (px, 0),
        }[action.direction.value]  # type: ignore[union-attr]
        await page.mouse.wheel(dx, dy)
        # The wheel scroll is applied on the compositor after the event is dispatched.
        await self.settle_frame()

    async def _settle(self) -> None:
        page = self.page
        try:
            await page.evaluate(
                """async () => {
                    const t0 = performance.now();
                    while (window.uirlPending && window.uirlPending() > 0
                           && performance.now() - t0 < 5000) {
                        await new Promise((r) => setTimeout(r, 2));
                    }
                }"""
            )
            await page.wait_for_load_state("load")
            if await page.evaluate("() => window.uirlEpisode !== undefined"):
                return
        except PlaywrightError as exc:
            if "navigat" not in str(exc) and "context was destroyed" not in str(exc):
                raise
        await self._restore_after_navigation()

    async def _restore_after_navigation(self) -> None:
        """The agent navigated (a reload, history back): show the episode's app again.

        Like reloading a real form, the inputs come back empty; the task's record is
        kept by the server and is not affected.
        """
        page = self.page
        logger.info("the page navigated (now %s); restoring the task app", page.url)
        # Wherever it went (history back to about:blank, a form GET), load the app anew;
        # a navigation still in flight may interrupt ours once.
        for attempt in range(3):
            await page.wait_for_load_state("load")
            try:
                await page.goto(self.app_url, wait_until="load")
                break
            except PlaywrightError as exc:
                if attempt == 2 or "interrupted by another navigation" not in str(exc):
                    raise
        await self._apply_page_scale()
        await page.evaluate("(state) => window.uirlLoad(state)", self._app_state)

    async def settle_frame(self) -> None:
        """Wait until a frame has been produced after this call (two animation frames)."""
        await self.page.evaluate(
            "() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))"
        )

    async def capture(self, fmt: ImageFormat = ImageFormat.PNG, jpeg_quality: int = 90) -> bytes:
        """The screen now, as PNG, JPEG or raw RGB (height x width x 3, row-major)."""
        if self._tab is None:
            raise RuntimeError("no episode: POST /reset first")
        params: dict[str, Any] = {"format": "png", "optimizeForSpeed": True}
        if fmt is ImageFormat.JPEG:
            params = {"format": "jpeg", "quality": jpeg_quality, "optimizeForSpeed": True}
        result = await self._tab.cdp.send("Page.captureScreenshot", params)
        data = base64.b64decode(result["data"])
        if fmt is ImageFormat.RAW:
            return _png_to_rgb(data)
        return data

    async def inspect(self) -> dict[str, Any]:
        return await self.page.evaluate("() => window.uirlInspect()")


async def _noop() -> None:
    return None


def _png_to_rgb(png: bytes) -> bytes:
    from PIL import Image

    with Image.open(io.BytesIO(png)) as img:
        return img.convert("RGB").tobytes()

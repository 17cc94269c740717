"""The browser session: one Chromium per session, driven over its DevTools pipe.

No Playwright Node driver between the server and Chromium (the backend before issue 11,
removed in issue 34): a command is one write on the pipe, a screenshot arrives once (Chromium -> Python) instead of twice
(Chromium -> Node -> Python), and ~100 MB of driver per session is gone.

What it does the way Playwright does, so that the page sees the same events:
- keys: Playwright's US layout (``keyboard.py``): ``Input.dispatchKeyEvent`` with the
  same key, code, key codes and text; characters outside the layout are inserted
  (``Input.insertText``); a typed text's key events are sent without waiting for each
  answer (Chromium queues them; the page gets the same events in the same order);
- mouse: ``mouseMoved`` then ``mousePressed``/``mouseReleased`` per click count;
  wheel at the pointer's place;
- contexts: ``Target.createBrowserContext`` per episode, clipboard permissions granted
  to the app's origin, the viewport, locale, time zone, colour scheme, reduced motion
  and focus emulated per page;
- the submission binding: ``Runtime.addBinding`` plus a page script that turns
  ``window.uirlRecord(event)`` into a promise, resolved once the server recorded it.

Frames on demand (the headless shell): Chromium draws a frame only when the server
asks for one (``HeadlessExperimental.beginFrame``), and a screenshot is taken from the
frame drawn for it. A capture then costs one frame's work and no wait for the next
vsync tick (~3 ticks, ~50 ms, per capture otherwise), and a session draws nothing
between steps: no CPU for a blinking caret or a CSS animation while the agent thinks.
The full Chromium has no such mode; it draws at 60 Hz and is captured with
``Page.captureScreenshot``.
"""

from __future__ import annotations

import asyncio
import base64
import io
import logging
import math
import os
import shlex
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import orjson

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
from uirl_gym.protocol import ImageFormat
from uirl_gym.session.browser.cdp import CdpConnection, CdpError, ChromiumProcess
from uirl_gym.session.browser.chromium import POPUP_GUARD_JS, is_headless_shell
from uirl_gym.session.browser.keys import LAYOUT, MODIFIERS, describe, modifier_mask

logger = logging.getLogger(__name__)

# Renderer flags for a static page: no smooth scrolling (a wheel scroll lands at once),
# no GPU (software compositing, as before), hinting off (the same glyphs everywhere), and
# no partial raster: a tile is redrawn whole, so a page drawn again in place (a MiniWoB++
# episode restarted in its page) has the same anti-aliased edges as a fresh one
# (partial raster left rounded corners 1-16 pixels different).
CHROMIUM_ARGS = (
    "--disable-gpu",
    "--font-render-hinting=none",
    "--disable-smooth-scrolling",
    "--disable-partial-raster",
    # Fewer processes per session (measured with 4 sessions: ~-24 MB PSS each): the GPU
    # (software compositing) and network services run in the browser process, and no
    # zygote forks the renderers (the sandbox is off anyway: cdp.py). And no SwiftShader
    # loaded for a GPU that is off anyway (-10 MB each; compositing stays software).
    "--in-process-gpu",
    "--no-zygote",
    "--enable-features=NetworkServiceInProcess2",
    "--disable-software-rasterizer",
)
# More Chromium switches, for experiments (space-separated, shell quoting).
EXTRA_ARGS_ENV_VAR = "UIRL_CHROMIUM_EXTRA_ARGS"
# Frames on demand (see the module's docstring). Without RasterInducingScroll: a scroller
# the compositor scrolls without a layer of its own (a textarea's scrollbar pressed at
# pinch zoom 3) is redrawn by an impl-side invalidation, and when that and a commit from
# the page land in the same frame, Chromium 156's scheduler, waiting for every stage
# before it draws, waits for the new tree's activation, which waits for the draw: the
# frame is never answered (traced: ``has_pending_tree`` and
# ``active_tree_needs_first_draw``, deadline blocked). The page then scrolls as before
# that feature: its main thread repaints the scroller.
#
# And no image animation (a GIF, APNG or WebP shows its first frame): the compositor
# advances an animated image by the same impl-side invalidation, and one due in the
# frame that also commits a change from the page (text typed while a spinner turns:
# MiniWoB's flight.AA) ends in the same stall (traced: ``ImageAnimationController``
# asked for the frame; ``has_pending_tree``, ``active_tree_needs_first_draw``, deadline
# blocked). Chromium's own switches for frame control (``--disable-threaded-animation``,
# ``--disable-checker-imaging``, ``--disable-image-animation-resync``) did not prevent
# it. A still image is also what a screenshot can show the same way every time.
FRAME_CONTROL_ARGS = (
    "--enable-begin-frame-control",
    "--run-all-compositor-stages-before-draw",
    "--disable-features=RasterInducingScroll",
    "--blink-settings=imageAnimationPolicy=2",  # Blink's kImageAnimationPolicyNoAnimation
)
# "0" draws at 60 Hz with the headless shell too (for comparisons and odd apps).
FRAME_CONTROL_ENV_VAR = "UIRL_FRAMES_ON_DEMAND"
# Input Chromium delivers to the page with the next frame (rAF-aligned): under frame
# control the server must draw frames until the event is taken.
_FRAME_ALIGNED_MOUSE_EVENTS = frozenset({"mouseMoved"})
RECORD_BINDING = "uirlRecord"
_RAW_BINDING = "__uirlRecordRaw"
# Runs in every new document before the app's scripts: only this closure keeps the raw
# binding (the global is deleted), and ``uirlRecord`` resolves when the server answers.
_BINDING_SHIM = f"""(() => {{
  const raw = globalThis.{_RAW_BINDING};
  if (!raw) return;
  delete globalThis.{_RAW_BINDING};
  const calls = new Map();
  let seq = 0;
  Object.defineProperty(globalThis, "__uirlDeliver", {{
    value: (id, ok, value) => {{
      const call = calls.get(id);
      if (!call) return;
      calls.delete(id);
      ok ? call.resolve(value) : call.reject(new Error(value));
    }},
  }});
  globalThis.{RECORD_BINDING} = (event) => new Promise((resolve, reject) => {{
    const id = ++seq;
    calls.set(id, {{resolve, reject}});
    raw(JSON.stringify({{id, event}}));
  }});
}})();"""
_SETTLE_JS = """(async () => {
  const t0 = performance.now();
  while (window.uirlPending && window.uirlPending() > 0 && performance.now() - t0 < 5000) {
    await new Promise((r) => setTimeout(r, 2));
  }
  return document.readyState === "complete" && window.uirlEpisode !== undefined;
})()"""
# A wheel notch under frames on demand: Chromium's own wheel path never finishes a frame
# when the scroller under the pointer holds a sticky table header (measured: Chromium
# 156's headless shell, ``beginFrame`` unanswered), so the page gets what a wheel gives
# it: a cancelable ``wheel`` event at the pointer, then the whole delta scrolls the
# innermost element that can scroll that way and lets the user scroll it (Chromium's
# wheel latching), else the page.
_WHEEL_JS = """(({x, y, dx, dy, ctrlKey, shiftKey, altKey, metaKey}) => {
  const target = document.elementFromPoint(x, y) || document.documentElement;
  const wheel = new WheelEvent("wheel", {bubbles: true, cancelable: true, composed: true,
    clientX: x, clientY: y, screenX: x, screenY: y, deltaX: dx, deltaY: dy, deltaMode: 0,
    view: window, ctrlKey, shiftKey, altKey, metaKey});
  if (!target.dispatchEvent(wheel)) return "prevented";
  const root = document.scrollingElement || document.documentElement;
  const userScrolls = (el, axis) => {
    if (el === root) {
      const html = getComputedStyle(document.documentElement)[axis];
      const body = document.body ? getComputedStyle(document.body)[axis] : "visible";
      return (html === "visible" ? body : html) !== "hidden" && html !== "clip";
    }
    return ["auto", "scroll", "overlay"].includes(getComputedStyle(el)[axis]);
  };
  const room = (el) => ({
    x: dx < 0 ? el.scrollLeft : el.scrollWidth - el.clientWidth - el.scrollLeft,
    y: dy < 0 ? el.scrollTop : el.scrollHeight - el.clientHeight - el.scrollTop,
  });
  for (let el = target; el; el = el.parentElement || (el !== root ? root : null)) {
    const r = room(el);
    const xs = dx !== 0 && r.x >= 1 && userScrolls(el, "overflowX");
    const ys = dy !== 0 && r.y >= 1 && userScrolls(el, "overflowY");
    if (xs || ys) {
      el.scrollBy({left: xs ? dx : 0, top: ys ? dy : 0, behavior: "instant"});
      return "scrolled";
    }
    if (el === root) break;
  }
  return "nothing to scroll";
})"""
# Whether a page point is on a scrollbar: the viewport's (no element there), or the
# part of an element's border box outside its client area and borders.
_ON_SCROLLBAR_JS = """((x, y) => {
  const el = document.elementFromPoint(x, y);
  if (!el) return x >= 0 && y >= 0 && x < innerWidth && y < innerHeight;
  const box = el.getBoundingClientRect();
  const style = getComputedStyle(el);
  const left = box.left + el.clientLeft, top = box.top + el.clientTop;
  const right = box.right - parseFloat(style.borderRightWidth);
  const bottom = box.bottom - parseFloat(style.borderBottomWidth);
  const inX = x >= left && x < right, inY = y >= top && y < bottom;
  const vertical = el.offsetWidth - el.clientWidth - el.clientLeft
    - parseFloat(style.borderRightWidth) > 0;
  const horizontal = el.offsetHeight - el.clientHeight - el.clientTop
    - parseFloat(style.borderBottomWidth) > 0;
  return (vertical && inY && x >= left + el.clientWidth && x < right) ||
    (horizontal && inX && y >= top + el.clientHeight && y < bottom);
})"""
_TWO_FRAMES_JS = "new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))"
_NAVIGATION_ERRORS = ("context was destroyed", "Cannot find context", "navigated or closed")
_BUTTON_BITS = {"left": 1, "right": 2, "middle": 4}
LOAD_TIMEOUT_S = 30.0

EventRecorder = Any  # Callable[[Mapping[str, Any]], dict[str, Any]]


def _set_event() -> asyncio.Event:
    event = asyncio.Event()
    event.set()
    return event


@dataclass
class _Tab:
    """One episode's browser context and its page (an attached target)."""

    context_id: str
    target_id: str
    session_id: str
    # Set once the document on the screen has fired ``load`` (cleared when a new document
    # commits, not by a same-document navigation: a hash link, ``history.pushState``).
    loaded: asyncio.Event = field(default_factory=asyncio.Event)
    # Set while no navigation is in flight in the main frame.
    idle: asyncio.Event = field(default_factory=_set_event)
    url: str = ""  # the app it was loaded with
    screen: tuple[int, int] = DEFAULT_SCREEN  # its viewport (width, height)
    page_scale: float = 1.0
    # execution context id -> (origin, frame id, is the frame's main world)
    contexts: dict[int, tuple[str, str, bool]] = field(default_factory=dict)


class CdpBrowserSession:
    """A Chromium process and the page the agent acts on, driven over CDP.

    Attributes:
        app_url: the task app's URL (served by the session server).
        alive: False once Chromium has gone.
        launches: how many times Chromium was started.
        in_page_episodes: how many episodes restarted in the page of the last one.

    Methods:
        start / stop / restart: launch and close Chromium.
        new_episode: switch to a fresh context and render the episode's app state.
        act: perform an action, wait for the page to settle.
        capture: the current screen as PNG / JPEG / raw RGB bytes.
        inspect: the task app's privileged page state (element boxes, values).
        responsive: whether the page answers (checked, not assumed).
    """

    backend = "cdp"

    def __init__(
        self,
        app_url: str,
        executable_path: str,
        headless: bool = True,
        record_event: EventRecorder | None = None,
    ) -> None:
        self.app_url = app_url
        self._app_origin = "{0.scheme}://{0.netloc}".format(urlsplit(app_url))
        self.record_event = record_event
        self.executable_path = executable_path
        self.headless = headless
        self._process: ChromiumProcess | None = None
        self._tab: _Tab | None = None
        self._spare: asyncio.Task[_Tab] | None = None
        self._after_capture: list[Callable[[], Awaitable[None]]] = []
        self._background: set[asyncio.Task[Any]] = set()
        self._app_state: dict[str, Any] | None = None
        self._mouse = (0, 0)
        self._held: set[str] = set()  # modifiers a pointer action holds down
        # The episode's pinch zoom: screen pixels are page pixels times this.
        self._page_scale = 1.0
        # The viewport of the next context prepared (the last episode's screen).
        self._screen = DEFAULT_SCREEN
        self.alive = False
        self.launches = 0
        # Episodes started in the page of the last one (``new_episode(in_page=True)``).
        self.in_page_episodes = 0
        # Page targets (target id -> browser context id), and how many a page opened that
        # were closed (see _on_target_created).
        self._pages: dict[str, str] = {}
        self.popups_closed = 0
        self.frames_on_demand = (
            is_headless_shell(executable_path)
            and headless
            and os.environ.get(FRAME_CONTROL_ENV_VAR, "1") != "0"
        )

    # -- the browser -------------------------------------------------------------------

    async def start(self) -> None:
        t0 = time.perf_counter()
        extra = shlex.split(os.environ.get(EXTRA_ARGS_ENV_VAR, ""))
        frame_args = FRAME_CONTROL_ARGS if self.frames_on_demand else ()
        self._process = await ChromiumProcess.launch(
            self.executable_path, [*CHROMIUM_ARGS, *frame_args, *extra], headless=self.headless
        )
        self._process.connection.on("__closed__", self._on_closed)
        self._pages = {}
        self._process.connection.on("Target.targetCreated", self._on_target_created)
        self._process.connection.on("Target.targetDestroyed", self._on_target_destroyed)
        await self._cdp.send("Target.setDiscoverTargets", {"discover": True})
        self.alive = True
        self.launches += 1
        kind = "headless shell" if is_headless_shell(self.executable_path) else "full Chromium"
        logger.info(
            "Chromium up in %.2fs over CDP (%s: %s; frames %s)",
            time.perf_counter() - t0,
            kind,
            self.executable_path,
            "on demand" if self.frames_on_demand else "at 60 Hz",
        )
        if self.headless and is_headless_shell(self.executable_path):
            # (A full Chromium could quit with its last window.)
            await self._close_startup_pages()
        # The first episode's context is prepared while the server finishes starting.
        self._spare = asyncio.create_task(self._new_tab())

    async def _close_startup_pages(self) -> None:
        """Close the blank page the headless shell opens at start (no episode of ours is
        there yet): every episode has its own context, and that page kept a renderer
        (~15 MB) alive."""
        for target in (await self._cdp.send("Target.getTargets"))["targetInfos"]:
            if target["type"] == "page":
                await self._cdp.send("Target.closeTarget", {"targetId": target["targetId"]})

    def _on_target_destroyed(self, params: dict[str, Any]) -> None:
        self._pages.pop(params.get("targetId", ""), None)

    def _on_target_created(self, params: dict[str, Any]) -> None:
        """A second page in an episode's context was opened by its page (a new tab or
        window): close it. The popup guard keeps pages from opening one; this is the
        backstop for what it cannot see (a script's ``form.submit()`` to a new window)."""
        info = params.get("targetInfo", {})
        if info.get("type") != "page":
            return
        target_id, context = info.get("targetId", ""), info.get("browserContextId", "")
        if context and context in self._pages.values():
            self.popups_closed += 1
            logger.warning("the page opened a new tab (%s); closed it", info.get("url"))
            self._in_background(self._cdp.send("Target.closeTarget", {"targetId": target_id}))
            return
        self._pages[target_id] = context

    @property
    def open_pages(self) -> int:
        """Page targets open in Chromium (the episode's and the one prepared)."""
        return len(self._pages)

    def waiting_on(self) -> str:
        """The CDP commands sent and not answered yet, e.g. ``Input.dispatchMouseEvent
        (9.8s)``; ``none`` when the wait was the server's own (a settle or a frame)."""
        if self._process is None:
            return "none (Chromium is not running)"
        return describe_unanswered(self._process.connection.unanswered())

    def _on_closed(self, params: dict[str, Any]) -> None:
        if self.alive:
            logger.warning("Chromium disconnected (%s)", params.get("reason"))
        self.alive = False

    async def restart(self) -> None:
        """Replace a dead (or live) Chromium with a new one."""
        await self._close_browser()
        await self.start()

    async def stop(self) -> None:
        await self._close_browser()

    async def _close_browser(self) -> None:
        self.alive = False  # background work started before this makes no new context
        if self._spare is not None:
            self._spare.cancel()
            self._spare = None
        self._after_capture = []
        self._tab = None
        if self._process is not None:
            process, self._process = self._process, None
            try:
                await process.close()
            except Exception as exc:
                logger.warning("closing Chromium failed: %s", exc)
        self.alive = False

    @property
    def _cdp(self) -> CdpConnection:
        if self._process is None:
            raise CdpError("Chromium is not running")
        return self._process.connection

    # -- contexts and episodes ---------------------------------------------------------

    async def _new_tab(self) -> _Tab:
        cdp = self._cdp
        width, height = screen = self._screen
        context_id = (await cdp.send("Target.createBrowserContext"))["browserContextId"]
        await cdp.send(
            "Browser.grantPermissions",
            {
                "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"],
                "origin": self._app_origin,
                "browserContextId": context_id,
            },
        )
        target_id = (
            await cdp.send(
                "Target.createTarget",
                {
                    "url": "about:blank",
                    "browserContextId": context_id,
                    "width": width,
                    "height": height,
                    "enableBeginFrameControl": self.frames_on_demand,
                },
            )
        )["targetId"]
        session_id = (
            await cdp.send("Target.attachToTarget", {"targetId": target_id, "flatten": True})
        )["sessionId"]
        tab = _Tab(context_id=context_id, target_id=target_id, session_id=session_id, screen=screen)
        self._listen(tab)
        send = cdp.send
        await asyncio.gather(
            send("Page.enable", session_id=session_id),
            send("Runtime.enable", session_id=session_id),
            self._set_viewport(tab, screen),
            send("Emulation.setFocusEmulationEnabled", {"enabled": True}, session_id=session_id),
            send("Emulation.setLocaleOverride", {"locale": "en-US"}, session_id=session_id),
            send("Emulation.setTimezoneOverride", {"timezoneId": "UTC"}, session_id=session_id),
            send(
                "Emulation.setEmulatedMedia",
                {
                    "features": [
                        {"name": "prefers-color-scheme", "value": "light"},
                        {"name": "prefers-reduced-motion", "value": "reduce"},
                    ]
                },
                session_id=session_id,
            ),
            send("Runtime.addBinding", {"name": _RAW_BINDING}, session_id=session_id),
            send(
                "Page.addScriptToEvaluateOnNewDocument",
                {"source": _BINDING_SHIM + POPUP_GUARD_JS},
                session_id=session_id,
            ),
        )
        await self._navigate(tab, self.app_url)
        return tab

    async def _set_viewport(self, tab: _Tab, screen: tuple[int, int]) -> None:
        width, height = screen
        await self._cdp.send(
            "Emulation.setDeviceMetricsOverride",
            {
                "width": width,
                "height": height,
                "deviceScaleFactor": 1,
                "mobile": False,
                "screenWidth": width,
                "screenHeight": height,
            },
            session_id=tab.session_id,
        )
        tab.screen = screen

    def _listen(self, tab: _Tab) -> None:
        cdp, sid = self._cdp, tab.session_id

        # A navigation starts and stops loading; only one that commits a new document
        # (``frameNavigated``) waits for that document's ``load``. A same-document one
        # (``navigatedWithinDocument``: a hash link, ``pushState``) fires no ``load``, and
        # waiting for one stalled the action until its timeout (MiniWoB's search-engine).
        def started(params: dict[str, Any]) -> None:
            if params.get("frameId") == tab.target_id:
                tab.idle.clear()

        def stopped(params: dict[str, Any]) -> None:
            if params.get("frameId") == tab.target_id:
                tab.idle.set()

        def navigated(params: dict[str, Any]) -> None:
            if params.get("frame", {}).get("id") == tab.target_id:
                tab.loaded.clear()

        def load_fired(_params: dict[str, Any]) -> None:
            tab.loaded.set()

        def context_created(params: dict[str, Any]) -> None:
            ctx = params["context"]
            aux = ctx.get("auxData", {})
            tab.contexts[ctx["id"]] = (
                ctx.get("origin", ""),
                aux.get("frameId", ""),
                bool(aux.get("isDefault")),
            )

        def context_destroyed(params: dict[str, Any]) -> None:
            tab.contexts.pop(params.get("executionContextId", 0), None)

        cdp.on("Page.frameStartedLoading", started, sid)
        cdp.on("Page.frameStoppedLoading", stopped, sid)
        cdp.on("Page.frameNavigated", navigated, sid)
        cdp.on("Page.loadEventFired", load_fired, sid)
        cdp.on("Runtime.executionContextCreated", context_created, sid)
        cdp.on("Runtime.executionContextDestroyed", context_destroyed, sid)
        cdp.on("Runtime.executionContextsCleared", lambda _p: tab.contexts.clear(), sid)
        cdp.on("Runtime.bindingCalled", lambda p: self._on_binding(tab, p), sid)

    async def _navigate(self, tab: _Tab, url: str) -> None:
        tab.url = url
        was_loaded = tab.loaded.is_set()
        # Cleared before: the new document's load event may come before the answer.
        tab.loaded.clear()
        result = await self._cdp.send(
            "Page.navigate", {"url": url}, session_id=tab.session_id, timeout_s=LOAD_TIMEOUT_S
        )
        if result.get("errorText"):
            raise CdpError(f"loading {url} failed: {result['errorText']}", method="Page.navigate")
        if not result.get("loaderId") and was_loaded:  # same-document: no load event comes
            tab.loaded.set()
        await self._wait_loaded(tab)

    async def _wait_loaded(self, tab: _Tab) -> None:
        """Until no navigation is in flight and the document on the screen has loaded."""
        try:
            async with asyncio.timeout(LOAD_TIMEOUT_S):
                await tab.idle.wait()
                await tab.loaded.wait()
        except TimeoutError:
            raise CdpError(f"the page did not load within {LOAD_TIMEOUT_S:.0f}s") from None

    async def new_episode(
        self,
        app_state: dict[str, Any],
        page_scale: float = 1.0,
        screen: tuple[int, int] = DEFAULT_SCREEN,
        in_page: bool = False,
    ) -> Any:
        """Start an episode: render ``app_state`` in a fresh context (or, ``in_page``, in
        the page on the screen); clear the clipboard. Returns what the page's
        ``uirlLoad`` returned (JSON).

        ``page_scale`` zooms the page (pinch zoom: its layout is untouched); pointer
        input is mapped back from screen to page pixels (divided by it). ``screen`` is
        the viewport (width, height).

        ``in_page`` (the task says its page restarts an episode cleanly, MiniWoB++'s
        ``core.startEpisodeReal``): when the page on the screen holds the same app at
        the same screen and zoom, ``uirlLoad`` runs there again: no context switch, and
        no spare context is kept (one renderer instead of two). Otherwise the fresh
        context is the one prepared during the previous episode, always: a context
        re-rendered in place (once reused after a reset right after a reset) drew some
        anti-aliased edges differently from a fresh one, and the same seed then gave
        another first screenshot (Gymnasium's reset determinism). Disposing of the old
        context and preparing the next one wait until the new episode's first
        screenshot is taken, so that they do not compete with it for the CPU.
        """
        if not self.alive:
            raise CdpError("Chromium is not running")
        current = self._tab
        self._screen = screen
        # Not under pinch zoom: the last episode may have panned the visual viewport (a
        # focused field is scrolled into view), and a restarted page kept that pan, so the
        # MiniWoB++ expert's clicks landed off its elements (seen at zoom 2).
        reuse = (
            in_page
            and page_scale == 1.0
            and current is not None
            and current.url == self.app_url
            and current.screen == screen
            and current.page_scale == page_scale
        )
        if reuse:
            assert current is not None
            self.in_page_episodes += 1
            # The pointer leaves the page, as in a fresh one (no hover left behind).
            await self._input(
                "Input.dispatchMouseEvent",
                {"type": "mouseMoved", "x": -1, "y": -1, "button": "none", "buttons": 0},
            )
            if self._spare is not None:  # one renderer is enough while pages restart
                spare, self._spare = self._spare, None
                self._after_capture.append(lambda: self._dispose_spare(spare))
        else:
            tab = await self._take_spare()
            if tab.url != self.app_url:  # prepared with another task's app
                await self._navigate(tab, self.app_url)
            if tab.screen != screen:  # prepared for another screen size
                await self._set_viewport(tab, screen)
            self._tab = tab
            if current is not None:
                self._after_capture.append(lambda: self._dispose(current))
            if not in_page:
                self._after_capture.append(self._prepare_spare)
            self._page_scale = page_scale
            tab.page_scale = page_scale
            await self._apply_page_scale()
        # The document takes the focus back first, as a fresh page has it: an agent that
        # tabbed out of it (past the last field) left it unfocused, and clearing the
        # clipboard then failed ("Document is not focused") at every in-page reset.
        loaded = await self._eval(
            f"(async () => {{ window.focus(); "
            f"const loaded = await {_js_call('window.uirlLoad', app_state)}; "
            "await navigator.clipboard.writeText(''); return loaded ?? null; })()"
        )
        self._app_state = app_state
        self._mouse = (0, 0)
        return loaded

    async def _apply_page_scale(self) -> None:
        # Every page starts at 1 (a fresh context, or a restored app): set it only when
        # the episode asks for another.
        if self._page_scale != 1.0:
            await self._cdp.send(
                "Emulation.setPageScaleFactor",
                {"pageScaleFactor": self._page_scale},
                session_id=self._current().session_id,
            )

    async def _take_spare(self) -> _Tab:
        spare, self._spare = self._spare, None
        if spare is not None:
            try:
                return await spare
            except CdpError as exc:
                logger.warning("the prepared context failed (%s); making a new one", exc)
        return await self._new_tab()

    async def _prepare_spare(self) -> None:
        if self._spare is None and self.alive:
            self._spare = asyncio.create_task(self._new_tab())

    def _run_after_capture(self) -> None:
        work, self._after_capture = self._after_capture, []
        for start in work:
            self._in_background(start())

    async def _dispose_spare(self, spare: asyncio.Task[_Tab]) -> None:
        try:
            tab = await spare
        except CdpError:
            return
        await self._dispose(tab)

    async def _dispose(self, tab: _Tab) -> None:
        self._cdp.off_session(tab.session_id)
        await self._cdp.send("Target.disposeBrowserContext", {"browserContextId": tab.context_id})

    def _in_background(self, coro: Any) -> None:
        async def run() -> None:
            try:
                await coro
            except Exception as exc:
                logger.debug("background browser work failed: %s", exc)

        task = asyncio.create_task(run())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _on_binding(self, tab: _Tab, params: dict[str, Any]) -> None:
        """The task app's ``window.uirlRecord(event)``: hand the event to the task.

        Only the app's own page may record: a call from another origin or from a frame
        that is not the page's main frame is refused.
        """
        if params.get("name") != _RAW_BINDING:
            return
        context_id = params.get("executionContextId", 0)
        try:
            call = orjson.loads(params.get("payload", ""))
            call_id = int(call["id"])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            logger.warning("a malformed binding call was ignored")
            return
        origin, frame_id, _ = tab.contexts.get(context_id, ("", "", False))
        try:
            if origin != self._app_origin or frame_id != tab.target_id:
                raise ValueError(f"events are recorded only from the task app, not {origin!r}")
            event = call.get("event")
            if not isinstance(event, Mapping):
                raise ValueError(f"an event must be an object, got {type(event).__name__}")
            if self.record_event is None:
                result: Any = {"recorded": False, "reason": "no recorder"}
            else:
                result = self.record_event(event)
            ok, value = True, result
        except Exception as exc:
            ok, value = False, str(exc)
        expression = _js_call("globalThis.__uirlDeliver", call_id, ok, value)
        self._in_background(
            self._cdp.send(
                "Runtime.evaluate",
                {"expression": expression, "contextId": context_id},
                session_id=tab.session_id,
            )
        )

    # -- page access -------------------------------------------------------------------

    def _current(self) -> _Tab:
        if self._tab is None:
            raise RuntimeError("no episode: POST /reset first")
        return self._tab

    async def _eval(self, expression: str, timeout_s: float = LOAD_TIMEOUT_S) -> Any:
        tab = self._current()
        result = await self._cdp.send(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
            session_id=tab.session_id,
            timeout_s=timeout_s,
        )
        details = result.get("exceptionDetails")
        if details:
            text = details.get("exception", {}).get("description") or details.get("text")
            raise CdpError(f"the page threw: {text}", method="Runtime.evaluate")
        return result.get("result", {}).get("value")

    async def responsive(self, timeout_s: float = 2.0) -> bool:
        """Whether Chromium is there and the page answers (checked, not assumed)."""
        if not self.alive or self._tab is None:
            return self.alive
        try:
            await self._eval("1", timeout_s=timeout_s)
        except CdpError as exc:
            logger.warning("the page does not answer: %s", exc)
            return False
        return True

    async def inspect(self) -> dict[str, Any]:
        return await self._eval("window.uirlInspect()")

    # -- actions -----------------------------------------------------------------------

    async def act(self, action: Action) -> None:
        """Perform a validated action, then wait until the page has settled.

        Settle rule: each input command returns once Chromium has dispatched the event to
        the page; then the task work the app reports as pending (an in-flight
        submission) is awaited, and a navigation in progress must reach ``load``.
        """
        self._current()  # refuses before the first episode
        t = action.type
        if t in (ActionType.SCREENSHOT, ActionType.FINISH):
            return
        held = held_modifiers(action.keys) if action.keys and t in HOLDING_ACTIONS else []
        try:
            # A person's shift+click: the modifier's keydown, the mouse events with its
            # flag (``_input`` adds it), then its keyup.
            for key in held:
                await self._key_event("down", key, self._held, repeat=False)
            await self._perform(action)
        finally:
            for key in reversed(held):
                await self._key_event("up", key, self._held, repeat=False)
        await self._settle()

    async def _perform(self, action: Action) -> None:
        t = action.type
        if t is ActionType.MOUSE_MOVE:
            await self._mouse_move(*action.point)
        elif t is ActionType.LEFT_CLICK:
            await self._click(*action.point, "left", 1)
        elif t is ActionType.RIGHT_CLICK:
            await self._click(*action.point, "right", 1)
        elif t is ActionType.DOUBLE_CLICK:
            await self._click(*action.point, "left", 2)
        elif t is ActionType.TRIPLE_CLICK:
            await self._click(*action.point, "left", 3)
        elif t is ActionType.TYPE:
            await self._type(action.text or "")
        elif t is ActionType.KEYS:
            await self._press(key_sequence(action.keys or ""))
        elif t is ActionType.SCROLL:
            await self._scroll(action)
        elif t is ActionType.DRAG:
            await self._drag(action)

    async def _input(self, method: str, params: dict[str, Any], *, frames: bool = True) -> None:
        """Dispatch an input event; a frame-aligned one is delivered by frames begun
        until Chromium acknowledges it (``frames=False``: by the next frame anyone begins)."""
        session_id = self._current().session_id
        if "x" in params:
            x, y = self._page_point(params["x"], params["y"])
            params = {**params, "x": x, "y": y}
        if self._held and method == "Input.dispatchMouseEvent":
            params = {**params, "modifiers": modifier_mask(self._held)}
        aligned = params.get("type") in _FRAME_ALIGNED_MOUSE_EVENTS
        if not (self.frames_on_demand and aligned and frames):
            await self._cdp.send(method, params, session_id=session_id)
            return
        sent = asyncio.ensure_future(self._cdp.send(method, params, session_id=session_id))
        begun = 0
        while not sent.done():
            await self._begin_frame()
            begun += 1
            # A frame begun before the event reached the renderer does not deliver it
            # (about half the time): the next one does, so the first frames follow each
            # other closely (one without damage costs ~1 ms); should more be needed
            # (a loaded machine), draw at 60 Hz, as a display would, until Chromium
            # acknowledges the event (or the command times out).
            await asyncio.wait({sent}, timeout=0.003 if begun < 4 else 0.016)
        await sent

    def _page_point(self, x: float, y: float) -> tuple[int, int]:
        """The page pixel under a screen point (Chromium takes pointer input in page
        pixels, whatever the pinch zoom): the pixel's corner, as at zoom 1, never a
        fraction. At a fractional point on the edge of a scrollbar's thumb (screen pixel
        320 at zoom 3 is page x 106.67) the compositor and the page disagreed about what
        was pressed, and the drag that followed left ``beginFrame`` unanswered for good
        (MiniWoB's copy-paste at zoom 2 and 3, found by the stall hunt); a drag's steps
        between its ends are whole pixels too."""
        s = self._page_scale
        return math.floor(x / s), math.floor(y / s)

    async def _begin_frame(self, screenshot: dict[str, Any] | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {} if screenshot is None else {"screenshot": screenshot}
        return await self._cdp.send(
            "HeadlessExperimental.beginFrame", params, session_id=self._current().session_id
        )

    async def _mouse_move(self, x: int, y: int) -> None:
        self._mouse = (x, y)
        await self._input(
            "Input.dispatchMouseEvent",
            {"type": "mouseMoved", "x": x, "y": y, "button": "none", "buttons": 0},
        )

    async def _click(self, x: int, y: int, button: str, count: int) -> None:
        await self._mouse_move(x, y)
        for n in range(1, count + 1):
            for kind, buttons in (("mousePressed", _BUTTON_BITS[button]), ("mouseReleased", 0)):
                await self._input(
                    "Input.dispatchMouseEvent",
                    {
                        "type": kind,
                        "x": x,
                        "y": y,
                        "button": button,
                        "buttons": buttons,
                        "clickCount": n,
                    },
                )

    async def _drag(self, action: Action) -> None:
        """Press at (x, y), move to (end_x, end_y) in steps with the button held, release:
        the events a person's drag sends (pointer-event drags, selections, sliders)."""
        (x0, y0), (x1, y1) = action.point, action.end_point
        await self._mouse_move(x0, y0)
        # Frames begun between the moves of a drag that holds a scrollbar's thumb stop
        # Chromium for good (measured: Chromium 156's headless shell, ``beginFrame``
        # unanswered after the second move, on the viewport's scrollbars). So a drag that
        # starts on a scrollbar moves once, to its end, and one frame delivers that move
        # before the release (Chromium scrolls for one thumb move per frame): the thumb
        # ends where it is dropped, as at 60 Hz. Nothing else is lost: a page gets no
        # mousemove while a scrollbar holds the pointer.
        on_scrollbar = self.frames_on_demand and await self._eval(
            _js_call(_ON_SCROLLBAR_JS, *self._page_point(x0, y0))
        )
        left = _BUTTON_BITS["left"]
        press = {"button": "left", "buttons": left, "clickCount": 1}
        await self._input(
            "Input.dispatchMouseEvent", {"type": "mousePressed", "x": x0, "y": y0, **press}
        )
        steps = 1 if on_scrollbar else DRAG_MOVE_STEPS
        for i in range(1, steps + 1):
            x = x0 + (x1 - x0) * i / steps
            y = y0 + (y1 - y0) * i / steps
            move = {"type": "mouseMoved", "x": x, "y": y, "button": "left", "buttons": left}
            if on_scrollbar:
                self._in_background(self._input("Input.dispatchMouseEvent", move, frames=False))
                await asyncio.sleep(0)  # its task writes it to the pipe before the frame
                await self._begin_frame()
            else:
                await self._input("Input.dispatchMouseEvent", move)
        self._mouse = (x1, y1)
        await self._input(
            "Input.dispatchMouseEvent",
            {
                "type": "mouseReleased",
                "x": x1,
                "y": y1,
                "button": "left",
                "buttons": 0,
                "clickCount": 1,
            },
        )

    async def _scroll(self, action: Action) -> None:
        if action.x is not None and action.y is not None:
            await self._mouse_move(action.x, action.y)
        px = action.scroll_amount * SCROLL_NOTCH_PX
        dx, dy = {"up": (0, -px), "down": (0, px), "left": (-px, 0), "right": (px, 0)}[
            action.scroll_direction.value
        ]
        x, y = self._mouse
        if self.frames_on_demand:
            page_x, page_y = self._page_point(x, y)  # elementFromPoint takes page pixels
            wheel = {"x": page_x, "y": page_y, "dx": dx, "dy": dy}
            wheel |= {f"{k.lower().replace('control', 'ctrl')}Key": True for k in self._held}
            await self._eval(f"{_WHEEL_JS}({orjson.dumps(wheel).decode()})")
        else:
            await self._input(
                "Input.dispatchMouseEvent",
                {"type": "mouseWheel", "x": x, "y": y, "deltaX": dx, "deltaY": dy},
            )
        # The wheel scroll is applied on the compositor after the event is dispatched.
        await self.settle_frame()

    async def _type(self, text: str) -> None:
        """Type ``text``; tabs and line breaks press Tab and Enter, as pyautogui does.

        A character of the US layout is a key press (keydown, keypress, input, keyup);
        any other is inserted as text, as Playwright's ``keyboard.type`` does.
        """
        for chunk in typed_chunks(text):
            if chunk in TYPED_KEYS:
                await self._press([TYPED_KEYS[chunk]])
                continue
            presses: list[dict[str, Any]] = []
            pending = ""
            for char in chunk:
                if _is_layout_char(char):
                    if pending:
                        await self._send_keys(presses)
                        presses = []
                        await self._input("Input.insertText", {"text": pending})
                        pending = ""
                    presses += [
                        self._key_params(kind, char, set(), repeat=False) for kind in ("down", "up")
                    ]
                else:
                    pending += char
            await self._send_keys(presses)
            if pending:
                await self._input("Input.insertText", {"text": pending})

    async def _send_keys(self, events: list[dict[str, Any]]) -> None:
        """Send key events in order, each before the last is answered: Chromium queues
        them and the page handles them one by one as before, without a round trip
        between two (a 512-character text took ~1.8 s one event at a time)."""
        sent = [
            asyncio.ensure_future(self._input("Input.dispatchKeyEvent", params))
            for params in events
        ]
        if not sent:
            return
        results = await asyncio.gather(*sent, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def _press(self, keys: list[str]) -> None:
        """Press keys in order and release them in reverse (``pyautogui.hotkey``)."""
        held: list[str] = []
        modifiers: set[str] = set()
        try:
            for key in keys:
                await self._key_event("down", key, modifiers, repeat=key in held)
                held.append(key)
        finally:
            for key in reversed(held):
                await self._key_event("up", key, modifiers, repeat=False)

    async def _key_event(self, kind: str, key: str, modifiers: set[str], *, repeat: bool) -> None:
        await self._input(
            "Input.dispatchKeyEvent", self._key_params(kind, key, modifiers, repeat=repeat)
        )

    @staticmethod
    def _key_params(kind: str, key: str, modifiers: set[str], *, repeat: bool) -> dict[str, Any]:
        """``Input.dispatchKeyEvent``'s parameters for a key going ``kind`` ("down" or
        "up"); a modifier going down or up is added to or taken from ``modifiers``."""
        if key in CDP_KEYS:  # keys outside the US layout: DOM key values + virtual key codes
            vk = CDP_KEYS[key]
            return {
                "type": "rawKeyDown" if kind == "down" else "keyUp",
                "key": key,
                "code": key,
                "modifiers": modifier_mask(modifiers),
                "windowsVirtualKeyCode": vk,
                "nativeVirtualKeyCode": vk,
            }
        try:
            description = describe(key, modifiers)
        except ValueError as exc:
            raise CdpError(str(exc), method="Input.dispatchKeyEvent") from None
        if description.key in MODIFIERS:
            if kind == "down":
                modifiers.add(description.key)
            else:
                modifiers.discard(description.key)
        params: dict[str, Any] = {
            "modifiers": modifier_mask(modifiers),
            "windowsVirtualKeyCode": description.key_code_without_location,
            "code": description.code,
            "key": description.key,
            "location": description.location,
            "isKeypad": description.location == 3,
        }
        if kind == "down":
            text = description.text
            params |= {
                "type": "keyDown" if text else "rawKeyDown",
                "text": text,
                "unmodifiedText": text,
                "autoRepeat": repeat,
            }
        else:
            params["type"] = "keyUp"
        return params

    async def _settle(self) -> None:
        tab = self._current()
        try:
            settled = await self._eval(_SETTLE_JS)
        except CdpError as exc:
            if not any(s in str(exc) for s in _NAVIGATION_ERRORS):
                raise
            settled = False
        if not (tab.idle.is_set() and tab.loaded.is_set()):
            await self._wait_loaded(tab)
            settled = await self._eval(_SETTLE_JS)
        if not settled:
            await self._restore_after_navigation()

    async def _restore_after_navigation(self) -> None:
        """The agent navigated (a reload, history back): show the episode's app again.

        Like reloading a real form, the inputs come back empty; the task's record is
        kept by the server and is not affected.
        """
        tab = self._current()
        logger.info("the page navigated away from the task app; restoring it")
        for attempt in range(3):
            try:
                await self._navigate(tab, self.app_url)
                break
            except CdpError as exc:
                if attempt == 2:
                    raise
                logger.debug("restoring the app was interrupted (%s); again", exc)
        await self._apply_page_scale()
        await self._eval(_js_call("window.uirlLoad", self._app_state))

    async def settle_frame(self) -> None:
        """Wait until a frame has been produced after this call (two animation frames)."""
        if self.frames_on_demand:
            for _ in range(2):
                await self._begin_frame()
            return
        await self._eval(_TWO_FRAMES_JS)

    async def capture(self, fmt: ImageFormat = ImageFormat.PNG, jpeg_quality: int = 90) -> bytes:
        """The screen now, as PNG, JPEG or raw RGB (height x width x 3, row-major)."""
        tab = self._current()
        params: dict[str, Any] = {"format": "png", "optimizeForSpeed": True}
        if fmt is ImageFormat.JPEG:
            params = {"format": "jpeg", "quality": jpeg_quality, "optimizeForSpeed": True}
        if self.frames_on_demand:
            # A frame begun while the compositor is not ready (seen rarely right after a
            # MiniWoB++ page's pinch zoom was set) comes without a screenshot: the next
            # one has it.
            for _ in range(3):
                encoded = (await self._begin_frame(params)).get("screenshotData")
                if encoded is not None:
                    break
                logger.debug("a frame came without a screenshot; drawing another")
            else:
                raise CdpError("the frame came without a screenshot", method="beginFrame")
        else:
            result = await self._cdp.send(
                "Page.captureScreenshot", params, session_id=tab.session_id
            )
            encoded = result["data"]
        self._run_after_capture()
        data = base64.b64decode(encoded)
        if fmt is ImageFormat.RAW:
            return _png_to_rgb(data)
        return data


def describe_unanswered(unanswered: list[tuple[str, float]]) -> str:
    """``(method, seconds waited)`` pairs, oldest first, as ``A (9.8s), B x512 (9.7s)``:
    one entry per method, with the count and the longest wait (a typed text's key events
    are all in flight at once: a 504 must not list a thousand of them)."""
    counts: dict[str, int] = {}
    longest: dict[str, float] = {}
    for method, waited in unanswered:
        counts[method] = counts.get(method, 0) + 1
        longest[method] = max(longest.get(method, 0.0), waited)
    entries = [f"{m}{f' x{n}' if n > 1 else ''} ({longest[m]:.1f}s)" for m, n in counts.items()]
    return ", ".join(entries) or "none"


def _js_call(function: str, *args: Any) -> str:
    """A JavaScript call with JSON arguments (JSON is valid JavaScript)."""
    return f"{function}({', '.join(orjson.dumps(a).decode() for a in args)})"


def _is_layout_char(char: str) -> bool:
    return char in LAYOUT


def _png_to_rgb(png: bytes) -> bytes:
    from PIL import Image

    with Image.open(io.BytesIO(png)) as img:
        return img.convert("RGB").tobytes()

"""The browser session: one Chromium per session, driven over its DevTools pipe.

No Playwright Node driver between the server and Chromium (the backend before issue 11,
removed in issue 34): a command is one write on the pipe, a screenshot arrives once (Chromium -> Python) instead of twice
(Chromium -> Node -> Python), and ~100 MB of driver per session is gone.

:class:`CdpBrowserSession` is the face the session server sees; the work is done in the
rooms beside it:
- ``chromium``: which Chromium, launched with which switches;
- ``cdp``: the pipe (commands, answers, events);
- ``tabs``: a browser context and page per episode, the one prepared for the next,
  navigation, the recording binding, JavaScript dialogs answered;
- ``input``: the pointer and keyboard (everything an action sends), with ``keys``'
  US layout;
- ``capture``: frames (on demand, on the headless shell), settling, screenshots;
- ``elements``: the page as text (bids, the accessibility tree, the DOM) and actions
  on elements.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from uirl_gym.actions import DEFAULT_SCREEN, Action, ActionType
from uirl_gym.protocol import ImageFormat
from uirl_gym.session.browser import capture as frames
from uirl_gym.session.browser import elements
from uirl_gym.session.browser.cdp import CdpError, ChromiumProcess
from uirl_gym.session.browser.chromium import (
    FRAME_CONTROL_ENV_VAR,
    draws_frames_on_demand,
    is_headless_shell,
    session_args,
)
from uirl_gym.session.browser.input import Input
from uirl_gym.session.browser.tabs import (
    Background,
    DialogAnswerer,
    EventRecorder,
    Tab,
    Tabs,
    js_call,
)
from uirl_gym.tasks.base import Dialog, DialogAnswer

__all__ = ["FRAME_CONTROL_ENV_VAR", "CdpBrowserSession", "describe_unanswered"]

logger = logging.getLogger(__name__)


class CdpBrowserSession:
    """A Chromium process and the page the agent acts on, driven over CDP.

    Attributes:
        app_url: the task app's URL (served by the session server).
        alive: False once Chromium has gone.
        launches: how many times Chromium was started.
        in_page_episodes: how many episodes restarted in the page of the last one.
        open_pages / popups_closed: page targets open; pages a page opened (closed).

    Methods:
        start / stop / restart: launch and close Chromium.
        new_episode: switch to a fresh context and render the episode's app state.
        act: perform an action (at a point, or on an element by its bid), wait for the
            page to settle.
        page: the page as text: the accessibility tree, the DOM, the elements' boxes.
        capture: the current screen as PNG / JPEG / raw RGB bytes.
        inspect: the task app's privileged page state (element boxes, values).
        responsive: whether the page answers (checked, not assumed).
        waiting_on: the CDP commands not answered yet.
        take_dialogs: the JavaScript dialogs the page opened (each answered at once by
            ``answer_dialog``; OK when None) since the last call.
    """

    backend = "cdp"

    def __init__(
        self,
        app_url: str,
        executable_path: str,
        headless: bool = True,
        record_event: EventRecorder | None = None,
        answer_dialog: DialogAnswerer | None = None,
    ) -> None:
        self.executable_path = executable_path
        self.headless = headless
        self.frames_on_demand = draws_frames_on_demand(executable_path, headless)
        self._process: ChromiumProcess | None = None
        self._background = Background()
        self._tabs = Tabs(
            app_url, record_event, answer_dialog, self.frames_on_demand, self._background
        )
        # The episode's tab and its pointer and keyboard (None: no episode yet).
        self._tab: Tab | None = None
        self._input: Input | None = None
        self._app_state: dict[str, Any] | None = None
        self.launches = 0
        # Episodes started in the page of the last one (``new_episode(in_page=True)``).
        self.in_page_episodes = 0

    @property
    def app_url(self) -> str:
        return self._tabs.app_url

    @app_url.setter
    def app_url(self, url: str) -> None:
        self._tabs.app_url = url

    @property
    def alive(self) -> bool:
        return self._tabs.alive

    @property
    def open_pages(self) -> int:
        """Page targets open in Chromium (the episode's and the one prepared)."""
        return self._tabs.open_pages

    @property
    def popups_closed(self) -> int:
        return self._tabs.popups_closed

    # -- the browser -------------------------------------------------------------------

    async def start(self) -> None:
        t0 = time.perf_counter()
        self._process = await ChromiumProcess.launch(
            self.executable_path, session_args(self.frames_on_demand), headless=self.headless
        )
        await self._tabs.attach(self._process.connection)
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
            await self._tabs.close_startup_pages()
        # The first episode's context is prepared while the server finishes starting.
        await self._tabs.prepare_spare()

    def waiting_on(self) -> str:
        """The CDP commands sent and not answered yet, e.g. ``Input.dispatchMouseEvent
        (9.8s)``; ``none`` when the wait was the server's own (a settle or a frame)."""
        if self._process is None:
            return "none (Chromium is not running)"
        return describe_unanswered(self._process.connection.unanswered())

    async def restart(self) -> None:
        """Replace a dead (or live) Chromium with a new one."""
        await self._close_browser()
        await self.start()

    async def stop(self) -> None:
        await self._close_browser()

    async def _close_browser(self) -> None:
        self._tabs.detach()
        self._tab = self._input = None
        if self._process is not None:
            process, self._process = self._process, None
            try:
                await process.close()
            except Exception as exc:
                logger.warning("closing Chromium failed: %s", exc)
        self._tabs.alive = False

    # -- episodes ------------------------------------------------------------------------

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
        current, pointer = self._tab, self._input
        self._tabs.screen = screen
        if in_page and pointer is not None and self._restarts_in_place(page_scale, screen):
            self.in_page_episodes += 1
            await pointer.leave()
            self._tabs.drop_spare()
        else:
            tab = await self._tabs.take_spare()
            self._tab, self._input = tab, Input(tab, self._background)
            if current is not None:
                self._tabs.after_capture(lambda: self._tabs.dispose(current))
            if not in_page:
                self._tabs.after_capture(self._tabs.prepare_spare)
            tab.page_scale = page_scale
            await tab.apply_page_scale()
        tab, pointer = self._current()
        # The document takes the focus back first, as a fresh page has it: an agent that
        # tabbed out of it (past the last field) left it unfocused, and clearing the
        # clipboard then failed ("Document is not focused") at every in-page reset.
        loaded = await tab.eval(
            f"(async () => {{ window.focus(); "
            f"const loaded = await {js_call('window.uirlLoad', app_state)}; "
            "await navigator.clipboard.writeText(''); return loaded ?? null; })()"
        )
        self._app_state = app_state
        pointer.mouse = (0, 0)
        return loaded

    def _restarts_in_place(self, page_scale: float, screen: tuple[int, int]) -> bool:
        """Whether the page on the screen holds the app at this screen and zoom: the
        episode can restart there. Not under pinch zoom: the last episode may have
        panned the visual viewport (a focused field is scrolled into view), and a
        restarted page kept that pan, so the MiniWoB++ expert's clicks landed off its
        elements (seen at zoom 2)."""
        tab = self._tab
        return (
            page_scale == 1.0
            and tab is not None
            and tab.url == self.app_url
            and tab.screen == screen
            and tab.page_scale == page_scale
        )

    def _current(self) -> tuple[Tab, Input]:
        if self._tab is None or self._input is None:
            raise RuntimeError("no episode: POST /reset first")
        return self._tab, self._input

    # -- the page --------------------------------------------------------------------------

    async def act(self, action: Action) -> None:
        """Perform a validated action, then wait until the page has settled.

        Settle rule: each input command returns once Chromium has dispatched the event to
        the page; then the task work the app reports as pending (an in-flight
        submission) is awaited, and a navigation in progress must reach ``load``.
        """
        tab, pointer = self._current()  # refuses before the first episode
        if action.type in (ActionType.SCREENSHOT, ActionType.FINISH):
            return
        if action.bid is not None or action.end_bid is not None:
            # Raises ElementActionError (the page untouched) when the element cannot.
            pixels = await elements.perform(tab, action, tab.screen)
            if pixels is not None:
                await pointer.act(pixels)
        else:
            await pointer.act(action)
        if not await frames.settle(tab):
            await self._tabs.restore_app(tab, self._app_state)

    async def settle_frame(self) -> None:
        """Wait until a frame has been produced after this call (two animation frames)."""
        await frames.settle_frame(self._current()[0])

    async def capture(self, fmt: ImageFormat = ImageFormat.PNG, jpeg_quality: int = 90) -> bytes:
        """The screen now, as PNG, JPEG or raw RGB (height x width x 3, row-major)."""
        encoded = await frames.screenshot(self._current()[0], fmt, jpeg_quality)
        self._tabs.run_after_capture()
        return frames.decode(encoded, fmt)

    async def responsive(self, timeout_s: float = 2.0) -> bool:
        """Whether Chromium is there and the page answers (checked, not assumed)."""
        if not self.alive or self._tab is None:
            return self.alive
        try:
            await self._tab.eval("1", timeout_s=timeout_s)
        except CdpError as exc:
            logger.warning("the page does not answer: %s", exc)
            return False
        return True

    async def page(self, episode: int, include: frozenset[str], full: bool) -> dict[str, Any]:
        """The page as text (:func:`elements.observe`): its elements marked with bids."""
        return await elements.observe(self._current()[0], episode, include, full)

    async def inspect(self) -> dict[str, Any]:
        return await self._current()[0].eval("window.uirlInspect()")

    def take_dialogs(self) -> tuple[list[tuple[Dialog, DialogAnswer]], int]:
        """The dialogs the page on the screen opened since the last call, as answered,
        and how many more it opened (not kept)."""
        return ([], 0) if self._tab is None else self._tab.take_dialogs()


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

"""The tabs of a session's Chromium: one browser context and page per episode, the one
prepared for the next episode, navigation, the recording binding, and the JavaScript dialogs a page opens.

What it does the way Playwright does, so that the page sees the same environment:
- contexts: ``Target.createBrowserContext`` per episode, clipboard permissions granted
  to the app's origin, the viewport, locale, time zone, colour scheme, reduced motion
  and focus emulated per page;
- the submission binding: ``Runtime.addBinding`` plus a page script that turns
  ``window.uirlRecord(event)`` into a promise, resolved once the server recorded it;
- dialogs: each ``alert``, ``confirm``, ``prompt`` and ``beforeunload`` prompt is
  answered as it opens (``Page.handleJavaScriptDialog``), as the task says: an open
  one froze the page, and every action after it ran past its deadline.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import orjson

from uirl_gym.actions import DEFAULT_SCREEN
from uirl_gym.session.browser.cdp import CdpConnection, CdpError
from uirl_gym.session.browser.chromium import POPUP_GUARD_JS
from uirl_gym.tasks.base import ACCEPT, Dialog, DialogAnswer

logger = logging.getLogger(__name__)

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
LOAD_TIMEOUT_S = 30.0
# The dialogs a tab keeps until they are taken (the rest are counted): a page that opens
# them in a loop (each answered at once) must not fill the memory.
MAX_DIALOGS_KEPT = 10

EventRecorder = Any  # Callable[[Mapping[str, Any]], dict[str, Any]]
DialogAnswerer = Callable[[Dialog], DialogAnswer]


def js_call(function: str, *args: Any) -> str:
    """A JavaScript call with JSON arguments (JSON is valid JavaScript)."""
    return f"{function}({', '.join(orjson.dumps(a).decode() for a in args)})"


def _set_event() -> asyncio.Event:
    event = asyncio.Event()
    event.set()
    return event


class Background:
    """Browser work nobody waits for (closing a popup, answering a binding call,
    disposing of a context): each runs as a task, kept until it ends; a failure is
    logged, not raised."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def run(self, coro: Awaitable[Any]) -> None:
        async def run() -> None:
            try:
                await coro
            except Exception as exc:
                logger.debug("background browser work failed: %s", exc)

        task = asyncio.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


@dataclass
class Tab:
    """One episode's browser context and its page (an attached target)."""

    cdp: CdpConnection  # the pipe of the Chromium it lives in
    context_id: str
    target_id: str
    session_id: str
    # Made with ``enableBeginFrameControl``: it draws a frame only when one is begun.
    frames_on_demand: bool
    # Set once the document on the screen has fired ``load`` (cleared when a new document
    # commits, not by a same-document navigation: a hash link, ``history.pushState``).
    loaded: asyncio.Event = field(default_factory=asyncio.Event)
    # Set while no navigation is in flight in the main frame.
    idle: asyncio.Event = field(default_factory=_set_event)
    url: str = ""  # the app it was loaded with
    screen: tuple[int, int] = DEFAULT_SCREEN  # its viewport (width, height)
    # The episode's pinch zoom: screen pixels are page pixels times this.
    page_scale: float = 1.0
    # execution context id -> (origin, frame id, is the frame's main world)
    contexts: dict[int, tuple[str, str, bool]] = field(default_factory=dict)
    # The dialogs answered since they were last taken (and how many more, not kept).
    dialogs: list[tuple[Dialog, DialogAnswer]] = field(default_factory=list)
    dialogs_not_kept: int = 0

    def take_dialogs(self) -> tuple[list[tuple[Dialog, DialogAnswer]], int]:
        """The dialogs answered since the last call, and how many more were not kept."""
        taken = self.dialogs, self.dialogs_not_kept
        self.dialogs, self.dialogs_not_kept = [], 0
        return taken

    async def eval(self, expression: str, timeout_s: float = LOAD_TIMEOUT_S) -> Any:
        """The value of ``expression`` in the page (a promise is awaited).

        Raises:
            CdpError: the page threw, or did not answer within ``timeout_s``.
        """
        result = await self.cdp.send(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
            session_id=self.session_id,
            timeout_s=timeout_s,
        )
        details = result.get("exceptionDetails")
        if details:
            text = details.get("exception", {}).get("description") or details.get("text")
            raise CdpError(f"the page threw: {text}", method="Runtime.evaluate")
        return result.get("result", {}).get("value")

    async def navigate(self, url: str) -> None:
        self.url = url
        was_loaded = self.loaded.is_set()
        # Cleared before: the new document's load event may come before the answer.
        self.loaded.clear()
        result = await self.cdp.send(
            "Page.navigate", {"url": url}, session_id=self.session_id, timeout_s=LOAD_TIMEOUT_S
        )
        if result.get("errorText"):
            raise CdpError(f"loading {url} failed: {result['errorText']}", method="Page.navigate")
        if not result.get("loaderId") and was_loaded:  # same-document: no load event comes
            self.loaded.set()
        await self.wait_loaded()

    async def wait_loaded(self) -> None:
        """Until no navigation is in flight and the document on the screen has loaded."""
        try:
            async with asyncio.timeout(LOAD_TIMEOUT_S):
                await self.idle.wait()
                await self.loaded.wait()
        except TimeoutError:
            raise CdpError(f"the page did not load within {LOAD_TIMEOUT_S:.0f}s") from None

    async def set_viewport(self, screen: tuple[int, int]) -> None:
        width, height = screen
        await self.cdp.send(
            "Emulation.setDeviceMetricsOverride",
            {
                "width": width,
                "height": height,
                "deviceScaleFactor": 1,
                "mobile": False,
                "screenWidth": width,
                "screenHeight": height,
            },
            session_id=self.session_id,
        )
        self.screen = screen

    async def apply_page_scale(self) -> None:
        # Every page starts at 1 (a fresh context, or a restored app): set it only when
        # the episode asks for another.
        if self.page_scale != 1.0:
            await self.cdp.send(
                "Emulation.setPageScaleFactor",
                {"pageScaleFactor": self.page_scale},
                session_id=self.session_id,
            )

    def listen(self) -> None:
        """Follow the page's navigations and execution contexts."""
        cdp, sid = self.cdp, self.session_id

        # A navigation starts and stops loading; only one that commits a new document
        # (``frameNavigated``) waits for that document's ``load``. A same-document one
        # (``navigatedWithinDocument``: a hash link, ``pushState``) fires no ``load``, and
        # waiting for one stalled the action until its timeout (MiniWoB's search-engine).
        def started(params: dict[str, Any]) -> None:
            if params.get("frameId") == self.target_id:
                self.idle.clear()

        def stopped(params: dict[str, Any]) -> None:
            if params.get("frameId") == self.target_id:
                self.idle.set()

        def navigated(params: dict[str, Any]) -> None:
            if params.get("frame", {}).get("id") == self.target_id:
                self.loaded.clear()

        def load_fired(_params: dict[str, Any]) -> None:
            self.loaded.set()

        def context_created(params: dict[str, Any]) -> None:
            ctx = params["context"]
            aux = ctx.get("auxData", {})
            self.contexts[ctx["id"]] = (
                ctx.get("origin", ""),
                aux.get("frameId", ""),
                bool(aux.get("isDefault")),
            )

        def context_destroyed(params: dict[str, Any]) -> None:
            self.contexts.pop(params.get("executionContextId", 0), None)

        cdp.on("Page.frameStartedLoading", started, sid)
        cdp.on("Page.frameStoppedLoading", stopped, sid)
        cdp.on("Page.frameNavigated", navigated, sid)
        cdp.on("Page.loadEventFired", load_fired, sid)
        cdp.on("Runtime.executionContextCreated", context_created, sid)
        cdp.on("Runtime.executionContextDestroyed", context_destroyed, sid)
        cdp.on("Runtime.executionContextsCleared", lambda _p: self.contexts.clear(), sid)


class Tabs:
    """The browser contexts of one Chromium: each episode's tab, the one prepared for the
    next episode, and the pages a page opens (closed).

    Attributes:
        app_url: the task app's URL (a prepared tab holding another app is moved to it).
        screen: the viewport of the next tab prepared (the last episode's screen).
        alive: False once Chromium has gone (or is being closed).
        popups_closed: how many pages a page opened were closed.
        open_pages: page targets open in Chromium.

    Methods:
        attach / detach: follow a launched Chromium; let it go.
        take_spare / drop_spare / prepare_spare: the tab prepared for the next episode.
        after_capture / run_after_capture: work deferred past the next screenshot.
        dispose: close a tab's context.
        restore_app: show the app again in a tab that navigated away from it.
    """

    def __init__(
        self,
        app_url: str,
        record_event: EventRecorder | None,
        answer_dialog: DialogAnswerer | None,
        frames_on_demand: bool,
        background: Background,
    ) -> None:
        self.app_url = app_url
        self._app_origin = "{0.scheme}://{0.netloc}".format(urlsplit(app_url))
        self.record_event = record_event
        self.answer_dialog = answer_dialog
        self.frames_on_demand = frames_on_demand
        self._background = background
        self._connection: CdpConnection | None = None
        self._spare: asyncio.Task[Tab] | None = None
        self._after_capture: list[Callable[[], Awaitable[None]]] = []
        # The viewport of the next context prepared (the last episode's screen).
        self.screen = DEFAULT_SCREEN
        self.alive = False
        # Page targets (target id -> browser context id), and how many a page opened that
        # were closed (see _on_target_created).
        self._pages: dict[str, str] = {}
        self.popups_closed = 0

    @property
    def _cdp(self) -> CdpConnection:
        if self._connection is None:
            raise CdpError("Chromium is not running")
        return self._connection

    # -- the browser's pages -----------------------------------------------------------

    async def attach(self, connection: CdpConnection) -> None:
        """Follow a launched Chromium: the pages it opens, and its end."""
        self._connection = connection
        connection.on("__closed__", self._on_closed)
        self._pages = {}
        connection.on("Target.targetCreated", self._on_target_created)
        connection.on("Target.targetDestroyed", self._on_target_destroyed)
        await connection.send("Target.setDiscoverTargets", {"discover": True})
        self.alive = True

    def detach(self) -> None:
        """Let Chromium go (it is being closed)."""
        self.alive = False  # background work started before this makes no new context
        if self._spare is not None:
            self._spare.cancel()
            self._spare = None
        self._after_capture = []
        self._connection = None

    def _on_closed(self, params: dict[str, Any]) -> None:
        if self.alive:
            logger.warning("Chromium disconnected (%s)", params.get("reason"))
        self.alive = False

    async def close_startup_pages(self) -> None:
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
            self._background.run(self._cdp.send("Target.closeTarget", {"targetId": target_id}))
            return
        self._pages[target_id] = context

    @property
    def open_pages(self) -> int:
        """Page targets open in Chromium (the episode's and the one prepared)."""
        return len(self._pages)

    # -- tabs ----------------------------------------------------------------------------

    async def _new_tab(self) -> Tab:
        cdp = self._cdp
        width, height = screen = self.screen
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
        tab = Tab(
            cdp,
            context_id=context_id,
            target_id=target_id,
            session_id=session_id,
            frames_on_demand=self.frames_on_demand,
            screen=screen,
        )
        tab.listen()
        cdp.on("Runtime.bindingCalled", lambda p: self._on_binding(tab, p), session_id)
        cdp.on("Page.javascriptDialogOpening", lambda p: self._on_dialog(tab, p), session_id)
        send = cdp.send
        await asyncio.gather(
            send("Page.enable", session_id=session_id),
            send("Runtime.enable", session_id=session_id),
            tab.set_viewport(screen),
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
        await tab.navigate(self.app_url)
        return tab

    async def take_spare(self) -> Tab:
        """The tab prepared for the next episode (a new one if none was, or it failed),
        showing ``app_url`` at ``screen``."""
        spare, self._spare = self._spare, None
        tab: Tab | None = None
        if spare is not None:
            try:
                tab = await spare
            except CdpError as exc:
                logger.warning("the prepared context failed (%s); making a new one", exc)
        if tab is None:
            tab = await self._new_tab()
        if tab.url != self.app_url:  # prepared with another task's app
            await tab.navigate(self.app_url)
        if tab.screen != self.screen:  # prepared for another screen size
            await tab.set_viewport(self.screen)
        return tab

    def drop_spare(self) -> None:
        """No tab prepared while pages restart in place (one renderer is enough): the
        one prepared goes after the next screenshot."""
        if self._spare is not None:
            spare, self._spare = self._spare, None
            self.after_capture(lambda: self._dispose_spare(spare))

    async def prepare_spare(self) -> None:
        if self._spare is None and self.alive:
            self._spare = asyncio.create_task(self._new_tab())

    def after_capture(self, work: Callable[[], Awaitable[None]]) -> None:
        """Start ``work`` once the next screenshot is taken (not competing with it)."""
        self._after_capture.append(work)

    def run_after_capture(self) -> None:
        work, self._after_capture = self._after_capture, []
        for start in work:
            self._background.run(start())

    async def _dispose_spare(self, spare: asyncio.Task[Tab]) -> None:
        try:
            tab = await spare
        except CdpError:
            return
        await self.dispose(tab)

    async def dispose(self, tab: Tab) -> None:
        self._cdp.off_session(tab.session_id)
        await self._cdp.send("Target.disposeBrowserContext", {"browserContextId": tab.context_id})

    async def restore_app(self, tab: Tab, app_state: dict[str, Any] | None) -> None:
        """The agent navigated (a reload, history back): show the episode's app again.

        Like reloading a real form, the inputs come back empty; the task's record is
        kept by the server and is not affected.
        """
        logger.info("the page navigated away from the task app; restoring it")
        for attempt in range(3):
            try:
                await tab.navigate(self.app_url)
                break
            except CdpError as exc:
                if attempt == 2:
                    raise
                logger.debug("restoring the app was interrupted (%s); again", exc)
        await tab.apply_page_scale()
        await tab.eval(js_call("window.uirlLoad", app_state))

    # -- the recording binding -----------------------------------------------------------

    def _on_binding(self, tab: Tab, params: dict[str, Any]) -> None:
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
        expression = js_call("globalThis.__uirlDeliver", call_id, ok, value)
        self._background.run(
            self._cdp.send(
                "Runtime.evaluate",
                {"expression": expression, "contextId": context_id},
                session_id=tab.session_id,
            )
        )

    # -- dialogs -------------------------------------------------------------------------

    def _on_dialog(self, tab: Tab, params: dict[str, Any]) -> None:
        """A JavaScript dialog opened: the page (and the action that opened it) waits
        until it is answered, and a headless browser shows none. Answer it now, as the
        task says (OK without a task, or when the task's answer fails)."""
        dialog = Dialog(
            type=str(params.get("type", "")),
            message=str(params.get("message", "")),
            default_prompt=str(params.get("defaultPrompt", "")),
            url=str(params.get("url", "")),
        )
        answer = ACCEPT
        if self.answer_dialog is not None:
            try:
                answer = self.answer_dialog(dialog)
            except Exception:
                logger.exception("the task's answer to a %s dialog failed; OK", dialog.type)
        command: dict[str, Any] = {"accept": answer.accept}
        if dialog.type == "prompt" and answer.accept:
            text = dialog.default_prompt if answer.prompt_text is None else answer.prompt_text
            command["promptText"] = text
            answer = DialogAnswer(accept=True, prompt_text=text)
        else:
            answer = DialogAnswer(accept=answer.accept)
        if len(tab.dialogs) < MAX_DIALOGS_KEPT:
            tab.dialogs.append((dialog, answer))
        else:
            tab.dialogs_not_kept += 1
        self._background.run(
            tab.cdp.send("Page.handleJavaScriptDialog", command, session_id=tab.session_id)
        )

"""Chromium over the DevTools protocol, straight from Python (no Playwright driver).

Chromium is started with ``--remote-debugging-pipe``: it reads CDP messages (JSON, each
ending with a NUL byte) on its fd 3 and writes answers and events on its fd 4. One pipe
pair per browser, no port to find or guard, and when this process dies the pipe closes
and Chromium exits with it (no orphan even after SIGKILL).

Targets are attached in flat mode (``Target.attachToTarget`` with ``flatten``): every
page's commands travel on the browser pipe, tagged with their ``sessionId``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from uirl_gym.protocol import PROFILE_PREFIX

logger = logging.getLogger(__name__)

EventHandler = Callable[[dict[str, Any]], None]
COMMAND_TIMEOUT_S = 30.0
# Playwright's launch switches (chromiumSwitches.ts, 1.5x), less the ones that only
# matter to Chrome/Edge builds, so that the page renders as it did under Playwright; and
# less CDPScreenshotNewSurface, which makes every capture draw into a new surface.
BASE_SWITCHES = (
    "--disable-field-trial-config",
    "--disable-background-networking",
    "--disable-background-timer-throttling",
    "--disable-backgrounding-occluded-windows",
    "--disable-back-forward-cache",
    "--disable-breakpad",
    "--disable-component-extensions-with-background-pages",
    "--disable-component-update",
    "--no-default-browser-check",
    "--disable-default-apps",
    "--disable-dev-shm-usage",
    "--disable-extensions",
    "--disable-features=AvoidUnnecessaryBeforeUnloadCheckSync,DestroyProfileOnBrowserClose,"
    "HttpsUpgrades,HttpsFirstBalancedModeAutoEnable,LensOverlay,MediaRouter,PaintHolding,"
    "ThirdPartyStoragePartitioning,OptimizationHints,NetworkTimeServiceQuerying,AimEnabled,"
    "PreconnectToSearch",
    "--allow-pre-commit-input",
    "--disable-hang-monitor",
    "--disable-ipc-flooding-protection",
    "--disable-popup-blocking",
    "--disable-prompt-on-repost",
    "--disable-renderer-backgrounding",
    "--force-color-profile=srgb",
    "--metrics-recording-only",
    "--no-first-run",
    "--password-store=basic",
    "--use-mock-keychain",
    "--no-service-autorun",
    "--disable-search-engine-choice-screen",
    "--disable-sync",
    "--mute-audio",
    "--blink-settings=primaryHoverType=2,availableHoverTypes=2,"
    "primaryPointerType=4,availablePointerTypes=4",
)


# Switches whose value is a comma-separated list of items (a feature, or a Blink setting
# ``name=value``).
_LIST_SWITCHES = ("--enable-features=", "--disable-features=", "--blink-settings=")


def merge_list_switches(args: Sequence[str]) -> list[str]:
    """The switches with one ``--enable-features``, one ``--disable-features`` and one
    ``--blink-settings`` holding every list given, in place of the first: Chromium keeps
    only the last value of a switch given twice, so a second list (the frame-control
    one, a user's extra arguments) silently dropped the first. A Blink setting given
    twice keeps its last value (a user's extra arguments win)."""
    merged: dict[str, dict[str, str]] = {}  # switch -> {item's name: item}, in order
    out: list[str] = []
    for arg in args:
        prefix = next((p for p in _LIST_SWITCHES if arg.startswith(p)), None)
        if prefix is None:
            out.append(arg)
            continue
        if prefix not in merged:
            merged[prefix] = {}
            out.append(prefix)  # filled in below, where the first one stood
        for item in arg.removeprefix(prefix).split(","):
            if item:
                merged[prefix][item.partition("=")[0]] = item
    return [arg + ",".join(merged[arg].values()) if arg in merged else arg for arg in out]


class CdpError(Exception):
    """A CDP command failed (``code`` and ``message`` from Chromium) or the pipe closed:
    the browser failed an action, or is gone (the server checks which)."""

    def __init__(self, message: str, *, method: str = "", code: int | None = None) -> None:
        super().__init__(f"{method}: {message}" if method else message)
        self.method = method
        self.code = code


class CdpConnection:
    """The browser end of one ``--remote-debugging-pipe``.

    Methods:
        send: a command (to the browser, or to an attached target with ``session_id``).
        on / off: event handlers per (session id, method).
        close: stop reading and writing.
    Attributes:
        closed: set when the pipe closed (Chromium exited or was killed).
    """

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self._read_fd = read_fd
        self._write_fd = write_fd
        self._ids = itertools.count(1)
        # id -> (its answer, the method, when it was sent: time.monotonic())
        self._pending: dict[int, tuple[asyncio.Future[dict[str, Any]], str, float]] = {}
        self._handlers: dict[tuple[str | None, str], list[EventHandler]] = defaultdict(list)
        self._buffer = bytearray()
        self._out = bytearray()
        self._loop = asyncio.get_running_loop()
        self.closed = asyncio.Event()
        os.set_blocking(read_fd, False)
        os.set_blocking(write_fd, False)
        self._loop.add_reader(read_fd, self._on_readable)

    async def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session_id: str | None = None,
        timeout_s: float = COMMAND_TIMEOUT_S,
    ) -> dict[str, Any]:
        """Send a command and wait for its result.

        Raises:
            CdpError: Chromium answered with an error, the pipe closed, or no answer came
                within ``timeout_s``.
        """
        if self.closed.is_set():
            raise CdpError("the browser has been closed", method=method)
        msg_id = next(self._ids)
        message: dict[str, Any] = {"id": msg_id, "method": method, "params": params or {}}
        if session_id is not None:
            message["sessionId"] = session_id
        future: asyncio.Future[dict[str, Any]] = self._loop.create_future()
        self._pending[msg_id] = (future, method, time.monotonic())
        self._write(orjson.dumps(message) + b"\0")
        try:
            return await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            raise CdpError(f"no answer within {timeout_s:.0f}s", method=method) from None
        finally:
            self._pending.pop(msg_id, None)

    def unanswered(self) -> list[tuple[str, float]]:
        """The commands sent and not answered yet, oldest first: (method, seconds waited).
        What a deadline that ran out was waiting on."""
        now = time.monotonic()
        return [(method, now - sent) for _, method, sent in self._pending.values()]

    def on(self, method: str, handler: EventHandler, session_id: str | None = None) -> None:
        self._handlers[(session_id, method)].append(handler)

    def off_session(self, session_id: str) -> None:
        """Forget every handler of a detached target."""
        for key in [k for k in self._handlers if k[0] == session_id]:
            del self._handlers[key]

    def _write(self, data: bytes) -> None:
        if self._out:
            self._out += data
            return
        try:
            written = os.write(self._write_fd, data)
        except BlockingIOError:
            written = 0
        except OSError as exc:
            self._on_closed(f"write failed: {exc}")
            return
        if written < len(data):
            self._out += data[written:]
            self._loop.add_writer(self._write_fd, self._on_writable)

    def _on_writable(self) -> None:
        try:
            written = os.write(self._write_fd, self._out)
        except BlockingIOError:
            return
        except OSError as exc:
            self._loop.remove_writer(self._write_fd)
            self._on_closed(f"write failed: {exc}")
            return
        del self._out[:written]
        if not self._out:
            self._loop.remove_writer(self._write_fd)

    def _on_readable(self) -> None:
        try:
            chunk = os.read(self._read_fd, 1 << 20)
        except BlockingIOError:
            return
        except OSError as exc:
            self._on_closed(f"read failed: {exc}")
            return
        if not chunk:
            self._on_closed("the browser closed the pipe")
            return
        self._buffer += chunk
        while (end := self._buffer.find(b"\0")) >= 0:
            raw = bytes(self._buffer[:end])
            del self._buffer[: end + 1]
            self._dispatch(orjson.loads(raw))

    def _dispatch(self, message: dict[str, Any]) -> None:
        msg_id = message.get("id")
        if msg_id is not None:
            pending = self._pending.get(msg_id)
            if pending is None or pending[0].done():
                return
            future, method, _ = pending
            if "error" in message:
                error = message["error"]
                future.set_exception(
                    CdpError(error.get("message", "error"), method=method, code=error.get("code"))
                )
            else:
                future.set_result(message.get("result", {}))
            return
        key = (message.get("sessionId"), message.get("method", ""))
        for handler in list(self._handlers.get(key, ())):
            try:
                handler(message.get("params", {}))
            except Exception:
                logger.exception("a handler of %s failed", key[1])

    def _on_closed(self, why: str) -> None:
        if self.closed.is_set():
            return
        logger.debug("CDP pipe closed: %s", why)
        self.closed.set()
        self._stop_io()
        for future, method, _ in list(self._pending.values()):
            if not future.done():
                future.set_exception(
                    CdpError(f"the browser has been closed ({why})", method=method)
                )
        for handler in list(self._handlers.get((None, "__closed__"), ())):
            handler({"reason": why})

    def _stop_io(self) -> None:
        for fd in (self._read_fd, self._write_fd):
            try:
                self._loop.remove_reader(fd)
                self._loop.remove_writer(fd)
            except (ValueError, OSError):
                pass

    def close(self) -> None:
        self._on_closed("closed by us")
        for fd in (self._read_fd, self._write_fd):
            try:
                os.close(fd)
            except OSError:
                pass


class ChromiumProcess:
    """A Chromium started with ``--remote-debugging-pipe`` and its CDP connection.

    Attributes:
        pid: the browser process id.
        connection: the pipe's :class:`CdpConnection`.
    """

    def __init__(self, pid: int, connection: CdpConnection, user_data_dir: str) -> None:
        self.pid = pid
        self.connection = connection
        self._user_data_dir = user_data_dir

    @classmethod
    async def launch(cls, executable: str, args: Sequence[str], headless: bool) -> ChromiumProcess:
        """Start Chromium; return once its pipe answers ``Browser.getVersion``.

        Raises:
            CdpError: Chromium exited or did not answer within the timeout.
        """
        # The server's pid in the name: a server killed with SIGKILL cannot remove its
        # profile, and whoever cleans up later (runtimes.local.remove_stale_dirs) tells
        # a dead owner's folder by it.
        user_data_dir = tempfile.mkdtemp(prefix=f"{PROFILE_PREFIX}{os.getpid()}-")
        to_browser_r, to_browser_w = os.pipe()
        from_browser_r, from_browser_w = os.pipe()
        argv = [
            executable,
            *merge_list_switches(
                [
                    *BASE_SWITCHES,
                    *(["--headless"] if headless else []),
                    # As Playwright launches it: the sandbox needs root or user namespaces,
                    # which unprivileged containers (the pod template) do not have; the
                    # page is the session's own app.
                    "--no-sandbox",
                    *args,
                ]
            ),
            f"--user-data-dir={user_data_dir}",
            "--remote-debugging-pipe",
            "--no-startup-window",
            "about:blank",
        ]
        # posix_spawn places the pipe ends at fds 3 and 4 in the child (what Chromium
        # expects) without a preexec_fn, which is unsafe in a threaded process.
        file_actions = [
            (os.POSIX_SPAWN_DUP2, to_browser_r, 3),
            (os.POSIX_SPAWN_DUP2, from_browser_w, 4),
        ]
        # Chromium's stdio goes to the server's log; it inherits no session token (the
        # server took it out of its environment at start).
        pid = os.posix_spawn(executable, argv, dict(os.environ), file_actions=file_actions)
        os.close(to_browser_r)
        os.close(from_browser_w)
        connection = CdpConnection(from_browser_r, to_browser_w)
        process = cls(pid, connection, user_data_dir)
        try:
            await connection.send("Browser.getVersion", timeout_s=COMMAND_TIMEOUT_S)
        except CdpError:
            await process.close()
            raise
        return process

    async def close(self, grace_s: float = 5.0) -> None:
        """Ask Chromium to close, kill it if it lingers, reap it, remove its profile."""
        if not self.connection.closed.is_set():
            try:
                await self.connection.send("Browser.close", timeout_s=grace_s)
            except CdpError:
                pass
        self.connection.close()
        deadline = time.monotonic() + grace_s
        while not self._reaped():
            if time.monotonic() > deadline:
                logger.warning("Chromium %d did not exit; killing it", self.pid)
                try:
                    os.kill(self.pid, 9)
                except ProcessLookupError:
                    pass
                deadline = time.monotonic() + grace_s
            await asyncio.sleep(0.01)
        shutil.rmtree(self._user_data_dir, ignore_errors=True)

    def _reaped(self) -> bool:
        try:
            pid, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return True
        return pid == self.pid

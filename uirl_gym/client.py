"""SessionClient: the session protocol, client side (keep-alive, timeouts, retries).

Retry rule: a request is retried (bounded, with backoff) only when repeating it cannot
change the task's state twice:
- reads (``/``, ``/health``, ``/progress``, ``/oracle``, a ``screenshot`` action) and
  ``POST /reset`` (a reset with the same seed and options lands in the same state) are
  retried on connection errors, timeouts and 502/503/504, except an action's read
  timeout (below);
- any other action carries an action id (``X-UIRL-Action-Id``, new for each action): the
  session remembers the answers to its last few and answers a repeat with the first
  answer instead of acting again, so the action is retried with the same id when its
  answer was lost (a connection closed or reset) or a proxy answered 502. Not after a
  504 (the session is stuck: a repeat would wait behind the same action) nor a 503 (the
  browser is gone: the answer is already there).
- no action, a ``screenshot`` included, is retried after a read timeout: its answer, a
  504 included, was due by its deadline, so the session is frozen (or busy with the
  same action), and a repeat would cost the deadline again.

Idle connections: the session server keeps an idle keep-alive connection open for
``DEFAULT_KEEP_ALIVE_S`` (75 s); this client opens a fresh connection after
``max_idle_s`` (30 s) without a request, so that it never sends on a connection the
server is closing at that moment (agents may think for minutes between steps).
"""

from __future__ import annotations

import functools
import io
import logging
import time
import uuid
from collections.abc import Iterable
from typing import Any

import numpy as np
import orjson
import requests
from PIL import Image

from uirl_gym.actions import DEFAULT_SCREEN, Action, ActionType
from uirl_gym.protocol import (
    ACTION_ID_HEADER,
    ACTION_MS_HEADER,
    ACTION_TIMEOUT_HEADER,
    CAPTURE_MS_HEADER,
    DIALOGS_HEADER,
    HEIGHT_HEADER,
    PROGRESS_HEADER,
    WIDTH_HEADER,
    Route,
    SessionInfo,
    act_query,
    decode_json_header,
    token_from_environment,
)

logger = logging.getLogger(__name__)

RETRY_STATUS = frozenset({502, 503, 504})
# A proxy's "the connection to the session failed": an action with an id is retried on
# it (a session's own 503 means its browser is gone, a repeat would get the same answer;
# a proxy's 504 is a timeout, see _request).
GATEWAY_STATUS = frozenset({502})
# The session is gone, whatever was asked: a router knows no such session (the Kubernetes
# proxy's 404 after its pod was deleted or evicted; a session server serves every path the
# client sends), or another session answered at its address (421, nothing done). A failed
# session, not a refused action: the env replaces it.
SESSION_GONE_STATUS = frozenset({404, 421})
# Shorter than the server's keep-alive (runtimes.base.DEFAULT_KEEP_ALIVE_S).
DEFAULT_MAX_IDLE_S = 30.0
# How much longer than an action's deadline its answer is awaited: the server's 504
# (the page hangs) must arrive before the client gives up on the connection. The
# server answers by the deadline (or 0.5 s after it: a screenshot gets at least that);
# the margin is the way there and back on a loaded machine. A read timeout is the wait
# for the next byte, so a large screenshot's transfer is not in it. A session that sends
# nothing by then is frozen: it costs a step the deadline plus this margin.
ACTION_READ_MARGIN_S = 2.0
IMAGE_FORMATS = ("png", "jpeg", "raw")


class SessionError(Exception):
    """Base class of session client errors.

    Attributes:
        base_url: the session's URL.
    """

    def __init__(self, message: str, base_url: str) -> None:
        super().__init__(f"{message} [{base_url}]")
        self.base_url = base_url


class SessionUnavailableError(SessionError):
    """The session did not answer (connection refused/reset, timeout, 5xx) or is gone
    (404 from a router, 421)."""


class SessionHTTPError(SessionError):
    """The session answered with an error status.

    Attributes:
        status_code: the HTTP status.
        detail: the server's message.
    """

    def __init__(self, status_code: int, detail: str, base_url: str) -> None:
        super().__init__(f"HTTP {status_code}: {detail}", base_url)
        self.status_code = status_code
        self.detail = detail


class InvalidActionError(SessionHTTPError):
    """The server refused the action (4xx); the session is still usable."""


class ActionTimeoutError(SessionUnavailableError):
    """The action ran past its deadline (``action_timeout_s``): the episode's page hangs.
    The session itself is fine: its next reset starts a fresh page."""


def decode_image(
    data: bytes, image_format: str, screen: tuple[int, int] = DEFAULT_SCREEN
) -> np.ndarray:
    """Screenshot bytes as uint8 (height, width, 3); ``screen`` (width, height) gives
    the shape of ``raw`` bytes (PNG and JPEG carry theirs).

    PNG and JPEG are decoded with OpenCV when it is installed (``opencv-python-headless``:
    about twice as fast as Pillow on these frames), else with Pillow; both give the same
    pixels for PNG.
    """
    if image_format == "raw":
        return np.frombuffer(data, dtype=np.uint8).reshape(screen[1], screen[0], 3)
    cv2 = _opencv()
    if cv2 is not None:
        bgr = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), cv2.IMREAD_COLOR)
        if bgr is not None:
            return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
    with Image.open(io.BytesIO(data)) as img:
        # Chromium's frames are RGB already: converting would only copy them.
        img.load()
        return np.asarray(img if img.mode == "RGB" else img.convert("RGB"))


@functools.cache
def _opencv() -> Any:
    try:
        import cv2
    except ImportError:
        return None
    return cv2


class SessionClient:
    """One session server, over HTTP.

    Attributes:
        base_url: the server's root URL.
        image_format: how screenshots travel (``png``, ``jpeg`` or ``raw``); the client
            always returns decoded uint8 arrays.

    ``session``: a :class:`~uirl_gym.protocol.SessionInfo` from a runtime (its URL and
    credentials), or a URL. ``headers`` are the credentials sent with every request (the
    session token for ``/reset``, ``/oracle`` and the detail of the task's record, a
    proxy's bearer token); None takes the SessionInfo's, or for a bare URL the token in
    ``$UIRL_SESSION_TOKEN`` (a server started by hand). ``max_idle_s``: a connection unused for
    longer is closed and a new one opened (see the module docstring).

    ``action_timeout_s``: the deadline of each action and its screenshot, sent to the
    session (``GET /act``'s ``timeout``; None: the server's default); an action past it
    raises :class:`ActionTimeoutError`. An action's answer is awaited that long plus
    ``ACTION_READ_MARGIN_S`` (the server's 504 comes first); other requests wait
    ``read_timeout_s``.
    """

    def __init__(
        self,
        session: SessionInfo | str,
        *,
        connect_timeout_s: float = 5.0,
        read_timeout_s: float = 30.0,
        max_retries: int = 3,
        backoff_s: float = 0.1,
        image_format: str = "png",
        headers: dict[str, str] | None = None,
        max_idle_s: float = DEFAULT_MAX_IDLE_S,
        action_timeout_s: float | None = None,
    ) -> None:
        if image_format not in IMAGE_FORMATS:
            raise ValueError(f"image_format: expected one of {IMAGE_FORMATS}, got {image_format!r}")
        base_url = session.base_url if isinstance(session, SessionInfo) else session
        if headers is None:
            headers = (
                dict(session.headers)
                if isinstance(session, SessionInfo)
                else token_from_environment()
            )
        self.base_url = base_url.rstrip("/")
        self.timeout = (connect_timeout_s, read_timeout_s)
        self.action_timeout_s = action_timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.image_format = image_format
        self.max_idle_s = max_idle_s
        self._http = requests.Session()
        # One connection is enough: a session serves one agent, requests are sequential.
        self._adapter = requests.adapters.HTTPAdapter(pool_connections=1, pool_maxsize=1)
        self._http.mount("http://", self._adapter)
        self._last_used = 0.0  # monotonic time of the last answer (0: no connection yet)
        # The server's own time (ms) for the last action and its capture (X-Action-Ms,
        # X-Capture-Ms): what of a step's wall time the session spent.
        self.last_server_ms: dict[str, float] = {}
        # The JavaScript dialogs the last action's page opened, as the task answered them.
        self.last_dialogs: list[dict[str, Any]] = []
        self._http.headers.update(headers)

    def _request(
        self,
        method: str,
        path: str,
        *,
        idempotent: bool,
        action_id: str | None = None,
        **kwargs: Any,
    ) -> requests.Response:
        url = self.base_url + path
        if action_id is not None:
            kwargs["headers"] = {**kwargs.get("headers", {}), ACTION_ID_HEADER: action_id}
        attempt = 0
        while True:
            self._retire_idle_connection()
            try:
                response = self._http.request(method, url, **{"timeout": self.timeout, **kwargs})
            except requests.RequestException as exc:
                never_sent = isinstance(exc, requests.ConnectTimeout) or (
                    isinstance(exc, requests.ConnectionError) and "NewConnectionError" in repr(exc)
                )
                # An action's answer was due by its deadline: after a read timeout the
                # session is frozen or stuck, and a repeat would wait as long again (an
                # action with an id, for the same lock). Otherwise an action with an id
                # is sent again when its answer was lost (a closed or reset connection).
                overdue = path == Route.ACT and isinstance(exc, requests.ReadTimeout)
                repeatable = idempotent or action_id is not None
                retry_safe = never_sent or (repeatable and not overdue)
                if attempt < self.max_retries and retry_safe:
                    attempt += 1
                    logger.info("%s %s: %s; retrying", method, path, type(exc).__name__)
                    time.sleep(self.backoff_s * 2 ** (attempt - 1))
                    continue
                raise SessionUnavailableError(
                    f"{method} {path} failed: {type(exc).__name__}: {exc}", self.base_url
                ) from exc
            finally:
                self._last_used = time.monotonic()
            if idempotent:
                retry_status = RETRY_STATUS
            else:
                retry_status = GATEWAY_STATUS if action_id is not None else frozenset()
            # A page that hung stays hung until a reset: no retry.
            page_hangs = bool(response.headers.get(ACTION_TIMEOUT_HEADER))
            if (
                response.status_code in retry_status
                and attempt < self.max_retries
                and not page_hangs
            ):
                attempt += 1
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
                continue
            if page_hangs:
                raise ActionTimeoutError(
                    f"{method} {path}: HTTP {response.status_code}: {_detail(response)}",
                    self.base_url,
                )
            if response.status_code >= 500 or response.status_code in SESSION_GONE_STATUS:
                raise SessionUnavailableError(
                    f"{method} {path}: HTTP {response.status_code}: {_detail(response)}",
                    self.base_url,
                )
            if response.status_code >= 400:
                error = InvalidActionError if path == Route.ACT else SessionHTTPError
                raise error(response.status_code, _detail(response), self.base_url)
            return response

    def _retire_idle_connection(self) -> None:
        # The server may close an idle connection at any moment after its keep-alive;
        # closing it first means a request is never sent on one that is closing.
        if self._last_used and time.monotonic() - self._last_used > self.max_idle_s:
            self._adapter.close()

    def health(self) -> dict[str, Any]:
        """``GET /health`` as JSON (an unhealthy server raises SessionUnavailableError)."""
        return self._request("GET", Route.HEALTH, idempotent=True).json()

    def reset(
        self,
        seed: int | None = None,
        options: dict[str, Any] | None = None,
        task: str | None = None,
        screen: tuple[int, int] | None = None,
    ) -> dict[str, Any]:
        """Start a new episode (of ``task``; None: the session's current task) on a
        ``screen`` (width, height; None: the default 1280x800); returns
        ``{"instruction", "episode", "session_id", "task", "screen", ...}``."""
        body: dict[str, Any] = {"seed": seed, "options": options or {}}
        if task is not None:
            body["task"] = task
        if screen is not None:
            body["screen"] = list(screen)
        return self._request("POST", Route.RESET, idempotent=True, json=body).json()

    def act(self, action: Action, *, delay_s: float = 0.0) -> np.ndarray:
        """Perform an action; returns the settled screenshot as uint8 (height, width, 3).

        Raises:
            InvalidActionError: the server refused the action.
            SessionUnavailableError: the session did not answer.
        """
        return self.act_with_progress(action, delay_s=delay_s)[0]

    def act_with_progress(
        self, action: Action, *, delay_s: float = 0.0
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Like :meth:`act`, plus the task's record after the action (``/progress``),
        from the same response (one round trip)."""
        params = act_query(action)
        params["format"] = self.image_format
        if delay_s:
            params["delay"] = str(delay_s)
        timeout = self.timeout
        if self.action_timeout_s is not None:
            params["timeout"] = f"{self.action_timeout_s:g}"
            read_s = self.action_timeout_s + delay_s + ACTION_READ_MARGIN_S
            timeout = (self.timeout[0], read_s)
        idempotent = action.type is ActionType.SCREENSHOT
        # A fresh id per action: a retry sends the same one, and the session answers it
        # without acting twice.
        action_id = None if idempotent else uuid.uuid4().hex
        response = self._request(
            "GET",
            Route.ACT,
            idempotent=idempotent,
            action_id=action_id,
            params=params,
            timeout=timeout,
        )
        self.last_server_ms = {
            part: float(response.headers[header])
            for part, header in (("action", ACTION_MS_HEADER), ("capture", CAPTURE_MS_HEADER))
            if header in response.headers
        }
        dialogs = response.headers.get(DIALOGS_HEADER)
        self.last_dialogs = decode_json_header(DIALOGS_HEADER, dialogs, list) if dialogs else []
        progress_header = response.headers.get(PROGRESS_HEADER)
        progress = (
            decode_json_header(PROGRESS_HEADER, progress_header, dict)
            if progress_header
            else self.progress()
        )
        screen = (
            int(response.headers.get(WIDTH_HEADER, DEFAULT_SCREEN[0])),
            int(response.headers.get(HEIGHT_HEADER, DEFAULT_SCREEN[1])),
        )
        return decode_image(response.content, self.image_format, screen), progress

    def screenshot(self) -> np.ndarray:
        return self.act(Action(ActionType.SCREENSHOT))

    def progress(self) -> dict[str, Any]:
        return self._request("GET", Route.PROGRESS, idempotent=True).json()

    def page(self, include: Iterable[str] = (), *, full: bool = False) -> dict[str, Any]:
        """The page as text (``GET /page``): ``url``, ``title``, ``focused_element_bid``,
        ``open_pages_urls``, and the parts ``include`` names (``axtree``, ``dom``,
        ``elements``; docs/protocol.md). Marks the page's elements with their bids.

        Raises:
            SessionHTTPError: the server refused (an unknown part, no episode yet).
        """
        params = {"include": ",".join(include), "full": "1" if full else "0"}
        timeout = self.timeout
        if self.action_timeout_s is not None:
            timeout = (self.timeout[0], self.action_timeout_s + ACTION_READ_MARGIN_S)
        response = self._request("GET", Route.PAGE, params=params, idempotent=True, timeout=timeout)
        # orjson: a 100-row sheet's tree is ~250 kB, the standard library's parser ~2x slower.
        return orjson.loads(response.content)

    def oracle(self) -> dict[str, Any]:
        """Privileged state (target rows, element boxes): for experts and tests only."""
        return self._request("GET", Route.ORACLE, idempotent=True).json()

    def close(self) -> None:
        self._http.close()


def _detail(response: requests.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500]
    return str(body.get("detail", body)) if isinstance(body, dict) else str(body)

"""What the vendor computer-use agents share: screen scaling, HTTP, turns of several calls.

A vendor's computer-use model answers each request with a *turn*: zero or more tool
calls (Anthropic ``tool_use`` blocks, OpenAI ``computer_call`` items), each one action
in the model's own coordinates. The env takes one action per step, so
:class:`ComputerUsePolicy` queues a turn's calls and plays them one env step each (a
call that needs several env actions, such as xdotool's ``"ctrl+a Delete"``, takes
several steps). When the queue is empty, the next ``act`` sends the calls' results
(with the screenshot the env returned) and gets the next turn. A turn with no call
means the model is done: the step is ``finish``.

A call the env cannot play (an unknown action, a middle click, a held key that is no
modifier) is an invalid action (``PolicyStep.action`` None, ``error`` says why), and
its result goes back to the model as a tool error: never an exception. A call that
asks to wait (``ToolCall.waits``) is waited before its ``screenshot`` step.

Screen scaling: the model sees the screenshot resized to its display size
(:class:`ScreenScaler`), and its coordinates are mapped back to screen pixels by the
formats' one mapping (:class:`~uirl_agents.formats.base.ScreenGeometry`), so that mapping
a screen pixel to the model and back is the identity on the model's pixels.
"""

from __future__ import annotations

import abc
import base64
import io
import json
import logging
import os
import random
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import requests
from PIL import Image

from uirl_agents.formats.base import ScreenGeometry
from uirl_agents.policies.base import PolicyStep
from uirl_gym.actions import SCREEN_HEIGHT, SCREEN_WIDTH, Action, ActionType

logger = logging.getLogger(__name__)

RETRY_STATUS_CODES = frozenset({408, 429, 500, 502, 503, 504, 529})  # 529: Anthropic overloaded
MAX_RETRY_AFTER_S = 600.0
# Fatal for the whole run: a wrong key, model or URL will not get better by retrying.
FATAL_STATUS_CODES = frozenset({401, 403, 404})
# The longest wait a model may ask for (the pages settle before every screenshot; a
# longer one is a tool error the model reads).
MAX_WAIT_S = 30.0


class VendorApiError(RuntimeError):
    """A request to a vendor API that failed for good.

    Attributes:
        url: the endpoint (never the key: keys travel in headers only).
        status_code: the last HTTP status, None when no response came back.
        body: the start of the last response body (or the connection error).
    """

    def __init__(self, url: str, status_code: int | None, body: str, attempts: int) -> None:
        self.url, self.status_code, self.body = url, status_code, body
        status = f"HTTP {status_code}" if status_code is not None else "no response"
        hint = {
            401: "check the API key variable",
            403: "check the key's access to this model",
            404: "check the model name and the base URL variable",
        }.get(status_code or 0, "check the service status, or retry later with --resume")
        super().__init__(
            f"POST {url} failed after {attempts} attempt(s): {status}: {body[:500]}; {hint}"
        )


@dataclass(frozen=True)
class ScreenScaler:
    """The model's display of the screen: its size, and the vendor's integer coordinates
    checked on it, then mapped by the one mapping (:attr:`geometry`, pixel centres
    corresponding). When the model's display is at most the screen's size,
    ``to_model(to_screen(p)) == p`` for every model pixel ``p``: the exact inverse.

    Attributes:
        width, height: the display size the model is told and shown.
        screen_width, screen_height: the env's screen.
    """

    width: int
    height: int
    screen_width: int = SCREEN_WIDTH
    screen_height: int = SCREEN_HEIGHT

    @classmethod
    def fit(
        cls,
        max_width: int,
        max_height: int,
        screen: tuple[int, int] = (SCREEN_WIDTH, SCREEN_HEIGHT),
    ) -> ScreenScaler:
        """The largest display within ``max_width`` x ``max_height`` with the screen's
        aspect ratio (the screen itself when it fits): 1280x800 in XGA is 1024x640."""
        sw, sh = screen
        scale = min(1.0, max_width / sw, max_height / sh)
        return cls(round(sw * scale), round(sh * scale), sw, sh)

    @property
    def identity(self) -> bool:
        return (self.width, self.height) == (self.screen_width, self.screen_height)

    @property
    def geometry(self) -> ScreenGeometry:
        """The screen and the display as the formats map points between them."""
        return ScreenGeometry(self.screen_width, self.screen_height, self.width, self.height)

    def to_screen(self, x: Any, y: Any) -> tuple[int, int]:
        """Model coordinates -> screen pixels.

        Raises:
            ValueError: not integers, or off the model's display.
        """
        if isinstance(x, bool) or isinstance(y, bool):
            raise ValueError(f"coordinate: expected integers, got [{x!r}, {y!r}]")
        try:
            fx, fy = float(x), float(y)
        except (TypeError, ValueError):
            raise ValueError(f"coordinate: expected integers, got [{x!r}, {y!r}]") from None
        if not (0 <= fx < self.width and 0 <= fy < self.height):
            raise ValueError(
                f"coordinate [{x}, {y}] is off the {self.width}x{self.height} display; "
                f"expected 0 <= x < {self.width}, 0 <= y < {self.height}"
            )
        return self.geometry.to_screen(int(fx), int(fy))

    def to_model(self, x: int, y: int) -> tuple[int, int]:
        """Screen pixels -> model coordinates."""
        return self.geometry.to_image(x, y)

    def image(self, screenshot: np.ndarray) -> np.ndarray:
        """The screenshot as the model sees it (resized with area averaging)."""
        if self.identity:
            return screenshot
        resized = Image.fromarray(np.ascontiguousarray(screenshot, dtype=np.uint8)).resize(
            (self.width, self.height), Image.Resampling.BOX
        )
        return np.asarray(resized)


def vendor_credentials(
    key_envs: Sequence[str], base_url_env: str, default_base_url: str, vendor: str
) -> tuple[str, str]:
    """The API key (from the first of ``key_envs`` that is set; never from a file or a
    flag, so that it cannot end up in results) and the base URL (``base_url_env``, e.g.
    a stand-in's, or the vendor's).

    Raises:
        ValueError: none of ``key_envs`` is set.
    """
    key = next((os.environ[k] for k in key_envs if os.environ.get(k)), None)
    if not key:
        raise ValueError(f"{key_envs[0]} is not set: export your {vendor} API key there")
    return key, (os.environ.get(base_url_env) or default_base_url).rstrip("/")


def warn_if_retiring(vendor: str, model: str, retirements: Mapping[str, str]) -> None:
    """Log a warning when ``vendor`` has announced the end of life of ``model``.

    Args:
        retirements: model name -> the date it stops answering, as the vendor gives it.
    """
    when = retirements.get(model)
    if when:
        logger.warning(
            "%s model %s is deprecated: %s retires it on %s; choose a current model "
            "(docs/evaluate.md lists them)",
            vendor,
            model,
            vendor,
            when,
        )


def wait_seconds(value: Any, what: str = "wait") -> float:
    """A model's wait in seconds, checked.

    Raises:
        ValueError: not a number of seconds in 0..MAX_WAIT_S.
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ValueError(f"{what}: expected a number of seconds >= 0, got {value!r}")
    if value > MAX_WAIT_S:
        raise ValueError(
            f"{what}: at most {MAX_WAIT_S:g} s, got {value!r}; the page settles before "
            "every screenshot, so take a screenshot instead"
        )
    return float(value)


def png_base64(image: np.ndarray) -> str:
    """A uint8 ``(H, W, 3)`` image as base64 PNG (fast compression: CPU is scarcer)."""
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(image, dtype=np.uint8)).save(
        buffer, format="PNG", compress_level=1
    )
    return base64.b64encode(buffer.getvalue()).decode("ascii")


@dataclass
class TransportConfig:
    """How requests are sent: timeouts and retries (shared by the vendor configs)."""

    connect_timeout_s: float = 10.0
    read_timeout_s: float = 300.0
    max_retries: int = 6
    """Retries after the first attempt, on connection errors, timeouts, 408, 429, 5xx, 529."""
    backoff_initial_s: float = 2.0
    """First retry delay; doubles each retry (with jitter), capped at backoff_max_s.
    A ``retry-after`` header (seconds, up to MAX_RETRY_AFTER_S) is waited instead."""
    backoff_max_s: float = 60.0
    max_concurrency: int = 8
    """Sub-envs whose requests are in flight at once."""

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries: expected >= 0, got {self.max_retries}")
        if self.backoff_initial_s < 0 or self.backoff_max_s < self.backoff_initial_s:
            raise ValueError(
                "backoff: expected 0 <= backoff_initial_s <= backoff_max_s, got "
                f"{self.backoff_initial_s}, {self.backoff_max_s}"
            )
        if self.max_concurrency < 1:
            raise ValueError(f"max_concurrency: expected >= 1, got {self.max_concurrency}")


class JsonPoster:
    """POSTs JSON with retries; one ``requests.Session`` per thread (not thread-safe).

    Headers (the API key among them) are never logged nor put in errors.
    """

    def __init__(self, headers: dict[str, str], transport: TransportConfig) -> None:
        self._headers = headers
        self._transport = transport
        self._local = threading.local()

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
            session.headers.update(self._headers)
        return session

    def post(self, url: str, body: dict[str, Any]) -> dict[str, Any]:
        """The response JSON of a 200.

        Raises:
            VendorApiError: a non-retryable status, or retries used up.
        """
        c = self._transport
        status: int | None = None
        detail = ""
        for attempt in range(c.max_retries + 1):
            retry_after = None
            try:
                response = self._session().post(
                    url, json=body, timeout=(c.connect_timeout_s, c.read_timeout_s)
                )
            except (requests.ConnectionError, requests.Timeout) as exc:
                status, detail = None, type(exc).__name__
            else:
                if response.status_code == 200:
                    try:
                        return response.json()
                    except ValueError:  # a proxy's HTML page, a cut body: not retried
                        raise VendorApiError(
                            url, 200, f"not JSON: {response.text[:200]}", attempt + 1
                        ) from None
                status, detail = response.status_code, response.text
                if status not in RETRY_STATUS_CODES:
                    raise VendorApiError(url, status, detail, attempt + 1)
                retry_after = _retry_after_s(response)
            if attempt == c.max_retries:
                break
            if retry_after is not None:
                delay = retry_after  # the server knows when it will take more
            else:
                delay = min(c.backoff_max_s, c.backoff_initial_s * 2**attempt)
                delay *= 0.5 + random.random() / 2  # jitter: sub-envs don't retry in lockstep
            logger.warning(
                "POST %s: %s (attempt %d/%d); retrying in %.2f s",
                url,
                f"HTTP {status}" if status is not None else detail,
                attempt + 1,
                c.max_retries + 1,
                delay,
            )
            time.sleep(delay)
        raise VendorApiError(url, status, detail, c.max_retries + 1)


def _retry_after_s(response: requests.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        seconds = float(value) if value is not None else None
    except ValueError:  # an HTTP date: fall back to our own backoff
        return None
    if seconds is None or not 0 <= seconds <= MAX_RETRY_AFTER_S:
        return None  # absurd: our own backoff instead
    return seconds


@dataclass
class ToolCall:
    """One vendor tool call of a turn and what the env made of it.

    Attributes:
        call_id: the vendor's id, echoed in the result.
        raw: the call's input as the vendor sent it.
        actions: the env actions that play it (at least one); empty when ``error``.
        error: why the env cannot play it (sent back as a tool error).
        output_text: text to return with the result (``cursor_position``).
        extra: vendor specifics (OpenAI's pending safety checks).
        waits: seconds to wait before its ``k``-th action (a ``wait``: its
            ``screenshot`` step comes after the wait).
        screenshot: the screen after its last action (filled in as the env plays it).
    """

    call_id: str
    raw: dict[str, Any]
    actions: list[Action] = field(default_factory=list)
    error: str | None = None
    output_text: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    waits: dict[int, float] = field(default_factory=dict)
    screenshot: np.ndarray | None = None


@dataclass
class Turn:
    """A parsed model response: its calls, its text, its normalised usage."""

    calls: list[ToolCall]
    text: str = ""
    usage: dict[str, int] | None = None
    stop: str | None = None
    """Why no call (the episode ends): the vendor's stop reason, or our refusal."""


@dataclass
class Conversation:
    """One sub-env's episode with the vendor (subclasses add their state)."""

    instruction: str = ""
    turn: Turn | None = None
    # (call index, the action's index in its call, the action; None: the call's error)
    queue: deque[tuple[int, int, Action | None]] = field(default_factory=deque)
    playing: int | None = None  # the index of the call whose action the env just played
    pointer: tuple[int, int] | None = None  # screen pixels, after the last pointer action
    state: dict[str, Any] = field(default_factory=dict)


class ComputerUsePolicy(abc.ABC):
    """A vendor computer-use model behind the batched policy interface.

    Subclasses implement :meth:`_request` (the body for the next request of one
    conversation: the first, or the results of the last turn's calls) and
    :meth:`_parse` (a response -> :class:`Turn`).

    Attributes:
        name: the agent's label.
        scaler: screen <-> model display.
    """

    name = "cua"
    url: str

    def __init__(
        self, scaler: ScreenScaler, poster: JsonPoster, transport: TransportConfig
    ) -> None:
        self.scaler = scaler
        self._poster = poster
        self._conversations: dict[int, Conversation] = {}
        self._pool = ThreadPoolExecutor(
            max_workers=transport.max_concurrency, thread_name_prefix=f"{self.name}-policy"
        )

    def __enter__(self) -> ComputerUsePolicy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def begin_episode(self, env_index: int) -> None:
        self._conversations[env_index] = Conversation()

    def model_image(self, screenshot: np.ndarray) -> np.ndarray:
        """The screenshot as the model is shown it (resized to the display)."""
        return self.scaler.image(screenshot)

    @abc.abstractmethod
    def _request(self, conv: Conversation, screenshot: np.ndarray) -> dict[str, Any]:
        """The next request body; ``screenshot`` is the current screen (model size)."""

    @abc.abstractmethod
    def _parse(self, conv: Conversation, response: dict[str, Any]) -> Turn:
        """The turn a response holds (its calls mapped with :meth:`_map_call`)."""

    def act(
        self, observations: Sequence[dict[str, Any]], env_indices: Sequence[int]
    ) -> list[PolicyStep]:
        """One step per sub-env: the next queued call's action, or a new turn's first.

        Raises:
            ValueError: observations and env_indices differ in length.
            VendorApiError: a request failed for good (bad key, model or URL, or the
                API down through every retry).
        """
        if len(observations) != len(env_indices):
            raise ValueError(
                f"Expected one observation per env index, got {len(observations)} "
                f"observations and {len(env_indices)} indices"
            )
        start = time.perf_counter()
        convs = [self._conversations.setdefault(i, Conversation()) for i in env_indices]
        for conv, obs in zip(convs, observations, strict=True):
            conv.instruction = obs["instruction"]
            if conv.playing is not None and conv.turn is not None:
                conv.turn.calls[conv.playing].screenshot = obs["screenshot"]
        need = [k for k, conv in enumerate(convs) if not conv.queue]
        turns = list(
            self._pool.map(lambda k: self._next_turn(convs[k], observations[k]["screenshot"]), need)
        )
        new_turn = dict(zip(need, turns, strict=True))
        steps = [self._pop(conv, new_turn.get(k)) for k, conv in enumerate(convs)]
        # A model that asked to wait sees the screen after the wait (the sub-envs of
        # the batch wait together: it is one call).
        wait = max((step.extra.get("wait_s", 0.0) for step in steps), default=0.0)
        if wait:
            time.sleep(wait)
        elapsed = (time.perf_counter() - start) / max(len(observations), 1)
        for step in steps:
            step.policy_time_s = elapsed
        return steps

    def _next_turn(self, conv: Conversation, screenshot: np.ndarray) -> Turn:
        body = self._request(conv, self.model_image(screenshot))
        try:
            response = self._poster.post(self.url, body)
        except VendorApiError as exc:
            if exc.status_code in FATAL_STATUS_CODES or exc.status_code is None:
                raise
            if exc.status_code in RETRY_STATUS_CODES:
                raise  # retries used up: the API is down; --resume later
            # A 400/413/422: this conversation cannot go on (too long, refused); the
            # episode ends here, the run goes on.
            logger.warning("%s: the episode ends: %s", self.name, exc)
            return self._end(conv, f"VendorApiError: HTTP {exc.status_code}: {exc.body[:300]}")
        try:
            turn = self._parse(conv, response)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            # A response off the documented shape: this episode ends, the run goes on.
            logger.warning("%s: malformed response, the episode ends: %r", self.name, exc)
            return self._end(conv, f"MalformedResponse: {type(exc).__name__}: {exc}")
        conv.turn = turn
        conv.playing = None
        for index, call in enumerate(turn.calls):
            for k, action in enumerate(call.actions or [None]):
                conv.queue.append((index, k, action))
        return turn

    @staticmethod
    def _end(conv: Conversation, error: str) -> Turn:
        """A turn that ends the episode with ``error`` (a ``finish`` step that says why)."""
        conv.turn = Turn(calls=[], stop=error)
        conv.queue.clear()
        return conv.turn

    def _pop(self, conv: Conversation, turn: Turn | None) -> PolicyStep:
        """The step for the conversation's next queued action (``turn``: just received)."""
        extra: dict[str, Any] = {}
        text = ""
        if turn is not None:
            extra["usage"] = turn.usage
            text = turn.text
            if not conv.queue:  # no call: the model is done (or cannot go on)
                conv.playing = None
                failed = (turn.stop or "").startswith(("VendorApiError", "MalformedResponse"))
                error = turn.stop if failed else None
                extra["stop"] = turn.stop
                return PolicyStep(Action(ActionType.FINISH), error=error, text=text, extra=extra)
        assert conv.turn is not None
        index, k, action = conv.queue.popleft()
        call = conv.turn.calls[index]
        first_of_call = conv.playing != index
        conv.playing = index
        if first_of_call:
            text = "\n".join(t for t in (text, json.dumps(call.raw)) if t)
            extra |= {key: v for key, v in call.extra.items() if key != "id"}
        if call.waits.get(k):
            extra["wait_s"] = call.waits[k]
        if action is not None and action.pointer_after is not None:
            conv.pointer = action.pointer_after
        return PolicyStep(action=action, error=call.error, text=text, extra=extra)

    # Helpers for subclasses.

    def point(self, value: Any, what: str = "coordinate") -> tuple[int, int]:
        """A vendor ``[x, y]`` (model pixels) -> screen pixels.

        Raises:
            ValueError: not a pair of integers on the display.
        """
        if not isinstance(value, list | tuple) or len(value) != 2:
            raise ValueError(f"{what}: expected [x, y], got {value!r}")
        return self.scaler.to_screen(value[0], value[1])

"""Clients of the uirl OpenEnv server: OpenEnv's typed client, and a gym-like session.

:class:`UirlEnvClient` is OpenEnv's ``EnvClient`` for uirl (one WebSocket, one
session): ``reset(task=..., seed=..., options=...)`` and ``step(UirlAction(...))`` return
OpenEnv ``StepResult`` objects holding a :class:`~uirl_gym.openenv_wire.UirlObservation`.

:class:`OpenEnvSession` wraps it in the shape of ``UIEnv``'s calls, for code written
against the env (the TRL integration): screenshots as arrays, actions in the env's
format, ``info`` as the env's.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
from openenv.core import EnvClient
from openenv.core.client_types import StepResult
from openenv.core.sync_client import SyncEnvClient
from pydantic import ValidationError
from websockets.exceptions import ConnectionClosed

from uirl_gym.actions import Action, to_action
from uirl_gym.client import decode_image
from uirl_gym.openenv_wire import (
    DEFAULT_TASK,
    SESSION_CLOSED,
    TEXT_FIELDS,
    UirlAction,
    UirlObservation,
    UirlState,
)
from uirl_gym.page_text import element_list

__all__ = ["OpenEnvSession", "UirlEnvClient", "decode_screenshot", "to_wire_action"]

logger = logging.getLogger(__name__)

# What a lost connection raises (a server that restarted, a dropped socket, no answer).
CONNECTION_LOST = (ConnectionError, ConnectionClosed, TimeoutError, OSError)


class UirlEnvClient(EnvClient[UirlAction, UirlObservation, UirlState]):
    """OpenEnv's client for a uirl server (one WebSocket session).

    Example (a server from ``python -m uirl_gym.openenv --port 8000``)::

        client = UirlEnvClient(base_url="http://127.0.0.1:8000")
        result = client.reset(task="uirl/FormFill-v0", seed=3)
        result = client.step(UirlAction(action_type="left_click", x=640, y=400))
        result.observation.is_success, result.reward, result.done
        client.close()

    Called outside an event loop it runs synchronously (OpenEnv's client); inside one,
    ``await`` it, or use ``.sync()``. An error frame (unknown task, a step before the
    reset, an action of the wrong shape) raises ``RuntimeError`` naming the problem;
    the session stays open.
    """

    def _step_payload(self, action: UirlAction) -> dict[str, Any]:
        return action.model_dump(exclude_none=True, exclude={"metadata"})

    def _parse_result(self, payload: Mapping[str, Any]) -> StepResult[UirlObservation]:
        fields = dict(payload.get("observation", {}))
        # The env's info travels in both places; keep one.
        metadata = payload.get("metadata") or fields.pop("metadata", None) or {}
        fields.pop("metadata", None)
        observation = UirlObservation(
            **fields,
            reward=payload.get("reward"),
            done=bool(payload.get("done", False)),
            metadata=metadata,
        )
        return StepResult(
            observation=observation,
            reward=payload.get("reward"),
            done=observation.done,
            metadata=metadata,
        )

    def _parse_state(self, payload: Mapping[str, Any]) -> UirlState:
        return UirlState.model_validate(payload)


def decode_screenshot(screenshot: str) -> np.ndarray:
    """A base64 PNG screenshot as a uint8 (800, 1280, 3) array."""
    return decode_image(base64.b64decode(screenshot), "png")


def to_wire_action(action: Action | Mapping[str, Any]) -> UirlAction:
    """An action in the env's format (an ``Action``, a dict with ``type`` or
    ``action_type``, an action-space sample) as the server's :class:`UirlAction`.

    Raises:
        ValueError: unknown fields or action type, or a field of the wrong type.
    """
    parsed = to_action(action)
    fields = parsed.to_dict()
    fields["action_type"] = fields.pop("type")
    try:
        return UirlAction(**fields)
    except ValidationError as exc:
        raise ValueError(_validation_message(exc)) from None


class OpenEnvSession:
    """A uirl episode stream over an OpenEnv server, in ``UIEnv``'s shape.

    Interface (what the TRL integration calls)::

        session = OpenEnvSession("http://127.0.0.1:8000")
        screenshot, instruction, info = session.reset("uirl/SimpleDataEntry-v0", seed=0,
                                                      options={"num_rows": 1})
        screenshot, reward, terminated, truncated, info = session.step(
            {"type": "left_click", "x": 100, "y": 200})
        session.close()

    - ``screenshot``: a uint8 (800, 1280, 3) RGB array (the 1280x800 screen).
    - ``action``: what ``UIEnv.step`` takes: an :class:`~uirl_gym.actions.Action`, a dict
      with ``type`` (or ``action_type``) and the fields ``x``, ``y``, ``text``, ``keys``,
      ``direction``, ``amount``, ``end_x``, ``end_y``, or an action-space sample;
      screen pixels.
    - ``info``: the env's info (``is_success``, the task's counts, no ``progress``;
      ``task`` and ``task_seed`` after a reset). An action the env refuses (off-screen,
      a click without ``x``) pays the task's invalid-action penalty and sets
      ``info["invalid_action"]``, as ``UIEnv`` does; one that cannot even be sent (an
      unknown type or field) is not sent: reward 0, the last screenshot,
      ``info["invalid_action"]``. A session failure ends the episode truncated with
      ``info["error"]``; so does a session the server closed for idleness, and a lost
      connection (the server restarted, the network dropped it): the next ``reset``
      opens a new session.

    Raises (from ``reset``/``step``):
        RuntimeError: the server refused the call: an unknown task or option, a step
            with no episode running (``terminated`` or ``truncated`` came back true), a
            full server; the session stays usable.
        ConnectionError: the server cannot be reached.
    """

    def __init__(
        self,
        base_url: str,
        *,
        connect_timeout_s: float = 10.0,
        message_timeout_s: float = 120.0,
    ) -> None:
        self.base_url = base_url
        self._timeouts = {
            "connect_timeout_s": connect_timeout_s,
            "message_timeout_s": message_timeout_s,
        }
        self._client = self._connect()
        self._lost = False  # the connection broke: the next reset opens a new session
        self._screenshot: np.ndarray | None = None
        self._is_success = False
        self._observations: tuple[str, ...] = ()
        # The text observations of the last answer (those the reset asked for).
        self.page: dict[str, Any] = {}

    def _connect(self) -> SyncEnvClient:
        # The sync wrapper runs the socket on a loop thread of its own, so the session
        # works both in plain code and under a caller's running event loop.
        client = UirlEnvClient(base_url=self.base_url, **self._timeouts).sync()
        client.connect()
        return client

    def _reconnect(self) -> None:
        try:
            self._client.close()
        except Exception as exc:  # the old socket is gone already
            logger.debug("closing the lost session: %s", exc)
        self._client = self._connect()
        self._lost = False

    def reset(
        self,
        task: str = DEFAULT_TASK,
        seed: int | None = None,
        options: Mapping[str, Any] | None = None,
        observations: tuple[str, ...] = (),
    ) -> tuple[np.ndarray, str, dict[str, Any]]:
        """Start an episode of ``task`` (a Gymnasium id): (screenshot, instruction, info).
        ``observations`` asks for the page as text too (UIEnv's names): each answer's
        are in :attr:`page` then.

        A session the server closed (idle longer than its ``--idle-timeout-s``) is
        replaced by a new one first.
        """
        kwargs: dict[str, Any] = {"task": task, "seed": seed, "options": dict(options or {})}
        if observations:
            kwargs["observations"] = list(observations)
        self._observations = tuple(observations)
        try:
            if self._lost:
                raise ConnectionError("the last step lost the connection")
            result = self._client.reset(**kwargs)
        except (RuntimeError, *CONNECTION_LOST) as exc:
            if isinstance(exc, RuntimeError) and SESSION_CLOSED not in str(exc):
                raise
            logger.warning("this session is gone (%s); opening a new one", exc)
            self._reconnect()
            result = self._client.reset(**kwargs)
        observation = result.observation
        self._screenshot = decode_screenshot(observation.screenshot)
        self._is_success = observation.is_success
        self.page = self._page(observation)
        return self._screenshot, observation.instruction, dict(observation.metadata)

    def step(
        self, action: Action | Mapping[str, Any]
    ) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Act: (screenshot, reward, terminated, truncated, info), as ``UIEnv.step``."""
        if self._screenshot is None:
            raise RuntimeError("no episode is running: call reset(task=...) before step()")
        try:
            wire = to_wire_action(action)
        except (ValueError, TypeError) as exc:
            message = f"{type(exc).__name__}: {exc}"
            if "last_action_error" in self.page:
                self.page = {**self.page, "last_action_error": message}
            return self._screenshot, 0.0, False, False, self._info(invalid_action=message)
        try:
            result = self._client.step(wire)
        except (RuntimeError, *CONNECTION_LOST) as exc:
            if isinstance(exc, RuntimeError) and SESSION_CLOSED not in str(exc):
                raise
            # As UIEnv does when its session fails mid-episode: the episode ends
            # truncated with the error; the next reset opens a new session.
            self._lost = not isinstance(exc, RuntimeError)
            error = f"{type(exc).__name__}: {exc}"
            return self._screenshot, 0.0, False, True, self._info(error=error)
        observation = result.observation
        self._screenshot = decode_screenshot(observation.screenshot)
        self._is_success = observation.is_success
        self.page = self._page(observation)
        info = dict(observation.metadata)
        return (
            self._screenshot,
            float(result.reward or 0.0),
            observation.terminated,
            observation.truncated,
            info,
        )

    def _page(self, observation: UirlObservation) -> dict[str, Any]:
        """The text observations asked for, as UIEnv gives them."""
        page: dict[str, Any] = {}
        for name in self._observations:
            if name in TEXT_FIELDS:
                page[name] = getattr(observation, name)
            elif name == "som":
                page[name] = decode_screenshot(observation.som)
            elif name == "elements":
                page[name] = element_list(
                    {e["bid"]: e for e in observation.elements if isinstance(e, dict)}
                )
        return page

    def _info(self, **fields: str) -> dict[str, Any]:
        return {"is_success": self._is_success, **fields}

    def state(self) -> UirlState:
        """The server's view of the episode (task, seed, step count, return)."""
        return self._client.state()

    def close(self) -> None:
        """Close the WebSocket: the server closes the session (and its browser)."""
        self._client.close()

    def __enter__(self) -> OpenEnvSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _validation_message(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in error['loc']) or 'action'}: {error['msg']}"
        for error in exc.errors()
    )

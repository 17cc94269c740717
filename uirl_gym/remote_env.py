"""A uirl task on an OpenEnv server as a Gymnasium env: the sub-env of ``runtime: openenv``.

The trainers and ``scripts/evaluate.py`` step :class:`OpenEnvEnv` exactly as they step a
:class:`~uirl_gym.env.UIEnv`: the same observation and action spaces, the same seeds
(the server's env derives the task instance from the seed as a local one does), the
same ``info`` less the task's record (``progress``, which the server keeps: docs/openenv.md).
The reward is the server's (its ``--reward-mode``); the oracle (dense shaping, the
scripted expert) is not reachable through OpenEnv.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from uirl_gym.actions import DEFAULT_ACTION_TIMEOUT_S, Action, action_space
from uirl_gym.env import (
    ClosedEnvironmentError,
    ResetNeededError,
    check_observations,
    observation_space,
)
from uirl_gym.openenv_client import OpenEnvSession
from uirl_gym.tasks import TASKS, task_spec

__all__ = ["OpenEnvEnv"]

# How much longer than a step's deadline the client waits for any answer from the server.
MESSAGE_MARGIN_S = 30.0


class OpenEnvEnv(gym.Env[dict[str, Any], dict[str, Any]]):
    """One WebSocket session on a uirl OpenEnv server (``python -m uirl_gym.openenv``).

    Args:
        base_url: the server, e.g. ``http://10.0.0.7:8000``.
        task: the task of episodes whose reset options name none.
        split: the default ``split`` option (``train`` or ``test``).
        step_timeout_s: the step's deadline; any message is awaited
            ``MESSAGE_MARGIN_S`` longer (the server answers a step past its own deadline).
        observations: the page as text too, as ``UIEnv``'s (docs/env.md).

    Attributes:
        timings: wall times of the last reset or step (as ``UIEnv.timings``).
        episode_task: the task of the episode running (or last run).

    A lost connection ends the episode truncated with ``info["error"]`` and the next
    reset opens a new session (:class:`~uirl_gym.openenv_client.OpenEnvSession`).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(
        self,
        base_url: str,
        *,
        render_mode: str | None = None,
        task: str = "simple_data_entry",
        split: str = "train",
        step_timeout_s: float = DEFAULT_ACTION_TIMEOUT_S,
        observations: tuple[str, ...] | list[str] = (),
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode: expected None or 'rgb_array', got {render_mode!r}")
        task_spec(task)
        self.render_mode = render_mode
        self.task = task
        self.split = split
        self.observations = check_observations(observations)
        self.observation_space = observation_space(observations=self.observations)
        self.action_space = action_space()
        # The server enforces the step's deadline itself (its --step-timeout-s) and
        # answers a step past it truncated; the client's own limit only tells a server
        # that went silent, so it waits that margin longer (a reset may start a session).
        self.session = OpenEnvSession(base_url, message_timeout_s=step_timeout_s + MESSAGE_MARGIN_S)
        self.timings: dict[str, float] = {}
        self.episode_task: str | None = None
        self._obs: dict[str, Any] | None = None
        self._running = False
        self._closed = False

    def reset(
        self, *, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        self._check_open()
        super().reset(seed=seed)
        asked = {"split": self.split, **(options or {})}
        task = asked.pop("task", self.task)
        t0 = time.perf_counter()
        self._running = False
        try:
            screenshot, instruction, info = self.session.reset(
                TASKS[task_spec(task).name].env_id,
                seed=seed,
                options=asked,
                observations=self.observations,
            )
        except RuntimeError as exc:
            if "CAPACITY_REACHED" not in str(exc):
                raise
            raise RuntimeError(
                f"{exc}. Fix: start the OpenEnv server with --max-sessions of at least "
                "env.num_envs x processes (each sub-env holds a session)"
            ) from None
        self.timings = {"reset_s": time.perf_counter() - t0}
        self._obs = {"screenshot": screenshot, "instruction": instruction, **self.session.page}
        self.episode_task = info.get("task", task)
        self._running = True
        return self._obs, info

    def step(
        self, action: Action | Mapping[str, Any]
    ) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        self._check_open()
        if not self._running or self._obs is None:
            raise ResetNeededError("no episode is running: call reset() before step()")
        t0 = time.perf_counter()
        screenshot, reward, terminated, truncated, info = self.session.step(action)
        self.timings = {"step_s": time.perf_counter() - t0}
        self._obs = {
            "screenshot": screenshot,
            "instruction": self._obs["instruction"],
            **self.session.page,
        }
        self._running = not (terminated or truncated)
        return self._obs, reward, terminated, truncated, info

    def oracle(self) -> dict[str, Any]:
        """Never served: the vector env's sub-envs share UIEnv's calls, and this one has
        no ``/oracle`` to read (what the scripted expert and dense rewards need)."""
        raise NotImplementedError(
            "an OpenEnv server keeps the task's oracle to itself: the scripted expert and "
            "dense rewards need a uirl session server (any runtime but openenv)"
        )

    def render(self) -> np.ndarray | None:
        if self.render_mode == "rgb_array" and self._obs is not None:
            return self._obs["screenshot"]
        return None

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.session.close()
        super().close()

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedEnvironmentError("this OpenEnvEnv is closed; make a new one")

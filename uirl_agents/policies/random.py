"""RandomPolicy: valid random actions on the screen, a baseline and a smoke-test driver."""

from __future__ import annotations

import string
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from uirl_agents.policies.base import PolicyStep
from uirl_gym.actions import SCREEN_HEIGHT, SCREEN_WIDTH, Action, ActionType, ScrollDirection

# Weights favour clicks: they are what moves a GUI task forward.
_ACTION_WEIGHTS = {
    ActionType.LEFT_CLICK: 0.45,
    ActionType.DOUBLE_CLICK: 0.05,
    ActionType.TYPE: 0.2,
    ActionType.KEYS: 0.15,
    ActionType.SCROLL: 0.15,
}
_KEYS = ("Enter", "Tab", "shift+Tab", "Backspace", "ctrl+a", "ctrl+c", "ctrl+v", "Escape")
_TEXT_CHARS = np.array(list(string.ascii_letters + string.digits + "@. "))


class RandomPolicy:
    """Samples clicks, short typed strings, key presses and scrolls uniformly on the screen.

    Deterministic per ``(seed, env_index, episode)``: sub-envs and episodes do not share
    a random stream, so results do not depend on batching.

    Attributes:
        name: "random".
        seed: the base seed.
    """

    name = "random"

    def __init__(self, seed: int = 0, max_text_length: int = 12) -> None:
        self.seed = seed
        self.max_text_length = max_text_length
        self._episodes: dict[int, int] = {}
        self._rngs: dict[int, np.random.Generator] = {}
        self._types = list(_ACTION_WEIGHTS)
        weights = np.array(list(_ACTION_WEIGHTS.values()))
        self._weights = weights / weights.sum()

    def begin_episode(self, env_index: int) -> None:
        episode = self._episodes.get(env_index, -1) + 1
        self._episodes[env_index] = episode
        self._rngs[env_index] = np.random.default_rng([self.seed, env_index, episode])

    def act(
        self, observations: Sequence[dict[str, Any]], env_indices: Sequence[int]
    ) -> list[PolicyStep]:
        start = time.perf_counter()
        steps = []
        for obs, env_index in zip(observations, env_indices, strict=True):
            if env_index not in self._rngs:
                self.begin_episode(env_index)
            height, width = obs["screenshot"].shape[:2]
            action = self._sample(
                self._rngs[env_index], min(width, SCREEN_WIDTH), min(height, SCREEN_HEIGHT)
            )
            steps.append(PolicyStep(action=action.validate()))
        elapsed = (time.perf_counter() - start) / max(len(steps), 1)
        for step in steps:
            step.policy_time_s = elapsed
        return steps

    def _sample(self, rng: np.random.Generator, width: int, height: int) -> Action:
        kind = self._types[rng.choice(len(self._types), p=self._weights)]
        x, y = int(rng.integers(width)), int(rng.integers(height))
        if kind is ActionType.TYPE:
            length = int(rng.integers(1, self.max_text_length + 1))
            return Action(kind, text="".join(rng.choice(_TEXT_CHARS, size=length)))
        if kind is ActionType.KEYS:
            return Action(kind, keys=str(rng.choice(_KEYS)))
        if kind is ActionType.SCROLL:
            direction = (ScrollDirection.UP, ScrollDirection.DOWN)[int(rng.integers(2))]
            return Action(kind, x=x, y=y, direction=direction, amount=int(rng.integers(1, 6)))
        return Action(kind, x=x, y=y)

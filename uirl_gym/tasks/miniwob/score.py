"""MiniWoB++ rewards and success, from the task's record (the page's own reward).

The episode pays once, on the step where the page ends it (``core.endEpisode``): the
record's ``reward``, computed as the ``reward`` option asks (raw by default). Success:
the raw reward reaches ``success_threshold`` (default 1.0, the page's full reward).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from uirl_gym.tasks.base import EpisodeScorer
from uirl_gym.tasks.miniwob.task import parse_options
from uirl_gym.tasks.miniwob.wheel import MiniWobInfo


@dataclass(frozen=True)
class RewardConfig:
    """What the env charges besides the page's reward.

    Attributes:
        invalid_action: charged per action the env or the server refuses.
    """

    invalid_action: float = 0.0


class MiniWobScorer(EpisodeScorer):
    """Pays the page's reward when the page ends the episode."""

    def __init__(self, progress: Mapping[str, Any], rewards: RewardConfig) -> None:
        self.rewards = rewards
        self.task = str(progress["task"])
        self.threshold = float(progress["success_threshold"])
        self._paid = False
        self._done = False
        self.raw_reward: float | None = None
        self._read(progress)
        # An episode that ended before the first screenshot pays nothing (it cannot
        # have been the agent's doing).
        self._paid = self._done

    def _read(self, progress: Mapping[str, Any]) -> None:
        self._done = bool(progress["done"])
        self.raw_reward = progress["raw_reward"]
        self._reward = progress["reward"]

    def reset_info(self) -> dict[str, Any]:
        return {"miniwob_task": self.task}

    def reward(self, progress: Mapping[str, Any]) -> float:
        self._read(progress)
        if self._done and not self._paid:
            self._paid = True
            return float(self._reward or 0.0)
        return 0.0

    def potential(self, oracle: Mapping[str, Any]) -> float:
        return 0.0  # MiniWoB++ has no shaping: dense mode pays what sparse pays

    @property
    def done(self) -> bool:
        return self._done

    def status(self) -> dict[str, Any]:
        raw = self.raw_reward
        return {
            "is_success": self._done and raw is not None and raw >= self.threshold,
            "raw_reward": raw,
        }


def check_options(options: Mapping[str, Any], info: MiniWobInfo | None = None) -> None:
    """Refuse invalid reset options before any round trip (``ValueError``); ``info``:
    the task (its size bounds ``zoom``)."""
    parse_options(options, info)

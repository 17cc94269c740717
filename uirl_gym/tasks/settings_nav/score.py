"""SettingsNav's rewards and success, from its record (docs/tasks/settings_nav.md).

Runs in the env, on the JSON the session returns: ``/progress`` after every action,
and ``/oracle`` (what the page shows, saved or not) for dense shaping.

The score of a record is ``correct_setting`` per target saved at its value minus
``changed_setting`` per non-target saved at a value other than its initial one; the
sparse reward of a step is the change of that score, so undoing a mistake (saving the
old value back) refunds its charge, and a target saved right then wrong again is paid
back. Success: every target saved right and no non-target changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from uirl_gym.tasks.base import EpisodeScorer
from uirl_gym.tasks.settings_nav.task import parse_options


@dataclass(frozen=True)
class RewardConfig:
    """What the reward pays.

    Attributes:
        correct_setting: paid per target setting saved at its asked value.
        changed_setting: charged per non-target setting saved at another value than it
            had at the start.
        invalid_action: charged per action the env or the server refuses.
        dense_saved: dense mode, the potential per target saved at its value.
        dense_pending: dense mode, the potential per target that the page shows at its
            value (pending, in a dialog or in the section) but that is not saved yet.
    """

    correct_setting: float = 1.0
    changed_setting: float = 0.5
    invalid_action: float = 0.1
    dense_saved: float = 0.1
    dense_pending: float = 0.05


class SettingsNavScorer(EpisodeScorer):
    """One episode's score: the targets, which are saved right, which others changed."""

    def __init__(self, progress: Mapping[str, Any], rewards: RewardConfig) -> None:
        self.rewards = rewards
        self.targets: dict[str, Any] = dict(progress["targets"])
        self.num_correct = 0
        self.num_changed = 0
        self._score = 0.0
        self._update(progress)

    def _update(self, progress: Mapping[str, Any]) -> None:
        saved = progress["saved_targets"]
        self.num_correct = sum(saved.get(i) == v for i, v in self.targets.items())
        self.num_changed = len(progress["changed_non_targets"])

    def reset_info(self) -> dict[str, Any]:
        return {"targets": dict(self.targets)}

    def reward(self, progress: Mapping[str, Any]) -> float:
        """The change of the record's score since the last call."""
        self._update(progress)
        score = (
            self.rewards.correct_setting * self.num_correct
            - self.rewards.changed_setting * self.num_changed
        )
        reward, self._score = score - self._score, score
        return reward

    def potential(self, oracle: Mapping[str, Any]) -> float:
        """Targets saved right, and targets the page shows right but not saved yet."""
        saved, page = oracle["saved"], oracle["page_values"]
        right_saved = sum(saved[i] == v for i, v in self.targets.items())
        right_pending = sum(
            saved[i] != v and i in page and page[i] == v for i, v in self.targets.items()
        )
        return self.rewards.dense_saved * right_saved + self.rewards.dense_pending * right_pending

    @property
    def done(self) -> bool:
        return self.num_correct == len(self.targets)

    def status(self) -> dict[str, Any]:
        return {
            "is_success": self.done and self.num_changed == 0,
            "num_correct": self.num_correct,
            "num_changed_non_targets": self.num_changed,
        }


def check_options(options: Mapping[str, Any]) -> None:
    """Refuse invalid reset options before any round trip (the task's own checks).

    Raises:
        ValueError: an unknown option, or a value of the wrong type or range.
    """
    parse_options(options)

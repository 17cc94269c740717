"""FormFill's rewards and success, from its record (docs/tasks/form_fill.md has the rules).

Runs in the env, on the JSON the session returns: ``/progress`` after every action,
and ``/oracle`` (what each form field holds now) for dense shaping.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from uirl_gym.tasks.base import EpisodeScorer
from uirl_gym.tasks.form_fill.data import field_matches
from uirl_gym.tasks.form_fill.task import parse_options


@dataclass(frozen=True)
class RewardConfig:
    """What the reward pays.

    Attributes:
        correct_submission: paid for the first submission whose every field matches
            (the episode then terminates).
        wrong_submission: charged (as a negative reward) per recorded submission with
            a field that does not match. Refused submissions (validation errors) are
            not charged.
        invalid_action: charged per action the env or the server refuses.
        dense_field: dense mode, the potential per form field that holds its target
            value now.
    """

    correct_submission: float = 1.0
    wrong_submission: float = 1.0
    invalid_action: float = 0.1
    dense_field: float = 0.1


class FormFillScorer(EpisodeScorer):
    """One episode's score: whether a correct submission came, and what was wrong."""

    def __init__(self, progress: Mapping[str, Any], rewards: RewardConfig) -> None:
        self.rewards = rewards
        self.fields: list[str] = list(progress["fields"])
        self.solved = False
        self.num_wrong = 0
        self.num_refused = 0
        self._correct_seen = progress["num_correct_submissions"]
        self._incorrect_seen = progress["num_incorrect_submissions"]

    def reset_info(self) -> dict[str, Any]:
        return {"fields": list(self.fields)}

    def reward(self, progress: Mapping[str, Any]) -> float:
        """Pay for submissions recorded since the last call."""
        reward = 0.0
        new_correct = progress["num_correct_submissions"] - self._correct_seen
        if new_correct > 0 and not self.solved:
            self.solved = True
            reward += self.rewards.correct_submission
            new_correct -= 1
        # A correct submission after the first pays nothing more and charges nothing
        # (the env terminates on the first, so it only happens on a shared session).
        new_incorrect = progress["num_incorrect_submissions"] - self._incorrect_seen
        self.num_wrong += new_incorrect
        reward -= self.rewards.wrong_submission * new_incorrect
        self._correct_seen = progress["num_correct_submissions"]
        self._incorrect_seen = progress["num_incorrect_submissions"]
        self.num_refused = progress.get("num_refused_submissions", self.num_refused)
        return reward

    def potential(self, oracle: Mapping[str, Any]) -> float:
        """The form fields that hold their target value now (shown or not)."""
        current = oracle["form_values"]
        matching = sum(
            field_matches(f, current.get(f), target) for f, target in oracle["targets"].items()
        )
        return self.rewards.dense_field * matching

    @property
    def done(self) -> bool:
        return self.solved

    def status(self) -> dict[str, Any]:
        return {
            "is_success": self.solved and self.num_wrong == 0,
            "num_wrong": self.num_wrong,
            "num_refused": self.num_refused,
        }


def check_options(options: Mapping[str, Any]) -> None:
    """Refuse invalid reset options before any round trip (the task's own check).

    Raises:
        ValueError: (a ``TaskOptionsError``) an unknown option or a bad value.
    """
    parse_options(options)

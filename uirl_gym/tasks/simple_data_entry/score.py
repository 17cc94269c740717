"""SimpleDataEntry's rewards and success, from its record (docs/env.md has the rules).

Runs in the env, on the JSON the session returns: ``/progress`` after every action,
and ``/oracle`` (what the form fields hold, which cell is selected) for dense shaping.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from uirl_gym.tasks.base import EpisodeScorer
from uirl_gym.tasks.simple_data_entry import task
from uirl_gym.tasks.simple_data_entry.task import MAX_TARGET_ROWS

FORM_FIELDS = ("first_name", "last_name", "email")


@dataclass(frozen=True)
class RewardConfig:
    """What the reward pays. See docs/env.md for the exact rules.

    Attributes:
        correct_submission: paid once per target row submitted correctly.
        wrong_submission: charged (as a negative reward) per submission matching no
            row, a non-target row, or a target row already submitted.
        invalid_action: charged per action the env or the server refuses.
        dense_field: dense mode, the potential per form field that holds a remaining
            target row's value (the best-matching row counts).
        dense_cell: dense mode, the potential of a selected sheet cell that lies in a
            remaining target row.
    """

    correct_submission: float = 1.0
    wrong_submission: float = 1.0
    invalid_action: float = 0.1
    dense_field: float = 0.1
    dense_cell: float = 0.05


class SimpleDataEntryScorer(EpisodeScorer):
    """One episode's score: the target rows, what was submitted, what was wrong."""

    def __init__(self, progress: Mapping[str, Any], rewards: RewardConfig) -> None:
        self.rewards = rewards
        self.target_rows: list[int] = list(progress["target_rows"])
        self.submitted_targets: set[int] = set()
        self.num_wrong = 0
        self._matched_seen = 0
        self._incorrect_seen = 0

    def reset_info(self) -> dict[str, Any]:
        return {"target_rows": list(self.target_rows)}

    def reward(self, progress: Mapping[str, Any]) -> float:
        """Pay for submissions made since the last call."""
        reward = 0.0
        matched = progress["submitted_row_indices"]
        for row in matched[self._matched_seen :]:
            if row in self.target_rows and row not in self.submitted_targets:
                self.submitted_targets.add(row)
                reward += self.rewards.correct_submission
            else:
                self.num_wrong += 1
                reward -= self.rewards.wrong_submission
        new_incorrect = progress["num_incorrect_submissions"] - self._incorrect_seen
        self.num_wrong += new_incorrect
        reward -= self.rewards.wrong_submission * new_incorrect
        self._matched_seen = len(matched)
        self._incorrect_seen = progress["num_incorrect_submissions"]
        return reward

    def potential(self, oracle: Mapping[str, Any]) -> float:
        """Form fields and the selected cell that match a remaining target row."""
        remaining = [
            values
            for row, values in zip(oracle["target_rows"], oracle["target_values"], strict=True)
            if row not in self.submitted_targets
        ]
        if oracle["view"] != "form" or not remaining:
            fields = 0
        else:
            current = [oracle["inputs"][k]["value"].strip() for k in FORM_FIELDS]
            fields = max(sum(a == b for a, b in zip(current, v, strict=True)) for v in remaining)
        cell = oracle["selected_cell"]
        remaining_rows = set(oracle["target_rows"]) - self.submitted_targets
        on_target = cell is not None and cell["data_index"] in remaining_rows
        return self.rewards.dense_field * fields + self.rewards.dense_cell * on_target

    @property
    def done(self) -> bool:
        return set(self.target_rows) <= self.submitted_targets

    def status(self) -> dict[str, Any]:
        return {
            "is_success": self.done and self.num_wrong == 0,
            "num_correct": len(self.submitted_targets),
            "num_wrong": self.num_wrong,
        }


def check_options(options: Mapping[str, Any]) -> None:
    """Refuse, before any round trip, invalid options (the task's own checks) and
    options whose instruction would not fit the space.

    The task caps ``num_rows`` at ``MAX_TARGET_ROWS``; ``rows`` gets the same cap here,
    which keeps the instruction within the observation's text limit.

    Raises:
        ValueError: more than ``MAX_TARGET_ROWS`` rows in ``options["rows"]``; (a
            ``TaskOptionsError``) an unknown option or a bad value.
    """
    rows = options.get("rows")
    if isinstance(rows, list | tuple) and len(rows) > MAX_TARGET_ROWS:
        raise ValueError(
            f"rows: at most {MAX_TARGET_ROWS} target rows, got {len(rows)} (the same cap as "
            "num_rows: the instruction must fit the observation space); pass fewer rows "
            "and spread the rest over more episodes"
        )
    task.check_options(options)

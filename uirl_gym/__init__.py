"""uirl_gym: a Gymnasium environment for computer-use agents.

Importing it registers one id per task (``uirl/SimpleDataEntry-v0``, ...): the task
registry, ``uirl_gym.tasks``, registers every task it finds, plug-ins included. Without
the import, ``gym.make("uirl_gym:uirl/SimpleDataEntry-v0")`` imports it first
(Gymnasium's module prefix).
"""

import warnings
from typing import Any

from uirl_gym.actions import Action, ActionType, action_space
from uirl_gym.env import ClosedEnvironmentError, ResetNeededError, UIEnv
from uirl_gym.tasks import MAX_EPISODE_STEPS

__all__ = [
    "MAX_EPISODE_STEPS",
    "Action",
    "ActionType",
    "ClosedEnvironmentError",
    "ResetNeededError",
    "UIEnv",
    "action_space",
]


def __getattr__(name: str) -> Any:
    # uirl_gym.RewardConfig was SimpleDataEntry's reward weights alone (each task has its
    # own RewardConfig beside its scorer): the old name goes in the next release.
    if name == "RewardConfig":
        from uirl_gym.tasks.simple_data_entry.score import RewardConfig

        warnings.warn(
            "uirl_gym.RewardConfig is SimpleDataEntry's: import it from "
            "uirl_gym.tasks.simple_data_entry.score (each task has its own RewardConfig)",
            DeprecationWarning,
            stacklevel=2,
        )
        return RewardConfig
    raise AttributeError(f"module 'uirl_gym' has no attribute {name!r}")

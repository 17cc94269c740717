"""uirl_gym: a Gymnasium environment for computer-use agents.

Importing it registers one id per task (``uirl/SimpleDataEntry-v0``, ...): the task
registry, ``uirl_gym.tasks``, registers every task it finds, plug-ins included. Without
the import, ``gym.make("uirl_gym:uirl/SimpleDataEntry-v0")`` imports it first
(Gymnasium's module prefix).
"""

from uirl_gym.actions import Action, ActionType, action_space
from uirl_gym.env import ClosedEnvironmentError, ResetNeededError, RewardConfig, UIEnv
from uirl_gym.tasks import MAX_EPISODE_STEPS

__all__ = [
    "MAX_EPISODE_STEPS",
    "Action",
    "ActionType",
    "ClosedEnvironmentError",
    "ResetNeededError",
    "RewardConfig",
    "UIEnv",
    "action_space",
]

ENV_ID = "uirl/SimpleDataEntry-v0"

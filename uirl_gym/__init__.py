"""uirl_gym: a Gymnasium environment for computer-use agents.

Importing it registers one id per task (``uirl/SimpleDataEntry-v0``, ...: see
``uirl_gym.tasks.TASKS``). Without the import,
``gym.make("uirl_gym:uirl/SimpleDataEntry-v0")`` imports it first (Gymnasium's
module prefix).
"""

from gymnasium.envs.registration import register, registry

from uirl_gym.actions import Action, ActionType, action_space
from uirl_gym.env import ClosedEnvironmentError, ResetNeededError, RewardConfig, UIEnv
from uirl_gym.tasks import TASKS

__all__ = [
    "Action",
    "ActionType",
    "ClosedEnvironmentError",
    "ResetNeededError",
    "RewardConfig",
    "UIEnv",
    "action_space",
]

ENV_ID = "uirl/SimpleDataEntry-v0"
MAX_EPISODE_STEPS = 60

for _spec in TASKS.values():
    if _spec.env_id not in registry:
        register(
            id=_spec.env_id,
            entry_point="uirl_gym.env:UIEnv",
            vector_entry_point="uirl_gym.vector:SessionVectorEnv",
            max_episode_steps=MAX_EPISODE_STEPS,
            nondeterministic=_spec.nondeterministic,
            disable_env_checker=True,
            kwargs={"task": _spec.name},
        )

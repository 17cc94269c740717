"""Deprecated: moved to :mod:`uirl_agents.trainers.algorithms.ppo`; this path goes in the next release."""

import warnings

from uirl_agents.trainers.algorithms.ppo import *  # noqa: F403

warnings.warn(
    "uirl_agents.trainers.ppo is deprecated: import uirl_agents.trainers.algorithms.ppo",
    DeprecationWarning,
    stacklevel=2,
)

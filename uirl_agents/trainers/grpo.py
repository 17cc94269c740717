"""Deprecated: moved to :mod:`uirl_agents.trainers.algorithms.grpo`; this path goes in the next release."""

import warnings

from uirl_agents.trainers.algorithms.grpo import *  # noqa: F403

warnings.warn(
    "uirl_agents.trainers.grpo is deprecated: import uirl_agents.trainers.algorithms.grpo",
    DeprecationWarning,
    stacklevel=2,
)

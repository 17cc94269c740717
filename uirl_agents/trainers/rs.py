"""Deprecated: moved to :mod:`uirl_agents.trainers.algorithms.expert_iteration`; this path goes in the next release."""

import warnings

from uirl_agents.trainers.algorithms.expert_iteration import *  # noqa: F403

warnings.warn(
    "uirl_agents.trainers.rs is deprecated: import uirl_agents.trainers.algorithms.expert_iteration",
    DeprecationWarning,
    stacklevel=2,
)

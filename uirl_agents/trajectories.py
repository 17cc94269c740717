"""Deprecated: moved to :mod:`uirl_agents.episodes.trajectories`; this path goes in the next release."""

import warnings

from uirl_agents.episodes.trajectories import *  # noqa: F403

warnings.warn(
    "uirl_agents.trajectories is deprecated: import uirl_agents.episodes.trajectories",
    DeprecationWarning,
    stacklevel=2,
)

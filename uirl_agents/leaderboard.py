"""Deprecated: moved to :mod:`uirl_agents.evaluation.leaderboard`; this path goes in the next release."""

import warnings

from uirl_agents.evaluation.leaderboard import *  # noqa: F403

warnings.warn(
    "uirl_agents.leaderboard is deprecated: import uirl_agents.evaluation.leaderboard",
    DeprecationWarning,
    stacklevel=2,
)

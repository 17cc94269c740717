"""Deprecated: moved to :mod:`uirl_agents.episodes.rollout`; this path goes in the next release."""

import warnings

from uirl_agents.episodes.rollout import *  # noqa: F403

warnings.warn(
    "uirl_agents.rollout is deprecated: import uirl_agents.episodes.rollout",
    DeprecationWarning,
    stacklevel=2,
)

"""Deprecated: moved to :mod:`uirl_agents.evaluation.agents`; this path goes in the next release."""

import warnings

from uirl_agents.evaluation.agents import *  # noqa: F403

warnings.warn(
    "uirl_agents.agents is deprecated: import uirl_agents.evaluation.agents",
    DeprecationWarning,
    stacklevel=2,
)

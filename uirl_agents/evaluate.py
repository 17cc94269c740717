"""Deprecated: moved to :mod:`uirl_agents.evaluation.benchmark`; this path goes in the next release."""

import warnings

from uirl_agents.evaluation.benchmark import *  # noqa: F403

warnings.warn(
    "uirl_agents.evaluate is deprecated: import uirl_agents.evaluation.benchmark",
    DeprecationWarning,
    stacklevel=2,
)

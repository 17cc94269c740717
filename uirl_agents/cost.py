"""Deprecated: moved to :mod:`uirl_agents.evaluation.cost` and :mod:`uirl_agents.policies.usage`; this path goes in the next release."""

import warnings

from uirl_agents.evaluation.cost import *  # noqa: F403
from uirl_agents.policies.usage import *  # noqa: F403

warnings.warn(
    "uirl_agents.cost is deprecated: import uirl_agents.evaluation.cost and uirl_agents.policies.usage",
    DeprecationWarning,
    stacklevel=2,
)

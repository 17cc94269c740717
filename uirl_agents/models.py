"""Deprecated: moved to :mod:`uirl_agents.loading.pretrained`; this path goes in the next release."""

import warnings

from uirl_agents.loading.pretrained import *  # noqa: F403

warnings.warn(
    "uirl_agents.models is deprecated: import uirl_agents.loading.pretrained",
    DeprecationWarning,
    stacklevel=2,
)

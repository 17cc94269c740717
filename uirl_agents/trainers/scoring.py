"""Deprecated: moved to :mod:`uirl_agents.trainers.forward` (``token_sample``,
``weigh_episode`` and ``UPDATE_STREAM`` to :mod:`uirl_agents.trainers.update`); this path
goes in the next release."""

import warnings

from uirl_agents.trainers.forward import *  # noqa: F403
from uirl_agents.trainers.update import UPDATE_STREAM, token_sample, weigh_episode  # noqa: F401

warnings.warn(
    "uirl_agents.trainers.scoring is deprecated: import uirl_agents.trainers.forward "
    "(token_sample, weigh_episode, UPDATE_STREAM: uirl_agents.trainers.update)",
    DeprecationWarning,
    stacklevel=2,
)

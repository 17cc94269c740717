"""Deprecated: moved to :mod:`uirl_agents.episodes.viewer`; this path goes in the next release."""

import sys
import warnings

from uirl_agents.episodes.viewer import *  # noqa: F403
from uirl_agents.episodes.viewer import main

warnings.warn(
    "uirl_agents.view is deprecated: import uirl_agents.episodes.viewer",
    DeprecationWarning,
    stacklevel=2,
)

if __name__ == "__main__":  # `python -m uirl_agents.view RUN_DIR`, the old command
    sys.exit(main())

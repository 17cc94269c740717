"""Moved to :mod:`uirl_gym.runtimes.kubernetes.proxy` (issue 40); this path is removed in the next release."""

import sys

from uirl_gym._moved import moved, run_moved

if __name__ == "__main__":
    run_moved("uirl_gym.server.proxy", "uirl_gym.runtimes.kubernetes.proxy")
else:
    sys.modules[__name__] = moved(__name__, "uirl_gym.runtimes.kubernetes.proxy")

"""Moved to :mod:`uirl_gym.session` (issue 40); this path is removed in the next release."""

import sys

from uirl_gym._moved import moved, run_moved

if __name__ == "__main__":
    run_moved("uirl_gym.server", "uirl_gym.session")
else:
    sys.modules[__name__] = moved(__name__, "uirl_gym.session.__main__")

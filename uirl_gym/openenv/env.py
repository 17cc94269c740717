"""Moved to :mod:`uirl_gym.remote_env` (issue 40); this path is removed in the next release."""

import sys

from uirl_gym._moved import moved

sys.modules[__name__] = moved(__name__, "uirl_gym.remote_env")

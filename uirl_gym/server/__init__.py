"""Moved to :mod:`uirl_gym.session` (the session server) and
:mod:`uirl_gym.runtimes.kubernetes.proxy` (the routing proxy) in issue 40; the modules
here are the old paths, removed in the next release."""

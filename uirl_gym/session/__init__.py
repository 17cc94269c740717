"""The session server: the process behind a session's URL (``python -m uirl_gym.session``).

It serves the HTTP protocol of :mod:`uirl_gym.protocol` for one task page in one
Chromium (:mod:`uirl_gym.session.browser`). It imports nothing from the env side
(``env``, ``vector``, ``client``) or from ``runtimes``: those start it as a process.
"""

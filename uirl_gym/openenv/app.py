"""The ASGI app with the default settings, for ASGI servers and OpenEnv's manifest.

``uvicorn uirl_gym.openenv.app:app --host 0.0.0.0 --port 8000`` serves what
``python -m uirl_gym.openenv`` serves with its defaults (the command line also takes
settings: sessions, step budget, reward mode, runtime).
"""

from __future__ import annotations

from uirl_gym.openenv.server import make_app

app = make_app()

"""Every uirl task served as an OpenEnv environment, and the clients that play it.

Needs the ``openenv`` extra (``pip install -e '.[openenv]'``); ``uirl_gym`` itself never
imports this package. docs/openenv.md has the whole story.

Server::

    python -m uirl_gym.openenv --host 127.0.0.1 --port 8000

OpenEnv's ``create_app`` (production mode) with ``/ws`` (one uirl session per
WebSocket, closed on disconnect), ``/health``, ``/schema``, ``/metadata``. In Python:
:func:`make_app` (:class:`OpenEnvServerConfig`: sessions, step budget, reward mode, runtime).

Typed client (OpenEnv's ``EnvClient``)::

    from uirl_gym.openenv import UirlAction, UirlEnvClient

    client = UirlEnvClient(base_url="http://127.0.0.1:8000")
    result = client.reset(task="uirl/SimpleDataEntry-v0", seed=0)
    result = client.step(UirlAction(action_type="left_click", x=100, y=200))
    result.observation.screenshot  # base64 PNG; .instruction, .is_success, .error
    client.close()

Gym-shaped session (what the TRL integration calls; ``from uirl_gym.openenv import
OpenEnvSession``)::

    session = OpenEnvSession(base_url, connect_timeout_s=10.0, message_timeout_s=120.0)
    screenshot, instruction, info = session.reset(task, seed=None, options=None)
    screenshot, reward, terminated, truncated, info = session.step(action)
    session.close()        # also: with OpenEnvSession(url) as session: ...

- ``task``: any registered uirl Gymnasium id (``uirl/FormFill-v0``; the task id
  ``form_fill`` works too); ``options``: the task's reset options and ``split``.
- ``screenshot``: uint8 numpy array (800, 1280, 3), RGB, the 1280x800 screen.
- ``action``: ``UIEnv.step``'s format: an ``uirl_gym.actions.Action`` or a dict
  ``{"type": "left_click", "x": 100, "y": 200}`` (``type`` or ``action_type``; fields
  ``x``, ``y``, ``text``, ``keys``, ``direction``, ``amount``, ``end_x``, ``end_y``, in
  screen pixels; types ``left_click``, ``double_click``, ``right_click``,
  ``triple_click``, ``mouse_move``, ``type``, ``keys``, ``scroll``, ``drag``,
  ``screenshot``, ``finish``).
- ``info``: ``UIEnv``'s info dict (``is_success``, the task's counts, no ``progress``;
  after reset also ``task``, ``task_seed``). A refused action sets
  ``info["invalid_action"]`` (the episode goes on); a session failure ends the episode
  truncated with ``info["error"]``; the step budget (60) truncates the last step.
- Raises ``RuntimeError`` when the server refuses the call itself (unknown task, a step
  with no episode running, the server full); ``ConnectionError`` when it is gone.
"""

from __future__ import annotations

import importlib.util
import warnings
from typing import Any

if importlib.util.find_spec("openenv") is None:  # pragma: no cover - depends on the install
    raise ImportError(
        "uirl_gym.openenv needs OpenEnv: pip install -e '.[openenv]' (or pip install openenv)"
    )

from uirl_gym.openenv.server import (  # noqa: E402
    OpenEnvServerConfig,
    UirlOpenEnvEnvironment,
    encode_png,
    make_app,
    resolve_task,
)
from uirl_gym.openenv_client import (  # noqa: E402
    OpenEnvSession,
    UirlEnvClient,
    decode_screenshot,
    to_wire_action,
)
from uirl_gym.openenv_wire import (  # noqa: E402
    DEFAULT_TASK,
    UirlAction,
    UirlObservation,
    UirlState,
)

__all__ = [
    "DEFAULT_TASK",
    "OpenEnvSession",
    "OpenEnvServerConfig",
    "UirlAction",
    "UirlEnvClient",
    "UirlOpenEnvEnvironment",
    "UirlObservation",
    "UirlState",
    "decode_screenshot",
    "encode_png",
    "make_app",
    "resolve_task",
    "to_wire_action",
]


def __getattr__(name: str) -> Any:
    # Names of two classes each (the session server's ServerConfig, the TRL integration's
    # UirlEnvironment): the old names go in the next release.
    renamed = {"ServerConfig": OpenEnvServerConfig, "UirlEnvironment": UirlOpenEnvEnvironment}
    if name in renamed:
        new = renamed[name].__name__
        warnings.warn(
            f"uirl_gym.openenv.{name} is now {new}; the old name is removed in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return renamed[name]
    raise AttributeError(f"module 'uirl_gym.openenv' has no attribute {name!r}")

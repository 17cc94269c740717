"""Every uirl task as an OpenEnv environment: the Environment subclass and its app.

Each WebSocket session on ``/ws`` gets its own :class:`UirlOpenEnvEnvironment`, which makes its
own :class:`~uirl_gym.env.UIEnv` at the first reset: by default on a
:class:`~uirl_gym.runtimes.local.LocalRuntime` of its own (one session server and one
Chromium per WebSocket session), or on the server-wide runtime of
:class:`OpenEnvServerConfig` (a Kubernetes runtime and its warm pool). When the WebSocket
closes, OpenEnv closes the environment: the env gives its session back and the local
runtime stops the server and its browser.

The session server's privileged routes (``/reset``, ``/oracle``, which need the
session's token) are never reachable through this app: the env talks to its session
from inside this process with the token its runtime made, and this app proxies no HTTP
to it. The app is built in OpenEnv's production mode, so OpenEnv's own stateless HTTP
``/reset``, ``/step`` and ``/state`` are not registered either (each call would start and
stop a browser for one step). What it serves: ``/ws``, ``/health``, ``/schema``,
``/metadata``, ``/mcp`` (JSON-RPC; uirl has no MCP tools, so only OpenEnv's
``openenv/session/create``/``close`` do anything: such a session holds no browser until
a WebSocket attached to it resets, and the idle reaper closes it), OpenEnv's task-API
routes (``/list_environments``, ``/uirl/splits``, ...: 501, uirl lists no task
instances) and ``/docs``, ``/openapi.json``. ``openenv validate --url`` passes.
"""

from __future__ import annotations

import base64
import difflib
import functools
import io
import json
import logging
import math
import os
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
from fastapi import FastAPI
from openenv.core.env_server import ConcurrencyConfig, Environment, create_app
from openenv.core.env_server.types import EnvironmentMetadata
from PIL import Image

from uirl_gym.actions import DEFAULT_ACTION_TIMEOUT_S, MAX_ACTION_TIMEOUT_S, MIN_ACTION_TIMEOUT_S
from uirl_gym.env import ResetNeededError, UIEnv, check_observations
from uirl_gym.openenv.guard import LOOPBACK_HOSTS, OpenEnvGuard
from uirl_gym.openenv_wire import (
    ACTION_TYPE_NAMES,
    DEFAULT_TASK,
    SESSION_CLOSED,
    TEXT_FIELDS,
    UirlAction,
    UirlObservation,
    UirlState,
)
from uirl_gym.runtimes.base import Runtime
from uirl_gym.runtimes.local import LocalRuntime, LocalRuntimeConfig
from uirl_gym.tasks import MAX_EPISODE_STEPS, TASKS, TaskSpec

__all__ = [
    "DEFAULT_TASK",
    "OpenEnvServerConfig",
    "UirlOpenEnvEnvironment",
    "encode_png",
    "make_app",
    "resolve_task",
]

logger = logging.getLogger(__name__)

ENV_NAME = "uirl"
ALLOWED_HOSTS_ENV_VAR = "UIRL_OPENENV_ALLOWED_HOSTS"
ALLOWED_ORIGINS_ENV_VAR = "UIRL_OPENENV_ALLOWED_ORIGINS"
# zlib level 1: a 1280x800 task frame in ~17 ms instead of ~25 ms at Pillow's default 6,
# for a file 4-8% larger (~120-150 KB; measured in docs/openenv.md).
PNG_COMPRESS_LEVEL = 1


@dataclass
class OpenEnvServerConfig:
    """Settings of the OpenEnv server.

    Attributes:
        max_sessions: WebSocket sessions at once (each is a browser: ~170 MB and a
            share of the CPU); one more is refused with OpenEnv's ``CAPACITY_REACHED``.
        max_steps: steps per episode; the last one is ``truncated`` (``gym.make``'s
            TimeLimit, 60).
        reward_mode: ``"sparse"`` (the task's record) or ``"dense"`` (plus its shaping).
        step_timeout_s: how long one action and its screenshot may take in the session
            (the env's ``step_timeout_s``, 10 s as in ``gym.make``): a step past it ends
            the episode truncated with ``error`` (a page that hangs, a session that
            froze), never the server.
        idle_timeout_s: a session that gets no message for this long is closed by
            OpenEnv's reaper, even with its WebSocket open (the next call is refused with
            :data:`~uirl_gym.openenv_wire.SESSION_CLOSED`; ``OpenEnvSession`` reconnects);
            it also ends sessions made through ``/mcp`` that no WebSocket closes. None:
            never.
        runtime: the runtime every session comes from (e.g. a ``KubernetesRuntime`` with
            a warm pool; sessions go back to it on disconnect); None: each WebSocket
            session starts a ``LocalRuntime`` of its own, stopped on disconnect.
        local: the settings of those local runtimes (browser, start-up timeout); their
            ``task`` is set per session.
        allowed_hosts: the host names requests may be addressed to (the ``Host``
            header); default: loopback only (``$UIRL_OPENENV_ALLOWED_HOSTS``,
            comma-separated, overrides it); ``"*"``: any. A server other machines reach
            (the Docker image on 0.0.0.0) lists the names they use (see
            docs/openenv.md).
        allowed_origins: browser origins besides the server's own whose pages may call
            it (``$UIRL_OPENENV_ALLOWED_ORIGINS``); ``"*"``: any. Default: none.
        start_timeout_s: a WebSocket with no successful reset within this long is
            closed and its slot freed (a reset refused before any succeeded gives the
            slot back at once; the socket stays open).
    """

    max_sessions: int = 8
    max_steps: int = MAX_EPISODE_STEPS
    reward_mode: Literal["sparse", "dense"] = "sparse"
    step_timeout_s: float = DEFAULT_ACTION_TIMEOUT_S
    idle_timeout_s: float | None = 3600.0
    runtime: Runtime | None = None
    local: LocalRuntimeConfig = field(default_factory=LocalRuntimeConfig)
    allowed_hosts: tuple[str, ...] = field(
        default_factory=lambda: _env_list(ALLOWED_HOSTS_ENV_VAR, LOOPBACK_HOSTS)
    )
    allowed_origins: tuple[str, ...] = field(
        default_factory=lambda: _env_list(ALLOWED_ORIGINS_ENV_VAR, ())
    )
    start_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        if not self.allowed_hosts:
            raise ValueError("allowed_hosts: expected at least one host name (or '*')")
        if not self.start_timeout_s > 0:
            raise ValueError(f"start_timeout_s: expected > 0, got {self.start_timeout_s}")
        if self.max_sessions < 1:
            raise ValueError(f"max_sessions: expected >= 1, got {self.max_sessions}")
        if self.max_steps < 1:
            raise ValueError(f"max_steps: expected >= 1, got {self.max_steps}")
        if self.reward_mode not in ("sparse", "dense"):
            raise ValueError(f"reward_mode: expected 'sparse' or 'dense', got {self.reward_mode!r}")
        if not MIN_ACTION_TIMEOUT_S <= self.step_timeout_s <= MAX_ACTION_TIMEOUT_S:
            raise ValueError(
                f"step_timeout_s: expected seconds in {MIN_ACTION_TIMEOUT_S:g}.."
                f"{MAX_ACTION_TIMEOUT_S:g}, got {self.step_timeout_s}"
            )
        if self.idle_timeout_s is not None and not self.idle_timeout_s > 0:
            raise ValueError(
                f"idle_timeout_s: expected > 0 or None (never), got {self.idle_timeout_s}"
            )


def _env_list(name: str, default: tuple[str, ...]) -> tuple[str, ...]:
    value = os.environ.get(name)
    if value is None:
        return default
    return tuple(item.strip() for item in value.split(",") if item.strip())


def resolve_task(task: str) -> TaskSpec:
    """The task named by a Gymnasium id (``uirl/FormFill-v0``, also with the
    ``uirl_gym:`` prefix) or a task id (``form_fill``).

    Raises:
        ValueError: unknown task, naming the registered ids.
    """
    if not isinstance(task, str):
        raise ValueError(f"task: expected a Gymnasium id such as {DEFAULT_TASK!r}, got {task!r}")
    name = task.removeprefix("uirl_gym:")
    by_env_id = {spec.env_id: spec for spec in TASKS.values()}
    if name in by_env_id:
        return by_env_id[name]
    if name in TASKS:
        return TASKS[name]
    close = difflib.get_close_matches(name, [*by_env_id, *TASKS], n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"task: unknown {task!r}; registered: {', '.join(sorted(by_env_id))}.{hint}")


def encode_png(screenshot: np.ndarray) -> str:
    """A uint8 HxWx3 frame as base64 PNG text (lossless)."""
    buffer = io.BytesIO()
    Image.fromarray(screenshot).save(buffer, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


class UirlOpenEnvEnvironment(Environment[UirlAction, UirlObservation, UirlState]):
    """One WebSocket session's uirl env (OpenEnv calls reset/step/close in one thread).

    Attributes:
        config: the server's settings.
        env: the ``UIEnv`` (None before the first reset and after ``close``).

    Methods:
        reset(seed=None, episode_id=None, task=DEFAULT_TASK, options=None): start an
            episode of ``task`` (any registered uirl task; see :func:`resolve_task`);
            ``options`` are the task's reset options and ``split``.
        step(action): act; an action the env refuses comes back with ``error`` set.
        state: the episode's :class:`UirlState`.
        close(): give the session back (stop its server and browser by default).
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, config: OpenEnvServerConfig | None = None) -> None:
        super().__init__()
        self.config = config or OpenEnvServerConfig()
        self.env: UIEnv | None = None
        self._runtime: LocalRuntime | None = None
        self._state = UirlState()
        self._instruction = ""
        self._ended = False
        self._closed = False
        # close() may come from OpenEnv's reaper while a reset starts a runtime.
        self._lock = threading.Lock()

    # -- OpenEnv API -------------------------------------------------------------------

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task: str = DEFAULT_TASK,
        options: Mapping[str, Any] | None = None,
        observations: list[str] | None = None,
        **kwargs: Any,
    ) -> UirlObservation:
        """Start an episode of ``task``; ``observations`` adds the page as text to this
        and every later observation (UIEnv's names: docs/env.md).

        Raises:
            ValueError: unknown arguments, task or options (the message names the fix).
            SessionError: the session failed twice in a row.
        """
        if kwargs:
            raise ValueError(
                f"reset: unknown arguments {sorted(kwargs)}; allowed: task, seed, options, "
                "observations, episode_id"
            )
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise ValueError(f"seed: expected an integer >= 0 or None, got {seed!r}")
        if options is not None and not isinstance(options, Mapping):
            raise ValueError(f"options: expected a JSON object, got {options!r}")
        asked = dict(options or {})
        if "task" in asked:
            raise ValueError("options: give the task as reset(task=...), not in options")
        spec = resolve_task(task)
        wanted = check_observations(observations or ())
        if "dom_elements" in wanted:
            raise ValueError(
                "observations: dom_elements (the miniwob package's own) is not served over "
                "OpenEnv; ask for axtree, html or elements (the same page, as text)"
            )
        # Whatever happens below, the previous episode is over.
        self._ended = True
        env = self._ensure_env(spec, wanted)
        obs, info = env.reset(seed=seed, options={**asked, "task": spec.name})
        self._instruction = obs["instruction"]
        self._ended = False
        self._state = UirlState(
            episode_id=episode_id or uuid.uuid4().hex,
            step_count=0,
            task=spec.env_id,
            seed=seed,
            task_seed=info.get("task_seed"),
        )
        return self._observation(obs, None, info, terminated=False, truncated=False)

    def step(
        self, action: UirlAction, timeout_s: float | None = None, **kwargs: Any
    ) -> UirlObservation:
        """Act in the running episode.

        Raises:
            ResetNeededError: no episode is running (no reset yet, or it ended).
            RuntimeError: the session was closed (:data:`SESSION_CLOSED`).
        """
        if self._closed:
            raise RuntimeError(SESSION_CLOSED)
        if self.env is None or self._state.task is None:
            raise ResetNeededError(
                "no episode is running: reset first, e.g. client.reset(task='uirl/SimpleDataEntry-v0')"
            )
        if self._ended:
            raise ResetNeededError(
                "the episode has ended (done was true): reset to start a new one"
            )
        if not isinstance(action, UirlAction):  # OpenEnv's MCP actions (list_tools, ...)
            raise ValueError(
                f"uirl has no MCP tools; send a uirl action (action_type: one of "
                f"{', '.join(ACTION_TYPE_NAMES)}), got {type(action).__name__}"
            )
        try:
            env_action = action.to_env_action()
        except ValueError as exc:  # an action string that does not parse
            obs, reward, terminated, truncated, info = self.env.refuse(f"ValueError: {exc}")
        else:
            obs, reward, terminated, truncated, info = self.env.step(env_action)
        steps = self._state.step_count + 1
        if not (terminated or truncated) and steps >= self.config.max_steps:
            truncated = True
            info = {**info, "truncated_by": f"max_steps ({self.config.max_steps})"}
        self._ended = terminated or truncated
        self._state = self._state.model_copy(
            update={
                "step_count": steps,
                "episode_return": self._state.episode_return + float(reward),
                "is_success": bool(info.get("is_success", False)),
                "done": self._ended,
            }
        )
        return self._observation(
            obs, float(reward), info, terminated=terminated, truncated=truncated
        )

    @property
    def state(self) -> UirlState:
        # Read by OpenEnv on the event loop while a step may run: a snapshot, replaced
        # whole by reset and step.
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        ids = ", ".join(spec.env_id for spec in TASKS.values())
        return EnvironmentMetadata(
            name=ENV_NAME,
            description=(
                "GUI tasks in a real headless Chromium at 1280x800, pixel mouse and keyboard "
                f"actions, the task's own reward. Reset with task= one of: {ids}."
            ),
            version=_uirl_version(),
        )

    def close(self) -> None:
        """Give the session back; stop this session's local runtime. Idempotent."""
        with self._lock:
            self._closed = True
            env, self.env = self.env, None
            runtime, self._runtime = self._runtime, None
        if env is not None:
            env.close()
        if runtime is not None:
            runtime.close()

    # -- internals -------------------------------------------------------------------

    def _ensure_env(self, spec: TaskSpec, observations: tuple[str, ...]) -> UIEnv:
        with self._lock:
            if self._closed:
                raise RuntimeError(SESSION_CLOSED)
            if self.env is not None and self.env.observations == observations:
                return self.env
            if self.env is not None:
                # Other observations: another env on the same runtime (its session back
                # to the pool, not stopped).
                self.env.close()
                self.env = None
            runtime = self.config.runtime
            if runtime is None:
                # The first task's servers start on it; any session serves any task.
                self._runtime = LocalRuntime(replace(self.config.local, task=spec.name))
                runtime = self._runtime
            self.env = UIEnv(
                runtime=runtime,
                task=spec.name,
                reward_mode=self.config.reward_mode,
                step_timeout_s=self.config.step_timeout_s,
                observations=observations,
            )
            return self.env

    def _observation(
        self,
        obs: Mapping[str, Any],
        reward: float | None,
        info: Mapping[str, Any],
        *,
        terminated: bool,
        truncated: bool,
    ) -> UirlObservation:
        error = info.get("invalid_action") or info.get("error")
        text: dict[str, Any] = {name: obs[name] for name in TEXT_FIELDS if name in obs}
        if "elements" in obs:
            text["elements"] = json_ready(list(obs["elements"]))
        if "som" in obs:
            text["som"] = encode_png(obs["som"])
        return UirlObservation(
            **text,
            screenshot=encode_png(obs["screenshot"]),
            instruction=self._instruction,
            task=self._state.task or "",
            is_success=bool(info.get("is_success", False)),
            terminated=bool(terminated),
            truncated=bool(truncated),
            error=None if error is None else str(error),
            reward=reward,
            done=bool(terminated or truncated),
            # The task's record (what was submitted, which goals are met) stays in the
            # server: an agent reading observations could check guesses with it (the
            # session server keeps it behind its token for the same reason).
            metadata=json_ready({k: v for k, v in info.items() if k != "progress"}),
        )


def json_ready(value: Any) -> Any:
    """``value`` with numpy scalars and arrays, tuples and sets turned into JSON types."""
    return json.loads(json.dumps(value, default=_json_default, allow_nan=True))


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        item = value.item()
        return None if isinstance(item, float) and not math.isfinite(item) else item
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


@functools.cache
def _uirl_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("uirl")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def make_app(
    config: OpenEnvServerConfig | None = None,
    *,
    environment: type[UirlOpenEnvEnvironment] = UirlOpenEnvEnvironment,
) -> FastAPI:
    """The OpenEnv app serving every registered uirl task (see the module docstring).

    Args:
        config: the server's settings (defaults: :class:`OpenEnvServerConfig`).
        environment: the Environment class each session gets (a subclass, for tests).
    """
    config = config or OpenEnvServerConfig()
    app = create_app(
        functools.partial(environment, config),
        UirlAction,
        UirlObservation,
        env_name=ENV_NAME,
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=config.max_sessions, session_timeout=config.idle_timeout_s
        ),
        state_cls=UirlState,
        mode="production",
    )
    app.title = "uirl on OpenEnv"
    app.add_middleware(
        OpenEnvGuard,
        allowed_hosts=config.allowed_hosts,
        allowed_origins=config.allowed_origins,
        start_timeout_s=config.start_timeout_s,
    )
    return app

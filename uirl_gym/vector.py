"""SessionVectorEnv: N sessions stepped concurrently by threads in one process.

Sessions are I/O-bound (HTTP to a browser), so threads are enough: no process per
sub-env, no pickling of screenshots between processes. Each sub-env is a
:class:`~uirl_gym.env.UIEnv`; they share one runtime. A sub-env whose session fails
ends its own episode truncated with ``info["error"]`` and gets a replacement session;
the others are not affected.

Lifecycle, as for one UIEnv: a sub-env whose episode ended (terminated or truncated)
is reset by the autoreset mode (NEXT_STEP, SAME_STEP) or must be reset by the caller
(DISABLED, and always with :meth:`SessionVectorEnv.step_envs`): stepping it first
raises :class:`~uirl_gym.env.ResetNeededError`. Any call after ``close()`` raises
:class:`~uirl_gym.env.ClosedEnvironmentError`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from copy import deepcopy
from typing import Any, Protocol, cast

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from uirl_gym.env import ClosedEnvironmentError, ResetNeededError, UIEnv
from uirl_gym.runtimes.base import Runtime

__all__ = ["ClosedEnvironmentError", "ResetNeededError", "SessionVectorEnv"]

logger = logging.getLogger(__name__)


class SubEnv(Protocol):
    """What the vector env needs of a sub-env: UIEnv's calls and spaces, and its wall
    times (``timings``); :class:`~uirl_gym.env.UIEnv` and
    :class:`~uirl_gym.remote_env.OpenEnvEnv` are two."""

    observation_space: gym.Space[Any]
    action_space: gym.Space[Any]
    timings: dict[str, float]
    episode_task: str | None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]: ...

    def step(self, action: Any) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]: ...

    def oracle(self) -> dict[str, Any]: ...

    def render(self) -> np.ndarray | None: ...

    def close(self) -> None: ...


class SessionVectorEnv(VectorEnv):
    """``num_envs`` UIEnvs stepped concurrently.

    Attributes:
        num_envs: number of sub-envs.
        envs: the sub-envs (UIEnv), in order.
        single_observation_space / observation_space: one sub-env's / the batch's
            (screenshots stacked as uint8 (N, 800, 1280, 3), instructions a tuple).
        autoreset_mode: NEXT_STEP (default), SAME_STEP or DISABLED.

    ``make_env`` makes the sub-envs instead of ``UIEnv(runtime=runtime, **env_kwargs)``:
    any env with UIEnv's reset/step/close and spaces (e.g.
    :class:`~uirl_gym.remote_env.OpenEnvEnv`, sessions on an OpenEnv server).

    Methods:
        reset(seed=..., options=...): ``seed`` an int (seed, seed+1, ...) or a list;
            ``options`` a dict for every sub-env, or a list with one dict per sub-env,
            or a dict with ``env_options`` (that list) and/or ``reset_mask``.
        step(actions): a batch of actions (a batched action-space sample, or a
            sequence of Actions / dicts, one per sub-env).
        call(name, *args): call a method on every sub-env (e.g. ``"oracle"``).
    """

    metadata = {"render_modes": ["rgb_array"], "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(
        self,
        num_envs: int,
        *,
        runtime: Runtime | None = None,
        max_episode_steps: int | None = None,
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        render_mode: str | None = None,
        make_env: Callable[[], SubEnv] | None = None,
        **env_kwargs: Any,
    ) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs: must be >= 1, got {num_envs}")
        # A runtime of its own (closed with the vector env) when none is given.
        self._own_runtime: Runtime | None = None
        if runtime is None and make_env is None:
            from uirl_gym.runtimes.local import LocalRuntime, LocalRuntimeConfig

            runtime = self._own_runtime = LocalRuntime(
                LocalRuntimeConfig(task=env_kwargs.get("task", "simple_data_entry"))
            )
        self.runtime = runtime
        self.num_envs = num_envs
        self.max_episode_steps = max_episode_steps
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        self.metadata = {**self.metadata, "autoreset_mode": self.autoreset_mode}
        self.render_mode = render_mode
        if make_env is None:

            def make_env() -> SubEnv:
                return UIEnv(render_mode=render_mode, runtime=runtime, **env_kwargs)

        self.envs: list[SubEnv] = [make_env() for _ in range(num_envs)]
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._pool = ThreadPoolExecutor(max_workers=num_envs, thread_name_prefix="uirl-env")
        # The observation space is a Dict, so its batches are dicts.
        self._observations = cast(
            dict[str, Any], create_empty_array(self.single_observation_space, num_envs)
        )
        self._env_obs: list[Any] = [None] * num_envs
        self._rewards = np.zeros(num_envs, dtype=np.float64)
        self._terminations = np.zeros(num_envs, dtype=np.bool_)
        self._truncations = np.zeros(num_envs, dtype=np.bool_)
        # True while a sub-env's episode has ended and it has not been reset since.
        self._autoreset_envs = np.zeros(num_envs, dtype=np.bool_)
        self._elapsed = np.zeros(num_envs, dtype=np.int64)
        self._last_options: list[dict[str, Any]] = [{} for _ in range(num_envs)]
        self.closed = False

    def _map(self, fn: Callable[[int], Any], indices: Sequence[int]) -> list[Any]:
        return list(self._pool.map(fn, indices))

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | Sequence[dict[str, Any] | None] | None = None,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        self._check_open()
        seeds = self._seeds(seed)
        per_env, mask = self._split_options(options)
        indices = [i for i in range(self.num_envs) if mask[i]]
        for i in indices:
            self._last_options[i] = per_env[i]

        def reset_one(i: int) -> tuple[Any, dict[str, Any]]:
            return self.envs[i].reset(seed=seeds[i], options=per_env[i])

        infos: dict[str, Any] = {}
        for i, (obs, info) in zip(indices, self._map(reset_one, indices), strict=True):
            self._env_obs[i] = obs
            infos = self._add_info(infos, info, i)
            self._terminations[i] = self._truncations[i] = self._autoreset_envs[i] = False
            self._elapsed[i] = 0
        return self._batch(), infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        self._check_open()
        per_env = self._unbatch_actions(actions)
        ended = np.flatnonzero(self._autoreset_envs).tolist()
        if self.autoreset_mode is AutoresetMode.DISABLED and ended:
            # Checked before anything steps, so that no sub-env's step is lost.
            raise ResetNeededError(
                f"sub-envs {ended} finished their episodes: with autoreset DISABLED, reset "
                "them (reset(options={'reset_mask': ...})) before stepping them again"
            )

        def step_one(i: int) -> tuple[Any, float, bool, bool, dict[str, Any]]:
            if self.autoreset_mode is AutoresetMode.NEXT_STEP and self._autoreset_envs[i]:
                obs, info = self._reset_env(i)
                return obs, 0.0, False, False, info
            obs, reward, terminated, truncated, info = self._step_env(i, per_env[i])
            if self.autoreset_mode is AutoresetMode.SAME_STEP and (terminated or truncated):
                final = {"final_obs": obs, "final_info": info}
                obs, info = self._reset_env(i)
                info = {**info, **final}
            return obs, reward, terminated, truncated, info

        infos: dict[str, Any] = {}
        for i, result in enumerate(self._map(step_one, range(self.num_envs))):
            obs, reward, terminated, truncated, info = result
            self._env_obs[i] = obs
            self._rewards[i] = reward
            self._terminations[i] = terminated
            self._truncations[i] = truncated
            infos = self._add_info(infos, info, i)
        return (
            self._batch(),
            self._rewards.copy(),
            self._terminations.copy(),
            self._truncations.copy(),
            infos,
        )

    def reset_envs(
        self, specs: Mapping[int, tuple[int | None, dict[str, Any] | None]]
    ) -> dict[int, tuple[Any, dict[str, Any]]]:
        """Reset only the sub-envs in ``specs`` ({index: (seed, options)}), concurrently.

        With :meth:`step_envs`, this lets a caller run sub-envs out of lock-step (the
        rollout loop starts a new episode in a sub-env as soon as its last one ends).
        """
        self._check_open()

        def reset_one(i: int) -> tuple[Any, dict[str, Any]]:
            seed, options = specs[i]
            self._last_options[i] = dict(options or {})
            self._elapsed[i] = 0
            self._autoreset_envs[i] = False
            return self.envs[i].reset(seed=seed, options=options)

        indices = list(specs)
        return dict(zip(indices, self._map(reset_one, indices), strict=True))

    def step_envs(self, actions: Mapping[int, Any]) -> dict[int, tuple[Any, ...]]:
        """Step only the sub-envs in ``actions`` ({index: action}); no autoreset.

        Returns:
            {index: (obs, reward, terminated, truncated, info)}.

        Raises:
            ResetNeededError: a sub-env whose episode ended has not been reset with
                :meth:`reset_envs` since (nothing is stepped).
        """
        self._check_open()
        indices = list(actions)
        ended = [i for i in indices if self._autoreset_envs[i]]
        if ended:
            raise ResetNeededError(
                f"sub-envs {ended}: their episodes ended (terminated or truncated); "
                "reset them with reset_envs({index: (seed, options)}) before stepping them"
            )
        results = self._map(lambda i: self._step_env(i, actions[i]), indices)
        return dict(zip(indices, results, strict=True))

    def _reset_env(self, i: int) -> tuple[Any, dict[str, Any]]:
        """Autoreset sub-env ``i`` with its last options (a new seed from its own RNG)."""
        self._elapsed[i] = 0
        obs, info = self.envs[i].reset(options=self._last_options[i])
        self._autoreset_envs[i] = False
        return obs, info

    def _step_env(self, i: int, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.envs[i].step(action)
        self._elapsed[i] += 1
        if self.max_episode_steps is not None and self._elapsed[i] >= self.max_episode_steps:
            truncated = True
        self._autoreset_envs[i] = terminated or truncated
        return obs, reward, terminated, truncated, info

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call ``name`` on every sub-env concurrently (attributes are read)."""
        self._check_open()

        def call_one(i: int) -> Any:
            attr = getattr(self.envs[i], name)
            return attr(*args, **kwargs) if callable(attr) else attr

        return tuple(self._map(call_one, range(self.num_envs)))

    def render(self) -> tuple[np.ndarray, ...] | None:
        """Each sub-env's screenshot (``render_mode="rgb_array"``), else None."""
        frames = [env.render() for env in self.envs]
        return tuple(f for f in frames if f is not None) if self.render_mode else None

    def close_extras(self, **kwargs: Any) -> None:
        if self.closed:
            return
        self._map(lambda i: self.envs[i].close(), range(self.num_envs))
        self._pool.shutdown(wait=True)
        if self._own_runtime is not None:
            self._own_runtime.close()
        self.closed = True

    # -- helpers ---------------------------------------------------------------------

    def _check_open(self) -> None:
        if self.closed:
            raise ClosedEnvironmentError(
                "this SessionVectorEnv is closed (its sessions were given back); make a new "
                "one with gym.make_vec(...) instead of using it again"
            )

    def _batch(self) -> dict[str, Any]:
        self._observations = cast(
            dict[str, Any],
            concatenate(self.single_observation_space, self._env_obs, self._observations),
        )
        return deepcopy(self._observations)

    def _seeds(self, seed: int | Sequence[int | None] | None) -> list[int | None]:
        if seed is None:
            return [None] * self.num_envs
        if isinstance(seed, int | np.integer):
            return [int(seed) + i for i in range(self.num_envs)]
        seeds = list(seed)
        if len(seeds) != self.num_envs:
            raise ValueError(f"seed: expected {self.num_envs} seeds, got {len(seeds)}")
        return seeds

    def _split_options(self, options: Any) -> tuple[list[dict[str, Any]], np.ndarray]:
        mask = np.ones(self.num_envs, dtype=np.bool_)
        if options is None:
            return [{} for _ in range(self.num_envs)], mask
        if isinstance(options, list | tuple):
            options = {"env_options": options}
        options = dict(options)
        if "reset_mask" in options:
            mask = np.asarray(options.pop("reset_mask"), dtype=np.bool_)
            if mask.shape != (self.num_envs,) or not mask.any():
                raise ValueError(
                    f"reset_mask: expected a bool array of shape ({self.num_envs},) with a "
                    f"True, got {mask!r}"
                )
        env_options = options.pop("env_options", None)
        if env_options is None:
            return [dict(options) for _ in range(self.num_envs)], mask
        if len(env_options) != self.num_envs:
            raise ValueError(
                f"env_options: expected {self.num_envs} dicts (one per sub-env), "
                f"got {len(env_options)}"
            )
        return [{**options, **(o or {})} for o in env_options], mask

    def _unbatch_actions(self, actions: Any) -> list[Any]:
        if isinstance(actions, dict):
            return list(iterate(self.action_space, actions))
        actions = list(actions)
        if len(actions) != self.num_envs:
            raise ValueError(f"actions: expected {self.num_envs}, got {len(actions)}")
        return actions

"""What the task tests share: a session server per module, an env that reads the
oracle, an expert played to the episode's end, and check_env."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

import gymnasium as gym
from gymnasium.utils.env_checker import check_env

from uirl_agents.policies.random import RandomPolicy
from uirl_gym.actions import Action
from uirl_gym.runtimes.local import LocalRuntime, LocalRuntimeConfig
from uirl_gym.tasks.expert import MacroExpert


@contextlib.contextmanager
def task_runtime(task: str) -> Iterator[LocalRuntime]:
    """A session server for ``task``, closed at the end."""
    # A generous start-up limit: the shared test machines are often heavily loaded.
    runtime = LocalRuntime(LocalRuntimeConfig(task=task, startup_timeout_s=120))
    try:
        yield runtime
    finally:
        runtime.close()


@contextlib.contextmanager
def oracle_env(env_id: str, runtime: LocalRuntime) -> Iterator[gym.Env]:
    """An env for tests that read the oracle, not pixels: JPEG frames (the cheapest
    capture) and dense rewards (the shaping is checked too)."""
    env = gym.make(env_id, runtime=runtime, image_format="jpeg", reward_mode="dense")
    try:
        yield env
    finally:
        env.close()


def play(
    env: gym.Env, expert: MacroExpert, max_steps: int = 60
) -> tuple[float, dict, list[Action]]:
    """The expert from its next plan to the episode's end (or ``max_steps``): the
    return, the last info and the actions; every action must be accepted."""
    expert.reset()
    total, actions = 0.0, []
    while True:
        oracle = env.unwrapped.oracle() if expert.needs_oracle else None
        action = expert.next_action(oracle)
        _obs, reward, terminated, truncated, info = env.step(action)
        assert "invalid_action" not in info, info
        total += reward
        actions.append(action)
        if terminated or truncated or len(actions) >= max_steps:
            return total, info, actions


def expert_after_random_actions(
    env: gym.Env,
    policy: RandomPolicy,
    expert: MacroExpert,
    *,
    seed: int,
    options: dict,
    random_steps: int,
) -> dict | None:
    """A fresh episode: ``random_steps`` actions of ``policy`` (menus, dialogs, stray
    changes), then ``expert`` to the end. The last info, or None when the random agent
    ended the episode itself (not checked)."""
    obs, _info = env.reset(seed=seed, options=options)
    policy.begin_episode(0)
    for _ in range(random_steps):
        (step,) = policy.act([obs], [0])
        obs, _reward, terminated, truncated, _info = env.step(step.action)
        assert not truncated
        if terminated:
            return None
    _total, info, _actions = play(env, expert)
    return info


def check_task_env(env_id: str, runtime: LocalRuntime) -> None:
    """gymnasium's ``check_env`` on ``env_id``, its warnings as errors."""
    env = gym.make(env_id, runtime=runtime)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            check_env(env.unwrapped, skip_render_check=False)
    finally:
        env.close()

"""What the task tests share: an expert played to the episode's end, and check_env."""

from __future__ import annotations

import warnings

import gymnasium as gym
from gymnasium.utils.env_checker import check_env

from uirl_gym.actions import Action
from uirl_gym.runtimes.local import LocalRuntime
from uirl_gym.tasks.expert import MacroExpert


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


def check_task_env(env_id: str, runtime: LocalRuntime) -> None:
    """gymnasium's ``check_env`` on ``env_id``, its warnings as errors."""
    env = gym.make(env_id, runtime=runtime)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            check_env(env.unwrapped, skip_render_check=False)
    finally:
        env.close()

"""The contract every registered task keeps, as plain functions over an env id and a
runtime: ``tests/test_task_contract.py`` runs them over every task, and
``tests/test_tutorial.py`` over the task docs/tasks.md builds ("Adding a task").

1. ``check_env`` (Gymnasium's checker, its warnings as errors);
2. seeding: the same seed gives the same first screen and instruction;
3. bad options are refused before any round trip, with a message naming them;
4. the scripted expert solves test-split episodes through pixel actions only;
5. it still does after random actions (menus, dialogs, stray changes).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import gymnasium as gym
import numpy as np
import pytest
from task_play import check_task_env, expert_after_random_actions, play

from uirl_agents.policies.random import RandomPolicy
from uirl_gym.runtimes.local import LocalRuntime
from uirl_gym.tasks import TASKS

TEST_SPLIT = {"split": "test"}


@contextlib.contextmanager
def task_env(name: str, runtime: LocalRuntime) -> Iterator[gym.Env]:
    """An env for ``name`` on ``runtime`` (any session serves any task): JPEG frames,
    the cheapest capture, for the checks that read the oracle."""
    env = gym.make(TASKS[name].env_id, runtime=runtime, image_format="jpeg")
    try:
        yield env
    finally:
        env.close()


def check_gymnasium(name: str, runtime: LocalRuntime) -> None:
    check_task_env(TASKS[name].env_id, runtime)


def check_seeding(name: str, runtime: LocalRuntime, seed: int = 7) -> None:
    """The same seed, twice, on the test split: the same first screen and instruction
    (tasks flagged nondeterministic are exempt, as in Gymnasium's own checks)."""
    if TASKS[name].nondeterministic:
        pytest.skip(f"{name} is flagged nondeterministic")
    env = gym.make(TASKS[name].env_id, runtime=runtime)  # PNG: lossless frames compare
    try:
        first, info = env.reset(seed=seed, options=TEST_SPLIT)
        again, info_again = env.reset(seed=seed, options=TEST_SPLIT)
        assert first["instruction"] and first["instruction"] == again["instruction"]
        assert np.array_equal(first["screenshot"], again["screenshot"]), name
        assert info["task_seed"] == info_again["task_seed"]
    finally:
        env.close()


def check_bad_options(name: str, runtime: LocalRuntime) -> None:
    """An unknown option fails in ``reset`` with a ``ValueError`` that names it, before
    the env asks for a session."""
    env = gym.make(TASKS[name].env_id, runtime=runtime)
    try:
        with pytest.raises(ValueError, match="no_such_option"):
            env.reset(seed=0, options={"no_such_option": 1})
        assert env.unwrapped.session is None, "the options reached a session"
    finally:
        env.close()


def check_expert(name: str, runtime: LocalRuntime, seeds: range = range(2)) -> None:
    """The expert succeeds on test-split episodes, no action of it refused."""
    with task_env(name, runtime) as env:
        for seed in seeds:
            env.reset(seed=seed, options=TEST_SPLIT)
            _total, info, actions = play(env, TASKS[name].expert())
            assert info["is_success"], (name, seed, len(actions), info)


def check_recovery(name: str, runtime: LocalRuntime, random_steps: int = 15) -> None:
    """Random actions first, then the expert to the end: it succeeds (or the random
    agent ended the episode itself, which is not checked)."""
    if TASKS[name].family == "miniwob":
        # Its expert plans from element boxes as laid out at reset: after a random
        # scroll of the page it aims off the screen (a refused action), so it is not
        # one that recovers; docs/tasks.md lists what it solves.
        pytest.skip("the MiniWoB++ expert does not recover from a scrolled page")
    with task_env(name, runtime) as env:
        info = expert_after_random_actions(
            env,
            RandomPolicy(seed=0),
            TASKS[name].expert(),
            seed=0,
            options=TEST_SPLIT,
            random_steps=random_steps,
        )
        assert info is None or info["is_success"], (name, info)


CHECKS = {
    "check_env": check_gymnasium,
    "seeding": check_seeding,
    "bad_options": check_bad_options,
    "expert": check_expert,
    "recovery": check_recovery,
}

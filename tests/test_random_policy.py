"""RandomPolicy: valid, seeded, independent of batching."""

from __future__ import annotations

import numpy as np

from uirl_agents.policies.base import Policy
from uirl_agents.policies.random import RandomPolicy
from uirl_gym.actions import SCREEN_HEIGHT, SCREEN_WIDTH

OBS = {"screenshot": np.zeros((SCREEN_HEIGHT, SCREEN_WIDTH, 3), dtype=np.uint8), "instruction": "x"}


def _run(policy: RandomPolicy, env_indices: list[int], steps: int) -> list:
    for i in env_indices:
        policy.begin_episode(i)
    return [policy.act([OBS] * len(env_indices), env_indices) for _ in range(steps)]


def test_actions_are_valid_and_varied() -> None:
    policy = RandomPolicy(seed=0)
    assert isinstance(policy, Policy)
    steps = [s for batch in _run(policy, [0, 1, 2], 100) for s in batch]
    for step in steps:
        step.action.validate()
        assert step.error is None
    assert len({s.action.type for s in steps}) >= 4


def test_seeded_and_independent_of_batching() -> None:
    together = _run(RandomPolicy(seed=3), [0, 1], 20)
    alone = _run(RandomPolicy(seed=3), [1], 20)
    assert [b[1].action for b in together] == [b[0].action for b in alone]
    other_seed = _run(RandomPolicy(seed=4), [1], 20)
    assert [b[0].action for b in alone] != [b[0].action for b in other_seed]

"""Which task instances a run's episodes play: a function of the seed, the use (stream),
the iteration and the process alone.

So a resumed run collects exactly the task instances the interrupted iteration would
have, and no iteration's episodes are counted twice. Evaluation uses a fixed set of
held-out instances: env seeds >= 2**31 (training ones are < 2**31) and the task's test
split.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from uirl_agents.episodes.rollout import EpisodeSpec
from uirl_agents.trainers.config import EnvConfig

# Independent random streams for the task instances of each use.
TRAIN_STREAM, EVAL_STREAM, DEMO_STREAM = 0, 1, 3
EVAL_SEED_OFFSET = 2**31


def derive_specs(
    env: EnvConfig,
    *,
    seed: int,
    stream: int,
    iteration: int,
    rank: int,
    num_groups: int,
    group_size: int,
    tag: str,
) -> list[EpisodeSpec]:
    """``num_groups`` task instances x ``group_size`` episodes, a function of
    ``(seed, stream, iteration, rank)`` only; evaluation episodes draw their task
    instances from the test split (``uirl_gym.tasks.SPLITS``), training ones from train.

    Group ids are ``{tag}{iteration}-r{rank}-g{index}``.
    """
    rng = np.random.default_rng([seed, stream, iteration, rank])
    offset = EVAL_SEED_OFFSET if stream == EVAL_STREAM else 0
    tasks = sorted(env.tasks or {})
    weights = np.array([env.tasks[t] for t in tasks]) if env.tasks else None
    specs = []
    for g in range(num_groups):
        task_seed = offset + int(rng.integers(2**31))
        if env.task_seed is not None and stream != EVAL_STREAM:
            task_seed = env.task_seed
        # A group is one task instance: its episodes share the task, seed and options.
        task = "simple_data_entry"
        if weights is not None:
            task = tasks[int(rng.choice(len(tasks), p=weights / weights.sum()))]
        options: dict[str, Any] = dict((env.task_options or {}).get(task, {}))
        if weights is not None:
            options["task"] = task
        if stream == EVAL_STREAM:  # instances from the split no training run samples
            options["split"] = "test"
        group_id = f"{tag}{iteration}-r{rank}-g{g}"
        specs += [EpisodeSpec(task_seed, options, group_id) for _ in range(group_size)]
    return specs

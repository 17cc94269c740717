"""Episodes back from an exported dataset, for training (``rs.demonstrations``).

:func:`iter_source_episodes` reads episodes from wherever a user keeps them: a run
directory (``episodes.jsonl``), an exported dataset folder, or a Hub dataset
(``hf://datasets/USER/NAME``, fetched once into the local Hub cache). A dataset's
``episodes`` configuration is streamed (``datasets``' streaming Parquet reader: one row
group in memory at a time), each row turned back into an
:class:`~uirl_agents.episodes.trajectories.Episode` with its screenshots as arrays and
its actions as :class:`~uirl_gym.actions.Action`; the prompts are left to the trainer,
which writes each step afresh in its own format.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from uirl_agents.dataset.folder import (
    EPISODES,
    SPLIT,
    check_episode_source,
    hub_dataset,
    is_dataset_folder,
)
from uirl_agents.dataset.hub import download_dataset
from uirl_agents.dataset.rows import action_of
from uirl_agents.episodes.trajectories import Episode, Step, iter_episodes


def iter_source_episodes(source: str) -> Iterator[Episode]:
    """The episodes of a run directory, a dataset folder or a Hub dataset, in order.

    Raises:
        ValueError: ``source`` is none of these.
    """
    check_episode_source(source)
    if hub_dataset(source) is not None or is_dataset_folder(Path(source)):
        yield from iter_dataset_episodes(source)
    else:
        yield from iter_episodes(source)


def iter_dataset_episodes(source: str | Path) -> Iterator[Episode]:
    """The ``episodes`` rows of a dataset folder or Hub dataset, as episodes.

    Raises:
        ValueError: no ``episodes`` files there.
    """
    from datasets import load_dataset

    hub = hub_dataset(str(source))
    folder = download_dataset(hub) if hub is not None else Path(source)
    files = sorted((folder / EPISODES).glob(f"{SPLIT}-*.parquet"))
    if not files:
        raise ValueError(f"{source}: no {EPISODES}/{SPLIT}-*.parquet: not an exported dataset")
    rows = load_dataset("parquet", data_files=[str(f) for f in files], split=SPLIT, streaming=True)
    for row in rows:
        yield episode_of_row(row)


def episode_of_row(row: dict[str, Any]) -> Episode:
    """An ``episodes`` row (images decoded to PIL, as ``datasets`` gives them) as an episode."""
    steps = [
        Step(
            screenshot=None
            if s["screenshot"] is None
            else np.asarray(s["screenshot"].convert("RGB")),
            action=action_of(s["action"]),
            error=s["error"],
            text=s["action_text"] or "",
            reward=s["reward"],
            terminated=s["terminated"],
            truncated=s["truncated"],
            progress=None if s["progress"] is None else json.loads(s["progress"]),
            policy_time_s=s["policy_time_s"],
            env_time_s=s["env_time_s"],
            usage=s["usage"],
        )
        for s in row["steps"]
    ]
    return Episode(
        episode_id=row["episode_id"],
        agent=row["agent"],
        seed=row["seed"],
        options=json.loads(row["options"]),
        instruction=row["instruction"],
        target_rows=list(row["target_rows"]),
        steps=steps,
        success=row["success"],
        error=row["error"],
        group_id=row["group_id"],
        task=row["task"],
    )

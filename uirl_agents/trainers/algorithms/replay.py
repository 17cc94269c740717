"""A replay of successful episodes for GRPO (``grpo.replay``), as ARPO does.

A group whose episodes all failed carries no learning signal: every advantage is 0.
When the run has solved that task instance before, one stored success replaces one
of the group's failures before advantages are computed, so the group again says what
to do. Successes are kept per task instance (task, seed and options), the latest
``per_instance`` of each, for at most ``max_instances`` instances (the least recently
used go first). Every process holds the same replay: each iteration's successes are
gathered from all processes, in rank order, before they are added.

The stored episode is replayed as it was sampled (prompts, images, completion tokens);
the trainer's scoring pass recomputes its old logprobs with the current weights, so
its ratio starts at 1 like any other sample's.
"""

from __future__ import annotations

import copy
import json
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from uirl_agents.episodes.trajectories import Episode

InstanceKey = str


def instance_key(episode: Episode) -> InstanceKey:
    """The task instance an episode ran: its task, seed and reset options (the split
    aside: it only says where the seed came from)."""
    options = {k: v for k, v in episode.options.items() if k != "split"}
    return json.dumps([episode.task, episode.seed, options], sort_keys=True)


class SuccessReplay:
    """Stored successes per task instance.

    Args:
        per_instance: successes kept per instance (the latest).
        max_instances: instances kept (the least recently used are dropped).
    """

    def __init__(self, per_instance: int = 1, max_instances: int = 256) -> None:
        if per_instance < 1 or max_instances < 1:
            raise ValueError("per_instance and max_instances must be >= 1")
        self.per_instance = per_instance
        self.max_instances = max_instances
        self._store: OrderedDict[InstanceKey, list[Episode]] = OrderedDict()

    def __len__(self) -> int:
        return sum(len(v) for v in self._store.values())

    def add(self, episodes: Sequence[Episode]) -> int:
        """Store the successes among ``episodes``; returns how many were stored."""
        stored = 0
        for episode in episodes:
            if not episode.success:
                continue
            key = instance_key(episode)
            kept = self._store.pop(key, [])
            kept = [*kept, _without_screens(episode)][-self.per_instance :]
            self._store[key] = kept
            stored += 1
        while len(self._store) > self.max_instances:
            self._store.popitem(last=False)
        return stored

    def fill(self, episodes: Sequence[Episode]) -> tuple[list[Episode], int]:
        """``episodes`` with, in each group without a success whose instance has a stored
        one, its lowest-return failure replaced by the latest stored success (given the
        group's id). Returns the episodes and how many were replaced."""
        out = list(episodes)
        groups: dict[str | None, list[int]] = {}
        for i, episode in enumerate(out):
            groups.setdefault(episode.group_id, []).append(i)
        replaced = 0
        for group_id, members in groups.items():
            if group_id is None or any(out[i].success for i in members):
                continue
            key = instance_key(out[members[0]])
            stored = self._store.get(key)
            if not stored:
                continue
            self._store.move_to_end(key)  # recently used
            worst = min(members, key=lambda i: out[i].total_reward)
            replay = copy.copy(stored[-1])
            replay.group_id = group_id
            replay.episode_id = f"{out[worst].episode_id}-replay"
            out[worst] = replay
            replaced += 1
        return out, replaced

    def state(self) -> list[tuple[InstanceKey, list[Episode]]]:
        """What a checkpoint saves (picklable), in least-recently-used order."""
        return list(self._store.items())

    def load(self, state: Sequence[tuple[InstanceKey, list[Episode]]]) -> None:
        self._store = OrderedDict((key, list(episodes)) for key, episodes in state)


def _without_screens(episode: Episode) -> Episode:
    """A copy without the full-size screenshots: training uses the model's images."""
    kept = copy.copy(episode)
    kept.steps = [copy.copy(s) for s in episode.steps]
    for step in kept.steps:
        step.screenshot = None
    return kept


def gathered_successes(episodes: Sequence[Episode], gather: Any) -> list[Episode]:
    """Every process's successful episodes, in rank order (``gather``: an all-gather of
    Python objects, e.g. accelerate's ``gather_object``)."""
    return list(gather([_without_screens(e) for e in episodes if e.success]))

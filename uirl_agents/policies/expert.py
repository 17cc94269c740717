"""ExpertPolicy: the task's scripted expert behind the policy interface.

The expert reads privileged state (``oracle(env_index)``, from the env) and acts only
through the agent's actions: at points, or (``by_element``) on the elements of the page's
text observations (:mod:`uirl_agents.policies.element_expert`). Given a model format, it
also writes each step as that model would (prompt messages, resized images, completion
text), so its episodes are demonstrations a model can be fine-tuned on with the same
code as its own rollouts.
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable, Sequence
from typing import Any

from uirl_agents.formats import ModelFormat
from uirl_agents.policies.base import PolicyStep
from uirl_agents.policies.context import EpisodeContexts
from uirl_agents.policies.element_expert import ElementExpert
from uirl_gym.tasks import task_spec


class ExpertPolicy:
    """A task's scripted expert (``uirl_gym.tasks.TASKS[task].expert``).

    Args:
        oracle: ``oracle(env_index)`` returns that sub-env's ``/oracle`` state.
        task: the task the sub-envs run, or ``task(env_index)``: that sub-env's
            current episode's task (multi-task runs).
        format: write steps in this model format (for demonstrations); None: actions only.
        mode: the expert's mode, given to the experts that take one (SimpleDataEntry:
            how it fills fields, ``type`` or ``copy_paste``); None: their default.
        max_images: screenshots per prompt when ``format`` is given.
        by_element: act on elements (bids) instead of points; the env must give
            :data:`~uirl_agents.policies.element_expert.ELEMENT_OBSERVATIONS`.

    Raises:
        ValueError: an unknown task; a format whose actions are not of the kind the
            expert plays (points for a pixel format, elements for ``axtree``/``som``).
    """

    name = "expert"

    def __init__(
        self,
        oracle: Callable[[int], dict[str, Any]],
        *,
        task: str | Callable[[int], str | None] = "simple_data_entry",
        format: ModelFormat | None = None,
        mode: str | None = None,
        max_images: int = 1,
        by_element: bool = False,
    ) -> None:
        if format is not None and (format.mode != "pixels") != by_element:
            raise ValueError(
                f"format {format.name!r} writes actions "
                f"{'on elements' if format.mode != 'pixels' else 'at points'}: "
                f"{'set' if not by_element else 'leave out'} by_element"
            )
        self.oracle = oracle
        self.mode = mode
        self.format = format
        self.by_element = by_element
        self._task_of = task if callable(task) else (lambda _i, name=task: name)
        if not callable(task):
            task_spec(task)  # an unknown task fails here, not at the first episode
        self._contexts = EpisodeContexts(format, max_images=max_images) if format else None
        self._experts: dict[int, Any] = {}
        self._by_element: dict[int, ElementExpert] = {}

    def _new_expert(self, env_index: int) -> Any:
        task = self._task_of(env_index)
        if task is None:  # a sub-env's episode_task before its first reset
            raise RuntimeError(f"sub-env {env_index} runs no episode: reset it first")
        make = task_spec(task).expert
        takes_mode = "mode" in inspect.signature(make).parameters
        return make(**({"mode": self.mode} if takes_mode and self.mode is not None else {}))

    def begin_episode(self, env_index: int) -> None:
        self._experts[env_index] = self._new_expert(env_index)
        self._by_element[env_index] = ElementExpert(self._experts[env_index])
        if self._contexts is not None:
            self._contexts.begin_episode(env_index)

    def act(
        self, observations: Sequence[dict[str, Any]], env_indices: Sequence[int]
    ) -> list[PolicyStep]:
        steps = []
        for obs, i in zip(observations, env_indices, strict=True):
            t0 = time.perf_counter()
            if i not in self._experts:
                self.begin_episode(i)
            if self.by_element:
                action = self._by_element[i].next_action(functools.partial(self.oracle, i), obs)
            else:
                action = self._experts[i].next_action(self.oracle(i))
            step = (
                self._contexts.demonstrate(i, obs, action)
                if self._contexts is not None
                else PolicyStep(action=action)
            )
            step.policy_time_s = time.perf_counter() - t0
            steps.append(step)
        return steps

"""MiniWoB++ as a task family: every task the installed ``miniwob`` wheel registers.

``uirl/miniwob.<task>-v0`` (task id ``miniwob.<task>``), one per Gymnasium id
``miniwob/<task>-v1`` that ``import miniwob`` registers (128 in 1.1.0), and none when
the wheel is not installed (``pip install 'uirl[miniwob]'``). The pages are served
from the wheel at run time, never copied: see :mod:`uirl_gym.tasks.miniwob.task`
for the episode, its options and its record, and docs/tasks.md (MiniWoB++).
"""

from __future__ import annotations

import functools

from uirl_gym.tasks.base import TaskSpec
from uirl_gym.tasks.miniwob import score
from uirl_gym.tasks.miniwob.expert import MiniWobExpert
from uirl_gym.tasks.miniwob.task import MiniWobTask
from uirl_gym.tasks.miniwob.wheel import miniwob_tasks


def task_specs() -> list[TaskSpec]:
    """One spec per MiniWoB++ task of the installed ``miniwob`` wheel (none without it)."""
    infos = miniwob_tasks()
    if not infos:
        return []
    return [
        TaskSpec(
            name=info.name,
            env_id=f"uirl/{info.name}-v0",
            task=functools.partial(MiniWobTask, info.subdomain),
            rewards=score.RewardConfig,
            scorer=score.MiniWobScorer,
            check_options=functools.partial(score.check_options, info=info),
            expert=functools.partial(MiniWobExpert, info.subdomain),
            nondeterministic=info.nondeterministic,
            family="miniwob",
        )
        for info in infos.values()
    ]


# A task family exports a function: the registry calls it for the list.
TASK_SPEC = task_specs

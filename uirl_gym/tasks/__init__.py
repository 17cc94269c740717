"""Tasks the session server can run, by id."""

from __future__ import annotations

import difflib
from collections.abc import Callable

from uirl_gym.tasks.base import Task
from uirl_gym.tasks.simple_data_entry.task import SimpleDataEntryTask

TASKS: dict[str, Callable[[], Task]] = {"simple_data_entry": SimpleDataEntryTask}


def make_task(name: str) -> Task:
    """A new task object for ``name``.

    Raises:
        ValueError: unknown name (with the closest known one, if any).
    """
    if name not in TASKS:
        close = difflib.get_close_matches(name, TASKS, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown task {name!r}; known: {sorted(TASKS)}.{hint}")
    return TASKS[name]()

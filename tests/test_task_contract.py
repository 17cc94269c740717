"""The task contract (tests/task_contract.py) over every registered task: uirl's own
and a handful of MiniWoB++ pages of different kinds (the whole family's first screens
are checked in tests/test_miniwob.py). One session serves them all, task after task.

A new task gets these checks by being registered; its own test file keeps what is
particular to it (its data, record and scorer, its widgets, its options' effects).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest
from task_contract import CHECKS
from task_play import task_runtime

from uirl_gym.runtimes.local import LocalRuntime
from uirl_gym.tasks import OWN_TASKS, TASKS

logger = logging.getLogger(__name__)
# One MiniWoB++ page per kind the expert solves: a click, typing, checkboxes, a drag.
MINIWOB_SAMPLE = (
    "miniwob.click-test",
    "miniwob.enter-text",
    "miniwob.click-checkboxes",
    "miniwob.drag-box",
)
CONTRACT_TASKS = (*OWN_TASKS, *(n for n in MINIWOB_SAMPLE if n in TASKS))
# Task-major order: the session switches task once per task, not once per check.
CASES = [(task, check) for task in CONTRACT_TASKS for check in CHECKS]


@pytest.fixture(scope="module")
def contract_runtime() -> Iterator[LocalRuntime]:
    with task_runtime(OWN_TASKS[0]) as runtime:
        yield runtime


def test_every_own_task_and_the_miniwob_sample_are_covered() -> None:
    assert len(OWN_TASKS) == 7
    if any(s.family == "miniwob" for s in TASKS.values()):
        assert set(MINIWOB_SAMPLE) <= set(CONTRACT_TASKS)


@pytest.mark.parametrize(("task", "check"), CASES, ids=[f"{t}-{c}" for t, c in CASES])
def test_task_contract(task: str, check: str, contract_runtime: LocalRuntime) -> None:
    t0 = time.perf_counter()
    CHECKS[check](task, contract_runtime)
    logger.info("%s %s: %.1f s", task, check, time.perf_counter() - t0)

"""Shared fixtures: one local runtime per test run, sessions borrowed from it."""

from __future__ import annotations

from collections.abc import Iterator

import gymnasium as gym
import pytest
import task_play
from credentials import remember

import uirl_gym  # noqa: F401  (registers the ids)
from uirl_gym.client import SessionClient
from uirl_gym.protocol import SessionInfo
from uirl_gym.runtimes.local import LocalRuntime

# What a session server serves when started without --task.
DEFAULT_SESSION_TASK = "simple_data_entry"


@pytest.fixture(scope="session")
def runtime() -> Iterator[LocalRuntime]:
    """Real session servers (real Chromium) on 127.0.0.1, shared by the whole run."""
    rt = LocalRuntime()
    try:
        yield rt
    finally:
        rt.close()


@pytest.fixture
def session(runtime: LocalRuntime) -> Iterator[SessionInfo]:
    """A ready session, given back healthy after the test (or destroyed if it broke)."""
    info = remember(runtime.acquire())
    healthy = True
    try:
        yield info
    except BaseException:
        healthy = False
        raise
    finally:
        try:
            client = SessionClient(info, max_retries=0, read_timeout_s=5)
            # A test that moved the session to another task (a MiniWoB++ page) gives it
            # back on the default one: the next test resets without naming a task.
            if client.health()["task"] != DEFAULT_SESSION_TASK:
                client.reset(seed=0, task=DEFAULT_SESSION_TASK)
            client.close()
        except Exception:
            healthy = False
        runtime.release(info, healthy=healthy)


@pytest.fixture
def client(session: SessionInfo) -> Iterator[SessionClient]:
    c = SessionClient(session)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def task_runtime(request: pytest.FixtureRequest) -> Iterator[LocalRuntime]:
    """A session server for the test module's task (its module-level ``ENV_ID``), shared by
    the module's tests; the sessions keep that task's app loaded between resets."""
    with task_play.task_runtime(env_task(request)) as rt:
        yield rt


@pytest.fixture(scope="module")
def env(task_runtime: LocalRuntime, request: pytest.FixtureRequest) -> Iterator[gym.Env]:
    """The module's task (``ENV_ID``) on :func:`task_runtime`, reading the oracle (JPEG
    frames, dense rewards); a module that needs another env defines its own ``env``."""
    with task_play.oracle_env(request.module.ENV_ID, task_runtime) as e:
        yield e


def env_task(request: pytest.FixtureRequest) -> str:
    env_id = getattr(request.module, "ENV_ID", None)
    if env_id is None:
        pytest.fail(f"{request.module.__name__} uses the task fixtures but sets no ENV_ID")
    return gym.spec(env_id).kwargs["task"]

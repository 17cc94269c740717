"""Shared fixtures: one local runtime per test run, sessions borrowed from it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from uirl_gym.client import SessionClient
from uirl_gym.runtimes.base import SessionInfo
from uirl_gym.runtimes.local import LocalRuntime


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
    info = runtime.acquire()
    healthy = True
    try:
        yield info
    except BaseException:
        healthy = False
        raise
    finally:
        try:
            SessionClient(info.base_url, max_retries=0, read_timeout_s=5).health()
        except Exception:
            healthy = False
        runtime.release(info, healthy=healthy)


@pytest.fixture
def client(session: SessionInfo) -> Iterator[SessionClient]:
    c = SessionClient(session.base_url)
    try:
        yield c
    finally:
        c.close()

"""Plug-in tasks of the tests' own: a package written to a temporary folder, found by
the session server through its ``uirl.tasks`` entry point (the way a user's task is),
on that server's path only."""

from __future__ import annotations

import contextlib
import os
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from uirl_gym.runtimes.base import SessionInfo
from uirl_gym.runtimes.local import LocalRuntime, LocalRuntimeConfig


@contextlib.contextmanager
def plugin_session(root: Path, module: str, source: str, task: str) -> Iterator[SessionInfo]:
    """A session server (from a local runtime) of the task ``task`` that the module
    ``module`` (its ``source``) declares as ``TASK_SPEC``."""
    (root / f"{module}.py").write_text(textwrap.dedent(source))
    dist = root / f"{module}-0.1.dist-info"
    dist.mkdir()
    name = module.replace("_", "-")
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[uirl.tasks]\n{task} = {module}:TASK_SPEC\n")
    path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", path)
        runtime = LocalRuntime(LocalRuntimeConfig(task=task, startup_timeout_s=120))
        try:
            yield runtime.acquire()
        finally:
            runtime.close()

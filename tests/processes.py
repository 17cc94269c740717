"""Process checks shared by the tests that assert no session or browser is left."""

from __future__ import annotations

import time


def running(pid: int) -> bool:
    """Whether ``pid`` is a running process (a zombie waiting for its parent's wait() is
    gone for our purpose: it holds no memory, socket or browser)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pids: list[int], timeout_s: float) -> list[int]:
    """The processes of ``pids`` still running after ``timeout_s`` (polled): [] when all
    are gone by then."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = [p for p in pids if running(p)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.1)


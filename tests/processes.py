"""Process checks shared by the tests that assert no session or browser is left."""

from __future__ import annotations


def running(pid: int) -> bool:
    """Whether ``pid`` is a running process (a zombie waiting for its parent's wait() is
    gone for our purpose: it holds no memory, socket or browser)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False

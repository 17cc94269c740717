"""Process checks shared by the tests that assert no session or browser is left."""

from __future__ import annotations

import time
from collections.abc import Collection
from pathlib import Path


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


def session_processes(sids: Collection[int]) -> list[int]:
    """The running processes whose session id is one of ``sids`` (a local runtime starts
    each server in a session of its own: its Chromium and every child it forks are in
    it, however late they were started)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # After the command name: state, ppid, pgrp, session.
        if fields[0] != "Z" and int(fields[3]) in sids:
            found.append(int(entry.name))
    return found


def browser_pids(pids: Collection[int]) -> list[int]:
    """The Chromium browser processes among ``pids``: Chromium's children rewrite their
    command line into one string, and the browser is the one without a --type switch."""
    found = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if b"chrom" in cmd.split(b"\0")[0] and b"--type=" not in cmd:
            found.append(pid)
    return found

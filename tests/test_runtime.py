"""The local runtime: start-up errors, and no orphan processes however it ends."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import requests
from processes import running, wait_gone

from uirl_gym.runtimes.base import RuntimeClosedError, SessionStartError
from uirl_gym.runtimes.local import STOP_GRACE_S, LocalRuntime, LocalRuntimeConfig
from uirl_gym.session.browser.chromium import BrowserNotFoundError, find_browser

CHILD = """
import json, sys, time
from uirl_gym.runtimes.local import LocalRuntime, descendant_pids
rt = LocalRuntime()
rt.start_many(2)
pids = []
for s in list(rt._sessions.values()):
    pids += [s.process.pid, *descendant_pids(s.process.pid)]
print(json.dumps(pids), flush=True)
if sys.argv[1] == "exit":
    sys.exit(0)
time.sleep(600)
"""


@pytest.mark.parametrize("how", ["exit", "SIGTERM", "SIGINT", "SIGKILL"])
def test_no_orphan_processes(how: str) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, "exit" if how == "exit" else "wait"],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = child.stdout.readline()
    pids = json.loads(line)
    assert len(pids) >= 4, f"expected 2 servers with Chromium children, got {pids}"
    if how != "exit":
        assert sum(map(running, pids)) >= 4  # servers and their Chromium are up
        child.send_signal(getattr(signal, how))
    child.wait(timeout=30)
    # After SIGKILL the servers notice their parent is gone (polled every second).
    assert wait_gone(pids, timeout_s=20) == []


def test_start_failure_shows_the_log_tail(tmp_path: Path) -> None:
    rt = LocalRuntime(
        LocalRuntimeConfig(browser=str(tmp_path / "no-chromium"), log_dir=str(tmp_path))
    )
    try:
        with pytest.raises(SessionStartError, match="is not an executable file"):
            rt.acquire(timeout_s=20)
    finally:
        rt.close()
    with pytest.raises(RuntimeClosedError):
        rt.acquire()


def test_find_browser(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "my-chrome"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("UIRL_CHROMIUM", str(fake))
    assert find_browser() == str(fake)
    assert find_browser(str(fake)) == str(fake)
    with pytest.raises(BrowserNotFoundError, match="not an executable"):
        find_browser(str(tmp_path / "missing"))
    monkeypatch.delenv("UIRL_CHROMIUM")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("PLAYWRIGHT_BROWSERS_PATH", str(tmp_path / "no-downloads"))
    with pytest.raises(BrowserNotFoundError, match="apt-get install chromium"):
        find_browser()


def test_find_browser_prefers_a_headless_shell_when_headless(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Headless: the headless shell (no top-chrome WebUI renderer); headed: a full browser."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("chromium", "chromium-headless-shell"):
        (bin_dir / name).write_bytes(b"\x7fELF")
        (bin_dir / name).chmod(0o755)
    monkeypatch.delenv("UIRL_CHROMIUM", raising=False)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("PLAYWRIGHT_BROWSERS_PATH", str(tmp_path / "pw"))
    assert find_browser() == str(bin_dir / "chromium-headless-shell")
    assert find_browser(headless=False) == str(bin_dir / "chromium")
    # Only Playwright's downloads (found by path: Playwright is not a dependency), the
    # newest revision first (1200 after 999), the headless shell when headless.
    (bin_dir / "chromium-headless-shell").unlink()
    (bin_dir / "chromium").unlink()
    downloads = [
        "chromium_headless_shell-999/chrome-linux/headless_shell",
        "chromium_headless_shell-1200/chrome-headless-shell-linux64/chrome-headless-shell",
        "chromium-999/chrome-linux/chrome",
        "chromium-1200/chrome-linux64/chrome",
    ]
    for name in downloads:
        path = tmp_path / "pw" / name
        path.parent.mkdir(parents=True)
        path.write_bytes(b"\x7fELF")
        path.chmod(0o755)
    assert find_browser() == str(tmp_path / "pw" / downloads[1])
    assert find_browser(headless=False) == str(tmp_path / "pw" / downloads[3])


def test_released_sessions_are_reused(runtime: LocalRuntime) -> None:
    first = runtime.acquire()
    pid = runtime.pid(first)
    runtime.release(first)
    again = runtime.acquire()
    try:
        assert again == first and runtime.pid(again) == pid
        os.kill(pid, 0)  # still running: healthy sessions are kept, not restarted
    finally:
        runtime.release(again)


OWNER = """
import json, sys, time
from uirl_gym.runtimes.local import LocalRuntime, descendant_pids
rt = LocalRuntime()
rt.start_many(1)
(entry,) = rt._sessions.values()
pids = [entry.process.pid, *descendant_pids(entry.process.pid)]
print(json.dumps({"dir": str(rt.log_dir), "pids": pids}), flush=True)
time.sleep(600)
"""


def test_session_folders_are_removed_even_after_sigkill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session's files go with it; a SIGKILLed owner's folder goes at the next start."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    started = json.loads(owner.stdout.readline())
    owner.kill()  # SIGKILL: no atexit, no handler, nothing cleaned
    owner.wait(timeout=30)
    assert wait_gone(started["pids"], timeout_s=20) == []
    stale = Path(started["dir"])
    assert stale.is_dir() and stale.parent == tmp_path

    # A Chromium profile whose server was killed by someone else (its pid is dead).
    orphan_profile = tmp_path / f"uirl-chromium-{owner.pid}-abc123"
    orphan_profile.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # where this runtime's servers keep theirs
    rt = LocalRuntime()
    try:
        assert not stale.exists(), "the dead owner's folder was kept"
        assert not orphan_profile.exists(), "the dead server's profile was kept"
        info = rt.acquire()
        assert {p.suffix for p in rt.log_dir.iterdir()} == {".log", ".port"}
        server_pid = rt.pid(info)
        (profile,) = tmp_path.glob(f"uirl-chromium-{server_pid}-*")
        os.kill(server_pid, signal.SIGKILL)  # the session server dies, its profile stays
        rt.release(info, healthy=False)  # stopped and cleaned in the background
        deadline = time.monotonic() + 10
        while profile.exists() or list(rt.log_dir.iterdir()):
            assert time.monotonic() < deadline, "the killed server's files were kept"
            time.sleep(0.05)
    finally:
        rt.close()
    assert list(tmp_path.glob("uirl-sessions-*")) == []
    assert list(tmp_path.glob("uirl-chromium-*")) == []


def test_a_session_stopped_with_an_action_in_flight_exits_on_sigterm(
    runtime: LocalRuntime, caplog: pytest.LogCaptureFixture
) -> None:
    """An env drops a session whose action is still running (it timed out, the
    episode ended): the server cancels the request and closes Chromium within the
    runtime's grace. Before, uvicorn waited 5 s for the request, then closed Chromium:
    longer than the grace, so the runtime logged "ignored SIGTERM" and killed it."""
    info = runtime.acquire()
    slow = threading.Thread(
        target=lambda: _get(f"{info.base_url}/act?action_type=screenshot&delay=10", 30),
        daemon=True,
    )
    slow.start()
    # In flight once the session's lock is held: a screenshot then waits behind it.
    deadline = time.monotonic() + 30
    while _get(f"{info.base_url}/act?action_type=screenshot", 0.3):
        assert time.monotonic() < deadline, "the slow action never started"
    pid = runtime.pid(info)
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="uirl_gym.runtimes.local"):
        runtime.release(info, healthy=False)  # stopped in the background
        assert wait_gone([pid], timeout_s=2 * STOP_GRACE_S) == []
    assert "ignored SIGTERM" not in caplog.text
    assert time.monotonic() - t0 < STOP_GRACE_S


def _get(url: str, timeout_s: float) -> bool:
    """Whether ``url`` answered within ``timeout_s`` (any status)."""
    try:
        requests.get(url, timeout=timeout_s)
    except requests.RequestException:
        return False
    return True

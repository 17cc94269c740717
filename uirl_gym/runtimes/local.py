"""The local runtime: session servers as subprocesses on 127.0.0.1.

Each session is ``python -m uirl_gym.session --port 0`` in its own process group; the
server picks a free port and writes it to a port file, so no two sessions race for a
port. Sessions are stopped on :meth:`LocalRuntime.close`, at interpreter exit, on
SIGINT/SIGTERM, and by the servers themselves if this process dies (``--parent-pid``).
A session released unhealthy is stopped in the background (SIGTERM and a grace, or
SIGKILL at once for a process that is stopped and cannot answer SIGTERM), so that the
step that gave up on it returns at once; :meth:`LocalRuntime.close` waits for those.

Each session gets a fresh token for its privileged routes (``/reset``, ``/oracle``),
handed to the server in its environment (not argv, which any local user can read) and
to the env through the session's :class:`SessionInfo`.

Port files and logs live in ``$TMPDIR/uirl-sessions-<owner pid>-*`` unless ``log_dir``
is given: a session's files go when it stops, the folder when the runtime closes, and a
runtime that starts removes the folders of owners that died without closing (SIGKILL).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import requests

from uirl_gym.protocol import (
    PROFILE_PREFIX,
    TOKEN_ENV_VAR,
    TOKEN_HEADER,
    Route,
    SessionInfo,
    new_session_token,
)
from uirl_gym.runtimes.base import (
    RuntimeClosedError,
    SessionStartError,
    close_at_exit,
    server_command,
)

logger = logging.getLogger(__name__)

LOG_TAIL_LINES = 30
STOP_GRACE_S = 5.0
TMP_PREFIX = "uirl-sessions-"
# What remove_stale_dirs cleans: a runtime's folders and its servers' Chromium profiles.
STALE_PREFIXES = (TMP_PREFIX, PROFILE_PREFIX)


@dataclass
class LocalRuntimeConfig:
    """Settings of the local runtime.

    Attributes:
        browser: Chromium executable passed to the servers (None: each server searches).
        task: the task id the servers run.
        startup_timeout_s: how long a server may take to become ready.
        log_dir: where server logs go (a temporary folder when None).
        python: the interpreter that runs the servers.
        extra_args: more ``python -m uirl_gym.session`` arguments.
    """

    browser: str | None = None
    task: str = "simple_data_entry"
    startup_timeout_s: float = 30.0
    log_dir: str | None = None
    python: str = sys.executable
    extra_args: Sequence[str] = field(default_factory=tuple)


@dataclass
class _LocalSession:
    info: SessionInfo
    process: subprocess.Popen[bytes]
    log_path: Path


class LocalRuntime:
    """Session servers as local subprocesses.

    Methods:
        acquire: a ready session (an idle one if any, else a new server).
        release: keep a healthy session for reuse; stop an unhealthy one (in the
            background: close waits for it).
        start_many: start n servers concurrently (they are then idle, ready to acquire).
        close: stop every server and its Chromium.
    """

    def __init__(self, config: LocalRuntimeConfig | None = None) -> None:
        self.config = config or LocalRuntimeConfig()
        self._lock = threading.Lock()
        self._sessions: dict[str, _LocalSession] = {}
        self._idle: list[str] = []
        self._closed = False
        # Stops failed sessions (each may take STOP_GRACE_S) off the caller's thread.
        self._stopper = ThreadPoolExecutor(thread_name_prefix="uirl-local-stop")
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if self.config.log_dir:
            self.log_dir = Path(self.config.log_dir)
            self.log_dir.mkdir(parents=True, exist_ok=True)
        else:
            remove_stale_dirs()
            # The owner's pid in the name lets a later runtime tell a dead owner's folder.
            self._tmp = tempfile.TemporaryDirectory(prefix=f"{TMP_PREFIX}{os.getpid()}-")
            self.log_dir = Path(self._tmp.name)
        close_at_exit(self)

    def acquire(self, timeout_s: float | None = None) -> SessionInfo:
        with self._lock:
            if self._closed:
                raise RuntimeClosedError("this LocalRuntime is closed")
            if self._idle:
                return self._sessions[self._idle.pop()].info
        return self._start(timeout_s).info

    def release(self, session: SessionInfo, *, healthy: bool = True) -> None:
        with self._lock:
            known = session.session_id in self._sessions
            if healthy and known and not self._closed:
                self._idle.append(session.session_id)
                return
            entry = self._sessions.pop(session.session_id, None)
        if entry is not None:
            try:
                self._stopper.submit(self._stop_and_clean, entry)
            except RuntimeError:  # shut down: closed meanwhile, so stop it here
                self._stop_and_clean(entry)
        elif not known:
            logger.debug("release of unknown session %s", session.session_id)

    def start_many(self, n: int, timeout_s: float | None = None) -> None:
        """Start ``n`` servers concurrently; they wait idle for :meth:`acquire`."""
        with ThreadPoolExecutor(max_workers=max(1, n)) as pool:
            started = list(pool.map(lambda _: self._start(timeout_s), range(n)))
        with self._lock:
            self._idle.extend(s.info.session_id for s in started)

    def pid(self, session: SessionInfo) -> int:
        """The server process id of a session (for tests and memory measurements)."""
        return self._sessions[session.session_id].process.pid

    def log_path(self, session: SessionInfo) -> Path:
        return self._sessions[session.session_id].log_path

    def close(self) -> None:
        with self._lock:
            self._closed = True
            entries = list(self._sessions.values())
            self._sessions.clear()
            self._idle.clear()
        for entry in entries:
            self._stop_and_clean(entry)
        self._stopper.shutdown(wait=True)  # the failed sessions being stopped
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __deepcopy__(self, memo: dict[int, object]) -> LocalRuntime:
        # A runtime is a handle on running processes: Gymnasium deep-copies env specs
        # (whose kwargs hold it), and every copy must mean the same sessions.
        return self

    def __enter__(self) -> LocalRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _stop_and_clean(self, entry: _LocalSession) -> None:
        self._stop(entry)
        if entry.process.returncode not in (0, -signal.SIGTERM):
            # Killed, not stopped (SIGKILL, a crash): its Chromium profile is left behind.
            remove_stale_dirs()
        if self._tmp is not None:  # a user's log_dir keeps its logs
            for path in (entry.log_path, entry.log_path.with_suffix(".port")):
                path.unlink(missing_ok=True)

    def _start(self, timeout_s: float | None) -> _LocalSession:
        session_id = uuid.uuid4().hex[:12]
        token = new_session_token()
        port_file = self.log_dir / f"{session_id}.port"
        log_path = self.log_dir / f"{session_id}.log"
        cmd = [
            *server_command(
                session_id=session_id,
                task=self.config.task,
                host="127.0.0.1",
                port=0,
                python=self.config.python,
            ),
            "--port-file",
            str(port_file),
            "--parent-pid",
            str(os.getpid()),
            *self.config.extra_args,
        ]
        if self.config.browser:
            cmd += ["--browser", self.config.browser]
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, TOKEN_ENV_VAR: token},
            )
        entry = _LocalSession(SessionInfo(session_id, ""), process, log_path)
        with self._lock:
            self._sessions[session_id] = entry
        try:
            base_url = self._wait_ready(entry, port_file, timeout_s)
            entry.info = SessionInfo(session_id, base_url, headers={TOKEN_HEADER: token})
        except BaseException:
            with self._lock:
                self._sessions.pop(session_id, None)
            self._stop_and_clean(entry)
            raise
        logger.info("session %s ready at %s", session_id, entry.info.base_url)
        return entry

    def _wait_ready(self, entry: _LocalSession, port_file: Path, timeout_s: float | None) -> str:
        timeout_s = self.config.startup_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        base_url = None
        while time.monotonic() < deadline:
            if entry.process.poll() is not None:
                raise SessionStartError(
                    f"session server exited with code {entry.process.returncode} "
                    f"before it was ready; log {entry.log_path}:\n{self._tail(entry)}"
                )
            if base_url is None and port_file.exists():
                base_url = f"http://127.0.0.1:{port_file.read_text().strip()}"
            if base_url is not None:
                try:
                    if requests.get(base_url + Route.STATUS, timeout=2).status_code == 200:
                        return base_url
                except requests.RequestException:
                    pass
            time.sleep(0.05)
        raise SessionStartError(
            f"session server not ready after {timeout_s:.0f}s; log {entry.log_path}:\n"
            f"{self._tail(entry)}"
        )

    @staticmethod
    def _tail(entry: _LocalSession) -> str:
        try:
            lines = entry.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(lines[-LOG_TAIL_LINES:])

    @staticmethod
    def _stop(entry: _LocalSession) -> None:
        """SIGTERM (the server closes Chromium), then SIGKILL what is left of the group.

        A stopped process (SIGSTOP) would run no SIGTERM handler before the grace ran
        out: it is killed at once.
        """
        process = entry.process
        # Collected first: once the server is gone its children are re-parented.
        family = [process.pid, *descendant_pids(process.pid)]
        if process.poll() is None and _is_stopped(process.pid):
            logger.warning("session %s is stopped (SIGSTOP?); killing it", entry.info.session_id)
        elif process.poll() is None:
            try:
                process.terminate()
                process.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                logger.warning("session %s ignored SIGTERM; killing it", entry.info.session_id)
            except ProcessLookupError:
                pass
        for pid in family:
            _kill_group(pid)
        try:
            process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            logger.warning("session %s did not exit after SIGKILL", entry.info.session_id)


def remove_stale_dirs(tmp_dir: str | None = None) -> list[Path]:
    """Remove the folders of dead owners: ``uirl-sessions-<pid>-*`` (a runtime's) and
    ``uirl-chromium-<pid>-*`` (a session server's Chromium profile, ~1 MB).

    A process killed with SIGKILL cannot remove its own folder: a runtime's servers exit
    on their own (``--parent-pid``), and the next runtime removes what is left; a server
    killed so leaves its profile, removed when its runtime stops it or the next one starts.

    Returns:
        The folders removed.
    """
    removed = []
    root = Path(tmp_dir or tempfile.gettempdir())
    for prefix in STALE_PREFIXES:
        for path in root.glob(f"{prefix}*-*"):
            owner = path.name.removeprefix(prefix).split("-", 1)[0]
            if not owner.isdigit() or _pid_alive(int(owner)) or not path.is_dir():
                continue
            try:
                shutil.rmtree(path)
            except OSError as exc:
                logger.warning("could not remove %s, left by a dead process: %s", path, exc)
            else:
                removed.append(path)
    if removed:
        logger.info("removed %d folder(s) of dead runtimes and sessions", len(removed))
    return removed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: not ours to judge
    return True


def _is_stopped(pid: int) -> bool:
    """Whether ``pid`` is stopped by a signal (SIGSTOP, SIGTSTP): state T in /proc (a
    traced stop, t, is a debugger's, which resumes it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # The command name may hold spaces and parentheses: the state follows the last ')'.
    return stat.rsplit(")", 1)[1].split()[0] == "T"


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def descendant_pids(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (from /proc; empty where /proc is missing)."""
    children: dict[int, list[int]] = {}
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: the ppid follows the last ')'.
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out

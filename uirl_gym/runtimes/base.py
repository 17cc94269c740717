"""The runtime contract: where session servers come from.

The env never starts or finds servers itself: it asks a runtime for a session
(:meth:`Runtime.acquire`), uses its URL, and gives it back (:meth:`Runtime.release`)
healthy (reusable) or not (destroyed). Every runtime serves the same HTTP protocol.
"""

from __future__ import annotations

import atexit
import os
import signal
import threading
import weakref
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from uirl_gym.protocol import SessionInfo


class UIRuntimeError(Exception):
    """Base class of runtime errors."""


class SessionStartError(UIRuntimeError):
    """A session server did not become ready; the message carries its log's tail."""


class RuntimeClosedError(UIRuntimeError):
    """The runtime was closed; it hands out no more sessions."""


@runtime_checkable
class Runtime(Protocol):
    """Hands out ready sessions and takes them back."""

    def acquire(self, timeout_s: float | None = None) -> SessionInfo:
        """A ready session, started or taken from a pool.

        Raises:
            SessionStartError: it did not become ready in time.
            RuntimeClosedError: after :meth:`close`.
        """
        ...

    def release(self, session: SessionInfo, *, healthy: bool = True) -> None:
        """Give a session back: kept for reuse when healthy, destroyed otherwise."""
        ...

    def close(self) -> None:
        """Stop every session this runtime started. Safe to call twice."""
        ...


def server_command(
    *,
    session_id: str,
    task: str,
    host: str,
    port: int,
    python: str = "python",
    allowed_hosts: Sequence[str] = (),
) -> list[str]:
    """The session server's command line: the same for every runtime (a pod runs it too).

    ``allowed_hosts``: names clients reach the server by besides the loopback ones (a
    pod's IP), its ``--allowed-hosts``.
    """
    extra = ["--allowed-hosts", ",".join(allowed_hosts)] if allowed_hosts else []
    return [
        python,
        "-m",
        "uirl_gym.session",
        "--host",
        host,
        "--port",
        str(port),
        "--session-id",
        session_id,
        "--task",
        task,
        "--log-level",
        "warning",
        *extra,
    ]


_LIVE_RUNTIMES: weakref.WeakSet[Runtime] = weakref.WeakSet()
_HANDLERS_INSTALLED = False


def close_at_exit(runtime: Runtime) -> None:
    """Close ``runtime`` at interpreter exit and on SIGINT/SIGTERM.

    Signal handlers run the earlier handler (or the default action) afterwards; they can
    only be installed from the main thread, elsewhere atexit alone holds.
    """
    global _HANDLERS_INSTALLED
    _LIVE_RUNTIMES.add(runtime)
    if _HANDLERS_INSTALLED:
        return
    _HANDLERS_INSTALLED = True
    atexit.register(_close_all)
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGINT, signal.SIGTERM):
        previous = signal.getsignal(signum)

        def handler(sig: int, frame: object, previous: object = previous) -> None:
            _close_all()
            if callable(previous):
                previous(sig, frame)
            elif previous == signal.SIG_DFL:
                signal.signal(sig, signal.SIG_DFL)
                os.kill(os.getpid(), sig)

        signal.signal(signum, handler)


def _close_all() -> None:
    for runtime in list(_LIVE_RUNTIMES):
        runtime.close()

"""The runtime contract: where session servers come from.

The env never starts or finds servers itself: it asks a runtime for a session
(:meth:`Runtime.acquire`), uses its URL, and gives it back (:meth:`Runtime.release`)
healthy (reusable) or not (destroyed). Every runtime serves the same HTTP protocol.
"""

from __future__ import annotations

import atexit
import os
import secrets
import signal
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


class UIRuntimeError(Exception):
    """Base class of runtime errors."""


class SessionStartError(UIRuntimeError):
    """A session server did not become ready; the message carries its log's tail."""


class RuntimeClosedError(UIRuntimeError):
    """The runtime was closed; it hands out no more sessions."""


# Sent by routers (the Kubernetes proxy) with the session id they mean; a session server
# refuses (421) a request meant for another session.
SESSION_HEADER = "X-UIRL-Session-Id"
# The session's token for its privileged routes (/reset, /oracle): created by the
# runtime, handed to the server in this environment variable (never argv, which every
# local user can read) and to the env through SessionInfo, never to the agent.
TOKEN_ENV_VAR = "UIRL_SESSION_TOKEN"
TOKEN_HEADER = "X-UIRL-Token"
# Names one action (``GET /act``): a session remembers the answers to its last few, so
# that a client whose connection broke before the answer came can send the same action
# again and get that answer, never a second click.
ACTION_ID_HEADER = "X-UIRL-Action-Id"
# On a 504 from ``GET /act``: the action ran past its deadline (the page hangs); the
# session is fine and its next reset starts a fresh page, so a client keeps it.
ACTION_TIMEOUT_HEADER = "X-UIRL-Action-Timeout"
# How long a session server keeps an idle keep-alive connection open; clients retire
# theirs sooner (SessionClient.max_idle_s), so that they never send on a connection the
# server is closing. LLM agents think for seconds to minutes between steps.
DEFAULT_KEEP_ALIVE_S = 75.0


def new_session_token() -> str:
    """A fresh per-session token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


@dataclass(frozen=True)
class SessionInfo:
    """A ready session server.

    Attributes:
        session_id: unique within the runtime.
        base_url: the protocol's root, e.g. ``http://127.0.0.1:41234``.
        headers: credentials every request to it carries (the session token, the
            proxy's bearer token); left out of ``repr`` so that logs never show them.
    """

    session_id: str
    base_url: str
    # A plain dict (not a read-only proxy): SessionInfo must stay picklable and copyable.
    headers: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)


# Credentials of the sessions this process's runtimes handed out, by base URL: the
# SessionClient of an env that only knows a session's URL finds them here, so the token
# travels runtime -> client without passing through anything the agent sees.
_CREDENTIALS: dict[str, SessionInfo] = {}
_CREDENTIALS_LOCK = threading.Lock()


def register_session(info: SessionInfo) -> SessionInfo:
    """Make ``info.headers`` the credentials of requests to ``info.base_url``."""
    with _CREDENTIALS_LOCK:
        _CREDENTIALS[info.base_url.rstrip("/")] = info
    return info


def forget_session(session_id: str) -> None:
    """Drop the credentials of a session that was stopped."""
    with _CREDENTIALS_LOCK:
        for url in [u for u, i in _CREDENTIALS.items() if i.session_id == session_id]:
            del _CREDENTIALS[url]


def session_headers(base_url: str) -> dict[str, str]:
    """The credentials for ``base_url``: a runtime's registration, else the token in
    ``$UIRL_SESSION_TOKEN`` (a server started by hand), else none."""
    with _CREDENTIALS_LOCK:
        info = _CREDENTIALS.get(base_url.rstrip("/"))
    if info is not None:
        return dict(info.headers)
    token = os.environ.get(TOKEN_ENV_VAR)
    return {TOKEN_HEADER: token} if token else {}


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
        "uirl_gym.server",
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

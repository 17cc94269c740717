"""Session servers that already run: started by hand, by a supervisor, on other machines.

:class:`ServersRuntime` hands out a fixed list of session-server URLs, each to one env
at a time. Nothing is started or stopped: a session released unhealthy is set aside,
and the next :meth:`~ServersRuntime.acquire` takes an idle server, else waits (up to
``wait_s``) for a set-aside one to answer ``GET /`` again (a supervisor restarting it).
So a list longer than the envs it serves keeps spares, as the Kubernetes runtime's pool
does.

The servers' token for ``/reset`` and ``/oracle`` is the one they were started with
(``UIRL_SESSION_TOKEN=... python -m uirl_gym.session --port 8001``): the same variable in
the environment of the process that uses them (or ``token``).

Example::

    runtime = ServersRuntime(["http://10.0.0.5:8001", "http://10.0.0.5:8002"])
    envs = SessionVectorEnv(2, runtime=runtime)
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Sequence

import requests

from uirl_gym.protocol import TOKEN_ENV_VAR, TOKEN_HEADER, Route, SessionInfo
from uirl_gym.runtimes.base import RuntimeClosedError, SessionStartError

logger = logging.getLogger(__name__)

CHECK_TIMEOUT_S = 2.0
POLL_S = 0.25


class ServersRuntime:
    """Running session servers, one env each at a time (the :class:`Runtime` protocol).

    Args:
        urls: the servers' base URLs (``http://host:port``), each a session of its own.
        token: their session token; None: ``$UIRL_SESSION_TOKEN``.
        wait_s: how long :meth:`acquire` waits for a free, answering server.

    Methods:
        acquire: an idle server, else a set-aside one once it answers again.
        release: healthy: idle again; unhealthy: set aside until it answers.
        close: hands out no more (the servers are not this runtime's to stop).
    """

    def __init__(
        self, urls: Sequence[str], *, token: str | None = None, wait_s: float = 60.0
    ) -> None:
        urls = [u.rstrip("/") for u in urls]
        if not urls:
            raise ValueError("urls: expected at least one session-server URL, got none")
        duplicates = sorted({u for u in urls if urls.count(u) > 1})
        if duplicates:
            raise ValueError(
                f"urls: each server serves one env at a time; listed twice: {duplicates}"
            )
        self.urls = urls
        self.wait_s = wait_s
        token = token if token is not None else os.environ.get(TOKEN_ENV_VAR)
        self._headers = {TOKEN_HEADER: token} if token else {}
        self._cond = threading.Condition()
        self._idle: deque[str] = deque(urls)
        self._leased: set[str] = set()
        self._down: set[str] = set()
        self._closed = False

    def acquire(self, timeout_s: float | None = None) -> SessionInfo:
        deadline = time.monotonic() + (self.wait_s if timeout_s is None else timeout_s)
        while True:
            with self._cond:
                self._check_open()
                if self._idle:
                    return self._lease(self._idle.popleft())
                down = sorted(self._down)
            for url in down:  # outside the lock: a check takes up to CHECK_TIMEOUT_S
                if answers(url):
                    with self._cond:
                        if url in self._down:
                            self._down.discard(url)
                            logger.info("session server %s answers again", url)
                            return self._lease(url)
            with self._cond:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise SessionStartError(
                        f"no session server free and answering after "
                        f"{self.wait_s if timeout_s is None else timeout_s:.0f}s: "
                        f"{len(self._leased)} in use, not answering: {sorted(self._down) or 'none'}."
                        " Fix: restart the servers that stopped, or list spare ones"
                    )
                self._cond.wait(min(POLL_S, remaining))

    def release(self, session: SessionInfo, *, healthy: bool = True) -> None:
        url = session.base_url
        with self._cond:
            if url not in self._leased:
                logger.debug("release of unknown session %s", url)
                return
            self._leased.discard(url)
            if healthy:
                self._idle.append(url)
            else:
                logger.warning("session server %s failed; set aside until it answers", url)
                self._down.add(url)
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def __enter__(self) -> ServersRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _lease(self, url: str) -> SessionInfo:
        self._leased.add(url)
        return SessionInfo(session_id=url, base_url=url, headers=dict(self._headers))

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeClosedError("this ServersRuntime is closed")


def answers(url: str) -> bool:
    """Whether the session server at ``url`` is up and ready (``GET /`` answers 200)."""
    try:
        return requests.get(url + Route.STATUS, timeout=CHECK_TIMEOUT_S).status_code == 200
    except requests.RequestException:
        return False


def check_servers(urls: Sequence[str], *, token: str | None = None, wait_s: float = 30.0) -> None:
    """Each server answers and takes the token, or a ``ValueError`` says what to fix.

    A server still starting (``GET /`` 503) is waited for up to ``wait_s``; one that
    refuses the connection fails at once.
    """
    token = token if token is not None else os.environ.get(TOKEN_ENV_VAR)
    for url in (u.rstrip("/") for u in urls):
        deadline = time.monotonic() + wait_s
        while True:
            try:
                reply = requests.get(url + Route.STATUS, timeout=CHECK_TIMEOUT_S)
            except requests.RequestException as exc:
                raise ValueError(
                    f"session server {url} is not reachable ({type(exc).__name__}: {exc}). Fix: "
                    f"start it (UIRL_SESSION_TOKEN=... python -m uirl_gym.session --host 0.0.0.0 "
                    f"--port PORT) or correct its URL in env.servers"
                ) from None
            status = reply.status_code
            if status == 200:
                break
            if status == 403:
                # The server's reason: a name it does not answer to (--allowed-hosts).
                raise ValueError(f"session server {url} refuses GET /: {_detail(reply)}")
            if status != 503 or time.monotonic() > deadline:
                raise ValueError(
                    f"session server {url} answers GET / with HTTP {status}, not 200: is it a "
                    "uirl session server (python -m uirl_gym.session)?"
                )
            time.sleep(POLL_S)
        headers = {TOKEN_HEADER: token} if token else {}
        status = requests.get(url + Route.ORACLE, headers=headers, timeout=10).status_code
        if status in (401, 403):
            what = "needs" if status == 401 else "refuses"
            raise ValueError(
                f"session server {url} {what} the session token (HTTP {status}). Fix: start "
                f"the servers with {TOKEN_ENV_VAR}=<token> in their environment and set the same "
                f"{TOKEN_ENV_VAR} here"
            )


def _detail(reply: requests.Response) -> str:
    """A refusal's ``detail`` (its text when it is not the protocol's JSON)."""
    try:
        return str(reply.json()["detail"])
    except (ValueError, KeyError, TypeError):
        return reply.text[:200]

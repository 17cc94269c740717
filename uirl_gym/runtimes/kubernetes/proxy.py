"""The routing proxy: ``ANY /proxy/{session_id}/{path}`` -> that session's pod.

The same protocol as the ui-verifiers proxy: method, path, query and body go to the pod
unchanged; status, body and content type come back unchanged. Only pods labelled
``app=uirl-session`` with the matching ``uirl/session-id`` label are ever reached, so
the proxy cannot be used to reach anything else in the namespace.

Sessions are looked up in a watched cache: one list + watch of the session pods (an
informer), so that no request costs an API call, whether its session exists or not (a
stream of made-up ids costs nothing); a connection failure makes the next lookup of
that session ask the API once (pods are replaced, IPs change, and the watch may lag a
moment behind).

What the proxy refuses: malformed, percent-encoded or over-long session ids and paths
(400; the longest the protocol has, ``guards.MAX_TARGET_BYTES``, passes), request bodies over 1 MB (413, counted as they stream in), and, with a token
(``--token-file``, from the ``uirl-proxy-token`` Secret), requests without
``Authorization: Bearer <token>`` (401/403). A client's own ``X-UIRL-Session-Id`` is
replaced by the proxy's, and its bearer token is not passed on to the pod.

Run it in the cluster (``uirl_gym/deploy/proxy.yaml``) or anywhere with API access::

    python -m uirl_gym.runtimes.kubernetes.proxy --namespace uirl --port 8080

Needs the ``k8s`` extra.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import secrets
import sys
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpcore
import uvicorn
from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.responses import JSONResponse

# Session requests are short: the longest is ``/act?action_type=type&text=...`` with
# 8192 characters of text, percent-encoded; the limit derives from the protocol's own
# (MAX_TARGET_BYTES), so the proxy refuses nothing a session takes.
from uirl_gym.guards import (
    MAX_BODY_BYTES,
    MAX_TARGET_BYTES,
    BodyLimitMiddleware,
    uvicorn_config,
)
from uirl_gym.protocol import DEFAULT_KEEP_ALIVE_S, SESSION_HEADER, ProxyRoute
from uirl_gym.runtimes.kubernetes.api import (
    APP_LABEL,
    APP_NAME,
    SESSION_ID_RE,
    PodApi,
    PodApiError,
    PodCache,
    PodState,
    load_api_client,
    session_selector,
)
from uirl_gym.runtimes.kubernetes.config import PROXY_TOKEN_ENV_VAR

logger = logging.getLogger(__name__)

PROXY_PREFIX = f"{ProxyRoute.SESSIONS}/".encode()
# How long the proxy keeps an idle connection to a pod: shorter than the session
# server's keep-alive, so that the proxy closes it first and never sends on one that a
# pod is closing. (Idle connections from clients: --keep-alive-s, as a session's.)
POD_IDLE_S = 30.0
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
# Hop-by-hop headers (RFC 9110 7.6.1) and those each hop sets itself (Host: the pod's;
# Content-Length): never forwarded. Bodies pass as they are, Content-Encoding with them.
HOP_HEADERS = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)


@dataclass
class ProxyConfig:
    """Settings of the routing proxy.

    Attributes:
        ready_wait_s: how long a request for a session whose pod exists but is not
            ready (in the proxy's watched cache) waits for it before a 503.
        token: clients must send ``Authorization: Bearer <token>``; None: no auth.
        max_body_bytes: larger request bodies get 413.
        connect_timeout_s: to open a connection to a pod.
        read_timeout_s: for a pod's answer (an action with a settle delay takes seconds).
        max_connections: to all pods together (keep-alive pool).
    """

    ready_wait_s: float = 2.0
    connect_timeout_s: float = 3.0
    read_timeout_s: float = 60.0
    max_connections: int = 256
    token: str | None = field(default=None, repr=False)
    max_body_bytes: int = MAX_BODY_BYTES


class SessionNotFoundError(Exception):
    """No pod of that session id (or not a uirl session pod)."""


class SessionNotReadyError(Exception):
    """The session's pod exists but is not ready (starting, failing or being deleted)."""


class PodResolver:
    """Session id -> ``(pod IP, port)``, from a watched cache of the session pods.

    One list + watch (:class:`PodCache`, selector ``app=uirl-session``) keeps every
    session pod of the namespace current, as a Kubernetes informer does: a lookup reads
    the cache and costs no API call, whether the id is known or made up (a per-id list
    with a short negative cache made each new made-up id cost one list). Until the cache
    has synced (start-up), and once after a connection to a cached address failed (the
    watch may lag a replacement by a moment), a lookup lists that session's pods.
    """

    def __init__(self, api: PodApi, ready_wait_s: float = 2.0) -> None:
        self.api = api
        self.ready_wait_s = ready_wait_s
        self.cache = PodCache(api, session_selector(), listener=self._on_change)
        self._by_session: dict[str, dict[str, PodState]] = {}
        self._lock = threading.Lock()
        self._recheck: set[str] = set()  # sessions whose cached address failed
        self.lookups = 0  # API lookups made (for tests and metrics): none once synced

    def start(self) -> None:
        self.cache.start()

    def stop(self) -> None:
        self.cache.stop()

    def _on_change(self, old: PodState | None, new: PodState | None) -> None:
        # Called from the watch thread: the index by session id follows the cache.
        with self._lock:
            if old is not None and old.session_id is not None:
                pods = self._by_session.get(old.session_id, {})
                pods.pop(old.name, None)
                if not pods:
                    self._by_session.pop(old.session_id, None)
            if new is not None and new.session_id is not None:
                self._by_session.setdefault(new.session_id, {})[new.name] = new

    async def resolve(self, session_id: str) -> tuple[str, int]:
        """The pod's address; a pod that exists but is not ready yet is waited for up to
        ``ready_wait_s`` (the watch may report Ready a moment after the runtime saw it).

        Raises:
            SessionNotFoundError: no uirl session pod has this id.
            SessionNotReadyError: its pod is not ready.
            PodApiError: the API server did not answer (only when a lookup lists).
        """
        if not self.cache.synced.is_set() or session_id in self._recheck:
            self._recheck.discard(session_id)
            return await self._resolve_by_list(session_id)
        deadline = time.monotonic() + self.ready_wait_s
        while True:
            with self._lock:
                pods = list(self._by_session.get(session_id, {}).values())
            if not pods:
                raise SessionNotFoundError(session_id)
            usable = [p for p in pods if p.usable]
            if usable:
                return _address(usable)
            if time.monotonic() >= deadline:
                raise SessionNotReadyError(f"{pods[0].name}: phase {pods[0].phase}, not ready")
            await asyncio.sleep(0.02)

    async def _resolve_by_list(self, session_id: str) -> tuple[str, int]:
        self.lookups += 1
        pods, _ = await asyncio.to_thread(self.api.list, session_selector(session_id=session_id))
        pods = [p for p in pods if p.session_id == session_id]
        if not pods:
            raise SessionNotFoundError(session_id)
        usable = [p for p in pods if p.usable]
        if not usable:
            raise SessionNotReadyError(f"{pods[0].name}: phase {pods[0].phase}, not ready")
        return _address(usable)

    def invalidate(self, session_id: str) -> None:
        """The cached address failed: the next lookup of this session asks the API."""
        self._recheck.add(session_id)


def _address(usable: list[PodState]) -> tuple[str, int]:
    # The selector already filters; checking again costs nothing and keeps the
    # guarantee even against a misbehaving API server.
    pods = [p for p in usable if p.labels.get(APP_LABEL) == APP_NAME]
    if not pods:
        raise SessionNotFoundError(usable[0].session_id or "")
    pod = max(pods, key=lambda p: p.created_at.timestamp() if p.created_at else 0.0)
    return pod.ip or "", pod.port  # usable pods have an IP


class PodConnections:
    """The proxy's keep-alive HTTP/1.1 connections to the session pods.

    httpcore's pool, the layer under httpx: httpx refuses a URL whose query is over
    64 KiB, and the protocol's longest ``/act`` is longer (``guards.MAX_TARGET_BYTES``).
    It reads no ``HTTP(S)_PROXY`` variable, which must not capture pod traffic.
    """

    def __init__(self, config: ProxyConfig) -> None:
        self.pool = httpcore.AsyncConnectionPool(
            max_connections=config.max_connections,
            max_keepalive_connections=config.max_connections,
            # Retired well before the sessions close idle connections (their keep-alive),
            # so that a request is never sent on one a pod is closing.
            keepalive_expiry=POD_IDLE_S,
        )
        read_s = config.read_timeout_s
        self.timeouts = {
            "connect": config.connect_timeout_s,
            "read": read_s,
            "write": read_s,
            "pool": read_s,
        }

    async def request(
        self,
        method: str,
        ip: str,
        port: int,
        target: bytes,
        headers: list[tuple[str, str]],
        body: bytes,
    ) -> httpcore.Response:
        """The pod's whole answer (httpcore's errors propagate)."""
        host = f"[{ip}]" if ":" in ip else ip
        url = httpcore.URL(scheme=b"http", host=ip.encode("ascii"), port=port, target=target)
        return await self.pool.request(
            method,
            url,
            headers=[("Host", f"{host}:{port}"), *headers],
            content=body,
            extensions={"timeout": self.timeouts},
        )

    async def aclose(self) -> None:
        await self.pool.aclose()


# The pod could not be reached: the request was never delivered, safe to send again.
UNREACHABLE = (httpcore.ConnectError, httpcore.ConnectTimeout)


@dataclass
class _Outgoing:
    """One client request, to be sent to a pod (twice at most, see ``forward``)."""

    method: str
    target: bytes  # raw path + query, as the client sent them
    body: bytes
    headers: list[tuple[str, str]]

    async def send(self, pods: PodConnections, session_id: str, ip: str, port: int) -> Response:
        """The pod's answer; connection failures propagate (the caller retries once).

        Raises:
            httpcore.ConnectError, httpcore.ConnectTimeout: the pod could not be reached.
            HTTPException: 504 when the pod did not answer in time, 502 on other errors.
        """
        # The proxy's own header, never the client's (which could misdirect on purpose).
        request_headers = [*self.headers, (SESSION_HEADER, session_id)]
        try:
            reply = await pods.request(
                self.method, ip, port, self.target, request_headers, self.body
            )
        except UNREACHABLE:
            raise
        except httpcore.TimeoutException as exc:
            raise _error(504, f"session {session_id} did not answer in time: {exc!r}") from None
        except (httpcore.NetworkError, httpcore.ProtocolError) as exc:
            raise _error(502, f"session {session_id}: {type(exc).__name__}: {exc}") from None
        if reply.status == 421:
            # Another session answered (its pod took over a cached IP): nothing was done.
            raise MisdirectedError(reply.content.decode(errors="replace"))
        reply_headers: dict[str, str] = {}
        for raw_name, raw_value in reply.headers:
            name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
            if name not in HOP_HEADERS:
                # Repeated headers joined, as HTTP allows (and httpx did).
                reply_headers[name] = (
                    f"{reply_headers[name]}, {value}" if name in reply_headers else value
                )
        return Response(reply.content, status_code=reply.status, headers=reply_headers)


class MisdirectedError(Exception):
    """The pod at a cached address is another session's; the request was refused."""


def _error(status: int, message: str) -> HTTPException:
    return HTTPException(status_code=status, detail=message)


def create_proxy_app(config: ProxyConfig, api: PodApi) -> FastAPI:
    """The proxy app, routing to the session pods that ``api`` lists (its namespace)."""
    resolver = PodResolver(api, config.ready_wait_s)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # The session pods' list + watch; lookups fall back to a list until it synced.
        resolver.start()
        pods = PodConnections(config)
        app.state.pods = pods
        try:
            yield
        finally:
            await pods.aclose()
            await asyncio.to_thread(resolver.stop)

    app = FastAPI(
        title="uirl routing proxy",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.resolver = resolver
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=config.max_body_bytes)

    @app.get(ProxyRoute.HEALTH)
    async def healthz() -> JSONResponse:
        return JSONResponse({"status": "ok", "namespace": api.namespace})

    @app.api_route(ProxyRoute.SESSIONS + "/{session_id}", methods=METHODS)
    @app.api_route(ProxyRoute.SESSIONS + "/{session_id}/{path:path}", methods=METHODS)
    async def forward(request: Request, session_id: str, path: str = "") -> Response:
        if config.token is not None:
            _authorize(config.token, request)
        session_id, target = _split_target(request)
        outgoing = _Outgoing(
            request.method,
            target,
            await request.body(),
            _forwarded_headers(request, strip_authorization=config.token is not None),
        )
        pods: PodConnections = request.app.state.pods
        ip, port = await _resolve(resolver, session_id)
        try:
            return await outgoing.send(pods, session_id, ip, port)
        except (*UNREACHABLE, MisdirectedError) as exc:
            # Never delivered (or refused unprocessed), so safe to repeat: the pod was
            # replaced or is gone.
            resolver.invalidate(session_id)
            logger.info("session %s: %s at %s; looking it up again", session_id, exc, ip)
        ip, port = await _resolve(resolver, session_id)
        try:
            return await outgoing.send(pods, session_id, ip, port)
        except (*UNREACHABLE, MisdirectedError) as exc:
            resolver.invalidate(session_id)
            raise _error(502, f"session {session_id} unreachable at {ip}:{port}: {exc}") from None

    return app


def _authorize(token: str, request: Request) -> None:
    """401 without ``Authorization: Bearer``, 403 with the wrong token.

    The proxy's token travels only in ``Authorization``; the session's own token
    (``X-UIRL-Token``) is not looked at here and passes through to the pod.
    """
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    presented = value.strip() if scheme.lower() == "bearer" else ""
    if not presented:
        raise HTTPException(
            401,
            "the proxy needs its token: send Authorization: Bearer <token> (the "
            "uirl-proxy-token Secret; KubernetesRuntimeConfig.proxy_token)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    if not secrets.compare_digest(presented.encode(), token.encode()):
        raise HTTPException(403, "the proxy: the bearer token sent is not the proxy's token")


def _split_target(request: Request) -> tuple[str, bytes]:
    """The session id and the pod-side path + query, from the raw request line.

    The raw path keeps the client's percent-encoding exactly (Starlette's path is
    decoded), so the session id is read from it too: an id in percent-encoding is
    refused rather than decoded into something the route did not match.

    Raises:
        HTTPException: 400 for a malformed, encoded or over-long id or path.
    """
    raw_path: bytes = request.scope.get("raw_path") or request.url.path.encode()
    query = request.scope.get("query_string", b"")
    if len(raw_path) + len(query) > MAX_TARGET_BYTES:
        raise _error(
            400,
            f"the path and query are {len(raw_path) + len(query)} bytes; at most "
            f"{MAX_TARGET_BYTES} (session requests are short)",
        )
    rest = raw_path[len(PROXY_PREFIX) :] if raw_path.startswith(PROXY_PREFIX) else b""
    raw_id, slash, tail = rest.partition(b"/")
    session_id = raw_id.decode("latin-1")
    if not raw_path.startswith(PROXY_PREFIX) or not SESSION_ID_RE.match(session_id):
        shown = session_id[:80]
        raise _error(
            400,
            f"malformed session id {shown!r}: expected lowercase letters, digits and '-' "
            "(at most 48), not percent-encoded, as handed out by the runtime",
        )
    target = slash + tail or b"/"
    if query:
        target += b"?" + query
    return session_id, target


def _forwarded_headers(request: Request, *, strip_authorization: bool) -> list[tuple[str, str]]:
    dropped = {*HOP_HEADERS, SESSION_HEADER.lower()}
    if strip_authorization:
        dropped.add("authorization")  # the proxy's credential is not the pod's business
    return [(k, v) for k, v in request.headers.items() if k.lower() not in dropped]


async def _resolve(resolver: PodResolver, session_id: str) -> tuple[str, int]:
    try:
        return await resolver.resolve(session_id)
    except SessionNotFoundError:
        raise _error(404, f"no uirl session {session_id!r}: it ended or never existed") from None
    except SessionNotReadyError as exc:
        raise _error(503, f"session {session_id} is not ready: {exc}") from None
    except PodApiError as exc:
        raise _error(503, f"pod lookup failed (Kubernetes API): {exc}") from None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m uirl_gym.runtimes.kubernetes.proxy", description=__doc__
    )
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--namespace", default="default", help="where the session pods live")
    p.add_argument("--read-timeout-s", type=float, default=ProxyConfig.read_timeout_s)
    p.add_argument("--kubeconfig", help="default: in-cluster when in a pod, else ~/.kube/config")
    p.add_argument("--context")
    p.add_argument("--api-server", help="an API URL without credentials (kubectl proxy)")
    p.add_argument(
        "--token-file",
        help="require Authorization: Bearer <the file's content> (the uirl-proxy-token "
        f"Secret, mounted); default ${PROXY_TOKEN_ENV_VAR}; a missing file means no auth",
    )
    p.add_argument(
        "--keep-alive-s",
        type=float,
        default=DEFAULT_KEEP_ALIVE_S,
        help="how long an idle client connection stays open (longer than SessionClient's "
        "idle limit, as a session server's)",
    )
    p.add_argument("--log-level", default="info")
    return p.parse_args(argv)


def read_proxy_token(token_file: str | None) -> str | None:
    """The proxy's bearer token: the file (a mounted Secret), else the environment."""
    if token_file and os.path.exists(token_file):
        with open(token_file) as f:
            file_token = f.read().strip()
        if file_token:
            logger.info("clients must send the bearer token from %s", token_file)
            return file_token
    token = os.environ.get(PROXY_TOKEN_ENV_VAR) or None
    if token is None:
        logger.warning(
            "no token (%s missing or empty, $%s unset): anyone who reaches this proxy can "
            "act on every session; keep its Service ClusterIP or create the Secret",
            token_file,
            PROXY_TOKEN_ENV_VAR,
        )
    return token


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    client = load_api_client(
        api_server=args.api_server, kubeconfig=args.kubeconfig, context=args.context
    )
    config = ProxyConfig(
        read_timeout_s=args.read_timeout_s,
        token=read_proxy_token(args.token_file),
    )
    app = create_proxy_app(config, PodApi(client, args.namespace))
    server = uvicorn_config(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        access_log=False,
        # uvicorn's 5 s default raced with slow agents' next request (docs/protocol.md).
        timeout_keep_alive=args.keep_alive_s,
    )
    uvicorn.Server(server).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())

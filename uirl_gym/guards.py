"""What stands between a request and the session: who may call, the token check, and
the limits on a request's size.

The session server and the routing proxy use them; the OpenEnv server and the recorder
use the same caller check (:class:`CallerPolicy`).

- Callers: a request must name one of the server's own host names in ``Host`` (loopback
  ones unless told others), so that a web page cannot reach it through a DNS name it
  rebinds to 127.0.0.1; and a request a browser sends from a page (``Origin``,
  ``Sec-Fetch-Site``) must come from the server's own origin or an allowed one: an
  ``<img src=".../act?...">`` on any page the user opens would otherwise act in the
  session. Programs (``SessionClient``, the proxy, curl) send neither header. 403 otherwise.
- Privileged routes (``/reset``, ``/oracle``) need the session's token, sent as
  ``X-UIRL-Token: <token>`` or ``Authorization: Bearer <token>``; the agent-facing ones
  (``/``, ``/act``, ``/progress``, ``/health``) do not. No token: 401; a wrong one: 403.
- Request bodies are limited (1 MB by default): a ``Content-Length`` over the limit is
  answered 413 before anything is read, and a body without one (chunked) is counted as
  it streams in and cut off with 413 at the limit, so no request holds more than the
  limit in memory.
- A request's line and headers are limited to what the protocol's longest request needs
  (``MAX_REQUEST_HEAD_BYTES``, derived from ``/act``'s longest text): a longer one, or one
  that is not HTTP, gets a JSON 414 or 400 like every other refusal (uvicorn's own was
  plain text, and its 16 KiB limit refused long texts that arrived in several reads).
"""

from __future__ import annotations

import json
import logging
import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import h11
import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from uirl_gym.protocol import MAX_ACT_QUERY_BYTES, MAX_TYPED_TEXT, TOKEN_HEADER

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 1024 * 1024
# The longest request target (path and query) of the protocol: GET /act with its longest
# query, behind a path of at most 1 KiB (a proxy's /proxy/<session id>/ included).
MAX_TARGET_BYTES = MAX_ACT_QUERY_BYTES + 1024
# A request's line and headers, at most: the longest target and 16 KiB of headers (what
# uvicorn allowed for the whole of them).
MAX_REQUEST_HEAD_BYTES = MAX_TARGET_BYTES + 16 * 1024
# After refusing a request whose head is too long, the rest of it is read and dropped
# for this long (at most this much), so that the client, still sending, gets the answer
# instead of a connection reset.
LINGER_S = 5.0
MAX_LINGER_BYTES = 16 * 1024 * 1024

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
# Any host, any origin (a deployment behind its own access control).
ANY = "*"
# Sec-Fetch-Site values of a request the server's own page sent, or the person typed.
OWN_FETCH_SITES = ("same-origin", "none")
_HOST_NAME = re.compile(r"[a-z0-9._-]+|[0-9a-f:.]+")


class RequestError(Exception):
    """A request the server refuses; ``status`` and ``detail`` make the answer."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def presented_token(headers: Mapping[str, str], *, bearer: bool = True) -> str | None:
    """The token a request carries: ``X-UIRL-Token``, else an ``Authorization: Bearer``."""
    token = headers.get(TOKEN_HEADER.lower()) or headers.get(TOKEN_HEADER)
    if token:
        return token
    auth = headers.get("authorization", "") if bearer else ""
    scheme, _, value = auth.partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None


def check_token(expected: str, presented: str | None, what: str) -> None:
    """Raise unless ``presented`` is ``expected`` (compared in constant time).

    Raises:
        RequestError: 401 when no token was sent, 403 when it is not the right one.
    """
    if presented is None:
        raise RequestError(
            401,
            f"{what} needs the session token: send the header {TOKEN_HEADER}: <token> (or "
            "Authorization: Bearer <token>); the runtime that started the session holds it",
        )
    if not secrets.compare_digest(presented.encode(), expected.encode()):
        raise RequestError(403, f"{what}: the token sent is not this session's token")


def parse_json_object(raw: bytes) -> dict[str, Any]:
    """A request body as a JSON object ({} when empty).

    Raises:
        RequestError: 400 when it is not JSON, not an object, or nested too deeply.
    """
    if not raw:
        return {}
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise RequestError(400, "the body must be JSON") from None
    except RecursionError:
        # json.loads recurses once per level: a body like "[[[[..." 100,000 deep
        # would otherwise be an internal error.
        raise RequestError(400, "the body's JSON is nested too deeply") from None
    if not isinstance(body, dict):
        raise RequestError(400, f"the body must be a JSON object, got {type(body).__name__}")
    return body


class BodyLimitMiddleware:
    """ASGI middleware: 413 for request bodies over ``max_body_bytes``.

    A declared ``Content-Length`` over the limit is refused before the body is read;
    otherwise the body is counted as it streams, and the request fails with 413 once
    the count passes the limit (the app never sees more than the limit).
    """

    def __init__(self, app: ASGIApp, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None:
            try:
                too_big = int(declared) > self.max_body_bytes
            except ValueError:
                await _answer(send, 400, "Content-Length must be an integer")
                return
            if too_big:
                await _answer(send, 413, self._detail(int(declared)))
                return
        received = 0
        answered = False

        async def counting_receive() -> Message:
            nonlocal received, answered
            if answered:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    # Answer now and tell the app the client is gone: it stops reading
                    # and whatever it answers is dropped.
                    answered = True
                    await _answer(send, 413, self._detail(received, at_least=True))
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            if not answered:
                await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except Exception:
            if not answered:
                raise
            # The app failed because its body was cut off (ClientDisconnect): answered.

    def _detail(self, size: int, at_least: bool = False) -> str:
        got = f"at least {size}" if at_least else str(size)
        return (
            f"the request body is too large: at most {self.max_body_bytes} bytes, got {got}; "
            "send less (actions go in the query string, reset options are small)"
        )


async def _answer(send: Send, status: int, detail: str) -> None:
    await send_json(send, status, {"detail": detail})


async def send_json(send: Send, status: int, content: Any) -> None:
    """A whole JSON answer from an ASGI middleware (the connection closes after it)."""
    body = json.dumps(content).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


# -- who may call ----------------------------------------------------------------------


def host_names(names: Iterable[str]) -> frozenset[str]:
    """Host names as :class:`CallerPolicy` compares them: lowercase, IPv6 without
    brackets, blanks dropped (a comma-separated flag's empty items)."""
    return frozenset(n.strip().lower().strip("[]") for n in names if n.strip())


@dataclass(frozen=True)
class CallerPolicy:
    """Which requests a server on the user's machine answers (see the module docstring).

    Attributes:
        hosts: the names the ``Host`` header may carry (:func:`host_names`; ``*``: any).
        origins: browser origins (``https://host:port``) besides the server's own whose
            pages may call it (``*``: any).
        port: the port ``Host`` must name; None: any (a server reached through a port
            mapping, ``docker -p`` or ``kubectl port-forward``, is addressed by another).
        allow_host: how to allow another name, said in the refusal.
        allow_origin: how to allow another origin, said in the refusal (None: no way).
    """

    hosts: frozenset[str] = frozenset(LOOPBACK_HOSTS)
    origins: frozenset[str] = frozenset()
    port: int | None = None
    allow_host: str = "start the server with --allowed-hosts NAME"
    allow_origin: str | None = "start the server with --allowed-origins ORIGIN"

    def __post_init__(self) -> None:
        origins = frozenset(o.strip().lower().rstrip("/") for o in self.origins if o.strip())
        object.__setattr__(self, "origins", origins)

    def refusal(
        self,
        host: str | None,
        origin: str | None,
        fetch_site: str | None,
        *,
        navigation: bool = False,
    ) -> str | None:
        """Why a request with these headers is refused; None when it may be answered.

        ``Host`` must name this server; ``Origin``, when sent, must be the server's own
        (the scheme and the ``Host``) or an allowed one; ``Sec-Fetch-Site``, when sent,
        must say the server's own page sent it (``same-origin``) or the person typed
        the address (``none``), unless ``Origin`` is an allowed one: a page on another
        port of 127.0.0.1 is ``same-site`` and sends no ``Origin`` with an image.
        ``navigation``: the caller's page opened in a tab from a link elsewhere (a page
        that holds no data: the recorder's) may be ``cross-site``.
        """
        authority = _authority(host or "")
        port_ok = authority is not None and (
            self.port is None
            or authority[1] == self.port
            or (authority[1] is None and self.port == 80)
        )
        if authority is None or not port_ok or not self._host_allowed(authority[0]):
            named = ", ".join(sorted(self.hosts))
            return (
                f"Host {(host or '')[:80]!r} is not a name of this server (allowed: {named}); "
                f"a page that renames itself to this address (DNS rebinding) is refused. "
                f"To reach the server under another name, {self.allow_host}"
            )
        allowed_origin = origin is not None and (
            ANY in self.origins or origin.strip().lower().rstrip("/") in self.origins
        )
        if origin is not None and not allowed_origin and not _same_origin(origin, authority):
            how = f"; to allow its pages, {self.allow_origin}" if self.allow_origin else ""
            return (
                f"Origin {origin[:80]!r} is not this server's own page: a page on another "
                f"site may not call it{how}"
            )
        if fetch_site is not None and fetch_site not in OWN_FETCH_SITES:
            if not (allowed_origin or navigation or ANY in self.origins):
                return (
                    f"a browser sent this request from a page that is not this server's (Sec-Fetch-Site: "
                    f"{fetch_site[:40]}); only programs and the server's own pages may call it"
                )
        return None

    def _host_allowed(self, name: str) -> bool:
        return ANY in self.hosts or name in self.hosts


def _authority(value: str) -> tuple[str, int | None] | None:
    """``Host`` as (lowercase name without IPv6 brackets, port or None); None when it is
    not a host name with an optional port (``user@host``, a bad port, nothing)."""
    value = value.strip().lower()
    if value.startswith("["):
        name, closed, rest = value[1:].partition("]")
        if not closed or (rest and not rest.startswith(":")):
            return None
        port = rest[1:] if rest else None
    else:
        name, colon, port_text = value.rpartition(":")
        name, port = (name, port_text) if colon else (value, None)
    if not name or not _HOST_NAME.fullmatch(name):
        return None
    if port is None:
        return name, None
    if not port.isascii() or not port.isdigit() or int(port) > 65535:
        return None
    return name, int(port)


def _same_origin(origin: str, authority: tuple[str, int | None]) -> bool:
    """Whether a page's ``Origin`` is the address the request names (its ``Host``)."""
    scheme, sep, rest = origin.strip().lower().rstrip("/").partition("://")
    if not sep or scheme not in ("http", "https"):
        return False  # "null" (a sandboxed frame, a file), or no web page at all
    page = _authority(rest)
    if page is None:
        return False
    default = 443 if scheme == "https" else 80
    return (page[0], page[1] or default) == (authority[0], authority[1] or default)


def request_headers(scope: Scope) -> dict[str, str]:
    """An ASGI request's headers, names in lowercase."""
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


class CallerMiddleware:
    """ASGI middleware: 403 with a JSON detail for a request :class:`CallerPolicy`
    refuses, on every route (reads too: the screenshot and the instruction show the
    task)."""

    def __init__(self, app: ASGIApp, policy: CallerPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = request_headers(scope)
        refusal = self.policy.refusal(
            headers.get("host"), headers.get("origin"), headers.get("sec-fetch-site")
        )
        if refusal is None:
            await self.app(scope, receive, send)
            return
        logger.warning(
            "refused %s %s: %s", scope.get("method"), scope.get("path", "")[:80], refusal
        )
        await _answer(send, 403, refusal)


# -- the request head ------------------------------------------------------------------


class JsonRefusalH11Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, refusing a request that is not HTTP (400) or whose
    line and headers are over the limit (414) with JSON ``{"detail": ...}``, and reading
    the rest of it before closing (a client still sending would get a reset, not the
    answer). Use it through :func:`uvicorn_config`."""

    _lingering = False
    _dropped_bytes = 0

    def data_received(self, data: bytes) -> None:
        if not self._lingering:
            super().data_received(data)
            return
        self._dropped_bytes += len(data)
        if self._dropped_bytes > MAX_LINGER_BYTES:
            self.transport.close()

    def send_400_response(self, msg: str) -> None:
        # uvicorn calls this for any request h11 cannot read (msg is always the same).
        status, detail = _head_refusal(
            len(self.conn.trailing_data[0]),
            self.config.h11_max_incomplete_event_size or MAX_REQUEST_HEAD_BYTES,
        )
        body = json.dumps({"detail": detail}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        reason = HTTPStatus(status).phrase.encode()
        for event in (
            h11.Response(status_code=status, headers=headers, reason=reason),
            h11.Data(data=body),
            h11.EndOfMessage(),
        ):
            self.transport.write(self.conn.send(event))
        # Half-close: the answer, then the end of it; what the client still sends is
        # read and dropped until it closes (or for LINGER_S).
        self._lingering = True
        self.transport.write_eof()
        self.loop.call_later(LINGER_S, self.transport.close)


def _head_refusal(buffered: int, limit: int) -> tuple[int, str]:
    """The status and detail for a request h11 could not read, ``buffered`` bytes of it
    held: 414 when its line and headers outgrew ``limit``, else 400."""
    if buffered <= limit:
        return 400, "not an HTTP/1.1 request the server can read (a malformed line or header)"
    return 414, (
        f"the request line and headers are over {limit} bytes (got at least {buffered}); "
        f"the protocol's longest request, GET /act with {MAX_TYPED_TEXT} characters of "
        f"text, each percent-encoded, fits in {MAX_TARGET_BYTES}: send less"
    )


def uvicorn_config(app: ASGIApp, **options: Any) -> uvicorn.Config:
    """uvicorn's ``Config`` for a uirl HTTP server (the session server, the proxy):
    :class:`JsonRefusalH11Protocol` and a request head of ``MAX_REQUEST_HEAD_BYTES``."""
    return uvicorn.Config(
        app,
        http=JsonRefusalH11Protocol,
        h11_max_incomplete_event_size=MAX_REQUEST_HEAD_BYTES,
        **options,
    )

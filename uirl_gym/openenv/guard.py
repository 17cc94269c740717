"""Who may use the OpenEnv server, and how a WebSocket session stays alive.

An ASGI middleware in front of OpenEnv's app (which has no such checks), for every
route, HTTP and WebSocket:

- **Host**: the ``Host`` header must name an allowed host (default: loopback only,
  ``127.0.0.1``, ``localhost``, ``::1``), so that a web page cannot reach the server
  through a DNS name it rebinds to 127.0.0.1. 403 otherwise (a WebSocket is refused
  before it is accepted).
- **Origin**: a request from a browser page (it sends ``Origin`` or ``Sec-Fetch-Site``)
  must come from the server's own origin or an allowed one: a page on
  ``http://evil.example`` opening ``/ws`` (browsers do not apply CORS to WebSockets) or
  posting ``text/plain`` to ``/mcp`` started browsers and held sessions. Non-browser
  clients send neither. The check is the session server's (``guards.CallerPolicy``).
- **Sessions are WebSocket sessions**: OpenEnv's ``/mcp`` session methods
  (``openenv/session/create``, ``openenv/session/close``) and attaching ``/ws`` to a
  session by id are refused (uirl has no MCP tools, and they let a client hold a slot
  with no socket, or close or attach to a session whose id it learned); so is the
  ``/mcp`` WebSocket, which held a slot per connection.
- **A slot is for playing**: a ``/ws`` connection with no successful ``reset`` within
  ``start_timeout_s`` (default 60 s) is closed, freeing its slot (before, two silent
  sockets held ``--max-sessions 2`` for the hour of the idle timeout). A reset refused
  before any succeeded (an unknown task or option) gives the slot back at once: OpenEnv's
  session ends as if the client had left, the socket stays open, and the client's next
  message takes a slot again (before, such a socket counted as started and kept its slot
  for the idle timeout: eight of them locked a default server for an hour).
- **A client that leaves mid-answer is a disconnect**: an answer that can no longer be
  sent is dropped with an INFO line, and OpenEnv ends the session as on any disconnect
  (it logged an ASGI traceback, three exceptions long).
- **A bad frame is an error, not the end**: a binary frame, JSON that is not an object
  (an array, a number, ``null``) or nests deeper than ``MAX_JSON_DEPTH`` is answered
  with an error frame (``INVALID_JSON``) and the session goes on (OpenEnv ended the
  session, its episode and browser, on each of them).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any
from urllib.parse import parse_qs

from openenv.core.env_server.mcp_types import JsonRpcErrorCode, JsonRpcResponse
from openenv.core.env_server.types import WSErrorCode, WSErrorResponse

from uirl_gym.guards import (
    LOOPBACK_HOSTS,
    CallerPolicy,
    host_names,
    request_headers,
    send_json,
)

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# A uirl message nests 3-4 levels; deeper is refused before anyone parses it further.
MAX_JSON_DEPTH = 32
# A request body /mcp is read into memory for (the session methods check), at most.
MAX_MCP_BODY_BYTES = 1 << 20
# WebSocket close codes: policy violation; a connection lost without a close frame.
POLICY_VIOLATION = 1008
ABNORMAL_CLOSURE = 1006


class OpenEnvGuard:
    """The checks of the module docstring, around OpenEnv's ASGI app.

    Args:
        app: OpenEnv's app.
        allowed_hosts: host names the ``Host`` header may carry (``*``: any).
        allowed_origins: origins (``https://host:port``) besides the server's own that
            pages may call from (``*``: any).
        start_timeout_s: how long a ``/ws`` connection may go without a ``reset`` that
            succeeds.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        allowed_hosts: Sequence[str] = LOOPBACK_HOSTS,
        allowed_origins: Sequence[str] = (),
        start_timeout_s: float = 60.0,
    ) -> None:
        self.app = app
        self.policy = CallerPolicy(
            hosts=host_names(allowed_hosts),
            origins=frozenset(allowed_origins),
            allow_host="start the server with --allowed-hosts NAME (or "
            "$UIRL_OPENENV_ALLOWED_HOSTS)",
            allow_origin="start the server with --allowed-origins ORIGIN (or "
            "$UIRL_OPENENV_ALLOWED_ORIGINS)",
        )
        self.start_timeout_s = start_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is None and kind == "websocket":
            refusal = self._websocket_refusal(scope)
        if refusal is not None:
            logger.warning("refused %s %s: %s", kind, scope.get("path"), refusal)
            await _refuse(scope, send, refusal)
            return
        if kind == "websocket":
            await _WebSocketSession(self.app, scope, receive, send, self.start_timeout_s).serve()
            return
        if scope.get("method") == "POST" and scope.get("path") == "/mcp":
            await self._mcp(scope, receive, send)
            return
        await self.app(scope, receive, send)

    # -- who ---------------------------------------------------------------------------

    def _refusal(self, scope: Scope) -> str | None:
        headers = request_headers(scope)
        return self.policy.refusal(
            headers.get("host"), headers.get("origin"), headers.get("sec-fetch-site")
        )

    def _websocket_refusal(self, scope: Scope) -> str | None:
        if scope.get("path") != "/ws":
            return "uirl serves WebSocket sessions on /ws only (it has no MCP tools)"
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if "session_id" in query:
            return "a uirl session is its WebSocket: /ws cannot attach to a session by id"
        return None

    # -- POST /mcp ---------------------------------------------------------------------

    async def _mcp(self, scope: Scope, receive: Receive, send: Send) -> None:
        """JSON-RPC on ``/mcp``: OpenEnv's own answer, except for the session methods."""
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            body += message.get("body", b"")
            if len(body) > MAX_MCP_BODY_BYTES:
                await send_json(send, 413, {"detail": "request body too large"})
                return
            if not message.get("more_body"):
                break
        refusal = _mcp_refusal(bytes(body))
        if refusal is not None:
            request_id, reason = refusal
            answer = JsonRpcResponse.error_response(
                JsonRpcErrorCode.METHOD_NOT_FOUND, reason, request_id=request_id
            )
            await send_json(send, 200, answer.model_dump())
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class _WebSocketSession:
    """One client's WebSocket in front of OpenEnv's ``/ws`` loop: bad frames answered
    here, the start timeout, the slot given back after a refused first reset, a client
    that leaves mid-answer (see the module docstring).

    OpenEnv takes a slot when it accepts a socket (its session) and frees it when the
    socket ends. To give the slot back while the client's socket stays open, this class
    ends OpenEnv's loop as a disconnect would, keeps the socket, and runs OpenEnv's
    loop again on the client's next frame (a new session, a slot again). It only acts
    while OpenEnv waits for the next frame, so its error frames never interleave with
    OpenEnv's answers, and OpenEnv answers one frame at a time, so the first frame
    OpenEnv sends after a reset is that reset's answer.
    """

    def __init__(
        self, app: ASGIApp, scope: Scope, receive: Receive, send: Send, start_timeout_s: float
    ) -> None:
        self._app = app
        self._scope = scope
        self._receive = receive
        self._send = send
        self._deadline = time.monotonic() + start_timeout_s
        self._next: asyncio.Future[Message] | None = None
        self._accepted = False  # the client's socket is open
        self._started = False  # a reset succeeded: no start timeout from then on
        self._reset_sent = False  # a reset went to OpenEnv; its answer is the next frame
        self._give_back = False  # end OpenEnv's loop at its next receive
        self._given_back = False  # OpenEnv's loop ended for it; the socket stays open
        self._client_gone = False  # a send failed: the client left
        self._replay: list[Message] = []  # what a new OpenEnv loop reads first

    async def serve(self) -> None:
        try:
            await self._app(dict(self._scope), self._app_receive, self._app_send)
            while self._given_back:
                message = await self._next_frame()
                if message["type"] != "websocket.receive":
                    return  # the client left, or the start timeout closed the socket
                self._given_back = False
                self._replay = [{"type": "websocket.connect"}, message]
                await self._app(dict(self._scope), self._app_receive, self._app_send)
        finally:
            if self._next is not None:
                self._next.cancel()

    async def _app_receive(self) -> Message:
        """What OpenEnv's loop reads."""
        if self._replay:
            return self._replay.pop(0)
        if self._give_back:
            self._give_back, self._given_back = False, True
            return {"type": "websocket.disconnect", "code": 1000}
        if self._client_gone:
            return {"type": "websocket.disconnect", "code": ABNORMAL_CLOSURE}
        return await self._next_frame()

    async def _app_send(self, message: Message) -> None:
        """What OpenEnv's loop sends."""
        if self._given_back:
            return  # OpenEnv closing the session it gave back: the socket stays open
        kind = message["type"]
        if kind == "websocket.accept":
            if self._accepted:
                return  # a new OpenEnv loop on the socket already open
            self._accepted = True
        elif kind == "websocket.send" and self._reset_sent:
            self._reset_sent = False
            if _is_observation(message):
                self._started = True
            elif not self._started:
                self._give_back = True
        await self._to_client(message)

    async def _to_client(self, message: Message) -> None:
        if self._client_gone:
            return
        try:
            await self._send(message)
        except OSError as exc:  # uvicorn's ClientDisconnected: the socket is gone
            self._client_gone = True
            logger.info(
                "a /ws client left before its answer was sent (%s); closing its session",
                type(exc).__name__,
            )

    async def _next_frame(self) -> Message:
        """The client's next message that OpenEnv can take (bad frames answered here); a
        disconnect once the start timeout passed with no reset that succeeded."""
        while True:
            message = await self._next_message()
            if message is None:  # no successful reset in time
                await self._to_client(
                    {
                        "type": "websocket.close",
                        "code": POLICY_VIOLATION,
                        "reason": "no successful reset in the start timeout: the slot is freed",
                    }
                )
                return {"type": "websocket.disconnect", "code": POLICY_VIOLATION}
            if message["type"] != "websocket.receive":
                return message
            error = self._check(message)
            if error is None:
                return message
            await self._to_client({"type": "websocket.send", "text": error})
            if self._client_gone:
                return {"type": "websocket.disconnect", "code": ABNORMAL_CLOSURE}

    async def _next_message(self) -> Message | None:
        if self._next is None:
            self._next = asyncio.ensure_future(self._receive())
        timeout = None if self._started else max(self._deadline - time.monotonic(), 0.0)
        done, _ = await asyncio.wait({self._next}, timeout=timeout)
        if not done:
            return None
        message, self._next = self._next.result(), None
        return message

    def _check(self, message: Message) -> str | None:
        """The error frame for a frame OpenEnv cannot take; None when it is fine."""
        text = message.get("text")
        if text is None:
            return _ws_error("binary frames are not part of the protocol: send JSON text")
        try:
            frame = json.loads(text)
        except RecursionError:
            return _ws_error(f"the JSON nests deeper than {MAX_JSON_DEPTH} levels")
        except ValueError as exc:
            return _ws_error(f"Invalid JSON: {exc}")
        if not isinstance(frame, dict):
            return _ws_error(
                f'a message is a JSON object such as {{"type": "reset", "data": {{}}}}, '
                f"got a JSON {type(frame).__name__}"
            )
        if _depth(frame) > MAX_JSON_DEPTH:
            return _ws_error(f"the JSON nests deeper than {MAX_JSON_DEPTH} levels")
        if frame.get("type") == "mcp":
            data = frame.get("data")
            method = data.get("method") if isinstance(data, dict) else None
            if isinstance(method, str) and method.startswith("openenv/session/"):
                return _ws_error(f"{method}: a uirl session is its WebSocket")
        if frame.get("type") == "reset":
            self._reset_sent = True
        return None


def _is_observation(message: Message) -> bool:
    """Whether OpenEnv's frame is an observation (a reset that succeeded), not an error."""
    try:
        frame = json.loads(message.get("text") or "null")
    except ValueError:
        return False
    return isinstance(frame, dict) and frame.get("type") == "observation"


def _mcp_refusal(body: bytes) -> tuple[Any, str] | None:
    """(request id, why) for a JSON-RPC call to a session method, or one that names a
    session; None for the rest (OpenEnv answers them, malformed ones included)."""
    try:
        call = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(call, dict):
        return None
    method, params = call.get("method"), call.get("params")
    request_id = call.get("id") if isinstance(call.get("id"), str | int) else None
    if isinstance(method, str) and method.startswith("openenv/session/"):
        return request_id, f"{method}: uirl sessions are WebSocket sessions (/ws)"
    if isinstance(params, dict) and "session_id" in params:
        return request_id, "params.session_id: no session is reachable through /mcp"
    return None


def _depth(value: Any) -> int:
    """How deep JSON containers nest (iteratively: no recursion limit to hit)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        if deepest > MAX_JSON_DEPTH:
            return deepest
        stack.extend((child, level + 1) for child in children)
    return deepest


def _ws_error(message: str) -> str:
    return WSErrorResponse(
        data={"message": message, "code": WSErrorCode.INVALID_JSON}
    ).model_dump_json()


async def _refuse(scope: Scope, send: Send, reason: str) -> None:
    if scope["type"] == "websocket":
        # Closing before accepting answers the handshake with 403.
        await send({"type": "websocket.close", "code": POLICY_VIOLATION, "reason": reason[:120]})
        return
    await send_json(send, 403, {"detail": reason})

"""What stands between a request and the session: the token check and the body limit.

Both the session server and the routing proxy use them.

- Privileged routes (``/reset``, ``/oracle``) need the session's token, sent as
  ``X-UIRL-Token: <token>`` or ``Authorization: Bearer <token>``; the agent-facing ones
  (``/``, ``/act``, ``/progress``, ``/health``) do not. No token: 401; a wrong one: 403.
- Request bodies are limited (1 MB by default): a ``Content-Length`` over the limit is
  answered 413 before anything is read, and a body without one (chunked) is counted as
  it streams in and cut off with 413 at the limit, so no request holds more than the
  limit in memory.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from uirl_gym.protocol import TOKEN_HEADER

MAX_BODY_BYTES = 1024 * 1024


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

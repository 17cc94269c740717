"""What every HTTP stand-in of the tests shares: a handler that logs nothing and answers
in one call, and a server on 127.0.0.1 in a thread."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that keeps pytest's output clean and replies in one call."""

    def log_message(self, *args: Any) -> None:
        pass

    def send_body(
        self,
        status: int,
        data: bytes,
        content_type: str = "application/octet-stream",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def send_json(
        self, status: int, payload: Any, headers: Mapping[str, str] | None = None
    ) -> None:
        self.send_body(status, json.dumps(payload).encode(), "application/json", headers)


S = TypeVar("S", bound=ThreadingHTTPServer)


def serving(
    handler: type[BaseHTTPRequestHandler],
) -> contextlib.AbstractContextManager[ThreadingHTTPServer]:
    """``handler`` served on 127.0.0.1 (port 0) from a thread, shut down on exit; yields
    the server (its port: ``server.server_address[1]``)."""
    return running(ThreadingHTTPServer(("127.0.0.1", 0), handler))


@contextlib.contextmanager
def running(server: S) -> Iterator[S]:
    """A server already built (a subclass that keeps state) served from a thread, shut
    down on exit."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def url_of(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"

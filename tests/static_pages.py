"""Static test pages on 127.0.0.1: the browser-level tests drive a real Chromium on
pages of their own (no task app)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@contextlib.contextmanager
def serving_pages(pages: Mapping[str, bytes], default: bytes) -> Iterator[str]:
    """Serve ``pages`` (path -> HTML; any other path gets ``default``) from a server
    thread; yields the URL of ``/app``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(pages.get(self.path, default))

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/app"
    finally:
        server.shutdown()
        server.server_close()

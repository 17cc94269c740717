"""Static test pages on 127.0.0.1: the browser-level tests drive a real Chromium on
pages of their own (no task app)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

from http_standin import QuietHandler, serving, url_of


@contextlib.contextmanager
def serving_pages(pages: Mapping[str, bytes], default: bytes) -> Iterator[str]:
    """Serve ``pages`` (path -> HTML; any other path gets ``default``) from a server
    thread; yields the URL of ``/app``."""

    class Handler(QuietHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_body(200, pages.get(self.path, default), "text/html")

    with serving(Handler) as server:
        yield f"{url_of(server)}/app"

"""The recorder page's HTTP server: the page and its JSON API, on 127.0.0.1 unless told
otherwise, refusing requests from any other page (``Host``, ``Origin``,
``Sec-Fetch-Site``: DNS rebinding, cross-site requests); :func:`record` serves a
:class:`~uirl_agents.recorder.recording.Recorder` until its episodes are saved.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import re
import sys
import threading
from collections.abc import Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

from uirl_agents.episodes.trajectories import Episode
from uirl_agents.recorder.recording import (
    Recorder,
    RecorderAddressError,
    RecorderConfig,
    RecorderFinishedError,
)
from uirl_gym.actions import to_action
from uirl_gym.env import UIEnv
from uirl_gym.guards import LOOPBACK_HOSTS, CallerPolicy, host_names

logger = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 64 * 1024


class BadRequestError(ValueError):
    """A request the page's API cannot read; ``status`` is the answer's (400 or 413)."""

    def __init__(self, message: str, status: HTTPStatus = HTTPStatus.BAD_REQUEST) -> None:
        super().__init__(message)
        self.status = status


def page_html() -> bytes:
    """The recorder page (one static file, its script inline)."""
    return resources.files("uirl_agents.recorder").joinpath("static/recorder.html").read_bytes()


class RecorderHandler(BaseHTTPRequestHandler):
    """The page and its JSON API; ``server.recorder`` is the :class:`Recorder`.

    ``GET /`` the page, ``GET /api/state``, ``GET /api/screenshot`` (PNG),
    ``POST /api/action`` (an action as :meth:`Action.to_dict` writes it),
    ``POST /api/new_episode``, ``POST /api/stop``.
    """

    server: RecorderServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
        logger.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        path = urlsplit(self.path).path
        if not self._allowed():
            return
        recorder = self.server.recorder
        if path == "/":
            self._send(
                HTTPStatus.OK,
                page_html(),
                "text/html; charset=utf-8",
                # No other site may frame the page (and trick clicks into it).
                {"X-Frame-Options": "DENY", "Content-Security-Policy": "frame-ancestors 'none'"},
            )
        elif path == "/api/state":
            self._send_json(HTTPStatus.OK, recorder.state())
        elif path == "/api/screenshot":
            self._send(HTTPStatus.OK, recorder.screenshot_png(), "image/png")
        else:
            self._send_json(HTTPStatus.NOT_FOUND, {"error": f"no such page: {path}"})

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        path = urlsplit(self.path).path
        if not self._allowed():
            return
        recorder = self.server.recorder
        try:
            body = self._read_json()
        except BadRequestError as exc:
            # The body was not read (or not whole): the connection cannot carry another.
            self.close_connection = True
            self._send_json(exc.status, {"error": str(exc)})
            return
        try:
            if path == "/api/action":
                recorder.act(to_action(body).validate())
            elif path == "/api/new_episode":
                recorder.new_episode()
            elif path == "/api/stop":
                recorder.stop()
            else:
                self._send_json(HTTPStatus.NOT_FOUND, {"error": f"no such action: {path}"})
                return
        except (ValueError, TypeError) as exc:
            self._send_json(HTTPStatus.BAD_REQUEST, {"error": f"{type(exc).__name__}: {exc}"})
            return
        except RecorderFinishedError as exc:
            self._send_json(HTTPStatus.CONFLICT, {"error": str(exc)})
            return
        except Exception as exc:  # e.g. a session that failed on reset: the page says so
            logger.exception("%s failed", path)
            self._send_json(
                HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"{type(exc).__name__}: {exc}"}
            )
            return
        self._send_json(HTTPStatus.OK, recorder.state())
        if recorder.finished.is_set():
            # Only now: the page has its last answer before the server goes away.
            self.server.done.set()

    def _allowed(self) -> bool:
        """Answer 403 (and say so) unless the request comes from the recorder's own page.

        Every route is checked, reads included: the screenshot and the state show the
        task. ``Origin`` alone is not enough: a page that rebinds its own name to
        127.0.0.1 (DNS rebinding) sends a matching ``Host`` and ``Origin``, so the
        ``Host`` must be one of this server's names (loopback ones unless told others).
        """
        refusal = self.server.policy.refusal(
            self.headers.get("Host"),
            self.headers.get("Origin"),
            self.headers.get("Sec-Fetch-Site"),
            # A tab opened on the page from a link elsewhere (not a frame, not a fetch).
            navigation=self.command == "GET"
            and urlsplit(self.path).path == "/"
            and self.headers.get("Sec-Fetch-Dest") == "document",
        )
        if refusal is None:
            return True
        logger.warning("refused %s %s: %s", self.command, self.path[:80], refusal)
        self.close_connection = True  # its body, if any, is not read
        self._send_json(HTTPStatus.FORBIDDEN, {"error": refusal})
        return False

    def _read_json(self) -> dict[str, Any]:
        """The request's JSON object ({} without a body).

        Raises:
            BadRequestError: a Content-Length that is not a size (``-1`` used to read
                until the client left), too large a body, not JSON, nested too deeply
                (a RecursionError was a 500), or not an object.
        """
        declared = self.headers.get("Content-Length")
        if declared is None:
            if self.headers.get("Transfer-Encoding"):
                raise BadRequestError("send the body with a Content-Length (not chunked)")
            return {}
        if not re.fullmatch(r"[0-9]{1,12}", declared.strip()):
            raise BadRequestError(
                f"Content-Length: must be a number of bytes (0 or more), got {declared[:40]!r}"
            )
        length = int(declared)
        if length > MAX_REQUEST_BYTES:
            raise BadRequestError(
                f"request body: at most {MAX_REQUEST_BYTES} bytes, got {length}",
                HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            )
        raw = self.rfile.read(length) if length else b""
        if len(raw) < length:
            raise BadRequestError(f"request body: {len(raw)} of {length} bytes arrived")
        if not raw.strip():
            return {}
        try:
            body = json.loads(raw)
        except RecursionError:
            raise BadRequestError("request body: JSON nested too deeply") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise BadRequestError(f"request body: not JSON ({exc})") from None
        if not isinstance(body, dict):
            raise BadRequestError(f"request body: must be a JSON object, got {type(body).__name__}")
        return body

    def _send_json(self, status: HTTPStatus, data: Any) -> None:
        self._send(status, json.dumps(data).encode(), "application/json")

    def _send(
        self,
        status: HTTPStatus,
        body: bytes,
        content_type: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)


class RecorderServer(ThreadingHTTPServer):
    """The recorder page's HTTP server (one thread per connection; the recorder locks).

    Binds its address when made; :meth:`start` serves a recorder from a thread,
    :meth:`stop` stops serving and frees the address.

    Attributes:
        recorder: the recorder served (set by :meth:`start`).
        done: set once the answer to the request that finished the recording is sent.
        url: the page's address.
    """

    daemon_threads = True
    recorder: Recorder

    def __init__(self, address: tuple[str, int], allowed_hosts: Sequence[str] = ()) -> None:
        super().__init__(address, RecorderHandler)
        self.done = threading.Event()
        self._thread: threading.Thread | None = None
        bound = str(self.server_address[0])
        names = [*LOOPBACK_HOSTS, *allowed_hosts]
        if bound not in ("0.0.0.0", "::", ""):
            # The address it listens on, as an IP literal: no name to rebind.
            names.append(bound)
        # Its own page only: no other origin may call it (the page is the only client).
        self.policy = CallerPolicy(
            hosts=host_names(names),
            port=self.server_address[1],
            allow_host="start the recorder with --allow-host NAME",
            allow_origin=None,
        )

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/"

    def start(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self._thread = threading.Thread(
            target=self.serve_forever, name="uirl-recorder", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self.shutdown()  # waits for serve_forever, so only once it runs
            self._thread.join()
            self._thread = None
        self.server_close()


def record(
    config: RecorderConfig,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    allowed_hosts: Sequence[str] = (),
) -> list[Episode]:
    """Serve the recorder page until the episodes are saved or the person stops.

    The page's address goes to stdout as ``recorder: URL`` (the first line).

    Args:
        config: what to record.
        host: the page's address; 127.0.0.1 keeps it (and the session) on this machine.
        port: the page's port; 0: any free one.
        allowed_hosts: names the page may be opened under besides the loopback ones
            (127.0.0.1, localhost, [::1]) and the address it listens on; any other
            ``Host`` is refused (DNS rebinding).

    Returns:
        The episodes saved.

    Raises:
        RecorderAddressError: ``host:port`` cannot be served.
    """
    # The address first: a taken port fails before any session or browser starts.
    try:
        server = RecorderServer((host, port), allowed_hosts)
    except OSError as exc:
        raise RecorderAddressError(
            f"cannot serve the recorder page on {host}:{port} ({exc.strerror}); "
            "choose another --port, or --port 0 for any free one"
        ) from exc
    if not ipaddress.ip_address(str(server.server_address[0])).is_loopback:
        logger.warning(
            "the recorder page listens on %s: anyone who reaches it can drive the session",
            host,
        )
    env = UIEnv(task=config.task, base_url=config.session_url)
    recorder = Recorder(config, env)
    try:
        recorder.start()
        server.start(recorder)
        sys.stdout.write(f"recorder: {server.url}\n")
        sys.stdout.flush()
        logger.info("recording %s into %s at %s", config.task, config.out_dir, server.url)
        server.done.wait()
        return recorder.saved
    finally:
        recorder.close()
        server.stop()
        env.close()

"""SessionClient's retry rule against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from uirl_gym.actions import Action, ActionType
from uirl_gym.client import InvalidActionError, SessionClient, SessionUnavailableError
from uirl_gym.runtimes.base import (
    TOKEN_ENV_VAR,
    TOKEN_HEADER,
    SessionInfo,
    forget_session,
    register_session,
)


class FlakyServer(ThreadingHTTPServer):
    """Answers 503 to the first ``failures`` requests of each path, then 200."""

    def __init__(self, failures: int, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), FlakyHandler)
        self.failures = failures
        self.hits: dict[str, int] = {}
        self.last_headers: dict[str, str] = {}


class FlakyHandler(BaseHTTPRequestHandler):
    server: FlakyServer

    def do_GET(self) -> None:  # noqa: N802
        self.server.last_headers = dict(self.headers.items())
        path = self.path.split("?")[0]
        n = self.server.hits[path] = self.server.hits.get(path, 0) + 1
        if "keys=bogus" in self.path:
            self._send(400, {"detail": "keys: unknown key 'bogus'"})
        elif n <= self.server.failures:
            self._send(503, {"detail": "busy"})
        elif path == "/act":
            self._send_raw(bytes(800 * 1280 * 3))
        else:
            self._send(200, {"submitted_row_indices": [], "num_incorrect_submissions": 0})

    def _send(self, status: int, body: dict) -> None:
        self._send_raw(json.dumps(body).encode(), status, "application/json")

    def _send_raw(
        self, data: bytes, status: int = 200, kind: str = "application/octet-stream"
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def flaky() -> Iterator[FlakyServer]:
    server = FlakyServer(failures=2)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_reads_are_retried_actions_are_not(flaky: FlakyServer) -> None:
    client = SessionClient(f"http://127.0.0.1:{flaky.server_port}", backoff_s=0.001)
    assert client.progress()["num_incorrect_submissions"] == 0
    assert flaky.hits["/progress"] == 3  # two 503s, then the answer
    with pytest.raises(SessionUnavailableError, match="503"):
        client.act(Action(ActionType.LEFT_CLICK, 1, 1))
    assert flaky.hits["/act"] == 1  # a click that may have landed is never repeated
    with pytest.raises(InvalidActionError, match="unknown key") as caught:
        client.act(Action(ActionType.KEYS, keys="bogus"))
    assert caught.value.status_code == 400


def test_an_action_is_retried_when_the_connection_never_opened(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.socket() as s:  # a port with nobody listening (yet)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = SessionClient(f"http://127.0.0.1:{port}", image_format="raw", max_retries=2)
    with pytest.raises(SessionUnavailableError, match="ConnectionError"):
        client.act(Action(ActionType.LEFT_CLICK, 1, 1))
    # The server comes up during the client's backoff: the click, never delivered the
    # first time, is sent again and succeeds.
    servers: list[FlakyServer] = []

    def start_server(_seconds: float) -> None:
        if not servers:
            servers.append(FlakyServer(failures=0, port=port))
            threading.Thread(target=servers[0].serve_forever, daemon=True).start()

    monkeypatch.setattr("uirl_gym.client.time.sleep", start_server)
    try:
        assert client.act(Action(ActionType.LEFT_CLICK, 1, 1)).shape == (800, 1280, 3)
        assert servers[0].hits["/act"] == 1
    finally:
        servers[0].shutdown()
        servers[0].server_close()


def test_the_client_sends_the_credentials_its_runtime_registered(
    flaky: FlakyServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"http://127.0.0.1:{flaky.server_port}"
    flaky.failures = 0
    monkeypatch.delenv(TOKEN_ENV_VAR, raising=False)
    SessionClient(url).progress()
    assert TOKEN_HEADER not in flaky.last_headers  # nothing registered, nothing sent
    register_session(SessionInfo("s1", url, headers={TOKEN_HEADER: "from-runtime"}))
    try:
        SessionClient(url + "/").progress()
        assert flaky.last_headers[TOKEN_HEADER] == "from-runtime"
        SessionClient(url, headers={TOKEN_HEADER: "explicit"}).progress()
        assert flaky.last_headers[TOKEN_HEADER] == "explicit"
    finally:
        forget_session("s1")
    # A server started by hand: its token from the environment.
    monkeypatch.setenv(TOKEN_ENV_VAR, "from-env")
    SessionClient(url).progress()
    assert flaky.last_headers[TOKEN_HEADER] == "from-env"

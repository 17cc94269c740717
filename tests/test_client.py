"""SessionClient's retry rule and idle connections against real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from http_standin import QuietHandler, running

from uirl_gym.actions import Action, ActionType
from uirl_gym.client import InvalidActionError, SessionClient, SessionUnavailableError
from uirl_gym.protocol import TOKEN_ENV_VAR, TOKEN_HEADER, SessionInfo
from uirl_gym.runtimes.local import LocalRuntime, LocalRuntimeConfig


class FlakyServer(ThreadingHTTPServer):
    """Answers 503 to the first ``failures`` requests of each path, then 200."""

    def __init__(self, failures: int, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), FlakyHandler)
        self.failures = failures
        self.hits: dict[str, int] = {}
        self.last_headers: dict[str, str] = {}


class FlakyHandler(QuietHandler):
    server: FlakyServer

    def do_GET(self) -> None:  # noqa: N802
        self.server.last_headers = dict(self.headers.items())
        path = self.path.split("?")[0]
        n = self.server.hits[path] = self.server.hits.get(path, 0) + 1
        if "keys=bogus" in self.path:
            self.send_json(400, {"detail": "keys: unknown key 'bogus'"})
        elif n <= self.server.failures:
            self.send_json(503, {"detail": "busy"})
        elif path == "/act":
            self.send_body(200, bytes(800 * 1280 * 3))
        else:
            self.send_json(200, {"submitted_row_indices": [], "num_incorrect_submissions": 0})


@pytest.fixture
def flaky() -> Iterator[FlakyServer]:
    with running(FlakyServer(failures=2)) as server:
        yield server


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


def test_the_client_sends_the_credentials_of_the_session_it_was_given(
    flaky: FlakyServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"http://127.0.0.1:{flaky.server_port}"
    flaky.failures = 0
    monkeypatch.delenv(TOKEN_ENV_VAR, raising=False)
    SessionClient(url).progress()
    assert TOKEN_HEADER not in flaky.last_headers  # a bare URL: nothing to send
    info = SessionInfo("s1", url + "/", headers={TOKEN_HEADER: "from-runtime"})
    SessionClient(info).progress()
    assert flaky.last_headers[TOKEN_HEADER] == "from-runtime"
    # The credentials travel in the SessionInfo only: no process-wide lookup by URL.
    SessionClient(url).progress()
    assert TOKEN_HEADER not in flaky.last_headers
    SessionClient(info, headers={TOKEN_HEADER: "explicit"}).progress()
    assert flaky.last_headers[TOKEN_HEADER] == "explicit"
    # A server started by hand: its token from the environment.
    monkeypatch.setenv(TOKEN_ENV_VAR, "from-env")
    SessionClient(url).progress()
    assert flaky.last_headers[TOKEN_HEADER] == "from-env"


class KeepAliveServer(ThreadingHTTPServer):
    """HTTP/1.1 with keep-alive; the first ``drops`` actions get no answer: the connection
    closes, as when a server closes an idle connection the request was sent on."""

    daemon_threads = True

    def __init__(self, drops: int = 0) -> None:
        super().__init__(("127.0.0.1", 0), KeepAliveHandler)
        self.drops = drops
        self.stall_s = 0.0  # an action's answer comes this late (a stuck session)
        self.connections = 0
        self.action_ids: list[str | None] = []


class KeepAliveHandler(BaseHTTPRequestHandler):
    server: KeepAliveServer
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.server.connections += 1

    def do_GET(self) -> None:  # noqa: N802
        if self.path.startswith("/act"):
            self.server.action_ids.append(self.headers.get("X-UIRL-Action-Id"))
            if self.server.drops > 0:
                self.server.drops -= 1
                self.close_connection = True  # no answer: the client sees the close
                return
            time.sleep(self.server.stall_s)
            data = bytes(800 * 1280 * 3)
        else:
            data = json.dumps({"submitted_row_indices": [], "num_incorrect_submissions": 0})
            data = data.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def keep_alive() -> Iterator[KeepAliveServer]:
    server = KeepAliveServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_an_action_whose_answer_was_lost_is_sent_again_with_its_id(
    keep_alive: KeepAliveServer,
) -> None:
    """The session remembers action ids (test_server), so the retry cannot click twice."""
    keep_alive.drops = 2
    client = SessionClient(
        f"http://127.0.0.1:{keep_alive.server_port}", image_format="raw", backoff_s=0.001
    )
    assert client.act(Action(ActionType.LEFT_CLICK, 1, 1)).shape == (800, 1280, 3)
    first, *retries = keep_alive.action_ids
    assert first and retries == [first, first]
    client.act(Action(ActionType.LEFT_CLICK, 1, 1))
    assert keep_alive.action_ids[-1] not in (None, first)  # a new action, a new id
    client.act(Action(ActionType.SCREENSHOT))
    assert keep_alive.action_ids[-1] is None  # a read needs none
    # A read timeout is no lost answer: the session is busy or stuck, and a repeat would
    # only wait behind the same action.
    keep_alive.stall_s = 0.5
    slow = SessionClient(
        f"http://127.0.0.1:{keep_alive.server_port}", read_timeout_s=0.1, backoff_s=0.001
    )
    sent = len(keep_alive.action_ids)
    with pytest.raises(SessionUnavailableError, match="ReadTimeout"):
        slow.act(Action(ActionType.LEFT_CLICK, 1, 1))
    assert len(keep_alive.action_ids) == sent + 1
    # Nor a screenshot's: a read, but its answer was due by its deadline, and each
    # repeat cost a frozen session's step the deadline again (four reads).
    with pytest.raises(SessionUnavailableError, match="ReadTimeout"):
        slow.act(Action(ActionType.SCREENSHOT))
    assert len(keep_alive.action_ids) == sent + 2


def test_the_client_retires_idle_connections_first(keep_alive: KeepAliveServer) -> None:
    client = SessionClient(f"http://127.0.0.1:{keep_alive.server_port}", max_idle_s=0.2)
    client.progress()
    client.progress()
    assert keep_alive.connections == 1  # kept alive between close requests
    time.sleep(0.3)  # idle for longer than max_idle_s
    client.progress()
    assert keep_alive.connections == 2  # a fresh one, never one the server may be closing


def test_a_click_sent_to_a_stopped_server_is_done_once() -> None:
    """The probe's SIGSTOP case: a click queued while the server was stopped for longer
    than its keep-alive met a closing connection (ConnectionResetError) on waking."""
    runtime = LocalRuntime(LocalRuntimeConfig(extra_args=("--keep-alive-s", "0.5")))
    try:
        info = runtime.acquire()
        client = SessionClient(info)
        client.reset(seed=0, options={"rows": [0]})
        x, y = _centre(client.oracle()["inputs"]["first_name"]["box"])
        client.act(Action(ActionType.LEFT_CLICK, x, y))
        pid = runtime.pid(info)
        errors: list[Exception] = []

        def type_a() -> None:
            try:
                client.act(Action(ActionType.TYPE, text="a"))
            except Exception as exc:  # reported below
                errors.append(exc)

        for _ in range(3):
            os.kill(pid, signal.SIGSTOP)
            thread = threading.Thread(target=type_a)
            thread.start()
            time.sleep(1.0)  # the stall: the server wakes after its keep-alive ran out
            os.kill(pid, signal.SIGCONT)
            thread.join(timeout=30)
            assert errors == []
        assert client.oracle()["inputs"]["first_name"]["value"] == "aaa"
    finally:
        runtime.close()


# The pause is longer than uvicorn's default keep-alive (5 s: what the session server
# raised to 75 s) and than this client's idle limit (set to 5 s here; 30 s by default),
# so both ways of surviving a thinking agent are crossed without waiting 30 s.
PAUSE_S = 8.0


def test_a_long_pause_between_steps(session: SessionInfo) -> None:
    """An agent thinking between steps: both the env's client (which retires its idle
    connection) and a plain requests session (an upstream client, keep-alive and no
    retry) go on as if it had not paused."""
    client = SessionClient(session, max_idle_s=PAUSE_S - 3)
    try:
        client.reset(seed=0, options={"rows": [0]})
        x, y = _centre(client.oracle()["inputs"]["first_name"]["box"])
        client.act(Action(ActionType.LEFT_CLICK, x, y))
        upstream = requests.Session()
        act = f"{session.base_url}/act"
        assert upstream.get(act, params={"action_type": "screenshot"}, timeout=30).ok
        time.sleep(PAUSE_S)  # the pause under test
        client.act(Action(ActionType.TYPE, text="a"))
        reply = upstream.get(act, params={"action_type": "type", "text": "b"}, timeout=30)
        assert reply.status_code == 200
        assert client.oracle()["inputs"]["first_name"]["value"] == "ab"
    finally:
        client.close()


def _centre(box: list[int]) -> tuple[int, int]:
    x, y, w, h = box
    return x + w // 2, y + h // 2

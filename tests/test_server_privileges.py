"""Who may do what to a session: web pages and host names, the token, the submission
binding, body limits."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit

import gymnasium as gym
import pytest
import requests
from credentials import session_headers
from static_pages import serving_pages

from uirl_gym.actions import Action, ActionType
from uirl_gym.client import SessionClient
from uirl_gym.guards import MAX_BODY_BYTES
from uirl_gym.protocol import MAX_TYPED_TEXT, TOKEN_ENV_VAR, TOKEN_HEADER, SessionInfo
from uirl_gym.runtimes.local import LocalRuntime, descendant_pids
from uirl_gym.runtimes.servers import check_servers
from uirl_gym.session.browser.chromium import find_browser
from uirl_gym.tasks import OWN_TASKS, TASKS
from uirl_gym.tasks.simple_data_entry.expert import SimpleDataEntryExpert

TIMEOUT_S = 30


def test_privileged_routes_need_the_token(session: SessionInfo) -> None:
    base = session.base_url
    token = session.headers[TOKEN_HEADER]
    # What an agent (or an unmodified ui-verifiers client) uses needs no token.
    assert requests.get(f"{base}/", timeout=TIMEOUT_S).status_code == 200
    assert requests.get(f"{base}/progress", timeout=TIMEOUT_S).status_code == 200
    shot = requests.get(f"{base}/act?action_type=screenshot", timeout=TIMEOUT_S)
    assert shot.status_code == 200 and shot.content[:4] == b"\x89PNG"
    # The answers and the reset do.
    for method, path in (("GET", "/oracle"), ("POST", "/reset")):
        bare = requests.request(method, base + path, json={}, timeout=TIMEOUT_S)
        assert bare.status_code == 401, bare.text
        assert TOKEN_HEADER in bare.json()["detail"]
        assert bare.headers["WWW-Authenticate"] == "Bearer"
        wrong = requests.request(
            method, base + path, json={}, headers={TOKEN_HEADER: "guess"}, timeout=TIMEOUT_S
        )
        assert wrong.status_code == 403, wrong.text
        for headers in ({TOKEN_HEADER: token}, {"Authorization": f"Bearer {token}"}):
            ok = requests.request(method, base + path, json={}, headers=headers, timeout=TIMEOUT_S)
            assert ok.status_code == 200, ok.text
    # The route list is not published.
    for path in ("/docs", "/redoc", "/openapi.json"):
        assert requests.get(base + path, timeout=TIMEOUT_S).status_code == 404


# Every way a page makes the browser send a GET: an image, a no-cors fetch, a frame.
ATTACK_PAGE = """<!doctype html><body><script>
const URLS = %s;
window.settled = [];
const note = (how) => (event) => window.settled.push(how + ":" + event.type);
for (const how of ["img", "img-localhost"]) {
  const img = new Image();
  img.onload = img.onerror = note(how);
  img.src = URLS[how];
}
fetch(URLS.fetch, {mode: "no-cors"}).then(
  () => window.settled.push("fetch:done"), () => window.settled.push("fetch:failed"));
const frame = document.createElement("iframe");
frame.onload = note("iframe");
frame.src = URLS.iframe;
document.body.append(frame);
</script></body>"""


def test_a_web_page_cannot_act_in_a_session(session: SessionInfo) -> None:
    """Issue 42: any page the user opens could type into a session with an image whose
    address is /act (a GET without a token). A page on another port of 127.0.0.1 is the
    same site and its image sends no Origin; the browser's Sec-Fetch-Site gives it away."""
    from playwright.sync_api import sync_playwright

    base = session.base_url
    port = urlsplit(base).port
    client = SessionClient(session)
    try:
        client.reset(seed=0)
        box = client.oracle()["inputs"]["first_name"]["box"]
        # The agent's own click: the field has the focus, so a typed text would show.
        client.act(Action(ActionType.LEFT_CLICK, x=box[0] + box[2] // 2, y=box[1] + box[3] // 2))
        urls = {
            how: f"http://{host}:{port}/act?action_type=type&text={how}"
            for how, host in (
                ("img", "127.0.0.1"),
                ("img-localhost", "localhost"),
                ("fetch", "127.0.0.1"),
                ("iframe", "127.0.0.1"),
            )
        }
        page_html = (ATTACK_PAGE % json.dumps(urls)).encode()
        with serving_pages({}, page_html) as attack_url:
            assert urlsplit(attack_url).port != port  # another origin of the same site
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=find_browser(headless=True))
                try:
                    page = browser.new_page()
                    page.goto(attack_url)
                    page.wait_for_function("window.settled.length === 4", timeout=30_000)
                    settled = page.evaluate("window.settled")
                finally:
                    browser.close()
        inputs = client.oracle()["inputs"]
        assert inputs["first_name"]["value"] == "", (inputs, settled)
        # No screenshot came back to the images: refused.
        assert {"img:error", "img-localhost:error"} <= set(settled), settled
        # The agent itself still types.
        client.act(Action(ActionType.TYPE, text="Ada"))
        assert client.oracle()["inputs"]["first_name"]["value"] == "Ada"
    finally:
        client.close()


def test_foreign_hosts_and_origins_are_refused(session: SessionInfo) -> None:
    """A DNS name rebound to 127.0.0.1 (Host names it) could read screenshots and the
    instruction; a page on another site could act. Programs and the server's own
    pages are served."""
    base = session.base_url
    port = urlsplit(base).port
    routes = ("/", "/health", "/progress", "/act?action_type=screenshot", "/oracle")
    refused = {
        "Host": {"Host": f"rebound.example:{port}"},
        "Origin": {"Origin": "http://evil.example"},
        "Sec-Fetch-Site": {"Sec-Fetch-Site": "cross-site"},
    }
    for route in routes:
        for what, headers in refused.items():
            answer = requests.get(base + route, headers=headers, timeout=TIMEOUT_S)
            assert answer.status_code == 403, (route, headers, answer.text)
            assert what in answer.json()["detail"], answer.text
    detail = requests.get(base + "/", headers=refused["Host"], timeout=TIMEOUT_S).json()
    assert "--allowed-hosts" in detail["detail"]
    own = [
        {},
        {"Host": f"localhost:{port}"},
        {"Host": f"[::1]:{port}", "Sec-Fetch-Site": "same-origin"},
        {"Origin": base, "Sec-Fetch-Site": "same-origin"},
        {"Sec-Fetch-Site": "none"},  # the person typed the address
    ]
    shot = f"{base}/act?action_type=screenshot"
    for headers in own:
        answer = requests.get(shot, headers=headers, timeout=TIMEOUT_S)
        assert answer.status_code == 200, (headers, answer.text)


def test_allowed_hosts_and_origins(tmp_path: Path) -> None:
    """``--allowed-hosts`` (a pod's IP, a host name) and ``--allowed-origins`` (a page
    that shows sessions) let others in; loopback stays allowed. A server listening on
    every address answers only the names it is given (here 127.0.0.2 is not one), and
    the servers runtime's check says so."""
    port_file = tmp_path / "port"
    command = [sys.executable, "-m", "uirl_gym.session", "--port", "0", "--port-file",
               str(port_file), "--host", "0.0.0.0", "--allowed-hosts", "10.1.2.3, session.example",
               "--allowed-origins", "https://viewer.example:3000", "--log-level", "warning"]  # fmt: skip
    server = subprocess.Popen(command, env={**os.environ, TOKEN_ENV_VAR: "t"})
    try:
        shot = f"{_started(server, port_file)}/act?action_type=screenshot"
        viewer = {"Origin": "https://viewer.example:3000", "Sec-Fetch-Site": "cross-site"}
        for headers in (
            {},
            {"Host": "10.1.2.3:8000"},
            {"Host": "SESSION.example"},
            {"Host": "session.example", **viewer},
        ):
            answer = requests.get(shot, headers=headers, timeout=TIMEOUT_S)
            assert answer.status_code == 200, (headers, answer.text)
        for headers in (
            {"Host": "10.1.2.4"},
            {"Origin": "https://viewer.example"},
            {"Sec-Fetch-Site": "same-site"},
        ):
            answer = requests.get(shot, headers=headers, timeout=TIMEOUT_S)
            assert answer.status_code == 403, (headers, answer.text)
        port = port_file.read_text()
        check_servers([f"http://127.0.0.1:{port}"], token="t")
        with pytest.raises(ValueError, match="Host '127.0.0.2:.*--allowed-hosts"):
            check_servers([f"http://127.0.0.2:{port}"], token="t")
    finally:
        server.terminate()
        server.wait(timeout=30)


def _started(server: subprocess.Popen[bytes], port_file: Path, timeout_s: float = 60) -> str:
    """The URL of a session server started by hand, once its first episode is loaded."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert server.poll() is None, "the server exited"
        if port_file.exists():
            base = f"http://127.0.0.1:{port_file.read_text()}"
            try:
                if requests.get(base, timeout=5).status_code == 200:
                    return base
            except requests.ConnectionError:
                pass
        time.sleep(0.1)
    pytest.fail(f"the server did not start within {timeout_s}s")


def test_a_submission_cannot_be_faked_over_http(session: SessionInfo) -> None:
    """One POST used to record a correct submission; now only the page can record."""
    base = session.base_url
    started = requests.post(
        f"{base}/reset",
        json={"seed": 0, "options": {"rows": [3]}},
        headers=session_headers(base),
        timeout=TIMEOUT_S,
    ).json()
    oracle = requests.get(f"{base}/oracle", headers=session_headers(base), timeout=TIMEOUT_S)
    fake = {
        "type": "submit",
        "episode": started["episode"],
        "fields": oracle.json()["target_values"][0],
    }
    for headers in ({}, session_headers(base)):
        forged = requests.post(f"{base}/task/event", json=fake, headers=headers, timeout=TIMEOUT_S)
        assert forged.status_code in (404, 405), forged.text
    progress = requests.get(f"{base}/progress", timeout=TIMEOUT_S).json()
    assert progress["num_submissions"] == 0 and progress["submitted_row_indices"] == []


def test_the_expert_runs_end_to_end_through_gym_make() -> None:
    """The env holds the token (from its runtime): reset, oracle and expert still work."""
    env = gym.make("uirl_gym:uirl/SimpleDataEntry-v0")
    try:
        env.reset(seed=1, options={"rows": [2]})
        expert = SimpleDataEntryExpert()
        for _ in range(40):
            action = expert.next_action(env.unwrapped.oracle())
            _, reward, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        assert terminated and reward > 0, info
        # The agent's view of the same session: no token, no answers.
        base = env.unwrapped.session.base_url
        assert requests.get(f"{base}/oracle", timeout=TIMEOUT_S).status_code == 401
    finally:
        env.close()


@pytest.fixture
def base(session: SessionInfo) -> Iterator[str]:
    yield session.base_url
    # Whatever was sent, the session still answers.
    assert requests.get(f"{session.base_url}/health", timeout=TIMEOUT_S).status_code == 200


def test_a_deeply_nested_body_is_a_400(base: str) -> None:
    for body in ("[" * 100_000, '{"seed":' * 100_000):
        response = requests.post(
            f"{base}/reset", data=body, headers=session_headers(base), timeout=TIMEOUT_S
        )
        assert response.status_code == 400, response.text
        assert "nested too deeply" in response.json()["detail"] or "JSON" in response.text


def test_bodies_over_the_limit_are_a_413(base: str) -> None:
    headers = session_headers(base)
    too_big = b"x" * (MAX_BODY_BYTES + 1)
    declared = requests.post(f"{base}/reset", data=too_big, headers=headers, timeout=TIMEOUT_S)
    assert declared.status_code == 413 and "at most 1048576 bytes" in declared.json()["detail"]
    # Without a Content-Length (chunked), the body is counted as it arrives.
    chunks = (b"x" * 65536 for _ in range(40))
    streamed = requests.post(f"{base}/reset", data=chunks, headers=headers, timeout=TIMEOUT_S)
    assert streamed.status_code == 413, streamed.text
    # Without the token, a big body is refused by size before anything else reads it.
    bare = requests.post(f"{base}/reset", data=too_big, timeout=TIMEOUT_S)
    assert bare.status_code == 413


def send_paced(base: str, request: bytes, piece_bytes: int = 1448) -> tuple[int, str, bytes]:
    """Send ``request`` as a network delivers it, a segment at a time (on loopback, one
    write usually arrives in one read); (status, content type, body)."""
    url = urlsplit(base)
    with socket.create_connection((url.hostname, url.port), timeout=TIMEOUT_S) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for start in range(0, len(request), piece_bytes):
            sock.sendall(request[start : start + piece_bytes])
            time.sleep(0.0005)  # pacing, as a network's, not a wait for anything
        reply = http.client.HTTPResponse(sock)
        reply.begin()
        return reply.status, reply.getheader("Content-Type", ""), reply.read()


def test_long_requests_are_read_and_longer_ones_refused_with_json(base: str) -> None:
    """The longest /act the protocol allows (8192 characters of 12 bytes each) is read
    even when it arrives in pieces (uvicorn's 16 KiB limit refused it then); a longer one,
    and one that is not HTTP, get JSON like every other refusal (a 1 MB URL got a
    plain-text 400, or a reset connection)."""
    port = urlsplit(base).port
    # text is ignored by a screenshot: the whole head is read, nothing is typed.
    longest = "/act?action_type=screenshot&text=" + quote("\U0001f600" * MAX_TYPED_TEXT)
    head = f"GET {longest} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    status, kind, body = send_paced(base, head.encode())
    assert (status, kind) == (200, "image/png"), body[:300]
    for target in ("/act?action_type=screenshot&x=" + "1" * 1_000_000, longest + "a" * 40_000):
        answer = requests.get(base + target, timeout=TIMEOUT_S)
        assert answer.status_code == 414, answer.text[:300]
        assert "the request line and headers are over" in answer.json()["detail"]
    status, kind, body = send_paced(base, b"HELLO\r\n\r\n")
    assert (status, kind) == (400, "application/json"), body
    assert "not an HTTP/1.1 request" in json.loads(body)["detail"]


def test_the_token_stays_out_of_argv_and_the_browser(runtime: LocalRuntime) -> None:
    """The local runtime hands the token over in the server's environment (argv is
    readable by every local user); the server drops it before starting Chromium."""
    info = runtime.acquire()
    try:
        token = info.headers[TOKEN_HEADER].encode()
        server = runtime.pid(info)
        assert token not in Path(f"/proc/{server}/cmdline").read_bytes()
        children = descendant_pids(server)
        assert children, "no Chromium under the server"
        for pid in children:
            try:
                assert token not in Path(f"/proc/{pid}/environ").read_bytes(), pid
            except (FileNotFoundError, ProcessLookupError):
                continue  # a short-lived helper that is gone already
        assert "token" not in repr(info).lower()
    finally:
        runtime.release(info)


# What /progress and X-Progress show without the token, per task: upstream's two keys
# for SimpleDataEntry, and counts that say nothing about which answer is right.
UPSTREAM_KEYS = {"submitted_row_indices", "num_incorrect_submissions"}


def test_progress_detail_needs_the_token(session: SessionInfo) -> None:
    """Without the token, neither /progress nor X-Progress tells which guess was right."""

    base = session.base_url
    token = session_headers(base)
    try:
        # uirl's own tasks and one of each family (a family is one implementation).
        families = {spec.family: name for name, spec in TASKS.items() if spec.family}
        for task in [*OWN_TASKS, *families.values()]:
            started = reset_raw_task(base, task)
            assert started.status_code == 200, started.text
            full = requests.get(f"{base}/progress", headers=token, timeout=TIMEOUT_S).json()
            bare = requests.get(f"{base}/progress", timeout=TIMEOUT_S).json()
            wrong = requests.get(
                f"{base}/progress", headers={TOKEN_HEADER: "guess"}, timeout=TIMEOUT_S
            ).json()
            shot = f"{base}/act?action_type=screenshot"
            header = requests.get(shot, timeout=TIMEOUT_S).headers["X-Progress"]
            header_full = requests.get(shot, headers=token, timeout=TIMEOUT_S).headers["X-Progress"]
            assert bare == wrong == json.loads(header), task
            assert full == json.loads(header_full) and full != bare, task
            assert set(bare) < set(full) and bare["episode"] == full["episode"], task
            for key, value in bare.items():
                if task == "simple_data_entry" and key in UPSTREAM_KEYS:
                    continue
                assert type(value) is int, (task, key, value)  # counts only
            if task == "simple_data_entry":
                assert UPSTREAM_KEYS <= set(bare)
    finally:
        reset_raw_task(base, "simple_data_entry")


def reset_raw_task(base: str, task: str) -> requests.Response:
    return requests.post(
        f"{base}/reset",
        json={"seed": 0, "task": task},
        headers=session_headers(base),
        timeout=TIMEOUT_S,
    )
